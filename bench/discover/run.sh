#!/usr/bin/env bash
# Benchmark: reconcile_discover_rules on a generated 1,000,000-row,
# 14-column transactions table (balances with a five-valued fee, a flat
# fee, categories, a key).  Prints the time of three runs and the number of
# proposals per kind, and keeps them in bench/out/discover-<time>.txt.
#
# Usage: bench/discover/run.sh   (uses PGHOST, PGPORT, PGUSER; needs the
# extension installed; creates and drops database reconcile_discover_bench)
# ROWS=100000 bench/discover/run.sh for a quicker run; KEEP=1 keeps the database.
set -euo pipefail

ROWS=${ROWS:-1000000}
DB=${DB:-reconcile_discover_bench}

psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
[ -n "${KEEP:-}" ] || trap 'psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB"' EXIT

OUT_DIR="$(cd "$(dirname "$0")/.." && pwd)/out"
mkdir -p "$OUT_DIR"
OUT="$OUT_DIR/discover-$(date +%Y%m%d-%H%M%S).txt"

psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -v rows="$ROWS" <<'SQL' | tee "$OUT"
CREATE EXTENSION reconcile;
SET max_parallel_workers_per_gather = 0;
CREATE TABLE bench_tx AS
SELECT i AS id,
       (i % 1000)::int AS customer_id,
       CASE WHEN i % 3 = 0 THEN 'DEBIT' ELSE 'CREDIT' END AS direction,
       CASE WHEN i % 7 = 0 THEN 'HIGH' WHEN i % 2 = 0 THEN 'MEDIUM' ELSE 'LOW' END AS risk,
       18 + i % 70 AS age,
       (1000 + (i * 13) % 50000)::numeric(12,2) AS opening,
       (((i * 37) % 100000) / 100.0)::numeric(12,2) AS amount,
       (ARRAY[0.50, 1.00, 1.50, 2.50, 5.00])[1 + (i * 7) % 5]::numeric(12,2) AS fee,
       1.50::numeric(12,2) AS flat_fee,
       ((i * 11) % 400 / 4.0)::numeric(12,2) AS held,
       'TX-' || lpad(i::text, 8, '0') AS code
FROM generate_series(1, :rows) AS i;
ALTER TABLE bench_tx ADD COLUMN closing numeric(12,2), ADD COLUMN net numeric(12,2),
    ADD COLUMN net_flat numeric(12,2);
UPDATE bench_tx SET closing = opening + CASE direction WHEN 'CREDIT' THEN amount ELSE -amount END - fee,
                    net = amount - fee, net_flat = amount - flat_fee;
VACUUM ANALYZE bench_tx;

CREATE FUNCTION bench_ms(sql text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := pg_catalog.clock_timestamp();
BEGIN
  EXECUTE sql;
  RETURN 1000 * extract(epoch FROM pg_catalog.clock_timestamp() - t0);
END $$;

SELECT count(*) AS rows FROM bench_tx;
SELECT n AS run, round(bench_ms('SELECT reconcile_discover_rules(''bench_tx'')')::numeric) AS discover_ms
FROM generate_series(1, 3) AS n;
SELECT value ->> 'kind' AS kind, count(*) AS proposals
FROM jsonb_each(reconcile_discover_rules('bench_tx') -> 'evidence') GROUP BY 1 ORDER BY 1;
SELECT key AS rule, value ->> 'description' AS description
FROM jsonb_each(reconcile_discover_rules('bench_tx') -> 'evidence')
WHERE value ->> 'kind' IN ('linear', 'conditional_linear') ORDER BY key;
SQL
echo "kept in $OUT"
