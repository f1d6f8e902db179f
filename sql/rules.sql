-- Data-quality rules: reconcile_check and reconcile_check_report.
CREATE EXTENSION reconcile;

CREATE TABLE accounts (
    account_id  int PRIMARY KEY,
    owner       text,
    age         int,
    balance     numeric,
    divisor     int,
    status      text
);
INSERT INTO accounts VALUES
    (1, 'ana',   34, 100.00, 1, 'OPEN'),
    (2, 'bo',    17,  20.50, 2, 'OPEN'),
    (3, NULL,    51,  -5.00, 0, 'CLOSED'),
    (4, 'cy',  NULL,   0.00, 4, 'FROZEN'),
    (5, 'dee',   29,   7.25, 5, 'OPEN');

-- Each severity; a NULL result is a violation (row 4: age IS NULL).
SELECT * FROM reconcile_check('accounts', '{
  "fail": {"balance_not_negative": "balance >= 0", "has_id": "account_id IS NOT NULL"},
  "warn": {"adult": "age >= 18"},
  "drop": {"known_status": "status IN (''OPEN'', ''CLOSED'')"}
}', '{"key_columns": ["account_id"]}');

-- Samples: at most options.sample rows, by key columns or as whole rows.
SELECT rule, invalid_rows, sample FROM reconcile_check('accounts',
  '{"warn": {"named": "owner IS NOT NULL", "small": "balance < 10"}}',
  '{"sample": 1, "key_columns": ["account_id", "owner"]}');
SELECT rule, sample FROM reconcile_check('accounts', '{"warn": {"small": "balance < 10"}}', '{"sample": 2}');
SELECT rule, sample FROM reconcile_check('accounts', '{"warn": {"small": "balance < 10"}}', '{"sample": 0}');
-- NULL options are the defaults.
SELECT rule, invalid_rows, sample FROM reconcile_check('accounts', '{"warn": {"adult": "age >= 18"}}', NULL);

-- The gate: warn and drop never breach; a failing fail rule does.
SELECT rule, severity, status, gate_breach FROM reconcile_check('accounts',
  '{"warn": {"adult": "age >= 18"}, "drop": {"positive": "balance > 0"}}');
SELECT reconcile_check_report('accounts', '{"warn": {"adult": "age >= 18"}, "drop": {"positive": "balance > 0"}}');
SELECT jsonb_pretty(reconcile_check_report('accounts', '{"fail": {"positive": "balance > 0"}, "warn": {"ok": "true"}}',
                                           '{"key_columns": ["account_id"], "sample": 1}'));

-- ERROR rules: unknown column, type errors, run-time errors, aggregates.
-- The other rules still run, and a fail rule in ERROR breaches the gate.
SELECT rule, severity, status, invalid_rows, gate_breach, detail FROM reconcile_check('accounts', '{
  "fail": {"no_such_column": "nope > 1",
           "not_boolean": "balance + 1",
           "type_mismatch": "owner > 5",
           "division": "balance / divisor >= 0",
           "aggregate": "count(*) > 0",
           "window": "row_number() OVER () > 0",
           "set_returning": "generate_series(1, 2) > 0",
           "fine": "account_id > 0"},
  "warn": {"division_warn": "100 / divisor > 1", "adult": "age >= 18"}
}');
SELECT reconcile_check_report('accounts', '{"warn": {"bad": "nope"}, "fail": {"ok": "true"}}') -> 'summary';

-- Dataset checks: {{TABLE}} and {{DATAFRAME}} stand for the relation.
SELECT * FROM reconcile_check('accounts', '{"dataset_checks": [
  {"name": "one_open_per_owner", "description": "An owner has one open account.",
   "sql": "SELECT owner, count(*) FROM {{TABLE}} WHERE status = ''OPEN'' GROUP BY owner HAVING count(*) > 1"},
  {"name": "too_many_open", "columns": ["status"],
   "sql": "SELECT status, count(*) AS n FROM {{DATAFRAME}} GROUP BY status HAVING count(*) > 2;"},
  {"name": "broken", "sql": "SELECT nope FROM {{TABLE}}"},
  {"name": "self_join", "sql": "SELECT a.account_id FROM {{TABLE}} a JOIN {{TABLE}} b ON a.account_id = b.account_id + 100"}
]}', '{"sample": 5}');

