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

-- ---- stage: object versions, reject and schema drift policies ----

-- Several versions of one object may be loaded by one batch (a staged
-- relation with a version_id column tells their rows apart), so a batch's
-- objects are keyed by version too.  Every 1.0 row stays: 1.0 loaded one
-- version per object_key per batch.
ALTER TABLE reconcile.batch_objects DROP CONSTRAINT batch_objects_pkey;
ALTER TABLE reconcile.batch_objects ADD PRIMARY KEY (target, batch_id, object_key, version_id);

-- Rejects and conflicts name the object version their row was staged as;
-- NULL on rows written by 1.0.
ALTER TABLE reconcile.rejects ADD COLUMN version_id pg_catalog.text;
ALTER TABLE reconcile.conflicts ADD COLUMN version_id pg_catalog.text;
COMMENT ON COLUMN reconcile.rejects.version_id IS
    'The manifest''s version_id of the rejected row''s object; NULL on rows written by version 1.0.';
COMMENT ON COLUMN reconcile.conflicts.version_id IS
    'The manifest''s version_id of the conflicting row''s object; NULL on rows written by version 1.0.';

-- A target's load options, given at registration; a batch's options
-- override them key by key.  NULL: the defaults.
ALTER TABLE reconcile.targets ADD COLUMN options pg_catalog.jsonb;
COMMENT ON COLUMN reconcile.targets.options IS
    'Load options given to reconcile_register (max_rejects, max_reject_share, unknown_columns); NULL for the defaults. A batch''s options override them key by key.';

-- Both functions gain a last argument, options: positional and named calls
-- of 1.0 keep working.
DROP FUNCTION reconcile_register(pg_catalog.regclass, pg_catalog.text[], pg_catalog.text,
    pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.text[]);
CREATE FUNCTION reconcile_register(
    target pg_catalog.regclass,
    key_columns pg_catalog.text[],
    version_column pg_catalog.text,
    deleted_column pg_catalog.text,
    hash_column pg_catalog.text,
    conflict_policy pg_catalog.text DEFAULT 'quarantine',
    payload_columns pg_catalog.text[] DEFAULT NULL,
    options pg_catalog.jsonb DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'reconcile_register'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION reconcile_register(pg_catalog.regclass, pg_catalog.text[], pg_catalog.text,
    pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.text[], pg_catalog.jsonb) IS
    'Register a table as a reconcile target (the caller must own it). options (jsonb object, NULL for the defaults): max_rejects (integer >= 0), max_reject_share (number from 0 to 1), unknown_columns (''error'' or ''ignore''); a key set to null takes its default (no limit, ''error'').';

DROP FUNCTION reconcile_batch(pg_catalog.regclass, pg_catalog.regclass, pg_catalog.jsonb,
    pg_catalog.text, pg_catalog.text);
CREATE FUNCTION reconcile_batch(
    target pg_catalog.regclass,
    staged pg_catalog.regclass,
    manifest pg_catalog.jsonb,
    source pg_catalog.text DEFAULT NULL,
    "cursor" pg_catalog.text DEFAULT NULL,
    options pg_catalog.jsonb DEFAULT NULL)
RETURNS SETOF reconcile.receipt
AS 'MODULE_PATHNAME', 'reconcile_batch'
LANGUAGE C CALLED ON NULL INPUT VOLATILE ROWS 1;
COMMENT ON FUNCTION reconcile_batch(pg_catalog.regclass, pg_catalog.regclass, pg_catalog.jsonb,
    pg_catalog.text, pg_catalog.text, pg_catalog.jsonb) IS
    'Stage, check and merge one batch; returns its receipt. options (jsonb object, overriding the registration''s key by key): max_rejects (integer >= 0), max_reject_share (number from 0 to 1), unknown_columns (''error'' or ''ignore''); a key set to null takes its default (no limit, ''error'').';
