-- pgTAP: reconcile_diff, its summary and configured runs.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION reconcile;
SET LOCAL client_min_messages = warning;
SELECT plan(46);

-- The interface.
SELECT has_function('reconcile_diff', ARRAY['regclass', 'regclass', 'text[]', 'jsonb']);
SELECT has_function('reconcile_diff_summary', ARRAY['regclass', 'regclass', 'text[]', 'jsonb']);
SELECT has_function('reconcile_diff_run', ARRAY['text', 'boolean']);
SELECT has_table('reconcile', 'diff_jobs', 'jobs table');
SELECT has_table('reconcile', 'diff_runs', 'runs table');
SELECT has_table('reconcile', 'diff_results', 'results table');
SELECT col_is_pk('reconcile', 'diff_jobs', 'name', 'jobs are keyed by name');
SELECT ok(NOT has_table_privilege('public', 'reconcile.diff_results', 'INSERT'),
          'PUBLIC may not write results');

-- A composite key of mixed types, target columns in another order.
CREATE TABLE s (t text, i integer, d date, u uuid, n numeric, amount numeric, status text);
CREATE TABLE g (status text, amount numeric, n numeric, u uuid, d date, i integer, t text);
INSERT INTO s VALUES
    ('a', 1, '2026-11-01', '00000000-0000-0000-0000-000000000001', 1.0, 10, 'paid'),
    ('a', 2, '2026-11-01', '00000000-0000-0000-0000-000000000001', 1, 20, NULL),
    ('b', 3, '2026-11-02', '00000000-0000-0000-0000-000000000002', 2, 30, 'open'),
    ('b', 4, '2026-11-02', '00000000-0000-0000-0000-000000000002', 2, 40, 'open'),
    ('b', 4, '2026-11-02', '00000000-0000-0000-0000-000000000002', 2, 41, 'open'),
    ('c', NULL, '2026-11-03', '00000000-0000-0000-0000-000000000003', 3, 50, 'open');
INSERT INTO g (t, i, d, u, n, amount, status) VALUES
    ('a', 1, '2026-11-01', '00000000-0000-0000-0000-000000000001', 1.00, 10, 'paid'),
    ('a', 2, '2026-11-01', '00000000-0000-0000-0000-000000000001', 1, 20, 'paid'),
    ('b', 4, '2026-11-02', '00000000-0000-0000-0000-000000000002', 2, 40, 'open'),
    ('d', 5, '2026-11-04', '00000000-0000-0000-0000-000000000004', 4, 60, 'open'),
    ('d', 6, '2026-11-04', '00000000-0000-0000-0000-000000000004', 4, 70, 'open'),
    ('d', 6, '2026-11-04', '00000000-0000-0000-0000-000000000004', 4, 70, 'open'),
    (NULL, 7, '2026-11-04', '00000000-0000-0000-0000-000000000004', 4, 80, 'open');

SELECT results_eq(
    $$SELECT issue, key->>'i', columns FROM reconcile_diff('s', 'g', '{t,i,d,u,n}') ORDER BY issue, key->>'i'$$,
    $$VALUES ('DUPLICATE_KEY_IN_SOURCE', '4', NULL::text[]),
             ('DUPLICATE_KEY_IN_TARGET', '6', NULL),
             ('EXTRA_IN_TARGET', '5', NULL),
             ('MISMATCH', '2', '{status}'),
             ('MISSING_IN_TARGET', '3', NULL),
             ('NULL_KEY_IN_SOURCE', NULL, NULL),
             ('NULL_KEY_IN_TARGET', '7', NULL)$$,
    'every kind of finding, NULL-safe, never pairing a duplicate key');
SELECT is((SELECT source_values FROM reconcile_diff('s', 'g', '{t,i,d,u,n}') WHERE issue = 'MISMATCH'),
          '{"status": null}'::jsonb, 'a NULL differs from a value');
SELECT is((SELECT key FROM reconcile_diff('s', 'g', '{t,i,d,u,n}') WHERE issue = 'MISSING_IN_TARGET'),
          '{"t": "b", "i": 3, "d": "2026-11-02", "u": "00000000-0000-0000-0000-000000000002", "n": 2}'::jsonb,
          'the key is an object of the source key columns');
SELECT is((SELECT jsonb_array_length(target_values) FROM reconcile_diff('s', 'g', '{t,i,d,u,n}')
           WHERE issue = 'DUPLICATE_KEY_IN_TARGET'), 2, 'a duplicate key lists its rows');
