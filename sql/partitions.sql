-- Partitioned targets and sources (declarative hash, range and list
-- partitioning, one and two levels, partitions that are postgres_fdw foreign
-- tables): loads by both write paths and diffs give what the same data in
-- plain tables gives, and what cannot work is refused before anything is
-- written.
CREATE EXTENSION reconcile;
CREATE EXTENSION postgres_fdw;
SET client_min_messages = warning;
DO $$
BEGIN
    EXECUTE format('CREATE SERVER part_loopback FOREIGN DATA WRAPPER postgres_fdw'
                   ' OPTIONS (dbname %L, port %L, host %L)',
                   current_database(), current_setting('port'),
                   split_part(current_setting('unix_socket_directories'), ',', 1));
END
$$;
CREATE USER MAPPING FOR CURRENT_USER SERVER part_loopback;

-- Load staged relation staged into target as batch version_id (object 'o',
-- every staged row) with the given write path; the receipt's counts, or the
-- error.
CREATE FUNCTION load(target regclass, staged regclass, path text, version_id text)
RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    r reconcile.receipt;
    n bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM %s', staged) INTO n;
    PERFORM set_config('reconcile.write_path', path, true);
    SELECT * INTO r FROM reconcile_batch(target, staged, jsonb_build_array(jsonb_build_object(
        'object_key', 'o', 'version_id', version_id, 'content_hash', 'h' || version_id, 'rows', n)));
    RETURN format('%s: %s inserted, %s updated, %s deleted, %s unchanged, %s stale, %s conflicts, %s rejected',
                  r.status, r.inserted, r.updated, r.deleted,
                  r.unchanged, r.stale, r.conflicts, r.rejected);
EXCEPTION WHEN OTHERS THEN
    RETURN format('ERROR %s: %s', SQLSTATE, SQLERRM);
END $$;

-- Three batches: new keys; updates, a tombstone, a stale row, an unchanged
-- row and a conflict (same version, other payload); and a replay of the first.
CREATE TABLE stage1 (object_key text, source_row bigint, operation text,
    region text, id int, version bigint, n int);
INSERT INTO stage1 SELECT 'o', i, 'UPSERT', CASE WHEN i % 3 = 0 THEN 'us' ELSE 'eu' END, i, 1, i * 10
FROM generate_series(1, 12) AS i;
CREATE TABLE stage2 (LIKE stage1);
INSERT INTO stage2 VALUES
    ('o', 1, 'UPSERT', 'eu', 1, 2, 11),        -- updated
    ('o', 2, 'UPSERT', 'eu', 2, 2, 21),        -- updated
    ('o', 3, 'DELETE', 'us', 3, 2, NULL),      -- tombstone
    ('o', 4, 'UPSERT', 'eu', 4, 0, 99),        -- stale
    ('o', 5, 'UPSERT', 'eu', 5, 1, 50),        -- unchanged
    ('o', 6, 'UPSERT', 'us', 6, 1, 66),        -- conflict
    ('o', 7, 'UPSERT', 'eu', 13, 1, 130),      -- new
    ('o', 8, 'UPSERT', 'us', 15, 1, 150);      -- new

