-- A manifest given as a relation (issue 23, point 5): reconcile_batch_table
-- reads the entries from a table or view, one per row.  Its batch id is
-- that of the same entries as jsonb, so either form replays the other; the
-- receipt keeps no manifest (NULL), its entries are the rows of
-- reconcile.batch_objects.  Every refusal of a jsonb entry has its
-- relation counterpart with the same SQLSTATE, naming the row's object;
-- the relation is read with the caller's rights.  Then 600,000 objects.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

-- 'ok', or the error's SQLSTATE, message and detail
CREATE FUNCTION try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    detail text;
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
    RETURN SQLSTATE || ': ' || left(SQLERRM, 200) || coalesce(' / ' || left(nullif(detail, ''), 200), '');
END $$;

CREATE TABLE t (id integer PRIMARY KEY, name text, version bigint NOT NULL,
                deleted boolean NOT NULL DEFAULT false, hash bytea);
SELECT reconcile_register('t', '{id}', 'version', 'deleted', 'hash');
CREATE TABLE t2 (LIKE t INCLUDING ALL);
SELECT reconcile_register('t2', '{id}', 'version', 'deleted', 'hash');
CREATE TABLE s (object_key text, source_row bigint, operation text, id integer,
                name text, version bigint);
INSERT INTO s VALUES ('a/1', 1, 'UPSERT', 1, 'one', 1), ('a/1', 2, 'UPSERT', 2, 'two', 1),
                     ('b/é', 1, 'UPSERT', 3, 'three', 1);

-- The manifest as a table, in no particular order, and the same as jsonb.
CREATE TABLE mt (object_key text, version_id varchar, content_hash text, "rows" bigint,
                 note text);
INSERT INTO mt VALUES ('b/é', 'v"1', 'sha256:bb', 1, 'other columns are ignored'),
                      ('c/empty', 'v', 'sha256:cc', 0, NULL),
                      ('a/1', 'v', 'sha256:aa', 2, NULL);
CREATE VIEW mj AS
    SELECT jsonb_agg(jsonb_build_object('object_key', object_key, 'version_id', version_id,
                                        'content_hash', content_hash, 'rows', "rows")
                     ORDER BY object_key DESC) AS m FROM mt;

-- Committed from the table: the batch id is the jsonb manifest's.
SELECT status, staged_rows, inserted, batch_id = (SELECT reconcile_batch_id(m) FROM mj) AS same_id
  FROM reconcile_batch_table('t', 's', 'mt', 'feed', 'p1');
SELECT manifest IS NULL AS manifest_null, objects IS NULL AS objects_null, staged_rows
  FROM reconcile.receipts WHERE target = 't'::regclass;
SELECT object_key, version_id, content_hash, "rows", inserted
  FROM reconcile.batch_objects WHERE target = 't'::regclass ORDER BY object_key COLLATE "C";
SELECT jsonb_array_length(reconcile_receipt_objects('t', batch_id)) AS objects
  FROM reconcile.receipts WHERE target = 't'::regclass;
SELECT "position" FROM reconcile.cursors WHERE target = 't'::regclass;
-- Replayed both ways: as jsonb, and from the table again (nothing written).
SELECT status, inserted FROM reconcile_batch('t', 's', (SELECT m FROM mj));
SELECT status, inserted FROM reconcile_batch_table('t', 's', 'mt');
-- The other way round: committed as jsonb into t2, replayed from the table
-- and from a view that lists the entries in another order.
SELECT status, inserted FROM reconcile_batch('t2', 's', (SELECT m FROM mj));
CREATE VIEW mt_view AS SELECT * FROM mt ORDER BY object_key DESC;
SELECT status, inserted FROM reconcile_batch_table('t2', 's', 'mt');
SELECT status, inserted FROM reconcile_batch_table('t2', 's', 'mt_view');
SELECT count(*) AS receipts, count(*) FILTER (WHERE manifest IS NULL) AS without_manifest
  FROM reconcile.receipts;
SELECT count(*) AS target_rows FROM t;

