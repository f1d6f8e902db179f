-- reconcile 1.0: replay-safe batch loading with receipts.
\echo Use "CREATE EXTENSION reconcile" to load this file. \quit

-- The extension's state lives in its own schema; the functions go to the
-- schema CREATE EXTENSION was given (public by default) so that
-- SELECT reconcile_batch(...) works unqualified.
CREATE SCHEMA reconcile;
REVOKE ALL ON SCHEMA reconcile FROM PUBLIC;
GRANT USAGE ON SCHEMA reconcile TO PUBLIC;

-- Registered targets: how a table is keyed, versioned and tombstoned.
CREATE TABLE reconcile.targets (
    target          pg_catalog.regclass PRIMARY KEY,
    key_columns     pg_catalog.text[] NOT NULL,
    version_column  pg_catalog.text NOT NULL,
    deleted_column  pg_catalog.text NOT NULL,
    hash_column     pg_catalog.text NOT NULL,
    payload_columns pg_catalog.text[] NOT NULL,
    conflict_policy pg_catalog.text NOT NULL
        CHECK (conflict_policy IN ('quarantine', 'abort')),
    registered_by   pg_catalog.name NOT NULL DEFAULT CURRENT_USER,
    registered_at   pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now()
);

-- One receipt per committed batch.  batch_id is the SHA-256 of the
-- canonical manifest, so a replayed manifest finds its receipt here.
CREATE TABLE reconcile.receipts (
    batch_id      pg_catalog.text PRIMARY KEY,
    target        pg_catalog.regclass NOT NULL,
    source        pg_catalog.text,
    "cursor"      pg_catalog.text,
    manifest      pg_catalog.jsonb NOT NULL,
    staged_rows   pg_catalog.int8 NOT NULL,
    inserted      pg_catalog.int8 NOT NULL,
    updated       pg_catalog.int8 NOT NULL,
    deleted       pg_catalog.int8 NOT NULL,
    unchanged     pg_catalog.int8 NOT NULL,
    stale         pg_catalog.int8 NOT NULL,
    duplicates    pg_catalog.int8 NOT NULL,
    conflicts     pg_catalog.int8 NOT NULL,
    rejected      pg_catalog.int8 NOT NULL,
    checksum      pg_catalog.text NOT NULL,
    objects       pg_catalog.jsonb NOT NULL,
    committed_by  pg_catalog.name NOT NULL,
    committed_at  pg_catalog.timestamptz NOT NULL,
    -- Violations per warn rule of the target's data-quality rules, or NULL.
    warnings      pg_catalog.jsonb,
    CHECK (staged_rows = inserted + updated + deleted + unchanged + stale
                         + duplicates + conflicts + rejected)
);
CREATE INDEX ON reconcile.receipts (target, committed_at);

-- Every object a committed batch loaded: an object version may be loaded
-- again (it is then stale or unchanged), but never with other content.
CREATE TABLE reconcile.batch_objects (
    batch_id      pg_catalog.text NOT NULL
        REFERENCES reconcile.receipts ON DELETE CASCADE,
    target        pg_catalog.regclass NOT NULL,
    object_key    pg_catalog.text NOT NULL,
    version_id    pg_catalog.text NOT NULL,
    content_hash  pg_catalog.text NOT NULL,
    "rows"        pg_catalog.int8 NOT NULL,
    PRIMARY KEY (batch_id, object_key)
);
CREATE INDEX ON reconcile.batch_objects (target, object_key, version_id);

-- The position of each source in each target, moved in the same
-- transaction as the batch that reached it.
CREATE TABLE reconcile.cursors (
    target      pg_catalog.regclass NOT NULL,
    source      pg_catalog.text NOT NULL,
    "position"  pg_catalog.text NOT NULL,
    batch_id    pg_catalog.text NOT NULL,
    updated_at  pg_catalog.timestamptz NOT NULL,
    PRIMARY KEY (target, source)
);

