-- The fuzz database: the extension with state in every table, for sqlsmith
-- and for the targeted calls of test/fuzz/calls.sql.  Run as a superuser in
-- a fresh database (test/fuzz/run.sh does).
--
--   * targets: customer (plain, bigint key, quarantine, rules attached),
--     account (plain, two-column text/integer key, abort, payload subset,
--     a column outside the payload), ledger (plain with a trigger: the
--     general write path), event (partitioned by range, uuid/timestamp key);
--   * staged relations: text-typed (customer_stage, account_stage), typed
--     (customer_stage_typed, event_stage) and a view (customer_stage_view);
--   * receipts, rejects, conflicts, cursors, attached rules, diff jobs with
--     runs and results, from batches and runs made below;
--   * two non-superuser roles: reconcile_fuzz_owner owns every table here
--     (sqlsmith and the targeted calls run as it), reconcile_fuzz_reader may
--     only read customer;
--   * schema fuzz: fuzz.pool, rows of odd argument values (sqlsmith takes
--     function arguments from columns), wrappers that make reconcile's
--     set-returning functions callable where sqlsmith calls functions, and
--     fuzz.pg_proc, the routines sqlsmith is steered at (see run.sh).
\set ON_ERROR_STOP 1
SET client_min_messages = warning;

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'reconcile_fuzz_owner') THEN
        CREATE ROLE reconcile_fuzz_owner LOGIN;
    END IF;
    IF NOT EXISTS (SELECT FROM pg_catalog.pg_roles WHERE rolname = 'reconcile_fuzz_reader') THEN
        CREATE ROLE reconcile_fuzz_reader LOGIN;
    END IF;
END $$;

CREATE EXTENSION reconcile;
GRANT CREATE ON SCHEMA public TO reconcile_fuzz_owner;
CREATE SCHEMA fuzz AUTHORIZATION reconcile_fuzz_owner;
GRANT USAGE ON SCHEMA fuzz TO reconcile_fuzz_reader;

-- Jobs are written by the extension's owner (or whom it grants).
GRANT INSERT, UPDATE, DELETE ON reconcile.diff_jobs TO reconcile_fuzz_owner;
GRANT INSERT, UPDATE, DELETE ON reconcile.check_jobs TO reconcile_fuzz_owner;

SET ROLE reconcile_fuzz_owner;

-- ---- targets ----
CREATE TABLE customer (
    customer_id  bigint PRIMARY KEY,
    name         text,
    amount       numeric(12,2),
    updated_at   timestamptz,
    tags         text[],
    version      bigint NOT NULL,
    is_deleted   boolean NOT NULL DEFAULT false,
    payload_hash bytea
);
SELECT reconcile_register(target => 'customer', key_columns => '{customer_id}',
    version_column => 'version', deleted_column => 'is_deleted',
    hash_column => 'payload_hash', conflict_policy => 'quarantine');

CREATE TABLE account (
    region      text,
    account_no  integer,
    balance     numeric,
    opened      date,
    meta        jsonb,
    status      text CHECK (status IN ('OPEN', 'CLOSED')),
    version     integer NOT NULL,
    deleted     boolean NOT NULL DEFAULT false,
    h           bytea,
    loaded_at   timestamptz DEFAULT now(),
    PRIMARY KEY (region, account_no)
);
SELECT reconcile_register('account', '{region,account_no}', 'version', 'deleted', 'h',
    conflict_policy => 'abort', payload_columns => '{balance,opened,meta,status}');

CREATE TABLE ledger (
    entry_id  integer PRIMARY KEY,
    amount    numeric,
    note      varchar(20),
    version   smallint NOT NULL,
    deleted   boolean NOT NULL DEFAULT false,
    h         bytea
);
CREATE TABLE ledger_audit (entry_id integer, op text);
CREATE FUNCTION fuzz.ledger_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO public.ledger_audit VALUES (NEW.entry_id, TG_OP);
    RETURN NEW;
END $$;
CREATE TRIGGER ledger_audit AFTER INSERT OR UPDATE ON ledger
    FOR EACH ROW EXECUTE FUNCTION fuzz.ledger_audit();
SELECT reconcile_register('ledger', '{entry_id}', 'version', 'deleted', 'h');

