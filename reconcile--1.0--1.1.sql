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

-- ---- comments: the catalog explains itself ----

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
    'Compare source with target by key_columns: one row per finding (missing, extra, mismatch with the differing columns and values, duplicate_key, null_key). Options: compare, ignore (column lists), target_key_columns, column_map (source name to target name), trim_keys (boolean), updated_column, window ([from, to]), cutoff ("source_max"), tolerance (column to number or interval), time_zone (the zone in which timestamp and timestamptz columns are compared, default UTC), lookback (an interval: a window from now minus it), remote (auto, checksum or pull: how a postgres_fdw foreign side is compared), split_factor and leaf_rows (the checksum comparison''s ranges).';
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
COMMENT ON COLUMN reconcile.conflicts.existing_hash IS 'The target row''s hash, on rows at the target row''s version, else NULL.';

COMMENT ON TABLE reconcile.target_rules IS
    'The rules documents attached to targets, every version kept: the current one is the highest version; rules NULL means detached. Written by reconcile_set_rules.';
COMMENT ON COLUMN reconcile.target_rules.rules IS 'The rules document, or NULL when detached.';

COMMENT ON TABLE reconcile.diff_jobs IS
    'Configured diffs, one row per table pair, run by reconcile_diff_run; source and target are names resolved when the job runs, options as reconcile_diff''s.';
COMMENT ON COLUMN reconcile.diff_jobs.options IS 'reconcile_diff options: compare, ignore, target_key_columns, column_map, trim_keys, updated_column, window, cutoff, tolerance, time_zone, lookback, remote, split_factor, leaf_rows.';
COMMENT ON TABLE reconcile.diff_runs IS
    'One row per run of a configured diff job, kept for history: the summary''s counts, the number of findings, or the error.';
COMMENT ON COLUMN reconcile.diff_runs.error IS 'The error the run ended with, or NULL when it completed.';
COMMENT ON COLUMN reconcile.diff_runs.findings IS 'Rows written to reconcile.diff_results for this run.';
COMMENT ON SEQUENCE reconcile.diff_runs_run_id_seq IS 'Run ids of reconcile.diff_runs.';
COMMENT ON TABLE reconcile.diff_results IS
    'The findings of each diff run, as reconcile_diff returns them.';

-- ---- reconciliation configs as users have them ----

-- One COPY of a config file (or rows in an INSERT) into this view makes
-- jobs: its INSTEAD OF trigger checks each row as a run would and inserts
-- or replaces the job of that name in reconcile.diff_jobs, with the
-- loader's own rights.  It resolves the relation names with the loader's
-- search_path and stores them schema-qualified, so it runs without SET
-- search_path; every name it writes through SPI is qualified.
CREATE FUNCTION reconcile.diff_job_config_load()
RETURNS trigger
AS 'MODULE_PATHNAME', 'reconcile_diff_job_config_load'
LANGUAGE C;
REVOKE ALL ON FUNCTION reconcile.diff_job_config_load() FROM PUBLIC;

-- Reading the view shows the jobs in the file's layout (key columns as a
-- list, quoted where a name holds a comma, a quote or surrounding blanks;
-- the window as from/to or a look-back interval).  security_invoker: the
-- reader's rights and any row-level security on diff_jobs apply.
CREATE VIEW reconcile.diff_job_config WITH (security_invoker = true) AS
SELECT j.name AS job,
       j.source,
       j.target,
       (SELECT pg_catalog.string_agg(
                   CASE WHEN k OPERATOR(pg_catalog.~) '^[^",[:space:]]([^",]*[^",[:space:]])?$' THEN k
                        ELSE '"' OPERATOR(pg_catalog.||) pg_catalog.replace(k, '"', '""')
                             OPERATOR(pg_catalog.||) '"' END,
                   ', ' ORDER BY n)
          FROM pg_catalog.unnest(j.key_columns) WITH ORDINALITY AS u(k, n)) AS key_columns,
       j.options OPERATOR(pg_catalog.->>) 'updated_column' AS updated_column,
       CASE WHEN j.options OPERATOR(pg_catalog.?) 'lookback'
            THEN j.options OPERATOR(pg_catalog.->>) 'lookback'
            WHEN pg_catalog.jsonb_typeof(j.options OPERATOR(pg_catalog.->) 'window')
                 OPERATOR(pg_catalog.=) 'array'
            THEN pg_catalog.concat(j.options OPERATOR(pg_catalog.#>>) '{window,0}', '/',
                                   j.options OPERATOR(pg_catalog.#>>) '{window,1}')
       END AS "window"
  FROM reconcile.diff_jobs j;

-- An UPDATE is refused (a job changes by loading its row again); a DELETE
-- through the view deletes the job, with the deleting role's rights.
CREATE TRIGGER load_config INSTEAD OF INSERT OR UPDATE ON reconcile.diff_job_config
    FOR EACH ROW EXECUTE FUNCTION reconcile.diff_job_config_load();

-- Anyone may try: the trigger writes diff_jobs with the loader's rights,
-- which only diff_jobs' owner, and whom it grants INSERT and UPDATE, have.
REVOKE ALL ON reconcile.diff_job_config FROM PUBLIC;
GRANT SELECT, INSERT ON reconcile.diff_job_config TO PUBLIC;

COMMENT ON VIEW reconcile.diff_job_config IS
    'Reconciliation config, one row per job: COPY reconcile.diff_job_config FROM ''file.csv'' CSV HEADER inserts or replaces jobs in reconcile.diff_jobs, checked as a run checks them, with the loader''s rights; reading it shows the jobs in the same layout.';
COMMENT ON COLUMN reconcile.diff_job_config.job IS
    'Job name; a job of the same name is replaced (options set by hand other than updated_column, window and lookback stay).';
COMMENT ON COLUMN reconcile.diff_job_config.source IS
    'Source relation; resolved when loaded with the loader''s search_path and stored schema-qualified.';
COMMENT ON COLUMN reconcile.diff_job_config.target IS
    'Target relation; resolved when loaded with the loader''s search_path and stored schema-qualified.';
COMMENT ON COLUMN reconcile.diff_job_config.key_columns IS
    'Comma-separated key columns, blanks around commas ignored; each name is the column of its exact spelling, or else of its lower-case form.';
COMMENT ON COLUMN reconcile.diff_job_config.updated_column IS
    'Optional column of last update (matched like the key columns).';
COMMENT ON COLUMN reconcile.diff_job_config."window" IS
    'Optional window on the updated column: from/to (ISO 8601, either end empty for an open one) or a look-back interval such as 7 days.';
COMMENT ON FUNCTION reconcile.diff_job_config_load() IS
    'INSTEAD OF INSERT OR UPDATE trigger of reconcile.diff_job_config: checks a config row as a diff job and inserts or replaces it in reconcile.diff_jobs as the loading role; refuses an UPDATE.';

-- ---- rules documents as dataframe tools write them ----

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

-- ---- object versions, reject and schema drift policies ----

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

-- ---- held conflicts and their resolution ----

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
