-- Held conflicts and their resolution (issue 12, point 4): a held row keeps
-- its payload (and the target's, at the target's version), and
-- reconcile_resolve lets the target's owner decide a quarantined key, once,
-- replay-safe, version-monotonic, through both write paths.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

CREATE TABLE cs (customer_id text PRIMARY KEY, name text, version bigint NOT NULL,
                 is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea);
SELECT reconcile_register('cs', '{customer_id}', 'version', 'is_deleted', 'payload_hash');
CREATE TABLE cs_stage (object_key text, source_row bigint, operation text,
                       customer_id text, version text, name text);

-- Load the staged rows of one object (its rows counted) into cs.
CREATE FUNCTION load(obj text) RETURNS TABLE (status text, updated bigint, stale bigint,
                                             conflicts bigint)
LANGUAGE sql AS $$
    SELECT status, updated, stale, conflicts
      FROM reconcile_batch('cs', 'cs_stage',
           jsonb_build_array(jsonb_build_object('object_key', obj, 'version_id', '1',
               'content_hash', 'h', 'rows', (SELECT count(*) FROM cs_stage WHERE object_key = obj))))
$$;
CREATE FUNCTION batch_of(obj text) RETURNS text LANGUAGE sql AS $$
    SELECT reconcile_batch_id(jsonb_build_array(jsonb_build_object('object_key', obj,
        'version_id', '1', 'content_hash', 'h',
        'rows', (SELECT count(*) FROM cs_stage WHERE object_key = obj))))
$$;
-- The hash of a staged payload, from reconcile.conflicts.
CREATE FUNCTION held_hash(obj text, name text) RETURNS bytea LANGUAGE sql AS $$
    SELECT staged_hash FROM reconcile.conflicts
     WHERE object_key = obj AND staged_payload->>'name' IS NOT DISTINCT FROM name
$$;
CREATE FUNCTION target_hash(obj text, id text) RETURNS bytea LANGUAGE sql AS $$
    SELECT DISTINCT existing_hash FROM reconcile.conflicts
     WHERE object_key = obj AND key->>'customer_id' = id AND existing_hash IS NOT NULL
$$;
CREATE VIEW target_rows AS
    SELECT customer_id, name, version, is_deleted,
           payload_hash = sha256(convert_to('[' || coalesce(to_json(name)::text, 'null') || ','
                                            || is_deleted || ']', 'UTF8')) AS hash_of_name
      FROM cs ORDER BY customer_id;

INSERT INTO cs_stage VALUES ('base', 1, 'UPSERT', 'C1', '2', 'Ana Lee'),
                            ('base', 2, 'UPSERT', 'C2', '1', 'Dev'),
                            ('base', 3, 'UPSERT', 'C3', '1', 'Cy'),
                            ('base', 4, 'UPSERT', 'C4', '1', 'Di');
SELECT * FROM load('base');

-- ---- the issue's example: C1 v2 'Ana Smith' against the target, and C1 v3 ----
INSERT INTO cs_stage VALUES ('b1', 1, 'UPSERT', 'C1', '2', 'Ana Smith'),
                            ('b1', 2, 'UPSERT', 'C1', '3', 'Ana Smith-Lee'),
                            -- C2: two payloads at v2, above the target's v1
                            ('b1', 3, 'UPSERT', 'C2', '2', 'Dev A'),
                            ('b1', 4, 'UPSERT', 'C2', '2', 'Dev B'),
                            -- C3: a live row and a DELETE at v2
                            ('b1', 5, 'UPSERT', 'C3', '2', 'Cy 2'),
                            ('b1', 6, 'DELETE', 'C3', '2', NULL),
                            -- C5: a new key with two payloads at v1
                            ('b1', 7, 'UPSERT', 'C5', '1', 'Eve'),
                            ('b1', 8, 'UPSERT', 'C5', '1', 'Eva'),
                            -- C4: the target's row at v1 against another payload
                            ('b1', 9, 'UPSERT', 'C4', '1', 'Di Two');
SELECT * FROM load('b1');
-- Each held row with its payload, and the target's where it was at that version.
SELECT key, version, source_row, deleted, staged_payload, existing_payload,
       existing_hash IS NOT NULL AS with_target_hash
  FROM reconcile.conflicts WHERE object_key = 'b1' ORDER BY source_row;
-- The payloads are the values the hash is over.
SELECT count(*) AS hashes_of_the_payloads FROM reconcile.conflicts
 WHERE staged_hash = sha256(convert_to('[' || coalesce(to_json(staged_payload->>'name')::text, 'null')
                                       || ',' || deleted || ']', 'UTF8'));