-- The canonical form's escapes agree with the jsonb path's.
CREATE TABLE mt_esc (object_key text, version_id text, content_hash text, "rows" numeric);
INSERT INTO mt_esc VALUES (E'z"q\\b\n\t\u0001\u001f/é€😀', 'v', 'c', 1), ('Z', 'ü', 'x', 3.000);
-- (refused as incomplete, naming its batch id)
SELECT try($$SELECT * FROM reconcile_batch_table('t', 's', 'mt_esc')$$)
       LIKE '21000: batch ' || reconcile_batch_id($m$[{"rows":1,"content_hash":"c","version_id":"v","object_key":"z\"q\\b\n\t\u0001\u001f/é€😀"},{"object_key":"Z","version_id":"ü","content_hash":"x","rows":3}]$m$)
               || ' is incomplete%' AS same_id;

-- ---- refused, each as its jsonb counterpart ----
CREATE TABLE bad (LIKE mt);
CREATE FUNCTION bad_with(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    TRUNCATE bad;
    INSERT INTO bad SELECT * FROM mt;
    EXECUTE q;
    RETURN try($q$SELECT * FROM reconcile_batch_table('t', 's', 'bad')$q$);
END $$;
SELECT bad_with($$INSERT INTO bad VALUES ('a/1', 'v', 'sha256:zz', 2)$$) AS duplicate;
SELECT bad_with($$UPDATE bad SET object_key = NULL WHERE object_key = 'a/1'$$) AS null_key;
SELECT bad_with($$UPDATE bad SET version_id = NULL WHERE object_key = 'a/1'$$) AS null_version;
SELECT bad_with($$UPDATE bad SET content_hash = NULL WHERE object_key = 'a/1'$$) AS null_hash;
SELECT bad_with($$UPDATE bad SET "rows" = NULL WHERE object_key = 'a/1'$$) AS null_rows;
SELECT bad_with($$UPDATE bad SET content_hash = '' WHERE object_key = 'a/1'$$) AS empty_hash;
SELECT bad_with($$UPDATE bad SET content_hash = repeat('h', 1025) WHERE object_key = 'a/1'$$) AS long_hash;
SELECT bad_with($$UPDATE bad SET object_key = '' WHERE object_key = 'a/1'$$) AS empty_key;
SELECT bad_with($$UPDATE bad SET "rows" = -1 WHERE object_key = 'a/1'$$) AS negative_rows;
SELECT bad_with($$UPDATE bad SET "rows" = 3 WHERE object_key = 'a/1'$$) AS wrong_count;
SELECT bad_with($$UPDATE bad SET content_hash = 'sha256:other' WHERE object_key = 'a/1'$$) AS other_content;
SELECT bad_with('TRUNCATE bad') AS empty_manifest;
-- the jsonb counterparts
SELECT try($$SELECT * FROM reconcile_batch('t', 's', (SELECT m || '[{"object_key":"a/1","version_id":"v","content_hash":"sha256:zz","rows":2}]' FROM mj))$$) AS duplicate;
SELECT try($$SELECT * FROM reconcile_batch('t', 's', (SELECT jsonb_set(m, '{2,content_hash}', 'null') FROM mj))$$) AS null_hash;
SELECT try($$SELECT * FROM reconcile_batch('t', 's', (SELECT jsonb_set(m, '{2,rows}', '-1') FROM mj))$$) AS negative_rows;
-- rows as numeric: an integer value only
ALTER TABLE bad ALTER COLUMN "rows" TYPE numeric;
SELECT bad_with($$UPDATE bad SET "rows" = 2.5 WHERE object_key = 'a/1'$$) AS fractional_rows;
SELECT bad_with($$UPDATE bad SET "rows" = 2.000 WHERE object_key = 'a/1'$$) AS integral_numeric;
SELECT bad_with($$UPDATE bad SET "rows" = 1e19 WHERE object_key = 'a/1'$$) AS rows_out_of_range;
-- the relation's shape
ALTER TABLE bad ALTER COLUMN "rows" TYPE text;
SELECT bad_with('') AS rows_text;
ALTER TABLE bad DROP COLUMN "rows";
SELECT try($$SELECT * FROM reconcile_batch_table('t', 's', 'bad')$$) AS no_rows_column;
ALTER TABLE bad ADD COLUMN "rows" int, ALTER COLUMN content_hash TYPE bytea USING content_hash::bytea;
SELECT try($$SELECT * FROM reconcile_batch_table('t', 's', 'bad')$$) AS hash_bytea;
CREATE INDEX mt_idx ON mt (object_key);
SELECT try($$SELECT * FROM reconcile_batch_table('t', 's', 'mt_idx')$$) AS an_index;
SELECT try($$SELECT * FROM reconcile_batch_table('t', 's', NULL)$$) AS null_manifest;
SELECT try($$SELECT * FROM reconcile_batch_table('t', 's', 'mt', 'feed', NULL)$$) AS source_alone;
-- nothing of the refused batches was written
SELECT (SELECT count(*) FROM reconcile.receipts) AS receipts,
       (SELECT count(*) FROM reconcile.batch_objects) AS batch_objects,
       (SELECT count(*) FROM t) AS target_rows;

-- ---- the caller's rights: SELECT on the manifest relation ----
CREATE ROLE regress_manifest_loader;
GRANT SELECT, INSERT, UPDATE ON t, t2 TO regress_manifest_loader;
GRANT SELECT ON s TO regress_manifest_loader;
CREATE TABLE t3 (LIKE t INCLUDING ALL);
SELECT reconcile_register('t3', '{id}', 'version', 'deleted', 'hash');
GRANT SELECT, INSERT, UPDATE ON t3 TO regress_manifest_loader;
SET ROLE regress_manifest_loader;
SELECT try($$SELECT * FROM reconcile_batch_table('t3', 's', 'mt')$$) AS without_select;
-- a replay is refused likewise: the manifest is read before the receipt is looked up
SELECT try($$SELECT * FROM reconcile_batch_table('t', 's', 'mt')$$) AS replay_without_select;
RESET ROLE;
-- SELECT on the four columns read is enough
GRANT SELECT (object_key, version_id, content_hash, "rows") ON mt TO regress_manifest_loader;
SET ROLE regress_manifest_loader;
SELECT status FROM reconcile_batch_table('t', 's', 'mt');
RESET ROLE;
REVOKE SELECT (content_hash) ON mt FROM regress_manifest_loader;
SET ROLE regress_manifest_loader;
SELECT try($$SELECT * FROM reconcile_batch_table('t', 's', 'mt')$$) AS without_content_hash;
RESET ROLE;
REVOKE ALL ON mt FROM regress_manifest_loader;
-- a view of the manifest reads it with its owner's rights, as any view
GRANT SELECT ON mt_view TO regress_manifest_loader;
SET ROLE regress_manifest_loader;
SELECT status, inserted FROM reconcile_batch_table('t3', 's', 'mt_view');
SELECT status FROM reconcile_batch_table('t', 's', 'mt_view');
RESET ROLE;
REVOKE ALL ON t, t2, t3, s, mt_view FROM regress_manifest_loader;
DROP ROLE regress_manifest_loader;

-- ---- 600,000 objects (more than one jsonb manifest of 1.1 allowed) ----
CREATE TABLE big (object_key text, version_id text, content_hash text, "rows" bigint);
INSERT INTO big SELECT 'big/part-' || lpad(g::text, 7, '0') || '.csv', 'v1',
                       'sha256:' || md5(g::text) || md5(g::text), CASE WHEN g = 1 THEN 1 ELSE 0 END
                  FROM generate_series(1, 600000) AS g;
CREATE TABLE sbig (LIKE s);
INSERT INTO sbig VALUES ('big/part-0000001.csv', 1, 'UPSERT', 100, 'big', 1);
SELECT status, staged_rows, inserted FROM reconcile_batch_table('t', 'sbig', 'big');
SELECT count(*) AS objects FROM reconcile.batch_objects b JOIN reconcile.receipts r USING (target, batch_id)
 WHERE r.manifest IS NULL AND r.staged_rows = 1;
SELECT status FROM reconcile_batch_table('t', 'sbig', 'big');
-- its batch id is the jsonb manifest's, which still fits one jsonb here
SELECT (SELECT batch_id FROM reconcile_batch_table('t', 'sbig', 'big'))
     = reconcile_batch_id((SELECT jsonb_agg(to_jsonb(big)) FROM big)) AS same_id;

DROP TABLE t, t2, t3, s, sbig, mt, mt_esc, bad, big CASCADE;
DROP FUNCTION try(text), bad_with(text);
DROP EXTENSION reconcile;
