-- The manifest benchmark's data: :objects objects of one staged row each.
-- psql -v objects=N -v form=jsonb|table -f setup.sql
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS reconcile CASCADE;
DROP TABLE IF EXISTS bench_target, bench_stage, bench_manifest;
CREATE EXTENSION reconcile;
CREATE TABLE bench_target (id bigint PRIMARY KEY, version bigint NOT NULL, name text,
                           is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea);
SELECT reconcile_register(target => 'bench_target', key_columns => '{id}',
    version_column => 'version', deleted_column => 'is_deleted', hash_column => 'payload_hash');
-- With -v form=table, the manifest is a table of one entry per row
-- (reconcile_batch_table), which has no 256 MB bound.
SELECT :'form' = 'table' AS table_form \gset
\if :table_form
CREATE TABLE bench_manifest_rows AS
SELECT format('bench/%s/part-%s.csv', i % 97, lpad(i::text, 8, '0')) AS object_key,
       'v' || i AS version_id,
       'sha256:' || encode(sha256(int8send(i)), 'hex') AS content_hash,
       1::bigint AS "rows"
  FROM generate_series(1, :objects) AS i;
VACUUM ANALYZE bench_manifest_rows;
SELECT false AS too_big \gset
\else
-- The manifest as a client sends it: a 64-digit content hash per object.
-- One jsonb holds at most 256 MB (268435455 bytes): a larger manifest is
-- refused here from the size of its last 1,000 entries, rather than after
-- building gigabytes of it in memory as jsonb_agg would.
SELECT (SELECT pg_column_size(jsonb_agg(jsonb_build_object(
           'object_key', format('bench/%s/part-%s.csv', i % 97, lpad(i::text, 8, '0')),
           'version_id', 'v' || i,
           'content_hash', 'sha256:' || encode(sha256(int8send(i)), 'hex'),
           'rows', 1)))
          FROM generate_series(greatest(:objects - 999, 1), :objects) AS i)::numeric
       / least(:objects, 1000) * :objects AS manifest_bytes \gset
SELECT :manifest_bytes > 268435455 AS too_big \gset
\if :too_big
CREATE FUNCTION pg_temp.refuse(objects bigint, mb numeric) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'a manifest of % objects takes about % MB: one jsonb holds at most 256 MB', objects, mb;
END $$;
SELECT pg_temp.refuse(:objects, round(:manifest_bytes / 1048576));
\endif
\endif
\if :table_form
\else
CREATE TABLE bench_manifest AS
SELECT jsonb_agg(jsonb_build_object(
           'object_key', format('bench/%s/part-%s.csv', i % 97, lpad(i::text, 8, '0')),
           'version_id', 'v' || i,
           'content_hash', 'sha256:' || encode(sha256(int8send(i)), 'hex'),
           'rows', 1)) AS manifest
  FROM generate_series(1, :objects) AS i;
\endif
CREATE TABLE bench_stage (object_key text, source_row bigint, operation text,
                          id bigint, version bigint, name text);
INSERT INTO bench_stage
SELECT format('bench/%s/part-%s.csv', i % 97, lpad(i::text, 8, '0')), 1, 'UPSERT', i, 1, 'n' || i
  FROM generate_series(1, :objects) AS i;
VACUUM ANALYZE bench_stage;
\if :table_form
SELECT pg_size_pretty(pg_total_relation_size('bench_manifest_rows')) AS manifest_size,
       count(*) AS objects FROM bench_manifest_rows;
\else
SELECT pg_size_pretty(pg_column_size(manifest)::bigint) AS manifest_size,
       jsonb_array_length(manifest) AS objects FROM bench_manifest;
\endif
