-- Bounded work for small input: a rule's compilation is linear in its
-- size, interruptible, and bounded in depth with an error that names the
-- rule (issue 19, defect 8).
CREATE EXTENSION reconcile;
SET max_stack_depth = '2MB';    -- the default: the depth bound follows it

CREATE TABLE bounds_t AS SELECT g AS a FROM generate_series(1, 10) AS g;

-- a + a + ... + a: n terms, nested n levels deep
CREATE FUNCTION bounds_chain(n int) RETURNS text LANGUAGE sql
AS $$ SELECT string_agg('a', ' + ') FROM generate_series(1, n) $$;
-- the same n terms in parenthesised groups of 500: about 500 + n/500 levels
CREATE FUNCTION bounds_grouped(n int) RETURNS text LANGUAGE sql
AS $$ SELECT string_agg('(' || bounds_chain(LEAST(500, n - k)) || ')', ' + ')
      FROM generate_series(0, n - 1, 500) AS k $$;

-- 4,000 terms nested 4,000 deep, in two rules that share the whole sum
-- (computed once a row): each is false on exactly the row a = 3 (or 5).
SELECT rule, status, invalid_rows, sqlstate
FROM reconcile_check('bounds_t', jsonb_build_object('fail', jsonb_build_object(
       'sum_not_3', bounds_chain(4000) || ' <> 4000 * 3',
       'sum_not_5', bounds_chain(4000) || ' <> 4000 * 5',
       'sum_is_n_a', bounds_chain(4000) || ' = 4000 * a')))
ORDER BY rule;

-- 20,000 terms, grouped: the same answers.
SELECT rule, status, invalid_rows, sqlstate
FROM reconcile_check('bounds_t', jsonb_build_object('fail', jsonb_build_object(
       'sum_not_3', bounds_grouped(20000) || ' <> 20000 * 3',
       'sum_is_n_a', bounds_grouped(20000) || ' = 20000 * a')))
ORDER BY rule;

-- Too deep: 8,000 nested terms (PostgreSQL's stack at 2MB holds about
-- 4,080 of them) is refused before parse analysis, naming the rule, beside
-- the rules that do run; so is a dataset check that deep.
SELECT rule, status, invalid_rows, sqlstate, detail
FROM reconcile_check('bounds_t', jsonb_build_object(
       'fail', jsonb_build_object('deep', bounds_chain(8000) || ' > 0', 'fine', 'a > 0'),
       'dataset_checks', jsonb_build_array(jsonb_build_object(
           'name', 'deep_check', 'sql', 'SELECT a FROM {{TABLE}} WHERE ' || bounds_chain(8000) || ' < 0'))))
ORDER BY rule;
\set VERBOSITY default
SELECT * FROM reconcile_check('bounds_t', jsonb_build_object('fail', jsonb_build_object('deep', bounds_chain(8000) || ' > 0')),
                              '{"fail_on_breach": true}');
-- Nesting of any kind counts (parentheses alone add no level).
SELECT rule, status, sqlstate, detail
FROM reconcile_check('bounds_t', jsonb_build_object('fail', jsonb_build_object(
       'parens', repeat('(', 5000) || 'a' || repeat(')', 5000) || ' > 0',
       'calls', repeat('abs(', 3000) || 'a' || repeat(')', 3000) || ' > 0',
       'nots', repeat('NOT ', 5000) || 'a > 0')))
ORDER BY rule;

-- The bound follows max_stack_depth: at 1MB, 4,000 nested terms are too deep.
SET max_stack_depth = '1MB';
SELECT rule, status, sqlstate, detail
FROM reconcile_check('bounds_t', jsonb_build_object('fail', jsonb_build_object('sum', bounds_chain(4000) || ' > 0')));
SET max_stack_depth = '2MB';

-- Attached rules: the same bound when attaching, and a batch evaluates a
-- 4,000-term rule correctly.
CREATE TABLE bounds_state (id int PRIMARY KEY, a int, version bigint NOT NULL,
                           is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea);
CREATE TABLE bounds_stage (object_key text, source_row bigint, operation text,
                           id int, version text, a int);
SELECT reconcile_register(target => 'bounds_state', key_columns => '{id}',
                          version_column => 'version', deleted_column => 'is_deleted',
                          hash_column => 'payload_hash');
SELECT reconcile_set_rules('bounds_state', jsonb_build_object('warn', jsonb_build_object('deep', bounds_chain(8000) || ' > 0')));
SELECT reconcile_set_rules('bounds_state', jsonb_build_object(
         'warn', jsonb_build_object('sum_not_3', bounds_chain(4000) || ' <> 4000 * 3'),
         'drop', jsonb_build_object('sum_not_5', bounds_chain(4000) || ' <> 4000 * 5'))) AS version;
INSERT INTO bounds_stage SELECT 'o1', g, 'UPSERT', g, '1', g FROM generate_series(1, 10) AS g;
SELECT status, inserted, rejected
FROM reconcile_batch(target => 'bounds_state', staged => 'bounds_stage',
                     manifest => '[{"object_key":"o1","version_id":"a","content_hash":"sha256:01","rows":10}]');
SELECT warnings FROM reconcile.receipts;
SELECT array_agg(a ORDER BY a) AS loaded FROM bounds_state;

-- A compilation that takes long is cancelled by statement_timeout: 40 rules
-- of 16,000 terms each (several seconds of parse analysis and compilation).
SELECT jsonb_build_object('fail', jsonb_object_agg('r' || i, bounds_grouped(16000) || ' <> ' || i)) AS huge
FROM generate_series(1, 40) AS i \gset
SET statement_timeout = '100ms';
SELECT count(*) FROM reconcile_check('bounds_t', :'huge');
RESET statement_timeout;

-- Discovery verifies at most 256 candidates over the whole relation: twelve
-- numeric columns that differ by 1e-12 look equal pair by pair on the
-- sample, compared as doubles, and few of those relations hold exactly:
-- unbounded, 1,276 counting queries (each a scan of the relation) ran.
CREATE TABLE bounds_near AS
SELECT g::numeric AS c0, g + 1e-12 AS c1, g + 2e-12 AS c2, g + 3e-12 AS c3, g + 4e-12 AS c4,
       g + 5e-12 AS c5, g + 6e-12 AS c6, g + 7e-12 AS c7, g + 8e-12 AS c8, g + 9e-12 AS c9,
       g + 10e-12 AS c10, g + 11e-12 AS c11
FROM generate_series(1, 50) AS g;
SELECT count(*) FILTER (WHERE key LIKE '%adds_up%') AS linear_rules, count(*) AS fail_rules
FROM jsonb_object_keys(reconcile_discover_rules('bounds_near') -> 'fail') AS key;
DROP TABLE bounds_near;

DROP TABLE bounds_t, bounds_state, bounds_stage;
DROP FUNCTION bounds_chain(int), bounds_grouped(int);
DROP EXTENSION reconcile;
