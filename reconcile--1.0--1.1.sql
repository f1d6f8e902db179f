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

-- ---- comments: the catalog explains itself (discover) ----

-- Every function, table, view, type and event trigger of the extension
-- carries a description, shown by \df+, \dt+, \dv+, \dT+ and \dd.  Here,
-- not in reconcile--1.0.sql (released), so that fresh installs (1.0, then
-- this script) and upgrades get the same comments.  Functions are named
-- as on 1.0; a section below that replaces a function comments the new one.
COMMENT ON SCHEMA reconcile IS
    'State of the reconcile extension: registered targets, receipts, cursors, rejects, conflicts, attached rules, configured diff jobs and their runs.';

COMMENT ON FUNCTION reconcile_register(pg_catalog.regclass, pg_catalog.text[], pg_catalog.text,
    pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.text[]) IS
    'Register a table the caller owns as a reconcile target: key_columns, version_column, deleted_column (tombstones), hash_column, conflict_policy (''quarantine'' or ''abort'') and payload_columns (default: every other column).';
COMMENT ON FUNCTION reconcile_unregister(pg_catalog.regclass) IS
    'Forget a target''s registration; its receipts and cursors stay.';
COMMENT ON FUNCTION reconcile_batch_id(pg_catalog.jsonb) IS
    'The batch id of a manifest: the lowercase hex SHA-256 of its canonical form.';
COMMENT ON FUNCTION reconcile_canonical_manifest(pg_catalog.jsonb) IS
    'The canonical text of a manifest (entries sorted by object_key), whose SHA-256 is the batch id.';
COMMENT ON FUNCTION reconcile_batch(pg_catalog.regclass, pg_catalog.regclass, pg_catalog.jsonb,
    pg_catalog.text, pg_catalog.text) IS
    'Load one batch from a staged relation into a registered target, exactly once: checks the manifest (a JSON array of {"object_key", "version_id", "content_hash", "rows"}), casts and rejects, resolves versions, tombstones and conflicts, merges, applies the attached rules, and moves the cursor of source to "cursor"; returns the receipt (status ''committed'' or ''replayed'').';
COMMENT ON FUNCTION reconcile_diff(pg_catalog.regclass, pg_catalog.regclass, pg_catalog.text[],
    pg_catalog.jsonb) IS
    'Compare source with target by key_columns: one row per finding (missing, extra, mismatch with the differing columns and values, duplicate_key, null_key). Options: compare, ignore (column lists), target_key_columns, column_map (source name to target name), trim_keys (boolean), updated_column, window ([from, to]), cutoff ("source_max"), tolerance (column to number or interval).';
COMMENT ON FUNCTION reconcile_diff_summary(pg_catalog.regclass, pg_catalog.regclass,
    pg_catalog.text[], pg_catalog.jsonb) IS
    'The diff of reconcile_diff, counted: one row of rows per side, matched, missing, extra, mismatched, duplicate and NULL keys, and mismatches per column. Same options as reconcile_diff.';
COMMENT ON FUNCTION reconcile_diff_run(pg_catalog.text) IS
    'Run the configured job of reconcile.diff_jobs named job, or every job when job is NULL, recording each run in reconcile.diff_runs and its findings in reconcile.diff_results; returns the runs.';
COMMENT ON FUNCTION reconcile_check(pg_catalog.regclass, pg_catalog.jsonb, pg_catalog.jsonb) IS
    'Run a rules document ({"fail": {...}, "warn": {...}, "drop": {...}, "dataset_checks": [...]}) over a relation with the caller''s rights, read-only: one row per rule with its status, violating rows, gate breach and sample. Options: sample (rows kept per rule, 0 to 10000, default 10), key_columns (identify sample rows by these columns).';
COMMENT ON FUNCTION reconcile_check_report(pg_catalog.regclass, pg_catalog.jsonb, pg_catalog.jsonb) IS
    'reconcile_check as one jsonb report: the rules'' results, a summary and the gate''s verdict. Same options as reconcile_check.';
COMMENT ON FUNCTION reconcile_discover_rules(pg_catalog.regclass, pg_catalog.jsonb) IS
    'Profile a relation in one scan and propose a rules document (not null, allowed values, ranges, patterns, keys, linear relations, implications), each proposal with its evidence. Options: max_values (1 to 32, default 10: most values of an allowed-values list), min_share (0.5 to 1, default 0.99: share of rows a cross-column rule must hold on), sample_rows (100 to 100000, default 5000).';
COMMENT ON FUNCTION reconcile_set_rules(pg_catalog.regclass, pg_catalog.jsonb) IS
    'Attach a rules document to a registered target the caller owns (NULL detaches); batches then run it on their staged rows. Returns the new version in reconcile.target_rules.';
