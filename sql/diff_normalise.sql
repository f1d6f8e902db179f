-- Value normalisation of reconcile_diff (issue 24, point 5): per-column
-- relative_tolerance, trim, case_insensitive and timestamp_precision, on
-- the local ordered pass and across servers (postgres_fdw, loopback), with
-- the errors of bad input.
CREATE EXTENSION reconcile;
CREATE EXTENSION postgres_fdw;
SET client_min_messages = notice;

CREATE TABLE norm_src (id int PRIMARY KEY, amount numeric, qty int, name text,
    code varchar(10), seen timestamp, seen_tz timestamptz, flag boolean);
CREATE TABLE norm_tgt (id int PRIMARY KEY, amount numeric, qty bigint, name text,
    code text, seen timestamp, seen_tz timestamptz, flag boolean);
INSERT INTO norm_src VALUES
    (1, 100.00, 1000, 'Alice',   'ab',  '2026-01-01 10:00:00.250', '2026-01-01 10:00:00.250+00', true),
    (2, 200.00, 2000, 'bob',     'CD',  '2026-01-01 10:00:59',     '2026-01-01 10:59:00+00',     true),
    (3, 300.00, 3000, 'Carol',   'ef',  '2026-01-01 10:01:00',     '2026-01-01 23:30:00+00',     false),
    (4, 0,      0,    'dave',    'gh',  NULL,                      NULL,                         NULL),
    (5, -50,    -10,  NULL,      NULL,  '2026-01-01 00:00:00',     '2026-01-01 00:00:00+00',     true);
INSERT INTO norm_tgt VALUES
    (1, 100.05, 1001, '  Alice ', 'AB',  '2026-01-01 10:00:00.900', '2026-01-01 10:00:00.999+00', true),
    (2, 200.50, 2003, 'BOB',      'cd ', '2026-01-01 10:00:01',     '2026-01-01 10:01:00+00',     true),
    (3, 300.00, 3000, 'carol',    'ef',  '2026-01-01 10:02:00',     '2026-01-02 00:30:00+00',     false),
    (4, 0.001,  0,    'dave',     'gh',  NULL,                      NULL,                         NULL),
    (5, -50.04, -10,  NULL,       NULL,  '2026-01-01 00:00:00',     '2026-01-01 00:00:00+00',     true);

-- Nothing normalised: every row but none differs somewhere.
SELECT key, columns FROM reconcile_diff('norm_src', 'norm_tgt', '{id}') ORDER BY key::text COLLATE "C";

-- relative_tolerance: |s - t| <= r * greatest(|s|, |t|).  0.001 of 100 is
-- 0.1 (row 1 matches), of 200.5 is 0.2005 (row 2 differs by 0.5), of
-- 0.001 is 0.000001 (row 4: 0 against 0.001 differs), of 50.04 is 0.05.
SELECT key, columns, source_values, target_values
FROM reconcile_diff('norm_src', 'norm_tgt', '{id}',
    '{"compare": ["amount"], "relative_tolerance": {"amount": 0.001}}') ORDER BY key::text COLLATE "C";
-- With an absolute tolerance as well, either one makes values equal.
SELECT key, columns
FROM reconcile_diff('norm_src', 'norm_tgt', '{id}',
    '{"compare": ["amount"], "relative_tolerance": {"amount": 0.001}, "tolerance": {"amount": 0.01}}') ORDER BY key::text COLLATE "C";
-- An integer column (bigint on the target) compared as numeric.
SELECT key, columns, source_values, target_values
FROM reconcile_diff('norm_src', 'norm_tgt', '{id}',
    '{"compare": ["qty"], "relative_tolerance": {"qty": 0.001}}') ORDER BY key::text COLLATE "C";

-- trim: surrounding blanks of values; the findings show trimmed values.
SELECT key, columns, source_values, target_values
FROM reconcile_diff('norm_src', 'norm_tgt', '{id}',
    '{"compare": ["name", "code"], "trim": ["name", "code"]}') ORDER BY key::text COLLATE "C";