CREATE TABLE event (
    event_id  uuid,
    at        timestamp,
    kind      text,
    amount    float8,
    version   smallint NOT NULL,
    gone      boolean NOT NULL,
    hash      bytea,
    PRIMARY KEY (event_id, at)
) PARTITION BY RANGE (at);
CREATE TABLE event_2025 PARTITION OF event FOR VALUES FROM ('2025-01-01') TO ('2026-01-01');
CREATE TABLE event_2026 PARTITION OF event FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
SELECT reconcile_register('event', '{event_id,at}', 'version', 'gone', 'hash', 'quarantine');

-- Odd values of many types, for discovery, checks and diffs: NaN and
-- infinities, the ends of each type's range, NULLs, long and empty text.
CREATE TABLE odd (id int, n numeric, f float8, r real, i2 smallint, i8 bigint, t text,
    ts timestamptz, d date, b bool, j jsonb, iv interval, u uuid, arr int[], bt bytea);
INSERT INTO odd
SELECT g,
  (ARRAY['NaN', 'Infinity', '-Infinity', '0', '-0', '1e1000', '-1e-1000',
         '123456789012345678901234567890.123456789', NULL, '1'])[1 + g % 10]::numeric,
  (ARRAY['NaN', 'Infinity', '-Infinity', '0', '-0', '1e308', '-1e-308', '5e-324', NULL,
         '1'])[1 + g % 10]::float8,
  (ARRAY['NaN', 'Infinity', '-Infinity', '0', '-0', '3e38', '1e-45', NULL, '1', '2'])[1 + g % 10]::real,
  (ARRAY[32767, -32768, 0, NULL, 1])[1 + g % 5]::smallint,
  (ARRAY[9223372036854775807, -9223372036854775808, 0, NULL, 1])[1 + g % 5]::bigint,
  (ARRAY['', repeat('x', 3000), E'\n', 'ab', NULL, 'ünï', 'a''b', '%', '\\',
         repeat('a', 300) || '1234'])[1 + g % 10],
  (ARRAY['infinity', '-infinity', '2026-01-01', NULL, '4713-01-01 BC'])[1 + g % 5]::timestamptz,
  (ARRAY['infinity', '-infinity', '2026-01-01', NULL, '5874897-12-31'])[1 + g % 5]::date,
  g % 3 = 0,
  (ARRAY['null', '{}', '[]', '1e400', NULL, '"x"'])[1 + g % 6]::jsonb,
  (ARRAY['178000000 years', '-178000000 years', '0', NULL])[1 + g % 4]::interval,
  CASE WHEN g % 2 = 0 THEN md5(g::text)::uuid END, ARRAY[g, NULL], '\x00'::bytea
FROM generate_series(1, 3000) g;

-- A table that is not registered, and a copy of customer for diffs.
CREATE TABLE plain (id integer PRIMARY KEY, label text, n numeric);
INSERT INTO plain SELECT g, 'label ' || g, g / 7.0 FROM generate_series(1, 50) g;
CREATE TABLE customer_copy (LIKE customer);

-- ---- staged relations ----
CREATE TABLE customer_stage (object_key text, source_row bigint, operation text,
    customer_id text, version text, name text, amount text, updated_at text, tags text,
    payload_hash text);
CREATE TABLE customer_stage_typed (object_key text, source_row integer, operation text,
    customer_id bigint, version bigint, name text, amount numeric, updated_at timestamptz,
    tags text[]);
CREATE VIEW customer_stage_view AS SELECT * FROM customer_stage_typed;
CREATE TABLE account_stage (object_key text, source_row bigint, operation text,
    region text, account_no text, version text, balance text, opened text, meta text,
    status text);
CREATE TABLE event_stage (object_key text, source_row bigint, operation text,
    event_id uuid, at timestamp, kind text, amount float8, version smallint);
CREATE TABLE ledger_stage (object_key text, source_row bigint, operation text,
    entry_id text, amount text, note text, version text);

INSERT INTO customer_stage
SELECT 'crm/part-0001.csv', g, CASE WHEN g % 10 = 0 THEN 'DELETE' ELSE 'UPSERT' END,
       g::text, (1 + g % 3)::text, 'name ' || g, (g * 1.25)::text,
       '2026-11-' || (1 + g % 28) || ' 10:00:00+00', '{a,b}', NULL
  FROM generate_series(1, 40) g;
