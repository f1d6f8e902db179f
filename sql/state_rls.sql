-- The state tables show a target's rows (registration, rules, receipts,
-- objects, cursors, rejects, conflicts, resolutions, diff runs and
-- results) only to a
-- role that may read the target's rows: table-level SELECT, and no
-- row-level security applying to it on the target (its owner, a member of
-- the owner, a superuser or a role with BYPASSRLS).
-- Functions planted in the schema the install script runs in, with the
-- argument types of the policies' calls: the policies must not use them.
CREATE FUNCTION public.has_table_privilege(regclass, text) RETURNS boolean
    LANGUAGE sql AS 'SELECT true';
CREATE FUNCTION public.row_security_active(oid) RETURNS boolean
    LANGUAGE sql AS 'SELECT false';
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

CREATE ROLE regress_rls_owner;
CREATE ROLE regress_rls_owner_member IN ROLE regress_rls_owner;
CREATE ROLE regress_rls_tenant;
CREATE ROLE regress_rls_bypass BYPASSRLS;
CREATE ROLE regress_rls_cols;

-- Accounts of several tenants; each tenant reads its own rows only.
CREATE TABLE accounts (tenant text NOT NULL, id int PRIMARY KEY, ssn text,
                       v bigint NOT NULL, gone boolean NOT NULL DEFAULT false, h bytea);
ALTER TABLE accounts OWNER TO regress_rls_owner;
ALTER TABLE accounts ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_tenant ON accounts USING (tenant = current_user);
GRANT SELECT ON accounts TO regress_rls_tenant, regress_rls_bypass;
GRANT SELECT (tenant, id) ON accounts TO regress_rls_cols;
CREATE TABLE accounts_stage (object_key text, source_row int, operation text,
                             tenant text, id text, ssn text, v text);
-- Attached rules run as the target's owner, which reads the staged rows.
GRANT SELECT ON accounts_stage TO regress_rls_owner;
SELECT reconcile_register('accounts', '{id}', 'v', 'gone', 'h');
SELECT reconcile_set_rules('accounts', '{"warn": {"has_ssn": "ssn IS NOT NULL"}}');
-- A reject (a bad version, raw value kept), a conflict (two payloads of
-- id 3 at version 1) and a cursor.
INSERT INTO accounts_stage VALUES
    ('a1', 1, 'UPSERT', 'regress_rls_tenant', '1', '111-11-1111', '1'),
    ('a1', 2, 'UPSERT', 'other', '2', '222-22-2222', 'v?'),
    ('a1', 3, 'UPSERT', 'other', '3', '333-33-3333', '1'),
    ('a1', 4, 'UPSERT', 'other', '3', '333-33-3334', '1');
SELECT status, inserted, conflicts, rejected
  FROM reconcile_batch('accounts', 'accounts_stage',
       '[{"object_key":"a1","version_id":"1","content_hash":"h","rows":4}]', 'feed', 'a1');
-- The owner resolves the conflict: a resolution.
SET ROLE regress_rls_owner;
SELECT r.outcome FROM reconcile.conflicts c,
       reconcile_resolve('accounts', c.batch_id, c.key, c.staged_hash) r
 WHERE c.source_row = 4;
RESET ROLE;

-- A table without row-level security, with the same kinds of state.
CREATE TABLE plain (id int PRIMARY KEY, v bigint NOT NULL, gone boolean NOT NULL DEFAULT false, h bytea);
GRANT SELECT ON plain TO regress_rls_tenant;
CREATE TABLE plain_stage (object_key text, source_row int, operation text, id text, v text);
INSERT INTO plain_stage VALUES ('p1', 1, 'UPSERT', '1', 'x'), ('p1', 2, 'UPSERT', '2', '1');
SELECT reconcile_register('plain', '{id}', 'v', 'gone', 'h');
SELECT status, inserted, rejected
  FROM reconcile_batch('plain', 'plain_stage',
       '[{"object_key":"p1","version_id":"1","content_hash":"h","rows":2}]', 'feed', 'p1');

-- Diff runs over the accounts, with findings holding their values.
CREATE TABLE accounts_copy (id int PRIMARY KEY, ssn text);
INSERT INTO accounts_copy VALUES (1, '111-11-1111'), (3, '999-99-9999');
CREATE TABLE plain_copy (id int PRIMARY KEY);
INSERT INTO plain_copy VALUES (1), (9);
GRANT SELECT ON accounts_copy, plain_copy TO PUBLIC;
INSERT INTO reconcile.diff_jobs VALUES
    ('accounts', 'public.accounts_copy', 'public.accounts', '{id}', '{"compare": ["ssn"]}'),
    ('plain', 'public.plain_copy', 'public.plain', '{id}', '{"compare": []}');
SELECT job, findings > 0 AS found, error FROM reconcile_diff_run() ORDER BY job;

