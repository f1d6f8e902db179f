-- bench/loader/setup.sql: the loader benchmark's data, in database reconcile_bench.
--
-- psql variables: T (target rows), N (staged rows), objects (staged objects),
-- run_id (manifest version_id), seed (setseed argument).
--
-- Builds, repeatably (fixed setseed, no parallel plans for random()):
--   target_base   the target's rows, loaded once by reconcile_batch so the
--                 payload hashes are exactly reconcile's; every contender
--                 starts from a fresh copy of it (restore.sql);
--   stage         N staged rows as text, as files arrive, in objects;
--   bench_manifest the batch's manifest;
--   plan_mix      how many staged rows of each kind the batch holds.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO';
SELECT setseed(:seed);

-- Payload text forms of key k at version v.  Every row of a key and version
-- carries the same payload, except the deliberate conflicts, so two rows
-- of one key and version are exact duplicates unless meant otherwise.
CREATE FUNCTION bench_tv(k bigint) RETURNS bigint IMMUTABLE LANGUAGE sql
    AS $$ SELECT 2 + k % 3 $$;               -- the target's version of key k
CREATE FUNCTION bench_name(k bigint, v bigint) RETURNS text IMMUTABLE LANGUAGE sql
    AS $$ SELECT CASE WHEN k % 97 = 0 THEN NULL
                      WHEN v % 2 = 0 THEN 'Customer ' || k || ' Ltd'
                      ELSE 'Müller "' || k || '" GmbH' END $$;
CREATE FUNCTION bench_amount(k bigint, v bigint) RETURNS text IMMUTABLE LANGUAGE sql
    AS $$ SELECT round(((k * 37 + v * 101) % 1000000) / 100.0, 2)::text $$;
CREATE FUNCTION bench_ts(k bigint, v bigint) RETURNS text IMMUTABLE LANGUAGE sql
    AS $$ SELECT to_char(timestamp '2024-01-01' + (k % 100000) * interval '1 minute'
                         + v * interval '1 day', 'YYYY-MM-DD"T"HH24:MI:SS"Z"') $$;
CREATE FUNCTION bench_qty(k bigint, v bigint) RETURNS text IMMUTABLE LANGUAGE sql
    AS $$ SELECT CASE WHEN k % 89 = 0 THEN NULL ELSE ((k + v) % 50)::text END $$;
-- The j-th distinct existing key (a permutation of 1..T while j < T) and
-- how many times the permutation wrapped (only when the batch needs more
-- existing keys than the target has).
CREATE FUNCTION bench_key(j bigint, t bigint) RETURNS bigint IMMUTABLE LANGUAGE sql
    AS $$ SELECT (j * 1000003) % t + 1 $$;
CREATE FUNCTION bench_wrap(j bigint, t bigint) RETURNS bigint IMMUTABLE LANGUAGE sql
    AS $$ SELECT j / t $$;

CREATE TABLE customer (
    customer_id  bigint,
    name         text,
    amount       numeric,
    updated_at   timestamptz,
    qty          integer,
    version      bigint NOT NULL,
    is_deleted   boolean NOT NULL DEFAULT false,
    payload_hash bytea
);
ALTER TABLE customer ADD PRIMARY KEY (customer_id);
SELECT reconcile_register(target => 'customer', key_columns => '{customer_id}',
    version_column => 'version', deleted_column => 'is_deleted',
    hash_column => 'payload_hash', conflict_policy => 'quarantine');

CREATE TABLE stage (
    object_key  text,
    source_row  bigint,
    operation   text,
    customer_id text,
    version     text,
    name        text,
    amount      text,
    updated_at  text,
    qty         text
);
CREATE TABLE init_stage (LIKE stage);

-- The target: keys 1..T at version 2..4, every 100th key a tombstone.
INSERT INTO init_stage
SELECT format('init/part-%s.csv', lpad((k % 10 + 1)::text, 4, '0')), k,
       CASE WHEN k % 100 = 0 THEN 'DELETE' ELSE 'UPSERT' END,
       k::text, bench_tv(k)::text, bench_name(k, bench_tv(k)), bench_amount(k, bench_tv(k)),
       bench_ts(k, bench_tv(k)), bench_qty(k, bench_tv(k))
FROM generate_series(1, :T::bigint) k;

CREATE TABLE bench_manifest (name text PRIMARY KEY, manifest jsonb NOT NULL);
INSERT INTO bench_manifest
SELECT 'init', jsonb_agg(jsonb_build_object('object_key', object_key, 'version_id', :'run_id',
           'content_hash', 'sha256:' || encode(sha256(convert_to(object_key || :'run_id', 'UTF8')), 'hex'),
           'rows', n) ORDER BY object_key COLLATE "C")
