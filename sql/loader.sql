-- The loader: reconcile_register and reconcile_batch, the runbook scenario
-- and every way a caller can get them wrong.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

CREATE TABLE customer_state (
    customer_id  text PRIMARY KEY,
    name         text,
    version      bigint NOT NULL,
    is_deleted   boolean NOT NULL DEFAULT false,
    payload_hash bytea
);
SELECT reconcile_register(target => 'customer_state', key_columns => '{customer_id}',
    version_column => 'version', deleted_column => 'is_deleted',
    hash_column => 'payload_hash', conflict_policy => 'quarantine');
SELECT target, key_columns, version_column, deleted_column, hash_column,
       payload_columns, conflict_policy
  FROM reconcile.targets;

CREATE TABLE customer_stage (object_key text, source_row bigint, operation text,
                             customer_id text, version text, name text);

-- Receipts without the columns that vary from run to run.
CREATE FUNCTION load(manifest jsonb, source text DEFAULT NULL, pos text DEFAULT NULL)
RETURNS TABLE (status text, staged_rows bigint, inserted bigint, updated bigint,
               deleted bigint, unchanged bigint, stale bigint, duplicates bigint,
               conflicts bigint, rejected bigint)
LANGUAGE sql AS $$
    SELECT status, staged_rows, inserted, updated, deleted, unchanged, stale,
           duplicates, conflicts, rejected
      FROM reconcile_batch(target => 'customer_state', staged => 'customer_stage',
                           manifest => manifest, source => source, "cursor" => pos)
$$;

-- The target holds C1 v1 'Ana'.  The batch runs its own queries without
-- JIT; the session's setting is back afterwards.
INSERT INTO customer_stage VALUES ('crm/part-0000.csv', 1, 'UPSERT', 'C1', '1', 'Ana');
SET jit = on;
SELECT * FROM load('[{"object_key":"crm/part-0000.csv","version_id":"1a","content_hash":"sha256:0000","rows":1}]');
SHOW jit;
RESET jit;

-- The batch: C1 v2 'Ana Lee', C2 v1 'Dev', an exact repeat of it, a
-- malformed version, and a late C1 v1 'Ana'.
INSERT INTO customer_stage VALUES
    ('crm/part-0001.csv', 1, 'UPSERT', 'C1', '2', 'Ana Lee'),
    ('crm/part-0001.csv', 2, 'UPSERT', 'C2', '1', 'Dev'),
    ('crm/part-0001.csv', 3, 'UPSERT', 'C2', '1', 'Dev'),
    ('crm/part-0001.csv', 4, 'UPSERT', 'C3', 'v2?', 'Eve'),
    ('crm/part-0001.csv', 5, 'UPSERT', 'C1', '1', 'Ana');
SELECT * FROM load('[{"object_key":"crm/part-0001.csv","version_id":"3Lg","content_hash":"sha256:9f2c","rows":5}]',
                   'crm-feed', 'crm/part-0001.csv@3Lg');
SELECT customer_id, name, version, is_deleted FROM customer_state ORDER BY 1;
SELECT object_key, source_row, column_name, raw_value, reason FROM reconcile.rejects;
SELECT source, position FROM reconcile.cursors;

-- Replaying the manifest changes nothing and returns the stored receipt.
SELECT * FROM load('[{"object_key":"crm/part-0001.csv","version_id":"3Lg","content_hash":"sha256:9f2c","rows":5}]',
                   'crm-feed', 'crm/part-0001.csv@3Lg');
SELECT count(*) AS receipts FROM reconcile.receipts;
SELECT count(*) AS rejects FROM reconcile.rejects;
-- The replay's receipt is the committed one, field for field.
SELECT r.batch_id = s.batch_id AND r.checksum = s.checksum
       AND r.committed_at = s.committed_at AS same_receipt
  FROM reconcile_batch('customer_state', 'customer_stage',
       '[{"object_key":"crm/part-0001.csv","version_id":"3Lg","content_hash":"sha256:9f2c","rows":5}]') r
  JOIN reconcile.receipts s USING (batch_id);

