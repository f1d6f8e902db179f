-- reconcile_diff against an independent oracle in plain SQL (anti joins
-- both ways plus an IS DISTINCT FROM join) on generated tables with every
-- kind of difference.  setseed makes the tables the same on every run.
CREATE EXTENSION reconcile;
SELECT setseed(0.4242);

CREATE TABLE rnd_src (k1 text, a integer, k2 integer, b text, c numeric, d date);
INSERT INTO rnd_src
SELECT CASE WHEN random() < 0.003 THEN NULL ELSE 'k' || (g % 97) END,
       CASE WHEN random() < 0.1 THEN NULL ELSE (random() * 1000)::integer END,
       CASE WHEN random() < 0.003 THEN NULL ELSE g END,
       CASE WHEN random() < 0.1 THEN NULL ELSE md5(g::text) END,
       CASE WHEN random() < 0.1 THEN NULL ELSE round((random() * 100)::numeric, 2) END,
       CASE WHEN random() < 0.1 THEN NULL ELSE date '2026-01-01' + (random() * 300)::integer END
FROM generate_series(1, 3000) g;
-- Some keys twice in the source.
INSERT INTO rnd_src SELECT * FROM rnd_src WHERE random() < 0.005 AND k1 IS NOT NULL AND k2 IS NOT NULL;

-- The target: most source rows (columns in another order), some changed,
-- some left out, some extra, some duplicated, some with NULL keys.
CREATE TABLE rnd_tgt (d date, c numeric, b text, k2 integer, a integer, k1 text);
INSERT INTO rnd_tgt (k1, k2, a, b, c, d)
SELECT k1, k2,
       CASE WHEN r < 0.03 THEN a + 1 WHEN r < 0.04 THEN NULL ELSE a END,
       CASE WHEN r > 0.97 THEN coalesce(b, '') || 'x' ELSE b END,
       CASE WHEN r BETWEEN 0.5 AND 0.52 THEN coalesce(c, 0) + 0.01 ELSE c END,
       CASE WHEN r BETWEEN 0.6 AND 0.61 THEN NULL
            WHEN r BETWEEN 0.61 AND 0.62 THEN coalesce(d, date '2026-01-01') + 1 ELSE d END
FROM (SELECT *, random() AS r FROM rnd_src) s
WHERE random() > 0.02;
INSERT INTO rnd_tgt (k1, k2, a, b, c, d)
SELECT 'k' || (g % 89), g, g, 'extra', g, NULL FROM generate_series(3001, 3060) g;
INSERT INTO rnd_tgt SELECT * FROM rnd_tgt WHERE random() < 0.005 AND k1 IS NOT NULL AND k2 IS NOT NULL;
INSERT INTO rnd_tgt (k1, k2, a) SELECT NULL, g, g FROM generate_series(5000, 5004) g;
INSERT INTO rnd_tgt (k1, k2, a) SELECT 'k1', NULL, g FROM generate_series(5000, 5002) g;

CREATE FUNCTION rnd_oracle() RETURNS TABLE (issue text, key jsonb, columns text[],
                                          source_values jsonb, target_values jsonb)
LANGUAGE sql AS $$
    WITH s AS (SELECT *, jsonb_build_object('k1', k1, 'k2', k2) AS key,
                      to_jsonb(rnd_src) - 'k1' - 'k2' AS vals FROM rnd_src),
         t AS (SELECT *, jsonb_build_object('k1', k1, 'k2', k2) AS key,
                      to_jsonb(rnd_tgt) - 'k1' - 'k2' AS vals FROM rnd_tgt),
         sn AS (SELECT * FROM s WHERE k1 IS NOT NULL AND k2 IS NOT NULL),
         tn AS (SELECT * FROM t WHERE k1 IS NOT NULL AND k2 IS NOT NULL),
         sdup AS (SELECT k1, k2 FROM sn GROUP BY k1, k2 HAVING count(*) > 1),
         tdup AS (SELECT k1, k2 FROM tn GROUP BY k1, k2 HAVING count(*) > 1),
         su AS (SELECT * FROM sn WHERE (k1, k2) NOT IN (SELECT k1, k2 FROM sdup)),
         tu AS (SELECT * FROM tn WHERE (k1, k2) NOT IN (SELECT k1, k2 FROM tdup))
    SELECT 'NULL_KEY_IN_SOURCE', key, NULL::text[], vals, NULL::jsonb
      FROM s WHERE k1 IS NULL OR k2 IS NULL
    UNION ALL
    SELECT 'NULL_KEY_IN_TARGET', key, NULL, NULL, vals
      FROM t WHERE k1 IS NULL OR k2 IS NULL
    UNION ALL
    SELECT 'DUPLICATE_KEY_IN_SOURCE', jsonb_build_object('k1', k1, 'k2', k2), NULL,
           to_jsonb(count(*)), NULL
      FROM sn GROUP BY k1, k2 HAVING count(*) > 1
    UNION ALL
    SELECT 'DUPLICATE_KEY_IN_TARGET', jsonb_build_object('k1', k1, 'k2', k2), NULL,
           NULL, to_jsonb(count(*))
      FROM tn GROUP BY k1, k2 HAVING count(*) > 1
    UNION ALL
    SELECT 'MISSING_IN_TARGET', su.key, NULL, su.vals, NULL
      FROM su WHERE NOT EXISTS (SELECT FROM tn WHERE tn.k1 = su.k1 AND tn.k2 = su.k2)
    UNION ALL
    SELECT 'EXTRA_IN_TARGET', tu.key, NULL, NULL, tu.vals
      FROM tu WHERE NOT EXISTS (SELECT FROM sn WHERE sn.k1 = tu.k1 AND sn.k2 = tu.k2)
    UNION ALL
    SELECT 'MISMATCH', m.key, m.cols,
           (SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(m.svals) e WHERE e.key = ANY (m.cols)),
           (SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(m.tvals) e WHERE e.key = ANY (m.cols))
      FROM (SELECT su.key, su.vals AS svals, tu.vals AS tvals,
                   array_remove(ARRAY[CASE WHEN su.a IS DISTINCT FROM tu.a THEN 'a' END,
                                      CASE WHEN su.b IS DISTINCT FROM tu.b THEN 'b' END,
                                      CASE WHEN su.c IS DISTINCT FROM tu.c THEN 'c' END,
                                      CASE WHEN su.d IS DISTINCT FROM tu.d THEN 'd' END], NULL) AS cols
              FROM su JOIN tu ON su.k1 = tu.k1 AND su.k2 = tu.k2
             WHERE (su.a, su.b, su.c, su.d) IS DISTINCT FROM (tu.a, tu.b, tu.c, tu.d)) m
