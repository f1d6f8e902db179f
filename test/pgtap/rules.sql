-- pgTAP: data-quality rules (reconcile_check, reconcile_check_report,
-- reconcile_discover_rules, reconcile_set_rules and the batch gate).
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION reconcile;

SELECT plan(76);

-- ---- the SQL surface ----
SELECT has_function('reconcile_check', ARRAY['regclass', 'jsonb', 'jsonb']);
SELECT has_function('reconcile_check_report', ARRAY['regclass', 'jsonb', 'jsonb']);
SELECT has_function('reconcile_discover_rules', ARRAY['regclass', 'jsonb']);
SELECT has_function('reconcile_set_rules', ARRAY['regclass', 'jsonb']);
SELECT has_table('reconcile', 'target_rules', 'rules history table exists');
SELECT has_column('reconcile', 'receipts', 'warnings', 'receipts carry warn counts');
SELECT col_type_is('reconcile', 'receipts', 'warnings', 'jsonb', 'warnings is jsonb');

CREATE TABLE t (id int PRIMARY KEY, amount numeric, fee numeric, kind text, d int);
INSERT INTO t VALUES (1, 10, 1, 'A', 1), (2, -1, 0, 'B', 0), (3, NULL, 2, 'A', 3), (4, 5, 1, 'Z', 4);

-- ---- each severity, NULLs, the gate ----
SELECT results_eq(
  $$SELECT rule, severity, status, invalid_rows, gate_breach
    FROM reconcile_check('t', '{"fail": {"pos": "amount > 0"}, "warn": {"fee_small": "fee < 2"},
                                "drop": {"kind_ok": "kind IN (''A'', ''B'')"}}')$$,
  $$VALUES ('pos', 'fail', 'FAIL', 2::bigint, true), ('fee_small', 'warn', 'FAIL', 1::bigint, false),
           ('kind_ok', 'drop', 'FAIL', 1::bigint, false)$$,
  'fail, warn and drop rules are counted; a NULL result is a violation; only fail breaches');
SELECT is((SELECT invalid_pct FROM reconcile_check('t', '{"fail": {"pos": "amount > 0"}}')), 50.00::numeric,
          'invalid_pct is the share of rows, in percent');
SELECT is((SELECT sample FROM reconcile_check('t', '{"fail": {"pos": "amount > 0"}}', '{"key_columns": ["id"]}')),
          '[{"id": 2}, {"id": 3}]'::jsonb, 'samples identify rows by key_columns');
SELECT is((SELECT jsonb_array_length(sample) FROM reconcile_check('t', '{"fail": {"pos": "amount > 0"}}', '{"sample": 1}')),
          1, 'options.sample bounds the sample');
SELECT is((SELECT sample -> 0 ->> 'kind' FROM reconcile_check('t', '{"fail": {"pos": "amount > 0"}}')),
          'B', 'without key_columns a sample is the whole row');
SELECT is(reconcile_check_report('t', '{"warn": {"pos": "amount > 0"}}') #>> '{summary,gate}', 'pass',
          'warn rules never block the gate');
SELECT is(reconcile_check_report('t', '{"drop": {"pos": "amount > 0"}}') #>> '{summary,gate}', 'pass',
          'drop rules never block the gate');
SELECT is(reconcile_check_report('t', '{"fail": {"pos": "amount > 0"}}') #>> '{summary,gate}', 'blocked',
          'a failing fail rule blocks the gate');
SELECT is(reconcile_check_report('t', '{"fail": {"x": "nope"}}') #>> '{summary,gate}', 'blocked',
          'a fail rule in ERROR blocks the gate');
SELECT is(reconcile_check_report('t', '{"dataset_checks": [{"name": "d", "sql": "SELECT 1 FROM {{TABLE}} WHERE kind = ''Z''"}]}') #>> '{summary,gate}',
          'blocked', 'a failing dataset check blocks the gate');
