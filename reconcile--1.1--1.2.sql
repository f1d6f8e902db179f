-- reconcile 1.1 -> 1.2
\echo Use "ALTER EXTENSION reconcile UPDATE TO '1.2'" to load this file. \quit

-- ---------------------------------------------------------------------
-- Staging from object storage and server files (issue 22): the
-- foreign-data wrapper reconcile_objects (a validator only, as
-- dblink_fdw) whose servers are S3 buckets or server directories, and
-- listing their object versions.  USAGE on a server is the right to read
-- it; credentials live in user mappings.
-- ---------------------------------------------------------------------
CREATE FUNCTION reconcile.objects_validator(options pg_catalog.text[], catalog pg_catalog.oid)
RETURNS void
AS 'MODULE_PATHNAME', 'reconcile_objects_validator'
LANGUAGE C STRICT;
COMMENT ON FUNCTION reconcile.objects_validator(pg_catalog.text[], pg_catalog.oid) IS
    'validator of the options of wrapper reconcile_objects, its servers and user mappings';

CREATE FOREIGN DATA WRAPPER reconcile_objects VALIDATOR reconcile.objects_validator;
COMMENT ON FOREIGN DATA WRAPPER reconcile_objects IS
    'object stores (S3 API) and server directories that reconcile lists and stages from';

CREATE FUNCTION reconcile_list_objects(
    server pg_catalog.name,
    prefix pg_catalog.text DEFAULT '',
    options pg_catalog.jsonb DEFAULT '{}')
RETURNS TABLE (
    object_key        pg_catalog.text,
    version_id        pg_catalog.text,
    size              pg_catalog.int8,
    etag              pg_catalog.text,
    last_modified     pg_catalog.timestamptz,
    is_latest         pg_catalog.bool,
    is_delete_marker  pg_catalog.bool)
AS 'MODULE_PATHNAME', 'reconcile_list_objects'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION reconcile_list_objects(pg_catalog.name, pg_catalog.text, pg_catalog.jsonb) IS
    'one row per object version of a reconcile_objects server (S3 bucket or server directory); options: start_after, versions, max_keys, max_retries';

-- Staging object versions (issue 22): each object's bytes hashed as they
-- arrive, parsed (CSV through COPY's parser, JSON lines), one staged row
-- per source row; returns the manifest of what was read.
CREATE FUNCTION reconcile_stage_objects(
    staged pg_catalog.regclass,
    server pg_catalog.name,
    objects pg_catalog.jsonb,
    options pg_catalog.jsonb DEFAULT '{}')
RETURNS pg_catalog.jsonb
AS 'MODULE_PATHNAME', 'reconcile_stage_objects'
LANGUAGE C VOLATILE;
COMMENT ON FUNCTION reconcile_stage_objects(pg_catalog.regclass, pg_catalog.name, pg_catalog.jsonb, pg_catalog.jsonb) IS
    'stages object versions of a reconcile_objects server and returns their manifest (bytes hashed, rows counted); options: format, compression, header, delimiter, quote, escape, null, encoding, force_null, columns, operation, unknown_columns, max_rejects, max_reject_share, max_retries, target';

-- One call from the listing to the receipt (issue 22), and what each
-- batch read from object storage, per object version: the cutover check
-- "objects actually read" is a query on reconcile.object_reads.  Rows go
-- with their receipt (a dropped target's receipts take them along).
CREATE TABLE reconcile.object_reads (
    batch_id      pg_catalog.text NOT NULL,
    target        pg_catalog.regclass NOT NULL,
    server        pg_catalog.name NOT NULL,
    object_key    pg_catalog.text NOT NULL,
    version_id    pg_catalog.text NOT NULL,
    etag          pg_catalog.text,
    size          pg_catalog.int8 NOT NULL,
    content_hash  pg_catalog.text NOT NULL,
    "rows"        pg_catalog.int8 NOT NULL,
    read_at       pg_catalog.timestamptz NOT NULL DEFAULT pg_catalog.now(),
    PRIMARY KEY (target, batch_id, object_key, version_id),
    FOREIGN KEY (target, batch_id) REFERENCES reconcile.receipts ON DELETE CASCADE
);
CREATE INDEX ON reconcile.object_reads (target, object_key, version_id);
COMMENT ON TABLE reconcile.object_reads IS
    'What reconcile_load read per object version of a batch: server, version, ETag, size in bytes, SHA-256 of the bytes, data rows.';
SELECT pg_catalog.pg_extension_config_dump('reconcile.object_reads', '');
REVOKE ALL ON reconcile.object_reads FROM PUBLIC;
GRANT SELECT ON reconcile.object_reads TO PUBLIC;
ALTER TABLE reconcile.object_reads ENABLE ROW LEVEL SECURITY;
CREATE POLICY readable_targets ON reconcile.object_reads FOR SELECT
    USING (pg_catalog.has_table_privilege(target, 'SELECT')
           AND NOT pg_catalog.row_security_active(target::pg_catalog.oid));

CREATE FUNCTION reconcile_load(
    target pg_catalog.regclass,
    server pg_catalog.name,
    prefix pg_catalog.text DEFAULT '',
    options pg_catalog.jsonb DEFAULT '{}')
RETURNS SETOF reconcile.receipt
AS 'MODULE_PATHNAME', 'reconcile_load'
LANGUAGE C CALLED ON NULL INPUT VOLATILE ROWS 1;
COMMENT ON FUNCTION reconcile_load(pg_catalog.regclass, pg_catalog.name, pg_catalog.text, pg_catalog.jsonb) IS
    'Lists a reconcile_objects server after the cursor, stages the new object versions and runs reconcile_batch in one transaction; returns its receipt (none when nothing is new). options: staged, source, start_after, latest_only, the listing options, the staging options and the load options.';