SELECT results_eq(
    $$SELECT rows_source, rows_target, matched, missing_in_target, extra_in_target, mismatched,
             duplicate_keys, null_keys, column_mismatches
      FROM reconcile_diff_summary('s', 'g', '{t,i,d,u,n}')$$,
    $$VALUES (6::bigint, 7::bigint, 1::bigint, 1::bigint, 1::bigint, 1::bigint, 2::bigint, 2::bigint,
              '{"amount": 0, "status": 1}'::jsonb)$$,
    'the summary counts');
SELECT is_empty($$SELECT * FROM reconcile_diff('g', 'g', '{status}', '{"compare": []}') WHERE issue NOT LIKE 'DUPLICATE%'$$,
                'only duplicates when a table meets itself on a non-unique key');

-- No differences, empty sides.
CREATE TABLE e1 (id integer, v text);
CREATE TABLE e2 (v text, id integer);
SELECT is_empty($$SELECT * FROM reconcile_diff('e1', 'e2', '{id}')$$, 'two empty tables');
INSERT INTO e1 VALUES (1, 'x'), (2, NULL);
INSERT INTO e2 VALUES ('x', 1), (NULL, 2);
SELECT is_empty($$SELECT * FROM reconcile_diff('e1', 'e2', '{id}')$$, 'no differences');
TRUNCATE e2;
SELECT is((SELECT count(*) FROM reconcile_diff('e1', 'e2', '{id}') WHERE issue = 'MISSING_IN_TARGET'),
          2::bigint, 'an empty target misses everything');

-- Trimmed keys, renamed columns.
CREATE TABLE c1 (code varchar(8), qty integer);
CREATE TABLE c2 (kode text, menge bigint);
INSERT INTO c1 VALUES (' A ', 1), ('B', 2);
INSERT INTO c2 VALUES ('A', 1), ('B  ', 3);
SELECT is((SELECT count(*) FROM reconcile_diff('c1', 'c2', '{code}',
              '{"target_key_columns": ["kode"], "column_map": {"qty": "menge"}}')), 4::bigint,
          'untrimmed keys do not meet');
SELECT results_eq($$SELECT issue, key, columns FROM reconcile_diff('c1', 'c2', '{code}',
                     '{"trim_keys": true, "target_key_columns": ["kode"], "column_map": {"qty": "menge"}}')$$,
                  $$VALUES ('MISMATCH'::text, '{"code": "B"}'::jsonb, '{qty}'::text[])$$,
                  'trimmed keys meet, and the key shows the trimmed value');

-- Window and cutoff.
CREATE TABLE w1 (id integer PRIMARY KEY, updated timestamptz);
CREATE TABLE w2 (id integer PRIMARY KEY, updated timestamptz);
INSERT INTO w1 VALUES (1, '2026-11-02'), (2, '2026-11-10');
INSERT INTO w2 VALUES (1, '2026-11-02'), (2, '2026-11-10'), (3, '2026-11-11'), (4, '2026-10-01');
SELECT results_eq($$SELECT issue, key->>'id' FROM reconcile_diff('w1', 'w2', '{id}',
                     '{"updated_column": "updated", "window": ["2026-11-01", "2026-11-29"]}')$$,
                  $$VALUES ('EXTRA_IN_TARGET'::text, '3'::text)$$, 'the window leaves row 4 out');
SELECT is_empty($$SELECT * FROM reconcile_diff('w1', 'w2', '{id}',
                   '{"updated_column": "updated", "window": ["2026-11-01", "2026-11-29"], "cutoff": "source_max"}')$$,
                'a target row newer than the newest source row is not EXTRA');

-- Tolerances on both sides of the bound.
CREATE TABLE t1 (id integer, amount numeric, at timestamp);
CREATE TABLE t2 (id integer, amount numeric, at timestamp);
INSERT INTO t1 VALUES (1, 1.000, '2026-11-01 00:00:00'), (2, 1.000, '2026-11-01 00:00:00'),
                      (3, 1.000, '2026-11-01 00:00:00'), (4, 1.000, '2026-11-01 00:00:00');
INSERT INTO t2 VALUES (1, 1.010, '2026-11-01 00:00:01'), (2, 0.990, '2026-10-31 23:59:59'),
                      (3, 1.011, '2026-11-01 00:00:01.1'), (4, 0.989, '2026-10-31 23:59:58.9');
