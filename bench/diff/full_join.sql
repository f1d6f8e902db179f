-- One hand-written FULL OUTER JOIN with IS DISTINCT FROM per column.
SELECT CASE WHEN t.id IS NULL THEN 'MISSING_IN_TARGET'
            WHEN s.id IS NULL THEN 'EXTRA_IN_TARGET' ELSE 'MISMATCH' END AS issue,
       coalesce(s.id, t.id) AS id, s.customer, s.amount, s.status, s.updated_at,
       t.customer, t.amount, t.status, t.updated_at
FROM bench_src s FULL JOIN bench_tgt t ON t.id = s.id
WHERE s.id IS NULL OR t.id IS NULL
   OR s.customer IS DISTINCT FROM t.customer OR s.amount IS DISTINCT FROM t.amount
   OR s.status IS DISTINCT FROM t.status OR s.updated_at IS DISTINCT FROM t.updated_at;