FROM (SELECT object_key, count(*) AS n FROM init_stage GROUP BY object_key) o;

CREATE TABLE init_receipt AS
SELECT * FROM reconcile_batch('customer', 'init_stage',
    (SELECT manifest FROM bench_manifest WHERE name = 'init'));
DO $$
BEGIN
    IF (SELECT inserted + deleted FROM init_receipt) <> (SELECT count(*) FROM init_stage) THEN
        RAISE EXCEPTION 'the initial load did not insert every row: %',
            (SELECT row_to_json(r) FROM init_receipt r);
    END IF;
END $$;
CREATE TABLE target_base AS SELECT * FROM customer ORDER BY customer_id;
SELECT reconcile_unregister('customer');
DROP TABLE customer, init_stage;

-- The batch.  Row counts per kind; updates take what the others leave.
SELECT :N::bigint * 30 / 100 AS n_new, :N::bigint * 5 / 100 AS n_stale,
       :N::bigint * 5 / 100 AS n_del, :N::bigint * 5 / 100 AS n_dup,
       :N::bigint / 2000 AS n_confk, :N::bigint * 5 / 1000 AS n_bad,
       :N::bigint / 1000 AS n_unch, :N::bigint / 2000 AS n_tconf \gset
SELECT :N::bigint - :n_new - :n_stale - :n_del - :n_dup - 2 * :n_confk - :n_bad
       - :n_unch - :n_tconf AS n_upd \gset
-- Where each kind's distinct existing keys start in the permutation.
SELECT :n_upd::bigint AS j_del, :n_upd::bigint + :n_del AS j_stale,
       :n_upd::bigint + :n_del + :n_stale AS j_conf,
       :n_upd::bigint + :n_del + :n_stale + :n_confk AS j_bad,
       :n_upd::bigint + :n_del + :n_stale + :n_confk + :n_bad AS j_unch,
       :n_upd::bigint + :n_del + :n_stale + :n_confk + :n_bad + :n_unch AS j_tconf \gset

CREATE TABLE plan AS
SELECT row_number() OVER () AS gid, cat, k, op,
       CASE WHEN cat = 'malformed' AND i % 4 = 0 THEN 'x' || v ELSE v::text END AS version,
       CASE WHEN cat IN ('conflict', 'target-conflict') AND twin
            THEN coalesce(bench_name(k, v), 'Customer') || ' (other)'
            ELSE bench_name(k, v) END AS name,
       CASE WHEN cat = 'malformed' AND i % 4 = 1 THEN 'abc' ELSE bench_amount(k, v) END AS amount,
       CASE WHEN cat = 'malformed' AND i % 4 = 2 THEN 'n/a' ELSE bench_ts(k, v) END AS updated_at,
       CASE WHEN cat = 'malformed' AND i % 4 = 3 THEN '12.5' ELSE bench_qty(k, v) END AS qty
