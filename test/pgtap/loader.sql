-- pgTAP: the loader's main job.  The replay scenario of issue 2, receipts
-- (counts, per-object counts, checksum, cursor, batch id), the payload
-- hash's documented canonical form, composite keys, views as stages and
-- staged payload hashes.  Self-contained; everything is rolled back.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION reconcile;
SELECT plan(78);

-- A 256-bit big-endian number as numeric, to check the receipt checksum
-- (the sum of the written payload hashes modulo 2^256).
CREATE FUNCTION pg_temp.h2n(h bytea) RETURNS numeric LANGUAGE sql AS $$
    SELECT coalesce(sum(get_byte(h, i)::numeric * 256::numeric ^ (31 - i)), 0)
    FROM generate_series(0, 31) AS i
$$;
CREATE FUNCTION pg_temp.sha(t text) RETURNS bytea LANGUAGE sql AS $$
    SELECT sha256(convert_to(t, 'UTF8'))
$$;

-------------------------------------------------------------------------
-- The scenario
-------------------------------------------------------------------------
CREATE TABLE customer_state (
    customer_id  text PRIMARY KEY,
    name         text,
    version      bigint NOT NULL,
    is_deleted   boolean NOT NULL DEFAULT false,
    payload_hash bytea
);
CREATE TABLE customer_stage (
    object_key  text,
    source_row  bigint,
    operation   text,
    customer_id text,
    version     text,
    name        text
);

SELECT lives_ok($$
    SELECT reconcile_register(target => 'customer_state', key_columns => '{customer_id}',
        version_column => 'version', deleted_column => 'is_deleted',
        hash_column => 'payload_hash', conflict_policy => 'quarantine')
$$, 'customer_state registers');

SELECT is((SELECT key_columns FROM reconcile.targets WHERE target = 'customer_state'::regclass),
    '{customer_id}'::text[], 'registration records the key columns');
SELECT is((SELECT payload_columns FROM reconcile.targets WHERE target = 'customer_state'::regclass),
    '{name}'::text[], 'payload columns default to the columns that are not key, version, deleted or hash');

-- The target holds C1 v1 'Ana', loaded by an earlier batch.
INSERT INTO customer_stage VALUES ('crm/part-0000.csv', 1, 'UPSERT', 'C1', '1', 'Ana');
CREATE TEMP TABLE r0 AS
SELECT * FROM reconcile_batch(target => 'customer_state', staged => 'customer_stage',
    manifest => '[{"object_key":"crm/part-0000.csv","version_id":"v0","content_hash":"sha256:00","rows":1}]',
    source => 'crm-feed', cursor => 'crm/part-0000.csv@v0');
SELECT results_eq('SELECT status, inserted, staged_rows FROM r0',
    $$VALUES ('committed'::text, 1::bigint, 1::bigint)$$, 'the first batch inserts C1 v1');

INSERT INTO customer_stage VALUES
    ('crm/part-0001.csv', 1, 'UPSERT', 'C1', '2', 'Ana Lee'),
    ('crm/part-0001.csv', 2, 'UPSERT', 'C2', '1', 'Dev'),
    ('crm/part-0001.csv', 3, 'UPSERT', 'C2', '1', 'Dev'),
    ('crm/part-0001.csv', 4, 'UPSERT', 'C3', 'two', 'Eve'),
    ('crm/part-0001.csv', 5, 'UPSERT', 'C1', '1', 'Ana');

CREATE TEMP TABLE r1 AS
SELECT * FROM reconcile_batch(target => 'customer_state', staged => 'customer_stage',
    manifest => '[{"object_key":"crm/part-0001.csv","version_id":"3Lg","content_hash":"sha256:9f2c","rows":5}]',
    source => 'crm-feed', cursor => 'crm/part-0001.csv@3Lg');

SELECT results_eq(
    'SELECT status, inserted, updated, deleted, unchanged, stale, duplicates, conflicts, rejected, staged_rows FROM r1',
    $$VALUES ('committed'::text, 1::bigint, 1::bigint, 0::bigint, 0::bigint, 1::bigint, 1::bigint, 0::bigint, 1::bigint, 5::bigint)$$,
    'scenario: C2 inserted, C1 updated, late C1 v1 stale, one duplicate, one reject');
SELECT results_eq(
    'SELECT customer_id, name, version, is_deleted FROM customer_state ORDER BY customer_id',
    $$VALUES ('C1'::text, 'Ana Lee'::text, 2::bigint, false), ('C2', 'Dev', 1, false)$$,
    'scenario: two live keys at versions 2 and 1');
