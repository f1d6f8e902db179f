-- Configured diff runs: jobs, runs, results, history and who may read them.
CREATE EXTENSION reconcile;

CREATE TABLE src_a (id integer PRIMARY KEY, amount numeric, status text);
CREATE TABLE tgt_a (status text, amount numeric, id integer PRIMARY KEY);
INSERT INTO src_a VALUES (1, 10, 'paid'), (2, 20, 'paid'), (3, 30, 'open');
INSERT INTO tgt_a (id, amount, status) VALUES (1, 10, 'paid'), (2, 20.004, 'void'), (4, 40, 'open');
CREATE TABLE src_b (code text, qty integer);
CREATE TABLE tgt_b (code text, qty integer);
INSERT INTO src_b VALUES ('x', 1), ('y', 2);
INSERT INTO tgt_b VALUES ('x', 1), ('y', 2);

-- Jobs come from a configuration file, CSV with a header.
COPY reconcile.diff_jobs (name, source, target, key_columns, options) FROM STDIN CSV HEADER;
name,source,target,key_columns,options
orders,public.src_a,tgt_a,{id},"{""tolerance"": {""amount"": 0.01}}"
codes,src_b,tgt_b,{code},
broken,no_such_table,tgt_b,{code},
badopt,src_b,tgt_b,{code},"{""compair"": [""qty""]}"
\.

-- All jobs, in name order; a failing job is recorded and the others run.
SELECT job, source, target, rows_source, rows_target, matched, missing_in_target,
       extra_in_target, mismatched, duplicate_keys, null_keys, column_mismatches,
       findings, error, run_by = CURRENT_USER AS by_me,
       finished_at >= started_at AS timed
FROM reconcile_diff_run();

SELECT r.job, d.issue, d.key, d.columns, d.source_values, d.target_values
FROM reconcile.diff_results d JOIN reconcile.diff_runs r USING (run_id)
ORDER BY r.job COLLATE "C", d.issue COLLATE "C", d.key::text COLLATE "C";

-- One job; old runs stay for history.
SELECT job, findings, error FROM reconcile_diff_run('codes');
UPDATE tgt_b SET qty = 3 WHERE code = 'y';
SELECT job, mismatched, column_mismatches, findings FROM reconcile_diff_run(job => 'codes');
SELECT job, count(*) AS runs, sum(findings) AS findings
FROM reconcile.diff_runs GROUP BY job ORDER BY job COLLATE "C";

-- Alerting: the latest run of each job, when it found something or failed.
SELECT DISTINCT ON (job) job, findings, error IS NOT NULL AS failed
FROM reconcile.diff_runs
ORDER BY job, run_id DESC;

SELECT * FROM reconcile_diff_run('no_such_job');

-- Who may read and write the state.
CREATE ROLE diff_user;
GRANT SELECT ON src_a TO diff_user;
SET ROLE diff_user;
-- Without SELECT on both sides of a run, its rows are not visible.
SELECT count(*) FROM reconcile.diff_results;
SELECT count(*) FROM reconcile.diff_runs;
-- The state tables are written by the extension only.
INSERT INTO reconcile.diff_results VALUES (1, 'src_a', 'tgt_a', 'MISMATCH', '{}');
DELETE FROM reconcile.diff_runs;
INSERT INTO reconcile.diff_jobs VALUES ('mine', 'src_a', 'tgt_a', '{id}');
-- A run executes with the caller's rights: no SELECT on the target, no diff,
-- and nothing recorded in the job's history.
SELECT job, findings, error FROM reconcile_diff_run('orders');
SELECT job, error FROM reconcile.diff_runs ORDER BY run_id;
RESET ROLE;
GRANT SELECT ON tgt_a TO diff_user;
SET ROLE diff_user;
SELECT job, findings, error FROM reconcile_diff_run('orders');
SELECT count(*) FROM reconcile.diff_results;
SELECT DISTINCT r.job FROM reconcile.diff_runs r ORDER BY 1;
RESET ROLE;

-- Deleting a run deletes its results.
DELETE FROM reconcile.diff_runs WHERE job = 'orders';
SELECT count(*) FROM reconcile.diff_results d
WHERE NOT EXISTS (SELECT FROM reconcile.diff_runs r WHERE r.run_id = d.run_id);
SELECT count(*) FROM reconcile.diff_results;

DROP OWNED BY diff_user;
DROP ROLE diff_user;
DROP EXTENSION reconcile;