-- A target per shape and write path, loaded with the same batches; the
-- same receipts and the same rows everywhere, each row in its partition.
CREATE FUNCTION make_target(name text, shape text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF shape = 'plain' THEN
        EXECUTE format('CREATE TABLE %I (region text, id int, n int, version bigint NOT NULL,'
                       ' deleted boolean NOT NULL DEFAULT false, hash bytea, PRIMARY KEY (region, id))', name);
    ELSIF shape = 'hash' THEN
        EXECUTE format('CREATE TABLE %I (region text, id int, n int, version bigint NOT NULL,'
                       ' deleted boolean NOT NULL DEFAULT false, hash bytea, PRIMARY KEY (region, id))'
                       ' PARTITION BY HASH (id)', name);
        FOR r IN 0..2 LOOP
            EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES WITH (MODULUS 3, REMAINDER %s)',
                           name || '_' || r, name, r);
        END LOOP;
    ELSIF shape = 'range' THEN
        EXECUTE format('CREATE TABLE %I (region text, id int, n int, version bigint NOT NULL,'
                       ' deleted boolean NOT NULL DEFAULT false, hash bytea, PRIMARY KEY (region, id))'
                       ' PARTITION BY RANGE (id)', name);
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (MINVALUE) TO (6)', name || '_low', name);
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (6) TO (12)', name || '_mid', name);
        EXECUTE format('CREATE TABLE %I PARTITION OF %I DEFAULT', name || '_rest', name);
    ELSE
        -- two levels: by region (list), then eu by id (hash) and us by id
        -- (range), one partition with its columns in another order
        EXECUTE format('CREATE TABLE %I (region text, id int, n int, version bigint NOT NULL,'
                       ' deleted boolean NOT NULL DEFAULT false, hash bytea, PRIMARY KEY (region, id))'
                       ' PARTITION BY LIST (region)', name);
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES IN (''eu'') PARTITION BY HASH (id)',
                       name || '_eu', name);
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES WITH (MODULUS 2, REMAINDER 0)',
                       name || '_eu_0', name || '_eu');
        EXECUTE format('CREATE TABLE %I (hash bytea, n int, deleted boolean NOT NULL DEFAULT false,'
                       ' version bigint NOT NULL, id int NOT NULL, region text NOT NULL)', name || '_eu_1');
        EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES WITH (MODULUS 2, REMAINDER 1)',
                       name || '_eu', name || '_eu_1');
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES IN (''us'') PARTITION BY RANGE (id)',
                       name || '_us', name);
        EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (MINVALUE) TO (MAXVALUE)',
                       name || '_us_all', name || '_us');
    END IF;
    PERFORM reconcile_register(name::regclass, ARRAY['region', 'id'], 'version', 'deleted', 'hash');
END $$;

CREATE TABLE loads (target text, path text, batch text, receipt text);
DO $$
DECLARE
    shape text;
    path text;
BEGIN
    FOREACH shape IN ARRAY ARRAY['plain', 'hash', 'range', 'twolevel'] LOOP
        FOREACH path IN ARRAY ARRAY['auto', 'general'] LOOP
            PERFORM make_target(shape || '_' || path, shape);
            INSERT INTO loads VALUES
                (shape, path, 'b1', load((shape || '_' || path)::regclass, 'stage1', path, '1')),
                (shape, path, 'b2', load((shape || '_' || path)::regclass, 'stage2', path, '2')),
                (shape, path, 'b1 again', load((shape || '_' || path)::regclass, 'stage1', path, '1'));
        END LOOP;
    END LOOP;
END $$;
-- The receipts, once per batch when every shape and path agrees.
SELECT batch, receipt, count(*) AS targets FROM loads GROUP BY 1, 2 ORDER BY 1, 2;
-- The rows: the same in every target as in the plain one loaded by the
-- direct path (no row differs, none is missing).
CREATE FUNCTION rows_of(t regclass) RETURNS TABLE (region text, id int, n int, version bigint, deleted boolean, hash bytea)
LANGUAGE plpgsql AS $$
BEGIN
    RETURN QUERY EXECUTE format('SELECT region, id, n, version, deleted, hash FROM %s', t);
END $$;
SELECT t.target, (SELECT count(*) FROM rows_of(t.target::regclass)) AS rows,
       (SELECT count(*) FROM (SELECT * FROM rows_of(t.target::regclass)
                              EXCEPT SELECT * FROM rows_of('plain_auto')) AS d) AS differing
