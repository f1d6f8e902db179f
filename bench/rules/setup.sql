-- bench/rules/setup.sql: the table and the 100 rules that bench/rules/run.sh
-- and bench/rules/history.sh measure (psql variable rows: the table's size).
CREATE TABLE bench_tx AS
SELECT i AS id,
       (i % 1000)::int AS customer_id,
       ((i * 37) % 100000) / 100.0 AS amount,
       ((i * 7) % 300) / 100.0 AS fee,
       (1000 + (i * 13) % 50000)::numeric AS opening,
       CASE WHEN i % 3 = 0 THEN 'DEBIT' ELSE 'CREDIT' END AS direction,
       CASE WHEN i % 50 = 0 THEN 'Y' ELSE 'N' END AS sanctions,
       CASE WHEN i % 7 = 0 THEN 'HIGH' WHEN i % 2 = 0 THEN 'MEDIUM' ELSE 'LOW' END AS risk,
       18 + i % 70 AS age,
       'TX-' || lpad(i::text, 8, '0') AS code
FROM generate_series(1, :rows) AS i;
ALTER TABLE bench_tx ADD COLUMN closing numeric;
UPDATE bench_tx SET closing = opening + amount - fee WHERE id % 1000 <> 0;
VACUUM ANALYZE bench_tx;

-- 100 rules: 10 templates x 10 thresholds, a realistic mix of comparisons,
-- IN lists, arithmetic, CASE logic, regular expressions and NULL handling.
CREATE TABLE bench_rules AS
SELECT pg_catalog.format('r%s', lpad((t * 10 + k)::text, 3, '0')) AS name,
       CASE t
         WHEN 0 THEN pg_catalog.format('amount >= %s', k * 10)
         WHEN 1 THEN pg_catalog.format('fee < %s', 3 - k * 0.1)
         WHEN 2 THEN pg_catalog.format('age BETWEEN 18 AND %s', 80 - k)
         WHEN 3 THEN pg_catalog.format('direction IN (''CREDIT'', ''DEBIT'') AND customer_id <> %s', k)
         WHEN 4 THEN pg_catalog.format('NOT COALESCE((direction = ''CREDIT'' AND closing <> opening + amount - fee + %s), FALSE)', k)
         WHEN 5 THEN pg_catalog.format('NOT COALESCE((sanctions = ''Y'' AND risk <> ''HIGH''), FALSE) OR customer_id > %s', k * 100)
         WHEN 6 THEN pg_catalog.format('closing IS NOT NULL OR id %% %s = 0', k + 2)
         WHEN 7 THEN pg_catalog.format('amount - fee > %s', k)
         WHEN 8 THEN pg_catalog.format('code LIKE ''TX-%%%s''', k)
         ELSE pg_catalog.format('CASE WHEN risk = ''HIGH'' THEN age >= %s ELSE true END', 20 + k)
       END AS expr
FROM generate_series(0, 9) AS t, generate_series(0, 9) AS k;
