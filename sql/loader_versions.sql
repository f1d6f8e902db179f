-- Object versions in the stage: with a version_id column a staged row
-- belongs to the manifest entry of its (object_key, version_id), so several
-- versions of one object load side by side, each counted against its own
-- rows; a row of a version the manifest does not list is no row of the
-- batch.  Without the column, an object has one version per manifest.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

-- A statement's SQLSTATE, message and detail, or 'ok'.
CREATE FUNCTION try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    detail text;
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
    RETURN SQLSTATE || ': ' || SQLERRM || coalesce(nullif(E'\nDETAIL: ' || detail, E'\nDETAIL: '), '');
END $$;

CREATE TABLE customer (id text PRIMARY KEY, name text, version bigint NOT NULL,
                       is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea);
SELECT reconcile_register('customer', '{id}', 'version', 'is_deleted', 'payload_hash');

-- The runbook's stage: keyed by object version.  crm/a.csv was overwritten:
-- VersionId 3Lg (C1 v1, C2 v1) and then 7Qx (C1 v2, C3 v1, and a row
-- whose version is not a number).  A leftover of an older VersionId and a
-- row without one are not in the manifest: not rows of the batch.
CREATE TABLE stage (object_key text, version_id text, source_row bigint, operation text,
                    id text, name text, version text);
INSERT INTO stage VALUES
    ('crm/a.csv', '3Lg', 1, 'UPSERT', 'C1', 'Ana', '1'),
    ('crm/a.csv', '3Lg', 2, 'UPSERT', 'C2', 'Dev', '1'),
    ('crm/a.csv', '7Qx', 1, 'UPSERT', 'C1', 'Ana Lee', '2'),
    ('crm/a.csv', '7Qx', 2, 'UPSERT', 'C3', 'Eve', '1'),
    ('crm/a.csv', '7Qx', 3, 'UPSERT', 'C4', 'Bad', 'v?'),
    ('crm/a.csv', '0ld', 1, 'UPSERT', 'C1', 'Old', '9'),
    ('crm/a.csv', NULL, 1, 'UPSERT', 'C1', 'Nobody', '9'),
    ('crm/b.csv', 'b1', 1, 'UPSERT', 'C5', 'Zed', '1');
CREATE TABLE manifests (name text PRIMARY KEY, m jsonb);
INSERT INTO manifests VALUES ('both', '[
    {"object_key":"crm/a.csv","version_id":"7Qx","content_hash":"sha256:7q","rows":3},
    {"object_key":"crm/a.csv","version_id":"3Lg","content_hash":"sha256:3l","rows":2},
    {"object_key":"crm/b.csv","version_id":"b1","content_hash":"sha256:b1","rows":1}]');

-- The canonical form lists one object's versions by version_id, bytewise,
-- whatever the order given.
SELECT reconcile_canonical_manifest(m) FROM manifests WHERE name = 'both';
SELECT reconcile_batch_id(m) = reconcile_batch_id((SELECT jsonb_agg(e ORDER BY e->>'version_id' DESC)
                                                      FROM jsonb_array_elements(m) e)) AS order_free
  FROM manifests WHERE name = 'both';
