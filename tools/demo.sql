-- reconcile demo, run by tools/demo.sh in a fresh database reconcile_demo:
-- the replay scenario of a real migration runbook, receipts printed.
\pset footer off
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
CREATE EXTENSION reconcile;

\echo
\echo '== A target keyed by customer_id, versioned, with tombstones and a payload hash'
CREATE TABLE customer_state (
    customer_id  text PRIMARY KEY,
    name         text,
    version      bigint NOT NULL,
    is_deleted   boolean NOT NULL DEFAULT false,
    payload_hash bytea
);
SELECT reconcile_register(target => 'customer_state', key_columns => '{customer_id}',
    version_column => 'version', deleted_column => 'is_deleted',
    hash_column => 'payload_hash', conflict_policy => 'quarantine');

-- Staged rows arrive as text, straight from the files.
CREATE TABLE customer_stage (object_key text, source_row bigint, operation text,
                             customer_id text, version text, name text);

\echo
\echo '== 1. The target holds C1 v1 Ana'
INSERT INTO customer_stage VALUES ('crm/part-0000.csv', 1, 'UPSERT', 'C1', '1', 'Ana');
SELECT left(batch_id, 12) AS batch, status, staged_rows AS staged, inserted, updated,
       deleted, unchanged, stale, duplicates, conflicts, rejected
  FROM reconcile_batch(target => 'customer_state', staged => 'customer_stage',
       manifest => '[{"object_key":"crm/part-0000.csv","version_id":"1a","content_hash":"sha256:7d1e","rows":1}]',
       source => 'crm-feed', cursor => 'crm/part-0000.csv@1a');

\echo '== 2. A batch: C1 v2 Ana Lee, C2 v1 Dev, an exact repeat of C2, a malformed version, a late C1 v1'
INSERT INTO customer_stage VALUES
    ('crm/part-0001.csv', 1, 'UPSERT', 'C1', '2',   'Ana Lee'),
    ('crm/part-0001.csv', 2, 'UPSERT', 'C2', '1',   'Dev'),
    ('crm/part-0001.csv', 3, 'UPSERT', 'C2', '1',   'Dev'),
    ('crm/part-0001.csv', 4, 'UPSERT', 'C3', 'v2?', 'Eve'),
    ('crm/part-0001.csv', 5, 'UPSERT', 'C1', '1',   'Ana');
SELECT left(batch_id, 12) AS batch, status, staged_rows AS staged, inserted, updated,
       deleted, unchanged, stale, duplicates, conflicts, rejected
  FROM reconcile_batch(target => 'customer_state', staged => 'customer_stage',
       manifest => '[{"object_key":"crm/part-0001.csv","version_id":"3Lg","content_hash":"sha256:9f2c","rows":5}]',
       source => 'crm-feed', cursor => 'crm/part-0001.csv@3Lg');
SELECT customer_id, name, version, is_deleted FROM customer_state ORDER BY 1;
SELECT object_key, source_row, column_name, raw_value, reason FROM reconcile.rejects;

\echo '== 3. The pipeline retries the same manifest: nothing changes, the stored receipt comes back'
SELECT left(batch_id, 12) AS batch, status, staged_rows AS staged, inserted, updated,
       deleted, unchanged, stale, duplicates, conflicts, rejected
  FROM reconcile_batch(target => 'customer_state', staged => 'customer_stage',
       manifest => '[{"object_key":"crm/part-0001.csv","version_id":"3Lg","content_hash":"sha256:9f2c","rows":5}]',
       source => 'crm-feed', cursor => 'crm/part-0001.csv@3Lg');

\echo '== 4. Another file claims C1 v2 with a different payload: a conflict, quarantined; C1 stays Ana Lee'
INSERT INTO customer_stage VALUES ('crm/part-0002.csv', 1, 'UPSERT', 'C1', '2', 'Ana Smith');
SELECT left(batch_id, 12) AS batch, status, staged_rows AS staged, inserted, updated,
       deleted, unchanged, stale, duplicates, conflicts, rejected
  FROM reconcile_batch(target => 'customer_state', staged => 'customer_stage',
       manifest => '[{"object_key":"crm/part-0002.csv","version_id":"1","content_hash":"sha256:51aa","rows":1}]');
SELECT key, version, object_key, staged_payload, existing_payload FROM reconcile.conflicts;
SELECT customer_id, name, version, is_deleted FROM customer_state ORDER BY 1;

\echo '== 4b. The owner decides: the target keeps Ana Lee; the decision is recorded, once'
SELECT r.status, r.version, r.choice, r.outcome, r.decided_by
  FROM reconcile.conflicts c,
       reconcile_resolve('customer_state', c.batch_id, c.key, c.existing_hash) AS r;

\echo '== 5. C1 is deleted at v3; then the old part-0001 object is replayed under a new manifest'
INSERT INTO customer_stage VALUES ('crm/part-0003.csv', 1, 'DELETE', 'C1', '3', NULL);
SELECT left(batch_id, 12) AS batch, status, staged_rows AS staged, inserted, updated,
       deleted, unchanged, stale, duplicates, conflicts, rejected
  FROM reconcile_batch(target => 'customer_state', staged => 'customer_stage',
       manifest => '[{"object_key":"crm/part-0003.csv","version_id":"1","content_hash":"sha256:c3d0","rows":1}]',
       source => 'crm-feed', cursor => 'crm/part-0003.csv@1');
SELECT left(batch_id, 12) AS batch, status, staged_rows AS staged, inserted, updated,
       deleted, unchanged, stale, duplicates, conflicts, rejected
  FROM reconcile_batch(target => 'customer_state', staged => 'customer_stage',
       manifest => '[{"object_key":"crm/part-0001.csv","version_id":"3Lg","content_hash":"sha256:9f2c","rows":5},
                     {"object_key":"crm/part-0003.csv","version_id":"1","content_hash":"sha256:c3d0","rows":1}]');
\echo 'C1 stays a v3 tombstone; only C2 is live:'
SELECT customer_id, name, version, is_deleted FROM customer_state ORDER BY 1;

\echo '== 6. A shadow target loads the same manifest as part-0001 did: its own receipt'
CREATE TABLE customer_shadow (LIKE customer_state INCLUDING ALL);
SELECT reconcile_register('customer_shadow', '{customer_id}', 'version', 'is_deleted', 'payload_hash');
SELECT left(batch_id, 12) AS batch, status, staged_rows AS staged, inserted, updated,
       deleted, unchanged, stale, duplicates, conflicts, rejected
  FROM reconcile_batch(target => 'customer_shadow', staged => 'customer_stage',
       manifest => '[{"object_key":"crm/part-0001.csv","version_id":"3Lg","content_hash":"sha256:9f2c","rows":5}]');
\echo 'The live target went on to delete C1; the shadow has only part-0001:'
SELECT issue, key, columns FROM reconcile_diff('customer_state', 'customer_shadow', '{customer_id}',
                                               '{"compare": ["version", "is_deleted"]}');

\echo '== Every receipt, and where the source stands'
SELECT target, left(batch_id, 12) AS batch, staged_rows AS staged, inserted, updated, deleted,
       unchanged, stale, duplicates, conflicts, rejected, left(checksum, 12) AS checksum
  FROM reconcile.receipts ORDER BY committed_at;
SELECT source, position, left(batch_id, 12) AS batch FROM reconcile.cursors;
