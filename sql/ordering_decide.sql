-- The decision matrix (test/t/decide_matrix.sql) over version columns that
-- are not integers: every case's versions 1..4 become timestamptz instants
-- (base + n hours, each staged row spelled at another UTC offset) or
-- numerics (n/10 with one to three decimals), so that equal versions have
-- different text.  The expected outcomes are the same table's: the rule
-- does not depend on the version type.  Both write paths, and
-- reconcile_resolve on each conflict case.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;
SET TimeZone = 'Pacific/Chatham';

\i test/t/decide_matrix.sql

-- The spellings differ, the values do not.
SELECT decide_version('timestamptz', 2, 1) AS v2_at_01, decide_version('timestamptz', 2, 2) AS v2_at_02,
       decide_version('timestamptz', 2, 1)::timestamptz = decide_version('timestamptz', 2, 2)::timestamptz AS same,
       decide_version('numeric', 2, 1) AS n2a, decide_version('numeric', 2, 2) AS n2b;
-- No case disagrees, on either write path, for either type.
SELECT * FROM decide_run('ts_auto', 'auto', 'timestamptz');
SELECT * FROM decide_run('ts_general', 'general', 'timestamptz');
SELECT * FROM decide_run('num_auto', 'auto', 'numeric');
SELECT * FROM decide_run('num_general', 'general', 'numeric');
SELECT count(*) AS cases FROM decide_cases;
-- The held versions are pinned text in UTC whatever the session's zone.
SELECT DISTINCT ordering FROM reconcile.conflicts WHERE target = 'dt_ts_auto'::regclass ORDER BY 1;

DROP TABLE decide_cases, dt_ts_auto, dt_ts_auto_stage, dt_ts_general, dt_ts_general_stage,
    dt_num_auto, dt_num_auto_stage, dt_num_general, dt_num_general_stage;
DROP FUNCTION decide_load, decide_counts, decide_row, decide_setup, decide_case, decide_run,
    decide_version, decide_vtype;
DROP EXTENSION reconcile;
