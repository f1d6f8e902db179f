-- Anomaly rules: row_count, null_share, distinct_count and freshness held
-- to absolute bounds or to the check job's own history (within_sigma over
-- the last runs); too little history is SKIPPED; bad definitions refused.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

CREATE TABLE events (id int PRIMARY KEY, kind text, at timestamptz);
-- One transaction, so that now() is the same for the rows and the check:
-- the age shown is exactly an hour however slow the machine.
BEGIN;
INSERT INTO events SELECT g, CASE WHEN g % 10 = 0 THEN NULL ELSE 'k' || (g % 4) END,
                          now() - interval '1 hour'
FROM generate_series(1, 100) AS g;

-- Absolute bounds need no history: reconcile_check runs them.
SELECT rule, severity, status, invalid_rows, gate_breach, detail
FROM reconcile_check('events', '{
  "fail": {"enough_rows":  {"kind": "row_count", "min": 50},
           "too_many":     {"kind": "row_count", "max": 99},
           "fresh":        {"kind": "freshness", "column": "at", "max": 7200},
           "stale":        {"kind": "freshness", "column": "at", "max": 60}},
  "warn": {"few_nulls":    {"kind": "null_share", "column": "kind", "max": 0.1},
           "fewer_nulls":  {"kind": "null_share", "column": "kind", "max": 0.09},
           "kinds":        {"kind": "distinct_count", "column": "kind", "min": 2, "max": 4}}
}');
COMMIT;
-- No rows: null_share has nothing to measure (SKIPPED); freshness of no
-- value fails; row_count and distinct_count are 0.
CREATE TABLE no_events (id int, kind text, at timestamptz);
SELECT rule, status, gate_breach, detail
FROM reconcile_check('no_events', '{
  "fail": {"fresh": {"kind": "freshness", "column": "at", "max": 7200},
           "rows":  {"kind": "row_count", "min": 0, "max": 0}},
  "warn": {"nulls": {"kind": "null_share", "column": "kind", "max": 0.1},
           "kinds": {"kind": "distinct_count", "column": "kind", "max": 0}}
}');

-- A history rule outside a job has no history: SKIPPED, which neither
-- passes nor breaches; the report says so in summary.skipped and shows the
-- value measured.
SELECT rule, status, gate_breach, detail
FROM reconcile_check('events', '{"fail": {"rows_usual": {"kind": "row_count", "within_sigma": 3, "runs": 3}}}');
SELECT reconcile_check_report('events', '{"fail": {"rows_usual": {"kind": "row_count", "within_sigma": 3, "runs": 3}}}');
-- A document without anomaly rules has no "skipped" in its summary.
SELECT reconcile_check_report('events', '{"fail": {"x": "true"}}')->'summary' AS summary;

-- In a job, each run records the value measured; with fewer than "runs"
-- earlier runs the rule is SKIPPED; then it is held to their mean and
-- sample standard deviation.
INSERT INTO reconcile.check_jobs VALUES ('events_daily', 'events', '{
  "fail": {"rows_usual":  {"kind": "row_count", "within_sigma": 3, "runs": 3}},
  "warn": {"nulls_usual": {"kind": "null_share", "column": "kind", "within_sigma": 3, "runs": 3},
           "kinds_usual": {"kind": "distinct_count", "column": "kind", "within_sigma": 1, "runs": 2}}
}', NULL);
CREATE FUNCTION run_job() RETURNS TABLE (run int8, gate text, passed int4, failed int4, skipped int4)
LANGUAGE sql AS $$ SELECT run_id, gate, passed, failed, skipped FROM reconcile_check_run('events_daily') $$;
SELECT * FROM run_job();                                     -- no history
SELECT * FROM run_job();                                     -- 1 run
INSERT INTO events VALUES (101, 'k1', now()), (102, 'k2', now());
SELECT * FROM run_job();                                     -- 2 runs: kinds_usual judged
INSERT INTO events VALUES (103, 'k3', now());
SELECT * FROM run_job();                                     -- normal: within the history
INSERT INTO events SELECT g, NULL, now() FROM generate_series(104, 199) AS g;
INSERT INTO events VALUES (200, 'k9', now());
SELECT * FROM run_job();                                     -- abnormal: rows, NULLs and kinds jump
SELECT c.run_id, c.rule, c.status, c.gate_breach, c.invalid_rows, c.observed,
       round(c.history_mean::numeric, 4) AS mean, round(c.history_stddev::numeric, 4) AS stddev,
       c.history_runs, c.detail
