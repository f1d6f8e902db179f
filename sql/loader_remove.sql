-- delete_mode 'remove': a winning DELETE removes the row and keeps its key,
-- version and hash, so that a late lower (or equal) version is still
-- stale, a higher one re-creates the row, and reconcile_purge_tombstones
-- forgets kept removals on request (reopening those keys to any version).
CREATE EXTENSION reconcile;
SET client_min_messages = notice;

CREATE TABLE acct (
    id      text PRIMARY KEY,
    name    text,
    version bigint NOT NULL,
    deleted boolean NOT NULL DEFAULT false,
    hash    bytea
);
CREATE TABLE acct_stage (object_key text, source_row bigint, operation text,
                         id text, version text, name text);
SELECT reconcile_register(target => 'acct', key_columns => '{id}', version_column => 'version',
    deleted_column => 'deleted', hash_column => 'hash', options => '{"delete_mode": "remove"}');
SELECT options, removed_table IS NOT NULL AS has_kept_removals,
       removed_table::text = 'reconcile.removed_' || 'acct'::regclass::oid AS named_for_oid
  FROM reconcile.targets WHERE target = 'acct'::regclass;

-- One batch per call: the staged rows given, a manifest of one object.
CREATE FUNCTION load(obj text, rows_ text, tgt regclass DEFAULT 'acct')
RETURNS TABLE (status text, inserted bigint, updated bigint, deleted bigint,
               unchanged bigint, stale bigint, duplicates bigint, conflicts bigint)
LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM acct_stage;
    EXECUTE format('INSERT INTO acct_stage VALUES %s', rows_);
    RETURN QUERY SELECT r.status, r.inserted, r.updated, r.deleted, r.unchanged, r.stale,
                        r.duplicates, r.conflicts
      FROM reconcile_batch(target => tgt, staged => 'acct_stage',
             manifest => jsonb_build_array(jsonb_build_object('object_key', obj,
                 'version_id', '1', 'content_hash', 'sha256:' || obj,
                 'rows', (SELECT count(*) FROM acct_stage)))) AS r;
END $$;
CREATE FUNCTION kept(tgt regclass DEFAULT 'acct')
RETURNS TABLE (id text, version bigint, has_hash boolean, recent boolean)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY EXECUTE format('SELECT id, version, hash IS NOT NULL, removed_at > now() - interval ''1 hour'' FROM %s ORDER BY 1',
        (SELECT removed_table FROM reconcile.targets WHERE target = tgt));
END $$;

SELECT * FROM load('b1', $$('b1', 1, 'UPSERT', 'A', '1', 'Ana'), ('b1', 2, 'UPSERT', 'B', '1', 'Bo'),
                           ('b1', 3, 'UPSERT', 'C', '1', 'Cy')$$);
-- A DELETE of a row and one of a key never loaded: both kept, no row stays.
SELECT * FROM load('b2', $$('b2', 1, 'DELETE', 'A', '5', NULL), ('b2', 2, 'DELETE', 'Z', '3', NULL)$$);
SELECT id, name, version, deleted FROM acct ORDER BY 1;
SELECT * FROM kept();
-- A replay is answered from the receipt and writes nothing.
SELECT status, deleted FROM reconcile_batch(target => 'acct', staged => 'acct_stage',
    manifest => '[{"object_key":"b2","version_id":"1","content_hash":"sha256:b2","rows":2}]');
-- Late lower versions stay stale; the same DELETE again is unchanged.
SELECT * FROM load('b3', $$('b3', 1, 'UPSERT', 'A', '4', 'Ana old'), ('b3', 2, 'UPSERT', 'Z', '2', 'Zed old'),
                           ('b3', 3, 'DELETE', 'A', '5', NULL)$$);
SELECT id, name, version FROM acct ORDER BY 1;
-- A higher DELETE moves the kept version up; a higher row re-creates the key.
SELECT * FROM load('b4', $$('b4', 1, 'DELETE', 'A', '6', NULL), ('b4', 2, 'UPSERT', 'Z', '7', 'Zed'),
                           ('b4', 3, 'DELETE', 'B', '2', NULL)$$);
SELECT id, name, version, deleted FROM acct ORDER BY 1;
SELECT * FROM kept();

