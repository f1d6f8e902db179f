-- reconcile_diff by checksums of key ranges when a side is a foreign table
-- (postgres_fdw, loopback): the findings and counts equal the local diff's.
CREATE EXTENSION reconcile;
CREATE EXTENSION postgres_fdw;
DO $$
BEGIN
    EXECUTE format('CREATE SERVER xdiff_loopback FOREIGN DATA WRAPPER postgres_fdw'
                   ' OPTIONS (dbname %L, port %L, host %L)',
                   current_database(), current_setting('port'),
                   split_part(current_setting('unix_socket_directories'), ',', 1));
END
$$;
CREATE USER MAPPING FOR CURRENT_USER SERVER xdiff_loopback;
-- The local session's time zone differs from the remote session's (UTC).
SET TimeZone = 'America/New_York';

CREATE TABLE xs (id integer, k2 text, amount numeric, qty integer, price float8,
                 ts timestamptz, d date, note varchar(20), flag boolean, upd timestamp);
INSERT INTO xs SELECT g, 'k' || (g % 7), g / 4.0, g % 13, g * 1.25,
    '2026-01-01 00:00+00'::timestamptz + g * interval '1 hour', date '2026-01-01' + g,
    'n' || g, g % 2 = 0, timestamp '2026-11-01' + g * interval '1 minute'
FROM generate_series(1, 400) g;
CREATE TABLE xt (LIKE xs);
INSERT INTO xt SELECT * FROM xs;
-- Every kind of issue.
DELETE FROM xt WHERE id IN (7, 123, 399);                        -- missing in target
INSERT INTO xt (id, k2, amount) VALUES (401, 'k2', 1), (0, 'k0', 0); -- extra in target
UPDATE xt SET amount = amount + 1 WHERE id = 10;                 -- mismatch
UPDATE xt SET note = 'changed', flag = NOT flag WHERE id = 200;
UPDATE xt SET ts = ts + interval '1 microsecond' WHERE id = 300;
UPDATE xt SET price = NULL WHERE id = 301;
UPDATE xt SET d = NULL, qty = NULL WHERE id = 302;
UPDATE xs SET note = NULL WHERE id = 303;
-- Equal values in other forms: numeric scale, the same instant.
UPDATE xs SET amount = 5.0 WHERE id = 20;
UPDATE xt SET amount = 5.000 WHERE id = 20;
UPDATE xt SET ts = '2026-01-01 00:00:00-05' WHERE id = 5;        -- = 05:00 UTC, as in xs
-- The same duplicate on both sides: equal checksums must not hide it.
INSERT INTO xs SELECT * FROM xs WHERE id = 50;
INSERT INTO xt SELECT * FROM xt WHERE id = 50;
-- A duplicate on one side only.
INSERT INTO xt SELECT * FROM xt WHERE id = 60;
-- NULL keys, the same on both sides, and one in the second key column.
INSERT INTO xs (id, k2, amount) VALUES (NULL, 'kn', 1);
INSERT INTO xt (id, k2, amount) VALUES (NULL, 'kn', 1);
UPDATE xs SET k2 = NULL WHERE id = 250;
UPDATE xt SET k2 = NULL WHERE id = 250;
-- Amounts within and beyond a tolerance of 0.005.
UPDATE xt SET amount = amount + 0.004 WHERE id = 30;
UPDATE xt SET amount = amount + 0.006 WHERE id = 31;
UPDATE xt SET amount = amount - 0.005 WHERE id = 32;

CREATE FOREIGN TABLE fxs (id integer, k2 text, amount numeric, qty integer, price float8,
                          ts timestamptz, d date, note varchar(20), flag boolean, upd timestamp)
    SERVER xdiff_loopback OPTIONS (table_name 'xs');
CREATE FOREIGN TABLE fxt (id integer, k2 text, amount numeric, qty integer, price float8,
                          ts timestamptz, d date, note varchar(20), flag boolean, upd timestamp)
    SERVER xdiff_loopback OPTIONS (table_name 'xt');