-- Rejects: a bad version, an unknown operation, a NULL key, a bad amount, a
-- bad payload hash; a conflict inside the batch (two payloads at 41 v1).
INSERT INTO customer_stage VALUES
    ('crm/part-0002.csv', 1, 'UPSERT', '41', '1', 'Ana', '1', NULL, NULL, NULL),
    ('crm/part-0002.csv', 2, 'UPSERT', '41', '1', 'Bob', '1', NULL, NULL, NULL),
    ('crm/part-0002.csv', 3, 'UPSERT', '42', 'v2?', 'Eve', '1', NULL, NULL, NULL),
    ('crm/part-0002.csv', 4, 'MERGE', '43', '1', 'Dan', '1', NULL, NULL, NULL),
    ('crm/part-0002.csv', 5, 'UPSERT', NULL, '1', 'Nil', '1', NULL, NULL, NULL),
    ('crm/part-0002.csv', 6, 'UPSERT', '44', '1', 'Abc', 'abc', 'n/a', '{x', NULL),
    ('crm/part-0002.csv', 7, 'UPSERT', '45', '1', 'Hex', '2', NULL, NULL, 'sha256:zz'),
    ('crm/part-0002.csv', 8, 'UPSERT', '46', '1', 'Hex', '2', NULL, NULL,
     repeat('ab', 32));
SELECT status, staged_rows, inserted, rejected, conflicts FROM reconcile_batch('customer', 'customer_stage',
    '[{"object_key":"crm/part-0001.csv","version_id":"1","content_hash":"sha256:01","rows":40},
      {"object_key":"crm/part-0002.csv","version_id":"1","content_hash":"sha256:02","rows":8}]',
    source => 'crm', "cursor" => 'crm/part-0002.csv@1');
-- A conflict against the target: another payload at customer 1's version.
INSERT INTO customer_stage VALUES
    ('crm/part-0003.csv', 1, 'UPSERT', '1', '2', 'Other', '9', NULL, NULL, NULL),
    ('crm/part-0003.csv', 2, 'UPSERT', '2', '9', 'Newer', '9', NULL, NULL, NULL);
SELECT status, staged_rows, updated, conflicts FROM reconcile_batch('customer', 'customer_stage',
    '[{"object_key":"crm/part-0003.csv","version_id":"1","content_hash":"sha256:03","rows":2}]',
    'crm', 'crm/part-0003.csv@1');

INSERT INTO customer_stage_typed
SELECT 'typed/part-0001', g, 'UPSERT', g, 5, 'typed ' || g, g, now(), ARRAY['t', g::text]
  FROM generate_series(30, 60) g;
SELECT status, staged_rows, inserted, updated FROM reconcile_batch('customer', 'customer_stage_view',
    '[{"object_key":"typed/part-0001","version_id":"a","content_hash":"h","rows":31}]');

INSERT INTO account_stage
SELECT 'acct/1', g, 'UPSERT', CASE WHEN g % 2 = 0 THEN 'eu' ELSE 'us' END, g::text, '1',
       (g * 10)::text, '2026-01-0' || (1 + g % 9), '{"tier": ' || g || '}',
       CASE WHEN g % 5 = 0 THEN 'CLOSED' ELSE 'OPEN' END
  FROM generate_series(1, 20) g;
INSERT INTO account_stage VALUES
    ('acct/1', 21, 'UPSERT', 'eu', 'x21', '1', '1', '2026-01-01', '{}', 'OPEN'),
    ('acct/1', 22, 'UPSERT', 'eu', '22', '1', '1', '2026-02-30', '{bad', 'OPEN');
SELECT status, staged_rows, inserted, rejected FROM reconcile_batch('account', 'account_stage',
    '[{"object_key":"acct/1","version_id":"1","content_hash":"sha256:a1","rows":22}]');

INSERT INTO ledger_stage
SELECT 'ledger/1', g, 'UPSERT', g::text, (g * 3)::text, 'entry ' || g, '1'
  FROM generate_series(1, 15) g;
SELECT status, staged_rows, inserted FROM reconcile_batch('ledger', 'ledger_stage',
    '[{"object_key":"ledger/1","version_id":"1","content_hash":"sha256:l1","rows":15}]');

INSERT INTO event_stage
SELECT 'ev/1', g, CASE WHEN g % 7 = 0 THEN 'DELETE' ELSE 'UPSERT' END,
       ('00000000-0000-0000-0000-' || lpad(g::text, 12, '0'))::uuid,
       timestamp '2025-06-01' + g * interval '20 days', 'kind' || g % 3, g / 3.0, 1
  FROM generate_series(1, 25) g;
