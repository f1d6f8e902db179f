-- pgTAP: conflicts, two payloads claiming one key and version, inside the
-- batch or against the target, under both conflict policies.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION reconcile;
SELECT plan(25);

CREATE FUNCTION pg_temp.sha(t text) RETURNS bytea LANGUAGE sql AS $$
    SELECT sha256(convert_to(t, 'UTF8'))
$$;

-------------------------------------------------------------------------
-- quarantine
-------------------------------------------------------------------------
CREATE TABLE q (region text, id integer, name text, version bigint NOT NULL,
    deleted boolean NOT NULL DEFAULT false, hash bytea, PRIMARY KEY (region, id));
SELECT reconcile_register('q', '{region,id}', 'version', 'deleted', 'hash', 'quarantine');
CREATE TABLE q_stage (object_key text, source_row bigint, operation text,
    region text, id text, name text, version text);
INSERT INTO q_stage VALUES
    ('q/0', 1, 'UPSERT', 'eu', '1', 'One', '5'),
    ('q/0', 2, 'UPSERT', 'eu', '2', 'Two', '5');
SELECT is((SELECT inserted FROM reconcile_batch('q', 'q_stage',
    '[{"object_key":"q/0","version_id":"1","content_hash":"x","rows":2}]')), 2::bigint, 'seed two keys');
CREATE TEMP TABLE seeded AS SELECT * FROM q;

INSERT INTO q_stage VALUES
    -- in-batch conflict on (eu,3): v2 'A' vs v2 'B', plus a v1 row of the same key
    ('q/1', 1, 'UPSERT', 'eu', '3', 'A', '2'),
    ('q/1', 2, 'UPSERT', 'eu', '3', 'B', '2'),
    ('q/2', 1, 'UPSERT', 'eu', '3', 'Old', '1'),
    -- against the target on (eu,1): v5 with another payload
    ('q/2', 2, 'UPSERT', 'eu', '1', 'Uno', '5'),
    -- (eu,2) at v5 with the same payload: unchanged, no conflict
    ('q/2', 3, 'UPSERT', 'eu', '2', 'Two', '5'),
    -- clean new key
    ('q/2', 4, 'UPSERT', 'us', '1', 'Yankee', '1'),
    -- conflict at a lower version inside the batch, higher version agrees
    ('q/2', 5, 'UPSERT', 'us', '2', 'X', '3'),
    ('q/2', 6, 'UPSERT', 'us', '2', 'Y', '2'),
    ('q/2', 7, 'UPSERT', 'us', '2', 'Z', '2'),
    -- a DELETE and an UPSERT at the same version are different payloads too
    ('q/2', 8, 'UPSERT', 'us', '3', 'Live', '4'),
    ('q/2', 9, 'DELETE', 'us', '3', 'Live', '4');
CREATE TEMP TABLE r AS SELECT * FROM reconcile_batch('q', 'q_stage',
    '[{"object_key":"q/1","version_id":"1","content_hash":"x","rows":2},{"object_key":"q/2","version_id":"1","content_hash":"x","rows":9}]');

SELECT results_eq('SELECT status, inserted, unchanged, conflicts, staged_rows FROM r',
    $$VALUES ('committed'::text, 1::bigint, 1::bigint, 9::bigint, 11::bigint)$$,
    'quarantine: every row of a conflicting key is held back, the rest applies');
SELECT set_eq('SELECT region, id, name, version FROM q',
    $$VALUES ('eu'::text, 1, 'One'::text, 5::bigint), ('eu', 2, 'Two', 5), ('us', 1, 'Yankee', 1)$$,
    'quarantine: conflicting keys are neither written nor changed; the clean key is inserted');
SELECT set_eq('SELECT hash FROM q WHERE region = ''eu''', 'SELECT hash FROM seeded',
    'quarantine: the target rows of conflicting keys keep their hash');

CREATE TEMP VIEW c AS SELECT key, version, object_key, source_row, staged_hash, existing_hash
    FROM reconcile.conflicts WHERE batch_id = (SELECT batch_id FROM r);
SELECT is((SELECT count(*) FROM c), 9::bigint, 'nine conflict rows, one per held-back staged row');
SELECT results_eq($$SELECT version, object_key, source_row, staged_hash, existing_hash FROM c
                    WHERE key = '{"region":"eu","id":3}' ORDER BY object_key, source_row$$,
    $$VALUES (2::bigint, 'q/1'::text, 1::bigint, pg_temp.sha('["A",false]'), NULL::bytea),
             (2, 'q/1', 2, pg_temp.sha('["B",false]'), NULL),
             (1, 'q/2', 1, pg_temp.sha('["Old",false]'), NULL)$$,
    'in-batch conflict: every row of the key, with its own version and staged hash, no existing hash');
SELECT results_eq($$SELECT version, object_key, source_row, staged_hash, existing_hash FROM c
                    WHERE key = '{"region":"eu","id":1}'$$,
    $$SELECT 5::bigint, 'q/2'::text, 2::bigint, pg_temp.sha('["Uno",false]'), hash FROM seeded WHERE id = 1$$,
    'conflict against the target: staged hash and the existing hash');
SELECT is((SELECT count(*) FROM c WHERE key = '{"region":"us","id":2}'), 3::bigint,
    'a conflict at a lower version holds back the whole key');
SELECT is((SELECT count(*) FROM c WHERE key = '{"region":"us","id":3}'), 2::bigint,
    'an UPSERT and a DELETE at one version conflict');
SELECT is((SELECT array_agg(DISTINCT target::text) FROM reconcile.conflicts WHERE batch_id = (SELECT batch_id FROM r)),
    '{q}'::text[], 'conflicts name their target');
