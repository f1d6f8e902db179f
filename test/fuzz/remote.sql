-- The other servers of the fuzz database's cross-server diffs: loaded by
-- test/fuzz/run.sh into two more databases of the same cluster, reached
-- through postgres_fdw (servers fuzz_remote and fuzz_hostile of the
-- fixture).  Both hold customer as the fixture's, with differences; in the
-- hostile one (-v hostile=1) its superuser has planted pg_catalog functions
-- and aggregates that the shipped checksum queries resolve to (array_agg,
-- width_bucket, sha256, string_agg), which by turns return NULL, arrays
-- of the wrong shape, length or keys, buckets out of range, short digests,
-- or the right answer.  Nothing from there may crash the server.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE TABLE customer (
    customer_id  bigint PRIMARY KEY,
    name         text,
    amount       numeric(12,2),
    updated_at   timestamptz,
    tags         text[],
    version      bigint NOT NULL,
    is_deleted   boolean NOT NULL DEFAULT false,
    payload_hash bytea
);
INSERT INTO customer
SELECT g, CASE WHEN g % 11 = 0 THEN NULL ELSE 'name ' || (g % 97) END, (g % 1000) / 7.0,
       timestamptz '2026-01-01 00:00+00' + g * interval '1 minute', ARRAY['t' || (g % 3)], g % 5,
       g % 13 = 0, CASE WHEN g % 2 = 0 THEN '\x01'::bytea END
FROM generate_series(1, 3000) g;
-- Values swapped between neighbouring rows, rows missing and extra.
UPDATE customer c SET name = o.name FROM customer o
WHERE c.customer_id % 20 IN (0, 1) AND o.customer_id = CASE WHEN c.customer_id % 20 = 0
      THEN c.customer_id + 1 ELSE c.customer_id - 1 END;
DELETE FROM customer WHERE customer_id % 97 = 0;
INSERT INTO customer (customer_id, name, version) SELECT 100000 + g, 'extra', 1 FROM generate_series(1, 20) g;
CREATE TABLE wide (customer_id integer, name character(8), amount real);
INSERT INTO wide SELECT g, 'w' || g, g FROM generate_series(1, 500) g;

SELECT :hostile = 1 AS hostile \gset
\if :hostile
-- One lie per statement, picked by the statement's start time: the rest of
-- the statement's answers are true, so that every check is reached.
CREATE FUNCTION pg_catalog.h_mode() RETURNS integer LANGUAGE sql AS
$$ SELECT (pg_catalog.date_part('microseconds', pg_catalog.statement_timestamp())::bigint % 12)::integer $$;
CREATE FUNCTION pg_catalog.h_agg_sf(bigint[], bigint) RETURNS bigint[] LANGUAGE sql AS $$
    SELECT CASE pg_catalog.h_mode()
        WHEN 0 THEN NULL
        WHEN 1 THEN '{{1,2},{3,4}}'::bigint[]
        WHEN 2 THEN coalesce($1, '{}') || NULL::bigint
        WHEN 3 THEN coalesce($1, '{}') || $2 || $2
        WHEN 4 THEN coalesce($1, '{}') || ($2 + 1000000)
        ELSE coalesce($1, '{}') || $2 END $$;
CREATE AGGREGATE pg_catalog.array_agg(bigint) (sfunc = pg_catalog.h_agg_sf, stype = bigint[]);
CREATE FUNCTION pg_catalog.width_bucket(bigint, bigint[]) RETURNS integer LANGUAGE sql AS $$
    SELECT CASE pg_catalog.h_mode()
        WHEN 5 THEN NULL
        WHEN 6 THEN -1
        WHEN 7 THEN 1000000
        ELSE pg_catalog.width_bucket($1::numeric, $2::numeric[]) END $$;
ALTER FUNCTION pg_catalog.sha256(bytea) RENAME TO h_sha256;
CREATE FUNCTION pg_catalog.sha256(bytea) RETURNS bytea LANGUAGE sql AS $$
    SELECT CASE pg_catalog.h_mode()
        WHEN 8 THEN NULL
        WHEN 9 THEN '\x0102'::bytea
        ELSE pg_catalog.h_sha256($1) END $$;
ALTER AGGREGATE pg_catalog.string_agg(bytea, bytea) RENAME TO h_string_agg;
CREATE FUNCTION pg_catalog.h_sagg_sf(bytea, bytea, bytea) RETURNS bytea LANGUAGE sql AS $$
    SELECT CASE pg_catalog.h_mode()
        WHEN 10 THEN $1
        WHEN 11 THEN coalesce($1, '\x00') || $2 || '\x00'
        ELSE coalesce($1 || $3, '\x') || $2 END $$;
CREATE AGGREGATE pg_catalog.string_agg(bytea, bytea) (sfunc = pg_catalog.h_sagg_sf, stype = bytea);
\endif
