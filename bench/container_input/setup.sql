-- :values staged rows, each with one bad value in a column whose type
-- runs user code on input (a composite, an array and a range over a
-- domain whose CHECK calls a PL/pgSQL function).  As sql/loader_container_input.sql.
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS reconcile CASCADE;
DROP TABLE IF EXISTS ci_target, ci_stage;
DROP TYPE IF EXISTS ci_span, ci_pair;
DROP DOMAIN IF EXISTS ci_count;
CREATE EXTENSION reconcile;
CREATE OR REPLACE FUNCTION ci_positive(n integer) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF n = 0 THEN
        RAISE EXCEPTION 'zero is not a count' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN n > 0;
END $$;
CREATE DOMAIN ci_count AS integer CHECK (ci_positive(VALUE));
CREATE TYPE ci_pair AS (n ci_count, label text);
CREATE TYPE ci_span AS RANGE (subtype = ci_count);
CREATE TABLE ci_target (id integer PRIMARY KEY, version bigint NOT NULL,
                        deleted boolean NOT NULL DEFAULT false, hash bytea,
                        pair ci_pair, counts ci_count[], span ci_span, pairs ci_pair[]);
SELECT reconcile_register('ci_target', '{id}', 'version', 'deleted', 'hash');
CREATE TABLE ci_stage (object_key text, source_row bigint, operation text, id text,
                       version text, pair text, counts text, span text, pairs text);
INSERT INTO ci_stage
SELECT 'o', g, 'UPSERT', g::text, '1',
       CASE g % 4 WHEN 0 THEN '(0,a)' ELSE '(1,a)' END,
       CASE g % 4 WHEN 1 THEN '{1,0}' ELSE '{1}' END,
       CASE g % 4 WHEN 2 THEN '[0,5)' ELSE '[1,5)' END,
       CASE g % 4 WHEN 3 THEN '{"(-1,b)"}' ELSE '{}' END
  FROM generate_series(1, :values) AS g;
CREATE TABLE ci_manifest AS
SELECT jsonb_build_array(jsonb_build_object('object_key', 'o', 'version_id', '1',
                                            'content_hash', 'h', 'rows', :values)) AS manifest;
