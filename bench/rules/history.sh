#!/usr/bin/env bash
# Benchmark: what keeping the check history costs, for 100 row rules over
# a generated 1,000,000-row table (the table and rules of bench/rules/run.sh):
#   checks:  reconcile_check(table, rules), which records nothing, against
#            reconcile_check_run(job) with the same rules and options, which
#            records the run and one row per rule (samples included);
#   batches: reconcile_batch of every row into a target with the 100 rules
#            attached as warn rules, reconcile.check_history off against on.
# Each pair runs RUNS times, interleaved; the medians and the ratio are
# printed and kept in bench/out/rules-history-<time>.txt (git-ignored).
#
# Usage: bench/rules/history.sh   (uses PGHOST, PGPORT, PGUSER of a
# superuser; needs the extension installed; creates and drops database
# reconcile_history_bench).  ROWS=100000 for a quicker run, RUNS=3 by
# default, BATCHES=0 to leave the batches out, KEEP=1 keeps the database.
set -euo pipefail

ROWS=${ROWS:-1000000}
RUNS=${RUNS:-3}
BATCHES=${BATCHES:-1}
DB=${DB:-reconcile_history_bench}

psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
[ -n "${KEEP:-}" ] || trap 'psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB"' EXIT

OUT_DIR="$(cd "$(dirname "$0")/.." && pwd)/out"
mkdir -p "$OUT_DIR"
OUT="$OUT_DIR/rules-history-$(date +%Y%m%d-%H%M%S).txt"

psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -v rows="$ROWS" -v setup="$(cd "$(dirname "$0")" && pwd)/setup.sql" -v runs="$RUNS" -v batches="$BATCHES" <<'SQL' | tee "$OUT"
CREATE EXTENSION reconcile;
SET max_parallel_workers_per_gather = 0;   -- compare single scans
\i :setup
SELECT pg_catalog.jsonb_build_object('fail', pg_catalog.jsonb_object_agg(name, expr))::text AS doc,
       pg_catalog.jsonb_build_object('warn', pg_catalog.jsonb_object_agg(name, expr))::text AS warn_doc
FROM bench_rules \gset
INSERT INTO reconcile.check_jobs VALUES ('bench', 'public.bench_tx', :'doc', NULL);

-- A target with the rules attached (as warn rules: counted, never blocking),
-- and a stage holding every row.
CREATE TABLE bench_target (LIKE bench_tx, version bigint NOT NULL, is_deleted boolean NOT NULL DEFAULT false,
                           payload_hash bytea, PRIMARY KEY (id));
CREATE TABLE bench_stage AS
SELECT 'o1'::text AS object_key, id AS source_row, 'UPSERT'::text AS operation, 1::bigint AS version, *
FROM bench_tx;
SELECT reconcile_register('bench_target', '{id}', 'version', 'is_deleted', 'payload_hash') \g /dev/null
SELECT reconcile_set_rules('bench_target', :'warn_doc') \g /dev/null

CREATE FUNCTION bench_ms(sql text) RETURNS float8 LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := pg_catalog.clock_timestamp();
BEGIN
  EXECUTE sql;
  RETURN 1000 * extract(epoch FROM pg_catalog.clock_timestamp() - t0);
END $$;
CREATE TABLE timings (what text, run int, ms float8);

-- warm the cache once
SELECT count(*) FROM bench_tx \g /dev/null
SELECT count(*) FROM bench_tx \gset
\echo rows :count, rules 100, runs :runs each

-- Checks, interleaved: without recording, then with.
SELECT pg_catalog.format('INSERT INTO timings SELECT ''check'', %s, bench_ms(%L); '
                         'INSERT INTO timings SELECT ''check_run'', %s, bench_ms(%L);',
                         r, pg_catalog.format('SELECT * FROM reconcile_check(%L, %L)', 'bench_tx', :'doc'),
                         r, 'SELECT * FROM reconcile_check_run(''bench'')')
FROM generate_series(1, :runs) AS r \gexec

