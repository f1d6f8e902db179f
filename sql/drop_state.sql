-- Dropping a registered target removes its state: no row of the state
-- tables keeps the dropped table's OID, which another relation may get
-- later (or in a restored copy of the database).  Diff runs over a dropped
-- relation stay in the history with that side set to NULL; their findings
-- go.  RENAME keeps the state with the table.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

CREATE ROLE regress_drop_owner;
GRANT CREATE ON SCHEMA public TO regress_drop_owner;
CREATE SCHEMA regress_drop_nsp AUTHORIZATION regress_drop_owner;
SET ROLE regress_drop_owner;
CREATE TABLE doomed (id int PRIMARY KEY, ssn text, v bigint NOT NULL,
                     gone boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE regress_drop_nsp.inner_t (LIKE doomed INCLUDING ALL);
CREATE TABLE kept (LIKE doomed INCLUDING ALL);
CREATE TABLE stage (object_key text, source_row int, operation text, id text, ssn text, v text);
INSERT INTO stage VALUES ('o', 1, 'UPSERT', '1', '123-45-6789', '1'),
                         ('o', 2, 'UPSERT', '2', '987-65-4321', 'bad'),
                         ('o', 3, 'UPSERT', '3', 'a', '1'),
                         ('o', 4, 'UPSERT', '3', 'b', '1');
CREATE FUNCTION load_into(t regclass) RETURNS text LANGUAGE sql AS $$
    SELECT reconcile_register(t, '{id}', 'v', 'gone', 'h');
    SELECT status FROM reconcile_batch(t, 'stage', '[{"object_key":"o","version_id":"1","content_hash":"h","rows":4}]',
                           'feed', 'o@1')
$$;
SELECT load_into('doomed'), load_into('regress_drop_nsp.inner_t'), load_into('kept');
SELECT reconcile_set_rules('doomed', '{"warn": {"has_ssn": "ssn IS NOT NULL"}}');
RESET ROLE;
INSERT INTO reconcile.diff_jobs VALUES ('doomed_kept', 'public.doomed', 'public.kept', '{id}', '{"compare": ["ssn"]}');
UPDATE kept SET ssn = 'x' WHERE id = 1;
SELECT job, findings FROM reconcile_diff_run();

-- Every row of every state table naming a relation, by its OID.
CREATE FUNCTION state_refs(rel oid) RETURNS TABLE (state text, n bigint) LANGUAGE sql AS $$
    SELECT 'targets', count(*) FROM reconcile.targets WHERE target::oid = rel
    UNION ALL SELECT 'target_rules', count(*) FROM reconcile.target_rules WHERE target::oid = rel
    UNION ALL SELECT 'receipts', count(*) FROM reconcile.receipts WHERE target::oid = rel
    UNION ALL SELECT 'batch_objects', count(*) FROM reconcile.batch_objects WHERE target::oid = rel
    UNION ALL SELECT 'cursors', count(*) FROM reconcile.cursors WHERE target::oid = rel
    UNION ALL SELECT 'rejects', count(*) FROM reconcile.rejects WHERE target::oid = rel
    UNION ALL SELECT 'conflicts', count(*) FROM reconcile.conflicts WHERE target::oid = rel
    UNION ALL SELECT 'diff_runs', count(*) FROM reconcile.diff_runs WHERE rel IN (source::oid, target::oid)
    UNION ALL SELECT 'diff_results', count(*) FROM reconcile.diff_results WHERE rel IN (source::oid, target::oid)
$$;
-- State rows that name no relation at all.
CREATE VIEW dangling AS
    SELECT s.state, s.rel FROM (
        SELECT 'targets' AS state, target::oid AS rel FROM reconcile.targets
        UNION ALL SELECT 'target_rules', target FROM reconcile.target_rules
        UNION ALL SELECT 'receipts', target FROM reconcile.receipts
        UNION ALL SELECT 'batch_objects', target FROM reconcile.batch_objects
        UNION ALL SELECT 'cursors', target FROM reconcile.cursors
        UNION ALL SELECT 'rejects', target FROM reconcile.rejects
        UNION ALL SELECT 'conflicts', target FROM reconcile.conflicts
        UNION ALL SELECT 'diff_runs', source FROM reconcile.diff_runs
        UNION ALL SELECT 'diff_runs', target FROM reconcile.diff_runs
        UNION ALL SELECT 'diff_results', source FROM reconcile.diff_results
        UNION ALL SELECT 'diff_results', target FROM reconcile.diff_results) s
    WHERE s.rel IS NOT NULL AND NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = s.rel);

