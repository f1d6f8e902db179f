-- Reconciliation configs as users have them: one COPY of a CSV file into
-- reconcile.diff_job_config makes jobs in reconcile.diff_jobs; column
-- names in any case are matched as the user means them.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;
SET TimeZone = 'UTC';

CREATE SCHEMA sales;
CREATE SCHEMA sink;
-- Mixed case as such tables come: "PrimaryKEY1" was created quoted,
-- updated_date unquoted; the target keeps naive UTC times.
CREATE TABLE sales.src_orders (customer_id integer, "PrimaryKEY1" integer, amount numeric,
                               updated_date timestamptz, PRIMARY KEY (customer_id, "PrimaryKEY1"));
CREATE TABLE sink.orders (customer_id integer, "PrimaryKEY1" integer, amount numeric,
                          updated_date timestamp, PRIMARY KEY (customer_id, "PrimaryKEY1"));
INSERT INTO sales.src_orders VALUES
    (1, 1, 10.00, now() - interval '1 day'),
    (1, 2, 20.00, now() - interval '2 days'),
    (2, 1, 30.00, now() - interval '30 days'),
    (2, 2, 40.00, now() - interval '3 days');
INSERT INTO sink.orders
SELECT customer_id, "PrimaryKEY1", amount, updated_date AT TIME ZONE 'UTC' FROM sales.src_orders;
UPDATE sink.orders SET amount = 20.001 WHERE "PrimaryKEY1" = 2 AND customer_id = 1;  -- in the window
UPDATE sink.orders SET amount = 31 WHERE "PrimaryKEY1" = 1 AND customer_id = 2;      -- before it
DELETE FROM sink.orders WHERE customer_id = 2 AND "PrimaryKEY1" = 2;                 -- missing
CREATE TABLE sales.customers (customer_id integer PRIMARY KEY, name text);
CREATE TABLE sink.customers (customer_id integer PRIMARY KEY, name text);
INSERT INTO sales.customers VALUES (1, 'Ana'), (2, 'Bo');
INSERT INTO sink.customers VALUES (1, 'Ana'), (2, 'Bob');
CREATE TABLE sales.payments (payment_id integer, line_no integer, paid_at date, amount numeric);
CREATE TABLE sink.payments (payment_id integer, line_no integer, paid_at date, amount numeric);
INSERT INTO sales.payments VALUES (1, 1, '2026-10-31', 5), (1, 2, '2026-11-02', 6), (2, 1, '2026-11-28', 7);
INSERT INTO sink.payments VALUES (1, 1, '2026-10-31', 9), (1, 2, '2026-11-02', 6), (3, 1, '2026-11-29', 8);

-- The sample file of docs/diff.md, as it is.
COPY reconcile.diff_job_config FROM STDIN CSV HEADER;
job,source,target,key_columns,updated_column,window,trim_keys,cutoff
orders,sales.src_orders,sink.orders,"customer_id, PrimaryKEY1",Updated_date,7 days,,source_max
customers,sales.customers,sink.customers,Customer_ID,,,true,
payments,sales.payments,sink.payments,"PAYMENT_ID , line_no",paid_at,2026-11-01/2026-11-29,,
\.

-- The jobs hold the columns' own names, and schema-qualified relations.
SELECT name, source, target, key_columns, options FROM reconcile.diff_jobs ORDER BY name;
-- Read back in the file's layout.
SELECT * FROM reconcile.diff_job_config ORDER BY job;

-- They run as jobs: orders finds the changed amount inside the 7 days and
-- the missing row, not the change 30 days ago.
SELECT job, rows_source, rows_target, matched, missing_in_target, extra_in_target,
       mismatched, column_mismatches, error
FROM reconcile_diff_run() ORDER BY job;
SELECT r.job, d.issue, d.key, d.columns
FROM reconcile.diff_results d JOIN reconcile.diff_runs r USING (run_id)
ORDER BY r.job, d.issue, d.key::text;

-- Loading the same file again replaces each job by name: nothing changes.
CREATE TABLE jobs_before AS SELECT * FROM reconcile.diff_jobs;
COPY reconcile.diff_job_config FROM STDIN CSV HEADER;
job,source,target,key_columns,updated_column,window,trim_keys,cutoff
orders,sales.src_orders,sink.orders,"customer_id, PrimaryKEY1",Updated_date,7 days,,source_max
customers,sales.customers,sink.customers,Customer_ID,,,true,
payments,sales.payments,sink.payments,"PAYMENT_ID , line_no",paid_at,2026-11-01/2026-11-29,,
\.
SELECT count(*) AS jobs,
       (SELECT count(*) FROM (SELECT * FROM reconcile.diff_jobs EXCEPT SELECT * FROM jobs_before) x) AS changed
