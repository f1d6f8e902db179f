-- Thresholds per rule: "mostly", "max_invalid", "max_invalid_share" on row
-- rules, "max_rows" on dataset checks, in reconcile_check, its report,
-- fail_on_breach and the batch gate; their edges and bad values.
CREATE EXTENSION reconcile;

-- 100 rows: one NULL v (a NULL result violates, as without thresholds),
-- two negative v, 97 valid.
CREATE TABLE scores (id int PRIMARY KEY, v int);
INSERT INTO scores SELECT g, CASE WHEN g = 1 THEN NULL WHEN g <= 3 THEN -1 ELSE g END
FROM generate_series(1, 100) AS g;

-- Exactly at the threshold passes, one row beyond fails; shares are exact
-- (0.97 of 100 rows is 97 valid rows, no rounding).
SELECT rule, severity, status, invalid_rows, invalid_pct, gate_breach, detail
FROM reconcile_check('scores', '{
  "fail": {
    "mostly_at":      {"sql": "v > 0", "mostly": 0.97},
    "mostly_beyond":  {"sql": "v > 0", "mostly": 0.971},
    "count_at":       {"sql": "v > 0", "max_invalid": 3},
    "count_beyond":   {"sql": "v > 0", "max_invalid": 2},
    "share_at":       {"sql": "v > 0", "max_invalid_share": 0.03},
    "share_beyond":   {"sql": "v > 0", "max_invalid_share": 0.0299},
    "both_hold":      {"sql": "v > 0", "mostly": 0.9, "max_invalid": 5},
    "one_of_two":     {"sql": "v > 0", "mostly": 0.9, "max_invalid": 1},
    "no_threshold":   "v > 0",
    "nulls_tolerated": {"sql": "v IS NULL OR v > 0", "max_invalid": 2},
    "mostly_zero":    {"sql": "false", "mostly": 0},
    "mostly_one":     {"sql": "v > -5", "mostly": 1}
  },
  "warn": {"warn_within": {"sql": "v > 0", "mostly": 0.5}},
  "drop": {"drop_beyond": {"sql": "v > 0", "max_invalid": 0}},
  "dataset_checks": [
    {"name": "negatives_at", "sql": "SELECT id FROM {{TABLE}} WHERE v < 0", "max_rows": 2},
    {"name": "negatives_beyond", "sql": "SELECT id FROM {{TABLE}} WHERE v < 0", "max_rows": 1},
    {"name": "negatives_none_allowed", "sql": "SELECT id FROM {{TABLE}} WHERE v < 0"}
  ]
}', '{"sample": 0}');

-- The example of docs/rules.md#thresholds.
SELECT rule, severity, status, invalid_rows, gate_breach, detail
FROM reconcile_check('scores', '{
  "fail": {"mostly_positive": {"sql": "v > 0", "mostly": 0.97},
           "positive":        "v > 0"},
  "dataset_checks": [{"name": "few_negatives", "sql": "SELECT id FROM {{TABLE}} WHERE v < 0",
                      "max_rows": 1}]
}', '{"sample": 0}');

-- The report carries the thresholds as written, only on rules that have them.
SELECT r->>'rule' AS rule, r->>'status' AS status, r->'gate_breach' AS gate_breach,
       r->'threshold' AS threshold, r ? 'threshold' AS has_key
FROM jsonb_array_elements(reconcile_check_report('scores', '{
  "fail": {"a": {"sql": "v > 0", "mostly": 0.97, "description": "mostly positive"}, "b": "v > 0"},
  "dataset_checks": [{"name": "c", "sql": "SELECT 1 FROM {{TABLE}} WHERE v < 0", "max_rows": 5}]
}', '{"sample": 0}')->'rules') AS r;
SELECT reconcile_check_report('scores', '{"fail": {"a": {"sql": "v > 0", "mostly": 0.97}}}',
                              '{"sample": 0}')->'summary' AS summary_within;
SELECT reconcile_check_report('scores', '{"fail": {"a": {"sql": "v > 0", "mostly": 0.98}}}',
                              '{"sample": 0}')->'summary' AS summary_beyond;

-- fail_on_breach: within the threshold the check returns; beyond, the
-- error names the threshold.
SELECT rule, status FROM reconcile_check('scores', '{"fail": {"a": {"sql": "v > 0", "mostly": 0.97}}}',
                                         '{"fail_on_breach": true}');
SELECT rule, status FROM reconcile_check('scores', '{"fail": {"a": {"sql": "v > 0", "mostly": 0.98}}}',
                                         '{"fail_on_breach": true}');

-- Zero rows: every threshold holds, as does a rule without one.
CREATE TABLE empty_scores (id int, v int);
SELECT rule, status, invalid_rows, invalid_pct, gate_breach
FROM reconcile_check('empty_scores', '{"fail": {"m": {"sql": "v > 0", "mostly": 1},
                                                "s": {"sql": "v > 0", "max_invalid_share": 0},
                                                "n": {"sql": "v > 0", "max_invalid": 0}},
                                       "dataset_checks": [{"name": "d", "sql": "SELECT 1 FROM {{TABLE}}", "max_rows": 0}]}');

-- A rule with a threshold that does not plan is still ERROR and breaches.
SELECT rule, status, gate_breach FROM reconcile_check('scores', '{"fail": {"typo": {"sql": "vv > 0", "mostly": 0.5}}}');

-- A Great Expectations-style document: "mostly" beside descriptive keys.
SELECT rule, status, invalid_rows, gate_breach, description
FROM reconcile_check('scores', '{
  "fail": {"expect_column_values_to_be_positive": {
    "sql": "v > 0", "mostly": 0.95,
    "description": "expect_column_values_to_be_between(column=v, min_value=1, mostly=0.95)",
    "columns": ["v"], "evidence": {"expectation_type": "expect_column_values_to_be_between"}}}
}');

