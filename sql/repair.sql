-- reconcile_repair: a diff's findings fixed, a plain target by guarded DML,
-- a registered one by a batch; after a repair without concurrent writes
-- the same diff finds nothing.  Races are in test/isolation/specs/repair_*.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;
-- A schema of its own: other files leave tables of these names behind.
CREATE SCHEMA repair_t;
SET search_path = repair_t, public;

-- ---- The example of docs/diff.md ("From finding to fix") ----
CREATE TABLE src_orders (order_id int PRIMARY KEY, amount numeric, status text);
CREATE TABLE sink_orders (order_id int PRIMARY KEY, amount numeric, status text);
INSERT INTO src_orders VALUES (1, 10, 'paid'), (2, 20, 'paid'), (3, 30, 'open');
INSERT INTO sink_orders VALUES (1, 10, 'paid'), (2, 21, 'paid'), (4, 40, 'open');
-- The plan, and nothing changes.
SELECT key, issue, action, outcome, old_values, new_values
  FROM reconcile_repair('src_orders', 'sink_orders', '{order_id}', '{"dry_run": true}');
SELECT * FROM sink_orders ORDER BY order_id;
-- The fix.
SELECT key, issue, action, outcome, old_values, new_values, batch_id
  FROM reconcile_repair('src_orders', 'sink_orders', '{order_id}');
SELECT * FROM sink_orders ORDER BY order_id;
SELECT count(*) AS findings_after FROM reconcile_diff('src_orders', 'sink_orders', '{order_id}');
-- Again: nothing to do.
SELECT count(*) FROM reconcile_repair('src_orders', 'sink_orders', '{order_id}');

-- ---- A plain target: every issue kind, NULLs, extra kept ----
CREATE TABLE p_src (a int, b text, v numeric, note text);
CREATE TABLE p_tgt (a int, b text, v numeric, note text);
INSERT INTO p_src VALUES (1, 'x', 1, 'n'), (1, 'y', NULL, 'n'), (2, 'x', 2, NULL), (3, 'x', 3, 'n'),
                         (5, 'x', 5, 'dup'), (5, 'x', 5, 'dup'), (NULL, 'x', 0, 'nullkey');
INSERT INTO p_tgt VALUES (1, 'x', 1, 'n'), (1, 'y', 7, 'n'), (2, 'x', 2, 'changed'), (4, 'x', 4, 'extra'),
                         (5, 'x', 5, 'one'), (6, 'z', NULL, NULL);
-- extra kept: EXTRA rows stay, reported; duplicate and NULL keys are skipped.
SELECT key, issue, action, outcome FROM reconcile_repair('p_src', 'p_tgt', '{a,b}', '{"extra": "keep"}')
 ORDER BY issue, key::text;
SELECT * FROM p_tgt ORDER BY a, b;
SELECT issue, key FROM reconcile_diff('p_src', 'p_tgt', '{a,b}') ORDER BY issue, key::text;
-- extra deleted.
SELECT key, issue, action, outcome FROM reconcile_repair('p_src', 'p_tgt', '{a,b}') ORDER BY issue, key::text;
SELECT issue, key FROM reconcile_diff('p_src', 'p_tgt', '{a,b}') ORDER BY issue, key::text;

-- ---- Options: window, column_map, tolerance, trim_keys ----
CREATE TABLE o_src (id text, amount numeric, status text, upd date);
CREATE TABLE o_tgt (ident text, amt numeric, state text, changed date, extra_col text DEFAULT 'kept');
INSERT INTO o_src VALUES ('a', 1.00, 'ok', '2026-11-01'), ('b ', 2.004, 'ok', '2026-11-02'),
                         ('c', 3, 'ok', '2026-11-03'), ('d', 4, 'old', '2026-10-01'), ('e', 5, 'ok', '2026-11-04');
