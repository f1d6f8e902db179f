-- Generated input for reconcile_batch: several hundred random batches
-- (a few thousand staged rows) over a small key space, with versions,
-- deletes, exact duplicates, same-version conflicts inside a batch and
-- against the target's row (often with a higher version of the key staged
-- as well), malformed values, several objects per batch, replays of
-- earlier manifests, old objects under new manifests, and refused manifests
-- (a wrong row count, a changed content hash).  Every manifest is loaded
-- into two targets, one per conflict policy ('quarantine' and 'abort').
-- After every batch the outcome is checked against a model written from
-- the README's rule, independently of the implementation: per key, the
-- target's version and payload, and the set of staged (version, payload);
-- the key is a conflict iff some staged version has two payloads, or
-- equals the target's version with another payload.  At the end each
-- target is compared with its model.  Then every manifest runs again into
-- a target with a two-column key (through a view), which must give the
-- same outcomes, receipts and rows.  Deterministic (setseed); only
-- aggregates are printed.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

CREATE TABLE rt (k integer PRIMARY KEY, val text, v bigint NOT NULL,
                 del boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('rt', '{k}', 'v', 'del', 'h', 'quarantine');
CREATE TABLE rta (k integer PRIMARY KEY, val text, v bigint NOT NULL,
                  del boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('rta', '{k}', 'v', 'del', 'h', 'abort');
-- Text columns, so that malformed values reach the extension.
CREATE TABLE rs (object_key text, source_row bigint, operation text,
                 k text, val text, v text);

-- What the generator meant: per staged row, whether it is malformed.
CREATE TABLE gen_rows (object_key text, source_row bigint, malformed boolean);
-- Every manifest tried, with its fate in rt (outcome) and in rta.
CREATE TABLE gen_batches (n integer PRIMARY KEY, kind text, manifest jsonb,
                          objects text[], outcome text, batch_id text, outcome_abort text);
CREATE TABLE violations (n integer, what text);

-- A target and its state, as one value to compare.
CREATE FUNCTION snap(tgt text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    rows text;
BEGIN
    EXECUTE format('SELECT md5(coalesce(string_agg(format(''%%s|%%s|%%s|%%s|%%s'', k, val, v, del, encode(h, ''hex'')), '';'' ORDER BY k), '''')) FROM %I', tgt)
       INTO rows;
    RETURN rows
        || '/' || (SELECT count(*) FROM reconcile.receipts WHERE target = tgt::regclass)
        || '/' || (SELECT count(*) FROM reconcile.batch_objects WHERE target = tgt::regclass)
        || '/' || (SELECT count(*) FROM reconcile.rejects WHERE target = tgt::regclass)
        || '/' || (SELECT count(*) FROM reconcile.conflicts WHERE target = tgt::regclass)
        || '/' || coalesce((SELECT "position" FROM reconcile.cursors WHERE target = tgt::regclass), '-');
END
$$;

-- The payload of a key at a version is a function of both, so that two
-- batches agree about it unless the generator means them not to ('alt'
-- payloads, flipped operations).
CREATE FUNCTION payload(k integer, v integer) RETURNS text LANGUAGE sql IMMUTABLE AS
    $$ SELECT 'p' || k || '.' || v $$;
CREATE FUNCTION op_of(k integer, v integer) RETURNS text LANGUAGE sql IMMUTABLE AS
    $$ SELECT CASE WHEN (k * 7 + v * 3) % 6 = 0 THEN 'DELETE' ELSE 'UPSERT' END $$;

-- ---- the model: the README's rule, in SQL ----

-- Per target and key, what the target should hold: the version and the
-- payload (operation and value) of the staged row that put it there.
CREATE TABLE model (tgt text, k integer, v bigint, op text, val text, PRIMARY KEY (tgt, k));
-- The rows each batch should hold back, and the keys whose conflict is
-- against the target at a version below the highest one staged (the case a
-- comparison of the winner alone misses).
CREATE TABLE model_held (tgt text, n integer, object_key text, source_row bigint);
CREATE TABLE model_masked (tgt text, n integer, k integer);

-- The valid rows of the objects: every staged row that casts, with a key,
-- a non-negative version and a known operation.  A payload is the pair
-- (operation, value): an UPSERT and a DELETE have different hashes.
CREATE FUNCTION batch_valid(objs text[])
RETURNS TABLE (object_key text, source_row bigint, op text, k integer, val text, v bigint)
LANGUAGE sql AS $$
    SELECT s.object_key, s.source_row, s.operation,
           CASE WHEN NOT g.malformed THEN s.k::integer END, s.val,
           CASE WHEN NOT g.malformed THEN s.v::bigint END
      FROM rs AS s JOIN gen_rows AS g USING (object_key, source_row)
     WHERE s.object_key = ANY (objs) AND NOT g.malformed
$$;

-- The keys of the objects that conflict with each other or with the model
-- of the target: some version of the key staged with two payloads, or a
-- staged version equal to the target's with another payload.
CREATE FUNCTION batch_conflicting(target text, objs text[]) RETURNS TABLE (k integer)
LANGUAGE sql AS $$
    SELECT b.k FROM batch_valid(objs) AS b
     GROUP BY b.k, b.v HAVING count(DISTINCT (b.op, coalesce(b.val, '<null>'))) > 1
    UNION
    SELECT b.k FROM batch_valid(objs) AS b
      JOIN model AS m ON m.tgt = target AND m.k = b.k AND m.v = b.v
     WHERE (b.op, b.val) IS DISTINCT FROM (m.op, m.val)
$$;

-- How many rows the batch holds back; with apply, also fold it into the
-- model: the rows of conflicting keys are held, every other key moves to
-- its highest staged version if that is above the target's.
CREATE FUNCTION model_batch(target text, bn integer, objs text[], apply boolean) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    held bigint;
BEGIN
    SELECT count(*) INTO held FROM batch_valid(objs) AS b
     WHERE b.k IN (SELECT c.k FROM batch_conflicting(target, objs) AS c);
    IF apply THEN
        INSERT INTO model_held
        SELECT target, bn, b.object_key, b.source_row FROM batch_valid(objs) AS b
         WHERE b.k IN (SELECT c.k FROM batch_conflicting(target, objs) AS c);
        INSERT INTO model_masked
        SELECT DISTINCT target, bn, b.k FROM batch_valid(objs) AS b
          JOIN model AS m ON m.tgt = target AND m.k = b.k AND m.v = b.v
         WHERE (b.op, b.val) IS DISTINCT FROM (m.op, m.val)
           AND EXISTS (SELECT FROM batch_valid(objs) AS h WHERE h.k = b.k AND h.v > b.v);
        INSERT INTO model AS m (tgt, k, v, op, val)
        SELECT DISTINCT ON (b.k) target, b.k, b.v, b.op, b.val FROM batch_valid(objs) AS b
         WHERE b.k NOT IN (SELECT c.k FROM batch_conflicting(target, objs) AS c)
         ORDER BY b.k, b.v DESC
        ON CONFLICT (tgt, k) DO UPDATE SET v = excluded.v, op = excluded.op, val = excluded.val
         WHERE m.v < excluded.v;
    END IF;
    RETURN held;
END
$$;

-- Rows where the target differs from its model: key, version, tombstone,
-- live value, and the documented payload hash of the staged row.
CREATE FUNCTION model_mismatches(target text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    c bigint;
BEGIN
    EXECUTE format($q$
        SELECT count(*) FROM (SELECT * FROM model WHERE tgt = %L) AS m FULL JOIN %I AS t USING (k)
         WHERE m.k IS NULL OR t.k IS NULL OR t.v <> m.v OR t.del <> (m.op = 'DELETE')
            OR (NOT t.del AND t.val IS DISTINCT FROM m.val)
            OR t.h IS DISTINCT FROM sha256(convert_to('[' || coalesce(to_json(m.val)::text, 'null')
                                                       || ',' || (m.op = 'DELETE') || ']', 'UTF8'))$q$,
        target, target) INTO c;
    RETURN c;
END
$$;

-- Load a manifest into one target and check the outcome against the model:
-- a committed batch holds back exactly as many rows as the model and
-- matches the generator's counts; under 'abort' a batch commits only if the
-- model has no conflict, and is refused with 23505 only if it has one; a
-- refused or replayed batch changes nothing.  expect_err: the refusal the
-- manifest itself earns (21000 in every target; 23000 where the old object
-- version was committed, which in rta it may not have been).  Returns the
-- outcome.
CREATE FUNCTION try_batch(tgt text, bn integer, m jsonb, objs text[], pos text, expect_err text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    abort boolean := (SELECT t.conflict_policy = 'abort' FROM reconcile.targets AS t
                       WHERE t.target = tgt::regclass);
    before text := snap(tgt);
    r record;
    staged bigint;
    malformed bigint;
    held bigint;
BEGIN
    BEGIN
        SELECT * INTO r FROM reconcile_batch(tgt::regclass, 'rs', m, 'feed', pos);
    EXCEPTION WHEN OTHERS THEN
        IF snap(tgt) <> before THEN
            INSERT INTO violations VALUES (bn, tgt || ': a refused batch changed something');
        END IF;
        IF SQLSTATE = '23505' AND abort AND expect_err IS DISTINCT FROM '21000' THEN
            IF model_batch(tgt, bn, objs, false) = 0 THEN
                INSERT INTO violations VALUES (bn, tgt || ': refused with 23505, the model has no conflict');
            END IF;
        ELSIF expect_err IS DISTINCT FROM SQLSTATE THEN
            INSERT INTO violations VALUES (bn, format('%s: unexpected error %s: %s', tgt, SQLSTATE, SQLERRM));
        END IF;
        RETURN 'refused ' || SQLSTATE;
    END;
    IF r.status = 'replayed' THEN
        IF snap(tgt) <> before THEN
            INSERT INTO violations VALUES (bn, tgt || ': replay changed something');
        END IF;
        RETURN 'replayed';
    END IF;
    IF r.status <> 'committed' THEN
        INSERT INTO violations VALUES (bn, tgt || ': status ' || r.status);
    END IF;
    IF expect_err = '21000' OR (expect_err = '23000' AND NOT abort) THEN
        INSERT INTO violations VALUES (bn, tgt || ': expected ' || expect_err || ', got ' || r.status);
    END IF;
    SELECT count(*), count(*) FILTER (WHERE g.malformed) INTO staged, malformed
      FROM gen_rows AS g WHERE g.object_key = ANY (objs);
    IF r.staged_rows <> staged
       OR r.staged_rows <> r.inserted + r.updated + r.deleted + r.unchanged + r.stale
                           + r.duplicates + r.conflicts + r.rejected THEN
        INSERT INTO violations VALUES (bn, format('%s: counts do not add up: %s', tgt, row_to_json(r)));
    END IF;
    IF r.rejected <> malformed THEN
        INSERT INTO violations VALUES (bn, format('%s: rejected %s, generated %s malformed', tgt, r.rejected, malformed));
    END IF;
    IF (SELECT sum((o->>'rows')::bigint) FROM jsonb_array_elements(reconcile_receipt_objects(r.target, r.batch_id)) AS o) <> staged THEN
        INSERT INTO violations VALUES (bn, tgt || ': per-object rows do not add up');
    END IF;
    held := model_batch(tgt, bn, objs, true);
    IF r.conflicts <> held THEN
        INSERT INTO violations VALUES (bn, format('%s: %s conflicts, the model holds back %s rows', tgt, r.conflicts, held));
    END IF;
    IF abort AND held > 0 THEN
        INSERT INTO violations VALUES (bn, tgt || ': committed under ''abort'' with conflicts in the model');
    END IF;
    RETURN 'committed';
END
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
    tr         record;
    before     text;
    old        record;
    expect_err text;
    result     text;
BEGIN
    FOR n IN 1..700 LOOP
        x := random();
        IF n > 20 AND x < 0.10 THEN
            -- Replay an earlier manifest committed into rt: the stored
            -- receipt, no change.  (Into rta it may be new: refused there
            -- before.)
            SELECT * INTO old FROM gen_batches WHERE outcome = 'committed'
             ORDER BY n OFFSET floor(random() * (SELECT count(*) FROM gen_batches WHERE outcome = 'committed')) LIMIT 1;
            before := snap('rt');
            SELECT * INTO r FROM reconcile_batch('rt', 'rs', old.manifest, 'feed', 'replay-' || n);
            IF r.status <> 'replayed' THEN
                INSERT INTO violations VALUES (n, 'replay status ' || r.status);
            END IF;
            IF r.batch_id <> old.batch_id THEN
                INSERT INTO violations VALUES (n, 'replay returned another batch id');
            END IF;
            IF snap('rt') <> before THEN
                INSERT INTO violations VALUES (n, 'replay changed something');
            END IF;
            INSERT INTO gen_batches VALUES (n, 'replay', old.manifest, old.objects, 'replayed', r.batch_id,
                                            try_batch('rta', n, old.manifest, old.objects, 'replay-' || n, NULL));
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
            -- A row at the version rt holds now: another payload (a conflict
            -- against the target), a flipped operation, or an exact repeat
            -- (no conflict); often with one or two higher versions of the key
            -- in the same object.  An 'alt' payload above the target's
            -- version loads, and later normal rows at that version then
            -- conflict with it.
            IF random() < 0.35 THEN
                SELECT * INTO tr FROM rt ORDER BY random() LIMIT 1;
                IF FOUND THEN
                    sr := sr + 1;
                    x := random();
                    IF x < 0.25 THEN
                        INSERT INTO rs VALUES (obj, sr, CASE WHEN tr.del THEN 'DELETE' ELSE 'UPSERT' END, tr.k,
                                               CASE WHEN tr.del THEN NULL ELSE tr.val END, tr.v);
                    ELSIF x < 0.40 THEN
                        INSERT INTO rs VALUES (obj, sr, CASE WHEN tr.del THEN 'UPSERT' ELSE 'DELETE' END, tr.k,
                                               CASE WHEN tr.del THEN 'alt' || n || '.' || sr END, tr.v);
                    ELSE
                        INSERT INTO rs VALUES (obj, sr, 'UPSERT', tr.k, 'alt' || n || '.' || sr, tr.v);
                    END IF;
                    INSERT INTO gen_rows VALUES (obj, sr, false);
                    FOR i IN 1 .. floor(random() * 3) LOOP
                        sr := sr + 1;
                        v := tr.v + i + floor(random() * 2);
                        INSERT INTO rs VALUES (obj, sr, op_of(tr.k, v), tr.k,
                                               CASE WHEN op_of(tr.k, v) = 'UPSERT'
                                                    THEN CASE WHEN random() < 0.2 THEN 'alt' || n || '.' || sr
                                                              ELSE payload(tr.k, v) END END, v);
                        INSERT INTO gen_rows VALUES (obj, sr, false);
                    END LOOP;
                END IF;
            END IF;
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

        result := try_batch('rt', n, m, objs, 'batch-' || n, expect_err);
        INSERT INTO gen_batches VALUES (n, 'new', m, objs, result,
                                        CASE WHEN result = 'committed' THEN reconcile_batch_id(m) END,
                                        try_batch('rta', n, m, objs, 'batch-' || n, expect_err));
        IF n % 50 = 0 AND model_mismatches('rt') + model_mismatches('rta') <> 0 THEN
            INSERT INTO violations VALUES (n, 'a target differs from its model');
        END IF;
        -- Replaying it at once changes nothing.
        IF result = 'committed' AND random() < 0.2 THEN
            before := snap('rt');
            IF (SELECT status FROM reconcile_batch('rt', 'rs', m, 'feed', 'batch-' || n)) <> 'replayed'
               OR snap('rt') <> before THEN
                INSERT INTO violations VALUES (n, 'immediate replay was not a no-op');
            END IF;
        END IF;
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
-- In the 'abort' target: the batches with conflicts are refused.
SELECT count(*) FILTER (WHERE outcome_abort = 'committed') AS abort_committed,
       count(*) FILTER (WHERE outcome_abort = 'refused 23505') AS abort_refused_23505,
       count(*) FILTER (WHERE outcome_abort LIKE 'refused%' AND outcome_abort <> 'refused 23505') AS abort_refused_other
  FROM gen_batches;
SELECT count(*) > 3000 AS thousands_of_staged_rows FROM rs;
SELECT sum(staged_rows) > 3000 AS thousands_loaded,
       sum(duplicates) > 0 AS some_duplicates, sum(conflicts) > 0 AS some_conflicts,
       sum(rejected) > 0 AS some_rejects, sum(stale) > 0 AS some_stale,
       sum(unchanged) > 0 AS some_unchanged, sum(deleted) > 0 AS some_deletes
  FROM reconcile.receipts WHERE target = 'rt'::regclass;
SELECT count(*) > 20 AS batches_with_old_objects
  FROM gen_batches WHERE outcome = 'committed'
   AND EXISTS (SELECT 1 FROM unnest(objects) AS o WHERE o NOT LIKE 'o/' || n || '/%');
-- Conflicts against the target at a version below the highest one staged:
-- the case a comparison of the winner alone misses, in many batches.
SELECT count(DISTINCT n) > 50 AS batches_with_masked_target_conflicts
  FROM model_masked WHERE tgt = 'rt';

-- One receipt per committed manifest, and its objects.
SELECT (SELECT count(*) FROM reconcile.receipts WHERE target = 'rt'::regclass)
     = (SELECT count(*) FROM gen_batches WHERE outcome = 'committed') AS one_receipt_per_manifest;
SELECT count(*) AS receipt_object_mismatches
  FROM (SELECT batch_id, object_key FROM gen_batches AS b, unnest(b.objects) AS object_key
         WHERE outcome = 'committed'
        EXCEPT
        SELECT batch_id, object_key FROM reconcile.batch_objects WHERE target = 'rt'::regclass) AS d;
SELECT "position" = (SELECT 'batch-' || max(n) FROM gen_batches WHERE outcome = 'committed') AS cursor_at_last_batch
  FROM reconcile.cursors WHERE target = 'rt'::regclass;

-- Each target against its model: keys, versions, tombstones, values and
-- the documented payload hash.
SELECT tgt, count(*) AS keys_in_model, count(*) FILTER (WHERE op = 'DELETE') AS tombstones_in_model
  FROM model GROUP BY tgt ORDER BY tgt;
SELECT model_mismatches('rt') AS rt_mismatches, model_mismatches('rta') AS rta_mismatches;

-- Live rows carry the documented payload hash.
SELECT count(*) AS hash_mismatches FROM rt
 WHERE NOT del AND h <> sha256(convert_to('[' || coalesce(to_json(val)::text, 'null') || ',false]', 'UTF8'));
-- The rows the model holds back are in reconcile.conflicts, and nothing
-- else is; the 'abort' target holds nothing back.
SELECT count(*) AS held_mismatches
  FROM ((SELECT b.batch_id, h.object_key, h.source_row FROM model_held AS h JOIN gen_batches AS b USING (n)
          WHERE h.tgt = 'rt'
         EXCEPT ALL
         SELECT batch_id, object_key, source_row FROM reconcile.conflicts WHERE target = 'rt'::regclass)
        UNION ALL
        (SELECT batch_id, object_key, source_row FROM reconcile.conflicts WHERE target = 'rt'::regclass
         EXCEPT ALL
         SELECT b.batch_id, h.object_key, h.source_row FROM model_held AS h JOIN gen_batches AS b USING (n)
          WHERE h.tgt = 'rt')) AS d;
SELECT count(*) AS abort_target_conflict_rows FROM reconcile.conflicts WHERE target = 'rta'::regclass;
SELECT (SELECT sum(conflicts) FROM reconcile.receipts WHERE target = 'rt'::regclass)
     = (SELECT count(*) FROM reconcile.conflicts WHERE target = 'rt'::regclass) AS conflict_counts_match;
-- Every malformed row of a committed batch has reject rows, and no valid one.
SELECT count(*) AS reject_mismatches
  FROM (SELECT b.batch_id, g.object_key, g.source_row FROM gen_batches AS b, unnest(b.objects) AS o,
               gen_rows AS g
         WHERE b.outcome = 'committed' AND g.object_key = o AND g.malformed
        EXCEPT
        SELECT batch_id, object_key, source_row FROM reconcile.rejects WHERE target = 'rt'::regclass) AS d;
SELECT count(*) AS rejects_of_valid_rows
  FROM reconcile.rejects AS j JOIN gen_rows AS g USING (object_key, source_row) WHERE NOT g.malformed;

SELECT count(*) AS invariant_violations FROM violations;
SELECT n, left(what, 300) AS what FROM violations ORDER BY n LIMIT 20;


-- Round 2: every manifest again, in the same order, into a target keyed by
-- two columns (k1 derived from k, k2 = k) through a view, under new
-- version_ids.  The key index
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
            SELECT * INTO r1 FROM reconcile.receipts WHERE batch_id = b.batch_id AND target = 'rt'::regclass;
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
DROP FUNCTION try_batch(text, integer, jsonb, text[], text, text), model_mismatches(text),
    model_batch(text, integer, text[], boolean), batch_conflicting(text, text[]),
    batch_valid(text[]), snap(text), payload(integer, integer), op_of(integer, integer);
DROP TABLE rt, rta, rs, gen_rows, gen_batches, violations, model, model_held, model_masked;
DROP EXTENSION reconcile;