FROM (SELECT DISTINCT target || '_' || path AS target FROM loads) AS t ORDER BY 1;
SELECT region, id, n, version, deleted FROM plain_auto ORDER BY id;
-- Each row in the partition its key routes it to.
SELECT tableoid::regclass AS partition, array_agg(id ORDER BY id) AS ids FROM twolevel_general GROUP BY 1 ORDER BY 1;
SELECT tableoid::regclass AS partition, array_agg(id ORDER BY id) AS ids FROM range_auto GROUP BY 1 ORDER BY 1;
SELECT key, version FROM reconcile.conflicts WHERE target = 'twolevel_auto'::regclass;

-- A partition registered on its own, by both paths: keys that belong to
-- another partition are refused as an INSERT into the partition would be,
-- and nothing of the batch is written.
CREATE TABLE hp (region text, id int, n int, version bigint NOT NULL,
    deleted boolean NOT NULL DEFAULT false, hash bytea, PRIMARY KEY (region, id)) PARTITION BY HASH (id);
CREATE TABLE hp_0 PARTITION OF hp FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE hp_1 PARTITION OF hp FOR VALUES WITH (MODULUS 2, REMAINDER 1);
SELECT reconcile_register('hp_0', ARRAY['region', 'id'], 'version', 'deleted', 'hash');
SELECT load('hp_0', 'stage1', 'auto', '1');
SELECT load('hp_0', 'stage1', 'general', '1');
SELECT count(*) AS written FROM hp;
CREATE TABLE stage_hp_0 AS SELECT s.* FROM stage1 s
WHERE satisfies_hash_partition('hp'::regclass, 2, 0, s.id);
SELECT load('hp_0', 'stage_hp_0', 'auto', '1');
SELECT tableoid::regclass AS partition, count(*) FROM hp GROUP BY 1;
-- A partition that is itself partitioned (the first level of a two-level
-- tree) registered on its own: its keys go to its leaves, keys of its
-- siblings are refused.
SELECT make_target('mid', 'twolevel');
SELECT reconcile_register('mid_eu', ARRAY['region', 'id'], 'version', 'deleted', 'hash');
SELECT load('mid_eu', 'stage1', 'general', '1');
CREATE TABLE stage_eu AS SELECT * FROM stage1 WHERE region = 'eu';
SELECT load('mid_eu', 'stage_eu', 'auto', '1');
SELECT tableoid::regclass AS partition, count(*) FROM mid GROUP BY 1 ORDER BY 1;

---------------------------------------------------------------------------
-- Partitions that are foreign tables.
CREATE TABLE fp_store (region text, id int, n int, version bigint NOT NULL,
    deleted boolean NOT NULL DEFAULT false, hash bytea);
CREATE TABLE fp (region text, id int, n int, version bigint NOT NULL,
    deleted boolean NOT NULL DEFAULT false, hash bytea) PARTITION BY RANGE (id);
CREATE TABLE fp_local PARTITION OF fp FOR VALUES FROM (MINVALUE) TO (10);
CREATE FOREIGN TABLE fp_remote PARTITION OF fp FOR VALUES FROM (10) TO (MAXVALUE)
    SERVER part_loopback OPTIONS (table_name 'fp_store');
-- A partitioned target with a foreign partition cannot have the unique key
-- index reconcile keeps one row per key with (PostgreSQL refuses it), so
-- registration refuses it and says why; at any depth.
CREATE UNIQUE INDEX ON fp (region, id);
SELECT reconcile_register('fp', ARRAY['region', 'id'], 'version', 'deleted', 'hash');
CREATE TABLE fp2 (region text, id int, n int, version bigint NOT NULL,
    deleted boolean NOT NULL DEFAULT false, hash bytea) PARTITION BY LIST (region);
CREATE TABLE fp2_eu PARTITION OF fp2 FOR VALUES IN ('eu') PARTITION BY RANGE (id);
CREATE FOREIGN TABLE fp2_eu_remote PARTITION OF fp2_eu FOR VALUES FROM (MINVALUE) TO (MAXVALUE)
    SERVER part_loopback OPTIONS (table_name 'fp_store');