FROM reconcile.check_results c JOIN reconcile.check_runs r USING (run_id)
WHERE r.job = 'events_daily' ORDER BY c.rule, c.run_id;

-- Attached rules may hold anomaly rules: batches leave them out (they
-- measure the relation, not rows), a job over the attached rules runs them.
CREATE TABLE feed (id text PRIMARY KEY, amount int, version bigint NOT NULL,
                   is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea);
CREATE TABLE feed_stage (object_key text, source_row bigint, operation text, id text, version text, amount int);
SELECT reconcile_register(target => 'feed', key_columns => '{id}', version_column => 'version',
                          deleted_column => 'is_deleted', hash_column => 'payload_hash');
SELECT reconcile_set_rules('feed', '{"fail": {"positive": "amount > 0",
                                               "not_empty": {"kind": "row_count", "min": 1}}}');
SELECT reconcile_set_rules('feed', '{"fail": {"nulls": {"kind": "null_share", "column": "nope", "max": 0}}}');
INSERT INTO feed_stage VALUES ('o1', 1, 'UPSERT', 'a', '1', 5);
SELECT status, inserted FROM reconcile_batch(target => 'feed', staged => 'feed_stage',
    manifest => '[{"object_key":"o1","version_id":"a","content_hash":"sha256:01","rows":1}]');
SELECT c.rule, c.status FROM reconcile.check_results c JOIN reconcile.check_runs r USING (run_id)
WHERE r.batch_id IS NOT NULL ORDER BY c.rule;
INSERT INTO reconcile.check_jobs VALUES ('feed_attached', 'feed', NULL, NULL);
SELECT job, passed, failed, gate FROM reconcile_check_run('feed_attached');

-- A column that does not exist or has the wrong type is the rule's ERROR.
SELECT rule, status, gate_breach, sqlstate, detail
FROM reconcile_check('events', '{"fail": {"a": {"kind": "null_share", "column": "nope", "max": 0.5}},
                                 "warn": {"b": {"kind": "freshness", "column": "kind", "max": 5}}}');

-- Bad definitions are refused with the document (22023).
\set VERBOSITY default
SELECT reconcile_check('events', '{"fail": {"a": {"kind": "row_total", "min": 1}}}');
SELECT reconcile_check('events', '{"fail": {"a": {"kind": "row_count"}}}');
SELECT reconcile_check('events', '{"fail": {"a": {"kind": "null_share", "max": 0.1}}}');
SELECT reconcile_check('events', '{"fail": {"a": {"kind": "row_count", "column": "id", "min": 1}}}');
SELECT reconcile_check('events', '{"fail": {"a": {"kind": "row_count", "within_sigma": 3}}}');
SELECT reconcile_check('events', '{"fail": {"a": {"kind": "row_count", "runs": 5}}}');
SELECT reconcile_check('events', '{"fail": {"a": {"kind": "row_count", "within_sigma": -1, "runs": 5}}}');
SELECT reconcile_check('events', '{"fail": {"a": {"kind": "row_count", "within_sigma": 2, "runs": 1.5}}}');
SELECT reconcile_check('events', '{"fail": {"a": {"kind": "row_count", "min": 5, "max": 1}}}');
SELECT reconcile_check('events', '{"fail": {"a": {"kind": "row_count", "min": "5"}}}');
SELECT reconcile_check('events', '{"fail": {"a": {"kind": "row_count", "min": 1, "sql": "true"}}}');
SELECT reconcile_check('events', '{"fail": {"a": {"kind": "row_count", "min": 1, "mostly": 0.5}}}');
SELECT reconcile_check('events', '{"drop": {"a": {"kind": "row_count", "min": 1}}}');
SELECT reconcile_check('events', '{"fail": {"a": {"min": 1}}}');
\set VERBOSITY terse

DROP FUNCTION run_job();
DROP TABLE events, no_events, feed, feed_stage;
DROP EXTENSION reconcile;