$$;

-- Duplicates are compared by their number of copies.
CREATE FUNCTION rnd_diff() RETURNS TABLE (issue text, key jsonb, columns text[],
                                        source_values jsonb, target_values jsonb)
LANGUAGE sql AS $$
    SELECT issue, key, columns,
           CASE WHEN issue = 'DUPLICATE_KEY_IN_SOURCE' THEN to_jsonb(jsonb_array_length(source_values))
                ELSE source_values END,
           CASE WHEN issue = 'DUPLICATE_KEY_IN_TARGET' THEN to_jsonb(jsonb_array_length(target_values))
                ELSE target_values END
    FROM reconcile_diff('rnd_src', 'rnd_tgt', '{k1,k2}')
$$;

CREATE TABLE oracle AS SELECT * FROM rnd_oracle();

-- Every kind of finding is there.
SELECT issue, count(*) FROM oracle GROUP BY issue ORDER BY issue COLLATE "C";

-- Read through a sort (no index on the key) ...
SELECT count(*) AS only_in_diff FROM (SELECT * FROM rnd_diff() EXCEPT ALL SELECT * FROM oracle) x;
SELECT count(*) AS only_in_oracle FROM (SELECT * FROM oracle EXCEPT ALL SELECT * FROM rnd_diff()) x;

-- ... and through btree indexes on the key, in index order.
CREATE INDEX ON rnd_src (k1, k2);
CREATE INDEX ON rnd_tgt (k1, k2);
ANALYZE rnd_src;
ANALYZE rnd_tgt;
SET enable_seqscan = off;
SET enable_sort = off;
SELECT count(*) AS only_in_diff FROM (SELECT * FROM rnd_diff() EXCEPT ALL SELECT * FROM oracle) x;
SELECT count(*) AS only_in_oracle FROM (SELECT * FROM oracle EXCEPT ALL SELECT * FROM rnd_diff()) x;
RESET enable_seqscan;
RESET enable_sort;

-- The summary agrees with the oracle's counts.
SELECT s.missing_in_target = o.missing AND s.extra_in_target = o.extra
       AND s.mismatched = o.mismatched AND s.duplicate_keys = o.dups
       AND s.null_keys = o.nulls
       AND s.rows_source = (SELECT count(*) FROM rnd_src)
       AND s.rows_target = (SELECT count(*) FROM rnd_tgt) AS summary_agrees,
       s.column_mismatches = o.per_column AS columns_agree
FROM reconcile_diff_summary('rnd_src', 'rnd_tgt', '{k1,k2}') s,
     (SELECT count(*) FILTER (WHERE issue = 'MISSING_IN_TARGET') AS missing,
             count(*) FILTER (WHERE issue = 'EXTRA_IN_TARGET') AS extra,
             count(*) FILTER (WHERE issue = 'MISMATCH') AS mismatched,
             count(*) FILTER (WHERE issue LIKE 'DUPLICATE%') AS dups,
             count(*) FILTER (WHERE issue LIKE 'NULL_KEY%') AS nulls,
             (SELECT jsonb_object_agg(c, (SELECT count(*) FROM oracle r WHERE c = ANY (r.columns)))
                FROM unnest(ARRAY['a', 'b', 'c', 'd']) c) AS per_column
      FROM oracle) o;

