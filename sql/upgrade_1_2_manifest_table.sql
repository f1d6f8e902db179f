-- The update from 1.1 for manifests given as a relation (issue 23, point
-- 5): reconcile_batch_table does not exist under 1.1; after ALTER
-- EXTENSION reconcile UPDATE a receipt 1.1 wrote from a jsonb manifest is
-- replayed from the same entries given as a table, its conflict still
-- resolves, and a new batch from a table commits with no manifest kept,
-- replays as jsonb, and reconcile_receipt_objects reads its objects.
CREATE EXTENSION reconcile VERSION '1.1';
SET client_min_messages = warning;

CREATE FUNCTION try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || left(SQLERRM, 120);
END $$;

CREATE TABLE acct (id int PRIMARY KEY, name text, v bigint NOT NULL,
                   gone boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE acct_stage (object_key text, source_row int, operation text, id int, name text, v bigint);
SELECT reconcile_register('acct', '{id}', 'v', 'gone', 'h');
-- Two objects: inserts, and a conflict (key 3 twice at version 1).
INSERT INTO acct_stage VALUES ('o1', 1, 'UPSERT', 1, 'Ana', 1), ('o1', 2, 'UPSERT', 2, 'Bo', 1),
                              ('o2', 1, 'UPSERT', 3, 'Cy', 1), ('o2', 2, 'UPSERT', 3, 'Cyd', 1);
CREATE TABLE m1 (object_key text, version_id text, content_hash text, "rows" bigint);
INSERT INTO m1 VALUES ('o2', '1', 'h2', 2), ('o1', '1', 'h1', 2);
CREATE TABLE receipt_1_1 AS
    SELECT * FROM reconcile_batch('acct', 'acct_stage', (SELECT jsonb_agg(to_jsonb(m1)) FROM m1));
SELECT status, inserted, conflicts FROM receipt_1_1;
SELECT try($$SELECT * FROM reconcile_batch_table('acct', 'acct_stage', 'm1')$$) AS before_update;

ALTER EXTENSION reconcile UPDATE;

-- The 1.1 receipt is the table's batch: replayed, row for row (1.2's
-- receipt adds deleted_absent, 0).
SELECT to_jsonb(r) - 'status' - 'deleted_absent' = (SELECT to_jsonb(o) - 'status' FROM receipt_1_1 AS o) AS replay_identical,
       r.deleted_absent,
       r.status
  FROM reconcile_batch_table('acct', 'acct_stage', 'm1') AS r;
SELECT manifest IS NOT NULL AS manifest_kept FROM reconcile.receipts;
-- Its conflict resolves as before.
SELECT status, outcome FROM reconcile_resolve('acct', (SELECT batch_id FROM receipt_1_1), '{"id": 3}',
    (SELECT staged_hash FROM reconcile.conflicts WHERE key = '{"id": 3}' ORDER BY staged_hash LIMIT 1));

-- A new batch from a table: committed without a manifest, replayed as jsonb.
TRUNCATE acct_stage;
INSERT INTO acct_stage VALUES ('o3', 1, 'UPSERT', 4, 'Di', 1);
CREATE TABLE m2 (object_key text, version_id text, content_hash text, "rows" int);
INSERT INTO m2 VALUES ('o3', '1', 'h3', 1);
SELECT status, inserted FROM reconcile_batch_table('acct', 'acct_stage', 'm2');
SELECT status, inserted FROM reconcile_batch('acct', 'acct_stage', '[{"object_key":"o3","version_id":"1","content_hash":"h3","rows":1}]');
SELECT count(*) FILTER (WHERE manifest IS NULL) AS without_manifest, count(*) AS receipts
  FROM reconcile.receipts;
SELECT reconcile_receipt_objects('acct', r.batch_id) -> 0 ->> 'object_key' AS object,
       reconcile_receipt_objects('acct', r.batch_id) -> 0 ->> 'inserted' AS inserted
  FROM reconcile.receipts AS r WHERE r.manifest IS NULL;
SELECT id, name FROM acct ORDER BY id;

DROP TABLE acct, acct_stage, m1, m2, receipt_1_1;
DROP FUNCTION try(text);
DROP EXTENSION reconcile;
