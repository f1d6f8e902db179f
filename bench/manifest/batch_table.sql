-- One timed reconcile_batch_table of the manifest table bench_manifest_rows
-- (one entry per row; its rows are read in the batch, and count with it).
\set QUIET on
SET client_min_messages = warning;
SELECT (regexp_match(pg_read_file('/proc/' || pg_backend_pid() || '/status'), 'VmRSS:\s+(\d+)'))[1]::bigint AS rss0 \gset
-- The backend's CPU time (utime + stime, in clock ticks of 1/100 s): on a
-- shared machine the wall-clock time also counts the waits for a core.
SELECT (SELECT f[12]::bigint + f[13]::bigint FROM string_to_array(split_part(pg_read_file('/proc/' || pg_backend_pid() || '/stat'), ') ', 2), ' ') AS f) AS cpu0 \gset
\timing on
SELECT status, staged_rows, inserted, rejected
  FROM reconcile_batch_table('bench_target', 'bench_stage', 'bench_manifest_rows');
\timing off
SELECT ((SELECT f[12]::bigint + f[13]::bigint FROM string_to_array(split_part(pg_read_file('/proc/' || pg_backend_pid() || '/stat'), ') ', 2), ' ') AS f) - :cpu0) / 100.0 AS "backend CPU seconds";
SELECT (regexp_match(pg_read_file('/proc/' || pg_backend_pid() || '/status'), 'VmHWM:\s+(\d+)'))[1]::bigint AS hwm \gset
SELECT :hwm - :rss0 AS "VmHWM-VmRSS0 kB", :hwm AS "VmHWM kB";
