-- The schema version the library decides once per session (state_schema.c)
-- follows ALTER EXTENSION reconcile UPDATE in that same session, and the
-- rollback of one: what a session writes is always the installed schema's.
CREATE EXTENSION reconcile VERSION '1.0';
SET client_min_messages = warning;

CREATE TABLE acct (id int PRIMARY KEY, name text, v bigint NOT NULL,
                   gone boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE acct_stage (object_key text, source_row int, operation text, id text, name text, v text);
CREATE TABLE acct_copy (id int PRIMARY KEY, name text);
SELECT reconcile_register('acct', '{id}', 'v', 'gone', 'h');

-- 1.0: a reject and a held key, written without 1.1's columns.
INSERT INTO acct_stage VALUES ('o1', 1, 'UPSERT', '1', 'Ana', '1'),
                              ('o1', 2, 'UPSERT', '2', NULL, 'v?'),
                              ('o1', 3, 'UPSERT', '3', 'Bo', '1'),
                              ('o1', 4, 'UPSERT', '3', 'Bea', '1');
SELECT status, inserted, conflicts, rejected FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":4}]');

-- 1.1 in the same session: the next batch's reject has its version_id,
-- its held rows their payloads.
ALTER EXTENSION reconcile UPDATE TO '1.1';
TRUNCATE acct_stage;
INSERT INTO acct_stage VALUES ('o2', 1, 'UPSERT', '5', 'Cy', 'x'),
                              ('o2', 2, 'UPSERT', '6', 'Di', '1'),
                              ('o2', 3, 'UPSERT', '6', 'Do', '1');
SELECT status, inserted, conflicts, rejected FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o2","version_id":"7","content_hash":"h2","rows":3}]');
SELECT object_key, source_row, version_id FROM reconcile.rejects ORDER BY object_key;
SELECT object_key, source_row, version_id, deleted, staged_payload
  FROM reconcile.conflicts ORDER BY object_key, source_row;

-- An update to 1.2 rolled back after a run recorded under it: the session
-- is on 1.1 again and records the next run as 1.1 does.
INSERT INTO reconcile.diff_jobs VALUES ('bad', 'public.acct_copy', 'public.acct', '{id}', '{"compare": ["nope"]}');
BEGIN;
ALTER EXTENSION reconcile UPDATE TO '1.2';
SELECT job, error IS NOT NULL AS failed FROM reconcile_diff_run('bad');
ROLLBACK;
SELECT extversion FROM pg_extension WHERE extname = 'reconcile';
SELECT job, error IS NOT NULL AS failed FROM reconcile_diff_run('bad');

-- 1.2 for good: the failed run records its SQLSTATE, which 1.1 has no
-- column for.
ALTER EXTENSION reconcile UPDATE;
SELECT job, error IS NOT NULL AS failed FROM reconcile_diff_run('bad');
SELECT count(*) AS runs, count(sqlstate) AS with_sqlstate FROM reconcile.diff_runs WHERE job = 'bad';

DROP TABLE acct, acct_stage, acct_copy;
DROP EXTENSION reconcile;
