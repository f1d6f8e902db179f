-- Generated sparse batches (option "partial") checked against a model
-- written from the rules in docs/loader.md ("Sparse updates"), not from the
-- code: several hundred random batches over a small key space, each row
-- an UPSERT naming a random subset of the payload columns (or all of them,
-- NULL), or a whole DELETE; small value sets make exact repeats and
-- same-version rows whose merged payloads differ; a few rows name a column
-- that is not a payload column (rejects); some manifests are replayed.
-- Each batch is loaded into two targets, one written by the direct path
-- and one by the general path.  After every batch each target is compared
-- with the model row for row (version, tombstone, every column, the
-- documented hash of the merged payload), and the receipt's conflicts and
-- rejects with the model's.  The model applies the rules:
--   * a sparse UPSERT's absent columns take the key's state just below its
--     version: the target's row, with the batch's UPSERTs of versions above
--     the target's applied in version order (NULL where nothing holds the
--     key); rows at or below the target's version merge over the target's
--     row;
--   * its hash is over the merged payload; a key is held when one version
--     has two (operation, merged payload), or a row at the target's
--     version differs from the target's;
--   * otherwise the highest version wins if above the target's; a DELETE
--     winner keeps the state below it (its own staged payload on a key
--     nothing holds), its hash its staged row's.
-- Deterministic (setseed); only aggregates are printed.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

