-- The upgrade over diff jobs made with 1.0: they survive ALTER EXTENSION
-- reconcile UPDATE unchanged, show in reconcile.diff_job_config, run as
-- before, and a config loaded over them replaces them by name.
CREATE EXTENSION reconcile VERSION '1.0';
SET client_min_messages = warning;
SET TimeZone = 'UTC';

CREATE TABLE up_src (id integer PRIMARY KEY, "AcctNo" text, amount numeric, at timestamp);
CREATE TABLE up_tgt (id integer PRIMARY KEY, "AcctNo" text, amount numeric, at timestamptz);
INSERT INTO up_src VALUES (1, 'a', 10, '2026-11-01 10:00'), (2, 'b', 20, '2026-11-02 10:00'), (3, 'c', 30, '2026-11-03 10:00');
INSERT INTO up_tgt VALUES (1, 'a', 10, '2026-11-01 10:00+00'), (2, 'b', 21, '2026-11-02 10:00+00'), (4, 'd', 40, '2026-11-04 10:00+00');
-- 1.0 jobs: one unqualified, one with options, one naming a missing table.
INSERT INTO reconcile.diff_jobs VALUES
    ('plain', 'up_src', 'up_tgt', '{id}', NULL),
    ('opts', 'public.up_src', 'public.up_tgt', '{id}', '{"compare": ["amount", "at"], "tolerance": {"amount": 0.5}}'),
    ('gone', 'public.no_such', 'public.up_tgt', '{id}', NULL);
SELECT job, matched, missing_in_target, extra_in_target, mismatched, error IS NOT NULL AS failed
FROM reconcile_diff_run() ORDER BY job;
CREATE TABLE jobs_1_0 AS SELECT * FROM reconcile.diff_jobs;

ALTER EXTENSION reconcile UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'reconcile';

-- The jobs are intact, row for row, and the view shows them.
SELECT count(*) AS changed FROM (
    (SELECT * FROM jobs_1_0 EXCEPT SELECT * FROM reconcile.diff_jobs)
    UNION ALL (SELECT * FROM reconcile.diff_jobs EXCEPT SELECT * FROM jobs_1_0)) d;
SELECT * FROM reconcile.diff_job_config ORDER BY job;

-- They run as under 1.0, and the timestamp/timestamptz pair of "opts" now
-- gives the same findings under every session zone.
SET TimeZone = 'America/New_York';
SELECT job, matched, missing_in_target, extra_in_target, mismatched, column_mismatches, error IS NOT NULL AS failed
FROM reconcile_diff_run() ORDER BY job;
SET TimeZone = 'Asia/Kathmandu';
SELECT job, matched, missing_in_target, extra_in_target, mismatched, column_mismatches, error IS NOT NULL AS failed
FROM reconcile_diff_run() ORDER BY job;
SET TimeZone = 'UTC';

-- A config loaded over 1.0 jobs replaces them by name and keeps the
-- options set by hand; a new job with a mixed-case key loads too.  The
-- file is in 1.1's layout, loaded with its column list.
COPY reconcile.diff_job_config (job, source, target, key_columns, updated_column, "window") FROM STDIN CSV HEADER;
job,source,target,key_columns,updated_column,window
opts,up_src,up_tgt,ID,AT,2026-11-01/2026-11-02 23:59
acct,public.up_src,public.up_tgt,AcctNo,,
\.
SELECT name, source, target, key_columns, options FROM reconcile.diff_jobs ORDER BY name;
SELECT job, rows_source, rows_target, matched, missing_in_target, extra_in_target, mismatched, error
FROM reconcile_diff_run() WHERE job IN ('opts', 'acct') ORDER BY job;

-- The new objects have their comments and privileges.
SELECT c.relname, obj_description(c.oid, 'pg_class') IS NOT NULL AS commented,
       (SELECT count(*) FROM pg_attribute a WHERE a.attrelid = c.oid AND a.attnum > 0
          AND col_description(c.oid, a.attnum) IS NULL) AS columns_without_comment,
       has_table_privilege('public', c.oid, 'INSERT') AS public_insert,
       has_table_privilege('public', c.oid, 'UPDATE') AS public_update,
       has_table_privilege('public', c.oid, 'DELETE') AS public_delete
FROM pg_class c WHERE c.oid = 'reconcile.diff_job_config'::regclass;
SELECT obj_description('reconcile.diff_job_config_load()'::regprocedure, 'pg_proc') IS NOT NULL AS commented,
       has_function_privilege('public', 'reconcile.diff_job_config_load()', 'EXECUTE') AS public_execute;
SELECT tgname, tgtype FROM pg_trigger WHERE tgrelid = 'reconcile.diff_job_config'::regclass;

DROP TABLE up_src, up_tgt, jobs_1_0;
DROP EXTENSION reconcile;