SELECT 'doomed'::regclass::oid AS doomed_oid, 'regress_drop_nsp.inner_t'::regclass::oid AS inner_oid,
       'kept'::regclass::oid AS kept_oid \gset
SELECT * FROM state_refs(:doomed_oid);

-- A drop rolled back keeps the state.
BEGIN;
DROP TABLE doomed;
ROLLBACK;
SELECT sum(n) AS doomed_rows FROM state_refs(:doomed_oid);

-- RENAME: the state follows the table (it names it by OID).
ALTER TABLE doomed RENAME TO doomed_renamed;
SELECT target FROM reconcile.targets ORDER BY target::text;
ALTER TABLE doomed_renamed RENAME TO doomed;

-- The owner, with no rights on the state tables, drops the table: its
-- state goes with it.
SET ROLE regress_drop_owner;
DROP TABLE doomed;
RESET ROLE;
SELECT * FROM state_refs(:doomed_oid);
SELECT * FROM dangling;
-- The diff run stays, its dropped side set to NULL; the run by the
-- superuser is visible to the superuser, its findings are gone.
SELECT job, source, target, findings, error FROM reconcile.diff_runs;
SELECT count(*) AS results FROM reconcile.diff_results;

-- DROP SCHEMA ... CASCADE and DROP OWNED BY drop targets too.
DROP SCHEMA regress_drop_nsp CASCADE;
SELECT sum(n) AS inner_rows FROM state_refs(:inner_oid);
SELECT sum(n) AS kept_rows FROM state_refs(:kept_oid);
DROP OWNED BY regress_drop_owner;
SELECT sum(n) AS kept_rows FROM state_refs(:kept_oid);
SELECT * FROM dangling;
SELECT count(*) AS rows_left FROM (
    SELECT FROM reconcile.targets UNION ALL SELECT FROM reconcile.receipts
    UNION ALL SELECT FROM reconcile.batch_objects UNION ALL SELECT FROM reconcile.cursors
    UNION ALL SELECT FROM reconcile.rejects UNION ALL SELECT FROM reconcile.conflicts
    UNION ALL SELECT FROM reconcile.target_rules UNION ALL SELECT FROM reconcile.diff_results) s;

-- Drops of other objects, and of several relations at once, are fine.
CREATE TABLE a (id int PRIMARY KEY, v bigint NOT NULL, gone boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE b (LIKE a INCLUDING ALL);
CREATE VIEW av AS SELECT * FROM a;
SELECT reconcile_register('a', '{id}', 'v', 'gone', 'h'), reconcile_register('b', '{id}', 'v', 'gone', 'h');
DROP VIEW av;
CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1';
DROP FUNCTION f();
ALTER TABLE a DROP CONSTRAINT a_pkey;
ALTER TABLE a ADD PRIMARY KEY (id);
SELECT count(*) AS registered FROM reconcile.targets;
-- The trigger fires under session_replication_role = replica too.
SET session_replication_role = replica;
DROP TABLE a, b;
RESET session_replication_role;
SELECT count(*) AS registered FROM reconcile.targets;

-- A temporary table is dropped at the end of its session without any
-- event: it cannot be a target.
CREATE TEMP TABLE tmp (id int PRIMARY KEY, v bigint NOT NULL, gone boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('tmp', '{id}', 'v', 'gone', 'h');
DROP TABLE tmp;

-- The event trigger belongs to the extension: DROP EXTENSION takes it.
DROP VIEW dangling;
DROP FUNCTION state_refs(oid);
DROP EXTENSION reconcile;
SELECT count(*) AS event_triggers FROM pg_event_trigger WHERE evtname LIKE 'reconcile%';
DROP ROLE regress_drop_owner;
