-- Manifests: the canonical form, the batch id, and every way a manifest
-- can be refused, including the limits on its size.
CREATE EXTENSION reconcile;

-- The batch id is part of the interface (docs/loader.md, "The batch id"): clients
-- compute it.  These values were fixed before the manifest code was
-- rewritten for speed and must never change.  rows 1e3 and 2.0 are the
-- integers 1000 and 2 and hash as such (the Python in docs/loader.md does the same).
CREATE TEMP TABLE fixed (n int, manifest jsonb);
INSERT INTO fixed VALUES
    (1, $m$[{"object_key":"crm/part-0001.csv","version_id":"3Lg","content_hash":"sha256:9f2c","rows":5}]$m$),
    (2, $m$[{"object_key":"b","version_id":"1","content_hash":"h","rows":0},{"object_key":"a","version_id":"2","content_hash":"h2","rows":9223372036854775807}]$m$),
    (3, $m$[{"rows":1,"content_hash":"c","version_id":"v","object_key":"z\"q\\b\n\t\u0001\u001f/é€😀"},{"object_key":"Z","version_id":"ü","content_hash":"x","rows":3}]$m$),
    (4, $m$[{"object_key":"k","version_id":"v","content_hash":"c","rows":1e3}]$m$),
    (5, $m$[{"object_key":"k","version_id":"v","content_hash":"c","rows":1000}]$m$),
    (6, $m$[{"object_key":"k","version_id":"v","content_hash":"c","rows":2.0}]$m$),
    (7, $m$[{"object_key":"k","version_id":"v","content_hash":"c","rows":2}]$m$),
    (8, $m$[{"object_key":"k","version_id":"v","content_hash":"c","rows":10}]$m$),
    (9, $m$[{"object_key":"k","version_id":"v","content_hash":"c","rows":1.5e1}]$m$),
    (10, $m$[{"object_key":"k","version_id":"v","content_hash":"c","rows":100E-2}]$m$),
    (11, $m$[{"object_key":"k","version_id":"v","content_hash":"c","rows":-0}]$m$),
    (12, $m$[{"object_key":"k","version_id":"v","content_hash":"c","rows":9223372036854775807.000}]$m$);
SELECT n, reconcile_batch_id(manifest) FROM fixed ORDER BY n;
SELECT n, reconcile_canonical_manifest(manifest) FROM fixed ORDER BY n;
-- 1e3 is 1000, 2.0 is 2: one batch id each.
SELECT count(DISTINCT reconcile_batch_id(manifest)) AS ids FROM fixed WHERE n BETWEEN 4 AND 5;
SELECT count(DISTINCT reconcile_batch_id(manifest)) AS ids FROM fixed WHERE n BETWEEN 6 AND 7;
DROP TABLE fixed;

-- Run a statement; show 'ok' or its SQLSTATE, message, detail and hint.
CREATE FUNCTION try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    d text;
    h text;
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL, h = PG_EXCEPTION_HINT;
    RETURN SQLSTATE || ': ' || SQLERRM || E'\n  detail: ' || coalesce(d, '')
        || E'\n  hint: ' || coalesce(h, '');
END $$;

-- rows must be an exact non-negative integer within bigint.
SELECT try($q$SELECT reconcile_batch_id('[{"object_key":"k","version_id":"v","content_hash":"c","rows":2.5}]')$q$);
SELECT try($q$SELECT reconcile_batch_id('[{"object_key":"k","version_id":"v","content_hash":"c","rows":2.0000000000000000001}]')$q$);
SELECT try($q$SELECT reconcile_batch_id('[{"object_key":"k","version_id":"v","content_hash":"c","rows":-1}]')$q$);
SELECT try($q$SELECT reconcile_batch_id('[{"object_key":"k","version_id":"v","content_hash":"c","rows":9223372036854775808}]')$q$);
SELECT try($q$SELECT reconcile_batch_id('[{"object_key":"k","version_id":"v","content_hash":"c","rows":"5"}]')$q$);
SELECT try($q$SELECT reconcile_batch_id('[{"object_key":"k","version_id":"v","content_hash":"c","rows":true}]')$q$);

-- Large inputs: numbers and names are cut short in messages.
SELECT try(format($q$SELECT reconcile_batch_id('[{"object_key":"k","version_id":"v","content_hash":"c","rows":1e100000}]')$q$));
SELECT try(format($q$SELECT reconcile_batch_id('[{"object_key":"k","version_id":"v","content_hash":"c","rows":0.%s1}]')$q$,
                  repeat('0', 10000)));
