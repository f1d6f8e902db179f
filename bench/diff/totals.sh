#!/usr/bin/env bash
# Control totals across servers against a row diff: a ledger of N rows on
# one server (the source), its copy with a few differences on another (the
# target), reached through postgres_fdw over loopback TCP, compared by
#   totals    reconcile_diff_totals per day: count(*), sum(amount), max(amount)
#   rowdiff   reconcile_diff by id with checksums of key ranges ("remote": "auto")
#   then_rows reconcile_diff_totals per day, then the row diff of the days that differ
# in one run.  A small proxy (bench/xdiff/proxy.py) in front of the source's
# server counts the bytes that cross it in both directions.
#
#   bash bench/diff/totals.sh [--rows N] [--diffs D] [--port P] [--no-install] [--keep]
#
# --methods "totals totals_cur rowdiff then_rows" picks some.
# Defaults: 1,000,000 rows, 10 differences (a quarter each of changed
# amounts, rows missing from the target, rows only in the target, and rows
# moved to another day), ports 55381 and 55382, proxy on 55383.  The
# figures in bench/RESULTS.md were taken with --rows 10000000.  Run as root
# from the repository on a machine set up by tools/setup.sh
# (RECONCILE_PG_BINDIR names the PostgreSQL 15 to use); it starts two
# throwaway clusters as the postgres user in bench/out/totals/ and removes
# them at the end (--keep leaves them).  Not part of the test run.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tools/lib.sh
source "$ROOT/tools/lib.sh"

ROWS=1000000
DIFFS=10
PORT=${BENCH_PGPORT:-55381}
INSTALL=1
KEEP=0
METHODS="totals totals_cur rowdiff then_rows"
while [ $# -gt 0 ]; do
	case $1 in
	--rows) ROWS=$2; shift 2 ;;
	--diffs) DIFFS=$2; shift 2 ;;
	--port) PORT=$2; shift 2 ;;
	--no-install) INSTALL=0; shift ;;
	--keep) KEEP=1; shift ;;
	--methods) METHODS=$2; shift 2 ;;
	*) die "unknown argument $1" ;;
	esac
done
require_root

OUT=$ROOT/bench/out/totals
SRC_PORT=$PORT
TGT_PORT=$((PORT + 1))
PROXY_PORT=$((PORT + 2))
SOCK=$OUT/sock
STATS=$OUT/stats
PIDS=()

cleanup() {
	local p
	for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
	if [ "$KEEP" = 0 ]; then
		for c in src tgt; do
			[ -d "$OUT/$c" ] && runuser -u postgres -- "$PG_BINDIR/pg_ctl" -D "$OUT/$c" -m fast stop >/dev/null 2>&1 || true
		done
		rm -rf "$OUT/src" "$OUT/tgt"
	fi
}
trap cleanup EXIT

if [ "$INSTALL" = 1 ]; then
	log "make install"
	make -s -C "$ROOT" PG_CONFIG="$PG_BINDIR/pg_config" install >/dev/null
fi
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
	cat >>"$OUT/$c/postgresql.conf" <<CONF
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$SOCK'
fsync = off
shared_buffers = 256MB
max_parallel_workers_per_gather = 0
CONF
	runuser -u postgres -- "$PG_BINDIR/pg_ctl" -D "$OUT/$c" -l "$OUT/$c.log" -w start >/dev/null