-- One version twice is refused.
SELECT try($$SELECT reconcile_batch_id('[{"object_key":"o","version_id":"1","content_hash":"h","rows":1},
                                          {"object_key":"o","version_id":"1","content_hash":"h","rows":1}]')$$);

-- A row count that does not match one version's rows names that version.
SELECT try($$SELECT * FROM reconcile_batch('customer', 'stage',
    jsonb_set((SELECT m FROM manifests WHERE name = 'both'), '{1,rows}', '3'))$$);

-- Both versions load in one batch; the receipt counts each version's rows.
SELECT status, staged_rows, inserted, updated, stale, rejected
  FROM reconcile_batch('customer', 'stage', (SELECT m FROM manifests WHERE name = 'both'));
SELECT id, name, version FROM customer ORDER BY id;
SELECT o->>'object_key' AS object_key, o->>'version_id' AS version_id, (o->>'rows')::int AS rows,
       (o->>'inserted')::int AS inserted, (o->>'stale')::int AS stale, (o->>'rejected')::int AS rejected
  FROM reconcile.receipts r, jsonb_array_elements(reconcile_receipt_objects(r.target, r.batch_id)) o
 WHERE r.target = 'customer'::regclass ORDER BY 1, 2;
SELECT object_key, version_id, content_hash, rows FROM reconcile.batch_objects
 WHERE target = 'customer'::regclass ORDER BY object_key, version_id;
-- The reject names its object version.
SELECT object_key, version_id, source_row, column_name, raw_value FROM reconcile.rejects
 WHERE target = 'customer'::regclass;
-- A replay returns the stored receipt.
SELECT status, staged_rows FROM reconcile_batch('customer', 'stage', (SELECT m FROM manifests WHERE name = 'both'));
-- A committed object version cannot come back with other content.
SELECT try($$SELECT * FROM reconcile_batch('customer', 'stage',
    '[{"object_key":"crm/a.csv","version_id":"7Qx","content_hash":"sha256:other","rows":3}]')$$);

-- Conflicts name the version of each conflicting row: two versions bring
-- C9 at version 1 with different names.
INSERT INTO stage VALUES ('crm/c.csv', 'c1', 1, 'UPSERT', 'C9', 'Nine', '1'),
                         ('crm/c.csv', 'c2', 1, 'UPSERT', 'C9', 'Nina', '1');
INSERT INTO manifests VALUES ('c', '[
    {"object_key":"crm/c.csv","version_id":"c1","content_hash":"sha256:c1","rows":1},
    {"object_key":"crm/c.csv","version_id":"c2","content_hash":"sha256:c2","rows":1}]');
SELECT status, conflicts FROM reconcile_batch('customer', 'stage', (SELECT m FROM manifests WHERE name = 'c'));
SELECT key, version, object_key, version_id, source_row FROM reconcile.conflicts
 WHERE target = 'customer'::regclass ORDER BY version_id;
-- Under 'abort' the error names them with their versions.
CREATE TABLE customer_abort (LIKE customer INCLUDING ALL);
SELECT reconcile_register('customer_abort', '{id}', 'version', 'is_deleted', 'payload_hash', 'abort');
SELECT try($$SELECT * FROM reconcile_batch('customer_abort', 'stage', (SELECT m FROM manifests WHERE name = 'c'))$$);

-- A version_id column of another type is read as its text form.
CREATE TABLE stage_int (object_key text, version_id integer, source_row bigint, operation text,
                        id text, name text, version text);
INSERT INTO stage_int VALUES ('n.csv', 1, 1, 'UPSERT', 'N1', 'One', '1'),
                             ('n.csv', 2, 1, 'UPSERT', 'N1', 'Two', '2');
SELECT status, inserted, updated, stale FROM reconcile_batch('customer', 'stage_int',
    '[{"object_key":"n.csv","version_id":"1","content_hash":"n1","rows":1},
      {"object_key":"n.csv","version_id":"2","content_hash":"n2","rows":1}]');
SELECT id, name, version FROM customer WHERE id = 'N1';

-- Without a version_id column: an object has one version in a manifest,
-- and its rows are that version's (today's behaviour); two versions of one
-- object are refused before anything is read or written.
CREATE TABLE plain (object_key text, source_row bigint, operation text,
                    id text, name text, version text);
INSERT INTO plain VALUES ('p.csv', 1, 'UPSERT', 'P1', 'Pat', '1'), ('p.csv', 2, 'UPSERT', 'P2', 'Pam', 'x');
CREATE TABLE counts_before AS
    SELECT (SELECT count(*) FROM reconcile.receipts) AS receipts, (SELECT count(*) FROM reconcile.rejects) AS rejects,
           (SELECT count(*) FROM customer) AS customers;
