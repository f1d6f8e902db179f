-- reconcile_diff: every kind of finding, the options, and the errors a
-- DBA can make.
CREATE EXTENSION reconcile;
SET extra_float_digits = 0;

-- A composite key of mixed types; the target's columns are in another
-- order, and neither side is unique on the key.
CREATE TABLE src_orders (
    region      text,
    order_no    integer,
    order_date  date,
    customer    uuid,
    batch       numeric,
    amount      numeric(12,2),
    status      text,
    note        text,
    updated_at  timestamptz
);
CREATE INDEX ON src_orders (region, order_no, order_date, customer, batch);
CREATE TABLE sink_orders (
    note        text,
    status      text,
    batch       numeric,
    amount      numeric(12,2),
    customer    uuid,
    updated_at  timestamptz,
    order_date  date,
    order_no    integer,
    region      text
);
INSERT INTO src_orders VALUES
    ('eu', 1, '2026-11-01', 'a0000000-0000-0000-0000-000000000001', 1.0, 10, 'paid', NULL, '2026-11-01 10:00+00'),
    ('eu', 2, '2026-11-01', 'a0000000-0000-0000-0000-000000000001', 1, 20, 'paid', 'x', '2026-11-01 10:00+00'),
    ('eu', 3, '2026-11-02', 'a0000000-0000-0000-0000-000000000002', 1, 30, 'paid', 'y', '2026-11-01 10:00+00'),
    ('eu', 4, '2026-11-02', 'a0000000-0000-0000-0000-000000000002', 1, 40, 'open', NULL, '2026-11-01 10:00+00'),
    ('us', 1, '2026-11-03', 'a0000000-0000-0000-0000-000000000003', 2, 50, 'paid', NULL, '2026-11-01 10:00+00'),
    ('us', 2, '2026-11-03', 'a0000000-0000-0000-0000-000000000003', 2, 60, 'paid', NULL, '2026-11-01 10:00+00'),
    ('us', 2, '2026-11-03', 'a0000000-0000-0000-0000-000000000003', 2, 61, 'paid', NULL, '2026-11-01 10:00+00'),
    ('us', NULL, '2026-11-04', 'a0000000-0000-0000-0000-000000000003', 2, 70, 'paid', NULL, '2026-11-01 10:00+00'),
    ('us', 3, '2026-11-04', 'a0000000-0000-0000-0000-000000000003', 2, 80, 'paid', NULL, '2026-11-01 10:00+00');
INSERT INTO sink_orders (region, order_no, order_date, customer, batch, amount, status, note, updated_at) VALUES
    ('eu', 1, '2026-11-01', 'a0000000-0000-0000-0000-000000000001', 1.00, 10, 'paid', NULL, '2026-11-01 10:00+00'),
    ('eu', 2, '2026-11-01', 'a0000000-0000-0000-0000-000000000001', 1, 20, 'open', 'x', '2026-11-01 10:00+00'),
    ('eu', 3, '2026-11-02', 'a0000000-0000-0000-0000-000000000002', 1, 30, 'paid', NULL, '2026-11-01 10:00+00'),
    ('eu', 4, '2026-11-02', 'a0000000-0000-0000-0000-000000000002', 1, 40, 'open', 'z', '2026-11-01 10:00+00'),
    ('us', 2, '2026-11-03', 'a0000000-0000-0000-0000-000000000003', 2, 60, 'paid', NULL, '2026-11-01 10:00+00'),
    ('us', 3, '2026-11-04', 'a0000000-0000-0000-0000-000000000003', 2, 80.5, 'void', NULL, '2026-11-01 10:00+00'),
    ('us', 9, '2026-11-05', 'a0000000-0000-0000-0000-000000000004', 3, 90, 'paid', NULL, '2026-11-01 10:00+00'),
    ('us', 10, '2026-11-05', 'a0000000-0000-0000-0000-000000000004', 3, 100, 'paid', NULL, '2026-11-01 10:00+00'),
    ('us', 10, '2026-11-05', 'a0000000-0000-0000-0000-000000000004', 3, 100, 'paid', NULL, '2026-11-01 10:00+00'),
    (NULL, 11, '2026-11-05', 'a0000000-0000-0000-0000-000000000004', 3, 110, 'paid', NULL, '2026-11-01 10:00+00');

