-- The postgres_fdw set-up example of docs/diff.md ("Setting up a foreign
-- side"), step for step, against this server (loopback) in place of
-- erp.example.com: keep the two in step.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;
-- The "remote" database's table, in schema erp_sales.
CREATE SCHEMA erp_sales;
CREATE TABLE erp_sales.orders (order_id int PRIMARY KEY, amount numeric, status text);
INSERT INTO erp_sales.orders VALUES (1, 10, 'paid'), (2, 20, 'paid'), (3, 30, 'open');
-- The local copy that should match it.
CREATE SCHEMA sink;
CREATE TABLE sink.orders (order_id int PRIMARY KEY, amount numeric, status text);
INSERT INTO sink.orders VALUES (1, 10, 'paid'), (2, 21, 'paid'), (4, 40, 'open');

-- 1. The wrapper and the server.
CREATE EXTENSION postgres_fdw;
DO $$
BEGIN
    EXECUTE format('CREATE SERVER erp FOREIGN DATA WRAPPER postgres_fdw'
                   ' OPTIONS (host %L, port %L, dbname %L, fetch_size ''1000'')',
                   split_part(current_setting('unix_socket_directories'), ',', 1),
                   current_setting('port'), current_database());
END
$$;
-- 2. Who connects as whom (the docs give a user and password).
CREATE USER MAPPING FOR CURRENT_USER SERVER erp;
-- 3. The remote tables, as foreign tables of a local schema.
CREATE SCHEMA erp;
IMPORT FOREIGN SCHEMA erp_sales LIMIT TO (orders) FROM SERVER erp INTO erp;
SELECT foreign_table_schema, foreign_table_name FROM information_schema.foreign_tables;
-- 4. The diff, by checksums of key ranges (the default "remote": "auto").
SELECT issue, key, columns, source_values, target_values
  FROM reconcile_diff('erp.orders', 'sink.orders', '{order_id}') ORDER BY key::text;
SELECT rows_source, rows_target, matched, missing_in_target, extra_in_target, mismatched
  FROM reconcile_diff_summary('erp.orders', 'sink.orders', '{order_id}');
-- 5. As a configured job.
INSERT INTO reconcile.diff_job_config (job, source, target, key_columns)
    VALUES ('erp_orders', 'erp.orders', 'sink.orders', 'order_id');
SELECT job, matched, missing_in_target, extra_in_target, mismatched, findings, error
  FROM reconcile_diff_run('erp_orders');

RESET client_min_messages;
DROP SCHEMA erp CASCADE;
DROP USER MAPPING FOR CURRENT_USER SERVER erp;
DROP SERVER erp;
DROP EXTENSION postgres_fdw;
DROP SCHEMA erp_sales CASCADE;
DROP SCHEMA sink CASCADE;
DROP EXTENSION reconcile;
