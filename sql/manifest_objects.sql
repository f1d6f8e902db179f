-- Many objects in one manifest (issue 23, point 5): each object of a
-- batch is a row of reconcile.batch_objects carrying its counts, the
-- receipt keeps no objects document (objects is NULL, also in the receipt
-- returned), a replay is answered from the receipt, and
-- reconcile_receipt_objects gives the per-object counts back as 1.1's
-- document.  Refusals write nothing.  Then a batch of 600,000 objects
-- (more than 1.1's limit of 500,000) commits and replays.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

CREATE FUNCTION try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || left(SQLERRM, 160);
END $$;

CREATE TABLE t (id integer PRIMARY KEY, name text, version bigint NOT NULL,
                deleted boolean NOT NULL DEFAULT false, hash bytea);
SELECT reconcile_register('t', '{id}', 'version', 'deleted', 'hash');
CREATE TABLE s (object_key text, source_row bigint, operation text, id integer,
                name text, version bigint);

-- ---- 20,000 objects, the first 1,000 with a row each ----
INSERT INTO s SELECT 'o/' || g, 1, 'UPSERT', g, 'n' || g, 1 FROM generate_series(1, 1000) AS g;
-- object o/1000's row is staged twice (a duplicate) and o/999's is a reject
INSERT INTO s VALUES ('o/1000', 2, 'UPSERT', 1000, 'n1000', 1);
UPDATE s SET operation = 'MERGE' WHERE object_key = 'o/999';
CREATE TABLE big AS
    SELECT jsonb_agg(jsonb_build_object('object_key', 'o/' || g, 'version_id', '1',
                                        'content_hash', 'h' || g,
                                        'rows', CASE WHEN g < 1000 THEN 1 WHEN g = 1000 THEN 2 ELSE 0 END)) AS m
      FROM generate_series(1, 20000) AS g;

-- Refused, nothing written: the same object version twice at the very end;
-- an object's row count wrong.
SELECT try($$SELECT * FROM reconcile_batch('t', 's',
    (SELECT m || '[{"object_key":"o/20000","version_id":"1","content_hash":"h","rows":0}]' FROM big))$$);
SELECT try($$SELECT * FROM reconcile_batch('t', 's', (SELECT jsonb_set(m, '{19999,rows}', '1') FROM big))$$);
SELECT (SELECT count(*) FROM reconcile.receipts) AS receipts,
       (SELECT count(*) FROM reconcile.batch_objects) AS batch_objects,
       (SELECT count(*) FROM t) AS target_rows;

-- Committed: the receipt returned has no objects document.
SELECT status, staged_rows, inserted, duplicates, rejected, objects IS NULL AS objects_null
  FROM reconcile_batch('t', 's', (SELECT m FROM big), 'feed', 'p1');
SELECT count(*) AS target_rows FROM t;
SELECT manifest = (SELECT m FROM big) AS manifest_kept, objects IS NULL AS objects_null, staged_rows
  FROM reconcile.receipts;
-- Every object is a row, with its counts; they add up to the receipt's.
SELECT count(*) AS objects, count(DISTINCT object_key) AS distinct_keys,
       sum("rows") AS "rows", sum(inserted) AS inserted, sum(duplicates) AS duplicates,
       sum(rejected) AS rejected, sum(updated + deleted + unchanged + stale + conflicts) AS others,
       count(*) FILTER (WHERE inserted IS NULL) AS null_counts
  FROM reconcile.batch_objects;
SELECT object_key, version_id, content_hash, "rows", inserted, duplicates, rejected
  FROM reconcile.batch_objects WHERE object_key IN ('o/1', 'o/999', 'o/1000', 'o/20000')
 ORDER BY object_key;

-- A replay is answered from the receipt: the same row, status replayed.
SELECT status, staged_rows, inserted, duplicates, rejected, objects IS NULL AS objects_null
  FROM reconcile_batch('t', 's', (SELECT m FROM big), 'feed', 'p1');
SELECT count(*) AS receipts, (SELECT count(*) FROM reconcile.batch_objects) AS batch_objects
  FROM reconcile.receipts;

-- The objects document as 1.1 kept it, rebuilt in object_key order.
WITH r AS MATERIALIZED (SELECT reconcile_receipt_objects('t', batch_id) AS o FROM reconcile.receipts)
SELECT jsonb_array_length(o) AS n, o -> 0 AS first, o -> 19999 ->> 'object_key' AS last,
       o @> '[{"object_key":"o/1000","rows":2,"inserted":1,"duplicates":1}]' AS has_o1000,
       o @> '[{"object_key":"o/999","rejected":1}]' AS has_o999
  FROM r;
SELECT reconcile_receipt_objects('t', 'no such batch') IS NULL AS unknown_batch_null;

-- An object version committed once cannot come back with other content,
-- looked up among the rows held.
SELECT try($$SELECT * FROM reconcile_batch('t', 's',
    '[{"object_key":"o/19999","version_id":"1","content_hash":"other","rows":0}]')$$);
SELECT status, inserted FROM reconcile_batch('t', 's',
    '[{"object_key":"o/19999","version_id":"1","content_hash":"h19999","rows":0}]');

-- The foreign key to the receipts stays: a receipt's objects go with it.
SELECT conname, confdeltype FROM pg_constraint
 WHERE conrelid = 'reconcile.batch_objects'::regclass AND contype = 'f';
DELETE FROM reconcile.receipts WHERE staged_rows > 0;
SELECT count(*) AS receipts, (SELECT count(*) FROM reconcile.batch_objects) AS batch_objects
  FROM reconcile.receipts;

-- ---- the sort of the entries (abbreviated keys) is the bytewise order ----
-- Keys in random order sharing prefixes of every length, keys that are
-- prefixes of others, alike in their first 16 bytes after the common
-- prefix, multibyte: the canonical form lists them as ORDER BY ... COLLATE "C".
CREATE TEMP TABLE k AS SELECT DISTINCT set, key, vid FROM (
    SELECT 1 AS set, 'p/' || substr(md5(g::text), 1, g % 40) || CASE WHEN g % 3 = 0 THEN 'é' ELSE '' END AS key,
           (g % 4)::text AS vid FROM generate_series(1, 5000) AS g
    UNION ALL
    SELECT 2, 'same-prefix/' || repeat('x', g % 30) || (g % 7)::text, '1' FROM generate_series(1, 500) AS g) s;
INSERT INTO k SELECT 3, key, vid FROM k;
SELECT set, reconcile_canonical_manifest(jsonb_agg(jsonb_build_object('object_key', key, 'version_id', vid,
                                                   'content_hash', 'h', 'rows', 0) ORDER BY md5(key || vid)))
     = '[' || string_agg(format('{"object_key":"%s","version_id":"%s","content_hash":"h","rows":0}', key, vid),
                         ',' ORDER BY key COLLATE "C", vid COLLATE "C") || ']' AS bytewise_order
  FROM k GROUP BY set ORDER BY set;
DROP TABLE k;

-- ---- 600,000 objects: committed, recorded, replayed ----
DELETE FROM reconcile.receipts;
CREATE TABLE big600k AS
    SELECT ('[' || string_agg(format('{"object_key":"p/%s","version_id":"1","content_hash":"h","rows":0}', g), ',')
            || ']')::jsonb AS m
      FROM generate_series(1, 600000) AS g;
SELECT status, staged_rows, objects IS NULL AS objects_null
  FROM reconcile_batch('t', 's', (SELECT m FROM big600k));
SELECT count(*) AS batch_objects, count(*) FILTER (WHERE inserted = 0 AND rejected = 0) AS counted
  FROM reconcile.batch_objects;
SELECT status, staged_rows FROM reconcile_batch('t', 's', (SELECT m FROM big600k));
SELECT count(*) AS receipts FROM reconcile.receipts;
-- A batch of 30,000 other objects is checked against the 600,000 held (an
-- object version may not come back with other content) in seconds.
SELECT status, staged_rows FROM reconcile_batch('t', 's',
    (SELECT jsonb_agg(jsonb_build_object('object_key', 'q/' || g, 'version_id', '1',
                                         'content_hash', 'h', 'rows', 0)) FROM generate_series(1, 30000) AS g));
SELECT count(*) AS receipts, (SELECT count(*) FROM reconcile.batch_objects) AS batch_objects
  FROM reconcile.receipts;

SELECT reconcile_unregister('t');
DROP TABLE t, s, big, big600k;
DROP FUNCTION try(text);
DROP EXTENSION reconcile;
