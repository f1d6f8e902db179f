-- Bad input at every entry point of the loader and the diff: huge
-- manifests, huge and odd values, versions that do not fit, identifiers
-- with quotes, spaces, mixed case and SQL injection attempts in every text
-- argument and option.  Each works correctly or fails with a documented
-- SQLSTATE, and a failure leaves nothing behind.  (Malformed manifest
-- fields and every reject reason are in test/pgtap/loader_refusals.sql and
-- loader_rejects.sql.)
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

-- Run a statement; show 'ok' or its SQLSTATE and (the start of) its message.
CREATE FUNCTION try(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || left(SQLERRM, 160);
END $$;

-- A canary that every injection attempt would drop.
CREATE TABLE x (n integer);
INSERT INTO x VALUES (1);

CREATE TABLE t (id text PRIMARY KEY, name text, version bigint NOT NULL,
                deleted boolean NOT NULL DEFAULT false, hash bytea);
SELECT reconcile_register('t', '{id}', 'version', 'deleted', 'hash');
CREATE TABLE s (object_key text, source_row bigint, operation text, id text, name text, version text);

-- Everything a batch could leave behind, as one value.
CREATE FUNCTION state() RETURNS text LANGUAGE sql AS $$
    SELECT md5(coalesce((SELECT string_agg(format('%s|%s|%s|%s', id, md5(name), version, deleted), ';' ORDER BY id COLLATE "C") FROM t), ''))
        || '/' || (SELECT count(*) FROM reconcile.receipts)
        || '/' || (SELECT count(*) FROM reconcile.batch_objects)
        || '/' || (SELECT count(*) FROM reconcile.cursors)
        || '/' || (SELECT count(*) FROM reconcile.rejects)
        || '/' || (SELECT count(*) FROM reconcile.conflicts)
$$;
CREATE TABLE saved (at text, st text);
CREATE FUNCTION remember(label text) RETURNS void LANGUAGE sql AS
    $$ INSERT INTO saved VALUES (label, state()) $$;
CREATE FUNCTION unchanged_since(label text) RETURNS boolean LANGUAGE sql AS
    $$ SELECT st = state() FROM saved WHERE at = label $$;

-- ---- manifests with hundreds of thousands of entries ----
CREATE TABLE big_manifest AS
    SELECT jsonb_agg(jsonb_build_object('object_key', 'o/' || g, 'version_id', '1',
                                        'content_hash', 'h', 'rows', 0) ORDER BY g) AS m
      FROM generate_series(1, 200000) AS g;
SELECT jsonb_array_length(m) AS entries, length(reconcile_batch_id(m)) AS id_length,
       length(reconcile_canonical_manifest(m)) > 200000 * 60 AS canonical_is_long
  FROM big_manifest;
SELECT remember('before big');
-- one entry too many rows: refused, nothing written
SELECT try($$SELECT * FROM reconcile_batch('t', 's',
    (SELECT jsonb_set(m, '{199999,rows}', '1') FROM big_manifest))$$);
-- the same object version twice, at the very end: refused
SELECT try($$SELECT * FROM reconcile_batch('t', 's',
    (SELECT m || '[{"object_key":"o/1","version_id":"1","content_hash":"h","rows":0}]' FROM big_manifest))$$);
-- the same object in two versions, at the very end, and no version_id column: refused
SELECT try($$SELECT * FROM reconcile_batch('t', 's',
    (SELECT m || '[{"object_key":"o/1","version_id":"2","content_hash":"h","rows":0}]' FROM big_manifest))$$);
-- rows at the top of bigint: the count differs, no overflow
SELECT try($$SELECT * FROM reconcile_batch('t', 's',
    (SELECT jsonb_set(m, '{0,rows}', '9223372036854775807') FROM big_manifest))$$);
SELECT unchanged_since('before big') AS refused_big_manifests_wrote_nothing;
-- 200,000 empty objects: committed, with every object recorded; then replayed
SELECT status, staged_rows, jsonb_array_length(reconcile_receipt_objects(target, batch_id)) AS objects
  FROM reconcile_batch('t', 's', (SELECT m FROM big_manifest));
SELECT count(*) AS batch_objects FROM reconcile.batch_objects;
SELECT status FROM reconcile_batch('t', 's', (SELECT m FROM big_manifest));
-- a manifest of one entry whose fields are 1 MB each: refused when the
-- manifest is parsed (22023), and nothing is written
SELECT remember('before long fields');
SELECT try($$SELECT * FROM reconcile_batch('t', 's', jsonb_build_array(jsonb_build_object(
    'object_key', repeat('k', 1000000), 'version_id', repeat('v', 1000000),
    'content_hash', repeat('h', 1000000), 'rows', 0)))$$);
SELECT unchanged_since('before long fields') AS long_fields_wrote_nothing;
-- fields of 1,025 bytes are refused, of 1,024 bytes (not compressible) fit
SELECT try($$SELECT * FROM reconcile_batch('t', 's', jsonb_build_array(jsonb_build_object(
    'object_key', repeat('k', 1025), 'version_id', '1', 'content_hash', 'h', 'rows', 0)))$$);
SELECT status FROM reconcile_batch('t', 's', jsonb_build_array(jsonb_build_object(
    'object_key', (SELECT string_agg(md5(g::text), '') FROM generate_series(1, 32) g),
    'version_id', (SELECT string_agg(md5((g + 100)::text), '') FROM generate_series(1, 32) g),
    'content_hash', repeat('h', 1024), 'rows', 0)));
TRUNCATE reconcile.receipts CASCADE;

-- ---- staged values: quotes, backslashes, unicode, control characters, 1 MB ----
INSERT INTO s VALUES
    ('odd/1', 1, 'UPSERT', 'O''Brien', 'it''s "quoted"', '1'),
    ('odd/1', 2, 'UPSERT', 'back\slash\\', E'tab\there\nnewline\rcr', '1'),
    ('odd/1', 3, 'UPSERT', 'ünï©ødé ✓ 🚀', 'Zürich – 東京 – ‮rtl', '1'),
    ('odd/1', 4, 'UPSERT', E'ctl\x01\x02\x1f', E'bell\x07 esc\x1b[31m', '1'),
    ('odd/1', 5, 'UPSERT', 'a''); DROP TABLE x; --', 'b''); DROP TABLE x; --', '1'),
    ('odd/1', 6, 'UPSERT', 'big', repeat('ü', 1000000), '1'),
    ('odd/1', 7, 'UPSERT', '   ', '', '1'),
    ('odd/1', 8, 'UPSERT', '$$; DROP TABLE x; $$', '%s %n %x', '1');
SELECT status, inserted, rejected, staged_rows
  FROM reconcile_batch('t', 's', '[{"object_key":"odd/1","version_id":"1","content_hash":"h","rows":8}]');
-- every value arrived as it was staged, with the documented hash
SELECT count(*) AS rows_as_staged
  FROM t JOIN s USING (id)
 WHERE s.object_key = 'odd/1' AND t.name IS NOT DISTINCT FROM s.name AND t.version = 1
   AND t.hash = sha256(convert_to('[' || coalesce(to_json(t.name)::text, 'null') || ',false]', 'UTF8'));
SELECT length(name) AS one_mb_value FROM t WHERE id = 'big';
-- a 1 MB key cannot go into the key's btree index: the batch fails, nothing stays
INSERT INTO s SELECT 'odd/2', 1, 'UPSERT', string_agg(chr((1000 + (g::bigint * 7919) % 20000)::integer), ''), 'n', '1'
  FROM generate_series(1, 300000) AS g;
SELECT remember('before big key');
SELECT try($$SELECT * FROM reconcile_batch('t', 's', '[{"object_key":"odd/2","version_id":"1","content_hash":"h","rows":1}]')$$);
SELECT unchanged_since('before big key') AS big_key_wrote_nothing;

-- ---- versions ----
-- text versions that do not fit a bigint, are not integers, or are empty: rejects
INSERT INTO s VALUES
    ('ver/1', 1, 'UPSERT', 'v1', 'a', '9223372036854775807'),
    ('ver/1', 2, 'UPSERT', 'v2', 'a', '9223372036854775808'),
    ('ver/1', 3, 'UPSERT', 'v3', 'a', '-9223372036854775808'),
    ('ver/1', 4, 'UPSERT', 'v4', 'a', 'NaN'),
    ('ver/1', 5, 'UPSERT', 'v5', 'a', ''),
    ('ver/1', 6, 'UPSERT', 'v6', 'a', '-1'),
    ('ver/1', 7, 'UPSERT', 'v7', 'a', ' 7 '),
    ('ver/1', 8, 'UPSERT', 'v8', 'a', '0x10'),
    ('ver/1', 9, 'UPSERT', 'v9', 'a', '1e3'),
    ('ver/1', 10, 'UPSERT', 'v10', 'a', '-0'),
    ('ver/1', 11, 'UPSERT', 'v11', 'a', 'Infinity'),
    ('ver/1', 12, 'UPSERT', 'v12', 'a', repeat('9', 100000));
SELECT status, inserted, rejected FROM reconcile_batch('t', 's',
    '[{"object_key":"ver/1","version_id":"1","content_hash":"h","rows":12}]');
SELECT t.id, t.version FROM t JOIN s USING (id) WHERE s.object_key = 'ver/1' ORDER BY s.source_row;
SELECT source_row, column_name, left(raw_value, 25) AS raw_value, left(reason, 70) AS reason
  FROM reconcile.rejects WHERE object_key = 'ver/1' ORDER BY source_row;
-- versions staged as numeric, double precision and into a smallint target
CREATE TABLE small_t (id integer PRIMARY KEY, v smallint NOT NULL, d boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('small_t', '{id}', 'v', 'd', 'h');
CREATE TABLE num_s (object_key text, source_row integer, operation text, id integer, v numeric);
INSERT INTO num_s VALUES ('n/1', 1, 'UPSERT', 1, 32767), ('n/1', 2, 'UPSERT', 2, 32768),
    ('n/1', 3, 'UPSERT', 3, 'NaN'), ('n/1', 4, 'UPSERT', 4, 1e30), ('n/1', 5, 'UPSERT', 5, 2.5),
    ('n/1', 6, 'UPSERT', 6, -32768), ('n/1', 7, 'UPSERT', 7, 2.0);
SELECT status, inserted, rejected FROM reconcile_batch('small_t', 'num_s',
    '[{"object_key":"n/1","version_id":"1","content_hash":"h","rows":7}]');
SELECT id, v FROM small_t ORDER BY id;
SELECT source_row, raw_value, left(reason, 60) AS reason FROM reconcile.rejects
 WHERE object_key = 'n/1' ORDER BY source_row;
CREATE TABLE float_s (object_key text, source_row integer, operation text, id integer, v double precision);
INSERT INTO float_s VALUES ('f/1', 1, 'UPSERT', 11, 'Infinity'), ('f/1', 2, 'UPSERT', 12, 'NaN'),
    ('f/1', 3, 'UPSERT', 13, '-Infinity'), ('f/1', 4, 'UPSERT', 14, 3);
SELECT status, inserted, rejected FROM reconcile_batch('small_t', 'float_s',
    '[{"object_key":"f/1","version_id":"1","content_hash":"h","rows":4}]');
SELECT source_row, raw_value FROM reconcile.rejects WHERE object_key = 'f/1' ORDER BY source_row;

-- ---- identifiers: quotes, spaces, mixed case, injection attempts ----
CREATE SCHEMA "Odd ""Schema""; DROP TABLE x; --";
CREATE TABLE "Odd ""Schema""; DROP TABLE x; --"."Cust ""State""; DROP TABLE x" (
    "id); DROP TABLE x; --" text PRIMARY KEY,
    "Name ""Quoted""" text,
    "MixedCase" integer,
    "v"" --" bigint NOT NULL,
    "del'; --" boolean NOT NULL DEFAULT false,
    "h\" bytea);
SELECT reconcile_register('"Odd ""Schema""; DROP TABLE x; --"."Cust ""State""; DROP TABLE x"',
    ARRAY['id); DROP TABLE x; --'], 'v" --', 'del''; --', 'h\');
SELECT key_columns, version_column, deleted_column, hash_column, payload_columns FROM reconcile.targets
 WHERE target = '"Odd ""Schema""; DROP TABLE x; --"."Cust ""State""; DROP TABLE x"'::regclass;
CREATE TABLE "Stage; DROP TABLE x" (object_key text, source_row bigint, operation text,
    "id); DROP TABLE x; --" text, "Name ""Quoted""" text, "MixedCase" text, "v"" --" text);
INSERT INTO "Stage; DROP TABLE x" VALUES
    ('i/1''; DROP TABLE x; --', 1, 'UPSERT', 'k''1', 'n"1', '7', '1'),
    ('i/1''; DROP TABLE x; --', 2, 'DELETE', 'k2', NULL, NULL, '1'),
    ('i/1''; DROP TABLE x; --', 3, 'UPSERT', 'k3', 'x', 'seven', '1');
SELECT status, inserted, deleted, rejected
  FROM reconcile_batch('"Odd ""Schema""; DROP TABLE x; --"."Cust ""State""; DROP TABLE x"',
       '"Stage; DROP TABLE x"',
       '[{"object_key":"i/1''; DROP TABLE x; --","version_id":"1''); DROP TABLE x; --","content_hash":"$$ DROP TABLE x $$","rows":3}]',
       'src''); DROP TABLE x; --', E'cur\\''; DROP TABLE x; -- ✓');
SELECT * FROM "Odd ""Schema""; DROP TABLE x; --"."Cust ""State""; DROP TABLE x" ORDER BY 1;
SELECT source, "position" FROM reconcile.cursors
 WHERE target = '"Odd ""Schema""; DROP TABLE x; --"."Cust ""State""; DROP TABLE x"'::regclass;
SELECT object_key, source_row, column_name, raw_value FROM reconcile.rejects WHERE object_key LIKE 'i/1%';
SELECT object_key, version_id, content_hash FROM reconcile.batch_objects WHERE object_key LIKE 'i/1%';
-- replayed under the same strange names
SELECT status FROM reconcile_batch('"Odd ""Schema""; DROP TABLE x; --"."Cust ""State""; DROP TABLE x"',
       '"Stage; DROP TABLE x"',
       '[{"object_key":"i/1''; DROP TABLE x; --","version_id":"1''); DROP TABLE x; --","content_hash":"$$ DROP TABLE x $$","rows":3}]',
       'src''); DROP TABLE x; --', E'cur\\''; DROP TABLE x; -- ✓');

-- names that resolve to nothing: regclass refuses them before the extension runs
SELECT try($$SELECT * FROM reconcile_batch('t; DROP TABLE x', 's', '[{"object_key":"o","version_id":"1","content_hash":"h","rows":0}]')$$);
SELECT try($$SELECT * FROM reconcile_batch('t', 's"; DROP TABLE x; --', '[{"object_key":"o","version_id":"1","content_hash":"h","rows":0}]')$$);
-- an unquoted name folds to lower case, as in SQL
SELECT try($$SELECT * FROM reconcile_batch('t', 'S', '[{"object_key":"o","version_id":"1","content_hash":"h","rows":0}]')$$);
SELECT try($$SELECT * FROM reconcile_batch('"T"', 's', '[{"object_key":"o","version_id":"1","content_hash":"h","rows":0}]')$$);
-- column names in reconcile_register that do not exist, injection included
SELECT remember('before register');
SELECT try($$SELECT reconcile_register('t', ARRAY['id); DROP TABLE x; --'], 'version', 'deleted', 'hash')$$);
SELECT try($$SELECT reconcile_register('t', '{id}', 'version"; DROP TABLE x; --', 'deleted', 'hash')$$);
SELECT try($$SELECT reconcile_register('t', '{id}', 'version', 'deleted''; DROP TABLE x; --', 'hash')$$);
SELECT try($$SELECT reconcile_register('t', '{id}', 'version', 'deleted', 'hash) VALUES (1); DROP TABLE x; --')$$);
SELECT try($$SELECT reconcile_register('t', '{id}', 'version', 'deleted', 'hash', 'abort''; DROP TABLE x; --')$$);
SELECT try($$SELECT reconcile_register('t', '{id}', 'version', 'deleted', 'hash', 'quarantine', ARRAY['name', 'x"; DROP TABLE x; --'])$$);
SELECT try($$SELECT reconcile_register('t', '{ID}', 'Version', 'deleted', 'hash')$$);
SELECT try($$SELECT reconcile_register('t', ARRAY[''], 'version', 'deleted', 'hash')$$);
SELECT try($$SELECT reconcile_register('t', '{id}', '', 'deleted', 'hash')$$);
SELECT try(format('SELECT reconcile_register(%L, ARRAY[%L], %L, %L, %L)', 't', repeat('k', 100000), 'version', 'deleted', 'hash'));
SELECT unchanged_since('before register') AS refused_registrations_wrote_nothing;
SELECT payload_columns, conflict_policy FROM reconcile.targets WHERE target = 't'::regclass;
-- a staged relation whose required column is named with an injection attempt only
CREATE TABLE s_bad ("object_key; DROP TABLE x" text, source_row bigint, operation text, id text, name text, version text);
SELECT try($$SELECT * FROM reconcile_batch('t', 's_bad', '[{"object_key":"o-bad","version_id":"1","content_hash":"h","rows":0}]')$$);

-- ---- reconcile_diff: column names in every option ----
CREATE TABLE "Diff Src" ("Key ""1""" integer PRIMARY KEY, "Amount; DROP TABLE x" numeric, "upd'd" timestamp, plain text);
CREATE TABLE "Diff Tgt" ("K; --" integer PRIMARY KEY, "Amt"")" numeric, "upd'd" timestamp, plain text);
INSERT INTO "Diff Src" VALUES (1, 10, '2026-11-01', 'a'), (2, 20, '2026-11-02', 'b'), (3, 30, '2026-11-03', 'c');
INSERT INTO "Diff Tgt" VALUES (1, 10, '2026-11-01', 'a'), (2, 21, '2026-11-02', 'b'), (4, 40, '2026-11-04', 'd');
SELECT issue, key, columns, source_values, target_values
  FROM reconcile_diff('"Diff Src"', '"Diff Tgt"', ARRAY['Key "1"'],
       '{"target_key_columns": ["K; --"], "column_map": {"Amount; DROP TABLE x": "Amt\")"},
         "updated_column": "upd''d", "window": ["2026-11-01", null], "cutoff": "source_max"}')
 ORDER BY issue COLLATE "C", key::text COLLATE "C";
SELECT try($$SELECT * FROM reconcile_diff('"Diff Src"', '"Diff Tgt"', ARRAY['Key "1"); DROP TABLE x; --'])$$);
SELECT try($$SELECT * FROM reconcile_diff('"Diff Src"', '"Diff Tgt"', ARRAY['Key "1"'],
    '{"target_key_columns": ["K; --"], "compare": ["plain\"; DROP TABLE x; --"]}')$$);
SELECT try($$SELECT * FROM reconcile_diff('"Diff Src"', '"Diff Tgt"', ARRAY['Key "1"'],
    '{"target_key_columns": ["K; --"], "ignore": ["x'') OR 1=1; --"]}')$$);
SELECT try($$SELECT * FROM reconcile_diff('"Diff Src"', '"Diff Tgt"', ARRAY['Key "1"'],
    '{"target_key_columns": ["K; --"], "column_map": {"plain": "plain\" FROM x; --"}}')$$);
SELECT try($$SELECT * FROM reconcile_diff('"Diff Src"', '"Diff Tgt"', ARRAY['Key "1"'],
    '{"target_key_columns": ["K; --"], "column_map": {"nope; DROP TABLE x": "plain"}}')$$);
SELECT try($$SELECT * FROM reconcile_diff('"Diff Src"', '"Diff Tgt"', ARRAY['Key "1"'],
    '{"target_key_columns": ["K; --"], "updated_column": "upd''d\"; DROP TABLE x; --"}')$$);
SELECT try($$SELECT * FROM reconcile_diff('"Diff Src"', '"Diff Tgt"', ARRAY['Key "1"'],
    '{"target_key_columns": ["K; --"], "updated_column": "upd''d", "column_map": {"Amount; DROP TABLE x": "Amt\")"},
      "window": ["2026-11-01''; DROP TABLE x; --", null]}')$$);
SELECT try($$SELECT * FROM reconcile_diff('"Diff Src"', '"Diff Tgt"', ARRAY['Key "1"'],
    '{"target_key_columns": ["K; --"], "column_map": {"Amount; DROP TABLE x": "Amt\")"},
      "tolerance": {"Amount; DROP TABLE x": "1; DROP TABLE x"}}')$$);
SELECT try($$SELECT * FROM reconcile_diff('"Diff Src"', '"Diff Tgt"', ARRAY['Key "1"'],
    '{"target_key_columns": ["K; --"], "DROP TABLE x; --": true}')$$);
SELECT try($$SELECT * FROM reconcile_diff('"Diff Src"', '"Diff Tgt"', ARRAY['Key "1"'], '[1, 2]')$$);
SELECT try(format('SELECT * FROM reconcile_diff(%L, %L, ARRAY[%L], %L)', '"Diff Src"', '"Diff Tgt"', 'Key "1"',
    jsonb_build_object('target_key_columns', jsonb_build_array('K; --'), 'compare', jsonb_build_array(repeat('c', 100000)))));
SELECT * FROM reconcile_diff_summary('"Diff Src"', '"Diff Tgt"', ARRAY['Key "1"'],
    '{"target_key_columns": ["K; --"], "column_map": {"Amount; DROP TABLE x": "Amt\")"}}');

-- ---- reconcile_diff_run: job names and job definitions ----
INSERT INTO reconcile.diff_jobs VALUES
    ('odd''; DROP TABLE x; --', '"Diff Src"', '"Diff Tgt"', ARRAY['Key "1"'],
     '{"target_key_columns": ["K; --"], "column_map": {"Amount; DROP TABLE x": "Amt\")"}}'),
    ('inject source', '"Diff Src"; DROP TABLE x; --', '"Diff Tgt"', ARRAY['Key "1"'], NULL),
    ('inject key', '"Diff Src"', '"Diff Tgt"', ARRAY['Key "1"); DROP TABLE x; --'], NULL);
SELECT job, findings, error FROM reconcile_diff_run('odd''; DROP TABLE x; --');
SELECT job, findings, left(error, 100) AS error FROM reconcile_diff_run('inject source');
SELECT job, findings, left(error, 100) AS error FROM reconcile_diff_run('inject key');
SELECT try($$SELECT * FROM reconcile_diff_run('nope''; DROP TABLE x; --')$$);
SELECT try($$SELECT * FROM reconcile_diff_run('')$$);
SELECT try(format('SELECT * FROM reconcile_diff_run(%L)', repeat('j', 1000000)));
SELECT count(*) AS runs FROM reconcile.diff_runs;

-- The canary survived every attempt.
SELECT n AS canary FROM x;

DROP TABLE big_manifest, saved, s, t, s_bad, small_t, num_s, float_s,
    "Odd ""Schema""; DROP TABLE x; --"."Cust ""State""; DROP TABLE x",
    "Stage; DROP TABLE x", "Diff Src", "Diff Tgt", x;
DROP SCHEMA "Odd ""Schema""; DROP TABLE x; --";
DROP FUNCTION try(text), state(), remember(text), unchanged_since(text);
DROP EXTENSION reconcile;
