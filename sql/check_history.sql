-- Check jobs and their history: reconcile.check_jobs run by
-- reconcile_check_run, each run in reconcile.check_runs with one row per
-- rule (passes included) in reconcile.check_results; batches into targets
-- with attached rules recorded too; who sees what; retention; drops.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

CREATE TABLE accounts (id int PRIMARY KEY, balance numeric, owner text);
INSERT INTO accounts SELECT g, CASE WHEN g <= 2 THEN -g ELSE g * 10 END,
                            CASE WHEN g = 5 THEN NULL ELSE 'o' || g END
FROM generate_series(1, 50) AS g;

INSERT INTO reconcile.check_jobs (job, relation, rules, options) VALUES
  ('accounts_ok', 'public.accounts', '{
     "fail": {"balance_mostly_positive": {"sql": "balance >= 0", "mostly": 0.95}},
     "warn": {"has_owner": "owner IS NOT NULL"},
     "dataset_checks": [{"name": "unique_id", "sql": "SELECT id FROM {{TABLE}} GROUP BY id HAVING count(*) > 1"}]}',
   '{"sample": 1, "key_columns": ["id"]}'),
  ('accounts_strict', 'accounts', '{"fail": {"balance_positive": "balance >= 0", "typo": "balanse > 0"}}',
   '{"sample": 0}'),
  ('gone', 'public.no_such_table', '{}', NULL),
  ('bad_doc', 'accounts', '{"fail": {"x": {"sql": "true", "mostly": 7}}}', NULL),
  ('cron_style', 'accounts', '{}', '{"fail_on_breach": true}');

-- Every job, in name order: a pass, a breach, and three failed runs
-- recorded with their errors.
SELECT job, relation, batch_id, total_rows, rules, passed, failed, errored, skipped, gate, error,
       run_by = current_user AS mine, finished_at >= started_at AS timed
FROM reconcile_check_run();
-- One row per rule of each run, passes included.
SELECT r.job, c.rule, c.severity, c.status, c.invalid_rows, c.total_rows, c.invalid_share,
       c.threshold, c.gate_breach, c.sample, c.detail, c.error, c.sqlstate
FROM reconcile.check_results c JOIN reconcile.check_runs r USING (run_id)
ORDER BY c.run_id, c.rule;
-- One job by name; a job that does not exist.
SELECT job, gate FROM reconcile_check_run('accounts_ok');
SELECT job, gate FROM reconcile_check_run('nope');
SELECT job, count(*) AS runs FROM reconcile.check_runs GROUP BY job ORDER BY job;

-- A target's attached rules: a job without rules runs them, and every
-- batch records its per-rule counts (fail and warn over the rows loaded,
-- drop over the rows evaluated, dataset checks over the winners).
CREATE TABLE ledger (id text PRIMARY KEY, amount int, version bigint NOT NULL,
                     is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea);
CREATE TABLE ledger_stage (object_key text, source_row bigint, operation text,
                           id text, version text, amount int);
SELECT reconcile_register(target => 'ledger', key_columns => '{id}', version_column => 'version',
                          deleted_column => 'is_deleted', hash_column => 'payload_hash');
SELECT reconcile_set_rules('ledger', '{
  "fail": {"not_negative": {"sql": "amount >= 0", "max_invalid": 1}},
  "warn": {"round": "amount % 10 = 0"},
  "drop": {"has_amount": "amount IS NOT NULL"},
  "dataset_checks": [{"name": "small_ones", "sql": "SELECT id FROM {{TABLE}} WHERE amount < 5", "max_rows": 3}]
}');
INSERT INTO reconcile.check_jobs VALUES ('ledger_attached', 'ledger', NULL, '{"sample": 0}');
INSERT INTO ledger_stage VALUES
    ('o1', 1, 'UPSERT', 'a', '1', 10), ('o1', 2, 'UPSERT', 'b', '1', 3),
    ('o1', 3, 'UPSERT', 'c', '1', -1), ('o1', 4, 'UPSERT', 'd', '1', NULL),
    ('o1', 5, 'UPSERT', 'e', '1', 20);
SELECT status, inserted, rejected
FROM reconcile_batch(target => 'ledger', staged => 'ledger_stage',
                     manifest => '[{"object_key":"o1","version_id":"a","content_hash":"sha256:01","rows":5}]');
SELECT batch_id IS NOT NULL AS has_batch, job, relation, total_rows, rules, passed, failed, errored, skipped, gate
FROM reconcile.check_runs WHERE relation = 'ledger'::regclass;
SELECT c.rule, c.severity, c.status, c.invalid_rows, c.total_rows, c.invalid_share, c.threshold,
       c.gate_breach, c.sample, c.detail
FROM reconcile.check_results c JOIN reconcile.check_runs r USING (run_id)
WHERE r.batch_id IS NOT NULL ORDER BY c.rule;
-- The batch's run is the receipt's batch.
SELECT count(*) AS matching_receipts FROM reconcile.check_runs r
  JOIN reconcile.receipts t ON t.target = r.relation AND t.batch_id = r.batch_id;
-- The same rules through a job, over the whole target.
SELECT job, total_rows, passed, failed, gate FROM reconcile_check_run('ledger_attached');
-- A replay records nothing (its rules do not run again).
SELECT status FROM reconcile_batch(target => 'ledger', staged => 'ledger_stage',
                     manifest => '[{"object_key":"o1","version_id":"a","content_hash":"sha256:01","rows":5}]');
