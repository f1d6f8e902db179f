-- What the README's installation section says: the schema reconcile is the
-- extension's own, so CREATE EXTENSION ... SCHEMA reconcile fails; another
-- schema for the functions works; DROP EXTENSION discards the state, the
-- receipts with it, so a batch loaded before loads again.
CREATE EXTENSION reconcile SCHEMA reconcile;
CREATE SCHEMA reconcile;
CREATE EXTENSION reconcile SCHEMA reconcile;
DROP SCHEMA reconcile;

CREATE SCHEMA reconcile_api;
CREATE EXTENSION reconcile SCHEMA reconcile_api;
SELECT p.proname FROM pg_proc p WHERE p.pronamespace = 'reconcile_api'::regnamespace
   AND p.proname = 'reconcile_batch';
SET search_path = public, reconcile_api;

CREATE TABLE acct (id int PRIMARY KEY, name text, v bigint NOT NULL,
                   gone boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE acct_stage (object_key text, source_row int, operation text, id text, name text, v text);
INSERT INTO acct_stage VALUES ('o1', 1, 'UPSERT', '1', 'Ana', '1');
SELECT reconcile_register('acct', '{id}', 'v', 'gone', 'h');
SELECT status, inserted FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":1}]', 'feed', 'o1');
SELECT status, inserted FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":1}]', 'feed', 'o1');
-- No CASCADE needed, no warning: the state goes with the extension.
DROP EXTENSION reconcile;
SELECT count(*) AS reconcile_schemas FROM pg_namespace WHERE nspname = 'reconcile';
CREATE EXTENSION reconcile SCHEMA reconcile_api;
SELECT reconcile_register('acct', '{id}', 'v', 'gone', 'h');
-- The same manifest is a new batch now, not a replay.
SELECT status FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":1}]', 'feed', 'o1');

RESET search_path;
DROP TABLE acct, acct_stage;
DROP EXTENSION reconcile;
DROP SCHEMA reconcile_api;
