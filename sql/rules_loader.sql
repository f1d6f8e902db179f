-- Data-quality rules attached to a target: reconcile_set_rules, and
-- reconcile_batch dropping, counting and blocking by them.
CREATE EXTENSION reconcile;

CREATE TABLE customer_state (
    customer_id  text PRIMARY KEY,
    name         text,
    age          int,
    risk         text,
    sanctions    text,
    version      bigint NOT NULL,
    is_deleted   boolean NOT NULL DEFAULT false,
    payload_hash bytea
);
CREATE TABLE customer_stage (
    object_key  text,
    source_row  bigint,
    operation   text,
    customer_id text,
    version     text,
    name        text,
    age         int,
    risk        text,
    sanctions   text
);

-- Rules attach to registered targets only, by their owner.
SELECT reconcile_set_rules('customer_state', '{"fail": {"ok": "true"}}');
SELECT reconcile_register(target => 'customer_state', key_columns => '{customer_id}',
                          version_column => 'version', deleted_column => 'is_deleted',
                          hash_column => 'payload_hash');
CREATE ROLE regress_rules_other;
GRANT SELECT, INSERT, UPDATE ON customer_state TO regress_rules_other;
SET ROLE regress_rules_other;
SELECT reconcile_set_rules('customer_state', '{"fail": {"ok": "true"}}');
RESET ROLE;
SELECT reconcile_set_rules(NULL, '{}');

-- A document is checked in full before it is stored: its shape, each
-- rule's safety, and that each rule plans against the target.
SELECT reconcile_set_rules('customer_state', '{"fail": {"ok": 1}}');
SELECT reconcile_set_rules('customer_state', '{"fail": {"ok": "true); DELETE FROM customer_state; SELECT (true"}}');
SELECT reconcile_set_rules('customer_state', '{"fail": {"typo": "agee >= 18"}}');
SELECT reconcile_set_rules('customer_state', '{"fail": {"not_bool": "age"}}');
SELECT reconcile_set_rules('customer_state', '{"dataset_checks": [{"name": "d", "sql": "SELECT nope FROM {{TABLE}}"}]}');
SELECT reconcile_set_rules('customer_state', '{"dataset_checks": [{"name": "d", "sql": "DELETE FROM {{TABLE}}"}]}');
-- Attached rules run inside batches: no volatile functions.
SELECT reconcile_set_rules('customer_state', '{"warn": {"path": "set_config(''search_path'', ''x'', false) IS NOT NULL"}}');
SELECT reconcile_set_rules('customer_state', '{"warn": {"lucky": "random() < 2"}}');
CREATE SEQUENCE customer_seq;
SELECT reconcile_set_rules('customer_state', '{"dataset_checks": [{"name": "d", "sql": "SELECT nextval(''public.customer_seq'') FROM {{TABLE}}"}]}');
DROP SEQUENCE customer_seq;
SELECT reconcile_set_rules('customer_state', (SELECT jsonb_build_object('warn', jsonb_object_agg('r' || i, 'age > ' || i))
                                                FROM generate_series(1, 1001) AS i));
SELECT count(*) AS stored_versions FROM reconcile.target_rules;

-- Version 1.
SELECT reconcile_set_rules('customer_state', '{
  "drop": {"has_name": "name IS NOT NULL"},
  "warn": {"adult": "age >= 18", "known_risk": "risk IS NOT NULL"},
  "fail": {"sanctioned_customers_are_high_risk":
           "NOT COALESCE((sanctions = ''Y'' AND risk IS NOT NULL AND risk <> ''HIGH''), FALSE)"},
  "dataset_checks": [{"name": "one_row_per_customer",
                      "sql": "SELECT customer_id, count(*) FROM {{TABLE}} GROUP BY customer_id HAVING count(*) > 1"}]
}') AS version;