SELECT is(reconcile_check_report('t', '{"fail": {"ok": "id > 0"}, "warn": {"pos": "amount > 0"}, "drop": {"x": "nope"}}') -> 'summary',
          '{"gate": "pass", "rules": 3, "failed": 1, "passed": 1, "errored": 1}'::jsonb, 'the summary counts');

-- ---- ERROR rules do not stop the others ----
SELECT results_eq(
  $$SELECT rule, status FROM reconcile_check('t', '{"fail": {"a_unknown": "nope > 1", "b_div": "amount / d > 0",
      "c_type": "kind + 1 > 0", "d_fine": "id > 0", "e_agg": "sum(id) > 0"}}')$$,
  $$VALUES ('a_unknown', 'ERROR'), ('b_div', 'ERROR'), ('c_type', 'ERROR'), ('d_fine', 'PASS'), ('e_agg', 'ERROR')$$,
  'unknown columns, run-time and type errors, aggregates are ERROR; the others run');
SELECT is((SELECT detail FROM reconcile_check('t', '{"fail": {"b_div": "amount / d > 0"}}')), 'division by zero',
          'the error message is the detail');

-- ---- dataset checks ----
SELECT is((SELECT invalid_rows FROM reconcile_check('t', '{"dataset_checks": [{"name": "dup", "sql": "SELECT kind FROM {{DATAFRAME}} GROUP BY kind HAVING count(*) > 1"}]}')),
          1::bigint, '{{DATAFRAME}} stands for the relation');
SELECT is((SELECT sample FROM reconcile_check('t', '{"dataset_checks": [{"name": "dup", "sql": "SELECT kind, count(*) AS n FROM {{TABLE}} GROUP BY kind HAVING count(*) > 1;"}]}')),
          '[{"n": 2, "kind": "A"}]'::jsonb, 'a dataset check''s rows are its sample; a final semicolon is fine');

-- ---- malformed documents ----
SELECT throws_ok($$SELECT * FROM reconcile_check('t', '[]')$$, '22023',
                 'invalid rules document: it is an array, not an object', 'an array is refused');
SELECT throws_ok($$SELECT * FROM reconcile_check('t', '"x"')$$, '22023',
                 'invalid rules document: it is a scalar, not an object', 'a scalar is refused');
SELECT throws_ok($$SELECT * FROM reconcile_check('t', '{"error": {}}')$$, '22023',
                 'invalid rules document: unknown top-level key "error"', 'an unknown top-level key is refused');
SELECT throws_ok($$SELECT * FROM reconcile_check('t', '{"fail": {"r": 3}}')$$, '22023',
                 'invalid rules document: rule "r" under "fail" must be a string holding a SQL boolean expression, or an object with "sql", not a number',
                 'a rule that is not a string is refused');
SELECT throws_ok($$SELECT * FROM reconcile_check('t', '{"fail": {"r": "true"}, "drop": {"r": "true"}}')$$, '22023',
                 'invalid rules document: duplicate rule name "r"', 'duplicate names are refused');
SELECT throws_ok($$SELECT * FROM reconcile_check('t', '{"dataset_checks": [{"name": "d"}]}')$$, '22023',
                 'invalid rules document: dataset check "d" has no "sql"', 'a dataset check without sql is refused');
SELECT throws_ok($$SELECT * FROM reconcile_check('t', '{"dataset_checks": [{"name": "d", "sql": "SELECT 1", "when": "now"}]}')$$, '22023',
                 'invalid rules document: unknown key "when" in dataset_checks[0]', 'an unknown key in a dataset check is refused');
SELECT throws_ok($$SELECT * FROM reconcile_check('t', '{"warn": []}')$$, '22023',
                 'invalid rules document: "warn" must be an object mapping rule names to SQL boolean expressions, not an array',
                 'a section that is not an object is refused');

