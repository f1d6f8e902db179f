-- Staging object versions from a server directory: CSV through COPY's
-- parser and JSON lines, gzip, the bytes' SHA-256 and row counts in the
-- manifest, a producer's hash or count that the bytes do not bear out,
-- rows that do not parse (staged for reconcile_batch to reject, recorded
-- with their raw line), keys that try to leave the directory, and every
-- malformed argument.  Files are written through the server (its own OS
-- user) with COPY ... TO PROGRAM.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;
\set d '/tmp/reconcile_objects_stage'
COPY (SELECT 1) TO PROGRAM 'rm -rf /tmp/reconcile_objects_stage /tmp/reconcile_objects_stage_out && mkdir -p /tmp/reconcile_objects_stage/in/sub /tmp/reconcile_objects_stage_out && cat >/dev/null';
CREATE FUNCTION put(name text, content bytea) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('COPY (SELECT %L) TO PROGRAM %L', translate(encode(content, 'base64'), E'\n', ''),
                   'base64 -d > /tmp/reconcile_objects_stage/' || name);
END $$;
CREATE SERVER land FOREIGN DATA WRAPPER reconcile_objects OPTIONS (directory '/tmp/reconcile_objects_stage');
CREATE TABLE st (object_key text, version_id text, source_row bigint, operation text,
                 id text, name text, v text);
CREATE FUNCTION one(k text) RETURNS jsonb LANGUAGE sql AS $$ SELECT jsonb_build_array(jsonb_build_object('object_key', k)) $$;

-- CSV with a header: quoted delimiters and newlines, empty string against
-- NULL, columns by name in any order.
SELECT put('in/a.csv', convert_to(E'name,id,v\n"Ana, Jr",1,1\n"Bo\nLine",2,1\n"",3,\n,4,2\n', 'UTF8'));
SELECT reconcile_stage_objects('st', 'land', one('in/a.csv')) AS m \gset
SELECT :'m'::jsonb -> 0 ->> 'rows' AS rows,
       :'m'::jsonb -> 0 ->> 'content_hash' = 'sha256:' || encode(sha256(pg_read_binary_file(:'d' || '/in/a.csv')), 'hex') AS hash_is_bytes,
       :'m'::jsonb -> 0 ->> 'version_id' = encode(sha256(pg_read_binary_file(:'d' || '/in/a.csv')), 'hex') AS version_is_hash;
