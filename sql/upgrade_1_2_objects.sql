-- The update from 1.1 for many objects per manifest (issue 23, point 5):
-- a receipt 1.1 wrote (objects as one jsonb document) replays after
-- ALTER EXTENSION reconcile UPDATE exactly as before, its conflict still
-- resolves, reconcile_receipt_objects returns its stored document, and a
-- batch committed after the update keeps its counts in
-- reconcile.batch_objects instead, in the same shape.  The library keeps
-- 1.1's limit of 500,000 objects until the update.
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
CREATE TABLE m1 AS SELECT '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":2},
                            {"object_key":"o2","version_id":"1","content_hash":"h2","rows":2}]'::jsonb AS m;
CREATE TABLE receipt_1_1 AS SELECT * FROM reconcile_batch('acct', 'acct_stage', (SELECT m FROM m1));
SELECT status, inserted, conflicts, jsonb_array_length(objects) AS objects FROM receipt_1_1;
-- 1.1's limit, with the way out named.
CREATE TABLE zeros AS SELECT ('[' || repeat('0,', 500000) || '0]')::jsonb AS m;
SELECT try('SELECT reconcile_batch_id(m) FROM zeros');

ALTER EXTENSION reconcile UPDATE;

-- The 1.1 receipt replays row for row (with 1.2's one more column,
-- deleted_absent, 0 for it), and its document is kept.
SELECT to_jsonb(r) - 'status' - 'deleted_absent' = (SELECT to_jsonb(o) - 'status' FROM receipt_1_1 AS o) AS replay_identical,
       r.deleted_absent, r.status, jsonb_array_length(r.objects) AS objects
  FROM reconcile_batch('acct', 'acct_stage', (SELECT m FROM m1)) AS r;
SELECT reconcile_receipt_objects('acct', batch_id) = (SELECT objects FROM receipt_1_1) AS document_kept
  FROM receipt_1_1;
SELECT object_key, "rows", inserted IS NULL AS counts_in_receipt FROM reconcile.batch_objects ORDER BY 1;
-- Its conflict still resolves.
SELECT status, outcome FROM reconcile_resolve('acct', (SELECT batch_id FROM receipt_1_1), '{"id": 3}',
    (SELECT staged_hash FROM reconcile.conflicts WHERE key = '{"id": 3}' ORDER BY staged_hash LIMIT 1));
SELECT id, name FROM acct ORDER BY id;

-- A batch after the update: counts per object as rows, no document in the
-- receipt, the same document from reconcile_receipt_objects.
TRUNCATE acct_stage;
INSERT INTO acct_stage VALUES ('o3', 1, 'UPSERT', 1, 'Ann', 2), ('o3', 2, 'UPSERT', 4, 'Dee', 1);
SELECT status, inserted, updated, objects IS NULL AS objects_null
  FROM reconcile_batch('acct', 'acct_stage',
       '[{"object_key":"o3","version_id":"1","content_hash":"h3","rows":2}]');
SELECT reconcile_receipt_objects('acct', batch_id) AS objects, objects IS NULL AS stored_null
  FROM reconcile.receipts WHERE staged_rows = 2 AND batch_id <> (SELECT batch_id FROM receipt_1_1);
SELECT object_key, "rows", inserted, updated FROM reconcile.batch_objects ORDER BY 1;
-- The keys of an object in both documents are the same.
SELECT (SELECT array_agg(k ORDER BY k) FROM jsonb_object_keys((SELECT objects -> 0 FROM receipt_1_1)) AS k)
     = (SELECT array_agg(k ORDER BY k) FROM reconcile.receipts AS r,
               jsonb_object_keys(reconcile_receipt_objects(r.target, r.batch_id) -> 0) AS k
         WHERE r.objects IS NULL) AS same_shape;
-- The new limit: 500,001 entries are read (and the first one refused).
SELECT try('SELECT reconcile_batch_id(m) FROM zeros');
-- A diff still runs.
CREATE TABLE acct_copy AS SELECT id, name FROM acct;
UPDATE acct_copy SET name = 'other' WHERE id = 4;
SELECT issue, key FROM reconcile_diff('acct_copy', 'acct', '{id}', '{"compare": ["name"]}');

SELECT reconcile_unregister('acct');
DROP TABLE acct, acct_stage, acct_copy, m1, receipt_1_1, zeros;
DROP FUNCTION try(text);
DROP EXTENSION reconcile;