-- Batches, interleaved: history off, then on; a new manifest each time, into an emptied target.
SELECT pg_catalog.format('TRUNCATE bench_target; SET reconcile.check_history = off; '
                         'INSERT INTO timings SELECT ''batch_off'', %s, bench_ms(%L); '
                         'TRUNCATE bench_target; SET reconcile.check_history = on; '
                         'INSERT INTO timings SELECT ''batch_on'', %s, bench_ms(%L);',
                         r, pg_catalog.format('SELECT * FROM reconcile_batch(''bench_target'', ''bench_stage'', %L)',
                                              pg_catalog.format('[{"object_key":"o1","version_id":"off%s","content_hash":"h","rows":%s}]', r, :count)),
                         r, pg_catalog.format('SELECT * FROM reconcile_batch(''bench_target'', ''bench_stage'', %L)',
                                              pg_catalog.format('[{"object_key":"o1","version_id":"on%s","content_hash":"h","rows":%s}]', r, :count)))
FROM generate_series(1, :runs) AS r WHERE :batches::int <> 0 \gexec

-- The recording alone, steadier than a difference of two long scans on a
-- busy machine: the same 100 rules and job over the table's first 1,000
-- rows (same samples: 10 whole rows per failing rule), SMALL_RUNS times
-- each, interleaved; check_run minus check is what one recorded run costs.
CREATE TABLE bench_small AS SELECT * FROM bench_tx WHERE id <= 1000;
INSERT INTO reconcile.check_jobs VALUES ('bench_small', 'public.bench_small', :'doc', NULL);
SELECT pg_catalog.format('INSERT INTO timings SELECT ''small_check'', %s, bench_ms(%L); '
                         'INSERT INTO timings SELECT ''small_check_run'', %s, bench_ms(%L);',
                         r, pg_catalog.format('SELECT * FROM reconcile_check(%L, %L)', 'bench_small', :'doc'),
                         r, 'SELECT * FROM reconcile_check_run(''bench_small'')')
FROM generate_series(1, 20) AS r \gexec

SELECT count(*) AS recorded_runs, (SELECT count(*) FROM reconcile.check_results) AS recorded_results
FROM reconcile.check_runs \gset
\echo recorded: :recorded_runs runs, :recorded_results per-rule rows (check_run, small_check_run and batch_on only)
SELECT what, pg_catalog.string_agg(pg_catalog.round(ms::numeric)::text, ' ' ORDER BY run) AS runs_ms,
       pg_catalog.round((pg_catalog.percentile_cont(0.5) WITHIN GROUP (ORDER BY ms))::numeric) AS median_ms
FROM timings GROUP BY what ORDER BY what;
WITH m AS (SELECT what, pg_catalog.percentile_cont(0.5) WITHIN GROUP (ORDER BY ms) AS ms FROM timings GROUP BY what)
SELECT 'reconcile_check_run / reconcile_check' AS ratio,
       pg_catalog.round(((SELECT ms FROM m WHERE what = 'check_run') / (SELECT ms FROM m WHERE what = 'check'))::numeric, 3) AS value
UNION ALL
SELECT 'batch, history on / off',
       pg_catalog.round(((SELECT ms FROM m WHERE what = 'batch_on') / (SELECT ms FROM m WHERE what = 'batch_off'))::numeric, 3)
WHERE :batches::int <> 0
UNION ALL
SELECT 'recording one run (ms, small_check_run - small_check medians)',
       pg_catalog.round(((SELECT ms FROM m WHERE what = 'small_check_run') - (SELECT ms FROM m WHERE what = 'small_check'))::numeric, 2)
UNION ALL
SELECT 'recording one run / reconcile_check over all rows',
       pg_catalog.round((((SELECT ms FROM m WHERE what = 'small_check_run') - (SELECT ms FROM m WHERE what = 'small_check'))
                         / (SELECT ms FROM m WHERE what = 'check'))::numeric, 4);
\echo aim: recording costs under 5% (ratios below 1.05)
SQL
echo "report: $OUT"