-- Findings of the checksum diff with foreign side(s) against the local diff
-- of the same tables: the rows in one and not in the other (none expected),
-- the number of findings, and whether the summaries are equal.
CREATE FUNCTION xdiff_check(ls regclass, lt regclass, fs regclass, ft regclass,
                            keys text[], opts jsonb,
                            OUT only_one bigint, OUT findings bigint, OUT same_summary boolean)
LANGUAGE sql AS $$
    WITH remote AS (SELECT * FROM reconcile_diff(fs, ft, keys, opts || '{"remote": "checksum"}')),
         local AS (SELECT * FROM reconcile_diff(ls, lt, keys, opts))
    SELECT (SELECT count(*) FROM ((TABLE remote EXCEPT ALL TABLE local)
                                  UNION ALL (TABLE local EXCEPT ALL TABLE remote)) x),
           (SELECT count(*) FROM remote),
           (SELECT row(s.*)::text FROM reconcile_diff_summary(fs, ft, keys, opts || '{"remote": "checksum"}') s)
         = (SELECT row(s.*)::text FROM reconcile_diff_summary(ls, lt, keys, opts) s)
$$;

-- The findings themselves, once, with the source foreign.
SELECT issue, key, columns, source_values, target_values
FROM reconcile_diff('fxs', 'xt', '{id}', '{"remote": "checksum", "compare": ["amount","qty","price","ts","d","note","flag"]}')
ORDER BY issue, key::text COLLATE "C", source_values::text COLLATE "C";

-- Source foreign, target foreign, both; defaults and small ranges that split
-- many times; one key column and two.
SELECT o.opts, c.*
FROM (VALUES ('{}'::jsonb), ('{"leaf_rows": 1}'), ('{"leaf_rows": 4, "split_factor": 2}'),
             ('{"leaf_rows": 1000}'), ('{"leaf_rows": 3, "split_factor": 3, "ignore": ["k2"]}')) o(opts),
     LATERAL xdiff_check('xs', 'xt', 'fxs', 'xt', '{id}', o.opts) c;
SELECT o.opts, c.*
FROM (VALUES ('{}'::jsonb), ('{"leaf_rows": 2, "split_factor": 4}')) o(opts),
     LATERAL xdiff_check('xs', 'xt', 'xs', 'fxt', '{id}', o.opts) c;
SELECT o.opts, c.*
FROM (VALUES ('{}'::jsonb), ('{"leaf_rows": 5, "split_factor": 2}')) o(opts),
     LATERAL xdiff_check('xs', 'xt', 'fxs', 'fxt', '{id}', o.opts) c;
SELECT o.opts, c.*
FROM (VALUES ('{}'::jsonb), ('{"leaf_rows": 2}')) o(opts),
     LATERAL xdiff_check('xs', 'xt', 'fxs', 'xt', '{id,k2}', o.opts) c;
SELECT o.opts, c.*
FROM (VALUES ('{}'::jsonb), ('{"leaf_rows": 2}')) o(opts),
     LATERAL xdiff_check('xs', 'xt', 'fxs', 'xt', '{k2,id}', o.opts) c;

-- A target whose key is a primary key: the source's duplicates and NULL
-- keys are found by the checksums alone.
CREATE TABLE xtu AS SELECT DISTINCT ON (id) * FROM xt WHERE id IS NOT NULL AND k2 IS NOT NULL ORDER BY id;
ALTER TABLE xtu ADD PRIMARY KEY (id);
CREATE TABLE xtu2 AS SELECT * FROM xtu;
ALTER TABLE xtu2 ADD PRIMARY KEY (id, k2);
SELECT o.opts, c.*
FROM (VALUES ('{}'::jsonb), ('{"leaf_rows": 2, "split_factor": 3}')) o(opts),
     LATERAL xdiff_check('xs', 'xtu', 'fxs', 'xtu', '{id}', o.opts) c;
SELECT o.opts, c.*
FROM (VALUES ('{}'::jsonb), ('{"leaf_rows": 2, "split_factor": 3}')) o(opts),
     LATERAL xdiff_check('xs', 'xtu2', 'fxs', 'xtu2', '{id,k2}', o.opts) c;
