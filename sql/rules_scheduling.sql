-- The one schedule of docs/rules.md#scheduling-and-alerts, run without
-- pg_cron: the batch commits, the diff and check jobs are recorded and
-- committed, then the block fails naming the problems; the history stays.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

CREATE SCHEMA landing;
CREATE TABLE ledger (id text PRIMARY KEY, amount int, version bigint NOT NULL,
                     is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea);
CREATE TABLE landing.ledger_stage (object_key text, source_row bigint, operation text,
                                   id text, version text, amount int);
CREATE TABLE landing.manifests (day date PRIMARY KEY, manifest jsonb);
CREATE TABLE ledger_copy (id text PRIMARY KEY, amount int);
SELECT reconcile_register(target => 'ledger', key_columns => '{id}', version_column => 'version',
                          deleted_column => 'is_deleted', hash_column => 'payload_hash');
SELECT reconcile_set_rules('ledger', '{"warn": {"round": "amount % 10 = 0"}}');
INSERT INTO landing.ledger_stage VALUES ('d1', 1, 'UPSERT', 'a', '1', 10), ('d1', 2, 'UPSERT', 'b', '1', -5);
INSERT INTO landing.manifests VALUES
  (current_date, '[{"object_key":"d1","version_id":"1","content_hash":"sha256:d1","rows":2}]');
INSERT INTO ledger_copy VALUES ('a', 10);
INSERT INTO reconcile.diff_jobs VALUES ('ledger_copy', 'public.ledger_copy', 'public.ledger', '{id}', '{"compare": ["amount"]}');
INSERT INTO reconcile.check_jobs VALUES
  ('ledger_positive', 'public.ledger', '{"fail": {"positive": "amount > 0"}}', NULL),
  ('ledger_ok', 'public.ledger', '{"fail": {"present": "id IS NOT NULL"}}', NULL);

\set VERBOSITY default
DO $$
DECLARE
  bad text[] := '{}';
  r record;
BEGIN
  -- 1. The day's batch: a breach of the attached rules (23514) or any error fails the
  --    job here, with nothing applied; a replay returns its receipt.
  PERFORM reconcile_batch('public.ledger', 'landing.ledger_stage',
                          (SELECT manifest FROM landing.manifests WHERE day = current_date));
  COMMIT;
  -- 2. Every diff job and 3. every check job, recorded in their history.
  FOR r IN SELECT job, error, findings FROM reconcile_diff_run() LOOP
    IF r.error IS NOT NULL OR r.findings > 0 THEN
      bad := bad || format('diff %s: %s', r.job, coalesce(r.error, r.findings || ' findings'));
    END IF;
  END LOOP;
  FOR r IN SELECT job, error, gate FROM reconcile_check_run() LOOP
    IF r.error IS NOT NULL OR r.gate = 'blocked' THEN
      bad := bad || format('check %s: %s', r.job, coalesce(r.error, 'gate blocked'));
    END IF;
  END LOOP;
  COMMIT;
  -- 4. Fail the cron run, after the history is safe.
  IF cardinality(bad) > 0 THEN
    RAISE EXCEPTION 'reconcile nightly: % problems', cardinality(bad)
      USING DETAIL = array_to_string(bad, '; '), ERRCODE = 'check_violation';
  END IF;
END $$;
\set VERBOSITY terse

-- Everything before the error is kept.
SELECT count(*) AS receipts FROM reconcile.receipts;
SELECT job, findings, error FROM reconcile.diff_runs;
SELECT coalesce(job, 'batch') AS run, gate, passed, failed FROM reconcile.check_runs ORDER BY run_id;

-- A second night with nothing wrong passes.
UPDATE reconcile.check_jobs SET rules = '{"fail": {"positive": {"sql": "amount > 0", "mostly": 0.5}}}'
 WHERE job = 'ledger_positive';
INSERT INTO ledger_copy VALUES ('b', -5);
DO $$
DECLARE
  bad text[] := '{}';
  r record;
BEGIN
  PERFORM reconcile_batch('public.ledger', 'landing.ledger_stage',
                          (SELECT manifest FROM landing.manifests WHERE day = current_date));
  COMMIT;
  FOR r IN SELECT job, error, findings FROM reconcile_diff_run() LOOP
    IF r.error IS NOT NULL OR r.findings > 0 THEN
      bad := bad || format('diff %s: %s', r.job, coalesce(r.error, r.findings || ' findings'));
    END IF;
  END LOOP;
  FOR r IN SELECT job, error, gate FROM reconcile_check_run() LOOP
    IF r.error IS NOT NULL OR r.gate = 'blocked' THEN
      bad := bad || format('check %s: %s', r.job, coalesce(r.error, 'gate blocked'));
    END IF;
  END LOOP;
  COMMIT;
  IF cardinality(bad) > 0 THEN
    RAISE EXCEPTION 'reconcile nightly: % problems', cardinality(bad)
      USING DETAIL = array_to_string(bad, '; '), ERRCODE = 'check_violation';
  END IF;
END $$;
SELECT count(*) AS receipts, (SELECT count(*) FROM reconcile.check_runs) AS check_runs FROM reconcile.receipts;

DROP TABLE ledger, ledger_copy;
DROP SCHEMA landing CASCADE;
DROP EXTENSION reconcile;
