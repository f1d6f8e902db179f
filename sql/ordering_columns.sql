-- Ordering by several columns compared in order (issue 23, point 1):
-- version_columns => '{binlog_file,binlog_pos}' orders a change stream by
-- its binlog file, then its offset in the file: a row of a later file
-- wins over one of an earlier file at any offset.  Winners, stale,
-- unchanged, duplicates, conflicts (one (file, offset), two payloads),
-- tombstones, the version guard of the write, rejects (a NULL, uncastable
-- or negative offset) and reconcile_resolve, on both write paths.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

CREATE TABLE bl_direct (id int PRIMARY KEY, val text, binlog_file text NOT NULL,
                        binlog_pos bigint NOT NULL, d boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE bl_general (LIKE bl_direct INCLUDING ALL);
SELECT reconcile_register('bl_direct', '{id}', version_columns => '{binlog_file,binlog_pos}',
                          deleted_column => 'd', hash_column => 'h');
SELECT reconcile_register('bl_general', '{id}', version_columns => '{binlog_file,binlog_pos}',
                          deleted_column => 'd', hash_column => 'h');
-- version_column keeps the first, for 1.1's readers; payload leaves both out.
SELECT target, version_column, version_columns, payload_columns FROM reconcile.targets ORDER BY target::text;

CREATE TABLE bl_stage (object_key text, source_row bigint, operation text,
                       id text, val text, binlog_file text, binlog_pos text);
CREATE FUNCTION load(target regclass, obj text, path text)
RETURNS TABLE (inserted bigint, updated bigint, deleted bigint, unchanged bigint,
               stale bigint, duplicates bigint, conflicts bigint, rejected bigint)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM set_config('reconcile.write_path', path, true);
    RETURN QUERY SELECT r.inserted, r.updated, r.deleted, r.unchanged, r.stale, r.duplicates,
                        r.conflicts, r.rejected
      FROM reconcile_batch(target, 'bl_stage', jsonb_build_array(jsonb_build_object(
               'object_key', obj, 'version_id', '1', 'content_hash', 'sha256:' || obj,
               'rows', (SELECT count(*) FROM bl_stage s WHERE s.object_key = obj)))) r;
END $$;
CREATE FUNCTION same_rows() RETURNS boolean LANGUAGE sql AS $$
    SELECT NOT EXISTS ((TABLE bl_direct EXCEPT TABLE bl_general) UNION ALL (TABLE bl_general EXCEPT TABLE bl_direct)) $$;

INSERT INTO bl_stage VALUES
    -- 1: the later file wins at a lower offset
    ('b1', 1, 'UPSERT', '1', 'old', 'mysql-bin.000001', '999999'),
    ('b1', 2, 'UPSERT', '1', 'new', 'mysql-bin.000002', '4'),
    -- 2: one (file, offset), two payloads: a conflict
    ('b1', 3, 'UPSERT', '2', 'x', 'mysql-bin.000001', '120'),
    ('b1', 4, 'UPSERT', '2', 'y', 'mysql-bin.000001', '120'),
    -- 3: one file, the higher offset wins; an exact repeat is a duplicate
    ('b1', 5, 'UPSERT', '3', 'nine', 'mysql-bin.000001', '9'),
    ('b1', 6, 'UPSERT', '3', 'ten', 'mysql-bin.000001', '10'),
    ('b1', 7, 'UPSERT', '3', 'ten', 'mysql-bin.000001', '010'),
    -- 4: no offset, not an offset, a negative offset, no file: rejects
    ('b1', 8, 'UPSERT', '4', 'a', 'mysql-bin.000001', NULL),
    ('b1', 9, 'UPSERT', '4', 'b', 'mysql-bin.000001', 'x9'),
    ('b1', 10, 'UPSERT', '4', 'c', 'mysql-bin.000001', '-1'),
    ('b1', 11, 'UPSERT', '4', 'd', NULL, '5'),
    -- 5: a delete: a tombstone at its (file, offset)
    ('b1', 12, 'DELETE', '5', NULL, 'mysql-bin.000003', '7');
SELECT 'direct' AS path, * FROM load('bl_direct', 'b1', 'auto')
UNION ALL SELECT 'general', * FROM load('bl_general', 'b1', 'general');
SELECT * FROM bl_direct ORDER BY id;
SELECT same_rows();
SELECT key, version, ordering, source_row FROM reconcile.conflicts
 WHERE target = 'bl_direct'::regclass ORDER BY source_row;
SELECT source_row, column_name, raw_value, reason FROM reconcile.rejects
 WHERE target = 'bl_direct'::regclass ORDER BY source_row;

-- A second batch.  The write's version guard compares in order: key 3
-- moves to the next file at offset 1 (a guard on the offset alone would
-- refuse it); key 1 at a lower offset of its file is stale, at its own
-- unchanged; the tombstone of key 5 stops an earlier file and yields to a
-- later one.
INSERT INTO bl_stage VALUES
    ('b2', 1, 'UPSERT', '1', 'new', 'mysql-bin.000002', '4'),
    ('b2', 2, 'UPSERT', '1', 'older', 'mysql-bin.000002', '3'),
    ('b2', 3, 'UPSERT', '3', 'eleven', 'mysql-bin.000002', '1'),
    ('b2', 4, 'UPSERT', '5', 'back?', 'mysql-bin.000002', '999'),
    ('b2', 5, 'UPSERT', '6', 'six', 'mysql-bin.000003', '1');
SELECT 'direct' AS path, * FROM load('bl_direct', 'b2', 'auto')
UNION ALL SELECT 'general', * FROM load('bl_general', 'b2', 'general');
INSERT INTO bl_stage VALUES ('b3', 1, 'UPSERT', '5', 'back', 'mysql-bin.000010', '0');
SELECT 'direct' AS path, * FROM load('bl_direct', 'b3', 'auto')
UNION ALL SELECT 'general', * FROM load('bl_general', 'b3', 'general');
SELECT * FROM bl_direct ORDER BY id;
SELECT same_rows();

-- A replay is answered from the receipt.
SELECT status, inserted, conflicts, rejected FROM reconcile_batch('bl_direct', 'bl_stage',
    '[{"object_key":"b1","version_id":"1","content_hash":"sha256:b1","rows":12}]');

-- The owner resolves key 2 at ("mysql-bin.000001", 120), on both paths.
SELECT status, version, written_version, outcome, ordering, written_ordering
  FROM reconcile_resolve('bl_direct', (SELECT batch_id FROM reconcile.conflicts WHERE target = 'bl_direct'::regclass LIMIT 1),
                         '{"id": 2}', (SELECT staged_hash FROM reconcile.conflicts
                                        WHERE target = 'bl_direct'::regclass AND source_row = 4));
SET reconcile.write_path = 'general';
SELECT outcome, ordering
  FROM reconcile_resolve('bl_general', (SELECT batch_id FROM reconcile.conflicts WHERE target = 'bl_general'::regclass LIMIT 1),
                         '{"id": 2}', (SELECT staged_hash FROM reconcile.conflicts
                                        WHERE target = 'bl_general'::regclass AND source_row = 4));
RESET reconcile.write_path;
SELECT * FROM bl_direct WHERE id = 2;
SELECT same_rows();
-- A conflict against the target's row at its (file, offset) names it in the abort error.
ALTER TABLE bl_direct ADD COLUMN note text;
SELECT reconcile_register('bl_direct', '{id}', version_columns => '{binlog_file,binlog_pos}',
                          deleted_column => 'd', hash_column => 'h', conflict_policy => 'abort',
                          payload_columns => '{val}');
INSERT INTO bl_stage VALUES ('b4', 1, 'UPSERT', '6', 'other', 'mysql-bin.000003', '1');
DO $$
DECLARE
    detail text;
BEGIN
    PERFORM load('bl_direct', 'b4', 'auto');
EXCEPTION WHEN unique_violation THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
    RAISE WARNING '%', detail;
END $$;

-- reconcile_load stages every version column from the objects it reads.
COPY (SELECT 1) TO PROGRAM 'rm -rf /tmp/reconcile_ordering_columns && mkdir -p /tmp/reconcile_ordering_columns && cat >/dev/null';
COPY (SELECT translate(encode(convert_to(E'id,val,binlog_file,binlog_pos\n7,first,mysql-bin.000001,50\n7,second,mysql-bin.000002,3\n', 'UTF8'), 'base64'), E'\n', ''))
    TO PROGRAM 'base64 -d > /tmp/reconcile_ordering_columns/b.csv';
CREATE SERVER bl_land FOREIGN DATA WRAPPER reconcile_objects OPTIONS (directory '/tmp/reconcile_ordering_columns');
SELECT status, inserted, stale, staged_rows FROM reconcile_load('bl_general', 'bl_land');
SELECT * FROM bl_general WHERE id = 7;
DROP SERVER bl_land;

-- Every version column must be NOT NULL and orderable; no column twice.
CREATE TABLE bl_bad (id int PRIMARY KEY, f text NOT NULL, p bigint, j json NOT NULL,
                     d boolean NOT NULL DEFAULT false, h bytea);
DO $$
DECLARE
    cols text[];
BEGIN
    FOREACH cols SLICE 1 IN ARRAY ARRAY[['f', 'p'], ['f', 'j'], ['f', 'f'], ['f', 'id'], ['f', 'nope']] LOOP
        BEGIN
            PERFORM reconcile_register('bl_bad', '{id}', version_columns => cols,
                                       deleted_column => 'd', hash_column => 'h');
            RAISE WARNING '%: registered', cols;
        EXCEPTION WHEN OTHERS THEN
            RAISE WARNING '%: %: %', cols, SQLSTATE, SQLERRM;
        END;
    END LOOP;
END $$;

DROP TABLE bl_direct, bl_general, bl_stage, bl_bad;
DROP FUNCTION load(regclass, text, text), same_rows();
DROP EXTENSION reconcile;
