-- The generalised ordering (version column of any btree-orderable type, or
-- several: version_columns) through the features of 1.2 that came from
-- other branches: delete_mode remove (kept removals), snapshot batches,
-- sparse updates (partial batches) and reconcile_repair.  The main case is
-- a timestamptz version, spelled at different offsets; each feature also
-- states what it refuses for several version columns.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;
SET timezone = 'UTC';

CREATE FUNCTION try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    detail text;
    hint text;
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    RETURN SQLSTATE || ': ' || regexp_replace(SQLERRM, '[0-9a-f]{64}', '<batch>')
        || coalesce(nullif(E'\nDETAIL: ' || detail, E'\nDETAIL: '), '')
        || coalesce(nullif(E'\nHINT: ' || hint, E'\nHINT: '), '');
END $$;

-- One batch of object obj from stage stg into tgt, with options.
CREATE FUNCTION load(tgt regclass, stg regclass, obj text, opts jsonb DEFAULT NULL)
RETURNS TABLE (status text, inserted bigint, updated bigint, deleted bigint,
               unchanged bigint, stale bigint, conflicts bigint, rejected bigint)
LANGUAGE plpgsql AS $$
DECLARE
    n bigint;
BEGIN
    EXECUTE format('SELECT count(*) FROM %s WHERE object_key = $1', stg) INTO n USING obj;
    RETURN QUERY SELECT r.status, r.inserted, r.updated, r.deleted, r.unchanged, r.stale,
                        r.conflicts, r.rejected
      FROM reconcile_batch(tgt, stg,
           jsonb_build_array(jsonb_build_object('object_key', obj, 'version_id', '1',
               'content_hash', 'h', 'rows', n)),
           options => opts) AS r;
END $$;

-- ---- delete_mode remove over a timestamptz version ----
CREATE TABLE acct (id integer PRIMARY KEY, name text, seen timestamptz NOT NULL,
                   deleted boolean NOT NULL DEFAULT false, hash bytea);
CREATE TABLE acct_stage (object_key text, source_row bigint, operation text,
                         id integer, seen text, name text);
SELECT reconcile_register(target => 'acct', key_columns => '{id}', version_column => 'seen',
    deleted_column => 'deleted', hash_column => 'hash', conflict_policy => 'quarantine',
    options => '{"delete_mode": "remove"}');
-- The kept removals keep the version in its own type.
SELECT format_type(atttypid, atttypmod) AS kept_version_type FROM pg_attribute
 WHERE attrelid = (SELECT removed_table FROM reconcile.targets WHERE target = 'acct'::regclass)
   AND attname = 'seen';
INSERT INTO acct_stage VALUES
    ('a1', 1, 'UPSERT', 1, '2026-03-01 10:00+00', 'one'),
    ('a1', 2, 'UPSERT', 2, '2026-03-01 10:00+00', 'two'),
    ('a1', 3, 'UPSERT', 3, '2026-03-01 10:00+00', 'three');
SELECT * FROM load('acct', 'acct_stage', 'a1');
-- 1 and 2 deleted at 11:00 (spelled 12:00+01 for 2): the rows go, the keys are kept.
INSERT INTO acct_stage VALUES
    ('a2', 1, 'DELETE', 1, '2026-03-01 11:00+00', NULL),
    ('a2', 2, 'DELETE', 2, '2026-03-01 12:00+01', NULL);
SELECT * FROM load('acct', 'acct_stage', 'a2');
SELECT id, name, seen FROM acct ORDER BY id;
SELECT format('SELECT id, seen FROM %s ORDER BY id', removed_table) AS kept_sql
  FROM reconcile.targets WHERE target = 'acct'::regclass \gset
