-- The load test's checks (bench/load/run.sh): one row per invariant.
\pset footer off
CREATE TEMP TABLE checks (name text, passed boolean, detail text);

-- The committed staged rows: the rows of every object of every receipt.
CREATE TEMP TABLE committed_rows AS
    SELECT DISTINCT s.object_key, s.source_row, s.operation, s.k, s.val, s.v
      FROM reconcile.batch_objects AS o JOIN ls AS s USING (object_key)
     WHERE o.target = 'lt'::regclass;
-- The independent fold: per key the highest committed version, its payload
-- and its tombstone state.
CREATE TEMP TABLE fold AS
    SELECT DISTINCT ON (k) k, v, operation, val FROM committed_rows ORDER BY k, v DESC;

INSERT INTO checks
SELECT 'target equals the fold of all committed batches', count(*) = 0, count(*) || ' keys differ'
  FROM fold AS f FULL JOIN lt AS t USING (k)
 WHERE t.k IS NULL OR f.k IS NULL OR t.v <> f.v OR t.del <> (f.operation = 'DELETE')
    OR (NOT t.del AND t.val IS DISTINCT FROM f.val);
INSERT INTO checks
SELECT 'live rows carry the documented payload hash', count(*) = 0, count(*) || ' differ'
  FROM lt WHERE NOT del AND h <> sha256(convert_to('[' || coalesce(to_json(val)::text, 'null') || ',false]', 'UTF8'));
INSERT INTO checks
SELECT 'every staged row left is of a committed batch (or of the pool)', count(*) = 0, count(*) || ' orphans'
  FROM ls WHERE object_key NOT LIKE 'pool/%' AND NOT EXISTS (SELECT 1 FROM reconcile.batch_objects AS o WHERE o.object_key = ls.object_key);
INSERT INTO checks
SELECT 'exactly one receipt per distinct manifest',
       (SELECT count(*) FROM reconcile.receipts)
         = (SELECT count(DISTINCT manifest) FROM bench_batches)
       AND (SELECT count(DISTINCT manifest) FROM bench_batches)
         = (SELECT count(DISTINCT batch_id) FROM bench_batches),
       (SELECT count(*) FROM reconcile.receipts) || ' receipts, '
         || (SELECT count(DISTINCT manifest) FROM bench_batches) || ' distinct manifests';
INSERT INTO checks
SELECT 'every manifest committed once, its replays replayed',
       bool_and(committed = 1 AND replayed = n - 1), count(*) || ' manifests'
  FROM (SELECT manifest, count(*) AS n, count(*) FILTER (WHERE status = 'committed') AS committed,
               count(*) FILTER (WHERE status = 'replayed') AS replayed
          FROM bench_batches GROUP BY manifest) AS m;
INSERT INTO checks
SELECT 'receipt batch ids are the manifests'' digests', bool_and(b.batch_id = reconcile_batch_id(b.manifest)
       AND r.batch_id IS NOT NULL), count(*) || ' batches'
  FROM bench_batches AS b LEFT JOIN reconcile.receipts AS r USING (batch_id);
INSERT INTO checks
SELECT 'receipt counts add up to the staged rows of their objects', count(*) = 0, count(*) || ' receipts differ'
  FROM reconcile.receipts AS r
 WHERE r.staged_rows <> r.inserted + r.updated + r.deleted + r.unchanged + r.stale + r.duplicates + r.conflicts + r.rejected
    OR r.staged_rows <> (SELECT count(*) FROM reconcile.batch_objects AS o JOIN ls AS s USING (object_key)
                          WHERE o.batch_id = r.batch_id);
INSERT INTO checks
SELECT 'no conflicts and no rejects (none were generated)',
       (SELECT count(*) FROM reconcile.conflicts) + (SELECT count(*) FROM reconcile.rejects) = 0, '';
INSERT INTO checks
SELECT 'a pool manifest not committed left no trace', count(*) = 0, count(*) || ' receipts'
  FROM bench_pool AS p JOIN reconcile.receipts AS r ON r.batch_id = reconcile_batch_id(p.manifest)
 WHERE NOT EXISTS (SELECT 1 FROM bench_batches AS b WHERE b.manifest = p.manifest);
INSERT INTO checks
SELECT 'each client''s cursor is at its last committed batch', bool_and(c."position" = l.pos),
       count(*) || ' cursors'
  FROM reconcile.cursors AS c
  JOIN (SELECT DISTINCT ON (client) 'client-' || client AS source, pos FROM bench_batches
         WHERE status = 'committed' ORDER BY client, n DESC) AS l USING (source);

SELECT (SELECT count(*) FROM bench_batches) AS batches,
       (SELECT count(*) FROM bench_batches WHERE kind = 'new') AS new,
       (SELECT count(*) FROM bench_batches WHERE kind = 'new+old') AS new_with_old_object,
       (SELECT count(*) FROM bench_batches WHERE kind = 'replay') AS replays,
       (SELECT count(*) FROM bench_batches WHERE kind = 'pool') AS pool_loads,
       (SELECT count(*) FROM bench_batches WHERE kind = 'pool' AND status = 'committed') AS pool_committed,
       (SELECT count(*) FROM bench_errors) AS errors,
       (SELECT sum(staged_rows) FROM reconcile.receipts) AS staged_rows_committed,
       (SELECT count(*) FROM lt) AS target_rows,
       (SELECT count(*) FROM lt WHERE del) AS tombstones;
SELECT coalesce(string_agg(sqlstate || ' x' || n, ', '), 'none') AS errors_by_sqlstate
  FROM (SELECT sqlstate, count(*) AS n FROM bench_errors GROUP BY 1 ORDER BY 1) AS e;
SELECT name AS "check", passed, detail FROM checks;
SELECT count(*) FILTER (WHERE passed) || ' of ' || count(*) AS invariant_checks_passed FROM checks;
