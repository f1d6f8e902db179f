-- reconcile 1.1 -> 1.2
\echo Use "ALTER EXTENSION reconcile UPDATE TO '1.2'" to load this file. \quit

-- ---- Citus: batches merged on the workers (issue 21) ----
-- Functions the Citus workers call per staged row in a batch's pushed-down
-- statements (src/citus_merge.c); nothing else calls them.  They write
-- nothing.  The casts take the caller's DateStyle, IntervalStyle, TimeZone,
-- extra_float_digits and bytea_output as a constant text[] and pin them,
-- since Citus does not carry session settings to the workers.
CREATE FUNCTION reconcile_citus_input(value "any", "like" anyelement, typmod pg_catalog.int4,
                                      settings pg_catalog.text[])
RETURNS anyelement
AS 'MODULE_PATHNAME', 'reconcile_citus_input'
LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION reconcile_citus_text(value "any", settings pg_catalog.text[])
RETURNS pg_catalog.text
AS 'MODULE_PATHNAME', 'reconcile_citus_text'
LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION reconcile_citus_hash(is_delete pg_catalog.bool, VARIADIC "any")
RETURNS pg_catalog.bytea
AS 'MODULE_PATHNAME', 'reconcile_citus_hash'
LANGUAGE C STABLE PARALLEL SAFE;
CREATE FUNCTION reconcile_citus_staged_hash(value "any")
RETURNS pg_catalog.bytea
AS 'MODULE_PATHNAME', 'reconcile_citus_staged_hash'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
CREATE FUNCTION reconcile_citus_object(object_key pg_catalog.text, version_id pg_catalog.text,
                                       object_keys pg_catalog.text[], version_ids pg_catalog.text[])
RETURNS pg_catalog.int4
AS 'MODULE_PATHNAME', 'reconcile_citus_object'
LANGUAGE C IMMUTABLE PARALLEL SAFE;
CREATE FUNCTION reconcile_citus_limb(h pg_catalog.bytea, i pg_catalog.int4)
RETURNS pg_catalog.int8
AS 'MODULE_PATHNAME', 'reconcile_citus_limb'
LANGUAGE C IMMUTABLE STRICT PARALLEL SAFE;
COMMENT ON FUNCTION reconcile_citus_input("any", anyelement, pg_catalog.int4, pg_catalog.text[]) IS
  'Citus workers, in a batch merged there: the value in like''s type through its text form, under the caller''s settings given; NULL when it does not read';
COMMENT ON FUNCTION reconcile_citus_text("any", pg_catalog.text[]) IS
  'Citus workers, in a batch merged there: the value''s text form under the caller''s settings given (a reject''s raw value)';
COMMENT ON FUNCTION reconcile_citus_hash(pg_catalog.bool, "any") IS
  'Citus workers, in a batch merged there: the payload hash of the values given (as a plain batch computes it)';
COMMENT ON FUNCTION reconcile_citus_staged_hash("any") IS
  'Citus workers, in a batch merged there: a staged payload_hash as 32 bytes, NULL when it is no SHA-256 digest';
COMMENT ON FUNCTION reconcile_citus_object(pg_catalog.text, pg_catalog.text, pg_catalog.text[], pg_catalog.text[]) IS
  'Citus workers, in a batch merged there: the index of the manifest entry a staged row belongs to, or NULL';
COMMENT ON FUNCTION reconcile_citus_limb(pg_catalog.bytea, pg_catalog.int4) IS
  'Citus workers, in a batch merged there: a 32-bit limb of a hash, for the receipt''s checksum';