-- Batch 1: C2 has no name and is dropped (the reason names the rule); C3
-- (a minor) and C4 (no risk) are loaded and counted in the warnings; row 5
-- has a bad version and no name: both problems are rejects.
INSERT INTO customer_stage VALUES
    ('o1', 1, 'UPSERT', 'C1', '1', 'Ana', 30, 'LOW',  'N'),
    ('o1', 2, 'UPSERT', 'C2', '1', NULL,  40, 'LOW',  'N'),
    ('o1', 3, 'UPSERT', 'C3', '1', 'Bo',  15, 'LOW',  'N'),
    ('o1', 4, 'UPSERT', 'C4', '1', 'Cy',  50, NULL,   'N'),
    ('o1', 5, 'UPSERT', 'C5', 'x', NULL,  50, 'HIGH', 'Y');
SELECT status, inserted, rejected, staged_rows
FROM reconcile_batch(target => 'customer_state', staged => 'customer_stage',
                     manifest => '[{"object_key":"o1","version_id":"a","content_hash":"sha256:01","rows":5}]');
SELECT object_key, source_row, column_name, raw_value, reason FROM reconcile.rejects ORDER BY source_row, reason;
SELECT customer_id, name, age FROM customer_state ORDER BY customer_id;
SELECT warnings FROM reconcile.receipts;

-- Batch 2: a sanctioned customer rated LOW breaches a fail rule, and the
-- batch is blocked with nothing applied.
INSERT INTO customer_stage VALUES
    ('o2', 1, 'UPSERT', 'C6', '1', 'Di', 33, 'LOW',  'Y'),
    ('o2', 2, 'UPSERT', 'C7', '1', 'Ed', 44, 'MEDIUM', 'Y'),
    ('o2', 3, 'UPSERT', 'C1', '2', 'Ana', 31, 'LOW', 'N');
SELECT * FROM reconcile_batch(target => 'customer_state', staged => 'customer_stage',
                              manifest => '[{"object_key":"o2","version_id":"a","content_hash":"sha256:02","rows":3}]');
SELECT count(*) AS receipts FROM reconcile.receipts;
SELECT customer_id, name, age, version FROM customer_state ORDER BY customer_id;

-- Batch 3: the dataset check runs over the batch's staged rows only.
INSERT INTO customer_stage VALUES
    ('o3', 1, 'UPSERT', 'C8', '1', 'Fa', 60, 'LOW', 'N'),
    ('o3', 2, 'UPSERT', 'C8', '2', 'Fa', 61, 'LOW', 'N');
SELECT * FROM reconcile_batch(target => 'customer_state', staged => 'customer_stage',
                              manifest => '[{"object_key":"o3","version_id":"a","content_hash":"sha256:03","rows":2}]');
-- Both together: both breaches listed.
SELECT * FROM reconcile_batch(target => 'customer_state', staged => 'customer_stage',
                              manifest => '[{"object_key":"o2","version_id":"a","content_hash":"sha256:02","rows":3},
                                            {"object_key":"o3","version_id":"a","content_hash":"sha256:03","rows":2}]');

-- Version 2 relaxes the fail rule to a warning; the history keeps both.
SELECT reconcile_set_rules('customer_state', '{
  "warn": {"sanctioned_customers_are_high_risk":
           "NOT COALESCE((sanctions = ''Y'' AND risk IS NOT NULL AND risk <> ''HIGH''), FALSE)"}
}') AS version;
SELECT status, inserted, updated, rejected
FROM reconcile_batch(target => 'customer_state', staged => 'customer_stage',
                     manifest => '[{"object_key":"o2","version_id":"a","content_hash":"sha256:02","rows":3}]');
SELECT warnings FROM reconcile.receipts ORDER BY committed_at DESC LIMIT 1;

-- Detach (version 3): no rules, no warnings.
SELECT reconcile_set_rules('customer_state', NULL) AS version;
SELECT status, inserted FROM reconcile_batch(target => 'customer_state', staged => 'customer_stage',
       manifest => '[{"object_key":"o3","version_id":"a","content_hash":"sha256:03","rows":2}]');