-- Bad thresholds are refused, naming the rule and the key (22023).
\set VERBOSITY default
SELECT reconcile_check('scores', '{"fail": {"a": {"sql": "v > 0", "mostly": -0.1}}}');
SELECT reconcile_check('scores', '{"fail": {"a": {"sql": "v > 0", "mostly": 1.01}}}');
SELECT reconcile_check('scores', '{"fail": {"a": {"sql": "v > 0", "mostly": "0.9"}}}');
SELECT reconcile_check('scores', '{"fail": {"a": {"sql": "v > 0", "mostly": null}}}');
SELECT reconcile_check('scores', '{"warn": {"a": {"sql": "v > 0", "max_invalid_share": 2}}}');
SELECT reconcile_check('scores', '{"drop": {"a": {"sql": "v > 0", "max_invalid": -1}}}');
SELECT reconcile_check('scores', '{"fail": {"a": {"sql": "v > 0", "max_invalid": 1.5}}}');
SELECT reconcile_check('scores', '{"fail": {"a": {"sql": "v > 0", "max_invalid": true}}}');
SELECT reconcile_check('scores', '{"fail": {"a": {"sql": "v > 0", "max_invalid": 1e30}}}');
SELECT reconcile_check('scores', '{"fail": {"a": {"sql": "v > 0", "max_rows": 1}}}');
SELECT reconcile_check('scores', '{"dataset_checks": [{"name": "d", "sql": "SELECT 1", "mostly": 0.5}]}');
SELECT reconcile_check('scores', '{"dataset_checks": [{"name": "d", "sql": "SELECT 1", "max_rows": [1]}]}');
SELECT reconcile_check('scores', '{"fail": {"a": {"sql": "v > 0", "most": 0.5}}}');

-- Batches: a fail rule within its threshold does not block; beyond, it
-- does; drop rules reject their rows whatever their threshold.
CREATE TABLE readings (
    id           text PRIMARY KEY,
    v            int,
    version      bigint NOT NULL,
    is_deleted   boolean NOT NULL DEFAULT false,
    payload_hash bytea
);
CREATE TABLE readings_stage (object_key text, source_row bigint, operation text,
                             id text, version text, v int);
SELECT reconcile_register(target => 'readings', key_columns => '{id}', version_column => 'version',
                          deleted_column => 'is_deleted', hash_column => 'payload_hash');
SELECT reconcile_set_rules('readings', '{
  "fail": {"positive": {"sql": "v > 0", "mostly": 0.75}},
  "drop": {"not_huge": {"sql": "v < 1000", "max_invalid": 10}},
  "dataset_checks": [{"name": "few_small", "sql": "SELECT id FROM {{TABLE}} WHERE v < 10", "max_rows": 2}]
}');
-- 5 rows: r5 dropped; of the 4 counted, 1 violates "positive" (0.75 valid: at the threshold).
INSERT INTO readings_stage VALUES
    ('o1', 1, 'UPSERT', 'r1', '1', 50), ('o1', 2, 'UPSERT', 'r2', '1', 60),
    ('o1', 3, 'UPSERT', 'r3', '1', 5),  ('o1', 4, 'UPSERT', 'r4', '1', -1),
    ('o1', 5, 'UPSERT', 'r5', '1', 5000);
SELECT status, inserted, rejected
FROM reconcile_batch(target => 'readings', staged => 'readings_stage',
                     manifest => '[{"object_key":"o1","version_id":"a","content_hash":"sha256:01","rows":5}]');
SELECT id, v FROM readings ORDER BY id;
SELECT source_row, reason FROM reconcile.rejects ORDER BY source_row;
-- Batch 2: r7's NULL v violates the drop rule (NULL is a violation), so
-- r7 is rejected, not counted; of the 3 counted, r6 violates "positive":
-- 2 of 3 valid, below 0.75, refused.
TRUNCATE readings_stage;
INSERT INTO readings_stage VALUES
    ('o2', 1, 'UPSERT', 'r6', '1', -5), ('o2', 2, 'UPSERT', 'r7', '1', NULL),
    ('o2', 3, 'UPSERT', 'r8', '1', 70), ('o2', 4, 'UPSERT', 'r9', '1', 80);
SELECT status FROM reconcile_batch(target => 'readings', staged => 'readings_stage',
                     manifest => '[{"object_key":"o2","version_id":"a","content_hash":"sha256:02","rows":4}]');
-- Batch 3: within "positive", but the dataset check returns 3 rows of its 2.
TRUNCATE readings_stage;
INSERT INTO readings_stage VALUES
    ('o3', 1, 'UPSERT', 'r10', '1', 1), ('o3', 2, 'UPSERT', 'r11', '1', 2),
    ('o3', 3, 'UPSERT', 'r12', '1', 3), ('o3', 4, 'UPSERT', 'r13', '1', 40);
SELECT status FROM reconcile_batch(target => 'readings', staged => 'readings_stage',
                     manifest => '[{"object_key":"o3","version_id":"a","content_hash":"sha256:03","rows":4}]');
SELECT count(*) AS readings FROM readings;
\set VERBOSITY terse
-- A threshold is checked when the document is attached, too.
SELECT reconcile_set_rules('readings', '{"fail": {"positive": {"sql": "v > 0", "mostly": 2}}}');

DROP TABLE scores, empty_scores, readings, readings_stage;
DROP EXTENSION reconcile;