SELECT results_eq($$SELECT key->>'id', columns FROM reconcile_diff('t1', 't2', '{id}',
                     '{"tolerance": {"amount": 0.01, "at": "1 second"}}') ORDER BY 1$$,
                  $$VALUES ('3'::text, '{amount,at}'::text[]), ('4', '{amount,at}')$$,
                  'within the tolerance is equal, beyond it is not');
SELECT is((SELECT count(*) FROM reconcile_diff('t1', 't2', '{id}')), 4::bigint, 'no tolerance, four mismatches');

-- A view and a foreign table as sides.  The loopback connection cannot
-- see this transaction's tables, so the foreign side is a catalog.
CREATE VIEW v1 AS SELECT amount, id FROM t1 WHERE id < 3;
SELECT results_eq($$SELECT issue, key->>'id' FROM reconcile_diff('v1', 't2', '{id}',
                     '{"compare": ["amount"], "tolerance": {"amount": 0.01}}') ORDER BY 2$$,
                  $$VALUES ('EXTRA_IN_TARGET'::text, '3'::text), ('EXTRA_IN_TARGET', '4')$$,
                  'a view as the source');
CREATE EXTENSION postgres_fdw;
DO $$
BEGIN
    EXECUTE format('CREATE SERVER tap_loopback FOREIGN DATA WRAPPER postgres_fdw'
                   ' OPTIONS (dbname %L, port %L, host %L)',
                   current_database(), current_setting('port'),
                   split_part(current_setting('unix_socket_directories'), ',', 1));
END
$$;
CREATE USER MAPPING FOR CURRENT_USER SERVER tap_loopback;
CREATE FOREIGN TABLE f_am (amtype "char", amname name) SERVER tap_loopback
    OPTIONS (schema_name 'pg_catalog', table_name 'pg_am');
CREATE TABLE l_am AS SELECT amname, amtype FROM pg_am WHERE amname <> 'brin';
INSERT INTO l_am VALUES ('nosuch', 'i');
UPDATE l_am SET amtype = 't' WHERE amname = 'hash';
SELECT results_eq($$SELECT issue, key->>'amname' FROM reconcile_diff('f_am', 'l_am', '{amname}') ORDER BY 2$$,
                  $$VALUES ('MISSING_IN_TARGET'::text, 'brin'::text), ('MISMATCH', 'hash'),
                           ('EXTRA_IN_TARGET', 'nosuch')$$,
                  'a foreign table as the source');

-- Errors name what is wrong.
SELECT throws_ok($$SELECT * FROM reconcile_diff('s', 'g', '{nope}')$$, '42703',
                 'key column "nope" does not exist in source "s"', 'unknown key column');
SELECT throws_ok($$SELECT * FROM reconcile_diff('c1', 'c2', '{code}')$$, '42703',
                 'key column "code" does not exist in target "c2"', 'key column missing in the target');
SELECT throws_ok($$SELECT * FROM reconcile_diff('s', 'g', '{t,i,d,u,n}', '{"compare": ["nope"]}')$$, '42703',
                 'compared column "nope" does not exist in source "s"', 'unknown compared column');
SELECT lives_ok($$SELECT * FROM reconcile_diff('e1', 'c1', '{id}', '{"target_key_columns": ["qty"], "column_map": {"v": "code"}, "compare": ["v"]}')$$,
                'text and varchar are compared');
SELECT lives_ok($$SELECT * FROM reconcile_diff('t1', 'w1', '{id}', '{"column_map": {"at": "updated"}, "compare": ["at"]}')$$,
                'timestamp and timestamptz are compared');
SELECT throws_ok($$SELECT * FROM reconcile_diff('e1', 't1', '{id}', '{"column_map": {"v": "at"}, "compare": ["v"]}')$$,
                 '42804', 'compared column "v" has incompatible types: text in source "e1", timestamp without time zone in target "t1"',
                 'incompatible column types');
SELECT throws_ok($$SELECT * FROM reconcile_diff('s', 'g', '{i}', '{"compair": 1}')$$, '22023',
                 'unknown option "compair"', 'unknown option');
SELECT throws_ok($$SELECT * FROM reconcile_diff('s', 'g', '{i}', '{"window": [1, 2]}')$$, '22023',
                 'option "window" needs option "updated_column"', 'window without updated_column');
SELECT throws_ok($$SELECT * FROM reconcile_diff('w1', 'w2', '{id}', '{"updated_column": "updated", "cutoff": "now"}')$$, '22023',
                 'invalid value "now" for option "cutoff"', 'bad cutoff');
