-- Keys stored with pinned settings (issue 19, defect 6): every key and value
-- reconcile writes as text into a state table (reconcile.conflicts, and so
-- reconcile.resolutions; reconcile.rejects; reconcile.diff_results) is
-- written in a form independent of the session, and a held key reads back
-- as exactly that key in any other session.  Each case writes under one
-- set of settings and reads or resolves under another.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

-- ---- the issue's example: a date key, DMY at the batch, MDY at the resolution ----
CREATE TABLE dk (d date PRIMARY KEY, name text, v bigint NOT NULL,
                 gone boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('dk', '{d}', 'v', 'gone', 'h');
CREATE TABLE dk_stage (object_key text, source_row int, operation text,
                       d date, name text, v bigint);
INSERT INTO dk VALUES ('2024-02-01', 'February', 1), ('2024-01-02', 'January', 1);
INSERT INTO dk_stage VALUES ('o1', 1, 'UPSERT', '2024-02-01', 'Feb A', 2),
                            ('o1', 2, 'UPSERT', '2024-02-01', 'Feb B', 2);
SET datestyle = 'SQL, DMY';
SELECT status, conflicts FROM reconcile_batch('dk', 'dk_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h","rows":2}]');
SELECT batch_id AS dk_batch FROM reconcile.receipts WHERE target = 'dk'::regclass \gset
SET datestyle = 'SQL, MDY';
-- Held as an ISO date, whatever the session's DateStyle.
SELECT DISTINCT key, key_pinned FROM reconcile.conflicts WHERE target = 'dk'::regclass;
-- The owner resolves the key as reconcile.conflicts shows it.
SELECT status, outcome FROM reconcile_resolve('dk', :'dk_batch',
    (SELECT DISTINCT key FROM reconcile.conflicts WHERE target = 'dk'::regclass),
    (SELECT staged_hash FROM reconcile.conflicts WHERE target = 'dk'::regclass
      AND staged_payload->>'name' = 'Feb B'));
-- 2024-02-01 has the chosen payload; 2024-01-02 is untouched.
SET datestyle = ISO;
SELECT d, name, v FROM dk ORDER BY d;
SELECT key, outcome FROM reconcile.resolutions WHERE target = 'dk'::regclass;

-- The same with a float key held under extra_float_digits 0, resolved
-- under the default (1).
CREATE TABLE fk (f double precision PRIMARY KEY, name text, v bigint NOT NULL,
                 gone boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('fk', '{f}', 'v', 'gone', 'h');
CREATE TABLE fk_stage (object_key text, source_row int, operation text,
                       f double precision, name text, v bigint);
INSERT INTO fk VALUES (0.1::float8 + 0.2::float8, 'sum', 1), (0.3, 'three tenths', 1);
INSERT INTO fk_stage VALUES ('o1', 1, 'UPSERT', 0.1::float8 + 0.2::float8, 'sum A', 2),
                            ('o1', 2, 'UPSERT', 0.1::float8 + 0.2::float8, 'sum B', 2);
SET extra_float_digits = 0;
SELECT status, conflicts FROM reconcile_batch('fk', 'fk_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h","rows":2}]');
RESET extra_float_digits;
SELECT DISTINCT key FROM reconcile.conflicts WHERE target = 'fk'::regclass;
SELECT status, outcome FROM reconcile_resolve('fk',
    (SELECT batch_id FROM reconcile.receipts WHERE target = 'fk'::regclass),
    (SELECT DISTINCT key FROM reconcile.conflicts WHERE target = 'fk'::regclass),
    (SELECT staged_hash FROM reconcile.conflicts WHERE target = 'fk'::regclass
      AND staged_payload->>'name' = 'sum B'));
SELECT f = 0.1::float8 + 0.2::float8 AS is_the_sum, name, v FROM fk ORDER BY f;

-- ---- every key type at once, a composite key, and a -0 payload ----
CREATE TABLE mk (d date, ts timestamp, tz timestamptz, f4 real, f8 double precision,
                 n numeric, iv interval, x double precision, v bigint NOT NULL,
                 gone boolean NOT NULL DEFAULT false, h bytea,
                 PRIMARY KEY (d, ts, tz, f4, f8, n, iv));
SELECT reconcile_register('mk', '{d,ts,tz,f4,f8,n,iv}', 'v', 'gone', 'h');
CREATE TABLE mk_stage (object_key text, source_row int, operation text,
                       d date, ts timestamp, tz timestamptz, f4 real, f8 double precision,
                       n numeric, iv interval, x double precision, v bigint);
-- The key's values, typed (so the same values whatever the session):
-- a float8 and a float4 with more digits than extra_float_digits 0 writes,
-- an interval that sql_standard writes as '-1 2:00:00', an instant at a
-- half-hour offset.
CREATE VIEW the_key AS
    SELECT date '2024-02-01' AS d, timestamp '2024-02-03 04:05:06.789' AS ts,
           timestamptz '2024-02-01 09:00:00+00' AS tz,
           real '1.0000001' AS f4, 0.1::float8 + 0.2::float8 AS f8,
           numeric '1.50' AS n, interval '-1 day -2 hours' AS iv;
-- Rows whose keys the wrong reading of the_key's text would name.
CREATE VIEW near_keys AS
    SELECT date '2024-01-02' AS d, ts, tz, f4, f8, n, iv FROM the_key
    UNION ALL SELECT d, ts, tz, f4, 0.3::float8, n, iv FROM the_key
    UNION ALL SELECT d, ts, tz, real '1', f8, n, iv FROM the_key
    UNION ALL SELECT d, ts, tz, f4, f8, n, interval '-1 day 2 hours' FROM the_key;
INSERT INTO mk SELECT d, ts, tz, f4, f8, n, iv, 7, 1 FROM the_key;
INSERT INTO mk SELECT d, ts, tz, f4, f8, n, iv, 100, 1 FROM near_keys;

-- Settings of the write and of the read: each pair differs in every one.
CREATE TABLE setting_pairs (pair int, write_settings text[], read_settings text[]);
INSERT INTO setting_pairs VALUES
  (1, '{SQL\, DMY,0,sql_standard,Asia/Kolkata}', '{SQL\, MDY,3,postgres,America/New_York}'),
  (2, '{German,0,iso_8601,America/New_York}', '{SQL\, MDY,3,sql_standard,Asia/Kolkata}'),
  (3, '{Postgres\, MDY,-15,postgres_verbose,Pacific/Chatham}', '{SQL\, DMY,0,iso_8601,UTC}');
CREATE FUNCTION apply_settings(s text[]) RETURNS void LANGUAGE sql AS $$
    SELECT set_config('datestyle', s[1], false), set_config('extra_float_digits', s[2], false),
           set_config('intervalstyle', s[3], false), set_config('timezone', s[4], false)
$$;

-- One round per pair: a batch under the write settings holds the key back
-- (two payloads at v2), the resolution under the read settings chooses one.
CREATE FUNCTION round_trip(p int) RETURNS TABLE (pair int, held_key jsonb, outcome text,
                                                 key_rows_written bigint, near_rows_written bigint)
LANGUAGE plpgsql AS $$
DECLARE
    w text[] := (SELECT write_settings FROM setting_pairs s WHERE s.pair = p);
    r text[] := (SELECT read_settings FROM setting_pairs s WHERE s.pair = p);
    manifest jsonb := jsonb_build_array(jsonb_build_object('object_key', 'p' || p,
                          'version_id', '1', 'content_hash', 'h', 'rows', 2));
    held jsonb;
    choice bytea;
    res text;
BEGIN
    UPDATE mk SET v = 1, x = 7;
    INSERT INTO mk_stage SELECT 'p' || p, 1, 'UPSERT', d, ts, tz, f4, f8, n, iv, 2 * p, 2 * p FROM the_key;
    INSERT INTO mk_stage SELECT 'p' || p, 2, 'UPSERT', d, ts, tz, f4, f8, n, iv, -0.0::float8, 2 * p FROM the_key;
    PERFORM apply_settings(w);
    PERFORM reconcile_batch('mk', 'mk_stage', manifest);
    PERFORM apply_settings(r);
    SELECT c.key, c.staged_hash INTO held, choice FROM reconcile.conflicts c
     WHERE c.object_key = 'p' || p AND c.source_row = 2;
    BEGIN
        SELECT z.outcome INTO res FROM reconcile_resolve('mk', reconcile_batch_id(manifest), held, choice) z;
    EXCEPTION WHEN OTHERS THEN
        res := 'error: ' || SQLERRM;
    END;
    RESET datestyle; RESET extra_float_digits; RESET intervalstyle; RESET timezone;
    RETURN QUERY SELECT p, held, res,
        (SELECT count(*) FROM mk JOIN the_key k USING (d, ts, tz, f4, f8, n, iv)
          WHERE mk.v = 2 * p AND mk.x::text = '-0'),
        (SELECT count(*) FROM mk JOIN near_keys k USING (d, ts, tz, f4, f8, n, iv) WHERE mk.v <> 1);
END $$;
-- Held keys are the pinned forms (the same for every pair); the resolution
-- writes the held key's row with the chosen payload, -0 kept, and no other.
SELECT r.* FROM setting_pairs s, round_trip(s.pair) r ORDER BY s.pair;
SELECT count(*) AS key_rows, count(*) FILTER (WHERE x::text = '-0') AS negative_zero_payloads
  FROM mk JOIN the_key USING (d, ts, tz, f4, f8, n, iv);
-- The held payload keeps the sign of zero too.
SELECT DISTINCT staged_payload->'x' AS held_x FROM reconcile.conflicts
 WHERE target = 'mk'::regclass AND source_row = 2;
-- reconcile.resolutions records the held key, once per batch.
SELECT count(DISTINCT key) AS distinct_keys, count(*) AS decisions
  FROM reconcile.resolutions WHERE target = 'mk'::regclass;

-- A held key that does not read back as itself is refused: the target's
-- key column changed type since the batch (timestamptz to timestamp here,
-- the held key naming an instant in UTC).
CREATE TABLE tk (t timestamptz PRIMARY KEY, name text, v bigint NOT NULL,
                 gone boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('tk', '{t}', 'v', 'gone', 'h');
CREATE TABLE tk_stage (object_key text, source_row int, operation text,
                       t timestamptz, name text, v bigint);
INSERT INTO tk_stage VALUES ('t1', 1, 'UPSERT', '2024-02-01 10:00:00+01', 'a', 1),
                            ('t1', 2, 'UPSERT', '2024-02-01 10:00:00+01', 'b', 1);
SET timezone = 'Europe/Berlin';
SELECT status, conflicts FROM reconcile_batch('tk', 'tk_stage',
    '[{"object_key":"t1","version_id":"1","content_hash":"h","rows":2}]');
SELECT key FROM reconcile.conflicts WHERE target = 'tk'::regclass AND source_row = 1;
ALTER TABLE tk ALTER COLUMN t TYPE timestamp;
\set VERBOSITY default
SELECT * FROM reconcile_resolve('tk', reconcile_batch_id('[{"object_key":"t1","version_id":"1","content_hash":"h","rows":2}]'),
    '{"t": "2024-02-01 09:00:00+00"}',
    (SELECT staged_hash FROM reconcile.conflicts WHERE target = 'tk'::regclass AND source_row = 1));
\set VERBOSITY terse
RESET timezone;

-- ---- rejects: a typed staged value that does not cast is held as the pinned text ----
CREATE TABLE rj (id int PRIMARY KEY, n int, v bigint NOT NULL,
                 gone boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('rj', '{id}', 'v', 'gone', 'h');
CREATE TABLE rj_stage (object_key text, source_row int, operation text,
                       id int, n double precision, v bigint);
INSERT INTO rj_stage VALUES ('r1', 1, 'UPSERT', 1, 0.1::float8 + 0.2::float8, 1);
SET extra_float_digits = 0;
SELECT status, rejected FROM reconcile_batch('rj', 'rj_stage',
    '[{"object_key":"r1","version_id":"1","content_hash":"h","rows":1}]');
RESET extra_float_digits;
SELECT column_name, raw_value, raw_value::float8 = 0.1::float8 + 0.2::float8 AS exact
  FROM reconcile.rejects WHERE target = 'rj'::regclass;

-- ---- diffs: findings (and reconcile.diff_results) name keys in one form ----
CREATE TABLE ds AS SELECT d, ts, tz, f4, f8, n, iv, 'a'::text AS val FROM the_key;
CREATE TABLE dt AS SELECT d, ts, tz, f4, f8, n, iv, 'b'::text AS val FROM the_key;
INSERT INTO dt SELECT d, ts, tz, f4, f8, n, iv, 'c' FROM near_keys;
CREATE FUNCTION findings_under(s text[]) RETURNS TABLE (issue text, key jsonb, sv jsonb, tv jsonb)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM apply_settings(s);
    RETURN QUERY SELECT f.issue, f.key, f.source_values, f.target_values
      FROM reconcile_diff('ds', 'dt', '{d,ts,tz,f4,f8,n,iv}', '{"compare": ["val"]}') f;
    RESET datestyle; RESET extra_float_digits; RESET intervalstyle; RESET timezone;
END $$;
-- The findings under the first pair's write settings ...
SELECT issue, key, sv, tv FROM findings_under('{SQL\, DMY,0,sql_standard,Asia/Kolkata}')
 ORDER BY issue, key::text;
-- ... are the findings under every other setting.
SELECT s.pair,
       (SELECT count(*) FROM (SELECT * FROM findings_under(s.read_settings)
                              EXCEPT SELECT * FROM findings_under('{SQL\, DMY,0,sql_standard,Asia/Kolkata}')) x)
           AS findings_differing_from_read,
       (SELECT count(*) FROM (SELECT * FROM findings_under(s.write_settings)
                              EXCEPT SELECT * FROM findings_under('{SQL\, DMY,0,sql_standard,Asia/Kolkata}')) x)
           AS findings_differing_from_write
  FROM setting_pairs s ORDER BY s.pair;
-- A diff run's stored results, written under one setting, are those the
-- other settings find.
INSERT INTO reconcile.diff_jobs (name, source, target, key_columns, options)
    VALUES ('pinned', 'public.ds', 'public.dt', '{d,ts,tz,f4,f8,n,iv}', '{"compare": ["val"]}');
SELECT apply_settings('{German,0,iso_8601,America/New_York}');
SELECT job, findings FROM reconcile_diff_run('pinned');
RESET datestyle; RESET extra_float_digits; RESET intervalstyle; RESET timezone;
SELECT count(*) AS stored_results FROM reconcile.diff_results WHERE source = 'ds'::regclass;
SELECT count(*) AS stored_not_found_elsewhere FROM (
    SELECT issue, key, source_values, target_values FROM reconcile.diff_results
     WHERE source = 'ds'::regclass
    EXCEPT SELECT * FROM findings_under('{SQL\, MDY,3,postgres,UTC}')) x;

-- ---- keys held by reconcile 1.1, in the loading session's settings ----
-- The upgrade marks the rows held before it (key_pinned false).  Such a
-- key is resolved where its text names one value whatever the settings it
-- was written under (an ISO date, a timestamptz with its numeric offset, a
-- float with more digits than extra_float_digits 0 writes, an ISO 8601 or
-- postgres-style interval), and refused with a clear error otherwise.
-- Simulated here: a held row rewritten as 1.1 wrote it.
CREATE TABLE ok (k1 date, k2 timestamptz, k3 double precision, k4 interval,
                 name text, v bigint NOT NULL, gone boolean NOT NULL DEFAULT false, h bytea,
                 PRIMARY KEY (k1, k2, k3, k4));
SELECT reconcile_register('ok', '{k1,k2,k3,k4}', 'v', 'gone', 'h');
CREATE TABLE ok_stage (object_key text, source_row int, operation text,
                       k1 date, k2 timestamptz, k3 double precision, k4 interval, name text, v bigint);
INSERT INTO ok_stage SELECT 'q', g, 'UPSERT', d, tz, f8, iv, 'n' || g, 1
  FROM the_key, generate_series(1, 2) g;
SELECT status, conflicts FROM reconcile_batch('ok', 'ok_stage',
    '[{"object_key":"q","version_id":"1","content_hash":"h","rows":2}]');
CREATE TABLE held_11 (case_no int, key_11 jsonb);
INSERT INTO held_11 VALUES
  -- names one key: written under ISO (Europe/Berlin), extra_float_digits 1, postgres
  (1, '{"k1": "2024-02-01", "k2": "2024-02-01 10:00:00+01", "k3": 0.30000000000000004, "k4": "-1 days -02:00:00"}'),
  -- the same with an ISO 8601 interval
  (2, '{"k1": "2024-02-01", "k2": "2024-02-01 14:30:00+05:30", "k3": 0.30000000000000004, "k4": "P-1DT-2H"}'),
  -- SQL, DMY: 01/02/2024 is 1 February or 2 January
  (3, '{"k1": "01/02/2024", "k2": "2024-02-01 10:00:00+01", "k3": 0.30000000000000004, "k4": "-1 days -02:00:00"}'),
  -- a zone abbreviation rather than an offset
  (4, '{"k1": "2024-02-01", "k2": "02/01/2024 10:00:00 CET", "k3": 0.30000000000000004, "k4": "-1 days -02:00:00"}'),
  -- extra_float_digits 0: 0.3 may be 0.30000000000000004
  (5, '{"k1": "2024-02-01", "k2": "2024-02-01 10:00:00+01", "k3": 0.3, "k4": "-1 days -02:00:00"}'),
  -- IntervalStyle sql_standard: -1 2:00:00 is -1 day -2 hours there, -1 day +2 hours elsewhere
  (6, '{"k1": "2024-02-01", "k2": "2024-02-01 10:00:00+01", "k3": 0.30000000000000004, "k4": "-1 2:00:00"}');
CREATE FUNCTION resolve_11(c int) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    k jsonb := (SELECT key_11 FROM held_11 WHERE case_no = c);
    res text;
BEGIN
    UPDATE reconcile.conflicts SET key = k, key_pinned = false WHERE target = 'ok'::regclass;
    SELECT outcome INTO res FROM reconcile_resolve('ok',
        reconcile_batch_id('[{"object_key":"q","version_id":"1","content_hash":"h","rows":2}]'), k,
        (SELECT staged_hash FROM reconcile.conflicts WHERE target = 'ok'::regclass AND source_row = 2));
    DELETE FROM reconcile.resolutions WHERE target = 'ok'::regclass;
    DELETE FROM ok;
    RETURN res;
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;
SELECT case_no, resolve_11(case_no) FROM held_11 ORDER BY case_no;
-- The refusal in full.
UPDATE reconcile.conflicts SET key = (SELECT key_11 FROM held_11 WHERE case_no = 3), key_pinned = false
 WHERE target = 'ok'::regclass;
\set VERBOSITY default
SELECT * FROM reconcile_resolve('ok',
    reconcile_batch_id('[{"object_key":"q","version_id":"1","content_hash":"h","rows":2}]'),
    (SELECT key_11 FROM held_11 WHERE case_no = 3),
    (SELECT staged_hash FROM reconcile.conflicts WHERE target = 'ok'::regclass AND source_row = 2));
\set VERBOSITY terse

-- A 1.1 float key is a JSON number, so its text is the number's, not the
-- float's (0.000012345678901234568 for 1.2345678901234568e-05): taken
-- when it has more digits than extra_float_digits 0 writes, refused with 15.
CREATE TABLE fe (f double precision PRIMARY KEY, name text, v bigint NOT NULL,
                 gone boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('fe', '{f}', 'v', 'gone', 'h');
CREATE TABLE fe_stage (object_key text, source_row int, operation text,
                       f double precision, name text, v bigint);
INSERT INTO fe_stage VALUES ('e', 1, 'UPSERT', 1.2345678901234567e-05, 'a', 1),
                            ('e', 2, 'UPSERT', 1.2345678901234567e-05, 'b', 1);
SELECT status, conflicts FROM reconcile_batch('fe', 'fe_stage',
    '[{"object_key":"e","version_id":"1","content_hash":"h","rows":2}]');
CREATE FUNCTION resolve_fe_11(k jsonb) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    res text;
BEGIN
    UPDATE reconcile.conflicts SET key = k, key_pinned = false WHERE target = 'fe'::regclass;
    SELECT outcome INTO res FROM reconcile_resolve('fe',
        reconcile_batch_id('[{"object_key":"e","version_id":"1","content_hash":"h","rows":2}]'), k,
        (SELECT staged_hash FROM reconcile.conflicts WHERE target = 'fe'::regclass AND source_row = 2));
    DELETE FROM reconcile.resolutions WHERE target = 'fe'::regclass;
    DELETE FROM fe;
    RETURN res;
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE;
END $$;
SELECT k, resolve_fe_11(k::jsonb) FROM (VALUES ('{"f": 0.000012345678901234568}'),
                                              ('{"f": 0.0000123456789012346}')) x(k);

DROP TABLE dk, dk_stage, fk, fk_stage, mk, mk_stage, setting_pairs, tk, tk_stage, rj, rj_stage, ds, dt,
    ok, ok_stage, held_11, fe, fe_stage CASCADE;
DROP FUNCTION apply_settings(text[]), round_trip(int), findings_under(text[]), resolve_11(int),
    resolve_fe_11(jsonb);
DROP EXTENSION reconcile;
