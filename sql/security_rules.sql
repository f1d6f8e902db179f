-- Rules and generated SQL resolve no name through the caller's search_path,
-- attached rules run as the target's owner, restricted and read-only, and a
-- dataset check is validated as the one statement that runs.
CREATE EXTENSION reconcile;
CREATE ROLE regress_sec_owner;
CREATE ROLE regress_sec_evil;
CREATE SCHEMA sec_owner AUTHORIZATION regress_sec_owner;
CREATE SCHEMA evil AUTHORIZATION regress_sec_evil;
GRANT USAGE ON SCHEMA sec_owner, evil TO PUBLIC;

-- Planted by another role in public: operators that match the staged and
-- profiled types more exactly than pg_catalog's, and a function an
-- attacker wants a superuser to run.
GRANT CREATE ON SCHEMA public TO regress_sec_evil;
SET ROLE regress_sec_evil;
CREATE FUNCTION public.sec_pwn() RETURNS boolean LANGUAGE plpgsql STABLE AS
$$BEGIN RAISE EXCEPTION 'attacker code ran as %', current_user; END$$;
CREATE FUNCTION public.sec_ge(numeric, integer) RETURNS boolean LANGUAGE plpgsql STABLE AS
$$BEGIN RAISE EXCEPTION 'planted >= ran as %', current_user; END$$;
CREATE OPERATOR public.>= (LEFTARG = numeric, RIGHTARG = integer, FUNCTION = public.sec_ge);
CREATE FUNCTION public.sec_plus(integer, numeric) RETURNS numeric LANGUAGE plpgsql STABLE AS
$$BEGIN RAISE EXCEPTION 'planted + ran as %', current_user; END$$;
CREATE OPERATOR public.+ (LEFTARG = integer, RIGHTARG = numeric, FUNCTION = public.sec_plus);
RESET ROLE;
REVOKE CREATE ON SCHEMA public FROM regress_sec_evil;

-- 2. The README's own example rule (docs/rules.md), under a search_path holding public.
CREATE TABLE accounts (id int PRIMARY KEY, n int, balance numeric, total numeric,
                       version bigint NOT NULL, is_deleted boolean NOT NULL DEFAULT false,
                       payload_hash bytea);
INSERT INTO accounts SELECT i, (i * 37) % 1000, i * 1.5, ((i * 37) % 1000)::numeric OPERATOR(pg_catalog.+) i * 1.5, 1, false, NULL
FROM generate_series(1, 200) AS i;
SELECT rule, status, invalid_rows FROM reconcile_check('accounts', '{"fail": {"non_negative": "balance >= 0"}}');
SELECT reconcile_check_report('accounts', '{"fail": {"non_negative": "balance >= 0"}}') -> 'summary';
-- A user who wants a function of their own names its schema.
SELECT rule, status, detail FROM reconcile_check('accounts', '{"fail": {"own": "public.sec_pwn()"}}');
-- Discovery's own queries: total = n + balance, with int + numeric.
SELECT reconcile_discover_rules('accounts') -> 'fail' ? 'total_adds_up' AS found_sum;
SELECT reconcile_discover_rules('accounts') -> 'fail' ->> 'total_adds_up' AS rule;
-- In a batch, run by a superuser.
SELECT reconcile_register(target => 'accounts', key_columns => '{id}', version_column => 'version',
                          deleted_column => 'is_deleted', hash_column => 'payload_hash');
SELECT reconcile_set_rules('accounts', '{"fail": {"non_negative": "balance >= 0"},
  "dataset_checks": [{"name": "few", "sql": "SELECT 1 FROM {{TABLE}} HAVING count(*) >= 1000"}]}') AS version;
CREATE TABLE accounts_stage (object_key text, source_row bigint, operation text, id int,
                             version bigint, n int, balance numeric, total numeric);
INSERT INTO accounts_stage VALUES ('a1', 1, 'UPSERT', 1, 2, 1, 10.5, 11.5), ('a1', 2, 'UPSERT', 300, 1, 0, 0, 0);
SELECT status, inserted, updated, rejected FROM reconcile_batch(target => 'accounts', staged => 'accounts_stage',
    manifest => '[{"object_key":"a1","version_id":"1","content_hash":"sha256:a1","rows":2}]');
SELECT id, balance, version FROM accounts WHERE id IN (1, 300) ORDER BY id;

