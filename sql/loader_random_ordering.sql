-- Generated input for reconcile_batch over a timestamptz version column:
-- 150 random batches over 16 keys, versions drawn from six instants an
-- hour apart (a window that moves up every eight batches), each staged
-- row spelling its instant at a random UTC offset (so equal
-- versions have different text, and text order is not time order),
-- random payloads from a small set (so the same version with two payloads
-- happens, inside a batch and against the target's row), deletes, NULL
-- and malformed versions.  Every batch goes into two targets, one per
-- write path, and after every batch each target is compared with a model
-- written from the README's rule, independently of the implementation:
-- per key the target holds the highest version staged so far that was not
-- held back; a key is held back (conflict) iff some staged version has two
-- payloads, or equals the target's version with another payload; the
-- write is monotonic; a delete is a tombstone at its version.  The
-- session's TimeZone changes between batches.  Then the same over a pair
-- of version columns (binlog file text, offset bigint) compared in order.
-- Deterministic (setseed); only aggregates are printed.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;
SELECT setseed(0.23);

CREATE TABLE ot_auto (k integer PRIMARY KEY, val text, v timestamptz NOT NULL,
                      del boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE ot_general (LIKE ot_auto INCLUDING ALL);
SELECT reconcile_register('ot_auto', '{k}', 'v', 'del', 'h');
SELECT reconcile_register('ot_general', '{k}', 'v', 'del', 'h');
CREATE TABLE os (object_key text, source_row bigint, operation text, k text, val text, v text);

-- What the generator meant, per staged row: its instant (NULL: not a valid
-- version, a reject), operation and value.
CREATE TABLE gen (object_key text, source_row bigint, k integer, at timestamptz, op text, val text);
-- The model: per key, the version and payload the target should hold.
CREATE TABLE model (k integer PRIMARY KEY, at timestamptz, op text, val text);
CREATE TABLE violations (n integer, what text);

-- The instants: six, an hour apart.
CREATE FUNCTION instant(i integer) RETURNS timestamptz LANGUAGE sql IMMUTABLE AS
    $$ SELECT timestamptz '2026-07-01 00:00:00+00' + i * interval '1 hour' $$;
-- An instant spelled at a UTC offset of o hours (-9 .. +9).
CREATE FUNCTION spell(t timestamptz, o integer) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT to_char(t AT TIME ZONE 'UTC' + o * interval '1 hour', 'YYYY-MM-DD HH24:MI:SS')
           || CASE WHEN o < 0 THEN '-' ELSE '+' END || lpad(abs(o)::text, 2, '0') $$;

-- Keys held back by the batch of object obj, by the rule.
CREATE FUNCTION model_conflicting(obj text) RETURNS TABLE (k integer) LANGUAGE sql AS $$
    SELECT g.k FROM gen g WHERE g.object_key = obj AND g.at IS NOT NULL
     GROUP BY g.k, g.at HAVING count(DISTINCT (g.op, coalesce(g.val, '<null>'))) > 1
    UNION
    SELECT g.k FROM gen g JOIN model m ON m.k = g.k AND m.at = g.at
     WHERE g.object_key = obj AND (g.op, g.val) IS DISTINCT FROM (m.op, m.val) $$;

-- Rows where a target differs from the model.
CREATE FUNCTION mismatches(tgt text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    c bigint;
BEGIN
    EXECUTE format($q$
        SELECT count(*) FROM model m FULL JOIN %I t USING (k)
         WHERE m.k IS NULL OR t.k IS NULL OR t.v <> m.at OR t.del <> (m.op = 'DELETE')
            OR (NOT t.del AND t.val IS DISTINCT FROM m.val)$q$, tgt) INTO c;
    RETURN c;
END $$;

DO $$
DECLARE
    obj text;
    nrows integer;
    r record;
    held bigint;
    bad bigint;
    zones text[] := ARRAY['UTC', 'Asia/Kolkata', 'America/Los_Angeles', 'Pacific/Chatham'];
BEGIN
    FOR n IN 1..150 LOOP
        obj := 'o' || n;
        nrows := 1 + floor(random() * 8)::integer;
        INSERT INTO gen
        SELECT obj, i, 1 + floor(random() * 16)::integer,
               CASE WHEN random() < 0.06 THEN NULL ELSE instant(floor(random() * 6)::integer + n / 8) END,
               CASE WHEN random() < 0.15 THEN 'DELETE' ELSE 'UPSERT' END,
               CASE WHEN random() < 0.85 THEN 'p0' ELSE 'p1' END
          FROM generate_series(1, nrows) i;
        -- A DELETE's value is never read: staged NULL, modelled NULL.
        UPDATE gen SET val = NULL WHERE object_key = obj AND op = 'DELETE';
        INSERT INTO os
        SELECT g.object_key, g.source_row, g.op, g.k::text, g.val,
               CASE WHEN g.at IS NOT NULL THEN spell(g.at, floor(random() * 19)::integer - 9)
                    WHEN random() < 0.5 THEN NULL ELSE 'not a time' END
          FROM gen g WHERE g.object_key = obj;
        SELECT count(*) INTO held FROM gen g
         WHERE g.object_key = obj AND g.at IS NOT NULL AND g.k IN (SELECT * FROM model_conflicting(obj));
        SELECT count(*) INTO bad FROM gen g WHERE g.object_key = obj AND g.at IS NULL;

        PERFORM set_config('TimeZone', zones[1 + n % 4], false);
        FOR tgt IN 1..2 LOOP
            PERFORM set_config('reconcile.write_path', CASE tgt WHEN 1 THEN 'auto' ELSE 'general' END, false);
            SELECT * INTO r FROM reconcile_batch(CASE tgt WHEN 1 THEN 'ot_auto' ELSE 'ot_general' END::regclass,
                'os', jsonb_build_array(jsonb_build_object('object_key', obj, 'version_id', '1',
                                                           'content_hash', 'h' || n, 'rows', nrows)));
            IF r.conflicts <> held OR r.rejected <> bad THEN
                INSERT INTO violations VALUES (n, format('target %s: conflicts %s (model %s), rejected %s (model %s)',
                                                         tgt, r.conflicts, held, r.rejected, bad));
            END IF;
        END LOOP;

        -- Fold the batch into the model: keys not held move to their
        -- highest staged version if it is above the target's.
        INSERT INTO model AS m (k, at, op, val)
        SELECT DISTINCT ON (g.k) g.k, g.at, g.op, g.val FROM gen g
         WHERE g.object_key = obj AND g.at IS NOT NULL
           AND g.k NOT IN (SELECT * FROM model_conflicting(obj))
         ORDER BY g.k, g.at DESC
        ON CONFLICT (k) DO UPDATE SET at = excluded.at, op = excluded.op, val = excluded.val
         WHERE m.at < excluded.at;
        IF mismatches('ot_auto') > 0 OR mismatches('ot_general') > 0 THEN
            INSERT INTO violations VALUES (n, format('rows differ from the model: auto %s, general %s',
                                                     mismatches('ot_auto'), mismatches('ot_general')));
        END IF;
    END LOOP;
END $$;
RESET TimeZone;
RESET reconcile.write_path;

-- The generator reached the cases that matter.
SELECT count(*) AS batches, sum(rows) AS staged_rows FROM
    (SELECT object_key, count(*) AS rows FROM gen GROUP BY object_key) b;
SELECT count(*) FILTER (WHERE at IS NULL) AS bad_versions,
       count(*) FILTER (WHERE op = 'DELETE') AS deletes FROM gen;
SELECT sum(inserted) AS inserted, sum(updated) AS updated, sum(deleted) AS deleted, sum(unchanged) AS unchanged,
       sum(stale) AS stale, sum(duplicates) AS duplicates, sum(conflicts) AS conflicts, sum(rejected) AS rejected
  FROM reconcile.receipts WHERE target = 'ot_auto'::regclass;
-- Held rows keep their instant as text, written in UTC whatever the session's zone.
SELECT count(*) > 0 AS held, bool_and(ordering LIKE '%+00') AS all_utc
  FROM reconcile.conflicts WHERE target = 'ot_auto'::regclass;
-- No batch disagreed with the model, and the two paths end alike.
SELECT count(*) AS violations FROM violations;
SELECT * FROM violations ORDER BY n LIMIT 10;
SELECT count(*) AS rows_differ FROM ((TABLE ot_auto EXCEPT TABLE ot_general)
                                     UNION ALL (TABLE ot_general EXCEPT TABLE ot_auto)) d;


-- ---- the same over a pair: (binlog file, offset) compared in order ----
-- 150 batches over 16 keys; versions drawn from three files by four
-- offsets (a window of files that moves up every 30 batches), offsets
-- spelled with random leading zeros; a NULL file or offset, or an offset
-- that is not a number, is a reject.  The model compares (file, offset)
-- as a row, the file bytewise (the column's collation is "C").
CREATE TABLE op_auto (k integer PRIMARY KEY, val text, f text COLLATE "C" NOT NULL, p bigint NOT NULL,
                      del boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE op_general (LIKE op_auto INCLUDING ALL);
SELECT reconcile_register('op_auto', '{k}', version_columns => '{f,p}', deleted_column => 'del', hash_column => 'h');
SELECT reconcile_register('op_general', '{k}', version_columns => '{f,p}', deleted_column => 'del', hash_column => 'h');
CREATE TABLE ps (object_key text, source_row bigint, operation text, k text, val text, f text, p text);
CREATE TABLE gen2 (object_key text, source_row bigint, k integer, f text COLLATE "C", p bigint, op text, val text);
CREATE TABLE model2 (k integer PRIMARY KEY, f text COLLATE "C", p bigint, op text, val text);
DELETE FROM violations;

CREATE FUNCTION model2_conflicting(obj text) RETURNS TABLE (k integer) LANGUAGE sql AS $$
    SELECT g.k FROM gen2 g WHERE g.object_key = obj AND g.f IS NOT NULL
     GROUP BY g.k, g.f, g.p HAVING count(DISTINCT (g.op, coalesce(g.val, '<null>'))) > 1
    UNION
    SELECT g.k FROM gen2 g JOIN model2 m ON m.k = g.k AND m.f = g.f AND m.p = g.p
     WHERE g.object_key = obj AND (g.op, g.val) IS DISTINCT FROM (m.op, m.val) $$;
CREATE FUNCTION mismatches2(tgt text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    c bigint;
BEGIN
    EXECUTE format($q$
        SELECT count(*) FROM model2 m FULL JOIN %I t USING (k)
         WHERE m.k IS NULL OR t.k IS NULL OR t.f <> m.f OR t.p <> m.p OR t.del <> (m.op = 'DELETE')
            OR (NOT t.del AND t.val IS DISTINCT FROM m.val)$q$, tgt) INTO c;
    RETURN c;
END $$;

DO $$
DECLARE
    obj text;
    nrows integer;
    r record;
    held bigint;
    bad bigint;
BEGIN
    FOR n IN 1..150 LOOP
        obj := 'q' || n;
        nrows := 1 + floor(random() * 8)::integer;
        INSERT INTO gen2
        SELECT obj, i, 1 + floor(random() * 16)::integer,
               CASE WHEN random() < 0.06 THEN NULL
                    ELSE 'mysql-bin.' || lpad((n / 30 + floor(random() * 3))::integer::text, 6, '0') END,
               floor(random() * 4)::bigint,
               CASE WHEN random() < 0.15 THEN 'DELETE' ELSE 'UPSERT' END,
               CASE WHEN random() < 0.85 THEN 'p0' ELSE 'p1' END
          FROM generate_series(1, nrows) i;
        UPDATE gen2 SET val = NULL WHERE object_key = obj AND op = 'DELETE';
        -- A NULL file stands for a bad version: NULL file, NULL offset or an offset that is no number.
        INSERT INTO ps
        SELECT g.object_key, g.source_row, g.op, g.k::text, g.val,
               CASE WHEN g.f IS NOT NULL THEN g.f WHEN g.source_row % 3 = 0 THEN NULL ELSE 'mysql-bin.000001' END,
               CASE WHEN g.f IS NOT NULL THEN repeat('0', floor(random() * 3)::integer) || g.p
                    WHEN g.source_row % 3 = 1 THEN NULL WHEN g.source_row % 3 = 2 THEN 'x' || g.p
                    ELSE '1' END
          FROM gen2 g WHERE g.object_key = obj;
        SELECT count(*) INTO held FROM gen2 g
         WHERE g.object_key = obj AND g.f IS NOT NULL AND g.k IN (SELECT * FROM model2_conflicting(obj));
        SELECT count(*) INTO bad FROM gen2 g WHERE g.object_key = obj AND g.f IS NULL;

        FOR tgt IN 1..2 LOOP
            PERFORM set_config('reconcile.write_path', CASE tgt WHEN 1 THEN 'auto' ELSE 'general' END, false);
            SELECT * INTO r FROM reconcile_batch(CASE tgt WHEN 1 THEN 'op_auto' ELSE 'op_general' END::regclass,
                'ps', jsonb_build_array(jsonb_build_object('object_key', obj, 'version_id', '1',
                                                           'content_hash', 'h' || n, 'rows', nrows)));
            IF r.conflicts <> held OR r.rejected <> bad THEN
                INSERT INTO violations VALUES (n, format('pair target %s: conflicts %s (model %s), rejected %s (model %s)',
                                                         tgt, r.conflicts, held, r.rejected, bad));
            END IF;
        END LOOP;

        INSERT INTO model2 AS m (k, f, p, op, val)
        SELECT DISTINCT ON (g.k) g.k, g.f, g.p, g.op, g.val FROM gen2 g
         WHERE g.object_key = obj AND g.f IS NOT NULL
           AND g.k NOT IN (SELECT * FROM model2_conflicting(obj))
         ORDER BY g.k, g.f DESC, g.p DESC
        ON CONFLICT (k) DO UPDATE SET f = excluded.f, p = excluded.p, op = excluded.op, val = excluded.val
         WHERE (m.f, m.p) < (excluded.f, excluded.p);
        IF mismatches2('op_auto') > 0 OR mismatches2('op_general') > 0 THEN
            INSERT INTO violations VALUES (n, format('pair rows differ from the model: auto %s, general %s',
                                                     mismatches2('op_auto'), mismatches2('op_general')));
        END IF;
    END LOOP;
END $$;
RESET reconcile.write_path;

SELECT count(DISTINCT object_key) AS batches, count(*) AS staged_rows,
       count(*) FILTER (WHERE f IS NULL) AS bad_versions FROM gen2;
SELECT sum(inserted) AS inserted, sum(updated) AS updated, sum(deleted) AS deleted, sum(unchanged) AS unchanged,
       sum(stale) AS stale, sum(duplicates) AS duplicates, sum(conflicts) AS conflicts, sum(rejected) AS rejected
  FROM reconcile.receipts WHERE target = 'op_auto'::regclass;
-- Updates that move to a later file at a lower offset happened (a guard
-- on the offset alone, or a comparison of the text, would get them wrong).
SELECT count(*) > 0 AS later_file_lower_offset FROM gen2 a JOIN gen2 b
    ON a.k = b.k AND a.f < b.f AND a.p > b.p AND a.object_key < b.object_key;
SELECT count(*) AS violations FROM violations;
SELECT * FROM violations ORDER BY n LIMIT 10;
SELECT count(*) AS rows_differ FROM ((TABLE op_auto EXCEPT TABLE op_general)
                                     UNION ALL (TABLE op_general EXCEPT TABLE op_auto)) d;

DROP TABLE ot_auto, ot_general, os, gen, model, violations, op_auto, op_general, ps, gen2, model2;
DROP FUNCTION instant, spell, model_conflicting, mismatches, model2_conflicting, mismatches2;
DROP EXTENSION reconcile;
