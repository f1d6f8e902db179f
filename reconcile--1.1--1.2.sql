-- reconcile 1.1 -> 1.2
\echo Use "ALTER EXTENSION reconcile UPDATE TO '1.2'" to load this file. \quit

-- ---- Keys stored with pinned settings (issue 19, point 4) ----
-- reconcile 1.2 writes held keys under pinned settings (ISO dates, UTC,
-- IntervalStyle postgres, the shortest exact floats), 1.1 wrote them under
-- the loading session's.  key_pinned tells them apart: the rows already
-- held are 1.1's (false); every row written from now on is 1.2's (the
-- default true).  A 1.1 key is resolved only where its text names one key
-- whatever the settings it was written under were (see docs/loader.md).
ALTER TABLE reconcile.conflicts ADD COLUMN key_pinned pg_catalog.bool NOT NULL DEFAULT false;
ALTER TABLE reconcile.conflicts ALTER COLUMN key_pinned SET DEFAULT true;
COMMENT ON COLUMN reconcile.conflicts.key_pinned IS
    'true: key written by reconcile 1.2 under pinned settings (ISO dates, UTC, shortest exact floats); false: by 1.1 under the loading session''s DateStyle, TimeZone, IntervalStyle and extra_float_digits';
-- ---- data quality over time: check jobs and their history (issue 25) ----

-- Configured checks, one row per job, run by reconcile_check_run: the
-- relation is a name resolved when the job runs; rules NULL runs the rules
-- attached to the relation (a registered target); options as
-- reconcile_check's.
CREATE TABLE reconcile.check_jobs (
    job       pg_catalog.text PRIMARY KEY,
    relation  pg_catalog.text NOT NULL,
    rules     pg_catalog.jsonb,
    options   pg_catalog.jsonb
);

-- One row per check run (a job's run, or a batch into a target with
-- attached rules), passes included, kept for history.
CREATE SEQUENCE reconcile.check_runs_run_id_seq;
CREATE TABLE reconcile.check_runs (
    run_id       pg_catalog.int8 PRIMARY KEY
        DEFAULT pg_catalog.nextval('reconcile.check_runs_run_id_seq'::pg_catalog.regclass),
    job          pg_catalog.text,
    relation     pg_catalog.regclass,
    batch_id     pg_catalog.text,
    started_at   pg_catalog.timestamptz NOT NULL,
    finished_at  pg_catalog.timestamptz NOT NULL,
    total_rows   pg_catalog.int8,
    rules        pg_catalog.int4,
    passed       pg_catalog.int4,
    failed       pg_catalog.int4,
    errored      pg_catalog.int4,
    skipped      pg_catalog.int4,
    gate         pg_catalog.text,
    error        pg_catalog.text,
    run_by       pg_catalog.name NOT NULL,
    CHECK ((job IS NULL) OPERATOR(pg_catalog.<>) (batch_id IS NULL))
);
ALTER SEQUENCE reconcile.check_runs_run_id_seq OWNED BY reconcile.check_runs.run_id;
CREATE INDEX ON reconcile.check_runs (job, started_at);
CREATE INDEX ON reconcile.check_runs (relation, started_at);
CREATE INDEX ON reconcile.check_runs (started_at);

-- One row per rule of each run, passes included.
CREATE TABLE reconcile.check_results (
    run_id        pg_catalog.int8 NOT NULL
        REFERENCES reconcile.check_runs ON DELETE CASCADE,
    relation      pg_catalog.regclass NOT NULL,
    rule          pg_catalog.text NOT NULL,
    severity      pg_catalog.text NOT NULL,
    status        pg_catalog.text NOT NULL,
    invalid_rows  pg_catalog.int8,
    total_rows    pg_catalog.int8,
    invalid_share pg_catalog.float8,
    threshold     pg_catalog.jsonb,
    gate_breach   pg_catalog.bool NOT NULL,
    sample        pg_catalog.jsonb,
    detail        pg_catalog.text,
    error         pg_catalog.text,
    sqlstate      pg_catalog.text,
    observed      pg_catalog.float8,
    history_mean  pg_catalog.float8,
    history_stddev pg_catalog.float8,
    history_runs  pg_catalog.int4,
    PRIMARY KEY (run_id, rule)
);
CREATE INDEX ON reconcile.check_results (relation, rule);

SELECT pg_catalog.pg_extension_config_dump('reconcile.check_jobs', '');
SELECT pg_catalog.pg_extension_config_dump('reconcile.check_runs', '');
SELECT pg_catalog.pg_extension_config_dump('reconcile.check_runs_run_id_seq', '');
SELECT pg_catalog.pg_extension_config_dump('reconcile.check_results', '');

-- As the diff's history: jobs hold configuration, readable by everyone and
-- changed by their owner (or whom the DBA grants).  Runs and results are
-- written on the caller's behalf by reconcile_check_run and
-- reconcile_batch, and read back by roles that may SELECT from the
-- relation checked (table-level, with no row-level security restricting
-- them there): results hold samples of its rows.  A role also sees the
-- runs it made, failed ones included.
REVOKE ALL ON reconcile.check_jobs, reconcile.check_runs, reconcile.check_results
    FROM PUBLIC;
GRANT SELECT ON reconcile.check_jobs, reconcile.check_runs, reconcile.check_results
    TO PUBLIC;
ALTER TABLE reconcile.check_runs ENABLE ROW LEVEL SECURITY;
ALTER TABLE reconcile.check_results ENABLE ROW LEVEL SECURITY;
CREATE POLICY readable_relation ON reconcile.check_runs FOR SELECT
    USING (run_by OPERATOR(pg_catalog.=) CURRENT_USER
           OR (pg_catalog.has_table_privilege(relation, 'SELECT')
               AND NOT pg_catalog.row_security_active(relation::pg_catalog.oid)));
CREATE POLICY readable_relation ON reconcile.check_results FOR SELECT
    USING (pg_catalog.has_table_privilege(relation, 'SELECT')
           AND NOT pg_catalog.row_security_active(relation::pg_catalog.oid));

-- Run one configured check job, or all of them (job => NULL), recording each.
CREATE FUNCTION reconcile_check_run(job pg_catalog.text DEFAULT NULL)
RETURNS SETOF reconcile.check_runs
AS 'MODULE_PATHNAME', 'reconcile_check_run'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;

COMMENT ON TABLE reconcile.check_jobs IS
    'Configured data-quality checks, one row per job, run by reconcile_check_run: relation is a name resolved when the job runs, rules a rules document (NULL: the rules attached to the relation), options as reconcile_check''s.';
