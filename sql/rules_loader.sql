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
-- has a bad version: a reject, which the rules do not see (its missing name
-- is not a second reject).
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

-- Batch 3: the dataset check runs over the batch's winners: C8's two
-- versions are one row (the lower one stale), so the check passes.
INSERT INTO customer_stage VALUES
    ('o3', 1, 'UPSERT', 'C8', '1', 'Fa', 60, 'LOW', 'N'),
    ('o3', 2, 'UPSERT', 'C8', '2', 'Fa', 61, 'LOW', 'N');
SELECT status, inserted, stale FROM reconcile_batch(target => 'customer_state', staged => 'customer_stage',
                              manifest => '[{"object_key":"o3","version_id":"a","content_hash":"sha256:03","rows":2}]');
-- Both together: the fail rule refuses the batch before the merge (the
-- dataset checks run after it, over the winners).
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
INSERT INTO customer_stage VALUES ('o7', 1, 'UPSERT', 'C30', '1', 'Lu', 70, 'LOW', 'N');
SELECT status, inserted FROM reconcile_batch(target => 'customer_state', staged => 'customer_stage',
       manifest => '[{"object_key":"o7","version_id":"a","content_hash":"sha256:07","rows":1}]');
SELECT warnings IS NULL AS no_warnings FROM reconcile.receipts ORDER BY committed_at DESC LIMIT 1;
SELECT target, version, rules IS NULL AS detached, set_by, previous_version,
       pg_catalog.jsonb_object_keys(COALESCE(rules, '{"-": 0}')) AS sections
FROM reconcile.target_rules ORDER BY version, sections;

-- A rule that fails at run time on a staged row (a division by zero)
-- rejects that row, naming the rule and the error; the batch loads the rest.
SELECT reconcile_set_rules('customer_state', '{"warn": {"ratio": "100 / (age - 50) > 0"}}');
INSERT INTO customer_stage VALUES ('o5', 1, 'UPSERT', 'C9', '1', 'Gu', 50, 'LOW', 'N');
SELECT status, inserted, rejected FROM reconcile_batch(target => 'customer_state', staged => 'customer_stage',
                              manifest => '[{"object_key":"o5","version_id":"a","content_hash":"sha256:05","rows":1}]');
SELECT source_row, reason FROM reconcile.rejects WHERE object_key = 'o5';
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

-- A rule naming a column the batch does not load (here after the target
-- is registered again with fewer payload columns) stops the batch, by name.
SELECT reconcile_set_rules('customer_state', '{"warn": {"named": "name <> ''''"}}');
CREATE TABLE thin_stage (object_key text, source_row bigint, operation text,
                         customer_id text, version text, age int, risk text, sanctions text);
SELECT reconcile_register(target => 'customer_state', key_columns => '{customer_id}',
                          version_column => 'version', deleted_column => 'is_deleted',
                          hash_column => 'payload_hash', payload_columns => '{age,risk,sanctions}');
INSERT INTO thin_stage VALUES ('o4', 1, 'UPSERT', 'C9', '1', 20, 'LOW', 'N');
SELECT * FROM reconcile_batch(target => 'customer_state', staged => 'thin_stage',
                              manifest => '[{"object_key":"o4","version_id":"a","content_hash":"sha256:04","rows":1}]');

-- Rules on typed values.  The stage is text, as the README stages it; the
-- rules are written against the target's column types and see each staged
-- row as the batch would write it: cast to the target's types, after the
-- cast rejects.
CREATE TABLE typed_state (
    customer_id  text PRIMARY KEY,
    name         text,
    customer_age int,
    balance      numeric,
    version      bigint NOT NULL,
    is_deleted   boolean NOT NULL DEFAULT false,
    payload_hash bytea,
    note         text
);
CREATE TABLE typed_stage (object_key text, source_row bigint, operation text,
                          customer_id text, version text, name text,
                          customer_age text, balance text);
SELECT reconcile_register(target => 'typed_state', key_columns => '{customer_id}',
                          version_column => 'version', deleted_column => 'is_deleted',
                          hash_column => 'payload_hash', conflict_policy => 'quarantine',
                          payload_columns => '{name,customer_age,balance}');
-- A rule names the target's columns that a batch loads: not a column the
-- batch does not load, not a staged relation's own column, not a system column.
SELECT reconcile_set_rules('typed_state', '{"warn": {"noted": "note IS NOT NULL"}}');
SELECT reconcile_set_rules('typed_state', '{"warn": {"qualified": "typed_state.note IS NULL OR true"}}');
SELECT reconcile_set_rules('typed_state', '{"warn": {"sub": "EXISTS (SELECT 1 WHERE note IS NULL)"}}');
SELECT reconcile_set_rules('typed_state', '{"warn": {"from_file": "object_key <> ''''"}}');
SELECT reconcile_set_rules('typed_state', '{"warn": {"where": "ctid IS NOT NULL"}}');
SELECT reconcile_set_rules('typed_state', '{"dataset_checks": [{"name": "noted", "sql": "SELECT 1 FROM {{TABLE}} WHERE note IS NULL"}]}');
SELECT reconcile_set_rules('typed_state', '{
  "warn": {"adult": "customer_age >= 18",
           "known_age": "customer_age IN (SELECT g FROM generate_series(0, 150) AS g)",
           "hashed": "octet_length(payload_hash) = 32 AND NOT is_deleted AND version >= 1"},
  "drop": {"balance_not_negative": "typed_state.balance >= 0"},
  "fail": {"named": "name IS NOT NULL"},
  "dataset_checks": [{"name": "one_row_per_customer",
                      "sql": "SELECT customer_id FROM {{TABLE}} GROUP BY customer_id HAVING count(*) > 1"},
                     {"name": "no_negative_balance", "sql": "SELECT 1 FROM {{TABLE}} WHERE balance < 0"},
                     {"name": "no_rivals", "sql": "SELECT 1 FROM {{TABLE}} WHERE name = ''Rival''"}]
}') AS version;