SELECT status, staged_rows, inserted, deleted FROM reconcile_batch('event', 'event_stage',
    '[{"object_key":"ev/1","version_id":"1","content_hash":"sha256:e1","rows":25}]');

-- ---- attached rules; a batch under them ----
SELECT reconcile_set_rules('customer', '{
    "fail": {"has_version": "version IS NOT NULL"},
    "warn": {"named": "name IS NOT NULL", "short_name": "length(name) < 12"},
    "drop": {"not_rex": "name IS DISTINCT FROM ''rex''"},
    "dataset_checks": [{"name": "few_copies", "description": "At most 5 rows per key.",
        "sql": "SELECT customer_id FROM {{TABLE}} GROUP BY customer_id HAVING count(*) > 5"}]}');
SELECT reconcile_set_rules('account', '{"warn": {"positive": "balance::numeric >= 0"}}');
SELECT reconcile_set_rules('account', NULL);
INSERT INTO customer_stage VALUES
    ('crm/part-0004.csv', 1, 'UPSERT', '70', '1', 'rex', '1', NULL, NULL, NULL),
    ('crm/part-0004.csv', 2, 'UPSERT', '71', '1', 'a rather long name', '1', NULL, NULL, NULL);
SELECT status, staged_rows, inserted, rejected FROM reconcile_batch('customer', 'customer_stage',
    '[{"object_key":"crm/part-0004.csv","version_id":"1","content_hash":"sha256:04","rows":2}]');

-- ---- the other servers: postgres_fdw to test/fuzz/remote.sql's databases ----
RESET ROLE;
CREATE EXTENSION postgres_fdw;
CREATE SERVER fuzz_remote FOREIGN DATA WRAPPER postgres_fdw
    OPTIONS (host :'fdw_host', port :'fdw_port', dbname :'remote_db');
CREATE SERVER fuzz_hostile FOREIGN DATA WRAPPER postgres_fdw
    OPTIONS (host :'fdw_host', port :'fdw_port', dbname :'hostile_db');
CREATE USER MAPPING FOR PUBLIC SERVER fuzz_remote OPTIONS (user :'fdw_user', password_required 'false');
CREATE USER MAPPING FOR PUBLIC SERVER fuzz_hostile OPTIONS (user :'fdw_user', password_required 'false');
-- Without tags (text[] has no canonical form for the checksums).
CREATE FOREIGN TABLE remote_customer (customer_id bigint, name text, amount numeric(12,2),
    updated_at timestamptz, version bigint, is_deleted boolean, payload_hash bytea)
    SERVER fuzz_remote OPTIONS (table_name 'customer');
CREATE FOREIGN TABLE hostile_customer (customer_id bigint, name text, amount numeric(12,2),
    updated_at timestamptz, version bigint, is_deleted boolean, payload_hash bytea)
    SERVER fuzz_hostile OPTIONS (table_name 'customer');
-- Declared otherwise than the remote's integer, char(8) and real.
CREATE FOREIGN TABLE remote_wide (customer_id bigint, name text, amount float8)
    SERVER fuzz_remote OPTIONS (table_name 'wide');
ALTER FOREIGN TABLE remote_customer OWNER TO reconcile_fuzz_owner;
ALTER FOREIGN TABLE hostile_customer OWNER TO reconcile_fuzz_owner;
ALTER FOREIGN TABLE remote_wide OWNER TO reconcile_fuzz_owner;
SET ROLE reconcile_fuzz_owner;

-- ---- diff jobs and runs ----
INSERT INTO customer_copy SELECT * FROM customer WHERE customer_id % 4 <> 0;
UPDATE customer_copy SET amount = amount + 1 WHERE customer_id % 5 = 0;
INSERT INTO reconcile.diff_jobs VALUES
    ('customers', 'public.customer', 'public.customer_copy', '{customer_id}',
     '{"tolerance": {"amount": 0.5}, "ignore": ["payload_hash"]}'),
    ('accounts_self', 'account', 'account', '{region,account_no}', NULL),
    ('windowed', 'customer', 'customer_copy', '{customer_id}',
     '{"updated_column": "updated_at", "window": ["2026-11-01", null], "cutoff": "source_max"}'),
    ('broken', 'no_such_table', 'customer', '{customer_id}', NULL),
    ('badopt', 'customer', 'customer_copy', '{customer_id}', '{"compair": ["name"]}'),
    ('remote', 'public.customer', 'public.remote_customer', '{customer_id}', '{"remote": "checksum"}'),
    ('hostile', 'public.hostile_customer', 'public.customer', '{customer_id}', '{"leaf_rows": 8}');
