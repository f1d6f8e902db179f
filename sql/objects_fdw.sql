-- Object stores and server directories as foreign servers of the wrapper
-- reconcile_objects: every option the validator accepts and refuses, the
-- privileges (USAGE, pg_read_server_files), secrets kept out of messages,
-- and the listing of a server directory (regular files only, content
-- hashes as version ids, prefix and start_after).
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

-- Good servers of both kinds, and a user mapping.
CREATE SERVER s3_ok FOREIGN DATA WRAPPER reconcile_objects
    OPTIONS (endpoint 'http://127.0.0.1:9000', region 'us-east-1', bucket 'crm', url_style 'path');
CREATE SERVER s3_aws FOREIGN DATA WRAPPER reconcile_objects
    OPTIONS (region 'eu-west-1', bucket 'my.bucket-01', url_style 'virtual', ca_file '/etc/ssl/certs/ca-certificates.crt');
CREATE SERVER s3_ipv6 FOREIGN DATA WRAPPER reconcile_objects
    OPTIONS (endpoint 'https://[::1]:9000/', bucket 'crm');
CREATE USER MAPPING FOR CURRENT_USER SERVER s3_ok
    OPTIONS (access_key_id 'AKIDEXAMPLE', secret_access_key 'S3CRET-never-shown');
CREATE USER MAPPING FOR PUBLIC SERVER s3_aws;
SELECT srvname, srvoptions FROM pg_foreign_server WHERE srvname LIKE 's3_%' ORDER BY 1;

-- Options that do not exist, or not in that place.
CREATE SERVER bad FOREIGN DATA WRAPPER reconcile_objects OPTIONS (bucket 'crm', host 'x');
CREATE SERVER bad FOREIGN DATA WRAPPER reconcile_objects OPTIONS (bucket 'crm', access_key_id 'AKID');
ALTER FOREIGN DATA WRAPPER reconcile_objects OPTIONS (endpoint 'http://x');
CREATE USER MAPPING FOR PUBLIC SERVER s3_ok OPTIONS (bucket 'crm');
CREATE USER MAPPING FOR PUBLIC SERVER s3_ok OPTIONS (password 'S3CRET-never-shown');
-- Values refused, never echoed.
CREATE SERVER bad FOREIGN DATA WRAPPER reconcile_objects OPTIONS (bucket 'crm', endpoint 'ftp://127.0.0.1');
CREATE SERVER bad FOREIGN DATA WRAPPER reconcile_objects OPTIONS (bucket 'crm', endpoint 'http://');
CREATE SERVER bad FOREIGN DATA WRAPPER reconcile_objects OPTIONS (bucket 'crm', endpoint 'http://h/bucket?x=1');
CREATE SERVER bad FOREIGN DATA WRAPPER reconcile_objects OPTIONS (bucket 'crm', endpoint 'http://user:pw@h');
CREATE SERVER bad FOREIGN DATA WRAPPER reconcile_objects OPTIONS (bucket 'CRM');
CREATE SERVER bad FOREIGN DATA WRAPPER reconcile_objects OPTIONS (bucket 'ab');
CREATE SERVER bad FOREIGN DATA WRAPPER reconcile_objects OPTIONS (bucket 'crm/../x');
CREATE SERVER bad FOREIGN DATA WRAPPER reconcile_objects OPTIONS (bucket '-crm');
CREATE SERVER bad FOREIGN DATA WRAPPER reconcile_objects OPTIONS (bucket 'crm', region '');
CREATE SERVER bad FOREIGN DATA WRAPPER reconcile_objects OPTIONS (bucket 'crm', region 'us east');
CREATE SERVER bad FOREIGN DATA WRAPPER reconcile_objects OPTIONS (bucket 'crm', url_style 'PATH');
CREATE SERVER bad FOREIGN DATA WRAPPER reconcile_objects OPTIONS (bucket 'crm', ca_file 'ca.pem');
CREATE SERVER bad FOREIGN DATA WRAPPER reconcile_objects OPTIONS (directory 'landing');
CREATE SERVER bad FOREIGN DATA WRAPPER reconcile_objects OPTIONS (directory '/srv/landing', bucket 'crm');
CREATE SERVER bad FOREIGN DATA WRAPPER reconcile_objects OPTIONS (directory '/srv/landing', endpoint 'http://h');
CREATE SERVER bad FOREIGN DATA WRAPPER reconcile_objects OPTIONS (endpoint 'http://h');
CREATE SERVER bad FOREIGN DATA WRAPPER reconcile_objects;
ALTER SERVER s3_ok OPTIONS (DROP bucket);
ALTER SERVER s3_ok OPTIONS (ADD directory '/srv/landing');
ALTER SERVER s3_ok OPTIONS (SET region 'nowhere!');
CREATE USER MAPPING FOR PUBLIC SERVER s3_ok OPTIONS (access_key_id 'AKID');
CREATE USER MAPPING FOR PUBLIC SERVER s3_ok OPTIONS (secret_access_key 'S3CRET-never-shown');
CREATE USER MAPPING FOR PUBLIC SERVER s3_ok OPTIONS (access_key_id '', secret_access_key 'S3CRET-never-shown');
ALTER USER MAPPING FOR CURRENT_USER SERVER s3_ok OPTIONS (SET secret_access_key '');
ALTER USER MAPPING FOR CURRENT_USER SERVER s3_ok OPTIONS (DROP access_key_id);
-- Nothing of the above changed the server or its mapping.
SELECT srvoptions FROM pg_foreign_server WHERE srvname = 's3_ok';
SELECT count(*) FROM pg_user_mappings WHERE srvname = 's3_ok';