SELECT o.opts, c.*
FROM (VALUES ('{}'::jsonb)) o(opts),
     LATERAL xdiff_check('xtu', 'xs', 'xtu', 'fxs', '{id}', o.opts) c;

-- Windows, the cutoff, tolerances, a subset of columns.
SELECT o.opts, c.*
FROM (VALUES ('{"updated_column": "upd", "window": ["2026-11-01 01:00", "2026-11-01 04:00"]}'::jsonb),
             ('{"updated_column": "upd", "window": [null, "2026-11-01 02:00"], "leaf_rows": 2}'),
             ('{"updated_column": "upd", "cutoff": "source_max", "window": [null, "2026-11-01 05:00"]}'),
             ('{"tolerance": {"amount": 0.005}, "leaf_rows": 2}'),
             ('{"tolerance": {"amount": 0.005, "qty": 1, "price": 0}}'),
             ('{"tolerance": {"amount": 100}}'),
             ('{"compare": ["amount"], "leaf_rows": 3}'),
             ('{"ignore": ["ts", "note"]}')) o(opts),
     LATERAL xdiff_check('xs', 'xt', 'fxs', 'xt', '{id}', o.opts) c;

-- Text keys: trim_keys, column_map and target_key_columns.
CREATE TABLE ys (code text, val numeric, label text);
INSERT INTO ys SELECT 'c' || g, g, 'l' || g FROM generate_series(1, 60) g;
CREATE TABLE yt (kode varchar(10), val numeric, etikett text);
INSERT INTO yt SELECT code, val, label FROM ys;
UPDATE yt SET kode = ' ' || kode || ' ' WHERE kode IN ('c5', 'c17');
UPDATE yt SET etikett = 'other' WHERE kode = 'c40';
DELETE FROM yt WHERE kode = 'c41';
INSERT INTO yt VALUES ('c41 ', 41, 'l41');
CREATE FOREIGN TABLE fys (code text, val numeric, label text)
    SERVER xdiff_loopback OPTIONS (table_name 'ys');
CREATE FOREIGN TABLE fyt (kode varchar(10), val numeric, etikett text)
    SERVER xdiff_loopback OPTIONS (table_name 'yt');
SELECT o.opts, c.*
FROM (VALUES ('{"column_map": {"code": "kode", "label": "etikett"}}'::jsonb),
             ('{"column_map": {"code": "kode", "label": "etikett"}, "trim_keys": true, "leaf_rows": 2}'),
             ('{"target_key_columns": ["kode"], "column_map": {"label": "etikett"}, "trim_keys": true}')) o(opts),
     LATERAL xdiff_check('ys', 'yt', 'fys', 'yt', '{code}', o.opts) c;
SELECT o.opts, c.*
FROM (VALUES ('{"column_map": {"code": "kode", "label": "etikett"}, "trim_keys": true}'::jsonb)) o(opts),
     LATERAL xdiff_check('ys', 'yt', 'ys', 'fyt', '{code}', o.opts) c;

-- Empty sides.
CREATE TABLE zs (id integer PRIMARY KEY, v text);
CREATE FOREIGN TABLE fzs (id integer, v text) SERVER xdiff_loopback OPTIONS (table_name 'zs');
SELECT * FROM xdiff_check('zs', 'zs', 'fzs', 'zs', '{id}', '{}');
SELECT * FROM xdiff_check('zs', 'ys', 'fzs', 'ys', '{id}', '{"target_key_columns": ["val"], "compare": []}');

-- Configured jobs take the same path.
INSERT INTO reconcile.diff_jobs VALUES ('xdiff_job', 'fxs', 'xt', '{id}', '{"remote": "checksum"}');
SELECT job, rows_source, rows_target, matched, missing_in_target, extra_in_target, mismatched,
       duplicate_keys, null_keys, findings, error
FROM reconcile_diff_run('xdiff_job');
SELECT count(*) FROM reconcile.diff_results r JOIN reconcile.diff_runs u USING (run_id)
WHERE u.job = 'xdiff_job';
DELETE FROM reconcile.diff_runs WHERE job = 'xdiff_job';
DELETE FROM reconcile.diff_jobs WHERE name = 'xdiff_job';

