-- pgTAP: the payload hash of the same values is the same in every session,
-- whatever settings change the session's text forms (DateStyle, TimeZone,
-- IntervalStyle, extra_float_digits, bytea_output, search_path).
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION reconcile;
SELECT plan(7);

CREATE SCHEMA other;
CREATE TABLE other.thing ();
CREATE TABLE hs (id integer PRIMARY KEY, ts timestamp, ttz timetz, f4 real, iv interval, rc regclass, rt regtype,
    version integer NOT NULL, del boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('hs', '{id}', 'version', 'del', 'h');
CREATE TABLE hs_stage (object_key text, source_row integer, operation text, id integer, ts timestamp, ttz timetz,
    f4 real, iv interval, rc regclass, rt regtype, version integer);
CREATE TYPE other.mood AS ENUM ('ok');
INSERT INTO hs_stage
    SELECT 'h/' || n, 1, 'UPSERT', n, '2024-03-01 10:00:00', '10:00:00+02', 0.1, '1 year 2 days 03:04:05',
           'other.thing', 'other.mood', 1
    FROM generate_series(1, 2) AS n;

SELECT is((SELECT inserted FROM reconcile_batch('hs', 'hs_stage',
    '[{"object_key":"h/1","version_id":"1","content_hash":"x","rows":1}]')), 1::bigint, 'row 1 loaded with default settings');
SET LOCAL DateStyle = 'Postgres, DMY';
SET LOCAL TimeZone = 'Asia/Tokyo';
SET LOCAL IntervalStyle = 'sql_standard';
SET LOCAL extra_float_digits = 0;
SET LOCAL search_path = other, public;
SELECT is((SELECT inserted FROM reconcile_batch('hs', 'hs_stage',
    '[{"object_key":"h/2","version_id":"1","content_hash":"x","rows":1}]')), 1::bigint, 'row 2 loaded under other settings');
RESET DateStyle;
RESET TimeZone;
RESET IntervalStyle;
RESET extra_float_digits;
RESET search_path;

SELECT is((SELECT h FROM hs WHERE id = 2), (SELECT h FROM hs WHERE id = 1),
    'the same payload has the same hash under another DateStyle, TimeZone, IntervalStyle, extra_float_digits and search_path');
SELECT is((SELECT h FROM hs WHERE id = 1),
    sha256(convert_to('["2024-03-01 10:00:00","10:00:00+02","0.1","1 year 2 days 03:04:05","other.thing","other.mood",false]', 'UTF8')),
    'the hash is of the documented form');

-- Without the reg* columns, the other settings alone (the stage's reg*
-- columns are not hs2's: the registration accepts and ignores them).
CREATE TABLE hs2 (id integer PRIMARY KEY, ts timestamp, ttz timetz, f4 real, iv interval,
    version integer NOT NULL, del boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('hs2', '{id}', 'version', 'del', 'h', options => '{"unknown_columns": "ignore"}');
SELECT is((SELECT inserted FROM reconcile_batch('hs2', 'hs_stage',
    '[{"object_key":"h/1","version_id":"2","content_hash":"x","rows":1}]')), 1::bigint, 'hs2 row 1');
SET LOCAL DateStyle = 'Postgres, DMY';
SET LOCAL TimeZone = 'Asia/Tokyo';
SET LOCAL IntervalStyle = 'sql_standard';
SET LOCAL extra_float_digits = 0;
SELECT is((SELECT inserted FROM reconcile_batch('hs2', 'hs_stage',
    '[{"object_key":"h/2","version_id":"2","content_hash":"x","rows":1}]')), 1::bigint, 'hs2 row 2 under other settings');
SELECT is((SELECT h FROM hs2 WHERE id = 2), (SELECT h FROM hs2 WHERE id = 1),
    'timestamp, timetz, real and interval hash alike under other settings');

SELECT * FROM finish();
ROLLBACK;
