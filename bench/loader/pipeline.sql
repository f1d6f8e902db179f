-- bench/loader/pipeline.sql: contender (b), the hand-written SQL pipeline a
-- DBA would write for the same batch, in plain SQL and one transaction.
-- It must leave the same target and the same counts as reconcile_batch
-- (check.sql compares them).  Included by run.sh between its timing marks.
--
--   1. cast with rejects: regex checks of the text values, once per value
--      (PostgreSQL 15 has no pg_input_is_valid), one reject row per bad value;
--   2. the payload hash in SQL, as docs/loader.md documents it;
--   3. a GROUP BY for conflicts inside the batch (same key and version,
--      more than one payload hash: every row of the key is held back);
--   4. DISTINCT ON for the winners (highest version, ties by object_key
--      bytewise, then source_row) and a join with the target for conflicts
--      against it (same version, another hash) and the dispositions;
--   5. INSERT ... ON CONFLICT DO UPDATE ... WHERE excluded.version >
--      target.version (a DELETE makes a tombstone that keeps the payload;
--      a DELETE of a new key inserts a tombstone);
--   6. the conflicts and a receipt row with the eight counts.
-- It checks less than reconcile_batch: no manifest row counts, no per-object
-- counts, no checksum, no cursor.
BEGIN;

CREATE TEMP TABLE h_objects ON COMMIT DROP AS
SELECT e->>'object_key' AS object_key
FROM bench_manifest m, jsonb_array_elements(m.manifest) e WHERE m.name = 'batch';

-- 1. Check every value once (regexes, since PostgreSQL 15 has no
-- pg_input_is_valid), keeping the raw text for the rejects.
CREATE TEMP TABLE h_checked ON COMMIT DROP AS
SELECT s.*,
       s.source_row IS NOT NULL AS ok_source_row,
       coalesce(s.operation IN ('UPSERT', 'DELETE'), false) AS ok_operation,
       coalesce(s.customer_id ~ '^\s*[+-]?\d{1,18}\s*$', false) AS ok_key,
       coalesce(s.version ~ '^\s*\+?\d{1,18}\s*$', false) AS ok_version,
       coalesce(s.amount ~ '^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$', true) AS ok_amount,
       coalesce(s.updated_at ~ '^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?\s*(Z|[+-]\d{2}(:?\d{2})?)?$', true) AS ok_updated_at,
       coalesce(s.qty ~ '^\s*[+-]?\d{1,9}\s*$', true) AS ok_qty
FROM stage s
WHERE s.object_key IN (SELECT object_key FROM h_objects);

-- Rejects: one row per problem.
INSERT INTO bench_rejects (object_key, source_row, column_name, raw_value, reason)
SELECT c.object_key, c.source_row, p.column_name, p.raw_value, p.reason
FROM h_checked c
CROSS JOIN LATERAL (VALUES
    ('source_row', NULL, CASE WHEN NOT ok_source_row THEN 'source_row is null' END),
    ('operation', c.operation,
     CASE WHEN c.operation IS NULL THEN 'operation is null'
          WHEN NOT ok_operation THEN 'unknown operation' END),
    ('customer_id', c.customer_id,
     CASE WHEN c.customer_id IS NULL THEN 'key column is null'
          WHEN NOT ok_key THEN 'not a bigint' END),
    ('version', c.version,
     CASE WHEN c.version IS NULL THEN 'version is null'
          WHEN NOT ok_version THEN 'version is not a valid bigint' END),
    ('amount', c.amount, CASE WHEN NOT ok_amount THEN 'not a numeric' END),
    ('updated_at', c.updated_at, CASE WHEN NOT ok_updated_at THEN 'not a timestamp' END),
    ('qty', c.qty, CASE WHEN NOT ok_qty THEN 'not an integer' END)
) AS p(column_name, raw_value, reason)
WHERE NOT (ok_source_row AND ok_operation AND ok_key AND ok_version AND ok_amount
           AND ok_updated_at AND ok_qty)
  AND p.reason IS NOT NULL;

-- 2. The valid rows, cast, with their payload hash.
CREATE TEMP TABLE h_valid ON COMMIT DROP AS
SELECT c.*,
       sha256(convert_to('[' || coalesce(to_json(c.name)::text, 'null')
                      || ',' || coalesce(to_json(c.amount::text)::text, 'null')
                      || ',' || coalesce(to_json(c.updated_at::text)::text, 'null')
                      || ',' || coalesce(to_json(c.qty::text)::text, 'null')
                      || ',' || c.is_delete || ']', 'UTF8')) AS h
