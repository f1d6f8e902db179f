-- bench/loader/restore.sql: a fresh copy of the target, identical for every
-- contender: the table re-created, rows in key order, the primary key built
-- afterwards, registered with reconcile, vacuumed and analysed, then a
-- checkpoint so that no contender pays for another's dirty buffers.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
SELECT reconcile_unregister(target) FROM reconcile.targets WHERE target = to_regclass('customer');
DROP TABLE IF EXISTS customer;
CREATE TABLE customer (
    customer_id  bigint NOT NULL,
    name         text,
    amount       numeric,
    updated_at   timestamptz,
    qty          integer,
    version      bigint NOT NULL,
    is_deleted   boolean NOT NULL DEFAULT false,
    payload_hash bytea
);
INSERT INTO customer SELECT * FROM target_base ORDER BY customer_id;
ALTER TABLE customer ADD PRIMARY KEY (customer_id);
SELECT reconcile_register(target => 'customer', key_columns => '{customer_id}',
    version_column => 'version', deleted_column => 'is_deleted',
    hash_column => 'payload_hash', conflict_policy => 'quarantine');
DROP TABLE IF EXISTS stage_copy, winners_copy;
CREATE TABLE stage_copy (LIKE stage);
CREATE TABLE winners_copy (LIKE customer INCLUDING ALL);
VACUUM (ANALYZE) customer;
VACUUM (FREEZE, ANALYZE) stage;
CHECKPOINT;
