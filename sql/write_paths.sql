-- The direct write path and the general (statement) path give identical
-- targets and identical receipts on the same batch, whatever the target has:
-- a trigger, a CHECK constraint, a secondary unique index, defaults,
-- generated columns, partitions, and a batch larger than work_mem.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

-- Load one staged batch into two identical targets, one per write path, and
-- compare the targets and the receipts.  Each manifest carries an empty
-- extra object naming its target, because a manifest is committed once.
CREATE FUNCTION both_paths(a regclass, b regclass, staged regclass, manifest jsonb)
RETURNS TABLE (path text, inserted bigint, updated bigint, deleted bigint,
               unchanged bigint, stale bigint, duplicates bigint, conflicts bigint,
               rejected bigint, same_checksum boolean, rows_only_in_a bigint,
               rows_only_in_b bigint)
LANGUAGE plpgsql AS $$
DECLARE
    ra reconcile.receipt;
    rb reconcile.receipt;
    only_a bigint;
    only_b bigint;
BEGIN
    SET LOCAL reconcile.write_path = 'auto';
    SELECT * INTO ra FROM reconcile_batch(a, staged, manifest ||
        jsonb_build_array(jsonb_build_object('object_key', 'for:' || a::text,
            'version_id', '1', 'content_hash', 'none', 'rows', 0)));
    SET LOCAL reconcile.write_path = 'general';
    SELECT * INTO rb FROM reconcile_batch(b, staged, manifest ||
        jsonb_build_array(jsonb_build_object('object_key', 'for:' || b::text,
            'version_id', '1', 'content_hash', 'none', 'rows', 0)));
    EXECUTE format('SELECT count(*) FROM (SELECT * FROM %s EXCEPT ALL SELECT * FROM %s) d', a, b)
        INTO only_a;
    EXECUTE format('SELECT count(*) FROM (SELECT * FROM %s EXCEPT ALL SELECT * FROM %s) d', b, a)
        INTO only_b;
    RETURN QUERY VALUES
        ('auto', ra.inserted, ra.updated, ra.deleted, ra.unchanged, ra.stale,
         ra.duplicates, ra.conflicts, ra.rejected, ra.checksum = rb.checksum, only_a, only_b),
        ('general', rb.inserted, rb.updated, rb.deleted, rb.unchanged, rb.stale,
         rb.duplicates, rb.conflicts, rb.rejected, ra.checksum = rb.checksum, only_a, only_b);
END
$$;

-- A staged batch covering every disposition: keys 0..399 at versions 1..3,
-- the payload a function of key and version (targets hold keys 0..299 at
-- version 2 with the same payload function), some deletes, exact repeats,
-- two same-version conflicts and a malformed amount.
CREATE TABLE stage (object_key text, source_row bigint, operation text,
                    id text, label text, amount text, version text);
INSERT INTO stage
SELECT 'part-' || (g % 4), g,
       CASE WHEN k % 13 = 0 AND v = 3 THEN 'DELETE' ELSE 'UPSERT' END,
       k::text, 'label ' || k || CASE WHEN v = 3 THEN ' changed' ELSE '' END,
       (k % 90)::text, v::text
  FROM generate_series(0, 1199) g, LATERAL (SELECT g % 400 AS k, 1 + g / 400 AS v) kv
 WHERE NOT (k % 7 = 0 AND v = 3);
INSERT INTO stage SELECT object_key, source_row + 10000, operation, id, label, amount, version
  FROM stage WHERE id::int % 11 = 0;
INSERT INTO stage VALUES ('part-0', 20000, 'UPSERT', '14', 'other', '1', '2'),
                         ('part-1', 20001, 'UPSERT', '350', 'other', '1', '2'),
                         ('part-2', 20002, 'UPSERT', '8', 'x', 'abc', '9');
CREATE TABLE manifest AS
SELECT jsonb_agg(jsonb_build_object('object_key', object_key, 'version_id', '1',
                 'content_hash', 'sha256:' || object_key, 'rows', n)) AS m
  FROM (SELECT object_key, count(*) AS n FROM stage GROUP BY object_key) o;
CREATE TABLE manifest2 AS
SELECT jsonb_build_array(jsonb_build_object('object_key', 'part-0', 'version_id', '1',
       'content_hash', 'sha256:part-0',
       'rows', (SELECT count(*) FROM stage WHERE object_key = 'part-0'))) AS m;