-- Accept 'Ana Smith' at v2: the held v3, in conflict with nothing, loads.
SELECT status, version, choice, written_version, outcome, decided_by
  FROM reconcile_resolve('cs', batch_of('b1'), '{"customer_id": "C1"}', held_hash('b1', 'Ana Smith'));
-- The same decision again: the stored one, nothing changes.
SELECT status, version, choice, written_version, outcome
  FROM reconcile_resolve('cs', batch_of('b1'), '{"customer_id":"C1"}', held_hash('b1', 'Ana Smith'));
-- Another decision for the same key is refused.
SELECT * FROM reconcile_resolve('cs', batch_of('b1'), '{"customer_id": "C1"}', target_hash('b1', 'C1'));
-- C2: 'Dev B' at v2, through the general write path.
SET reconcile.write_path = general;
SELECT status, version, choice, written_version, outcome
  FROM reconcile_resolve('cs', batch_of('b1'), '{"customer_id": "C2"}', held_hash('b1', 'Dev B'));
RESET reconcile.write_path;
-- C3: the DELETE: a tombstone that keeps the last payload.
SELECT status, version, choice, written_version, outcome
  FROM reconcile_resolve('cs', batch_of('b1'), '{"customer_id": "C3"}', held_hash('b1', NULL));
-- C5: a new key, inserted.
SELECT status, version, choice, written_version, outcome
  FROM reconcile_resolve('cs', batch_of('b1'), '{"customer_id": "C5"}', held_hash('b1', 'Eva'));
-- C4: keep the target's row.
SELECT status, version, choice, written_version, outcome
  FROM reconcile_resolve('cs', batch_of('b1'), '{"customer_id": "C4"}',
       (SELECT existing_hash FROM reconcile.conflicts WHERE object_key = 'b1' AND source_row = 9));
SELECT * FROM target_rows;
SELECT key, version, choice, written_version, outcome, decided_by
  FROM reconcile.resolutions ORDER BY key;

-- ---- a staged payload at the target's own version replaces it ----
INSERT INTO cs_stage VALUES ('b2', 1, 'UPSERT', 'C4', '1', 'Di Three');
SELECT * FROM load('b2');
-- In a transaction, rolled back: nothing stays, not even the decision.
BEGIN;
SELECT status, outcome FROM reconcile_resolve('cs', batch_of('b2'), '{"customer_id": "C4"}', held_hash('b2', 'Di Three'));
SELECT * FROM target_rows WHERE customer_id = 'C4';
ROLLBACK;
SELECT count(*) AS decisions_of_b2 FROM reconcile.resolutions WHERE batch_id = batch_of('b2');
SET reconcile.write_path = general;
SELECT status, version, choice, written_version, outcome
  FROM reconcile_resolve('cs', batch_of('b2'), '{"customer_id": "C4"}', held_hash('b2', 'Di Three'));
RESET reconcile.write_path;
SELECT * FROM target_rows WHERE customer_id = 'C4';

-- ---- the target changed since the batch ----
-- C1 at v3 now; a batch holds C1 back at v4, then another loads C1 v5.
INSERT INTO cs_stage VALUES ('b3', 1, 'UPSERT', 'C1', '4', 'Ana X'),
                            ('b3', 2, 'UPSERT', 'C1', '4', 'Ana Y'),
                            ('b3', 3, 'UPSERT', 'C2', '3', 'Dev X'),
                            ('b3', 4, 'UPSERT', 'C2', '3', 'Dev Y');
SELECT * FROM load('b3');
INSERT INTO cs_stage VALUES ('b4', 1, 'UPSERT', 'C1', '5', 'Ana Five');
SELECT * FROM load('b4');
-- Moved past: recorded as stale, nothing written.
SELECT status, version, choice, written_version, outcome
  FROM reconcile_resolve('cs', batch_of('b3'), '{"customer_id": "C1"}', held_hash('b3', 'Ana X'));
SELECT * FROM target_rows WHERE customer_id = 'C1';
-- Written at that very version by someone else since (outside reconcile):
-- refused, the owner decides again knowing it.
UPDATE cs SET version = 3, name = 'Dev Z', payload_hash = NULL WHERE customer_id = 'C2';
SELECT * FROM reconcile_resolve('cs', batch_of('b3'), '{"customer_id": "C2"}', held_hash('b3', 'Dev X'));
-- A held key whose target row at that version changed since:
INSERT INTO cs_stage VALUES ('b5', 1, 'UPSERT', 'C5', '1', 'Evelyn');
SELECT * FROM load('b5');
UPDATE cs SET name = 'Eva K', payload_hash = NULL WHERE customer_id = 'C5';
SELECT * FROM reconcile_resolve('cs', batch_of('b5'), '{"customer_id": "C5"}', held_hash('b5', 'Evelyn'));
-- Keeping the target's row: refused when it changed, or is gone.
SELECT * FROM reconcile_resolve('cs', batch_of('b5'), '{"customer_id": "C5"}',
       (SELECT existing_hash FROM reconcile.conflicts WHERE object_key = 'b5'));