-- Row 1 and row 5 are exact duplicates: one winner, so the uniqueness check
-- passes.  Row 2 is a minor (a warning).  Row 3's age does not cast: one
-- reject, for the cast; the rules never see it.  Row 4's balance is
-- negative: dropped, and the dataset check does not see it.  Row 6 is C6 at
-- versions 1 and 2: the lower one is stale.
INSERT INTO typed_stage VALUES
    ('t1', 1, 'UPSERT', 'C1', '1', 'Ana', '34', '10.50'),
    ('t1', 2, 'UPSERT', 'C2', '1', 'Bo',  '17', '3'),
    ('t1', 3, 'UPSERT', 'C3', '1', 'Cy',  'forty', '1'),
    ('t1', 4, 'UPSERT', 'C4', '1', 'Di',  '40', '-5'),
    ('t1', 5, 'UPSERT', 'C1', '1', 'Ana', '34', '10.50'),
    ('t1', 6, 'UPSERT', 'C6', '1', 'Ed',  '51', '7'),
    ('t1', 7, 'UPSERT', 'C6', '2', 'Ed',  '52', '7');
SELECT status, inserted, stale, duplicates, rejected
FROM reconcile_batch(target => 'typed_state', staged => 'typed_stage',
                     manifest => '[{"object_key":"t1","version_id":"a","content_hash":"sha256:t1","rows":7}]');
SELECT source_row, column_name, raw_value, reason FROM reconcile.rejects
 WHERE target = 'typed_state'::regclass ORDER BY source_row, reason;
SELECT customer_id, name, customer_age, balance, version FROM typed_state ORDER BY customer_id;
SELECT warnings FROM reconcile.receipts WHERE target = 'typed_state'::regclass;

-- A conflict held back is not among the winners: C1 at version 1 with
-- another name (the target holds "Ana") is quarantined, and the check for
-- that name sees nothing.  A tombstone is not a live row either.
INSERT INTO typed_stage VALUES
    ('t2', 1, 'UPSERT', 'C1', '1', 'Rival', '34', '10.50'),
    ('t2', 2, 'DELETE', 'C2', '2', 'Rival', '17', '3'),
    ('t2', 3, 'UPSERT', 'C7', '1', 'Fa', '60', '0');
SELECT status, inserted, deleted, conflicts
FROM reconcile_batch(target => 'typed_state', staged => 'typed_stage',
                     manifest => '[{"object_key":"t2","version_id":"a","content_hash":"sha256:t2","rows":3}]');

-- Two new customers of one name: a check that returns rows over the
-- winners refuses the batch, and nothing is written (no rows, no rejects,
-- no receipt).
SELECT reconcile_set_rules('typed_state', '{
  "dataset_checks": [{"name": "one_name_each",
                      "sql": "SELECT name FROM {{TABLE}} GROUP BY name HAVING count(*) > 1"}]}') AS version;
INSERT INTO typed_stage VALUES
    ('t3', 1, 'UPSERT', 'C8', '1', 'Gu', '20', '1'),
    ('t3', 2, 'UPSERT', 'C9', '1', 'Gu', '21', '2'),
    ('t3', 3, 'UPSERT', 'C2', '9', 'Ho', 'x',  '2');
SELECT * FROM reconcile_batch(target => 'typed_state', staged => 'typed_stage',
                              manifest => '[{"object_key":"t3","version_id":"a","content_hash":"sha256:t3","rows":3}]');
SELECT count(*) AS rows_after, (SELECT count(*) FROM reconcile.rejects WHERE object_key = 't3') AS rejects,
       (SELECT count(*) FROM reconcile.receipts WHERE target = 'typed_state'::regclass) AS receipts
