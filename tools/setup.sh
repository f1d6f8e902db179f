#!/usr/bin/env bash
# Set up everything reconcile needs on a Debian 12 machine, as root:
# install the missing packages, build and install the extension, and start a
# throwaway PostgreSQL 15 cluster (port $RECONCILE_PGPORT, default 54329,
# unix socket only) under .pgcluster/.  Safe to run again: it installs only
# what is missing and restarts a running cluster so a new .so is loaded.
set -euo pipefail
# shellcheck source=tools/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

PACKAGES=(
	"postgresql-$PG_MAJOR"
	"postgresql-server-dev-$PG_MAJOR"
	"postgresql-$PG_MAJOR-pgtap"
	libipc-run-perl
	libtap-parser-sourcehandler-pgtap-perl
	make
	gcc
	sqlsmith
	prometheus-postgres-exporter
	libcurl4-openssl-dev
	libxml2-dev
	zlib1g-dev
)

install_packages() {
	local missing=() p
	for p in "${PACKAGES[@]}"; do
		is_installed "$p" || missing+=("$p")
	done
	if [ ${#missing[@]} -eq 0 ]; then
		log "packages: all present"
		return
	fi
	log "packages: installing ${missing[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -q
	apt-get install -y -q "${missing[@]}"
}

# Debian's prometheus-postgres-exporter comes with a service that would
# listen on :9187 and scrape the system's PostgreSQL; the TAP test runs the
# binary itself, on loopback, against its own node.  Keep the service off.
disable_exporter_service() {
	is_installed prometheus-postgres-exporter || return 0
	if command -v systemctl >/dev/null 2>&1 && [ -d /run/systemd/system ]; then
		systemctl disable --now prometheus-postgres-exporter.service >/dev/null 2>&1 || true
	elif [ -x /etc/init.d/prometheus-postgres-exporter ]; then
		/etc/init.d/prometheus-postgres-exporter stop >/dev/null 2>&1 || true
		update-rc.d prometheus-postgres-exporter disable >/dev/null 2>&1 || true
	fi
}

# Citus, for test/t/050_citus.pl: built once per machine by the shared
# script (idempotent: it returns at once when this PostgreSQL has it).  The
# shared folder is RECONCILE_SHARED_DIR, else shared/ beside the project
# (../shared), else beside the main checkout of a git worktree.  Without it
# the Citus test skips; RECONCILE_SKIP_CITUS=1 skips the build.
find_shared_dir() {
	local common d
	for d in "${RECONCILE_SHARED_DIR:-}" "$RECONCILE_ROOT/../shared"; do
		[ -n "$d" ] && [ -f "$d/deps/citus/build.sh" ] && { (cd "$d" && pwd); return; }
	done
	common=$(git -C "$RECONCILE_ROOT" rev-parse --path-format=absolute --git-common-dir 2>/dev/null) || return 0
	d=$(dirname "$common")/../shared
	[ -f "$d/deps/citus/build.sh" ] && (cd "$d" && pwd)
	return 0
}

install_citus() {
	local shared
	if [ -n "${RECONCILE_SKIP_CITUS:-}" ]; then
		log "citus: skipped (RECONCILE_SKIP_CITUS is set)"
		return
	fi
	shared=$(find_shared_dir)
	if [ -z "$shared" ]; then
		warn "citus: no shared/deps/citus/build.sh found (set RECONCILE_SHARED_DIR);" \
			"the Citus test will skip"
		return
	fi
	log "citus: $shared/deps/citus/build.sh (once per machine)"
	PG_CONFIG="$PG_BINDIR/pg_config" bash "$shared/deps/citus/build.sh"
}

build_and_install() {
	log "building and installing the extension (make && make install)"
	make -C "$RECONCILE_ROOT" PG_CONFIG="$PG_BINDIR/pg_config"
	make -C "$RECONCILE_ROOT" PG_CONFIG="$PG_BINDIR/pg_config" install
}

# Settings we own, rewritten on every run so a changed port takes effect.
write_cluster_conf() {
	as_postgres tee "$PGCLUSTER_DATA/reconcile_cluster.conf" >/dev/null <<EOF
# Written by tools/setup.sh on every run; edit that script, not this file.
port = $RECONCILE_PGPORT
listen_addresses = ''
unix_socket_directories = '$PGCLUSTER_DIR'
fsync = off
EOF
}

# A postmaster of an earlier cluster at this path whose folder was deleted
# (rm -rf of a clone, then a new clone) still runs; when it notices its
# data directory is gone it shuts down and removes the socket files, which
# by then are the new cluster's.  Stop it before starting a new one.
stop_orphaned_postmaster() {
	local pid cmd
	for pid in $(pgrep -u postgres -x postgres || true); do
		cmd=$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null) || continue
		case $cmd in
		*" -D $PGCLUSTER_DATA "*)
			warn "stopping postmaster $pid of a deleted cluster at $PGCLUSTER_DATA"
			kill -INT "$pid" 2>/dev/null || true
			for _ in $(seq 1 60); do
				kill -0 "$pid" 2>/dev/null || break
				sleep 0.5
			done
			;;
		esac
	done
}

init_cluster() {
	if [ "$RECONCILE_STATE" != "$RECONCILE_ROOT" ]; then
		warn "the postgres user cannot use $RECONCILE_ROOT/.pgcluster" \
			"(folder not reachable, or socket path too long);" \
			"using $PGCLUSTER_DIR instead"
	fi
	mkdir -p "$PGCLUSTER_DIR"
	chown postgres:postgres "$PGCLUSTER_DIR"
	chmod 0700 "$PGCLUSTER_DIR"
	if [ -f "$PGCLUSTER_DATA/PG_VERSION" ]; then
		log "cluster: reusing $PGCLUSTER_DATA"
	else
		stop_orphaned_postmaster
		log "cluster: initdb in $PGCLUSTER_DATA"
		rm -rf "$PGCLUSTER_DATA"
		as_postgres "$PG_BINDIR/initdb" -D "$PGCLUSTER_DATA" -U postgres \
			--auth=trust --encoding=UTF8 --locale=C.UTF-8 >/dev/null
		echo "include_if_exists = 'reconcile_cluster.conf'" |
			as_postgres tee -a "$PGCLUSTER_DATA/postgresql.conf" >/dev/null
	fi
	write_cluster_conf
}

start_cluster() {
	local action=start
	if as_postgres "$PG_BINDIR/pg_ctl" -D "$PGCLUSTER_DATA" status >/dev/null 2>&1; then
		action=restart
	fi
	log "cluster: $action (log in $PGCLUSTER_LOG)"
	if ! as_postgres "$PG_BINDIR/pg_ctl" -D "$PGCLUSTER_DATA" -l "$PGCLUSTER_LOG" \
		-w -t 60 "$action" >/dev/null; then
		tail -n 20 "$PGCLUSTER_LOG" >&2 || true
		die "cluster did not $action; is port $RECONCILE_PGPORT taken? (set RECONCILE_PGPORT)"
	fi
}

main() {
	require_root
	install_packages
	disable_exporter_service
	install_citus
	build_and_install
	cd /  # the postgres user may not be able to enter the project folder
	set_cluster_paths
	init_cluster
	start_cluster
	export_pg_env
	pg_psql -d postgres -c 'SELECT 1' >/dev/null || die "cannot connect to the cluster"
	log "ready. To connect:"
	printf '  export PGHOST=%q PGPORT=%q PGUSER=%q\n' "$PGHOST" "$PGPORT" "$PGUSER"
	printf '  %s/psql\n' "$PG_BINDIR"
}

main "$@"
