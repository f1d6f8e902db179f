-- Snapshot batches (issue 23, point 2): option snapshot of reconcile_batch
-- declares the batch a complete extract, as of a version, of the target or
-- of a scope of it.  Live rows of the scope whose key the batch does not
-- stage, below the snapshot's version, become tombstones at it; a row at
-- or above it stays; the guard max_delete_share refuses a snapshot that
-- would delete too much, writing nothing; bad options and bad scopes are
-- refused with their SQLSTATEs; replays change nothing.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

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

-- The worked example of docs/loader.md ("Snapshot batches").
CREATE TABLE customer_state (customer_id text PRIMARY KEY, region text, name text,
    version bigint NOT NULL, is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea);
SELECT reconcile_register(target => 'customer_state', key_columns => '{customer_id}',
    version_column => 'version', deleted_column => 'is_deleted', hash_column => 'payload_hash');
CREATE TABLE customer_stage (object_key text, source_row bigint, operation text,
                             customer_id text, region text, name text, version text);
-- Yesterday's loads: twenty EU customers and ten US customers at version 1.
INSERT INTO customer_stage
    SELECT 'day1.csv', g, 'UPSERT', 'C' || g, CASE WHEN g <= 20 THEN 'EU' ELSE 'US' END, 'n' || g, '1'
      FROM generate_series(1, 30) g;
SELECT status, inserted FROM reconcile_batch('customer_state', 'customer_stage',
    '[{"object_key":"day1.csv","version_id":"1","content_hash":"sha256:d1","rows":30}]');
-- Since the extract was taken, a change feed wrote C3 at version 7 and C2
-- at version 5, the extract's own version.
UPDATE customer_state SET name = 'n3 (newer)', version = 7 WHERE customer_id = 'C3';
UPDATE customer_state SET name = 'n2 (at 5)', version = 5 WHERE customer_id = 'C2';
-- Tonight's full extract of region EU at version 5: C1, C2 and C3 are not
-- in it, C4 has a new name, and C31 is new.
TRUNCATE customer_stage;
INSERT INTO customer_stage
    SELECT 'eu-full.csv', g, 'UPSERT', 'C' || g, 'EU', CASE WHEN g = 4 THEN 'n4 new' ELSE 'n' || g END, '5'
      FROM generate_series(4, 20) g;
INSERT INTO customer_stage VALUES ('eu-full.csv', 100, 'UPSERT', 'C31', 'EU', 'n31', '5');
SELECT status, staged_rows, inserted, updated, deleted, unchanged, stale, deleted_absent
  FROM reconcile_batch('customer_state', 'customer_stage',
    '[{"object_key":"eu-full.csv","version_id":"1","content_hash":"sha256:e1","rows":18}]',
    options => '{"snapshot": {"version": 5, "scope": "region = ''EU''", "max_delete_share": 0.1}}');
-- C1 is a tombstone at version 5 with its last payload; C3 (version 7,
-- newer than the extract) and C2 (at its version, not lower) stay live;
-- the US scope is untouched.
SELECT customer_id, region, name, version, is_deleted FROM customer_state
 WHERE customer_id IN ('C1', 'C2', 'C3', 'C4', 'C31') ORDER BY customer_id;
SELECT region, count(*) FILTER (WHERE NOT is_deleted) AS live,
       count(*) FILTER (WHERE is_deleted) AS tombstones, max(version) AS max_version
  FROM customer_state GROUP BY region ORDER BY region;
-- The receipt keeps the count; staged_rows still adds up to the eight
-- dispositions, deleted_absent is beside them.
SELECT staged_rows = inserted + updated + deleted + unchanged + stale + duplicates + conflicts + rejected
       AS adds_up, deleted_absent
  FROM reconcile.receipts WHERE target = 'customer_state'::regclass ORDER BY committed_at DESC LIMIT 1;

