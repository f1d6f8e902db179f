-- One timed reconcile_batch of the staged rows; warnings would show here.
SET client_min_messages = warning;
\timing on
SELECT status, staged_rows, inserted, rejected
  FROM ci_manifest, reconcile_batch('ci_target', 'ci_stage', manifest);
\timing off