:kept_sql;
-- A late older row does not bring 1 back (stale, in timestamptz order,
-- though its text sorts above); the same instant spelled otherwise with a
-- payload is a conflict against the kept removal; a later row re-creates 2.
INSERT INTO acct_stage VALUES
    ('a3', 1, 'UPSERT', 1, '2026-03-01 10:59:59+00', 'late'),
    ('a3', 2, 'UPSERT', 2, '2026-03-01 06:00-05', 'same instant'),
    ('a3', 3, 'UPSERT', 3, '2026-03-01 09:00+00', 'older');
SELECT * FROM load('acct', 'acct_stage', 'a3');
INSERT INTO acct_stage VALUES ('a4', 1, 'UPSERT', 2, '2026-03-02 00:00+00', 'two again');
SELECT * FROM load('acct', 'acct_stage', 'a4');
SELECT id, name, seen FROM acct ORDER BY id;
:kept_sql;
SELECT key, ordering, existing_payload FROM reconcile.conflicts
 WHERE target = 'acct'::regclass ORDER BY source_row;
-- The general write path removes by the same ordering (a microsecond above).
INSERT INTO acct_stage VALUES ('a5', 1, 'DELETE', 3, '2026-03-01 10:00:00.000001+00', NULL);
BEGIN;
SET LOCAL reconcile.write_path = 'general';
SELECT * FROM load('acct', 'acct_stage', 'a5');
COMMIT;
SELECT id, name, seen FROM acct ORDER BY id;
:kept_sql;
-- Purge below a timestamptz bound.
SELECT reconcile_purge_tombstones('acct', before_version => '2026-03-01 12:00+01') AS purged;
:kept_sql;

-- Several version columns: delete_mode remove is refused (a kept removal has one version column).
CREATE TABLE bin (id integer PRIMARY KEY, name text, file text NOT NULL, pos bigint NOT NULL,
                  deleted boolean NOT NULL DEFAULT false, hash bytea);
SELECT try($$SELECT reconcile_register(target => 'bin', key_columns => '{id}',
    version_columns => '{file,pos}', deleted_column => 'deleted', hash_column => 'hash',
    options => '{"delete_mode": "remove"}')$$) AS remove_two_columns;
SELECT count(*) AS registered FROM reconcile.targets WHERE target = 'bin'::regclass;

-- ---- Snapshot batches over a timestamptz version ----
CREATE TABLE cust (id integer PRIMARY KEY, name text, extracted timestamptz NOT NULL,
                   deleted boolean NOT NULL DEFAULT false, hash bytea);
CREATE TABLE cust_stage (object_key text, source_row bigint, operation text,
                         id integer, extracted text, name text);
SELECT reconcile_register(target => 'cust', key_columns => '{id}', version_column => 'extracted',
    deleted_column => 'deleted', hash_column => 'hash');
INSERT INTO cust_stage VALUES
    ('s0', 1, 'UPSERT', 1, '2026-03-01 00:00+00', 'one'),
    ('s0', 2, 'UPSERT', 2, '2026-03-01 00:00+00', 'two'),
    ('s0', 3, 'UPSERT', 3, '2026-03-01 00:00+00', 'three'),
    ('s0', 4, 'UPSERT', 4, '2026-03-03 00:00+00', 'four, written after the extract');
SELECT * FROM load('cust', 'cust_stage', 's0');
-- The extract of 2026-03-02 00:00 UTC (spelled at +02) holds 1 only: 2 and
-- 3, lower, become tombstones at the snapshot's instant; 4, above it, stays.
INSERT INTO cust_stage VALUES ('s1', 1, 'UPSERT', 1, '2026-03-02 02:00+02', 'one');
SELECT status, inserted, updated, unchanged FROM load('cust', 'cust_stage', 's1',
    '{"snapshot": {"version": "2026-03-02 02:00+02", "max_delete_share": 1}}');