-- A replay returns the stored receipt and changes nothing, whatever its options say.
CREATE FUNCTION state(tgt regclass) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    rows text;
BEGIN
    EXECUTE format('SELECT md5(coalesce(string_agg(t::text, '';'' ORDER BY t::text), '''')) FROM %s AS t', tgt)
       INTO rows;
    RETURN rows || '/' || (SELECT count(*) FROM reconcile.receipts WHERE target = tgt)
                || '/' || (SELECT count(*) FROM reconcile.batch_objects WHERE target = tgt)
                || '/' || (SELECT count(*) FROM reconcile.rejects WHERE target = tgt);
END $$;
SELECT state('customer_state') AS before \gset
SELECT status, deleted_absent FROM reconcile_batch('customer_state', 'customer_stage',
    '[{"object_key":"eu-full.csv","version_id":"1","content_hash":"sha256:e1","rows":18}]',
    options => '{"snapshot": {"version": 9, "max_delete_share": 1}}');
SELECT state('customer_state') = :'before' AS unchanged;

-- Tombstones stay tombstones: the next extract of EU, at version 6, again
-- without C1, C2 and C3, deletes C2 (now lower than the snapshot) and
-- leaves C1 as it was (not live) and C3 (version 7).
UPDATE customer_stage SET version = '6';
SELECT status, unchanged, updated, deleted_absent FROM reconcile_batch('customer_state', 'customer_stage',
    '[{"object_key":"eu-full.csv","version_id":"2","content_hash":"sha256:e2","rows":18}]',
    options => '{"snapshot": {"version": 6, "scope": "region = ''EU''"}}');
SELECT customer_id, version, is_deleted FROM customer_state
 WHERE customer_id IN ('C1', 'C2', 'C3') ORDER BY 1;

-- The guard: an extract of EU at version 8 that holds 10 of its 19 live
-- rows would delete 9 (47.4%); the batch fails naming the counts, and
-- nothing is written (not the updates of the rows it holds either).
SELECT state('customer_state') AS before \gset
TRUNCATE customer_stage;
INSERT INTO customer_stage
    SELECT 'eu-part.csv', g, 'UPSERT', 'C' || g, 'EU', 'changed ' || g, '8' FROM generate_series(4, 13) g;
SELECT try($$SELECT * FROM reconcile_batch('customer_state', 'customer_stage',
    '[{"object_key":"eu-part.csv","version_id":"1","content_hash":"sha256:p1","rows":10}]',
    options => '{"snapshot": {"version": 8, "scope": "region = ''EU''"}}')$$) AS guard;
SELECT state('customer_state') = :'before' AS nothing_written;
-- The same with max_delete_share 0.47: still beyond (9 > 0.47 * 19 = 8.93).
SELECT try($$SELECT * FROM reconcile_batch('customer_state', 'customer_stage',
    '[{"object_key":"eu-part.csv","version_id":"1","content_hash":"sha256:p1","rows":10}]',
    options => '{"snapshot": {"version": 8, "scope": "region = ''EU''", "max_delete_share": 0.47}}')$$) AS guard;
-- An empty extract of a non-empty scope is refused by the same guard.
SELECT try($$SELECT * FROM reconcile_batch('customer_state', 'customer_stage',
    '[{"object_key":"eu-empty.csv","version_id":"1","content_hash":"sha256:0","rows":0}]',
    options => '{"snapshot": {"version": 8, "scope": "region = ''US''"}}')$$) AS empty_extract;
-- Without a scope, the whole table's live rows are counted.
SELECT try($$SELECT * FROM reconcile_batch('customer_state', 'customer_stage',
    '[{"object_key":"eu-part.csv","version_id":"1","content_hash":"sha256:p1","rows":10}]',
    options => '{"snapshot": {"version": 8}}')$$) AS whole_table;
SELECT state('customer_state') = :'before' AS nothing_written;
-- At 0.5 the partial extract passes: 9 EU rows become tombstones at 8.
SELECT status, updated, deleted_absent FROM reconcile_batch('customer_state', 'customer_stage',
    '[{"object_key":"eu-part.csv","version_id":"1","content_hash":"sha256:p1","rows":10}]',
    options => '{"snapshot": {"version": 8, "scope": "region = ''EU''", "max_delete_share": 0.5}}');
SELECT region, is_deleted, version, count(*) FROM customer_state GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
-- An empty extract with max_delete_share 1 deletes the whole scope: the
-- caller said so.
SELECT status, staged_rows, deleted_absent FROM reconcile_batch('customer_state', 'customer_stage',
    '[{"object_key":"us-empty.csv","version_id":"1","content_hash":"sha256:0","rows":0}]',
    options => '{"snapshot": {"version": 2, "scope": "region = ''US''", "max_delete_share": 1}}');
SELECT region, is_deleted, version, count(*) FROM customer_state GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;

-- A snapshot's tombstone is what a staged DELETE of the row leaves: the
-- same hash (of the row's last payload, deleted), the payload kept; the
-- receipt's checksum counts it as a written row.
CREATE TABLE twin_a (id int PRIMARY KEY, val text, v bigint NOT NULL, del boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE twin_b (LIKE twin_a INCLUDING ALL);
SELECT reconcile_register('twin_a', '{id}', 'v', 'del', 'h');
SELECT reconcile_register('twin_b', '{id}', 'v', 'del', 'h');
CREATE TABLE twin_stage (object_key text, source_row bigint, operation text, id int, val text, v bigint);
INSERT INTO twin_stage SELECT 'load', g, 'UPSERT', g, 'v' || g, 1 FROM generate_series(1, 10) g;
SELECT status FROM reconcile_batch('twin_a', 'twin_stage', '[{"object_key":"load","version_id":"1","content_hash":"h","rows":10}]');
SELECT status FROM reconcile_batch('twin_b', 'twin_stage', '[{"object_key":"load","version_id":"1","content_hash":"h","rows":10}]');
TRUNCATE twin_stage;
-- twin_a: a staged DELETE of key 10 at version 3; twin_b: a snapshot without key 10.
INSERT INTO twin_stage SELECT 'next', g, 'UPSERT', g, 'v' || g, 1 FROM generate_series(1, 9) g;
INSERT INTO twin_stage VALUES ('next', 10, 'DELETE', 10, 'v10', 3);
SELECT status, deleted, deleted_absent, checksum AS checksum_a FROM reconcile_batch('twin_a', 'twin_stage',
    '[{"object_key":"next","version_id":"1","content_hash":"h","rows":10}]') \gset
DELETE FROM twin_stage WHERE id = 10;
SELECT status, deleted, deleted_absent, checksum AS checksum_b FROM reconcile_batch('twin_b', 'twin_stage',
    '[{"object_key":"next","version_id":"1","content_hash":"h","rows":9}]',
    options => '{"snapshot": {"version": 3, "max_delete_share": 0.1}}') \gset
SELECT :'checksum_a' = :'checksum_b' AS same_checksum;
SELECT (SELECT row(val, v, del, h) FROM twin_a WHERE id = 10) = (SELECT row(val, v, del, h) FROM twin_b WHERE id = 10)
       AS same_tombstone,
       (SELECT del FROM twin_b WHERE id = 10) AS deleted;
-- The snapshot's tombstone stops a late lower version of key 10, as any
-- tombstone does; a later version revives it.
TRUNCATE twin_stage;
INSERT INTO twin_stage VALUES ('late', 1, 'UPSERT', 10, 'late', 2);
SELECT status, stale, updated FROM reconcile_batch('twin_b', 'twin_stage', '[{"object_key":"late","version_id":"1","content_hash":"h","rows":1}]');
SELECT id, val, v, del FROM twin_b WHERE id = 10;
TRUNCATE twin_stage;
INSERT INTO twin_stage VALUES ('again', 1, 'UPSERT', 10, 'back', 4);
SELECT status, updated FROM reconcile_batch('twin_b', 'twin_stage', '[{"object_key":"again","version_id":"1","content_hash":"h","rows":1}]');
SELECT id, val, v, del FROM twin_b WHERE id = 10;

-- Keys the batch stages are not absent, whatever it decides for them: a
-- stale row, a staged DELETE, a held conflict.
TRUNCATE twin_stage;
INSERT INTO twin_stage SELECT 'keep', g, 'UPSERT', g, 'v' || g, 1 FROM generate_series(2, 10) g;
UPDATE twin_stage SET v = 0 WHERE id = 2;                        -- stale against version 1
UPDATE twin_stage SET operation = 'DELETE', v = 5 WHERE id = 3;  -- a staged DELETE
UPDATE twin_stage SET val = 'other' WHERE id = 4;                -- same version, other payload: a conflict
SELECT status, stale, deleted, conflicts, deleted_absent FROM reconcile_batch('twin_a', 'twin_stage',
    '[{"object_key":"keep","version_id":"1","content_hash":"h","rows":9}]',
    options => '{"snapshot": {"version": 5, "max_delete_share": 0.2}}');
SELECT id, val, v, del FROM twin_a WHERE id <= 4 ORDER BY id;

-- A snapshot accepts no rejected row: its key may be one the extract holds.
CREATE TABLE rej_stage (object_key text, source_row bigint, operation text, id text, val text, v text);
INSERT INTO rej_stage SELECT 'rej', g, 'UPSERT', g, 'v' || g, '1' FROM generate_series(5, 10) g;
UPDATE rej_stage SET v = 'x' WHERE id = '6';
SELECT state('twin_a') AS before \gset
SELECT try($$SELECT * FROM reconcile_batch('twin_a', 'rej_stage',
    '[{"object_key":"rej","version_id":"1","content_hash":"h","rows":6}]',
    options => '{"snapshot": {"version": 6, "max_delete_share": 1}}')$$) AS rejects;
SELECT state('twin_a') = :'before' AS nothing_written;

-- Bad options, each refused before anything is read, with its SQLSTATE.
CREATE TABLE bad_snapshots (o jsonb);
INSERT INTO bad_snapshots VALUES
    ('{"snapshot": 5}'), ('{"snapshot": []}'), ('{"snapshot": "yes"}'), ('{"snapshot": {}}'),
    ('{"snapshot": {"scope": "id > 1"}}'), ('{"snapshot": {"version": true}}'),
    ('{"snapshot": {"version": null}}'), ('{"snapshot": {"version": [1]}}'),
    ('{"snapshot": {"version": "v5"}}'), ('{"snapshot": {"version": 1.5}}'),
    ('{"snapshot": {"version": 1e30}}'),
    ('{"snapshot": {"version": 5, "scope": 1}}'), ('{"snapshot": {"version": 5, "scope": true}}'),
    ('{"snapshot": {"version": 5, "max_delete_share": -0.1}}'),
    ('{"snapshot": {"version": 5, "max_delete_share": 1.5}}'),
    ('{"snapshot": {"version": 5, "max_delete_share": "0.5"}}'),
    ('{"snapshot": {"version": 5, "max_delete_share": null}}'),
    ('{"snapshot": {"version": 5, "Version": 5}}'), ('{"snapshot": {"version": 5, "scpoe": "id > 1"}}');
SELECT o, try(format($$SELECT * FROM reconcile_batch('twin_a', 'twin_stage',
    '[{"object_key":"bad","version_id":"1","content_hash":"h","rows":0}]', options => %L)$$, o)) AS batch
  FROM bad_snapshots;
-- snapshot: null is no snapshot.
SELECT status, deleted_absent FROM reconcile_batch('twin_a', 'twin_stage',
    '[{"object_key":"none","version_id":"1","content_hash":"h","rows":0}]', options => '{"snapshot": null}');
-- A registration has no snapshot: it describes one batch.
SELECT try($$SELECT reconcile_register('twin_a', '{id}', 'v', 'del', 'h',
    options => '{"snapshot": {"version": 5}}')$$) AS registration;

-- Bad scopes: the scope is one boolean expression over the target's
-- columns with immutable functions only, and never more than that.
CREATE TABLE bad_scopes (scope text);
INSERT INTO bad_scopes VALUES
    ('val ='),                                  -- does not parse
    ('(val'),
    ('val = ''a'''''),
    ('/* open comment'),
    ('val = ''a'') OR (1 = 1'),                 -- one expression, (val = 'a') OR (1 = 1): every row, the guard refuses
    ('true); DROP TABLE twin_a; --'),           -- a second statement
    ('true) FROM pg_class WHERE (true'),        -- a FROM
    ('true AS x'),
    ('true, false'),
    ('nope = 1'),                               -- unknown column
    ('twin_a.val = ''a'''),                     -- only the alias t names the target
    ('ctid = ''(0,1)'''), ('xmin = ''1'''),     -- system columns
    ('t IS NOT NULL'),                          -- the whole row
    ('id IN (SELECT 1)'), ('EXISTS (SELECT FROM pg_class)'),  -- subqueries
    ('id = $1'),                                -- a parameter
    ('count(*) > 1'), ('row_number() OVER () > 1'), ('generate_series(1, id) > 1'),
    ('val'), ('id + 1'), ('NULL'),              -- not boolean
    ('random() < 0.5'), ('v < extract(epoch FROM now())'), ('val = current_user'),  -- not immutable
    ('nosuchfunction(id)'),
    ('');
