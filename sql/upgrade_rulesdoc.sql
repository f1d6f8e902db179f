-- Upgrading 1.0 to 1.1 with rules attached under 1.0: reconcile_check
-- gains its columns (sqlstate, description, columns, reference_context)
-- and option fail_on_breach; attached rules survive and still hold.
CREATE EXTENSION reconcile VERSION '1.0';
SET client_min_messages = warning;

CREATE TABLE pay (id int PRIMARY KEY, amount numeric, v bigint NOT NULL,
                  gone boolean NOT NULL DEFAULT false, h bytea);
INSERT INTO pay VALUES (1, 10, 1, false, NULL), (2, -1, 1, false, NULL);
SELECT reconcile_register('pay', '{id}', 'v', 'gone', 'h');
SELECT reconcile_set_rules('pay', '{"drop": {"not_negative": "amount >= 0"},
  "dataset_checks": [{"name": "few", "description": "Few rows.", "columns": ["id"],
                      "sql": "SELECT 1 FROM {{TABLE}} HAVING count(*) > 100"}]}') AS version;
-- The 1.1 library under the 1.0 declaration: its eight columns, as before.
SELECT * FROM reconcile_check('pay', '{"fail": {"not_negative": "amount >= 0"}}');
-- A view over reconcile_check holds the update back (the function's
-- result columns change by DROP and CREATE); without it the update runs.
CREATE VIEW pay_check AS SELECT rule, status FROM reconcile_check('pay', '{"fail": {"ok": "true"}}');
ALTER EXTENSION reconcile UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'reconcile';
DROP VIEW pay_check;
ALTER EXTENSION reconcile UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'reconcile';

SELECT pg_get_function_result('reconcile_check(regclass, jsonb, jsonb)'::regprocedure) AS result;
SELECT p.oid::regprocedure AS function, obj_description(p.oid, 'pg_proc') LIKE '%fail_on_breach%' AS documents_options
  FROM pg_proc p WHERE p.proname IN ('reconcile_check', 'reconcile_check_report') ORDER BY p.proname;
-- The rules attached under 1.0 are the current version, and run.
SELECT version, rules -> 'dataset_checks' -> 0 ->> 'description' AS description
  FROM reconcile.target_rules WHERE target = 'pay'::regclass;
SELECT rule, status, description, columns, sqlstate
  FROM reconcile_check('pay', (SELECT rules FROM reconcile.target_rules WHERE target = 'pay'::regclass));
CREATE TABLE pay_stage (object_key text, source_row int, operation text, id int, amount numeric, v bigint);
INSERT INTO pay_stage VALUES ('o1', 1, 'UPSERT', 3, 5, 1), ('o1', 2, 'UPSERT', 4, -2, 1);
SELECT status, inserted, rejected FROM reconcile_batch('pay', 'pay_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":2}]');
-- 1.1's documents and options on the upgraded extension.
SELECT reconcile_set_rules('pay', '{"drop": {"not_negative": {"sql": "`amount` >= 0", "reference_context": "No refunds here."}}}') AS version;
SELECT rule, status, reference_context FROM reconcile_check('pay',
    (SELECT rules FROM reconcile.target_rules WHERE target = 'pay'::regclass ORDER BY version DESC LIMIT 1));
SELECT reconcile_check_report('pay', '{"fail": {"not_negative": "`amount` >= 0"}}', '{"fail_on_breach": true}');

DROP TABLE pay, pay_stage;
DROP EXTENSION reconcile;