-- Each job on its own: a job that cannot run may be recorded as failed or
-- refused outright, and the fixture wants the others' runs either way.
DO $$
DECLARE
    j text;
BEGIN
    FOR j IN SELECT name FROM reconcile.diff_jobs ORDER BY name LOOP
        BEGIN
            PERFORM * FROM reconcile_diff_run(j);
        EXCEPTION WHEN OTHERS THEN
            RAISE NOTICE 'diff job %: %', j, SQLERRM;
        END;
    END LOOP;
END $$;
SELECT job, findings FROM reconcile_diff_run('customers');

-- ---- check jobs and their history (1.2) ----
INSERT INTO reconcile.check_jobs VALUES
    ('customer_rules', 'public.customer', NULL, NULL),
    ('customer_quality', 'customer', '{"fail": {"amount_mostly": {"sql": "amount >= 0", "mostly": 0.9}},
       "warn": {"rows_usual": {"kind": "row_count", "within_sigma": 3, "runs": 2},
                "fresh": {"kind": "freshness", "column": "updated_at", "max": 86400}},
       "dataset_checks": [{"name": "few", "sql": "SELECT 1 FROM {{TABLE}}", "max_rows": 3}]}', '{"sample": 2}'),
    ('check_broken', 'no_such_table', '{}', NULL);
SELECT job, gate, error IS NOT NULL AS failed FROM reconcile_check_run() ORDER BY job;

-- ---- odd values, for sqlsmith's column references and calls.sql ----
CREATE TABLE fuzz.pool (
    id     integer PRIMARY KEY,
    rel    regclass,
    doc    jsonb,
    names  text[],
    word   text,
    num    bigint
);
RESET ROLE;
-- Relations of every kind, and OIDs that name nothing (the pool is built as
-- the superuser so that it can name catalogs and TOAST tables too).
CREATE TEMP TABLE rels AS
SELECT row_number() OVER () AS i, r FROM unnest(ARRAY[
    'customer', 'account', 'ledger', 'event', 'event_2025', 'plain', 'customer_copy',
    'remote_customer', 'hostile_customer', 'remote_wide',
    'customer_stage', 'customer_stage_typed', 'customer_stage_view', 'account_stage',
    'event_stage', 'ledger_stage', 'fuzz.pool', 'odd', 'customer_pkey', 'reconcile.receipts',
    'reconcile.targets', 'reconcile.diff_runs', 'reconcile.batch_progress',
    'pg_catalog.pg_class', 'information_schema.tables']::regclass[]
    || (SELECT reltoastrelid::regclass FROM pg_class WHERE oid = 'customer'::regclass)
    || '0'::regclass || '4294967295'::regclass || '12'::regclass || NULL::regclass) r;
