-- (c) a bare MERGE of the pre-de-duplicated winners: no checks, no receipt.
-- A DELETE keeps the payload (a tombstone), as in (a) and (b).
MERGE INTO customer AS t
USING winners AS w ON t.customer_id = w.customer_id
WHEN MATCHED AND w.version > t.version THEN UPDATE SET
    name = CASE WHEN w.is_deleted THEN t.name ELSE w.name END,
    amount = CASE WHEN w.is_deleted THEN t.amount ELSE w.amount END,
    updated_at = CASE WHEN w.is_deleted THEN t.updated_at ELSE w.updated_at END,
    qty = CASE WHEN w.is_deleted THEN t.qty ELSE w.qty END,
    version = w.version, is_deleted = w.is_deleted, payload_hash = w.payload_hash
WHEN NOT MATCHED THEN INSERT (customer_id, name, amount, updated_at, qty, version, is_deleted, payload_hash)
    VALUES (w.customer_id, w.name, w.amount, w.updated_at, w.qty, w.version, w.is_deleted, w.payload_hash);