FROM reconcile.diff_jobs;
-- Options set by hand stay on a reload; the file's own fields are replaced.
-- A file in 1.1's layout (no trim_keys, cutoff) loads with its column
-- list, and keeps the job's cutoff.
UPDATE reconcile.diff_jobs SET options = options || '{"tolerance": {"amount": 0.01}}' WHERE name = 'orders';
COPY reconcile.diff_job_config (job, source, target, key_columns, updated_column, "window") FROM STDIN CSV HEADER;
job,source,target,key_columns,updated_column,window
orders,sales.src_orders,sink.orders,"CUSTOMER_ID,PrimaryKEY1",UPDATED_DATE,14 days
\.
SELECT name, key_columns, options FROM reconcile.diff_jobs WHERE name = 'orders';
SELECT job, matched, missing_in_target, mismatched FROM reconcile_diff_run('orders');
-- trim_keys and cutoff from the config: set by a field, kept by an empty
-- one, a cutoff removed by "none"; read back in the file's layout.
INSERT INTO reconcile.diff_job_config VALUES ('tk', 'sales.customers', 'sink.customers', 'customer_id', NULL, NULL, 'yes', NULL);
SELECT options FROM reconcile.diff_jobs WHERE name = 'tk';
INSERT INTO reconcile.diff_job_config VALUES ('tk', 'sales.customers', 'sink.customers', 'customer_id', NULL, NULL, NULL, NULL);
SELECT options FROM reconcile.diff_jobs WHERE name = 'tk';
INSERT INTO reconcile.diff_job_config VALUES ('tk', 'sales.customers', 'sink.customers', 'customer_id', NULL, NULL, ' off ', NULL);
SELECT options FROM reconcile.diff_jobs WHERE name = 'tk';
INSERT INTO reconcile.diff_job_config VALUES ('co', 'sales.src_orders', 'sink.orders', 'customer_id, PrimaryKEY1', 'updated_date', '7 days', NULL, 'source_max');
SELECT options FROM reconcile.diff_jobs WHERE name = 'co';
SELECT * FROM reconcile.diff_job_config WHERE job IN ('tk', 'co') ORDER BY job;
INSERT INTO reconcile.diff_job_config VALUES ('co', 'sales.src_orders', 'sink.orders', 'customer_id, PrimaryKEY1', 'updated_date', '7 days', NULL, 'none');
SELECT options FROM reconcile.diff_jobs WHERE name = 'co';
INSERT INTO reconcile.diff_job_config VALUES ('bad', 'sales.customers', 'sink.customers', 'customer_id', NULL, NULL, 'maybe', NULL);
INSERT INTO reconcile.diff_job_config VALUES ('bad', 'sales.src_orders', 'sink.orders', 'customer_id, PrimaryKEY1', 'updated_date', NULL, NULL, 'newest');
INSERT INTO reconcile.diff_job_config VALUES ('bad', 'sales.customers', 'sink.customers', 'customer_id', NULL, NULL, NULL, 'source_max');
-- COPY without a column list reads every column of the view: a file in
-- 1.1's layout needs its column list (above).
COPY reconcile.diff_job_config FROM STDIN CSV HEADER;
job,source,target,key_columns,updated_column,window
bad,sales.customers,sink.customers,customer_id,,
\.
DELETE FROM reconcile.diff_job_config WHERE job IN ('tk', 'co');
-- One row, in one call, without a file.
INSERT INTO reconcile.diff_job_config VALUES ('one', 'sales.customers', 'sink.customers', 'customer_id', NULL, NULL);
SELECT name, source, target, key_columns, options FROM reconcile.diff_jobs WHERE name = 'one';

-- An unqualified name is resolved when loaded, with the loader's
-- search_path, and stored qualified: a run elsewhere reads the same table.
SET search_path = sales, public;
INSERT INTO reconcile.diff_job_config VALUES ('bare', 'customers', 'sink.customers', 'customer_id', '', '');
RESET search_path;
SELECT name, source, target FROM reconcile.diff_jobs WHERE name = 'bare';
SELECT job, matched, mismatched, error FROM reconcile_diff_run('bare');