SELECT throws_ok($$SELECT * FROM reconcile_diff('s', 'g', '{i}', '{"tolerance": {"status": 1}}')$$, '0A000',
                 'column "status" of type text cannot have a tolerance', 'tolerance on text');
SELECT throws_ok($$SELECT * FROM reconcile_diff('s', 'g', '{i}', '{"trim_keys": 1}')$$, '22023',
                 'option "trim_keys" must be true or false', 'trim_keys not boolean');
SELECT throws_ok($$SELECT * FROM reconcile_diff('s', 'g', '{}')$$, '22023',
                 'key_columns must name at least one column', 'no key');

-- Privileges: no SELECT on a side, no diff; results only for readers of both.
CREATE ROLE tap_diff_user;
GRANT SELECT ON s TO tap_diff_user;
SET LOCAL ROLE tap_diff_user;
SELECT throws_ok($$SELECT * FROM reconcile_diff('s', 'g', '{t,i,d,u,n}')$$, '42501',
                 'permission denied for target "g"', 'SELECT on the target is needed');
RESET ROLE;

-- Configured runs.
INSERT INTO reconcile.diff_jobs VALUES ('sg', 's', 'g', '{t,i,d,u,n}', NULL),
                                       ('tol', 't1', 't2', '{id}', '{"tolerance": {"amount": 0.01, "at": "1 second"}}'),
                                       ('gone', 'no_such', 't2', '{id}', NULL);
SELECT results_eq($$SELECT job, findings, error IS NOT NULL FROM reconcile_diff_run() ORDER BY job$$,
                  $$VALUES ('gone'::text, NULL::bigint, true), ('sg', 7::bigint, false), ('tol', 2::bigint, false)$$,
                  'all jobs run, a failing one is recorded');
SELECT results_eq($$SELECT r.job, count(*) FROM reconcile.diff_results d JOIN reconcile.diff_runs r USING (run_id)
                    GROUP BY r.job ORDER BY r.job$$,
                  $$VALUES ('sg'::text, 7::bigint), ('tol', 2::bigint)$$, 'findings are recorded per run');
SELECT results_eq($$SELECT job, findings FROM reconcile_diff_run('tol')$$, $$VALUES ('tol'::text, 2::bigint)$$,
                  'one job');
SELECT is((SELECT count(*) FROM reconcile.diff_runs WHERE job = 'tol'), 2::bigint, 'runs stay for history');
SELECT throws_ok($$SELECT * FROM reconcile_diff_run('nope')$$, '42704', 'diff job "nope" does not exist',
                 'unknown job');
SET LOCAL ROLE tap_diff_user;
SELECT is((SELECT count(*) FROM reconcile.diff_results), 0::bigint, 'results hidden without SELECT on both sides');
RESET ROLE;
GRANT SELECT ON g TO tap_diff_user;
SET LOCAL ROLE tap_diff_user;
SELECT is((SELECT count(*) FROM reconcile.diff_results), 7::bigint, 'results visible with SELECT on both sides');
RESET ROLE;

-- A randomized diff agrees with anti joins and an IS DISTINCT FROM join.
SELECT setseed(0.17);
CREATE TABLE r1 AS SELECT (random() * 400)::integer AS k, (random() * 3)::integer AS v FROM generate_series(1, 300);
CREATE TABLE r2 AS SELECT (random() * 400)::integer AS k, (random() * 3)::integer AS v FROM generate_series(1, 300);
DELETE FROM r1 a USING r1 b WHERE a.k = b.k AND a.ctid < b.ctid;
DELETE FROM r2 a USING r2 b WHERE a.k = b.k AND a.ctid < b.ctid;
UPDATE r2 SET v = NULL WHERE k % 17 = 0;
SELECT set_eq(
    $$SELECT issue, (key->>'k')::integer FROM reconcile_diff('r1', 'r2', '{k}')$$,
    $$SELECT 'MISSING_IN_TARGET', k FROM r1 WHERE NOT EXISTS (SELECT FROM r2 WHERE r2.k = r1.k)
      UNION ALL SELECT 'EXTRA_IN_TARGET', k FROM r2 WHERE NOT EXISTS (SELECT FROM r1 WHERE r1.k = r2.k)
      UNION ALL SELECT 'MISMATCH', r1.k FROM r1 JOIN r2 USING (k) WHERE r1.v IS DISTINCT FROM r2.v$$,
    'agrees with the SQL oracle');

SELECT * FROM finish();
ROLLBACK;