-- 2. The general write path's temporary table, shadowed by a view in a
-- schema before pg_temp.
CREATE FUNCTION sec_noop() RETURNS trigger LANGUAGE plpgsql AS $$BEGIN RETURN NEW; END$$;
CREATE TRIGGER accounts_noop BEFORE INSERT OR UPDATE ON accounts FOR EACH ROW EXECUTE FUNCTION sec_noop();
SELECT reconcile_set_rules('accounts', NULL) AS version;
INSERT INTO accounts_stage VALUES ('a2', 1, 'UPSERT', 2, 2, 1, 20.5, 21.5), ('a2', 2, 'UPSERT', 301, 1, 0, 1, 1);
SET ROLE regress_sec_evil;
SELECT format('CREATE VIEW evil.%I AS SELECT 1 AS k1', 'reconcile_apply_' || left(reconcile_batch_id(
    '[{"object_key":"a2","version_id":"1","content_hash":"sha256:a2","rows":2}]'), 16)) \gexec
RESET ROLE;
SET search_path = evil, public, pg_temp;
SELECT status, inserted, updated FROM reconcile_batch(target => 'accounts', staged => 'accounts_stage',
    manifest => '[{"object_key":"a2","version_id":"1","content_hash":"sha256:a2","rows":2}]');
RESET search_path;
SELECT id, balance, version FROM accounts WHERE id IN (2, 301) ORDER BY id;
SELECT count(*) AS evil_views FROM pg_views WHERE schemaname = 'evil';
DROP TRIGGER accounts_noop ON accounts;

-- 3. An attached rule runs as the target's owner, restricted and read-only:
-- a STABLE wrapper around a VOLATILE function cannot make the owner a
-- superuser through a superuser's batch.
SET ROLE regress_sec_owner;
CREATE TABLE sec_owner.owned (id int PRIMARY KEY, v int, version bigint NOT NULL,
                              is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea);
CREATE FUNCTION sec_owner.escalate() RETURNS boolean LANGUAGE plpgsql VOLATILE AS
$$BEGIN ALTER ROLE regress_sec_owner SUPERUSER; RETURN true; END$$;
CREATE FUNCTION sec_owner.looks_harmless(int) RETURNS boolean LANGUAGE sql STABLE AS
$$SELECT sec_owner.escalate()$$;
SELECT reconcile_register(target => 'sec_owner.owned', key_columns => '{id}', version_column => 'version',
                          deleted_column => 'is_deleted', hash_column => 'payload_hash');
SELECT reconcile_set_rules('sec_owner.owned', '{"fail": {"fine": "sec_owner.looks_harmless(v)"}}') AS version;
SELECT current_user AS who, session_user <> current_user AS switched;
RESET ROLE;
CREATE TABLE owned_stage (object_key text, source_row bigint, operation text, id int, version bigint, v int);
INSERT INTO owned_stage VALUES ('o1', 1, 'UPSERT', 1, 1, 5);
-- The owner may not read the superuser's staged table: a clear error.
SELECT status FROM reconcile_batch(target => 'sec_owner.owned', staged => 'owned_stage',
    manifest => '[{"object_key":"o1","version_id":"1","content_hash":"sha256:o1","rows":1}]');
GRANT SELECT ON owned_stage TO regress_sec_owner;
SELECT status FROM reconcile_batch(target => 'sec_owner.owned', staged => 'owned_stage',
    manifest => '[{"object_key":"o1","version_id":"1","content_hash":"sha256:o1","rows":1}]');
SELECT rolsuper FROM pg_roles WHERE rolname = 'regress_sec_owner';
-- Row rules that the loader cannot evaluate itself (a subquery), and
-- dataset checks, run as the owner too.
SET ROLE regress_sec_owner;
SELECT reconcile_set_rules('sec_owner.owned', '{"fail": {"sub": "v IN (SELECT x FROM generate_series(1, 10) AS x WHERE sec_owner.looks_harmless(x))"}}') AS version;
RESET ROLE;
SELECT status FROM reconcile_batch(target => 'sec_owner.owned', staged => 'owned_stage',
    manifest => '[{"object_key":"o1","version_id":"1","content_hash":"sha256:o1","rows":1}]');
SELECT rolsuper FROM pg_roles WHERE rolname = 'regress_sec_owner';
-- Caught in a subtransaction, the failed batch leaves the transaction as it was.
BEGIN;
DO $$
BEGIN
    PERFORM reconcile_batch(target => 'sec_owner.owned', staged => 'owned_stage',
        manifest => '[{"object_key":"o1","version_id":"1","content_hash":"sha256:o1","rows":1}]');
EXCEPTION WHEN read_only_sql_transaction THEN
    RAISE NOTICE 'refused: %', SQLERRM;