INSERT INTO o_tgt VALUES ('a', 1.001, 'ok', '2026-11-01', 'x'), (' b', 2.0, 'ok', '2026-11-02', 'x'),
                         ('c', 3, 'bad', '2026-11-03', 'x'), ('d', 9, 'old', '2026-10-01', 'x'),
                         ('f', 6, 'ok', '2026-11-05', 'x'),
                         -- e is in the target, but outside the window: it is updated, not inserted twice
                         ('e', 5, 'ok', '2026-10-15', 'x');
\set oopts '{"column_map": {"id": "ident", "amount": "amt", "status": "state", "upd": "changed"}, "trim_keys": true, "tolerance": {"amount": 0.005}, "updated_column": "upd", "window": ["2026-11-01", "2026-11-30"]}'
SELECT issue, key FROM reconcile_diff('o_src', 'o_tgt', '{id}', :'oopts') ORDER BY key::text;
SELECT key, issue, action, outcome, old_values, new_values
  FROM reconcile_repair('o_src', 'o_tgt', '{id}', :'oopts') ORDER BY key::text;
SELECT * FROM o_tgt ORDER BY ident;
SELECT count(*) AS findings_after FROM reconcile_diff('o_src', 'o_tgt', '{id}', :'oopts');

-- A key with two source rows, one of them outside the window: skipped, reported.
CREATE TABLE w_src (id int, v int, upd date);
CREATE TABLE w_tgt (id int, v int, upd date);
INSERT INTO w_src VALUES (1, 1, '2026-11-10'), (1, 2, '2026-09-01'), (2, 2, '2026-11-10');
SELECT key, issue, action, outcome FROM reconcile_repair('w_src', 'w_tgt', '{id}',
    '{"updated_column": "upd", "window": ["2026-11-01", null]}') ORDER BY key::text;
SELECT * FROM w_tgt;

-- Naive times compared in the diff's time zone go back in that zone,
-- whatever the session's TimeZone.
CREATE TABLE z_src (id int, at timestamp);
CREATE TABLE z_tgt (id int, at timestamptz);
INSERT INTO z_src VALUES (1, '2026-11-01 10:00'), (2, '2026-11-02 10:00');
INSERT INTO z_tgt VALUES (1, '2026-11-01 09:00-05');
SET TimeZone = 'Asia/Tokyo';
SELECT key, action, outcome, old_values, new_values FROM reconcile_repair('z_src', 'z_tgt', '{id}',
    '{"time_zone": "America/New_York"}') ORDER BY key::text;
RESET TimeZone;
SELECT id, at AT TIME ZONE 'America/New_York' AS new_york FROM z_tgt ORDER BY id;
SELECT count(*) AS findings_after FROM reconcile_diff('z_src', 'z_tgt', '{id}', '{"time_zone": "America/New_York"}');

-- ---- A registered target: a batch, compare-and-set on the version ----
CREATE TABLE r_src (id int, name text, ver bigint);
CREATE TABLE r_tgt (id int PRIMARY KEY, name text, version bigint NOT NULL,
                    is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea);
SELECT reconcile_register(target => 'r_tgt', key_columns => '{id}', version_column => 'version',
    deleted_column => 'is_deleted', hash_column => 'payload_hash');
CREATE TABLE r_stage (object_key text, source_row bigint, operation text, id int, version bigint, name text);
INSERT INTO r_stage VALUES ('o1', 1, 'UPSERT', 1, 3, 'Ana'), ('o1', 2, 'UPSERT', 2, 5, 'Bo'),
                           ('o1', 3, 'UPSERT', 4, 2, 'Extra'), ('o1', 4, 'DELETE', 6, 7, 'Gone');
SELECT status, inserted, deleted FROM reconcile_batch('r_tgt', 'r_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"sha256:aa","rows":4}]');
INSERT INTO r_src VALUES (1, 'Ana', 3), (2, 'Bob', 9), (3, 'Cy', 1), (6, 'Back', 8);
-- Tombstones are deleted rows: 6 is missing, not different.
SELECT key, issue, action, outcome, old_values, new_values
  FROM reconcile_repair('r_src', 'r_tgt', '{id}', '{"ignore": ["ver"], "dry_run": true}') ORDER BY key::text;