-- Every kind of finding: eu/1 matches (batch 1.0 = 1.00, NULL note =
-- NULL note); us/2 is duplicated in the source and so is not paired.
SELECT issue, key, columns, source_values, target_values
FROM reconcile_diff('src_orders', 'sink_orders',
                    '{region,order_no,order_date,customer,batch}')
ORDER BY issue COLLATE "C", key::text COLLATE "C";

SELECT * FROM reconcile_diff_summary('src_orders', 'sink_orders',
                                     '{region,order_no,order_date,customer,batch}');

-- compare and ignore choose the columns.
SELECT issue, key->>'order_no' AS order_no, columns
FROM reconcile_diff('src_orders', 'sink_orders',
                    '{region,order_no,order_date,customer,batch}',
                    '{"compare": ["amount"]}')
WHERE issue = 'MISMATCH';
SELECT issue, key->>'order_no' AS order_no, columns
FROM reconcile_diff('src_orders', 'sink_orders',
                    '{region,order_no,order_date,customer,batch}',
                    '{"ignore": ["note", "status"]}')
WHERE issue = 'MISMATCH';

-- A table against itself: its duplicate and NULL keys are reported on
-- both sides, everything else matches.
SELECT issue, key->>'order_no' AS order_no
FROM reconcile_diff('sink_orders', 'sink_orders',
                    '{region,order_no,order_date,customer,batch}')
ORDER BY issue COLLATE "C";
-- No differences at all: a copy with its columns in another order.
CREATE TABLE src_copy AS SELECT * FROM src_orders WHERE order_no IS NOT NULL AND order_no <> 2;
CREATE TABLE sink_copy AS
    SELECT updated_at, note, status, amount, batch, customer, order_date, order_no, region
    FROM src_copy;
SELECT * FROM reconcile_diff('src_copy', 'sink_copy', '{region,order_no,order_date,customer,batch}');
SELECT rows_source, rows_target, matched, mismatched, column_mismatches
FROM reconcile_diff_summary('src_copy', 'sink_copy', '{region,order_no,order_date,customer,batch}');

-- Empty tables.
CREATE TABLE empty_a (id integer, v text);
CREATE TABLE empty_b (v text, id integer);
SELECT * FROM reconcile_diff('empty_a', 'empty_b', '{id}');
SELECT * FROM reconcile_diff_summary('empty_a', 'empty_b', '{id}');
INSERT INTO empty_a VALUES (1, 'one'), (2, NULL);
SELECT issue, key, source_values, target_values FROM reconcile_diff('empty_a', 'empty_b', '{id}') ORDER BY key::text COLLATE "C";
SELECT issue, key, source_values, target_values FROM reconcile_diff('empty_b', 'empty_a', '{id}') ORDER BY key::text COLLATE "C";

-- Trimmed keys: varchar against text, with blanks around.
CREATE TABLE src_codes (code varchar(10) PRIMARY KEY, qty integer);
CREATE TABLE tgt_codes (code text, qty bigint);
INSERT INTO src_codes VALUES ('  A1 ', 1), ('B2', 2), ('C3', 3);
INSERT INTO tgt_codes VALUES ('A1', 1), (' B2', 2), ('C3  ', 4);
SELECT issue, key, columns FROM reconcile_diff('src_codes', 'tgt_codes', '{code}') ORDER BY issue COLLATE "C", key::text COLLATE "C";
SELECT issue, key, columns, source_values, target_values
FROM reconcile_diff('src_codes', 'tgt_codes', '{code}', '{"trim_keys": true}');
SELECT issue, key FROM reconcile_diff('src_codes', 'tgt_codes', '{code}', '{"trim_keys": false}') ORDER BY issue COLLATE "C", key::text COLLATE "C";

