-- A diff between timestamp and timestamptz columns gives the same
-- findings under every session TimeZone: the timestamp side is read as
-- UTC unless the option "time_zone" says otherwise; windows and cutoffs
-- on such columns too.
CREATE EXTENSION reconcile;
SET TimeZone = 'UTC';

-- The source keeps naive UTC times, the target the same instants.
CREATE TABLE tz_src (id integer PRIMARY KEY, at timestamp, d date, v text);
CREATE TABLE tz_tgt (id integer PRIMARY KEY, at timestamptz, d timestamptz, v text);
INSERT INTO tz_src
SELECT i, timestamp '2026-11-01 00:00' + i * interval '7 minutes', date '2026-11-01' + i % 30, 'x'
FROM generate_series(1, 5922) i;
INSERT INTO tz_tgt
SELECT id, at AT TIME ZONE 'UTC', d::timestamp AT TIME ZONE 'UTC', v FROM tz_src;
-- Three real differences: a changed instant, a missing and an extra row.
UPDATE tz_tgt SET at = at + interval '1 hour' WHERE id = 10;
DELETE FROM tz_tgt WHERE id = 20;
INSERT INTO tz_tgt VALUES (9000, '2026-12-01 00:00+00', '2026-12-01 00:00+00', 'y');
-- A key of timestamp against one of timestamptz.
CREATE TABLE tzk_src (at timestamp PRIMARY KEY, v text);
CREATE TABLE tzk_tgt (at timestamptz PRIMARY KEY, v text);
INSERT INTO tzk_src SELECT at, v FROM tz_src WHERE id <= 100;
INSERT INTO tzk_tgt SELECT at, v FROM tz_tgt WHERE id <= 100;
-- A source keeping New York wall-clock times, told with "time_zone".
CREATE TABLE tz_ny (id integer PRIMARY KEY, at timestamp, d date, v text);
INSERT INTO tz_ny SELECT id, at AT TIME ZONE 'America/New_York', d, v FROM tz_tgt WHERE id <> 9000;

CREATE TABLE tz_findings (zone text, call text, issue text, key text, columns text[],
                          source_values text, target_values text);
CREATE TABLE tz_counts (zone text, call text, counts text);

-- Every call, findings as text, under the session's zone.
CREATE FUNCTION tz_record() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    z text := current_setting('TimeZone');
BEGIN
    INSERT INTO tz_findings SELECT z, 'at', issue, key::text, columns, source_values::text, target_values::text
      FROM reconcile_diff('tz_src', 'tz_tgt', '{id}', '{"compare": ["at", "v"]}');
    INSERT INTO tz_findings SELECT z, 'date', issue, key::text, columns, source_values::text, target_values::text
      FROM reconcile_diff('tz_src', 'tz_tgt', '{id}', '{"compare": ["d"]}');
    INSERT INTO tz_findings SELECT z, 'key', issue, key::text, columns, source_values::text, target_values::text
      FROM reconcile_diff('tzk_src', 'tzk_tgt', '{at}');
    INSERT INTO tz_findings SELECT z, 'window', issue, key::text, columns, source_values::text, target_values::text
      FROM reconcile_diff('tz_src', 'tz_tgt', '{id}',
           '{"compare": ["v"], "updated_column": "at", "window": ["2026-11-01 01:00", "2026-11-01 02:00"]}');
    INSERT INTO tz_findings SELECT z, 'cutoff', issue, key::text, columns, source_values::text, target_values::text
      FROM reconcile_diff('tz_src', 'tz_tgt', '{id}',
           '{"compare": ["v"], "updated_column": "at", "window": [null, "2026-11-02 00:00"], "cutoff": "source_max"}');
    INSERT INTO tz_findings SELECT z, 'date window', issue, key::text, columns, source_values::text, target_values::text
      FROM reconcile_diff('tz_src', 'tz_tgt', '{id}',
           '{"compare": ["v"], "updated_column": "d", "window": ["2026-11-05", "2026-11-05 12:00"]}');
    INSERT INTO tz_counts SELECT z, 'summary date window', s::text
      FROM reconcile_diff_summary('tz_src', 'tz_tgt', '{id}',
           '{"compare": ["v"], "updated_column": "d", "window": ["2026-11-05", "2026-11-05 12:00"]}') s;
    INSERT INTO tz_counts SELECT z, 'summary', s::text
      FROM reconcile_diff_summary('tz_src', 'tz_tgt', '{id}', '{"compare": ["at", "v"]}') s;
    INSERT INTO tz_counts SELECT z, 'summary window', s::text
      FROM reconcile_diff_summary('tz_src', 'tz_tgt', '{id}',
           '{"compare": ["v"], "updated_column": "at", "window": ["2026-11-01 01:00", "2026-11-01 02:00"]}') s;
    INSERT INTO tz_counts SELECT z, 'run ' || job, format('%s %s %s %s %s %s', rows_source, rows_target,
                                  matched, missing_in_target, extra_in_target, mismatched)
      FROM reconcile_diff_run();
END $$;
INSERT INTO reconcile.diff_jobs VALUES
    ('tz_at', 'public.tz_src', 'public.tz_tgt', '{id}', '{"compare": ["at", "v"]}'),
    ('tz_window', 'public.tz_src', 'public.tz_tgt', '{id}',
     '{"compare": ["v"], "updated_column": "at", "window": ["2026-11-01 01:00", "2026-11-01 02:00"], "cutoff": "source_max"}');

SET TimeZone = 'UTC';
SELECT tz_record();
SET TimeZone = 'America/New_York';
SELECT tz_record();
SET TimeZone = 'Asia/Kathmandu';
SELECT tz_record();
RESET TimeZone;

