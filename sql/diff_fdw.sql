-- reconcile_diff with a foreign table (postgres_fdw, loopback) as a side.
CREATE EXTENSION reconcile;
CREATE EXTENSION postgres_fdw;
DO $$
BEGIN
    EXECUTE format('CREATE SERVER diff_loopback FOREIGN DATA WRAPPER postgres_fdw'
                   ' OPTIONS (dbname %L, port %L, host %L)',
                   current_database(), current_setting('port'),
                   split_part(current_setting('unix_socket_directories'), ',', 1));
END
$$;
CREATE USER MAPPING FOR CURRENT_USER SERVER diff_loopback;

CREATE TABLE remote_orders (id integer PRIMARY KEY, code text, amount numeric, status text);
INSERT INTO remote_orders VALUES (1, 'A', 10, 'paid'), (2, 'B', 20, 'paid'),
    (3, 'C', 30, 'open'), (5, 'E', 50, 'paid');
-- The foreign table declares its columns in another order.
CREATE FOREIGN TABLE f_orders (status text, amount numeric, code text, id integer)
    SERVER diff_loopback OPTIONS (table_name 'remote_orders');
CREATE TABLE local_orders (id integer PRIMARY KEY, code text, amount numeric, status text);
INSERT INTO local_orders VALUES (1, 'A', 10, 'paid'), (2, 'B', 21, 'paid'),
    (4, 'D', 40, 'open'), (5, 'E ', 50, NULL);

-- Foreign table as the source, then as the target.
SELECT issue, key, columns, source_values, target_values
FROM reconcile_diff('f_orders', 'local_orders', '{id}') ORDER BY key::text COLLATE "C";
SELECT issue, key, columns
FROM reconcile_diff('local_orders', 'f_orders', '{id}', '{"ignore": ["status"]}') ORDER BY key::text COLLATE "C";
-- Both sides foreign, keyed on a text column.
SELECT * FROM reconcile_diff('f_orders', 'f_orders', '{code}');
SELECT rows_source, rows_target, matched, mismatched, column_mismatches
FROM reconcile_diff_summary('f_orders', 'local_orders', '{id}');

DROP FOREIGN TABLE f_orders;
DROP USER MAPPING FOR CURRENT_USER SERVER diff_loopback;
DROP SERVER diff_loopback;
DROP EXTENSION postgres_fdw;
DROP EXTENSION reconcile;