CREATE TEMP TABLE docs AS
SELECT row_number() OVER () AS i, d::jsonb AS d FROM unnest(ARRAY[
    -- manifests, good and bad
    '[{"object_key":"crm/part-0001.csv","version_id":"1","content_hash":"sha256:01","rows":40}]',
    '[{"object_key":"crm/part-0005.csv","version_id":"1","content_hash":"h","rows":0}]',
    '[{"object_key":"typed/part-0001","version_id":"a","content_hash":"h","rows":31}]',
    '[{"object_key":"acct/1","version_id":"1","content_hash":"sha256:a1","rows":22}]',
    '[{"object_key":"ev/1","version_id":"2","content_hash":"sha256:e2","rows":25}]',
    '[{"object_key":"x","version_id":"1","content_hash":"h","rows":1e3}]',
    '[{"object_key":"x","version_id":"1","content_hash":"h","rows":2.0}]',
    '[{"object_key":"x","version_id":"1","content_hash":"h","rows":-1}]',
    '[{"object_key":"x","version_id":"1","content_hash":"h","rows":1e308}]',
    '[{"object_key":"x","version_id":"1","content_hash":"h","rows":"7"}]',
    '[{"object_key":"x","version_id":"1","content_hash":"h","rows":9223372036854775808}]',
    '[{"object_key":"","version_id":"","content_hash":"","rows":0}]',
    '[{"object_key":null,"version_id":null,"content_hash":null,"rows":null}]',
    '[{"object_key":"x","version_id":"1","content_hash":"h","rows":1,"extra":true}]',
    '[{"object_key":"x","version_id":"1","content_hash":"h","rows":1},{"object_key":"x","version_id":"2","content_hash":"h","rows":1}]',
    '[{"object_key":["x"],"version_id":{"a":1},"content_hash":true,"rows":[]}]',
    '[[]]', '[null]', '[1, "two", null, true]', '[]', '{}', 'null', '0', '-1', '"text"',
    'true', '1e-400', '123456789012345678901234567890.5', '"\ud83d\ude00"',
    -- rules documents
    '{"fail": {"ok": "true"}}',
    '{"fail": {"v": "version > 0"}, "warn": {"n": "name IS NOT NULL"}}',
    '{"warn": {"bad": "1/0 = 1"}}',
    '{"drop": {"neg": "amount::numeric < 0"}}',
    '{"fail": {"x": "true); DELETE FROM customer; SELECT (true"}}',
    '{"fail": {"sub": "(SELECT count(*) FROM customer) > 0"}}',
    '{"fail": {"agg": "count(*) > 0"}}',
    '{"fail": {"srf": "generate_series(1, 2) > 0"}}',
    '{"fail": {"whole": "customer IS NOT NULL"}}',
    '{"fail": {"sys": "ctid IS NOT NULL"}}',
    '{"fail": {"": "true"}}',
    '{"fail": {"n": 1}}', '{"fail": []}', '{"fail": null}', '{"unknown": {}}',
    '{"dataset_checks": [{"name": "d", "sql": "SELECT 1 FROM {{TABLE}}"}]}',
    '{"dataset_checks": [{"name": "d", "sql": "SELECT 1 FROM {{DATAFRAME}} WHERE false;"}]}',
    '{"dataset_checks": [{"name": "d", "sql": "SELECT 1; SELECT 2"}]}',
    '{"dataset_checks": [{"name": "d", "sql": "DELETE FROM {{TABLE}}"}]}',
    '{"dataset_checks": [{"name": "d", "sql": "WITH x AS (DELETE FROM customer RETURNING 1) SELECT * FROM x"}]}',
    '{"dataset_checks": [{"name": "d", "sql": "SELECT * FROM {{TABLE}} FOR UPDATE"}]}',
    '{"dataset_checks": [{"name": "d", "sql": "-- {{TABLE}}\nSELECT 1"}]}',
    '{"dataset_checks": [{"name": "d"}]}', '{"dataset_checks": [1]}', '{"dataset_checks": {}}',
    '{"evidence": {"a": [1, 2, {"b": null}]}, "warn": {}}',
    -- options
    '{"sample": 0}', '{"sample": 10000}', '{"sample": -1}', '{"sample": 1e10}',
    '{"sample": 3, "key_columns": ["customer_id"]}', '{"key_columns": ["nope"]}',
    '{"key_columns": []}', '{"key_columns": [null]}', '{"key_columns": "customer_id"}',
    '{"max_values": 1}', '{"max_values": 33}', '{"min_share": 0.5}', '{"min_share": 2}',
    '{"sample_rows": 100}', '{"sample_rows": 99}', '{"sample_rows": 100000}',
    '{"max_values": 32, "min_share": 1, "sample_rows": 100}',
    '{"compare": ["name", "amount"]}', '{"compare": []}', '{"compare": ["name", "name"]}',
    '{"ignore": ["name"]}', '{"ignore": ["customer_id"]}',
    '{"target_key_columns": ["customer_id", "x"]}',
    '{"column_map": {"name": "amount"}}', '{"column_map": {"name": null}}',
    '{"trim_keys": true}', '{"trim_keys": "yes"}',
    '{"updated_column": "updated_at"}',
    '{"updated_column": "updated_at", "window": ["2026-01-01", "2026-12-31"]}',
    '{"updated_column": "updated_at", "window": [null, null]}',
    '{"updated_column": "updated_at", "window": ["2027-01-01", "2026-01-01"]}',
    '{"updated_column": "updated_at", "window": ["not a date", 5]}',
    '{"updated_column": "updated_at", "window": [1]}',
    '{"updated_column": "updated_at", "cutoff": "source_max"}',
    '{"cutoff": "source_max"}', '{"cutoff": "target_max"}',
    '{"tolerance": {"amount": 0.01}}', '{"tolerance": {"amount": -1}}',
    '{"tolerance": {"amount": 1e308}}', '{"tolerance": {"amount": "1 day"}}',
    '{"tolerance": {"updated_at": "1 second"}}', '{"tolerance": {"updated_at": "1 month"}}',
    '{"tolerance": {"updated_at": 5}}', '{"tolerance": {"name": 1}}',
    '{"tolerance": {"amount": "NaN"}}', '{"tolerance": {"amount": 1e-400}}',
    '{"tolerance": {"version": 9223372036854775807}}'
    ]) d;
