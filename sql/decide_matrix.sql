-- The decision matrix: one table of cases for the loader's rule for a key
-- (README: highest version wins; the same version with another hash is a
-- conflict, also against the target's row at any staged version; exact
-- duplicates collapse; the write is monotonic; deletes stay as tombstones),
-- each case's expected outcome written from that rule, driven through the
-- plain batch on both write paths and, where the case holds a conflict,
-- through reconcile_resolve.  The cases and their driver are in
-- test/t/decide_matrix.sql; test/t/051_citus_pushdown.pl drives the same
-- table through the Citus pushed-down merge (it needs its cluster).
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

\i test/t/decide_matrix.sql

SELECT count(*) AS cases, count(keep) AS resolved_cases,
       count(*) FILTER (WHERE target = 'live') AS live, count(*) FILTER (WHERE target = 'tomb') AS tomb
  FROM decide_cases;
-- No case disagrees, on either write path.
SELECT * FROM decide_run('auto', 'auto');
SELECT * FROM decide_run('general', 'general');
-- Both targets end alike.
SELECT count(*) AS rows_differ
  FROM ((SELECT * FROM dt_auto EXCEPT SELECT * FROM dt_general)
        UNION ALL (SELECT * FROM dt_general EXCEPT SELECT * FROM dt_auto)) d;

DROP TABLE decide_cases, dt_auto, dt_auto_stage, dt_general, dt_general_stage;
DROP FUNCTION decide_load, decide_counts, decide_row, decide_setup, decide_case, decide_run,
    decide_version, decide_vtype;
DROP EXTENSION reconcile;
