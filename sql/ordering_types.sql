-- Ordering by any btree-orderable type (issue 23, point 1): a version
-- column of type timestamptz, numeric, pg_lsn, text (with its collation)
-- or a domain orders a key's rows by the type's own btree ordering.
-- Winners, stale, unchanged, duplicates, conflicts (one version, two
-- payloads), tombstones, the version guard of the write and resolutions
-- all use it, on the direct and the general write path.  A staged value
-- that does not cast, or a NULL one, is a reject; a type without a
-- default btree operator class is refused at registration.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;
SET TimeZone = 'America/New_York';
SET DateStyle = 'SQL, MDY';

-- A statement's SQLSTATE and message, or 'ok'.
CREATE FUNCTION try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

-- One staged relation for every target: the version is staged as text and
-- cast into the target's version type (as a CSV load stages it).
CREATE TABLE stage (object_key text, source_row bigint, operation text,
                    id text, v text, val text);
-- Load what is staged under object obj into target, on the given write path.
CREATE FUNCTION load(target regclass, obj text, path text DEFAULT 'auto')
RETURNS TABLE (inserted bigint, updated bigint, deleted bigint, unchanged bigint,
               stale bigint, duplicates bigint, conflicts bigint, rejected bigint)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('reconcile.write_path', path, true);
    RETURN QUERY SELECT r.inserted, r.updated, r.deleted, r.unchanged, r.stale, r.duplicates,
                        r.conflicts, r.rejected
      FROM reconcile_batch(target, 'stage', jsonb_build_array(jsonb_build_object(
               'object_key', obj, 'version_id', '1', 'content_hash', 'sha256:' || obj,
               'rows', (SELECT count(*) FROM stage s WHERE s.object_key = obj)))) r;
END $$;
-- What a target holds, its version as text under the session's settings.
CREATE FUNCTION held(target regclass)
RETURNS TABLE (id text, v text, val text, gone boolean) LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY EXECUTE format('SELECT id, v::text, val, d FROM %s ORDER BY id', target);
END $$;
CREATE FUNCTION held_conflicts(target regclass)
RETURNS TABLE (key jsonb, version bigint, ordering text, source_row bigint, at_target boolean)
LANGUAGE sql AS $$
    SELECT c.key, c.version, c.ordering, c.source_row, c.existing_hash IS NOT NULL
      FROM reconcile.conflicts c WHERE c.target = $1 ORDER BY c.key::text, c.source_row $$;
CREATE FUNCTION rejects_of(target regclass)
RETURNS TABLE (object_key text, source_row bigint, column_name text, raw_value text, reason text)
LANGUAGE sql AS $$
    SELECT r.object_key, r.source_row, r.column_name, r.raw_value, r.reason
      FROM reconcile.rejects r WHERE r.target = $1 ORDER BY r.source_row $$;

-- ---- timestamptz: one instant is one version, whatever its offset ----
CREATE TABLE ts_direct (id text PRIMARY KEY, v timestamptz NOT NULL, d boolean NOT NULL DEFAULT false,
                        h bytea, val text);
CREATE TABLE ts_general (LIKE ts_direct INCLUDING ALL);
SELECT reconcile_register('ts_direct', '{id}', 'v', 'd', 'h');
SELECT reconcile_register('ts_general', '{id}', version_columns => '{v}',
                          deleted_column => 'd', hash_column => 'h');
INSERT INTO stage VALUES
    -- k1: 12:00+02 is 10:00+00: the same version, the same payload (a duplicate)
    ('t1', 1, 'UPSERT', 'k1', '2026-01-01 10:00:00+00', 'a'),
    ('t1', 2, 'UPSERT', 'k1', '2026-01-01 12:00:00+02', 'a'),
    -- k2: the same instant with two payloads: a conflict
    ('t1', 3, 'UPSERT', 'k2', '2026-01-01 10:00:00+00', 'x'),
    ('t1', 4, 'UPSERT', 'k2', '2026-01-01 11:00:00+01', 'y'),
    -- k3: the later instant wins though it is staged first
    ('t1', 5, 'UPSERT', 'k3', '2026-01-02 00:00:00+00', 'new'),
    ('t1', 6, 'UPSERT', 'k3', '2026-01-01 23:59:59.999999+00', 'old'),
    -- k4, k5: not a timestamp, no version at all: rejects
    ('t1', 7, 'UPSERT', 'k4', 'yesterday-ish', 'bad'),
    ('t1', 8, 'UPSERT', 'k5', NULL, 'none'),
    -- k6: a DELETE of a key never seen: a tombstone
    ('t1', 9, 'DELETE', 'k6', '2026-01-03 00:00:00+00', NULL);