-- Targets whose names differ: target_key_columns and column_map.
CREATE TABLE tgt_renamed (ident integer, quantity integer, code text);
INSERT INTO tgt_renamed VALUES (1, 1, 'A1'), (2, 20, 'B2');
CREATE TABLE src_plain (id integer, qty integer, code text);
INSERT INTO src_plain VALUES (1, 1, 'A1'), (2, 2, 'B2'), (3, 3, 'C3');
SELECT issue, key, columns, source_values, target_values
FROM reconcile_diff('src_plain', 'tgt_renamed', '{id}',
                    '{"target_key_columns": ["ident"], "column_map": {"qty": "quantity"}}')
ORDER BY issue COLLATE "C";
SELECT issue, key, columns
FROM reconcile_diff('src_plain', 'tgt_renamed', '{id}',
                    '{"column_map": {"id": "ident"}, "compare": ["code"]}')
ORDER BY issue COLLATE "C";

-- The window on the updated column, with and without the source_max
-- cutoff: target row 4 was written after the source's newest row (11-10)
-- and is not EXTRA with the cutoff; row 3 is outside the window.
CREATE TABLE src_win (id integer PRIMARY KEY, val text, updated date);
CREATE TABLE tgt_win (updated date, val text, id integer PRIMARY KEY);
INSERT INTO src_win VALUES (1, 'a', '2026-11-02'), (2, 'b', '2026-11-10'), (3, 'c', '2026-10-15');
INSERT INTO tgt_win (id, val, updated) VALUES (1, 'a', '2026-11-02'), (2, 'b', '2026-11-10'),
    (3, 'c', '2026-10-15'), (4, 'd', '2026-11-20'), (5, 'e', '2026-11-05');
SELECT issue, key FROM reconcile_diff('src_win', 'tgt_win', '{id}',
    '{"updated_column": "updated", "window": ["2026-11-01", "2026-11-29"]}') ORDER BY key::text COLLATE "C";
SELECT issue, key FROM reconcile_diff('src_win', 'tgt_win', '{id}',
    '{"updated_column": "updated", "window": ["2026-11-01", "2026-11-29"], "cutoff": "source_max"}') ORDER BY key::text COLLATE "C";
SELECT rows_source, rows_target, matched, extra_in_target
FROM reconcile_diff_summary('src_win', 'tgt_win', '{id}',
    '{"updated_column": "updated", "window": ["2026-11-01", "2026-11-29"], "cutoff": "source_max"}');
-- Open ends, and the cutoff alone.
SELECT issue, key FROM reconcile_diff('src_win', 'tgt_win', '{id}',
    '{"updated_column": "updated", "window": ["2026-11-03", null]}') ORDER BY key::text COLLATE "C";
SELECT issue, key FROM reconcile_diff('src_win', 'tgt_win', '{id}',
    '{"updated_column": "updated", "cutoff": "source_max"}') ORDER BY key::text COLLATE "C";

-- Tolerances on both sides of the bound: 0.005 for amount, 1 second for
-- ts, 1 for the integer qty.  Exactly on the bound still counts as equal.
CREATE TABLE src_tol (id integer PRIMARY KEY, amount numeric, ts timestamp, qty integer);
CREATE TABLE tgt_tol (id integer PRIMARY KEY, amount numeric, ts timestamp, qty integer);
INSERT INTO src_tol VALUES
    (1, 100, '2026-11-01 10:00:00', 10), (2, 100, '2026-11-01 10:00:00', 10),
    (3, 100, '2026-11-01 10:00:00', 10), (4, 100, '2026-11-01 10:00:00', 10),
    (5, 100, '2026-11-01 10:00:00', 10), (6, NULL, NULL, NULL);
