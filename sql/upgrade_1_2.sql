-- The upgrade from 1.1: state made with 1.1 (a batch with a reject and a
-- held conflict, a resolution, a diff run) survives ALTER EXTENSION
-- reconcile UPDATE row for row, a replay still returns its stored receipt,
-- and the upgraded schema is a fresh install's.
CREATE EXTENSION reconcile VERSION '1.1';
SET client_min_messages = warning;

CREATE TABLE acct (id int PRIMARY KEY, name text, v bigint NOT NULL,
                   gone boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE acct_stage (object_key text, source_row int, operation text, id text, name text, v text);
CREATE TABLE acct_copy (id int PRIMARY KEY, name text);
SELECT reconcile_register('acct', '{id}', 'v', 'gone', 'h');
INSERT INTO acct_stage VALUES ('o1', 1, 'UPSERT', '1', 'Ana', '1'),
                              ('o1', 2, 'UPSERT', '2', NULL, 'v?'),
                              ('o1', 3, 'UPSERT', '3', 'Bo', '1'),
                              ('o1', 4, 'UPSERT', '3', 'Bea', '1'),
                              ('o1', 5, 'UPSERT', '4', 'Cy', '1'),
                              ('o1', 6, 'UPSERT', '4', 'Cyd', '1');
SELECT status, inserted, conflicts, rejected FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":6}]', 'feed', 'o1');
SELECT batch_id AS b1 FROM reconcile.receipts WHERE target = 'acct'::regclass \gset
SELECT encode(staged_hash, 'hex') AS bo_hash FROM reconcile.conflicts
 WHERE target = 'acct'::regclass AND key = '{"id": 3}' ORDER BY staged_hash LIMIT 1 \gset
SELECT status, outcome FROM reconcile_resolve('acct', :'b1', '{"id": 3}', decode(:'bo_hash', 'hex'));
-- Keys held as 1.1 wrote them, in the loading session's settings
-- (simulated: this library writes them pinned even on a 1.1 schema): a
-- date under 'SQL, DMY', and one in ISO form.
CREATE TABLE dated (d date PRIMARY KEY, name text, v bigint NOT NULL,
                    gone boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE dated_stage (object_key text, source_row int, operation text, d date, name text, v bigint);
SELECT reconcile_register('dated', '{d}', 'v', 'gone', 'h');
INSERT INTO dated VALUES ('2024-01-02', 'January', 1);
INSERT INTO dated_stage VALUES ('o1', 1, 'UPSERT', '2024-02-01', 'Feb A', 1),
                               ('o1', 2, 'UPSERT', '2024-02-01', 'Feb B', 1),
                               ('o1', 3, 'UPSERT', '2024-03-01', 'Mar A', 1),
                               ('o1', 4, 'UPSERT', '2024-03-01', 'Mar B', 1);
SELECT status, conflicts FROM reconcile_batch('dated', 'dated_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h","rows":4}]');
UPDATE reconcile.conflicts SET key = '{"d": "01/02/2024"}'
 WHERE target = 'dated'::regclass AND key = '{"d": "2024-02-01"}';
INSERT INTO acct_copy VALUES (1, 'Ana'), (5, 'Eve');
INSERT INTO reconcile.diff_jobs VALUES ('acct', 'public.acct_copy', 'public.acct', '{id}', '{"compare": ["name"]}');
SELECT job, findings FROM reconcile_diff_run();

-- Every state row of acct, as jsonb, before the upgrade.
CREATE FUNCTION state_rows() RETURNS TABLE (state text, row_json jsonb) LANGUAGE sql AS $$
    SELECT 'targets', to_jsonb(t) FROM reconcile.targets t WHERE target = 'acct'::regclass
    UNION ALL SELECT 'receipts', to_jsonb(t) FROM reconcile.receipts t WHERE target = 'acct'::regclass
    UNION ALL SELECT 'batch_objects', to_jsonb(t) FROM reconcile.batch_objects t WHERE target = 'acct'::regclass
    UNION ALL SELECT 'cursors', to_jsonb(t) FROM reconcile.cursors t WHERE target = 'acct'::regclass
    UNION ALL SELECT 'rejects', to_jsonb(t) FROM reconcile.rejects t WHERE target = 'acct'::regclass
    UNION ALL SELECT 'conflicts', to_jsonb(t) FROM reconcile.conflicts t WHERE target = 'acct'::regclass
    UNION ALL SELECT 'resolutions', to_jsonb(t) FROM reconcile.resolutions t WHERE target = 'acct'::regclass
    UNION ALL SELECT 'diff_jobs', to_jsonb(t) FROM reconcile.diff_jobs t
    UNION ALL SELECT 'diff_runs', to_jsonb(t) FROM reconcile.diff_runs t WHERE job = 'acct'
    UNION ALL SELECT 'diff_results', to_jsonb(t) FROM reconcile.diff_results t WHERE target = 'acct'::regclass
$$;
CREATE TABLE before_upgrade AS SELECT * FROM state_rows();
SELECT state, count(*) FROM before_upgrade GROUP BY state ORDER BY state;

-- History visibility (1.2): runs under 1.1 over a table, over a view, and
-- a failed one (after the snapshot above: they are checked below).
CREATE TABLE hist_a (id int PRIMARY KEY, name text);
CREATE TABLE hist_b (id int PRIMARY KEY, name text);
CREATE VIEW hist_v AS SELECT * FROM hist_a;
INSERT INTO hist_a VALUES (1, 'a'), (2, 'b');
INSERT INTO hist_b VALUES (1, 'a'), (2, 'c');
INSERT INTO reconcile.diff_jobs VALUES
    ('hist_table', 'public.hist_a', 'public.hist_b', '{id}', NULL),
    ('hist_view', 'public.hist_v', 'public.hist_b', '{id}', NULL),
    ('hist_failed', 'public.hist_a', 'public.hist_b', '{id}', '{"compare": ["nope"]}');
SELECT job, findings, error IS NOT NULL AS failed FROM reconcile_diff_run('hist_table');
SELECT job, findings, error IS NOT NULL AS failed FROM reconcile_diff_run('hist_view');
SELECT job, findings, error IS NOT NULL AS failed FROM reconcile_diff_run('hist_failed');
DELETE FROM reconcile.diff_jobs WHERE name LIKE 'hist%';

-- 1.1 has no object servers (issue 22).
SELECT count(*) AS objects_fdw_before FROM pg_foreign_data_wrapper WHERE fdwname = 'reconcile_objects';

ALTER EXTENSION reconcile UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'reconcile';

-- Every value of every 1.1 row is still there (columns 1.2 adds are extra
-- keys) and no row is new.
CREATE FUNCTION same_row(a jsonb, b jsonb) RETURNS boolean LANGUAGE sql AS $$
    SELECT (SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(a) e WHERE b ? e.key) = b
$$;
SELECT b.state, b.row_json AS lost FROM before_upgrade b
 WHERE NOT EXISTS (SELECT FROM state_rows() a WHERE a.state = b.state AND same_row(a.row_json, b.row_json));
SELECT a.state, a.row_json AS new FROM state_rows() a
 WHERE NOT EXISTS (SELECT FROM before_upgrade b WHERE a.state = b.state AND same_row(a.row_json, b.row_json));

-- 1.2 on 1.1's data: the batch replays from its receipt and changes
-- nothing; the other held key is still resolvable.
SELECT status, inserted, conflicts, rejected FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":6}]', 'feed', 'o1');
SELECT encode(staged_hash, 'hex') AS cy_hash FROM reconcile.conflicts
 WHERE target = 'acct'::regclass AND key = '{"id": 4}' ORDER BY staged_hash LIMIT 1 \gset
SELECT status, outcome FROM reconcile_resolve('acct', :'b1', '{"id": 4}', decode(:'cy_hash', 'hex'));
SELECT id, name, v FROM acct ORDER BY id;
SELECT job, findings FROM reconcile_diff_run();

-- Keys held before the update are marked as 1.1's (key_pinned false):
-- one in ISO form is resolved, one written under 'SQL, DMY' (1 February
-- or 2 January?) is refused rather than written into another row.
SELECT target, key_pinned, count(*) FROM reconcile.conflicts GROUP BY 1, 2 ORDER BY target::text, 2;
SELECT status, outcome FROM reconcile_resolve('dated',
    (SELECT batch_id FROM reconcile.receipts WHERE target = 'dated'::regclass), '{"d": "2024-03-01"}',
    (SELECT staged_hash FROM reconcile.conflicts WHERE target = 'dated'::regclass AND source_row = 4));
SET datestyle = 'SQL, MDY';
SELECT status, outcome FROM reconcile_resolve('dated',
    (SELECT batch_id FROM reconcile.receipts WHERE target = 'dated'::regclass), '{"d": "01/02/2024"}',
    (SELECT staged_hash FROM reconcile.conflicts WHERE target = 'dated'::regclass AND source_row = 2));
SET datestyle = ISO;
SELECT d, name, v FROM dated ORDER BY d;
RESET datestyle;
-- Keys held from now on are 1.2's.
INSERT INTO dated_stage VALUES ('o2', 1, 'UPSERT', '2024-04-01', 'Apr A', 1),
                               ('o2', 2, 'UPSERT', '2024-04-01', 'Apr B', 1);
SELECT status, conflicts FROM reconcile_batch('dated', 'dated_stage',
    '[{"object_key":"o2","version_id":"1","content_hash":"h","rows":2}]');
SELECT DISTINCT key, key_pinned FROM reconcile.conflicts WHERE object_key = 'o2';


-- Runs of 1.1 over tables (failed ones included) are shared, over a view
-- reader-dependent; new runs say which, and a failure its SQLSTATE.
SELECT job, reader_dependent, sqlstate, error IS NOT NULL AS failed
  FROM reconcile.diff_runs WHERE job LIKE 'hist%' ORDER BY run_id;
INSERT INTO reconcile.diff_jobs VALUES
    ('hist_view', 'public.hist_v', 'public.hist_b', '{id}', NULL),
    ('hist_failed', 'public.hist_a', 'public.hist_b', '{id}', '{"compare": ["nope"]}');
SELECT job, findings, reader_dependent, sqlstate FROM reconcile_diff_run('hist_view', false);
SELECT job, findings, reader_dependent, sqlstate FROM reconcile_diff_run('hist_failed');
DELETE FROM reconcile.diff_jobs WHERE name LIKE 'hist%';
DROP VIEW hist_v;
DROP TABLE hist_a, hist_b;

-- 1.2's object servers after the update: the wrapper is the extension's,
-- validates its options, and a server directory lists.
SELECT fdwname, fdwvalidator::regproc FROM pg_foreign_data_wrapper w
  JOIN pg_depend d ON d.classid = 'pg_foreign_data_wrapper'::regclass AND d.objid = w.oid AND d.deptype = 'e'
 WHERE fdwname = 'reconcile_objects';
CREATE SERVER upg_bad FOREIGN DATA WRAPPER reconcile_objects OPTIONS (bucket 'Not_A_Bucket');
COPY (SELECT 1) TO PROGRAM 'rm -rf /tmp/reconcile_upgrade_1_2 && mkdir -p /tmp/reconcile_upgrade_1_2 && cat >/dev/null';
COPY (SELECT 'id' UNION ALL SELECT '1') TO '/tmp/reconcile_upgrade_1_2/o1.csv';
CREATE SERVER upg_dir FOREIGN DATA WRAPPER reconcile_objects OPTIONS (directory '/tmp/reconcile_upgrade_1_2');
SELECT object_key, size, version_id = encode(sha256(convert_to(E'id\n1\n', 'UTF8')), 'hex') AS hashed
  FROM reconcile_list_objects('upg_dir');
CREATE TABLE upg_stage (object_key text, source_row bigint, id text);
SELECT e ->> 'rows' AS rows, e ->> 'content_hash' = 'sha256:' || encode(sha256(convert_to(E'id\n1\n', 'UTF8')), 'hex') AS hashed
  FROM jsonb_array_elements(reconcile_stage_objects('upg_stage', 'upg_dir', '[{"object_key": "o1.csv"}]')) e;
SELECT * FROM upg_stage;
DROP TABLE upg_stage;
DROP SERVER upg_dir;
COPY (SELECT 1) TO PROGRAM 'rm -rf /tmp/reconcile_upgrade_1_2; cat >/dev/null';

DROP TABLE acct, acct_stage, acct_copy, before_upgrade, dated, dated_stage;
DROP FUNCTION state_rows(), same_row(jsonb, jsonb);
DROP EXTENSION reconcile;

-- Check history (1.2): on a 1.1 schema the 1.2 library loads batches into
-- targets with attached rules as before (nothing to record them in), and
-- has no reconcile_check_run; after the update both are recorded.
CREATE EXTENSION reconcile VERSION '1.1';
CREATE TABLE hist (id int PRIMARY KEY, amount int, v bigint NOT NULL,
                   gone boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE hist_stage (object_key text, source_row int, operation text, id text, amount int, v text);
SELECT reconcile_register('hist', '{id}', 'v', 'gone', 'h');
SELECT reconcile_set_rules('hist', '{"fail": {"positive": "amount > 0"}, "warn": {"big": "amount > 10"}}');
INSERT INTO hist_stage VALUES ('h1', 1, 'UPSERT', '1', 5, '1'), ('h1', 2, 'UPSERT', '2', 50, '1');
SELECT status, inserted FROM reconcile_batch('hist', 'hist_stage',
    '[{"object_key":"h1","version_id":"1","content_hash":"h1","rows":2}]');
SELECT reconcile_check_run();
ALTER EXTENSION reconcile UPDATE;
SELECT count(*) AS runs_after_update FROM reconcile.check_runs;
TRUNCATE hist_stage;
INSERT INTO hist_stage VALUES ('h2', 1, 'UPSERT', '3', 7, '1');
SELECT status, inserted FROM reconcile_batch('hist', 'hist_stage',
    '[{"object_key":"h2","version_id":"1","content_hash":"h2","rows":1}]');
INSERT INTO reconcile.check_jobs VALUES ('hist', 'hist', NULL, NULL);
SELECT job, batch_id IS NOT NULL AS batch, total_rows, passed, failed, gate FROM reconcile_check_run();
SELECT r.job, c.rule, c.status, c.invalid_rows, c.total_rows
FROM reconcile.check_results c JOIN reconcile.check_runs r USING (run_id) ORDER BY c.run_id, c.rule;
DROP TABLE hist, hist_stage;
DROP EXTENSION reconcile;