END $$;
SELECT current_user, current_setting('search_path') AS search_path,
       current_setting('transaction_read_only') AS read_only;
CREATE TEMP TABLE still_writable (n int);
COMMIT;
DROP TABLE still_writable;
SET ROLE regress_sec_owner;
SELECT reconcile_set_rules('sec_owner.owned', '{"dataset_checks": [{"name": "esc", "sql": "SELECT 1 FROM {{TABLE}} WHERE NOT sec_owner.looks_harmless(v)"}]}') AS version;
RESET ROLE;
SELECT status FROM reconcile_batch(target => 'sec_owner.owned', staged => 'owned_stage',
    manifest => '[{"object_key":"o1","version_id":"1","content_hash":"sha256:o1","rows":1}]');
SELECT rolsuper FROM pg_roles WHERE rolname = 'regress_sec_owner';
-- A rule's functions run as the owner: it sees its own name.
SET ROLE regress_sec_owner;
CREATE FUNCTION sec_owner.whoami(int) RETURNS boolean LANGUAGE plpgsql STABLE AS
$$BEGIN RAISE NOTICE 'rule runs as %, search_path %', current_user, current_setting('search_path'); RETURN true; END$$;
SELECT reconcile_set_rules('sec_owner.owned', '{"warn": {"who": "sec_owner.whoami(v)", "who_sub": "(SELECT sec_owner.whoami(v))"}}') AS version;
RESET ROLE;
SET search_path = evil, public, pg_temp;
SELECT status FROM reconcile_batch(target => 'sec_owner.owned', staged => 'public.owned_stage',
    manifest => '[{"object_key":"o1","version_id":"1","content_hash":"sha256:o1","rows":1}]');
RESET search_path;
SELECT rule, status FROM reconcile_check('sec_owner.owned', '{"warn": {"who": "sec_owner.whoami(v)"}}');
-- Harmless rules of the owner still load the batch, subquery included.
SET ROLE regress_sec_owner;
SELECT reconcile_set_rules('sec_owner.owned', '{"fail": {"small": "v < 100", "listed": "v IN (SELECT x FROM generate_series(1, 10) AS x)"},
  "warn": {"even": "EXISTS (SELECT 1 FROM generate_series(0, 20, 2) AS g WHERE g = v)"},
  "drop": {"not_seven": "v <> 7"},
  "dataset_checks": [{"name": "one_each", "sql": "SELECT id FROM {{TABLE}} GROUP BY id HAVING count(*) > 1"}]}') AS version;
RESET ROLE;
INSERT INTO owned_stage VALUES ('o2', 1, 'UPSERT', 2, 1, 7), ('o2', 2, 'UPSERT', 3, 1, 8);
SELECT status, inserted, rejected FROM reconcile_batch(target => 'sec_owner.owned', staged => 'owned_stage',
    manifest => '[{"object_key":"o1","version_id":"1","content_hash":"sha256:o1","rows":1},
                  {"object_key":"o2","version_id":"1","content_hash":"sha256:o2","rows":2}]');
SELECT id, v FROM sec_owner.owned ORDER BY id;
SELECT warnings FROM reconcile.receipts WHERE target = 'sec_owner.owned'::regclass ORDER BY committed_at;
-- reconcile_check runs the caller's own rules with the caller's rights,
-- read-only: the wrapper's ALTER ROLE fails there too.
SELECT rule, status, detail FROM reconcile_check('sec_owner.owned', '{"fail": {"fine": "sec_owner.looks_harmless(v)"}}');
SELECT rolsuper FROM pg_roles WHERE rolname = 'regress_sec_owner';

-- 4. A table name holding a newline, a semicolon, quotes, a comment end
-- and a comment start: {{TABLE}} in a comment cannot split the check.
CREATE TABLE "nl
; SELECT public.sec_pwn(); --*/ ' "" x" (id int);
INSERT INTO "nl
; SELECT public.sec_pwn(); --*/ ' "" x" VALUES (1), (2), (2);
SELECT rule, status, detail FROM reconcile_check(
    (SELECT oid FROM pg_class WHERE relname LIKE 'nl%' AND relnamespace = 'public'::regnamespace),
    '{"dataset_checks": [{"name": "commented", "sql": "SELECT id FROM {{TABLE}} -- over {{TABLE}}\n WHERE id > 1"},
                         {"name": "dups", "sql": "SELECT id, count(*) FROM {{TABLE}} GROUP BY id HAVING count(*) > 1"},
                         {"name": "block", "sql": "SELECT id FROM {{TABLE}} /* {{TABLE}} */ WHERE id > 5"},
                         {"name": "scalar", "sql": "SELECT 1 FROM {{TABLE}} WHERE id = 2"}]}');
