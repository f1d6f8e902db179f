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

# shellcheck source=bench/two_clusters.sh
source "$ROOT/bench/two_clusters.sh"
two_clusters_init "$ROOT/bench/out/totals" "$PORT"
PROXY_PORT=$((PORT + 2))
[ "$INSTALL" = 1 ] && two_clusters_make_install
two_clusters_start
two_clusters_proxy "$PROXY_PORT"
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

# count NAME SQL: measure SQL on the target; FOUND is its one value.
count() {
	measure "$1" tgt -Atc "$2"
	FOUND=$(cat "$OUT/last.out")
}

printf '\ncontrol totals across servers, %s rows per side, %s differences, %s (%s)\n' "$ROWS" "$DIFFS" \
	"$(date -u +%FT%TZ)" "$(git -C "$ROOT" rev-parse --short HEAD)"
printf 'source table: %s MB on disk; loopback TCP through a counting proxy\n\n' \
	"$(echo "scale=1; $SRC_BYTES / 1000000" | bc)"
printf '| method | result rows | seconds | kB across |\n|---|---|---|---|\n'
if [[ " $METHODS " == *" totals "* ]]; then
count totals "SELECT count(*) FROM reconcile_diff_totals('f_ledger', 'ledger', '{day}',
    '{\"amount\": [\"sum\", \"max\"]}')"
printf '| totals per day (count, sum, max) | %s | %.1f | %.1f |\n' "$FOUND" "$SECS" "$(echo "$BYTES / 1000" | bc -l)"
fi
if [[ " $METHODS " == *" totals_cur "* ]]; then
count totals_cur "SELECT count(*) FROM reconcile_diff_totals('f_ledger', 'ledger', '{day,currency}',
    '{\"amount\": [\"sum\"]}')"
printf '| totals per day and currency (count, sum) | %s | %.1f | %.1f |\n' "$FOUND" "$SECS" "$(echo "$BYTES / 1000" | bc -l)"
fi
if [[ " $METHODS " == *" rowdiff "* ]]; then
count rowdiff "SELECT count(*) FROM reconcile_diff('f_ledger', 'ledger', '{id}', '{\"compare\": [\"day\", \"currency\", \"amount\"]}')"
printf '| row diff, checksums (reconcile_diff) | %s | %.1f | %.1f |\n' "$FOUND" "$SECS" "$(echo "$BYTES / 1000" | bc -l)"
fi
if [[ " $METHODS " == *" then_rows "* ]]; then
count then_rows "SELECT count(*) FROM reconcile_diff_totals('f_ledger', 'ledger', '{day}',
    '{\"amount\": [\"sum\"]}', '{\"then_rows\": true, \"key_columns\": [\"id\"], \"row_options\": {\"compare\": [\"day\", \"currency\", \"amount\"]}}')"
printf '| totals per day, then_rows | %s | %.1f | %.1f |\n' "$FOUND" "$SECS" "$(echo "$BYTES / 1000" | bc -l)"
fi
