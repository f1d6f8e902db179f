-- reconcile.metrics: per target, diff job and check job, the values a
-- monitoring stack scrapes (monitoring/postgres_exporter/queries.yaml reads
-- this view), and only what the reader may see.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

CREATE TABLE acct (id int PRIMARY KEY, name text, v bigint NOT NULL,
                   gone boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE acct_stage (object_key text, source_row int, operation text, id text, name text, v text);
CREATE TABLE acct_copy (id int PRIMARY KEY, name text);
CREATE TABLE idle (id int PRIMARY KEY, v bigint NOT NULL, gone boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('acct', '{id}', 'v', 'gone', 'h');
SELECT reconcile_register('idle', '{id}', 'v', 'gone', 'h');

-- Nothing has run: a target without batches has counts of zero and no age.
SELECT metric, labels, value FROM reconcile.metrics ORDER BY metric, labels::text;

-- A batch: 3 inserted, 1 rejected, two keys held as conflicts, one of
-- which is then resolved.
INSERT INTO acct_stage VALUES ('o1', 1, 'UPSERT', '1', 'Ana', '1'),
                              ('o1', 2, 'UPSERT', '2', NULL, 'v?'),
                              ('o1', 3, 'UPSERT', '3', 'Bo', '1'),
                              ('o1', 4, 'UPSERT', '3', 'Bea', '1'),
                              ('o1', 5, 'UPSERT', '4', 'Cy', '1'),
                              ('o1', 6, 'UPSERT', '4', 'Cyd', '1'),
                              ('o1', 7, 'UPSERT', '5', 'Di', '1'),
                              ('o1', 8, 'UPSERT', '6', 'Ed', '1');
SELECT status, inserted, conflicts, rejected FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":8}]');
SELECT batch_id AS b1 FROM reconcile.receipts WHERE target = 'acct'::regclass \gset
SELECT encode(staged_hash, 'hex') AS bo_hash FROM reconcile.conflicts
 WHERE target = 'acct'::regclass AND key = '{"id": 3}' ORDER BY staged_hash LIMIT 1 \gset
SELECT status FROM reconcile_resolve('acct', :'b1', '{"id": 3}', decode(:'bo_hash', 'hex'));

-- A diff job: 1 missing, 1 mismatched, 2 extra in target; and a job that fails.
INSERT INTO acct_copy VALUES (1, 'Ana'), (5, 'Dee'), (9, 'Zed');
INSERT INTO reconcile.diff_jobs VALUES ('acct_copy', 'public.acct_copy', 'public.acct', '{id}', '{"compare": ["name"]}'),
                                       ('broken', 'public.nope', 'public.acct', '{id}', NULL);
SELECT job, findings, error IS NOT NULL AS failed FROM reconcile_diff_run() ORDER BY job;

-- Check jobs: one blocked (1 breaching rule, 2 failing: a warn rule too),
-- one passing within its threshold.
INSERT INTO reconcile.check_jobs VALUES
  ('acct_quality', 'acct', '{"fail": {"named": "name IS NOT NULL", "short": "length(name) < 3", "ok": "true"},
                             "warn": {"low_id": "id < 3"}}', '{"sample": 0}'),
  ('acct_loose', 'acct', '{"fail": {"named": {"sql": "length(name) < 3", "mostly": 0.5}}}', NULL);
SELECT job, gate FROM reconcile_check_run() ORDER BY job;

-- Ages are seconds since the event: compare, do not print.
SELECT metric, labels, value FROM reconcile.metrics WHERE metric NOT LIKE '%age_seconds'
 ORDER BY metric, labels::text;
SELECT metric, labels, value >= 0 AND value < 600 AS recent FROM reconcile.metrics
 WHERE metric LIKE '%age_seconds' ORDER BY metric, labels::text;

-- A reader sees the metrics of what it may read: a role with SELECT on
-- acct only sees acct's target metrics and the check jobs over acct, not
-- the diff job over acct_copy nor target idle.
CREATE ROLE regress_metrics_reader;
GRANT SELECT ON acct TO regress_metrics_reader;
SET ROLE regress_metrics_reader;
SELECT DISTINCT metric, labels::text FROM reconcile.metrics
 WHERE metric NOT LIKE 'reconcile_rows_total' ORDER BY 1, 2;
RESET ROLE;

DROP TABLE acct, acct_stage, acct_copy, idle;
DROP ROLE regress_metrics_reader;
DROP EXTENSION reconcile;
