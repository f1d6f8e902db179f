-- Sparse updates (option "partial"): a staged row names the payload
-- columns it carries in present_columns; absent columns keep the target's
-- value, an explicit NULL sets NULL; the hash is over the merged row; two
-- rows of one key and version conflict when their merged payloads differ;
-- several versions of a key in one batch merge in version order.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

CREATE TABLE sp (id integer PRIMARY KEY, name text, city text, score integer,
                 version bigint NOT NULL, is_deleted boolean NOT NULL DEFAULT false,
                 payload_hash bytea);
SELECT reconcile_register('sp', '{id}', 'version', 'is_deleted', 'payload_hash',
                          conflict_policy => 'quarantine');
CREATE TABLE sp_stage (object_key text, source_row bigint, operation text, id text,
                       version text, name text, city text, score text,
                       present_columns text[]);

-- One batch of the object obj into target tgt, with options.
CREATE FUNCTION load(tgt regclass, obj text, opts jsonb DEFAULT '{"partial": true}')
RETURNS TABLE (status text, inserted bigint, updated bigint, deleted bigint,
               unchanged bigint, stale bigint, duplicates bigint, conflicts bigint,
               rejected bigint)
LANGUAGE sql AS $$
    SELECT status, inserted, updated, deleted, unchanged, stale, duplicates, conflicts, rejected
      FROM reconcile_batch(tgt, 'sp_stage',
           jsonb_build_array(jsonb_build_object('object_key', obj, 'version_id', '1',
               'content_hash', 'h', 'rows', (SELECT count(*) FROM sp_stage WHERE object_key = obj))),
           options => opts)
$$;
-- The documented hash of a row of sp (docs/loader.md, "The payload hash").
CREATE FUNCTION doc_hash(name text, city text, score integer, deleted boolean) RETURNS bytea
LANGUAGE sql AS $$
    SELECT sha256(convert_to('[' || coalesce(to_json(name)::text, 'null') || ','
                             || coalesce(to_json(city)::text, 'null') || ','
                             || coalesce(to_json(score::text)::text, 'null') || ','
                             || deleted || ']', 'UTF8'))
$$;
CREATE VIEW sp_rows AS
    SELECT id, name, city, score, version, is_deleted,
           payload_hash = doc_hash(name, city, score, is_deleted) AS hash_ok
      FROM sp ORDER BY id;

INSERT INTO sp_stage VALUES
    ('base', 1, 'UPSERT', '1', '1', 'Ana', 'Oslo', '10', NULL),
    ('base', 2, 'UPSERT', '2', '1', 'Bo', 'Rome', '20', NULL),
    ('base', 3, 'UPSERT', '3', '1', 'Cy', 'Lima', '30', NULL),
    ('base', 4, 'UPSERT', '4', '1', 'Di', 'Kyiv', '40', NULL),
    ('base', 5, 'UPSERT', '5', '1', 'Ed', 'Nome', '50', NULL),
    ('base', 6, 'UPSERT', '6', '5', 'Fa', 'Bern', '60', NULL);
SELECT * FROM load('sp', 'base');

-- Absent vs NULL: 1 changes its city to NULL and keeps name and score (the
-- staged name 'ignored' of an absent column is not read); 2 changes its
-- name only; 3 names every column: a whole row.  Multi-version in one
-- batch: 4 gets v2 {name}, v3 {city}, v4 {score}: all three apply,
-- cumulatively, as v4.  6 is at v5: a sparse v3 is stale.
INSERT INTO sp_stage VALUES
    ('s1', 1, 'UPSERT', '1', '2', 'ignored', NULL, NULL, '{city}'),
    ('s1', 2, 'UPSERT', '2', '2', 'Bob', NULL, NULL, '{name}'),
    ('s1', 3, 'UPSERT', '3', '2', 'Cyd', 'Lyon', NULL, '{score,city,name}'),
    ('s1', 4, 'UPSERT', '4', '3', NULL, 'Lviv', NULL, '{city}'),
    ('s1', 5, 'UPSERT', '4', '2', 'Dina', NULL, NULL, '{name}'),
    ('s1', 6, 'UPSERT', '4', '4', NULL, NULL, '44', '{score}'),
    ('s1', 7, 'UPSERT', '6', '3', 'Old', NULL, NULL, '{name}');