INSERT INTO tgt_tol VALUES
    (1, 100.004, '2026-11-01 10:00:00.9', 11), (2, 100.005, '2026-11-01 10:00:01', 12),
    (3, 100.006, '2026-11-01 10:00:01.5', 10), (4, 99.994, '2026-11-01 09:59:58', 9),
    (5, 99.996, '2026-11-01 09:59:59.5', 10), (6, 0, '2026-11-01 10:00:00', 0);
SELECT key, columns, source_values, target_values
FROM reconcile_diff('src_tol', 'tgt_tol', '{id}') ORDER BY key::text COLLATE "C";
SELECT key, columns, source_values, target_values
FROM reconcile_diff('src_tol', 'tgt_tol', '{id}',
    '{"tolerance": {"amount": 0.005, "ts": "1 second", "qty": 1}}') ORDER BY key::text COLLATE "C";
SELECT matched, mismatched, column_mismatches
FROM reconcile_diff_summary('src_tol', 'tgt_tol', '{id}',
    '{"tolerance": {"amount": 0.005, "ts": "1 second", "qty": 1}}');

-- A view and a partitioned table as sides.
CREATE VIEW v_src_tol AS SELECT qty, ts, amount, id FROM src_tol WHERE id <> 5;
CREATE TABLE part_tol (id integer, amount numeric, ts timestamp, qty integer) PARTITION BY RANGE (id);
CREATE TABLE part_tol_1 PARTITION OF part_tol FOR VALUES FROM (MINVALUE) TO (4);
CREATE TABLE part_tol_2 PARTITION OF part_tol FOR VALUES FROM (4) TO (MAXVALUE);
INSERT INTO part_tol SELECT * FROM tgt_tol;
SELECT issue, key, columns
FROM reconcile_diff('v_src_tol', 'part_tol', '{id}',
    '{"tolerance": {"amount": 0.005, "ts": "1 second", "qty": 1}}') ORDER BY key::text COLLATE "C";

-- A key duplicated across many fetched batches is still one finding with
-- every copy, and the rows around it still pair up.
CREATE TABLE many_src (id integer, v integer);
CREATE TABLE many_tgt (id integer, v integer);
INSERT INTO many_src SELECT g, g FROM generate_series(1, 500) g;
INSERT INTO many_src SELECT 250, g FROM generate_series(1, 349) g;
INSERT INTO many_tgt SELECT g, g FROM generate_series(1, 500) g WHERE g <> 400;
UPDATE many_tgt SET v = 0 WHERE id = 251;
SELECT issue, key, columns,
       CASE jsonb_typeof(source_values) WHEN 'array' THEN jsonb_array_length(source_values) END AS copies
FROM reconcile_diff('many_src', 'many_tgt', '{id}') ORDER BY issue COLLATE "C";
SELECT rows_source, rows_target, matched, duplicate_keys
FROM reconcile_diff_summary('many_src', 'many_tgt', '{id}');

-- Keys of different but compatible types (integer and bigint).
CREATE TABLE tgt_big (id bigint, amount numeric, ts timestamp, qty bigint);
INSERT INTO tgt_big SELECT * FROM src_tol;
SELECT count(*) FROM reconcile_diff('src_tol', 'tgt_big', '{id}');

