-- Load options, at registration (reconcile_register's options) and per
-- batch (reconcile_batch's options, overriding the registration's key by
-- key): the reject policy (max_rejects, max_reject_share) and the schema
-- drift policy (unknown_columns).  A batch beyond its reject limit fails
-- with 22000 naming its first rejects and writes nothing; a staged column
-- that is neither a loader column nor a target column is an error (42703)
-- unless unknown_columns is 'ignore'.  Malformed options are 22023.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

-- A statement's SQLSTATE, message, detail and hint, or 'ok'.
CREATE FUNCTION try(q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    detail text;
    hint text;
BEGIN
    EXECUTE q;
    RETURN 'ok';
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL, hint = PG_EXCEPTION_HINT;
    RETURN SQLSTATE || ': ' || SQLERRM || coalesce(nullif(E'\nDETAIL: ' || detail, E'\nDETAIL: '), '')
        || coalesce(nullif(E'\nHINT: ' || hint, E'\nHINT: '), '');
END $$;

CREATE TABLE t (id text PRIMARY KEY, name text, version bigint NOT NULL,
                is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea,
                loaded_at timestamptz DEFAULT now());
SELECT reconcile_register('t', '{id}', 'version', 'is_deleted', 'payload_hash',
                          payload_columns => '{name}');
CREATE TABLE s (object_key text, source_row bigint, operation text, id text, name text, version text);
-- Ten rows in two objects, three of them rejects.
INSERT INTO s VALUES ('a', 1, 'UPSERT', 'K1', 'one', '1'), ('a', 2, 'UPSERT', 'K2', 'two', 'x2'),
                     ('a', 3, 'UPSERT', 'K3', 'three', '1'), ('a', 4, 'UPSERT', NULL, 'four', '1'),
                     ('a', 5, 'MERGE', 'K5', 'five', '1'),
                     ('b', 1, 'UPSERT', 'K6', 'six', '1'), ('b', 2, 'UPSERT', 'K7', 'seven', '1'),
                     ('b', 3, 'UPSERT', 'K8', 'eight', '1'), ('b', 4, 'UPSERT', 'K9', 'nine', '1'),
                     ('b', 5, 'UPSERT', 'K10', 'ten', '1');
-- Each manifest is committed once per target: a name makes each one new.
CREATE FUNCTION m(tag text) RETURNS jsonb LANGUAGE sql AS $$
    SELECT jsonb_build_array(
        jsonb_build_object('object_key', 'a', 'version_id', tag, 'content_hash', 'a' || tag, 'rows', 5),
        jsonb_build_object('object_key', 'b', 'version_id', tag, 'content_hash', 'b' || tag, 'rows', 5))
$$;
-- Everything a batch could leave behind, as one value.
CREATE FUNCTION state() RETURNS text LANGUAGE sql AS $$
    SELECT (SELECT count(*) FROM t) || '/' || (SELECT count(*) FROM reconcile.receipts)
        || '/' || (SELECT count(*) FROM reconcile.batch_objects) || '/' || (SELECT count(*) FROM reconcile.rejects)
        || '/' || (SELECT count(*) FROM reconcile.conflicts) || '/' || (SELECT count(*) FROM reconcile.cursors)
$$;

-- ---- the reject policy ----

-- No limit by default: three rejects of ten, committed.
SELECT status, staged_rows, inserted, rejected FROM reconcile_batch('t', 's', m('default'));
SELECT state() AS before \gset
-- Beyond max_rejects: the batch fails, naming its first rejects in object
-- and row order, and nothing is written (no receipt, no rejects, no rows).
SELECT try($$SELECT * FROM reconcile_batch('t', 's', m('two'), options => '{"max_rejects": 2}')$$);
SELECT state() = :'before' AS nothing_written;
-- The same with a cursor: it does not move.
SELECT try($$SELECT * FROM reconcile_batch('t', 's', m('two'), 'feed', 'two', '{"max_rejects": 2}')$$);
SELECT state() = :'before' AS nothing_written;
-- At the limit: committed.
SELECT status, rejected FROM reconcile_batch('t', 's', m('three'), options => '{"max_rejects": 3}');
-- max_rejects 0: any reject fails the batch; a clean batch passes.
SELECT try($$SELECT * FROM reconcile_batch('t', 's', m('zero'), options => '{"max_rejects": 0}')$$);
CREATE TABLE clean (LIKE s);
INSERT INTO clean SELECT * FROM s WHERE source_row IN (1, 3) AND object_key = 'a';
SELECT status, rejected FROM reconcile_batch('t', 'clean',
    '[{"object_key":"a","version_id":"clean","content_hash":"c","rows":2}]', options => '{"max_rejects": 0}');
-- A share of the batch's staged rows, compared exactly: 3 of 10 is beyond
-- 0.29 and within 0.3.
SELECT try($$SELECT * FROM reconcile_batch('t', 's', m('share'), options => '{"max_reject_share": 0.29}')$$);
SELECT status, rejected FROM reconcile_batch('t', 's', m('share'), options => '{"max_reject_share": 0.3}');
SELECT try($$SELECT * FROM reconcile_batch('t', 's', m('share0'), options => '{"max_reject_share": 0}')$$);
SELECT status FROM reconcile_batch('t', 's', m('share1'), options => '{"max_reject_share": 1}');
-- Both limits: either one fails the batch.
SELECT try($$SELECT * FROM reconcile_batch('t', 's', m('both'),
    options => '{"max_rejects": 100, "max_reject_share": 0.1}')$$);
-- More rejects than the error names: it names the first five.
CREATE TABLE many (LIKE s);
INSERT INTO many SELECT 'm', g, 'UPSERT', 'M' || g, 'n', CASE WHEN g % 2 = 0 THEN 'bad' || g ELSE '1' END
  FROM generate_series(1, 20) g;
SELECT try($$SELECT * FROM reconcile_batch('t', 'many',
    '[{"object_key":"m","version_id":"1","content_hash":"m","rows":20}]', options => '{"max_rejects": 9}')$$);
-- A replay returns its receipt whatever the options say.
SELECT status, rejected FROM reconcile_batch('t', 's', m('default'), options => '{"max_rejects": 0}');

-- Registration: the target's limit applies to every batch; a batch's
-- options override it key by key, null taking the default (no limit) back.
SELECT reconcile_register('t', '{id}', 'version', 'is_deleted', 'payload_hash',
                          payload_columns => '{name}', options => '{"max_rejects": 1}');
SELECT options FROM reconcile.targets WHERE target = 't'::regclass;
SELECT try($$SELECT * FROM reconcile_batch('t', 's', m('registered'))$$);
SELECT status, rejected FROM reconcile_batch('t', 's', m('registered'), options => '{"max_rejects": null}');
SELECT status, rejected FROM reconcile_batch('t', 's', m('overridden'), NULL, NULL, '{"max_rejects": 5}');
-- A batch's other keys leave the registration's limit in place.
SELECT try($$SELECT * FROM reconcile_batch('t', 's', m('other key'), options => '{"unknown_columns": "error"}')$$);
-- Re-registering without options takes them away.
SELECT reconcile_register('t', '{id}', 'version', 'is_deleted', 'payload_hash', payload_columns => '{name}');
SELECT options FROM reconcile.targets WHERE target = 't'::regclass;
SELECT status, rejected FROM reconcile_batch('t', 's', m('unregistered'));

-- Read in parallel, the batch fails the same way, naming the same rejects.
CREATE TABLE wide AS SELECT * FROM many;
INSERT INTO wide SELECT 'w', g, 'UPSERT', 'W' || g, 'w', CASE WHEN g % 1000 = 0 THEN 'bad' || g ELSE '1' END
  FROM generate_series(1, 20000) g;
ALTER TABLE wide SET (parallel_workers = 2);
CREATE TABLE wide_manifest AS SELECT '[{"object_key":"m","version_id":"1","content_hash":"m","rows":20},
    {"object_key":"w","version_id":"1","content_hash":"w","rows":20000}]'::jsonb AS m;
SET max_parallel_maintenance_workers = 0;
SELECT try($$SELECT * FROM reconcile_batch('t', 'wide', (SELECT m FROM wide_manifest),
    options => '{"max_reject_share": 0.001}')$$) AS serial \gset
SET max_parallel_maintenance_workers = 2;
SET client_min_messages = debug1;
SELECT try($$SELECT * FROM reconcile_batch('t', 'wide', (SELECT m FROM wide_manifest),
    options => '{"max_reject_share": 0.001}')$$) AS parallel \gset
SET client_min_messages = warning;
SELECT :'serial' = :'parallel' AS same_error, :'parallel' AS error;
SELECT status, rejected FROM reconcile_batch('t', 'wide', (SELECT m FROM wide_manifest),
    options => '{"max_reject_share": 0.002}');
RESET max_parallel_maintenance_workers;

-- ---- the schema drift policy ----

CREATE TABLE drift (object_key text, source_row bigint, operation text, id text, name text,
                    version text, "Note" text, extra int);
INSERT INTO drift VALUES ('d', 1, 'UPSERT', 'D1', 'dee', '1', 'a note', 7);
-- A staged column the loader and the target do not know is an error naming it.
SELECT state() AS before \gset
SELECT try($$SELECT * FROM reconcile_batch('t', 'drift',
    '[{"object_key":"d","version_id":"1","content_hash":"d","rows":1}]')$$);
SELECT state() = :'before' AS nothing_written;
-- ... unless the batch accepts it: ignored.
SELECT status, inserted FROM reconcile_batch('t', 'drift',
    '[{"object_key":"d","version_id":"1","content_hash":"d","rows":1}]',
    options => '{"unknown_columns": "ignore"}');
SELECT id, name FROM t WHERE id = 'D1';
-- ... or the registration does, which a batch may override.
SELECT reconcile_register('t', '{id}', 'version', 'is_deleted', 'payload_hash',
                          payload_columns => '{name}', options => '{"unknown_columns": "ignore"}');
SELECT status, inserted FROM reconcile_batch('t', 'drift',
    '[{"object_key":"d","version_id":"2","content_hash":"d2","rows":1}]');
SELECT try($$SELECT * FROM reconcile_batch('t', 'drift',
    '[{"object_key":"d","version_id":"3","content_hash":"d3","rows":1}]', options => '{"unknown_columns": "error"}')$$);
SELECT try($$SELECT * FROM reconcile_batch('t', 'drift',
    '[{"object_key":"d","version_id":"3","content_hash":"d3","rows":1}]', options => '{"unknown_columns": null}')$$);
SELECT reconcile_register('t', '{id}', 'version', 'is_deleted', 'payload_hash', payload_columns => '{name}');
-- Known columns: the loader's (version_id, payload_hash too) and every
-- column of the target, loaded or not (loaded_at, is_deleted).  A dropped
-- column of the stage is no column.
CREATE TABLE known (object_key text, version_id text, source_row bigint, operation text, id text,
                    name text, version text, payload_hash text, is_deleted boolean,
                    loaded_at timestamptz, gone int);
ALTER TABLE known DROP COLUMN gone;
INSERT INTO known VALUES ('k', 'k1', 1, 'UPSERT', 'KN', 'known', '1', NULL, true, now());
SELECT status, inserted FROM reconcile_batch('t', 'known',
    '[{"object_key":"k","version_id":"k1","content_hash":"k","rows":1}]');
-- A view with a column too many is refused the same way.
CREATE VIEW drift_view AS SELECT object_key, source_row, operation, id, name, version,
                                 'x'::text AS computed FROM drift;
SELECT try($$SELECT * FROM reconcile_batch('t', 'drift_view',
    '[{"object_key":"d","version_id":"4","content_hash":"d4","rows":1}]')$$);
-- A missing payload column stays an error, whatever the options.
CREATE TABLE short (object_key text, source_row bigint, operation text, id text, version text, extra int);
SELECT try($$SELECT * FROM reconcile_batch('t', 'short',
    '[{"object_key":"x","version_id":"1","content_hash":"x","rows":0}]', options => '{"unknown_columns": "ignore"}')$$);

-- ---- malformed options: 22023 naming the key, at both entry points ----

CREATE TABLE bad_options (o text);
INSERT INTO bad_options VALUES ('[]'), ('1'), ('"max_rejects"'), ('null'), ('{"max_reject": 1}'),
    ('{"MAX_REJECTS": 1}'), ('{"max_rejects": -1}'), ('{"max_rejects": 1.5}'), ('{"max_rejects": "3"}'),
    ('{"max_rejects": true}'), ('{"max_rejects": 1e30}'), ('{"max_rejects": []}'), ('{"max_rejects": {}}'),
    ('{"max_reject_share": -0.1}'), ('{"max_reject_share": 1.01}'), ('{"max_reject_share": "0.5"}'),
    ('{"max_reject_share": false}'), ('{"max_reject_share": [0.5]}'),
    ('{"unknown_columns": "IGNORE"}'), ('{"unknown_columns": "warn"}'), ('{"unknown_columns": 1}'),
    ('{"unknown_columns": true}'), ('{"max_rejects": 1, "unknown_columns": "ignore", "extra": 0}');
SELECT o, try(format($$SELECT * FROM reconcile_batch('t', 's', m('bad'), options => %L)$$, o)) AS batch
  FROM bad_options;
SELECT state() AS before \gset
SELECT o, try(format($$SELECT reconcile_register('t', '{id}', 'version', 'is_deleted', 'payload_hash',
                                                  options => %L)$$, o)) AS register
  FROM bad_options;
SELECT state() = :'before' AS nothing_written, (SELECT options FROM reconcile.targets) AS options;
-- Good options of every kind, and a SQL NULL: the defaults.
SELECT reconcile_register('t', '{id}', 'version', 'is_deleted', 'payload_hash', 'quarantine', '{name}',
                          '{"max_rejects": 0, "max_reject_share": 1, "unknown_columns": "error"}');
SELECT reconcile_register('t', '{id}', 'version', 'is_deleted', 'payload_hash', 'quarantine', '{name}', NULL);
SELECT options FROM reconcile.targets;
SELECT status FROM reconcile_batch('t', 's', m('null options'), NULL, NULL, NULL);

DROP TABLE t, s, clean, many, wide, wide_manifest, drift, known, short, bad_options CASCADE;
DROP FUNCTION try(text), m(text), state();
DROP EXTENSION reconcile;