SELECT 'direct' AS path, * FROM load('ts_direct', 't1')
UNION ALL SELECT 'general', * FROM load('ts_general', 't1', 'general');
SET TimeZone = 'UTC';
SELECT * FROM held('ts_direct');
SELECT (SELECT array_agg(x ORDER BY x.id) FROM held('ts_direct') x)
     = (SELECT array_agg(x ORDER BY x.id) FROM held('ts_general') x) AS same_on_both_paths;
-- The held rows keep the version as pinned text (UTC, ISO), bigint NULL.
SELECT * FROM held_conflicts('ts_direct');
SELECT * FROM rejects_of('ts_direct');

-- A second batch: a lower instant is stale, the same one unchanged, a
-- higher one updates; the tombstone blocks a lower UPSERT and yields to a
-- higher one.  The version guard of the write is the type's '<'.
INSERT INTO stage VALUES
    ('t2', 1, 'UPSERT', 'k1', '2025-12-31 23:00:00-05', 'a'),      -- = 2026-01-01 04:00 UTC < 10:00: stale
    ('t2', 2, 'UPSERT', 'k3', '2026-01-01 19:00:00-05', 'new'),    -- = 2026-01-02 00:00 UTC: unchanged
    ('t2', 3, 'UPSERT', 'k1', '2026-01-01 10:00:00.000001+00', 'b'), -- one microsecond later: updated
    ('t2', 4, 'UPSERT', 'k6', '2026-01-02 23:59:59+00', 'back?'),  -- below the tombstone: stale
    ('t2', 5, 'UPSERT', 'k7', '2026-01-05 00:00:00+00', 'seven');
SELECT 'direct' AS path, * FROM load('ts_direct', 't2')
UNION ALL SELECT 'general', * FROM load('ts_general', 't2', 'general');
SELECT * FROM held('ts_direct');
SELECT (SELECT array_agg(x ORDER BY x.id) FROM held('ts_direct') x)
     = (SELECT array_agg(x ORDER BY x.id) FROM held('ts_general') x) AS same_on_both_paths;

-- A replay of t1 is answered from its receipt, in any session time zone.
SET TimeZone = 'Asia/Tokyo';
SELECT status, inserted, conflicts, rejected FROM reconcile_batch('ts_direct', 'stage',
    jsonb_build_array(jsonb_build_object('object_key', 't1', 'version_id', '1', 'content_hash', 'sha256:t1', 'rows', 9)));
SET TimeZone = 'UTC';

-- The owner resolves the held key k2 (conflict at 10:00 UTC): the staged
-- payload 'y' is kept; the result reports the versions as text.
SELECT status, version, choice, written_version, outcome, ordering, written_ordering
  FROM reconcile_resolve('ts_direct', (SELECT batch_id FROM reconcile.conflicts
                                        WHERE target = 'ts_direct'::regclass LIMIT 1),
                         '{"id": "k2"}',
                         (SELECT staged_hash FROM reconcile.conflicts
                           WHERE target = 'ts_direct'::regclass AND source_row = 4));
SELECT * FROM held('ts_direct') WHERE id = 'k2';
SELECT version, written_version, ordering, written_ordering, outcome FROM reconcile.resolutions
 WHERE target = 'ts_direct'::regclass;
-- The same decision again is a replay; another is refused, naming the version as text.
SELECT status, ordering FROM reconcile_resolve('ts_direct', (SELECT batch_id FROM reconcile.resolutions
                                        WHERE target = 'ts_direct'::regclass), '{"id": "k2"}',
                         (SELECT staged_hash FROM reconcile.conflicts
                           WHERE target = 'ts_direct'::regclass AND source_row = 4));