-- The general write path gives the same result.
SET reconcile.write_path = 'general';
SELECT * FROM load('g1', $$('g1', 1, 'DELETE', 'C', '2', NULL), ('g1', 2, 'UPSERT', 'B', '1', 'Bo'),
                           ('g1', 3, 'UPSERT', 'B', '3', 'Bo again'), ('g1', 4, 'DELETE', 'Q', '1', NULL)$$);
SELECT id, name, version, deleted FROM acct ORDER BY 1;
SELECT * FROM kept();
RESET reconcile.write_path;

-- An equal version with another payload than the kept DELETE's is a
-- conflict, held back; the owner resolves it: the row comes back.
SELECT * FROM load('b5', $$('b5', 1, 'UPSERT', 'A', '6', 'Ana six')$$);
SELECT key, version, existing_hash IS NOT NULL AS has_existing_hash, existing_payload
  FROM reconcile.conflicts WHERE target = 'acct'::regclass;
SELECT status, version, choice, outcome
  FROM reconcile_resolve('acct', reconcile_batch_id('[{"object_key":"b5","version_id":"1","content_hash":"sha256:b5","rows":1}]'),
                         '{"id": "A"}',
                         (SELECT staged_hash FROM reconcile.conflicts WHERE target = 'acct'::regclass));
SELECT id, name, version, deleted FROM acct ORDER BY 1;
SELECT * FROM kept();

-- A DELETE held against a live row at its version, resolved for the
-- DELETE: the row is removed and kept (both write paths).
SELECT * FROM load('b5d', $$('b5d', 1, 'DELETE', 'A', '6', NULL), ('b5d', 2, 'DELETE', 'Z', '7', NULL)$$);
SET reconcile.write_path = 'general';
SELECT status, version, choice, outcome
  FROM reconcile_resolve('acct', reconcile_batch_id('[{"object_key":"b5d","version_id":"1","content_hash":"sha256:b5d","rows":2}]'),
                         '{"id": "A"}',
                         (SELECT staged_hash FROM reconcile.conflicts WHERE target = 'acct'::regclass AND key = '{"id": "A"}' AND object_key = 'b5d'));
RESET reconcile.write_path;
SELECT status, version, choice, outcome
  FROM reconcile_resolve('acct', reconcile_batch_id('[{"object_key":"b5d","version_id":"1","content_hash":"sha256:b5d","rows":2}]'),
                         '{"id": "Z"}',
                         (SELECT staged_hash FROM reconcile.conflicts WHERE target = 'acct'::regclass AND key = '{"id": "Z"}'));
SELECT id, name, version, deleted FROM acct ORDER BY 1;
SELECT * FROM kept();
-- Z comes back above its removal.
SELECT * FROM load('b5z', $$('b5z', 1, 'UPSERT', 'Z', '8', 'Zed'), ('b5z', 2, 'UPSERT', 'A', '7', 'Ana seven')$$);

-- Purging by version forgets the kept removals below it: a late lower
-- version of those keys loads again, as documented.
SELECT * FROM kept();
SELECT reconcile_purge_tombstones('acct', before_version => '2');
SELECT * FROM kept();
SELECT * FROM load('b6', $$('b6', 1, 'UPSERT', 'Q', '0', 'Q resurrected'), ('b6', 2, 'UPSERT', 'B', '2', 'B stale')$$);
SELECT id, name, version FROM acct ORDER BY 1;
-- By age: nothing was removed an hour ago; '0' forgets all.
SELECT * FROM load('b7', $$('b7', 1, 'DELETE', 'Q', '1', NULL)$$);
SELECT reconcile_purge_tombstones('acct', older_than => '1 hour');
SELECT reconcile_purge_tombstones('acct', before_version => '100', older_than => '1 hour');
SELECT reconcile_purge_tombstones('acct', older_than => '0');
SELECT * FROM kept();
-- '0' includes what this very transaction removed.
BEGIN;
SELECT deleted FROM load('b8', $$('b8', 1, 'DELETE', 'Q', '2', NULL)$$);
SELECT reconcile_purge_tombstones('acct', older_than => '0');
ROLLBACK;
SELECT * FROM kept();

