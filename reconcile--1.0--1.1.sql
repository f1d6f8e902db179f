-- reconcile 1.0 -> 1.1: state scoped to targets, shown only to readers of
-- the target's rows, and removed with the relation it names.
\echo Use "ALTER EXTENSION reconcile UPDATE TO '1.1'" to load this file. \quit

-- ---- state of relations dropped before 1.1 ----

-- 1.0 left the state of a dropped table behind under its OID, which any
-- relation created later may get.  Remove what names no relation now.
-- (A row whose OID another relation has taken since cannot be told from
-- that relation's own state; only a drop under 1.1 is certain to be seen.)
DELETE FROM reconcile.targets t
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) t.target);
DELETE FROM reconcile.target_rules t
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) t.target);
DELETE FROM reconcile.cursors t
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) t.target);
DELETE FROM reconcile.rejects t
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) t.target);
DELETE FROM reconcile.conflicts t
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) t.target);
DELETE FROM reconcile.batch_objects t
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) t.target);
DELETE FROM reconcile.receipts t
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) t.target);
DELETE FROM reconcile.diff_results t
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) t.source)
    OR NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) t.target);
UPDATE reconcile.diff_runs r
   SET source = CASE WHEN EXISTS (SELECT FROM pg_catalog.pg_class c
                                   WHERE c.oid OPERATOR(pg_catalog.=) r.source)
                     THEN r.source END,
       target = CASE WHEN EXISTS (SELECT FROM pg_catalog.pg_class c
                                   WHERE c.oid OPERATOR(pg_catalog.=) r.target)
                     THEN r.target END
 WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) r.source)
    OR NOT EXISTS (SELECT FROM pg_catalog.pg_class c WHERE c.oid OPERATOR(pg_catalog.=) r.target);

-- ---- a batch's identity is scoped to its target ----

-- A receipt is found by (target, batch_id): the same manifest may be
-- committed into several targets (a shadow load), and a manifest committed
-- into one role's table can neither block nor reveal another role's load
-- of it.  Every 1.0 receipt keeps its batch id; (target, batch_id) is
-- unique wherever batch_id was.
ALTER TABLE reconcile.batch_objects DROP CONSTRAINT batch_objects_batch_id_fkey;
ALTER TABLE reconcile.batch_objects DROP CONSTRAINT batch_objects_pkey;
ALTER TABLE reconcile.receipts DROP CONSTRAINT receipts_pkey;
ALTER TABLE reconcile.receipts ADD PRIMARY KEY (target, batch_id);
ALTER TABLE reconcile.batch_objects ADD PRIMARY KEY (target, batch_id, object_key);
ALTER TABLE reconcile.batch_objects ADD FOREIGN KEY (target, batch_id)
    REFERENCES reconcile.receipts ON DELETE CASCADE;
-- A drop removes a target's rejects and conflicts by target.
CREATE INDEX ON reconcile.rejects (target, batch_id);
CREATE INDEX ON reconcile.conflicts (target, batch_id);

-- ---- state is shown only to whoever may see the rows it came from ----

-- Table-level SELECT on the relation (SELECT on some columns is not
-- enough), and no row-level security applying to the reader there: its
-- owner (unless FORCE ROW LEVEL SECURITY), a member of the owner, a
-- superuser or a role with BYPASSRLS.  A reader that row-level security
-- restricts to some rows sees none of the state: rejects and conflicts
-- hold other rows' keys and raw values.
ALTER POLICY readable_targets ON reconcile.targets
    USING (pg_catalog.has_table_privilege(target, 'SELECT')
           AND NOT pg_catalog.row_security_active(target::pg_catalog.oid));
ALTER POLICY readable_targets ON reconcile.target_rules
    USING (pg_catalog.has_table_privilege(target, 'SELECT')
           AND NOT pg_catalog.row_security_active(target::pg_catalog.oid));
ALTER POLICY readable_targets ON reconcile.receipts
    USING (pg_catalog.has_table_privilege(target, 'SELECT')
           AND NOT pg_catalog.row_security_active(target::pg_catalog.oid));
ALTER POLICY readable_targets ON reconcile.batch_objects
    USING (pg_catalog.has_table_privilege(target, 'SELECT')
           AND NOT pg_catalog.row_security_active(target::pg_catalog.oid));
ALTER POLICY readable_targets ON reconcile.cursors
    USING (pg_catalog.has_table_privilege(target, 'SELECT')
           AND NOT pg_catalog.row_security_active(target::pg_catalog.oid));
ALTER POLICY readable_targets ON reconcile.rejects
    USING (pg_catalog.has_table_privilege(target, 'SELECT')
           AND NOT pg_catalog.row_security_active(target::pg_catalog.oid));
