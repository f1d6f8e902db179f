-- Keys stored with pinned settings, at random (issue 19, defect 6): random
-- composite keys (date, float8, interval, timestamptz, numeric) are held
-- back by batches run under random DateStyle, extra_float_digits,
-- IntervalStyle and TimeZone settings, and each is resolved under other
-- random settings.  The documented rule is the model: a resolution writes
-- the chosen payload into the held key's own row and into no other.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

CREATE TABLE settings (id int PRIMARY KEY, datestyle text, efd int, intervalstyle text, timezone text);
INSERT INTO settings VALUES
  (0, 'ISO, MDY', 1, 'postgres', 'UTC'),
  (1, 'SQL, DMY', 0, 'sql_standard', 'Asia/Kolkata'),
  (2, 'SQL, MDY', 3, 'postgres_verbose', 'America/St_Johns'),
  (3, 'German', -15, 'iso_8601', 'Pacific/Chatham'),
  (4, 'Postgres, DMY', 0, 'sql_standard', 'Europe/Berlin'),
  (5, 'Postgres, MDY', 2, 'iso_8601', 'America/New_York'),
  (6, 'ISO, DMY', -4, 'postgres', 'Australia/Lord_Howe'),
  (7, 'SQL, YMD', 1, 'sql_standard', 'Pacific/Kiritimati');
CREATE FUNCTION apply_settings(s int) RETURNS void LANGUAGE sql AS $$
    SELECT set_config('datestyle', datestyle, false), set_config('extra_float_digits', efd::text, false),
           set_config('intervalstyle', intervalstyle, false), set_config('timezone', timezone, false)
      FROM settings WHERE id = s
$$;

CREATE TABLE rk (d date, f double precision, iv interval, tz timestamptz, n numeric,
                 name text, v bigint NOT NULL, gone boolean NOT NULL DEFAULT false, h bytea,
                 PRIMARY KEY (d, f, iv, tz, n));
SELECT reconcile_register('rk', '{d,f,iv,tz,n}', 'v', 'gone', 'h');
CREATE TABLE rk_stage (object_key text, source_row int, operation text,
                       d date, f double precision, iv interval, tz timestamptz, n numeric,
                       name text, v bigint);

-- The keys, drawn so that a wrong reading lands elsewhere: days of month
-- up to 12 (day and month swap), floats with 17 digits, intervals of
-- mixed signs, instants to the microsecond; write and read settings differ.
SELECT setseed(0.19);
CREATE TABLE rk_keys AS
SELECT i,
       make_date(1990 + (random() * 40)::int, 1 + (random() * 11)::int, 1 + (random() * 11)::int) AS d,
       (random() - 0.5) * power(10, floor(random() * 12) - 4) AS f,
       make_interval(months => (random() * 30 - 15)::int, days => (random() * 20 - 10)::int,
                     hours => (random() * 48 - 24)::int, secs => round((random() * 100)::numeric, 3)::float8) AS iv,
       timestamptz '2000-01-01 00:00:00+00' + random() * interval '9000 days' AS tz,
       round((random() * 1000)::numeric, (random() * 4)::int) AS n,
       w, (w + 1 + (random() * 6)::int) % 8 AS r
  FROM (SELECT i, (random() * 7.999)::int AS w FROM generate_series(1, 240) i) g;
SELECT count(*) AS keys, count(DISTINCT (d, f, iv, tz, n)) AS distinct_keys,
       count(*) FILTER (WHERE w = r) AS same_settings FROM rk_keys;

INSERT INTO rk SELECT d, f, iv, tz, n, 'orig', 1 FROM rk_keys;
INSERT INTO rk_stage SELECT 'g' || w, 2 * i - 1, 'UPSERT', d, f, iv, tz, n, 'A' || i, 2 FROM rk_keys
    UNION ALL SELECT 'g' || w, 2 * i, 'UPSERT', d, f, iv, tz, n, 'B' || i, 2 FROM rk_keys;

CREATE FUNCTION manifest(w int) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_array(jsonb_build_object('object_key', 'g' || w, 'version_id', '1',
        'content_hash', 'h', 'rows', (SELECT count(*) FROM rk_stage WHERE object_key = 'g' || w)))
$$;
CREATE FUNCTION reset_settings() RETURNS void LANGUAGE sql AS $$
    SELECT set_config('datestyle', 'ISO, MDY', false), set_config('extra_float_digits', '1', false),
           set_config('intervalstyle', 'postgres', false), set_config('timezone', 'UTC', false)
$$;

-- Each group of keys is loaded under its write settings ...
CREATE TABLE loads (w int, conflicts bigint);
DO $$
DECLARE
    g int;
BEGIN
    FOR g IN SELECT DISTINCT w FROM rk_keys ORDER BY 1 LOOP
        PERFORM apply_settings(g);
        INSERT INTO loads SELECT g, b.conflicts FROM reconcile_batch('rk', 'rk_stage', manifest(g)) b;
        PERFORM reset_settings();
    END LOOP;
END $$;
SELECT sum(conflicts) AS held_rows FROM loads;

-- ... and each key resolved, choosing 'B', under its read settings.
CREATE TABLE outcomes (i int, outcome text);
DO $$
DECLARE
    k record;
    held jsonb;
    choice bytea;
    res text;
BEGIN
    FOR k IN SELECT * FROM rk_keys ORDER BY i LOOP
        SELECT c.key, c.staged_hash INTO held, choice FROM reconcile.conflicts c
         WHERE c.target = 'rk'::regclass AND c.object_key = 'g' || k.w AND c.source_row = 2 * k.i;
        PERFORM apply_settings(k.r);
        BEGIN
            SELECT z.outcome INTO res
              FROM reconcile_resolve('rk', reconcile_batch_id(manifest(k.w)), held, choice) z;
        EXCEPTION WHEN OTHERS THEN
            res := SQLSTATE || ': ' || SQLERRM;
        END;
        PERFORM reset_settings();
        INSERT INTO outcomes VALUES (k.i, res);
    END LOOP;
END $$;

-- Every resolution updated its own key's row ...
SELECT outcome, count(*) FROM outcomes GROUP BY 1 ORDER BY 1;
-- ... so every key's row has its own chosen payload, and no row is new.
SELECT count(*) AS target_rows,
       count(*) FILTER (WHERE rk.name = 'B' || k.i AND rk.v = 2) AS own_payload,
       count(*) FILTER (WHERE k.i IS NULL) AS rows_of_no_key
  FROM rk LEFT JOIN rk_keys k USING (d, f, iv, tz, n);
-- The held keys name the keys exactly: each reads back, under the pinned
-- form, as its key's values.
SELECT count(*) AS held_keys_not_their_key FROM reconcile.conflicts c JOIN rk_keys k
    ON c.object_key = 'g' || k.w AND c.source_row = 2 * k.i
 WHERE (c.key->>'d')::date IS DISTINCT FROM k.d
    OR (c.key->>'f')::float8 IS DISTINCT FROM k.f
    OR (c.key->>'n')::numeric IS DISTINCT FROM k.n
    OR c.key->>'iv' IS DISTINCT FROM k.iv::text
    OR (c.key->>'tz')::timestamptz IS DISTINCT FROM k.tz;

DROP TABLE settings, rk, rk_stage, rk_keys, loads, outcomes;
DROP FUNCTION apply_settings(int), manifest(int), reset_settings();
DROP EXTENSION reconcile;
