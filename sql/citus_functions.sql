-- The functions a batch merged on the Citus workers calls per staged row
-- (src/loader/citus_merge.c), checked on one node: the payload hash equals the one
-- a plain batch writes (payload.c), for every kind of text form; the cast
-- follows the settings passed in, not the session's; objects, limbs.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;
CREATE TABLE cf_target (id int PRIMARY KEY, d date, ts timestamptz, iv interval, f float8,
                        n numeric, b bytea, j jsonb, r regclass, t text,
                        version bigint NOT NULL, deleted boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('cf_target', '{id}', 'version', 'deleted', 'h');
CREATE TABLE cf_stage (object_key text, source_row bigint, operation text, id int, version bigint,
                       d date, ts timestamptz, iv interval, f float8, n numeric, b bytea, j jsonb,
                       r regclass, t text);
SET DateStyle = 'SQL, DMY';
SET TimeZone = 'Asia/Kolkata';
SET IntervalStyle = 'sql_standard';
SET extra_float_digits = 0;
SET bytea_output = 'escape';
INSERT INTO cf_stage VALUES
  ('o', 1, 'UPSERT', 1, 1, '03/04/2020', '2020-01-01 12:00', '1 2:03:04', 0.1, 1.50, '\x00ff', '{"a": [1, "x"]}', 'pg_class', 'q"\'),
  ('o', 2, 'UPSERT', 2, 1, NULL, NULL, NULL, 'NaN', NULL, NULL, NULL, NULL, E'tab\there'),
  ('o', 3, 'DELETE', 3, 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL);
SELECT status, inserted, deleted FROM reconcile_batch('cf_target', 'cf_stage',
  '[{"object_key":"o","version_id":"1","content_hash":"h","rows":3}]');
-- the workers' hash of the staged values, under these same odd settings
SELECT s.id, t.h = reconcile_citus_hash(s.operation = 'DELETE', s.d, s.ts, s.iv, s.f, s.n, s.b, s.j, s.r, s.t) AS same_hash
  FROM cf_stage s JOIN cf_target t USING (id) ORDER BY 1;
-- a cast reads with the settings given, whatever the session's
SELECT reconcile_citus_input('03/04/2020'::text, NULL::date, -1, '{"ISO, DMY",postgres,UTC,1,hex}') AS dmy,
       reconcile_citus_input('03/04/2020'::text, NULL::date, -1, '{"ISO, MDY",postgres,UTC,1,hex}') AS mdy,
       reconcile_citus_input('2020-01-01 12:00'::text, NULL::timestamptz, -1, '{ISO,postgres,America/New_York,1,hex}')
         = '2020-01-01 17:00+00' AS tz,
       reconcile_citus_input('-1 2:00:00'::text, NULL::interval, -1, '{ISO,sql_standard,UTC,1,hex}')
         = reconcile_citus_input('-1 -2:00:00'::text, NULL::interval, -1, '{ISO,postgres,UTC,1,hex}') AS interval_style,
       reconcile_citus_input('12.345'::text, NULL::numeric, 262150, '{ISO,postgres,UTC,1,hex}') AS typmod;
-- what does not read is NULL; a non-text value is read through its text form
SELECT reconcile_citus_input('v?'::text, NULL::bigint, -1, '{ISO,postgres,UTC,1,hex}') IS NULL AS bad,
       reconcile_citus_input(NULL::text, NULL::bigint, -1, '{ISO,postgres,UTC,1,hex}') IS NULL AS null_in,
       reconcile_citus_input(42::int, NULL::text, -1, '{ISO,postgres,UTC,1,hex}') AS from_int,
       reconcile_citus_text('2020-04-03'::date, '{"SQL, DMY",postgres,UTC,1,hex}') AS as_caller;
-- the settings must be five
SELECT reconcile_citus_input('1'::text, NULL::int, -1, '{ISO}');
-- the manifest entry of a row: bytewise, by key and version
SELECT reconcile_citus_object('b', '2', '{a,b,b,c}', '{1,1,2,1}') AS b2,
       reconcile_citus_object('b', NULL, '{a,b,c}', '{1,1,1}') AS b_any,
       reconcile_citus_object('B', NULL, '{a,b,c}', '{1,1,1}') AS upper;
-- limbs of a hash; a staged hash parsed
SELECT reconcile_citus_limb('\x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20'::bytea, 0) AS l0,
       reconcile_citus_limb('\x0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f20'::bytea, 7) AS l7,
       reconcile_citus_limb('\x01'::bytea, 0) AS short;
SELECT encode(reconcile_citus_staged_hash('sha256:' || repeat('ab', 32)), 'hex') = repeat('ab', 32) AS prefixed,
       reconcile_citus_staged_hash('nothex'::text) IS NULL AS bad_text,
       reconcile_citus_staged_hash('\x0102'::bytea) IS NULL AS short_bytea;
RESET ALL;
DROP TABLE cf_target, cf_stage;
DROP EXTENSION reconcile;