SELECT results_eq(
    $$SELECT object_key, source_row, column_name, raw_value FROM reconcile.rejects
      WHERE batch_id = (SELECT batch_id FROM r1)$$,
    $$VALUES ('crm/part-0001.csv'::text, 4::bigint, 'version'::text, 'two'::text)$$,
    'scenario: one reject naming its object, source row, column and raw value');
SELECT matches((SELECT reason FROM reconcile.rejects WHERE batch_id = (SELECT batch_id FROM r1)),
    '^version is not a valid bigint', 'the reject says why');
SELECT is((SELECT count(*) FROM reconcile.receipts WHERE batch_id = (SELECT batch_id FROM r1)),
    1::bigint, 'scenario: one receipt');
SELECT is((SELECT staged_rows FROM reconcile.receipts WHERE batch_id = (SELECT batch_id FROM r1)),
    5::bigint, 'the stored receipt counts five staged rows');

-- The batch id is derived from the manifest, as documented.
SELECT is((SELECT batch_id FROM r1),
    reconcile_batch_id('[{"object_key":"crm/part-0001.csv","version_id":"3Lg","content_hash":"sha256:9f2c","rows":5}]'),
    'batch_id equals reconcile_batch_id(manifest)');
SELECT is((SELECT batch_id FROM r1),
    encode(sha256(convert_to(reconcile_canonical_manifest(
        '[{"object_key":"crm/part-0001.csv","version_id":"3Lg","content_hash":"sha256:9f2c","rows":5}]'), 'UTF8')), 'hex'),
    'batch_id is the hex SHA-256 of the canonical manifest');
SELECT is(reconcile_canonical_manifest(
        '[{"rows":5,"content_hash":"sha256:9f2c","version_id":"3Lg","object_key":"crm/part-0001.csv"}]'),
    '[{"object_key":"crm/part-0001.csv","version_id":"3Lg","content_hash":"sha256:9f2c","rows":5}]',
    'the canonical manifest writes fields in a fixed order with no blanks');
SELECT is(reconcile_canonical_manifest(
        '[{"object_key":"b","version_id":"1","content_hash":"h","rows":1},{"object_key":"a","version_id":"2","content_hash":"g","rows":0}]'),
    '[{"object_key":"a","version_id":"2","content_hash":"g","rows":0},{"object_key":"b","version_id":"1","content_hash":"h","rows":1}]',
    'the canonical manifest sorts entries by object_key');
SELECT is(reconcile_batch_id('[{"object_key":"b","version_id":"1","content_hash":"h","rows":1},{"object_key":"a","version_id":"2","content_hash":"g","rows":0}]'),
    reconcile_batch_id('[{"content_hash":"g","rows":0,"object_key":"a","version_id":"2"},{"object_key":"b","version_id":"1","content_hash":"h","rows":1}]'),
    'entry and field order do not change the batch id');
SELECT isnt(reconcile_batch_id('[{"object_key":"a","version_id":"1","content_hash":"h","rows":1}]'),
    reconcile_batch_id('[{"object_key":"a","version_id":"1","content_hash":"h","rows":2}]'),
    'a different row count is a different batch');
SELECT matches(reconcile_batch_id('[{"object_key":"a","version_id":"1","content_hash":"h","rows":1}]'),
    '^[0-9a-f]{64}$', 'the batch id is 64 lowercase hex digits');
SELECT is(reconcile_canonical_manifest('[{"object_key":"é\"\\/\n","version_id":"1","content_hash":"h","rows":1}]'),
    '[{"object_key":"é\"\\/\n","version_id":"1","content_hash":"h","rows":1}]',
    'canonical strings are escaped as JSON requires and no more (non-ASCII kept)');

-- Per-object counts, checksum, cursor.
SELECT is((SELECT reconcile_receipt_objects(target, batch_id) FROM r1),
    '[{"object_key":"crm/part-0001.csv","version_id":"3Lg","rows":5,"inserted":1,"updated":1,"deleted":0,"unchanged":0,"stale":1,"duplicates":1,"conflicts":0,"rejected":1}]'::jsonb,
    'reconcile_receipt_objects gives the per-object counts');
SELECT is((SELECT objects FROM r1), NULL, 'the receipt returned keeps no objects document (schema 1.2)');
SELECT is((SELECT count(*) FROM reconcile.batch_objects WHERE batch_id = (SELECT batch_id FROM r1) AND inserted = 1 AND stale = 1),
    1::bigint, 'the per-object counts are in reconcile.batch_objects');