SELECT try($$SELECT * FROM reconcile_batch('customer', 'plain',
    '[{"object_key":"p.csv","version_id":"1","content_hash":"p1","rows":2},
      {"object_key":"p.csv","version_id":"2","content_hash":"p2","rows":0}]')$$);
SELECT (SELECT count(*) FROM reconcile.receipts) = receipts AND (SELECT count(*) FROM reconcile.rejects) = rejects
       AND (SELECT count(*) FROM customer) = customers AS nothing_written
  FROM counts_before;
SELECT status, inserted, rejected FROM reconcile_batch('customer', 'plain',
    '[{"object_key":"p.csv","version_id":"1","content_hash":"p1","rows":2}]');
-- The reject still names the version the manifest gives.
SELECT object_key, version_id, source_row, column_name FROM reconcile.rejects WHERE object_key = 'p.csv';
-- A row count mismatch without the column names no version, as before.
SELECT try($$SELECT * FROM reconcile_batch('customer', 'plain',
    '[{"object_key":"p.csv","version_id":"9","content_hash":"p9","rows":3}]')$$);

-- Read in parallel, a stage of many versions gives what a serial read
-- gives: targets, receipts, per-version counts, rejects and conflicts.
CREATE TABLE t_serial (LIKE customer INCLUDING ALL);
CREATE TABLE t_parallel (LIKE customer INCLUDING ALL);
SELECT reconcile_register('t_serial', '{id}', 'version', 'is_deleted', 'payload_hash');
SELECT reconcile_register('t_parallel', '{id}', 'version', 'is_deleted', 'payload_hash');
CREATE TABLE big (object_key text, version_id text, source_row bigint, operation text,
                  id text, name text, version text);
INSERT INTO big
SELECT 'obj-' || (g % 4), 'v' || (g % 3), g, 'UPSERT', 'k' || (g % 600),
       CASE WHEN g % 701 = 0 THEN 'rival' ELSE 'name ' || (g % 600) END,
       CASE WHEN g % 499 = 0 THEN 'bad' ELSE ((g % 7) + 1)::text END
  FROM generate_series(1, 6000) g;
-- a version no manifest lists
INSERT INTO big SELECT object_key, 'v9', source_row, operation, id, name, '99' FROM big WHERE source_row % 10 = 0;
ALTER TABLE big SET (parallel_workers = 2);
CREATE FUNCTION big_manifest(tag text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_agg(jsonb_build_object('object_key', object_key, 'version_id', version_id,
                     'content_hash', tag || object_key || version_id, 'rows', n))
      FROM (SELECT object_key, version_id, count(*) AS n FROM big WHERE version_id <> 'v9'
             GROUP BY 1, 2) o
$$;
SET max_parallel_maintenance_workers = 0;
SELECT status, staged_rows, inserted, updated, stale, duplicates, conflicts, rejected
  FROM reconcile_batch('t_serial', 'big', big_manifest('s'));
-- DEBUG1 says how many workers started.
SET max_parallel_maintenance_workers = 2;
SET client_min_messages = debug1;
SELECT status, staged_rows, inserted, updated, stale, duplicates, conflicts, rejected
  FROM reconcile_batch('t_parallel', 'big', big_manifest('p'));
SET client_min_messages = warning;
RESET max_parallel_maintenance_workers;
SELECT (SELECT count(*) FROM (SELECT id, name, version FROM t_serial
                              EXCEPT SELECT id, name, version FROM t_parallel) d) AS target_differences,
       (SELECT reconcile_receipt_objects(target, batch_id) FROM reconcile.receipts WHERE target = 't_serial'::regclass)
     = (SELECT reconcile_receipt_objects(target, batch_id) FROM reconcile.receipts WHERE target = 't_parallel'::regclass) AS same_objects,
       (SELECT count(*) FROM (SELECT object_key, version_id, source_row, column_name, reason
                                FROM reconcile.rejects WHERE target = 't_serial'::regclass
                              EXCEPT ALL
                              SELECT object_key, version_id, source_row, column_name, reason
                                FROM reconcile.rejects WHERE target = 't_parallel'::regclass) d) AS reject_differences,
       (SELECT count(*) FROM (SELECT key, version, object_key, version_id, source_row
                                FROM reconcile.conflicts WHERE target = 't_serial'::regclass
                              EXCEPT ALL
                              SELECT key, version, object_key, version_id, source_row
                                FROM reconcile.conflicts WHERE target = 't_parallel'::regclass) d) AS conflict_differences;
SELECT count(*) AS rejects, count(DISTINCT version_id) AS versions
  FROM reconcile.rejects WHERE target = 't_parallel'::regclass;

-- A target with a payload column version_id reads the staged column as
-- that payload, as before, not as the object version.
CREATE TABLE doc (id text PRIMARY KEY, version_id text, version bigint NOT NULL,
                  is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea);
SELECT reconcile_register('doc', '{id}', 'version', 'is_deleted', 'payload_hash');
CREATE TABLE doc_stage (object_key text, source_row bigint, operation text, id text,
                        version_id text, version bigint);
INSERT INTO doc_stage VALUES ('d.csv', 1, 'UPSERT', 'X', 'rev-7', 1);
SELECT status, inserted FROM reconcile_batch('doc', 'doc_stage',
    '[{"object_key":"d.csv","version_id":"S3v","content_hash":"d","rows":1}]');
SELECT id, version_id FROM doc;

DROP TABLE customer, customer_abort, stage, stage_int, plain, manifests, counts_before,
    t_serial, t_parallel, big, doc, doc_stage;
DROP FUNCTION try(text), big_manifest(text);
DROP EXTENSION reconcile;
