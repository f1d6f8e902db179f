-- pgTAP: the write goes through the executor, so the target's triggers,
-- CHECK constraints and partitions work as for any statement.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION reconcile;
SELECT plan(19);

-------------------------------------------------------------------------
-- Row triggers and a CHECK constraint
-------------------------------------------------------------------------
CREATE TABLE trg (id integer PRIMARY KEY, name text CHECK (name <> 'forbidden'),
    version bigint NOT NULL, deleted boolean NOT NULL DEFAULT false, hash bytea,
    touched integer NOT NULL DEFAULT 0);
SELECT reconcile_register('trg', '{id}', 'version', 'deleted', 'hash', 'quarantine', '{name}');
CREATE TABLE trg_log (op text, id integer, version bigint, deleted boolean);
CREATE FUNCTION pg_temp.trg_before() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    NEW.touched := coalesce(OLD.touched, 0) + 1;
    NEW.name := upper(NEW.name);
    RETURN NEW;
END $$;
CREATE FUNCTION pg_temp.trg_after() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO trg_log VALUES (TG_OP, NEW.id, NEW.version, NEW.deleted);
    RETURN NULL;
END $$;
CREATE TRIGGER b BEFORE INSERT OR UPDATE ON trg FOR EACH ROW EXECUTE FUNCTION pg_temp.trg_before();
CREATE TRIGGER a AFTER INSERT OR UPDATE ON trg FOR EACH ROW EXECUTE FUNCTION pg_temp.trg_after();
CREATE TABLE trg_stage (object_key text, source_row bigint, operation text, id integer, name text, version bigint);

INSERT INTO trg_stage VALUES ('t/1', 1, 'UPSERT', 1, 'one', 1), ('t/1', 2, 'UPSERT', 2, 'two', 1);
SELECT is((SELECT inserted FROM reconcile_batch('trg', 'trg_stage',
    '[{"object_key":"t/1","version_id":"1","content_hash":"x","rows":2}]')), 2::bigint, 'a target with row triggers loads');
SELECT results_eq('SELECT id, name, touched FROM trg ORDER BY id',
    $$VALUES (1, 'ONE'::text, 1), (2, 'TWO', 1)$$, 'the BEFORE trigger ran for each inserted row');
SELECT results_eq('SELECT op, id, version, deleted FROM trg_log ORDER BY id',
    $$VALUES ('INSERT'::text, 1, 1::bigint, false), ('INSERT', 2, 1, false)$$, 'the AFTER trigger ran for each inserted row');

INSERT INTO trg_stage VALUES ('t/2', 1, 'UPSERT', 1, 'uno', 2), ('t/2', 2, 'DELETE', 2, NULL, 2), ('t/2', 3, 'UPSERT', 3, 'three', 1);
SELECT results_eq($$SELECT inserted, updated, deleted FROM reconcile_batch('trg', 'trg_stage',
    '[{"object_key":"t/2","version_id":"1","content_hash":"x","rows":3}]')$$,
    $$VALUES (1::bigint, 1::bigint, 1::bigint)$$, 'an insert, an update and a delete through the triggers');
SELECT results_eq('SELECT id, name, version, deleted, touched FROM trg ORDER BY id',
    $$VALUES (1, 'UNO'::text, 2::bigint, false, 2), (2, 'TWO', 2, true, 2), (3, 'THREE', 1, false, 1)$$,
    'BEFORE UPDATE ran for the update and the tombstone (which keeps its last payload)');
SELECT results_eq($$SELECT op, id, version, deleted FROM trg_log WHERE version = 2 OR id = 3 ORDER BY id$$,
    $$VALUES ('UPDATE'::text, 1, 2::bigint, false), ('UPDATE', 2, 2, true), ('INSERT', 3, 1, false)$$,
    'AFTER triggers saw the update, the tombstone and the insert');

-- A row that violates the CHECK fails the whole batch; nothing changes.
CREATE TEMP TABLE trg_before AS SELECT * FROM trg;
INSERT INTO trg_stage VALUES ('t/3', 1, 'UPSERT', 4, 'four', 1), ('t/3', 2, 'UPSERT', 5, 'FORBIDDEN', 1);
SELECT lives_ok($$SELECT 1 FROM reconcile_batch('trg', 'trg_stage',
    '[{"object_key":"t/3","version_id":"1","content_hash":"x","rows":2}]')$$,
    'the BEFORE trigger upper-cases, so FORBIDDEN passes the lower-case CHECK');
INSERT INTO trg_stage VALUES ('t/4', 1, 'UPSERT', 6, 'six', 1);
ALTER TABLE trg ADD CONSTRAINT no_six CHECK (name <> 'SIX');
SELECT throws_ok($$SELECT 1 FROM reconcile_batch('trg', 'trg_stage',
    '[{"object_key":"t/4","version_id":"1","content_hash":"x","rows":1}]', 'src', 't/4')$$,
    '23514', NULL, 'a CHECK violation fails the batch with 23514');