SELECT reconcile_register('fp2', ARRAY['region', 'id'], 'version', 'deleted', 'hash');
-- The foreign partition itself is no target; its local sibling is one.
SELECT reconcile_register('fp_remote', ARRAY['region', 'id'], 'version', 'deleted', 'hash');
CREATE UNIQUE INDEX ON fp_local (region, id);
SELECT reconcile_register('fp_local', ARRAY['region', 'id'], 'version', 'deleted', 'hash');
CREATE TABLE stage_low AS SELECT * FROM stage1 WHERE id < 10;
SELECT load('fp_local', 'stage_low', 'auto', '1');
SELECT load('fp_local', 'stage1', 'general', '1');
SELECT count(*) AS local_rows, (SELECT count(*) FROM fp_store) AS remote_rows FROM fp_local;
-- A registered partitioned target cannot gain a foreign partition later:
-- PostgreSQL refuses it because of the unique index.
CREATE FOREIGN TABLE range_general_remote PARTITION OF range_general FOR VALUES FROM (1000) TO (2000)
    SERVER part_loopback OPTIONS (table_name 'fp_store');

-- Partitioned staged relations (the source of a load): hash partitioned,
-- and partitioned with a postgres_fdw partition; the same as a plain stage.
CREATE TABLE pstage (LIKE stage1) PARTITION BY HASH (id);
CREATE TABLE pstage_0 PARTITION OF pstage FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE pstage_1 PARTITION OF pstage FOR VALUES WITH (MODULUS 2, REMAINDER 1);
INSERT INTO pstage SELECT * FROM stage1;
CREATE TABLE fstage_store (LIKE stage1);
CREATE TABLE fstage (LIKE stage1) PARTITION BY RANGE (id);
CREATE TABLE fstage_local PARTITION OF fstage FOR VALUES FROM (MINVALUE) TO (7);
CREATE FOREIGN TABLE fstage_remote PARTITION OF fstage FOR VALUES FROM (7) TO (MAXVALUE)
    SERVER part_loopback OPTIONS (table_name 'fstage_store');
INSERT INTO fstage SELECT * FROM stage1;
SELECT tableoid::regclass AS partition, count(*) FROM fstage GROUP BY 1 ORDER BY 1;
SELECT make_target('from_pstage', 'hash'), make_target('from_fstage', 'twolevel');
SELECT load('from_pstage', 'pstage', 'auto', '1'), load('from_fstage', 'fstage', 'general', '1');
SELECT load('from_pstage', 'stage2', 'auto', '2'), load('from_fstage', 'stage2', 'general', '2');
SELECT (SELECT count(*) FROM (SELECT * FROM rows_of('from_pstage') EXCEPT SELECT * FROM rows_of('plain_auto')) AS d) AS pstage_differing,
       (SELECT count(*) FROM (SELECT * FROM rows_of('from_fstage') EXCEPT SELECT * FROM rows_of('plain_auto')) AS d) AS fstage_differing;

---------------------------------------------------------------------------
-- Diffs: partitioned sides give the findings the same data in plain
-- tables gives, through reconcile_diff, reconcile_diff_summary and a job.
-- The source has no unique key: a duplicate and a NULL key.
CREATE TABLE pd_src_plain (id int, code text, amount numeric);
INSERT INTO pd_src_plain SELECT i, 'c' || i, i * 1.5 FROM generate_series(1, 40) AS i;
INSERT INTO pd_src_plain VALUES (7, 'c7', 10.5), (NULL, 'null key', 0);
CREATE TABLE pd_tgt_plain (id int PRIMARY KEY, code text, amount numeric);
INSERT INTO pd_tgt_plain SELECT i, 'c' || i, i * 1.5 FROM generate_series(3, 45) AS i;
UPDATE pd_tgt_plain SET amount = amount + 1 WHERE id IN (10, 20, 30);
UPDATE pd_tgt_plain SET code = 'changed' WHERE id = 25;