DELETE FROM cs WHERE customer_id = 'C5';
SELECT * FROM reconcile_resolve('cs', batch_of('b5'), '{"customer_id": "C5"}',
       (SELECT existing_hash FROM reconcile.conflicts WHERE object_key = 'b5'));

-- ---- bad input ----
SELECT * FROM reconcile_resolve(NULL, batch_of('b1'), '{"customer_id": "C1"}', held_hash('b1', 'Ana Smith'));
SELECT * FROM reconcile_resolve('cs', NULL, '{"customer_id": "C1"}', held_hash('b1', 'Ana Smith'));
SELECT * FROM reconcile_resolve('cs', batch_of('b1'), NULL, held_hash('b1', 'Ana Smith'));
SELECT * FROM reconcile_resolve('cs', batch_of('b1'), '{"customer_id": "C1"}', NULL);
-- A hash that is not 32 bytes.
SELECT * FROM reconcile_resolve('cs', batch_of('b3'), '{"customer_id": "C2"}', '\x0102');
-- A hash that is none of the payloads at the conflicting version: the
-- choices are listed.
SELECT * FROM reconcile_resolve('cs', batch_of('b3'), '{"customer_id": "C2"}',
       sha256('something else'));
-- A batch never committed into this target.
SELECT * FROM reconcile_resolve('cs', 'deadbeef', '{"customer_id": "C2"}', held_hash('b3', 'Dev X'));
-- A key the batch did not hold back, a key of another shape, a key the
-- batch loaded.
SELECT * FROM reconcile_resolve('cs', batch_of('b3'), '{"customer_id": "C9"}', held_hash('b3', 'Dev X'));
SELECT * FROM reconcile_resolve('cs', batch_of('b3'), '{"id": "C2"}', held_hash('b3', 'Dev X'));
SELECT * FROM reconcile_resolve('cs', batch_of('b3'), '"C2"', held_hash('b3', 'Dev X'));
SELECT * FROM reconcile_resolve('cs', batch_of('b4'), '{"customer_id": "C1"}', held_hash('b3', 'Ana X'));
-- A table that is not registered, or not there.
CREATE TABLE other (customer_id text PRIMARY KEY);
SELECT * FROM reconcile_resolve('other', batch_of('b3'), '{"customer_id": "C2"}', held_hash('b3', 'Dev X'));
SELECT * FROM reconcile_resolve(12345::oid::regclass, batch_of('b3'), '{"customer_id": "C2"}', held_hash('b3', 'Dev X'));
-- Not the owner, even with every right on the table; and a read-only
-- transaction.
CREATE ROLE resolve_loader;
GRANT SELECT, INSERT, UPDATE ON cs TO resolve_loader;
SELECT batch_of('b3') AS b3, held_hash('b3', 'Dev X') AS dev_x \gset
SET ROLE resolve_loader;
SELECT * FROM reconcile_resolve('cs', :'b3', '{"customer_id": "C2"}', :'dev_x');
-- It sees the resolutions of a table it may read.
SELECT count(*) AS resolutions_seen FROM reconcile.resolutions;
RESET ROLE;
REVOKE SELECT ON cs FROM resolve_loader;
SET ROLE resolve_loader;
SELECT count(*) AS resolutions_seen FROM reconcile.resolutions;
RESET ROLE;
BEGIN READ ONLY;
SELECT * FROM reconcile_resolve('cs', batch_of('b3'), '{"customer_id": "C2"}', held_hash('b3', 'Dev X'));
ROLLBACK;
-- Nobody writes the table but the extension.
SET ROLE resolve_loader;
INSERT INTO reconcile.resolutions VALUES ('cs', 'x', '{}', 1, 'staged', '\x00', 1, 'stale', 'me', now());
RESET ROLE;