SELECT * FROM load('sp', 's1');
SELECT * FROM sp_rows;

-- The same sparse rows at the target's version again: the merged rows equal
-- the target's, so they are unchanged (a replayed change event), not a
-- conflict.  An empty present_columns carries no column: the row is the
-- target's payload at a new version.
INSERT INTO sp_stage VALUES
    ('s2', 1, 'UPSERT', '1', '2', NULL, NULL, NULL, '{city}'),
    ('s2', 2, 'UPSERT', '2', '2', 'Bob', NULL, NULL, '{name}'),
    ('s2', 3, 'UPSERT', '5', '2', NULL, NULL, NULL, '{}');
SELECT * FROM load('sp', 's2');
SELECT * FROM sp_rows WHERE id IN (1, 2, 5);

-- Conflicts of merged payloads.  Key 1: two rows at v3 changing different
-- columns merge into different payloads: a conflict, held with the merged
-- payloads.  Key 2: two rows at v3 whose merged payloads agree (one also
-- names the target's own city): duplicates.  Key 5: a sparse row at the
-- target's version 2 with another name than the target's: a conflict.
INSERT INTO sp_stage VALUES
    ('s3', 1, 'UPSERT', '1', '3', 'Anna', NULL, NULL, '{name}'),
    ('s3', 2, 'UPSERT', '1', '3', NULL, 'Bergen', NULL, '{city}'),
    ('s3', 3, 'UPSERT', '2', '3', NULL, NULL, '21', '{score}'),
    ('s3', 4, 'UPSERT', '2', '3', NULL, 'Rome', '21', '{score,city}'),
    ('s3', 5, 'UPSERT', '5', '2', 'Eddie', NULL, NULL, '{name}');
SELECT * FROM load('sp', 's3');
SELECT key, version, source_row, staged_payload, existing_payload,
       staged_hash = doc_hash(staged_payload->>'name', staged_payload->>'city',
                              (staged_payload->>'score')::integer, false) AS hash_ok
  FROM reconcile.conflicts WHERE object_key = 's3' ORDER BY source_row;
SELECT * FROM sp_rows WHERE id IN (1, 2, 5);

-- reconcile_resolve writes the held merged payload chosen: key 1 keeps
-- 'Anna' with the target's city and score.
SELECT status, version, choice, outcome
  FROM reconcile_resolve('sp', (SELECT DISTINCT batch_id FROM reconcile.conflicts WHERE object_key = 's3'),
                         '{"id": 1}',
                         (SELECT staged_hash FROM reconcile.conflicts
                           WHERE object_key = 's3' AND source_row = 1));
SELECT * FROM sp_rows WHERE id = 1;

-- A held sparse row records the columns it carried and the target row it
-- was merged over.  Once a later batch has written another row under it
-- (key 1 at v4 from a whole row), resolving the held v5 would write a
-- payload merged over a row that is gone: refused (55000), nothing written.
INSERT INTO sp_stage VALUES
    ('s8', 1, 'UPSERT', '1', '5', 'Zed', NULL, NULL, '{name}'),
    ('s8', 2, 'UPSERT', '1', '5', NULL, 'Zagreb', NULL, '{city}'),
    ('s9', 1, 'UPSERT', '1', '4', 'Anna', 'Turku', '12', NULL);
SELECT * FROM load('sp', 's8');
SELECT source_row, present_columns, merged_over = (SELECT payload_hash FROM sp WHERE id = 1)
       AS merged_over_target
  FROM reconcile.conflicts WHERE object_key = 's8' ORDER BY source_row;
SELECT * FROM load('sp', 's9');
SELECT status, outcome
  FROM reconcile_resolve('sp', (SELECT DISTINCT batch_id FROM reconcile.conflicts WHERE object_key = 's8'),
                         '{"id": 1}',
                         (SELECT staged_hash FROM reconcile.conflicts
                           WHERE object_key = 's8' AND source_row = 1));
SELECT * FROM sp_rows WHERE id = 1;

-- A key the target does not hold: absent columns are NULL (7), or come from
-- a lower staged version of the batch (8: v1 whole, v2 {score}).  A DELETE
-- is whole and keeps the row's payload; a sparse UPSERT above it merges over
-- the kept payload (3: v3 DELETE, v4 {score}).
INSERT INTO sp_stage VALUES
    ('s4', 1, 'UPSERT', '7', '1', 'Gus', NULL, NULL, '{name}'),
    ('s4', 2, 'UPSERT', '8', '1', 'Hal', 'Graz', '80', NULL),
    ('s4', 3, 'UPSERT', '8', '2', NULL, NULL, '81', '{score}'),
    ('s4', 4, 'DELETE', '3', '3', 'Cyd', 'Lyon', '30', '{nonsense}'),
    ('s4', 5, 'UPSERT', '3', '4', NULL, NULL, '33', '{score}');
SELECT * FROM load('sp', 's4');
SELECT * FROM sp_rows WHERE id IN (3, 7, 8);

-- Bad present_columns: a name that is not a payload column (unknown, the
-- key, the version, the deleted column), a NULL element, a name twice, two
-- dimensions, and a staged payload_hash on a sparse row.  Each is a reject
-- naming the row, the column and the value.
ALTER TABLE sp_stage ADD COLUMN payload_hash text;
INSERT INTO sp_stage VALUES
    ('s5', 1, 'UPSERT', '1', '9', 'x', NULL, NULL, '{nmae}', NULL),
    ('s5', 2, 'UPSERT', '1', '9', 'x', NULL, NULL, '{id}', NULL),
    ('s5', 3, 'UPSERT', '1', '9', 'x', NULL, NULL, '{name,version}', NULL),
    ('s5', 4, 'UPSERT', '1', '9', 'x', NULL, NULL, '{is_deleted}', NULL),
    ('s5', 5, 'UPSERT', '1', '9', 'x', NULL, NULL, '{name,NULL}', NULL),
    ('s5', 6, 'UPSERT', '1', '9', 'x', NULL, NULL, '{name,name}', NULL),
    ('s5', 7, 'UPSERT', '1', '9', 'x', NULL, NULL, '{{name},{city}}', NULL),
    ('s5', 8, 'UPSERT', '1', '9', 'x', NULL, NULL, '{name}', repeat('ab', 32)),
    ('s5', 9, 'UPSERT', '1', '9', 'x', NULL, NULL, '{Name}', NULL);
SELECT * FROM load('sp', 's5');
SELECT source_row, column_name, raw_value, reason
  FROM reconcile.rejects WHERE object_key = 's5' ORDER BY source_row, column_name;
ALTER TABLE sp_stage DROP COLUMN payload_hash;

-- Errors before anything is read.
-- partial must be a boolean
SELECT * FROM load('sp', 's1', '{"partial": "yes"}');
SELECT reconcile_register('sp', '{id}', 'version', 'is_deleted', 'payload_hash',
                          options => '{"partial": 1}');
-- a stage with present_columns, in a batch that is not partial: refused,
-- even with unknown_columns ignored (its absent columns would load as NULL)
SELECT * FROM load('sp', 's6', '{}');
SELECT * FROM load('sp', 's6', '{"unknown_columns": "ignore"}');
-- a partial batch needs present_columns
ALTER TABLE sp_stage RENAME COLUMN present_columns TO present;
SELECT * FROM load('sp', 's6');
ALTER TABLE sp_stage RENAME COLUMN present TO present_columns;
-- present_columns must cast to text[]
CREATE VIEW sp_stage_jsonb AS
    SELECT object_key, source_row, operation, id, version, name, city, score,
           to_jsonb(present_columns) AS present_columns FROM sp_stage;
SELECT status FROM reconcile_batch('sp', 'sp_stage_jsonb',
    '[{"object_key":"jx","version_id":"1","content_hash":"h","rows":0}]',
    options => '{"partial": true}');
-- a target with row rules attached is refused (0A000); dataset checks are not
SELECT reconcile_set_rules('sp', '{"drop": {"score_positive": "score > 0"}}');
SELECT * FROM load('sp', 's6');
SELECT reconcile_set_rules('sp', '{"dataset_checks": [{"name": "no_negative_score", "sql": "SELECT id FROM {{TABLE}} WHERE score < 0"}]}');
INSERT INTO sp_stage VALUES ('s6', 1, 'UPSERT', '5', '3', NULL, NULL, '55', '{score}');
SELECT * FROM load('sp', 's6');
SELECT reconcile_set_rules('sp', '{}');
SELECT count(*) AS unchanged_rows FROM sp_rows;

-- The registration's option: partial by default, a batch may turn it off.
SELECT reconcile_register('sp', '{id}', 'version', 'is_deleted', 'payload_hash',
                          conflict_policy => 'quarantine', options => '{"partial": true}');
INSERT INTO sp_stage VALUES ('s7', 1, 'UPSERT', '2', '5', NULL, 'Pisa', NULL, '{city}');
SELECT * FROM load('sp', 's7', NULL);
SELECT * FROM sp_rows WHERE id = 2;

-- The direct and the general path agree, row for row and hash for hash:
-- the same batches into a copy of the target, written by the general path.
CREATE TABLE sp_general (LIKE sp INCLUDING ALL);
SELECT reconcile_register('sp_general', '{id}', 'version', 'is_deleted', 'payload_hash',
                          conflict_policy => 'quarantine');
SET reconcile.write_path = 'general';
SELECT obj, (load('sp_general', obj)).*
  FROM unnest('{base,s1,s2,s3,s8,s9,s4,s6,s7}'::text[]) WITH ORDINALITY AS o(obj, n) ORDER BY n;
RESET reconcile.write_path;
SELECT (SELECT count(*) FROM sp s JOIN sp_general g USING (id)
         WHERE (s.name, s.city, s.score, s.version, s.is_deleted, s.payload_hash)
               IS NOT DISTINCT FROM (g.name, g.city, g.score, g.version, g.is_deleted, g.payload_hash))
       AS same_rows,
       (SELECT count(*) FROM sp) AS sp_rows, (SELECT count(*) FROM sp_general) AS general_rows;
-- (no row differs: key 1's resolution in sp was overwritten by s9 in both)
SELECT s.id, s.name, g.name AS general_name FROM sp s JOIN sp_general g USING (id)
 WHERE s.payload_hash IS DISTINCT FROM g.payload_hash ORDER BY id;

-- Applying the sparse rows one at a time, in version order, each in its own
-- batch, leaves the same rows as one batch of them all.
CREATE TABLE sp_one (LIKE sp INCLUDING ALL);
SELECT reconcile_register('sp_one', '{id}', 'version', 'is_deleted', 'payload_hash');
CREATE TABLE sp_all (LIKE sp INCLUDING ALL);
SELECT reconcile_register('sp_all', '{id}', 'version', 'is_deleted', 'payload_hash');
DELETE FROM sp_stage;
INSERT INTO sp_stage VALUES
    ('m0', 1, 'UPSERT', '1', '1', 'A', 'X', '1', NULL),
    ('m0', 2, 'UPSERT', '2', '1', 'B', 'Y', '2', NULL),
    ('m1', 1, 'UPSERT', '1', '2', 'A2', NULL, NULL, '{name}'),
    ('m2', 1, 'UPSERT', '1', '3', NULL, NULL, NULL, '{score,city}'),
    ('m3', 1, 'UPSERT', '1', '4', 'A4', 'X4', NULL, '{city}'),
    ('m1', 2, 'DELETE', '2', '2', NULL, NULL, NULL, NULL),
    ('m2', 2, 'UPSERT', '2', '3', NULL, 'Y3', NULL, '{city}'),
    ('m3', 3, 'UPSERT', '3', '2', NULL, NULL, '9', '{score}'),
    ('m2', 3, 'UPSERT', '3', '1', 'C', NULL, NULL, '{name}'),
    ('m0', 3, 'UPSERT', '4', '1', 'D', 'W', '4', NULL),
    ('m1', 4, 'UPSERT', '4', '2', 'D2', NULL, NULL, '{name}'),
    ('m2', 4, 'DELETE', '4', '3', 'x', 'x', '0', NULL),
    ('m3', 4, 'UPSERT', '4', '4', NULL, NULL, '44', '{score}'),
    ('m1', 5, 'UPSERT', '5', '2', 'E2', NULL, NULL, '{name}'),
    ('m2', 5, 'DELETE', '5', '3', 'y', 'y', '0', NULL);
SELECT * FROM load('sp_one', 'm0');
SELECT obj, (load('sp_one', obj)).* FROM unnest('{m1,m2,m3}'::text[]) AS obj ORDER BY obj;
SELECT status, inserted, updated, deleted, stale, conflicts
  FROM reconcile_batch('sp_all', 'sp_stage', (SELECT jsonb_agg(jsonb_build_object(
           'object_key', o, 'version_id', '1', 'content_hash', 'h',
           'rows', (SELECT count(*) FROM sp_stage WHERE object_key = o)))
         FROM unnest('{m0,m1,m2,m3}'::text[]) AS o), options => '{"partial": true}');
SELECT a.id, a.name, a.city, a.score, a.version, a.is_deleted,
       (a.*)::text = (o.*)::text AS same_as_one_by_one
  FROM sp_all a FULL JOIN sp_one o USING (id) ORDER BY id;
-- (4: v2 {name}, then a DELETE at v3 keeps 'D2', and v4 {score} revives it
-- over that; 5: the tombstone at v3 keeps v2's 'E2'.  Written by the
-- general path too.)
CREATE TABLE sp_all_general (LIKE sp INCLUDING ALL);
SELECT reconcile_register('sp_all_general', '{id}', 'version', 'is_deleted', 'payload_hash');
SET reconcile.write_path = 'general';
SELECT status, inserted, updated, deleted, stale, conflicts
  FROM reconcile_batch('sp_all_general', 'sp_stage', (SELECT jsonb_agg(jsonb_build_object(
           'object_key', o, 'version_id', '1', 'content_hash', 'h',
           'rows', (SELECT count(*) FROM sp_stage WHERE object_key = o)))
         FROM unnest('{m0,m1,m2,m3}'::text[]) AS o), options => '{"partial": true}');
RESET reconcile.write_path;
SELECT count(*) AS same_rows FROM sp_all a JOIN sp_all_general g USING (id)
 WHERE (a.*)::text = (g.*)::text;

-- The JSON form: change events as jsonb documents whose missing keys are
-- absent.  A view names the keys in present_columns and reads the values.
CREATE TABLE sp_events (object_key text, source_row bigint, op text, doc jsonb);
CREATE VIEW sp_event_stage AS
    SELECT object_key, source_row, op AS operation, doc->>'id' AS id,
           doc->>'version' AS version, doc->>'name' AS name, doc->>'city' AS city,
           doc->>'score' AS score,
           ARRAY(SELECT k FROM jsonb_object_keys(doc) AS k
                  WHERE k NOT IN ('id', 'version')) AS present_columns
      FROM sp_events;
INSERT INTO sp_events VALUES
    ('e1', 1, 'UPSERT', '{"id": 1, "version": 5, "city": null}'),
    ('e1', 2, 'UPSERT', '{"id": 2, "version": 5, "name": "Bee", "score": 7}'),
    ('e1', 3, 'UPSERT', '{"id": 9, "version": 1, "name": "New", "city": "Oslo", "score": 1}'),
    ('e1', 4, 'UPSERT', '{"id": 3, "version": 5, "nmae": "typo"}');
SELECT status, updated, inserted, rejected
  FROM reconcile_batch('sp_all', 'sp_event_stage',
       '[{"object_key":"e1","version_id":"1","content_hash":"h","rows":4}]',
       options => '{"partial": true}');
SELECT source_row, column_name, raw_value, reason FROM reconcile.rejects
 WHERE object_key = 'e1';
SELECT id, name, city, score, version,
       payload_hash = doc_hash(name, city, score, is_deleted) AS hash_ok
  FROM sp_all ORDER BY id;

DROP VIEW sp_rows, sp_stage_jsonb, sp_event_stage;
DROP TABLE sp, sp_stage, sp_general, sp_one, sp_all, sp_all_general, sp_events;
DROP FUNCTION load(regclass, text, jsonb), doc_hash(text, text, integer, boolean);
DROP EXTENSION reconcile;