done
export PGHOST=$SOCK PGUSER=postgres
PSQL=("$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1)
src() { "${PSQL[@]}" -p "$SRC_PORT" -d bench "$@"; }
tgt() { "${PSQL[@]}" -p "$TGT_PORT" -d bench "$@"; }
"${PSQL[@]}" -p "$SRC_PORT" -d postgres -c 'CREATE DATABASE bench'
"${PSQL[@]}" -p "$TGT_PORT" -d postgres -c 'CREATE DATABASE bench'
python3 "$ROOT/bench/xdiff/proxy.py" "$PROXY_PORT" "$SRC_PORT" "$STATS" &
PIDS+=($!)
sleep 1

# N rows over 365 days, in three currencies.
MAKE_ROWS="
CREATE TABLE ledger (id bigint PRIMARY KEY, day date NOT NULL, currency text NOT NULL,
    amount numeric(12,2) NOT NULL, memo text);
INSERT INTO ledger SELECT g, date '2026-01-01' + (g % 365)::int, (ARRAY['EUR','USD','GBP'])[1 + (g % 3)::int],
    (g % 100000) / 100.0, 'payment ' || g
FROM generate_series(1, $ROWS) g;"
log "building $ROWS rows on each server"
start=$(date +%s)
src -c "$MAKE_ROWS" -c 'VACUUM ANALYZE ledger'
tgt -c "$MAKE_ROWS" -c "
WITH picks AS (SELECT i, (i * ($ROWS / greatest($DIFFS, 1)))::bigint AS id FROM generate_series(1, $DIFFS) i)
, u1 AS (UPDATE ledger t SET amount = amount + 1 FROM picks p WHERE p.id = t.id AND p.i % 4 = 0 RETURNING 1)
, u2 AS (UPDATE ledger t SET day = day + 1 FROM picks p WHERE p.id = t.id AND p.i % 4 = 1 RETURNING 1)
, d1 AS (DELETE FROM ledger t USING picks p WHERE p.id = t.id AND p.i % 4 = 2 RETURNING 1)
INSERT INTO ledger SELECT $ROWS + i, date '2026-06-01', 'EUR', 1, 'extra' FROM picks WHERE i % 4 = 3" \
	-c 'VACUUM ANALYZE ledger' -c 'CREATE EXTENSION reconcile' -c 'CREATE EXTENSION postgres_fdw' \
	-c "CREATE SERVER src FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '127.0.0.1', port '$PROXY_PORT', dbname 'bench')" \
	-c 'CREATE USER MAPPING FOR postgres SERVER src' \
	-c "CREATE FOREIGN TABLE f_ledger (id bigint, day date, currency text, amount numeric(12,2), memo text)
	        SERVER src OPTIONS (table_name 'ledger')"
log "setup took $(($(date +%s) - start)) s"
SRC_BYTES=$(src -Atc "SELECT pg_relation_size('ledger')")

measure() {
	local name=$1 t0 t1 lines0
	shift
	lines0=$(wc -l <"$STATS" 2>/dev/null || echo 0)
	t0=$(date +%s.%N)
	tgt -Atc "$1" >"$OUT/$name.out" 2>&1 || { cat "$OUT/$name.out"; die "$name failed"; }
	t1=$(date +%s.%N)
	sleep 1  # the proxy writes a connection's line when it closes
	BYTES=$(tail -n +"$((lines0 + 1))" "$STATS" | awk '{s += $1 + $2} END {print s + 0}')
	SECS=$(echo "$t1 - $t0" | bc)
	FOUND=$(cat "$OUT/$name.out")
}

printf '\ncontrol totals across servers, %s rows per side, %s differences, %s (%s)\n' "$ROWS" "$DIFFS" \
	"$(date -u +%FT%TZ)" "$(git -C "$ROOT" rev-parse --short HEAD)"
printf 'source table: %s MB on disk; loopback TCP through a counting proxy\n\n' \
	"$(echo "scale=1; $SRC_BYTES / 1000000" | bc)"
printf '| method | result rows | seconds | kB across |\n|---|---|---|---|\n'
if [[ " $METHODS " == *" totals "* ]]; then
measure totals "SELECT count(*) FROM reconcile_diff_totals('f_ledger', 'ledger', '{day}',
    '{\"amount\": [\"sum\", \"max\"]}')"
printf '| totals per day (count, sum, max) | %s | %.1f | %.1f |\n' "$FOUND" "$SECS" "$(echo "$BYTES / 1000" | bc -l)"
fi
if [[ " $METHODS " == *" totals_cur "* ]]; then
measure totals_cur "SELECT count(*) FROM reconcile_diff_totals('f_ledger', 'ledger', '{day,currency}',
    '{\"amount\": [\"sum\"]}')"
printf '| totals per day and currency (count, sum) | %s | %.1f | %.1f |\n' "$FOUND" "$SECS" "$(echo "$BYTES / 1000" | bc -l)"
fi
if [[ " $METHODS " == *" rowdiff "* ]]; then
measure rowdiff "SELECT count(*) FROM reconcile_diff('f_ledger', 'ledger', '{id}', '{\"compare\": [\"day\", \"currency\", \"amount\"]}')"
printf '| row diff, checksums (reconcile_diff) | %s | %.1f | %.1f |\n' "$FOUND" "$SECS" "$(echo "$BYTES / 1000" | bc -l)"
fi
if [[ " $METHODS " == *" then_rows "* ]]; then
measure then_rows "SELECT count(*) FROM reconcile_diff_totals('f_ledger', 'ledger', '{day}',
    '{\"amount\": [\"sum\"]}', '{\"then_rows\": true, \"key_columns\": [\"id\"], \"row_options\": {\"compare\": [\"day\", \"currency\", \"amount\"]}}')"
printf '| totals per day, then_rows | %s | %.1f | %.1f |\n' "$FOUND" "$SECS" "$(echo "$BYTES / 1000" | bc -l)"
fi