-- A second round with the options: trimmed keys, renamed target columns, a
-- tolerance, and the window with the source_max cutoff, against the same
-- kind of oracle with the options spelled out in SQL.
CREATE TABLE rnd2_src (code varchar(12), n integer, amt numeric, upd date);
CREATE TABLE rnd2_tgt (betrag numeric, upd date, kode text, menge integer);
INSERT INTO rnd2_src
SELECT CASE WHEN random() < 0.003 THEN NULL
            WHEN random() < 0.2 THEN ' c' || g || ' ' ELSE 'c' || g END,
       CASE WHEN random() < 0.1 THEN NULL ELSE (random() * 10)::integer END,
       CASE WHEN random() < 0.1 THEN NULL ELSE round((random() * 100)::numeric, 3) END,
       date '2026-01-01' + (random() * 250)::integer
FROM generate_series(1, 2000) g;
INSERT INTO rnd2_src SELECT * FROM rnd2_src WHERE random() < 0.005 AND code IS NOT NULL;
INSERT INTO rnd2_tgt (kode, menge, betrag, upd)
SELECT CASE WHEN random() < 0.3 THEN '  ' || btrim(code) ELSE code END,
       CASE WHEN r < 0.02 THEN coalesce(n, 0) + 1 ELSE n END,
       CASE WHEN r BETWEEN 0.1 AND 0.2 THEN amt + 0.05
            WHEN r BETWEEN 0.2 AND 0.25 THEN amt - 0.051
            WHEN r BETWEEN 0.25 AND 0.26 THEN NULL ELSE amt END,
       CASE WHEN r BETWEEN 0.3 AND 0.31 THEN upd + 1 ELSE upd END
FROM (SELECT *, random() AS r FROM rnd2_src) s
WHERE random() > 0.03;
INSERT INTO rnd2_tgt (kode, menge, betrag, upd)
SELECT 'x' || g, 1, 1, date '2026-01-01' + (random() * 300)::integer FROM generate_series(1, 80) g;

CREATE TABLE oracle2 AS
WITH lo_hi AS (SELECT date '2026-03-01' AS lo, date '2026-07-31' AS hi),
     s AS (SELECT btrim(code) AS k, n, amt, upd FROM rnd2_src, lo_hi WHERE upd BETWEEN lo AND hi),
     smax AS (SELECT max(upd) AS m FROM s),
     t AS (SELECT btrim(kode) AS k, menge AS n, betrag AS amt, upd FROM rnd2_tgt, lo_hi, smax
           WHERE upd BETWEEN lo AND hi AND (smax.m IS NULL OR upd <= smax.m)),
     sdup AS (SELECT k FROM s WHERE k IS NOT NULL GROUP BY k HAVING count(*) > 1),
     tdup AS (SELECT k FROM t WHERE k IS NOT NULL GROUP BY k HAVING count(*) > 1),
     su AS (SELECT * FROM s WHERE k IS NOT NULL AND k NOT IN (SELECT k FROM sdup)),
     tu AS (SELECT * FROM t WHERE k IS NOT NULL AND k NOT IN (SELECT k FROM tdup))
SELECT 'NULL_KEY_IN_SOURCE' AS issue, k, NULL::text[] AS columns FROM s WHERE k IS NULL
UNION ALL SELECT 'NULL_KEY_IN_TARGET', k, NULL FROM t WHERE k IS NULL
UNION ALL SELECT 'DUPLICATE_KEY_IN_SOURCE', k, NULL FROM sdup
UNION ALL SELECT 'DUPLICATE_KEY_IN_TARGET', k, NULL FROM tdup
UNION ALL SELECT 'MISSING_IN_TARGET', k, NULL FROM su
          WHERE NOT EXISTS (SELECT FROM t WHERE t.k = su.k)
UNION ALL SELECT 'EXTRA_IN_TARGET', k, NULL FROM tu
          WHERE NOT EXISTS (SELECT FROM s WHERE s.k = tu.k)
UNION ALL
SELECT 'MISMATCH', k, cols FROM (
    SELECT su.k, array_remove(ARRAY[
        CASE WHEN su.n IS DISTINCT FROM tu.n THEN 'n' END,
        CASE WHEN (su.amt IS NULL) <> (tu.amt IS NULL) OR abs(su.amt - tu.amt) > 0.05 THEN 'amt' END,
        CASE WHEN su.upd IS DISTINCT FROM tu.upd THEN 'upd' END], NULL) AS cols
    FROM su JOIN tu USING (k)) m
WHERE cols <> '{}';

SELECT issue, count(*) FROM oracle2 GROUP BY issue ORDER BY issue COLLATE "C";
CREATE TABLE diff2 AS
SELECT issue, key->>'code' AS k, columns
FROM reconcile_diff('rnd2_src', 'rnd2_tgt', '{code}',
    '{"trim_keys": true, "target_key_columns": ["kode"],
      "column_map": {"n": "menge", "amt": "betrag"}, "tolerance": {"amt": 0.05},
      "updated_column": "upd", "window": ["2026-03-01", "2026-07-31"], "cutoff": "source_max"}');
SELECT count(*) AS only_in_diff FROM (SELECT * FROM diff2 EXCEPT ALL SELECT * FROM oracle2) x;
SELECT count(*) AS only_in_oracle FROM (SELECT * FROM oracle2 EXCEPT ALL SELECT * FROM diff2) x;

DROP EXTENSION reconcile;