-- ---- typed payloads come back as they were staged ----
-- Text staged under one DateStyle and TimeZone, resolved under others:
-- the written row has the staged hash, and the values a batch writes.
CREATE TABLE typed (id int PRIMARY KEY, amount numeric(10,2), seen timestamptz, day date,
                    ratio float8, tags text[], doc jsonb, flag boolean,
                    version int NOT NULL, is_deleted boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('typed', '{id}', 'version', 'is_deleted', 'h');
CREATE TABLE typed_twin (LIKE typed INCLUDING ALL);
SELECT reconcile_register('typed_twin', '{id}', 'version', 'is_deleted', 'h');
CREATE TABLE typed_stage (object_key text, source_row bigint, operation text, id text,
                          amount text, seen text, day text, ratio text, tags text,
                          doc text, flag text, version text);
SET datestyle = 'SQL, DMY';
SET timezone = 'Asia/Kolkata';
INSERT INTO typed_stage VALUES
    ('t1', 1, 'UPSERT', '1', '12.5', '05/03/2024 10:00', '05/03/2024', '0.1', '{a,"b c"}', '{"x": [1, 2.50]}', 't', '1'),
    ('t1', 2, 'UPSERT', '1', '12.5', '05/03/2024 10:00', '05/03/2024', '0.1', '{a,"b c"}', '{"x": [1, 2.50]}', 'f', '1'),
    ('t2', 1, 'UPSERT', '1', '12.5', '05/03/2024 10:00', '05/03/2024', '0.1', '{a,"b c"}', '{"x": [1, 2.50]}', 't', '1');
SELECT status, conflicts FROM reconcile_batch('typed', 'typed_stage',
    '[{"object_key":"t1","version_id":"1","content_hash":"h","rows":2}]');
SELECT status, inserted FROM reconcile_batch('typed_twin', 'typed_stage',
    '[{"object_key":"t2","version_id":"1","content_hash":"h","rows":1}]');
SELECT staged_payload FROM reconcile.conflicts WHERE target = 'typed'::regclass AND source_row = 1;
SET datestyle = 'German';
SET timezone = 'America/New_York';
SELECT status, outcome FROM reconcile_resolve('typed',
    reconcile_batch_id('[{"object_key":"t1","version_id":"1","content_hash":"h","rows":2}]'),
    '{"id": 1}', (SELECT staged_hash FROM reconcile.conflicts WHERE target = 'typed'::regclass AND source_row = 1));
RESET datestyle;
RESET timezone;
SELECT (SELECT row(t.*)::text FROM typed t) = (SELECT row(t.*)::text FROM typed_twin t) AS same_as_a_batch;

-- ---- a partitioned target, a leaf with its columns in another order ----
CREATE TABLE parted (id int NOT NULL, label text, amount numeric, version int NOT NULL,
                     is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea,
                     PRIMARY KEY (id)) PARTITION BY RANGE (id);
CREATE TABLE parted_low PARTITION OF parted FOR VALUES FROM (MINVALUE) TO (200);
CREATE TABLE parted_high (payload_hash bytea, is_deleted boolean NOT NULL DEFAULT false,
                          version int NOT NULL, amount numeric, label text, id int NOT NULL);
ALTER TABLE parted ATTACH PARTITION parted_high FOR VALUES FROM (200) TO (MAXVALUE);
SELECT reconcile_register('parted', '{id}', 'version', 'is_deleted', 'payload_hash');
CREATE TABLE parted_stage (object_key text, source_row int, operation text, id text,
                           label text, amount text, version text);
INSERT INTO parted_stage VALUES ('a', 1, 'UPSERT', '300', 'x', '1.5', '1'),
                                ('a', 2, 'UPSERT', '5', 'y', '2', '1'),
                                ('b', 1, 'UPSERT', '300', 'x2', '1.5', '1'),
                                ('b', 2, 'UPSERT', '300', 'x3', '1.5', '2'),
                                ('b', 3, 'UPSERT', '5', 'y2', '2', '1');
SELECT status, inserted FROM reconcile_batch('parted', 'parted_stage',
    '[{"object_key":"a","version_id":"1","content_hash":"h","rows":2}]');
SELECT status, conflicts FROM reconcile_batch('parted', 'parted_stage',
    '[{"object_key":"b","version_id":"1","content_hash":"h","rows":3}]');
SELECT key, version, staged_payload, existing_payload FROM reconcile.conflicts
 WHERE target = 'parted'::regclass ORDER BY key, version;
SELECT r.status, r.version, r.written_version, r.outcome
  FROM reconcile.conflicts c, reconcile_resolve('parted', c.batch_id, c.key, c.staged_hash) r
 WHERE c.target = 'parted'::regclass AND c.staged_payload->>'label' IN ('x2', 'y2')
 ORDER BY c.key;
SELECT id, label, amount, version, is_deleted FROM parted ORDER BY id;
DROP TABLE parted, parted_stage;

-- ---- a dropped target takes its resolutions with it ----
SELECT count(*) AS resolutions_before FROM reconcile.resolutions WHERE target = 'typed'::regclass;
DROP TABLE typed;
SELECT count(*) AS resolutions_of_dropped FROM reconcile.resolutions
 WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = target);

DROP TABLE typed_twin, typed_stage, other, cs, cs_stage CASCADE;
DROP FUNCTION load(text), batch_of(text), held_hash(text, text), target_hash(text, text);
DROP ROLE resolve_loader;
DROP EXTENSION reconcile;
