-- Recheck before report, min_age and the limits of a diff (issue 24: 2, 4):
-- every option's bad values, rows too young to compare on either side,
-- rechecks that keep what still differs, and diffs that stop cleanly.
CREATE EXTENSION reconcile;
SET client_min_messages = notice;

CREATE TABLE rc_src (id bigint PRIMARY KEY, v text, upd timestamptz, n integer);
CREATE TABLE rc_tgt (id bigint PRIMARY KEY, v text, upd timestamptz, n integer);
INSERT INTO rc_src VALUES (1, 'a', now() - interval '1 hour', 1), (2, 'b', now() - interval '1 hour', 2),
                          (3, 'c', now() - interval '1 hour', 3);
INSERT INTO rc_tgt VALUES (1, 'a', now() - interval '1 hour', 1), (2, 'B', now() - interval '1 hour', 2),
                          (4, 'd', now() - interval '1 hour', 4);

-- ---- bad values: 22023, with a hint ----
\set VERBOSITY default
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"recheck": 2}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"recheck": {}}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"recheck": {"times": 2}}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"recheck": {"after": 30}}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"recheck": {"after": "soon"}}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"recheck": {"after": "-1 second"}}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"recheck": {"after": "2 days"}}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"recheck": {"after": "1 second", "times": 0}}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"recheck": {"after": "1 second", "times": 101}}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"recheck": {"after": "1 second", "times": 1.5}}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"recheck": {"after": "1 second", "times": "2"}}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"recheck": {"after": "1 second", "delay": 2}}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"min_age": "5 minutes"}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"min_age": 300, "updated_column": "upd"}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"min_age": "a while", "updated_column": "upd"}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"min_age": "-5 minutes", "updated_column": "upd"}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"min_age": "5 minutes", "updated_column": "n"}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"max_differences": 0}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"max_differences": -1}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"max_differences": 2.5}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"max_differences": "100"}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"max_differences": 1e10}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"max_duration": 60}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"max_duration": "0 seconds"}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"max_duration": "-1 minute"}');
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"max_duration": "forever"}');
-- A configured job with a bad value fails its run with the same error.
INSERT INTO reconcile.diff_job_config (job, source, target, key_columns) VALUES ('rc_bad', 'rc_src', 'rc_tgt', 'id');
UPDATE reconcile.diff_jobs SET options = '{"recheck": {"after": "soon"}}' WHERE name = 'rc_bad';
SELECT job, status, error, sqlstate FROM reconcile_diff_run('rc_bad');
DELETE FROM reconcile.diff_jobs WHERE name = 'rc_bad';

-- ---- min_age: rows updated within it are not compared, on either side ----
CREATE TABLE age_src (id bigint PRIMARY KEY, v text, upd timestamptz);
CREATE TABLE age_tgt (id bigint PRIMARY KEY, v text, upd timestamptz);
INSERT INTO age_src VALUES
    (1, 'old, differs',        now() - interval '1 hour'),   -- reported
    (2, 'young on the source', now() - interval '1 minute'), -- not compared
    (3, 'old, source',         now() - interval '1 hour'),   -- young on the target: not compared
    (4, 'young, missing',      now() - interval '1 minute'), -- not compared
    (5, 'old, missing',        now() - interval '1 hour'),   -- reported
    (6, 'same',                now() - interval '1 hour'),
    (7, 'no update time',      NULL);                        -- a NULL time is old: reported
INSERT INTO age_tgt VALUES
    (1, 'old, DIFFERS',        now() - interval '1 hour'),
    (2, 'old on the target',   now() - interval '1 hour'),
    (3, 'young, target',       now() - interval '1 minute'),
    (6, 'same',                now() - interval '1 hour'),
    (7, 'NO UPDATE TIME',      NULL),
    (8, 'young, extra',        now() - interval '1 minute'), -- not compared
    (9, 'old, extra',          now() - interval '1 hour');   -- reported