SELECT warnings IS NULL AS no_warnings FROM reconcile.receipts ORDER BY committed_at DESC LIMIT 1;
SELECT target, version, rules IS NULL AS detached, set_by, previous_version,
       pg_catalog.jsonb_object_keys(COALESCE(rules, '{"-": 0}')) AS sections
FROM reconcile.target_rules ORDER BY version, sections;

-- A rule that fails at run time on a staged row stops the batch; the
-- context says rules were being evaluated.
SELECT reconcile_set_rules('customer_state', '{"warn": {"ratio": "100 / (age - 50) > 0"}}');
INSERT INTO customer_stage VALUES ('o5', 1, 'UPSERT', 'C9', '1', 'Gu', 50, 'LOW', 'N');
SELECT * FROM reconcile_batch(target => 'customer_state', staged => 'customer_stage',
                              manifest => '[{"object_key":"o5","version_id":"a","content_hash":"sha256:05","rows":1}]');
SELECT rule, status, detail FROM reconcile_check('customer_stage', '{"warn": {"ratio": "100 / (age - 50) > 0"}}');

-- Attached rules are evaluated as reconcile_check evaluates them: shared
-- subexpressions once per row and only where a rule asks for them (the
-- guarded division raises no error at age 50), a rule with a subquery by
-- the staged query itself.
SELECT reconcile_set_rules('customer_state', '{
  "warn": {"ratio_low":  "CASE WHEN age <> 50 THEN 100 / (age - 50) < 10 ELSE true END",
           "ratio_high": "CASE WHEN age <> 50 THEN 100 / (age - 50) > -10 ELSE true END",
           "known_risk": "risk IN (SELECT unnest(ARRAY[''LOW'', ''HIGH'']))"},
  "drop": {"named": "upper(name) <> ''DROP ME''", "short_name": "length(upper(name)) < 20"}}') AS version;
INSERT INTO customer_stage VALUES ('o6', 1, 'UPSERT', 'C20', '1', 'Ann', 50, 'LOW', 'N'),
  ('o6', 2, 'UPSERT', 'C21', '1', 'Bob', 51, 'MID', 'N'),
  ('o6', 3, 'UPSERT', 'C22', '1', 'drop me', 60, 'HIGH', 'N'),
  ('o6', 4, 'UPSERT', 'C23', '1', 'Cy', 30, NULL, 'N');
SELECT status, inserted, rejected FROM reconcile_batch(target => 'customer_state', staged => 'customer_stage',
  manifest => '[{"object_key":"o6","version_id":"a","content_hash":"sha256:06","rows":4}]');
-- Bob breaks ratio_low and known_risk, Cy known_risk (NULL); "drop me" is dropped.
SELECT warnings FROM reconcile.receipts ORDER BY committed_at DESC LIMIT 1;
SELECT source_row, reason FROM reconcile.rejects WHERE object_key = 'o6' ORDER BY source_row;

-- A rule naming a column the staged relation lacks stops the batch, by name.
SELECT reconcile_set_rules('customer_state', '{"warn": {"named": "name <> ''''"}}');
CREATE TABLE thin_stage (object_key text, source_row bigint, operation text,
                         customer_id text, version text, age int, risk text, sanctions text);
SELECT reconcile_register(target => 'customer_state', key_columns => '{customer_id}',
                          version_column => 'version', deleted_column => 'is_deleted',
                          hash_column => 'payload_hash', payload_columns => '{age,risk,sanctions}');
INSERT INTO thin_stage VALUES ('o4', 1, 'UPSERT', 'C9', '1', 20, 'LOW', 'N');
SELECT * FROM reconcile_batch(target => 'customer_state', staged => 'thin_stage',
                              manifest => '[{"object_key":"o4","version_id":"a","content_hash":"sha256:04","rows":1}]');

DROP TABLE customer_state, customer_stage, thin_stage;
DROP ROLE regress_rules_other;
DROP EXTENSION reconcile;