SELECT try($$SELECT reconcile_resolve('ts_direct', (SELECT batch_id FROM reconcile.resolutions
                                        WHERE target = 'ts_direct'::regclass), '{"id": "k2"}',
                         (SELECT staged_hash FROM reconcile.conflicts
                           WHERE target = 'ts_direct'::regclass AND source_row = 3))$$);
-- Resolving on the general path gives the same row.
SET reconcile.write_path = 'general';
SELECT outcome, ordering FROM reconcile_resolve('ts_general', (SELECT batch_id FROM reconcile.conflicts
                                        WHERE target = 'ts_general'::regclass LIMIT 1),
                         '{"id": "k2"}',
                         (SELECT staged_hash FROM reconcile.conflicts
                           WHERE target = 'ts_general'::regclass AND source_row = 4));
RESET reconcile.write_path;
SELECT (SELECT array_agg(x ORDER BY x.id) FROM held('ts_direct') x)
     = (SELECT array_agg(x ORDER BY x.id) FROM held('ts_general') x) AS same_on_both_paths;
DELETE FROM stage;

-- ---- numeric: 1.0 and 1.00 are one version; 10 is above 9.5 ----
CREATE TABLE num (id text PRIMARY KEY, v numeric NOT NULL, d boolean NOT NULL DEFAULT false,
                  h bytea, val text);
SELECT reconcile_register('num', '{id}', 'v', 'd', 'h');
INSERT INTO stage VALUES
    ('n1', 1, 'UPSERT', 'k1', '1.0', 'a'),
    ('n1', 2, 'UPSERT', 'k1', '1.00', 'a'),     -- a duplicate of row 1
    ('n1', 3, 'UPSERT', 'k2', '2.0', 'x'),
    ('n1', 4, 'UPSERT', 'k2', '2.000', 'y'),    -- a conflict with row 3
    ('n1', 5, 'UPSERT', 'k3', '9.5', 'low'),
    ('n1', 6, 'UPSERT', 'k3', '10', 'high'),    -- numerically higher (as text it is lower)
    ('n1', 7, 'UPSERT', 'k4', '1e', 'bad'),
    ('n1', 8, 'UPSERT', 'k5', '-3.25', 'neg');  -- negative orderings are fine for numeric
SELECT * FROM load('num', 'n1');
SELECT * FROM held('num');
SELECT * FROM held_conflicts('num');
SELECT * FROM rejects_of('num');
INSERT INTO stage VALUES
    ('n2', 1, 'UPSERT', 'k1', '1.000', 'a'),    -- the target's version, the same payload: unchanged
    ('n2', 2, 'UPSERT', 'k3', '10.00', 'other'),-- the target's version, another payload: a conflict
    ('n2', 3, 'UPSERT', 'k5', '-3.2', 'up');    -- higher: updated
SELECT * FROM load('num', 'n2', 'general');
SELECT * FROM held('num');
SELECT * FROM held_conflicts('num') WHERE key = '{"id": "k3"}';
DELETE FROM stage;

-- ---- pg_lsn: 0/100 is above 0/FF (as text it would be below) ----
CREATE TABLE lsn (id text PRIMARY KEY, v pg_lsn NOT NULL, d boolean NOT NULL DEFAULT false,
                  h bytea, val text);
SELECT reconcile_register('lsn', '{id}', 'v', 'd', 'h');
INSERT INTO stage VALUES
    ('l1', 1, 'UPSERT', 'k1', '0/100', 'later'),
    ('l1', 2, 'UPSERT', 'k1', '0/FF', 'earlier'),
    ('l1', 3, 'UPSERT', 'k2', '16/B374D848', 'x'),
    ('l1', 4, 'DELETE', 'k2', '16/B374D849', NULL),
    ('l1', 5, 'UPSERT', 'k3', 'G/0', 'bad');
SELECT * FROM load('lsn', 'l1');
SELECT * FROM held('lsn');
SELECT * FROM rejects_of('lsn');
DELETE FROM stage;