SELECT key, issue, action, outcome, batch_id IS NOT NULL AS has_batch
  FROM reconcile_repair('r_src', 'r_tgt', '{id}', '{"ignore": ["ver"]}') ORDER BY key::text;
-- Versions one above what the diff saw; 4 became a tombstone, 6 came back.
SELECT id, name, version, is_deleted FROM r_tgt ORDER BY id;
SELECT source, "cursor" LIKE 'repair:r_src:%' AS run_cursor, staged_rows, inserted, updated, deleted, unchanged
  FROM reconcile.receipts WHERE source = 'repair:r_src';
SELECT object_key LIKE 'repair:r_src:%' AS repair_object, "rows" FROM reconcile.batch_objects
 WHERE batch_id IN (SELECT batch_id FROM reconcile.receipts WHERE source = 'repair:r_src');
CREATE VIEW r_live AS SELECT * FROM r_tgt WHERE NOT is_deleted;
SELECT count(*) AS findings_after FROM reconcile_diff('r_src', 'r_live', '{id}', '{"ignore": ["ver"]}');

-- The source's version column: the source's versions are written; a lower one is stale.
UPDATE r_src SET name = 'Bobby', ver = 20 WHERE id = 2;
UPDATE r_src SET name = 'Ana B', ver = 1 WHERE id = 1;
SELECT key, issue, action, outcome FROM reconcile_repair('r_src', 'r_tgt', '{id}',
    '{"ignore": ["ver"], "version_column": "ver", "run": "nightly-1"}') ORDER BY key::text;
SELECT id, name, version FROM r_tgt WHERE id IN (1, 2) ORDER BY id;
-- The same named run again replays: its receipt, nothing changed.
UPDATE r_src SET name = 'Cyrus' WHERE id = 3;
SELECT key, issue, action, outcome, batch_id = (SELECT batch_id FROM reconcile.receipts WHERE "cursor" = 'repair:r_src:nightly-1') AS same_batch
  FROM reconcile_repair('r_src', 'r_tgt', '{id}', '{"ignore": ["ver"], "version_column": "ver", "run": "nightly-1"}');
SELECT name FROM r_tgt WHERE id = 3;
-- A dry run of a named run that was applied still plans.
SELECT key, action, outcome FROM reconcile_repair('r_src', 'r_tgt', '{id}',
    '{"ignore": ["ver"], "run": "nightly-1", "dry_run": true}') ORDER BY key::text;

-- ---- Configured jobs ----
INSERT INTO reconcile.diff_jobs (name, source, target, key_columns, options)
    VALUES ('orders', 'src_orders', 'sink_orders', '{order_id}', '{"compare": ["amount", "status"]}');
UPDATE src_orders SET status = 'refunded' WHERE order_id = 3;
SELECT key, issue, action, outcome FROM reconcile_repair_run('orders', '{"dry_run": true}');
SELECT key, issue, action, outcome FROM reconcile_repair_run('orders');
SELECT count(*) FROM reconcile_diff('src_orders', 'sink_orders', '{order_id}');