-- Case: the exact spelling when a column of that spelling exists, else
-- the lower-case name; with both "Code" and code, "Code" means "Code".
CREATE TABLE sales.both_cases ("Code" text PRIMARY KEY, code text, "Amount" numeric);
CREATE TABLE sink.both_cases ("Code" text PRIMARY KEY, code text, "Amount" numeric);
INSERT INTO sales.both_cases VALUES ('A', 'x', 1), ('B', 'y', 2);
INSERT INTO sink.both_cases VALUES ('A', 'x', 1), ('B', 'z', 2);
INSERT INTO reconcile.diff_job_config VALUES ('both', 'sales.both_cases', 'sink.both_cases', 'Code', NULL, NULL);
INSERT INTO reconcile.diff_job_config VALUES ('both_lower', 'sales.both_cases', 'sink.both_cases', 'CODE', NULL, NULL);
INSERT INTO reconcile.diff_job_config VALUES ('both_folded', 'sales.both_cases', 'sink.both_cases', 'cODE', NULL, NULL);
SELECT name, key_columns FROM reconcile.diff_jobs WHERE name LIKE 'both%' ORDER BY name;
-- The same matching in reconcile_diff: keys, compare, tolerance, ignore.
SELECT issue, key, columns FROM reconcile_diff('sales.src_orders', 'sink.orders',
    '{CUSTOMER_ID,PrimaryKEY1}', '{"compare": ["Amount"], "tolerance": {"AMOUNT": 0.01}}')
ORDER BY key::text;
SELECT issue, key, columns FROM reconcile_diff('sales.both_cases', 'sink.both_cases', '{Code}',
    '{"ignore": ["AMOUNT"]}');
SELECT issue, key, columns FROM reconcile_diff('sales.both_cases', 'sink.both_cases', '{code}',
    '{"compare": ["Code"]}');
-- A name that is both, after matching, is still named twice.
SELECT * FROM reconcile_diff('sales.customers', 'sink.customers', '{customer_id,Customer_Id}');
-- Neither spelling exists: 42703, with a hint on case naming the candidates.
INSERT INTO reconcile.diff_job_config VALUES ('nokey', 'sales.src_orders', 'sink.orders', 'customer_id, primarykey_1', NULL, NULL);
INSERT INTO reconcile.diff_job_config VALUES ('nocase', 'sales.src_orders', 'sink.orders', 'customer_id, PRIMARYKEY1', NULL, NULL);
INSERT INTO reconcile.diff_job_config VALUES ('noupd', 'sales.src_orders', 'sink.orders', 'customer_id,PrimaryKEY1', 'Updated_Datum', NULL);
SELECT * FROM reconcile_diff('sales.src_orders', 'sink.orders', '{customer_id,primaryKey1}');
SELECT * FROM reconcile_diff('sales.both_cases', 'sink.both_cases', '{Code}', '{"compare": ["aMOUNT"]}');

-- A file without job names: each job is named "<source> -> <target>", so
-- loading it again replaces the same jobs.
COPY reconcile.diff_job_config (source, target, key_columns, updated_column) FROM STDIN CSV HEADER;
source,target,key_columns,updated_column
sales.customers,sink.customers,Customer_ID,
sales.src_orders,sink.orders,"customer_id, PrimaryKEY1",Updated_date
\.
INSERT INTO reconcile.diff_job_config VALUES ('  ', 'sales.customers', 'sink.customers', 'customer_id', NULL, NULL);
SELECT name, source, target, key_columns, options FROM reconcile.diff_jobs WHERE name LIKE '% -> %' ORDER BY name;
DELETE FROM reconcile.diff_jobs WHERE name LIKE '% -> %';