-- CSV export.
COPY (SELECT rule, severity, status, invalid_rows, invalid_pct, gate_breach
      FROM reconcile_check('accounts', '{"fail": {"positive": "balance > 0"}, "warn": {"adult": "age >= 18"}}'))
  TO STDOUT CSV HEADER;

-- Rules may name columns through the relation's name, and call functions.
SELECT rule, status, invalid_rows FROM reconcile_check('accounts',
  '{"fail": {"qualified": "accounts.balance >= 0", "lower": "lower(status) = status"}}');

-- A column named like its table does not hide the whole row in samples.
CREATE TABLE status (status text, n int);
INSERT INTO status VALUES ('a', 1), ('b', 9);
SELECT rule, invalid_rows, sample FROM reconcile_check('status', '{"fail": {"small": "n < 5", "qualified": "status.status = ''a''"}}');
DROP TABLE status;

-- More rules than a query has columns: scanned in chunks, counted alike.
SELECT status, count(*) AS rules, sum(invalid_rows) AS invalid_rows
FROM reconcile_check('accounts', (SELECT jsonb_build_object('warn', jsonb_object_agg('r' || i, 'account_id > ' || (i % 6)))
                                  FROM generate_series(1, 2500) AS i), '{"sample": 1}')
GROUP BY status ORDER BY status;

-- An empty document and an empty table.
SELECT * FROM reconcile_check('accounts', '{}');
SELECT reconcile_check_report('accounts', '{}');
CREATE TABLE empty_accounts (LIKE accounts);
SELECT rule, status, invalid_rows, invalid_pct FROM reconcile_check('empty_accounts', '{"fail": {"positive": "balance > 0"}}');

-- Views work too.
CREATE VIEW open_accounts AS SELECT * FROM accounts WHERE status = 'OPEN';
SELECT rule, status, invalid_rows, sample FROM reconcile_check('open_accounts', '{"warn": {"adult": "age >= 18"}}', '{"key_columns": ["account_id"]}');