-- A refused batch records nothing either: its error rolls everything back.
TRUNCATE ledger_stage;
INSERT INTO ledger_stage VALUES ('o2', 1, 'UPSERT', 'f', '1', -5), ('o2', 2, 'UPSERT', 'g', '1', -6);
SELECT status FROM reconcile_batch(target => 'ledger', staged => 'ledger_stage',
                     manifest => '[{"object_key":"o2","version_id":"a","content_hash":"sha256:02","rows":2}]');
-- With reconcile.check_history off, batches are not recorded (jobs still are).
TRUNCATE ledger_stage;
INSERT INTO ledger_stage VALUES ('o3', 1, 'UPSERT', 'h', '1', 30);
SET reconcile.check_history = off;
SELECT status FROM reconcile_batch(target => 'ledger', staged => 'ledger_stage',
                     manifest => '[{"object_key":"o3","version_id":"a","content_hash":"sha256:03","rows":1}]');
SELECT job, gate FROM reconcile_check_run('ledger_attached');
RESET reconcile.check_history;
SELECT count(*) FILTER (WHERE batch_id IS NOT NULL) AS batch_runs,
       count(*) FILTER (WHERE job = 'ledger_attached') AS job_runs
FROM reconcile.check_runs WHERE relation = 'ledger'::regclass;

-- A job over attached rules runs them as the target's owner (the owner's
-- code, restricted, as batches run it); a job's own rules run as the caller.
CREATE ROLE regress_history_owner;
CREATE TABLE owned (id int PRIMARY KEY, version bigint NOT NULL,
                    is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea);
INSERT INTO owned VALUES (1, 1);
SELECT reconcile_register(target => 'owned', key_columns => '{id}', version_column => 'version',
                          deleted_column => 'is_deleted', hash_column => 'payload_hash');
SELECT reconcile_set_rules('owned', '{"fail": {"as_owner": "current_user = ''regress_history_owner''"}}');
ALTER TABLE owned OWNER TO regress_history_owner;
INSERT INTO reconcile.check_jobs VALUES
  ('owned_attached', 'owned', NULL, '{"sample": 0}'),
  ('owned_own', 'owned', '{"fail": {"as_owner": "current_user = ''regress_history_owner''"}}', '{"sample": 0}');
SELECT job, passed, failed, gate FROM reconcile_check_run('owned_attached');
SELECT job, passed, failed, gate FROM reconcile_check_run('owned_own');

-- Who sees what: as the diff's history, a reader sees the runs and results
-- of relations it may SELECT from (table-level, no row-level security
-- applying to it there), and the runs it made.
CREATE ROLE regress_history_reader;
CREATE ROLE regress_history_other;
GRANT SELECT ON accounts TO regress_history_reader;
SET ROLE regress_history_other;
SELECT count(*) AS runs_seen FROM reconcile.check_runs;
SELECT count(*) AS results_seen FROM reconcile.check_results;
SELECT job FROM reconcile_check_run('accounts_ok');
SELECT count(*) AS jobs_seen FROM reconcile.check_jobs;
INSERT INTO reconcile.check_jobs VALUES ('mine', 'accounts', '{}', NULL);
-- Nor can a role leave its batches out of the history.
SET reconcile.check_history = off;
INSERT INTO reconcile.check_runs (job, relation, started_at, finished_at, run_by)
  VALUES ('forged', 'accounts', now(), now(), current_user);
RESET ROLE;
SET ROLE regress_history_reader;
SELECT DISTINCT relation::text FROM reconcile.check_runs WHERE relation IS NOT NULL;
SELECT count(*) > 0 AS sees_results, bool_and(relation = 'accounts'::regclass) AS only_accounts
FROM reconcile.check_results;
SELECT job, gate FROM reconcile_check_run('accounts_ok');
RESET ROLE;
-- Row-level security on the relation hides its history from whom it restricts.
ALTER TABLE accounts ENABLE ROW LEVEL SECURITY;
CREATE POLICY some_rows ON accounts FOR SELECT USING (id < 10);
SET ROLE regress_history_reader;
SELECT count(*) AS results_seen_under_rls FROM reconcile.check_results;
SELECT job, count(*) AS own_runs_still_seen FROM reconcile.check_runs GROUP BY job;
RESET ROLE;
DROP POLICY some_rows ON accounts;
ALTER TABLE accounts DISABLE ROW LEVEL SECURITY;

-- Retention: keep N days by deleting older runs as the tables' owner (a
-- pg_cron job, see docs/rules.md); results go with their runs.
UPDATE reconcile.check_runs SET started_at = started_at - interval '40 days',
                                finished_at = finished_at - interval '40 days'
WHERE run_id IN (SELECT min(run_id) FROM reconcile.check_runs);
SELECT count(*) AS results_before FROM reconcile.check_results;
DELETE FROM reconcile.check_runs WHERE started_at < now() - interval '30 days';
SELECT count(*) AS results_after FROM reconcile.check_results;

-- A dropped relation takes its results; its runs stay, without it.
DROP TABLE accounts;
SELECT job, count(*) AS runs, count(relation) AS with_relation
FROM reconcile.check_runs WHERE job LIKE 'accounts%' GROUP BY job ORDER BY job;
SELECT count(*) AS results_of_dropped FROM reconcile.check_results
WHERE run_id IN (SELECT run_id FROM reconcile.check_runs WHERE job LIKE 'accounts%');

DROP TABLE ledger, ledger_stage, owned;
DROP ROLE regress_history_reader, regress_history_other, regress_history_owner;
DROP EXTENSION reconcile;