-- The issue's case: what follows the newline is a statement of its own.
CREATE TABLE "nl2
; SELECT public.sec_pwn(); --" (id int);
SELECT rule, status, detail FROM reconcile_check(
    (SELECT oid FROM pg_class WHERE relname LIKE 'nl2%'),
    '{"dataset_checks": [{"name": "commented", "sql": "SELECT * FROM {{TABLE}} -- rows of {{TABLE}}"},
                         {"name": "plain", "sql": "SELECT * FROM {{TABLE}}"}]}');
DROP TABLE "nl2
; SELECT public.sec_pwn(); --";
-- And one that closes the statement's own parenthesis.
CREATE TABLE "t
) AS v; SELECT public.sec_pwn(); SELECT v FROM (SELECT 1 --" (id int);
SELECT rule, status, detail FROM reconcile_check(
    (SELECT oid FROM pg_class WHERE relname LIKE 't%AS v;%'),
    '{"dataset_checks": [{"name": "commented", "sql": "SELECT 1 -- {{TABLE}}"}]}');
DROP TABLE "t
) AS v; SELECT public.sec_pwn(); SELECT v FROM (SELECT 1 --";
-- A name that keeps the check one SELECT but adds a UNION arm, through a
-- line comment, a block comment and a string literal: a placeholder there
-- is not code and stays as written, so the name never enters the comment.
CREATE TABLE "u
UNION SELECT public.sec_pwn()::int --" (id int);
INSERT INTO "u
UNION SELECT public.sec_pwn()::int --" VALUES (1);
CREATE TABLE "*/ UNION SELECT public.sec_pwn()::int FROM (SELECT -1 id)x /*" (id int);
INSERT INTO "*/ UNION SELECT public.sec_pwn()::int FROM (SELECT -1 id)x /*" VALUES (1);
SELECT rule, status, invalid_rows, detail FROM reconcile_check(
    (SELECT oid FROM pg_class WHERE relname LIKE 'u%UNION%'),
    '{"dataset_checks": [{"name": "line", "sql": "SELECT id FROM {{TABLE}} WHERE id < 0 -- ids in {{TABLE}} are >= 0"},
                         {"name": "literal", "sql": "SELECT id FROM {{TABLE}} WHERE id < 0 AND ''{{TABLE}}'' <> ''''"}]}');
SELECT reconcile_check_report(
    (SELECT oid FROM pg_class WHERE relname LIKE '*/ UNION%'),
    '{"dataset_checks": [{"name": "block", "sql": "SELECT id FROM {{TABLE}} /* checks {{TABLE}} */ WHERE id < 0"}]}')
    -> 'rules' -> 0 -> 'status' AS block_status;
-- A column named {{TABLE}}: a quoted identifier is not a placeholder, so
-- discovery's proposals over it read the column, not the table's name.
CREATE TABLE "x FROM public.accounts UNION SELECT public.sec_pwn()::int --" ("{{TABLE}}" int);
INSERT INTO "x FROM public.accounts UNION SELECT public.sec_pwn()::int --"
SELECT i FROM generate_series(1, 50) AS i;
SELECT rule, status FROM reconcile_check(
    (SELECT oid FROM pg_class WHERE relname LIKE 'x FROM%'),
    reconcile_discover_rules((SELECT oid FROM pg_class WHERE relname LIKE 'x FROM%')))
ORDER BY rule;
SELECT rule, status, invalid_rows FROM reconcile_check(
    (SELECT oid FROM pg_class WHERE relname LIKE 'x FROM%'),
    '{"dataset_checks": [{"name": "quoted", "sql": "SELECT \"{{TABLE}}\" FROM {{TABLE}} WHERE \"{{TABLE}}\" > 49"}]}');
