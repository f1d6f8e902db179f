-- pgTAP: what reconcile_batch and reconcile_register refuse, with the
-- SQLSTATE, and that a refused batch leaves nothing behind.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION reconcile;
SELECT plan(102);

CREATE TABLE t (id text PRIMARY KEY, name text, version bigint NOT NULL,
    deleted boolean NOT NULL DEFAULT false, hash bytea);
SELECT reconcile_register('t', '{id}', 'version', 'deleted', 'hash');
CREATE TABLE s (object_key text, source_row bigint, operation text, id text, name text, version text);
INSERT INTO s VALUES ('o/1', 1, 'UPSERT', 'A', 'a', '1'), ('o/1', 2, 'UPSERT', 'B', 'b', '1');

-- Everything a refused batch could leave behind.
CREATE FUNCTION pg_temp.state() RETURNS bigint LANGUAGE sql AS $$
    SELECT (SELECT count(*) FROM t) + (SELECT count(*) FROM reconcile.receipts)
         + (SELECT count(*) FROM reconcile.batch_objects) + (SELECT count(*) FROM reconcile.cursors)
         + (SELECT count(*) FROM reconcile.rejects) + (SELECT count(*) FROM reconcile.conflicts)
$$;

-------------------------------------------------------------------------
-- Partial stage, changed content hash
-------------------------------------------------------------------------
SELECT throws_ok($$SELECT * FROM reconcile_batch('t', 's',
    '[{"object_key":"o/1","version_id":"1","content_hash":"h1","rows":3}]', 'src', 'o/1')$$,
    '21000', NULL, 'fewer staged rows than the manifest says: refused with 21000');
SELECT throws_like($$SELECT * FROM reconcile_batch('t', 's',
    '[{"object_key":"o/1","version_id":"1","content_hash":"h1","rows":3}]')$$,
    '%is incomplete: object "o/1" has 2 staged rows, the manifest says 3', 'the error names the object and both counts');
SELECT throws_ok($$SELECT * FROM reconcile_batch('t', 's',
    '[{"object_key":"o/1","version_id":"1","content_hash":"h1","rows":1}]')$$,
    '21000', NULL, 'more staged rows than the manifest says: refused');
SELECT throws_ok($$SELECT * FROM reconcile_batch('t', 's',
    '[{"object_key":"o/1","version_id":"1","content_hash":"h1","rows":2},{"object_key":"o/missing","version_id":"1","content_hash":"h","rows":1}]')$$,
    '21000', NULL, 'an object with no staged rows at all: refused');
SELECT is(pg_temp.state(), 0::bigint, 'a refused partial batch leaves nothing');

SELECT is((SELECT status FROM reconcile_batch('t', 's',
    '[{"object_key":"o/1","version_id":"1","content_hash":"h1","rows":2}]')), 'committed', 'the complete batch commits');
INSERT INTO s VALUES ('o/2', 1, 'UPSERT', 'C', 'c', '1');
SELECT throws_ok($$SELECT * FROM reconcile_batch('t', 's',
    '[{"object_key":"o/1","version_id":"1","content_hash":"h1-changed","rows":2},{"object_key":"o/2","version_id":"1","content_hash":"h2","rows":1}]')$$,
    '23000', NULL, 'a committed object version with another content_hash: refused with 23000');
SELECT throws_like($$SELECT * FROM reconcile_batch('t', 's',
    '[{"object_key":"o/1","version_id":"1","content_hash":"h1-changed","rows":2}]')$$,
    'object "o/1" version "1" was already committed with a different content hash', 'the error names object and version');
SELECT is((SELECT count(*) FROM t WHERE id = 'C'), 0::bigint, 'the refused batch wrote nothing');
SELECT is((SELECT status FROM reconcile_batch('t', 's',
    '[{"object_key":"o/1","version_id":"2","content_hash":"h1-changed","rows":2}]')), 'committed',
    'the same object under a new version_id with new content is accepted');