-- Subexpressions the rules share are computed once per row, and only where
-- a rule asks for them: balance / divisor, shared by three rules, is guarded
-- by a CASE in each, so row 3 (divisor 0) raises no error.  Every count
-- matches the rule run on its own and a plain count query.
CREATE FUNCTION count_violations(expr text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE n bigint;
BEGIN
  EXECUTE format('SELECT count(*) FROM accounts WHERE (%s) IS NOT TRUE', expr) INTO n;
  RETURN n;
END $$;
CREATE TABLE shared_rules AS SELECT * FROM jsonb_each_text('{
  "ratio_low":  "CASE WHEN divisor <> 0 THEN balance / divisor >= 10 ELSE true END",
  "ratio_high": "CASE WHEN divisor <> 0 THEN balance / divisor < 50 ELSE true END",
  "ratio_age":  "CASE WHEN divisor = 0 THEN true ELSE balance / divisor + age > 40 END",
  "open_adult": "NOT (status = ''OPEN'' AND age < 18)",
  "open_rich":  "NOT (status = ''OPEN'' AND age < 18) OR balance > 10",
  "shout":      "upper(owner) <> ''BO''",
  "shout_too":  "upper(owner) <> ''BO''",
  "guarded":    "COALESCE(divisor = 0 OR 10 / divisor > 2, false)"}') AS r(name, expr);
SELECT c.rule, c.status, c.invalid_rows, c.sample,
       c.invalid_rows = (SELECT a.invalid_rows FROM reconcile_check('accounts',
                           jsonb_build_object('warn', jsonb_build_object(s.name, s.expr))) AS a) AS same_alone,
       c.invalid_rows = count_violations(s.expr) AS same_as_count
FROM reconcile_check('accounts', (SELECT jsonb_build_object('warn', jsonb_object_agg(name, expr)) FROM shared_rules),
                     '{"key_columns": ["account_id"]}') AS c
JOIN shared_rules AS s ON s.name = c.rule
ORDER BY c.rule;
-- Six are shared: balance / divisor, divisor = 0, divisor <> 0, the whole
-- of "upper(owner) <> 'BO'", and status <> 'OPEN' and age >= 18, which is what
-- the planner makes of NOT (status = 'OPEN' AND age < 18).
SET client_min_messages = debug1;
SELECT count(*) FROM reconcile_check('accounts', (SELECT jsonb_build_object('warn', jsonb_object_agg(name, expr)) FROM shared_rules));
RESET client_min_messages;
-- A shared subexpression that fails at run time fails every rule that
-- evaluates it, and only those.
SELECT rule, status, invalid_rows, detail FROM reconcile_check('accounts', '{
  "warn": {"quotient_positive": "balance / divisor > 0", "quotient_small": "balance / divisor < 100",
           "age_known": "age IS NOT NULL"}}');
-- Rules the scan query evaluates itself (a subquery, a whole-row reference,
-- a system column) mix with the others, with whole-row and key samples.
SELECT rule, status, invalid_rows, sample FROM reconcile_check('accounts', '{
  "warn": {"subquery": "divisor IN (SELECT divisor FROM public.accounts WHERE divisor > 1)",
           "whole_row": "accounts IS NOT NULL",
           "system_column": "ctid IS NOT NULL AND age > 30",
           "plain": "balance > 1"}}', '{"sample": 2}');
SELECT rule, status, invalid_rows, sample FROM reconcile_check('accounts', '{
  "warn": {"subquery": "divisor IN (SELECT divisor FROM public.accounts WHERE divisor > 1)",
           "plain": "balance > 1"}}', '{"key_columns": ["status", "account_id"]}');
-- A dropped column keeps the others in place.
CREATE TABLE dropped_col (a int, gone text, b int);
INSERT INTO dropped_col VALUES (1, 'x', 5), (2, 'y', 3), (3, NULL, NULL);
ALTER TABLE dropped_col DROP COLUMN gone;
SELECT rule, status, invalid_rows, sample FROM reconcile_check('dropped_col', '{
  "warn": {"b_above": "b > a + 1", "b_well_above": "b > a + 2", "whole": "dropped_col IS NOT NULL"}}');
SELECT rule, status, invalid_rows, sample FROM reconcile_check('dropped_col',
  '{"warn": {"b_above": "b > a + 1"}}', '{"key_columns": ["b"]}');
DROP TABLE dropped_col, shared_rules;
DROP FUNCTION count_violations(text);

-- The parser decides, not string matching: a semicolon in a literal, a
-- comment, dollar quoting and subqueries that only read are fine.
SELECT rule, status, invalid_rows FROM reconcile_check('accounts', $doc${"fail": {
  "semicolon_in_literal": "status <> ';'",
  "comment": "balance >= 0 -- not negative\n AND true",
  "dollar_quoted": "owner <> $$x; DELETE FROM accounts$$",
  "subquery": "account_id IN (SELECT account_id FROM public.accounts WHERE divisor IS NOT NULL)",
  "recursive_cte_in_subquery": "EXISTS (WITH RECURSIVE r(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM r WHERE n < 3) SELECT 1 FROM r)"},
  "dataset_checks": [
  {"name": "window_and_cte", "sql": "WITH o AS (SELECT account_id, row_number() OVER (ORDER BY balance DESC) AS rnk FROM {{TABLE}}) SELECT * FROM o WHERE rnk > 4"},
  {"name": "values", "sql": "VALUES (1)"}]}$doc$);

-- ---- malformed documents: each refused, naming the offending entry ----
SELECT * FROM reconcile_check('accounts', '"fail"');
SELECT * FROM reconcile_check('accounts', '[{"fail": {}}]');
SELECT * FROM reconcile_check('accounts', '{"fial": {"x": "true"}}');
SELECT * FROM reconcile_check('accounts', '{"fail": ["true"]}');
SELECT * FROM reconcile_check('accounts', '{"warn": "age > 1"}');
SELECT * FROM reconcile_check('accounts', '{"fail": {"x": 1}}');
SELECT * FROM reconcile_check('accounts', '{"drop": {"x": null}}');
SELECT * FROM reconcile_check('accounts', '{"fail": {"x": {"expr": "true"}}}');
SELECT * FROM reconcile_check('accounts', '{"fail": {"x": true}}');
SELECT * FROM reconcile_check('accounts', '{"fail": {"": "true"}}');
SELECT * FROM reconcile_check('accounts', '{"fail": {"x": "true"}, "warn": {"x": "true"}}');
SELECT * FROM reconcile_check('accounts', '{"fail": {"x": "true"}, "dataset_checks": [{"name": "x", "sql": "SELECT 1"}]}');
SELECT * FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": "SELECT 1"}, {"name": "d", "sql": "SELECT 2"}]}');
SELECT * FROM reconcile_check('accounts', '{"dataset_checks": {"name": "d", "sql": "SELECT 1"}}');
SELECT * FROM reconcile_check('accounts', '{"dataset_checks": ["SELECT 1"]}');
SELECT * FROM reconcile_check('accounts', '{"dataset_checks": [{"sql": "SELECT 1"}]}');
SELECT * FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d"}]}');
SELECT * FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": ["SELECT 1"]}]}');
SELECT * FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": "SELECT 1", "severity": "fail"}]}');
SELECT * FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": "SELECT 1", "columns": "a"}]}');
SELECT * FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": "SELECT 1", "columns": [1]}]}');
SELECT * FROM reconcile_check('accounts', '{"evidence": []}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"fail": {"x": "balance >"}}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"fail": {"x": ""}}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": "SELEC 1"}]}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": " ; "}]}');
-- Bad options and arguments.
SELECT * FROM reconcile_check('accounts', '{}', '[]');
SELECT * FROM reconcile_check('accounts', '{}', '{"samples": 3}');
SELECT * FROM reconcile_check('accounts', '{}', '{"sample": -1}');
SELECT * FROM reconcile_check('accounts', '{}', '{"sample": "3"}');
SELECT * FROM reconcile_check('accounts', '{}', '{"key_columns": "account_id"}');
SELECT * FROM reconcile_check('accounts', '{}', '{"key_columns": ["nope"]}');
SELECT * FROM reconcile_check(NULL, '{}');
SELECT * FROM reconcile_check('accounts', NULL);
SELECT reconcile_check_report('accounts', NULL);
SELECT * FROM reconcile_check('reconcile.receipts_pkey', '{}');

-- ---- refused constructs: a rule is one expression, a check one SELECT ----
-- reconcile_check reports each as ERROR (42501; 42601 for what does not
-- parse) and runs nothing of it.
-- A second statement smuggled through a closing parenthesis or a separator.
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"fail": {"x": "true); DELETE FROM accounts; SELECT (true"}}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"fail": {"x": "true; DROP TABLE accounts"}}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"fail": {"x": "true), (false"}}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"fail": {"x": "true) FROM accounts WHERE (true"}}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"fail": {"x": "true) UNION SELECT (false"}}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"fail": {"x": "true) AS y, (false"}}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"fail": {"x": "true) x --"}}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"fail": {"x": "true /*"}}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"fail": {"x": "true) INTO TEMP t --"}}');
-- A write inside an expression.
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"fail": {"x": "EXISTS (WITH d AS (DELETE FROM accounts RETURNING 1) SELECT 1 FROM d)"}}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"fail": {"x": "EXISTS (SELECT 1 FROM accounts FOR UPDATE)"}}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"fail": {"x": "(SELECT count(*) FROM accounts FOR SHARE) > 0"}}');
-- Dataset checks that are not one plain SELECT.
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": "DELETE FROM {{TABLE}} RETURNING *"}]}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": "INSERT INTO accounts VALUES (9) RETURNING *"}]}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": "UPDATE accounts SET age = 0 RETURNING *"}]}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": "MERGE INTO accounts a USING accounts b ON a.account_id = b.account_id WHEN MATCHED THEN DELETE"}]}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": "SELECT 1; DELETE FROM accounts"}]}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": "SELECT * INTO stolen FROM accounts"}]}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": "WITH d AS (DELETE FROM accounts RETURNING *) SELECT * FROM d"}]}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": "SELECT * FROM accounts FOR UPDATE"}]}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": "SELECT * FROM (SELECT * FROM accounts FOR SHARE) s"}]}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": "CREATE TABLE x (a int)"}]}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": "VACUUM accounts"}]}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": "COPY accounts TO STDOUT"}]}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": "SET work_mem = ''1GB''"}]}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": "TRUNCATE accounts"}]}');
-- Functions that write are stopped at run time: rules run read-only.
-- Rules see search_path pg_catalog, pg_temp: other names are qualified.
CREATE FUNCTION sneaky_delete() RETURNS boolean LANGUAGE plpgsql AS
$$BEGIN DELETE FROM public.accounts; RETURN true; END$$;
CREATE SEQUENCE rules_seq;
SELECT rule, status, detail FROM reconcile_check('accounts', '{
  "fail": {"deletes": "public.sneaky_delete()", "sequence": "nextval(''public.rules_seq'') > 0"},
  "dataset_checks": [{"name": "via_check", "sql": "SELECT 1 WHERE public.sneaky_delete()"}]}');
