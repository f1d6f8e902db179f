-- The history of configured diffs (reconcile.diff_runs, diff_results) is
-- shown to a reader only as the sides would show it: where the rows depend
-- on the reader (a view, a security-barrier view, a foreign table read
-- through a user mapping of one's own), only the role that ran the job and
-- the members of that role see the run and its findings; a table with
-- row-level security shows them to the runner and to readers it does not
-- restrict; a plain table to every role that may read both sides.
CREATE EXTENSION reconcile;
CREATE EXTENSION postgres_fdw;
SET client_min_messages = warning;
CREATE ROLE regress_hist_owner;
CREATE ROLE regress_hist_alice;
CREATE ROLE regress_hist_bob;
CREATE ROLE regress_hist_carol;            -- alice's manager: a member of alice
GRANT regress_hist_alice TO regress_hist_carol;
CREATE ROLE regress_hist_auditor;          -- reads the tables, no view of its own

-- Orders of two sales reps, on both sides; one differing amount each.
CREATE TABLE orders_src (id int PRIMARY KEY, rep name NOT NULL, amount numeric);
CREATE TABLE orders_tgt (id int PRIMARY KEY, rep name NOT NULL, amount numeric);
INSERT INTO orders_src VALUES (1, 'regress_hist_alice', 10), (2, 'regress_hist_alice', 20),
                              (3, 'regress_hist_bob', 30), (4, 'regress_hist_bob', 40);
INSERT INTO orders_tgt VALUES (1, 'regress_hist_alice', 10), (2, 'regress_hist_alice', 21),
                              (3, 'regress_hist_bob', 30), (4, 'regress_hist_bob', 41);
ALTER TABLE orders_src OWNER TO regress_hist_owner;
ALTER TABLE orders_tgt OWNER TO regress_hist_owner;
GRANT SELECT ON orders_src, orders_tgt TO regress_hist_auditor;

-- Each rep's views show the rep's own orders.
CREATE VIEW my_src AS SELECT * FROM orders_src WHERE rep = current_user;
CREATE VIEW my_tgt AS SELECT * FROM orders_tgt WHERE rep = current_user;
CREATE VIEW my_src_sb WITH (security_barrier) AS SELECT * FROM orders_src WHERE rep = current_user;
CREATE VIEW my_tgt_sb WITH (security_barrier) AS SELECT * FROM orders_tgt WHERE rep = current_user;
ALTER VIEW my_src OWNER TO regress_hist_owner;
ALTER VIEW my_tgt OWNER TO regress_hist_owner;
ALTER VIEW my_src_sb OWNER TO regress_hist_owner;
ALTER VIEW my_tgt_sb OWNER TO regress_hist_owner;
GRANT SELECT ON my_src, my_tgt, my_src_sb, my_tgt_sb
    TO regress_hist_alice, regress_hist_bob, regress_hist_auditor;

-- A table with row-level security: each rep reads its own rows.
CREATE TABLE orders_rls (id int PRIMARY KEY, rep name NOT NULL, amount numeric);
INSERT INTO orders_rls SELECT * FROM orders_src;
ALTER TABLE orders_rls OWNER TO regress_hist_owner;
ALTER TABLE orders_rls ENABLE ROW LEVEL SECURITY;
CREATE POLICY own_rows ON orders_rls USING (rep = current_user);
GRANT SELECT ON orders_rls TO regress_hist_alice, regress_hist_bob, regress_hist_auditor;
GRANT SELECT ON orders_tgt TO regress_hist_alice, regress_hist_bob;

-- A foreign table (postgres_fdw, loopback) over a remote view that shows
-- the remote user's orders: alice and bob each have a mapping of their own.
DO $$
BEGIN
    EXECUTE format('CREATE SERVER hist_loopback FOREIGN DATA WRAPPER postgres_fdw'
                   ' OPTIONS (dbname %L, port %L, host %L)',
                   current_database(), current_setting('port'),
                   split_part(current_setting('unix_socket_directories'), ',', 1));
END
$$;
CREATE VIEW remote_mine AS SELECT * FROM orders_src WHERE rep = current_user;
ALTER VIEW remote_mine OWNER TO regress_hist_owner;
GRANT SELECT ON remote_mine TO PUBLIC;
ALTER ROLE regress_hist_alice LOGIN;
ALTER ROLE regress_hist_bob LOGIN;
CREATE USER MAPPING FOR regress_hist_alice SERVER hist_loopback
    OPTIONS (user 'regress_hist_alice', password_required 'false');
CREATE USER MAPPING FOR regress_hist_bob SERVER hist_loopback
    OPTIONS (user 'regress_hist_bob', password_required 'false');
CREATE FOREIGN TABLE f_mine (id int, rep name, amount numeric)
    SERVER hist_loopback OPTIONS (table_name 'remote_mine');
GRANT SELECT ON f_mine TO regress_hist_alice, regress_hist_bob, regress_hist_auditor;
GRANT SELECT ON orders_tgt TO regress_hist_alice, regress_hist_bob;

INSERT INTO reconcile.diff_jobs VALUES
    ('view',    'public.my_src',     'public.my_tgt',     '{id}', NULL),
    ('sb_view', 'public.my_src_sb',  'public.my_tgt_sb',  '{id}', NULL),
    ('rls',     'public.orders_rls', 'public.orders_tgt', '{id}', NULL),
    ('foreign', 'public.f_mine',     'public.orders_tgt', '{id}', '{"remote": "pull"}'),
    ('plain',   'public.orders_src', 'public.orders_tgt', '{id}', NULL);
GRANT SELECT ON orders_src TO regress_hist_alice;

-- What a role sees of the history: runs (by job) and findings (by key).
CREATE FUNCTION seen() RETURNS TABLE (job text, runs bigint, findings text)
LANGUAGE sql AS $$
    SELECT j.name,
           (SELECT count(*) FROM reconcile.diff_runs r WHERE r.job = j.name),
           (SELECT string_agg(d.issue || ' ' || (d.key->>'id'), ', ' ORDER BY d.key->>'id')
              FROM reconcile.diff_results d JOIN reconcile.diff_runs r USING (run_id)
             WHERE r.job = j.name)
      FROM reconcile.diff_jobs j ORDER BY j.name
$$;
GRANT EXECUTE ON FUNCTION seen() TO PUBLIC;

-- alice runs every job: her views, her rows of the RLS table and her
-- remote rows show her orders 1 and 2 (2 differs); the plain tables all.
SET ROLE regress_hist_alice;
SELECT job, rows_source, rows_target, findings, reader_dependent, sqlstate, error
FROM reconcile_diff_run() ORDER BY job;
SELECT * FROM seen();
RESET ROLE;

-- bob may read the same views, the RLS table and the foreign table, and
-- sees his own orders there: none of alice's runs or findings (1.1 showed
-- him alice's findings of both view jobs).  He may not read orders_src:
-- not the plain run either.
SET ROLE regress_hist_bob;
SELECT * FROM seen();
SELECT count(*) AS bobs_view_rows FROM my_src;
RESET ROLE;

-- carol, a member of alice, sees what alice saw.
SET ROLE regress_hist_carol;
SELECT * FROM seen();
RESET ROLE;

-- The auditor reads both plain tables and is not restricted on them: it
-- sees the plain run; not the view runs (its views show no rows of its
-- own), the RLS run (restricted to no rows there) nor the foreign one (no
-- mapping of its own, and alice read through hers).
SET ROLE regress_hist_auditor;
SELECT * FROM seen();
RESET ROLE;

-- The owner of the RLS table is not restricted by it: it sees the RLS run
-- and the plain one (it reads both tables), not the view or foreign runs.
SET ROLE regress_hist_owner;
SELECT * FROM seen();
RESET ROLE;

-- bob runs the view job: his own findings, which alice does not see.
SET ROLE regress_hist_bob;
SELECT job, findings FROM reconcile_diff_run('view');
SELECT * FROM seen() WHERE job = 'view';
RESET ROLE;
SET ROLE regress_hist_alice;
SELECT * FROM seen() WHERE job = 'view';
RESET ROLE;

-- Through the server's PUBLIC mapping alone, the foreign side is the same
-- for every reader without a mapping of its own: a run through it is
-- shown to them, and not to a role whose own mapping may read other rows.
DROP USER MAPPING FOR regress_hist_alice SERVER hist_loopback;
CREATE USER MAPPING FOR PUBLIC SERVER hist_loopback
    OPTIONS (user 'regress_hist_alice', password_required 'false');
CREATE ROLE regress_hist_dave;
GRANT SELECT ON f_mine, orders_tgt TO regress_hist_dave, regress_hist_auditor;
SET ROLE regress_hist_dave;
SELECT job, rows_source, findings, reader_dependent FROM reconcile_diff_run('foreign');
RESET ROLE;
SET ROLE regress_hist_auditor;
SELECT * FROM seen() WHERE job = 'foreign';
RESET ROLE;
SET ROLE regress_hist_bob;                 -- has a mapping of his own
SELECT * FROM seen() WHERE job = 'foreign';
RESET ROLE;

-- A partitioned side with a foreign partition is read through the
-- reader's mapping too: shared through the PUBLIC mapping only.
CREATE TABLE parted (id int, rep name, amount numeric) PARTITION BY RANGE (id);
CREATE TABLE parted_lo PARTITION OF parted FOR VALUES FROM (0) TO (3);
CREATE FOREIGN TABLE parted_hi PARTITION OF parted FOR VALUES FROM (3) TO (100)
    SERVER hist_loopback OPTIONS (table_name 'remote_mine');
GRANT SELECT ON parted TO regress_hist_dave, regress_hist_auditor, regress_hist_bob;
INSERT INTO reconcile.diff_jobs VALUES
    ('parted', 'public.parted', 'public.orders_tgt', '{id}', '{"remote": "pull"}');
SET ROLE regress_hist_dave;
SELECT job, rows_source, findings, reader_dependent FROM reconcile_diff_run('parted');
RESET ROLE;
SET ROLE regress_hist_auditor;
SELECT * FROM seen() WHERE job = 'parted';
RESET ROLE;
SET ROLE regress_hist_bob;                 -- reads the partition through his own mapping
SELECT * FROM seen() WHERE job = 'parted';
SELECT job, rows_source, findings, reader_dependent FROM reconcile_diff_run('parted');
RESET ROLE;
SET ROLE regress_hist_auditor;             -- bob's run is bob's
SELECT * FROM seen() WHERE job = 'parted';
RESET ROLE;

-- A run that failed on a view job is the runner's too (its error may
-- quote the view's values).
UPDATE reconcile.diff_jobs SET options = '{"compare": ["no_such"]}' WHERE name = 'view';
SET ROLE regress_hist_alice;
SELECT job, findings, sqlstate, reader_dependent, error FROM reconcile_diff_run('view');
RESET ROLE;
SET ROLE regress_hist_bob;
SELECT count(*) AS alices_failed_runs_bob_sees FROM reconcile.diff_runs
 WHERE run_by = 'regress_hist_alice' AND error IS NOT NULL;
RESET ROLE;

RESET client_min_messages;
DROP FUNCTION seen();
DROP FOREIGN TABLE f_mine;
DROP TABLE parted;
DROP USER MAPPING FOR regress_hist_bob SERVER hist_loopback;
DROP USER MAPPING FOR PUBLIC SERVER hist_loopback;
DROP SERVER hist_loopback;
DROP VIEW my_src, my_tgt, my_src_sb, my_tgt_sb, remote_mine;
DROP TABLE orders_src, orders_tgt, orders_rls;
DROP EXTENSION postgres_fdw;
DROP EXTENSION reconcile;
DROP ROLE regress_hist_owner, regress_hist_alice, regress_hist_bob, regress_hist_carol,
          regress_hist_auditor, regress_hist_dave;
