-- Rules documents as dataframe tools write them: descriptive keys,
-- back-quoted (Spark SQL) identifiers, a rule that does not parse reported
-- as ERROR while the others run, and option fail_on_breach.
CREATE EXTENSION reconcile;

-- ---- the example of docs/rules.md, exactly as written there ----
CREATE TABLE payments (
    payment_id    int PRIMARY KEY,
    "Customer ID" text,
    amount        numeric(12,2),
    fee           numeric(12,2),
    net_amount    numeric(12,2)
);
INSERT INTO payments VALUES
    (1, 'C-100', 100.00, 1.50, 98.50),
    (2, 'C-200',  20.00, 1.50, 18.50),
    (3, NULL,     50.00, 2.50, 47.50),
    (4, 'C-100',  75.00, 2.50, 73.50);

SELECT rule, severity, status, invalid_rows, gate_breach, reference_context
FROM reconcile_check('payments', $rules$
{
  "fail": {
    "customer_id_present": {
      "sql": "`Customer ID` IS NOT NULL",
      "reference_context": "Every payment names the customer it was taken from."
    }
  },
  "warn": {"fee_in_tariff": "`fee` IN (1.50, 2.50)"},
  "dataset_checks": [
    {
      "name": "net_amount_is_amount_less_fee",
      "description": "net_amount = amount - fee",
      "reference_context": "The net amount is the gross amount less the processing fee.",
      "columns": ["amount", "fee", "net_amount"],
      "sql": "SELECT `payment_id`, `net_amount`, `amount` - `fee` AS expected FROM {{DATAFRAME}} WHERE `net_amount` <> `amount` - `fee`"
    }
  ]
}
$rules$);

-- ---- descriptive keys: kept and shown ----
CREATE TABLE accounts (account_id int PRIMARY KEY, owner text, balance numeric, status text);
INSERT INTO accounts VALUES (1, 'ana', 100, 'OPEN'), (2, 'bo', -5, 'OPEN'), (3, NULL, 0, 'CLOSED');

-- On a row rule (the object form) and on a dataset check, every key shown;
-- a row rule written as a plain string has none.
SELECT rule, status, description, columns, reference_context, sqlstate
FROM reconcile_check('accounts', '{
  "fail": {"not_negative": {"sql": "balance >= 0", "description": "No overdrafts.",
                            "columns": ["balance"], "reference_context": "Accounts may not be overdrawn.",
                            "evidence": {"kind": "non_negative"}}},
  "warn": {"named": "owner IS NOT NULL"},
  "dataset_checks": [{"name": "one_open", "sql": "SELECT owner FROM {{TABLE}} WHERE status = ''OPEN'' GROUP BY owner HAVING count(*) > 1",
                      "description": "One open account per owner.", "columns": [],
                      "reference_context": "Policy 7: an owner holds one open account."}]}');
SELECT jsonb_pretty(reconcile_check_report('accounts', '{
  "fail": {"not_negative": {"sql": "balance >= 0", "description": "No overdrafts.",
                            "columns": ["balance"], "reference_context": "Accounts may not be overdrawn."}},
  "dataset_checks": [{"name": "one_open", "sql": "SELECT 1 FROM {{TABLE}} WHERE false",
                      "reference_context": "Policy 7."}]}', '{"key_columns": ["account_id"]}'));

-- Wrong types and unknown keys: the document is refused whole, naming the entry.
SELECT * FROM reconcile_check('accounts', '{"fail": {"r": {"sql": "true", "reference_context": 7}}}');
SELECT * FROM reconcile_check('accounts', '{"fail": {"r": {"sql": "true", "description": ["a"]}}}');
SELECT * FROM reconcile_check('accounts', '{"fail": {"r": {"sql": "true", "columns": "balance"}}}');
SELECT * FROM reconcile_check('accounts', '{"fail": {"r": {"sql": "true", "columns": ["balance", 3]}}}');
SELECT * FROM reconcile_check('accounts', '{"fail": {"r": {"sql": "true", "columns": ["balance", null]}}}');
SELECT * FROM reconcile_check('accounts', '{"fail": {"r": {"sql": "true", "severity": "high"}}}');
SELECT * FROM reconcile_check('accounts', '{"fail": {"r": {"description": "no sql"}}}');
SELECT * FROM reconcile_check('accounts', '{"fail": {"r": {"sql": 1}}}');
SELECT * FROM reconcile_check('accounts', '{"fail": {"r": {"sql": null}}}');
SELECT * FROM reconcile_check('accounts', '{"fail": {"r": 3}}');
SELECT * FROM reconcile_check('accounts', '{"fail": {"r": ["true"]}}');
SELECT * FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": "SELECT 1", "reference_context": {"a": 1}}]}');
SELECT * FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": "SELECT 1", "reference_context": null}]}');
SELECT * FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": "SELECT 1", "columns": [["a"]]}]}');
SELECT * FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "d", "sql": "SELECT 1", "referenceContext": "x"}]}');
SELECT * FROM reconcile_check('accounts', '{"reference_context": "x"}');

