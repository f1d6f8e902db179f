-- bench/loader/restore_ts.sql: restore.sql for the timestamptz variant
-- (run.sh --ordering): a fresh customer_ts from target_base_ts.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
SELECT reconcile_unregister(target) FROM reconcile.targets WHERE target = to_regclass('customer_ts');
DROP TABLE IF EXISTS customer_ts;
CREATE TABLE customer_ts (
    customer_id  bigint NOT NULL,
    name         text,
    amount       numeric,
    updated_at   timestamptz,
    qty          integer,
    version      timestamptz NOT NULL,
    is_deleted   boolean NOT NULL DEFAULT false,
    payload_hash bytea
);
INSERT INTO customer_ts SELECT * FROM target_base_ts ORDER BY customer_id;
ALTER TABLE customer_ts ADD PRIMARY KEY (customer_id);
SELECT reconcile_register(target => 'customer_ts', key_columns => '{customer_id}',
    version_column => 'version', deleted_column => 'is_deleted',
    hash_column => 'payload_hash', conflict_policy => 'quarantine');
VACUUM (ANALYZE) customer_ts;
VACUUM (FREEZE, ANALYZE) stage_ts;
CREATE EXTENSION IF NOT EXISTS pg_prewarm;
SELECT pg_prewarm('stage_ts');
CHECKPOINT;