FROM (
    -- updates of existing keys at a higher version (re-creating tombstones too)
    SELECT 'update' AS cat, i, bench_key(i - 1, :T) AS k,
           bench_tv(bench_key(i - 1, :T)) + 1 + bench_wrap(i - 1, :T) AS v,
           'UPSERT' AS op, false AS twin
    FROM generate_series(1, :n_upd::bigint) i
    UNION ALL
    -- new keys
    SELECT 'new', i, :T + i, 1, 'UPSERT', false
    FROM generate_series(1, :n_new::bigint) i
    UNION ALL
    -- stale: odd ones are an update's key at the version it supersedes,
    -- even ones a key of their own at a version below the target's
    SELECT 'stale', i, k, v, 'UPSERT', false
    FROM generate_series(1, :n_stale::bigint) i,
         LATERAL (SELECT CASE WHEN i % 2 = 1 THEN bench_key(i - 1, :T)
                              ELSE bench_key(:j_stale + i - 1, :T) END AS k,
                         CASE WHEN i % 2 = 1 THEN bench_wrap(i - 1, :T)
                              ELSE -1 - bench_wrap(:j_stale + i - 1, :T) END AS dv) x,
         LATERAL (SELECT greatest(bench_tv(x.k) + x.dv, 0) AS v) y
    UNION ALL
    -- deletes at a higher version; every 20th of a key the target never had
    SELECT 'delete', i,
           CASE WHEN i % 20 = 0 THEN :T + :n_new + i ELSE bench_key(:j_del + i - 1, :T) END,
           CASE WHEN i % 20 = 0 THEN 1
                ELSE bench_tv(bench_key(:j_del + i - 1, :T)) + 1 + bench_wrap(:j_del + i - 1, :T) END,
           'DELETE', false
    FROM generate_series(1, :n_del::bigint) i
    UNION ALL
    -- same-version conflicts in the batch: two payloads at one key and version
    SELECT 'conflict', i, bench_key(:j_conf + i - 1, :T),
           bench_tv(bench_key(:j_conf + i - 1, :T)) + 1 + bench_wrap(:j_conf + i - 1, :T),
           'UPSERT', twin
    FROM generate_series(1, :n_confk::bigint) i, (VALUES (false), (true)) tw(twin)
    UNION ALL
    -- malformed values: version 'x..', amount 'abc', updated_at 'n/a', qty '12.5'
    SELECT 'malformed', i, bench_key(:j_bad + i - 1, :T),
           bench_tv(bench_key(:j_bad + i - 1, :T)) + 1 + bench_wrap(:j_bad + i - 1, :T),
           'UPSERT', false
    FROM generate_series(1, :n_bad::bigint) i
    UNION ALL
    -- the target's own row again (a tombstoned key makes it a conflict)
    SELECT 'unchanged', i, bench_key(:j_unch + i - 1, :T),
           bench_tv(bench_key(:j_unch + i - 1, :T)) + bench_wrap(:j_unch + i - 1, :T),
           'UPSERT', false
    FROM generate_series(1, :n_unch::bigint) i
    UNION ALL
    -- another payload at the target's version: a conflict against the target
    SELECT 'target-conflict', i, bench_key(:j_tconf + i - 1, :T),
           bench_tv(bench_key(:j_tconf + i - 1, :T)) + bench_wrap(:j_tconf + i - 1, :T),
           'UPSERT', true
    FROM generate_series(1, :n_tconf::bigint) i
) s;

-- Exact duplicates: copies of rows picked at random.
CREATE TABLE dup_pick AS
SELECT d, (floor(random() * (SELECT count(*) FROM plan)) + 1)::bigint AS gid
FROM generate_series(1, :n_dup::bigint) d;
CREATE TABLE plan_all AS
SELECT gid AS rid, cat, k, op, version, name, amount, updated_at, qty FROM plan
UNION ALL
SELECT (SELECT count(*) FROM plan) + d.d, 'duplicate', p.k, p.op, p.version, p.name,
       p.amount, p.updated_at, p.qty
FROM dup_pick d JOIN plan p USING (gid)
ORDER BY 1;

CREATE TABLE plan_mix AS
SELECT cat, count(*) AS rows FROM plan_all GROUP BY cat;

-- Source order: the rows shuffled, dealt round-robin into the objects.
CREATE TABLE plan_pos AS
SELECT rid, row_number() OVER (ORDER BY random(), rid) AS pos FROM plan_all ORDER BY rid;
INSERT INTO stage
SELECT format('bench/part-%s.csv', lpad(((pos - 1) % :objects + 1)::text, 4, '0')),
       (pos - 1) / :objects + 1, p.op, p.k::text, p.version, p.name, p.amount, p.updated_at, p.qty
FROM plan_all p JOIN plan_pos USING (rid)
ORDER BY (pos - 1) % :objects, pos;
DROP TABLE plan, dup_pick, plan_pos, plan_all;

INSERT INTO bench_manifest
SELECT 'batch', jsonb_agg(jsonb_build_object('object_key', object_key, 'version_id', :'run_id',
           'content_hash', 'sha256:' || encode(sha256(convert_to(object_key || :'run_id', 'UTF8')), 'hex'),
           'rows', n) ORDER BY object_key COLLATE "C")
FROM (SELECT object_key, count(*) AS n FROM stage GROUP BY object_key) o;

-- What the hand-written pipeline records (reconcile has its own tables).
CREATE TABLE bench_rejects (object_key text, source_row bigint, column_name text,
                            raw_value text, reason text);
CREATE TABLE bench_conflicts (key jsonb, version bigint, object_key text, source_row bigint,
                              staged_hash bytea, existing_hash bytea);
CREATE TABLE bench_receipts (batch text PRIMARY KEY, staged_rows bigint, inserted bigint,
                             updated bigint, deleted bigint, unchanged bigint, stale bigint,
                             duplicates bigint, conflicts bigint, rejected bigint,
                             committed_at timestamptz);
VACUUM (FREEZE, ANALYZE) target_base, stage, bench_manifest;