FROM (
    SELECT object_key, source_row, operation = 'DELETE' AS is_delete,
           customer_id::bigint AS customer_id, version::bigint AS version,
           name, amount::numeric AS amount, updated_at::timestamptz AS updated_at,
           qty::integer AS qty
    FROM h_checked
    WHERE ok_source_row AND ok_operation AND ok_key AND ok_version AND ok_amount
      AND ok_updated_at AND ok_qty
) c;
ANALYZE h_valid;

-- 3. Conflicts inside the batch, and per key the rows and versions.
CREATE TEMP TABLE h_keys ON COMMIT DROP AS
SELECT customer_id, sum(n) AS n, count(*) AS nv, bool_or(nh > 1) AS conflict
FROM (SELECT customer_id, version, count(*) AS n, count(DISTINCT h) AS nh
      FROM h_valid GROUP BY customer_id, version) kv
GROUP BY customer_id;
ANALYZE h_keys;

-- 4. Winners, conflicts against the target, dispositions.
CREATE TEMP TABLE h_win ON COMMIT DROP AS
SELECT DISTINCT ON (customer_id) *
FROM h_valid
ORDER BY customer_id, version DESC, object_key COLLATE "C", source_row;
ANALYZE h_win;

CREATE TEMP TABLE h_dec ON COMMIT DROP AS
SELECT w.*, k.n, k.nv, t.version AS t_version, t.payload_hash AS t_hash,
       CASE WHEN k.conflict OR (t.version = w.version AND t.payload_hash IS DISTINCT FROM w.h) THEN 'C'
            WHEN t.customer_id IS NULL THEN 'I'
            WHEN w.version > t.version THEN CASE WHEN w.is_delete THEN 'D' ELSE 'U' END
            WHEN w.version = t.version THEN 'N'
            ELSE 'S' END AS action
FROM h_win w
JOIN h_keys k USING (customer_id)
LEFT JOIN customer t ON t.customer_id = w.customer_id;
ANALYZE h_dec;

-- 5. The version-monotonic write.
INSERT INTO customer AS t (customer_id, name, amount, updated_at, qty, version, is_deleted, payload_hash)
SELECT customer_id, name, amount, updated_at, qty, version, is_delete, h
FROM h_dec WHERE action IN ('I', 'U', 'D')
ON CONFLICT (customer_id) DO UPDATE SET
    name = CASE WHEN excluded.is_deleted THEN t.name ELSE excluded.name END,
    amount = CASE WHEN excluded.is_deleted THEN t.amount ELSE excluded.amount END,
    updated_at = CASE WHEN excluded.is_deleted THEN t.updated_at ELSE excluded.updated_at END,
    qty = CASE WHEN excluded.is_deleted THEN t.qty ELSE excluded.qty END,
    version = excluded.version,
    is_deleted = excluded.is_deleted,
    payload_hash = excluded.payload_hash
WHERE excluded.version > t.version;

-- 6. Conflicts (every staged row of a conflicting key) and the receipt.
INSERT INTO bench_conflicts (key, version, object_key, source_row, staged_hash, existing_hash)
SELECT jsonb_build_object('customer_id', v.customer_id), v.version, v.object_key, v.source_row,
       v.h, CASE WHEN d.t_version = d.version THEN d.t_hash END
FROM (SELECT * FROM h_dec WHERE action = 'C') d JOIN h_valid v USING (customer_id);

INSERT INTO bench_receipts (batch, staged_rows, inserted, updated, deleted, unchanged, stale,
                            duplicates, conflicts, rejected, committed_at)
SELECT 'batch', x.inserted + x.updated + x.deleted + x.unchanged + x.stale + x.duplicates
                + x.conflicts + x.rejected, x.*, now()
FROM (
    SELECT count(*) FILTER (WHERE action = 'I' AND NOT is_delete) AS inserted,
           count(*) FILTER (WHERE action = 'U') AS updated,
           count(*) FILTER (WHERE action = 'D' OR (action = 'I' AND is_delete)) AS deleted,
           count(*) FILTER (WHERE action = 'N') AS unchanged,
           count(*) FILTER (WHERE action = 'S')
             + coalesce(sum(nv - 1) FILTER (WHERE action <> 'C'), 0) AS stale,
           coalesce(sum(n - nv) FILTER (WHERE action <> 'C'), 0) AS duplicates,
           coalesce(sum(n) FILTER (WHERE action = 'C'), 0) AS conflicts,
           (SELECT count(*) FROM (SELECT DISTINCT object_key, source_row FROM bench_rejects) r)
             AS rejected
    FROM h_dec
) x;

COMMIT;