-- ---- back-quoted identifiers ----
CREATE TABLE spark ("Customer ID" text, "a`b" int, "say ""hi""" int, "{{TABLE}}" int, plain int);
INSERT INTO spark VALUES ('C-1', 1, 2, 3, 4), (NULL, 5, 6, 7, 8);
-- Converted where they stand as code: a name with a space, a doubled back
-- quote, a double quote, a qualified name, a name next to an operator.
SELECT rule, status, invalid_rows, sqlstate, detail FROM reconcile_check('spark', '{
  "fail": {"space": "`Customer ID` IS NOT NULL",
           "doubled": "`a``b` < 10",
           "dquote": "`say \"hi\"` > 0",
           "qualified": "`spark`.`plain` > 0",
           "touching": "`plain`+`a``b`>0 AND 1=`plain`/`plain`",
           "in_string": "`plain` > 0 AND ''`plain`'' = ''`'' || ''plain`''",
           "in_comment": "`plain` > 0 -- `not a name\n",
           "in_block": "/* `a */ `plain` > 0 /* b` */",
           "in_dquote": "\"a`b\" > 0",
           "in_dollar": "$q$`x$q$ = ''`x'' AND `plain` > 0",
           "in_estring": "E''\\''`x'' = ''''''`x'' AND `plain` > 0",
           "placeholder": "`{{TABLE}}` > 0"},
  "dataset_checks": [{"name": "check", "sql": "SELECT `Customer ID` FROM {{TABLE}} AS `s` WHERE `s`.`a``b` > 1 -- `x"},
                     {"name": "check_string", "sql": "SELECT 1 FROM {{TABLE}} WHERE ''`{{TABLE}}`'' <> ''`'' || `plain`::text AND false"}]}');
-- Refused where the conversion is not unambiguous; each rule is ERROR
-- with a message saying why, and the others run.
SELECT rule, status, sqlstate, detail FROM reconcile_check('spark', '{
  "fail": {"unterminated": "`plain > 0",
           "unterminated_doubled": "`plain`` > 0",
           "empty": "`` IS NULL",
           "unicode_prefix": "U&`plain` > 0",
           "joins_dquote": "`plain`\"x\" > 0",
           "fine": "`plain` > 0"},
  "dataset_checks": [{"name": "unterminated_check", "sql": "SELECT `plain FROM {{TABLE}}"}]}');
-- A back-quoted name holding what would be code stays one name.
SELECT rule, status, sqlstate, detail FROM reconcile_check('spark', '{
  "fail": {"stays_a_name": "`plain\") IS NULL OR (true` IS NULL"},
  "dataset_checks": [{"name": "stays_a_name_too", "sql": "SELECT `x\"; DELETE FROM spark; --` FROM {{TABLE}}"}]}');
SELECT count(*) AS spark_rows FROM spark;

