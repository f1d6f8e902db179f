#!/usr/bin/env bash
# Benchmark: 100 row rules over a generated 1,000,000-row table, three ways:
#   reconcile_check (one scan, in C), one count query per rule (how rule
#   runners usually do it), and one hand-written count(*) FILTER query.
# Prints the times of one run and the ratios, and keeps them in
# bench/out/rules-<time>.txt (git-ignored).
#
# Usage: bench/rules/run.sh   (uses PGHOST, PGPORT, PGUSER; needs the
# extension installed; creates and drops database reconcile_rules_bench)
# ROWS=100000 bench/rules/run.sh for a quicker run; KEEP=1 keeps the database.
set -euo pipefail

ROWS=${ROWS:-1000000}
DB=${DB:-reconcile_rules_bench}

psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
[ -n "${KEEP:-}" ] || trap 'psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB"' EXIT

OUT_DIR="$(cd "$(dirname "$0")/.." && pwd)/out"
mkdir -p "$OUT_DIR"
OUT="$OUT_DIR/rules-$(date +%Y%m%d-%H%M%S).txt"

psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -v rows="$ROWS" -v setup="$(cd "$(dirname "$0")" && pwd)/setup.sql" <<'SQL' | tee "$OUT"
CREATE EXTENSION reconcile;
SET max_parallel_workers_per_gather = 0;   -- compare single scans
\i :setup

CREATE FUNCTION bench_ms(sql text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := pg_catalog.clock_timestamp();
BEGIN
  EXECUTE sql;
  RETURN 1000 * extract(epoch FROM pg_catalog.clock_timestamp() - t0);
END $$;

CREATE FUNCTION bench_per_rule_ms() RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := pg_catalog.clock_timestamp(); r record; n bigint;
BEGIN
  FOR r IN SELECT * FROM bench_rules ORDER BY name LOOP
    EXECUTE pg_catalog.format('SELECT count(*) FROM bench_tx WHERE (%s) IS NOT TRUE', r.expr) INTO n;
  END LOOP;
  RETURN 1000 * extract(epoch FROM pg_catalog.clock_timestamp() - t0);
END $$;

SELECT count(*) FROM bench_tx \gset
\echo rows :count, rules 100

-- the rules document and the hand-written single scan
SELECT pg_catalog.jsonb_build_object('fail', pg_catalog.jsonb_object_agg(name, expr))::text AS doc,
       'SELECT ' || pg_catalog.string_agg(pg_catalog.format('count(*) FILTER (WHERE (%s) IS NOT TRUE)', expr), ', ' ORDER BY name)
         || ' FROM bench_tx' AS single
FROM bench_rules \gset

-- warm the cache once
SELECT count(*) FROM bench_tx \g /dev/null

SELECT pg_catalog.round(bench_ms(pg_catalog.format('SELECT * FROM reconcile_check(%L, %L)', 'bench_tx', :'doc'))::numeric, 0) AS check_ms \gset
SELECT pg_catalog.round(bench_per_rule_ms()::numeric, 0) AS per_rule_ms \gset
SELECT pg_catalog.round(bench_ms(:'single')::numeric, 0) AS single_ms \gset

SELECT count(*) FILTER (WHERE status = 'FAIL') AS failing, count(*) FILTER (WHERE status = 'ERROR') AS errored
FROM reconcile_check('bench_tx', :'doc'::jsonb) \gset
\echo rules failing :failing, errored :errored
\echo reconcile_check             :check_ms ms
\echo one count query per rule    :per_rule_ms ms
\echo hand-written FILTER query   :single_ms ms
SELECT pg_catalog.round(:check_ms::numeric / :per_rule_ms, 3) AS r1,
       pg_catalog.round(:check_ms::numeric / :single_ms, 3) AS r2 \gset
\echo reconcile_check / per-rule queries = :r1 (aim <= 0.1)
\echo reconcile_check / hand-written scan = :r2 (aim <= 1.2)
SQL
echo "report: $OUT"