-- The counts, once per zone: the same in all three.
SELECT call, zone, counts FROM tz_counts ORDER BY call, zone;
SELECT call, count(DISTINCT counts) AS distinct_counts FROM tz_counts GROUP BY call ORDER BY call;
-- The findings under UTC; the other zones give exactly the same rows.
SELECT call, issue, key, columns, source_values, target_values
FROM tz_findings WHERE zone = 'UTC' ORDER BY call, issue, key;
SELECT z.zone, count(*) AS differing_findings
FROM (SELECT DISTINCT zone FROM tz_findings) z
CROSS JOIN LATERAL (
    (SELECT call, issue, key, columns, source_values, target_values FROM tz_findings WHERE zone = z.zone
     EXCEPT ALL
     SELECT call, issue, key, columns, source_values, target_values FROM tz_findings WHERE zone = 'UTC')
    UNION ALL
    (SELECT call, issue, key, columns, source_values, target_values FROM tz_findings WHERE zone = 'UTC'
     EXCEPT ALL
     SELECT call, issue, key, columns, source_values, target_values FROM tz_findings WHERE zone = z.zone)) d
GROUP BY z.zone ORDER BY z.zone;

-- "time_zone" names the zone of the naive side: New York wall-clock
-- times against their instants match under every session zone.
SET TimeZone = 'UTC';
SELECT issue, key, source_values, target_values
FROM reconcile_diff('tz_ny', 'tz_tgt', '{id}', '{"compare": ["at"], "time_zone": "America/New_York"}');
SELECT matched, missing_in_target, extra_in_target, mismatched
FROM reconcile_diff_summary('tz_ny', 'tz_tgt', '{id}', '{"compare": ["at"], "time_zone": "America/New_York"}');
SET TimeZone = 'Asia/Kathmandu';
SELECT issue, key, source_values, target_values
FROM reconcile_diff('tz_ny', 'tz_tgt', '{id}', '{"compare": ["at"], "time_zone": "America/New_York"}');
SELECT matched, missing_in_target, extra_in_target, mismatched
FROM reconcile_diff_summary('tz_ny', 'tz_tgt', '{id}', '{"compare": ["at"], "time_zone": "America/New_York"}');
-- Read as UTC, the same New York times are all five hours off.
SELECT matched, mismatched FROM reconcile_diff_summary('tz_ny', 'tz_tgt', '{id}', '{"compare": ["at"]}');
RESET TimeZone;

-- Window bounds on a timestamptz column without an offset are read in
-- the diff's time zone (UTC unless "time_zone"); with one, as written.
CREATE TABLE tzw_src (id integer PRIMARY KEY, at timestamptz);
CREATE TABLE tzw_tgt (id integer PRIMARY KEY, at timestamptz);
INSERT INTO tzw_src VALUES (1, '2026-11-10 00:30+00'), (2, '2026-11-10 04:30+00'), (3, '2026-11-10 05:30+00');
SET TimeZone = 'America/New_York';
SELECT issue, key FROM reconcile_diff('tzw_src', 'tzw_tgt', '{id}',
    '{"updated_column": "at", "window": ["2026-11-10 00:00", "2026-11-10 01:00"]}');
SELECT issue, key FROM reconcile_diff('tzw_src', 'tzw_tgt', '{id}',
    '{"updated_column": "at", "window": ["2026-11-10 00:00", "2026-11-10 01:00"], "time_zone": "America/New_York"}');
SELECT issue, key FROM reconcile_diff('tzw_src', 'tzw_tgt', '{id}',
    '{"updated_column": "at", "window": ["2026-11-10 00:00-05", "2026-11-10 01:00-05"]}');
SET TimeZone = 'Asia/Kathmandu';
SELECT issue, key FROM reconcile_diff('tzw_src', 'tzw_tgt', '{id}',
    '{"updated_column": "at", "window": ["2026-11-10 00:00", "2026-11-10 01:00"]}');
-- The session's own TimeZone is left as it was, also after an error.
SHOW TimeZone;
SELECT issue, key FROM reconcile_diff('tzw_src', 'tzw_tgt', '{id}',
    '{"updated_column": "at", "window": ["2026-11-10 25:00", null], "time_zone": "America/New_York"}');
SHOW TimeZone;
RESET TimeZone;

-- Bad time zones.
SELECT * FROM reconcile_diff('tz_src', 'tz_tgt', '{id}', '{"time_zone": "Mars/Olympus"}');
SELECT * FROM reconcile_diff('tz_src', 'tz_tgt', '{id}', '{"time_zone": 5}');
SELECT * FROM reconcile_diff('tz_src', 'tz_tgt', '{id}', '{"time_zone": ""}');
-- A name that is also an abbreviation: timezone() would take 'CET' as the
-- fixed +01 all year while bounds are read with CET's summer time, so it is
-- refused; a name whose offset never changes ('EST', 'UTC') is one zone.
SELECT * FROM reconcile_diff('tz_src', 'tz_tgt', '{id}', '{"time_zone": "CET"}');
SELECT * FROM reconcile_diff('tz_src', 'tz_tgt', '{id}', '{"time_zone": "cest"}');
SELECT count(*) FROM reconcile_diff('tz_src', 'tz_tgt', '{id}', '{"time_zone": "EST"}');
SELECT count(*) FROM reconcile_diff('tz_src', 'tz_tgt', '{id}', '{"time_zone": "Europe/Berlin"}');

DROP FUNCTION tz_record();
DROP TABLE tz_src, tz_tgt, tzk_src, tzk_tgt, tz_ny, tz_findings, tz_counts, tzw_src, tzw_tgt;
DROP EXTENSION reconcile;
