-- Bounded work for small input in the diff's options (issue 19, defect 8):
-- leaf_rows 1 with split_factor 1000 works within memory over many rows,
-- and a grid beyond its bound is refused with a clear error.
CREATE EXTENSION reconcile;
CREATE EXTENSION postgres_fdw;
DO $$
BEGIN
    EXECUTE format('CREATE SERVER bounds_loopback FOREIGN DATA WRAPPER postgres_fdw'
                   ' OPTIONS (dbname %L, port %L, host %L)',
                   current_database(), current_setting('port'),
                   split_part(current_setting('unix_socket_directories'), ',', 1));
END
$$;
CREATE USER MAPPING FOR CURRENT_USER SERVER bounds_loopback;

-- 200,000 rows, 1,000 of them changed, one every 200: every range of the
-- first level differs, and its cells are split 1,000 ways (the next level
-- asked for 1.4 GB before, one range per cell of every differing range
-- times split_factor, where at most one range a cell can differ).
CREATE TABLE bounds_s (id int PRIMARY KEY, v int);
INSERT INTO bounds_s SELECT g, g FROM generate_series(1, 200000) AS g;
CREATE TABLE bounds_t (LIKE bounds_s INCLUDING ALL);
INSERT INTO bounds_t SELECT * FROM bounds_s;
UPDATE bounds_t SET v = -v WHERE id % 200 = 7;
ANALYZE bounds_s, bounds_t;
CREATE FOREIGN TABLE bounds_t_remote (id int, v int) SERVER bounds_loopback OPTIONS (table_name 'bounds_t');
SELECT o.opts, d.rows_source, d.matched, d.mismatched, d.missing_in_target, d.extra_in_target
FROM (VALUES ('{"leaf_rows": 1, "split_factor": 1000}'::jsonb), ('{"remote": "pull"}')) AS o(opts),
     LATERAL reconcile_diff_summary('bounds_s', 'bounds_t_remote', '{id}', o.opts) AS d;

-- A grid has at most 1,048,576 cells: leaf_rows 1 over 1,100,000 rows is
-- refused, saying what to set (by default the cells grow with the table).
CREATE TABLE bounds_big AS SELECT g AS id, 0 AS v FROM generate_series(1, 1100000) AS g;
CREATE TABLE bounds_few (id int, v int);
INSERT INTO bounds_few VALUES (1, 0), (2, 0);
CREATE FOREIGN TABLE bounds_few_remote (id int, v int) SERVER bounds_loopback OPTIONS (table_name 'bounds_few');
\set VERBOSITY default
SELECT rows_source, rows_target, matched, missing_in_target
FROM reconcile_diff_summary('bounds_big', 'bounds_few_remote', '{id}', '{"leaf_rows": 1}');
\set VERBOSITY terse

DROP FOREIGN TABLE bounds_t_remote, bounds_few_remote;
DROP TABLE bounds_s, bounds_t, bounds_big, bounds_few;
DROP USER MAPPING FOR CURRENT_USER SERVER bounds_loopback;
DROP SERVER bounds_loopback;
DROP EXTENSION postgres_fdw;
DROP EXTENSION reconcile;
