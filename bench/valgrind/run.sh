#!/usr/bin/env bash
# The pg_regress suite with the backend under valgrind (issue 6, item 6).
#
#   bash bench/valgrind/run.sh [TEST ...]      # default: every sql/*.sql
#
# Run as root from the repository, with the extension installed (make install).
# Starts a throwaway cluster as the postgres OS user in bench/out/valgrind-<stamp>/
# (port 54369, VALGRIND_PGPORT to change it; socket only), with the postmaster
# and every backend under valgrind memcheck, runs pg_regress there (its results
# go to the same folder, never to the repository's results/), stops the
# cluster, and reports every valgrind error that has a frame in reconcile.so.
#
# Suppressions: VALGRIND_SUPP=/path/to/postgresql/src/tools/valgrind.supp
# (PostgreSQL's own file; not shipped here).  Debian's postgres is not built
# with USE_VALGRIND, so palloc chunks inside a memory context are not tracked
# one by one: reads past a palloc'd chunk that stay inside its block go
# unseen; uninitialised values and reads/writes outside malloc'd blocks are
# seen.  Errors without a reconcile.so frame are counted, not reported.
#
# Exit status: 0 when no error has a reconcile.so frame, 1 otherwise.
# It is slow: about 20-50 times the normal run.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PG_BINDIR=$(pg_config --bindir)
PGXS_DIR=$(dirname "$(pg_config --pgxs)")
PG_REGRESS=$PGXS_DIR/../test/regress/pg_regress
PORT=${VALGRIND_PGPORT:-54369}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
DIR=$ROOT/bench/out/valgrind-$STAMP
log() { printf '==> %s\n' "$*" >&2; }

if [ $# -gt 0 ]; then
	TESTS=("$@")
else
	TESTS=()
	for f in "$ROOT"/sql/*.sql; do TESTS+=("$(basename "$f" .sql)"); done
fi

SUPP=()
if [ -n "${VALGRIND_SUPP:-}" ]; then
	SUPP=(--suppressions="$VALGRIND_SUPP")
fi

mkdir -p "$DIR/vglog" "$DIR/regress"
cp -R "$ROOT/sql" "$ROOT/expected" "$DIR/regress/"
chown -R postgres:postgres "$DIR"
as_pg() { runuser -u postgres -- env -u PGHOST -u PGPORT -u PGUSER -u PGDATABASE "$@"; }

log "initdb in $DIR/data (not under valgrind)"
as_pg "$PG_BINDIR/initdb" -D "$DIR/data" -U postgres --no-sync -A trust >"$DIR/initdb.log"
cat >>"$DIR/data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$DIR'
port = $PORT
max_connections = 20
shared_buffers = 32MB
autovacuum = off
fsync = off
log_min_messages = warning
CONF

log "starting postgres under valgrind on port $PORT"
as_pg valgrind --quiet --trace-children=yes --track-origins=yes --read-var-info=yes \
	--leak-check=no --num-callers=30 "${SUPP[@]}" \
	--error-markers=VALGRINDERROR-BEGIN,VALGRINDERROR-END \
	--log-file="$DIR/vglog/%p.log" \
	"$PG_BINDIR/postgres" -D "$DIR/data" >"$DIR/server.log" 2>&1 &
PM=$!
stop() {
	as_pg "$PG_BINDIR/pg_ctl" -D "$DIR/data" -m fast -t 600 stop >/dev/null 2>&1 || kill "$PM" 2>/dev/null || true
	wait "$PM" 2>/dev/null || true
}
trap stop EXIT
for _ in $(seq 1 600); do
	as_pg "$PG_BINDIR/pg_isready" -q -h "$DIR" -p "$PORT" && break
	sleep 1
done

log "pg_regress: ${TESTS[*]}"
set +e
(cd "$DIR/regress" && as_pg "$PG_REGRESS" --inputdir=. --outputdir=. \
	--bindir="$PG_BINDIR" --host="$DIR" --port="$PORT" --user=postgres \
	--dbname=valgrind_regression "${TESTS[@]}") | tee "$DIR/regress.txt"
REGRESS_RC=${PIPESTATUS[0]}
set -e
stop
trap - EXIT

# One valgrind error per block between the markers; keep those with a
# frame in reconcile.so.
log "valgrind logs in $DIR/vglog"
awk '
	/VALGRINDERROR-BEGIN/ { inblk = 1; blk = ""; next }
	/VALGRINDERROR-END/ {
		inblk = 0; total++
		if (blk ~ /reconcile\.so/) { ours++; print "----- " FILENAME; printf "%s", blk }
		next
	}
	inblk { blk = blk $0 "\n" }
	END { printf "valgrind errors: %d in all, %d with a reconcile.so frame\n", total, ours > "/dev/stderr" }
' "$DIR"/vglog/*.log >"$DIR/reconcile-errors.txt" 2>"$DIR/summary.txt" || true
cat "$DIR/summary.txt"
KINDS=$(grep -cE 'Invalid read|Invalid write|uninitialised|Conditional jump|Invalid free' "$DIR/reconcile-errors.txt" || true)
echo "errors with a reconcile.so frame (Invalid read/write, uninitialised): $KINDS; details: $DIR/reconcile-errors.txt"
echo "pg_regress exit status: $REGRESS_RC"
[ "$KINDS" -eq 0 ]