SELECT is((SELECT count(*) FROM trg WHERE id = 6), 0::bigint, 'the violating row was not written');
SELECT is((SELECT count(*) FROM reconcile.receipts WHERE manifest @> '[{"object_key":"t/4"}]'), 0::bigint,
    'the failed batch has no receipt');
SELECT is((SELECT count(*) FROM reconcile.cursors), 0::bigint, 'the failed batch did not move the cursor');

-- A BEFORE trigger that skips a row makes the batch fail rather than
-- commit a receipt that claims a write that did not happen.
CREATE FUNCTION pg_temp.trg_skip() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF NEW.id = 7 THEN RETURN NULL; END IF;
    RETURN NEW;
END $$;
CREATE TRIGGER c_skip BEFORE INSERT OR UPDATE ON trg FOR EACH ROW EXECUTE FUNCTION pg_temp.trg_skip();
INSERT INTO trg_stage VALUES ('t/5', 1, 'UPSERT', 7, 'seven', 1), ('t/5', 2, 'UPSERT', 8, 'eight', 1);
SELECT throws_ok($$SELECT 1 FROM reconcile_batch('trg', 'trg_stage',
    '[{"object_key":"t/5","version_id":"1","content_hash":"x","rows":2}]')$$,
    '09000', NULL, 'a trigger that skips a row fails the batch with 09000 (triggered action exception)');
SELECT is((SELECT count(*) FROM trg WHERE id IN (7, 8)), 0::bigint, 'and nothing of it is written');

-------------------------------------------------------------------------
-- A partitioned target
-------------------------------------------------------------------------
CREATE TABLE part (region text, id integer, name text, version integer NOT NULL,
    deleted boolean NOT NULL DEFAULT false, hash bytea, PRIMARY KEY (region, id))
    PARTITION BY LIST (region);
CREATE TABLE part_eu PARTITION OF part FOR VALUES IN ('eu');
CREATE TABLE part_us PARTITION OF part FOR VALUES IN ('us');
CREATE TABLE part_other PARTITION OF part DEFAULT;
SELECT lives_ok($$SELECT reconcile_register('part', '{region,id}', 'version', 'deleted', 'hash')$$,
    'a partitioned table registers');
CREATE TABLE part_stage (object_key text, source_row bigint, operation text, region text, id text, name text, version text);
INSERT INTO part_stage VALUES
    ('p/1', 1, 'UPSERT', 'eu', '1', 'e1', '1'),
    ('p/1', 2, 'UPSERT', 'us', '1', 'u1', '1'),
    ('p/1', 3, 'UPSERT', 'ap', '1', 'a1', '1'),
    ('p/1', 4, 'UPSERT', 'eu', '2', 'e2', '1');
SELECT is((SELECT inserted FROM reconcile_batch('part', 'part_stage',
    '[{"object_key":"p/1","version_id":"1","content_hash":"x","rows":4}]')), 4::bigint, 'partitioned: four inserts');
SELECT results_eq('SELECT tableoid::regclass::text, region, id FROM part ORDER BY region, id',
    $$VALUES ('part_other'::text, 'ap'::text, 1), ('part_eu', 'eu', 1), ('part_eu', 'eu', 2), ('part_us', 'us', 1)$$,
    'partitioned: rows routed to their partitions');
INSERT INTO part_stage VALUES
    ('p/2', 1, 'UPSERT', 'eu', '1', 'e1 v2', '2'),
    ('p/2', 2, 'DELETE', 'us', '1', NULL, '2'),
    ('p/2', 3, 'UPSERT', 'ap', '1', 'a1 old', '0'),
    ('p/2', 4, 'UPSERT', 'eu', '2', 'e2', '1'),
    ('p/2', 5, 'UPSERT', 'eu', '2', 'e2 other', '1');
SELECT results_eq($$SELECT updated, deleted, stale, unchanged, conflicts FROM reconcile_batch('part', 'part_stage',
    '[{"object_key":"p/2","version_id":"1","content_hash":"x","rows":5}]')$$,
    $$VALUES (1::bigint, 1::bigint, 1::bigint, 0::bigint, 2::bigint)$$,
    'partitioned: update, tombstone, stale and a quarantined key found across partitions');
SELECT results_eq('SELECT region, id, name, version, deleted FROM part ORDER BY region, id',
    $$VALUES ('ap'::text, 1, 'a1'::text, 1, false), ('eu', 1, 'e1 v2', 2, false), ('eu', 2, 'e2', 1, false), ('us', 1, 'u1', 2, true)$$,
    'partitioned: each key at its highest version');
INSERT INTO part_stage VALUES ('p/3', 1, 'UPSERT', 'eu', '2', 'e2', '1'), ('p/3', 2, 'UPSERT', 'us', '1', 'u1', '1');
SELECT results_eq($$SELECT unchanged, stale FROM reconcile_batch('part', 'part_stage',
    '[{"object_key":"p/3","version_id":"1","content_hash":"x","rows":2}]')$$,
    $$VALUES (1::bigint, 1::bigint)$$, 'partitioned: an equal row is unchanged, an old one cannot resurrect a tombstone');

SELECT * FROM finish();
ROLLBACK;