-- Bad rows: each is refused whole, naming the job and what is wrong.
INSERT INTO reconcile.diff_job_config VALUES (NULL, NULL, 'sink.customers', 'customer_id', NULL, NULL);
INSERT INTO reconcile.diff_job_config (source, target) VALUES ('sales.customers', 'sink.customers');
INSERT INTO reconcile.diff_job_config VALUES ('x', NULL, 'sink.customers', 'customer_id', NULL, NULL);
INSERT INTO reconcile.diff_job_config VALUES ('x', 'sales.customers', '', 'customer_id', NULL, NULL);
INSERT INTO reconcile.diff_job_config VALUES ('x', 'sales.customers', 'sink.customers', ' ', NULL, NULL);
INSERT INTO reconcile.diff_job_config VALUES ('x', 'sales.customers', 'sink.customers', 'customer_id,,name', NULL, NULL);
INSERT INTO reconcile.diff_job_config VALUES ('x', 'sales.customers', 'sink.customers', 'customer_id,', NULL, NULL);
INSERT INTO reconcile.diff_job_config VALUES ('x', 'sales.customers', 'sink.customers', '"customer_id', NULL, NULL);
INSERT INTO reconcile.diff_job_config VALUES ('x', 'sales.customers', 'sink.customers', '"customer_id" name', NULL, NULL);
INSERT INTO reconcile.diff_job_config VALUES ('x', 'customers', 'sink.customers', 'customer_id', NULL, NULL);
INSERT INTO reconcile.diff_job_config VALUES ('x', 'sales.Customers', 'sink.nope', 'customer_id', NULL, NULL);
INSERT INTO reconcile.diff_job_config VALUES ('x', 'sales.customers', 'a.b.c.d', 'customer_id', NULL, NULL);
INSERT INTO reconcile.diff_job_config VALUES ('x', 'sales.customers', 'sink."customers', 'customer_id', NULL, NULL);
CREATE TEMP TABLE temp_customers (customer_id integer, name text);
INSERT INTO reconcile.diff_job_config VALUES ('x', 'sales.customers', 'temp_customers', 'customer_id', NULL, NULL);
INSERT INTO reconcile.diff_job_config VALUES ('x', 'sales.customers', 'sink.customers', 'customer_id', NULL, '7 days');
INSERT INTO reconcile.diff_job_config VALUES ('x', 'sales.payments', 'sink.payments', 'payment_id,line_no', 'paid_at', '2026-11-01/2026-11-15/2026-11-29');
INSERT INTO reconcile.diff_job_config VALUES ('x', 'sales.payments', 'sink.payments', 'payment_id,line_no', 'paid_at', 'last week');
INSERT INTO reconcile.diff_job_config VALUES ('x', 'sales.payments', 'sink.payments', 'payment_id,line_no', 'paid_at', '-7 days');
INSERT INTO reconcile.diff_job_config VALUES ('x', 'sales.payments', 'sink.payments', 'payment_id,line_no', 'paid_at', '2026-13-01/');
INSERT INTO reconcile.diff_job_config VALUES ('x', 'sales.payments', 'sink.payments', 'payment_id,line_no', 'paid_at', '2026-11-29/2026-11-01');
INSERT INTO reconcile.diff_job_config VALUES ('x', 'sales.payments', 'sink.payments', 'payment_id,line_no', 'amount', '7 days');
INSERT INTO reconcile.diff_job_config VALUES ('x', 'sales.payments', 'sink.customers', 'payment_id', NULL, NULL);
-- A mixed-case table in a CSV file: the field sales."Orders" reaches the
-- loader as sales.Orders (COPY removes the quotes), which SQL reads as
-- sales.orders; the hint shows the field that works, which loads.
CREATE TABLE sales."Orders" (LIKE sales.src_orders);
COPY reconcile.diff_job_config (job, source, target, key_columns) FROM STDIN CSV HEADER;
job,source,target,key_columns
mixed,sales."Orders",sink.orders,"customer_id, PrimaryKEY1"
\.
COPY reconcile.diff_job_config (job, source, target, key_columns) FROM STDIN CSV HEADER;
job,source,target,key_columns
mixed,"sales.""Orders""",sink.orders,"customer_id, PrimaryKEY1"
\.
SELECT name, source, target FROM reconcile.diff_jobs WHERE name = 'mixed';
INSERT INTO reconcile.diff_job_config VALUES ('mixed', 'Sales.Orders', 'sink.orders', 'customer_id, PrimaryKEY1');
DELETE FROM reconcile.diff_job_config WHERE job = 'mixed';
DROP TABLE sales."Orders";
-- A bad row in a file: the COPY fails at its line, and no job of the file is kept.
COPY reconcile.diff_job_config (job, source, target, key_columns, updated_column, "window") FROM STDIN CSV HEADER;
job,source,target,key_columns,updated_column,window
fine,sales.customers,sink.customers,customer_id,,
broken,sales.customers,sink.customers,customer_ident,,
\.
SELECT count(*) AS fine_jobs FROM reconcile.diff_jobs WHERE name = 'fine';
-- A job changes by loading its row again, not by UPDATE; DELETE removes it.
UPDATE reconcile.diff_job_config SET "window" = '1 day' WHERE job = 'orders';
UPDATE reconcile.diff_job_config SET source = 'x' WHERE job = 'orders';
DELETE FROM reconcile.diff_job_config WHERE job = 'both_folded';
SELECT name FROM reconcile.diff_jobs ORDER BY name;

-- The lookback option of reconcile_diff itself.
SELECT issue, key FROM reconcile_diff('sales.src_orders', 'sink.orders', '{customer_id,PrimaryKEY1}',
    '{"updated_column": "updated_date", "lookback": "2 days 12 hours"}') ORDER BY key::text;
