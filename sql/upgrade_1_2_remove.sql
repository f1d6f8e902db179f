-- delete_mode 'remove' over 1.1 data: a 1.1 schema refuses it (the
-- library keeps working there as before); after ALTER EXTENSION reconcile
-- UPDATE, re-registering converts the 1.1 tombstone rows into kept
-- removals, 1.1 receipts still replay, a conflict 1.1 held against a
-- tombstone is resolved against its kept removal, diffs still run, and a
-- purge reopens what it forgets.
CREATE EXTENSION reconcile VERSION '1.1';
SET client_min_messages = notice;

CREATE TABLE acct (id int PRIMARY KEY, name text, v bigint NOT NULL,
                   gone boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE acct_stage (object_key text, source_row int, operation text, id text, name text, v text);
CREATE TABLE acct_copy (id int PRIMARY KEY, name text);
SELECT reconcile_register('acct', '{id}', 'v', 'gone', 'h');
INSERT INTO acct_stage VALUES ('o1', 1, 'UPSERT', '1', 'Ana', '1'),
                              ('o1', 2, 'UPSERT', '2', 'Bo', '1'),
                              ('o1', 3, 'UPSERT', '3', 'Cy', '1'),
                              ('o2', 1, 'DELETE', '1', NULL, '2'),
                              ('o2', 2, 'DELETE', '2', NULL, '4'),
                              ('o3', 1, 'UPSERT', '2', 'Bo four', '4');
SELECT status, inserted, deleted FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":3}]');
SELECT status, deleted FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o2","version_id":"1","content_hash":"h2","rows":2}]');
-- Held by 1.1: a live row at the version of key 2's tombstone.
SELECT status, conflicts FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o3","version_id":"1","content_hash":"h3","rows":1}]');
SELECT id, name, v, gone FROM acct ORDER BY id;

-- The 1.1 schema has no place for kept removals: refused, nothing changed.
SELECT reconcile_register('acct', '{id}', 'v', 'gone', 'h', options => '{"delete_mode": "remove"}');
SELECT options FROM reconcile.targets WHERE target = 'acct'::regclass;

ALTER EXTENSION reconcile UPDATE;
SELECT removed_table FROM reconcile.targets WHERE target = 'acct'::regclass;

-- 1.1 receipts replay.
SELECT status, deleted FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o2","version_id":"1","content_hash":"h2","rows":2}]');
-- Re-registered with delete_mode 'remove': the tombstone rows move.
SELECT reconcile_register('acct', '{id}', 'v', 'gone', 'h', options => '{"delete_mode": "remove"}');
SELECT id, name, v, gone FROM acct ORDER BY id;
SELECT format('SELECT id, v, h IS NOT NULL AS has_hash FROM %s ORDER BY id', removed_table) AS kept_sql
  FROM reconcile.targets WHERE target = 'acct'::regclass \gset
:kept_sql;
-- Still replays; a late lower version of a removed key stays stale.
SELECT status, deleted FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o2","version_id":"1","content_hash":"h2","rows":2}]');
INSERT INTO acct_stage VALUES ('o4', 1, 'UPSERT', '1', 'Ana late', '1');
SELECT status, inserted, stale FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o4","version_id":"1","content_hash":"h4","rows":1}]');
-- The conflict 1.1 held against key 2's tombstone resolves against its
-- kept removal: the staged row comes back as a new row.
SELECT status, choice, outcome FROM reconcile_resolve('acct',
    (SELECT batch_id FROM reconcile.conflicts WHERE target = 'acct'::regclass), '{"id": 2}',
    (SELECT staged_hash FROM reconcile.conflicts WHERE target = 'acct'::regclass));
SELECT id, name, v, gone FROM acct ORDER BY id;
:kept_sql;
-- A diff of the target still runs (its rows are the live ones).
INSERT INTO acct_copy VALUES (2, 'Bo four'), (3, 'Cy');
INSERT INTO reconcile.diff_jobs VALUES ('acct', 'public.acct_copy', 'public.acct', '{id}', '{"compare": ["name"]}');
SELECT job, findings FROM reconcile_diff_run();
-- A purge forgets key 1's removal: the late row then loads.
SELECT reconcile_purge_tombstones('acct', before_version => '3');
INSERT INTO acct_stage VALUES ('o5', 1, 'UPSERT', '1', 'Ana again', '1');
SELECT status, inserted, stale FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o5","version_id":"1","content_hash":"h5","rows":1}]');
SELECT id, name, v, gone FROM acct ORDER BY id;

DELETE FROM reconcile.diff_jobs;
SELECT reconcile_unregister('acct');
DROP TABLE acct, acct_stage, acct_copy;
DROP EXTENSION reconcile;
