-- The update from 1.1 for control totals and normalised values (issue 24,
-- points 3 and 5): a diff job and its run made at 1.1 survive ALTER
-- EXTENSION reconcile UPDATE; the library's normalisation options work on
-- a database still at schema 1.1 (they are options of reconcile_diff, no
-- schema), and in a configured job after the update; reconcile_diff_totals
-- exists only after it.
CREATE EXTENSION reconcile VERSION '1.1';
SET client_min_messages = warning;

CREATE TABLE up_src (id int PRIMARY KEY, day date, name text, amount numeric);
CREATE TABLE up_tgt (id int PRIMARY KEY, day date, name text, amount numeric);
INSERT INTO up_src VALUES (1, '2026-11-30', 'Ana', 10), (2, '2026-11-30', 'Bo', 20.00),
                          (3, '2026-12-01', 'Cy', 30);
INSERT INTO up_tgt VALUES (1, '2026-11-30', ' ana', 10), (2, '2026-11-30', 'Bo', 20.01),
                          (4, '2026-12-01', 'Di', 30);
INSERT INTO reconcile.diff_jobs VALUES ('up', 'public.up_src', 'public.up_tgt', '{id}', '{"compare": ["name", "amount"]}');
SELECT job, findings, error FROM reconcile_diff_run('up');

-- At schema 1.1: the options already work, the totals do not exist yet.
SELECT extversion FROM pg_extension WHERE extname = 'reconcile';
SELECT issue, key, columns FROM reconcile_diff('up_src', 'up_tgt', '{id}',
    '{"compare": ["name", "amount"], "trim": ["name"], "case_insensitive": ["name"],
      "relative_tolerance": {"amount": 0.001}}') ORDER BY key::text COLLATE "C";
SELECT to_regprocedure('reconcile_diff_totals(regclass, regclass, text[], jsonb, jsonb)') IS NULL AS no_totals_yet;

ALTER EXTENSION reconcile UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'reconcile';
-- The 1.1 job and its run survive.
SELECT name, options FROM reconcile.diff_jobs WHERE name = 'up';
SELECT job, findings, error FROM reconcile.diff_runs WHERE job = 'up' ORDER BY run_id;
-- The job gains normalisation options; its next run uses them.
UPDATE reconcile.diff_jobs SET options = options || '{"trim": ["name"], "case_insensitive": ["name"],
    "relative_tolerance": {"amount": 0.001}}' WHERE name = 'up';
SELECT job, findings, error FROM reconcile_diff_run('up');
SELECT issue, key, columns FROM reconcile.diff_results r JOIN reconcile.diff_runs u USING (run_id)
 WHERE u.job = 'up' AND u.run_id = (SELECT max(run_id) FROM reconcile.diff_runs WHERE job = 'up')
 ORDER BY key::text COLLATE "C";
-- And the totals work.
SELECT issue, "group", columns, source_values, target_values
FROM reconcile_diff_totals('up_src', 'up_tgt', '{day}', '{"amount": ["sum"]}');

DROP TABLE up_src, up_tgt;
DROP EXTENSION reconcile;