CREATE TABLE rsp (k integer PRIMARY KEY, a text, b text, c integer, v bigint NOT NULL,
                  del boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE rsp_g (LIKE rsp INCLUDING ALL);
SELECT reconcile_register('rsp', '{k}', 'v', 'del', 'h', 'quarantine', options => '{"partial": true}');
SELECT reconcile_register('rsp_g', '{k}', 'v', 'del', 'h', 'quarantine', options => '{"partial": true}');
CREATE TABLE rss (object_key text, source_row bigint, operation text, k text, a text, b text,
                  c text, v text, present_columns text[]);
-- What the generator meant: per staged row, whether it is a reject.
CREATE TABLE gen_rows (object_key text, source_row bigint, bad boolean);
CREATE TABLE gen_batches (n integer PRIMARY KEY, manifest jsonb, objects text[]);
CREATE TABLE violations (n integer, what text);

-- ---- the model ----
-- hp: the payload the hash covers; live: the columns the target holds.
CREATE TABLE model (k integer PRIMARY KEY, v bigint, del boolean, hp text[], live text[]);

CREATE FUNCTION doc_hash(p text[], del boolean) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$
    SELECT sha256(convert_to('[' || coalesce(to_json(p[1])::text, 'null') || ','
                             || coalesce(to_json(p[2])::text, 'null') || ','
                             || coalesce(to_json(p[3])::text, 'null') || ',' || del || ']', 'UTF8'))
$$;

-- Fold one batch into the model; returns the rows it holds back.
CREATE FUNCTION model_batch(objs text[]) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    cols constant text[] := '{a,b,c}';
    key integer;
    m record;
    r record;
    have_m boolean;
    base text[];
    have_base boolean;
    merged text[];
    kept text[];
    have_kept boolean;
    top_v bigint;
    held bigint := 0;
    conflict boolean;
    w record;
BEGIN
    CREATE TEMP TABLE IF NOT EXISTS mrows (k integer, v bigint, op text, staged text[],
                                           present text[], hp text[], ord bigint);
    TRUNCATE mrows;
    INSERT INTO mrows
    SELECT s.k::integer, s.v::bigint, s.operation, ARRAY[s.a, s.b, s.c], s.present_columns, NULL,
           row_number() OVER (ORDER BY s.object_key, s.source_row)
      FROM rss s JOIN gen_rows g USING (object_key, source_row)
     WHERE s.object_key = ANY (objs) AND NOT g.bad;
    FOR key IN SELECT DISTINCT mr.k FROM mrows mr ORDER BY 1 LOOP
        SELECT * INTO m FROM model WHERE model.k = key;
        have_m := FOUND;
        base := CASE WHEN have_m THEN m.live ELSE ARRAY[NULL, NULL, NULL]::text[] END;
        have_base := have_m;
        have_kept := false;
        SELECT max(mr.v) INTO top_v FROM mrows mr WHERE mr.k = key;
        FOR r IN SELECT DISTINCT mr.v FROM mrows mr WHERE mr.k = key ORDER BY 1 LOOP
            -- merge every row of this version over the state below it
            UPDATE mrows mr SET hp = CASE WHEN mr.op = 'DELETE' THEN mr.staged ELSE
                   ARRAY(SELECT CASE WHEN mr.present IS NULL OR cols[i] = ANY (mr.present)
                                     THEN mr.staged[i] ELSE base[i] END
                           FROM generate_series(1, 3) AS i ORDER BY i) END
             WHERE mr.k = key AND mr.v = r.v;
            IF r.v = top_v AND have_base AND (NOT have_m OR r.v > m.v)
               AND EXISTS (SELECT FROM mrows mr WHERE mr.k = key AND mr.v = r.v AND mr.op = 'DELETE') THEN
                kept := base;
                have_kept := true;
            END IF;
            -- the state moves only above the target's version
            IF NOT have_m OR r.v > m.v THEN
                SELECT mr.hp INTO merged FROM mrows mr
                 WHERE mr.k = key AND mr.v = r.v AND mr.op = 'UPSERT' ORDER BY mr.ord LIMIT 1;
                IF FOUND THEN
                    base := merged; have_base := true;
                ELSIF NOT have_base THEN
                    SELECT mr.staged INTO base FROM mrows mr
                     WHERE mr.k = key AND mr.v = r.v ORDER BY mr.ord LIMIT 1;
                    have_base := true;
                END IF;
            END IF;
        END LOOP;
        conflict := EXISTS (SELECT FROM mrows mr WHERE mr.k = key GROUP BY mr.v
                             HAVING count(DISTINCT (mr.op, mr.hp::text)) > 1)
                 OR (have_m AND EXISTS (SELECT FROM mrows mr WHERE mr.k = key AND mr.v = m.v
                                          AND ((mr.op = 'DELETE') <> m.del
                                               OR mr.hp IS DISTINCT FROM m.hp)));
        IF conflict THEN
            held := held + (SELECT count(*) FROM mrows mr WHERE mr.k = key);
            CONTINUE;
        END IF;
        SELECT * INTO w FROM mrows mr WHERE mr.k = key ORDER BY mr.v DESC, mr.ord LIMIT 1;
        IF NOT have_m OR w.v > m.v THEN
            INSERT INTO model VALUES (key, w.v, w.op = 'DELETE', w.hp,
                                      CASE WHEN w.op = 'UPSERT' THEN w.hp
                                           WHEN have_kept THEN kept ELSE w.staged END)
            ON CONFLICT (k) DO UPDATE SET v = excluded.v, del = excluded.del, hp = excluded.hp,
                                          live = excluded.live;
        END IF;
    END LOOP;
    RETURN held;
END
$$;

CREATE FUNCTION model_mismatches(tgt text) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    c bigint;
BEGIN
    EXECUTE format($q$
        SELECT count(*) FROM model m FULL JOIN %I t USING (k)
         WHERE m.k IS NULL OR t.k IS NULL OR t.v <> m.v OR t.del <> m.del
            OR ARRAY[t.a, t.b, t.c::text] IS DISTINCT FROM m.live
            OR t.h IS DISTINCT FROM doc_hash(m.hp, m.del)$q$, tgt) INTO c;
    RETURN c;
END
$$;

SELECT setseed(0.23);
DO $gen$
DECLARE
    n integer;
    obj text;
    objs text[];
    man jsonb;
    nrows integer;
    sr bigint;
    k integer;
    v integer;
    op text;
    present text[];
    bad boolean;
    x float8;
    step integer;
    ck integer;
    r record;
    rg record;
    held bigint;
    nbad bigint;
    old record;
    snap text;
BEGIN
    FOR n IN 1..400 LOOP
        IF n > 10 AND random() < 0.05 THEN
            -- a replay: the stored receipt, nothing changes
            SELECT * INTO old FROM gen_batches ORDER BY random() LIMIT 1;
            SELECT string_agg(format('%s', t), ';' ORDER BY t.k) INTO snap FROM rsp t;
            SELECT * INTO r FROM reconcile_batch('rsp', 'rss', old.manifest);
            IF r.status <> 'replayed' OR snap IS DISTINCT FROM
               (SELECT string_agg(format('%s', t), ';' ORDER BY t.k) FROM rsp t) THEN
                INSERT INTO violations VALUES (n, 'replay changed something or was not replayed');
            END IF;
            CONTINUE;
        END IF;
        objs := '{}';
        man := '[]';
        FOR j IN 1..1 + floor(random() * 2)::integer LOOP
            obj := format('o/%s/%s', n, j);
            nrows := 1 + floor(random() * 8);
            sr := 0;
            FOR i IN 1..nrows LOOP
                sr := sr + 1;
                k := 1 + floor(random() * 12);
                v := 1 + floor(random() * (3 + n / 20));
                op := CASE WHEN random() < 0.2 THEN 'DELETE' ELSE 'UPSERT' END;
                x := random();
                present := CASE WHEN x < 0.25 THEN NULL
                    ELSE ARRAY(SELECT col FROM unnest('{a,b,c}'::text[]) AS col
                                WHERE random() < 0.45 ORDER BY random()) END;
                bad := false;
                IF op = 'UPSERT' AND random() < 0.03 THEN
                    present := present || '{zz}'::text[]; bad := true;
                END IF;
                INSERT INTO rss VALUES (obj, sr, op, k::text,
                    (ARRAY['a1', 'a2', NULL])[1 + floor(random() * 3)],
                    (ARRAY['b1', 'b2', NULL])[1 + floor(random() * 3)],
                    (ARRAY['1', '2', NULL])[1 + floor(random() * 3)], v::text, present);
                INSERT INTO gen_rows VALUES (obj, sr, bad);
                IF random() < 0.08 THEN
                    -- an exact repeat of the row (another source row)
                    INSERT INTO rss SELECT s.object_key, sr + 1, s.operation, s.k, s.a, s.b, s.c,
                                           s.v, s.present_columns
                                      FROM rss s WHERE s.object_key = obj AND s.source_row = sr;
                    sr := sr + 1;
                    nrows := nrows + 1;
                    INSERT INTO gen_rows VALUES (obj, sr, bad);
                END IF;
            END LOOP;
            IF random() < 0.3 THEN
                -- A chain of versions of one key just above the target's:
                -- a sparse UPSERT, then a DELETE or another sparse UPSERT,
                -- sometimes a third: what the cumulative merge and the
                -- tombstone's kept payload are for.
                k := 1 + floor(random() * 12);
                ck := k;
                v := coalesce((SELECT m.v FROM model m WHERE m.k = ck), 0);
                FOR step IN 1..2 + floor(random() * 2)::integer LOOP
                    sr := sr + 1;
                    nrows := nrows + 1;
                    op := CASE WHEN step = 2 AND random() < 0.5 THEN 'DELETE' ELSE 'UPSERT' END;
                    INSERT INTO rss VALUES (obj, sr, op, k::text,
                        'c' || n || '.' || step, 'd' || n || '.' || step, step::text, (v + step)::text,
                        ARRAY(SELECT col FROM unnest('{a,b,c}'::text[]) AS col
                               WHERE random() < 0.5 ORDER BY random()));
                    INSERT INTO gen_rows VALUES (obj, sr, false);
                END LOOP;
            END IF;
            IF random() < 0.3 THEN
                -- A change event sent again: a key's row at its own version,
                -- carrying some of its columns as the target holds them
                -- (unchanged), or one of them changed (a conflict).
                SELECT * INTO old FROM model m WHERE NOT m.del ORDER BY random() LIMIT 1;
                IF FOUND THEN
                    sr := sr + 1;
                    nrows := nrows + 1;
                    INSERT INTO rss VALUES (obj, sr, 'UPSERT', old.k::text, old.live[1],
                        CASE WHEN random() < 0.2 THEN 'changed' ELSE old.live[2] END, old.live[3],
                        old.v::text, ARRAY(SELECT col FROM unnest('{a,b,c}'::text[]) AS col
                                            WHERE random() < 0.5 ORDER BY random()));
                    INSERT INTO gen_rows VALUES (obj, sr, false);
                END IF;
            END IF;
            objs := objs || obj;
            man := man || jsonb_build_array(jsonb_build_object('object_key', obj, 'version_id', '1',
                                                               'content_hash', 'h' || obj, 'rows', nrows));
        END LOOP;
        INSERT INTO gen_batches VALUES (n, man, objs);
        SELECT * INTO r FROM reconcile_batch('rsp', 'rss', man);
        SET LOCAL reconcile.write_path = 'general';
        SELECT * INTO rg FROM reconcile_batch('rsp_g', 'rss', man);
        SET LOCAL reconcile.write_path = 'auto';
        held := model_batch(objs);
        SELECT count(*) INTO nbad FROM gen_rows g WHERE g.object_key = ANY (objs) AND g.bad;
        IF r.conflicts <> held OR rg.conflicts <> held THEN
            INSERT INTO violations VALUES (n, format('conflicts %s / %s, the model holds %s', r.conflicts, rg.conflicts, held));
        END IF;
        IF r.rejected <> nbad OR rg.rejected <> nbad THEN
            INSERT INTO violations VALUES (n, format('rejected %s, generated %s', r.rejected, nbad));
        END IF;
        IF r.staged_rows <> r.inserted + r.updated + r.deleted + r.unchanged + r.stale
                            + r.duplicates + r.conflicts + r.rejected THEN
            INSERT INTO violations VALUES (n, 'counts do not add up');
        END IF;
        IF model_mismatches('rsp') > 0 THEN
            INSERT INTO violations VALUES (n, format('rsp: %s rows differ from the model', model_mismatches('rsp')));
        END IF;
        IF model_mismatches('rsp_g') > 0 THEN
            INSERT INTO violations VALUES (n, format('rsp_g: %s rows differ from the model', model_mismatches('rsp_g')));
        END IF;
    END LOOP;
END
$gen$;

-- What the run exercised, and what it found.
SELECT count(*) > 300 AS batches,
       (SELECT count(*) FROM rss) > 1500 AS staged_rows,
       (SELECT count(*) FROM rss WHERE present_columns IS NOT NULL AND operation = 'UPSERT') > 900 AS sparse_rows,
       (SELECT sum(conflicts) FROM reconcile.receipts WHERE target = 'rsp'::regclass) > 50 AS conflicts,
       (SELECT sum(duplicates) FROM reconcile.receipts WHERE target = 'rsp'::regclass) > 10 AS duplicates,
       (SELECT sum(unchanged) FROM reconcile.receipts WHERE target = 'rsp'::regclass) > 10 AS unchanged,
       (SELECT sum(deleted) FROM reconcile.receipts WHERE target = 'rsp'::regclass) > 10 AS deleted,
       (SELECT sum(rejected) FROM reconcile.receipts WHERE target = 'rsp'::regclass) > 10 AS rejected
  FROM gen_batches;
SELECT count(*) AS violations FROM violations;
SELECT * FROM violations ORDER BY n LIMIT 10;
SELECT model_mismatches('rsp') AS rsp_mismatches, model_mismatches('rsp_g') AS general_mismatches,
       (SELECT count(*) FROM rsp) = (SELECT count(*) FROM model) AS same_keys;

DROP FUNCTION model_batch(text[]), model_mismatches(text), doc_hash(text[], boolean);
DROP TABLE rsp, rsp_g, rss, gen_rows, gen_batches, violations, model;
DROP TABLE IF EXISTS mrows;
DROP EXTENSION reconcile;