SELECT deleted_absent FROM reconcile.receipts WHERE target = 'cust'::regclass ORDER BY committed_at DESC LIMIT 1;
SELECT id, name, extracted, deleted FROM cust ORDER BY id;
-- A late older row does not bring 2 back.
INSERT INTO cust_stage VALUES ('s2', 1, 'UPSERT', 2, '2026-03-01 12:00+00', 'two late');
SELECT * FROM load('cust', 'cust_stage', 's2');
SELECT id, name, extracted, deleted FROM cust WHERE id = 2;
-- A snapshot version that is not a timestamptz is refused (a new object: s1 would replay).
INSERT INTO cust_stage VALUES ('s3', 1, 'UPSERT', 1, '2026-03-04 00:00+00', 'one');
SELECT try($$SELECT * FROM load('cust', 'cust_stage', 's3', '{"snapshot": {"version": "noonish"}}')$$)
    AS bad_snapshot_version;
-- Several version columns: refused, not yet implemented.
SELECT reconcile_register(target => 'bin', key_columns => '{id}', version_columns => '{file,pos}',
    deleted_column => 'deleted', hash_column => 'hash');
CREATE TABLE bin_stage (object_key text, source_row bigint, operation text,
                        id integer, file text, pos bigint, name text);
INSERT INTO bin_stage VALUES ('b1', 1, 'UPSERT', 1, 'mysql-bin.000002', 4, 'one');
SELECT try($$SELECT * FROM load('bin', 'bin_stage', 'b1', '{"snapshot": {"version": 1}}')$$)
    AS snapshot_two_columns;
-- Purging tombstone rows of a target with several version columns: before_version
-- is read in the first column's type and compares that column alone.
INSERT INTO bin VALUES (7, 'x', 'mysql-bin.000001', 999, true, NULL),
                       (8, 'y', 'mysql-bin.000002', 1, true, NULL);
SELECT reconcile_purge_tombstones('bin', before_version => 'mysql-bin.000002') AS purged;
SELECT id, file, pos, deleted FROM bin ORDER BY id;

-- ---- Sparse updates over a timestamptz version ----
CREATE TABLE sp (id integer PRIMARY KEY, name text, city text, at timestamptz NOT NULL,
                 deleted boolean NOT NULL DEFAULT false, hash bytea);
CREATE TABLE sp_stage (object_key text, source_row bigint, operation text, id integer,
                       at text, name text, city text, present_columns text[]);
SELECT reconcile_register(target => 'sp', key_columns => '{id}', version_column => 'at',
    deleted_column => 'deleted', hash_column => 'hash', conflict_policy => 'quarantine');
INSERT INTO sp_stage VALUES
    ('p0', 1, 'UPSERT', 1, '2026-03-01 10:00+00', 'Ana', 'Oslo', NULL),
    ('p0', 2, 'UPSERT', 2, '2026-03-01 10:00+00', 'Bo', 'Rome', NULL),
    ('p0', 3, 'UPSERT', 3, '2026-03-01 10:00+00', 'Cy', 'Lima', NULL);
SELECT * FROM load('sp', 'sp_stage', 'p0', '{"partial": true}');
-- 1: two sparse versions in one batch, applied in timestamptz order (the
-- one spelled '...12:30+02', 10:30 UTC, is below '...11:00+00' though its
-- text sorts above): name from 10:30, city from 11:00.  2: a sparse row
-- older than the target's is stale.  3: two sparse rows at one instant,
-- spelled differently, merging to the same row are one (a duplicate);
-- then a DELETE above lower sparse versions keeps their merged state.
INSERT INTO sp_stage VALUES
    ('p1', 1, 'UPSERT', 1, '2026-03-01 11:00+00', NULL, 'Bergen', '{city}'),
    ('p1', 2, 'UPSERT', 1, '2026-03-01 12:30+02', 'Anna', NULL, '{name}'),
    ('p1', 3, 'UPSERT', 2, '2026-03-01 09:59+00', 'Bob', NULL, '{name}'),
    ('p1', 4, 'UPSERT', 3, '2026-03-01 11:00+00', NULL, 'Lyon', '{city}'),
    ('p1', 5, 'UPSERT', 3, '2026-03-01 12:00+01', NULL, 'Lyon', '{city}');