-- Errors a DBA can make, each naming what is wrong.
SELECT * FROM reconcile_diff(NULL, 'tgt_tol', '{id}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', NULL);
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id,NULL}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id,id}');
SELECT * FROM reconcile_diff('src_tol', 'no_such_table', '{id}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{nope}');
SELECT * FROM reconcile_diff('src_plain', 'tgt_renamed', '{id}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '{"compare": ["amount", "nope"]}');
SELECT * FROM reconcile_diff('src_plain', 'tgt_renamed', '{id}', '{"target_key_columns": ["ident"], "compare": ["qty"]}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '{"compare": ["id"]}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '{"compare": ["qty", "qty"]}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '{"ignore": ["nope"]}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '{"ignore": ["id"]}');
CREATE TABLE tgt_badtypes (id text, amount date, ts timestamp, qty integer);
SELECT * FROM reconcile_diff('src_tol', 'tgt_badtypes', '{id}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_badtypes', '{id}', '{"target_key_columns": ["qty"]}');
CREATE TABLE pts (p point, v integer);
SELECT * FROM reconcile_diff('pts', 'pts', '{p}');
CREATE SEQUENCE a_sequence;
SELECT * FROM reconcile_diff('a_sequence', 'tgt_tol', '{id}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '[1, 2]');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '"compare"');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '{"compair": ["amount"]}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '{"compare": "amount"}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '{"compare": ["amount", 3]}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '{"trim_keys": "yes"}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '{"target_key_columns": ["id", "qty"]}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '{"column_map": ["amount"]}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '{"column_map": {"amount": 1}}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '{"column_map": {"nope": "amount"}}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '{"column_map": {"amount": "nope"}}');
SELECT * FROM reconcile_diff('src_win', 'tgt_win', '{id}', '{"window": ["2026-11-01", "2026-11-29"]}');
SELECT * FROM reconcile_diff('src_win', 'tgt_win', '{id}', '{"updated_column": 7}');
SELECT * FROM reconcile_diff('src_win', 'tgt_win', '{id}', '{"updated_column": "nope"}');
SELECT * FROM reconcile_diff('src_win', 'tgt_win', '{id}', '{"updated_column": "updated", "window": ["2026-11-01"]}');
SELECT * FROM reconcile_diff('src_win', 'tgt_win', '{id}', '{"updated_column": "updated", "window": "2026-11"}');
SELECT * FROM reconcile_diff('src_win', 'tgt_win', '{id}', '{"updated_column": "updated", "window": ["2026-11-29", "2026-11-01"]}');
SELECT * FROM reconcile_diff('src_win', 'tgt_win', '{id}', '{"updated_column": "updated", "window": ["2026-13-01", null]}');
SELECT * FROM reconcile_diff('src_win', 'tgt_win', '{id}', '{"updated_column": "updated", "window": [true, null]}');
SELECT * FROM reconcile_diff('src_win', 'tgt_win', '{id}', '{"updated_column": "updated", "cutoff": "target_max"}');
SELECT * FROM reconcile_diff('src_win', 'tgt_win', '{id}', '{"cutoff": "source_max"}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '{"tolerance": 0.5}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '{"tolerance": {"amount": "0.5"}}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '{"tolerance": {"amount": -1}}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '{"tolerance": {"ts": 1}}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '{"tolerance": {"ts": "soon"}}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '{"tolerance": {"nope": 1}}');
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '{"compare": ["qty"], "tolerance": {"amount": 1}}');
SELECT * FROM reconcile_diff('src_win', 'tgt_win', '{id}', '{"tolerance": {"val": 1}}');
SELECT * FROM reconcile_diff_summary('src_tol', 'tgt_tol', '{nope}');

-- No SELECT on a side, no diff.
CREATE ROLE diff_reader;
GRANT SELECT ON src_tol TO diff_reader;
SET ROLE diff_reader;
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}');
SELECT * FROM reconcile_diff('tgt_tol', 'src_tol', '{id}');
RESET ROLE;
-- Column privileges suffice for the columns the diff reads.
GRANT SELECT (id, qty) ON tgt_tol TO diff_reader;
SET ROLE diff_reader;
SELECT * FROM reconcile_diff('src_tol', 'tgt_tol', '{id}');
SELECT key, columns FROM reconcile_diff('src_tol', 'tgt_tol', '{id}', '{"compare": ["qty"]}') ORDER BY key::text COLLATE "C";
RESET ROLE;

DROP OWNED BY diff_reader;
DROP ROLE diff_reader;
DROP EXTENSION reconcile;