-- A manifest committed to one target may be loaded into another (a shadow
-- load): a batch is identified by its target and batch id.  Dropping the
-- other target takes its state with it.
CREATE TABLE t_other (id text PRIMARY KEY, name text, version bigint NOT NULL,
    deleted boolean NOT NULL DEFAULT false, hash bytea);
SELECT reconcile_register('t_other', '{id}', 'version', 'deleted', 'hash');
SELECT is((SELECT status FROM reconcile_batch('t_other', 's',
    '[{"object_key":"o/1","version_id":"1","content_hash":"h1","rows":2}]')), 'committed',
    'a manifest committed to another target commits into this one');
SELECT is((SELECT count(*) FROM t_other), 2::bigint, 'and writes this target''s rows');
DROP TABLE t_other;

-- In a read-only transaction a new batch is refused (25006); a replay,
-- which writes nothing, still returns its receipt.
CREATE FUNCTION pg_temp.read_only(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    result text;
BEGIN
    BEGIN
        PERFORM set_config('transaction_read_only', 'on', true);
        EXECUTE q INTO result;
        RAISE EXCEPTION USING ERRCODE = 'P0001', MESSAGE = coalesce(result, 'null');
    EXCEPTION WHEN OTHERS THEN
        RETURN CASE WHEN SQLSTATE = 'P0001' THEN SQLERRM ELSE 'ERROR ' || SQLSTATE END;
    END;
END $$;
INSERT INTO s VALUES ('o/ro', 1, 'UPSERT', 'RO', 'ro', '1');
SELECT is(pg_temp.read_only($$SELECT status FROM reconcile_batch('t', 's',
    '[{"object_key":"o/ro","version_id":"1","content_hash":"h","rows":1}]')$$),
    'ERROR 25006', 'a new batch in a read-only transaction: 25006');
SELECT is((SELECT count(*) FROM t WHERE id = 'RO'), 0::bigint, 'and nothing is written');
SELECT is(pg_temp.read_only($$SELECT status FROM reconcile_batch('t', 's',
    '[{"object_key":"o/1","version_id":"1","content_hash":"h1","rows":2}]')$$),
    'replayed', 'a replay in a read-only transaction returns the receipt');

-------------------------------------------------------------------------
-- Target, staged relation and argument problems
-------------------------------------------------------------------------
CREATE TABLE unregistered (id text PRIMARY KEY, name text, version bigint NOT NULL, deleted boolean NOT NULL, hash bytea);
SELECT throws_ok($$SELECT * FROM reconcile_batch('unregistered', 's',
    '[{"object_key":"o/1","version_id":"9","content_hash":"h","rows":2}]')$$,
    '42704', 'table "unregistered" is not registered with reconcile', 'a target that is not registered: 42704');

CREATE TABLE s_noversion (object_key text, source_row bigint, operation text, id text, name text);
SELECT throws_ok($$SELECT * FROM reconcile_batch('t', 's_noversion',
    '[{"object_key":"o/1","version_id":"9","content_hash":"h","rows":0}]')$$,
    '42703', 'staged relation "s_noversion" has no column "version"', 'a staged relation missing the version column: 42703');
CREATE TABLE s_nopayload (object_key text, source_row bigint, operation text, id text, version text);
SELECT throws_ok($$SELECT * FROM reconcile_batch('t', 's_nopayload',
    '[{"object_key":"o/1","version_id":"9","content_hash":"h","rows":0}]')$$,
    '42703', 'staged relation "s_nopayload" has no column "name"', 'a staged relation missing a payload column: 42703');
CREATE TABLE s_noop (object_key text, source_row bigint, id text, name text, version text);
SELECT throws_ok($$SELECT * FROM reconcile_batch('t', 's_noop',
    '[{"object_key":"o/1","version_id":"9","content_hash":"h","rows":0}]')$$,
    '42703', 'staged relation "s_noop" has no column "operation"', 'a staged relation missing operation: 42703');
CREATE TABLE s_nosrc (object_key text, operation text, id text, name text, version text);
SELECT throws_ok($$SELECT * FROM reconcile_batch('t', 's_nosrc',
    '[{"object_key":"o/1","version_id":"9","content_hash":"h","rows":0}]')$$,
    '42703', NULL, 'a staged relation missing source_row: 42703');
CREATE TABLE s_textsrc (object_key text, source_row text, operation text, id text, name text, version text);
SELECT throws_ok($$SELECT * FROM reconcile_batch('t', 's_textsrc',
    '[{"object_key":"o/1","version_id":"9","content_hash":"h","rows":0}]')$$,
    '42804', NULL, 'a text source_row: 42804');

SELECT throws_ok($$SELECT * FROM reconcile_batch(NULL, 's', '[{"object_key":"o/1","version_id":"9","content_hash":"h","rows":2}]')$$,
    '22004', 'argument target of reconcile_batch must not be null', 'NULL target: 22004');
SELECT throws_ok($$SELECT * FROM reconcile_batch('t', NULL, '[{"object_key":"o/1","version_id":"9","content_hash":"h","rows":2}]')$$,
    '22004', 'argument staged of reconcile_batch must not be null', 'NULL staged: 22004');
SELECT throws_ok($$SELECT * FROM reconcile_batch('t', 's', NULL)$$,
    '22004', 'argument manifest of reconcile_batch must not be null', 'NULL manifest: 22004');
SELECT throws_ok($$SELECT * FROM reconcile_batch('t', 's', '[{"object_key":"o/1","version_id":"9","content_hash":"h","rows":2}]', 'src', NULL)$$,
    '22004', NULL, 'source without cursor: 22004');
SELECT throws_ok($$SELECT * FROM reconcile_batch('t', 's', '[{"object_key":"o/1","version_id":"9","content_hash":"h","rows":2}]', NULL, 'pos')$$,
    '22004', NULL, 'cursor without source: 22004');
SELECT throws_ok($$SELECT reconcile_batch_id(NULL)$$, '22004', NULL, 'reconcile_batch_id(NULL): 22004');
SELECT throws_ok($$SELECT reconcile_canonical_manifest(NULL)$$, '22004', NULL, 'reconcile_canonical_manifest(NULL): 22004');

-------------------------------------------------------------------------
-- Malformed manifests: 22023, from reconcile_batch and reconcile_batch_id alike
-------------------------------------------------------------------------
CREATE TEMP TABLE bad_manifest (m jsonb, why text);
INSERT INTO bad_manifest VALUES
    ('{"object_key":"o/1","version_id":"1","content_hash":"h","rows":2}', 'an object, not an array'),
    ('"o/1"', 'a scalar'),
    ('[]', 'an empty array'),
    ('[1]', 'an entry that is not an object'),
    ('[{"version_id":"1","content_hash":"h","rows":2}]', 'missing object_key'),
    ('[{"object_key":"o/1","content_hash":"h","rows":2}]', 'missing version_id'),
    ('[{"object_key":"o/1","version_id":"1","rows":2}]', 'missing content_hash'),
    ('[{"object_key":"o/1","version_id":"1","content_hash":"h"}]', 'missing rows'),
    ('[{"object_key":1,"version_id":"1","content_hash":"h","rows":2}]', 'a numeric object_key'),
    ('[{"object_key":"o/1","version_id":1,"content_hash":"h","rows":2}]', 'a numeric version_id'),
    ('[{"object_key":"o/1","version_id":"1","content_hash":null,"rows":2}]', 'a null content_hash'),
    ('[{"object_key":"","version_id":"1","content_hash":"h","rows":2}]', 'an empty object_key'),
    ('[{"object_key":"o/1","version_id":"1","content_hash":"h","rows":"2"}]', 'rows as a string'),
    ('[{"object_key":"o/1","version_id":"1","content_hash":"h","rows":-1}]', 'negative rows'),
    ('[{"object_key":"o/1","version_id":"1","content_hash":"h","rows":1.5}]', 'fractional rows'),
    ('[{"object_key":"o/1","version_id":"1","content_hash":"h","rows":9223372036854775808}]', 'rows beyond bigint'),
    ('[{"object_key":"o/1","version_id":"1","content_hash":"h","rows":2},{"object_key":"o/1","version_id":"1","content_hash":"h2","rows":2}]', 'a duplicate object version'),
    ('[{"object_key":"o/1","version_id":"1","content_hash":"h","rows":2,"size":10}]', 'an unknown field'),
    ('[{"object_key":"o/1","version_id":"1","content_hash":"h","rows":2}, null]', 'a null entry');
SELECT throws_ok(format('SELECT * FROM reconcile_batch(%L, %L, %L)', 't', 's', m),
    '22023', NULL, 'manifest refused by reconcile_batch: ' || why)
FROM bad_manifest;
SELECT throws_ok(format('SELECT reconcile_batch_id(%L)', m),
    '22023', NULL, 'manifest refused by reconcile_batch_id: ' || why)
FROM bad_manifest;
SELECT throws_ok($$SELECT reconcile_batch_id('[]')$$, '22023', 'manifest has no entries', 'the empty manifest message');
SELECT throws_ok($$SELECT reconcile_batch_id('{}')$$, '22023', 'manifest must be a JSON array', 'the not-an-array message');
SELECT throws_ok($$SELECT reconcile_batch_id('[{"object_key":"o/1","version_id":"1","content_hash":"h","rows":2},{"object_key":"o/1","version_id":"1","content_hash":"h","rows":2}]')$$,
    '22023', 'manifest lists object "o/1" version "1" more than once', 'the duplicate object version message');
SELECT is(reconcile_batch_id('[{"object_key":"o/1","version_id":"1","content_hash":"h","rows":0}]') IS NOT NULL, true,
    'rows 0 is a valid manifest entry');
SELECT is(reconcile_canonical_manifest('[{"object_key":"o/1","version_id":"1","content_hash":"h","rows":1e3}]'),
    '[{"object_key":"o/1","version_id":"1","content_hash":"h","rows":1000}]', 'rows written 1e3 is the integer 1000');
SELECT is(pg_temp.state(), 6::bigint, 'no refused batch left anything behind');

-------------------------------------------------------------------------
-- reconcile_register refusals
-------------------------------------------------------------------------
CREATE TABLE reg (id integer, code text, name text, v bigint NOT NULL, v_null bigint, d boolean NOT NULL DEFAULT false,
    h bytea, v_text text, d_int integer, h_text text, UNIQUE (id));
SELECT throws_ok($$SELECT reconcile_register('reg', '{nope}', 'v', 'd', 'h')$$,
    '42703', 'key column "nope" does not exist in table "reg"', 'register: missing key column 42703');
SELECT throws_ok($$SELECT reconcile_register('reg', '{id}', 'nope', 'd', 'h')$$,
    '42703', NULL, 'register: missing version column 42703');
SELECT throws_ok($$SELECT reconcile_register('reg', '{id}', 'v', 'nope', 'h')$$,
    '42703', NULL, 'register: missing deleted column 42703');
SELECT throws_ok($$SELECT reconcile_register('reg', '{id}', 'v', 'd', 'nope')$$,
    '42703', NULL, 'register: missing hash column 42703');
SELECT throws_ok($$SELECT reconcile_register('reg', '{id}', 'v', 'd', 'h', 'quarantine', '{nope}')$$,
    '42703', NULL, 'register: missing payload column 42703');
-- A version column orders by its type's btree operator class (1.2): text
-- has one, json none.
CREATE TABLE reg_json (id integer PRIMARY KEY, v json NOT NULL, d boolean NOT NULL DEFAULT false, h bytea);
SELECT throws_ok($$SELECT reconcile_register('reg_json', '{id}', 'v', 'd', 'h')$$,
    '42804', NULL, 'register: json version column (no btree ordering) 42804');
SELECT throws_ok($$SELECT reconcile_register('reg', '{id}', 'v', 'd_int', 'h')$$,
    '42804', NULL, 'register: integer deleted column 42804');
SELECT throws_ok($$SELECT reconcile_register('reg', '{id}', 'v', 'd', 'h_text')$$,
    '42804', NULL, 'register: text hash column 42804');
SELECT throws_ok($$SELECT reconcile_register('reg', '{code}', 'v', 'd', 'h')$$,
    '42P10', NULL, 'register: no unique index on the key 42P10');
SELECT throws_ok($$SELECT reconcile_register('reg', '{id,code}', 'v', 'd', 'h')$$,
    '42P10', NULL, 'register: a unique index on a subset of the key is not one on the key 42P10');
SELECT throws_ok($$SELECT reconcile_register('reg', '{id}', 'v', 'd', 'h', 'ignore')$$,
    '22023', 'invalid conflict_policy "ignore"', 'register: bad policy 22023');
SELECT throws_ok($$SELECT reconcile_register('reg', '{}', 'v', 'd', 'h')$$,
    '22023', NULL, 'register: empty key_columns 22023');
SELECT throws_ok($$SELECT reconcile_register('reg', '{id}', 'v_null', 'd', 'h')$$,
    '42P16', 'version column "v_null" of table "reg" must be NOT NULL', 'register: nullable version column refused');
SELECT throws_ok($$SELECT reconcile_register('reg', '{id}', 'v', 'd', 'd')$$,
    '42P10', 'column "d" of table "reg" is named more than once', 'register: one column in two roles is refused 42P10');
SELECT throws_ok($$SELECT reconcile_register('reg', '{id}', 'v', 'd', 'h', 'quarantine', '{id}')$$,
    '42P10', NULL, 'register: a key column as payload column is refused');
SELECT throws_ok($$SELECT reconcile_register(NULL, '{id}', 'v', 'd', 'h')$$, '22004', NULL, 'register: NULL target 22004');
SELECT throws_ok($$SELECT reconcile_register('reg', NULL, 'v', 'd', 'h')$$, '22004', NULL, 'register: NULL key_columns 22004');
SELECT throws_ok($$SELECT reconcile_register('reg', '{id}', NULL, 'd', 'h')$$, '22004', NULL, 'register: NULL version_column 22004');
SELECT throws_ok($$SELECT reconcile_register('reg', '{id}', 'v', 'd', 'h', NULL)$$, '22004', NULL, 'register: NULL conflict_policy 22004');
SELECT throws_ok($$SELECT reconcile_register('reg', '{id,NULL}', 'v', 'd', 'h')$$, '22004', NULL, 'register: NULL inside key_columns 22004');
CREATE VIEW reg_view AS SELECT * FROM reg;
SELECT throws_ok($$SELECT reconcile_register('reg_view', '{id}', 'v', 'd', 'h')$$, '42809', NULL, 'register: a view is not a target 42809');
SELECT is((SELECT count(*) FROM reconcile.targets WHERE target = 'reg'::regclass), 0::bigint, 'no refused registration was recorded');

-- Re-registering updates the registration; unregistering forgets it.
SELECT lives_ok($$SELECT reconcile_register('reg', '{id}', 'v', 'd', 'h', 'abort', '{name}')$$, 'register with explicit payload columns');
SELECT results_eq($$SELECT payload_columns, conflict_policy FROM reconcile.targets WHERE target = 'reg'::regclass$$,
    $$VALUES ('{name}'::text[], 'abort'::text)$$, 'the registration records payload columns and policy');
SELECT lives_ok($$SELECT reconcile_register('reg', '{id}', 'v', 'd', 'h', 'quarantine', '{name}')$$, 're-register');
SELECT is((SELECT conflict_policy FROM reconcile.targets WHERE target = 'reg'::regclass), 'quarantine', 're-registering replaces the policy');
SELECT lives_ok($$SELECT reconcile_unregister('reg')$$, 'unregister');
SELECT is((SELECT count(*) FROM reconcile.targets WHERE target = 'reg'::regclass), 0::bigint, 'unregistered');
SELECT throws_ok($$SELECT reconcile_unregister('reg')$$, '42704', NULL, 'unregistering twice: 42704');
SELECT throws_ok($$SELECT reconcile_unregister(NULL)$$, '22004', NULL, 'unregister NULL: 22004');

SELECT * FROM finish();
ROLLBACK;
