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

-- ---- held conflicts and their resolution (issue 12, helper conflicts) ----

-- A held row keeps its payload, and a row at the target's version the
-- target's payload then, so that a quarantined key can be decided after the
-- stage is gone.  Rows held by 1.0 have NULL here and cannot be resolved
-- with reconcile_resolve.
ALTER TABLE reconcile.conflicts
    ADD COLUMN deleted pg_catalog.bool,
    ADD COLUMN staged_payload pg_catalog.jsonb,
    ADD COLUMN existing_payload pg_catalog.jsonb;
COMMENT ON COLUMN reconcile.conflicts.deleted IS
    'The held row is a DELETE (its payload hash is a tombstone''s); NULL for rows held before 1.1.';
COMMENT ON COLUMN reconcile.conflicts.staged_payload IS
    'The held row''s payload columns and values, as its hash has them (numbers and booleans as JSON ones, the rest as text in the canonical settings); NULL for rows held before 1.1.';
COMMENT ON COLUMN reconcile.conflicts.existing_payload IS
    'The target row''s payload when the batch ran, on held rows at the target row''s version; NULL otherwise.';

-- One decision per quarantined key of a batch, made by the target's owner.
CREATE TABLE reconcile.resolutions (
    target          pg_catalog.regclass NOT NULL,
    batch_id        pg_catalog.text NOT NULL,
    key             pg_catalog.jsonb NOT NULL,
    version         pg_catalog.int8 NOT NULL,
    choice          pg_catalog.text NOT NULL CHECK (choice IN ('staged', 'target')),
    payload_hash    pg_catalog.bytea NOT NULL,
    written_version pg_catalog.int8 NOT NULL,
    outcome         pg_catalog.text NOT NULL
        CHECK (outcome IN ('inserted', 'updated', 'deleted', 'unchanged', 'stale')),
    decided_by      pg_catalog.name NOT NULL,
    decided_at      pg_catalog.timestamptz NOT NULL,
    PRIMARY KEY (target, batch_id, key)
);
COMMENT ON TABLE reconcile.resolutions IS
    'How each quarantined key of a batch was decided (reconcile_resolve): one row per target, batch and key.';
COMMENT ON COLUMN reconcile.resolutions.target IS 'The target table.';
COMMENT ON COLUMN reconcile.resolutions.batch_id IS 'The batch that held the key back.';
COMMENT ON COLUMN reconcile.resolutions.key IS 'The key, as reconcile.conflicts.key.';
COMMENT ON COLUMN reconcile.resolutions.version IS
    'The version decided: the highest version of the key that was in conflict.';
COMMENT ON COLUMN reconcile.resolutions.choice IS
    '''staged'': a staged payload at that version was accepted; ''target'': the target''s was kept.';
COMMENT ON COLUMN reconcile.resolutions.payload_hash IS 'The hash of the payload chosen.';
COMMENT ON COLUMN reconcile.resolutions.written_version IS
    'The version of the key''s row the decision led to: the highest held version no longer in conflict.';
COMMENT ON COLUMN reconcile.resolutions.outcome IS
    'What the decision did to the target, as a batch''s dispositions: inserted, updated, deleted, unchanged, or stale (the target had moved past written_version: nothing written).';
COMMENT ON COLUMN reconcile.resolutions.decided_by IS
    'The current user (CURRENT_USER, the role whose ownership of the target was checked) that decided.';
COMMENT ON COLUMN reconcile.resolutions.decided_at IS 'When the deciding transaction began.';
SELECT pg_catalog.pg_extension_config_dump('reconcile.resolutions', '');
REVOKE ALL ON reconcile.resolutions FROM PUBLIC;
GRANT SELECT ON reconcile.resolutions TO PUBLIC;
ALTER TABLE reconcile.resolutions ENABLE ROW LEVEL SECURITY;
CREATE POLICY readable_targets ON reconcile.resolutions FOR SELECT
    USING (pg_catalog.has_table_privilege(target, 'SELECT')
           AND NOT pg_catalog.row_security_active(target::pg_catalog.oid));

-- Decide a quarantined key: keep the payload whose hash is given (a staged
-- one at the conflicting version, or the target's), then load the key as
-- the batch would have.  Replay-safe: the same decision again returns the
-- stored one.
CREATE FUNCTION reconcile_resolve(
    target pg_catalog.regclass,
    batch_id pg_catalog.text,
    key pg_catalog.jsonb,
    payload_hash pg_catalog.bytea,
    OUT status pg_catalog.text,
    OUT version pg_catalog.int8,
    OUT choice pg_catalog.text,
    OUT written_version pg_catalog.int8,
    OUT outcome pg_catalog.text,
    OUT decided_by pg_catalog.name,
    OUT decided_at pg_catalog.timestamptz)
RETURNS record
AS 'MODULE_PATHNAME', 'reconcile_resolve'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION reconcile_resolve(pg_catalog.regclass, pg_catalog.text, pg_catalog.jsonb, pg_catalog.bytea) IS
    'Resolve a key a batch held back in conflict: keep the payload with the given hash (a staged_hash or existing_hash of reconcile.conflicts at the conflicting version); owner only, recorded in reconcile.resolutions.';