SELECT is((SELECT pg_temp.h2n(decode(checksum, 'hex')) FROM r1),
    (SELECT sum(pg_temp.h2n(payload_hash)) % (2::numeric ^ 256) FROM customer_state),
    'checksum is the sum of the written payload hashes modulo 2^256');
SELECT is((SELECT checksum FROM r0), encode(pg_temp.sha('["Ana",false]'), 'hex'),
    'a batch that writes one row has that row''s payload hash as its checksum');
SELECT results_eq($$SELECT "position", batch_id FROM reconcile.cursors
                    WHERE target = 'customer_state'::regclass AND source = 'crm-feed'$$,
    $$SELECT 'crm/part-0001.csv@3Lg'::text, batch_id FROM r1$$,
    'the cursor moved with the batch');
SELECT results_eq($$SELECT object_key, version_id, content_hash, "rows" FROM reconcile.batch_objects
                    WHERE batch_id = (SELECT batch_id FROM r1)$$,
    $$VALUES ('crm/part-0001.csv'::text, '3Lg'::text, 'sha256:9f2c'::text, 5::bigint)$$,
    'batch_objects records the object version');
SELECT results_eq($$SELECT source, "cursor", committed_by FROM reconcile.receipts
                    WHERE batch_id = (SELECT batch_id FROM r1)$$,
    $$VALUES ('crm-feed'::text, 'crm/part-0001.csv@3Lg'::text, current_user::name)$$,
    'the receipt records source, cursor and the committing role');
SELECT is((SELECT count(*) FROM reconcile.receipts
           WHERE staged_rows <> inserted + updated + deleted + unchanged + stale + duplicates + conflicts + rejected),
    0::bigint, 'counts add up to staged rows in every stored receipt');

-- Replay: same receipt, status 'replayed', nothing changes.
CREATE TEMP TABLE before_replay AS SELECT * FROM customer_state;
CREATE TEMP TABLE r1b AS
SELECT * FROM reconcile_batch(target => 'customer_state', staged => 'customer_stage',
    manifest => '[{"object_key":"crm/part-0001.csv","version_id":"3Lg","content_hash":"sha256:9f2c","rows":5}]',
    source => 'crm-feed', cursor => 'crm/part-0001.csv@3Lg');
SELECT is((SELECT status FROM r1b), 'replayed', 'replay: status replayed');
SELECT results_eq(
    'SELECT batch_id, inserted, updated, deleted, unchanged, stale, duplicates, conflicts, rejected, checksum, committed_at, staged_rows, objects FROM r1b',
    'SELECT batch_id, inserted, updated, deleted, unchanged, stale, duplicates, conflicts, rejected, checksum, committed_at, staged_rows, objects FROM r1',
    'replay: the same receipt, with the original commit time');
SELECT set_eq('SELECT * FROM customer_state', 'SELECT * FROM before_replay', 'replay: the target is unchanged');
SELECT is((SELECT count(*) FROM reconcile.receipts), 2::bigint, 'replay: no new receipt');
SELECT is((SELECT count(*) FROM reconcile.rejects), 1::bigint, 'replay: no new rejects');
-- Same manifest, fields in another order: the same batch.
SELECT is((SELECT status FROM reconcile_batch('customer_state', 'customer_stage',
    '[{"rows":5,"content_hash":"sha256:9f2c","object_key":"crm/part-0001.csv","version_id":"3Lg"}]')),
    'replayed', 'replay: a reordered manifest is the same batch');

-- A different payload at C1 v2 is a conflict; C1 stays 'Ana Lee'.
INSERT INTO customer_stage VALUES ('crm/part-0002.csv', 1, 'UPSERT', 'C1', '2', 'Ana Smith');
CREATE TEMP TABLE r2 AS
SELECT * FROM reconcile_batch('customer_state', 'customer_stage',
    '[{"object_key":"crm/part-0002.csv","version_id":"x1","content_hash":"sha256:aa","rows":1}]',
    'crm-feed', 'crm/part-0002.csv@x1');
SELECT results_eq('SELECT status, conflicts, inserted + updated + deleted FROM r2',
    $$VALUES ('committed'::text, 1::bigint, 0::bigint)$$, 'conflict: counted, nothing written');
SELECT results_eq($$SELECT name, version FROM customer_state WHERE customer_id = 'C1'$$,
    $$VALUES ('Ana Lee'::text, 2::bigint)$$, 'conflict: C1 stays Ana Lee at v2');
