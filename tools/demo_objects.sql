-- reconcile demo, part 2, run by tools/demo.sh after tools/demo.sql when the
-- local S3 API (moto) is available: the same feed read from a bucket by the
-- database itself.  The psql variable endpoint is the S3 API's URL; the
-- environment's S3_CLI the AWS CLI command line that \! uploads with.
\echo
\echo '== 7. From a bucket: list, stage, hash and batch in one call'
CREATE SERVER landing FOREIGN DATA WRAPPER reconcile_objects
    OPTIONS (endpoint :'endpoint', region 'us-east-1', bucket 'crm', url_style 'path');
CREATE USER MAPPING FOR CURRENT_USER SERVER landing
    OPTIONS (access_key_id 'demo', secret_access_key 'demo');
CREATE TABLE customer_bucket (LIKE customer_state INCLUDING ALL);
SELECT reconcile_register('customer_bucket', '{customer_id}', 'version', 'is_deleted', 'payload_hash');
SELECT object_key, left(version_id, 8) AS version, size, is_latest FROM reconcile_list_objects('landing', 'crm/');
SELECT status, staged_rows AS staged, inserted, updated, stale, duplicates, rejected
  FROM reconcile_load('customer_bucket', 'landing', 'crm/');
\echo 'What was read, per object version (the bytes hashed by the database):'
SELECT object_key, left(version_id, 8) AS version, size, rows, left(content_hash, 19) AS content_hash
  FROM reconcile.object_reads ORDER BY object_key;
\echo 'The malformed version, with its object, version and row:'
SELECT object_key, source_row, column_name, raw_value FROM reconcile.rejects
 WHERE target = 'customer_bucket'::regclass;

\echo '== 8. A new object lands; the next (scheduled) load reads only it'
\! printf 'customer_id,version,name\nC1,3,Ana Smith\n' | $S3_CLI cp --quiet - s3://crm/crm/part-0002.csv
SELECT status, staged_rows AS staged, inserted, updated FROM reconcile_load('customer_bucket', 'landing', 'crm/');
SELECT count(*) AS nothing_new FROM reconcile_load('customer_bucket', 'landing', 'crm/');

\echo '== 9. Rewind the cursor: both batches replayed from their receipts, nothing downloaded'
SELECT status, staged_rows AS staged, inserted, updated
  FROM reconcile_load('customer_bucket', 'landing', 'crm/', '{"start_after": null}');

\echo '== 10. A late replay: part-0001 is written again; its new version is read and changes nothing'
\! printf 'customer_id,version,name\nC1,2,Ana Lee\nC2,1,Dev\nC2,1,Dev\nC3,v2?,Eve\nC1,1,Ana\n' | $S3_CLI cp --quiet - s3://crm/crm/part-0001.csv
SELECT object_key, left(version_id, 8) AS version, is_latest FROM reconcile_list_objects('landing', 'crm/');
SELECT status, staged_rows AS staged, inserted, updated, unchanged, stale, duplicates, rejected
  FROM reconcile_load('customer_bucket', 'landing', 'crm/', '{"start_after": null}');

\echo '== 11. Cutover: every listed object version was read'
SELECT count(*) AS listed_not_read FROM reconcile_list_objects('landing', 'crm/') l
  LEFT JOIN reconcile.object_reads r ON r.target = 'customer_bucket'::regclass
       AND r.object_key = l.object_key
       AND r.version_id = coalesce(nullif(l.version_id, 'null'), l.etag)   -- unversioned: the ETag
 WHERE NOT l.is_delete_marker AND r.object_key IS NULL;
SELECT customer_id, name, version FROM customer_bucket ORDER BY 1;