SELECT scope, try(format($$SELECT * FROM reconcile_batch('twin_a', 'twin_stage',
    '[{"object_key":"bad","version_id":"1","content_hash":"h","rows":0}]',
    options => jsonb_build_object('snapshot', jsonb_build_object('version', 9, 'scope', %L)))$$, scope)) AS batch
  FROM bad_scopes;
SELECT count(*) AS twin_a_still_there FROM twin_a;

-- Scopes that are accepted: immutable functions, casts, t.column, NULL as
-- "not in the scope", comments, a quoted name.  Each runs in turn.
CREATE TABLE scoped (id int PRIMARY KEY, "Region Code" text, tags text[], amount numeric,
                     v bigint NOT NULL, del boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('scoped', '{id}', 'v', 'del', 'h');
CREATE TABLE scoped_stage (object_key text, source_row bigint, operation text, id int,
                           "Region Code" text, tags text[], amount numeric, v bigint);
INSERT INTO scoped_stage SELECT 'all', g, 'UPSERT', g, CASE WHEN g % 3 = 0 THEN NULL ELSE 'R' || g % 3 END,
    ARRAY['t' || g % 2], g * 1.5, 1 FROM generate_series(1, 30) g;
SELECT status, inserted FROM reconcile_batch('scoped', 'scoped_stage', '[{"object_key":"all","version_id":"1","content_hash":"h","rows":30}]');
CREATE TABLE good_scopes (n int, scope text);
INSERT INTO good_scopes VALUES
    (1, 'lower(t."Region Code") = ''r1'''),
    (2, '"Region Code" IS NULL -- rows without a region'),
    (3, 'tags @> ARRAY[''t1''] AND amount::int > 20'),
    (4, '"Region Code" = ''R2'' /* a comment */ AND id % 2 = 0');
-- Each scope's extract is empty: with max_delete_share 1 each deletes its
-- scope's rows and nothing else (rows whose scope is NULL are not in it).
SELECT n, (SELECT deleted_absent FROM reconcile_batch('scoped', 'scoped_stage',
            jsonb_build_array(jsonb_build_object('object_key', 'empty' || n, 'version_id', '1', 'content_hash', 'h', 'rows', 0)),
            options => jsonb_build_object('snapshot', jsonb_build_object('version', 1 + n, 'scope', scope, 'max_delete_share', 1)))) AS deleted_absent
  FROM good_scopes ORDER BY n;
-- Scope 1: R1 (ids 1, 4, ..., 28); 2: no region (3, 6, ..., 30); 3: R2, odd,
-- amount over 20 (17, 23, 29); 4: R2 and even (2, 8, 14, 20, 26).
SELECT v, del, "Region Code", array_agg(id ORDER BY id) FROM scoped GROUP BY 1, 2, 3 ORDER BY 1, 2, 3;
SELECT count(*) FILTER (WHERE NOT del) AS live, count(*) FILTER (WHERE del) AS tombstones FROM scoped;

-- The version is read in the version column's type: an integer version
-- column refuses what it cannot hold; text forms of numbers work.
CREATE TABLE small_v (id int PRIMARY KEY, val text, v smallint NOT NULL, del boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('small_v', '{id}', 'v', 'del', 'h');
SELECT try($$SELECT * FROM reconcile_batch('small_v', 'twin_stage',
    '[{"object_key":"bad","version_id":"1","content_hash":"h","rows":0}]',
    options => '{"snapshot": {"version": 40000}}')$$) AS too_big;
SELECT status, deleted_absent FROM reconcile_batch('small_v', 'twin_stage',
    '[{"object_key":"bad","version_id":"1","content_hash":"h","rows":0}]',
    options => '{"snapshot": {"version": "7"}}');

-- A two-column key, the general write path (a trigger sees every
-- tombstone as an UPDATE), and a partitioned target.
CREATE TABLE pk2 (a int, b text, val text, v bigint NOT NULL, del boolean NOT NULL DEFAULT false, h bytea,
                  PRIMARY KEY (a, b)) PARTITION BY HASH (a);
CREATE TABLE pk2_0 PARTITION OF pk2 FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE pk2_1 PARTITION OF pk2 FOR VALUES WITH (MODULUS 2, REMAINDER 1);
SELECT reconcile_register('pk2', '{a,b}', 'v', 'del', 'h');
CREATE TABLE pk2_log (a int, b text, old_del boolean, new_del boolean, new_v bigint);
CREATE FUNCTION pk2_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO pk2_log VALUES (NEW.a, NEW.b, OLD.del, NEW.del, NEW.v);
    RETURN NEW;
END $$;
CREATE TRIGGER pk2_audit BEFORE UPDATE ON pk2 FOR EACH ROW EXECUTE FUNCTION pk2_audit();
CREATE TABLE pk2_stage (object_key text, source_row bigint, operation text, a int, b text, val text, v bigint);
INSERT INTO pk2_stage SELECT 'p', g, 'UPSERT', g % 5, 'x' || g, 'v' || g, 1 FROM generate_series(1, 20) g;
SELECT status, inserted FROM reconcile_batch('pk2', 'pk2_stage', '[{"object_key":"p","version_id":"1","content_hash":"h","rows":20}]');
DELETE FROM pk2_stage WHERE source_row IN (3, 4, 5);   -- (3, x3), (4, x4) absent; (0, x5) out of the scope
-- 2 of the scope's 8 live rows: exactly max_delete_share 0.25, which passes.
SELECT status, unchanged, deleted_absent FROM reconcile_batch('pk2', 'pk2_stage',
    '[{"object_key":"p","version_id":"2","content_hash":"h","rows":17}]',
    options => '{"snapshot": {"version": 2, "scope": "a > 2", "max_delete_share": 0.25}}');
SELECT * FROM pk2_log ORDER BY a, b;
SELECT a, b, v, del FROM pk2 WHERE del ORDER BY a, b;

-- Privileges: a tombstone is an UPDATE of the target, so a role that may
-- run batches (SELECT, INSERT, UPDATE on the target) may run snapshots;
-- no DELETE is needed.  Without UPDATE, no batch at all.
CREATE ROLE reconcile_snapshot_loader;
GRANT SELECT, INSERT, UPDATE ON twin_b TO reconcile_snapshot_loader;
GRANT SELECT ON twin_stage TO reconcile_snapshot_loader;
TRUNCATE twin_stage;
INSERT INTO twin_stage SELECT 'role', g, 'UPSERT', g, 'v' || g, 9 FROM generate_series(1, 9) g;
SET ROLE reconcile_snapshot_loader;
SELECT status, updated, deleted_absent FROM reconcile_batch('twin_b', 'twin_stage',
    '[{"object_key":"role","version_id":"1","content_hash":"h","rows":9}]',
    options => '{"snapshot": {"version": 9}}');
RESET ROLE;
REVOKE UPDATE ON twin_b FROM reconcile_snapshot_loader;
SET ROLE reconcile_snapshot_loader;
SELECT try($$SELECT * FROM reconcile_batch('twin_b', 'twin_stage',
    '[{"object_key":"role","version_id":"2","content_hash":"h","rows":9}]',
    options => '{"snapshot": {"version": 10}}')$$) AS without_update;
-- The scope runs with the caller's rights: a function the caller may not
-- execute is refused.
RESET ROLE;
GRANT UPDATE ON twin_b TO reconcile_snapshot_loader;
CREATE FUNCTION secret_scope(int) RETURNS boolean LANGUAGE sql IMMUTABLE AS 'SELECT $1 > 0';
REVOKE EXECUTE ON FUNCTION secret_scope(int) FROM PUBLIC;
SET ROLE reconcile_snapshot_loader;
SELECT try($$SELECT * FROM reconcile_batch('twin_b', 'twin_stage',
    '[{"object_key":"role","version_id":"2","content_hash":"h","rows":9}]',
    options => '{"snapshot": {"version": 10, "scope": "public.secret_scope(id)"}}')$$) AS scope_rights;
RESET ROLE;

DROP TABLE customer_state, customer_stage, twin_a, twin_b, twin_stage, rej_stage, bad_snapshots,
    bad_scopes, scoped, scoped_stage, good_scopes, small_v, pk2, pk2_stage, pk2_log;
DROP FUNCTION try(text), state(regclass), pk2_audit(), secret_scope(int);
DROP ROLE reconcile_snapshot_loader;
DROP EXTENSION reconcile;
