-- reconcile 1.1 -> 1.2
\echo Use "ALTER EXTENSION reconcile UPDATE TO '1.2'" to load this file. \quit

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
-- it for every run read (src/diff_run.c).
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