-- Bad input.
SELECT reconcile_purge_tombstones('acct');
SELECT reconcile_purge_tombstones(NULL, before_version => '1');
SELECT reconcile_purge_tombstones('acct', before_version => 'ten');
SELECT reconcile_purge_tombstones('acct_stage', before_version => '1');
SELECT reconcile_register(target => 'acct', key_columns => '{id}', version_column => 'version',
    deleted_column => 'deleted', hash_column => 'hash', options => '{"delete_mode": "hard"}');
SELECT reconcile_register(target => 'acct', key_columns => '{id}', version_column => 'version',
    deleted_column => 'deleted', hash_column => 'hash', options => '{"delete_mode": true}');
SELECT * FROM reconcile_batch(target => 'acct', staged => 'acct_stage',
    manifest => '[{"object_key":"x","version_id":"1","content_hash":"sha256:x","rows":1}]',
    options => '{"delete_mode": "tombstone"}');

-- Privileges: a loader needs DELETE on a target that removes rows; only
-- the owner purges.
CREATE ROLE remove_loader;
GRANT USAGE ON SCHEMA public TO remove_loader;
GRANT SELECT, INSERT, UPDATE ON acct TO remove_loader;
GRANT SELECT ON acct_stage TO remove_loader;
SET ROLE remove_loader;
SELECT * FROM reconcile_batch(target => 'acct', staged => 'acct_stage',
    manifest => '[{"object_key":"b7","version_id":"2","content_hash":"sha256:b7","rows":1}]');
SELECT reconcile_purge_tombstones('acct', older_than => '0');
RESET ROLE;
GRANT DELETE ON acct TO remove_loader;
SET ROLE remove_loader;
SELECT status, deleted, unchanged FROM reconcile_batch(target => 'acct', staged => 'acct_stage',
    manifest => '[{"object_key":"b7","version_id":"2","content_hash":"sha256:b7","rows":1}]');
RESET ROLE;
SELECT * FROM kept();

-- Switching modes.  Back to 'tombstone' while removals are kept: refused.
SELECT reconcile_register(target => 'acct', key_columns => '{id}', version_column => 'version',
    deleted_column => 'deleted', hash_column => 'hash');
-- Once they are forgotten the companion goes.
SELECT reconcile_purge_tombstones('acct', older_than => '0');
SELECT reconcile_register(target => 'acct', key_columns => '{id}', version_column => 'version',
    deleted_column => 'deleted', hash_column => 'hash', options => '{"delete_mode": "tombstone"}');
SELECT removed_table FROM reconcile.targets WHERE target = 'acct'::regclass;
SELECT count(*) AS companions FROM pg_class WHERE relname LIKE 'removed\_%'
   AND relkind = 'r' AND relnamespace = 'reconcile'::regnamespace;
-- Under 'tombstone', a purge by version deletes tombstone rows; by age it cannot.
SELECT * FROM load('t1', $$('t1', 1, 'DELETE', 'B', '9', NULL), ('t1', 2, 'DELETE', 'Z', '9', NULL),
                           ('t1', 3, 'DELETE', 'K', '20', NULL)$$);
SELECT id, version, deleted FROM acct ORDER BY 1;
SELECT reconcile_purge_tombstones('acct', older_than => '1 day');
SELECT reconcile_purge_tombstones('acct', before_version => '10');
SELECT id, version, deleted FROM acct ORDER BY 1;
-- From 'tombstone' to 'remove': the tombstone rows move to the kept removals.
SELECT reconcile_register(target => 'acct', key_columns => '{id}', version_column => 'version',
    deleted_column => 'deleted', hash_column => 'hash', options => '{"delete_mode": "remove"}');
SELECT id, version, deleted FROM acct ORDER BY 1;
SELECT * FROM kept();
SELECT * FROM load('t2', $$('t2', 1, 'UPSERT', 'K', '19', 'K stale'), ('t2', 2, 'UPSERT', 'K', '20', 'K conflict?')$$);
SELECT id, version, deleted FROM acct ORDER BY 1;
-- Registering again with the same mode keeps what is kept.
SELECT reconcile_register(target => 'acct', key_columns => '{id}', version_column => 'version',
    deleted_column => 'deleted', hash_column => 'hash', options => '{"delete_mode": "remove"}');
SELECT * FROM kept();