SELECT try(format($q$SELECT reconcile_batch_id('[{"object_key":"%s","version_id":"v","content_hash":"c","rows":1}]')$q$,
                  repeat('k', 1024 * 1024)));
SELECT try(format($q$SELECT reconcile_batch_id('[{"object_key":"k","version_id":"v","content_hash":"c","rows":1,"%s":1}]')$q$,
                  repeat('é', 512 * 1024)));
-- 1024 bytes is the most a string field may have.
SELECT length(reconcile_batch_id(jsonb_build_array(jsonb_build_object(
    'object_key', repeat('k', 1024), 'version_id', repeat('v', 1024),
    'content_hash', repeat('c', 1024), 'rows', 1))));

-- The manifest's size is bounded before any work: at most 5,000,000
-- objects (500,000 under schema 1.1: upgrade_1_2_objects).  5,000,001
-- entries are refused at once, before any entry is read (a jsonb array of
-- zeros: a jsonb of 5,000,001 real entries would pass PostgreSQL's own
-- 256 MB bound of one jsonb, which refuses it first).
SELECT length(reconcile_batch_id(jsonb_agg(jsonb_build_object(
    'object_key', 'o/' || g, 'version_id', '1', 'content_hash', 'h', 'rows', 0)))) AS above_1_1s_limit
  FROM generate_series(1, 500001) AS g;
CREATE TEMP TABLE too_many AS SELECT ('[' || repeat('0,', 5000000) || '0]')::jsonb AS m;
SELECT try('SELECT reconcile_batch_id(m) FROM too_many');
SELECT try('SELECT reconcile_canonical_manifest(m) FROM too_many');
CREATE TABLE limit_target (id integer PRIMARY KEY, version bigint NOT NULL,
                           deleted boolean NOT NULL DEFAULT false, hash bytea);
SELECT reconcile_register('limit_target', '{id}', 'version', 'deleted', 'hash');
CREATE TABLE limit_stage (object_key text, source_row bigint, operation text,
                          id integer, version bigint);
SELECT try($q$SELECT * FROM too_many, reconcile_batch('limit_target', 'limit_stage', m)$q$);
-- 68 MB of object keys and version ids (1.1 refused more than 64 MB):
-- accepted; PostgreSQL's bound of one jsonb (256 MB) is what bounds them now.
CREATE TEMP TABLE long_names AS
SELECT jsonb_agg(jsonb_build_object('object_key', lpad(g::text, 1000, 'k'),
                                    'version_id', repeat('v', 1000),
                                    'content_hash', 'h', 'rows', 0)) AS m
  FROM generate_series(1, 34000) AS g;
SELECT length(reconcile_batch_id(m)) AS long_names FROM long_names;
SELECT count(*) AS receipts FROM reconcile.receipts;
DROP TABLE too_many, long_names;

-- A receipt's objects document, built element by element, reads back as
-- jsonb built from text would: 100 objects spans several offset strides.
INSERT INTO limit_stage SELECT 'o/' || g, 1, 'UPSERT', g, 1 FROM generate_series(1, 100) AS g;
SELECT status, staged_rows, inserted
  FROM reconcile_batch('limit_target', 'limit_stage',
       (SELECT jsonb_agg(jsonb_build_object('object_key', 'o/' || g, 'version_id', '1',
                                            'content_hash', 'h', 'rows', 1))
          FROM generate_series(1, 100) AS g));
-- (Under schema 1.2 the receipt keeps no document: reconcile_receipt_objects
-- builds it from reconcile.batch_objects.)
SELECT objects IS NULL AS receipt_objects_null FROM reconcile.receipts;
SELECT jsonb_array_length(objects) AS n, objects = objects::text::jsonb AS same_as_parsed,
       objects -> 0 AS first, objects -> 99 ->> 'object_key' AS last,
       objects @> '[{"object_key":"o/57","inserted":1}]' AS contains_o57,
       (SELECT count(*) FROM jsonb_array_elements(objects) AS e
         WHERE (e ->> 'inserted')::int = 1) AS inserted_objects
  FROM (SELECT reconcile_receipt_objects(target, batch_id) AS objects FROM reconcile.receipts) AS r;

SELECT reconcile_unregister('limit_target');
DROP TABLE limit_target, limit_stage;
DROP FUNCTION try(text);
DROP EXTENSION reconcile;