SELECT * FROM reconcile_diff('sales.src_orders', 'sink.orders', '{customer_id,PrimaryKEY1}', '{"lookback": "7 days"}');
SELECT * FROM reconcile_diff('sales.src_orders', 'sink.orders', '{customer_id,PrimaryKEY1}',
    '{"updated_column": "updated_date", "lookback": "7 days", "window": [null, null]}');
SELECT * FROM reconcile_diff('sales.src_orders', 'sink.orders', '{customer_id,PrimaryKEY1}',
    '{"updated_column": "updated_date", "lookback": 7}');
SELECT * FROM reconcile_diff('sales.src_orders', 'sink.orders', '{customer_id,PrimaryKEY1}',
    '{"updated_column": "updated_date", "lookback": "a week"}');

-- On a date column the look-back's start is inclusive and is the date of
-- now minus the interval: "7 days" reads today and the 7 dates before it
-- (8 calendar dates), "6 days" a week including today; dates after today
-- are in too (no end).
CREATE TABLE lb_src (id int PRIMARY KEY, d date);
CREATE TABLE lb_tgt (id int PRIMARY KEY, d date);
INSERT INTO lb_src SELECT i, (now() AT TIME ZONE 'UTC')::date - i FROM generate_series(-1, 9) i;
SELECT min(id) AS newest_day_back, max(id) AS oldest_day_back, count(*) AS dates
  FROM reconcile_diff('lb_src', 'lb_tgt', '{id}', '{"updated_column": "d", "lookback": "7 days"}') f,
       LATERAL (SELECT (f.key->>'id')::int AS id) k;
SELECT min(id) AS newest_day_back, max(id) AS oldest_day_back, count(*) AS dates
  FROM reconcile_diff('lb_src', 'lb_tgt', '{id}', '{"updated_column": "d", "lookback": "6 days"}') f,
       LATERAL (SELECT (f.key->>'id')::int AS id) k;
DROP TABLE lb_src, lb_tgt;

-- Privileges: loading writes diff_jobs with the loader's rights.
CREATE ROLE cfg_reader;
CREATE ROLE cfg_writer;
GRANT USAGE ON SCHEMA sales, sink TO cfg_reader, cfg_writer;
GRANT INSERT, UPDATE ON reconcile.diff_jobs TO cfg_writer;
SET ROLE cfg_reader;
SELECT job FROM reconcile.diff_job_config ORDER BY job;
INSERT INTO reconcile.diff_job_config VALUES ('mine', 'sales.customers', 'sink.customers', 'customer_id', NULL, NULL);
COPY reconcile.diff_job_config (job, source, target, key_columns, updated_column, "window") FROM STDIN CSV HEADER;
job,source,target,key_columns,updated_column,window
orders,sales.customers,sink.customers,customer_id,,
\.
RESET ROLE;
-- A writer needs no SELECT on the tables to configure a job; runs check that.
SET ROLE cfg_writer;
INSERT INTO reconcile.diff_job_config VALUES ('w_customers', 'sales.customers', 'sink.customers', 'customer_id', NULL, NULL);
SELECT job, error FROM reconcile_diff_run('w_customers');
RESET ROLE;
-- Row-level security on diff_jobs holds for loads through the view.
ALTER TABLE reconcile.diff_jobs ENABLE ROW LEVEL SECURITY;
CREATE POLICY cfg_test_all ON reconcile.diff_jobs FOR SELECT USING (true);
CREATE POLICY cfg_test_w ON reconcile.diff_jobs FOR ALL TO cfg_writer USING (name LIKE 'w\_%');
SET ROLE cfg_writer;
INSERT INTO reconcile.diff_job_config VALUES ('w_again', 'sales.customers', 'sink.customers', 'customer_id', NULL, NULL);
INSERT INTO reconcile.diff_job_config VALUES ('customers', 'sales.customers', 'sink.customers', 'customer_id', NULL, NULL);
RESET ROLE;
DROP POLICY cfg_test_all ON reconcile.diff_jobs;
DROP POLICY cfg_test_w ON reconcile.diff_jobs;
ALTER TABLE reconcile.diff_jobs DISABLE ROW LEVEL SECURITY;
SELECT name, source FROM reconcile.diff_jobs WHERE name LIKE 'w\_%' OR name = 'customers' ORDER BY name;
-- The trigger function is the view's alone.
SELECT has_function_privilege('cfg_writer', 'reconcile.diff_job_config_load()', 'EXECUTE') AS writer_may_call;

DROP OWNED BY cfg_reader, cfg_writer;
DROP ROLE cfg_reader, cfg_writer;
DROP TABLE jobs_before;
DROP SCHEMA sales, sink CASCADE;
DROP EXTENSION reconcile;