-- case_insensitive: compared lower-cased (in the column's collation).
SELECT key, columns, source_values, target_values
FROM reconcile_diff('norm_src', 'norm_tgt', '{id}',
    '{"compare": ["name", "code"], "case_insensitive": ["name", "code"]}') ORDER BY key::text COLLATE "C";
-- Both: only row 2's code ('CD' against 'cd ') would remain for trim
-- alone, and only 'Alice' for case alone; together nothing differs.
SELECT count(*) FROM reconcile_diff('norm_src', 'norm_tgt', '{id}',
    '{"compare": ["name", "code"], "case_insensitive": ["name", "code"], "trim": ["name", "code"]}');

-- timestamp_precision: truncated with date_trunc before comparing.
SELECT key, columns, source_values, target_values
FROM reconcile_diff('norm_src', 'norm_tgt', '{id}',
    '{"compare": ["seen"], "timestamp_precision": {"seen": "second"}}') ORDER BY key::text COLLATE "C";
SELECT key, columns
FROM reconcile_diff('norm_src', 'norm_tgt', '{id}',
    '{"compare": ["seen"], "timestamp_precision": {"seen": "minute"}}') ORDER BY key::text COLLATE "C";
-- A timestamptz is truncated on the wall clock of the diff's time zone:
-- row 3 (23:30 and 00:30 UTC the next day) is one day in New York only.
SET TimeZone = 'Asia/Tokyo';
SELECT key, columns
FROM reconcile_diff('norm_src', 'norm_tgt', '{id}',
    '{"compare": ["seen_tz"], "timestamp_precision": {"seen_tz": "day"}}') ORDER BY key::text COLLATE "C";
SELECT key, columns
FROM reconcile_diff('norm_src', 'norm_tgt', '{id}',
    '{"compare": ["seen_tz"], "timestamp_precision": {"seen_tz": "DAY"}, "time_zone": "America/New_York"}') ORDER BY key::text COLLATE "C";
RESET TimeZone;
SELECT key, columns
FROM reconcile_diff('norm_src', 'norm_tgt', '{id}',
    '{"compare": ["seen_tz"], "timestamp_precision": {"seen_tz": "hour"}}') ORDER BY key::text COLLATE "C";

-- The summary counts the same.
SELECT matched, mismatched, column_mismatches
FROM reconcile_diff_summary('norm_src', 'norm_tgt', '{id}',
    '{"ignore": ["flag"], "relative_tolerance": {"amount": 0.001, "qty": 0.001},
      "trim": ["name", "code"], "case_insensitive": ["name", "code"],
      "timestamp_precision": {"seen": "minute", "seen_tz": "day"}}');

-- Across servers: the same findings by checksums.  trim and
-- case_insensitive are computed inside the pushed-down row digests
-- ("remote": "checksum" would fail otherwise); relative_tolerance and
-- timestamp_precision are not pushable (no bucket; date_trunc takes its
-- unit as text, which postgres_fdw does not send), so "checksum" refuses
-- and "auto" reads every row.
DO $$
BEGIN
    EXECUTE format('CREATE SERVER norm_loopback FOREIGN DATA WRAPPER postgres_fdw'
                   ' OPTIONS (dbname %L, port %L, host %L)',
                   current_database(), current_setting('port'),
                   split_part(current_setting('unix_socket_directories'), ',', 1));
END
$$;
CREATE USER MAPPING FOR CURRENT_USER SERVER norm_loopback;
CREATE FOREIGN TABLE f_norm_tgt (id int, amount numeric, qty bigint, name text,
    code text, seen timestamp, seen_tz timestamptz, flag boolean)
    SERVER norm_loopback OPTIONS (table_name 'norm_tgt');
SELECT key, columns, source_values, target_values
FROM reconcile_diff('norm_src', 'f_norm_tgt', '{id}',
    '{"compare": ["name", "code"], "trim": ["name", "code"], "remote": "checksum", "leaf_rows": 1}') ORDER BY key::text COLLATE "C";
SELECT key, columns, source_values, target_values
FROM reconcile_diff('norm_src', 'f_norm_tgt', '{id}',
    '{"compare": ["name", "code"], "case_insensitive": ["name", "code"], "remote": "checksum", "leaf_rows": 1}') ORDER BY key::text COLLATE "C";
SELECT count(*) FROM reconcile_diff('norm_src', 'f_norm_tgt', '{id}',
    '{"compare": ["name", "code"], "case_insensitive": ["name", "code"], "trim": ["name", "code"], "remote": "checksum"}');
SELECT key, columns
FROM reconcile_diff('norm_src', 'f_norm_tgt', '{id}',
    '{"compare": ["amount"], "relative_tolerance": {"amount": 0.001}}') ORDER BY key::text COLLATE "C";
SELECT key, columns
FROM reconcile_diff('norm_src', 'f_norm_tgt', '{id}',
    '{"compare": ["seen"], "timestamp_precision": {"seen": "minute"}}') ORDER BY key::text COLLATE "C";
SELECT key, columns
FROM reconcile_diff('norm_src', 'f_norm_tgt', '{id}',
    '{"compare": ["amount"], "relative_tolerance": {"amount": 0.001}, "remote": "checksum"}');
SELECT key, columns
FROM reconcile_diff('norm_src', 'f_norm_tgt', '{id}',
    '{"compare": ["seen"], "timestamp_precision": {"seen": "minute"}, "remote": "checksum"}');

-- Bad input: each refused before anything is read.
SELECT * FROM reconcile_diff('norm_src', 'norm_tgt', '{id}', '{"relative_tolerance": {"amount": -0.1}}');
SELECT * FROM reconcile_diff('norm_src', 'norm_tgt', '{id}', '{"relative_tolerance": {"amount": "1%"}}');
SELECT * FROM reconcile_diff('norm_src', 'norm_tgt', '{id}', '{"relative_tolerance": {"name": 0.1}}');
SELECT * FROM reconcile_diff('norm_src', 'norm_tgt', '{id}', '{"relative_tolerance": [0.1]}');
SELECT * FROM reconcile_diff('norm_src', 'norm_tgt', '{id}', '{"trim": ["amount"]}');
SELECT * FROM reconcile_diff('norm_src', 'norm_tgt', '{id}', '{"trim": "name"}');
SELECT * FROM reconcile_diff('norm_src', 'norm_tgt', '{id}', '{"trim": ["nosuch"]}');
SELECT * FROM reconcile_diff('norm_src', 'norm_tgt', '{id}', '{"trim": ["id"]}');
SELECT * FROM reconcile_diff('norm_src', 'norm_tgt', '{id}', '{"compare": ["amount"], "trim": ["name"]}');
SELECT * FROM reconcile_diff('norm_src', 'norm_tgt', '{id}', '{"case_insensitive": ["flag"]}');
SELECT * FROM reconcile_diff('norm_src', 'norm_tgt', '{id}', '{"case_insensitive": ["NoSuch"]}');
SELECT * FROM reconcile_diff('norm_src', 'norm_tgt', '{id}', '{"timestamp_precision": {"seen": "fortnight"}}');
SELECT * FROM reconcile_diff('norm_src', 'norm_tgt', '{id}', '{"timestamp_precision": {"seen": 1}}');
SELECT * FROM reconcile_diff('norm_src', 'norm_tgt', '{id}', '{"timestamp_precision": {"name": "second"}}');
SELECT * FROM reconcile_diff('norm_src', 'norm_tgt', '{id}', '{"timestamp_precision": ["seen"]}');

DROP FOREIGN TABLE f_norm_tgt;
DROP USER MAPPING FOR CURRENT_USER SERVER norm_loopback;
DROP SERVER norm_loopback;
DROP TABLE norm_src, norm_tgt;
DROP EXTENSION postgres_fdw;
DROP EXTENSION reconcile;