SELECT * FROM load('sp', 'sp_stage', 'p1', '{"partial": true}');
SELECT id, name, city, at, deleted FROM sp ORDER BY id;
INSERT INTO sp_stage VALUES
    ('p2', 1, 'UPSERT', 3, '2026-03-01 12:00+00', 'Cyd', NULL, '{name}'),
    ('p2', 2, 'DELETE', 3, '2026-03-01 13:00+00', NULL, NULL, NULL);
SELECT * FROM load('sp', 'sp_stage', 'p2', '{"partial": true}');
SELECT id, name, city, at, deleted FROM sp ORDER BY id;
-- Two sparse rows of one instant that merge to different rows: a conflict,
-- held with the instant as pinned text, resolvable.
INSERT INTO sp_stage VALUES
    ('p3', 1, 'UPSERT', 2, '2026-03-02 00:00+00', NULL, 'Milan', '{city}'),
    ('p3', 2, 'UPSERT', 2, '2026-03-02 01:00+01', NULL, 'Turin', '{city}');
SELECT * FROM load('sp', 'sp_stage', 'p3', '{"partial": true}');
SELECT key, ordering, present_columns, staged_payload FROM reconcile.conflicts
 WHERE target = 'sp'::regclass ORDER BY source_row;
SELECT outcome, ordering, written_ordering FROM reconcile_resolve('sp',
    (SELECT batch_id FROM reconcile.conflicts WHERE target = 'sp'::regclass LIMIT 1), '{"id": 2}',
    (SELECT staged_hash FROM reconcile.conflicts WHERE target = 'sp'::regclass AND source_row = 2));
SELECT id, name, city, at, deleted FROM sp ORDER BY id;

-- A numeric version (passed by reference): versions equal by the type,
-- not by their bytes or spelling, are one version of a sparse merge.  Two
-- sparse rows at 2.0 and 2.00 that merge to different rows conflict; two at
-- 3 and 3.000 merging to the same row are one; 10 is above 9.5.
CREATE TABLE spn (id integer PRIMARY KEY, name text, city text, v numeric NOT NULL,
                  deleted boolean NOT NULL DEFAULT false, hash bytea);
CREATE TABLE spn_stage (object_key text, source_row bigint, operation text, id integer,
                        v text, name text, city text, present_columns text[]);
SELECT reconcile_register(target => 'spn', key_columns => '{id}', version_column => 'v',
    deleted_column => 'deleted', hash_column => 'hash', conflict_policy => 'quarantine');
INSERT INTO spn_stage VALUES
    ('n0', 1, 'UPSERT', 1, '1', 'Ana', 'Oslo', NULL),
    ('n0', 2, 'UPSERT', 2, '1', 'Bo', 'Rome', NULL),
    ('n0', 3, 'UPSERT', 3, '9.5', 'Cy', 'Lima', NULL);
SELECT * FROM load('spn', 'spn_stage', 'n0', '{"partial": true}');
INSERT INTO spn_stage VALUES
    ('n1', 1, 'UPSERT', 1, '2.0', NULL, 'Bergen', '{city}'),
    ('n1', 2, 'UPSERT', 1, '2.00', NULL, 'Tromso', '{city}'),
    ('n1', 3, 'UPSERT', 2, '3', NULL, 'Milan', '{city}'),
    ('n1', 4, 'UPSERT', 2, '3.000', NULL, 'Milan', '{city}'),
    ('n1', 5, 'UPSERT', 3, '10', 'Cyd', NULL, '{name}'),
    ('n1', 6, 'UPSERT', 3, '9.75', NULL, 'Lyon', '{city}');
SELECT * FROM load('spn', 'spn_stage', 'n1', '{"partial": true}');
SELECT id, name, city, v FROM spn ORDER BY id;
SELECT key, ordering, staged_payload FROM reconcile.conflicts
 WHERE target = 'spn'::regclass ORDER BY source_row;