DROP TABLE "u
UNION SELECT public.sec_pwn()::int --", "*/ UNION SELECT public.sec_pwn()::int FROM (SELECT -1 id)x /*",
    "x FROM public.accounts UNION SELECT public.sec_pwn()::int --";
SELECT reconcile_check_report(
    (SELECT oid FROM pg_class WHERE relname LIKE 'nl%' AND relnamespace = 'public'::regnamespace),
    '{"dataset_checks": [{"name": "dups", "sql": "SELECT id, count(*) FROM {{TABLE}} GROUP BY id HAVING count(*) > 1"}]}') -> 'rules' -> 0 -> 'sample';
-- Back-quoted (Spark SQL) names beside {{TABLE}}, comments, dollar quotes
-- and E'' strings, over the same table: a back quote converts only where
-- it is code, the name it encloses becomes one quoted identifier whatever
-- it holds, and {{TABLE}} is replaced after the conversion, as before.
SELECT rule, status, invalid_rows, sqlstate, detail FROM reconcile_check(
    (SELECT oid FROM pg_class WHERE relname LIKE 'nl%' AND relnamespace = 'public'::regnamespace),
    '{"dataset_checks": [
       {"name": "named", "sql": "SELECT `id` FROM {{TABLE}} AS `t` WHERE `t`.`id` > 1"},
       {"name": "line_comment", "sql": "SELECT `id` FROM {{TABLE}} -- `{{TABLE}} ` unterminated\n WHERE `id` > 1"},
       {"name": "block_comment", "sql": "SELECT `id` FROM {{TABLE}} /* `*/ WHERE `id` > 1 /* ` */"},
       {"name": "dollar", "sql": "SELECT `id` FROM {{TABLE}} WHERE $x$`{{TABLE}}$x$ = ''`{{TABLE}}'' AND `id` > 1"},
       {"name": "estring", "sql": "SELECT `id` FROM {{TABLE}} WHERE E''\\''`'' = '''''''' || ''`'' AND `id` > 1"},
       {"name": "quoted_placeholder", "sql": "SELECT 1 FROM `{{TABLE}}`"},
       {"name": "touching_placeholder", "sql": "SELECT 1 FROM {{TABLE}}`x`"},
       {"name": "name_holds_code", "sql": "SELECT `id` FROM {{TABLE}} WHERE `id\" > 0; SELECT public.sec_pwn(); --*/` IS NULL"}]}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{
  "fail": {"name_closes_paren": "`balance) OR (public.sec_pwn()` IS NULL",
           "comment_hides_rest": "`balance` > 0 -- ` OR public.sec_pwn()"}}');
-- Statements that are not one plain SELECT, whatever the placeholder
-- holds: reconcile_check reports each as ERROR (42501) and runs nothing of
-- it; reconcile_set_rules refuses the document whole.
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "two", "sql": "SELECT 1 FROM {{TABLE}}; SELECT 2"}]}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "lock", "sql": "SELECT 1 FROM {{TABLE}} FOR UPDATE"}]}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "cte", "sql": "WITH d AS (DELETE FROM {{TABLE}} RETURNING 1) SELECT * FROM d"}]}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "into", "sql": "SELECT 1 INTO sec_new FROM {{TABLE}}"}]}');
SELECT rule, status, sqlstate, detail FROM reconcile_check('accounts', '{"dataset_checks": [{"name": "bq_two", "sql": "SELECT `id` FROM {{TABLE}}; SELECT `id` FROM {{TABLE}}"}]}');
SELECT count(*) AS accounts_rows, to_regclass('sec_new') AS created FROM accounts;
SELECT reconcile_set_rules('accounts', '{"dataset_checks": [{"name": "two", "sql": "SELECT 1 FROM {{TABLE}}; SELECT 2"}]}');
SELECT reconcile_set_rules('accounts', '{"dataset_checks": [{"name": "cte", "sql": "WITH d AS (DELETE FROM {{TABLE}} RETURNING 1) SELECT * FROM d"}]}');
SELECT reconcile_set_rules('accounts', '{"fail": {"unterminated": "`balance > 0"}}');

-- 10. Discovery never proposes a pattern that does not compile: 300
-- letters then four digits.
CREATE TABLE long_codes AS
SELECT repeat(chr(97 + i % 26), 300) || lpad(i::text, 4, '0') AS code, i AS id
FROM generate_series(1, 300) AS i;
SELECT reconcile_discover_rules('long_codes') -> 'fail' ->> 'code_pattern' AS pattern;
SELECT rule, status FROM reconcile_check('long_codes', reconcile_discover_rules('long_codes'))
WHERE status <> 'PASS';

DROP TABLE accounts, accounts_stage, owned_stage, long_codes, "nl
; SELECT public.sec_pwn(); --*/ ' "" x";
DROP FUNCTION sec_noop();
DROP SCHEMA sec_owner CASCADE;
DROP SCHEMA evil CASCADE;
DROP OPERATOR public.>= (numeric, integer);
DROP OPERATOR public.+ (integer, numeric);
DROP FUNCTION public.sec_pwn(), public.sec_ge(numeric, integer), public.sec_plus(integer, numeric);
DROP EXTENSION reconcile;
DROP ROLE regress_sec_owner;
DROP ROLE regress_sec_evil;
