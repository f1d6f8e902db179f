-- A batch's identity is scoped to its target: one manifest may be loaded
-- into two targets (a shadow load), and no role can block or probe another
-- role's loads by committing or replaying its manifests into a table of
-- its own.  reconcile_diff_run records nothing for a role that may not
-- read both sides of the job.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

CREATE ROLE regress_scope_victim;
CREATE ROLE regress_scope_intruder;
GRANT CREATE ON SCHEMA public TO regress_scope_victim, regress_scope_intruder;

SET ROLE regress_scope_victim;
CREATE TABLE ledger (id text PRIMARY KEY, amount int, v bigint NOT NULL,
                     gone boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE ledger_stage (object_key text, source_row int, operation text,
                           id text, amount text, v text);
SELECT reconcile_register('ledger', '{id}', 'v', 'gone', 'h');
INSERT INTO ledger_stage VALUES ('day-1', 1, 'UPSERT', 'L1', '10', '1');
SELECT status, inserted FROM reconcile_batch('ledger', 'ledger_stage',
    '[{"object_key":"day-1","version_id":"1","content_hash":"h1","rows":1}]', 'bank', 'day-1');

-- The intruder guesses (or sees) the victim's next manifest and commits it
-- first, into its own table: its own receipt, nothing of the victim's.
SET ROLE regress_scope_intruder;
CREATE TABLE trap (id text PRIMARY KEY, amount int, v bigint NOT NULL,
                   gone boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE trap_stage (object_key text, source_row int, operation text,
                         id text, amount text, v text);
SELECT reconcile_register('trap', '{id}', 'v', 'gone', 'h');
INSERT INTO trap_stage VALUES ('day-2', 1, 'UPSERT', 'X', '0', '1');
SELECT status, inserted FROM reconcile_batch('trap', 'trap_stage',
    '[{"object_key":"day-2","version_id":"1","content_hash":"h2","rows":1}]');
-- Replaying the victim's committed manifest into its own table tells it
-- nothing about where the victim loaded it: a new batch of its own table.
TRUNCATE trap_stage;
INSERT INTO trap_stage VALUES ('day-1', 1, 'UPSERT', 'Y', '0', '1');
SELECT status, inserted FROM reconcile_batch('trap', 'trap_stage',
    '[{"object_key":"day-1","version_id":"1","content_hash":"h1","rows":1}]');
-- The intruder sees its own receipts only.
SELECT target, count(*) FROM reconcile.receipts GROUP BY target ORDER BY 1;

-- The victim's next batch commits, and its replay finds its own receipt.
SET ROLE regress_scope_victim;
INSERT INTO ledger_stage VALUES ('day-2', 1, 'UPSERT', 'L2', '20', '1');
DELETE FROM ledger_stage WHERE object_key = 'day-1';
SELECT status, inserted FROM reconcile_batch('ledger', 'ledger_stage',
    '[{"object_key":"day-2","version_id":"1","content_hash":"h2","rows":1}]', 'bank', 'day-2');
SELECT status, inserted FROM reconcile_batch('ledger', 'ledger_stage',
    '[{"object_key":"day-2","version_id":"1","content_hash":"h2","rows":1}]', 'bank', 'day-2');
SELECT id, amount FROM ledger ORDER BY id;
SELECT target, count(*) FROM reconcile.receipts GROUP BY target ORDER BY 1;
SELECT target, source, position FROM reconcile.cursors;
-- An object version's content is fixed per target: the intruder's
-- "day-1" with another hash did not touch the victim's, which still holds.
SELECT status FROM reconcile_batch('ledger', 'ledger_stage',
    '[{"object_key":"day-2","version_id":"1","content_hash":"other","rows":1}]');
RESET ROLE;

-- A shadow load: one manifest into two targets, each with its own receipt,
-- each replayed from its own.
CREATE TABLE shadow (LIKE ledger INCLUDING ALL);
SELECT reconcile_register('shadow', '{id}', 'v', 'gone', 'h');
SELECT status, inserted FROM reconcile_batch('shadow', 'ledger_stage',
    '[{"object_key":"day-2","version_id":"1","content_hash":"h2","rows":1}]');
SELECT status, inserted FROM reconcile_batch('shadow', 'ledger_stage',
    '[{"object_key":"day-2","version_id":"1","content_hash":"h2","rows":1}]');
SELECT target, batch_id = reconcile_batch_id('[{"object_key":"day-2","version_id":"1","content_hash":"h2","rows":1}]') AS same_id
  FROM reconcile.receipts WHERE manifest @> '[{"object_key":"day-2"}]' ORDER BY target::text;
SELECT target, object_key, version_id, content_hash FROM reconcile.batch_objects
 ORDER BY target::text, object_key;

-- ---- diff runs need the rights of the diff ----
CREATE TABLE book (id int PRIMARY KEY, amount int);
CREATE TABLE bank (id int PRIMARY KEY, amount int);
INSERT INTO book VALUES (1, 10), (2, 20);
INSERT INTO bank VALUES (1, 10);
INSERT INTO reconcile.diff_jobs VALUES ('book_bank', 'public.book', 'public.bank', '{id}', NULL),
                                       ('gone', 'public.no_such_table', 'public.bank', '{id}', NULL);
GRANT SELECT ON book TO regress_scope_intruder;
SET ROLE regress_scope_intruder;
\set VERBOSITY default
-- No SELECT on bank: refused before anything runs or is recorded.
SELECT job, error FROM reconcile_diff_run('book_bank');
SELECT job, error FROM reconcile_diff_run();
\set VERBOSITY terse
RESET ROLE;
SELECT count(*) AS runs FROM reconcile.diff_runs;
-- With the rights, the run is recorded; a job over a missing table fails
-- and is recorded as such.
GRANT SELECT ON bank TO regress_scope_intruder;
SET ROLE regress_scope_intruder;
SELECT job, findings, error FROM reconcile_diff_run('book_bank');
RESET ROLE;
SELECT job, findings, error, run_by = CURRENT_USER AS by_me FROM reconcile_diff_run() ORDER BY job;
SELECT job, run_by = CURRENT_USER AS by_me FROM reconcile.diff_runs ORDER BY run_id;
-- A run over a temporary relation fails: the run would outlive it.  The
-- failure names no temporary OID.
CREATE TEMP TABLE bank_today (id int PRIMARY KEY, amount int);
INSERT INTO reconcile.diff_jobs VALUES ('today', 'public.book', 'pg_temp.bank_today', '{id}', NULL);
SELECT job, error FROM reconcile_diff_run('today');
SELECT source, target FROM reconcile.diff_runs WHERE job = 'today';
DROP TABLE bank_today;

DROP TABLE book, bank, shadow;
DROP OWNED BY regress_scope_victim, regress_scope_intruder;
DROP EXTENSION reconcile;
DROP ROLE regress_scope_victim, regress_scope_intruder;
