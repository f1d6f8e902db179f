-- pgTAP: every reject reason of reconcile_batch.  A bad staged row lands in
-- reconcile.rejects (one row per problem, naming object, source row, column
-- and raw value), counts once as rejected, and the rest of the batch loads.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION reconcile;
SELECT plan(29);

CREATE TABLE acct (
    id       integer PRIMARY KEY,
    label    varchar(5),
    amount   integer,
    born     date,
    version  bigint NOT NULL,
    deleted  boolean NOT NULL DEFAULT false,
    hash     bytea
);
SELECT reconcile_register('acct', '{id}', 'version', 'deleted', 'hash');
CREATE TABLE acct_stage (object_key text, source_row bigint, operation text,
    id text, label text, amount text, born text, version text);

INSERT INTO acct_stage VALUES
    ('r/1',  1, 'UPSERT', '1',    'ok',      '10',  '2024-01-01', '1'),
    ('r/1',  2, 'UPSERT', '2',    'ok',      'ten', '2024-01-01', '1'),
    ('r/1',  3, 'UPSERT', NULL,   'ok',      '10',  '2024-01-01', '1'),
    ('r/1',  4, 'UPSERT', '4',    'ok',      '10',  '2024-01-01', NULL),
    ('r/1',  5, 'UPSERT', '5',    'ok',      '10',  '2024-01-01', '1.5'),
    ('r/1',  6, 'UPSERT', '6',    'ok',      '10',  '2024-01-01', '-1'),
    ('r/1',  7, 'UPSERT', '7',    'ok',      '10',  '2024-01-01', '9223372036854775808'),
    ('r/1',  8, 'MERGE',  '8',    'ok',      '10',  '2024-01-01', '1'),
    ('r/1', NULL, 'UPSERT', '9',  'ok',      '10',  '2024-01-01', '1'),
    ('r/1', 10, 'UPSERT', '10',   'toolong', '10',  '2024-01-01', '1'),
    ('r/1', 11, NULL,     '11',   'ok',      '10',  '2024-01-01', '1'),
    ('r/1', 12, 'UPSERT', 'x12',  'ok',      '10',  '2024-01-01', '1'),
    ('r/1', 13, 'UPSERT', NULL,   'ok',      '1e9999', '2024-13-45', '1'),
    ('r/1', 14, 'upsert', '14',   'ok',      '10',  '2024-01-01', '1'),
    ('r/1', 15, 'UPSERT', '15',   'ok',      '3000000000', '2024-01-01', '1'),
    ('r/1', 16, 'UPSERT', '16',   'ok',      '10',  '2024-02-30', '1'),
    ('r/1', 17, 'DELETE', '17',   NULL,      NULL,  NULL,        '2'),
    ('r/1', 18, 'UPSERT', '18',   'ok',      '10',  '2024-01-01', '');

CREATE TEMP TABLE r AS SELECT * FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"r/1","version_id":"1","content_hash":"x","rows":18}]');

SELECT results_eq('SELECT inserted, deleted, rejected, staged_rows FROM r',
    $$VALUES (1::bigint, 1::bigint, 16::bigint, 18::bigint)$$,
    'one row inserted, one tombstone, sixteen rows rejected, all eighteen counted');
SELECT results_eq('SELECT id, label, amount, version, deleted FROM acct ORDER BY id',
    $$VALUES (1, 'ok'::varchar, 10, 1::bigint, false), (17, NULL, NULL, 2, true)$$,
    'the rest of the batch loads');
SELECT is((SELECT (reconcile_receipt_objects(target, batch_id) -> 0 ->> 'rejected')::int FROM r), 16, 'per-object rejected count');

CREATE TEMP VIEW rej AS
    SELECT source_row, column_name, raw_value, reason FROM reconcile.rejects
    WHERE batch_id = (SELECT batch_id FROM r);