-- Each target starts with keys 0..299 at version 2, so some rows update,
-- some are stale, some are unchanged, some are new.
CREATE FUNCTION make_target(name text, extra text DEFAULT '') RETURNS void
LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('CREATE TABLE %I (id int PRIMARY KEY, label text, amount numeric,
                    version int NOT NULL, is_deleted boolean NOT NULL DEFAULT false,
                    payload_hash bytea %s)', name, extra);
    PERFORM reconcile_register(name::regclass, '{id}', 'version', 'is_deleted',
                               'payload_hash', 'quarantine', '{label,amount}');
    EXECUTE format('INSERT INTO %I (id, label, amount, version, payload_hash)
                    SELECT g, ''label '' || g, g %% 90, 2,
                           sha256(convert_to(''['' || to_json(''label '' || g) || '','' || to_json((g %% 90)::text) || '',false]'', ''UTF8''))
                      FROM generate_series(0, 299) g', name);
END
$$;

-- a plain table: the direct path
SELECT make_target('plain_a'), make_target('plain_b');
SELECT * FROM both_paths('plain_a', 'plain_b', 'stage', (SELECT m FROM manifest));
-- a second batch on top of the first
SELECT * FROM both_paths('plain_a', 'plain_b', 'stage', (SELECT m FROM manifest2));

-- a CHECK constraint, a secondary unique index, a default and a generated
-- column, which the direct path must honour itself
SELECT make_target('rich_a', ', loaded boolean DEFAULT true, doubled numeric GENERATED ALWAYS AS (amount * 2) STORED, CHECK (amount >= 0)'),
       make_target('rich_b', ', loaded boolean DEFAULT true, doubled numeric GENERATED ALWAYS AS (amount * 2) STORED, CHECK (amount >= 0)');
CREATE UNIQUE INDEX ON rich_a (label) WHERE label LIKE '%changed';
CREATE UNIQUE INDEX ON rich_b (label) WHERE label LIKE '%changed';
SELECT * FROM both_paths('rich_a', 'rich_b', 'stage', (SELECT m FROM manifest));
SELECT count(*) FILTER (WHERE loaded) AS loaded, count(*) FILTER (WHERE doubled = amount * 2) AS generated
  FROM rich_a;

-- the CHECK constraint and the unique index refuse bad rows on both paths
CREATE TABLE bad_stage (LIKE stage);
INSERT INTO bad_stage VALUES ('bad', 1, 'UPSERT', '900', 'fine', '-5', '1');
SET reconcile.write_path = 'auto';
SELECT status FROM reconcile_batch('rich_a', 'bad_stage', '[{"object_key":"bad","version_id":"1","content_hash":"h","rows":1}]');
SET reconcile.write_path = 'general';
SELECT status FROM reconcile_batch('rich_b', 'bad_stage', '[{"object_key":"bad","version_id":"1","content_hash":"h","rows":1}]');
UPDATE bad_stage SET amount = '5', label = 'label 1 changed';
INSERT INTO bad_stage VALUES ('bad', 2, 'UPSERT', '901', 'label 1 changed', '5', '1');
SET reconcile.write_path = 'auto';
SELECT status FROM reconcile_batch('rich_a', 'bad_stage', '[{"object_key":"bad","version_id":"2","content_hash":"h","rows":2}]');
SET reconcile.write_path = 'general';
SELECT status FROM reconcile_batch('rich_b', 'bad_stage', '[{"object_key":"bad","version_id":"2","content_hash":"h","rows":2}]');
RESET reconcile.write_path;

-- a trigger: both settings take the statement path, and the trigger fires
-- once per written row
CREATE TABLE audit (id int, op text);
CREATE FUNCTION audit_row() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO audit VALUES (NEW.id, TG_OP);
    RETURN NEW;
END
$$;
SELECT make_target('trig_a'), make_target('trig_b');
CREATE TRIGGER audit_a AFTER INSERT OR UPDATE ON trig_a FOR EACH ROW EXECUTE FUNCTION audit_row();
CREATE TRIGGER audit_b AFTER INSERT OR UPDATE ON trig_b FOR EACH ROW EXECUTE FUNCTION audit_row();
SELECT * FROM both_paths('trig_a', 'trig_b', 'stage', (SELECT m FROM manifest));
SELECT op, count(*) FROM audit GROUP BY op ORDER BY op;

-- a BEFORE trigger that skips rows makes the batch fail rather than lie
CREATE FUNCTION skip_odd() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RETURN CASE WHEN NEW.id % 2 = 1 THEN NULL ELSE NEW END;
END
$$;
SELECT make_target('skip_a');
CREATE TRIGGER skip BEFORE INSERT ON skip_a FOR EACH ROW EXECUTE FUNCTION skip_odd();
SELECT status FROM reconcile_batch('skip_a', 'stage', (SELECT m FROM manifest));
SELECT count(*) AS untouched FROM skip_a WHERE version <> 2;

-- a partitioned target
CREATE FUNCTION make_partitioned(name text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('CREATE TABLE %I (id int, label text, amount numeric, version int NOT NULL,
                    is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea,
                    PRIMARY KEY (id)) PARTITION BY RANGE (id)', name);
    EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES FROM (MINVALUE) TO (200)', name || '_low', name);
    -- a partition with its columns in another order
    EXECUTE format('CREATE TABLE %I (payload_hash bytea, is_deleted boolean NOT NULL DEFAULT false,
                    version int NOT NULL, amount numeric, label text, id int NOT NULL)', name || '_high');
    EXECUTE format('ALTER TABLE %I ATTACH PARTITION %I FOR VALUES FROM (200) TO (MAXVALUE)', name, name || '_high');
    PERFORM reconcile_register(name::regclass, '{id}', 'version', 'is_deleted', 'payload_hash');
    EXECUTE format('INSERT INTO %I (id, label, amount, version, payload_hash)
                    SELECT g, ''label '' || g, g %% 90, 2,
                           sha256(convert_to(''['' || to_json(''label '' || g) || '','' || to_json((g %% 90)::text) || '',false]'', ''UTF8''))
                      FROM generate_series(0, 299) g', name);
END
$$;
SELECT make_partitioned('part_a'), make_partitioned('part_b');
SELECT * FROM both_paths('part_a', 'part_b', 'stage', (SELECT m FROM manifest));
SELECT count(*) AS low FROM part_a_low;
SELECT count(*) AS high FROM part_a_high;

-- a batch far larger than work_mem: the sort spills to disk
SET work_mem = '64kB';
CREATE TABLE big_stage (LIKE stage);
INSERT INTO big_stage
SELECT 'big-' || (g % 3), g, 'UPSERT', (g % 6000)::text, repeat('x', 40) || (g % 6000),
       (g % 70)::text, (1 + g / 6000)::text
  FROM generate_series(1, 18000) g;
CREATE TABLE big_manifest AS
SELECT jsonb_agg(jsonb_build_object('object_key', object_key, 'version_id', '1',
                 'content_hash', 'sha256:' || object_key, 'rows', n)) AS m
  FROM (SELECT object_key, count(*) AS n FROM big_stage GROUP BY object_key) o;
SELECT make_target('big_a'), make_target('big_b');
SELECT * FROM both_paths('big_a', 'big_b', 'big_stage', (SELECT m FROM big_manifest));
-- per key the highest version won, but for the 300 keys the targets hold at
-- version 2 with another payload: their staged v2 rows conflict with the
-- target's, and every row of those keys is held back
SELECT count(*) AS keys, min(version) AS min_version, max(version) AS max_version FROM big_a;
RESET work_mem;

-- keys far apart in a large target: the probe steps through the index
-- while keys are close and descends again across larger gaps
CREATE TABLE sparse_stage (LIKE stage);
INSERT INTO sparse_stage
SELECT 's', g, 'UPSERT', k::text, 'label ' || k || ' changed', (k % 90)::text, '3'
  FROM generate_series(1, 140) g, LATERAL (SELECT CASE WHEN g <= 100 THEN g * 97
                                                        WHEN g <= 120 THEN 9700 + g
                                                        ELSE 20000 + g END AS k) kk;
CREATE FUNCTION make_large(name text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM make_target(name);
    EXECUTE format('INSERT INTO %I (id, label, amount, version)
                    SELECT g, ''label '' || g, g %% 90, 2 FROM generate_series(300, 9999) g', name);
END
$$;
SELECT make_large('sparse_a'), make_large('sparse_b');
SELECT * FROM both_paths('sparse_a', 'sparse_b', 'sparse_stage',
    '[{"object_key":"s","version_id":"1","content_hash":"h","rows":140}]');
SELECT count(*) FILTER (WHERE version = 3) AS at_v3, count(*) AS keys FROM sparse_a;

-- room on every page: updates are heap-only (HOT) and add no index entries
SELECT make_target('hot_a'), make_target('hot_b');
ALTER TABLE hot_a SET (fillfactor = 50);
ALTER TABLE hot_b SET (fillfactor = 50);
VACUUM FULL hot_a;
VACUUM FULL hot_b;
SELECT * FROM both_paths('hot_a', 'hot_b', 'stage', (SELECT m FROM manifest));
SELECT pg_stat_force_next_flush();
SELECT relname, n_tup_hot_upd > 0 AS some_heap_only_updates
  FROM pg_stat_user_tables WHERE relname IN ('hot_a', 'hot_b') ORDER BY relname;

-- progress is reported while a batch runs and not after it
SELECT count(*) AS running FROM reconcile.batch_progress;

-- every btree index of every target agrees with its table: amcheck finds
-- each heap tuple's entry (heapallindexed), whichever path wrote it
CREATE EXTENSION amcheck;
SELECT c.relname AS index_verified
  FROM pg_index AS i
  JOIN pg_class AS c ON c.oid = i.indexrelid
  JOIN pg_class AS t ON t.oid = i.indrelid
  JOIN pg_am AS am ON am.oid = c.relam,
       LATERAL bt_index_check(i.indexrelid::regclass, true) AS chk
 WHERE am.amname = 'btree' AND c.relkind = 'i'
   AND t.relname ~ '^(plain|rich|trig|skip|big|sparse|part|hot)_'
 ORDER BY 1;
DROP EXTENSION amcheck;

DROP EXTENSION reconcile;
DROP TABLE stage, manifest, manifest2, plain_a, plain_b, rich_a, rich_b, bad_stage,
    audit, trig_a, trig_b, skip_a, part_a, part_b, big_stage, big_manifest, big_a, big_b,
    sparse_stage, sparse_a, sparse_b, hot_a, hot_b;
DROP FUNCTION both_paths, make_target, audit_row, skip_odd, make_partitioned, make_large;
