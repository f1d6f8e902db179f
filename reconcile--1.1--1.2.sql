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
    'one row per object version of a reconcile_objects server (S3 bucket or server directory)';

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
    'stages object versions of a reconcile_objects server and returns their manifest (bytes hashed, rows counted)';