-- ---- refused constructs: reported as ERROR, nothing of them runs ----
SELECT results_eq($$SELECT status, sqlstate, detail FROM reconcile_check('t', '{"fail": {"r": "true); DROP TABLE t; SELECT (true"}}')$$,
                  $$VALUES ('ERROR', '42501', 'rule "r" is refused: it holds more than one statement')$$, 'a second statement in a rule is refused');
SELECT results_eq($$SELECT status, sqlstate, detail FROM reconcile_check('t', '{"fail": {"r": "true) FROM t WHERE (true"}}')$$,
                  $$VALUES ('ERROR', '42501', 'rule "r" is refused: it is not exactly one expression')$$, 'a rule that opens a FROM is refused');
SELECT results_eq($$SELECT status, sqlstate, detail FROM reconcile_check('t', '{"fail": {"r": "EXISTS (WITH x AS (UPDATE t SET d = 0 RETURNING 1) SELECT 1 FROM x)"}}')$$,
                  $$VALUES ('ERROR', '42501', 'rule "r" is refused: a WITH query that is not a SELECT writes data')$$, 'a write inside a rule is refused');
SELECT results_eq($$SELECT status, sqlstate, detail FROM reconcile_check('t', '{"dataset_checks": [{"name": "d", "sql": "SELECT 1; UPDATE t SET d = 0"}]}')$$,
                  $$VALUES ('ERROR', '42501', 'dataset check "d" is refused: it holds more than one statement')$$, 'a second statement in a check is refused');
SELECT results_eq($$SELECT status, sqlstate, detail FROM reconcile_check('t', '{"dataset_checks": [{"name": "d", "sql": "UPDATE t SET d = 0 RETURNING *"}]}')$$,
                  $$VALUES ('ERROR', '42501', 'dataset check "d" is refused: it is an UPDATE, not a SELECT')$$, 'DML as a check is refused');
SELECT results_eq($$SELECT status, sqlstate, detail FROM reconcile_check('t', '{"dataset_checks": [{"name": "d", "sql": "DROP TABLE t"}]}')$$,
                  $$VALUES ('ERROR', '42501', 'dataset check "d" is refused: it is a utility statement, not a SELECT')$$, 'DDL as a check is refused');
SELECT results_eq($$SELECT status, sqlstate, detail FROM reconcile_check('t', '{"dataset_checks": [{"name": "d", "sql": "SELECT * INTO t2 FROM t"}]}')$$,
                  $$VALUES ('ERROR', '42501', 'dataset check "d" is refused: SELECT INTO creates a table')$$, 'SELECT INTO is refused');
SELECT results_eq($$SELECT status, sqlstate, detail FROM reconcile_check('t', '{"dataset_checks": [{"name": "d", "sql": "SELECT * FROM t FOR UPDATE"}]}')$$,
                  $$VALUES ('ERROR', '42501', 'dataset check "d" is refused: a locking clause (FOR UPDATE, FOR SHARE) takes row locks')$$, 'locking clauses are refused');
CREATE FUNCTION tap_writer() RETURNS boolean LANGUAGE sql AS $$ UPDATE public.t SET d = 0 RETURNING true $$;
SELECT is((SELECT detail FROM reconcile_check('t', '{"fail": {"w": "public.tap_writer()"}}')),
          'cannot execute UPDATE in a read-only transaction', 'a function that writes fails: rules run read-only');
SELECT is((SELECT count(*) FROM t WHERE d = 0), 1::bigint, 'and nothing was written');

-- ---- discovery ----
CREATE TABLE tx AS
SELECT 'T-' || lpad(i::text, 5, '0') AS tx_id,
       CASE WHEN i % 2 = 0 THEN 'CREDIT' ELSE 'DEBIT' END AS direction,
       CASE WHEN i % 25 = 0 THEN 'Y' ELSE 'N' END AS sanctioned,
       CASE WHEN i % 25 = 0 OR i % 3 = 0 THEN 'HIGH' ELSE 'LOW' END AS risk,
       (100 + (i * 31) % 977)::numeric AS opening,
       (1 + (i * 17) % 403)::numeric AS amount,
       ((i * 7) % 97)::numeric / 10 AS fee
