#!/usr/bin/env bash
# Start or stop the local S3 API (Python's moto_server) that
# test/t/070_objects.pl reads, for test runs where the TAP user (postgres)
# cannot run moto itself (it lives in root's pyenv).  Two servers on
# loopback: one that checks signatures (INITIAL_NO_AUTH_ACTION_COUNT=3: the
# test's first three requests create its IAM user, key and policy) and one
# that does not (moto's signature check refuses keys with '%', '+' or
# non-ASCII characters, which boto3 fails on too), and a third over TLS
# with a self-signed certificate for 127.0.0.1 (DIR/tls.crt, readable by
# anyone: the test names it as the server's ca_file).
#   tools/moto.sh start DIR   prints the URLs and the CA file as shell assignments
#   tools/moto.sh stop DIR
set -euo pipefail

dir=${2:?usage: tools/moto.sh start|stop DIR}
moto=$(command -v moto_server || true)
[ -n "$moto" ] || { [ -x /root/.pyenv/shims/moto_server ] && moto=/root/.pyenv/shims/moto_server; }

port_free() { ! (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

free_port() {  # free_port FIRST: the first free port from FIRST on
	local p=$1
	while ! port_free "$p"; do p=$((p + 1)); done
	echo "$p"
}

wait_up() {
	local i
	for i in $(seq 1 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	echo "moto_server on port $1 did not start (see $dir)" >&2
	return 1
}

case $1 in
start)
	[ -n "$moto" ] || { echo "moto_server not found" >&2; exit 1; }
	mkdir -p "$dir"
	base=$((${RECONCILE_PGPORT:-54329} + 1000))
	auth=$(free_port "$base")
	open=$(free_port $((auth + 1)))
	tls=$(free_port $((open + 1)))
	openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 \
		-addext subjectAltName=IP:127.0.0.1 -keyout "$dir/tls.key" -out "$dir/tls.crt" 2>/dev/null
	chmod 644 "$dir/tls.crt"
	chmod 755 "$dir"
	INITIAL_NO_AUTH_ACTION_COUNT=3 setsid "$moto" -H 127.0.0.1 -p "$auth" >"$dir/moto_auth.log" 2>&1 &
	echo $! >"$dir/moto_auth.pid"
	setsid "$moto" -H 127.0.0.1 -p "$open" >"$dir/moto_open.log" 2>&1 &
	echo $! >"$dir/moto_open.pid"
	setsid "$moto" -H 127.0.0.1 -p "$tls" -s -c "$dir/tls.crt" -k "$dir/tls.key" >"$dir/moto_tls.log" 2>&1 &
	echo $! >"$dir/moto_tls.pid"
	wait_up "$auth"
	wait_up "$open"
	wait_up "$tls"
	echo "RECONCILE_MOTO_AUTH_URL=http://127.0.0.1:$auth"
	echo "RECONCILE_MOTO_OPEN_URL=http://127.0.0.1:$open"
	echo "RECONCILE_MOTO_TLS_URL=https://127.0.0.1:$tls"
	echo "RECONCILE_MOTO_TLS_CA=$dir/tls.crt"
	;;
stop)
	for f in "$dir"/moto_auth.pid "$dir"/moto_open.pid "$dir"/moto_tls.pid; do
		[ -f "$f" ] || continue
		kill -- "-$(cat "$f")" 2>/dev/null || kill "$(cat "$f")" 2>/dev/null || true
		rm -f "$f"
	done
	;;
*)
	echo "usage: tools/moto.sh start|stop DIR" >&2
	exit 2
	;;
esac