-- ---- a rule that does not parse is ERROR; the other rules still run ----
SELECT rule, severity, status, invalid_rows, gate_breach, sqlstate, detail FROM reconcile_check('accounts', '{
  "fail": {"no_parse": "balance >", "fine": "account_id > 0", "two_exprs": "true), (false"},
  "warn": {"no_parse_warn": "owner IS", "named": "owner IS NOT NULL"},
  "drop": {"no_parse_drop": "(("},
  "dataset_checks": [{"name": "check_no_parse", "sql": "SELEC 1"},
                     {"name": "check_two", "sql": "SELECT 1; SELECT 2"},
                     {"name": "check_delete", "sql": "DELETE FROM {{TABLE}}"},
                     {"name": "check_fine", "sql": "SELECT 1 FROM {{TABLE}} WHERE balance < -100"}]}');
SELECT count(*) AS accounts_rows FROM accounts;
-- Every rule errors: still one report, every rule ERROR, the gate blocked.
SELECT reconcile_check_report('accounts', '{
  "fail": {"a": "balance >"}, "warn": {"b": "nope IS NULL"},
  "dataset_checks": [{"name": "c", "sql": "SELECT FROM WHERE"}]}') -> 'summary' AS summary;
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{
  "fail": {"a": "balance >"}, "warn": {"b": "nope IS NULL"},
  "dataset_checks": [{"name": "c", "sql": "SELECT FROM WHERE"}]}');
-- Only warn and drop rules error: reported, the gate passes.
SELECT reconcile_check_report('accounts', '{"warn": {"a": "balance >"}, "drop": {"b": "x y z"}}') -> 'summary' AS summary;

-- ---- attaching: a document with a rule that does not parse is refused whole ----
CREATE TABLE acct (id int PRIMARY KEY, "Net Amount" numeric, v bigint NOT NULL,
                   gone boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('acct', '{id}', 'v', 'gone', 'h');
SELECT reconcile_set_rules('acct', '{"fail": {"ok": "true", "bad": "id >"}}');
SELECT reconcile_set_rules('acct', '{"fail": {"ok": "true"}, "dataset_checks": [{"name": "bad", "sql": "SELECT `id FROM {{TABLE}}"}]}');
SELECT count(*) AS versions FROM reconcile.target_rules WHERE target = 'acct'::regclass;
-- Descriptive keys and back quotes round-trip through reconcile_set_rules,
-- and attached back-quoted rules hold in batches.
SELECT reconcile_set_rules('acct', '{
  "drop": {"net_not_negative": {"sql": "`Net Amount` >= 0", "reference_context": "Refunds are loaded elsewhere."}},
  "dataset_checks": [{"name": "small_batch", "sql": "SELECT 1 FROM {{TABLE}} HAVING count(*) > 10",
                      "reference_context": "A feed file holds at most ten payments.", "columns": []}]}') AS version;
SELECT rules #>> '{drop,net_not_negative,reference_context}' AS kept,
       rules #>> '{drop,net_not_negative,sql}' AS sql_as_written
FROM reconcile.target_rules WHERE target = 'acct'::regclass ORDER BY version DESC LIMIT 1;
CREATE TABLE acct_stage (object_key text, source_row int, operation text, id int, "Net Amount" numeric, v bigint);
INSERT INTO acct_stage VALUES ('o1', 1, 'UPSERT', 1, 10, 1), ('o1', 2, 'UPSERT', 2, -3, 1);
SELECT status, inserted, rejected FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":2}]');
SELECT reason FROM reconcile.rejects WHERE target = 'acct'::regclass;
-- The attached document, run by hand, shows its descriptive keys.
SELECT rule, status, reference_context, columns FROM reconcile_check('acct',
    (SELECT rules FROM reconcile.target_rules WHERE target = 'acct'::regclass ORDER BY version DESC LIMIT 1));

-- ---- fail_on_breach ----
-- A breach: the check runs in full, then raises 23514 listing the breaching rules.
SELECT * FROM reconcile_check('accounts', '{"fail": {"not_negative": "balance >= 0", "ok": "true"},
  "warn": {"named": "owner IS NOT NULL"},
  "dataset_checks": [{"name": "no_closed", "sql": "SELECT 1 FROM {{TABLE}} WHERE status = ''CLOSED''"}]}',
  '{"fail_on_breach": true}');