SELECT count(*) AS accounts_left FROM accounts;
-- Whatever else a rule does is rolled back: settings, temporary tables.
CREATE TEMP TABLE scratch (n int);
CREATE FUNCTION scribble() RETURNS boolean LANGUAGE plpgsql AS
$$BEGIN INSERT INTO scratch VALUES (1); RETURN true; END$$;
SELECT rule, status, invalid_rows FROM reconcile_check('accounts', '{
  "fail": {"path": "set_config(''search_path'', ''nowhere'', false) IS NOT NULL",
           "temp_write": "public.scribble()"},
  "dataset_checks": [{"name": "setting", "sql": "SELECT 1 WHERE set_config(''work_mem'', ''64MB'', false) IS NULL"}]}');
SHOW search_path;
SHOW work_mem;
SELECT count(*) AS scribbles FROM scratch;
DROP FUNCTION scribble();
DROP TABLE scratch;
-- Rules run with the caller's rights.
CREATE ROLE regress_rules_reader;
CREATE TABLE secrets (account_id int, pin text);
INSERT INTO secrets VALUES (1, '1234');
GRANT SELECT ON accounts TO regress_rules_reader;
SET ROLE regress_rules_reader;
SELECT rule, status, detail FROM reconcile_check('accounts', '{
  "fail": {"peek": "EXISTS (SELECT 1 FROM public.secrets s WHERE s.account_id = accounts.account_id)", "ok": "true"},
  "dataset_checks": [{"name": "peek_check", "sql": "SELECT * FROM public.secrets"}]}');
