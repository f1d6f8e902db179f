-- (e) a bare INSERT ... ON CONFLICT of the pre-de-duplicated winners.
INSERT INTO customer AS t (customer_id, name, amount, updated_at, qty, version, is_deleted, payload_hash)
SELECT customer_id, name, amount, updated_at, qty, version, is_deleted, payload_hash FROM winners
ON CONFLICT (customer_id) DO UPDATE SET
    name = CASE WHEN excluded.is_deleted THEN t.name ELSE excluded.name END,
    amount = CASE WHEN excluded.is_deleted THEN t.amount ELSE excluded.amount END,
    updated_at = CASE WHEN excluded.is_deleted THEN t.updated_at ELSE excluded.updated_at END,
    qty = CASE WHEN excluded.is_deleted THEN t.qty ELSE excluded.qty END,
    version = excluded.version, is_deleted = excluded.is_deleted, payload_hash = excluded.payload_hash
WHERE excluded.version > t.version;