-- ---- reconcile_repair over a timestamptz version ----
CREATE TABLE r_src (id integer, name text, seen timestamptz);
CREATE TABLE r_tgt (id integer PRIMARY KEY, name text, seen timestamptz NOT NULL,
                    deleted boolean NOT NULL DEFAULT false, hash bytea);
CREATE TABLE r_stage (object_key text, source_row bigint, operation text, id integer, seen text, name text);
SELECT reconcile_register(target => 'r_tgt', key_columns => '{id}', version_column => 'seen',
    deleted_column => 'deleted', hash_column => 'hash');
INSERT INTO r_stage VALUES ('r1', 1, 'UPSERT', 1, '2026-03-01 10:00+00', 'Ana'),
                           ('r1', 2, 'UPSERT', 2, '2026-03-01 10:00+00', 'Bo'),
                           ('r1', 3, 'UPSERT', 4, '2026-03-01 10:00+00', 'Extra');
SELECT * FROM load('r_tgt', 'r_stage', 'r1');
INSERT INTO r_src VALUES (1, 'Ana', '2026-03-01 10:00+00'), (2, 'Bob', '2026-03-01 11:00+00'),
                         (3, 'Cy', '2026-03-01 09:00+00');
-- No "one more" for a timestamptz: the source's versions are needed ...
SELECT try($$SELECT * FROM reconcile_repair('r_src', 'r_tgt', '{id}', '{"ignore": ["seen"]}')$$)
    AS repair_without_source_version;
-- ... and a delete (4 is only in the target) has none: refused unless extra is kept.
SELECT try($$SELECT * FROM reconcile_repair('r_src', 'r_tgt', '{id}',
    '{"ignore": ["seen"], "version_column": "seen"}')$$) AS repair_delete;
SELECT try($$SELECT * FROM reconcile_repair('r_src', 'r_tgt', '{id}',
    '{"ignore": ["seen"], "version_column": "seen", "dry_run": true}')$$) AS repair_delete_dry_run;
SELECT key, issue, action, outcome FROM reconcile_repair('r_src', 'r_tgt', '{id}',
    '{"ignore": ["seen"], "version_column": "seen", "extra": "keep"}') ORDER BY key::text;
SELECT id, name, seen, deleted FROM r_tgt ORDER BY id;
-- A source version below the target's is stale: the compare-and-set by the type's ordering.
UPDATE r_src SET name = 'Bobby', seen = '2026-03-01 10:30+00' WHERE id = 2;
SELECT key, issue, action, outcome FROM reconcile_repair('r_src', 'r_tgt', '{id}',
    '{"ignore": ["seen"], "version_column": "seen", "extra": "keep"}') ORDER BY key::text;
SELECT id, name, seen FROM r_tgt WHERE id = 2;
-- Several version columns: refused.
CREATE TABLE rb_src (id integer, name text, file text, pos bigint);
SELECT try($$SELECT * FROM reconcile_repair('rb_src', 'bin', '{id}',
    '{"ignore": ["file", "pos"], "extra": "keep"}')$$) AS repair_two_columns;

-- An integer version keeps its "one more" (today's shape, unchanged).
CREATE TABLE i_src (id integer, name text);
CREATE TABLE i_tgt (id integer PRIMARY KEY, name text, version bigint NOT NULL,
                    deleted boolean NOT NULL DEFAULT false, hash bytea);
SELECT reconcile_register(target => 'i_tgt', key_columns => '{id}', version_column => 'version',
    deleted_column => 'deleted', hash_column => 'hash');
INSERT INTO i_src VALUES (1, 'one');
SELECT key, action, outcome FROM reconcile_repair('i_src', 'i_tgt', '{id}');
SELECT id, name, version FROM i_tgt;

DROP TABLE acct, acct_stage, bin, bin_stage, cust, cust_stage, sp, sp_stage, spn, spn_stage,
           r_src, r_tgt, r_stage, rb_src, i_src, i_tgt;
DROP FUNCTION try(text), load(regclass, regclass, text, jsonb);
DROP EXTENSION reconcile;
