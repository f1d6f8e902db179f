-- The upgrade of held conflicts: rows held under 1.0 (hashes only) survive
-- ALTER EXTENSION reconcile UPDATE with no payloads and cannot be resolved;
-- a conflict held under 1.1 keeps its payloads and can; replays still
-- return their receipts.
CREATE EXTENSION reconcile VERSION '1.0';
SET client_min_messages = warning;

CREATE TABLE cu (id int PRIMARY KEY, name text, v bigint NOT NULL,
                 gone boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE cu_stage (object_key text, source_row int, operation text, id text, name text, v text);
SELECT reconcile_register('cu', '{id}', 'v', 'gone', 'h');
INSERT INTO cu_stage VALUES ('o1', 1, 'UPSERT', '1', 'Ana', '1'),
                            ('o1', 2, 'UPSERT', '1', 'Anna', '1'),
                            ('o1', 3, 'UPSERT', '2', 'Bo', '1');
SELECT status, inserted, conflicts FROM reconcile_batch('cu', 'cu_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":3}]');

ALTER EXTENSION reconcile UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'reconcile';

-- The 1.0 rows are there, without payloads.
SELECT key, version, source_row, deleted, staged_payload, existing_payload
  FROM reconcile.conflicts ORDER BY source_row;
SELECT * FROM reconcile_resolve('cu',
    reconcile_batch_id('[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":3}]'),
    '{"id": 1}', (SELECT staged_hash FROM reconcile.conflicts WHERE source_row = 1));
-- The 1.0 batch replays.
SELECT status, inserted, conflicts FROM reconcile_batch('cu', 'cu_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":3}]');

-- A conflict held under 1.1 (against the target's row at v1, with a
-- higher version staged too) keeps its payloads, and is resolved.
INSERT INTO cu_stage VALUES ('o2', 1, 'UPSERT', '2', 'Bob', '1'),
                            ('o2', 2, 'UPSERT', '2', 'Bob', '2');
SELECT status, updated, stale, conflicts FROM reconcile_batch('cu', 'cu_stage',
    '[{"object_key":"o2","version_id":"1","content_hash":"h2","rows":2}]');
SELECT key, version, source_row, deleted, staged_payload, existing_payload
  FROM reconcile.conflicts WHERE object_key = 'o2' ORDER BY source_row;
SELECT status, version, choice, written_version, outcome FROM reconcile_resolve('cu',
    reconcile_batch_id('[{"object_key":"o2","version_id":"1","content_hash":"h2","rows":2}]'),
    '{"id": 2}', (SELECT existing_hash FROM reconcile.conflicts WHERE object_key = 'o2' AND source_row = 1));
SELECT id, name, v FROM cu ORDER BY id;

-- The new table and columns are described, and the table is read as the
-- other state tables are.
SELECT c.relname, a.attname, col_description(c.oid, a.attnum) IS NOT NULL AS commented
  FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0
 WHERE c.oid IN ('reconcile.resolutions'::regclass, 'reconcile.conflicts'::regclass)
   AND a.attname IN ('deleted', 'staged_payload', 'existing_payload', 'decided_by', 'outcome')
 ORDER BY 1, 2;
SELECT obj_description('reconcile.resolutions'::regclass, 'pg_class') IS NOT NULL AS table_commented,
       obj_description('reconcile_resolve(regclass, text, jsonb, bytea)'::regprocedure, 'pg_proc') IS NOT NULL
           AS function_commented;
SELECT relrowsecurity FROM pg_class WHERE oid = 'reconcile.resolutions'::regclass;
SELECT polname, polcmd FROM pg_policy WHERE polrelid = 'reconcile.resolutions'::regclass;

DROP TABLE cu, cu_stage;
DROP EXTENSION reconcile;
