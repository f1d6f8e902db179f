-- The update from 1.1 for recheck, min_age and the limits (issue 24: 2, 4):
-- the library runs them on a 1.1 schema (the summary and the runs keep
-- 1.1's columns), runs recorded by 1.1 survive and read as complete or
-- failed, and after ALTER EXTENSION reconcile UPDATE a stopped run is
-- recorded as stopped, with the rechecks and their settings.
CREATE EXTENSION reconcile VERSION '1.1';
SET client_min_messages = notice;

CREATE TABLE u_src (id bigint PRIMARY KEY, v text, upd timestamptz);
CREATE TABLE u_tgt (id bigint PRIMARY KEY, v text, upd timestamptz);
INSERT INTO u_src SELECT i, 'v' || i, now() - interval '1 hour' FROM generate_series(1, 20) i;
INSERT INTO u_tgt SELECT i, CASE WHEN i % 5 = 0 THEN 'changed' ELSE 'v' || i END, now() - interval '1 hour'
  FROM generate_series(1, 18) i;
UPDATE u_tgt SET upd = now() WHERE id = 15;       -- young: left out under min_age

-- 1.1 history: a complete run and a failed one.
INSERT INTO reconcile.diff_jobs VALUES
    ('u_plain', 'public.u_src', 'public.u_tgt', '{id}', '{"compare": ["v"]}'),
    ('u_broken', 'public.u_src', 'public.u_missing', '{id}', NULL);
SELECT job, findings, error IS NOT NULL AS failed FROM reconcile_diff_run() ORDER BY job;

-- On the 1.1 schema the options work; the summary has 1.1's columns and a
-- stop is told by a NOTICE.
SELECT issue, key FROM reconcile_diff('u_src', 'u_tgt', '{id}',
    '{"compare": ["v"], "max_differences": 2, "recheck": {"after": "0 seconds"}}');
SELECT * FROM reconcile_diff_summary('u_src', 'u_tgt', '{id}',
    '{"compare": ["v"], "updated_column": "upd", "min_age": "10 minutes"}');
UPDATE reconcile.diff_jobs SET options = '{"compare": ["v"], "max_differences": 2, "recheck": {"after": "0 seconds"}}'
 WHERE name = 'u_plain';
SELECT job, findings, error FROM reconcile_diff_run('u_plain');
UPDATE reconcile.diff_jobs SET options = '{"compare": ["v"], "max_differences": 2}' WHERE name = 'u_plain';

-- A view over reconcile_diff_summary stops the update (the function is
-- recreated with four more columns): drop it, update, create it again.
CREATE VIEW u_summary AS SELECT * FROM reconcile_diff_summary('u_src', 'u_tgt', '{id}');
\set VERBOSITY terse
ALTER EXTENSION reconcile UPDATE;
\set VERBOSITY default
SELECT extversion FROM pg_extension WHERE extname = 'reconcile';
DROP VIEW u_summary;
ALTER EXTENSION reconcile UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'reconcile';

-- 1.1's runs: complete or failed; nothing else said of them.  (The 1.1
-- table had no place for a stop: the run this library made with a limit
-- before the update reads as complete, with the findings it found.)
SELECT job, findings, status, stopped_by, stopped_at_key, rechecks, recheck, young_keys
  FROM reconcile.diff_runs ORDER BY run_id;
SELECT count(*) AS results, count(rechecks) AS with_rechecks FROM reconcile.diff_results;

-- After the update: the summary's new columns, a stopped run, a recheck in the history.
SELECT missing_in_target, mismatched, young_keys, stopped_by, stopped_at_key, rechecks
  FROM reconcile_diff_summary('u_src', 'u_tgt', '{id}',
    '{"compare": ["v"], "updated_column": "upd", "min_age": "10 minutes", "max_differences": 3}');
INSERT INTO reconcile.diff_jobs VALUES
    ('u_recheck', 'public.u_src', 'public.u_tgt', '{id}',
     '{"compare": ["v"], "recheck": {"after": "0 seconds", "times": 2}, "updated_column": "upd", "min_age": "10 minutes"}');
DELETE FROM reconcile.diff_jobs WHERE name = 'u_broken';
SELECT job, findings, status, stopped_by, stopped_at_key, rechecks, recheck, young_keys
  FROM reconcile_diff_run() ORDER BY job;
SELECT r.job, d.issue, d.key, d.rechecks
  FROM reconcile.diff_results d JOIN reconcile.diff_runs r USING (run_id)
 WHERE r.run_id = (SELECT max(run_id) FROM reconcile.diff_runs WHERE job = 'u_recheck')
 ORDER BY (d.key->>'id')::int;
-- The status is checked.
\set VERBOSITY terse
INSERT INTO reconcile.diff_runs (job, started_at, finished_at, run_by, status)
VALUES ('x', now(), now(), current_user, 'paused');

DROP TABLE u_src, u_tgt;
DROP EXTENSION reconcile CASCADE;