SELECT results_eq($$SELECT key, version, object_key, source_row, staged_hash, existing_hash
                    FROM reconcile.conflicts WHERE batch_id = (SELECT batch_id FROM r2)$$,
    $$SELECT '{"customer_id":"C1"}'::jsonb, 2::bigint, 'crm/part-0002.csv'::text, 1::bigint,
             pg_temp.sha('["Ana Smith",false]'), payload_hash FROM customer_state WHERE customer_id = 'C1'$$,
    'conflict: recorded with key, version, object, source row, staged and existing hash');

-- DELETE C1 at v3, then replay the old C1 v2 object under a new manifest.
INSERT INTO customer_stage VALUES ('crm/part-0003.csv', 1, 'DELETE', 'C1', '3', NULL);
CREATE TEMP TABLE r3 AS
SELECT * FROM reconcile_batch('customer_state', 'customer_stage',
    '[{"object_key":"crm/part-0003.csv","version_id":"d1","content_hash":"sha256:bb","rows":1}]');
SELECT results_eq('SELECT status, deleted, staged_rows FROM r3',
    $$VALUES ('committed'::text, 1::bigint, 1::bigint)$$, 'delete: C1 deleted at v3');
SELECT results_eq($$SELECT version, is_deleted, payload_hash FROM customer_state WHERE customer_id = 'C1'$$,
    $$VALUES (3::bigint, true, pg_temp.sha('[null,true]'))$$, 'delete: C1 is a v3 tombstone with the hash of its delete');

CREATE TEMP TABLE r4 AS
SELECT * FROM reconcile_batch('customer_state', 'customer_stage',
    '[{"object_key":"crm/part-0001.csv","version_id":"3Lg","content_hash":"sha256:9f2c","rows":5},
      {"object_key":"crm/part-0000.csv","version_id":"v0","content_hash":"sha256:00","rows":1}]');
SELECT results_eq('SELECT status, inserted, updated, deleted, unchanged, stale, duplicates, conflicts, rejected, staged_rows FROM r4',
    $$VALUES ('committed'::text, 0::bigint, 0::bigint, 0::bigint, 1::bigint, 2::bigint, 2::bigint, 0::bigint, 1::bigint, 6::bigint)$$,
    'late replay under a new manifest: C2 unchanged, C1 v2 and v1 stale, the repeats of C2 v1 and C1 v1 duplicates');
SELECT results_eq($$SELECT customer_id, version, is_deleted FROM customer_state ORDER BY customer_id$$,
    $$VALUES ('C1'::text, 3::bigint, true), ('C2', 1, false)$$, 'late replay: C1 stays a v3 tombstone');
SELECT results_eq($$SELECT customer_id FROM customer_state WHERE NOT is_deleted$$,
    $$VALUES ('C2'::text)$$, 'late replay: only C2 is live');
SELECT is((SELECT checksum FROM r4), repeat('0', 64), 'a batch that writes nothing has a zero checksum');
SELECT results_eq($$SELECT o->>'object_key', (o->>'rows')::int, (o->>'stale')::int, (o->>'unchanged')::int
                    FROM r4, jsonb_array_elements(reconcile_receipt_objects(target, batch_id)) AS o$$,
    $$VALUES ('crm/part-0000.csv', 1, 1, 0), ('crm/part-0001.csv', 5, 1, 1)$$,
    'objects lists every object in object_key order with its own counts');

-- A later higher-version UPSERT may re-create a deleted key.
INSERT INTO customer_stage VALUES ('crm/part-0004.csv', 1, 'UPSERT', 'C1', '4', 'Ana Again');
SELECT is((SELECT updated FROM reconcile_batch('customer_state', 'customer_stage',
    '[{"object_key":"crm/part-0004.csv","version_id":"r","content_hash":"sha256:cc","rows":1}]')),
    1::bigint, 'a v4 UPSERT re-creates C1');
SELECT results_eq($$SELECT name, version, is_deleted FROM customer_state WHERE customer_id = 'C1'$$,
    $$VALUES ('Ana Again'::text, 4::bigint, false)$$, 'C1 is live again at v4');

-- A DELETE of a key the target never had leaves a tombstone.
INSERT INTO customer_stage VALUES ('crm/part-0005.csv', 1, 'DELETE', 'C9', '7', NULL);
SELECT is((SELECT deleted FROM reconcile_batch('customer_state', 'customer_stage',
    '[{"object_key":"crm/part-0005.csv","version_id":"r","content_hash":"sha256:dd","rows":1}]')),
    1::bigint, 'a DELETE of an unknown key counts as deleted');
