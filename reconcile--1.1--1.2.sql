-- reconcile 1.1 -> 1.2
\echo Use "ALTER EXTENSION reconcile UPDATE TO '1.2'" to load this file. \quit

-- ---- diff history visible as the sides are; each job's failure recorded ----

-- A run records whether its findings depend on who reads the sides
-- (reader_dependent: a side is a view, or reads a foreign table through the
-- runner's own user mapping) and the SQLSTATE of a failed run.  Runs of 1.1
-- are reader-dependent unless both sides are still tables or materialized
-- views, whose rows are the same for every reader that row-level security
-- does not restrict (checked when read): a view or foreign side of 1.1 does
-- not say whose rows it showed, and a dropped side cannot say what it was.
ALTER TABLE reconcile.diff_runs
    ADD COLUMN reader_dependent pg_catalog.bool NOT NULL DEFAULT true,
    ADD COLUMN sqlstate pg_catalog.text;
UPDATE reconcile.diff_runs r SET reader_dependent = false
 WHERE EXISTS (SELECT FROM pg_catalog.pg_class c
                WHERE c.oid OPERATOR(pg_catalog.=) r.source
                  AND c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p,m}'::pg_catalog."char"[]))
   AND EXISTS (SELECT FROM pg_catalog.pg_class c
                WHERE c.oid OPERATOR(pg_catalog.=) r.target
                  AND c.relkind OPERATOR(pg_catalog.=) ANY ('{r,p,m}'::pg_catalog."char"[]));

-- Whether the current role reads side as every reader without rows of its
-- own does: SELECT on the table, no row-level security restricting it there,
-- and every foreign table of it (itself or a partition) read through its
-- server's PUBLIC user mapping (a role with a mapping of its own may read
-- other rows, and one without any mapping none).  The body is parsed now:
-- nothing in it resolves through the reader's search_path.
CREATE FUNCTION reconcile.diff_side_shared(side pg_catalog.regclass)
RETURNS pg_catalog.bool
LANGUAGE sql STABLE PARALLEL SAFE
RETURN pg_catalog.has_table_privilege(side, 'SELECT')
   AND NOT pg_catalog.row_security_active(side::pg_catalog.oid)
   AND NOT EXISTS (
       SELECT FROM pg_catalog.pg_foreign_table f
        WHERE (f.ftrelid OPERATOR(pg_catalog.=) side::pg_catalog.oid
               OR f.ftrelid OPERATOR(pg_catalog.=) ANY (
                   SELECT t.relid::pg_catalog.oid FROM pg_catalog.pg_partition_tree(side) t))
          AND (NOT EXISTS (SELECT FROM pg_catalog.pg_user_mappings m
                            WHERE m.srvid OPERATOR(pg_catalog.=) f.ftserver
                              AND m.umuser OPERATOR(pg_catalog.=) 0::pg_catalog.oid)
               OR EXISTS (SELECT FROM pg_catalog.pg_user_mappings m
                           WHERE m.srvid OPERATOR(pg_catalog.=) f.ftserver
                             AND m.usename OPERATOR(pg_catalog.=) CURRENT_USER)));

-- Whether the current role may see a run (and its findings): the role that
-- ran it and every member of that role (who may SET ROLE to it and read the
-- sides as it did); and, when the findings do not depend on the reader,
-- every role that reads both sides as shared (diff_side_shared).
CREATE FUNCTION reconcile.diff_run_visible(run_by pg_catalog.name,
                                           reader_dependent pg_catalog.bool,
                                           source pg_catalog.regclass,
                                           target pg_catalog.regclass)
RETURNS pg_catalog.bool
LANGUAGE sql STABLE PARALLEL SAFE
RETURN EXISTS (SELECT FROM pg_catalog.pg_roles o
                WHERE o.rolname OPERATOR(pg_catalog.=) run_by
                  AND pg_catalog.pg_has_role(o.oid, 'MEMBER'))
    OR (NOT reader_dependent
        AND reconcile.diff_side_shared(source)
        AND reconcile.diff_side_shared(target));

ALTER POLICY readable_sides ON reconcile.diff_runs
    USING (reconcile.diff_run_visible(run_by, reader_dependent, source, target));
ALTER POLICY readable_sides ON reconcile.diff_results
    USING (EXISTS (SELECT FROM reconcile.diff_runs r
                    WHERE r.run_id OPERATOR(pg_catalog.=) diff_results.run_id
                      AND reconcile.diff_run_visible(r.run_by, r.reader_dependent,
                                                     diff_results.source,
                                                     diff_results.target)));

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
COMMENT ON FUNCTION reconcile.diff_side_shared(pg_catalog.regclass) IS
    'Policy helper: whether the current role reads the relation as every reader without rows of its own does (SELECT, no row-level security restricting it, foreign tables through the PUBLIC user mapping).';
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
