-- The seed approach: two anti joins and a mismatch join, unioned.
SELECT 'MISSING_IN_TARGET' AS issue, s.id, s.customer, s.amount, s.status, s.updated_at,
       NULL::integer, NULL::numeric, NULL::text, NULL::timestamptz
FROM bench_src s WHERE NOT EXISTS (SELECT FROM bench_tgt t WHERE t.id = s.id)
UNION ALL
SELECT 'EXTRA_IN_TARGET', t.id, NULL, NULL, NULL, NULL,
       t.customer, t.amount, t.status, t.updated_at
FROM bench_tgt t WHERE NOT EXISTS (SELECT FROM bench_src s WHERE s.id = t.id)
UNION ALL
SELECT 'MISMATCH', s.id, s.customer, s.amount, s.status, s.updated_at,
       t.customer, t.amount, t.status, t.updated_at
FROM bench_src s JOIN bench_tgt t ON t.id = s.id
WHERE s.customer IS DISTINCT FROM t.customer OR s.amount IS DISTINCT FROM t.amount
   OR s.status IS DISTINCT FROM t.status OR s.updated_at IS DISTINCT FROM t.updated_at;