-- A partitioned target takes the general path.
CREATE TABLE pacct (id text PRIMARY KEY, name text, version bigint NOT NULL,
                    deleted boolean NOT NULL DEFAULT false, hash bytea) PARTITION BY HASH (id);
CREATE TABLE pacct_0 PARTITION OF pacct FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE pacct_1 PARTITION OF pacct FOR VALUES WITH (MODULUS 2, REMAINDER 1);
SELECT reconcile_register(target => 'pacct', key_columns => '{id}', version_column => 'version',
    deleted_column => 'deleted', hash_column => 'hash', options => '{"delete_mode": "remove"}');
SELECT * FROM load('p1', $$('p1', 1, 'UPSERT', 'A', '1', 'a'), ('p1', 2, 'UPSERT', 'B', '1', 'b'),
                           ('p1', 3, 'UPSERT', 'C', '1', 'c')$$, 'pacct');
SELECT * FROM load('p2', $$('p2', 1, 'DELETE', 'A', '2', NULL), ('p2', 2, 'DELETE', 'B', '2', NULL)$$, 'pacct');
SELECT * FROM load('p3', $$('p3', 1, 'UPSERT', 'A', '1', 'a late'), ('p3', 2, 'UPSERT', 'B', '3', 'b again')$$, 'pacct');
SELECT id, name, version, deleted FROM pacct ORDER BY 1;
SELECT * FROM kept('pacct');

-- A two-column key (one probe per key, no index walk), under REPEATABLE READ.
CREATE TABLE kacct (region text COLLATE "C", id integer, name text, version bigint NOT NULL,
                    deleted boolean NOT NULL DEFAULT false, hash bytea, PRIMARY KEY (region, id));
CREATE TABLE kacct_stage (object_key text, source_row bigint, operation text,
                          region text, id integer, version bigint, name text);
SELECT reconcile_register(target => 'kacct', key_columns => '{region,id}', version_column => 'version',
    deleted_column => 'deleted', hash_column => 'hash', options => '{"delete_mode": "remove"}');
INSERT INTO kacct_stage VALUES ('k1', 1, 'UPSERT', 'eu', 1, 1, 'one'), ('k1', 2, 'UPSERT', 'us', 1, 1, 'one us'),
                               ('k2', 1, 'DELETE', 'eu', 1, 3, NULL), ('k2', 2, 'DELETE', 'eu', 2, 3, NULL),
                               ('k3', 1, 'UPSERT', 'eu', 1, 2, 'late'), ('k3', 2, 'UPSERT', 'eu', 2, 4, 'two'),
                               ('k3', 3, 'UPSERT', 'us', 1, 2, 'us two');
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT o, status, inserted, updated, deleted, stale
  FROM unnest(ARRAY['k1', 'k2', 'k3']) AS o,
       reconcile_batch('kacct', 'kacct_stage', jsonb_build_array(jsonb_build_object('object_key', o,
           'version_id', '1', 'content_hash', 'h', 'rows', (SELECT count(*) FROM kacct_stage WHERE object_key = o))));
COMMIT;
SELECT region, id, name, version FROM kacct ORDER BY 1, 2;
SELECT format('SELECT region, id, version FROM %s ORDER BY 1, 2', removed_table) AS kept_sql
  FROM reconcile.targets WHERE target = 'kacct'::regclass \gset
:kept_sql;
DROP TABLE kacct, kacct_stage;

-- Unregistering drops the kept removals; so does dropping the table.
SELECT reconcile_unregister('pacct');
SELECT count(*) AS companions FROM pg_class WHERE relname LIKE 'removed\_%'
   AND relkind = 'r' AND relnamespace = 'reconcile'::regnamespace;
DROP FUNCTION load(text, text, regclass);
DROP FUNCTION kept(regclass);
DROP TABLE acct;
SELECT count(*) AS companions FROM pg_class WHERE relname LIKE 'removed\_%'
   AND relkind = 'r' AND relnamespace = 'reconcile'::regnamespace;
SELECT count(*) AS registrations FROM reconcile.targets;

DROP TABLE pacct, acct_stage;
REVOKE ALL ON SCHEMA public FROM remove_loader;
DROP ROLE remove_loader;
DROP EXTENSION reconcile;