SELECT * FROM reconcile_check('secrets', '{"fail": {"ok": "true"}}');
RESET ROLE;
-- Column privileges: rules over granted columns run, samples by a granted key
-- column too; a rule over a column not granted is ERROR; whole-row samples
-- need every column.
CREATE ROLE regress_rules_columns;
GRANT SELECT (account_id, age) ON accounts TO regress_rules_columns;
SET ROLE regress_rules_columns;
SELECT rule, status, invalid_rows, sample, detail FROM reconcile_check('accounts',
  '{"warn": {"adult": "age >= 18", "adult_plus": "age + 0 >= 18 AND age + 0 < 100", "rich": "balance > 10"}}',
  '{"key_columns": ["account_id"]}');
SELECT rule, status, invalid_rows, detail FROM reconcile_check('accounts', '{"warn": {"adult": "age >= 18"}}');
SELECT rule, status, invalid_rows, detail FROM reconcile_check('accounts', '{"warn": {"adult": "age >= 18"}}', '{"key_columns": ["owner"]}');
SELECT rule, status, invalid_rows, detail FROM reconcile_check('accounts', '{"warn": {"adult": "age >= 18"}}', '{"sample": 0}');
RESET ROLE;
REVOKE ALL ON accounts FROM regress_rules_columns;
DROP ROLE regress_rules_columns;
DROP TABLE secrets;
REVOKE ALL ON accounts FROM regress_rules_reader;
DROP ROLE regress_rules_reader;

DROP VIEW open_accounts;
DROP TABLE accounts, empty_accounts;
DROP FUNCTION sneaky_delete();
DROP SEQUENCE rules_seq;
DROP EXTENSION reconcile;