INSERT INTO docs SELECT (SELECT max(i) FROM docs) + row_number() OVER (), d FROM (VALUES
    -- large and deep documents
    ((SELECT jsonb_agg(jsonb_build_object('object_key', 'big/' || g, 'version_id', '1',
        'content_hash', 'h', 'rows', 0)) FROM generate_series(1, 20000) g)),
    ((SELECT jsonb_build_object('warn', jsonb_object_agg('r' || g, 'version > ' || g))
        FROM generate_series(1, 1500) g)),
    ((SELECT jsonb_build_object('fail', jsonb_build_object('long', repeat('(', 5000) || 'true'
        || repeat(')', 5000))))),
    ((SELECT jsonb_build_object('fail', jsonb_build_object(repeat('n', 10000), 'true')))),
    ((SELECT jsonb_build_array(jsonb_build_object('object_key', repeat('k', 100000),
        'version_id', repeat('v', 100000), 'content_hash', 'h', 'rows', 1)))),
    ((SELECT (repeat('[', 1000) || repeat(']', 1000))::jsonb)),
    ((SELECT jsonb_build_object('compare', jsonb_agg('c' || g)) FROM generate_series(1, 2000) g))
    ) v(d);
CREATE TEMP TABLE name_lists AS
SELECT row_number() OVER () AS i, n::text[] AS n FROM unnest(ARRAY[
    '{customer_id}', '{region,account_no}', '{account_no,region}', '{event_id,at}',
    '{entry_id}', '{id}', '{name}', '{version}', '{payload_hash}', '{customer_id,customer_id}',
    '{}', '{NULL}', '{""}', '{" customer_id"}', '{CUSTOMER_ID}', '{ctid}', '{xmin}',
    '{balance,opened}', '{balance,opened,meta,status,loaded_at}', '{amount,name,tags}',
    '{"{{a}}"}', '{object_key,source_row,operation}', '{"a\"b", "c;d"}']) n
UNION ALL SELECT 100, '{{customer_id},{name}}'::text[]
UNION ALL SELECT 101, '[0:0]={customer_id}'::text[]
UNION ALL SELECT 102, (SELECT array_agg('c' || g) FROM generate_series(1, 5000) g)
UNION ALL SELECT 103, (SELECT array_agg('customer_id'::text) FROM generate_series(1, 2000) g)
UNION ALL SELECT 104, ARRAY[repeat('x', 100000)]
UNION ALL SELECT 105, NULL;
CREATE TEMP TABLE words AS
SELECT row_number() OVER () AS i, w FROM unnest(ARRAY[
    'customer_id', 'version', 'is_deleted', 'payload_hash', 'name', 'amount', 'h', 'deleted',
    'gone', 'hash', 'balance', 'quarantine', 'abort', 'QUARANTINE', '', ' ', 'customers',
    'accounts_self', 'broken', 'badopt', 'windowed', 'no_such_job', 'crm', 'crm/part-0002.csv@1',
    'x''; DROP TABLE customer; --', 'a"b', E'new\nline', E'tab\tch', 'ünïcödé', '💥',
    repeat('w', 64), repeat('w', 1000), repeat('w', 1000000), NULL]) w;
CREATE TEMP TABLE nums AS
SELECT row_number() OVER () AS i, n FROM unnest(ARRAY[0, 1, -1, 2, 100, 1000, 2147483647,
    2147483648, -2147483648, 9223372036854775807, -9223372036854775808, NULL]::bigint[]) n;
INSERT INTO fuzz.pool
SELECT g, (SELECT r FROM rels WHERE i = 1 + g % (SELECT count(*) FROM rels)),
       (SELECT d FROM docs WHERE i = 1 + g % (SELECT count(*) FROM docs)),
       (SELECT n FROM name_lists ORDER BY i OFFSET g % (SELECT count(*) FROM name_lists) LIMIT 1),
       (SELECT w FROM words WHERE i = 1 + g % (SELECT count(*) FROM words)),
       (SELECT n FROM nums WHERE i = 1 + g % (SELECT count(*) FROM nums))
  FROM generate_series(0, 251) g;
