-- reconcile_repair with the other 1.2 options: a diff limit (the repair
-- fixes what the diff found and says it stopped; running it again goes on)
-- and a registered target under delete_mode "remove" (extra keys are
-- removed through the batch and kept as removals, so a late lower version
-- of a removed key stays out).
CREATE EXTENSION reconcile;
SET client_min_messages = notice;
CREATE SCHEMA repair_mix;
SET search_path = repair_mix, public;

CREATE TABLE src (id int PRIMARY KEY, v text);
CREATE TABLE tgt (id int PRIMARY KEY, v text);
INSERT INTO src SELECT g, 'v' || g FROM generate_series(1, 10) g;
INSERT INTO tgt SELECT g, 'w' || g FROM generate_series(1, 10) g;
-- 10 mismatches, at most 4 per run: three runs fix them all.
SELECT count(*) AS repaired FROM reconcile_repair('src', 'tgt', '{id}', '{"max_differences": 4}');
SELECT count(*) AS still_differ FROM reconcile_diff('src', 'tgt', '{id}');
SELECT count(*) AS repaired FROM reconcile_repair('src', 'tgt', '{id}', '{"max_differences": 4}');
SELECT count(*) AS repaired FROM reconcile_repair('src', 'tgt', '{id}', '{"max_differences": 4}');
SELECT count(*) AS still_differ FROM reconcile_diff('src', 'tgt', '{id}');

-- A registered target that removes its deletes.
CREATE TABLE acct_src (id text PRIMARY KEY, name text);
CREATE TABLE acct (id text PRIMARY KEY, name text, version bigint NOT NULL,
                   deleted boolean NOT NULL DEFAULT false, hash bytea);
SELECT reconcile_register(target => 'acct', key_columns => '{id}', version_column => 'version',
    deleted_column => 'deleted', hash_column => 'hash', options => '{"delete_mode": "remove"}');
INSERT INTO acct_src VALUES ('A', 'Ana'), ('B', 'Bo');
INSERT INTO acct (id, name, version) VALUES ('A', 'Ann', 1), ('Z', 'Zed', 1);
SET client_min_messages = warning;
SELECT key, issue, action, outcome FROM reconcile_repair('acct_src', 'acct', '{id}',
    '{"compare": ["name"]}') ORDER BY key::text;
SELECT id, name, version, deleted FROM acct ORDER BY id;
SELECT count(*) AS still_differ FROM reconcile_diff('acct_src', 'acct', '{id}', '{"compare": ["name"]}');
-- Z is a kept removal: a late row of Z at its old version stays out.
CREATE TABLE acct_stage (object_key text, source_row bigint, operation text,
                         id text, version text, name text);
INSERT INTO acct_stage VALUES ('late', 1, 'UPSERT', 'Z', '1', 'Zed');
SELECT status, inserted, stale FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"late","version_id":"1","content_hash":"sha256:late","rows":1}]');
SELECT id FROM acct ORDER BY id;

RESET search_path;
DROP SCHEMA repair_mix CASCADE;
DROP EXTENSION reconcile;