-- ---- text, in the column's collation ----
-- en-x-icu orders 'a' before 'B' (bytewise 'B' comes first): the winner
-- follows the column's collation, not the session's nor the database's.
CREATE TABLE txt (id text PRIMARY KEY, v text COLLATE "en-x-icu" NOT NULL,
                  d boolean NOT NULL DEFAULT false, h bytea, val text);
SELECT reconcile_register('txt', '{id}', 'v', 'd', 'h');
INSERT INTO stage VALUES
    ('x1', 1, 'UPSERT', 'k1', 'B', 'upper'),
    ('x1', 2, 'UPSERT', 'k1', 'a', 'lower');
SELECT * FROM load('txt', 'x1');
SELECT * FROM held('txt');
-- 'b' is below 'B' in en-x-icu (lower case first): stale, though above bytewise.
INSERT INTO stage VALUES ('x2', 1, 'UPSERT', 'k1', 'b', 'next'), ('x2', 2, 'UPSERT', 'k2', 'b', 'two');
SELECT * FROM load('txt', 'x2', 'general');
-- The version guard of the general path's UPDATE compares in the column's
-- collation too: 'C' is above 'b' in en-x-icu, below it bytewise.
INSERT INTO stage VALUES ('x3', 1, 'UPSERT', 'k2', 'C', 'three');
SELECT * FROM load('txt', 'x3', 'general');
SELECT * FROM held('txt');
-- A nondeterministic collation makes 'abc' and 'ABC' one version.
CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE txt_ci (id text PRIMARY KEY, v text COLLATE ci NOT NULL,
                     d boolean NOT NULL DEFAULT false, h bytea, val text);
SELECT reconcile_register('txt_ci', '{id}', 'v', 'd', 'h');
INSERT INTO stage VALUES
    ('c1', 1, 'UPSERT', 'k1', 'abc', 'same'),
    ('c1', 2, 'UPSERT', 'k1', 'ABC', 'same'),   -- a duplicate
    ('c1', 3, 'UPSERT', 'k2', 'abc', 'one'),
    ('c1', 4, 'UPSERT', 'k2', 'ABC', 'two');    -- a conflict
SELECT * FROM load('txt_ci', 'c1');
SELECT * FROM held_conflicts('txt_ci');
DELETE FROM stage;

-- ---- a domain: its check rejects a staged value ----
CREATE DOMAIN epoch_ts AS timestamptz CHECK (VALUE >= '2000-01-01 00:00:00+00');
CREATE TABLE dom (id text PRIMARY KEY, v epoch_ts NOT NULL, d boolean NOT NULL DEFAULT false,
                  h bytea, val text);
SELECT reconcile_register('dom', '{id}', 'v', 'd', 'h');
INSERT INTO stage VALUES
    ('d1', 1, 'UPSERT', 'k1', '2001-01-01 00:00:00+00', 'old'),
    ('d1', 2, 'UPSERT', 'k1', '2002-01-01 00:00:00+00', 'new'),
    ('d1', 3, 'UPSERT', 'k2', '1999-12-31 00:00:00+00', 'too early');
SELECT * FROM load('dom', 'd1', 'general');
SELECT * FROM held('dom');
SELECT * FROM rejects_of('dom');
-- A domain over bigint is an integer version: negative values are rejects.
CREATE DOMAIN seqno AS bigint;
CREATE TABLE dom_int (id text PRIMARY KEY, v seqno NOT NULL, d boolean NOT NULL DEFAULT false,
                      h bytea, val text);
SELECT reconcile_register('dom_int', '{id}', 'v', 'd', 'h');
INSERT INTO stage VALUES ('i1', 1, 'UPSERT', 'k1', '7', 'x'), ('i1', 2, 'UPSERT', 'k2', '-1', 'y'),
                         ('i1', 3, 'UPSERT', 'k3', '3', 'p'), ('i1', 4, 'UPSERT', 'k3', '3', 'q');
SELECT * FROM load('dom_int', 'i1');
SELECT * FROM rejects_of('dom_int');
SELECT * FROM held_conflicts('dom_int');
DELETE FROM stage;

