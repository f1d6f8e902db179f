-- delete_mode 'remove' against 'tombstone' on one batch shape: N new keys,
-- then DELETEs of half of them, then late lower versions of every key
-- (stale), then re-creations of the deleted half.  Run with
--   psql -v n=200000 -f bench/remove/run.sql
-- in a database with reconcile; it prints one line per step and mode.
\set ON_ERROR_STOP on
SET client_min_messages = warning;
DROP TABLE IF EXISTS bt, br, bstage, bsteps;
CREATE TABLE bt (id bigint PRIMARY KEY, name text, v bigint NOT NULL, del boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE br (LIKE bt INCLUDING ALL);
SELECT reconcile_register('bt', '{id}', 'v', 'del', 'h');
SELECT reconcile_register('br', '{id}', 'v', 'del', 'h', options => '{"delete_mode": "remove"}');
CREATE TABLE bstage (object_key text, source_row bigint, operation text, id bigint, name text, v bigint);
INSERT INTO bstage SELECT 'new', g, 'UPSERT', g, 'name ' || g, 10 FROM generate_series(1, :n) g;
INSERT INTO bstage SELECT 'del', g, 'DELETE', g, NULL, 20 FROM generate_series(1, :n, 2) g;
INSERT INTO bstage SELECT 'late', g, 'UPSERT', g, 'late ' || g, 5 FROM generate_series(1, :n) g;
INSERT INTO bstage SELECT 'back', g, 'UPSERT', g, 'back ' || g, 30 FROM generate_series(1, :n, 2) g;
ANALYZE bstage;
CREATE TABLE bsteps (step text, mode text, ms numeric, inserted bigint, updated bigint, deleted bigint, stale bigint);
CREATE FUNCTION pg_temp.step(o text, tgt regclass, mode text) RETURNS void LANGUAGE plpgsql AS $$
DECLARE t0 timestamptz := clock_timestamp(); r record;
BEGIN
    SELECT * INTO r FROM reconcile_batch(tgt, 'bstage', jsonb_build_array(jsonb_build_object('object_key', o,
        'version_id', '1', 'content_hash', 'h', 'rows', (SELECT count(*) FROM bstage WHERE object_key = o))));
    INSERT INTO bsteps VALUES (o, mode, round(extract(epoch FROM clock_timestamp() - t0) * 1000),
                               r.inserted, r.updated, r.deleted, r.stale);
END $$;
SELECT pg_temp.step('new', 'bt', 'tombstone');
SELECT pg_temp.step('new', 'br', 'remove');
SELECT pg_temp.step('del', 'bt', 'tombstone');
SELECT pg_temp.step('del', 'br', 'remove');
SELECT pg_temp.step('late', 'bt', 'tombstone');
SELECT pg_temp.step('late', 'br', 'remove');
SELECT pg_temp.step('back', 'bt', 'tombstone');
SELECT pg_temp.step('back', 'br', 'remove');
SELECT * FROM bsteps;
SELECT reconcile_unregister('br');
DROP TABLE bt, br, bstage, bsteps;