SELECT reconcile_check_report('accounts', '{"fail": {"not_negative": "balance >= 0", "broken": "nope > 0"}}',
  '{"fail_on_breach": true, "sample": 1}');
DO $$
BEGIN
  PERFORM reconcile_check_report('accounts', '{"fail": {"not_negative": "balance >= 0"}}', '{"fail_on_breach": true}');
EXCEPTION WHEN OTHERS THEN
  DECLARE state text; msg text; det text;
  BEGIN
    GET STACKED DIAGNOSTICS state = RETURNED_SQLSTATE, msg = MESSAGE_TEXT, det = PG_EXCEPTION_DETAIL;
    RAISE NOTICE 'SQLSTATE %: % / %', state, msg, det;
  END;
END $$;
-- No breach, a warn-only breach, fail_on_breach false: the report, no error.
SELECT rule, status, gate_breach FROM reconcile_check('accounts', '{"fail": {"ok": "true"}}', '{"fail_on_breach": true}');
SELECT reconcile_check_report('accounts', '{"warn": {"not_negative": "balance >= 0", "broken": "nope"}, "drop": {"named": "owner IS NOT NULL"}}',
  '{"fail_on_breach": true}') -> 'summary' AS summary;
SELECT rule, status, gate_breach FROM reconcile_check('accounts', '{"fail": {"not_negative": "balance >= 0"}}', '{"fail_on_breach": false}');
-- Many breaching rules: the detail names the first 20 and counts the rest.
SELECT * FROM reconcile_check('accounts',
  (SELECT jsonb_build_object('fail', jsonb_object_agg(format('r%s', lpad(i::text, 2, '0')), 'balance > ' || i)) FROM generate_series(1, 25) AS i),
  '{"fail_on_breach": true}');
-- Bad option values and keys.
SELECT * FROM reconcile_check('accounts', '{"fail": {"ok": "true"}}', '{"fail_on_breach": "true"}');
SELECT * FROM reconcile_check('accounts', '{"fail": {"ok": "true"}}', '{"fail_on_breach": null}');
SELECT * FROM reconcile_check('accounts', '{"fail": {"ok": "true"}}', '{"fail_on_breach": 1}');
SELECT reconcile_check_report('accounts', '{"fail": {"ok": "true"}}', '{"fail_on_breach": [true]}');
SELECT reconcile_check_report('accounts', '{"fail": {"ok": "true"}}', '{"failOnBreach": true}');
-- The error rolls back the statement that called it: a report being
-- inserted with fail_on_breach is not stored.  Stored first and committed,
-- the report stays, and the job still fails (docs/rules.md).
CREATE TABLE dq_reports (id serial, report jsonb);
INSERT INTO dq_reports (report)
SELECT reconcile_check_report('accounts', '{"fail": {"not_negative": "balance >= 0"}}', '{"fail_on_breach": true}');
SELECT count(*) AS stored FROM dq_reports;
DO $$
DECLARE
  report jsonb := reconcile_check_report('accounts', '{"fail": {"not_negative": "balance >= 0"}}');
BEGIN
  INSERT INTO dq_reports (report) VALUES (report);
  COMMIT;
  IF report #>> '{summary,gate}' = 'blocked' THEN
    RAISE EXCEPTION 'data-quality gate blocked for accounts' USING ERRCODE = 'check_violation';
  END IF;
END $$;
SELECT count(*) AS stored, min(report #>> '{summary,gate}') AS gate FROM dq_reports;

DROP TABLE payments, accounts, spark, acct, acct_stage, dq_reports;
DROP EXTENSION reconcile;