FROM generate_series(1, 1000) AS i;
ALTER TABLE tx ADD COLUMN closing numeric;
UPDATE tx SET closing = opening + amount - fee;
SELECT reconcile_discover_rules('tx') AS doc \gset
SELECT is(:'doc'::jsonb #>> '{fail,tx_id_not_null}', 'tx_id IS NOT NULL', 'discovers not-null');
SELECT is(:'doc'::jsonb #>> '{dataset_checks,0,name}', 'tx_id_unique', 'discovers the candidate key');
SELECT is(:'doc'::jsonb #>> '{fail,direction_allowed_values}', 'direction IN (''CREDIT'', ''DEBIT'')', 'discovers allowed values');
SELECT is(:'doc'::jsonb #>> '{fail,tx_id_pattern}', 'tx_id ~ ''^[A-Z]-[0-9]{5}$''', 'discovers the pattern');
SELECT is(:'doc'::jsonb #>> '{fail,closing_adds_up}', 'closing = opening + amount - fee', 'discovers the linear balance');
SELECT is(:'doc'::jsonb #>> '{fail,sanctioned_y_implies_risk_high}',
          'sanctioned IS DISTINCT FROM ''Y'' OR risk IS NOT DISTINCT FROM ''HIGH''', 'discovers the implication');
SELECT is((:'doc'::jsonb #> '{evidence,sanctioned_y_implies_risk_high}') - 'description',
          '{"kind": "implication", "share": 1.0000, "rows_checked": 40, "rows_holding": 40}'::jsonb, 'with its evidence');
SELECT is((SELECT count(*) FROM reconcile_check('tx', :'doc') WHERE status <> 'PASS'), 0::bigint,
          'the proposal is a valid document that passes on the data it came from');

-- ---- attached rules and batches ----
CREATE TABLE acct (id text PRIMARY KEY, name text, age int, version bigint NOT NULL,
                   is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea);
SELECT reconcile_register(target => 'acct', key_columns => '{id}', version_column => 'version',
                          deleted_column => 'is_deleted', hash_column => 'payload_hash');
CREATE TABLE acct_stage (object_key text, source_row bigint, operation text, id text, version text, name text, age int);
INSERT INTO acct_stage VALUES ('a', 1, 'UPSERT', 'A1', '1', 'x', 30), ('a', 2, 'UPSERT', 'A2', '1', NULL, 30),
                              ('a', 3, 'UPSERT', 'A3', '1', 'z', 10), ('b', 1, 'UPSERT', 'B1', '1', 'w', -1);
SELECT is(reconcile_set_rules('acct', '{"drop": {"named": "name IS NOT NULL"}, "warn": {"adult": "age >= 18"},
                                        "fail": {"age_known": "age >= 0"}}'), 1, 'rules attach as version 1');
SELECT is((SELECT (inserted, rejected)::text FROM reconcile_batch(target => 'acct', staged => 'acct_stage',
             manifest => '[{"object_key":"a","version_id":"1","content_hash":"sha256:aa","rows":3}]')),
          '(2,1)', 'a drop rule trims the batch');
SELECT is((SELECT warnings FROM reconcile.receipts), '{"adult": 1}'::jsonb, 'a warn rule is counted in the receipt');
SELECT throws_ok($$SELECT * FROM reconcile_batch(target => 'acct', staged => 'acct_stage',
                   manifest => '[{"object_key":"b","version_id":"1","content_hash":"sha256:bb","rows":1}]')$$,
                 '23514', NULL, 'a fail rule blocks the batch');
SELECT is((SELECT count(*) FROM acct), 2::bigint, 'nothing of the blocked batch was applied');
SELECT throws_ok($$SELECT reconcile_set_rules('acct', '{"warn": {"r": "random() < 2"}}')$$, '22023',
                 'rule "r" calls a volatile function', 'attached rules may not call volatile functions');
SELECT throws_ok($$SELECT reconcile_set_rules('acct', '{"fail": {"r": "nope"}}')$$, '42703', NULL,
                 'attached rules must plan against the target');
SELECT is((SELECT max(version) FROM reconcile.target_rules), 1, 'refused documents are not stored');
SELECT is(reconcile_set_rules('acct', NULL), 2, 'NULL detaches, as a new version');
SELECT lives_ok($$SELECT * FROM reconcile_batch(target => 'acct', staged => 'acct_stage',
                   manifest => '[{"object_key":"b","version_id":"1","content_hash":"sha256:bb","rows":1}]')$$,
                'without rules the batch loads');
-- What a rule does besides computing is rolled back.
SELECT is((SELECT status FROM reconcile_check('t', '{"fail": {"s": "set_config(''work_mem'', ''77MB'', false) IS NOT NULL"}}')),
          'PASS', 'a rule may call set_config');
SELECT isnt(current_setting('work_mem'), '77MB', 'but the setting does not outlive the check');

-- ---- rules evaluated together, sharing subexpressions, against a count query each ----
CREATE TABLE gen AS
SELECT i AS id,
       CASE WHEN i % 11 = 0 THEN NULL ELSE (i * 37 % 1000) / 10.0 END AS a,
       CASE WHEN i % 13 = 0 THEN NULL ELSE (i * 7 % 50)::numeric END AS b,
       i % 5 AS d,
       CASE i % 4 WHEN 0 THEN 'X' WHEN 1 THEN 'Y' WHEN 2 THEN NULL ELSE 'Z' END AS k,
       repeat(md5(i::text), 100) AS wide
FROM generate_series(1, 2000) AS i;
CREATE TABLE gen_rules AS
SELECT format('r%s_%s', t, c) AS name,
       CASE t
         WHEN 0 THEN format('a + b > %s', c * 10)
         WHEN 1 THEN format('CASE WHEN d <> 0 THEN a / d < %s ELSE true END', c * 20)
         WHEN 2 THEN format('NOT COALESCE(k = ''X'' AND a + b - d > %s, false)', c * 15)
         WHEN 3 THEN format('k IS DISTINCT FROM ''Y'' OR b < %s', c * 5)
         WHEN 4 THEN format('length(wide) = 3200 AND a + b > %s', c)
         WHEN 5 THEN format('COALESCE(d = 0 OR a / d >= %s, false)', c)
         ELSE format('upper(k) <> ''Z'' OR substr(wide, %s, 1) <> ''a''', c + 1)
       END AS expr
FROM generate_series(0, 6) AS t, generate_series(0, 9) AS c;
CREATE FUNCTION gen_count(expr text) RETURNS bigint LANGUAGE plpgsql AS $f$
DECLARE n bigint;
BEGIN
  EXECUTE format('SELECT count(*) FROM gen WHERE (%s) IS NOT TRUE', expr) INTO n;
  RETURN n;
END $f$;
SELECT is((SELECT count(*) FROM reconcile_check('gen', (SELECT jsonb_build_object('warn', jsonb_object_agg(name, expr)) FROM gen_rules))
           WHERE status <> 'ERROR'), 70::bigint,
          'seventy rules sharing subexpressions, guarded divisions included, all evaluate');
SELECT is((SELECT count(*) FROM reconcile_check('gen', (SELECT jsonb_build_object('warn', jsonb_object_agg(name, expr)) FROM gen_rules)) AS c
           JOIN gen_rules AS g ON g.name = c.rule
           WHERE c.invalid_rows IS DISTINCT FROM gen_count(g.expr)), 0::bigint,
          'every rule counts what its own count query counts');
SELECT cmp_ok((SELECT count(*) FROM reconcile_check('gen', (SELECT jsonb_build_object('warn', jsonb_object_agg(name, expr)) FROM gen_rules))
               WHERE status = 'FAIL'), '>', 30::bigint, 'and the rules do find violations');

-- ---- rules documents as dataframe tools write them ----
SELECT is((SELECT reference_context FROM reconcile_check('t', '{"dataset_checks": [{"name": "d", "sql": "SELECT 1 WHERE false", "reference_context": "from the spec"}]}')),
          'from the spec', 'a dataset check''s reference_context is shown');
SELECT results_eq($$SELECT description, columns, reference_context FROM reconcile_check('t',
                    '{"warn": {"r": {"sql": "amount > 0", "description": "positive", "columns": ["amount"], "reference_context": "ctx"}}}')$$,
                  $$VALUES ('positive', ARRAY['amount'], 'ctx')$$, 'a row rule written as an object keeps its descriptive keys');
SELECT is(reconcile_check_report('t', '{"warn": {"r": {"sql": "true", "reference_context": "ctx", "columns": []}}}') -> 'rules' -> 0
            -> 'reference_context', '"ctx"'::jsonb, 'the report shows reference_context');
SELECT throws_ok($$SELECT * FROM reconcile_check('t', '{"warn": {"r": {"sql": "true", "context": "x"}}}')$$, '22023',
                 'invalid rules document: unknown key "context" in rule "r" under "warn"', 'an unknown key on a rule is refused');
SELECT throws_ok($$SELECT * FROM reconcile_check('t', '{"warn": {"r": {"sql": "true", "columns": [1]}}}')$$, '22023',
                 'invalid rules document: "columns" of rule "r" under "warn" must hold column names as strings, not a number',
                 'columns must be strings');
SELECT is((SELECT invalid_rows FROM reconcile_check('t', '{"fail": {"r": "`amount` > 0"}}')), 2::bigint,
          'a back-quoted name is a column');
SELECT is((SELECT status FROM reconcile_check('t', '{"fail": {"r": "''`amount`'' = ''`'' || ''amount`''"}}')), 'PASS',
          'a back quote inside a string literal stays as written');
SELECT results_eq($$SELECT rule, status, sqlstate FROM reconcile_check('t', '{"fail": {"a": "`amount > 0", "b": "amount >", "c": "id > 0"}}')$$,
                  $$VALUES ('a', 'ERROR', '42601'), ('b', 'ERROR', '42601'), ('c', 'PASS', NULL)$$,
                  'an unterminated back quote and a rule that does not parse are ERROR; the others run');
SELECT throws_ok($$SELECT reconcile_set_rules('acct', '{"fail": {"ok": "true", "bad": "age >"}}')$$, '42601',
                 'rule "bad" does not parse', 'attaching refuses a document with a rule that does not parse');
SELECT throws_ok($$SELECT * FROM reconcile_check('t', '{"fail": {"pos": "amount > 0"}}', '{"fail_on_breach": true}')$$, '23514',
                 'relation public.t breaches 1 of 1 data-quality rules', 'fail_on_breach raises 23514 on a breach');
SELECT throws_ok($$SELECT reconcile_check_report('t', '{"fail": {"x": "nope"}}', '{"fail_on_breach": true}')$$, '23514',
                 'relation public.t breaches 1 of 1 data-quality rules', 'a fail rule in ERROR is a breach');
SELECT lives_ok($$SELECT reconcile_check_report('t', '{"fail": {"ok": "id > 0"}, "warn": {"pos": "amount > 0"}}', '{"fail_on_breach": true}')$$,
                'a warn-only breach does not raise');
SELECT throws_ok($$SELECT * FROM reconcile_check('t', '{}', '{"fail_on_breach": "yes"}')$$, '22023',
                 'option "fail_on_breach" must be a boolean, not a string', 'fail_on_breach is a boolean');

SELECT * FROM finish();
ROLLBACK;
