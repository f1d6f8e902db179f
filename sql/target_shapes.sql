-- Every target shape gets one behaviour, whichever write path a batch takes
-- (reconcile.write_path 'auto', the direct path where it may, or
-- 'general'), and registration refuses what no batch could load correctly.
-- Array arguments are bounded before any work is done with them.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

-- Load the staged object 'o' into a target with the given write path, as
-- the given version_id (a new batch each time); show the receipt's counts or
-- the error.
CREATE FUNCTION load(target regclass, staged regclass, path text, version_id text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r reconcile.receipt;
    n bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM %s', staged) INTO n;
    PERFORM set_config('reconcile.write_path', path, true);
    SELECT * INTO r FROM reconcile_batch(target, staged, jsonb_build_array(jsonb_build_object(
        'object_key', 'o', 'version_id', version_id, 'content_hash', 'h', 'rows', n)));
    RETURN format('%s: %s inserted, %s updated', path, r.inserted, r.updated);
EXCEPTION WHEN OTHERS THEN
    RETURN format('%s: ERROR %s: %s', path, SQLSTATE, SQLERRM);
END $$;

---------------------------------------------------------------------------
-- Bounded arguments: key_columns is at most INDEX_MAX_KEYS (32) names, the
-- most a unique index has; payload_columns at most the table's columns.
CREATE TABLE wide (id int PRIMARY KEY, n int, version bigint NOT NULL,
    deleted boolean NOT NULL DEFAULT false, hash bytea);
SELECT reconcile_register('wide', array_fill('id'::text, ARRAY[5000]), 'version', 'deleted', 'hash');
SELECT reconcile_register('wide', ARRAY(SELECT 'c' || g FROM generate_series(1, 33) g),
    'version', 'deleted', 'hash');
SELECT reconcile_register('wide', ARRAY(SELECT 'c' || g FROM generate_series(1, 32) g),
    'version', 'deleted', 'hash');
SELECT reconcile_register('wide', ARRAY['id', 'id'], 'version', 'deleted', 'hash');
SELECT reconcile_register('wide', ARRAY['id', 'version'], 'version', 'deleted', 'hash');
SELECT reconcile_register('wide', ARRAY['id'], 'version', 'deleted', 'hash',
    payload_columns => array_fill('n'::text, ARRAY[5000]));
SELECT reconcile_register('wide', ARRAY['id'], 'version', 'deleted', 'hash',
    payload_columns => ARRAY['n', 'n']);
SELECT reconcile_register('wide', ARRAY[['id'], ['n']], 'version', 'deleted', 'hash');
SELECT reconcile_register('wide', ARRAY['id', NULL], 'version', 'deleted', 'hash');
SELECT reconcile_register('wide', '{}', 'version', 'deleted', 'hash');
SELECT count(*) AS registered FROM reconcile.targets;

-- The limit itself: a key of 32 columns, and a batch over it.
SELECT format('CREATE TABLE key32 (%s, n int, version bigint NOT NULL,'
              ' deleted boolean NOT NULL DEFAULT false, hash bytea, UNIQUE (%s))',
              string_agg('k' || g || ' int', ', '), string_agg('k' || g, ', '))
  FROM generate_series(1, 32) g \gexec
SELECT reconcile_register('key32', ARRAY(SELECT 'k' || g FROM generate_series(32, 1, -1) g),
    'version', 'deleted', 'hash');
SELECT format('CREATE TABLE key32_stage AS SELECT %L::text AS object_key, 1::bigint AS source_row,'
              ' %L::text AS operation, %s, 7 AS n, 1::bigint AS version',
              'o', 'UPSERT', string_agg(g || ' AS k' || g, ', '))
  FROM generate_series(1, 32) g \gexec
SELECT load('key32', 'key32_stage', 'auto', 'k32a');
UPDATE key32_stage SET version = 2, n = 8;
SELECT load('key32', 'key32_stage', 'general', 'k32b');
SELECT k1, k32, n, version FROM key32;

---------------------------------------------------------------------------
-- Identity columns GENERATED ALWAYS: PostgreSQL generates their values, and
-- no write path writes a staged value into one.  Left out of the default
-- payload; refused when named, as a key or when made GENERATED ALWAYS after
-- registration.
CREATE TABLE ident (id text PRIMARY KEY, seq int GENERATED ALWAYS AS IDENTITY,
    n int NOT NULL, version bigint NOT NULL, deleted boolean NOT NULL DEFAULT false, hash bytea);
SELECT reconcile_register('ident', ARRAY['id'], 'version', 'deleted', 'hash',
    payload_columns => ARRAY['seq', 'n']);
SELECT reconcile_register('ident', ARRAY['id'], 'version', 'deleted', 'hash');
SELECT payload_columns FROM reconcile.targets WHERE target = 'ident'::regclass;
CREATE TABLE ident_stage (object_key text, source_row bigint, operation text,
    id text, version bigint, seq int, n int);
INSERT INTO ident_stage VALUES ('o', 1, 'UPSERT', 'A', 1, 100, 5), ('o', 2, 'UPSERT', 'B', 1, 200, 6);
SELECT load('ident', 'ident_stage', 'auto', 'i1');
UPDATE ident_stage SET version = 2, n = n + 10;
SELECT load('ident', 'ident_stage', 'general', 'i2');
SELECT id, seq, n, version FROM ident ORDER BY id;
-- GENERATED ALWAYS after registration: every batch is refused, on both paths.
ALTER TABLE ident ALTER COLUMN n ADD GENERATED ALWAYS AS IDENTITY;
UPDATE ident_stage SET version = 3;
SELECT load('ident', 'ident_stage', 'auto', 'i3');
SELECT load('ident', 'ident_stage', 'general', 'i4');
-- GENERATED BY DEFAULT takes the staged value, on both paths.
ALTER TABLE ident ALTER COLUMN n SET GENERATED BY DEFAULT;
SELECT load('ident', 'ident_stage', 'auto', 'i5');
UPDATE ident_stage SET version = 4, n = n + 10;
SELECT load('ident', 'ident_stage', 'general', 'i6');
SELECT id, seq, n, version FROM ident ORDER BY id;
-- An identity key.
CREATE TABLE ident_key (id int GENERATED ALWAYS AS IDENTITY PRIMARY KEY, version bigint NOT NULL,
    deleted boolean NOT NULL DEFAULT false, hash bytea);
SELECT reconcile_register('ident_key', ARRAY['id'], 'version', 'deleted', 'hash');

---------------------------------------------------------------------------
-- Inheritance: a unique index does not span parent and children, so a
-- table with inheritance children, or one that inherits, is refused, at
-- registration and at every batch (a child can be added later).
CREATE TABLE parent (id text PRIMARY KEY, n int, version bigint NOT NULL,
    deleted boolean NOT NULL DEFAULT false, hash bytea);
CREATE TABLE child () INHERITS (parent);
CREATE UNIQUE INDEX ON child (id);
INSERT INTO child (id, n, version) VALUES ('K', 1, 1);
SELECT reconcile_register('parent', ARRAY['id'], 'version', 'deleted', 'hash');
SELECT reconcile_register('child', ARRAY['id'], 'version', 'deleted', 'hash');
CREATE TABLE loner (LIKE parent INCLUDING ALL);
SELECT reconcile_register('loner', ARRAY['id'], 'version', 'deleted', 'hash');
CREATE TABLE inh_stage (object_key text, source_row bigint, operation text,
    id text, version bigint, n int);
INSERT INTO inh_stage VALUES ('o', 1, 'UPSERT', 'K', 2, 5);
SELECT load('loner', 'inh_stage', 'auto', 'l1');
CREATE TABLE late_child () INHERITS (loner);
UPDATE inh_stage SET version = 3;
SELECT load('loner', 'inh_stage', 'auto', 'l2');
SELECT load('loner', 'inh_stage', 'general', 'l3');
ALTER TABLE late_child NO INHERIT loner;
SELECT load('loner', 'inh_stage', 'general', 'l4');
ALTER TABLE loner INHERIT parent;
SELECT load('loner', 'inh_stage', 'auto', 'l5');
ALTER TABLE loner NO INHERIT parent;
SELECT tableoid::regclass, id, n, version FROM parent ORDER BY 1, 2;
SELECT id, n, version FROM loner ORDER BY 1;

---------------------------------------------------------------------------
-- Other shapes, one behaviour for both paths.
-- A partition registered on its own: a key outside its bounds is refused
-- as an INSERT into the partition refuses it.
CREATE TABLE proot (id text PRIMARY KEY, n int, version bigint NOT NULL,
    deleted boolean NOT NULL DEFAULT false, hash bytea) PARTITION BY RANGE (id);
CREATE TABLE pam PARTITION OF proot FOR VALUES FROM ('A') TO ('N');
CREATE TABLE pnz PARTITION OF proot FOR VALUES FROM ('N') TO (MAXVALUE);
SELECT reconcile_register('pam', ARRAY['id'], 'version', 'deleted', 'hash');
CREATE TABLE part_stage (object_key text, source_row bigint, operation text,
    id text, version bigint, n int);
INSERT INTO part_stage VALUES ('o', 1, 'UPSERT', 'B', 1, 5), ('o', 2, 'UPSERT', 'Z', 1, 6);
SELECT load('pam', 'part_stage', 'auto', 'p1');
SELECT load('pam', 'part_stage', 'general', 'p2');
DELETE FROM part_stage WHERE id = 'Z';
SELECT load('pam', 'part_stage', 'auto', 'p3');
SELECT tableoid::regclass, id, n FROM proot ORDER BY 1, 2;

-- A table with a rule, and one with a BEFORE trigger: the batch takes the
-- general path whatever reconcile.write_path says, so that the rule and the
-- trigger act alike.
CREATE TABLE ruled (LIKE loner INCLUDING ALL);
CREATE TABLE ruled_log (id text, n int);
CREATE RULE log_insert AS ON INSERT TO ruled DO ALSO INSERT INTO ruled_log VALUES (NEW.id, NEW.n);
SELECT reconcile_register('ruled', ARRAY['id'], 'version', 'deleted', 'hash');
SELECT load('ruled', 'inh_stage', 'auto', 'r1');
SELECT * FROM ruled_log;
CREATE TABLE trig (LIKE loner INCLUDING ALL);
CREATE FUNCTION double_n() RETURNS trigger LANGUAGE plpgsql AS
$$ BEGIN NEW.n := NEW.n * 2; RETURN NEW; END $$;
CREATE TRIGGER double_n BEFORE INSERT OR UPDATE ON trig FOR EACH ROW EXECUTE FUNCTION double_n();
SELECT reconcile_register('trig', ARRAY['id'], 'version', 'deleted', 'hash');
SELECT load('trig', 'inh_stage', 'auto', 't1');
SELECT id, n FROM trig;

-- Not tables: a view, a foreign table, a sequence.
CREATE VIEW loner_view AS SELECT * FROM loner;
SELECT reconcile_register('loner_view', ARRAY['id'], 'version', 'deleted', 'hash');
CREATE FOREIGN DATA WRAPPER shapes_fdw;
CREATE SERVER shapes_server FOREIGN DATA WRAPPER shapes_fdw;
CREATE FOREIGN TABLE ftab (id text, version bigint, deleted boolean, hash bytea) SERVER shapes_server;
SELECT reconcile_register('ftab', ARRAY['id'], 'version', 'deleted', 'hash');
CREATE SEQUENCE shapes_seq;
SELECT reconcile_register('shapes_seq', ARRAY['id'], 'version', 'deleted', 'hash');
SELECT reconcile_register(0, ARRAY['id'], 'version', 'deleted', 'hash');

RESET reconcile.write_path;
DROP EXTENSION reconcile;
DROP FOREIGN TABLE ftab;
DROP SERVER shapes_server;
DROP FOREIGN DATA WRAPPER shapes_fdw;
DROP VIEW loner_view;
DROP SEQUENCE shapes_seq;
DROP TABLE wide, key32, key32_stage, ident, ident_stage, ident_key, parent, child, loner,
    late_child, inh_stage, proot, part_stage, ruled, ruled_log, trig;
DROP FUNCTION load, double_n;
