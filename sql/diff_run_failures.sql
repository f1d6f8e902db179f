-- reconcile_diff_run records each job's failure as that job's run, with
-- its SQLSTATE and message, and runs the other jobs: a foreign server
-- that cannot be reached (a closed port) fails its own job only.  With
-- all_or_nothing the first failure is the call's error and nothing is
-- recorded.  Calls written for 1.1 keep working.
CREATE EXTENSION reconcile;
CREATE EXTENSION postgres_fdw;
SET client_min_messages = warning;
-- Port 9 (discard) on the loopback address: nothing listens there.
CREATE SERVER down_server FOREIGN DATA WRAPPER postgres_fdw
    OPTIONS (host '127.0.0.1', port '9', dbname 'postgres', connect_timeout '5');
CREATE USER MAPPING FOR CURRENT_USER SERVER down_server;
CREATE FOREIGN TABLE f_down (id int, v text) SERVER down_server OPTIONS (table_name 'nowhere');
CREATE TABLE run_a (id int PRIMARY KEY, v text);
CREATE TABLE run_b (id int PRIMARY KEY, v text);
INSERT INTO run_a VALUES (1, 'x'), (2, 'y');
INSERT INTO run_b VALUES (1, 'x'), (2, 'z');
INSERT INTO reconcile.diff_jobs VALUES
    ('a_local', 'public.run_a', 'public.run_b', '{id}', NULL),
    ('b_remote_down', 'public.f_down', 'public.run_b', '{id}', NULL),
    ('b_remote_down_checksum', 'public.f_down', 'public.run_b', '{id}', '{"remote": "checksum"}'),
    ('c_bad_option', 'public.run_a', 'public.run_b', '{id}', '{"compare": ["nope"]}'),
    ('d_local', 'public.run_b', 'public.run_a', '{id}', NULL);

-- Every job runs; the unreachable server's and the bad option's are
-- recorded as failed runs of their jobs.
SELECT job, findings, sqlstate, error FROM reconcile_diff_run() ORDER BY job;
SELECT job, findings, sqlstate, error, finished_at >= started_at AS timed
  FROM reconcile.diff_runs ORDER BY run_id;

-- all_or_nothing: the first failure is the error, no run is recorded.
SELECT count(*) AS runs_before FROM reconcile.diff_runs \gset
\set VERBOSITY terse
SELECT job FROM reconcile_diff_run(NULL, true);
SELECT job FROM reconcile_diff_run(all_or_nothing => true);
SELECT job FROM reconcile_diff_run('c_bad_option', true);
\set VERBOSITY default
SELECT count(*) - :runs_before AS runs_recorded FROM reconcile.diff_runs;
-- ... and when every job succeeds, all are recorded.
SELECT job, findings FROM reconcile_diff_run('a_local', all_or_nothing => true);
SELECT job, findings, sqlstate FROM reconcile_diff_run(NULL, NULL) WHERE job = 'a_local';

-- The calls of 1.1.
SELECT job, findings FROM reconcile_diff_run('d_local');
SELECT job, findings FROM reconcile_diff_run(job => 'd_local');
SELECT count(*) AS jobs_run FROM reconcile_diff_run();
SELECT pg_get_function_arguments('reconcile_diff_run'::regproc);

RESET client_min_messages;
DROP FOREIGN TABLE f_down;
DROP USER MAPPING FOR CURRENT_USER SERVER down_server;
DROP SERVER down_server;
DROP TABLE run_a, run_b;
DROP EXTENSION postgres_fdw;
DROP EXTENSION reconcile;