SELECT results_eq($$SELECT o->>'object_key', (o->>'conflicts')::int, (o->>'inserted')::int, (o->>'unchanged')::int
                    FROM r, jsonb_array_elements(reconcile_receipt_objects(target, batch_id)) AS o$$,
    $$VALUES ('q/1', 2, 0, 0), ('q/2', 7, 1, 1)$$, 'per-object conflict counts');

-- A conflict is held back, not lost: a later batch with a higher version resolves the key.
INSERT INTO q_stage VALUES ('q/3', 1, 'UPSERT', 'eu', '3', 'Settled', '3');
SELECT is((SELECT inserted FROM reconcile_batch('q', 'q_stage',
    '[{"object_key":"q/3","version_id":"1","content_hash":"x","rows":1}]')), 1::bigint,
    'a higher version of a quarantined key loads later');

-------------------------------------------------------------------------
-- abort
-------------------------------------------------------------------------
CREATE TABLE a (id text PRIMARY KEY, name text, version integer NOT NULL,
    deleted boolean NOT NULL DEFAULT false, hash bytea);
SELECT reconcile_register('a', '{id}', 'version', 'deleted', 'hash', 'abort');
CREATE TABLE a_stage (object_key text, source_row bigint, operation text, id text, name text, version integer);
INSERT INTO a_stage VALUES ('a/0', 1, 'UPSERT', 'K1', 'One', 1);
SELECT is((SELECT inserted FROM reconcile_batch('a', 'a_stage',
    '[{"object_key":"a/0","version_id":"1","content_hash":"x","rows":1}]', 'src', 'a/0')), 1::bigint, 'abort target seeded');
CREATE TEMP TABLE a_before AS SELECT * FROM a;

-- in-batch
INSERT INTO a_stage VALUES ('a/1', 1, 'UPSERT', 'K2', 'P', 1), ('a/1', 2, 'UPSERT', 'K2', 'Q', 1),
    ('a/1', 3, 'UPSERT', 'K3', 'fine', 1);
SELECT throws_ok($$SELECT * FROM reconcile_batch('a', 'a_stage',
    '[{"object_key":"a/1","version_id":"1","content_hash":"x","rows":3}]', 'src', 'a/1')$$,
    '23505', NULL, 'abort: an in-batch conflict fails the batch with 23505');
SELECT throws_like($$SELECT * FROM reconcile_batch('a', 'a_stage',
    '[{"object_key":"a/1","version_id":"1","content_hash":"x","rows":3}]')$$,
    '%has 2 conflicting rows for table "a"%', 'abort: the error counts the conflicting rows');
SELECT set_eq('SELECT * FROM a', 'SELECT * FROM a_before', 'abort: the target is unchanged (K3 not inserted)');
SELECT is((SELECT count(*) FROM reconcile.receipts WHERE target = 'a'::regclass), 1::bigint, 'abort: no receipt');
SELECT is((SELECT "position" FROM reconcile.cursors WHERE target = 'a'::regclass), 'a/0', 'abort: the cursor did not move');
SELECT is((SELECT count(*) FROM reconcile.conflicts WHERE target = 'a'::regclass), 0::bigint, 'abort: no conflict rows');

-- against the target
INSERT INTO a_stage VALUES ('a/2', 1, 'UPSERT', 'K1', 'Other', 1), ('a/2', 2, 'UPSERT', 'K4', 'fine', 1);
SELECT throws_ok($$SELECT * FROM reconcile_batch('a', 'a_stage',
    '[{"object_key":"a/2","version_id":"1","content_hash":"x","rows":2}]')$$,
    '23505', NULL, 'abort: a conflict against the target fails the batch with 23505');
SELECT throws_like($$SELECT * FROM reconcile_batch('a', 'a_stage',
    '[{"object_key":"a/2","version_id":"1","content_hash":"x","rows":2}]')$$,
    '%conflicting rows%', 'abort: the error says why');
SELECT set_eq('SELECT * FROM a', 'SELECT * FROM a_before', 'abort: the target is unchanged (K4 not inserted)');

-- The error names the first conflicts: key, object and source row.
CREATE FUNCTION pg_temp.abort_detail(m jsonb) RETURNS text LANGUAGE plpgsql AS $$
DECLARE d text;
BEGIN
    PERFORM * FROM reconcile_batch('a', 'a_stage', m);
    RETURN NULL;
EXCEPTION WHEN unique_violation THEN
    GET STACKED DIAGNOSTICS d = PG_EXCEPTION_DETAIL;
    RETURN d;
END $$;
SELECT matches(pg_temp.abort_detail('[{"object_key":"a/2","version_id":"1","content_hash":"x","rows":2}]'),
    'K1', 'abort: the detail names the conflicting key');
SELECT matches(pg_temp.abort_detail('[{"object_key":"a/1","version_id":"1","content_hash":"x","rows":3}]'),
    'a/1', 'abort: the detail names the object');

-- Without a conflict an abort target loads normally.
INSERT INTO a_stage VALUES ('a/3', 1, 'UPSERT', 'K1', 'One', 1), ('a/3', 2, 'UPSERT', 'K1', 'Newer', 2);
SELECT results_eq($$SELECT updated, stale FROM reconcile_batch('a', 'a_stage',
    '[{"object_key":"a/3","version_id":"1","content_hash":"x","rows":2}]')$$,
    $$VALUES (1::bigint, 1::bigint)$$, 'abort target: an equal repeat at a lower version is just stale');

SELECT * FROM finish();
ROLLBACK;
