-- pgTAP: the direct write path (a plain table without triggers, READ
-- COMMITTED) and the general one (reconcile.write_path = 'general') give
-- the same result, and both honour what the target declares: NOT NULL,
-- CHECK, other unique indexes, generated columns, defaults of columns the
-- batch does not provide, secondary indexes and TOASTed values.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION reconcile;
SELECT plan(30);

-- One target per write path, identical.  Staged rows are written as
-- 'operation|id|email|score|note|version', an empty field being NULL.
CREATE TABLE w_auto (
    id        integer PRIMARY KEY,
    email     text NOT NULL UNIQUE,
    score     integer CHECK (score >= 0),
    doubled   integer GENERATED ALWAYS AS (score * 2) STORED,
    note      text,
    loaded_at text NOT NULL DEFAULT 'default value',
    serial    bigint GENERATED ALWAYS AS IDENTITY,
    version   bigint NOT NULL,
    deleted   boolean NOT NULL DEFAULT false,
    hash      bytea
);
CREATE INDEX ON w_auto (note);
CREATE INDEX ON w_auto ((lower(email)));
CREATE TABLE w_general (LIKE w_auto INCLUDING ALL);
SELECT reconcile_register('w_auto', '{id}', 'version', 'deleted', 'hash', 'quarantine', '{email,score,note}');
SELECT reconcile_register('w_general', '{id}', 'version', 'deleted', 'hash', 'quarantine', '{email,score,note}');
CREATE TABLE w_stage (object_key text, source_row bigint, operation text, id text, email text, score text, note text, version text);

-- Run a batch on path p's target with reconcile.write_path = p.
CREATE FUNCTION pg_temp.load(p text, obj text, nrows int) RETURNS SETOF reconcile.receipt LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('reconcile.write_path', p, true);
    RETURN QUERY SELECT * FROM reconcile_batch(('w_' || p)::regclass, 'w_stage',
        jsonb_build_array(jsonb_build_object('object_key', obj || '@' || p, 'version_id', '1',
                                             'content_hash', 'x', 'rows', nrows)));
    PERFORM set_config('reconcile.write_path', 'auto', true);
END $$;
CREATE TEMP TABLE paths (p text);
INSERT INTO paths VALUES ('auto'), ('general');
CREATE FUNCTION pg_temp.stage(obj text, rows text[]) RETURNS void LANGUAGE sql AS $$
    INSERT INTO w_stage
    SELECT obj || '@' || p, r.n, r.v[1], r.v[2], r.v[3], r.v[4], r.v[5], r.v[6]
    FROM paths, LATERAL (SELECT n, string_to_array(rows[n], '|', '') AS v FROM generate_subscripts(rows, 1) AS n) AS r
$$;
-- The rows of both targets, minus what may differ (the identity values are drawn from one sequence each).
CREATE FUNCTION pg_temp.rows(p text) RETURNS TABLE (id int, email text, score int, doubled int, note text,
    loaded_at text, version bigint, deleted boolean, hash bytea) LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY EXECUTE format('SELECT id, email, score, doubled, note, loaded_at, version, deleted, hash FROM %I ORDER BY id', 'w_' || p);
END $$;

SELECT pg_temp.stage('w/1', ARRAY['UPSERT|1|a@x|10|first|1', 'UPSERT|2|b@x|20||1', 'DELETE|3|c@x|||1', 'UPSERT|4|d@x|40|' || repeat('long ', 40000) || '|1']);
SELECT results_eq(format($$SELECT inserted, deleted FROM pg_temp.load(%L, 'w/1', 4)$$, p),
    $$VALUES (3::bigint, 1::bigint)$$, p || ': three inserts and a tombstone')
FROM paths;
SELECT results_eq('SELECT id, doubled, loaded_at FROM pg_temp.rows(''auto'') WHERE NOT deleted',
    $$VALUES (1, 20, 'default value'::text), (2, 40, 'default value'), (4, 80, 'default value')$$,
    'direct path: generated column computed, default applied to a column the batch does not provide');
SELECT set_eq('SELECT * FROM pg_temp.rows(''auto'')', 'SELECT * FROM pg_temp.rows(''general'')',
    'both paths write the same rows');
SELECT is((SELECT count(*) FROM w_auto WHERE serial IS NULL), 0::bigint, 'direct path: identity column filled');
SELECT is((SELECT length(note) FROM w_auto WHERE id = 4), 200000, 'direct path: a 200 kB value is stored (TOASTed) whole');

