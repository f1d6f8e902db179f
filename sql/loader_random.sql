-- Generated input for reconcile_batch: several hundred random batches
-- (a few thousand staged rows) over a small key space, with versions,
-- deletes, exact duplicates, same-version conflicts, malformed values,
-- several objects per batch, replays of earlier manifests, old objects
-- under new manifests, and refused manifests (a wrong row count, a changed
-- content hash).  After every batch the invariants are checked; at the end
-- the target is compared with an independent fold of the committed staged
-- rows.  Then every manifest runs again into a target with a two-column key
-- (through a view), which must give the same outcomes, receipts and rows.
-- Deterministic (setseed); only aggregates are printed.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

CREATE TABLE rt (k integer PRIMARY KEY, val text, v bigint NOT NULL,
                 del boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('rt', '{k}', 'v', 'del', 'h', 'quarantine');
-- Text columns, so that malformed values reach the extension.
CREATE TABLE rs (object_key text, source_row bigint, operation text,
                 k text, val text, v text);

-- What the generator meant: per staged row, whether it is malformed.
CREATE TABLE gen_rows (object_key text, source_row bigint, malformed boolean);
-- Every manifest tried, with its fate.
CREATE TABLE gen_batches (n integer PRIMARY KEY, kind text, manifest jsonb,
                          objects text[], outcome text, batch_id text);
CREATE TABLE violations (n integer, what text);

-- The target and the state tables, as one value to compare.
CREATE FUNCTION snap() RETURNS text LANGUAGE sql AS $$
    SELECT md5(coalesce((SELECT string_agg(format('%s|%s|%s|%s|%s', k, val, v, del, encode(h, 'hex')), ';' ORDER BY k) FROM rt), ''))
        || '/' || (SELECT count(*) FROM reconcile.receipts)
        || '/' || (SELECT count(*) FROM reconcile.batch_objects)
        || '/' || (SELECT count(*) FROM reconcile.rejects)
        || '/' || (SELECT count(*) FROM reconcile.conflicts)
        || '/' || coalesce((SELECT "position" FROM reconcile.cursors), '-')
$$;

-- The payload of a key at a version is a function of both, so that two
-- batches never disagree about it; only rows added as conflicts do.
CREATE FUNCTION payload(k integer, v integer) RETURNS text LANGUAGE sql IMMUTABLE AS
    $$ SELECT 'p' || k || '.' || v $$;
CREATE FUNCTION op_of(k integer, v integer) RETURNS text LANGUAGE sql IMMUTABLE AS
    $$ SELECT CASE WHEN (k * 7 + v * 3) % 6 = 0 THEN 'DELETE' ELSE 'UPSERT' END $$;


-- The independent fold of the committed batches so far, as rows of the
-- target (k, v, deleted, val): the valid rows of each committed batch
-- (every staged row of its objects that casts, with a key, a non-negative
-- version and a known operation); a key is held back in a batch when two
-- payloads (or an UPSERT and a DELETE) claim one version of it there; per
-- key, the highest version of the rows that were not held back.
CREATE FUNCTION fold_mismatches() RETURNS bigint LANGUAGE sql AS $$
    WITH valid AS (
        SELECT b.n, s.operation, s.k::integer AS k, s.val, s.v::bigint AS v
          FROM gen_batches AS b, unnest(b.objects) AS o, rs AS s
          JOIN gen_rows AS g USING (object_key, source_row)
         WHERE b.outcome = 'committed' AND s.object_key = o AND NOT g.malformed),
    held_back AS (
        SELECT DISTINCT n, k FROM valid
         GROUP BY n, k, v HAVING count(DISTINCT (operation, coalesce(val, '<null>'))) > 1),
    fold AS (
        SELECT DISTINCT ON (k) k, v, operation, val
          FROM valid WHERE (n, k) NOT IN (SELECT n, k FROM held_back)
         ORDER BY k, v DESC)
    SELECT count(*)
      FROM fold AS f FULL JOIN rt AS t USING (k)
     WHERE t.k IS NULL OR f.k IS NULL
        OR t.v <> f.v
        OR t.del <> (f.operation = 'DELETE')
        OR (NOT t.del AND t.val IS DISTINCT FROM f.val)
$$;

SELECT setseed(0.31);
DO $gen$
DECLARE
    n          integer;
    nobj       integer;
    nrows      integer;
    obj        text;
    objs       text[];
    m          jsonb;
    entry      jsonb;
    k          integer;
    v          integer;
    kt         text;
    vt         text;
    op         text;
    val        text;
    bad        boolean;
    sr         bigint;
    x          float8;
    r          record;
    before     text;
    old        record;
    expect_err text;
    staged     bigint;
    malformed  bigint;
BEGIN
    FOR n IN 1..700 LOOP
        x := random();
        IF n > 20 AND x < 0.10 THEN
            -- Replay an earlier committed manifest: the stored receipt, no change.
            SELECT * INTO old FROM gen_batches WHERE outcome = 'committed'
             ORDER BY n OFFSET floor(random() * (SELECT count(*) FROM gen_batches WHERE outcome = 'committed')) LIMIT 1;
            before := snap();
            SELECT * INTO r FROM reconcile_batch('rt', 'rs', old.manifest, 'feed', 'replay-' || n);
            IF r.status <> 'replayed' THEN
                INSERT INTO violations VALUES (n, 'replay status ' || r.status);
            END IF;
            IF r.batch_id <> old.batch_id THEN
                INSERT INTO violations VALUES (n, 'replay returned another batch id');
            END IF;
            IF snap() <> before THEN
                INSERT INTO violations VALUES (n, 'replay changed something');
            END IF;
            INSERT INTO gen_batches VALUES (n, 'replay', old.manifest, old.objects, 'replayed', r.batch_id);
            CONTINUE;
        END IF;

        m := '[]';
        objs := '{}';
        expect_err := NULL;
        -- Old objects under a new manifest: the same object_key, version_id
        -- and content_hash, with their staged rows still there.
        IF n > 20 AND x < 0.18 THEN
            FOR old IN SELECT e FROM gen_batches AS b, jsonb_array_elements(b.manifest) AS e
                        WHERE b.outcome = 'committed'
                        ORDER BY random() LIMIT 1 + floor(random() * 2) LOOP
                IF NOT old.e->>'object_key' = ANY (objs) THEN
                    m := m || jsonb_build_array(old.e);
                    objs := objs || (old.e->>'object_key');
                END IF;
            END LOOP;
            IF random() < 0.15 THEN
                -- ... but with another content hash: refused with 23000.
                m := jsonb_set(m, '{0,content_hash}', to_jsonb('changed-' || n));
                expect_err := '23000';
            END IF;
        END IF;

        nobj := 1 + floor(random() * 3);
        FOR j IN 1..nobj LOOP
            obj := format('o/%s/%s', n, j);
            nrows := floor(random() * 8);
            sr := 0;
            FOR i IN 1..nrows LOOP
                sr := sr + 1;
                k := 1 + floor(random() * 40);
                -- Versions grow with the run, so the last batches still move keys.
                v := 1 + floor(random() * (4 + n / 15));
                kt := k::text;
                vt := v::text;
                op := op_of(k, v);
                val := payload(k, v);
                bad := false;
                x := random();
                IF x < 0.015 THEN
                    kt := NULL; bad := true;
                ELSIF x < 0.03 THEN
                    kt := (ARRAY['x', '1e2', '', '99999999999'])[1 + floor(random() * 4)]; bad := true;
                ELSIF x < 0.07 THEN
                    vt := (ARRAY['', 'NaN', '-1', '1.5', '99999999999999999999', NULL, 'v2'])[1 + floor(random() * 7)];
                    bad := true;
                ELSIF x < 0.08 THEN
                    op := (ARRAY['upsert', 'MERGE', NULL])[1 + floor(random() * 3)]; bad := true;
                END IF;
                INSERT INTO rs VALUES (obj, sr, op, kt, CASE WHEN op = 'DELETE' THEN NULL ELSE val END, vt);
                INSERT INTO gen_rows VALUES (obj, sr, bad);
                x := random();
                IF NOT bad AND x < 0.10 THEN
                    -- An exact duplicate (another source row).
                    sr := sr + 1;
                    INSERT INTO rs VALUES (obj, sr, op, kt, CASE WHEN op = 'DELETE' THEN NULL ELSE val END, vt);
                    INSERT INTO gen_rows VALUES (obj, sr, false);
                ELSIF NOT bad AND x < 0.14 THEN
                    -- Another payload at the same key and version: a conflict.
                    sr := sr + 1;
                    IF random() < 0.3 THEN
                        INSERT INTO rs VALUES (obj, sr, CASE op WHEN 'DELETE' THEN 'UPSERT' ELSE 'DELETE' END, kt,
                                               CASE WHEN op = 'DELETE' THEN val ELSE NULL END, vt);
                    ELSE
                        INSERT INTO rs VALUES (obj, sr, 'UPSERT', kt, 'alt' || n || '.' || sr, vt);
                    END IF;
                    INSERT INTO gen_rows VALUES (obj, sr, false);
                END IF;
            END LOOP;
            nrows := sr;
            entry := jsonb_build_object('object_key', obj, 'version_id', 'v' || n,
                                        'content_hash', 'sha256:' || md5(obj), 'rows', nrows);
            IF expect_err IS NULL AND random() < 0.03 THEN
                -- A manifest that does not match the stage: refused with 21000.
                entry := jsonb_set(entry, '{rows}', to_jsonb(nrows + 1));
                expect_err := '21000';
            END IF;
            m := m || jsonb_build_array(entry);
            objs := objs || obj;
        END LOOP;

        before := snap();
        BEGIN
            SELECT * INTO r FROM reconcile_batch('rt', 'rs', m, 'feed', 'batch-' || n);
            SELECT count(*), count(*) FILTER (WHERE g.malformed) INTO staged, malformed
              FROM gen_rows AS g WHERE g.object_key = ANY (objs);
            IF expect_err IS NOT NULL THEN
                INSERT INTO violations VALUES (n, 'expected ' || expect_err || ', got ' || r.status);
            END IF;
            IF r.status <> 'committed' THEN
                INSERT INTO violations VALUES (n, 'status ' || r.status);
            END IF;
            IF r.staged_rows <> staged
               OR r.staged_rows <> r.inserted + r.updated + r.deleted + r.unchanged + r.stale
                                   + r.duplicates + r.conflicts + r.rejected THEN
                INSERT INTO violations VALUES (n, format('counts do not add up: %s', row_to_json(r)));
            END IF;
            IF r.rejected <> malformed THEN
                INSERT INTO violations VALUES (n, format('rejected %s, generated %s malformed', r.rejected, malformed));
            END IF;
            IF (SELECT sum((o->>'rows')::bigint) FROM jsonb_array_elements(r.objects) AS o) <> staged THEN
                INSERT INTO violations VALUES (n, 'per-object rows do not add up');
            END IF;
            INSERT INTO gen_batches VALUES (n, 'new', m, objs, 'committed', r.batch_id);
            IF n % 50 = 0 AND fold_mismatches() <> 0 THEN
                INSERT INTO violations VALUES (n, 'the target differs from the fold');
            END IF;
            -- Replaying it at once changes nothing.
            IF random() < 0.2 THEN
                before := snap();
                IF (SELECT status FROM reconcile_batch('rt', 'rs', m, 'feed', 'batch-' || n)) <> 'replayed'
                   OR snap() <> before THEN
                    INSERT INTO violations VALUES (n, 'immediate replay was not a no-op');
                END IF;
            END IF;
        EXCEPTION WHEN OTHERS THEN
            IF expect_err IS DISTINCT FROM SQLSTATE THEN
                INSERT INTO violations VALUES (n, format('unexpected error %s: %s', SQLSTATE, SQLERRM));
            END IF;
            IF snap() <> before THEN
                INSERT INTO violations VALUES (n, 'a refused batch changed something');
            END IF;
            INSERT INTO gen_batches VALUES (n, 'new', m, objs, 'refused ' || SQLSTATE, NULL);
        END;
    END LOOP;
END
$gen$;

-- What was generated and what happened to it.
SELECT count(*) AS manifests,
       count(*) FILTER (WHERE outcome = 'committed') AS committed,
       count(*) FILTER (WHERE outcome = 'replayed') AS replayed,
       count(*) FILTER (WHERE outcome = 'refused 21000') AS refused_21000,
       count(*) FILTER (WHERE outcome = 'refused 23000') AS refused_23000,
       count(*) FILTER (WHERE outcome LIKE 'refused%' AND outcome NOT IN ('refused 21000', 'refused 23000')) AS refused_other
  FROM gen_batches;
SELECT count(*) > 3000 AS thousands_of_staged_rows FROM rs;
SELECT sum(staged_rows) > 3000 AS thousands_loaded,
       sum(duplicates) > 0 AS some_duplicates, sum(conflicts) > 0 AS some_conflicts,
       sum(rejected) > 0 AS some_rejects, sum(stale) > 0 AS some_stale,
       sum(unchanged) > 0 AS some_unchanged, sum(deleted) > 0 AS some_deletes
  FROM reconcile.receipts;
SELECT count(*) > 20 AS batches_with_old_objects
  FROM gen_batches WHERE outcome = 'committed'
   AND EXISTS (SELECT 1 FROM unnest(objects) AS o WHERE o NOT LIKE 'o/' || n || '/%');

-- One receipt per committed manifest, and its objects.
SELECT (SELECT count(*) FROM reconcile.receipts)
     = (SELECT count(*) FROM gen_batches WHERE outcome = 'committed') AS one_receipt_per_manifest;
SELECT count(*) AS receipt_object_mismatches
  FROM (SELECT batch_id, object_key FROM gen_batches AS b, unnest(b.objects) AS object_key
         WHERE outcome = 'committed'
        EXCEPT
        SELECT batch_id, object_key FROM reconcile.batch_objects) AS d;
SELECT "position" = (SELECT 'batch-' || max(n) FROM gen_batches WHERE outcome = 'committed') AS cursor_at_last_batch
  FROM reconcile.cursors;

-- The independent fold.  The valid rows of each committed batch: every
-- staged row of its objects that casts, with a key and a non-negative version
-- and a known operation.
CREATE TABLE valid AS
    SELECT b.n, s.object_key, s.source_row, s.operation, s.k::integer AS k, s.val, s.v::bigint AS v
      FROM gen_batches AS b, unnest(b.objects) AS o, rs AS s
      JOIN gen_rows AS g USING (object_key, source_row)
     WHERE b.outcome = 'committed' AND s.object_key = o AND NOT g.malformed;
-- A key is held back in a batch when two payloads (or an UPSERT and a
-- DELETE) claim one version of it there.
CREATE TABLE held_back AS
    SELECT DISTINCT n, k FROM valid
     GROUP BY n, k, v HAVING count(DISTINCT (operation, coalesce(val, '<null>'))) > 1;
-- Per key, the highest version of the rows that were not held back.
CREATE TABLE fold AS
    SELECT DISTINCT ON (k) k, v, operation, val
      FROM valid WHERE (n, k) NOT IN (SELECT n, k FROM held_back)
     ORDER BY k, v DESC;

SELECT count(*) AS keys_in_fold, count(*) FILTER (WHERE operation = 'DELETE') AS tombstones_in_fold
  FROM fold;
SELECT fold_mismatches();

-- Live rows carry the documented payload hash.
SELECT count(*) AS hash_mismatches FROM rt
 WHERE NOT del AND h <> sha256(convert_to('[' || coalesce(to_json(val)::text, 'null') || ',false]', 'UTF8'));
-- Held-back rows are in reconcile.conflicts, and nothing else is.
SELECT (SELECT count(*) FROM valid WHERE (n, k) IN (SELECT n, k FROM held_back))
     = (SELECT count(*) FROM reconcile.conflicts) AS conflicts_recorded;
SELECT (SELECT sum(conflicts) FROM reconcile.receipts) = (SELECT count(*) FROM reconcile.conflicts)
    AS conflict_counts_match;
-- Every malformed row of a committed batch has reject rows, and no valid one.
SELECT count(*) AS reject_mismatches
  FROM (SELECT b.batch_id, g.object_key, g.source_row FROM gen_batches AS b, unnest(b.objects) AS o,
               gen_rows AS g
         WHERE b.outcome = 'committed' AND g.object_key = o AND g.malformed
        EXCEPT
        SELECT batch_id, object_key, source_row FROM reconcile.rejects) AS d;
SELECT count(*) AS rejects_of_valid_rows
  FROM reconcile.rejects AS j JOIN gen_rows AS g USING (object_key, source_row) WHERE NOT g.malformed;

SELECT count(*) AS invariant_violations FROM violations;
SELECT n, what FROM violations ORDER BY n LIMIT 20;


-- Round 2: every manifest again, in the same order, into a target keyed by
-- two columns (k1 derived from k, k2 = k) through a view, under new
-- version_ids (a manifest is committed to one target only).  The key index
-- is probed another way; every outcome, receipt count and the final target
-- must be the same as in round 1.
CREATE TABLE rt2 (k1 text, k2 integer, val text, v bigint NOT NULL,
                  del boolean NOT NULL DEFAULT false, h bytea, PRIMARY KEY (k1, k2));
SELECT reconcile_register('rt2', '{k1,k2}', 'v', 'del', 'h', 'quarantine');
CREATE VIEW rs2 AS
    SELECT object_key, source_row, operation,
           CASE WHEN k ~ '^[0-9]+$' THEN 'g' || right(k, 1) ELSE 'g' END AS k1, k AS k2, val, v
      FROM rs;
TRUNCATE violations;
DO $round2$
DECLARE
    b  record;
    m2 jsonb;
    r  record;
    r1 record;
BEGIN
    FOR b IN SELECT * FROM gen_batches ORDER BY n LOOP
        SELECT jsonb_agg(jsonb_set(e, '{version_id}', to_jsonb((e->>'version_id') || '/2')) ORDER BY i)
          INTO m2 FROM jsonb_array_elements(b.manifest) WITH ORDINALITY AS x(e, i);
        BEGIN
            SELECT * INTO r FROM reconcile_batch('rt2', 'rs2', m2, 'feed2', 'batch-' || b.n);
            SELECT * INTO r1 FROM reconcile.receipts WHERE batch_id = b.batch_id;
            IF r.status IS DISTINCT FROM b.outcome THEN
                INSERT INTO violations VALUES (b.n, format('round 2: %s, round 1: %s', r.status, b.outcome));
            ELSIF (r.staged_rows, r.inserted, r.updated, r.deleted, r.unchanged, r.stale, r.duplicates,
                   r.conflicts, r.rejected, r.checksum)
                  IS DISTINCT FROM (r1.staged_rows, r1.inserted, r1.updated, r1.deleted, r1.unchanged, r1.stale,
                                    r1.duplicates, r1.conflicts, r1.rejected, r1.checksum) THEN
                INSERT INTO violations VALUES (b.n, format('round 2 receipt %s differs from round 1 %s',
                                                           row_to_json(r), row_to_json(r1)));
            END IF;
        EXCEPTION WHEN OTHERS THEN
            IF b.outcome IS DISTINCT FROM 'refused ' || SQLSTATE THEN
                INSERT INTO violations VALUES (b.n, format('round 2: error %s: %s, round 1: %s', SQLSTATE, SQLERRM, b.outcome));
            END IF;
        END;
    END LOOP;
END
$round2$;
SELECT count(*) AS round2_violations FROM violations;
SELECT n, left(what, 300) AS what FROM violations ORDER BY n LIMIT 10;
SELECT count(*) AS round2_target_differs
  FROM rt FULL JOIN rt2 ON rt2.k2 = rt.k
 WHERE rt.k IS NULL OR rt2.k2 IS NULL OR rt2.k1 <> 'g' || right(rt.k::text, 1)
    OR (rt.val, rt.v, rt.del, rt.h) IS DISTINCT FROM (rt2.val, rt2.v, rt2.del, rt2.h);
SELECT (SELECT count(*) FROM reconcile.receipts WHERE target = 'rt2'::regclass)
     = (SELECT count(*) FROM reconcile.receipts WHERE target = 'rt'::regclass) AS round2_receipts_match;

DROP VIEW rs2;
DROP TABLE rt2;
DROP TABLE rt, rs, gen_rows, gen_batches, violations, valid, held_back, fold;
DROP FUNCTION fold_mismatches(), snap(), payload(integer, integer), op_of(integer, integer);
DROP EXTENSION reconcile;