-- Privileges: a role with USAGE on the wrapper may create S3 servers, but
-- neither a directory server nor a ca_file without pg_read_server_files;
-- reading a server takes USAGE on it, and a directory pg_read_server_files.
CREATE ROLE objects_owner;
CREATE ROLE objects_reader;
GRANT USAGE ON FOREIGN DATA WRAPPER reconcile_objects TO objects_owner;
GRANT CREATE ON SCHEMA public TO objects_owner;
SET ROLE objects_owner;
CREATE SERVER owned_s3 FOREIGN DATA WRAPPER reconcile_objects OPTIONS (endpoint 'http://127.0.0.1:1', bucket 'crm');
CREATE SERVER owned_dir FOREIGN DATA WRAPPER reconcile_objects OPTIONS (directory '/etc');
CREATE SERVER owned_ca FOREIGN DATA WRAPPER reconcile_objects OPTIONS (bucket 'crm', ca_file '/etc/passwd');
ALTER SERVER owned_s3 OPTIONS (ADD ca_file '/etc/passwd');
RESET ROLE;
SET ROLE objects_reader;
SELECT * FROM reconcile_list_objects('owned_s3');
RESET ROLE;
GRANT USAGE ON FOREIGN SERVER owned_s3 TO objects_reader;
-- With USAGE, the read goes to the endpoint (nothing listens on port 1).
SET ROLE objects_reader;
SELECT * FROM reconcile_list_objects('owned_s3', '', '{"max_retries": 0}');
RESET ROLE;
-- Servers that are not the wrapper's, or do not exist.
CREATE FOREIGN DATA WRAPPER other_fdw;
CREATE SERVER other_srv FOREIGN DATA WRAPPER other_fdw;
SELECT * FROM reconcile_list_objects('other_srv');
SELECT * FROM reconcile_list_objects('no_such_server');
SELECT * FROM reconcile_list_objects(NULL);
-- Listing options.
SELECT * FROM reconcile_list_objects('s3_ok', '', '[]');
SELECT * FROM reconcile_list_objects('s3_ok', '', '{"max_keys": 0}');
SELECT * FROM reconcile_list_objects('s3_ok', '', '{"max_keys": "10"}');
SELECT * FROM reconcile_list_objects('s3_ok', '', '{"max_retries": 21}');
SELECT * FROM reconcile_list_objects('s3_ok', '', '{"versions": "yes"}');
SELECT * FROM reconcile_list_objects('s3_ok', '', '{"start_after": 5}');
SELECT * FROM reconcile_list_objects('s3_ok', '', '{"page": 5}');