-- Every value of every list in a row of its own too, for calls.sql.
CREATE TABLE fuzz.rels AS SELECT i::integer AS id, r AS val FROM rels;
CREATE TABLE fuzz.docs AS SELECT i::integer AS id, d AS val FROM docs;
CREATE TABLE fuzz.name_lists AS SELECT i::integer AS id, n AS val FROM name_lists;
CREATE TABLE fuzz.words AS SELECT i::integer AS id, w AS val FROM words;
CREATE TABLE fuzz.nums AS SELECT i::integer AS id, n AS val FROM nums;
ALTER TABLE fuzz.pool OWNER TO reconcile_fuzz_owner;
ALTER TABLE fuzz.rels OWNER TO reconcile_fuzz_owner;
ALTER TABLE fuzz.docs OWNER TO reconcile_fuzz_owner;
ALTER TABLE fuzz.name_lists OWNER TO reconcile_fuzz_owner;
ALTER TABLE fuzz.words OWNER TO reconcile_fuzz_owner;
ALTER TABLE fuzz.nums OWNER TO reconcile_fuzz_owner;

SET ROLE reconcile_fuzz_owner;
GRANT SELECT ON customer TO reconcile_fuzz_reader;
GRANT SELECT ON ALL TABLES IN SCHEMA fuzz TO reconcile_fuzz_reader;

-- ---- reconcile's set-returning functions, callable as scalars ----
-- sqlsmith calls only functions that return one value.
CREATE FUNCTION fuzz.batch(target regclass, staged regclass, manifest jsonb,
    source text, "cursor" text) RETURNS jsonb LANGUAGE sql AS
$$ SELECT jsonb_agg(to_jsonb(r)) FROM public.reconcile_batch($1, $2, $3, $4, $5) r $$;
CREATE FUNCTION fuzz.diff(source regclass, target regclass, key_columns text[], options jsonb)
RETURNS jsonb LANGUAGE sql AS
$$ SELECT jsonb_agg(to_jsonb(d)) FROM public.reconcile_diff($1, $2, $3, $4) d $$;
CREATE FUNCTION fuzz.check_rules(relation regclass, rules jsonb, options jsonb) RETURNS jsonb
LANGUAGE sql AS
$$ SELECT jsonb_agg(to_jsonb(c)) FROM public.reconcile_check($1, $2, $3) c $$;
CREATE FUNCTION fuzz.diff_run(job text) RETURNS jsonb LANGUAGE sql AS
$$ SELECT jsonb_agg(to_jsonb(r)) FROM public.reconcile_diff_run($1) r $$;

-- ---- what sqlsmith is steered at ----
-- sqlsmith 1.4 reads its routines with an unqualified "FROM pg_proc"; with
-- search_path fuzz, pg_catalog (run.sh sets it for sqlsmith's connections
-- only) it reads this view: reconcile's functions, the wrappers above, and
-- builtins that produce or take apart the argument types reconcile reads.
-- Generated queries name every routine with its schema, so the view changes
-- nothing else.
CREATE VIEW fuzz.pg_proc AS
SELECT p.* FROM pg_catalog.pg_proc p
 WHERE p.pronamespace IN ('public'::regnamespace, 'fuzz'::regnamespace)
   AND p.prorettype <> 'trigger'::regtype
    OR (p.pronamespace = 'pg_catalog'::regnamespace AND p.proname IN (
        'jsonb_build_object', 'jsonb_build_array', 'jsonb_set', 'jsonb_insert',
        'jsonb_strip_nulls', 'jsonb_concat', 'jsonb_delete', 'jsonb_object_field',
        'jsonb_array_element', 'to_jsonb', 'jsonb_agg', 'jsonb_object_agg', 'jsonb_typeof',
        'string_to_array', 'array_to_string', 'regexp_split_to_array',
        'concat', 'repeat', 'upper', 'lower', 'btrim', 'substr', 'replace', 'chr', 'md5',
        'quote_ident', 'format_type', 'to_regclass', 'text',
        'int8pl', 'int8mi', 'int4pl', 'numeric_add', 'abs', 'mod', 'power',
        'now', 'timestamptz_pl_interval', 'gen_random_uuid', 'textcat', 'bool_and'));
GRANT SELECT ON fuzz.pg_proc TO PUBLIC;

RESET ROLE;
ANALYZE;
