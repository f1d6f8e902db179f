-- reconcile_diff_totals (issue 24, point 3): control totals per group,
-- compared with tolerances; NULL groups; windows and column maps; a
-- postgres_fdw side (loopback); then_rows; the errors of bad input.
CREATE EXTENSION reconcile;
CREATE EXTENSION postgres_fdw;

-- The example of docs/diff.md, "Control totals".
CREATE TABLE ledger (id bigint PRIMARY KEY, day date, currency text, amount numeric(12,2),
    updated_at timestamptz);
CREATE TABLE ledger_copy (id bigint PRIMARY KEY, day date, currency text, amount numeric(12,2),
    updated_at timestamptz);
INSERT INTO ledger VALUES
    (1, '2026-11-30', 'EUR', 100.00, '2026-11-30 10:00+00'),
    (2, '2026-11-30', 'EUR', 250.00, '2026-11-30 11:00+00'),
    (3, '2026-11-30', 'USD',  80.00, '2026-11-30 12:00+00'),
    (4, '2026-12-01', 'EUR',  40.00, '2026-12-01 09:00+00'),
    (5, '2026-12-01', 'USD',  15.50, '2026-12-01 09:30+00'),
    (6, NULL,         'EUR',   1.00, '2026-12-01 10:00+00'),
    (7, '2026-12-02', 'EUR',   9.99, '2026-12-02 08:00+00');
INSERT INTO ledger_copy VALUES
    (1, '2026-11-30', 'EUR', 100.00, '2026-11-30 10:00+00'),
    (2, '2026-11-30', 'EUR', 250.01, '2026-11-30 11:00+00'),
    (3, '2026-11-30', 'USD',  80.00, '2026-11-30 12:00+00'),
    (5, '2026-12-01', 'USD',  15.50, '2026-12-01 09:30+00'),
    (6, NULL,         'EUR',   1.00, '2026-12-01 10:00+00'),
    (8, '2026-12-03', 'EUR',   5.00, '2026-12-03 08:00+00');
SELECT issue, "group", columns, source_values, target_values
FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day,currency}',
    '{"amount": ["sum"]}');
-- A tolerance per measure: a cent on the sums.
SELECT issue, "group", columns
FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day,currency}',
    '{"amount": ["sum"]}', '{"tolerance": {"sum(amount)": 0.01}}');
-- include_matches: every group; the NULL day is a group of its own.
SELECT issue, "group", columns, source_values, target_values
FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day}',
    '{"amount": ["sum", "min", "max", "count"], "*": ["count"]}', '{"include_matches": true}');
-- then_rows: the rows of the groups that differ, with their group.
SELECT issue, "group", key, columns, source_values, target_values
FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day,currency}',
    '{"amount": ["sum"]}', '{"then_rows": true, "key_columns": ["id"],
      "row_options": {"compare": ["amount"]}}')
ORDER BY key IS NOT NULL, "group"::text COLLATE "C", key::text COLLATE "C";

-- Relative tolerances, per measure or per column (all its numeric measures).
SELECT issue, "group", columns
FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day}', '{"amount": ["sum", "max"]}',
    '{"relative_tolerance": {"amount": 0.0001}}');
SELECT issue, "group", columns
FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day}', '{"amount": ["sum", "max"]}',
    '{"relative_tolerance": {"max(amount)": 0.0001}}');
-- The row count takes a tolerance under "*" or "count(*)".
SELECT issue, "group", columns
FROM reconcile_diff_totals('ledger', 'ledger_copy', '{currency}', '{}',
    '{"tolerance": {"*": 1}}');
-- A window on the updated column, as reconcile_diff's.
SELECT issue, "group", columns, source_values, target_values
FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day}', '{"amount": ["sum"]}',
    '{"updated_column": "updated_at", "window": ["2026-11-30 00:00+00", "2026-11-30 23:59+00"]}');
-- min and max of a text column, count of a column (its non-NULL values).
SELECT issue, "group", columns, source_values, target_values
FROM reconcile_diff_totals('ledger', 'ledger_copy', '{currency}', '{"day": ["min", "max", "count"]}');

-- Group values and measures in the findings' text forms, whatever the
-- session's settings (a timestamptz in UTC, ISO dates).
SET TimeZone = 'America/New_York';
SET DateStyle = 'SQL, DMY';
SELECT issue, "group", source_values, target_values
FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day}', '{"updated_at": ["max"]}')
WHERE issue = 'MISMATCH';
RESET TimeZone;
RESET DateStyle;