SELECT results_eq($$SELECT version, is_deleted FROM customer_state WHERE customer_id = 'C9'$$,
    $$VALUES (7::bigint, true)$$, 'and leaves a tombstone so an older row cannot resurrect it');

-- Winners: highest version; ties broken by (object_key, source_row).
INSERT INTO customer_stage VALUES
    ('crm/part-0007.csv', 1, 'UPSERT', 'C5', '2', 'Second'),
    ('crm/part-0006.csv', 9, 'UPSERT', 'C5', '3', 'Third'),
    ('crm/part-0006.csv', 2, 'UPSERT', 'C5', '1', 'First'),
    ('crm/part-0007.csv', 2, 'UPSERT', 'C5', '3', 'Third');
CREATE TEMP TABLE r5 AS
SELECT * FROM reconcile_batch('customer_state', 'customer_stage',
    '[{"object_key":"crm/part-0006.csv","version_id":"1","content_hash":"sha256:e1","rows":2},
      {"object_key":"crm/part-0007.csv","version_id":"1","content_hash":"sha256:e2","rows":2}]');
SELECT results_eq('SELECT inserted, stale, duplicates FROM r5',
    $$VALUES (1::bigint, 2::bigint, 1::bigint)$$, 'winners: one insert, lower versions stale, the repeat a duplicate');
SELECT results_eq($$SELECT o->>'object_key', (o->>'inserted')::int, (o->>'duplicates')::int, (o->>'stale')::int
                    FROM r5, jsonb_array_elements(reconcile_receipt_objects(target, batch_id)) AS o$$,
    $$VALUES ('crm/part-0006.csv', 1, 0, 1), ('crm/part-0007.csv', 0, 1, 1)$$,
    'the first row in (object_key, source_row) order wins the tie');
SELECT results_eq($$SELECT name, version FROM customer_state WHERE customer_id = 'C5'$$,
    $$VALUES ('Third'::text, 3::bigint)$$, 'the highest version wins');

-------------------------------------------------------------------------
-- The payload hash's canonical form
-------------------------------------------------------------------------
CREATE TABLE typed_state (
    id        integer PRIMARY KEY,
    amount    numeric(10,2),
    seen_at   timestamptz,
    span      interval,
    note      text,
    version   integer NOT NULL,
    gone      boolean NOT NULL DEFAULT false,
    h         bytea
);
SELECT reconcile_register('typed_state', '{id}', 'version', 'gone', 'h');
CREATE TABLE typed_stage (object_key text, source_row int, operation text,
    id text, amount text, seen_at text, span text, note text, version text);