-- hash-partitioned source, range then hash partitioned target
CREATE TABLE pd_src_part (id int, code text, amount numeric) PARTITION BY HASH (id);
CREATE TABLE pd_src_part_0 PARTITION OF pd_src_part FOR VALUES WITH (MODULUS 3, REMAINDER 0);
CREATE TABLE pd_src_part_1 PARTITION OF pd_src_part FOR VALUES WITH (MODULUS 3, REMAINDER 1);
CREATE TABLE pd_src_part_2 PARTITION OF pd_src_part FOR VALUES WITH (MODULUS 3, REMAINDER 2);
INSERT INTO pd_src_part SELECT * FROM pd_src_plain;
CREATE TABLE pd_tgt_part (id int PRIMARY KEY, code text, amount numeric) PARTITION BY RANGE (id);
CREATE TABLE pd_tgt_part_low PARTITION OF pd_tgt_part FOR VALUES FROM (MINVALUE) TO (20) PARTITION BY HASH (id);
CREATE TABLE pd_tgt_part_low_0 PARTITION OF pd_tgt_part_low FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE pd_tgt_part_low_1 PARTITION OF pd_tgt_part_low FOR VALUES WITH (MODULUS 2, REMAINDER 1);
CREATE TABLE pd_tgt_part_high PARTITION OF pd_tgt_part DEFAULT;
INSERT INTO pd_tgt_part SELECT * FROM pd_tgt_plain;

-- partitioned tables whose partitions are all postgres_fdw foreign tables
CREATE TABLE pd_src_store_low AS SELECT * FROM pd_src_plain WHERE id < 20 OR id IS NULL;
CREATE TABLE pd_src_store_high AS SELECT * FROM pd_src_plain WHERE id >= 20;
CREATE TABLE pd_src_fdw (id int, code text, amount numeric) PARTITION BY RANGE (id);
CREATE FOREIGN TABLE pd_src_fdw_low PARTITION OF pd_src_fdw FOR VALUES FROM (MINVALUE) TO (20)
    SERVER part_loopback OPTIONS (table_name 'pd_src_store_low');
CREATE FOREIGN TABLE pd_src_fdw_high PARTITION OF pd_src_fdw DEFAULT
    SERVER part_loopback OPTIONS (table_name 'pd_src_store_high');
CREATE TABLE pd_tgt_store_a AS SELECT * FROM pd_tgt_plain WHERE id % 2 = 0;
CREATE TABLE pd_tgt_store_b AS SELECT * FROM pd_tgt_plain WHERE id % 2 = 1;
CREATE TABLE pd_tgt_fdw (id int, code text, amount numeric) PARTITION BY LIST ((id % 2));
CREATE FOREIGN TABLE pd_tgt_fdw_a PARTITION OF pd_tgt_fdw FOR VALUES IN (0)
    SERVER part_loopback OPTIONS (table_name 'pd_tgt_store_a');
CREATE FOREIGN TABLE pd_tgt_fdw_b PARTITION OF pd_tgt_fdw FOR VALUES IN (1)
    SERVER part_loopback OPTIONS (table_name 'pd_tgt_store_b');

-- The plain diff, then every pairing's difference from it (none expected).
SELECT issue, key, columns, source_values, target_values
FROM reconcile_diff('pd_src_plain', 'pd_tgt_plain', ARRAY['id']) ORDER BY issue, key::text;
CREATE FUNCTION diff_differs(s regclass, t regclass, options jsonb DEFAULT '{}')
RETURNS bigint LANGUAGE sql AS $$
    SELECT count(*) FROM (
        (SELECT issue, key::text, columns, source_values::text, target_values::text
           FROM reconcile_diff(s, t, ARRAY['id'], options)
         EXCEPT ALL
         SELECT issue, key::text, columns, source_values::text, target_values::text
           FROM reconcile_diff('pd_src_plain', 'pd_tgt_plain', ARRAY['id'], options))
        UNION ALL
        (SELECT issue, key::text, columns, source_values::text, target_values::text
           FROM reconcile_diff('pd_src_plain', 'pd_tgt_plain', ARRAY['id'], options)
         EXCEPT ALL
         SELECT issue, key::text, columns, source_values::text, target_values::text
           FROM reconcile_diff(s, t, ARRAY['id'], options))) AS d