-- Columns of other names and types on the target (column_map; integer
-- against bigint); NULL measures (a sum over no value).
CREATE TABLE ledger_other (ref integer, "Day" date, currency varchar(3), amt numeric);
INSERT INTO ledger_other SELECT id, day, currency, CASE WHEN id = 4 THEN NULL ELSE amount END FROM ledger;
SELECT issue, "group", columns, source_values, target_values
FROM reconcile_diff_totals('ledger', 'ledger_other', '{"day"}', '{"amount": ["sum", "count"], "id": ["max"]}',
    '{"column_map": {"day": "Day", "amount": "amt", "id": "ref"}}');
-- then_rows in a NULL group: the rows whose day IS NULL.  The row diff
-- inherits column_map (and the window options) of the totals.
UPDATE ledger_other SET amt = 2 WHERE ref = 6;
SELECT issue, "group", key, columns, source_values, target_values
FROM reconcile_diff_totals('ledger', 'ledger_other', '{"day"}', '{"amount": ["sum"]}',
    '{"column_map": {"day": "Day", "amount": "amt", "id": "ref"}, "then_rows": true,
      "key_columns": ["id"], "row_options": {"compare": ["amount"]}}')
ORDER BY key IS NOT NULL, "group"::text COLLATE "C", key::text COLLATE "C";

-- A foreign side (postgres_fdw, loopback): one aggregate query per side,
-- the same totals.
DO $$
BEGIN
    EXECUTE format('CREATE SERVER totals_loopback FOREIGN DATA WRAPPER postgres_fdw'
                   ' OPTIONS (dbname %L, port %L, host %L)',
                   current_database(), current_setting('port'),
                   split_part(current_setting('unix_socket_directories'), ',', 1));
END
$$;
CREATE USER MAPPING FOR CURRENT_USER SERVER totals_loopback;
CREATE FOREIGN TABLE f_ledger_copy (id bigint, day date, currency text, amount numeric(12,2),
    updated_at timestamptz) SERVER totals_loopback OPTIONS (table_name 'ledger_copy');
SELECT (SELECT array_agg(t ORDER BY t::text COLLATE "C") FROM reconcile_diff_totals('ledger', 'f_ledger_copy', '{day,currency}',
            '{"amount": ["sum", "max"]}', '{"include_matches": true}') t)
     = (SELECT array_agg(t ORDER BY t::text COLLATE "C") FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day,currency}',
            '{"amount": ["sum", "max"]}', '{"include_matches": true}') t) AS same_totals;
-- then_rows with a foreign side: the group's rows by checksums.
SELECT issue, "group", key, columns
FROM reconcile_diff_totals('ledger', 'f_ledger_copy', '{day}',
    '{"amount": ["sum"]}', '{"then_rows": true, "key_columns": ["id"],
      "row_options": {"compare": ["amount"], "remote": "checksum"}}')
ORDER BY key IS NOT NULL, "group"::text COLLATE "C", key::text COLLATE "C";

-- Bad input.
SELECT * FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day}', '{"amount": ["avg"]}');
SELECT * FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day}', '{"currency": ["sum"]}');
SELECT * FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day}', '{"*": ["sum"]}');
SELECT * FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day}', '{"amount": "sum"}');
SELECT * FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day}', '["amount"]');
SELECT * FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day}', '{"amount": ["sum", "sum"]}');
SELECT * FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day}', '{"nosuch": ["sum"]}');
SELECT * FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day}', '{"day": ["max"]}');
SELECT * FROM reconcile_diff_totals('ledger', 'ledger_copy', '{nosuch}', '{}');
SELECT * FROM reconcile_diff_totals('ledger', 'ledger_copy', '{}', '{}');
SELECT * FROM reconcile_diff_totals('ledger', 'ledger_copy', NULL, '{}');
SELECT * FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day}', '{"amount": ["sum"]}',
    '{"tolerance": {"sum(amount)": -1}}');
SELECT * FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day}', '{"amount": ["sum"]}',
    '{"relative_tolerance": {"sum(amount)": "1%"}}');
SELECT * FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day}', '{"amount": ["sum"]}',
    '{"tolerance": {"max(amount)": 1}}');
SELECT * FROM reconcile_diff_totals('ledger', 'ledger_copy', '{currency}', '{"day": ["max"]}',
    '{"tolerance": {"max(day)": 1}}');
SELECT * FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day}', '{}', '{"compare": ["amount"]}');
SELECT * FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day}', '{}', '{"then_rows": true}');
SELECT * FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day}', '{}', '{"key_columns": ["id"]}');
SELECT * FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day}', '{}', '{"include_matches": 1}');
SELECT * FROM reconcile_diff_totals('ledger', 'ledger_copy', '{day}', '{}',
    '{"updated_column": "updated_at", "window": ["x", null]}');

DROP FOREIGN TABLE f_ledger_copy;
DROP USER MAPPING FOR CURRENT_USER SERVER totals_loopback;
DROP SERVER totals_loopback;
DROP TABLE ledger, ledger_copy, ledger_other;
DROP EXTENSION postgres_fdw;
DROP EXTENSION reconcile;
