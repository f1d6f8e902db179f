#!/usr/bin/env bash
# Benchmark: what compiling one large row rule costs, against the same
# expression in plain SQL.  For each number of terms N it times
#   reconcile_check(t, '{"fail": {"big": "<expr> = N * a"}}')
# and
#   SELECT count(*) FROM t WHERE (<expr> = N * a) IS NOT TRUE
# on a 10-row table (so that the time is the compilation, not the scan), for
# two shapes of <expr>:
#   chain    a + a + ... + a            (N terms, nested N levels deep)
#   grouped  (a + ... + a) + (a + ...)  (N terms in groups of 500: ~500 + N/500 levels)
# A case that errors prints its SQLSTATE and message instead of a result
# (a chain of 8,000 terms exceeds PostgreSQL's stack at the default
# max_stack_depth in plain SQL too).  Each statement runs under
# statement_timeout (TIMEOUT, default 300s).
#
# Usage: bench/rules/compile.sh   (uses PGHOST, PGPORT, PGUSER; needs the
# extension installed; creates and drops database reconcile_compile_bench)
# TERMS="2000 4000" SHAPES=chain bench/rules/compile.sh for fewer cases.
set -euo pipefail

TERMS=${TERMS:-"2000 4000 8000 16000"}
SHAPES=${SHAPES:-"chain grouped"}
TIMEOUT=${TIMEOUT:-300s}
DB=${DB:-reconcile_compile_bench}

psql -X -q -v ON_ERROR_STOP=1 -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
[ -n "${KEEP:-}" ] || trap 'psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB"' EXIT

OUT_DIR="$(cd "$(dirname "$0")/.." && pwd)/out"
mkdir -p "$OUT_DIR"
OUT="$OUT_DIR/rules-compile-$(date +%Y%m%d-%H%M%S).txt"

psql -X -q -v ON_ERROR_STOP=1 -d "$DB" <<'SQL'
CREATE EXTENSION reconcile;
CREATE TABLE t AS SELECT g AS a FROM generate_series(1, 10) AS g;
ANALYZE t;

CREATE FUNCTION bench_expr(shape text, n int) RETURNS text LANGUAGE sql AS $$
  SELECT CASE shape
    WHEN 'chain' THEN (SELECT pg_catalog.string_agg('a', ' + ') FROM pg_catalog.generate_series(1, n))
    ELSE (SELECT pg_catalog.string_agg('(' || g || ')', ' + ')
            FROM (SELECT (SELECT pg_catalog.string_agg('a', ' + ')
                            FROM pg_catalog.generate_series(1, LEAST(500, n - k))) AS g
                    FROM pg_catalog.generate_series(0, n - 1, 500) AS k) AS s)
  END || pg_catalog.format(' = %s * a', n)
$$;

-- "ok <answer>" or the error, and the time in ms
CREATE FUNCTION bench_run(sql text, OUT outcome text, OUT ms numeric) LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := pg_catalog.clock_timestamp(); v text;
BEGIN
  BEGIN
    EXECUTE sql INTO v;
    outcome := 'ok ' || COALESCE(v, 'NULL');
  EXCEPTION WHEN OTHERS THEN
    outcome := SQLSTATE || ' ' || SQLERRM;
  END;
  ms := pg_catalog.round(1000 * extract(epoch FROM pg_catalog.clock_timestamp() - t0)::numeric, 1);
END $$;
SQL

{
  echo "# $(date -u '+%Y-%m-%d %H:%M UTC')  TERMS=\"$TERMS\" SHAPES=\"$SHAPES\" statement_timeout=$TIMEOUT"
  printf '%-8s %6s  %12s %-40s  %10s %-30s\n' shape terms check_ms check_outcome plain_ms plain_outcome
  for shape in $SHAPES; do
    for n in $TERMS; do
      psql -X -q -A -t -v ON_ERROR_STOP=1 -d "$DB" -v shape="$shape" -v n="$n" -v timeout="$TIMEOUT" <<'SQL'
SET statement_timeout = :'timeout';
SELECT bench_expr(:'shape', :n) AS expr \gset
SELECT pg_catalog.format('SELECT status || COALESCE('' '' || invalid_rows, '''') || COALESCE('' '' || sqlstate || '' '' || detail, '''') FROM reconcile_check(%L, %L)',
                         't', pg_catalog.jsonb_build_object('fail', pg_catalog.jsonb_build_object('big', :'expr'))) AS check_sql,
       pg_catalog.format('SELECT count(*) FROM t WHERE (%s) IS NOT TRUE', :'expr') AS plain_sql \gset
SELECT c.ms AS check_ms, pg_catalog.translate(pg_catalog.left(c.outcome, 40), E'\n''', '  ') AS check_outcome,
       p.ms AS plain_ms, pg_catalog.translate(pg_catalog.left(p.outcome, 30), E'\n''', '  ') AS plain_outcome
FROM bench_run(:'check_sql') AS c, bench_run(:'plain_sql') AS p \gset
SELECT pg_catalog.format('%-8s %6s  %12s %-40s  %10s %-30s', :'shape', :n, :'check_ms', :'check_outcome', :'plain_ms', :'plain_outcome');
SQL
    done
  done
} | tee "$OUT"
echo "report: $OUT"