-- Staged rows that could not be loaded, one row per problem found.
CREATE TABLE reconcile.rejects (
    batch_id     pg_catalog.text NOT NULL,
    target       pg_catalog.regclass NOT NULL,
    object_key   pg_catalog.text NOT NULL,
    source_row   pg_catalog.int8,
    column_name  pg_catalog.text,
    raw_value    pg_catalog.text,
    reason       pg_catalog.text NOT NULL
);
CREATE INDEX ON reconcile.rejects (batch_id);

-- Staged rows held back because two payloads claim the same key and
-- version (inside the batch, or against the target's row).
CREATE TABLE reconcile.conflicts (
    batch_id       pg_catalog.text NOT NULL,
    target         pg_catalog.regclass NOT NULL,
    key            pg_catalog.jsonb NOT NULL,
    version        pg_catalog.int8 NOT NULL,
    object_key     pg_catalog.text NOT NULL,
    source_row     pg_catalog.int8,
    staged_hash    pg_catalog.bytea NOT NULL,
    existing_hash  pg_catalog.bytea
);
CREATE INDEX ON reconcile.conflicts (batch_id);

-- pg_dump keeps the state: a restored database still recognises replays.
SELECT pg_catalog.pg_extension_config_dump('reconcile.targets', '');
SELECT pg_catalog.pg_extension_config_dump('reconcile.receipts', '');
SELECT pg_catalog.pg_extension_config_dump('reconcile.batch_objects', '');
SELECT pg_catalog.pg_extension_config_dump('reconcile.cursors', '');
SELECT pg_catalog.pg_extension_config_dump('reconcile.rejects', '');
SELECT pg_catalog.pg_extension_config_dump('reconcile.conflicts', '');

-- Only the extension's functions write the state tables (switching to the
-- owner for that, after checking the caller's rights on the target).
-- Everyone may read it, but only for targets they may SELECT from: rejects
-- and conflicts hold raw values from users' data.
REVOKE ALL ON reconcile.targets, reconcile.receipts, reconcile.batch_objects,
    reconcile.cursors, reconcile.rejects, reconcile.conflicts FROM PUBLIC;
GRANT SELECT ON reconcile.targets, reconcile.receipts, reconcile.batch_objects,
    reconcile.cursors, reconcile.rejects, reconcile.conflicts TO PUBLIC;

ALTER TABLE reconcile.targets ENABLE ROW LEVEL SECURITY;
ALTER TABLE reconcile.receipts ENABLE ROW LEVEL SECURITY;
ALTER TABLE reconcile.batch_objects ENABLE ROW LEVEL SECURITY;
ALTER TABLE reconcile.cursors ENABLE ROW LEVEL SECURITY;
ALTER TABLE reconcile.rejects ENABLE ROW LEVEL SECURITY;
ALTER TABLE reconcile.conflicts ENABLE ROW LEVEL SECURITY;
CREATE POLICY readable_targets ON reconcile.targets FOR SELECT
    USING (pg_catalog.has_table_privilege(target, 'SELECT'));
CREATE POLICY readable_targets ON reconcile.receipts FOR SELECT
    USING (pg_catalog.has_table_privilege(target, 'SELECT'));
CREATE POLICY readable_targets ON reconcile.batch_objects FOR SELECT
    USING (pg_catalog.has_table_privilege(target, 'SELECT'));
CREATE POLICY readable_targets ON reconcile.cursors FOR SELECT
    USING (pg_catalog.has_table_privilege(target, 'SELECT'));
CREATE POLICY readable_targets ON reconcile.rejects FOR SELECT
    USING (pg_catalog.has_table_privilege(target, 'SELECT'));
CREATE POLICY readable_targets ON reconcile.conflicts FOR SELECT
    USING (pg_catalog.has_table_privilege(target, 'SELECT'));

-- Batches running now, as seen from any session (a batch reports its
-- progress as a COPY command, marked with 0x7265636f in parameter 7).
CREATE VIEW reconcile.batch_progress AS
    SELECT p.pid,
           p.relid::pg_catalog.regclass AS target,
           CASE p.param8 WHEN 1 THEN 'reading staged rows'
                         WHEN 2 THEN 'sorting'
                         WHEN 3 THEN 'merging'
                         WHEN 4 THEN 'applying'
                         WHEN 5 THEN 'writing receipt' END AS phase,
           p.param9 AS rows_done,
           p.param10 AS rows_total,
           p.param11 AS workers
      FROM pg_catalog.pg_stat_get_progress_info('COPY') AS p
     WHERE p.param7 OPERATOR(pg_catalog.=) 1919247215;
GRANT SELECT ON reconcile.batch_progress TO PUBLIC;

-- Register a table as a reconcile target.  The caller must own it.
CREATE FUNCTION reconcile_register(
    target pg_catalog.regclass,
    key_columns pg_catalog.text[],
    version_column pg_catalog.text,
    deleted_column pg_catalog.text,
    hash_column pg_catalog.text,
    conflict_policy pg_catalog.text DEFAULT 'quarantine',
    payload_columns pg_catalog.text[] DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'reconcile_register'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- Forget a target's registration; its receipts and cursors stay.
CREATE FUNCTION reconcile_unregister(target pg_catalog.regclass)
RETURNS void
AS 'MODULE_PATHNAME', 'reconcile_unregister'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- The batch id of a manifest: lowercase hex SHA-256 of its canonical form.
CREATE FUNCTION reconcile_batch_id(manifest pg_catalog.jsonb)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'reconcile_batch_id'
LANGUAGE C CALLED ON NULL INPUT IMMUTABLE;

-- The canonical text of a manifest, whose SHA-256 is the batch id.
CREATE FUNCTION reconcile_canonical_manifest(manifest pg_catalog.jsonb)
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'reconcile_canonical_manifest'
LANGUAGE C CALLED ON NULL INPUT IMMUTABLE;

-- What reconcile_batch returns: the batch's receipt.
CREATE TYPE reconcile.receipt AS (
    batch_id     pg_catalog.text,
    target       pg_catalog.regclass,
    status       pg_catalog.text,
    inserted     pg_catalog.int8,
    updated      pg_catalog.int8,
    deleted      pg_catalog.int8,
    unchanged    pg_catalog.int8,
    stale        pg_catalog.int8,
    duplicates   pg_catalog.int8,
    conflicts    pg_catalog.int8,
    rejected     pg_catalog.int8,
    checksum     pg_catalog.text,
    committed_at pg_catalog.timestamptz,
    staged_rows  pg_catalog.int8,
    objects      pg_catalog.jsonb
);

-- Stage, check and merge one batch; returns its receipt.
CREATE FUNCTION reconcile_batch(
    target pg_catalog.regclass,
    staged pg_catalog.regclass,
    manifest pg_catalog.jsonb,
    source pg_catalog.text DEFAULT NULL,
    "cursor" pg_catalog.text DEFAULT NULL)
RETURNS SETOF reconcile.receipt
AS 'MODULE_PATHNAME', 'reconcile_batch'
LANGUAGE C CALLED ON NULL INPUT VOLATILE ROWS 1;

-- ---- reconciliation diff ----

-- What a diff finds, one row per finding (see reconcile_diff).
CREATE FUNCTION reconcile_diff(
    source pg_catalog.regclass,
    target pg_catalog.regclass,
    key_columns pg_catalog.text[],
    options pg_catalog.jsonb DEFAULT '{}'::pg_catalog.jsonb)
RETURNS TABLE (
    issue pg_catalog.text,
    key pg_catalog.jsonb,
    columns pg_catalog.text[],
    source_values pg_catalog.jsonb,
    target_values pg_catalog.jsonb)
AS 'MODULE_PATHNAME', 'reconcile_diff'
LANGUAGE C CALLED ON NULL INPUT VOLATILE ROWS 100;

-- The same diff, counted: one row.
CREATE FUNCTION reconcile_diff_summary(
    source pg_catalog.regclass,
    target pg_catalog.regclass,
    key_columns pg_catalog.text[],
    options pg_catalog.jsonb DEFAULT '{}'::pg_catalog.jsonb,
    OUT rows_source pg_catalog.int8,
    OUT rows_target pg_catalog.int8,
    OUT matched pg_catalog.int8,
    OUT missing_in_target pg_catalog.int8,
    OUT extra_in_target pg_catalog.int8,
    OUT mismatched pg_catalog.int8,
    OUT duplicate_keys pg_catalog.int8,
    OUT null_keys pg_catalog.int8,
    OUT column_mismatches pg_catalog.jsonb)
RETURNS record
AS 'MODULE_PATHNAME', 'reconcile_diff_summary'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- Configured diffs, for many table pairs; fill from a file with
-- COPY reconcile.diff_jobs FROM '...' CSV HEADER.  Source and target are
-- names, resolved when the job runs.
CREATE TABLE reconcile.diff_jobs (
    name         pg_catalog.text PRIMARY KEY,
    source       pg_catalog.text NOT NULL,
    target       pg_catalog.text NOT NULL,
    key_columns  pg_catalog.text[] NOT NULL,
    options      pg_catalog.jsonb
);

-- One row per job run, kept for history.
CREATE SEQUENCE reconcile.diff_runs_run_id_seq;
CREATE TABLE reconcile.diff_runs (
    run_id             pg_catalog.int8 PRIMARY KEY
        DEFAULT pg_catalog.nextval('reconcile.diff_runs_run_id_seq'::pg_catalog.regclass),
    job                pg_catalog.text NOT NULL,
    source             pg_catalog.regclass,
    target             pg_catalog.regclass,
    started_at         pg_catalog.timestamptz NOT NULL,
    finished_at        pg_catalog.timestamptz NOT NULL,
    rows_source        pg_catalog.int8,
    rows_target        pg_catalog.int8,
    matched            pg_catalog.int8,
    missing_in_target  pg_catalog.int8,
    extra_in_target    pg_catalog.int8,
    mismatched         pg_catalog.int8,
    duplicate_keys     pg_catalog.int8,
    null_keys          pg_catalog.int8,
    column_mismatches  pg_catalog.jsonb,
    findings           pg_catalog.int8,
    error              pg_catalog.text,
    run_by             pg_catalog.name NOT NULL
);
ALTER SEQUENCE reconcile.diff_runs_run_id_seq OWNED BY reconcile.diff_runs.run_id;
CREATE INDEX ON reconcile.diff_runs (job, started_at);

-- The findings of each run, as reconcile_diff returns them.
CREATE TABLE reconcile.diff_results (
    run_id         pg_catalog.int8 NOT NULL
        REFERENCES reconcile.diff_runs ON DELETE CASCADE,
    source         pg_catalog.regclass NOT NULL,
    target         pg_catalog.regclass NOT NULL,
    issue          pg_catalog.text NOT NULL,
    key            pg_catalog.jsonb NOT NULL,
    columns        pg_catalog.text[],
    source_values  pg_catalog.jsonb,
    target_values  pg_catalog.jsonb
);
CREATE INDEX ON reconcile.diff_results (run_id);

SELECT pg_catalog.pg_extension_config_dump('reconcile.diff_jobs', '');
SELECT pg_catalog.pg_extension_config_dump('reconcile.diff_runs', '');
SELECT pg_catalog.pg_extension_config_dump('reconcile.diff_runs_run_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('reconcile.diff_results', '');

-- Jobs hold configuration, not data: everyone may read them; only their
-- owner (or whom the DBA grants) may change them.  Runs and results are
-- written by reconcile_diff_run on the caller's behalf, and read back only
-- by roles that may SELECT from both compared relations: results hold
-- values from them.  A role also sees the runs it made, failed ones
-- included (results are only written by runs that could read both sides).
REVOKE ALL ON reconcile.diff_jobs, reconcile.diff_runs, reconcile.diff_results
    FROM PUBLIC;
GRANT SELECT ON reconcile.diff_jobs, reconcile.diff_runs, reconcile.diff_results
    TO PUBLIC;
ALTER TABLE reconcile.diff_runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE reconcile.diff_results ENABLE ROW LEVEL SECURITY;
CREATE POLICY readable_sides ON reconcile.diff_runs FOR SELECT
    USING (run_by OPERATOR(pg_catalog.=) CURRENT_USER
           OR (pg_catalog.has_table_privilege(source, 'SELECT')
               AND pg_catalog.has_table_privilege(target, 'SELECT')));
CREATE POLICY readable_sides ON reconcile.diff_results FOR SELECT
    USING (pg_catalog.has_table_privilege(source, 'SELECT')
           AND pg_catalog.has_table_privilege(target, 'SELECT'));

-- Run one configured job, or all of them (job => NULL), recording each.
CREATE FUNCTION reconcile_diff_run(job pg_catalog.text DEFAULT NULL)
RETURNS SETOF reconcile.diff_runs
AS 'MODULE_PATHNAME', 'reconcile_diff_run'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- ---- data-quality rules ----

-- Run a rules document over a relation: one row per rule.  Row rules are
-- evaluated in one scan; dataset checks run one query each; everything
-- runs with the caller's rights, read-only.
CREATE FUNCTION reconcile_check(
    relation pg_catalog.regclass,
    rules pg_catalog.jsonb,
    options pg_catalog.jsonb DEFAULT '{}')
RETURNS TABLE (
    rule         pg_catalog.text,
    severity     pg_catalog.text,
    status       pg_catalog.text,
    invalid_rows pg_catalog.int8,
    invalid_pct  pg_catalog.numeric,
    gate_breach  pg_catalog.bool,
    sample       pg_catalog.jsonb,
    detail       pg_catalog.text)
AS 'MODULE_PATHNAME', 'reconcile_check'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- The same, as one jsonb document with a summary and the gate's verdict.
CREATE FUNCTION reconcile_check_report(
    relation pg_catalog.regclass,
    rules pg_catalog.jsonb,
    options pg_catalog.jsonb DEFAULT '{}')
RETURNS pg_catalog.jsonb
AS 'MODULE_PATHNAME', 'reconcile_check_report'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- Profile a relation and propose a rules document, with evidence.
CREATE FUNCTION reconcile_discover_rules(
    relation pg_catalog.regclass,
    options pg_catalog.jsonb DEFAULT '{}')
RETURNS pg_catalog.jsonb
AS 'MODULE_PATHNAME', 'reconcile_discover_rules'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;

-- The rules documents attached to targets, every version kept: the
-- current one is the highest version; rules NULL means detached.
CREATE TABLE reconcile.target_rules (
    target            pg_catalog.regclass NOT NULL,
    version           pg_catalog.int4 NOT NULL,
    rules             pg_catalog.jsonb,
    set_by            pg_catalog.name NOT NULL,
    set_at            pg_catalog.timestamptz NOT NULL,
    previous_version  pg_catalog.int4,
    PRIMARY KEY (target, version)
);
SELECT pg_catalog.pg_extension_config_dump('reconcile.target_rules', '');
REVOKE ALL ON reconcile.target_rules FROM PUBLIC;
GRANT SELECT ON reconcile.target_rules TO PUBLIC;
ALTER TABLE reconcile.target_rules ENABLE ROW LEVEL SECURITY;
CREATE POLICY readable_targets ON reconcile.target_rules FOR SELECT
    USING (pg_catalog.has_table_privilege(target, 'SELECT'));

-- Attach a reviewed rules document to a registered target (NULL detaches);
-- the caller must own the target.  Returns the new version number.
CREATE FUNCTION reconcile_set_rules(
    target pg_catalog.regclass,
    rules pg_catalog.jsonb)
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME', 'reconcile_set_rules'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
