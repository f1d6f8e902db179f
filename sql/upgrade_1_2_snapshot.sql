-- Snapshot batches over 1.1 data (issue 23, point 2): on a schema still at
-- 1.1 the option is refused (the receipt could not count what it deletes);
-- after ALTER EXTENSION reconcile UPDATE, 1.1's receipts read
-- deleted_absent 0, a 1.1 batch replays from its receipt, its held
-- conflict resolves, a diff job still runs, and a snapshot batch over the
-- 1.1 rows tombstones the absent ones.
CREATE EXTENSION reconcile VERSION '1.1';
SET client_min_messages = warning;

CREATE TABLE acct (id int PRIMARY KEY, region text, name text, v bigint NOT NULL,
                   gone boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE acct_stage (object_key text, source_row int, operation text, id text, region text,
                         name text, v text);
SELECT reconcile_register('acct', '{id}', 'v', 'gone', 'h');
-- 1.1 data: six customers, a reject, a held conflict (key 3).
INSERT INTO acct_stage VALUES ('o1', 1, 'UPSERT', '1', 'EU', 'Ana', '1'),
                              ('o1', 2, 'UPSERT', '2', 'EU', 'Bo', '1'),
                              ('o1', 3, 'UPSERT', '3', 'EU', 'Cy', '1'),
                              ('o1', 4, 'UPSERT', '3', 'EU', 'Cyd', '1'),
                              ('o1', 5, 'UPSERT', '4', 'US', 'Dee', '1'),
                              ('o1', 6, 'UPSERT', '5', 'EU', 'Eve', '1'),
                              ('o1', 7, 'UPSERT', '6', 'EU', 'Fay', 'v?');
SELECT status, inserted, conflicts, rejected FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":7}]', 'feed', 'o1');
SELECT batch_id AS b1 FROM reconcile.receipts WHERE target = 'acct'::regclass \gset
CREATE TABLE acct_copy (id int PRIMARY KEY, name text);
INSERT INTO acct_copy VALUES (1, 'Ana'), (2, 'Bo'), (7, 'Gil');
INSERT INTO reconcile.diff_jobs VALUES ('acct', 'public.acct_copy', 'public.acct', '{id}', '{"compare": ["name"]}');
SELECT job, findings FROM reconcile_diff_run();

-- The 1.2 library on the 1.1 schema refuses a snapshot, writing nothing.
CREATE TABLE snap_stage (object_key text, source_row int, operation text, id int, region text,
                         name text, v bigint);
INSERT INTO snap_stage VALUES ('full', 1, 'UPSERT', 1, 'EU', 'Ana', 2), ('full', 2, 'UPSERT', 2, 'EU', 'Bo', 2);
SELECT md5(string_agg(a::text, ';' ORDER BY id)) AS before FROM acct a \gset
DO $$
BEGIN
    PERFORM * FROM reconcile_batch('acct', 'snap_stage',
        '[{"object_key":"full","version_id":"1","content_hash":"hs","rows":2}]',
        options => '{"snapshot": {"version": 2, "scope": "region = ''EU''", "max_delete_share": 1}}');
EXCEPTION WHEN OTHERS THEN
    RAISE WARNING '%: %', SQLSTATE, SQLERRM;
END $$;
SELECT md5(string_agg(a::text, ';' ORDER BY id)) = :'before' AS unchanged FROM acct a;
SELECT count(*) AS receipts FROM reconcile.receipts WHERE target = 'acct'::regclass;

ALTER EXTENSION reconcile UPDATE;

-- 1.1's receipt reads deleted_absent 0; its replay returns it, changing nothing.
SELECT staged_rows, inserted, conflicts, rejected, deleted_absent FROM reconcile.receipts
 WHERE target = 'acct'::regclass;
SELECT status, inserted, conflicts, rejected, deleted_absent FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":7}]', 'feed', 'o1',
    options => '{"snapshot": {"version": 9}}');
SELECT md5(string_agg(a::text, ';' ORDER BY id)) = :'before' AS unchanged FROM acct a;
-- The held conflict still resolves.
SELECT status, outcome FROM reconcile_resolve('acct', :'b1', '{"id": 3}',
    (SELECT staged_hash FROM reconcile.conflicts WHERE target = 'acct'::regclass AND source_row = 4));
SELECT job, findings FROM reconcile_diff_run();

-- The snapshot now works on the 1.1 rows: EU's full extract at version 2
-- holds 1 and 2; 3 (resolved at 1) and 5 become tombstones at 2, the US row
-- stays.
SELECT status, updated, unchanged, deleted_absent FROM reconcile_batch('acct', 'snap_stage',
    '[{"object_key":"full","version_id":"1","content_hash":"hs","rows":2}]',
    options => '{"snapshot": {"version": 2, "scope": "region = ''EU''", "max_delete_share": 0.5}}');
SELECT id, region, name, v, gone FROM acct ORDER BY id;
SELECT count(*) AS receipts, sum(deleted_absent) AS deleted_absent FROM reconcile.receipts
 WHERE target = 'acct'::regclass;
-- The diff sees what the snapshot left (tombstones are rows of the target).
SELECT job, findings FROM reconcile_diff_run();

DROP TABLE acct, acct_stage, acct_copy, snap_stage;
DELETE FROM reconcile.diff_jobs;
DROP EXTENSION reconcile;