ALTER POLICY readable_targets ON reconcile.conflicts
    USING (pg_catalog.has_table_privilege(target, 'SELECT')
           AND NOT pg_catalog.row_security_active(target::pg_catalog.oid));
-- Runs and results: the same over both compared relations; a role also
-- sees the runs it made (they hold counts, not values).
ALTER POLICY readable_sides ON reconcile.diff_runs
    USING (run_by OPERATOR(pg_catalog.=) CURRENT_USER
           OR (pg_catalog.has_table_privilege(source, 'SELECT')
               AND NOT pg_catalog.row_security_active(source::pg_catalog.oid)
               AND pg_catalog.has_table_privilege(target, 'SELECT')
               AND NOT pg_catalog.row_security_active(target::pg_catalog.oid)));
ALTER POLICY readable_sides ON reconcile.diff_results
    USING (pg_catalog.has_table_privilege(source, 'SELECT')
           AND NOT pg_catalog.row_security_active(source::pg_catalog.oid)
           AND pg_catalog.has_table_privilege(target, 'SELECT')
           AND NOT pg_catalog.row_security_active(target::pg_catalog.oid));

-- ---- dropped relations take their state with them ----

-- Fired by every DROP of every role; removes the state of dropped
-- relations (diff runs stay, the dropped side set to NULL).  It runs as
-- the extension's owner and resolves nothing through search_path.
CREATE FUNCTION reconcile.forget_dropped()
RETURNS event_trigger
AS 'MODULE_PATHNAME', 'reconcile_forget_dropped'
LANGUAGE C SECURITY DEFINER SET search_path = pg_catalog, pg_temp;
REVOKE ALL ON FUNCTION reconcile.forget_dropped() FROM PUBLIC;

CREATE EVENT TRIGGER reconcile_forget_dropped ON sql_drop
    EXECUTE FUNCTION reconcile.forget_dropped();
-- Also under session_replication_role = replica.
ALTER EVENT TRIGGER reconcile_forget_dropped ENABLE ALWAYS;

-- ---- rules documents as dataframe tools write them (issue 13, rulesdoc) ----

-- reconcile_check shows, per rule, the SQLSTATE of an ERROR and the
-- rule's descriptive keys.  A function's result columns change only by
-- DROP and CREATE (a view of yours over reconcile_check makes this DROP,
-- and so the update, fail: drop the view first and create it again after).
DROP FUNCTION @extschema@.reconcile_check(pg_catalog.regclass, pg_catalog.jsonb, pg_catalog.jsonb);
CREATE FUNCTION @extschema@.reconcile_check(
    relation pg_catalog.regclass,
    rules pg_catalog.jsonb,
    options pg_catalog.jsonb DEFAULT '{}')
RETURNS TABLE (
    rule              pg_catalog.text,
    severity          pg_catalog.text,
    status            pg_catalog.text,
    invalid_rows      pg_catalog.int8,
    invalid_pct       pg_catalog.numeric,
    gate_breach       pg_catalog.bool,
    sample            pg_catalog.jsonb,
    detail            pg_catalog.text,
    sqlstate          pg_catalog.text,
    description       pg_catalog.text,
    columns           pg_catalog.text[],
    reference_context pg_catalog.text)
AS 'MODULE_PATHNAME', 'reconcile_check'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;

COMMENT ON FUNCTION @extschema@.reconcile_check(pg_catalog.regclass, pg_catalog.jsonb, pg_catalog.jsonb) IS
'Runs a rules document (row rules under fail/warn/drop, as expressions or objects with sql, description, reference_context, columns; dataset_checks with name, sql and the same keys; back-quoted Spark SQL names accepted) over a relation in one scan, with the caller''s rights, read-only; one row per rule: PASS, FAIL or ERROR (a rule that does not parse, plan or run, with its message and SQLSTATE; the others still run). Options: sample (0-10000 rows kept per rule, default 10), key_columns (array of column names identifying sample rows), fail_on_breach (boolean, default false: raise SQLSTATE 23514 naming the breaching rules when the gate is blocked).';

COMMENT ON FUNCTION @extschema@.reconcile_check_report(pg_catalog.regclass, pg_catalog.jsonb, pg_catalog.jsonb) IS
'The same run as reconcile_check, returned as one jsonb document: {"summary": {rules, passed, failed, errored, gate: pass|blocked}, "rules": [one object per rule with the columns of reconcile_check]}; stores nothing. Options: sample (0-10000 rows kept per rule, default 10), key_columns (array of column names identifying sample rows), fail_on_breach (boolean, default false: raise SQLSTATE 23514 naming the breaching rules instead of returning the report when the gate is blocked).';
