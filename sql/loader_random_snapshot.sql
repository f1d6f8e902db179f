-- Generated snapshot batches (issue 23, point 2) against a model written
-- from the documented rules (docs/loader.md, "Snapshot batches"), not from
-- the code.  Several hundred batches over a small key space in three
-- groups: plain batches, full snapshots and snapshots of one group or two,
-- at versions below, at and above the rows' own; extracts that miss many
-- rows (the guard), empty extracts, keys written since the extract at the
-- snapshot's version or above (they stay), keys held as conflicts (they
-- are staged, so not absent), staged DELETEs, a malformed row (a snapshot
-- accepts no reject), and replays under other options.  The rules:
--   * a batch's valid rows merge as for any batch (highest version wins if
--     above the target's; a key with two payloads at one version, in the
--     batch or against the target, is held);
--   * live = the scope's live rows before the batch; absent = those live
--     rows whose key the batch does not stage and whose version is below
--     the snapshot's; if absent > max_delete_share * live the batch fails
--     with 22000 and nothing changes; else the absent rows become
--     tombstones at the snapshot's version, keeping their payload, with the
--     hash of a DELETE of that payload, and the receipt says deleted_absent;
--   * a replay returns the stored receipt and changes nothing.
-- Deterministic (setseed); only aggregates are printed.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

CREATE TABLE st (k integer PRIMARY KEY, grp integer, val text, v bigint NOT NULL,
                 del boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('st', '{k}', 'v', 'del', 'h', 'quarantine');
CREATE TABLE ss (object_key text, source_row bigint, operation text,
                 k text, grp text, val text, v text);

CREATE TABLE gen_batches (n integer PRIMARY KEY, kind text, manifest jsonb, options jsonb,
                          objs text[], outcome text, batch_id text, deleted_absent bigint,
                          kept_newer bigint);
CREATE TABLE violations (n integer, what text);

-- Per key, what st should hold: its group and value (a tombstone keeps
-- those of its last live row), version and operation, and the payload its
-- hash is over (hgrp, hval): the staged row's, or for a snapshot's
-- tombstone the kept payload.
CREATE TABLE model (k integer PRIMARY KEY, grp integer, v bigint, op text, val text,
                    hgrp integer, hval text);

CREATE FUNCTION snap() RETURNS text LANGUAGE sql AS $$
    SELECT md5(coalesce(string_agg(format('%s|%s|%s|%s|%s|%s', k, grp, val, v, del, encode(h, 'hex')), ';' ORDER BY k), ''))
        || '/' || (SELECT count(*) FROM reconcile.receipts WHERE target = 'st'::regclass)
        || '/' || (SELECT count(*) FROM reconcile.conflicts WHERE target = 'st'::regclass)
      FROM st
$$;

-- The batch's valid rows (the generator stages a malformed row only where
-- it means one: a non-integer version).
CREATE FUNCTION batch_valid(objs text[])
RETURNS TABLE (k integer, grp integer, op text, val text, v bigint)
LANGUAGE sql AS $$
    SELECT s.k::integer, s.grp::integer, s.operation, s.val, s.v::bigint
      FROM ss AS s WHERE s.object_key = ANY (objs) AND s.v ~ '^[0-9]+$'
$$;
CREATE FUNCTION batch_malformed(objs text[]) RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM ss AS s WHERE s.object_key = ANY (objs) AND s.v !~ '^[0-9]+$'
$$;
CREATE FUNCTION batch_conflicting(objs text[]) RETURNS TABLE (k integer) LANGUAGE sql AS $$
    SELECT b.k FROM batch_valid(objs) AS b
     GROUP BY b.k, b.v HAVING count(DISTINCT (b.op, coalesce(b.val, '<null>'), b.grp)) > 1
    UNION
    SELECT b.k FROM batch_valid(objs) AS b JOIN model AS m ON m.k = b.k AND m.v = b.v
     WHERE (b.op, b.val, b.grp) IS DISTINCT FROM (m.op, m.hval, m.hgrp)
$$;

-- The model's scope predicate over its own rows: the same SQL text the
-- batch is given, over a relation with the target's column names.
CREATE FUNCTION model_absent(objs text[], version bigint, scope text)
RETURNS TABLE (k integer, live bigint) LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY EXECUTE format($q$
        WITH t AS (SELECT m.k, m.grp, m.v FROM model AS m WHERE m.op = 'UPSERT' AND (%s)),
             absent AS (SELECT t.k FROM t WHERE t.v < $1
                         AND t.k NOT IN (SELECT b.k FROM batch_valid($2) AS b))
        SELECT a.k, (SELECT count(*) FROM t) FROM absent AS a
        UNION ALL SELECT NULL::integer, (SELECT count(*) FROM t)$q$, coalesce(scope, 'true'))
      USING version, objs;
