-- bench/loader/check.sql: does the hand-written pipeline (b) agree with
-- reconcile_batch (a)?  Prints CHECK|name|ok-or-FAIL|detail lines.
-- result_a and result_b are the targets they left; the receipt, rejects and
-- conflicts of (a) were copied from reconcile's tables into result_a_*
-- (run.sh: save_result), those of (b) are in bench_*.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
SELECT reconcile_batch_id(manifest) AS batch_id FROM bench_manifest WHERE name = 'batch' \gset

-- The same target state: EXCEPT both ways over all columns.
SELECT 'CHECK', 'target a = b',
       CASE WHEN n = 0 AND ca = cb THEN 'ok' ELSE 'FAIL' END,
       format('%s rows differ; %s rows in a, %s in b', n, ca, cb)
FROM (SELECT (SELECT count(*) FROM (SELECT * FROM result_a EXCEPT SELECT * FROM result_b) d)
           + (SELECT count(*) FROM (SELECT * FROM result_b EXCEPT SELECT * FROM result_a) d) AS n,
             (SELECT count(*) FROM result_a) AS ca, (SELECT count(*) FROM result_b) AS cb) x;

-- The same eight counts.
SELECT 'CHECK', 'counts a = b',
       CASE WHEN ra IS NOT DISTINCT FROM rb THEN 'ok' ELSE 'FAIL' END,
       format('a %s; b %s', ra, rb)
FROM (SELECT (SELECT row(staged_rows, inserted, updated, deleted, unchanged, stale, duplicates,
                         conflicts, rejected)::text
              FROM result_a_receipts WHERE batch_id = :'batch_id') AS ra,
             (SELECT row(staged_rows, inserted, updated, deleted, unchanged, stale, duplicates,
                         conflicts, rejected)::text
              FROM bench_receipts WHERE batch = 'batch') AS rb) x;

-- The same rejects (one per bad value) and the same conflicts.
SELECT 'CHECK', 'rejects a = b', CASE WHEN n = 0 THEN 'ok' ELSE 'FAIL' END,
       format('%s differ; %s in a', n, (SELECT count(*) FROM result_a_rejects WHERE batch_id = :'batch_id'))
FROM (SELECT count(*) AS n FROM (
        (SELECT object_key, source_row, column_name, raw_value FROM result_a_rejects WHERE batch_id = :'batch_id'
         EXCEPT ALL SELECT object_key, source_row, column_name, raw_value FROM bench_rejects)
        UNION ALL
        (SELECT object_key, source_row, column_name, raw_value FROM bench_rejects
         EXCEPT ALL SELECT object_key, source_row, column_name, raw_value FROM result_a_rejects WHERE batch_id = :'batch_id')) d) x;
SELECT 'CHECK', 'conflicts a = b', CASE WHEN n = 0 THEN 'ok' ELSE 'FAIL' END,
       format('%s differ; %s in a', n, (SELECT count(*) FROM result_a_conflicts WHERE batch_id = :'batch_id'))
FROM (SELECT count(*) AS n FROM (
        (SELECT key, version, object_key, source_row, staged_hash, existing_hash
         FROM result_a_conflicts WHERE batch_id = :'batch_id'
         EXCEPT ALL SELECT key, version, object_key, source_row, staged_hash, existing_hash FROM bench_conflicts)
        UNION ALL
        (SELECT key, version, object_key, source_row, staged_hash, existing_hash FROM bench_conflicts
         EXCEPT ALL SELECT key, version, object_key, source_row, staged_hash, existing_hash
         FROM result_a_conflicts WHERE batch_id = :'batch_id')) d) x;

-- The receipt's checksum: the sum mod 2^256 of the hashes of the rows (a)
-- wrote (those whose key and version the initial target did not have).
WITH w AS (
    SELECT a.payload_hash AS h FROM result_a a
    LEFT JOIN target_base b ON b.customer_id = a.customer_id AND b.version = a.version
    WHERE b.customer_id IS NULL),
parts AS (
    SELECT i, sum(('x' || encode(substring(h FROM i * 4 + 1 FOR 4), 'hex'))::bit(32)::bigint) AS s
    FROM w, generate_series(0, 7) i GROUP BY i),
total AS (
    SELECT coalesce(mod(sum(s * 2::numeric ^ (32 * (7 - i))), 2::numeric ^ 256), 0) AS t FROM parts),
hex AS (
    SELECT string_agg(lpad(to_hex(mod(div(t, 2::numeric ^ (32 * (7 - i))), 2::numeric ^ 32)::bigint), 8, '0'),
                      '' ORDER BY i) AS checksum
    FROM total, generate_series(0, 7) i)
SELECT 'CHECK', 'checksum of a', CASE WHEN r.checksum = hex.checksum THEN 'ok' ELSE 'FAIL' END,
       format('receipt %s, recomputed %s', r.checksum, hex.checksum)
FROM hex, result_a_receipts r WHERE r.batch_id = :'batch_id';