-- What cannot be hashed on the remote server: "checksum" says so, "auto"
-- reads every row and finds the same.
CREATE TABLE js (id integer, doc json, at time);
INSERT INTO js VALUES (1, '{"a": 1}', '10:00'), (2, '{"a": 2}', '11:00');
CREATE FOREIGN TABLE fjs (id integer, doc json, at time) SERVER xdiff_loopback OPTIONS (table_name 'js');
SELECT * FROM reconcile_diff('fjs', 'js', '{id}', '{"remote": "checksum"}');
SELECT * FROM reconcile_diff('fjs', 'js', '{id}', '{"remote": "checksum", "ignore": ["doc"], "tolerance": {"at": "1 second"}}');
SELECT * FROM reconcile_diff('fjs', 'js', '{id}', '{"remote": "checksum", "ignore": ["doc"]}');
CREATE TABLE js2 AS SELECT * FROM js;
UPDATE js2 SET doc = '{"a": 3}' WHERE id = 2;
SELECT * FROM reconcile_diff('fjs', 'js2', '{id}');
-- timestamp against timestamptz: compared as wall-clock times in the diff's
-- time zone; a naive foreign side is hashed as it is, a timestamptz one
-- through pg_catalog.timezone(zone, column), which postgres_fdw does not
-- push down (a text constant has no collation of a foreign column).
CREATE TABLE ks (id integer, at timestamp);
INSERT INTO ks VALUES (1, '2026-01-01 10:00'), (2, '2026-01-01 12:00');
CREATE FOREIGN TABLE fks (id integer, at timestamp) SERVER xdiff_loopback OPTIONS (table_name 'ks');
CREATE TABLE kt (id integer, at timestamptz);
INSERT INTO kt VALUES (1, '2026-01-01 10:00+00'), (2, '2026-01-01 12:00');
CREATE FOREIGN TABLE fkt (id integer, at timestamptz) SERVER xdiff_loopback OPTIONS (table_name 'kt');
SELECT * FROM reconcile_diff('fks', 'kt', '{id}', '{"remote": "checksum"}');
SELECT * FROM xdiff_check('ks', 'kt', 'fks', 'kt', '{id}', '{}');
SELECT * FROM xdiff_check('ks', 'kt', 'fks', 'kt', '{id}', '{"time_zone": "America/New_York"}');
SELECT * FROM reconcile_diff('ks', 'fkt', '{id}', '{"remote": "checksum"}');
SELECT * FROM reconcile_diff('ks', 'fkt', '{id}');
-- "pull" reads every row, as before.
SELECT * FROM xdiff_check('xs', 'xt', 'fxs', 'xt', '{id}', '{"remote": "pull"}');

-- A sample of cells chooses the way: level by level from wide ranges (few
-- differences), all the cells at once (some), every row's hash straight
-- away (most).  The findings are the same each way, and with postgres_fdw's
-- async_capable, where the remote and local parts of a query run at once.
CREATE TABLE ws (id integer PRIMARY KEY, v integer, t text);
INSERT INTO ws SELECT g, g, 't' || g FROM generate_series(1, 3000) g;
CREATE TABLE wt1 AS SELECT * FROM ws;
UPDATE wt1 SET v = -v WHERE id IN (100, 2900);
DELETE FROM wt1 WHERE id = 1500;
CREATE TABLE wt2 AS SELECT * FROM ws;
UPDATE wt2 SET t = t || 'x' WHERE id % 50 = 3;
CREATE TABLE wt3 AS SELECT * FROM ws;
UPDATE wt3 SET v = v + 1 WHERE id % 3 <> 0;
DELETE FROM wt3 WHERE id % 7 = 0;
INSERT INTO wt3 VALUES (5000, 1, 'new'), (NULL, 2, 'null key'), (10, 3, 'duplicate');
CREATE FOREIGN TABLE fws (id integer, v integer, t text)
    SERVER xdiff_loopback OPTIONS (table_name 'ws');