COMMENT ON COLUMN reconcile.check_jobs.options IS 'reconcile_check options: sample, key_columns.';
COMMENT ON TABLE reconcile.check_runs IS
    'One row per check run, passes included: a run of a check job (job) or the rules of a batch into a target with attached rules (batch_id); counts per status, the gate, or the error the run ended with.';
COMMENT ON COLUMN reconcile.check_runs.gate IS '''pass'' or ''blocked'', as reconcile_check_report''s summary.gate; NULL when the run failed.';
COMMENT ON COLUMN reconcile.check_runs.error IS 'The error the run ended with, or NULL when it completed.';
COMMENT ON SEQUENCE reconcile.check_runs_run_id_seq IS 'Run ids of reconcile.check_runs.';
COMMENT ON TABLE reconcile.check_results IS
    'One row per rule of each check run, passes included: status, violating rows of total_rows, their share, the rule''s threshold, a sample, the error; for anomaly rules the observed value and the history it was compared with.';
COMMENT ON FUNCTION reconcile_check_run(pg_catalog.text) IS
    'Run the check job of reconcile.check_jobs named job, or every job when job is NULL, recording each run in reconcile.check_runs and one row per rule in reconcile.check_results; returns the runs.';

-- ---- data quality over time: metrics for a monitoring stack (issue 25) ----

-- One row per metric and label set, as Prometheus names them; read by the
-- queries of monitoring/postgres_exporter/queries.yaml.  security_invoker:
-- a reader sees the metrics of the state its role may see (the state
-- tables' row-level security applies to it, not to the view's owner).
CREATE VIEW reconcile.metrics WITH (security_invoker = true) AS
WITH rel AS (
    SELECT c.oid, pg_catalog.format('%s.%s', n.nspname, c.relname) AS name
      FROM pg_catalog.pg_class c
      JOIN pg_catalog.pg_namespace n ON n.oid OPERATOR(pg_catalog.=) c.relnamespace
),
target AS (
    SELECT t.target, rel.name
      FROM reconcile.targets t JOIN rel ON rel.oid OPERATOR(pg_catalog.=) t.target::pg_catalog.oid
),
receipt AS (
    SELECT r.target, pg_catalog.count(*) AS batches,
           pg_catalog.sum(r.inserted) AS inserted, pg_catalog.sum(r.updated) AS updated,
           pg_catalog.sum(r.deleted) AS deleted, pg_catalog.sum(r.unchanged) AS unchanged,
           pg_catalog.sum(r.stale) AS stale, pg_catalog.sum(r.duplicates) AS duplicates,
           pg_catalog.sum(r.conflicts) AS conflicts, pg_catalog.sum(r.rejected) AS rejected,
           pg_catalog.max(r.committed_at) AS last_committed
      FROM reconcile.receipts r GROUP BY r.target
),
last_diff AS (
    SELECT DISTINCT ON (d.job) d.*
      FROM reconcile.diff_runs d WHERE d.error IS NULL
     ORDER BY d.job, d.started_at DESC, d.run_id DESC
),
diff_job AS (
    SELECT d.job, pg_catalog.max(d.finished_at) AS last_finished,
           pg_catalog.count(*) FILTER (WHERE d.error IS NOT NULL) AS failed
      FROM reconcile.diff_runs d GROUP BY d.job
),
last_check AS (
    SELECT DISTINCT ON (c.job) c.*
      FROM reconcile.check_runs c WHERE c.job IS NOT NULL AND c.error IS NULL
     ORDER BY c.job, c.started_at DESC, c.run_id DESC
),
check_job AS (
    SELECT c.job, pg_catalog.max(c.finished_at) AS last_finished,
           pg_catalog.count(*) FILTER (WHERE c.error IS NOT NULL) AS failed
      FROM reconcile.check_runs c WHERE c.job IS NOT NULL GROUP BY c.job
)
-- per target
SELECT 'reconcile_batches_total'::pg_catalog.text AS metric,
       pg_catalog.jsonb_build_object('target', t.name) AS labels,
       COALESCE(r.batches, 0)::pg_catalog.float8 AS value
  FROM target t LEFT JOIN receipt r ON r.target OPERATOR(pg_catalog.=) t.target
UNION ALL
SELECT 'reconcile_rows_total', pg_catalog.jsonb_build_object('target', t.name, 'disposition', v.disposition),
       COALESCE(v.n, 0)::pg_catalog.float8
  FROM target t LEFT JOIN receipt r ON r.target OPERATOR(pg_catalog.=) t.target
 CROSS JOIN LATERAL (VALUES ('inserted', r.inserted), ('updated', r.updated), ('deleted', r.deleted),
                            ('unchanged', r.unchanged), ('stale', r.stale), ('duplicates', r.duplicates),
                            ('conflicts', r.conflicts), ('rejected', r.rejected)) AS v(disposition, n)
UNION ALL
SELECT 'reconcile_conflicts_held', pg_catalog.jsonb_build_object('target', t.name),
       (SELECT pg_catalog.count(DISTINCT (c.batch_id, c.key))
          FROM reconcile.conflicts c
         WHERE c.target OPERATOR(pg_catalog.=) t.target
           AND NOT EXISTS (SELECT FROM reconcile.resolutions s
                            WHERE s.target OPERATOR(pg_catalog.=) c.target
                              AND s.batch_id OPERATOR(pg_catalog.=) c.batch_id
                              AND s.key OPERATOR(pg_catalog.=) c.key))::pg_catalog.float8
  FROM target t
UNION ALL
SELECT 'reconcile_rejects_total', pg_catalog.jsonb_build_object('target', t.name),
       (SELECT pg_catalog.count(*) FROM reconcile.rejects j
         WHERE j.target OPERATOR(pg_catalog.=) t.target)::pg_catalog.float8
  FROM target t
UNION ALL
SELECT 'reconcile_last_batch_age_seconds', pg_catalog.jsonb_build_object('target', t.name),
       pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) r.last_committed)
  FROM target t JOIN receipt r ON r.target OPERATOR(pg_catalog.=) t.target
-- per diff job
UNION ALL
SELECT 'reconcile_diff_findings', pg_catalog.jsonb_build_object('job', d.job, 'issue', v.issue),
       v.n::pg_catalog.float8
  FROM last_diff d
 CROSS JOIN LATERAL (VALUES ('missing_in_target', d.missing_in_target), ('extra_in_target', d.extra_in_target),
                            ('mismatched', d.mismatched), ('duplicate_keys', d.duplicate_keys),
                            ('null_keys', d.null_keys)) AS v(issue, n)
 WHERE v.n IS NOT NULL
UNION ALL
SELECT 'reconcile_diff_last_run_age_seconds', pg_catalog.jsonb_build_object('job', d.job),
       pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) d.last_finished)
  FROM diff_job d
UNION ALL
SELECT 'reconcile_diff_failed_runs_total', pg_catalog.jsonb_build_object('job', d.job),
       d.failed::pg_catalog.float8
  FROM diff_job d
-- per check job
UNION ALL
SELECT 'reconcile_check_breaching_rules', pg_catalog.jsonb_build_object('job', c.job),
       (SELECT pg_catalog.count(*) FROM reconcile.check_results x
         WHERE x.run_id OPERATOR(pg_catalog.=) c.run_id AND x.gate_breach)::pg_catalog.float8
  FROM last_check c
UNION ALL
SELECT 'reconcile_check_failing_rules', pg_catalog.jsonb_build_object('job', c.job),
       COALESCE(c.failed OPERATOR(pg_catalog.+) c.errored, 0)::pg_catalog.float8
  FROM last_check c
UNION ALL
SELECT 'reconcile_check_last_run_age_seconds', pg_catalog.jsonb_build_object('job', c.job),
       pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-) c.last_finished)
  FROM check_job c
UNION ALL
SELECT 'reconcile_check_failed_runs_total', pg_catalog.jsonb_build_object('job', c.job),
       c.failed::pg_catalog.float8
  FROM check_job c;
GRANT SELECT ON reconcile.metrics TO PUBLIC;
COMMENT ON VIEW reconcile.metrics IS
    'Metrics for a monitoring stack, one row per metric and label set (Prometheus names; monitoring/postgres_exporter/queries.yaml reads them): per target batches, rows per disposition, conflicts held, rejects, age of the last batch; per diff job the last run''s findings per issue, its age, failed runs; per check job breaching and failing rules of the last run, its age, failed runs.  Runs with the reader''s rights: it shows what the reader may see of the state.';
-- ---- diff history visible as the sides are; each job's failure recorded ----

-- A run records whether its findings depend on who reads the sides
-- (reader_dependent: a side is a view, or reads a foreign table through the
-- runner's own user mapping) and the SQLSTATE of a failed run.  Runs of 1.1
-- are reader-dependent unless both sides, and every partition or child of
-- them, are still tables or materialized views, whose rows are the same
-- for every reader that row-level security does not restrict (checked when
-- read): a view or foreign side of 1.1 does not say whose rows it showed,
-- and a dropped side cannot say what it was.
ALTER TABLE reconcile.diff_runs
    ADD COLUMN reader_dependent pg_catalog.bool NOT NULL DEFAULT true,
    ADD COLUMN sqlstate pg_catalog.text;
UPDATE reconcile.diff_runs r SET reader_dependent = false
 WHERE r.source IS NOT NULL AND r.target IS NOT NULL
   AND NOT EXISTS (
       WITH RECURSIVE tree(relid) AS (
           SELECT r.source::pg_catalog.oid
           UNION
           SELECT r.target::pg_catalog.oid
           UNION
           SELECT i.inhrelid FROM pg_catalog.pg_inherits i, tree t
            WHERE i.inhparent OPERATOR(pg_catalog.=) t.relid)
       SELECT FROM tree t
        WHERE NOT EXISTS (SELECT FROM pg_catalog.pg_class c
                           WHERE c.oid OPERATOR(pg_catalog.=) t.relid
                             AND c.relkind OPERATOR(pg_catalog.=)
                                 ANY ('{r,p,m}'::pg_catalog."char"[])));

-- Whether the current role may see a run (and its findings): the role that
-- ran it and every member of that role (who may SET ROLE to it and read the
-- sides as it did); and, when the findings do not depend on the reader,
-- every role that reads both sides as every reader without rows of its own
-- does: table SELECT, no row-level security restricting it there, and every
-- foreign table of a side (itself, a partition or an inheritance child)
-- read through its server's PUBLIC user mapping.  In C: the policies call
-- it for every run read (src/diff/diff_run.c).
CREATE FUNCTION reconcile.diff_run_visible(run_by pg_catalog.name,
                                           reader_dependent pg_catalog.bool,
                                           source pg_catalog.regclass,
                                           target pg_catalog.regclass)
RETURNS pg_catalog.bool
AS 'MODULE_PATHNAME', 'reconcile_diff_run_visible'
LANGUAGE C STABLE PARALLEL SAFE;

ALTER POLICY readable_sides ON reconcile.diff_runs
    USING (reconcile.diff_run_visible(run_by, reader_dependent, source, target));
-- A finding is visible with its run (whose sides are the finding's: the
-- findings of a dropped side are removed).  The visible runs are found once
-- per query, not per finding.
ALTER POLICY readable_sides ON reconcile.diff_results
    USING (run_id OPERATOR(pg_catalog.=) ANY (
               SELECT r.run_id FROM reconcile.diff_runs r
                WHERE reconcile.diff_run_visible(r.run_by, r.reader_dependent,
                                                 r.source, r.target)));

-- reconcile_diff_run gains all_or_nothing: by default each job's failure,
-- an unreachable foreign server's included, is recorded as that job's run
-- while the others run; true makes the first failure the call's error.
-- Calls of 1.1 (no argument, a job name, job => ...) mean what they did.
DROP FUNCTION @extschema@.reconcile_diff_run(pg_catalog.text);
CREATE FUNCTION @extschema@.reconcile_diff_run(job pg_catalog.text DEFAULT NULL,
                                               all_or_nothing pg_catalog.bool DEFAULT false)
RETURNS SETOF reconcile.diff_runs
AS 'MODULE_PATHNAME', 'reconcile_diff_run'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;

COMMENT ON FUNCTION @extschema@.reconcile_diff_run(pg_catalog.text, pg_catalog.bool) IS
    'Run the configured job of reconcile.diff_jobs named job, or every job when job is NULL, recording each run in reconcile.diff_runs and its findings in reconcile.diff_results; returns the runs.  A failing job is recorded with its SQLSTATE and error while the others run, unless all_or_nothing: then the first failure is the call''s error and nothing is recorded.';
COMMENT ON COLUMN reconcile.diff_runs.reader_dependent IS
    'Whether the findings depend on the reader (a side is a view, or a foreign table read through the runner''s own user mapping): then only the runner and its members see the run and its results.';
COMMENT ON COLUMN reconcile.diff_runs.sqlstate IS 'The SQLSTATE of the error the run ended with, or NULL when it completed.';
COMMENT ON FUNCTION reconcile.diff_run_visible(pg_catalog.name, pg_catalog.bool, pg_catalog.regclass, pg_catalog.regclass) IS
    'Policy helper of reconcile.diff_runs and diff_results: the runner and its members see a run; other roles only when it is not reader-dependent and they read both sides as shared.';

-- ---- a reconciliation config carries trim_keys and cutoff ----

-- Two optional columns at the end of reconcile.diff_job_config: a file in
-- 1.1's layout loads with its column list (COPY reconcile.diff_job_config
-- (job, source, target, key_columns, updated_column, "window") FROM ...).
-- An empty field keeps what the job has; cutoff "none" removes one.
CREATE OR REPLACE VIEW reconcile.diff_job_config WITH (security_invoker = true) AS
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
       END AS "window",
       j.options OPERATOR(pg_catalog.->>) 'trim_keys' AS trim_keys,
       j.options OPERATOR(pg_catalog.->>) 'cutoff' AS cutoff
  FROM reconcile.diff_jobs j;

COMMENT ON COLUMN reconcile.diff_job_config.trim_keys IS
    'Optional: true or false (option trim_keys); empty keeps the job''s setting.';
COMMENT ON COLUMN reconcile.diff_job_config.cutoff IS
    'Optional, needs updated_column: source_max (option cutoff), or none to remove it; empty keeps the job''s setting.';
COMMENT ON COLUMN reconcile.diff_job_config.job IS
    'Job name; a job of the same name is replaced (options set by hand other than updated_column, window and lookback stay, and trim_keys and cutoff unless the row sets them).';
-- ---- Citus: batches merged on the workers (issue 21) ----
-- Functions the Citus workers call per staged row in a batch's pushed-down
-- statements (src/loader/citus_merge.c); nothing else calls them.  They write
-- nothing.  The casts take the caller's DateStyle, IntervalStyle, TimeZone,
-- extra_float_digits and bytea_output as a constant text[] and pin them,
-- since Citus does not carry session settings to the workers.
CREATE FUNCTION reconcile_citus_input(value "any", "like" anyelement, typmod pg_catalog.int4,
                                      settings pg_catalog.text[])
RETURNS anyelement
AS 'MODULE_PATHNAME', 'reconcile_citus_input'
LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION reconcile_citus_text(value "any", settings pg_catalog.text[])
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'reconcile_citus_text'
LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION reconcile_citus_hash(is_delete pg_catalog.bool, VARIADIC "any")
RETURNS pg_catalog.bytea
AS 'MODULE_PATHNAME', 'reconcile_citus_hash'
LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION reconcile_citus_staged_hash(value "any")
RETURNS pg_catalog.bytea
AS 'MODULE_PATHNAME', 'reconcile_citus_staged_hash'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION reconcile_citus_object(object_key pg_catalog.text, version_id pg_catalog.text,
                                       object_keys pg_catalog.text[], version_ids pg_catalog.text[])
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME', 'reconcile_citus_object'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION reconcile_citus_limb(h pg_catalog.bytea, i pg_catalog.int4)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'reconcile_citus_limb'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION reconcile_citus_input("any", anyelement, pg_catalog.int4, pg_catalog.text[]) IS
  'Citus workers, in a batch merged there: the value in like''s type through its text form, under the caller''s settings given; NULL when it does not read';
COMMENT ON FUNCTION reconcile_citus_text("any", pg_catalog.text[]) IS
  'Citus workers, in a batch merged there: the value''s text form under the caller''s settings given (a reject''s raw value)';
COMMENT ON FUNCTION reconcile_citus_hash(pg_catalog.bool, "any") IS
  'Citus workers, in a batch merged there: the payload hash of the values given (as a plain batch computes it)';
COMMENT ON FUNCTION reconcile_citus_staged_hash("any") IS
  'Citus workers, in a batch merged there: a staged payload_hash as 32 bytes, NULL when it is no SHA-256 digest';
COMMENT ON FUNCTION reconcile_citus_object(pg_catalog.text, pg_catalog.text, pg_catalog.text[], pg_catalog.text[]) IS
  'Citus workers, in a batch merged there: the index of the manifest entry a staged row belongs to, or NULL';
COMMENT ON FUNCTION reconcile_citus_limb(pg_catalog.bytea, pg_catalog.int4) IS
  'Citus workers, in a batch merged there: a 32-bit limb of a hash, for the receipt''s checksum';
-- ---------------------------------------------------------------------
-- Staging from object storage and server files (issue 22): the
-- foreign-data wrapper reconcile_objects (a validator only, as
-- dblink_fdw) whose servers are S3 buckets or server directories, and
-- listing their object versions.  USAGE on a server is the right to read
-- it; credentials live in user mappings.
-- ---------------------------------------------------------------------
CREATE FUNCTION reconcile.objects_validator(options pg_catalog.text[], catalog pg_catalog.oid)
RETURNS void
AS 'MODULE_PATHNAME', 'reconcile_objects_validator'
LANGUAGE C STRICT;
COMMENT ON FUNCTION reconcile.objects_validator(pg_catalog.text[], pg_catalog.oid) IS
    'validator of the options of wrapper reconcile_objects, its servers and user mappings';

CREATE FOREIGN DATA WRAPPER reconcile_objects VALIDATOR reconcile.objects_validator;
COMMENT ON FOREIGN DATA WRAPPER reconcile_objects IS
    'object stores (S3 API) and server directories that reconcile lists and stages from';

CREATE FUNCTION reconcile_list_objects(
    server pg_catalog.name,
    prefix pg_catalog.text DEFAULT '',
    options pg_catalog.jsonb DEFAULT '{}')
RETURNS TABLE (
    object_key        pg_catalog.text,
    version_id        pg_catalog.text,
    size              pg_catalog.int8,
    etag              pg_catalog.text,
    last_modified     pg_catalog.timestamptz,
    is_latest         pg_catalog.bool,
    is_delete_marker  pg_catalog.bool)
AS 'MODULE_PATHNAME', 'reconcile_list_objects'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION reconcile_list_objects(pg_catalog.name, pg_catalog.text, pg_catalog.jsonb) IS
    'one row per object version of a reconcile_objects server (S3 bucket or server directory); options: start_after, versions, max_keys, max_retries';

-- Staging object versions (issue 22): each object's bytes hashed as they
-- arrive, parsed (CSV through COPY's parser, JSON lines), one staged row
-- per source row; returns the manifest of what was read.
CREATE FUNCTION reconcile_stage_objects(
    staged pg_catalog.regclass,
    server pg_catalog.name,
    objects pg_catalog.jsonb,
    options pg_catalog.jsonb DEFAULT '{}')
RETURNS pg_catalog.jsonb
AS 'MODULE_PATHNAME', 'reconcile_stage_objects'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION reconcile_stage_objects(pg_catalog.regclass, pg_catalog.name, pg_catalog.jsonb, pg_catalog.jsonb) IS
    'stages object versions of a reconcile_objects server and returns their manifest (bytes hashed, rows counted); options: format, compression, header, delimiter, quote, escape, null, encoding, force_null, columns, operation, unknown_columns, max_rejects, max_reject_share, max_retries, target';

-- One call from the listing to the receipt (issue 22), and what each
-- batch read from object storage, per object version: the cutover check
-- "objects actually read" is a query on reconcile.object_reads.  Rows go
-- with their receipt (a dropped target's receipts take them along).
CREATE TABLE reconcile.object_reads (
    batch_id      pg_catalog.text NOT NULL,
    target        pg_catalog.regclass NOT NULL,
    server        pg_catalog.name NOT NULL,
    object_key    pg_catalog.text NOT NULL,
    version_id    pg_catalog.text NOT NULL,
    etag          pg_catalog.text,
    size          pg_catalog.int8 NOT NULL,
    content_hash  pg_catalog.text NOT NULL,
    "rows"        pg_catalog.int8 NOT NULL,
    read_at       pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (target, batch_id, object_key, version_id),
    FOREIGN KEY (target, batch_id) REFERENCES reconcile.receipts ON DELETE CASCADE
);
CREATE INDEX ON reconcile.object_reads (target, object_key, version_id);
COMMENT ON TABLE reconcile.object_reads IS
    'What reconcile_load read per object version of a batch: server, version, ETag, size in bytes, SHA-256 of the bytes, data rows.';
SELECT pg_catalog.pg_extension_config_dump('reconcile.object_reads', '');
REVOKE ALL ON reconcile.object_reads FROM PUBLIC;
GRANT SELECT ON reconcile.object_reads TO PUBLIC;
ALTER TABLE reconcile.object_reads ENABLE ROW LEVEL SECURITY;
CREATE POLICY readable_targets ON reconcile.object_reads FOR SELECT
    USING (pg_catalog.has_table_privilege(target, 'SELECT')
           AND NOT pg_catalog.row_security_active(target::pg_catalog.oid));

CREATE FUNCTION reconcile_load(
    target pg_catalog.regclass,
    server pg_catalog.name,
    prefix pg_catalog.text DEFAULT '',
    options pg_catalog.jsonb DEFAULT '{}')
RETURNS SETOF reconcile.receipt
AS 'MODULE_PATHNAME', 'reconcile_load'
LANGUAGE C CALLED ON NULL INPUT VOLATILE ROWS 1;
COMMENT ON FUNCTION reconcile_load(pg_catalog.regclass, pg_catalog.name, pg_catalog.text, pg_catalog.jsonb) IS
    'Lists a reconcile_objects server after the cursor, stages the new object versions and runs reconcile_batch in one transaction; returns its receipt (none when nothing is new). options: staged, source, start_after, latest_only, the listing options, the staging options and the load options.';

-- ---- Hard deletes that keep their guard: delete_mode 'remove' (issue 23, point 3) ----
-- Under the registration option delete_mode 'remove' a winning DELETE
-- removes the row and keeps (key, version, payload hash) in the target's
-- table of kept removals, reconcile.removed_<oid>, created by
-- reconcile_register, which the merge consults where the target has no
-- row.  removed_table names it (NULL under delete_mode 'tombstone').
ALTER TABLE reconcile.targets ADD COLUMN removed_table pg_catalog.regclass;
COMMENT ON COLUMN reconcile.targets.removed_table IS
    'delete_mode remove: the table keeping the key, version, payload hash and removal time of each row a winning DELETE removed; NULL under delete_mode tombstone.';

CREATE FUNCTION reconcile_purge_tombstones(
    target pg_catalog.regclass,
    before_version pg_catalog.text DEFAULT NULL,
    older_than pg_catalog.interval DEFAULT NULL)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'reconcile_purge_tombstones'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION reconcile_purge_tombstones(pg_catalog.regclass, pg_catalog.text, pg_catalog.interval) IS
    'Forgets kept deletes of a target (its owner only): those below before_version (cast to the version column''s type) and/or removed at least older_than ago; under delete_mode tombstone, the tombstone rows below before_version. Returns how many; a key forgotten takes any version again, a lower one included.';
-- ---- Snapshot batches (issue 23, point 2) ----
-- reconcile_batch(..., options => '{"snapshot": {"version": V, "scope": ...}}')
-- declares a batch a complete extract: the scope's live rows it does not
-- stage become tombstones at V.  The receipt counts them apart from the
-- staged rows (staged_rows still adds up to the eight dispositions); 1.1's
-- receipts, which no snapshot wrote, read 0.  The receipt type gains the
-- same attribute, last, so a 1.1 caller's columns keep their places.
ALTER TABLE reconcile.receipts
    ADD COLUMN deleted_absent pg_catalog.int8 NOT NULL DEFAULT 0;
COMMENT ON COLUMN reconcile.receipts.deleted_absent IS
    'Target rows a snapshot batch made tombstones because the extract did not hold their key (not staged rows: staged_rows does not count them); 0 for other batches and for receipts written before 1.2.';
ALTER TYPE reconcile.receipt ADD ATTRIBUTE deleted_absent pg_catalog.int8;
-- Sparse updates (issue 23: 4, option "partial"): a held sparse row keeps
-- the payload columns it carried and the hash of the target row it was
-- merged over, so that reconcile_resolve writes its merged payload only
-- over that same row (docs/loader.md, "Sparse updates").
ALTER TABLE reconcile.conflicts ADD COLUMN present_columns pg_catalog.text[];
ALTER TABLE reconcile.conflicts ADD COLUMN merged_over pg_catalog.bytea;
COMMENT ON COLUMN reconcile.conflicts.present_columns IS
    'A sparse row of a partial batch: the payload columns it carried (its staged_payload is merged over the target''s row); NULL for a whole row.';
COMMENT ON COLUMN reconcile.conflicts.merged_over IS
    'A sparse row: the payload hash of the target''s row it was merged over, NULL where the target held no row of the key.';
-- ---- diff: recheck before report, min_age, and limits (issue 24: 2, 4) ----

-- The summary says whether a limit (max_differences, max_duration) stopped
-- the diff and at which key, the rechecks done (option "recheck") and the
-- keys left out for min_age: columns at the end, so calls of 1.1 that name
-- their columns read what they read before.  reconcile_diff keeps its
-- columns: every finding it returns survived every recheck done (one count
-- per call, in the summary and in a run's history; NULL-key findings have
-- no key to read again), so 1.1's callers, INSERT ... SELECT * among them,
-- keep working; reconcile.diff_results keeps the count per finding.
COMMENT ON FUNCTION @extschema@.reconcile_diff(pg_catalog.regclass, pg_catalog.regclass,
    pg_catalog.text[], pg_catalog.jsonb) IS
    'Compare source with target by key_columns: one row per finding (missing, extra, mismatch with the differing columns and values, duplicate_key, null_key). Options: compare, ignore, target_key_columns, column_map, trim_keys, updated_column, window, cutoff, tolerance, time_zone, lookback, remote, split_factor, leaf_rows, recheck ({"after": interval, "times": n}: read differing keys again, report those that still differ), min_age (an interval: rows updated since now minus it are not compared), max_differences and max_duration (stop cleanly after that many findings or that long).';

DROP FUNCTION @extschema@.reconcile_diff_summary(pg_catalog.regclass, pg_catalog.regclass,
                                                 pg_catalog.text[], pg_catalog.jsonb);
CREATE FUNCTION @extschema@.reconcile_diff_summary(
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
    OUT column_mismatches pg_catalog.jsonb,
    OUT young_keys pg_catalog.int8,
    OUT stopped_by pg_catalog.text,
    OUT stopped_at_key pg_catalog.jsonb,
    OUT rechecks pg_catalog.int4)
RETURNS record
AS 'MODULE_PATHNAME', 'reconcile_diff_summary'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION @extschema@.reconcile_diff_summary(pg_catalog.regclass, pg_catalog.regclass,
    pg_catalog.text[], pg_catalog.jsonb) IS
    'The diff of reconcile_diff, counted: one row of rows per side, matched, missing, extra, mismatched, duplicate and NULL keys, mismatches per column, keys not compared for min_age, the limit that stopped the diff (max_differences or max_duration, else NULL) and the first key not compared, the rechecks done. Same options as reconcile_diff.';

-- A run's status: complete, stopped by a limit (which, and the first key not
-- compared) or failed; the rechecks done and the recheck settings it ran
-- with (options recheck and min_age as given), the keys left out for min_age.
-- Runs of 1.1 are complete, or failed where they hold an error.
ALTER TABLE reconcile.diff_runs
    ADD COLUMN status pg_catalog.text NOT NULL DEFAULT 'complete'
        CHECK (status OPERATOR(pg_catalog.=) ANY ('{complete,stopped,failed}'::pg_catalog.text[])),
    ADD COLUMN stopped_by pg_catalog.text
        CHECK (stopped_by OPERATOR(pg_catalog.=) ANY ('{max_differences,max_duration}'::pg_catalog.text[])),
    ADD COLUMN stopped_at_key pg_catalog.jsonb,
    ADD COLUMN rechecks pg_catalog.int4,
    ADD COLUMN recheck pg_catalog.jsonb,
    ADD COLUMN young_keys pg_catalog.int8;
UPDATE reconcile.diff_runs SET status = 'failed' WHERE error IS NOT NULL;
COMMENT ON COLUMN reconcile.diff_runs.status IS
    'complete: every key compared; stopped: a limit (stopped_by) ended the run cleanly, its findings are those found up to stopped_at_key; failed: see error.';
COMMENT ON COLUMN reconcile.diff_runs.stopped_by IS 'The option that stopped the run: max_differences or max_duration; NULL when it was not stopped.';
COMMENT ON COLUMN reconcile.diff_runs.stopped_at_key IS 'The first key the stopped run did not compare (keys before it were); NULL when every key was compared.';
COMMENT ON COLUMN reconcile.diff_runs.rechecks IS 'Rechecks done (option recheck): each reported finding differed at every one; NULL without the option.';
COMMENT ON COLUMN reconcile.diff_runs.recheck IS 'The options recheck and min_age the run was made with, as given; NULL without them.';
COMMENT ON COLUMN reconcile.diff_runs.young_keys IS 'Keys not compared because a side''s row was updated within min_age.';

ALTER TABLE reconcile.diff_results ADD COLUMN rechecks pg_catalog.int4;
COMMENT ON COLUMN reconcile.diff_results.rechecks IS 'The rechecks the finding survived (option recheck); NULL without the option.';
COMMENT ON COLUMN reconcile.diff_jobs.options IS 'reconcile_diff options: compare, ignore, target_key_columns, column_map, trim_keys, updated_column, window, cutoff, tolerance, time_zone, lookback, remote, split_factor, leaf_rows, recheck, min_age, max_differences, max_duration.';
-- ---- control totals of a diff (issue 24, point 3) ----
-- Per group of group_by: the row count and the measures asked for (count,
-- sum, min, max of named columns) on both sides, compared with per-measure
-- tolerances; one row per group that differs, and with then_rows the
-- findings of the row diff inside those groups (key not NULL).
CREATE FUNCTION reconcile_diff_totals(
    source pg_catalog.regclass,
    target pg_catalog.regclass,
    group_by pg_catalog.text[],
    measures pg_catalog.jsonb DEFAULT '{}'::pg_catalog.jsonb,
    options pg_catalog.jsonb DEFAULT '{}'::pg_catalog.jsonb)
RETURNS TABLE (
    issue pg_catalog.text,
    "group" pg_catalog.jsonb,
    key pg_catalog.jsonb,
    columns pg_catalog.text[],
    source_values pg_catalog.jsonb,
    target_values pg_catalog.jsonb)
AS 'MODULE_PATHNAME', 'reconcile_diff_totals'
LANGUAGE C CALLED ON NULL INPUT VOLATILE ROWS 100;
COMMENT ON FUNCTION reconcile_diff_totals(pg_catalog.regclass, pg_catalog.regclass,
    pg_catalog.text[], pg_catalog.jsonb, pg_catalog.jsonb) IS
    'Control totals of source and target per group of group_by: row counts and the measures ({"amount": ["sum", "max"]}: count, sum, min, max) of both sides; one row per group that differs (MISSING_GROUP, EXTRA_GROUP, MISMATCH with the differing measures; MATCH with include_matches). A NULL group value is a group of its own. Options: tolerance and relative_tolerance (per measure or column), include_matches, then_rows with key_columns and row_options (the row diff of the differing groups, its findings with key set), and reconcile_diff''s column_map, updated_column, window, lookback, cutoff, time_zone, trim_keys.';
-- ---- From finding to fix: reconcile_repair (issue 24, point 1) ----
-- A diff (the same as reconcile_diff) and then the fix of the target: a
-- registered target through a batch of its own (receipt, cursor, replay),
-- a plain one by guarded INSERT/UPDATE/DELETE; a row changed since the
-- diff is reported, never overwritten.  No state of its own: a repair of a
-- registered target is recorded as its batch (reconcile.receipts, object
-- 'repair:<source>:<run>').
CREATE FUNCTION reconcile_repair(
    source pg_catalog.regclass,
    target pg_catalog.regclass,
    key_columns pg_catalog.text[],
    options pg_catalog.jsonb DEFAULT '{}'::pg_catalog.jsonb)
RETURNS TABLE (
    key pg_catalog.jsonb,
    issue pg_catalog.text,
    action pg_catalog.text,
    outcome pg_catalog.text,
    old_values pg_catalog.jsonb,
    new_values pg_catalog.jsonb,
    batch_id pg_catalog.text)
AS 'MODULE_PATHNAME', 'reconcile_repair'
LANGUAGE C CALLED ON NULL INPUT VOLATILE ROWS 100;
COMMENT ON FUNCTION reconcile_repair(pg_catalog.regclass, pg_catalog.regclass, pg_catalog.text[], pg_catalog.jsonb) IS
    'Diff source and target as reconcile_diff does (same options) and fix the target: a registered target by a batch (receipt, replay), a plain one by INSERT/UPDATE/DELETE guarded by the row the diff saw. Options besides the diff''s: dry_run (true: the plan only), extra (''delete'' or ''keep''), version_column (the source''s version, registered targets), run (the repair''s name). One row per finding: key, issue, action, outcome, old and new values, batch id.';

CREATE FUNCTION reconcile_repair_run(
    job pg_catalog.text,
    options pg_catalog.jsonb DEFAULT '{}'::pg_catalog.jsonb)
RETURNS TABLE (
    key pg_catalog.jsonb,
    issue pg_catalog.text,
    action pg_catalog.text,
    outcome pg_catalog.text,
    old_values pg_catalog.jsonb,
    new_values pg_catalog.jsonb,
    batch_id pg_catalog.text)
AS 'MODULE_PATHNAME', 'reconcile_repair_run'
LANGUAGE C CALLED ON NULL INPUT VOLATILE ROWS 100;
COMMENT ON FUNCTION reconcile_repair_run(pg_catalog.text, pg_catalog.jsonb) IS
    'reconcile_repair of the configured diff job of reconcile.diff_jobs named job: its relations, key and options, with the keys of options over the job''s.';
-- ---- Millions of objects in one manifest (issue 23, point 5) ----
-- A receipt no longer keeps its per-object counts as one jsonb document
-- (PostgreSQL caps one at 256 MB, some 700,000 objects): each object's
-- counts are columns of its row in reconcile.batch_objects, which the
-- batch writes in bulk.  receipts.objects is NULL for a batch committed
-- under 1.2 (in the receipt reconcile_batch returns as well, on commit
-- and on replay); reconcile_receipt_objects() gives the document back in
-- 1.1's form for any receipt.  Rows written by 1.1 keep their document
-- and have NULL counts here.
ALTER TABLE reconcile.receipts ALTER COLUMN objects DROP NOT NULL;
ALTER TABLE reconcile.batch_objects
    ADD COLUMN inserted   pg_catalog.int8,
    ADD COLUMN updated    pg_catalog.int8,
    ADD COLUMN deleted    pg_catalog.int8,
    ADD COLUMN unchanged  pg_catalog.int8,
    ADD COLUMN stale      pg_catalog.int8,
    ADD COLUMN duplicates pg_catalog.int8,
    ADD COLUMN conflicts  pg_catalog.int8,
    ADD COLUMN rejected   pg_catalog.int8;
COMMENT ON COLUMN reconcile.receipts.objects IS
    'Per-object counts of a batch committed by reconcile 1.1; NULL for one committed by 1.2, whose counts are in reconcile.batch_objects (reconcile_receipt_objects gives either as one document).';
COMMENT ON COLUMN reconcile.batch_objects.inserted IS
    'Rows of this object inserted by the batch (likewise updated ... rejected); NULL for an object committed by reconcile 1.1, whose counts are in its receipt''s objects.';

CREATE FUNCTION reconcile_receipt_objects(target pg_catalog.regclass, batch_id pg_catalog.text)
RETURNS pg_catalog.jsonb
LANGUAGE sql STABLE STRICT
BEGIN ATOMIC
    SELECT COALESCE(r.objects,
                    (SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object(
                                'object_key', o.object_key, 'version_id', o.version_id,
                                'rows', o."rows", 'inserted', o.inserted, 'updated', o.updated,
                                'deleted', o.deleted, 'unchanged', o.unchanged, 'stale', o.stale,
                                'duplicates', o.duplicates, 'conflicts', o.conflicts,
                                'rejected', o.rejected)
                            ORDER BY o.object_key COLLATE "C", o.version_id COLLATE "C")
                       FROM reconcile.batch_objects AS o
                      WHERE o.target OPERATOR(pg_catalog.=) r.target
                        AND o.batch_id OPERATOR(pg_catalog.=) r.batch_id))
      FROM reconcile.receipts AS r
     WHERE r.target OPERATOR(pg_catalog.=) reconcile_receipt_objects.target
       AND r.batch_id OPERATOR(pg_catalog.=) reconcile_receipt_objects.batch_id;
END;
COMMENT ON FUNCTION reconcile_receipt_objects(pg_catalog.regclass, pg_catalog.text) IS
    'The per-object counts of a receipt as one jsonb array in object_key, version_id order (receipts.objects of reconcile 1.1), from reconcile.batch_objects for a batch committed by 1.2; NULL if the target has no such receipt.';
-- ---- Ordering by any btree-orderable type (issue 23, point 1) ----
-- A version column may be of any type with a default btree operator class
-- (timestamptz, numeric, pg_lsn, text, a domain, ...), compared with that
-- ordering and the column's collation.  Held conflicts and resolutions keep
-- the version as pinned text (ordering, written_ordering) for every type;
-- version and written_version stay bigint for an integer version column,
-- as 1.1 wrote them, and are NULL for other types.  Rows held by 1.1 keep
-- their bigint version and a NULL ordering, and still resolve.
ALTER TABLE reconcile.conflicts ADD COLUMN ordering pg_catalog.text;
ALTER TABLE reconcile.conflicts ALTER COLUMN version DROP NOT NULL;
COMMENT ON COLUMN reconcile.conflicts.ordering IS
    'The held row''s version as text, written under pinned settings (ISO dates, UTC, shortest exact floats), for any version type (several version columns: a JSON array of their texts); NULL on rows held by 1.1, whose version is the bigint column.';
COMMENT ON COLUMN reconcile.conflicts.version IS
    'The held row''s version for an integer version column; NULL for other version types (see ordering).';
ALTER TABLE reconcile.resolutions ADD COLUMN ordering pg_catalog.text,
    ADD COLUMN written_ordering pg_catalog.text;
ALTER TABLE reconcile.resolutions ALTER COLUMN version DROP NOT NULL,
    ALTER COLUMN written_version DROP NOT NULL;
COMMENT ON COLUMN reconcile.resolutions.ordering IS
    'The version decided, as pinned text, for any version type; NULL on decisions made by 1.1.';
COMMENT ON COLUMN reconcile.resolutions.written_ordering IS
    'written_version as pinned text, for any version type; NULL on decisions made by 1.1.';

-- reconcile_resolve reports the versions as text too: two OUT columns at
-- the end, so that 1.1's columns keep their places.
DROP FUNCTION reconcile_resolve(pg_catalog.regclass, pg_catalog.text, pg_catalog.jsonb, pg_catalog.bytea);
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
    OUT decided_at pg_catalog.timestamptz,
    OUT ordering pg_catalog.text,
    OUT written_ordering pg_catalog.text)
RETURNS record
AS 'MODULE_PATHNAME', 'reconcile_resolve'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION reconcile_resolve(pg_catalog.regclass, pg_catalog.text, pg_catalog.jsonb, pg_catalog.bytea) IS
    'Resolve a key a batch held back in conflict: keep the payload with the given hash (a staged_hash or existing_hash of reconcile.conflicts at the conflicting version); owner only, recorded in reconcile.resolutions. version and written_version are NULL for a version column that is not an integer; ordering and written_ordering are the versions as text for every type.';

-- Several ordering columns compared in order (a binlog file and offset):
-- reconcile.targets.version_columns lists them all, version_column keeps
-- the first for 1.1's readers; NULL for one column.
ALTER TABLE reconcile.targets ADD COLUMN version_columns pg_catalog.text[];
COMMENT ON COLUMN reconcile.targets.version_columns IS
    'The version columns compared in order, when there are several (version_column is the first); NULL for one.';

-- reconcile_register gains version_columns text[] at the end (positional
-- and named calls of 1.1 keep working); version_column, deleted_column and
-- hash_column default to NULL so that a call may name version_columns
-- instead, and the function still refuses a missing deleted or hash column.
DROP FUNCTION reconcile_register(pg_catalog.regclass, pg_catalog.text[], pg_catalog.text,
    pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.text[], pg_catalog.jsonb);
CREATE FUNCTION reconcile_register(
    target pg_catalog.regclass,
    key_columns pg_catalog.text[],
    version_column pg_catalog.text DEFAULT NULL,
    deleted_column pg_catalog.text DEFAULT NULL,
    hash_column pg_catalog.text DEFAULT NULL,
    conflict_policy pg_catalog.text DEFAULT 'quarantine',
    payload_columns pg_catalog.text[] DEFAULT NULL,
    options pg_catalog.jsonb DEFAULT NULL,
    version_columns pg_catalog.text[] DEFAULT NULL)
RETURNS void
AS 'MODULE_PATHNAME', 'reconcile_register'
LANGUAGE C CALLED ON NULL INPUT VOLATILE;
COMMENT ON FUNCTION reconcile_register(pg_catalog.regclass, pg_catalog.text[], pg_catalog.text,
    pg_catalog.text, pg_catalog.text, pg_catalog.text, pg_catalog.text[], pg_catalog.jsonb,
    pg_catalog.text[]) IS
    'Register a table as a reconcile target (the caller must own it). The version column (version_column), or several compared in order (version_columns), may be of any type with a default btree operator class. options (jsonb object, NULL for the defaults): max_rejects (integer >= 0), max_reject_share (number from 0 to 1), unknown_columns (''error'' or ''ignore''); a key set to null takes its default (no limit, ''error'').';

-- ---- A manifest given as a relation (issue 23, point 5: 5,000,000 objects) ----
-- One jsonb holds at most 256 MB, about 1,400,000 manifest entries:
-- reconcile_batch_table takes the manifest as a table or view with one
-- entry per row.  A function of its own, not an overload of
-- reconcile_batch: a quoted literal manifest fits both jsonb and regclass,
-- so an overload would make every existing call with a literal ambiguous.
-- The batch id is that of the same entries given as jsonb, so either form
-- replays the other.  The receipt keeps no copy of such a manifest
-- (manifest is NULL): its entries are the batch's rows of
-- reconcile.batch_objects, and the batch id is their digest.
ALTER TABLE reconcile.receipts ALTER COLUMN manifest DROP NOT NULL;
COMMENT ON COLUMN reconcile.receipts.manifest IS
    'The manifest as given to reconcile_batch; NULL for a batch whose manifest was a relation (reconcile_batch_table): its entries are the batch''s rows of reconcile.batch_objects.';
CREATE FUNCTION reconcile_batch_table(
    target pg_catalog.regclass,
    staged pg_catalog.regclass,
    manifest pg_catalog.regclass,
    source pg_catalog.text DEFAULT NULL,
    "cursor" pg_catalog.text DEFAULT NULL,
    options pg_catalog.jsonb DEFAULT NULL)
RETURNS SETOF reconcile.receipt
AS 'MODULE_PATHNAME', 'reconcile_batch_table'
LANGUAGE C CALLED ON NULL INPUT VOLATILE ROWS 1;
COMMENT ON FUNCTION reconcile_batch_table(pg_catalog.regclass, pg_catalog.regclass, pg_catalog.regclass,
    pg_catalog.text, pg_catalog.text, pg_catalog.jsonb) IS
    'reconcile_batch with the manifest as a table or view (columns object_key, version_id, content_hash: text; rows: an integer), one entry per row, read with the caller''s rights; the batch id is that of the same manifest as jsonb. For manifests beyond one jsonb (up to 5,000,000 objects). source, cursor and options (the load options) as for reconcile_batch.';
