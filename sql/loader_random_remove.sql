-- Random batches into a target under delete_mode 'remove' (rr), the same
-- batches into a twin under 'tombstone' (rt), with random purges of kept
-- deletes by version in both.  The model is the README's rule with a
-- removed key treated as a tombstone: per key the version and payload
-- (operation, value) that put it there; a staged version equal to the
-- key's with another payload, or two payloads at one staged version, is a
-- conflict; otherwise the highest staged version above the key's wins.  A
-- purge below version X forgets the model's DELETEs below X, so the key
-- takes any version again.  After every batch: rr's live rows are the
-- model's non-DELETE keys, its kept removals exactly the model's DELETE
-- keys (version and the documented hash), and rt holds both as rows.
-- The generator aims at the guard: late lower and equal versions of
-- removed keys, DELETEs of never-loaded keys, re-creations above a
-- removal, and conflicts at a removal's version.  Both write paths.
-- Deterministic (setseed); only aggregates are printed.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

CREATE TABLE rr (k integer PRIMARY KEY, val text, v bigint NOT NULL,
                 del boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('rr', '{k}', 'v', 'del', 'h', 'quarantine', options => '{"delete_mode": "remove"}');
CREATE TABLE rt (k integer PRIMARY KEY, val text, v bigint NOT NULL,
                 del boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('rt', '{k}', 'v', 'del', 'h', 'quarantine');
CREATE TABLE rs (object_key text, source_row bigint, operation text, k integer, val text, v bigint);
SELECT format('%s', removed_table) AS kept_table FROM reconcile.targets WHERE target = 'rr'::regclass \gset
CREATE VIEW kept AS SELECT * FROM :kept_table;

CREATE TABLE model (k integer PRIMARY KEY, v bigint, op text, val text);
CREATE TABLE violations (n integer, what text);
CREATE TABLE tally (n integer, status text, inserted bigint, updated bigint, deleted bigint,
                    unchanged bigint, stale bigint, conflicts bigint, purged bigint);

CREATE FUNCTION doc_hash(op text, val text) RETURNS bytea LANGUAGE sql IMMUTABLE AS
    $$ SELECT sha256(convert_to('[' || coalesce(to_json(val)::text, 'null') || ',' || (op = 'DELETE') || ']', 'UTF8')) $$;

-- The model's step for one batch's rows (all valid): returns the rows held back.
CREATE FUNCTION model_batch(obj text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    held bigint;
BEGIN
    CREATE TEMP TABLE IF NOT EXISTS conflicting (k integer);
    TRUNCATE conflicting;
    INSERT INTO conflicting
    SELECT s.k FROM rs AS s WHERE s.object_key = obj
     GROUP BY s.k, s.v HAVING count(DISTINCT (s.operation, coalesce(s.val, '<null>'))) > 1
    UNION
    SELECT s.k FROM rs AS s JOIN model AS m USING (k)
     WHERE s.object_key = obj AND s.v = m.v AND (s.operation, s.val) IS DISTINCT FROM (m.op, m.val);
    SELECT count(*) INTO held FROM rs WHERE object_key = obj AND k IN (SELECT k FROM conflicting);
    INSERT INTO model AS m (k, v, op, val)
    SELECT DISTINCT ON (s.k) s.k, s.v, s.operation, s.val FROM rs AS s
     WHERE s.object_key = obj AND s.k NOT IN (SELECT k FROM conflicting)
     ORDER BY s.k, s.v DESC
    ON CONFLICT (k) DO UPDATE SET v = excluded.v, op = excluded.op, val = excluded.val
     WHERE m.v < excluded.v;
    RETURN held;
END $$;

CREATE FUNCTION mismatches() RETURNS bigint LANGUAGE sql AS $$
    SELECT (SELECT count(*) FROM (SELECT * FROM model WHERE op <> 'DELETE') AS m FULL JOIN rr USING (k)
             WHERE m.k IS NULL OR rr.k IS NULL OR rr.v <> m.v OR rr.del OR rr.val IS DISTINCT FROM m.val
                OR rr.h IS DISTINCT FROM doc_hash(m.op, m.val))
         + (SELECT count(*) FROM (SELECT * FROM model WHERE op = 'DELETE') AS m FULL JOIN kept USING (k)
             WHERE m.k IS NULL OR kept.k IS NULL OR kept.v <> m.v OR kept.h IS DISTINCT FROM doc_hash(m.op, m.val))
         + (SELECT count(*) FROM model AS m FULL JOIN rt USING (k)
             WHERE m.k IS NULL OR rt.k IS NULL OR rt.v <> m.v OR rt.del <> (m.op = 'DELETE')
                OR (NOT rt.del AND rt.val IS DISTINCT FROM m.val) OR rt.h IS DISTINCT FROM doc_hash(m.op, m.val))
$$;

SELECT setseed(0.23);
DO $gen$
#variable_conflict use_column
DECLARE
    obj   text;
    sr    integer;
    k     integer;
    v     bigint;
    op    text;
    val   text;
    x     float8;
    mr    record;
    held  bigint;
    r     record;
    r2    record;
    cut   bigint;
    p1    bigint;
    p2    bigint;
    man   jsonb;
BEGIN
    FOR n IN 1..300 LOOP
        IF n % 17 = 0 THEN
            -- A purge below a random version, in both targets and the model.
            cut := 1 + floor(random() * (4 + n / 10));
            p1 := reconcile_purge_tombstones('rr', before_version => cut::text);
            p2 := reconcile_purge_tombstones('rt', before_version => cut::text);
            DELETE FROM model WHERE op = 'DELETE' AND model.v < cut;
            IF p1 <> p2 THEN
                INSERT INTO violations VALUES (n, format('purge: %s kept removals, %s tombstone rows', p1, p2));
            END IF;
            INSERT INTO tally VALUES (n, 'purge', NULL, NULL, NULL, NULL, NULL, NULL, p1);
            CONTINUE;
        END IF;
        obj := 'o' || n;
        sr := 0;
        FOR i IN 1 .. 1 + floor(random() * 6) LOOP
            sr := sr + 1;
            x := random();
            SELECT * INTO mr FROM model ORDER BY random() LIMIT 1;
            IF x < 0.35 AND mr.k IS NOT NULL AND mr.op = 'DELETE' THEN
                -- At a removed key: a late lower, the equal DELETE again, a
                -- conflicting row at its version, or a re-creation above it.
                k := mr.k;
                x := random();
                IF x < 0.35 THEN
                    v := greatest(mr.v - 1 - floor(random() * 3), 0); op := 'UPSERT'; val := 'late' || n;
                ELSIF x < 0.55 THEN
                    v := mr.v; op := 'DELETE'; val := NULL;
                ELSIF x < 0.70 THEN
                    v := mr.v; op := 'UPSERT'; val := 'same-version' || n;
                ELSE
                    v := mr.v + 1 + floor(random() * 2); op := 'UPSERT'; val := 'back' || n;
                END IF;
            ELSE
                k := 1 + floor(random() * 30);
                v := 1 + floor(random() * (4 + n / 10));
                op := CASE WHEN random() < 0.3 THEN 'DELETE' ELSE 'UPSERT' END;
                val := CASE WHEN op = 'UPSERT' THEN 'p' || k || '.' || v END;
            END IF;
            INSERT INTO rs VALUES (obj, sr, op, k, val, v);
            IF random() < 0.1 THEN
                -- An exact duplicate, or another payload at the same version.
                sr := sr + 1;
                INSERT INTO rs VALUES (obj, sr, op, k, CASE WHEN random() < 0.5 THEN val ELSE 'alt' || n END, v);
            END IF;
        END LOOP;
        man := jsonb_build_array(jsonb_build_object('object_key', obj, 'version_id', '1',
                                                    'content_hash', 'h' || n, 'rows', sr));
        IF random() < 0.5 THEN
            SET LOCAL reconcile.write_path = 'general';
        ELSE
            SET LOCAL reconcile.write_path = 'auto';
        END IF;
        SELECT * INTO r FROM reconcile_batch('rr', 'rs', man);
        SELECT * INTO r2 FROM reconcile_batch('rt', 'rs', man);
        held := model_batch(obj);
        IF r.conflicts <> held THEN
            INSERT INTO violations VALUES (n, format('%s conflicts, the model holds back %s', r.conflicts, held));
        END IF;
        -- The two modes count alike, but for a re-creation: inserted there, updated here.
        IF (r.inserted + r.updated, r.deleted, r.unchanged, r.stale, r.duplicates, r.conflicts, r.checksum)
           IS DISTINCT FROM (r2.inserted + r2.updated, r2.deleted, r2.unchanged, r2.stale, r2.duplicates, r2.conflicts, r2.checksum) THEN
            INSERT INTO violations VALUES (n, format('receipts differ: %s vs %s', row_to_json(r), row_to_json(r2)));
        END IF;
        INSERT INTO tally VALUES (n, r.status, r.inserted, r.updated, r.deleted, r.unchanged, r.stale, r.conflicts, NULL);
        IF mismatches() <> 0 THEN
            INSERT INTO violations VALUES (n, format('%s rows differ from the model', mismatches()));
        END IF;
        IF random() < 0.1 AND (SELECT status FROM reconcile_batch('rr', 'rs', man)) <> 'replayed' THEN
            INSERT INTO violations VALUES (n, 'replay was not a replay');
        END IF;
    END LOOP;
END
$gen$;

SELECT count(*) FILTER (WHERE status = 'committed') AS batches, count(*) FILTER (WHERE status = 'purge') AS purges,
       sum(purged) > 0 AS some_purged, sum(deleted) > 0 AS some_deletes, sum(stale) > 20 AS many_stale,
       sum(unchanged) > 0 AS some_unchanged, sum(conflicts) > 0 AS some_conflicts
  FROM tally;
-- Re-creations above a removal: inserted in rr where rt updated a tombstone.
SELECT (SELECT sum(inserted) FROM reconcile.receipts WHERE target = 'rr'::regclass)
     > (SELECT sum(inserted) FROM reconcile.receipts WHERE target = 'rt'::regclass) AS some_recreated;
SELECT count(*) FILTER (WHERE op = 'DELETE') > 0 AS removed_in_model, count(*) AS keys_in_model FROM model;
SELECT count(*) AS tombstone_rows_in_rr FROM rr WHERE del;
SELECT mismatches() AS final_mismatches;
SELECT count(*) AS invariant_violations FROM violations;
SELECT n, left(what, 300) AS what FROM violations ORDER BY n LIMIT 20;

DROP VIEW kept;
DROP FUNCTION mismatches(), model_batch(text), doc_hash(text, text);
DROP TABLE rr, rt, rs, model, violations, tally;
DROP EXTENSION reconcile;
