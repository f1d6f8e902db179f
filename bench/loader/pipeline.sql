-- bench/loader/pipeline.sql: contender (b), the hand-written SQL pipeline a
-- DBA would write for the same batch, in plain SQL and one transaction.
-- It must leave the same target and the same counts as reconcile_batch
-- (check.sql compares them).  Included by run.sh between its timing marks.
--
--   1. cast with rejects: regex checks of the text values (PostgreSQL 15
--      has no pg_input_is_valid), one reject row per bad value;
--   2. the payload hash in SQL, as the README documents it;
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

-- 1. Rejects: one row per problem.
INSERT INTO bench_rejects (object_key, source_row, column_name, raw_value, reason)
SELECT s.object_key, s.source_row, p.column_name, p.raw_value, p.reason
FROM stage s
CROSS JOIN LATERAL (VALUES
    ('source_row', NULL,
     CASE WHEN s.source_row IS NULL THEN 'source_row is null' END),
    ('operation', s.operation,
     CASE WHEN s.operation IS NULL THEN 'operation is null'
          WHEN s.operation NOT IN ('UPSERT', 'DELETE') THEN 'unknown operation' END),
    ('customer_id', s.customer_id,
     CASE WHEN s.customer_id IS NULL THEN 'key column is null'
          WHEN s.customer_id !~ '^\s*[+-]?\d{1,18}\s*$' THEN 'not a bigint' END),
    ('version', s.version,
     CASE WHEN s.version IS NULL THEN 'version is null'
          WHEN s.version !~ '^\s*\+?\d{1,18}\s*$' THEN 'version is not a valid bigint' END),
    ('amount', s.amount,
     CASE WHEN s.amount !~ '^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$' THEN 'not a numeric' END),
    ('updated_at', s.updated_at,
     CASE WHEN s.updated_at !~ '^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?\s*(Z|[+-]\d{2}(:?\d{2})?)?$'
          THEN 'not a timestamp' END),
    ('qty', s.qty,
     CASE WHEN s.qty !~ '^\s*[+-]?\d{1,9}\s*$' THEN 'not an integer' END)
) AS p(column_name, raw_value, reason)
WHERE s.object_key IN (SELECT object_key FROM h_objects) AND p.reason IS NOT NULL;

-- 2. The valid rows, cast, with their payload hash.
CREATE TEMP TABLE h_valid ON COMMIT DROP AS
SELECT c.*,
       sha256(convert_to('[' || coalesce(to_json(c.name)::text, 'null')
                      || ',' || coalesce(to_json(c.amount::text)::text, 'null')
                      || ',' || coalesce(to_json(c.updated_at::text)::text, 'null')
                      || ',' || coalesce(to_json(c.qty::text)::text, 'null')
                      || ',' || c.is_delete || ']', 'UTF8')) AS h
FROM (
    SELECT s.object_key, s.source_row, s.operation = 'DELETE' AS is_delete,
           s.customer_id::bigint AS customer_id, s.version::bigint AS version,
           s.name, s.amount::numeric AS amount, s.updated_at::timestamptz AS updated_at,
           s.qty::integer AS qty
    FROM stage s
    WHERE s.object_key IN (SELECT object_key FROM h_objects)
      AND s.source_row IS NOT NULL
      AND s.operation IN ('UPSERT', 'DELETE')
      AND s.customer_id ~ '^\s*[+-]?\d{1,18}\s*$'
      AND s.version ~ '^\s*\+?\d{1,18}\s*$'
      AND coalesce(s.amount ~ '^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$', true)
      AND coalesce(s.updated_at ~ '^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?\s*(Z|[+-]\d{2}(:?\d{2})?)?$', true)
      AND coalesce(s.qty ~ '^\s*[+-]?\d{1,9}\s*$', true)
) c;
ANALYZE h_valid;

-- 3. Conflicts inside the batch, and per key the rows and versions.
CREATE TEMP TABLE h_keys ON COMMIT DROP AS
SELECT customer_id, sum(n) AS n, count(*) AS nv, bool_or(nh > 1) AS conflict
FROM (SELECT customer_id, version, count(*) AS n, count(DISTINCT h) AS nh
      FROM h_valid GROUP BY customer_id, version) kv
GROUP BY customer_id;

-- 4. Winners, conflicts against the target, dispositions.
CREATE TEMP TABLE h_win ON COMMIT DROP AS
SELECT DISTINCT ON (customer_id) *
FROM h_valid
ORDER BY customer_id, version DESC, object_key COLLATE "C", source_row;

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
FROM h_dec d JOIN h_valid v USING (customer_id)
WHERE d.action = 'C';

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