COMMENT ON FUNCTION reconcile.forget_dropped() IS
    'Event trigger function on sql_drop: removes the reconcile state of dropped relations (diff runs stay, the dropped side set to NULL).';
COMMENT ON EVENT TRIGGER reconcile_forget_dropped IS
    'Removes the reconcile state of dropped relations, at every DROP, also under session_replication_role = replica.';

COMMENT ON TYPE reconcile.receipt IS
    'What reconcile_batch returns: the batch''s receipt, with the count of staged rows per disposition.';

COMMENT ON VIEW reconcile.batch_progress IS
    'Batches running now, from any session: backend pid, target, phase, rows done of rows total, parallel workers.';

COMMENT ON TABLE reconcile.targets IS
    'Registered targets: how each table is keyed, versioned, tombstoned and hashed, and its conflict policy. Written by reconcile_register.';
COMMENT ON COLUMN reconcile.targets.key_columns IS 'Columns identifying a row (the object''s business key).';
COMMENT ON COLUMN reconcile.targets.version_column IS 'Column holding the row''s version: a higher version replaces a lower one, a lower one is stale.';
COMMENT ON COLUMN reconcile.targets.deleted_column IS 'Column marking a row as deleted (a tombstone: version and hash moved, payload kept).';
COMMENT ON COLUMN reconcile.targets.hash_column IS 'Column holding the payload''s hash, which tells an unchanged row from a conflict at the same version.';
COMMENT ON COLUMN reconcile.targets.payload_columns IS 'Columns loaded from the staged relation.';
COMMENT ON COLUMN reconcile.targets.conflict_policy IS '''quarantine'': conflicting rows go to reconcile.conflicts and the batch commits; ''abort'': the batch fails.';

COMMENT ON TABLE reconcile.receipts IS
    'One receipt per committed batch and target, with the count of staged rows per disposition; a replayed manifest finds its receipt here.';
COMMENT ON COLUMN reconcile.receipts.batch_id IS 'Lowercase hex SHA-256 of the canonical manifest (reconcile_batch_id).';
COMMENT ON COLUMN reconcile.receipts.checksum IS '64 hex digits: the sum modulo 2^256 of the payload hashes of the rows written (inserted, updated, deleted); all zeros when nothing was written.';
COMMENT ON COLUMN reconcile.receipts.objects IS 'Per-object counts of the batch.';
COMMENT ON COLUMN reconcile.receipts.warnings IS 'Violations per warn rule of the target''s attached rules, or NULL.';

COMMENT ON TABLE reconcile.batch_objects IS
    'Every object version a committed batch loaded, with its content hash: a version may be loaded again, never with other content.';
COMMENT ON TABLE reconcile.cursors IS
    'The position of each source in each target, moved in the same transaction as the batch that reached it.';
COMMENT ON COLUMN reconcile.cursors."position" IS 'The cursor passed to reconcile_batch by the last batch from this source.';
COMMENT ON TABLE reconcile.rejects IS
    'Staged rows that could not be loaded, one row per problem found (object, source row, column, raw value, reason).';
COMMENT ON COLUMN reconcile.rejects.reason IS 'Why the row was rejected.';
COMMENT ON TABLE reconcile.conflicts IS
    'Staged rows held back because two payloads claim the same key and version, inside the batch or against the target''s row.';
COMMENT ON COLUMN reconcile.conflicts.staged_hash IS 'Hash of the staged payload.';
COMMENT ON COLUMN reconcile.conflicts.existing_hash IS 'The target row''s hash when the conflict is against the target, else NULL.';

COMMENT ON TABLE reconcile.target_rules IS
    'The rules documents attached to targets, every version kept: the current one is the highest version; rules NULL means detached. Written by reconcile_set_rules.';
COMMENT ON COLUMN reconcile.target_rules.rules IS 'The rules document, or NULL when detached.';

COMMENT ON TABLE reconcile.diff_jobs IS
    'Configured diffs, one row per table pair, run by reconcile_diff_run; source and target are names resolved when the job runs, options as reconcile_diff''s.';
COMMENT ON COLUMN reconcile.diff_jobs.options IS 'reconcile_diff options: compare, ignore, target_key_columns, column_map, trim_keys, updated_column, window, cutoff, tolerance.';
COMMENT ON TABLE reconcile.diff_runs IS
    'One row per run of a configured diff job, kept for history: the summary''s counts, the number of findings, or the error.';
COMMENT ON COLUMN reconcile.diff_runs.error IS 'The error the run ended with, or NULL when it completed.';
COMMENT ON COLUMN reconcile.diff_runs.findings IS 'Rows written to reconcile.diff_results for this run.';
COMMENT ON SEQUENCE reconcile.diff_runs_run_id_seq IS 'Run ids of reconcile.diff_runs.';
COMMENT ON TABLE reconcile.diff_results IS
    'The findings of each diff run, as reconcile_diff returns them.';
