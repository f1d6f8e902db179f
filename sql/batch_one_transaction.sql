-- Several batches in one transaction: one manifest (one batch id) loads
-- several targets, on every write path, resolutions follow in the same
-- transaction, and a trigger's batch runs inside another's write.  Temporary objects a batch creates are its own, named per
-- target and batch or dropped before it returns (issue 19, defect 9; the
-- Citus probe copy is covered in test/t/050_citus.pl).
CREATE EXTENSION reconcile;

CREATE TABLE one_a (id int PRIMARY KEY, name text, version bigint NOT NULL,
                    del boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE one_b (LIKE one_a INCLUDING ALL);
-- a partitioned target and one with a trigger take the general write path
CREATE TABLE one_p (id int PRIMARY KEY, name text, version bigint NOT NULL,
                    del boolean NOT NULL DEFAULT false, h bytea) PARTITION BY RANGE (id);
CREATE TABLE one_p1 PARTITION OF one_p FOR VALUES FROM (MINVALUE) TO (100);
CREATE TABLE one_p2 PARTITION OF one_p FOR VALUES FROM (100) TO (MAXVALUE);
CREATE TABLE one_t (LIKE one_a INCLUDING ALL);
CREATE TABLE one_audit (id int, op text);
CREATE FUNCTION one_audit_row() RETURNS trigger LANGUAGE plpgsql
AS $$ BEGIN INSERT INTO one_audit VALUES (NEW.id, TG_OP); RETURN NEW; END $$;
CREATE TRIGGER one_audit AFTER INSERT OR UPDATE ON one_t FOR EACH ROW EXECUTE FUNCTION one_audit_row();
CREATE TABLE one_stage (object_key text, source_row bigint, operation text,
                        id int, version text, name text);
SELECT reconcile_register(target => t, key_columns => '{id}', version_column => 'version',
                          deleted_column => 'del', hash_column => 'h',
                          conflict_policy => 'quarantine')
FROM unnest('{one_a,one_b,one_p,one_t}'::regclass[]) AS t;

-- One manifest, four targets, one transaction, under both write paths.
INSERT INTO one_stage VALUES ('m1', 1, 'UPSERT', 1, '1', 'Ada'), ('m1', 2, 'UPSERT', 150, '1', 'Bob'),
                             ('m1', 3, 'UPSERT', 2, '1', 'Cy'), ('m1', 4, 'UPSERT', 2, '1', 'Cyd');
BEGIN;
SELECT t AS target, r.status, r.inserted, r.conflicts
FROM unnest('{one_a,one_b,one_p,one_t}'::regclass[]) WITH ORDINALITY AS u(t, n),
     LATERAL reconcile_batch(t, 'one_stage',
                             '[{"object_key":"m1","version_id":"1","content_hash":"h","rows":4}]') AS r
ORDER BY n;
SET LOCAL reconcile.write_path = 'general';
TRUNCATE one_stage;
INSERT INTO one_stage VALUES ('m2', 1, 'UPSERT', 1, '2', 'Ada L'), ('m2', 2, 'UPSERT', 3, '1', 'Dee');
SELECT t AS target, r.status, r.inserted, r.updated
FROM unnest('{one_a,one_b,one_p,one_t}'::regclass[]) WITH ORDINALITY AS u(t, n),
     LATERAL reconcile_batch(t, 'one_stage',
                             '[{"object_key":"m2","version_id":"1","content_hash":"h","rows":2}]') AS r
ORDER BY n;
-- The held conflict of key 2 resolved in each target, in the same transaction.
SELECT c.target, r.status, r.outcome
FROM reconcile.conflicts AS c, LATERAL reconcile_resolve(c.target, c.batch_id, c.key, c.staged_hash) AS r
WHERE c.source_row = 4 ORDER BY c.target::text;
COMMIT;
SELECT 'one_a' AS target, string_agg(id || '=' || name || '/' || version, ' ' ORDER BY id) FROM one_a
UNION ALL SELECT 'one_b', string_agg(id || '=' || name || '/' || version, ' ' ORDER BY id) FROM one_b
UNION ALL SELECT 'one_p', string_agg(id || '=' || name || '/' || version, ' ' ORDER BY id) FROM one_p
UNION ALL SELECT 'one_t', string_agg(id || '=' || name || '/' || version, ' ' ORDER BY id) FROM one_t;
SELECT op, count(*) FROM one_audit GROUP BY op ORDER BY op;
SELECT count(*) AS temporary_tables_left FROM pg_class WHERE relname LIKE 'reconcile\_%' AND relpersistence = 't';

-- A batch started by a trigger while another batch of the same manifest
-- writes (both on the general write path, whose winners' temporary table
-- lives until the write ends): the trigger's batch takes the next name
-- (it failed with 'relation "reconcile_apply_<id>" already exists').
CREATE TABLE one_m (LIKE one_a INCLUDING ALL);
SELECT reconcile_register(target => 'one_m', key_columns => '{id}', version_column => 'version',
                          deleted_column => 'del', hash_column => 'h');
CREATE FUNCTION one_mirror() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM reconcile_batch('one_m', 'one_stage',
                            '[{"object_key":"m3","version_id":"1","content_hash":"h","rows":1}]');
    RETURN NULL;
END $$;
CREATE TRIGGER one_mirror AFTER INSERT ON one_t FOR EACH STATEMENT EXECUTE FUNCTION one_mirror();
TRUNCATE one_stage;
INSERT INTO one_stage VALUES ('m3', 1, 'UPSERT', 4, '1', 'Eve');
SET reconcile.write_path = 'general';
SELECT status, inserted FROM reconcile_batch('one_t', 'one_stage',
                                             '[{"object_key":"m3","version_id":"1","content_hash":"h","rows":1}]');
RESET reconcile.write_path;
SELECT 'one_t' AS target, string_agg(id || '=' || name || '/' || version, ' ' ORDER BY id) FROM one_t
UNION ALL SELECT 'one_m', string_agg(id || '=' || name || '/' || version, ' ' ORDER BY id) FROM one_m;
SELECT count(*) AS temporary_tables_left FROM pg_class WHERE relname LIKE 'reconcile\_%' AND relpersistence = 't';

DROP TABLE one_a, one_b, one_p, one_t, one_m, one_audit, one_stage;
DROP FUNCTION one_audit_row(), one_mirror();
DROP EXTENSION reconcile;