-- A different payload at C1 v2 is a conflict; C1 stays 'Ana Lee'.
INSERT INTO customer_stage VALUES ('crm/part-0002.csv', 1, 'UPSERT', 'C1', '2', 'Ana Smith');
SELECT * FROM load('[{"object_key":"crm/part-0002.csv","version_id":"1","content_hash":"sha256:2222","rows":1}]');
SELECT key, version, object_key, source_row, existing_hash IS NOT NULL AS against_target
  FROM reconcile.conflicts;
SELECT customer_id, name, version FROM customer_state WHERE customer_id = 'C1';

-- DELETE C1 at v3, then replay the old C1 v2 object under a new manifest:
-- C1 stays a v3 tombstone, only C2 is live.
INSERT INTO customer_stage VALUES ('crm/part-0003.csv', 1, 'DELETE', 'C1', '3', NULL);
SELECT * FROM load('[{"object_key":"crm/part-0003.csv","version_id":"1","content_hash":"sha256:3333","rows":1}]');
SELECT * FROM load('[{"object_key":"crm/part-0001.csv","version_id":"3Lg","content_hash":"sha256:9f2c","rows":5},
                     {"object_key":"crm/part-0009.csv","version_id":"1","content_hash":"sha256:9999","rows":0}]');
SELECT customer_id, name, version, is_deleted FROM customer_state ORDER BY 1;
SELECT customer_id FROM customer_state WHERE NOT is_deleted;

-- A later, higher UPSERT may legitimately re-create the key.
INSERT INTO customer_stage VALUES ('crm/part-0004.csv', 1, 'UPSERT', 'C1', '4', 'Ana Lee-Park');
SELECT * FROM load('[{"object_key":"crm/part-0004.csv","version_id":"1","content_hash":"sha256:4444","rows":1}]');
SELECT customer_id, name, version, is_deleted FROM customer_state ORDER BY 1;

-- The batch id and the payload hash are what docs/loader.md says a client computes.
SELECT reconcile_canonical_manifest('[{"rows":1,"version_id":"b","object_key":"z","content_hash":"h"},
                                      {"object_key":"a\"\\ é","version_id":"1","content_hash":"h","rows":2}]');
SELECT reconcile_batch_id(m) = encode(sha256(convert_to(reconcile_canonical_manifest(m), 'UTF8')), 'hex') AS batch_id_is_digest
  FROM (VALUES ('[{"object_key":"x","version_id":"1","content_hash":"h","rows":0}]'::jsonb)) v(m);
SELECT customer_id,
       payload_hash = sha256(convert_to(jsonb_build_array(name, is_deleted)::text, 'UTF8')) AS jsonb_text_differs,
       payload_hash = sha256(convert_to('[' || coalesce(to_json(name)::text, 'null') || ',' || is_deleted::text || ']', 'UTF8'))
         AS hash_matches
  FROM customer_state ORDER BY 1;
SELECT sum(inserted + updated + deleted + unchanged + stale + duplicates + conflicts + rejected)
       = sum(staged_rows) AS counts_add_up
  FROM reconcile.receipts;

-- ---- conflicts inside a batch, under both policies ----
INSERT INTO customer_stage VALUES
    ('crm/part-0005.csv', 1, 'UPSERT', 'C5', '1', 'Kim'),
    ('crm/part-0005.csv', 2, 'UPSERT', 'C5', '1', 'Kym'),
    ('crm/part-0005.csv', 3, 'UPSERT', 'C5', '2', 'Kim'),
    ('crm/part-0005.csv', 4, 'UPSERT', 'C6', '1', 'Lou');
SELECT reconcile_register('customer_state', '{customer_id}', 'version', 'is_deleted',
                          'payload_hash', 'abort');