SELECT is((SELECT count(DISTINCT object_key) FROM reconcile.rejects WHERE batch_id = (SELECT batch_id FROM r)),
    1::bigint, 'rejects name their object');
SELECT is((SELECT target FROM reconcile.rejects WHERE batch_id = (SELECT batch_id FROM r) LIMIT 1),
    'acct'::regclass, 'rejects name their target');

SELECT results_eq($$SELECT column_name, raw_value, reason FROM rej WHERE source_row = 2$$,
    $$VALUES ('amount'::text, 'ten'::text, 'invalid input syntax for type integer: "ten"'::text)$$,
    'a value that does not cast');
SELECT results_eq($$SELECT column_name, raw_value, reason FROM rej WHERE source_row = 3$$,
    $$VALUES ('id'::text, NULL::text, 'key column is null'::text)$$,
    'a NULL key');
SELECT results_eq($$SELECT column_name, raw_value, reason FROM rej WHERE source_row = 4$$,
    $$VALUES ('version'::text, NULL::text, 'version is null'::text)$$,
    'a NULL version');
SELECT results_eq($$SELECT column_name, raw_value, reason FROM rej WHERE source_row = 5$$,
    $$VALUES ('version'::text, '1.5'::text, 'version is not a valid bigint: invalid input syntax for type bigint: "1.5"'::text)$$,
    'a non-integer version');
SELECT results_eq($$SELECT column_name, raw_value, reason FROM rej WHERE source_row = 6$$,
    $$VALUES ('version'::text, '-1'::text, 'version is negative'::text)$$,
    'a negative version');
SELECT results_eq($$SELECT column_name, raw_value FROM rej WHERE source_row = 7$$,
    $$VALUES ('version'::text, '9223372036854775808'::text)$$,
    'a version overflowing bigint');
SELECT matches((SELECT reason FROM rej WHERE source_row = 7), 'out of range', 'which says it is out of range');
SELECT results_eq($$SELECT column_name, raw_value, reason FROM rej WHERE source_row = 8$$,
    $$VALUES ('operation'::text, 'MERGE'::text, 'unknown operation, expected UPSERT or DELETE'::text)$$,
    'an unknown operation');
SELECT results_eq($$SELECT column_name, raw_value, reason FROM rej WHERE source_row = 14$$,
    $$VALUES ('operation'::text, 'upsert'::text, 'unknown operation, expected UPSERT or DELETE'::text)$$,
    'operations are case-sensitive');
SELECT results_eq($$SELECT column_name, raw_value, reason FROM rej WHERE source_row = 11$$,
    $$VALUES ('operation'::text, NULL::text, 'operation is null'::text)$$,
    'a NULL operation');
SELECT results_eq($$SELECT column_name, raw_value, reason FROM rej WHERE source_row IS NULL$$,
    $$VALUES ('source_row'::text, NULL::text, 'source_row is null'::text)$$,
    'a NULL source_row');
SELECT results_eq($$SELECT column_name, raw_value, reason FROM rej WHERE source_row = 10$$,
    $$VALUES ('label'::text, 'toolong'::text, 'value too long for type character varying(5)'::text)$$,
    'a value too long for varchar(n)');
SELECT results_eq($$SELECT column_name, raw_value FROM rej WHERE source_row = 12$$,
    $$VALUES ('id'::text, 'x12'::text)$$,
    'a key that does not cast');
SELECT results_eq($$SELECT column_name, raw_value FROM rej WHERE source_row = 15$$,
    $$VALUES ('amount'::text, '3000000000'::text)$$,
    'a value out of range for integer');
SELECT results_eq($$SELECT column_name, raw_value FROM rej WHERE source_row = 16$$,
    $$VALUES ('born'::text, '2024-02-30'::text)$$,
    'a date that does not exist');
SELECT results_eq($$SELECT column_name, raw_value FROM rej WHERE source_row = 18$$,
    $$VALUES ('version'::text, ''::text)$$,
    'an empty version');