SELECT issue, key, columns FROM reconcile_diff('age_src', 'age_tgt', '{id}',
    '{"updated_column": "upd", "min_age": "5 minutes", "compare": ["v"]}') ORDER BY key->>'id';
SELECT matched, missing_in_target, extra_in_target, mismatched, young_keys, stopped_by, rechecks
  FROM reconcile_diff_summary('age_src', 'age_tgt', '{id}',
    '{"updated_column": "upd", "min_age": "5 minutes", "compare": ["v"]}');
-- Without min_age the young rows are compared (and differ).
SELECT count(*) FROM reconcile_diff('age_src', 'age_tgt', '{id}', '{"compare": ["v"]}');
-- A min_age of zero leaves out only rows dated after now (the transaction's start).
SELECT young_keys FROM reconcile_diff_summary('age_src', 'age_tgt', '{id}',
    '{"updated_column": "upd", "min_age": "0 seconds", "compare": ["v"]}');
-- On a date column, in the diff's time zone: dates after today minus min_age are young.
CREATE TABLE age_d_src (id int PRIMARY KEY, v text, d date);
CREATE TABLE age_d_tgt (id int PRIMARY KEY, v text, d date);
INSERT INTO age_d_src VALUES (1, 'x', current_date - 10), (2, 'y', current_date);
INSERT INTO age_d_tgt VALUES (1, 'X', current_date - 10), (2, 'Y', current_date);
SELECT issue, key FROM reconcile_diff('age_d_src', 'age_d_tgt', '{id}',
    '{"updated_column": "d", "min_age": "2 days", "time_zone": "UTC", "compare": ["v"]}');

-- ---- recheck, one session: what still differs is reported ----
-- (a row fixed between the reads: test/isolation/specs/diff_recheck.spec)
SELECT issue, key, columns FROM reconcile_diff('rc_src', 'rc_tgt', '{id}',
    '{"recheck": {"after": "10 milliseconds", "times": 2}, "compare": ["v"]}') ORDER BY key->>'id';
SELECT matched, missing_in_target, extra_in_target, mismatched, column_mismatches, rechecks
  FROM reconcile_diff_summary('rc_src', 'rc_tgt', '{id}',
    '{"recheck": {"after": "10 milliseconds", "times": 2}, "compare": ["v"]}');
-- times defaults to 1.
SELECT rechecks FROM reconcile_diff_summary('rc_src', 'rc_tgt', '{id}', '{"recheck": {"after": "0 seconds"}}');
-- A key of two columns: the reread asks for the first column's values, so
-- rows that share it and did not differ are read again too; they are not
-- reported, nor is a difference that appeared only under the shared value.
CREATE TABLE rc2_src (a int, b int, v text);
CREATE TABLE rc2_tgt (a int, b int, v text, PRIMARY KEY (a, b));
INSERT INTO rc2_src SELECT a, b, 'v' FROM generate_series(1, 3) a, generate_series(1, 3) b;
INSERT INTO rc2_tgt SELECT a, b, CASE WHEN (a, b) = (2, 2) THEN 'changed' ELSE 'v' END
  FROM generate_series(1, 3) a, generate_series(1, 3) b;
INSERT INTO rc2_src VALUES (NULL, 1, 'null key');
SELECT issue, key, columns FROM reconcile_diff('rc2_src', 'rc2_tgt', '{a,b}',
    '{"recheck": {"after": "0 seconds", "times": 3}}') ORDER BY issue, key::text;
-- Duplicates are rechecked like any key.
INSERT INTO rc2_tgt VALUES (4, 1, 'x');
CREATE TABLE rc2_dup (a int, b int, v text);
INSERT INTO rc2_dup SELECT * FROM rc2_tgt;
INSERT INTO rc2_dup VALUES (3, 3, 'again');
SELECT issue, key FROM reconcile_diff('rc2_src', 'rc2_dup', '{a,b}',
    '{"recheck": {"after": "0 seconds"}}') ORDER BY issue, key::text;
-- Under REPEATABLE READ a reread would see the first read's snapshot: refused.
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT * FROM reconcile_diff('rc_src', 'rc_tgt', '{id}', '{"recheck": {"after": "0 seconds"}}');
ROLLBACK;
-- A deadline that a wait would pass ends the rechecks: the findings are
-- reported with the rechecks they survived, and the summary says so.
SELECT missing_in_target, extra_in_target, mismatched, stopped_by, stopped_at_key, rechecks
  FROM reconcile_diff_summary('rc_src', 'rc_tgt', '{id}',
    '{"recheck": {"after": "1 hour"}, "max_duration": "1 minute", "compare": ["v"]}');
SELECT count(*) FROM reconcile_diff('rc_src', 'rc_tgt', '{id}',
    '{"recheck": {"after": "1 hour"}, "max_duration": "1 minute", "compare": ["v"]}');

-- ---- limits: a wholly different pair, 10,000 findings capped at 100 ----
CREATE TABLE lim_src (id bigint PRIMARY KEY, v text);
CREATE TABLE lim_tgt (id bigint PRIMARY KEY, v text);
INSERT INTO lim_src SELECT i, 's' || i FROM generate_series(1, 5000) i;
INSERT INTO lim_tgt SELECT i, 't' || i FROM generate_series(5001, 10000) i;
SELECT missing_in_target + extra_in_target AS findings FROM reconcile_diff_summary('lim_src', 'lim_tgt', '{id}');
-- reconcile_diff returns 100 findings and says where it stopped.
SELECT count(*), min((key->>'id')::bigint), max((key->>'id')::bigint)
  FROM reconcile_diff('lim_src', 'lim_tgt', '{id}', '{"max_differences": 100}');
-- The summary: it stopped after 100, the first key not compared is 101,
-- and it read 102 + 2 of the 10,000 rows (rows_source, rows_target: each
-- side's next row and the one read ahead): the memory a stopped diff holds
-- is its 100 findings and one fetch of 100 rows per side.
SELECT rows_source, rows_target, missing_in_target, extra_in_target, stopped_by, stopped_at_key
  FROM reconcile_diff_summary('lim_src', 'lim_tgt', '{id}', '{"max_differences": 100}');
-- Mismatches, duplicates and NULL keys count towards the limit alike.
UPDATE lim_tgt SET id = id - 5000;
SELECT count(*), pg_catalog.array_agg(DISTINCT issue) FROM reconcile_diff('lim_src', 'lim_tgt', '{id}', '{"max_differences": 7}');
CREATE TABLE lim_nulls (id bigint, v text);
INSERT INTO lim_nulls SELECT NULL, 'n' || i FROM generate_series(1, 5) i;
SELECT count(*) FROM reconcile_diff('lim_nulls', 'lim_tgt', '{id}', '{"max_differences": 3, "compare": ["v"]}')
 WHERE issue = 'NULL_KEY_IN_SOURCE';
-- rc_src and rc_tgt differ at keys 2, 3 and 4: a limit of 2 stops before
-- key 4; a limit of 3 is reached at the last key, which is no stop.
SELECT stopped_by, stopped_at_key FROM reconcile_diff_summary('rc_src', 'rc_tgt', '{id}', '{"max_differences": 2, "compare": ["v"]}');
SELECT stopped_by, stopped_at_key FROM reconcile_diff_summary('rc_src', 'rc_tgt', '{id}', '{"max_differences": 3, "compare": ["v"]}');
-- max_duration: stopped cleanly, not by an error (the sort of 5,000 rows a
-- side takes longer than a millisecond; the deadline is looked at every 64 keys).
SELECT stopped_by, stopped_at_key IS NOT NULL AS has_key, rows_source < 5000 AS partial
  FROM reconcile_diff_summary('lim_src', 'lim_tgt', '{id}', '{"max_duration": "1 millisecond"}');
SELECT stopped_by FROM reconcile_diff_summary('lim_src', 'lim_tgt', '{id}', '{"max_duration": "1 hour"}');

-- A recheck of more findings than it rereads at a time (10,000 keys), held
-- on disk (work_mem of 64 kB: the sorted findings and each round's spill),
-- with NULL keys beside them: every finding comes back once.
CREATE TABLE lim_far (id bigint, v text);
INSERT INTO lim_far SELECT i, 'f' || i FROM generate_series(5001, 11000) i;
INSERT INTO lim_far VALUES (NULL, 'n1'), (NULL, 'n2');
SET work_mem = '64kB';
SELECT issue, count(*), count(DISTINCT key) FROM reconcile_diff('lim_src', 'lim_far', '{id}',
    '{"recheck": {"after": "0 seconds", "times": 2}}') GROUP BY issue ORDER BY issue;
SELECT missing_in_target, extra_in_target, null_keys, rechecks FROM reconcile_diff_summary('lim_src', 'lim_far', '{id}',
    '{"recheck": {"after": "0 seconds", "times": 2}}');
RESET work_mem;

-- ---- configured jobs: a stopped run, and the recheck in the history ----
INSERT INTO reconcile.diff_job_config (job, source, target, key_columns) VALUES
    ('rc_limit', 'public.lim_src', 'public.lim_tgt', 'id'),
    ('rc_recheck', 'public.rc_src', 'public.rc_tgt', 'id');
UPDATE reconcile.diff_jobs SET options = '{"max_differences": 10}' WHERE name = 'rc_limit';
UPDATE reconcile.diff_jobs SET options = '{"recheck": {"after": "0 seconds", "times": 2}, "compare": ["v"]}'
 WHERE name = 'rc_recheck';
SELECT job, status, stopped_by, stopped_at_key, findings, rechecks, recheck, error
  FROM reconcile_diff_run() WHERE job LIKE 'rc_%' ORDER BY job;
SELECT r.job, d.issue, d.key, d.rechecks FROM reconcile.diff_results d JOIN reconcile.diff_runs r USING (run_id)
 WHERE r.job = 'rc_recheck' ORDER BY d.key::text;
SELECT count(*) FROM reconcile.diff_results d JOIN reconcile.diff_runs r USING (run_id) WHERE r.job = 'rc_limit';
-- A failed run is recorded as failed.
DROP TABLE rc_tgt CASCADE;
SELECT job, status, stopped_by, sqlstate FROM reconcile_diff_run('rc_recheck');
-- docs/diff.md, Limits: the runs that did not complete.
SELECT job, status, stopped_by, stopped_at_key, findings
  FROM reconcile.diff_runs WHERE status <> 'complete' ORDER BY run_id DESC;

-- ---- docs/diff.md, Recheck: its example ----
CREATE TABLE orders (order_id bigint PRIMARY KEY, amount numeric, updated_at timestamptz);
CREATE TABLE orders_replica (order_id bigint PRIMARY KEY, amount numeric, updated_at timestamptz);
INSERT INTO orders VALUES (1, 10, now() - interval '1 day'), (2, 20, now() - interval '1 day'),
                          (3, 30, now() - interval '1 minute'), (4, 40, now() - interval '1 day');
INSERT INTO orders_replica VALUES (1, 10, now() - interval '1 day'), (2, 21, now() - interval '1 day');
SELECT issue, key, columns
  FROM reconcile_diff('orders', 'orders_replica', '{order_id}',
       '{"compare": ["amount"], "recheck": {"after": "2 seconds", "times": 2},
         "updated_column": "updated_at", "min_age": "5 minutes"}');

DROP TABLE age_d_src, age_d_tgt, age_src, age_tgt, lim_far, lim_nulls, lim_src, lim_tgt,
           orders, orders_replica, rc2_dup, rc2_src, rc2_tgt, rc_src;
DROP EXTENSION reconcile CASCADE;
