-- Parallel reading of the staged rows: a large staged table is read by the
-- batch's process and parallel workers together (docs/loader.md, "Parallel
-- reading").  The same batch read serially and in parallel gives the same
-- target, receipt, rejects and conflicts; a batch whose workers cannot
-- start is read serially; an error while workers run leaves the session
-- usable, in or out of a subtransaction.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

CREATE FUNCTION make_target(name text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE format('CREATE TABLE %I (id bigint PRIMARY KEY, label text, amount numeric,
                    seen timestamptz, version bigint NOT NULL,
                    is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea)', name);
    EXECUTE format('INSERT INTO %I (id, label, amount, seen, version)
                    SELECT k, ''old '' || k, k, ''2024-01-01'',
                           CASE k %% 10 WHEN 0 THEN 2 WHEN 1 THEN 5 ELSE 0 END
                      FROM generate_series(0, 2999) k', name);
    PERFORM reconcile_register(target => name::regclass, key_columns => '{id}',
        version_column => 'version', deleted_column => 'is_deleted',
        hash_column => 'payload_hash', conflict_policy => 'quarantine');
END
$$;
SELECT make_target('t_serial'), make_target('t_parallel'), make_target('t_fallback');

-- 24,000 staged rows in 12 objects over keys 0..5999 at versions 1..4
-- (targets hold keys 0..2999, at version 0, or 2 for every tenth key, whose
-- staged v2 rows then conflict with the target's row, or 5 for the next
-- one, whose staged rows are all stale): updates, new keys, stale rows,
-- deletes, then exact repeats of every 50th row, rivals (the same key and
-- version with another label: conflicts) and every kind of malformed row,
-- all shuffled over the table's blocks so that each participant's range
-- holds some of each.
CREATE TABLE stage (object_key text, source_row bigint, operation text,
                    id text, label text, amount text, seen text, version text);
CREATE TEMP TABLE rows_in_order AS
SELECT 'part-' || lpad((g % 12)::text, 2, '0') AS object_key, g AS source_row,
       CASE WHEN g % 997 = 0 THEN 'MERGE' WHEN k % 17 = 0 AND v = 4 THEN 'DELETE' ELSE 'UPSERT' END AS operation,
       CASE WHEN g % 1009 = 0 THEN 'k' || k WHEN g % 1013 = 0 THEN NULL ELSE k::text END AS id,
       'label ' || k || ' v' || v AS label,
       CASE WHEN g % 1021 = 0 THEN 'abc' ELSE (k % 1000)::text || '.5' END AS amount,
       CASE WHEN g % 1031 = 0 THEN 'yesterday-ish' ELSE '2024-03-0' || v || ' 10:00:00+02' END AS seen,
       CASE WHEN g % 1039 = 0 THEN '-1' WHEN g % 1049 = 0 THEN 'v9' ELSE v::text END AS version
  FROM generate_series(1, 24000) g,
       LATERAL (SELECT (g * 7919) % 6000 AS k, 1 + (g - 1) / 6000 AS v) kv;
INSERT INTO rows_in_order
SELECT object_key, source_row + 100000, operation, id, label, amount, seen, version
  FROM rows_in_order WHERE source_row % 50 = 0;
INSERT INTO rows_in_order
SELECT object_key, source_row + 200000, operation, id, 'rival', amount, seen, version
  FROM rows_in_order WHERE source_row % 1499 = 0 AND source_row < 100000;
INSERT INTO stage SELECT * FROM rows_in_order ORDER BY (source_row * 7907) % 30011, source_row;
-- Many small workers' ranges: the table is small, so ask for workers.
ALTER TABLE stage SET (parallel_workers = 2);
SELECT pg_relation_size('stage') / current_setting('block_size')::int > 100 AS enough_blocks;

-- One manifest per target (a manifest is committed once), the same objects.
CREATE FUNCTION manifest_for(target text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_agg(jsonb_build_object('object_key', object_key, 'version_id', target,
                     'content_hash', 'none', 'rows', n) ORDER BY object_key)
      FROM (SELECT object_key, count(*) AS n FROM stage GROUP BY object_key) o
$$;

SET max_parallel_maintenance_workers = 0;
SELECT status, inserted, updated, deleted, unchanged, stale, duplicates, conflicts, rejected
  FROM reconcile_batch('t_serial', 'stage', manifest_for('t_serial'));
-- DEBUG1 says how many workers started, as CREATE INDEX does.
SET max_parallel_maintenance_workers = 2;
SET client_min_messages = debug1;
SELECT status, inserted, updated, deleted, unchanged, stale, duplicates, conflicts, rejected
  FROM reconcile_batch('t_parallel', 'stage', manifest_for('t_parallel'));
-- No worker can start: read serially, same result.
SET max_parallel_workers = 0;
SELECT status, inserted, updated, deleted, unchanged, stale, duplicates, conflicts, rejected
  FROM reconcile_batch('t_fallback', 'stage', manifest_for('t_fallback'));
SET client_min_messages = warning;
RESET max_parallel_workers;

-- Every batch wrote the same rows, counts per object, checksum, rejects and
-- conflicts as the serial one.
CREATE FUNCTION differences(a regclass, b regclass) RETURNS TABLE (what text, n bigint)
LANGUAGE plpgsql AS $$
DECLARE
    ra reconcile.receipts;
    rb reconcile.receipts;
BEGIN
    SELECT * INTO ra FROM reconcile.receipts WHERE target = a;
    SELECT * INTO rb FROM reconcile.receipts WHERE target = b;
    RETURN QUERY EXECUTE format(
        'SELECT ''target rows'', count(*) FROM ((SELECT * FROM %1$s EXCEPT ALL SELECT * FROM %2$s)
                 UNION ALL (SELECT * FROM %2$s EXCEPT ALL SELECT * FROM %1$s)) d', a, b);
    RETURN QUERY SELECT 'checksum', (ra.checksum IS DISTINCT FROM rb.checksum)::int::bigint;
    RETURN QUERY SELECT 'objects', count(*) FROM (
        (SELECT e - 'version_id' FROM jsonb_array_elements(reconcile_receipt_objects(ra.target, ra.batch_id)) e
         EXCEPT ALL SELECT e - 'version_id' FROM jsonb_array_elements(reconcile_receipt_objects(rb.target, rb.batch_id)) e)
        UNION ALL
        (SELECT e - 'version_id' FROM jsonb_array_elements(reconcile_receipt_objects(rb.target, rb.batch_id)) e
         EXCEPT ALL SELECT e - 'version_id' FROM jsonb_array_elements(reconcile_receipt_objects(ra.target, ra.batch_id)) e)) d;
    RETURN QUERY SELECT 'rejects', count(*) FROM (
        (SELECT object_key, source_row, column_name, raw_value, reason FROM reconcile.rejects WHERE target = a
         EXCEPT ALL
         SELECT object_key, source_row, column_name, raw_value, reason FROM reconcile.rejects WHERE target = b)
        UNION ALL
        (SELECT object_key, source_row, column_name, raw_value, reason FROM reconcile.rejects WHERE target = b
         EXCEPT ALL
         SELECT object_key, source_row, column_name, raw_value, reason FROM reconcile.rejects WHERE target = a)) d;
    RETURN QUERY SELECT 'conflicts', count(*) FROM (
        (SELECT key, version, object_key, source_row, staged_hash, existing_hash FROM reconcile.conflicts WHERE target = a
         EXCEPT ALL
         SELECT key, version, object_key, source_row, staged_hash, existing_hash FROM reconcile.conflicts WHERE target = b)
        UNION ALL
        (SELECT key, version, object_key, source_row, staged_hash, existing_hash FROM reconcile.conflicts WHERE target = b
         EXCEPT ALL
         SELECT key, version, object_key, source_row, staged_hash, existing_hash FROM reconcile.conflicts WHERE target = a)) d;
END
$$;
SELECT * FROM differences('t_serial', 't_parallel');
SELECT * FROM differences('t_serial', 't_fallback');
-- The comparison can fail: a target that differs by one row is seen.
UPDATE t_fallback SET label = 'changed' WHERE id = 7;
SELECT * FROM differences('t_serial', 't_fallback') WHERE what = 'target rows';

-- Dataset checks attached to a target run over the batch's winners, after
-- the read: the same batch read serially and in parallel passes them and
-- loads the same rows.  Over the staged rows they would fail: keys repeat
-- (exact repeats, several versions) and rivals carry the label 'rival',
-- but every rival is a conflict, held back.
SELECT make_target('t_checked_serial'), make_target('t_checked_parallel');
SELECT reconcile_set_rules(t, '{"dataset_checks": [
    {"name": "one_row_per_id", "sql": "SELECT id FROM {{TABLE}} GROUP BY id HAVING count(*) > 1"},
    {"name": "no_rivals", "sql": "SELECT 1 FROM {{TABLE}} WHERE label = ''rival''"}]}')
  FROM unnest('{t_checked_serial,t_checked_parallel}'::regclass[]) AS t;
SELECT count(*) > count(DISTINCT id) AS keys_repeat, bool_or(label = 'rival') AS rivals_staged FROM stage;
SET max_parallel_maintenance_workers = 0;
SELECT status, inserted, updated, deleted, unchanged, stale, duplicates, conflicts, rejected
  FROM reconcile_batch('t_checked_serial', 'stage', manifest_for('t_checked_serial'));
-- (Read with workers, as t_parallel above; DEBUG1 would also show the
-- temporary table's own messages.)
SET max_parallel_maintenance_workers = 2;
SELECT status, inserted, updated, deleted, unchanged, stale, duplicates, conflicts, rejected
  FROM reconcile_batch('t_checked_parallel', 'stage', manifest_for('t_checked_parallel'));
SELECT * FROM differences('t_serial', 't_checked_serial');
SELECT * FROM differences('t_serial', 't_checked_parallel');

-- The rejects name their object, row and column whoever read them.
SELECT column_name, count(*) FROM reconcile.rejects WHERE target = 't_parallel'::regclass
 GROUP BY column_name ORDER BY column_name COLLATE "C";
SELECT object_key, source_row, column_name, raw_value, reason FROM reconcile.rejects
 WHERE target = 't_parallel'::regclass ORDER BY source_row, column_name LIMIT 4;

-- An incomplete object is refused after a parallel read as after a serial one.
SELECT make_target('t_short');
CREATE TABLE full_manifest AS SELECT manifest_for('t_short') AS m;
DELETE FROM stage WHERE source_row = 12345;
SELECT * FROM reconcile_batch('t_short', 'stage', (SELECT m FROM full_manifest));

-- An error while the workers run (here a statement timeout) leaves the
-- session usable, whether the batch ran in a subtransaction or not.
SET statement_timeout = '1ms';
DO $$
BEGIN
    PERFORM reconcile_batch('t_short', 'stage', manifest_for('t_short'));
EXCEPTION WHEN query_canceled THEN
    RAISE WARNING 'the batch was canceled';
END
$$;
RESET statement_timeout;
SELECT status, inserted, updated, rejected
  FROM reconcile_batch('t_short', 'stage', manifest_for('t_short'));
SELECT count(*) FROM reconcile.receipts WHERE target = 't_short'::regclass;

-- A temporary staged table is read serially: workers cannot see it.
CREATE TEMP TABLE temp_stage (LIKE stage);
ALTER TABLE temp_stage SET (parallel_workers = 2);
INSERT INTO temp_stage SELECT * FROM stage WHERE object_key = 'part-03';
SELECT make_target('t_temp');
SELECT status, staged_rows, inserted + updated + deleted + unchanged + stale + duplicates
       + conflicts + rejected = staged_rows AS all_counted
  FROM reconcile_batch('t_temp', 'temp_stage',
       (SELECT jsonb_agg(jsonb_build_object('object_key', 'part-03', 'version_id', 'tmp',
               'content_hash', 'none', 'rows', count)) FROM (SELECT count(*) FROM temp_stage) c));

DROP EXTENSION reconcile;
DROP TABLE stage, temp_stage, full_manifest, t_serial, t_parallel, t_fallback, t_short, t_temp,
    t_checked_serial, t_checked_parallel;
DROP FUNCTION make_target(text), manifest_for(text), differences(regclass, regclass);