SELECT * FROM load('[{"object_key":"crm/part-0005.csv","version_id":"1","content_hash":"sha256:5555","rows":4}]');
SELECT count(*) AS c5_c6 FROM customer_state WHERE customer_id IN ('C5', 'C6');
SELECT reconcile_register('customer_state', '{customer_id}', 'version', 'is_deleted',
                          'payload_hash', 'quarantine');
SELECT * FROM load('[{"object_key":"crm/part-0005.csv","version_id":"1","content_hash":"sha256:5555","rows":4}]');
SELECT key, version, source_row, existing_hash IS NULL AS inside_batch
  FROM reconcile.conflicts WHERE object_key = 'crm/part-0005.csv' ORDER BY source_row;
SELECT customer_id, name FROM customer_state WHERE customer_id IN ('C5', 'C6');

-- ---- refusals: nothing changes ----
-- a partial stage
INSERT INTO customer_stage VALUES ('crm/part-0006.csv', 1, 'UPSERT', 'C7', '1', 'Mo');
SELECT * FROM load('[{"object_key":"crm/part-0006.csv","version_id":"1","content_hash":"sha256:6666","rows":2}]');
-- a committed object version with another content hash
SELECT * FROM load('[{"object_key":"crm/part-0001.csv","version_id":"3Lg","content_hash":"sha256:other","rows":5}]');
SELECT count(*) AS c7 FROM customer_state WHERE customer_id = 'C7';

-- every reject reason
CREATE TABLE typed_state (id int PRIMARY KEY, code varchar(3), amount numeric(8,2),
                          seen date, v int NOT NULL, gone boolean NOT NULL DEFAULT false,
                          h bytea);
SELECT reconcile_register('typed_state', '{id}', 'v', 'gone', 'h');
CREATE TABLE typed_stage (object_key text, source_row int, operation text,
                          id text, code text, amount text, seen text, v text);