-- A server directory, made through the server (it writes as its own OS user).
COPY (SELECT 1) TO PROGRAM 'rm -rf /tmp/reconcile_objects_regress && mkdir -p /tmp/reconcile_objects_regress/land/crm/2026 /tmp/reconcile_objects_regress/outside && cd /tmp/reconcile_objects_regress && ln -s ../outside land/crm/linked_dir && echo secret > outside/secret.csv && ln -s ../../outside/secret.csv land/crm/link.csv && mkfifo land/crm/pipe.csv && cat >/dev/null';
COPY (SELECT 'id,name' UNION ALL SELECT '1,Ana') TO '/tmp/reconcile_objects_regress/land/crm/a.csv';
COPY (SELECT 'id,name' UNION ALL SELECT '2,Bo') TO '/tmp/reconcile_objects_regress/land/crm/2026/b c%é.csv';
COPY (SELECT '') TO '/tmp/reconcile_objects_regress/land/crm/empty.csv';
COPY (SELECT 'top') TO '/tmp/reconcile_objects_regress/land/top.txt';
CREATE SERVER land FOREIGN DATA WRAPPER reconcile_objects OPTIONS (directory '/tmp/reconcile_objects_regress/land');
-- Regular files only (no symbolic link, fifo or linked directory), in key
-- order; the version id is the SHA-256 of the content.
SELECT object_key, size, etag, is_latest, is_delete_marker,
       version_id = encode(sha256(pg_read_binary_file('/tmp/reconcile_objects_regress/land/' || object_key)), 'hex') AS version_is_hash,
       last_modified > now() - interval '1 hour' AS recent
FROM reconcile_list_objects('land');
SELECT object_key FROM reconcile_list_objects('land', 'crm/2');
SELECT object_key FROM reconcile_list_objects('land', 'crm/', '{"start_after": "crm/a.csv"}');
SELECT object_key FROM reconcile_list_objects('land', 'nothing/');
-- A changed content is a new version id.
SELECT version_id AS v1 FROM reconcile_list_objects('land', 'crm/a.csv') \gset
COPY (SELECT 'id,name' UNION ALL SELECT '1,Ann') TO '/tmp/reconcile_objects_regress/land/crm/a.csv';
SELECT version_id <> :'v1' AS changed FROM reconcile_list_objects('land', 'crm/a.csv');
-- A directory server needs pg_read_server_files to be read, even with USAGE.
GRANT USAGE ON FOREIGN SERVER land TO objects_reader;
SET ROLE objects_reader;
SELECT * FROM reconcile_list_objects('land');
RESET ROLE;
GRANT pg_read_server_files TO objects_reader;
SET ROLE objects_reader;
SELECT count(*) FROM reconcile_list_objects('land');
RESET ROLE;
-- A directory that is gone.
CREATE SERVER gone FOREIGN DATA WRAPPER reconcile_objects OPTIONS (directory '/tmp/reconcile_objects_regress/nothing');
SELECT * FROM reconcile_list_objects('gone');

-- No message above carried the secret; the catalog keeps it for the
-- mapping's owner only (pg_user_mappings hides it from others).
SET ROLE objects_reader;
SELECT umoptions FROM pg_user_mappings WHERE srvname = 's3_ok';
RESET ROLE;

COPY (SELECT 1) TO PROGRAM 'rm -rf /tmp/reconcile_objects_regress; cat >/dev/null';
DROP SERVER owned_s3 CASCADE;
DROP SERVER other_srv;
DROP FOREIGN DATA WRAPPER other_fdw;
DROP EXTENSION reconcile CASCADE;
REVOKE CREATE ON SCHEMA public FROM objects_owner;
DROP ROLE objects_owner;
DROP ROLE objects_reader;