END
$$;

-- Fold a committed batch into the model: merge, then the snapshot's tombstones.
CREATE FUNCTION model_apply(objs text[], snapshot jsonb) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    absent integer[];
BEGIN
    IF snapshot IS NOT NULL THEN
        SELECT array_agg(a.k) FILTER (WHERE a.k IS NOT NULL) INTO absent
          FROM model_absent(objs, (snapshot->>'version')::bigint, snapshot->>'scope') AS a;
    END IF;
    INSERT INTO model AS m (k, grp, v, op, val, hgrp, hval)
    SELECT DISTINCT ON (b.k) b.k, b.grp, b.v, b.op, b.val, b.grp, b.val FROM batch_valid(objs) AS b
     WHERE b.k NOT IN (SELECT c.k FROM batch_conflicting(objs) AS c)
     ORDER BY b.k, b.v DESC
    ON CONFLICT (k) DO UPDATE SET grp = CASE WHEN excluded.op = 'DELETE' THEN m.grp ELSE excluded.grp END,
                                  val = CASE WHEN excluded.op = 'DELETE' THEN m.val ELSE excluded.val END,
                                  v = excluded.v, op = excluded.op, hgrp = excluded.hgrp, hval = excluded.hval
     WHERE m.v < excluded.v;
    -- A snapshot's tombstone: a DELETE of the row's last payload.
    UPDATE model SET v = (snapshot->>'version')::bigint, op = 'DELETE', hgrp = grp, hval = val
     WHERE k = ANY (absent);
    RETURN coalesce(array_length(absent, 1), 0);
END
$$;

