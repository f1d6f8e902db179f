-- One timed reconcile_batch of the manifest in bench_manifest.  The
-- manifest comes from a table, so no literal is parsed in the statement;
-- its detoasted copy (some 80 bytes per object) counts with the batch.
\set QUIET on
SET client_min_messages = warning;
SELECT (regexp_match(pg_read_file('/proc/' || pg_backend_pid() || '/status'), 'VmRSS:\s+(\d+)'))[1]::bigint AS rss0 \gset
\timing on
SELECT status, staged_rows, inserted, rejected
  FROM bench_manifest, reconcile_batch('bench_target', 'bench_stage', manifest);
\timing off
SELECT (regexp_match(pg_read_file('/proc/' || pg_backend_pid() || '/status'), 'VmHWM:\s+(\d+)'))[1]::bigint AS hwm \gset
SELECT :hwm - :rss0 AS "VmHWM-VmRSS0 kB", :hwm AS "VmHWM kB";
