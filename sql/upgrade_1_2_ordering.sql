-- The update from 1.1 and orderings other than an integer: a target of
-- 1.1 with held conflicts and a resolution keeps replaying and resolving
-- after ALTER EXTENSION reconcile UPDATE (its held rows have a bigint
-- version and no text form); the library refuses a timestamptz version
-- column while the schema is still 1.1, and loads, holds and resolves one
-- after the update.
CREATE EXTENSION reconcile VERSION '1.1';
SET client_min_messages = warning;

CREATE TABLE acct (id int PRIMARY KEY, name text, v bigint NOT NULL,
                   gone boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE acct_stage (object_key text, source_row int, operation text, id text, name text, v text);
SELECT reconcile_register('acct', '{id}', 'v', 'gone', 'h');
INSERT INTO acct_stage VALUES ('o1', 1, 'UPSERT', '1', 'Ana', '1'),
                              ('o1', 2, 'UPSERT', '3', 'Bo', '5'),
                              ('o1', 3, 'UPSERT', '3', 'Bea', '5'),
                              ('o1', 4, 'UPSERT', '4', 'Cy', '7'),
                              ('o1', 5, 'UPSERT', '4', 'Cyd', '7');
SELECT status, inserted, conflicts FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":5}]');
SELECT batch_id AS b1 FROM reconcile.receipts WHERE target = 'acct'::regclass \gset
SELECT encode(staged_hash, 'hex') AS bo_hash FROM reconcile.conflicts
 WHERE target = 'acct'::regclass AND source_row = 2 \gset
SELECT encode(staged_hash, 'hex') AS cy_hash FROM reconcile.conflicts
 WHERE target = 'acct'::regclass AND source_row = 4 \gset
SELECT * FROM reconcile_resolve('acct', :'b1', '{"id": 3}', decode(:'bo_hash', 'hex')) r
  \gset r_
SELECT :'r_status' AS status, :'r_version' AS version, :'r_written_version' AS written_version, :'r_outcome' AS outcome;

-- On the 1.1 schema the library refuses a version column it could not hold conflicts of.
CREATE TABLE ev (id int PRIMARY KEY, name text, at timestamptz NOT NULL,
                 gone boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE ev_stage (object_key text, source_row int, operation text, id text, name text, at text);
DO $$
BEGIN
    PERFORM reconcile_register('ev', '{id}', 'at', 'gone', 'h');
EXCEPTION WHEN feature_not_supported THEN
    RAISE WARNING '%: %', SQLSTATE, SQLERRM;
END $$;

ALTER EXTENSION reconcile UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'reconcile';

-- The 1.1 rows: bigint versions, no text form.
SELECT key, version, ordering, source_row FROM reconcile.conflicts
 WHERE target = 'acct'::regclass ORDER BY source_row;
-- A replay of the 1.1 batch is answered from its receipt.
SELECT status, inserted, conflicts FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":5}]');
-- The 1.1 decision again is a replay, its versions given as text too; another is refused.
SELECT status, version, written_version, outcome, ordering, written_ordering
  FROM reconcile_resolve('acct', :'b1', '{"id": 3}', decode(:'bo_hash', 'hex'));
DO $$
BEGIN
    PERFORM reconcile_resolve('acct', (SELECT batch_id FROM reconcile.receipts LIMIT 1), '{"id": 3}',
        (SELECT staged_hash FROM reconcile.conflicts WHERE source_row = 3));
EXCEPTION WHEN unique_violation THEN
    RAISE WARNING '%: %', SQLSTATE, SQLERRM;
END $$;
-- The key 1.1 held and nobody decided resolves now, from its bigint version.
SELECT status, version, written_version, outcome, ordering, written_ordering
  FROM reconcile_resolve('acct', :'b1', '{"id": 4}', decode(:'cy_hash', 'hex'));
SELECT id, name, v FROM acct ORDER BY id;
-- A new conflict on the bigint target is held with both forms.
INSERT INTO acct_stage VALUES ('o2', 1, 'UPSERT', '1', 'Ann', '9'), ('o2', 2, 'UPSERT', '1', 'Anna', '9');
SELECT status, conflicts FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o2","version_id":"1","content_hash":"h2","rows":2}]');
SELECT version, ordering, source_row FROM reconcile.conflicts
 WHERE target = 'acct'::regclass AND object_key = 'o2' ORDER BY source_row;

-- After the update a timestamptz version column registers, loads, holds and resolves.
SELECT reconcile_register('ev', '{id}', 'at', 'gone', 'h');
INSERT INTO ev_stage VALUES ('e1', 1, 'UPSERT', '1', 'x', '2026-06-01 12:00:00+00'),
                            ('e1', 2, 'UPSERT', '1', 'y', '2026-06-01 14:00:00+02'),
                            ('e1', 3, 'UPSERT', '2', 'z', '2026-06-01 12:00:00+00'),
                            ('e1', 4, 'UPSERT', '2', 'z', '2026-05-31 12:00:00+00');
SELECT status, inserted, stale, conflicts FROM reconcile_batch('ev', 'ev_stage',
    '[{"object_key":"e1","version_id":"1","content_hash":"he","rows":4}]');
SELECT key, version, ordering, source_row FROM reconcile.conflicts
 WHERE target = 'ev'::regclass ORDER BY source_row;
SELECT status, version, written_version, outcome, ordering, written_ordering
  FROM reconcile_resolve('ev', (SELECT batch_id FROM reconcile.receipts WHERE target = 'ev'::regclass),
                         '{"id": 1}', (SELECT staged_hash FROM reconcile.conflicts
                                        WHERE target = 'ev'::regclass AND source_row = 2));
SET TimeZone = 'UTC';
SELECT id, name, at FROM ev ORDER BY id;

DROP TABLE acct, acct_stage, ev, ev_stage;
DROP EXTENSION reconcile;