FROM typed_state;

-- A rule that raises an error on one row (a division by zero, a cast inside
-- the rule) rejects that row, naming the rule and the error; the others
-- load, and the rules that did not fail on the row still count.
SELECT reconcile_set_rules('typed_state', '{
  "warn": {"adult": "customer_age >= 18"},
  "fail": {"per_year": "balance / customer_age < 100"},
  "drop": {"numeric_name": "name !~ ''^[0-9]'' OR name::int > 0",
           "balance_not_negative": "balance >= 0"}}') AS version;
INSERT INTO typed_stage VALUES
    ('t4', 1, 'UPSERT', 'C10', '1', 'Ivo', '0',  '5'),
    ('t4', 2, 'UPSERT', 'C11', '1', '7x',  '30', '5'),
    ('t4', 3, 'UPSERT', 'C12', '1', 'Jo',  '0',  '-1'),
    ('t4', 4, 'UPSERT', 'C13', '1', 'Ky',  '16', '5'),
    ('t4', 5, 'UPSERT', 'C14', '1', '42',  '40', '5');
SELECT status, inserted, rejected
FROM reconcile_batch(target => 'typed_state', staged => 'typed_stage',
                     manifest => '[{"object_key":"t4","version_id":"a","content_hash":"sha256:t4","rows":5}]');
SELECT source_row, column_name, reason FROM reconcile.rejects
 WHERE object_key = 't4' ORDER BY source_row, reason;
SELECT warnings FROM reconcile.receipts WHERE target = 'typed_state'::regclass
 ORDER BY committed_at DESC LIMIT 1;
SELECT customer_id FROM typed_state WHERE customer_id IN ('C10', 'C11', 'C12', 'C13', 'C14') ORDER BY 1;

-- Dataset checks run as the target's owner, who is granted SELECT on the
-- batch's temporary table of winners and on nothing else of the caller's:
-- a check that reads another of the caller's temporary tables is refused.
CREATE ROLE regress_rules_owner;
CREATE TABLE owned_state (id int PRIMARY KEY, v int, version bigint NOT NULL,
                          is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea);
ALTER TABLE owned_state OWNER TO regress_rules_owner;
CREATE TABLE owned_stage (object_key text, source_row bigint, operation text,
                          id text, version text, v text);
GRANT SELECT ON owned_stage TO regress_rules_owner;
INSERT INTO owned_stage VALUES ('w1', 1, 'UPSERT', '1', '1', '10'), ('w1', 2, 'UPSERT', '2', '1', 'ten');
SET ROLE regress_rules_owner;
SELECT reconcile_register(target => 'owned_state', key_columns => '{id}', version_column => 'version',
                          deleted_column => 'is_deleted', hash_column => 'payload_hash');
CREATE TEMP TABLE secret (x int);
SELECT reconcile_set_rules('owned_state', '{"dataset_checks": [{"name": "peek",
    "sql": "SELECT 1 FROM {{TABLE}} WHERE EXISTS (SELECT 1 FROM pg_temp.secret)"}]}') AS version;
DROP TABLE pg_temp.secret;
RESET ROLE;
CREATE TEMP TABLE secret (x int);
INSERT INTO secret VALUES (1);
SELECT status FROM reconcile_batch(target => 'owned_state', staged => 'owned_stage',
    manifest => '[{"object_key":"w1","version_id":"a","content_hash":"sha256:w1","rows":2}]');
SET ROLE regress_rules_owner;
SELECT reconcile_set_rules('owned_state', '{"warn": {"small": "v < 100"},
    "dataset_checks": [{"name": "big", "sql": "SELECT 1 FROM {{TABLE}} WHERE v >= 100"}]}') AS version;
RESET ROLE;
SELECT status, inserted, rejected FROM reconcile_batch(target => 'owned_state', staged => 'owned_stage',
    manifest => '[{"object_key":"w1","version_id":"a","content_hash":"sha256:w1","rows":2}]');
SELECT id, v FROM owned_state;
-- The temporary table, and the grant with it, are gone.
SELECT count(*) AS apply_tables FROM pg_class WHERE relname LIKE 'reconcile_apply_%';
-- An error that is not the rules' (here an unknown staged column) does not
-- say that the rules were being evaluated.
ALTER TABLE owned_stage ADD COLUMN note text;
\set VERBOSITY default
SELECT status FROM reconcile_batch(target => 'owned_state', staged => 'owned_stage',
    manifest => '[{"object_key":"w2","version_id":"a","content_hash":"sha256:w2","rows":2}]');
DROP TABLE secret, owned_state, owned_stage;
DROP ROLE regress_rules_owner;

DROP TABLE customer_state, customer_stage, thin_stage, typed_state, typed_stage;
DROP ROLE regress_rules_other;
DROP EXTENSION reconcile;
