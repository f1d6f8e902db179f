-- The update from 1.1 for reconcile_repair: 1.1 has no repair functions;
-- state made by 1.1 (a batch and its receipt, a diff job and its run)
-- survives ALTER EXTENSION reconcile UPDATE, the batch still replays, and
-- the job's findings are then repaired, registered and plain targets alike.
CREATE EXTENSION reconcile VERSION '1.1';
SET client_min_messages = warning;

CREATE TABLE acct (id int PRIMARY KEY, name text, v bigint NOT NULL,
                   gone boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE acct_stage (object_key text, source_row int, operation text, id int, name text, v bigint);
SELECT reconcile_register('acct', '{id}', 'v', 'gone', 'h');
INSERT INTO acct_stage VALUES ('o1', 1, 'UPSERT', 1, 'Ana', 1), ('o1', 2, 'UPSERT', 2, 'Bo', 1),
                              ('o1', 3, 'DELETE', 3, 'Cy', 2);
SELECT status, inserted, deleted FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":3}]', 'feed', 'o1');
CREATE TABLE acct_src (id int, name text);
INSERT INTO acct_src VALUES (1, 'Ana'), (2, 'Bob'), (3, 'Cy');
CREATE TABLE plain_src (id int, name text);
CREATE TABLE plain_tgt (id int, name text);
INSERT INTO plain_src VALUES (1, 'a'), (2, 'b');
INSERT INTO plain_tgt VALUES (1, 'A'), (3, 'c');
INSERT INTO reconcile.diff_jobs VALUES ('acct_job', 'public.acct_src', 'public.acct', '{id}', '{"compare": ["name"]}'),
                                       ('plain_job', 'public.plain_src', 'public.plain_tgt', '{id}', NULL);
SELECT job, missing_in_target, extra_in_target, mismatched FROM reconcile_diff_run() ORDER BY job;
SELECT count(*) AS repair_functions FROM pg_proc WHERE proname LIKE 'reconcile_repair%';

ALTER EXTENSION reconcile UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'reconcile';

-- 1.1's batch replays, its receipt unchanged.
SELECT status, inserted, deleted FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":3}]', 'feed', 'o1');
SELECT count(*) AS runs FROM reconcile.diff_runs;

-- The jobs repaired: 2 updated (v2), 3 re-created over its tombstone (v3).
SELECT key, issue, action, outcome FROM reconcile_repair_run('acct_job') ORDER BY key::text;
SELECT id, name, v, gone FROM acct ORDER BY id;
SELECT source, inserted, updated, deleted FROM reconcile.receipts ORDER BY source;
SELECT key, issue, action, outcome FROM reconcile_repair_run('plain_job') ORDER BY key::text;
SELECT * FROM plain_tgt ORDER BY id;
SELECT job, missing_in_target, extra_in_target, mismatched FROM reconcile_diff_run() ORDER BY job;

RESET client_min_messages;
DROP TABLE acct_stage, acct_src, plain_src, plain_tgt;
SELECT reconcile_unregister('acct');
DROP TABLE acct;
DROP EXTENSION reconcile;