SELECT pg_temp.stage('w/2', ARRAY['UPSERT|1|a@x|11|second|2', 'UPSERT|2|b@x|21|now set|2', 'UPSERT|3|c2@x|30|back|2', 'UPSERT|4|d@x|40|short|0']);
SELECT results_eq(format($$SELECT updated, stale FROM pg_temp.load(%L, 'w/2', 4)$$, p),
    $$VALUES (3::bigint, 1::bigint)$$, p || ': three updates (one re-creates a tombstone), one stale')
FROM paths;
SELECT set_eq('SELECT * FROM pg_temp.rows(''auto'')', 'SELECT * FROM pg_temp.rows(''general'')',
    'both paths still agree after updates');
SELECT results_eq('SELECT id, score, doubled, note, deleted FROM w_auto ORDER BY id',
    $$VALUES (1, 11, 22, 'second'::text, false), (2, 21, 42, 'now set', false), (3, 30, 60, 'back', false),
             (4, 40, 80, repeat('long ', 40000), false)$$,
    'direct path: updated rows and generated columns');

-- Secondary indexes follow the updates.
SET LOCAL enable_seqscan = off;
SET LOCAL enable_bitmapscan = off;
SELECT results_eq(format($$SELECT id FROM %I WHERE note = 'now set'$$, 'w_' || p), $$VALUES (2)$$,
    p || ': the index on note finds the updated value')
FROM paths;
SELECT is_empty(format($$SELECT id FROM %I WHERE note = 'first'$$, 'w_' || p),
    p || ': the index on note no longer finds the old value')
FROM paths;
SELECT results_eq(format($$SELECT id FROM %I WHERE lower(email) = 'c2@x'$$, 'w_' || p), $$VALUES (3)$$,
    p || ': an expression index follows the update')
FROM paths;
RESET enable_seqscan;
RESET enable_bitmapscan;

-- Constraints fail the batch, on both paths, and nothing of it stays.
CREATE TEMP TABLE snapshot_auto AS SELECT * FROM pg_temp.rows('auto');
SELECT pg_temp.stage('w/3', ARRAY['UPSERT|5|e@x|50||1', 'UPSERT|6|f@x|-1||1']);
SELECT throws_ok(format($$SELECT * FROM pg_temp.load(%L, 'w/3', 2)$$, p), '23514', NULL,
    p || ': a CHECK violation fails the batch with 23514')
FROM paths;
SELECT pg_temp.stage('w/4', ARRAY['UPSERT|7|g@x|70||1', 'UPSERT|8||80||1']);
SELECT throws_ok(format($$SELECT * FROM pg_temp.load(%L, 'w/4', 2)$$, p), '23502', NULL,
    p || ': a NULL in a NOT NULL payload column fails the batch with 23502')
FROM paths;
SELECT pg_temp.stage('w/5', ARRAY['UPSERT|9|h@x|90||1', 'UPSERT|10|a@x|100||1']);
SELECT throws_ok(format($$SELECT * FROM pg_temp.load(%L, 'w/5', 2)$$, p), '23505', NULL,
    p || ': a duplicate in another unique index fails the batch with 23505')
FROM paths;
SELECT pg_temp.stage('w/6', ARRAY['UPSERT|1|a@x|-5||9']);
SELECT throws_ok(format($$SELECT * FROM pg_temp.load(%L, 'w/6', 1)$$, p), '23514', NULL,
    p || ': a CHECK violation on update fails the batch')
FROM paths;
SELECT set_eq('SELECT * FROM pg_temp.rows(''auto'')', 'SELECT * FROM snapshot_auto', 'the failed batches left the target as it was');
SELECT set_eq('SELECT * FROM pg_temp.rows(''general'')', 'SELECT * FROM snapshot_auto', 'on both paths');
SELECT is((SELECT count(*) FROM reconcile.receipts WHERE manifest::text ~ 'w/[3-6]@'), 0::bigint, 'and have no receipts');

-- A rule on the target is honoured whichever path is chosen.
CREATE TABLE rule_log (p text, id integer);
CREATE RULE log_auto AS ON INSERT TO w_auto DO ALSO INSERT INTO rule_log VALUES ('auto', NEW.id);
CREATE RULE log_general AS ON INSERT TO w_general DO ALSO INSERT INTO rule_log VALUES ('general', NEW.id);
SELECT pg_temp.stage('w/7', ARRAY['UPSERT|20|t@x|1||1']);
SELECT is((SELECT inserted FROM pg_temp.load(p, 'w/7', 1)), 1::bigint, p || ': insert on a target with a rule')
FROM paths;
SELECT results_eq('SELECT p, id FROM rule_log ORDER BY p',
    $$VALUES ('auto'::text, 20), ('general', 20)$$,
    'a DO ALSO rule on INSERT fired on both paths');

SELECT * FROM finish();
ROLLBACK;
