-- How the 1.2 loader options combine on one target: delete_mode "remove"
-- with sparse rows (partial) and with snapshot batches, and a partial
-- snapshot.  Each combination either works by the rules of both options
-- or is refused before anything is written.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;
CREATE SCHEMA mix;
SET search_path = mix, public;

CREATE TABLE acct (id text PRIMARY KEY, name text, city text,
                   version bigint NOT NULL, deleted boolean NOT NULL DEFAULT false, hash bytea);
CREATE TABLE acct_stage (object_key text, source_row bigint, operation text,
                         id text, version text, name text, city text, present_columns text[]);
SELECT reconcile_register(target => 'acct', key_columns => '{id}', version_column => 'version',
    deleted_column => 'deleted', hash_column => 'hash', options => '{"delete_mode": "remove"}');

CREATE FUNCTION load(obj text, rows_ text, opts jsonb DEFAULT NULL)
RETURNS TABLE (status text, inserted bigint, updated bigint, deleted bigint,
               unchanged bigint, stale bigint)
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM acct_stage;
    EXECUTE format('INSERT INTO acct_stage VALUES %s', rows_);
    RETURN QUERY SELECT r.status, r.inserted, r.updated, r.deleted, r.unchanged, r.stale
      FROM reconcile_batch(target => 'acct', staged => 'acct_stage',
             manifest => jsonb_build_array(jsonb_build_object('object_key', obj,
                 'version_id', '1', 'content_hash', 'sha256:' || obj,
                 'rows', (SELECT count(*) FROM acct_stage))), options => opts) AS r;
END $$;
CREATE FUNCTION try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN EXECUTE q; RETURN 'ok';
EXCEPTION WHEN OTHERS THEN RETURN SQLSTATE || ': ' || SQLERRM; END $$;

SELECT * FROM load('b1', $$('b1', 1, 'UPSERT', 'A', '1', 'Ana', 'Oslo', NULL),
                           ('b1', 2, 'UPSERT', 'B', '1', 'Bo', 'Rome', NULL)$$, '{"partial": true}');

-- remove x partial: a sparse update keeps the absent column, a DELETE removes
-- the row, a late lower sparse row is stale, a higher one re-creates the key
-- with its absent columns NULL (the kept removal holds no payload).
SELECT * FROM load('b2', $$('b2', 1, 'UPSERT', 'A', '2', 'Anna', NULL, '{name}')$$, '{"partial": true}');
SELECT id, name, city, version FROM acct ORDER BY id;
SELECT * FROM load('b3', $$('b3', 1, 'DELETE', 'A', '3', NULL, NULL, NULL)$$, '{"partial": true}');
SELECT * FROM load('b4', $$('b4', 1, 'UPSERT', 'A', '2', NULL, 'Bergen', '{city}')$$, '{"partial": true}');
SELECT id, name, city, version FROM acct ORDER BY id;
SELECT * FROM load('b5', $$('b5', 1, 'UPSERT', 'A', '4', NULL, 'Bergen', '{city}')$$, '{"partial": true}');
SELECT id, name, city, version FROM acct ORDER BY id;

-- remove x snapshot: refused before anything is written.
SELECT try($$SELECT * FROM load('b6', $r$('b6', 1, 'UPSERT', 'A', '5', 'Ann', 'Oslo', NULL)$r$,
                                '{"snapshot": {"version": 5, "max_delete_share": 1}}')$$);
SELECT id, name, city, version FROM acct ORDER BY id;
SELECT count(*) AS objects_of_b6, (SELECT count(*) FROM reconcile.batch_objects) AS objects
  FROM reconcile.batch_objects WHERE object_key = 'b6';

-- partial x snapshot on a tombstone target: the absent key becomes a
-- tombstone, the sparse row merges over its key's row.
CREATE TABLE cust (id text PRIMARY KEY, name text, city text,
                   version bigint NOT NULL, deleted boolean NOT NULL DEFAULT false, hash bytea);
SELECT reconcile_register(target => 'cust', key_columns => '{id}', version_column => 'version',
    deleted_column => 'deleted', hash_column => 'hash');
INSERT INTO cust (id, name, city, version) VALUES ('X', 'Xi', 'Lyon', 1), ('Y', 'Yu', 'Nice', 1);
DELETE FROM acct_stage;
INSERT INTO acct_stage VALUES ('s1', 1, 'UPSERT', 'X', '2', 'Xia', NULL, '{name}');
SELECT status, updated, deleted_absent
  FROM reconcile_batch('cust', 'acct_stage',
       '[{"object_key":"s1","version_id":"1","content_hash":"sha256:s1","rows":1}]',
       options => '{"partial": true, "snapshot": {"version": 2, "max_delete_share": 1}}');
SELECT id, name, city, version, deleted FROM cust ORDER BY id;

RESET search_path;
DROP SCHEMA mix CASCADE;
DROP EXTENSION reconcile;