INSERT INTO typed_stage VALUES
    ('t1', 1, 'UPSERT', '1', 'abc', '10.5', '2026-11-01', '1'),
    ('t1', 2, 'UPSERT', 'one', 'abc', '1', '2026-11-01', '1'),
    ('t1', 3, 'UPSERT', NULL, 'abc', '1', '2026-11-01', '1'),
    ('t1', 4, 'UPSERT', '4', 'abc', '1', '2026-11-01', NULL),
    ('t1', 5, 'UPSERT', '5', 'abc', '1', '2026-11-01', '1.5'),
    ('t1', 6, 'UPSERT', '6', 'abc', '1', '2026-11-01', '-1'),
    ('t1', 7, 'UPSERT', '7', 'abc', '1', '2026-11-01', '99999999999999999999'),
    ('t1', 8, 'MERGE', '8', 'abc', '1', '2026-11-01', '1'),
    ('t1', 9, NULL, '9', 'abc', '1', '2026-11-01', '1'),
    ('t1', NULL, 'UPSERT', '10', 'abc', '1', '2026-11-01', '1'),
    ('t1', 11, 'UPSERT', '11', 'abcd', '1', '2026-11-01', '1'),
    ('t1', 12, 'UPSERT', '12', 'abc', '1e9', '2026-02-30', 'NaN'),
    ('t1', 13, 'upsert', '13', 'x''y\', '1', '2026-11-01', '1');
SELECT status, staged_rows, inserted, rejected
  FROM reconcile_batch('typed_state', 'typed_stage',
       '[{"object_key":"t1","version_id":"1","content_hash":"h","rows":13}]');
SELECT source_row, column_name, raw_value, reason
  FROM reconcile.rejects WHERE target = 'typed_state'::regclass
 ORDER BY source_row NULLS FIRST, column_name;
SELECT id, code, amount, seen, v FROM typed_state;

-- a composite key, with a view as the stage
CREATE TABLE orders (region text, order_no int, day date, qty int, v bigint NOT NULL,
                     del boolean NOT NULL DEFAULT false, h bytea,
                     PRIMARY KEY (region, order_no, day));
SELECT reconcile_register('orders', '{region,order_no,day}', 'v', 'del', 'h');
CREATE TABLE orders_raw (file text, line bigint, op text, region text, order_no text,
                         day text, qty text, v text);
CREATE VIEW orders_stage AS
    SELECT file AS object_key, line AS source_row, op AS operation, region, order_no,
           day, qty, v FROM orders_raw;
INSERT INTO orders_raw VALUES
    ('o1', 1, 'UPSERT', 'EU', '1', '2026-11-01', '5', '1'),
    ('o1', 2, 'UPSERT', 'EU', '1', '2026-11-02', '6', '1'),
    ('o1', 3, 'UPSERT', 'US', '1', '2026-11-01', '7', '1'),
    ('o1', 4, 'UPSERT', 'EU', '1', '2026-11-01', '8', '2'),
    ('o1', 5, 'DELETE', 'US', '2', '2026-11-01', NULL, '1');
SELECT status, inserted, updated, deleted, stale
  FROM reconcile_batch('orders', 'orders_stage',
       '[{"object_key":"o1","version_id":"1","content_hash":"h","rows":5}]');
SELECT region, order_no, day, qty, v, del FROM orders ORDER BY 1, 2, 3;

-- ---- errors a caller can make ----
\set VERBOSITY default
SELECT * FROM reconcile_batch('orders_raw', 'orders_stage', '[{"object_key":"o1","version_id":"1","content_hash":"h","rows":5}]');
SELECT * FROM reconcile_batch('orders', 'customer_stage', '[{"object_key":"o2","version_id":"1","content_hash":"h","rows":5}]');
SELECT * FROM reconcile_batch(NULL, 'orders_stage', '[]');
SELECT * FROM reconcile_batch('orders', NULL, '[]');
SELECT * FROM reconcile_batch('orders', 'orders_stage', NULL);
SELECT * FROM reconcile_batch('orders', 'orders_stage', '[{"object_key":"o1","version_id":"1","content_hash":"h","rows":5}]', 'feed', NULL);
SELECT * FROM reconcile_batch('no_such_table', 'orders_stage', '[]');
SELECT reconcile_batch_id('{"object_key":"o1"}');
SELECT reconcile_batch_id('[]');
SELECT reconcile_batch_id('[1]');
SELECT reconcile_batch_id('[{"object_key":"o1","version_id":"1","content_hash":"h"}]');
SELECT reconcile_batch_id('[{"version_id":"1","content_hash":"h","rows":1}]');
SELECT reconcile_batch_id('[{"object_key":"o1","version_id":1,"content_hash":"h","rows":1}]');
SELECT reconcile_batch_id('[{"object_key":"","version_id":"1","content_hash":"h","rows":1}]');
SELECT reconcile_batch_id('[{"object_key":"o1","version_id":"1","content_hash":"h","rows":-1}]');
SELECT reconcile_batch_id('[{"object_key":"o1","version_id":"1","content_hash":"h","rows":1.5}]');
SELECT reconcile_batch_id('[{"object_key":"o1","version_id":"1","content_hash":"h","rows":1e30}]');
SELECT reconcile_batch_id('[{"object_key":"o1","version_id":"1","content_hash":"h","rows":"5"}]');
SELECT reconcile_batch_id('[{"object_key":"o1","version_id":"1","content_hash":"h","rows":1,"size":9}]');
-- one object version twice (two versions of one object make a manifest: sql/loader_versions.sql)
SELECT reconcile_batch_id('[{"object_key":"o1","version_id":"1","content_hash":"h","rows":1},
                            {"object_key":"o1","version_id":"1","content_hash":"h2","rows":1}]');
SELECT reconcile_batch_id(NULL);

-- registration
CREATE TABLE loose (id int, v int, d boolean, h bytea, vv text, nv int);
SELECT reconcile_register('loose', '{id}', 'v', 'd', 'h');
CREATE UNIQUE INDEX ON loose (id);
SELECT reconcile_register('loose', '{id}', 'nv', 'd', 'h');
ALTER TABLE loose ALTER COLUMN v SET NOT NULL;
SELECT reconcile_register('loose', '{id}', 'vv', 'd', 'h');
SELECT reconcile_register('loose', '{id}', 'v', 'vv', 'h');
SELECT reconcile_register('loose', '{id}', 'v', 'd', 'vv');
SELECT reconcile_register('loose', '{nope}', 'v', 'd', 'h');
SELECT reconcile_register('loose', '{}', 'v', 'd', 'h');
SELECT reconcile_register('loose', '{id,NULL}', 'v', 'd', 'h');
SELECT reconcile_register('loose', '{id}', 'id', 'd', 'h');
SELECT reconcile_register('loose', '{id}', 'v', 'd', 'h', 'retry');
SELECT reconcile_register('loose', '{id}', 'v', 'd', 'h', NULL);
SELECT reconcile_register('loose', '{id}', 'v', 'd', 'h', 'abort', '{vv,ghost}');
SELECT reconcile_register('loose', '{id}', 'v', 'd', 'h', 'abort', '{vv,v}');
SELECT reconcile_register('orders_stage', '{region}', 'v', 'del', 'h');
SELECT reconcile_register('loose', '{id}', 'v', 'd', 'h', 'abort', '{vv}');
SELECT payload_columns, conflict_policy FROM reconcile.targets WHERE target = 'loose'::regclass;
SELECT reconcile_unregister('loose');
SELECT reconcile_unregister('loose');

-- a caller without INSERT or UPDATE on the target is refused: the
-- extension never lends its own rights
CREATE ROLE reconcile_loader_test;
GRANT SELECT, INSERT ON customer_state TO reconcile_loader_test;
GRANT SELECT ON customer_stage TO reconcile_loader_test;
INSERT INTO customer_stage VALUES ('crm/part-0010.csv', 1, 'UPSERT', 'C9', '1', 'Zed');
SET ROLE reconcile_loader_test;
SELECT * FROM reconcile_batch('customer_state', 'customer_stage',
    '[{"object_key":"crm/part-0010.csv","version_id":"1","content_hash":"h","rows":1}]');
INSERT INTO reconcile.receipts (batch_id) VALUES ('forged');
RESET ROLE;
GRANT UPDATE ON customer_state TO reconcile_loader_test;
REVOKE SELECT ON customer_stage FROM reconcile_loader_test;
SET ROLE reconcile_loader_test;
SELECT * FROM reconcile_batch('customer_state', 'customer_stage',
    '[{"object_key":"crm/part-0010.csv","version_id":"1","content_hash":"h","rows":1}]');
RESET ROLE;
GRANT SELECT ON customer_stage TO reconcile_loader_test;
SET ROLE reconcile_loader_test;
SELECT status, inserted FROM reconcile_batch('customer_state', 'customer_stage',
    '[{"object_key":"crm/part-0010.csv","version_id":"1","content_hash":"h","rows":1}]');
-- it sees the state of targets it may read, and no other
SELECT DISTINCT target FROM reconcile.receipts ORDER BY 1;
SELECT count(*) FROM reconcile.rejects WHERE target = 'typed_state'::regclass;
SELECT reconcile_register('customer_state', '{customer_id}', 'version', 'is_deleted', 'payload_hash');
RESET ROLE;
SELECT customer_id, name FROM customer_state WHERE customer_id = 'C9';

DROP OWNED BY reconcile_loader_test;
DROP ROLE reconcile_loader_test;
DROP EXTENSION reconcile;
DROP TABLE customer_state, customer_stage, typed_state, typed_stage, orders, orders_raw CASCADE;
DROP TABLE loose;
DROP FUNCTION load;
