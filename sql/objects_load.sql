-- reconcile_load from a server directory: list after the cursor, stage
-- into a relation of its own, batch, and keep what was read; nothing new
-- is no batch; a rewind to the start is a replay; a late rewind loads the
-- later objects again as a new batch that changes nothing; rows that do
-- not parse are rejects of the batch; a failed batch moves no cursor;
-- every malformed argument.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;
\set d '/tmp/reconcile_objects_load'
COPY (SELECT 1) TO PROGRAM 'rm -rf /tmp/reconcile_objects_load && mkdir -p /tmp/reconcile_objects_load/crm /tmp/reconcile_objects_load/other && cat >/dev/null';
CREATE FUNCTION put(name text, content text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('COPY (SELECT %L) TO PROGRAM %L', translate(encode(convert_to(content, 'UTF8'), 'base64'), E'\n', ''),
                   'base64 -d > /tmp/reconcile_objects_load/' || name);
END $$;
CREATE SERVER land FOREIGN DATA WRAPPER reconcile_objects OPTIONS (directory '/tmp/reconcile_objects_load');
CREATE TABLE customer (id int PRIMARY KEY, name text, version bigint NOT NULL,
                       gone boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('customer', '{id}', 'version', 'gone', 'h');

SELECT put('crm/p1.csv', E'id,name,version\n1,Ana,1\n2,Bo,1\n');
SELECT status, inserted, updated, staged_rows FROM reconcile_load('customer', 'land', 'crm/');
SELECT id, name, version FROM customer ORDER BY id;
-- What was read, beside the receipt; the cursor is the listing position.
SELECT r.object_key, r.server, r.size, r.rows, r.etag IS NULL AS no_etag,
       r.content_hash = 'sha256:' || encode(sha256(pg_read_binary_file(:'d' || '/' || r.object_key)), 'hex') AS hash_ok,
       r.version_id = encode(sha256(pg_read_binary_file(:'d' || '/' || r.object_key)), 'hex') AS version_ok,
       r.batch_id = c.batch_id AS batch_of_cursor
  FROM reconcile.object_reads r JOIN reconcile.cursors c USING (target) ORDER BY 1;
SELECT source, position FROM reconcile.cursors WHERE target = 'customer'::regclass;
-- Nothing new: no batch, no row, the cursor where it was.
SELECT count(*) FROM reconcile_load('customer', 'land', 'crm/');
SELECT count(*) AS receipts FROM reconcile.receipts WHERE target = 'customer'::regclass;
-- A new object: only it is staged.
SELECT put('crm/p2.csv', E'id,name,version\n2,Bob,2\n3,Cy,1\n');
SELECT status, inserted, updated, staged_rows FROM reconcile_load('customer', 'land', 'crm/');
SELECT batch_id = (SELECT batch_id FROM reconcile.cursors WHERE target = 'customer'::regclass) AS latest, string_agg(object_key, ',')
  FROM reconcile.object_reads GROUP BY batch_id ORDER BY 1;
-- A rewind to the start lists both objects again: each batch that read
-- them is replayed from its receipt, nothing is read or written, and the
-- cursor stays.  A rewind to after p1 replays the second batch alone.
CREATE TABLE files_before AS SELECT count(*) AS n FROM reconcile.object_reads;
SELECT status, inserted, updated, unchanged, stale, staged_rows FROM reconcile_load('customer', 'land', 'crm/', '{"start_after": null}');
SELECT status, inserted, updated FROM reconcile_load('customer', 'land', 'crm/', '{"start_after": "crm/p1.csv"}');
SELECT (SELECT count(*) FROM reconcile.object_reads) = n AS nothing_read FROM files_before;
SELECT position FROM reconcile.cursors WHERE target = 'customer'::regclass;
-- A late replay of an older version: p1 written again as it was is the
-- same version (its content hash): a replay; a p1 with other content is
-- a new version, a new batch after the cursor only when listed from
-- before it, and its stale row changes nothing.
SELECT put('crm/p1.csv', E'id,name,version\n1,Ana,1\n2,Bo,1\n');
SELECT status FROM reconcile_load('customer', 'land', 'crm/', '{"start_after": null}');
SELECT put('crm/p1.csv', E'id,name,version\n1,Ana,1\n2,Bo old,1\n');
SELECT count(*) FROM reconcile_load('customer', 'land', 'crm/');
SELECT status, inserted, updated, unchanged, stale, conflicts FROM reconcile_load('customer', 'land', 'crm/', '{"start_after": null}');
SELECT put('crm/p1.csv', E'id,name,version\n1,Ana,1\n2,Bo,1\n');
SELECT id, name, version FROM customer ORDER BY id;
SELECT count(*) AS receipts FROM reconcile.receipts WHERE target = 'customer'::regclass;

-- Rows that do not parse are rejects of the batch, with their raw line.
SELECT put('crm/p3.csv', E'id,name,version\n4,Di,1\n5,too,many,1\n6,Ed,x\n');
SELECT status, inserted, rejected, staged_rows FROM reconcile_load('customer', 'land', 'crm/');
SELECT source_row, column_name, raw_value, regexp_replace(reason, '"[0-9a-f]{64}"', '"…"') AS reason
  FROM reconcile.rejects WHERE target = 'customer'::regclass
   AND batch_id = (SELECT batch_id FROM reconcile.cursors WHERE target = 'customer'::regclass)
 ORDER BY source_row, column_name NULLS FIRST, reason;
-- Beyond the reject limit: the batch fails, nothing is written, the
-- cursor stays.
SELECT put('crm/p4.csv', E'id,name,version\n7,Flo,1\n8\n');
SELECT * FROM reconcile_load('customer', 'land', 'crm/', '{"max_rejects": 0}');
SELECT position FROM reconcile.cursors WHERE target = 'customer'::regclass;
SELECT count(*) FROM customer WHERE id = 7;
SELECT status, inserted, rejected FROM reconcile_load('customer', 'land', 'crm/', '{"max_rejects": 1}');

-- The cutover check: every listed version was read by some batch.
SELECT l.object_key FROM reconcile_list_objects('land', 'crm/') l
  LEFT JOIN reconcile.object_reads r ON r.target = 'customer'::regclass
       AND r.object_key = l.object_key AND r.version_id = l.version_id
 WHERE r.object_key IS NULL;

-- A staged relation named in the options, latest_only, another source.
CREATE TABLE customer_shadow (id int PRIMARY KEY, name text, version bigint NOT NULL,
                              gone boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('customer_shadow', '{id}', 'version', 'gone', 'h');
CREATE TABLE shadow_stage (object_key text, version_id text, source_row bigint, operation text,
                           id text, name text, version text);
SELECT status, inserted, rejected, staged_rows FROM reconcile_load('customer_shadow', 'land', 'crm/',
    '{"staged": "shadow_stage", "source": "shadow", "max_rejects": 5, "latest_only": true}');
SELECT count(*) AS stage_rows FROM shadow_stage;
SELECT source, position FROM reconcile.cursors WHERE target = 'customer_shadow'::regclass;
-- The shadow target holds what the main one holds.
SELECT id, name, version FROM customer EXCEPT SELECT id, name, version FROM customer_shadow;

-- Malformed arguments.
SELECT * FROM reconcile_load(NULL, 'land', 'crm/');
SELECT * FROM reconcile_load('customer', NULL, 'crm/');
SELECT * FROM reconcile_load('customer', 'no_such_server', 'crm/');
SELECT * FROM reconcile_load('customer', 'land', 'crm/', '[]');
SELECT * FROM reconcile_load('customer', 'land', 'crm/', '{"colour": "red"}');
SELECT * FROM reconcile_load('customer', 'land', 'crm/', '{"staged": ""}');
SELECT * FROM reconcile_load('customer', 'land', 'crm/', '{"staged": "no_such_stage", "start_after": null}');
SELECT * FROM reconcile_load('customer', 'land', 'crm/', '{"latest_only": "yes"}');
SELECT * FROM reconcile_load('customer', 'land', 'crm/', '{"start_after": 5}');
SELECT * FROM reconcile_load('customer', 'land', 'crm/', '{"max_keys": 0}');
SELECT * FROM reconcile_load('customer', 'land', 'crm/', '{"format": "xml", "start_after": null}');
SELECT * FROM reconcile_load('customer', 'land', 'crm/', '{"max_rejects": "x", "start_after": null}');
CREATE TABLE unregistered (id int PRIMARY KEY);
SELECT * FROM reconcile_load('unregistered', 'land', 'crm/');

COPY (SELECT 1) TO PROGRAM 'rm -rf /tmp/reconcile_objects_load; cat >/dev/null';
DROP EXTENSION reconcile CASCADE;
DROP TABLE customer, customer_shadow, shadow_stage, unregistered, files_before;
DROP FUNCTION put(text, text);
