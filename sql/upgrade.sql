-- The upgrade chain: data made with 1.0 survives ALTER EXTENSION reconcile
-- UPDATE, 1.1 behaves as 1.1 on it, and the upgraded schema is the schema
-- of a fresh install.
CREATE EXTENSION reconcile VERSION '1.0';
SET client_min_messages = warning;

CREATE TABLE acct (id int PRIMARY KEY, name text, v bigint NOT NULL,
                   gone boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE acct_stage (object_key text, source_row int, operation text, id text, name text, v text);
CREATE TABLE acct_copy (id int PRIMARY KEY, name text);
SELECT reconcile_register('acct', '{id}', 'v', 'gone', 'h');
SELECT reconcile_set_rules('acct', '{"warn": {"named": "name IS NOT NULL"}}');
INSERT INTO acct_stage VALUES ('o1', 1, 'UPSERT', '1', 'Ana', '1'),
                              ('o1', 2, 'UPSERT', '2', NULL, 'v?'),
                              ('o1', 3, 'UPSERT', '3', 'Bo', '1'),
                              ('o1', 4, 'UPSERT', '3', 'Bea', '1');
SELECT status, inserted, conflicts, rejected FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":4}]', 'feed', 'o1');
INSERT INTO acct_copy VALUES (1, 'Ana'), (5, 'Eve');
INSERT INTO reconcile.diff_jobs VALUES ('acct', 'public.acct_copy', 'public.acct', '{id}', '{"compare": ["name"]}');
SELECT job, findings FROM reconcile_diff_run();

-- A target dropped under 1.0 leaves its state behind, under a bare OID.
CREATE TABLE dropped (LIKE acct INCLUDING ALL);
SELECT reconcile_register('dropped', '{id}', 'v', 'gone', 'h');
SELECT status FROM reconcile_batch('dropped', 'acct_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h2","rows":4}]');
SELECT 'dropped'::regclass::oid AS dropped_oid \gset
INSERT INTO reconcile.diff_jobs VALUES ('dropped', 'public.acct_copy', 'public.dropped', '{id}', NULL);
SELECT job, findings FROM reconcile_diff_run('dropped');
DROP TABLE dropped;
SELECT count(*) > 0 AS orphans_under_1_0 FROM reconcile.receipts WHERE target::oid = :dropped_oid;

-- Every state row of acct, as jsonb, before the upgrade.
CREATE FUNCTION state_rows() RETURNS TABLE (state text, row_json jsonb) LANGUAGE sql AS $$
    SELECT 'targets', to_jsonb(t) FROM reconcile.targets t WHERE target = 'acct'::regclass
    UNION ALL SELECT 'target_rules', to_jsonb(t) FROM reconcile.target_rules t WHERE target = 'acct'::regclass
    UNION ALL SELECT 'receipts', to_jsonb(t) FROM reconcile.receipts t WHERE target = 'acct'::regclass
    UNION ALL SELECT 'batch_objects', to_jsonb(t) FROM reconcile.batch_objects t WHERE target = 'acct'::regclass
    UNION ALL SELECT 'cursors', to_jsonb(t) FROM reconcile.cursors t WHERE target = 'acct'::regclass
    UNION ALL SELECT 'rejects', to_jsonb(t) FROM reconcile.rejects t WHERE target = 'acct'::regclass
    UNION ALL SELECT 'conflicts', to_jsonb(t) FROM reconcile.conflicts t WHERE target = 'acct'::regclass
    UNION ALL SELECT 'diff_jobs', to_jsonb(t) FROM reconcile.diff_jobs t
    UNION ALL SELECT 'diff_runs', to_jsonb(t) FROM reconcile.diff_runs t WHERE job = 'acct'
    UNION ALL SELECT 'diff_results', to_jsonb(t) FROM reconcile.diff_results t WHERE target = 'acct'::regclass
$$;
CREATE TABLE before_upgrade AS SELECT * FROM state_rows();
SELECT state, count(*) FROM before_upgrade GROUP BY state ORDER BY state;

ALTER EXTENSION reconcile UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'reconcile';

-- acct's state is intact, row for row: every value of every row is still
-- there (columns 1.1 adds are extra keys) and no row is new.
CREATE FUNCTION same_row(a jsonb, b jsonb) RETURNS boolean LANGUAGE sql AS $$
    SELECT (SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(a) e WHERE b ? e.key) = b
$$;
SELECT * FROM before_upgrade b
 WHERE NOT EXISTS (SELECT FROM state_rows() a WHERE a.state = b.state AND same_row(a.row_json, b.row_json));
SELECT * FROM state_rows() a
 WHERE NOT EXISTS (SELECT FROM before_upgrade b WHERE a.state = b.state AND same_row(a.row_json, b.row_json));
-- The dropped table's state is gone; its diff run stays without its side.
SELECT count(*) AS orphans FROM (
    SELECT target FROM reconcile.targets UNION ALL SELECT target FROM reconcile.receipts
    UNION ALL SELECT target FROM reconcile.batch_objects UNION ALL SELECT target FROM reconcile.cursors
    UNION ALL SELECT target FROM reconcile.rejects UNION ALL SELECT target FROM reconcile.conflicts
    UNION ALL SELECT target FROM reconcile.target_rules UNION ALL SELECT target FROM reconcile.diff_results
    UNION ALL SELECT target FROM reconcile.diff_runs) s
 WHERE target::oid = :dropped_oid;
SELECT job, source, target, findings FROM reconcile.diff_runs ORDER BY run_id;

-- 1.1 on 1.0's data: the old batch replays from its receipt, the same
-- manifest loads into another target, a dropped target takes its state.
SELECT status, inserted, conflicts, rejected FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":4}]', 'feed', 'o1');
CREATE TABLE shadow (LIKE acct INCLUDING ALL);
SELECT reconcile_register('shadow', '{id}', 'v', 'gone', 'h');
SELECT status, inserted, conflicts, rejected FROM reconcile_batch('shadow', 'acct_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":4}]', 'feed', 'o1');
SELECT target, count(*) FROM reconcile.receipts GROUP BY target ORDER BY target::text;
SELECT 'shadow'::regclass::oid AS shadow_oid \gset
DROP TABLE shadow;
SELECT count(*) AS shadow_rows FROM reconcile.receipts WHERE target::oid = :shadow_oid;
SELECT job, findings FROM reconcile_diff_run('acct');

-- The schema: every member of the extension, columns, constraints,
-- indexes, policies, privileges, functions and event triggers, as text.
CREATE FUNCTION schema_text() RETURNS TABLE (kind text, what text) LANGUAGE sql AS $$
    SELECT 'member', pg_describe_object(classid, objid, objsubid)
      FROM pg_depend d JOIN pg_extension e ON d.refobjid = e.oid
     WHERE d.refclassid = 'pg_extension'::regclass AND e.extname = 'reconcile' AND d.deptype = 'e'
    UNION ALL
    SELECT 'column', format('%s.%s %s%s default %s', c.oid::regclass, a.attname,
                            format_type(a.atttypid, a.atttypmod),
                            CASE WHEN a.attnotnull THEN ' not null' ELSE '' END,
                            pg_get_expr(ad.adbin, ad.adrelid))
      FROM pg_class c JOIN pg_attribute a ON a.attrelid = c.oid
      LEFT JOIN pg_attrdef ad ON ad.adrelid = c.oid AND ad.adnum = a.attnum
     WHERE c.relnamespace = 'reconcile'::regnamespace AND a.attnum > 0 AND NOT a.attisdropped
    UNION ALL
    SELECT 'relation', format('%s kind %s rls %s force %s acl %s', c.oid::regclass, c.relkind,
                              c.relrowsecurity, c.relforcerowsecurity, c.relacl)
      FROM pg_class c WHERE c.relnamespace = 'reconcile'::regnamespace
    UNION ALL
    SELECT 'constraint', format('%s %s %s', conrelid::regclass, conname, pg_get_constraintdef(oid))
      FROM pg_constraint WHERE connamespace = 'reconcile'::regnamespace
    UNION ALL
    SELECT 'index', pg_get_indexdef(indexrelid)
      FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid
     WHERE c.relnamespace = 'reconcile'::regnamespace
    UNION ALL
    SELECT 'policy', format('%s %s %s %s', polrelid::regclass, polname, polcmd,
                            pg_get_expr(polqual, polrelid))
      FROM pg_policy p JOIN pg_class c ON c.oid = p.polrelid
     WHERE c.relnamespace = 'reconcile'::regnamespace
    UNION ALL
    SELECT 'function', format('%s secdef %s volatile %s strict %s config %s acl %s src %s',
                              p.oid::regprocedure, prosecdef, provolatile, proisstrict,
                              proconfig, proacl, prosrc)
      FROM pg_proc p JOIN pg_depend d ON d.classid = 'pg_proc'::regclass AND d.objid = p.oid
      JOIN pg_extension e ON d.refobjid = e.oid
     WHERE d.refclassid = 'pg_extension'::regclass AND e.extname = 'reconcile'
    UNION ALL
    SELECT 'event trigger', format('%s on %s enabled %s runs %s', evtname, evtevent, evtenabled,
                                   evtfoid::regprocedure)
      FROM pg_event_trigger
    UNION ALL
    SELECT 'config', format('%s %s', c::regclass, e.extcondition)
      FROM pg_extension e, unnest(e.extconfig) c WHERE e.extname = 'reconcile'
$$;
CREATE TABLE upgraded AS SELECT * FROM schema_text();
-- A few of the rows, for the eye.
SELECT what FROM upgraded WHERE kind IN ('constraint', 'event trigger')
   AND (what LIKE '%receipts%' OR what LIKE '%batch_objects%' OR kind = 'event trigger')
 ORDER BY what COLLATE "C";
SELECT count(*) > 100 AS described FROM upgraded;

DROP TABLE acct, acct_stage, acct_copy;
DROP EXTENSION reconcile;
CREATE EXTENSION reconcile;
SELECT extversion FROM pg_extension WHERE extname = 'reconcile';
SELECT * FROM (SELECT * FROM upgraded EXCEPT SELECT * FROM schema_text()) only_upgraded;
SELECT * FROM (SELECT * FROM schema_text() EXCEPT SELECT * FROM upgraded) only_fresh;

DROP TABLE before_upgrade, upgraded;
DROP FUNCTION state_rows(), schema_text(), same_row(jsonb, jsonb);
DROP EXTENSION reconcile;

-- ---- stage: 1.0's registrations and calls under 1.1 (object versions,
-- load options, the schema drift policy) ----
CREATE EXTENSION reconcile VERSION '1.0';
CREATE TABLE item (id int PRIMARY KEY, name text, v bigint NOT NULL,
                   gone boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE item_stage (object_key text, source_row int, operation text, id text, name text, v text);
-- A stage with a column item does not have.
CREATE TABLE item_wide (LIKE item_stage);
ALTER TABLE item_wide ADD COLUMN note text;
SELECT reconcile_register('item', '{id}', 'v', 'gone', 'h', 'abort');
INSERT INTO item_stage VALUES ('a', 1, 'UPSERT', '1', 'Ann', '1'), ('a', 2, 'UPSERT', 'x', 'Bad', '1');
INSERT INTO item_wide VALUES ('w', 1, 'UPSERT', '9', 'Wes', '1', 'a note'),
                             ('w2', 1, 'UPSERT', '8', 'Wyn', '1', 'a note');
SELECT status, inserted, rejected FROM reconcile_batch('item', 'item_stage',
    '[{"object_key":"a","version_id":"1","content_hash":"ha","rows":2}]', 'feed', 'a@1');
-- Under the 1.0 schema a batch keeps 1.0's behaviour: the unknown column
-- is ignored.
SELECT status, inserted FROM reconcile_batch('item', 'item_wide',
    '[{"object_key":"w","version_id":"1","content_hash":"hw","rows":1}]');
ALTER EXTENSION reconcile UPDATE;
-- The 1.0 registration has no options (the defaults); 1.0's reject names
-- no version.
SELECT options FROM reconcile.targets WHERE target = 'item'::regclass;
SELECT object_key, version_id, source_row FROM reconcile.rejects WHERE target = 'item'::regclass;
-- 1.0's calls keep working: a positional replay, a named new batch.
SELECT status, inserted, rejected FROM reconcile_batch('item', 'item_stage',
    '[{"object_key":"a","version_id":"1","content_hash":"ha","rows":2}]', 'feed', 'a@1');
INSERT INTO item_stage VALUES ('b', 1, 'UPSERT', '2', 'Bob', '1');
SELECT status, inserted FROM reconcile_batch(target => 'item', staged => 'item_stage',
    manifest => '[{"object_key":"b","version_id":"1","content_hash":"hb","rows":1}]',
    source => 'feed', "cursor" => 'b@1');
SELECT reconcile_register('item', '{id}', 'v', 'gone', 'h', 'abort', '{name}');
SELECT reconcile_register(target => 'item', key_columns => '{id}', version_column => 'v',
                          deleted_column => 'gone', hash_column => 'h', conflict_policy => 'abort');
-- Upgrade note: after the update, a staged column that is neither a
-- loader column nor a target column is refused unless the batch (or the
-- registration) accepts it.
SELECT * FROM reconcile_batch('item', 'item_wide',
    '[{"object_key":"w2","version_id":"1","content_hash":"hw2","rows":1}]');
SELECT status, inserted FROM reconcile_batch('item', 'item_wide',
    '[{"object_key":"w2","version_id":"1","content_hash":"hw2","rows":1}]',
    options => '{"unknown_columns": "ignore"}');
SELECT id, name, v FROM item ORDER BY id;
-- 1.1's reject limit on the registration: a batch beyond it writes nothing.
SELECT reconcile_register('item', '{id}', 'v', 'gone', 'h', 'abort', options => '{"max_rejects": 0}');
INSERT INTO item_stage VALUES ('c', 1, 'UPSERT', '3', 'Cy', 'v?');
SELECT * FROM reconcile_batch('item', 'item_stage',
    '[{"object_key":"c","version_id":"1","content_hash":"hc","rows":1}]', 'feed', 'c@1');
SELECT "position" FROM reconcile.cursors WHERE target = 'item'::regclass;
-- Object versions: a version_id column lets one batch load two versions
-- of one object; batch_objects keeps both.
ALTER TABLE item_stage ADD COLUMN version_id text;
INSERT INTO item_stage VALUES ('e', 1, 'UPSERT', '5', 'Eve', '1', 'e1'),
                              ('e', 1, 'UPSERT', '5', 'Eva', '2', 'e2');
SELECT status, inserted, stale FROM reconcile_batch('item', 'item_stage',
    '[{"object_key":"e","version_id":"e1","content_hash":"he1","rows":1},
      {"object_key":"e","version_id":"e2","content_hash":"he2","rows":1}]');
SELECT object_key, version_id FROM reconcile.batch_objects
 WHERE target = 'item'::regclass ORDER BY object_key, version_id;
SELECT id, name, v FROM item ORDER BY id;
DROP TABLE item, item_stage, item_wide;
DROP EXTENSION reconcile;