CREATE FOREIGN TABLE fwt3 (id integer, v integer, t text)
    SERVER xdiff_loopback OPTIONS (table_name 'wt3');
SELECT count(*) FROM fws JOIN fwt3 USING (id);
SET client_min_messages = debug1;
SELECT * FROM xdiff_check('ws', 'wt1', 'fws', 'wt1', '{id}', '{"leaf_rows": 8}');
SELECT * FROM xdiff_check('ws', 'wt2', 'fws', 'wt2', '{id}', '{"leaf_rows": 8}');
SELECT * FROM xdiff_check('ws', 'wt3', 'fws', 'wt3', '{id}', '{"leaf_rows": 8}');
SELECT * FROM xdiff_check('ws', 'wt3', 'ws', 'fwt3', '{id}', '{"leaf_rows": 8}');
SELECT * FROM xdiff_check('ws', 'wt3', 'fws', 'fwt3', '{id,v}', '{"leaf_rows": 8}');
ALTER SERVER xdiff_loopback OPTIONS (ADD async_capable 'true');
SELECT * FROM xdiff_check('ws', 'wt1', 'fws', 'wt1', '{id}', '{"leaf_rows": 8}');
SELECT * FROM xdiff_check('ws', 'wt2', 'fws', 'wt2', '{id}', '{"leaf_rows": 8}');
SELECT * FROM xdiff_check('ws', 'wt3', 'fws', 'wt3', '{id}', '{"leaf_rows": 8}');
SELECT * FROM xdiff_check('ws', 'wt3', 'fws', 'fwt3', '{id}', '{"leaf_rows": 8}');
SELECT o.opts, c.*
FROM (VALUES ('{}'::jsonb), ('{"leaf_rows": 1}'), ('{"leaf_rows": 4, "split_factor": 2}')) o(opts),
     LATERAL xdiff_check('xs', 'xt', 'fxs', 'xt', '{id}', o.opts) c;
RESET client_min_messages;
ALTER SERVER xdiff_loopback OPTIONS (DROP async_capable);

-- Bad options.
SELECT * FROM reconcile_diff('fxs', 'xt', '{id}', '{"remote": "fast"}');
SELECT * FROM reconcile_diff('fxs', 'xt', '{id}', '{"remote": true}');
SELECT * FROM reconcile_diff('fxs', 'xt', '{id}', '{"split_factor": 1}');
SELECT * FROM reconcile_diff('fxs', 'xt', '{id}', '{"split_factor": 2.5}');
SELECT * FROM reconcile_diff('fxs', 'xt', '{id}', '{"split_factor": "4"}');
SELECT * FROM reconcile_diff('fxs', 'xt', '{id}', '{"split_factor": 1001}');
SELECT * FROM reconcile_diff('fxs', 'xt', '{id}', '{"leaf_rows": 0}');
SELECT * FROM reconcile_diff('fxs', 'xt', '{id}', '{"leaf_rows": -3}');
SELECT * FROM reconcile_diff('fxs', 'xt', '{id}', '{"leaf_rows": 1e20}');
SELECT * FROM reconcile_diff('fxs', 'xt', '{id}', '{"leaf_rows": null}');

-- An error on the remote server is the diff's error, with its SQLSTATE.
ALTER FOREIGN TABLE fxs OPTIONS (SET table_name 'no_such_table');
\set VERBOSITY sqlstate
SELECT * FROM reconcile_diff('fxs', 'xt', '{id}');
\set VERBOSITY default
SELECT * FROM reconcile_diff('fxs', 'xt', '{id}');

RESET TimeZone;
DROP FUNCTION xdiff_check;
DROP FOREIGN TABLE fxs, fxt, fys, fyt, fzs, fjs, fks, fkt, fws, fwt3;
DROP TABLE xs, xt, xtu, xtu2, ys, yt, zs, js, js2, ks, kt, ws, wt1, wt2, wt3;
DROP USER MAPPING FOR CURRENT_USER SERVER xdiff_loopback;
DROP SERVER xdiff_loopback;
DROP EXTENSION postgres_fdw;
DROP EXTENSION reconcile;