-- ---- Every generated statement resolves nothing through the search_path ----
-- An "=" on text and on integer that never matches, ahead of pg_catalog.
CREATE SCHEMA evil;
CREATE FUNCTION evil.never(text, text) RETURNS boolean LANGUAGE sql AS 'SELECT false';
CREATE FUNCTION evil.never(integer, integer) RETURNS boolean LANGUAGE sql AS 'SELECT false';
CREATE OPERATOR evil.= (leftarg = text, rightarg = text, function = evil.never);
CREATE OPERATOR evil.= (leftarg = integer, rightarg = integer, function = evil.never);
CREATE TABLE e_src (id int, name text);
CREATE TABLE e_tgt (id int, name text);
INSERT INTO e_src VALUES (1, 'a'), (2, 'b');
INSERT INTO e_tgt VALUES (1, 'x'), (3, 'c');
SET search_path = evil, pg_catalog, repair_t, public;
SELECT key, issue, action, outcome FROM reconcile_repair('e_src', 'e_tgt', '{id}') ORDER BY key::text;
SELECT key, issue, action, outcome FROM reconcile_repair('r_src', 'r_tgt', '{id}', '{"ignore": ["ver"]}') ORDER BY key::text;
SET search_path = repair_t, public;
SELECT * FROM e_tgt ORDER BY id;
DROP TABLE e_src, e_tgt;
DROP SCHEMA evil CASCADE;

-- ---- Errors ----
SELECT * FROM reconcile_repair('src_orders', 'sink_orders', '{order_id}', '{"dry_run": "yes"}');
SELECT * FROM reconcile_repair('src_orders', 'sink_orders', '{order_id}', '{"extra": "ignore"}');
SELECT * FROM reconcile_repair('src_orders', 'sink_orders', '{order_id}', '{"run": ""}');
SELECT * FROM reconcile_repair('src_orders', 'sink_orders', '{order_id}', '[]');
SELECT * FROM reconcile_repair('src_orders', 'sink_orders', '{order_id}', '{"windows": []}');
SELECT * FROM reconcile_repair('src_orders', 'sink_orders', '{order_id}', '{"version_column": "amount"}');
SELECT * FROM reconcile_repair('src_orders', 'sink_orders', '{order_id}', '{"run": "r1"}');
SELECT * FROM reconcile_repair('r_src', 'r_tgt', '{id}', '{"version_column": "nope"}');
SELECT * FROM reconcile_repair('r_src', 'r_tgt', '{name}');
SELECT * FROM reconcile_repair(NULL, 'sink_orders', '{order_id}');
SELECT * FROM reconcile_repair_run('no_such_job');
INSERT INTO reconcile.diff_jobs (name, source, target, key_columns) VALUES ('gone', 'no_such_table', 'sink_orders', '{order_id}');
SELECT * FROM reconcile_repair_run('gone');

-- ---- Privileges ----
CREATE ROLE repair_reader;
GRANT SELECT ON src_orders, sink_orders, r_src, r_tgt TO repair_reader;
GRANT SELECT ON p_src TO repair_reader;
GRANT USAGE ON SCHEMA repair_t TO repair_reader;
SET ROLE repair_reader;
-- a dry run needs only SELECT
SELECT count(*) FROM reconcile_repair('src_orders', 'sink_orders', '{order_id}', '{"dry_run": true}');
SELECT * FROM reconcile_repair('src_orders', 'sink_orders', '{order_id}');
SELECT * FROM reconcile_repair('r_src', 'r_tgt', '{id}');
SELECT * FROM reconcile_repair('p_src', 'p_tgt', '{a,b}', '{"dry_run": true}');
RESET ROLE;
GRANT INSERT, UPDATE ON sink_orders TO repair_reader;
SET ROLE repair_reader;
SELECT * FROM reconcile_repair('src_orders', 'sink_orders', '{order_id}');
-- without DELETE, extra rows can be kept
SELECT count(*) FROM reconcile_repair('src_orders', 'sink_orders', '{order_id}', '{"extra": "keep"}');
RESET ROLE;

RESET client_min_messages;
DROP TABLE src_orders, sink_orders, p_src, p_tgt, o_src, o_tgt, w_src, w_tgt, z_src, z_tgt, r_stage, r_src CASCADE;
SELECT reconcile_unregister('r_tgt');
DROP TABLE r_tgt CASCADE;
RESET search_path;
DROP SCHEMA repair_t CASCADE;
DROP ROLE repair_reader;
DROP EXTENSION reconcile;
