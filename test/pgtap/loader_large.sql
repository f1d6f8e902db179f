-- pgTAP: batches larger than work_mem and than one fetch from the staged
-- relation.  The sort spills to disk; every count and row must still be
-- right.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION reconcile;
SELECT plan(8);

CREATE TABLE big (id integer PRIMARY KEY, name text, version bigint NOT NULL,
    deleted boolean NOT NULL DEFAULT false, hash bytea);
SELECT reconcile_register('big', '{id}', 'version', 'deleted', 'hash');
CREATE TABLE big_stage (object_key text, source_row bigint, operation text, id integer, name text, version bigint);
-- 30000 rows over 3 objects, 7000 keys: each key at versions 0..4, the
-- highest one wins; one row with a NULL key.
INSERT INTO big_stage
    SELECT 'big/' || (g % 3), g, 'UPSERT', g % 7000, repeat('x', 50) || (g % 7000), g / 7000
    FROM generate_series(1, 30000) AS g;
INSERT INTO big_stage VALUES ('big/0', 0, 'UPSERT', NULL, 'x', 1);
CREATE TEMP TABLE manifest AS
    SELECT jsonb_agg(jsonb_build_object('object_key', k, 'version_id', '1', 'content_hash', 'h', 'rows', n)) AS m
    FROM (SELECT object_key AS k, count(*) AS n FROM big_stage GROUP BY 1) AS s;

SET LOCAL work_mem = '64kB';
SELECT lives_ok($$CREATE TEMP TABLE r AS SELECT * FROM reconcile_batch('big', 'big_stage', (SELECT m FROM manifest))$$,
    'a 30001-row batch with work_mem 64kB commits');
SELECT results_eq('SELECT status, inserted, stale, rejected, staged_rows FROM r',
    $$VALUES ('committed'::text, 7000::bigint, 23000::bigint, 1::bigint, 30001::bigint)$$,
    'large batch: 7000 inserted, 23000 stale, one reject, all rows counted');
SELECT is((SELECT count(*) FROM big AS b
           FULL JOIN (SELECT id, max(version) AS v FROM big_stage WHERE id IS NOT NULL GROUP BY id) AS s USING (id)
           WHERE b.version IS DISTINCT FROM s.v),
    0::bigint, 'large batch: every key at its highest staged version');
SELECT is((SELECT count(*) FROM big b WHERE hash <> sha256(convert_to(format('[%s,false]', to_json(name)), 'UTF8'))),
    0::bigint, 'large batch: every payload hash in its documented form');
SELECT is((SELECT sum((o->>'rows')::int) FROM r, jsonb_array_elements(reconcile_receipt_objects(target, batch_id)) AS o), 30001::bigint,
    'large batch: per-object rows add up');

-- The same batch again is a replay; a second large batch updates in place.
SELECT is((SELECT status FROM reconcile_batch('big', 'big_stage', (SELECT m FROM manifest))), 'replayed',
    'large batch: replayed');
UPDATE big_stage SET object_key = 'next/' || object_key, version = version + 10;
SELECT results_eq($$SELECT updated, stale FROM reconcile_batch('big', 'big_stage',
    (SELECT jsonb_agg(jsonb_build_object('object_key', k, 'version_id', '1', 'content_hash', 'h', 'rows', n))
     FROM (SELECT object_key AS k, count(*) AS n FROM big_stage GROUP BY 1) AS s))$$,
    $$VALUES (7000::bigint, 23000::bigint)$$, 'a second large batch under a small work_mem updates every key');
SELECT is((SELECT min(version) FROM big), 13::bigint, 'every key moved to its new version');

SELECT * FROM finish();
ROLLBACK;