-- What each role sees of each state table, per target.
CREATE FUNCTION state_seen() RETURNS TABLE (state text, accounts bigint, plain bigint)
LANGUAGE sql AS $$
    SELECT 'targets', count(*) FILTER (WHERE target = 'accounts'::regclass),
           count(*) FILTER (WHERE target = 'plain'::regclass) FROM reconcile.targets
    UNION ALL
    SELECT 'target_rules', count(*) FILTER (WHERE target = 'accounts'::regclass),
           count(*) FILTER (WHERE target = 'plain'::regclass) FROM reconcile.target_rules
    UNION ALL
    SELECT 'receipts', count(*) FILTER (WHERE target = 'accounts'::regclass),
           count(*) FILTER (WHERE target = 'plain'::regclass) FROM reconcile.receipts
    UNION ALL
    SELECT 'batch_objects', count(*) FILTER (WHERE target = 'accounts'::regclass),
           count(*) FILTER (WHERE target = 'plain'::regclass) FROM reconcile.batch_objects
    UNION ALL
    SELECT 'cursors', count(*) FILTER (WHERE target = 'accounts'::regclass),
           count(*) FILTER (WHERE target = 'plain'::regclass) FROM reconcile.cursors
    UNION ALL
    SELECT 'rejects', count(*) FILTER (WHERE target = 'accounts'::regclass),
           count(*) FILTER (WHERE target = 'plain'::regclass) FROM reconcile.rejects
    UNION ALL
    SELECT 'conflicts', count(*) FILTER (WHERE target = 'accounts'::regclass),
           count(*) FILTER (WHERE target = 'plain'::regclass) FROM reconcile.conflicts
    UNION ALL
    SELECT 'resolutions', count(*) FILTER (WHERE target = 'accounts'::regclass),
           count(*) FILTER (WHERE target = 'plain'::regclass) FROM reconcile.resolutions
    UNION ALL
    SELECT 'diff_runs', count(*) FILTER (WHERE target = 'accounts'::regclass),
           count(*) FILTER (WHERE target = 'plain'::regclass) FROM reconcile.diff_runs
    UNION ALL
    SELECT 'diff_results', count(*) FILTER (WHERE target = 'accounts'::regclass),
           count(*) FILTER (WHERE target = 'plain'::regclass) FROM reconcile.diff_results
$$;

-- The superuser sees everything.
SELECT * FROM state_seen();
-- A tenant may SELECT from accounts, but row-level security shows it its
-- own rows only: it sees none of the accounts' state (other tenants' raw
-- values and keys), and all of plain's, which it may read in full.
SET ROLE regress_rls_tenant;
SELECT * FROM state_seen();
SELECT count(*) AS ssn_seen FROM reconcile.rejects WHERE raw_value LIKE '%-%' OR object_key = 'a1';
SELECT count(*) AS keys_seen FROM reconcile.conflicts WHERE key ? 'id';
RESET ROLE;
-- SELECT on some columns only is not SELECT on the table.
SET ROLE regress_rls_cols;
SELECT * FROM state_seen();
RESET ROLE;
-- The owner, a member of the owner and a role that bypasses row-level
-- security read every row of accounts, and so its state.
SET ROLE regress_rls_owner;
SELECT state, accounts FROM state_seen();
SET ROLE regress_rls_owner_member;
SELECT state, accounts FROM state_seen();
SET ROLE regress_rls_bypass;
SELECT state, accounts FROM state_seen();
RESET ROLE;
-- FORCE ROW LEVEL SECURITY subjects the owner to the policies: the state
-- follows.
ALTER TABLE accounts FORCE ROW LEVEL SECURITY;
SET ROLE regress_rls_owner;
SELECT state, accounts FROM state_seen();
RESET ROLE;
ALTER TABLE accounts NO FORCE ROW LEVEL SECURITY;
-- Row-level security disabled again: the tenant reads the whole table,
-- and its state.
ALTER TABLE accounts DISABLE ROW LEVEL SECURITY;
SET ROLE regress_rls_tenant;
SELECT state, accounts FROM state_seen();
RESET ROLE;

-- The policies call only pg_catalog's functions and operators (which are
-- pinned, so that a dependency on anything else would be recorded), and
-- the extension's own SQL functions, whose bodies call only pg_catalog's.
SELECT pg_describe_object(d.refclassid, d.refobjid, 0) AS outside_pg_catalog
  FROM pg_depend d JOIN pg_policy p ON p.oid = d.objid
 WHERE d.classid = 'pg_policy'::regclass
   AND d.refclassid IN ('pg_proc'::regclass, 'pg_operator'::regclass)
   AND NOT EXISTS (SELECT FROM pg_depend e
                    WHERE e.classid = 'pg_proc'::regclass AND e.objid = d.refobjid
                      AND e.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'reconcile')
                      AND e.deptype = 'e');
SELECT pg_describe_object(d.classid, d.objid, 0) AS helper,
       pg_describe_object(d.refclassid, d.refobjid, 0) AS outside_pg_catalog
  FROM pg_depend d JOIN pg_proc f ON f.oid = d.objid
 WHERE d.classid = 'pg_proc'::regclass
   AND f.prolang = (SELECT oid FROM pg_language WHERE lanname = 'sql')
   AND f.pronamespace = 'reconcile'::regnamespace
   AND d.refclassid IN ('pg_proc'::regclass, 'pg_operator'::regclass)
   AND NOT EXISTS (SELECT FROM pg_depend e
                    WHERE e.classid = d.refclassid AND e.objid = d.refobjid
                      AND e.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'reconcile')
                      AND e.deptype = 'e');
SELECT count(*) AS policies FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
 WHERE c.relnamespace = 'reconcile'::regnamespace;

DROP TABLE accounts, accounts_stage, accounts_copy, plain, plain_stage, plain_copy;
DROP FUNCTION state_seen();
DROP FUNCTION public.has_table_privilege(regclass, text), public.row_security_active(oid);
DROP EXTENSION reconcile;
DROP ROLE regress_rls_owner_member, regress_rls_owner, regress_rls_tenant,
          regress_rls_bypass, regress_rls_cols;