-- ---- refused registrations ----
CREATE TABLE bad (id text PRIMARY KEY, p point NOT NULL, j json NOT NULL, b bigint NOT NULL,
                  c text NOT NULL, d boolean NOT NULL DEFAULT false, h bytea);
SELECT try($$SELECT reconcile_register('bad', '{id}', 'p', 'd', 'h')$$);
SELECT try($$SELECT reconcile_register('bad', '{id}', 'j', 'd', 'h')$$);
SELECT try($$SELECT reconcile_register('bad', '{id}', version_columns => '{j}', deleted_column => 'd', hash_column => 'h')$$);
-- Every version column needs a btree ordering; one of the two arguments, exactly.
SELECT try($$SELECT reconcile_register('bad', '{id}', version_columns => '{c,j}', deleted_column => 'd', hash_column => 'h')$$);
SELECT try($$SELECT reconcile_register('bad', '{id}', 'b', 'd', 'h', version_columns => '{b}')$$);
SELECT try($$SELECT reconcile_register('bad', '{id}', deleted_column => 'd', hash_column => 'h')$$);
SELECT try($$SELECT reconcile_register('bad', '{id}', version_columns => '{}', deleted_column => 'd', hash_column => 'h')$$);
SELECT try($$SELECT reconcile_register('bad', '{id}', version_columns => '{NULL}', deleted_column => 'd', hash_column => 'h')$$);
SELECT try($$SELECT reconcile_register('bad', '{id}', 'b', NULL, 'h')$$);
SELECT count(*) AS registered FROM reconcile.targets WHERE target = 'bad'::regclass;
-- version_columns with one element registers that column, as version_column.
SELECT reconcile_register('bad', '{id}', version_columns => '{c}', deleted_column => 'd', hash_column => 'h');
SELECT version_column FROM reconcile.targets WHERE target = 'bad'::regclass;

-- ---- docs/loader.md's worked example (Orderings) ----
SET TimeZone = 'UTC';
CREATE TABLE price (sku text PRIMARY KEY, amount numeric, observed_at timestamptz NOT NULL,
                    is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea);
SELECT reconcile_register('price', '{sku}', 'observed_at', 'is_deleted', 'payload_hash');
CREATE TABLE price_stage (object_key text, source_row bigint, operation text,
                          sku text, amount text, observed_at text);
INSERT INTO price_stage VALUES
    ('snap/0001.csv', 1, 'UPSERT', 'A-1', '9.90', '2026-03-01 09:00:00+01'),
    ('snap/0001.csv', 2, 'UPSERT', 'A-1', '9.90', '2026-03-01 08:00:00+00'), -- one instant: a duplicate
    ('snap/0001.csv', 3, 'UPSERT', 'B-2', '4.50', '2026-03-01 10:00:00+00'),
    ('snap/0001.csv', 4, 'UPSERT', 'B-2', '4.75', '2026-03-01 11:00:00+01'), -- one instant, two prices
    ('snap/0001.csv', 5, 'UPSERT', 'C-3', '1.00', '2026-03-02 00:00:00+00'),
    ('snap/0001.csv', 6, 'UPSERT', 'C-3', '0.90', '2026-03-01 23:00:00-05'), -- 04:00 UTC: later, wins
    ('snap/0001.csv', 7, 'UPSERT', 'D-4', '2.00', 'noonish');                -- not a timestamptz
SELECT status, inserted, duplicates, stale, conflicts, rejected
  FROM reconcile_batch('price', 'price_stage',
    '[{"object_key":"snap/0001.csv","version_id":"1","content_hash":"sha256:5e1f...","rows":7}]');
SELECT key, version, ordering, staged_payload FROM reconcile.conflicts
 WHERE target = 'price'::regclass ORDER BY source_row;
SELECT sku, amount, observed_at FROM price ORDER BY sku;

DROP TABLE stage, ts_direct, ts_general, num, lsn, txt, txt_ci, dom, dom_int, bad, price, price_stage;
DROP DOMAIN epoch_ts;
DROP DOMAIN seqno;
DROP COLLATION ci;
DROP FUNCTION try(text), load(regclass, text, text), held(regclass), held_conflicts(regclass),
    rejects_of(regclass);
DROP EXTENSION reconcile;
