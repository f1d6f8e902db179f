# Two throwaway clusters, a source and a target, for the cross-server
# benchmarks (bench/xdiff/run.sh, bench/repair/run.sh, bench/diff/totals.sh).
# Source it after tools/lib.sh, then:
#
#   two_clusters_init OUTDIR PORT   names the layout and traps the clean-up
#   two_clusters_make_install       make install into PG_BINDIR's PostgreSQL
#   two_clusters_install_pgcmp      pg_comparator and its extension pgcmp
#   two_clusters_start              initdb, start both, CREATE DATABASE bench
#   two_clusters_proxy LISTEN [ARGS...]   a counting proxy to the source
#   measure NAME COMMAND...         seconds and bytes through the proxies
#
# Layout: the source's server on PORT, the target's on PORT+1, proxies on
# the ports the caller picks (PORT+2, PORT+3), the socket in OUTDIR/sock,
# the proxies' byte counts in OUTDIR/stats.  Each cluster runs as the
# postgres user with fsync off, 256MB of shared_buffers and no parallel
# workers; they are stopped and removed at exit unless KEEP=1.

# two_clusters_init OUTDIR PORT: set OUT, SRC_PORT, TGT_PORT, SOCK, STATS,
# PIDS and the EXIT trap.
two_clusters_init() {
	OUT=$1
	SRC_PORT=$2
	TGT_PORT=$(($2 + 1))
	SOCK=$OUT/sock
	STATS=$OUT/stats
	PIDS=()
	trap two_clusters_cleanup EXIT
}

two_clusters_cleanup() {
	local p c
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	if [ "${KEEP:-0}" = 0 ]; then
		for c in src tgt; do
			[ -d "$OUT/$c" ] && runuser -u postgres -- "$PG_BINDIR/pg_ctl" -D "$OUT/$c" -m fast stop >/dev/null 2>&1 || true
		done
		rm -rf "$OUT/src" "$OUT/tgt"
	fi
}

two_clusters_make_install() {
	log "make install"
	make -s -C "$ROOT" PG_CONFIG="$PG_BINDIR/pg_config" install >/dev/null
}

# pg_comparator (Debian postgresql-comparator) when it is missing, and its
# checksum functions (extension pgcmp) into the PostgreSQL the clusters run
# when it is not the system's.
two_clusters_install_pgcmp() {
	local pkglib sharedir
	if ! command -v pg_comparator >/dev/null; then
		log "installing postgresql-comparator"
		DEBIAN_FRONTEND=noninteractive apt-get install -y -q postgresql-comparator >/dev/null
	fi
	pkglib=$("$PG_BINDIR/pg_config" --pkglibdir)
	sharedir=$("$PG_BINDIR/pg_config" --sharedir)
	if [ ! -f "$pkglib/pgcmp.so" ]; then
		cp "/usr/lib/postgresql/$PG_MAJOR/lib/pgcmp.so" "$pkglib/"
		cp "/usr/share/postgresql/$PG_MAJOR/extension/"pgcmp* "$sharedir/extension/"
	fi
}

# Both clusters from scratch, each with an empty database bench; sets
# PGHOST, PGUSER, PSQL and the functions src and tgt (psql on bench).
two_clusters_start() {
	local c port
	mkdir -p "$OUT"
	rm -rf "$OUT/src" "$OUT/tgt" "$SOCK" "$STATS"
	mkdir -p "$SOCK"
	: >"$STATS"
	chown postgres:postgres "$OUT" "$SOCK"
	for c in src tgt; do
		port=$SRC_PORT
		[ $c = tgt ] && port=$TGT_PORT
		runuser -u postgres -- "$PG_BINDIR/initdb" -D "$OUT/$c" -U postgres --auth=trust \
			--encoding=UTF8 --locale=C.UTF-8 >/dev/null
		cat >>"$OUT/$c/postgresql.conf" <<EOF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$SOCK'
fsync = off
shared_buffers = 256MB
max_parallel_workers_per_gather = 0
EOF
		runuser -u postgres -- "$PG_BINDIR/pg_ctl" -D "$OUT/$c" -l "$OUT/$c.log" -w start >/dev/null
	done
	export PGHOST=$SOCK PGUSER=postgres
	PSQL=("$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1)
	"${PSQL[@]}" -p "$SRC_PORT" -d postgres -c 'CREATE DATABASE bench'
	"${PSQL[@]}" -p "$TGT_PORT" -d postgres -c 'CREATE DATABASE bench'
}
src() { "${PSQL[@]}" -p "$SRC_PORT" -d bench "$@"; }
tgt() { "${PSQL[@]}" -p "$TGT_PORT" -d bench "$@"; }

# two_clusters_proxy LISTEN [ARGS...]: bench/xdiff/proxy.py on port LISTEN in
# front of the source's server, counting into STATS (ARGS: --mbit, --delay-ms).
# Call it for each proxy, then sleep 1 before the first connection.
two_clusters_proxy() {
	local listen=$1
	shift
	python3 "$ROOT/bench/xdiff/proxy.py" "$listen" "$SRC_PORT" "$STATS" "$@" &
	PIDS+=($!)
}

# measure NAME COMMAND...: run COMMAND, its output in OUT/last.out; set SECS
# (wall clock) and BYTES (both directions through the proxies).
measure() {
	local name=$1 t0 t1 lines0
	shift
	# The line of a connection the statement before closed (bench/repair's
	# check after each method) lands up to a moment later: wait for it, or
	# it counts as this measurement's.
	sleep 1
	lines0=$(wc -l <"$STATS" 2>/dev/null || echo 0)
	t0=$(date +%s.%N)
	"$@" >"$OUT/last.out" 2>&1 || { cat "$OUT/last.out"; die "$name failed"; }
	t1=$(date +%s.%N)
	sleep 1  # the proxies write a connection's line when it closes
	BYTES=$(tail -n +"$((lines0 + 1))" "$STATS" | awk '{s += $1 + $2} END {print s + 0}')
	SECS=$(echo "$t1 - $t0" | bc)
}

# An awk function for the ratio tables, to put in front of a program:
# spread(list, fmt): "median [min, max]" of a space-separated list of
# numbers (one number alone: just it; none: "").
# shellcheck disable=SC2034
AWK_SPREAD='
function spread(list, fmt,    v, n, i, j, x, m) {
	n = split(list, v, " ")
	if (n == 0) return ""
	for (i = 2; i <= n; i++) { x = v[i] + 0; for (j = i - 1; j >= 1 && v[j] + 0 > x; j--) v[j + 1] = v[j]; v[j + 1] = x }
	m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2
	if (n == 1) return sprintf(fmt, m)
	return sprintf(fmt " [" fmt ", " fmt "]", m, v[1], v[n])
}
'
