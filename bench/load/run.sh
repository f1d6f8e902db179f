#!/usr/bin/env bash
# The load test (issue 6, item 3): pgbench runs reconcile_batch from several
# clients at once, then bench/load/check.sql checks that the target equals an
# independent fold of every committed batch and that each distinct manifest
# has exactly one receipt.  Not part of the test run.
#
#   bash bench/load/run.sh [--clients N] [--transactions T] [--keys K]
#                          [--versions V] [--replay-pct P] [--pool-pct P]
#                          [--use-existing] [--keep]
#
# Defaults: 8 clients x 75 transactions (600 batches), 300 keys, versions
# 1..1000, 10% replays of earlier manifests, 18% (20% of the rest) manifests
# drawn from a pool of 40 pre-staged ones, so that clients load the same
# manifest at once (one commits, the others replay), and about 10% of new
# batches also carrying an object of an earlier batch.  Each transaction stages 1 to 3
# objects of 0 to 29 rows under unique object keys in one shared staging
# table and loads them (bench/load/setup.sql, bench_batch()); rows of a key
# at a version always carry the same payload and operation, so the fold is
# well defined.
#
# Run as root from the repository, with the extension installed.  It starts
# its own throwaway cluster as the postgres OS user in
# bench/out/load-<stamp>/ (port 54349, BENCH_LOAD_PGPORT to change it; socket
# only) and removes it at the end (--keep leaves it running).  With
# --use-existing it drops and re-creates the database reconcile_load on the
# server PGHOST/PGPORT/PGUSER name instead.
# Prints: batches, clients, errors by SQLSTATE, invariant checks passed; the
# exit status is 0 only when every check passed.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PG_BINDIR=$(pg_config --bindir)
CLIENTS=8
TRANSACTIONS=75
KEYS=300
VERSIONS=1000
REPLAY_PCT=10
POOL_PCT=20
POOL_SIZE=40
USE_EXISTING=0
KEEP=0
PORT=${BENCH_LOAD_PGPORT:-54349}
DB=reconcile_load

usage() { sed -n '2,30p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
log() { printf '==> %s\n' "$*" >&2; }
while [ $# -gt 0 ]; do
	case $1 in
	--clients) CLIENTS=$2; shift 2 ;;
	--transactions) TRANSACTIONS=$2; shift 2 ;;
	--keys) KEYS=$2; shift 2 ;;
	--versions) VERSIONS=$2; shift 2 ;;
	--replay-pct) REPLAY_PCT=$2; shift 2 ;;
	--pool-pct) POOL_PCT=$2; shift 2 ;;
	--use-existing) USE_EXISTING=1; shift ;;
	--keep) KEEP=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; exit 2 ;;
	esac
done

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
OUT=$ROOT/bench/out/load-$STAMP
mkdir -p "$OUT"
cp "$HERE"/*.sql "$OUT/"

if [ "$USE_EXISTING" -eq 1 ]; then
	RUN=(env)
	"$PG_BINDIR/dropdb" --if-exists "$DB"
	"$PG_BINDIR/createdb" "$DB"
else
	chown -R postgres:postgres "$OUT"
	RUN=(runuser -u postgres -- env -u PGUSER -u PGDATABASE PGHOST="$OUT" PGPORT="$PORT")
	log "initdb and start a throwaway cluster in $OUT/data, port $PORT"
	"${RUN[@]}" "$PG_BINDIR/initdb" -D "$OUT/data" -U postgres -A trust >"$OUT/initdb.log"
	cat >>"$OUT/data/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$OUT'
port = $PORT
max_connections = $((CLIENTS + 10))
shared_buffers = 128MB
CONF
	"${RUN[@]}" "$PG_BINDIR/pg_ctl" -D "$OUT/data" -l "$OUT/server.log" -w start >/dev/null
	stop() {
		if [ "$KEEP" -eq 0 ]; then
			"${RUN[@]}" "$PG_BINDIR/pg_ctl" -D "$OUT/data" -m fast stop >/dev/null || true
			rm -rf "$OUT/data"
		fi
	}
	trap stop EXIT
	"${RUN[@]}" "$PG_BINDIR/createdb" -U postgres "$DB"
fi
PSQL=("${RUN[@]}" "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -U postgres -d "$DB")

"${PSQL[@]}" -f "$OUT/setup.sql" >/dev/null
"${PSQL[@]}" -c "SELECT fill_pool($POOL_SIZE, $KEYS, $VERSIONS)" >/dev/null
log "pgbench: $CLIENTS clients x $TRANSACTIONS transactions"
set +e
"${RUN[@]}" "$PG_BINDIR/pgbench" -n -U postgres -c "$CLIENTS" -j "$CLIENTS" -t "$TRANSACTIONS" \
	-D keys="$KEYS" -D versions="$VERSIONS" -D replay_pct="$REPLAY_PCT" -D pool_pct="$POOL_PCT" \
	-f "$OUT/batch.sql" "$DB" >"$OUT/pgbench.txt" 2>"$OUT/pgbench.err"
PGBENCH_RC=$?
set -e
grep -E "number of (transactions actually processed|failed)|tps|latency average" "$OUT/pgbench.txt" || true
grep -c "aborted" "$OUT/pgbench.err" | sed 's/^/pgbench client aborts: /' || true
echo "clients: $CLIENTS, pgbench exit status: $PGBENCH_RC"
"${PSQL[@]}" -f "$OUT/check.sql" | tee "$OUT/report.txt"
PASSED=$(grep -E '^ *[0-9]+ of [0-9]+' "$OUT/report.txt" | tail -1 | awk '{print ($1 == $3) ? 1 : 0}')
log "report: $OUT/report.txt"
[ "$PGBENCH_RC" -eq 0 ] && [ "$PASSED" = 1 ]
