-- The load test's schema (bench/load/run.sh).  The payload and the
-- operation of a key at a version are functions of both, so that the fold
-- of everything committed is well defined: per key the highest staged
-- version, its payload and its tombstone state.
CREATE EXTENSION IF NOT EXISTS reconcile;
CREATE TABLE lt (k integer PRIMARY KEY, val text, v bigint NOT NULL,
                 del boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('lt', '{k}', 'v', 'del', 'h', 'quarantine');
-- One staging table for every client; a batch's rows stay after it commits
-- (they are rolled back with it when it fails).
CREATE TABLE ls (object_key text NOT NULL, source_row bigint NOT NULL, operation text,
                 k integer, val text, v bigint);
CREATE INDEX ON ls (object_key);
CREATE SEQUENCE obj_seq;
-- Every manifest a client committed (new or replayed), and every error.
CREATE TABLE bench_batches (n bigserial, seq bigint, client integer, kind text, manifest jsonb,
                            batch_id text, status text, staged_rows bigint, pos text);
CREATE TABLE bench_errors (client integer, kind text, sqlstate text, message text);

-- A pool of pre-staged manifests that any client may load: the same
-- manifest from several clients at once (filled below, once the functions
-- exist).
CREATE TABLE bench_pool (manifest jsonb);

CREATE FUNCTION payload(k integer, v bigint) RETURNS text LANGUAGE sql IMMUTABLE AS
    $$ SELECT 'p' || k || '.' || v $$;
CREATE FUNCTION op_of(k integer, v bigint) RETURNS text LANGUAGE sql IMMUTABLE AS
    $$ SELECT CASE WHEN (k * 31 + v) % 7 = 0 THEN 'DELETE' ELSE 'UPSERT' END $$;

-- One pgbench transaction: a new batch of 1 to 3 objects (sometimes with an
-- object of an earlier batch), a replay of an earlier manifest, or a
-- manifest of the pool (committed by whichever client comes first).
CREATE FUNCTION fill_pool(n integer, keys integer, versions integer) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    obj   text;
    nrows integer;
BEGIN
    FOR i IN 1..n LOOP
        obj := 'pool/' || i;
        nrows := floor(random() * 30)::integer;
        INSERT INTO ls
            SELECT obj, g, op_of(kk, vv), kk, CASE WHEN op_of(kk, vv) = 'UPSERT' THEN payload(kk, vv) END, vv
              FROM (SELECT g, 1 + floor(random() * keys)::integer AS kk,
                           1 + floor(random() * versions)::bigint AS vv
                      FROM generate_series(1, nrows) AS g) AS x;
        INSERT INTO bench_pool VALUES (jsonb_build_array(jsonb_build_object('object_key', obj,
            'version_id', '1', 'content_hash', 'sha256:' || md5(obj), 'rows', nrows)));
    END LOOP;
END $$;

CREATE FUNCTION bench_batch(client integer, keys integer, versions integer, replay_pct integer,
                            pool_pct integer)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    m     jsonb := '[]';
    seq   bigint;
    obj   text;
    nrows integer;
    kind  text := 'new';
    r     record;
    old   jsonb;
BEGIN
    IF random() * 100 < replay_pct THEN
        kind := 'replay';
        SELECT b.manifest INTO m FROM bench_batches AS b WHERE b.kind <> 'replay'
         ORDER BY random() LIMIT 1;
        IF m IS NULL THEN
            kind := 'new';
            m := '[]';
        END IF;
    ELSIF random() * 100 < pool_pct THEN
        kind := 'pool';
        SELECT p.manifest INTO m FROM bench_pool AS p ORDER BY random() LIMIT 1;
    END IF;
    BEGIN
        IF kind = 'new' THEN
            seq := nextval('obj_seq');
            FOR j IN 1..(1 + floor(random() * 3))::integer LOOP
                obj := format('c%s/%s/%s', client, seq, j);
                nrows := floor(random() * 30)::integer;
                INSERT INTO ls
                    SELECT obj, g, op_of(kk, vv), kk, CASE WHEN op_of(kk, vv) = 'UPSERT' THEN payload(kk, vv) END, vv
                      FROM (SELECT g, 1 + floor(random() * keys)::integer AS kk,
                                   1 + floor(random() * versions)::bigint AS vv
                              FROM generate_series(1, nrows) AS g) AS x;
                m := m || jsonb_build_array(jsonb_build_object('object_key', obj, 'version_id', '1',
                         'content_hash', 'sha256:' || md5(obj), 'rows', nrows));
            END LOOP;
            IF random() < 0.1 THEN
                -- an object of an earlier batch, under this new manifest
                SELECT e INTO old FROM bench_batches AS b, jsonb_array_elements(b.manifest) AS e
                 WHERE b.kind = 'new' ORDER BY random() LIMIT 1;
                IF old IS NOT NULL THEN
                    m := m || jsonb_build_array(old);
                    kind := 'new+old';
                END IF;
            END IF;
        END IF;
        SELECT * INTO r FROM reconcile_batch('lt', 'ls', m, 'client-' || client,
                                             coalesce(seq::text, kind));
        INSERT INTO bench_batches (seq, client, kind, manifest, batch_id, status, staged_rows, pos)
            VALUES (seq, client, kind, m, r.batch_id, r.status, r.staged_rows, coalesce(seq::text, kind));
        RETURN r.status;
    EXCEPTION WHEN OTHERS THEN
        INSERT INTO bench_errors VALUES (client, kind, SQLSTATE, SQLERRM);
        RETURN 'ERROR ' || SQLSTATE;
    END;
END $$;