-- Rows where st differs from the model; a tombstone's hash is that of a
-- DELETE of its kept value (NULL for a staged DELETE, the last payload
-- for a snapshot's).
CREATE FUNCTION model_mismatches() RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM model AS m FULL JOIN st AS t USING (k)
     WHERE m.k IS NULL OR t.k IS NULL OR t.v <> m.v OR t.del <> (m.op = 'DELETE')
        OR (NOT t.del AND (t.val, t.grp) IS DISTINCT FROM (m.val, m.grp))
        OR t.h IS DISTINCT FROM sha256(convert_to('[' || coalesce(to_json(m.hgrp::text)::text, 'null') || ','
                                                   || coalesce(to_json(m.hval)::text, 'null')
                                                   || ',' || (m.op = 'DELETE') || ']', 'UTF8'))
$$;

SELECT setseed(0.23);
DO $gen$
DECLARE
    n        integer;
    obj      text;
    objs     text[];
    m        jsonb;
    opts     jsonb;
    snapshot jsonb;
    scope    text;
    share    numeric;
    sv       bigint;
    k        integer;
    v        bigint;
    sr       bigint;
    x        float8;
    r        record;
    old      record;
    mr       record;
    before   text;
    expect   text;
    absent   bigint;
    live     bigint;
    kind     text;
    result   text;
    nrows    integer;
    newer    bigint;
BEGIN
    FOR n IN 1..400 LOOP
        x := random();
        IF n > 20 AND x < 0.08 THEN
            -- Replay an earlier committed manifest, under other options.
            SELECT * INTO old FROM gen_batches WHERE outcome = 'committed'
             ORDER BY random() LIMIT 1;
            before := snap();
            SELECT * INTO r FROM reconcile_batch('st', 'ss', old.manifest,
                options => jsonb_build_object('snapshot', jsonb_build_object('version', 1000, 'max_delete_share', 1)));
            IF r.status <> 'replayed' OR r.batch_id <> old.batch_id OR r.deleted_absent <> old.deleted_absent THEN
                INSERT INTO violations VALUES (n, format('replay returned %s', row_to_json(r)));
            END IF;
            IF snap() <> before THEN
                INSERT INTO violations VALUES (n, 'a replay changed something');
            END IF;
            INSERT INTO gen_batches VALUES (n, 'replay', old.manifest, NULL, old.objs, 'replayed', r.batch_id, r.deleted_absent, 0);
            CONTINUE;
        END IF;

        -- What kind of batch, at which version.
        sv := 2 + n / 4 + floor(random() * 6)::bigint - 3;
        x := random();
        IF n <= 15 OR x < 0.3 THEN
            kind := 'plain'; snapshot := NULL;
        ELSE
            x := random();
            scope := CASE WHEN x < 0.35 THEN NULL
                          WHEN x < 0.75 THEN format('grp = %s', floor(random() * 3)::int)
                          WHEN x < 0.9 THEN format('grp IN (%s, %s)', floor(random() * 3)::int, floor(random() * 3)::int)
                          ELSE '(grp % 2) = 0 AND k > 10' END;
            share := (ARRAY[0, 0.05, 0.1, 0.1, 0.25, 0.5, 1])[1 + floor(random() * 7)];
            kind := CASE WHEN scope IS NULL THEN 'full' ELSE 'scoped' END;
            snapshot := jsonb_build_object('version', sv) || CASE WHEN scope IS NULL THEN '{}'::jsonb
                                                                  ELSE jsonb_build_object('scope', scope) END
                        || CASE WHEN share = 0.1 AND random() < 0.5 THEN '{}'::jsonb   -- the default
                                ELSE jsonb_build_object('max_delete_share', share) END;
        END IF;

        obj := format('o/%s', n);
        objs := ARRAY[obj];
        sr := 0;
        x := random();
        -- A snapshot's extract: most of the scope's live keys (or few, or
        -- none), each at the snapshot's version or around it, new keys too.
        IF snapshot IS NOT NULL THEN
            FOR mr IN EXECUTE format('SELECT k, grp, v, op, val FROM model WHERE op = ''UPSERT'' AND (%s) ORDER BY k',
                                     coalesce(scope, 'true')) LOOP
                IF random() < (CASE WHEN x < 0.15 THEN 0 WHEN x < 0.35 THEN 0.5 ELSE 0.92 END) THEN
                    sr := sr + 1;
                    v := CASE WHEN random() < 0.7 THEN sv ELSE mr.v + floor(random() * 3)::int - 1 END;
                    IF random() < 0.08 THEN
                        -- the same version as the target's with another payload: held
                        INSERT INTO ss VALUES (obj, sr, 'UPSERT', mr.k, mr.grp, 'alt' || n, mr.v);
                    ELSIF random() < 0.05 THEN
                        INSERT INTO ss VALUES (obj, sr, 'DELETE', mr.k, NULL, NULL, greatest(v, mr.v + 1));
                    ELSE
                        INSERT INTO ss VALUES (obj, sr, 'UPSERT', mr.k, mr.grp, 'p' || mr.k || '.' || v, v);
                    END IF;
                END IF;
            END LOOP;
        END IF;
        -- Plain rows (and a snapshot's new keys): random keys and versions;
        -- some keys at or above the snapshot's version (written "since").
        nrows := floor(random() * CASE WHEN snapshot IS NULL THEN 12 ELSE 4 END);
        FOR i IN 1..nrows LOOP
            sr := sr + 1;
            k := 1 + floor(random() * 60);
            v := greatest(1, sv + floor(random() * 7)::int - 3);
            IF random() < 0.12 THEN
                INSERT INTO ss VALUES (obj, sr, 'DELETE', k, NULL, NULL, v);
            ELSE
                INSERT INTO ss VALUES (obj, sr, 'UPSERT', k, (k % 3), 'p' || k || '.' || v, v);
            END IF;
            IF random() < 0.05 THEN
                -- a conflict inside the batch
                sr := sr + 1;
                INSERT INTO ss VALUES (obj, sr, 'UPSERT', k, (k % 3), 'alt' || n || '.' || sr, v);
            END IF;
        END LOOP;
        IF random() < 0.04 THEN
            sr := sr + 1;
            INSERT INTO ss VALUES (obj, sr, 'UPSERT', '1', '1', 'bad', 'v?');
        END IF;
        m := jsonb_build_array(jsonb_build_object('object_key', obj, 'version_id', 'v' || n,
                                                  'content_hash', 'sha256:' || md5(obj), 'rows', sr));
        opts := CASE WHEN snapshot IS NULL THEN NULL ELSE jsonb_build_object('snapshot', snapshot) END;

        -- What the model says: refused for a reject or beyond the guard.
        expect := 'committed';
        absent := 0;
        newer := 0;
        IF snapshot IS NOT NULL THEN
            -- live rows of the scope the extract lacks, at or above its version: they stay
            EXECUTE format('SELECT count(*) FROM model AS t WHERE op = ''UPSERT'' AND (%s) AND v >= $1
                             AND k NOT IN (SELECT b.k FROM batch_valid($2) AS b)', coalesce(scope, 'true'))
               INTO newer USING sv, objs;
            SELECT count(a.k), max(a.live) INTO absent, live
              FROM model_absent(objs, sv, scope) AS a;
            IF batch_malformed(objs) > 0 THEN
                expect := 'refused 22000';
            ELSIF absent > coalesce((snapshot->>'max_delete_share')::numeric, 0.1) * live THEN
                expect := 'refused 22000';
            END IF;
        END IF;

        before := snap();
        BEGIN
            SELECT * INTO r FROM reconcile_batch('st', 'ss', m, options => opts);
            result := r.status;
        EXCEPTION WHEN OTHERS THEN
            result := 'refused ' || SQLSTATE;
            IF snap() <> before THEN
                INSERT INTO violations VALUES (n, 'a refused batch changed something');
            END IF;
            IF result <> expect THEN
                INSERT INTO violations VALUES (n, format('%s %s: %s, the model: %s (absent %s of %s live)',
                                                         kind, opts, SQLERRM, expect, absent, live));
            END IF;
        END;
        IF result = 'committed' THEN
            IF expect <> 'committed' THEN
                INSERT INTO violations VALUES (n, format('%s %s committed, the model: %s (absent %s of %s live)',
                                                         kind, opts, expect, absent, live));
            END IF;
            IF r.staged_rows <> sr OR r.staged_rows <> r.inserted + r.updated + r.deleted + r.unchanged + r.stale
                                                      + r.duplicates + r.conflicts + r.rejected THEN
                INSERT INTO violations VALUES (n, format('counts do not add up: %s', row_to_json(r)));
            END IF;
            absent := model_apply(objs, snapshot);
            IF r.deleted_absent <> absent THEN
                INSERT INTO violations VALUES (n, format('%s %s: deleted_absent %s, the model %s',
                                                         kind, opts, r.deleted_absent, absent));
            END IF;
            IF model_mismatches() <> 0 THEN
                INSERT INTO violations VALUES (n, format('%s %s: %s rows differ from the model',
                                                         kind, opts, model_mismatches()));
                -- start again from what the target holds, so one defect is counted once
                DELETE FROM model;
                INSERT INTO model SELECT t.k, t.grp, t.v, CASE WHEN t.del THEN 'DELETE' ELSE 'UPSERT' END, t.val,
                                         t.grp, t.val FROM st AS t;
            END IF;
        END IF;
        INSERT INTO gen_batches VALUES (n, kind, m, opts, objs, result,
                                        CASE WHEN result = 'committed' THEN r.batch_id END,
                                        CASE WHEN result = 'committed' THEN r.deleted_absent END,
                                        CASE WHEN result = 'committed' THEN newer END);
    END LOOP;
END
$gen$;

-- What was generated and what happened to it.
SELECT kind, count(*) AS batches, count(*) FILTER (WHERE outcome = 'committed') AS committed,
       count(*) FILTER (WHERE outcome = 'refused 22000') AS refused_22000,
       count(*) FILTER (WHERE outcome NOT IN ('committed', 'replayed', 'refused 22000')) AS other,
       sum(deleted_absent) > 0 AS deleted_some
  FROM gen_batches GROUP BY kind ORDER BY kind;
SELECT count(*) > 0 AS refused_for_a_reject
  FROM gen_batches WHERE outcome = 'refused 22000' AND EXISTS (SELECT FROM ss WHERE object_key = ANY (objs) AND v = 'v?');
SELECT sum(conflicts) > 0 AS some_conflicts, sum(deleted) > 0 AS some_deletes, sum(stale) > 0 AS some_stale,
       sum(deleted_absent) > 50 AS many_absent_deleted
  FROM reconcile.receipts WHERE target = 'st'::regclass;
-- Live rows absent from a committed snapshot's extract but kept, at or
-- above its version: the rule's other half was exercised.
SELECT sum(kept_newer) > 20 AS kept_newer_rows, count(*) FILTER (WHERE kept_newer > 0) > 10 AS in_batches
  FROM gen_batches WHERE kind IN ('full', 'scoped');
SELECT count(*) FILTER (WHERE op = 'UPSERT') > 0 AS live_keys, count(*) FILTER (WHERE op = 'DELETE') > 0 AS tombstones
  FROM model;
SELECT model_mismatches() AS mismatches;
SELECT count(*) AS invariant_violations FROM violations;
SELECT n, left(what, 300) AS what FROM violations ORDER BY n LIMIT 20;

DROP FUNCTION model_mismatches(), model_apply(text[], jsonb), model_absent(text[], bigint, text),
    batch_conflicting(text[]), batch_malformed(text[]), batch_valid(text[]), snap();
DROP TABLE st, ss, gen_batches, violations, model;
DROP EXTENSION reconcile;