$$;
SELECT s, t, diff_differs(s, t) AS differing,
       diff_differs(s, t, '{"compare": ["amount"], "tolerance": {"amount": 1}}') AS differing_with_options
FROM unnest(ARRAY['pd_src_plain', 'pd_src_part', 'pd_src_fdw']::regclass[]) AS s,
     unnest(ARRAY['pd_tgt_plain', 'pd_tgt_part', 'pd_tgt_fdw']::regclass[]) AS t
ORDER BY 1::text, 2::text;
SELECT s, t, to_jsonb(reconcile_diff_summary(s, t, ARRAY['id'])) = to_jsonb(reconcile_diff_summary('pd_src_plain', 'pd_tgt_plain', ARRAY['id'])) AS same_summary
FROM unnest(ARRAY['pd_src_part', 'pd_src_fdw']::regclass[]) AS s,
     unnest(ARRAY['pd_tgt_part', 'pd_tgt_fdw']::regclass[]) AS t
ORDER BY 1::text, 2::text;
SELECT * FROM reconcile_diff_summary('pd_src_fdw', 'pd_tgt_part', ARRAY['id']);
-- Jobs over partitioned and foreign-partitioned sides.
INSERT INTO reconcile.diff_jobs (name, source, target, key_columns) VALUES
    ('part_plain', 'pd_src_plain', 'pd_tgt_plain', ARRAY['id']),
    ('part_hash_range', 'pd_src_part', 'pd_tgt_part', ARRAY['id']),
    ('part_fdw_fdw', 'pd_src_fdw', 'pd_tgt_fdw', ARRAY['id']);
SELECT job, source, target, rows_source, rows_target, matched, missing_in_target, extra_in_target,
       mismatched, duplicate_keys, null_keys, findings, error
FROM reconcile_diff_run() ORDER BY job;
SELECT r.job, count(*) AS findings,
       count(*) FILTER (WHERE (d.issue, d.key) NOT IN (SELECT issue, key FROM reconcile_diff('pd_src_plain', 'pd_tgt_plain', ARRAY['id']))) AS not_in_plain_diff
FROM reconcile.diff_runs r JOIN reconcile.diff_results d USING (run_id) GROUP BY 1 ORDER BY 1;

DELETE FROM reconcile.diff_jobs;
RESET reconcile.write_path;
DROP EXTENSION reconcile;
DROP TABLE loads, stage1, stage2, stage_hp_0, stage_eu, mid, stage_low, pstage, fstage, fstage_store, hp, fp, fp2,
    fp_store, pd_src_plain, pd_tgt_plain, pd_src_part, pd_tgt_part, pd_src_fdw, pd_tgt_fdw, pd_src_store_low, pd_src_store_high,
    pd_tgt_store_a, pd_tgt_store_b, from_pstage, from_fstage;
DO $$
DECLARE t text;
BEGIN
    FOR t IN SELECT s || '_' || p FROM unnest(ARRAY['plain', 'hash', 'range', 'twolevel']) AS s,
                                       unnest(ARRAY['auto', 'general']) AS p LOOP
        EXECUTE format('DROP TABLE %I', t);
    END LOOP;
END $$;
DROP FUNCTION load, make_target, rows_of, diff_differs;
DROP USER MAPPING FOR CURRENT_USER SERVER part_loopback;
DROP SERVER part_loopback;
DROP EXTENSION postgres_fdw;