INSERT INTO typed_stage VALUES
    ('t/1', 1, 'UPSERT', '1', '12.5', '2024-03-01 12:00:00+02', '1 day 2 hours', NULL, '1'),
    ('t/2', 1, 'UPSERT', '2', '12.5', '2024-03-01 12:00:00+02', '1 day 2 hours', NULL, '1'),
    ('t/3', 1, 'UPSERT', '3', '0', '2024-03-01 10:00:00+00', '26:00:00', 'say "hi"\', '1');

SET LOCAL TimeZone = 'UTC';
SET LOCAL DateStyle = 'ISO, MDY';
SET LOCAL IntervalStyle = 'postgres';
SELECT is((SELECT inserted FROM reconcile_batch('typed_state', 'typed_stage',
    '[{"object_key":"t/1","version_id":"1","content_hash":"x","rows":1}]')), 1::bigint, 'typed row 1 loaded');
SET LOCAL TimeZone = 'America/New_York';
SET LOCAL DateStyle = 'SQL, DMY';
SET LOCAL IntervalStyle = 'iso_8601';
SET LOCAL extra_float_digits = 3;
SELECT is((SELECT inserted FROM reconcile_batch('typed_state', 'typed_stage',
    '[{"object_key":"t/2","version_id":"1","content_hash":"x","rows":1},{"object_key":"t/3","version_id":"1","content_hash":"x","rows":1}]')),
    2::bigint, 'typed rows 2 and 3 loaded under other session settings');
SELECT is((SELECT h FROM typed_state WHERE id = 1),
    pg_temp.sha('["12.50","2024-03-01 10:00:00+00","1 day 02:00:00",null,false]'),
    'payload hash: SHA-256 of the documented JSON text (numeric, UTC ISO timestamptz, interval, null)');
SELECT is((SELECT h FROM typed_state WHERE id = 2), (SELECT h FROM typed_state WHERE id = 1),
    'payload hash: the same under another TimeZone, DateStyle and IntervalStyle');
SELECT is((SELECT h FROM typed_state WHERE id = 3),
    pg_temp.sha('["0.00","2024-03-01 10:00:00+00","26:00:00","say \"hi\"\\",false]'),
    'payload hash: strings are JSON-escaped');
RESET TimeZone;
RESET DateStyle;
RESET IntervalStyle;
RESET extra_float_digits;
SELECT results_eq('SELECT amount, seen_at, span FROM typed_state WHERE id = 1',
    $$VALUES (12.50::numeric, '2024-03-01 10:00:00+00'::timestamptz, '1 day 2 hours'::interval)$$,
    'text staged values are cast to the target types');

-------------------------------------------------------------------------
-- Composite key, staged view, staged payload_hash
-------------------------------------------------------------------------
CREATE TABLE ledger (
    region  text,
    account integer,
    day     date,
    balance numeric NOT NULL,
    rev     bigint NOT NULL,
    dead    boolean NOT NULL DEFAULT false,
    digest  bytea,
    UNIQUE (region, account, day)
);
SELECT lives_ok($$SELECT reconcile_register('ledger', '{region,account,day}', 'rev', 'dead', 'digest', 'abort')$$,
    'a composite key registers');
CREATE TABLE ledger_raw (file text, line bigint, op text, region text, account text, day text, balance text, rev text);
CREATE VIEW ledger_stage AS
    SELECT file AS object_key, line AS source_row, op AS operation, region, account, day, balance, rev
    FROM ledger_raw;
INSERT INTO ledger_raw VALUES
    ('l/1', 1, 'UPSERT', 'eu', '7', '2024-03-01', '10', '1'),
    ('l/1', 2, 'UPSERT', 'eu', '7', '2024-03-02', '11', '1'),
    ('l/1', 3, 'UPSERT', 'eu', '8', '2024-03-01', '12', '1'),
    ('l/1', 4, 'UPSERT', 'us', '7', '2024-03-01', '13', '1'),
    ('l/1', 5, 'UPSERT', 'eu', '7', '2024-03-01', '14', '2'),
    ('l/1', 6, 'UPSERT', 'eu', '7', '2024-3-1', '10', '1');
CREATE TEMP TABLE rl AS SELECT * FROM reconcile_batch('ledger', 'ledger_stage',
    '[{"object_key":"l/1","version_id":"1","content_hash":"x","rows":6}]');
SELECT results_eq('SELECT inserted, stale, duplicates, staged_rows FROM rl',
    $$VALUES (4::bigint, 1::bigint, 1::bigint, 6::bigint)$$,
    'composite key through a view: four keys, v1 of (eu,7,2024-03-01) stale, its repeat written 2024-3-1 a duplicate after the cast');
SELECT results_eq('SELECT region, account, day, balance, rev FROM ledger ORDER BY 1, 2, 3',
    $$VALUES ('eu'::text, 7, '2024-03-01'::date, 14::numeric, 2::bigint),
             ('eu', 7, '2024-03-02', 11, 1), ('eu', 8, '2024-03-01', 12, 1), ('us', 7, '2024-03-01', 13, 1)$$,
    'composite key: keys cast from text, each key at its highest version');
SELECT is((SELECT count(*) FROM reconcile.receipts WHERE target = 'ledger'::regclass), 1::bigint,
    'the view-staged batch has its receipt');

-- Staged payload_hash: bytea, hex text, and an invalid one.
CREATE TABLE hashed_state (k text PRIMARY KEY, v text, version bigint NOT NULL,
    deleted boolean NOT NULL DEFAULT false, payload_hash bytea);
SELECT reconcile_register('hashed_state', '{k}', 'version', 'deleted', 'payload_hash');
CREATE TABLE hashed_stage_b (object_key text, source_row bigint, operation text,
    k text, v text, version bigint, payload_hash bytea);
INSERT INTO hashed_stage_b VALUES
    ('h/1', 1, 'UPSERT', 'a', 'A', 1, sha256('given a')),
    ('h/1', 2, 'UPSERT', 'b', 'B', 1, NULL),
    ('h/1', 3, 'UPSERT', 'c', 'C', 1, '\x0102');
CREATE TEMP TABLE rh AS SELECT * FROM reconcile_batch('hashed_state', 'hashed_stage_b',
    '[{"object_key":"h/1","version_id":"1","content_hash":"x","rows":3}]');
SELECT results_eq('SELECT inserted, rejected FROM rh', $$VALUES (2::bigint, 1::bigint)$$,
    'bytea payload_hash: two rows loaded, the short digest rejected');
SELECT results_eq('SELECT k, payload_hash FROM hashed_state ORDER BY k',
    $$VALUES ('a'::text, sha256('given a')), ('b', pg_temp.sha('["B",false]'))$$,
    'a staged bytea payload_hash is stored as given; a NULL one is computed');
SELECT results_eq($$SELECT source_row, column_name, raw_value, reason FROM reconcile.rejects
                    WHERE batch_id = (SELECT batch_id FROM rh)$$,
    $$VALUES (3::bigint, 'payload_hash'::text, '\x0102'::text,
              'payload_hash is not a SHA-256 digest (32 bytes, or 64 hex digits)'::text)$$,
    'an invalid bytea payload_hash is rejected');

CREATE TABLE hashed_stage_t (object_key text, source_row bigint, operation text,
    k text, v text, version bigint, payload_hash text);
INSERT INTO hashed_stage_t VALUES
    ('h/2', 1, 'UPSERT', 'd', 'D', 1, encode(sha256('given d'), 'hex')),
    ('h/2', 2, 'UPSERT', 'e', 'E', 1, 'sha256:' || upper(encode(sha256('given e'), 'hex'))),
    ('h/2', 3, 'UPSERT', 'f', 'F', 1, '\x' || encode(sha256('given f'), 'hex')),
    ('h/2', 4, 'UPSERT', 'g', 'G', 1, 'not a digest'),
    ('h/2', 5, 'UPSERT', 'i', 'I', 1, repeat('z', 64));
CREATE TEMP TABLE rt AS SELECT * FROM reconcile_batch('hashed_state', 'hashed_stage_t',
    '[{"object_key":"h/2","version_id":"1","content_hash":"x","rows":5}]');
SELECT results_eq('SELECT inserted, rejected FROM rt', $$VALUES (3::bigint, 2::bigint)$$,
    'hex text payload_hash: three loaded, two rejected');
SELECT results_eq($$SELECT k, payload_hash FROM hashed_state WHERE k IN ('d', 'e', 'f') ORDER BY k$$,
    $$VALUES ('d'::text, sha256('given d')), ('e', sha256('given e')), ('f', sha256('given f'))$$,
    'hex text payload_hash (plain, sha256: prefix, \x prefix) is decoded');
SELECT results_eq($$SELECT source_row, raw_value FROM reconcile.rejects
                    WHERE batch_id = (SELECT batch_id FROM rt) ORDER BY source_row$$,
    $$VALUES (4::bigint, 'not a digest'::text), (5, repeat('z', 64))$$,
    'invalid hex payload_hash values are rejected with their raw value');

-- More types: float8, bytea, date, jsonb, an array, boolean and time, under
-- extra_float_digits, bytea_output and DateStyle settings that change their
-- session text form.
CREATE TABLE more_types (id integer PRIMARY KEY, f float8, b bytea, dd date, j jsonb, arr integer[],
    bo boolean, tt time, version integer NOT NULL, del boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('more_types', '{id}', 'version', 'del', 'h');
CREATE TABLE more_types_stage (object_key text, source_row integer, operation text, id integer, f float8, b bytea,
    dd date, j jsonb, arr integer[], bo boolean, tt time, version integer);
INSERT INTO more_types_stage VALUES
    ('m/1', 1, 'UPSERT', 1, 0.1, '\x00ff', '2024-03-01', '{"b":1,"a":[1,2]}', '{1,2}', true, '10:00', 1),
    ('m/2', 1, 'UPSERT', 2, 0.1, '\x00ff', '2024-03-01', '{"b":1,"a":[1,2]}', '{1,2}', true, '10:00', 1);
SET LOCAL extra_float_digits = -10;
SET LOCAL bytea_output = 'escape';
SET LOCAL DateStyle = 'German';
SELECT is((SELECT inserted FROM reconcile_batch('more_types', 'more_types_stage',
    '[{"object_key":"m/1","version_id":"1","content_hash":"x","rows":1}]')), 1::bigint, 'more types: row 1 loaded');
RESET extra_float_digits;
RESET bytea_output;
RESET DateStyle;
SELECT is((SELECT inserted FROM reconcile_batch('more_types', 'more_types_stage',
    '[{"object_key":"m/2","version_id":"1","content_hash":"x","rows":1}]')), 1::bigint, 'more types: row 2 loaded');
SELECT results_eq('SELECT id, h FROM more_types ORDER BY id',
    $$VALUES (1, pg_temp.sha('["0.1","\\x00ff","2024-03-01","{\"a\": [1, 2], \"b\": 1}","{1,2}","t","10:00:00",false]')),
             (2, pg_temp.sha('["0.1","\\x00ff","2024-03-01","{\"a\": [1, 2], \"b\": 1}","{1,2}","t","10:00:00",false]'))$$,
    'payload hash of float8, bytea, date, jsonb, array, boolean and time: documented form, same in both sessions');

-------------------------------------------------------------------------
-- Identifiers that need quoting, a temporary stage, cursors
-------------------------------------------------------------------------
CREATE SCHEMA "odd sch";
CREATE TABLE "odd sch"."T""able" ("Key Col" text PRIMARY KEY, "na""me" text, "drop me" integer,
    "Ver" bigint NOT NULL, "del?" boolean NOT NULL DEFAULT false, "h#" bytea);
ALTER TABLE "odd sch"."T""able" DROP COLUMN "drop me";
SELECT lives_ok($$SELECT reconcile_register('"odd sch"."T""able"', '{Key Col}', 'Ver', 'del?', 'h#')$$,
    'a table with a dropped column and names that need quoting registers');
CREATE TEMP TABLE "Stage ""1""" (object_key text, source_row integer, operation text, "Key Col" text, "na""me" text, "Ver" text);
INSERT INTO "Stage ""1""" VALUES ('q/1', 1, 'UPSERT', 'k''1', 'x"y', '1'), ('q/1', 2, 'DELETE', 'k2', NULL, '1'),
    ('q/2', 1, 'UPSERT', 'k''1', 'x"y', '2'), ('q/2', 2, 'UPSERT', 'k2', 'back', '2');
SELECT results_eq($$SELECT inserted, deleted FROM reconcile_batch('"odd sch"."T""able"', 'pg_temp."Stage ""1"""',
    '[{"object_key":"q/1","version_id":"1","content_hash":"x","rows":2}]', 'feed one', 'q/1')$$,
    $$VALUES (1::bigint, 1::bigint)$$, 'quoted names and a temporary stage: insert and tombstone');
SELECT results_eq($$SELECT updated FROM reconcile_batch('"odd sch"."T""able"', 'pg_temp."Stage ""1"""',
    '[{"object_key":"q/2","version_id":"1","content_hash":"x","rows":2}]', 'feed two', 'q/2')$$,
    $$VALUES (2::bigint)$$, 'quoted names: updates');
SELECT results_eq($$SELECT "Key Col", "na""me", "Ver", "del?" FROM "odd sch"."T""able" ORDER BY 1$$,
    $$VALUES ('k''1'::text, 'x"y'::text, 2::bigint, false), ('k2', 'back', 2, false)$$,
    'quoted names: the target holds the right rows');
SELECT results_eq($$SELECT source, "position" FROM reconcile.cursors WHERE target = '"odd sch"."T""able"'::regclass ORDER BY source$$,
    $$VALUES ('feed one'::text, 'q/1'::text), ('feed two', 'q/2')$$,
    'each source has its own cursor');
SELECT is((SELECT status FROM reconcile_batch('"odd sch"."T""able"', 'pg_temp."Stage ""1"""',
    '[{"object_key":"q/1","version_id":"1","content_hash":"x","rows":2}]', 'feed one', 'somewhere else')),
    'replayed', 'a replay with another cursor position is still a replay');
SELECT is((SELECT "position" FROM reconcile.cursors WHERE target = '"odd sch"."T""able"'::regclass AND source = 'feed one'),
    'q/1', 'and does not move the cursor');
SELECT is((SELECT staged_rows FROM reconcile_batch('"odd sch"."T""able"', 'pg_temp."Stage ""1"""',
    '[{"object_key":"q/none","version_id":"1","content_hash":"x","rows":0}]')),
    0::bigint, 'an object with rows 0 and nothing staged commits an empty receipt');

-- A NULL in one column of a composite key is rejected, naming that column.
INSERT INTO ledger_raw VALUES ('l/2', 1, 'UPSERT', 'eu', NULL, '2024-03-01', '1', '9');
CREATE TEMP TABLE rn AS SELECT * FROM reconcile_batch('ledger', 'ledger_stage',
    '[{"object_key":"l/2","version_id":"1","content_hash":"x","rows":1}]');
SELECT results_eq($$SELECT column_name, reason FROM reconcile.rejects WHERE batch_id = (SELECT batch_id FROM rn)$$,
    $$VALUES ('account'::text, 'key column is null'::text)$$, 'composite key: a NULL component is rejected by name');

SELECT * FROM finish();
ROLLBACK;