SELECT object_key, source_row, operation, id, name, name IS NULL AS name_null, v FROM st ORDER BY source_row;
TRUNCATE st;
-- The manifest is reconcile_batch's.
CREATE TABLE t (id int PRIMARY KEY, name text, v bigint NOT NULL, gone boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('t', '{id}', 'v', 'gone', 'h');
SELECT reconcile_stage_objects('st', 'land', one('in/a.csv'), '{"target": "t"}') AS m \gset
SELECT status, inserted, rejected FROM reconcile_batch('t', 'st', :'m', 'feed', 'in/a.csv');
SELECT id, name, v FROM t ORDER BY id;
SELECT object_key, version_id = :'m'::jsonb -> 0 ->> 'version_id' AS version, content_hash = :'m'::jsonb -> 0 ->> 'content_hash' AS hash, rows
  FROM reconcile.batch_objects WHERE target = 't'::regclass;
TRUNCATE st;

-- COPY's options: delimiter, quote, escape, null, force_null; header false
-- with the columns named, or in the staged relation's order.
SELECT put('in/semi.txt', convert_to(E'1;''x;y'';1\n2;NUL;1\n3;'''';1\n4;''it''''s'';2\n', 'UTF8'));
SELECT reconcile_stage_objects('st', 'land', one('in/semi.txt'),
    '{"header": false, "columns": ["id", "name", "v"], "delimiter": ";", "quote": "''", "null": "NUL"}') -> 0 -> 'rows';
SELECT source_row, id, name, name IS NULL AS name_null FROM st ORDER BY source_row;
TRUNCATE st;
SELECT reconcile_stage_objects('st', 'land', one('in/semi.txt'),
    '{"header": false, "delimiter": ";", "quote": "''", "escape": "\\", "force_null": ["name"], "null": ""}') -> 0 -> 'rows';
SELECT source_row, id, name, name IS NULL AS name_null FROM st ORDER BY source_row;
TRUNCATE st;
SELECT put('in/plain.csv', convert_to(E'5,Eve,1\n6,,1\n', 'UTF8'));
SELECT reconcile_stage_objects('st', 'land', one('in/plain.csv'), '{"header": false, "operation": "DELETE"}') -> 0 -> 'rows';
SELECT source_row, operation, id, name IS NULL AS name_null, v FROM st ORDER BY source_row;
TRUNCATE st;

-- JSON lines (by suffix, or the option): strings as they are, numbers and
-- booleans as text, objects and arrays as JSON, null as NULL; blank lines
-- are no rows; CRLF; no newline at the end; an operation key wins.
SELECT put('in/b.jsonl', convert_to(E'{"id": 7, "name": "Gus", "v": 1}\r\n\n{"id": 8.50, "name": {"first": "H"}, "v": true}\n   \n{"id": "9", "name": null, "v": [1,2], "operation": "DELETE"}', 'UTF8'));
SELECT reconcile_stage_objects('st', 'land', one('in/b.jsonl')) -> 0 -> 'rows';
SELECT source_row, operation, id, name, name IS NULL AS name_null, v FROM st ORDER BY source_row;
TRUNCATE st;
SELECT put('in/b.data', convert_to(E'{"id": 1, "name": "x", "v": 1}\n', 'UTF8'));
SELECT reconcile_stage_objects('st', 'land', one('in/b.data'), '{"format": "jsonl"}') -> 0 -> 'rows';
TRUNCATE st;

-- gzip: by suffix or by option; the hash is of the stored (compressed)
-- bytes; two concatenated members read as one file.
COPY (SELECT 1) TO PROGRAM 'cd /tmp/reconcile_objects_stage/in && printf "id,name,v\n10,Ida,1\n11,Jo,1\n" | gzip -n > c.csv.gz && printf "{\"id\": 12, \"name\": \"K\", \"v\": 1}\n" | gzip -n > d.jsonl.gz && cp c.csv.gz c.bin && (printf "id,name,v\n13,L,1\n" | gzip -n; printf "14,M,1\n" | gzip -n) > e.csv.gz && head -c 20 c.csv.gz > trunc.csv.gz && cat >/dev/null';
SELECT m -> 0 ->> 'rows' AS rows, m -> 0 ->> 'content_hash' = 'sha256:' || encode(sha256(pg_read_binary_file(:'d' || '/in/c.csv.gz')), 'hex') AS hash_of_stored_bytes
  FROM reconcile_stage_objects('st', 'land', one('in/c.csv.gz')) m;
SELECT reconcile_stage_objects('st', 'land', one('in/d.jsonl.gz')) -> 0 -> 'rows';
SELECT reconcile_stage_objects('st', 'land', one('in/c.bin'), '{"compression": "gzip"}') -> 0 -> 'rows';
SELECT reconcile_stage_objects('st', 'land', one('in/e.csv.gz')) -> 0 -> 'rows';
SELECT object_key, source_row, id, name FROM st ORDER BY object_key, source_row;
TRUNCATE st;
SELECT reconcile_stage_objects('st', 'land', one('in/trunc.csv.gz'));
SELECT reconcile_stage_objects('st', 'land', one('in/a.csv'), '{"compression": "gzip"}');
SELECT reconcile_stage_objects('st', 'land', one('in/c.csv.gz'), '{"compression": "none"}');
SELECT count(*) AS staged_after_errors FROM st;

-- Empty objects: nothing at all, a header only, a gzip'd empty file.
SELECT put('in/empty.csv', ''::bytea);
SELECT put('in/header.csv', convert_to(E'id,name,v\n', 'UTF8'));
SELECT put('in/empty.jsonl', ''::bytea);
COPY (SELECT 1) TO PROGRAM 'printf "" | gzip -n > /tmp/reconcile_objects_stage/in/empty.csv.gz && cat >/dev/null';
SELECT e ->> 'object_key' AS object_key, e ->> 'rows' AS rows,
       e ->> 'content_hash' = 'sha256:' || encode(sha256(pg_read_binary_file(:'d' || '/' || (e ->> 'object_key'))), 'hex') AS hash_ok
  FROM jsonb_array_elements(reconcile_stage_objects('st', 'land',
    '[{"object_key":"in/empty.csv"},{"object_key":"in/header.csv"},{"object_key":"in/empty.jsonl"},{"object_key":"in/empty.csv.gz"}]')) e;
SELECT count(*) FROM st;

-- Rows that do not parse: a wrong field count, invalid UTF-8, bad JSON, a
-- JSON array, an unknown key.  Each is staged with only its object,
-- version and row, so the manifest's rows are the data rows read and
-- reconcile_batch rejects it; with "target" the reason and the raw line
-- (invalid bytes as \xNN) are in reconcile.rejects.
SELECT put('in/bad.csv', convert_to(E'id,name,v\n20,ok,1\n21,too,many,1\n22\n', 'UTF8') || '\x32332c4e61ff6d652c310a'::bytea || convert_to(E'24,"last",1\n', 'UTF8'));
SELECT put('in/bad.jsonl', convert_to(E'{"id": 30, "name": "ok", "v": 1}\n{"id": 31,\n[1, 2]\n"text"\n{"id": 34, "colour": "red", "v": 1}\n', 'UTF8') || '\x7b226964223a2033352c20226e616d65223a2022ff227d0a'::bytea);
SELECT reconcile_stage_objects('st', 'land', '[{"object_key":"in/bad.csv"},{"object_key":"in/bad.jsonl"}]', '{"target": "t"}') AS m \gset
SELECT e ->> 'object_key' AS object_key, e ->> 'rows' AS rows FROM jsonb_array_elements(:'m') e;
SELECT object_key, source_row, id, name, v FROM st ORDER BY object_key, source_row;
SELECT object_key, source_row, raw_value, regexp_replace(reason, 'version "[0-9a-f]{64}"', 'version "…"') AS reason
  FROM reconcile.rejects WHERE target = 't'::regclass AND column_name IS NULL ORDER BY object_key, source_row;
SELECT status, inserted, rejected FROM reconcile_batch('t', 'st', :'m', 'feed', 'bad', '{"max_rejects": 10}');
SELECT count(*) AS rejects_of_batch, count(*) FILTER (WHERE column_name IS NULL) AS from_staging
  FROM reconcile.rejects WHERE target = 't'::regclass AND batch_id = reconcile_batch_id(:'m');
TRUNCATE st;
-- Staging the same objects again replaces the recorded parse rejects.
SELECT reconcile_stage_objects('st', 'land', '[{"object_key":"in/bad.csv"},{"object_key":"in/bad.jsonl"}]', '{"target": "t"}') = :'m'::jsonb AS same_manifest;
SELECT count(*) FILTER (WHERE column_name IS NULL) AS from_staging
  FROM reconcile.rejects WHERE target = 't'::regclass AND batch_id = reconcile_batch_id(:'m');
TRUNCATE st;
-- Unknown JSON keys ignored on request; a CSV column the stage lacks.
SELECT reconcile_stage_objects('st', 'land', one('in/bad.jsonl'), '{"unknown_columns": "ignore"}') -> 0 -> 'rows';
SELECT source_row, id, v FROM st WHERE id = '34';
TRUNCATE st;
SELECT put('in/extra.csv', convert_to(E'id,name,v,colour\n1,a,1,red\n', 'UTF8'));
SELECT reconcile_stage_objects('st', 'land', one('in/extra.csv'));
SELECT reconcile_stage_objects('st', 'land', one('in/extra.csv'), '{"unknown_columns": "ignore"}') -> 0 -> 'rows';
TRUNCATE st;
-- Reject limits, counted over the call's rows.
SELECT reconcile_stage_objects('st', 'land', one('in/bad.csv'), '{"max_rejects": 2}');
SELECT reconcile_stage_objects('st', 'land', one('in/bad.csv'), '{"max_reject_share": 0.5}');
SELECT reconcile_stage_objects('st', 'land', one('in/bad.csv'), '{"max_reject_share": 0.6}') -> 0 -> 'rows';
TRUNCATE st;

-- A producer's hash or row count that the bytes do not bear out refuses
-- the call: nothing of it is staged, not even the objects before.
SELECT reconcile_stage_objects('st', 'land', jsonb_build_array(
    jsonb_build_object('object_key', 'in/c.csv.gz'),
    jsonb_build_object('object_key', 'in/a.csv', 'content_hash', 'sha256:' || repeat('0', 64), 'rows', 4)));
SELECT reconcile_stage_objects('st', 'land', jsonb_build_array(
    jsonb_build_object('object_key', 'in/a.csv', 'rows', 5)));
SELECT reconcile_stage_objects('st', 'land', jsonb_build_array(
    jsonb_build_object('object_key', 'in/a.csv', 'rows', 4,
                       'content_hash', upper(encode(sha256(pg_read_binary_file(:'d' || '/in/a.csv')), 'hex'))))) -> 0 -> 'rows' AS producer_agrees;
SELECT count(*) AS staged FROM st;
TRUNCATE st;
-- A file changed since it was listed.
SELECT jsonb_agg(l) AS listed FROM reconcile_list_objects('land', 'in/plain.csv') l \gset
SELECT put('in/plain.csv', convert_to(E'5,Eva,1\n6,,1\n', 'UTF8'));
SELECT reconcile_stage_objects('st', 'land', :'listed', '{"header": false}');
SELECT put('in/plain.csv', convert_to(E'5,Eve,1\n6,,1\n7,,1\n', 'UTF8'));
SELECT reconcile_stage_objects('st', 'land', :'listed', '{"header": false}');
SELECT count(*) AS staged FROM st;

-- Keys that leave the directory, links, fifos, directories, missing files.
COPY (SELECT 1) TO PROGRAM 'cd /tmp/reconcile_objects_stage && echo secret > ../reconcile_objects_stage_out/secret.csv && ln -s ../../reconcile_objects_stage_out/secret.csv in/link.csv && ln -s ../reconcile_objects_stage_out out && mkfifo in/pipe.csv && cat >/dev/null';
SELECT reconcile_stage_objects('st', 'land', one('../reconcile_objects_stage_out/secret.csv'));
SELECT reconcile_stage_objects('st', 'land', one('/tmp/reconcile_objects_stage/in/a.csv'));
SELECT reconcile_stage_objects('st', 'land', one('in//a.csv'));
SELECT reconcile_stage_objects('st', 'land', one('./in/a.csv'));
SELECT reconcile_stage_objects('st', 'land', one('in/sub/../a.csv'));
SELECT reconcile_stage_objects('st', 'land', one('in/link.csv'));
SELECT reconcile_stage_objects('st', 'land', one('out/secret.csv'));
SELECT reconcile_stage_objects('st', 'land', one('in/pipe.csv'));
SELECT reconcile_stage_objects('st', 'land', one('in/sub'));
SELECT reconcile_stage_objects('st', 'land', one('in/missing.csv'));
SELECT reconcile_stage_objects('st', 'land', one(''));
SELECT object_key FROM reconcile_list_objects('land', 'in/') WHERE object_key ~ 'link|pipe|secret';

-- Malformed arguments.
SELECT reconcile_stage_objects('st', 'land', '{}');
SELECT reconcile_stage_objects('st', 'land', '[]');
SELECT reconcile_stage_objects('st', 'land', '[1]');
SELECT reconcile_stage_objects('st', 'land', '[{"version_id": "1"}]');
SELECT reconcile_stage_objects('st', 'land', '[{"object_key": 5}]');
SELECT reconcile_stage_objects('st', 'land', '[{"object_key": "in/a.csv", "colour": "red"}]');
SELECT reconcile_stage_objects('st', 'land', '[{"object_key": "in/a.csv", "version_id": ""}]');
SELECT reconcile_stage_objects('st', 'land', '[{"object_key": "in/a.csv", "size": -1}]');
SELECT reconcile_stage_objects('st', 'land', '[{"object_key": "in/a.csv", "rows": "4"}]');
SELECT reconcile_stage_objects('st', 'land', '[{"object_key": "in/a.csv", "content_hash": "sha256:9f2c"}]');
SELECT reconcile_stage_objects('st', 'land', '[{"object_key": "in/a.csv", "version_id": "3", "is_delete_marker": true}]');
SELECT reconcile_stage_objects('st', 'land', one('in/a.csv'), '[]');
SELECT reconcile_stage_objects('st', 'land', one('in/a.csv'), '{"format": "parquet"}');
SELECT reconcile_stage_objects('st', 'land', one('in/a.csv'), '{"compression": "zstd"}');
SELECT reconcile_stage_objects('st', 'land', one('in/a.csv'), '{"header": "yes"}');
SELECT reconcile_stage_objects('st', 'land', one('in/a.csv'), '{"operation": "MERGE"}');
SELECT reconcile_stage_objects('st', 'land', one('in/a.csv'), '{"max_rejects": -1}');
SELECT reconcile_stage_objects('st', 'land', one('in/a.csv'), '{"max_reject_share": 2}');
SELECT reconcile_stage_objects('st', 'land', one('in/a.csv'), '{"encoding": "klingon"}');
SELECT reconcile_stage_objects('st', 'land', one('in/a.csv'), '{"force_null": "name"}');
SELECT reconcile_stage_objects('st', 'land', one('in/a.csv'), '{"target": "no_such_table"}');
SELECT reconcile_stage_objects('st', 'land', one('in/a.csv'), '{"delimiter": ";;"}');
SELECT reconcile_stage_objects('st', 'land', one('in/a.csv'), '{"colour": "red"}');
SELECT reconcile_stage_objects('st', 'land', one('in/b.jsonl'), '{"encoding": "LATIN1"}');
SELECT reconcile_stage_objects(NULL, 'land', one('in/a.csv'));
SELECT reconcile_stage_objects('st', 'no_such_server', one('in/a.csv'));
-- The header names the columns staging fills, or one twice, or none.
SELECT put('in/own.csv', convert_to(E'id,source_row\n1,5\n', 'UTF8'));
SELECT reconcile_stage_objects('st', 'land', one('in/own.csv'));
SELECT put('in/twice.csv', convert_to(E'id,ID\n1,5\n', 'UTF8'));
SELECT reconcile_stage_objects('st', 'land', one('in/twice.csv'));
SELECT put('in/blank.csv', convert_to(E'id,,v\n1,5,1\n', 'UTF8'));
SELECT reconcile_stage_objects('st', 'land', one('in/blank.csv'));
-- A staged relation without the columns staging fills.
CREATE TABLE st_bare (id text, name text, v text);
SELECT reconcile_stage_objects('st_bare', 'land', one('in/a.csv'));
-- Typed staged columns: a value that does not cast refuses the call (the
-- loader casts text staging columns and rejects there instead).
CREATE TABLE st_typed (object_key text, source_row int, id int, name text, v int);
SELECT reconcile_stage_objects('st_typed', 'land', one('in/plain.csv'), '{"header": false}') -> 0 -> 'rows';
SELECT * FROM st_typed ORDER BY source_row;
SELECT put('in/typed_bad.csv', convert_to(E'id,name,v\nabc,x,1\n', 'UTF8'));
SELECT reconcile_stage_objects('st_typed', 'land', one('in/typed_bad.csv'));
-- Plain tables take the direct path (as COPY writes): their constraints
-- and unique indexes hold.  A view or a table with a trigger is staged
-- through INSERT, so its rules and triggers run.
CREATE TABLE st_checked (object_key text NOT NULL, source_row bigint, id text CHECK (id <> '6'), name text, v text);
CREATE UNIQUE INDEX ON st_checked (object_key, source_row);
SELECT reconcile_stage_objects('st_checked', 'land', one('in/plain.csv'), '{"header": false}');
SELECT reconcile_stage_objects('st_checked', 'land', one('in/semi.txt'), '{"header": false, "delimiter": ";", "quote": "''"}') -> 0 -> 'rows';
SELECT reconcile_stage_objects('st_checked', 'land', one('in/semi.txt'), '{"header": false, "delimiter": ";", "quote": "''"}');
SELECT count(*) FROM st_checked;
CREATE VIEW st_view AS SELECT * FROM st;
SELECT reconcile_stage_objects('st_view', 'land', one('in/semi.txt'), '{"header": false, "columns": ["id", "name", "v"], "delimiter": ";", "quote": "''"}') -> 0 -> 'rows';
SELECT object_key, source_row, id, name FROM st ORDER BY source_row;
TRUNCATE st;
CREATE TABLE st_trig (LIKE st);
CREATE FUNCTION shout() RETURNS trigger LANGUAGE plpgsql AS $$ BEGIN NEW.name := upper(NEW.name); RETURN NEW; END $$;
CREATE TRIGGER shout BEFORE INSERT ON st_trig FOR EACH ROW EXECUTE FUNCTION shout();
SELECT reconcile_stage_objects('st_trig', 'land', one('in/semi.txt'), '{"header": false, "columns": ["id", "name", "v"], "delimiter": ";", "quote": "''"}') -> 0 -> 'rows';
SELECT source_row, id, name FROM st_trig ORDER BY source_row;
DROP VIEW st_view;
DROP TABLE st_checked, st_trig;
DROP FUNCTION shout();
-- Another encoding is converted by COPY.
SELECT put('in/latin1.csv', '\x69642c6e616d652c760a34302c4a6f73e92c310a'::bytea);
SELECT reconcile_stage_objects('st', 'land', one('in/latin1.csv'), '{"encoding": "LATIN1"}') -> 0 -> 'rows';
SELECT id, name FROM st;
TRUNCATE st;

-- Privileges: USAGE on the server and pg_read_server_files for reading,
-- INSERT on the staged relation, INSERT on the target to record rejects.
CREATE ROLE stager;
GRANT USAGE ON FOREIGN SERVER land TO stager;
GRANT SELECT ON st TO stager;
SET ROLE stager;
SELECT reconcile_stage_objects('st', 'land', one('in/a.csv'));
RESET ROLE;
GRANT pg_read_server_files TO stager;
SET ROLE stager;
SELECT reconcile_stage_objects('st', 'land', one('in/a.csv'));
RESET ROLE;
GRANT INSERT ON st TO stager;
SET ROLE stager;
SELECT reconcile_stage_objects('st', 'land', one('in/a.csv')) -> 0 -> 'rows';
SELECT reconcile_stage_objects('st', 'land', one('in/bad.csv'), '{"target": "t"}');
RESET ROLE;
REVOKE USAGE ON FOREIGN SERVER land FROM stager;
SET ROLE stager;
SELECT reconcile_stage_objects('st', 'land', one('in/a.csv'));
RESET ROLE;

COPY (SELECT 1) TO PROGRAM 'rm -rf /tmp/reconcile_objects_stage /tmp/reconcile_objects_stage_out; cat >/dev/null';
DROP EXTENSION reconcile CASCADE;
DROP TABLE st, st_bare, st_typed, t;
DROP FUNCTION put(text, bytea), one(text);
DROP OWNED BY stager;
DROP ROLE stager;
