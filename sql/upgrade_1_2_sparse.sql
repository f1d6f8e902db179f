-- Sparse updates over 1.1 data: rows, receipts, rejects, a held conflict
-- and a diff job made with the 1.1 schema.  Before ALTER EXTENSION reconcile
-- UPDATE a partial batch is refused (0A000) and nothing changes; after it,
-- the 1.1 state is all there, a replay returns its stored receipt, the held
-- conflict resolves, the diff runs, and sparse rows merge over rows 1.1
-- loaded.
CREATE EXTENSION reconcile VERSION '1.1';
SET client_min_messages = warning;

CREATE TABLE acct (id int PRIMARY KEY, name text, city text, v bigint NOT NULL,
                   gone boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE acct_stage (object_key text, source_row int, operation text, id text,
                         name text, city text, v text);
SELECT reconcile_register('acct', '{id}', 'v', 'gone', 'h');
INSERT INTO acct_stage VALUES ('o1', 1, 'UPSERT', '1', 'Ana', 'Oslo', '1'),
                              ('o1', 2, 'UPSERT', '2', 'Bo', 'Rome', 'v?'),
                              ('o1', 3, 'UPSERT', '3', 'Cy', 'Lima', '1'),
                              ('o1', 4, 'UPSERT', '3', 'Cyd', 'Lima', '1'),
                              ('o1', 5, 'UPSERT', '4', 'Di', 'Kyiv', '1');
SELECT status, inserted, conflicts, rejected FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":5}]', 'feed', 'o1');
SELECT batch_id AS b1 FROM reconcile.receipts WHERE target = 'acct'::regclass \gset
CREATE TABLE acct_copy (id int PRIMARY KEY, name text);
INSERT INTO acct_copy VALUES (1, 'Ana'), (4, 'Dee');
INSERT INTO reconcile.diff_jobs VALUES ('acct', 'public.acct_copy', 'public.acct', '{id}', '{"compare": ["name"]}');

-- A sparse feed staged before the update: refused, nothing written.
CREATE TABLE sparse_stage (object_key text, source_row int, operation text, id text,
                           name text, city text, v text, present_columns text[]);
INSERT INTO sparse_stage VALUES ('p1', 1, 'UPSERT', '1', NULL, 'Bergen', '2', '{city}'),
                                ('p1', 2, 'UPSERT', '4', 'Dina', NULL, '2', '{name}'),
                                ('p1', 3, 'UPSERT', '4', NULL, 'Lviv', '2', '{city}');
SELECT status FROM reconcile_batch('acct', 'sparse_stage',
    '[{"object_key":"p1","version_id":"1","content_hash":"p1","rows":3}]',
    options => '{"partial": true}');
SELECT id, name, city, v FROM acct ORDER BY id;

CREATE FUNCTION state_rows() RETURNS TABLE (state text, row_json jsonb) LANGUAGE sql AS $$
    SELECT 'targets', to_jsonb(t) FROM reconcile.targets t WHERE target = 'acct'::regclass
    UNION ALL SELECT 'receipts', to_jsonb(t) FROM reconcile.receipts t WHERE target = 'acct'::regclass
    UNION ALL SELECT 'batch_objects', to_jsonb(t) FROM reconcile.batch_objects t WHERE target = 'acct'::regclass
    UNION ALL SELECT 'cursors', to_jsonb(t) FROM reconcile.cursors t WHERE target = 'acct'::regclass
    UNION ALL SELECT 'rejects', to_jsonb(t) FROM reconcile.rejects t WHERE target = 'acct'::regclass
    UNION ALL SELECT 'conflicts', to_jsonb(t) FROM reconcile.conflicts t WHERE target = 'acct'::regclass
$$;
CREATE TABLE before_upgrade AS SELECT * FROM state_rows();

ALTER EXTENSION reconcile UPDATE;

-- Every 1.1 state row is still there, its 1.1 columns unchanged (new columns
-- may be added); the held 1.1 rows are whole rows.
SELECT b.state, count(*) AS rows_1_1,
       count(*) FILTER (WHERE EXISTS (SELECT FROM state_rows() a
                                       WHERE a.state = b.state AND a.row_json @> b.row_json)) AS kept
  FROM before_upgrade b GROUP BY b.state ORDER BY b.state;
SELECT key, present_columns, merged_over FROM reconcile.conflicts
 WHERE target = 'acct'::regclass ORDER BY source_row;

-- The 1.1 batch replays from its receipt; its held key resolves; the diff runs.
SELECT status, inserted, conflicts, rejected FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":5}]', 'feed', 'o1');
SELECT status, outcome FROM reconcile_resolve('acct', :'b1', '{"id": 3}',
    (SELECT staged_hash FROM reconcile.conflicts WHERE target = 'acct'::regclass
        AND source_row = 4));
SELECT job, findings FROM reconcile_diff_run('acct');

-- The sparse feed now loads over the rows 1.1 wrote: key 1 keeps its name
-- and moves to Bergen; key 4's two sparse rows at v2 merge into different
-- payloads: held, with their present columns and the 1.1 row they were
-- merged over.
SELECT status, updated, conflicts FROM reconcile_batch('acct', 'sparse_stage',
    '[{"object_key":"p1","version_id":"1","content_hash":"p1","rows":3}]',
    options => '{"partial": true}');
SELECT id, name, city, v,
       h = sha256(convert_to('[' || coalesce(to_json(name)::text, 'null') || ','
                             || coalesce(to_json(city)::text, 'null') || ',' || gone || ']',
                             'UTF8')) AS hash_ok
  FROM acct ORDER BY id;
SELECT key, source_row, present_columns, staged_payload,
       merged_over = (SELECT h FROM acct WHERE id = 4) AS merged_over_1_1_row
  FROM reconcile.conflicts WHERE target = 'acct'::regclass AND object_key = 'p1'
 ORDER BY source_row;
-- resolving one of them writes its merged payload over the 1.1 row
SELECT status, outcome FROM reconcile_resolve('acct',
    (SELECT DISTINCT batch_id FROM reconcile.conflicts WHERE object_key = 'p1'), '{"id": 4}',
    (SELECT staged_hash FROM reconcile.conflicts WHERE object_key = 'p1' AND source_row = 2));
SELECT id, name, city, v FROM acct WHERE id = 4;

DROP TABLE acct, acct_stage, acct_copy, sparse_stage, before_upgrade;
DROP FUNCTION state_rows();
DROP EXTENSION reconcile;