SELECT results_eq($$SELECT column_name, raw_value, reason FROM rej WHERE source_row = 13 ORDER BY column_name$$,
    $$VALUES ('amount'::text, '1e9999'::text, 'invalid input syntax for type integer: "1e9999"'::text),
             ('born', '2024-13-45', 'date/time field value out of range: "2024-13-45"'),
             ('id', NULL, 'key column is null')$$,
    'a row with three problems gets three reject rows');
SELECT results_eq($$SELECT source_row, count(*) FROM rej GROUP BY source_row HAVING count(*) > 1$$,
    $$VALUES (13::bigint, 3::bigint)$$,
    'only that row has more than one reject row');
SELECT is((SELECT count(DISTINCT source_row) + count(*) FILTER (WHERE source_row IS NULL) FROM rej), 16::bigint,
    'sixteen rejected rows');

-- A NULL source_row together with another problem.
INSERT INTO acct_stage VALUES ('r/2', NULL, 'NOPE', '20', 'ok', '10', '2024-01-01', '1');
CREATE TEMP TABLE r2 AS SELECT * FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"r/2","version_id":"1","content_hash":"x","rows":1}]');
SELECT results_eq('SELECT rejected, staged_rows FROM r2', $$VALUES (1::bigint, 1::bigint)$$,
    'a row with NULL source_row and a bad operation counts once');
SELECT results_eq($$SELECT object_key, source_row, column_name, raw_value FROM reconcile.rejects
                    WHERE batch_id = (SELECT batch_id FROM r2) ORDER BY column_name$$,
    $$VALUES ('r/2'::text, NULL::bigint, 'operation'::text, 'NOPE'::text),
             ('r/2', NULL, 'source_row', NULL)$$,
    'and gets both reject rows');

-- A batch where every row is rejected still commits a receipt.
INSERT INTO acct_stage VALUES ('r/3', 1, 'UPSERT', NULL, 'ok', '10', '2024-01-01', '1');
SELECT results_eq($$SELECT status, inserted, rejected FROM reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"r/3","version_id":"1","content_hash":"x","rows":1}]')$$,
    $$VALUES ('committed'::text, 0::bigint, 1::bigint)$$,
    'a batch of only rejects commits its receipt');

-- A staged relation with typed columns: values already of the target type
-- are taken as they are; a domain's CHECK still rejects.
CREATE DOMAIN pos_int AS integer CHECK (VALUE > 0);
CREATE TABLE dom (id integer PRIMARY KEY, qty pos_int, version integer NOT NULL,
    deleted boolean NOT NULL DEFAULT false, hash bytea);
SELECT reconcile_register('dom', '{id}', 'version', 'deleted', 'hash');
CREATE TABLE dom_stage (object_key text, source_row integer, operation text, id integer, qty text, version smallint);
INSERT INTO dom_stage VALUES ('d/1', 1, 'UPSERT', 1, '5', 1), ('d/1', 2, 'UPSERT', 2, '-5', 1), ('d/1', 3, 'UPSERT', 3, '5', -2);
CREATE TEMP TABLE rd AS SELECT * FROM reconcile_batch('dom', 'dom_stage',
    '[{"object_key":"d/1","version_id":"1","content_hash":"x","rows":3}]');
SELECT results_eq('SELECT inserted, rejected FROM rd', $$VALUES (1::bigint, 2::bigint)$$,
    'domain target: one loaded, two rejected');
SELECT results_eq($$SELECT source_row, column_name, raw_value, reason FROM reconcile.rejects
                    WHERE batch_id = (SELECT batch_id FROM rd) ORDER BY source_row$$,
    $$VALUES (2::bigint, 'qty'::text, '-5'::text, 'value for domain pos_int violates check constraint "pos_int_check"'::text),
             (3, 'version', '-2', 'version is negative')$$,
    'a domain CHECK violation and a negative smallint version are rejected');

SELECT * FROM finish();
ROLLBACK;
