-- pgTAP: reconcile_batch runs with the caller's rights and never lends the
-- extension's.  Roles are created inside the transaction (unique names,
-- gone with the ROLLBACK) and statements run under them through a helper
-- that sets the role for one statement, since pgTAP's own temporary
-- tables belong to the superuser.
BEGIN;
CREATE EXTENSION IF NOT EXISTS pgtap;
CREATE EXTENSION reconcile;
SELECT plan(37);

-- Run q as role r; return the first column of its first row as text, or
-- the SQLSTATE of its error.  The subtransaction of the EXCEPTION block
-- undoes the role change (and the statement's work) on error.
CREATE FUNCTION pg_temp.as_role(r text, q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    result text;
BEGIN
    PERFORM set_config('role', r, true);
    EXECUTE q INTO result;
    PERFORM set_config('role', 'none', true);
    RETURN result;
EXCEPTION WHEN OTHERS THEN
    RETURN 'ERROR ' || SQLSTATE;
END $$;

CREATE ROLE rtap_priv_loader;
CREATE ROLE rtap_priv_noinsert;
CREATE ROLE rtap_priv_noupdate;
CREATE ROLE rtap_priv_noselect;
CREATE ROLE rtap_priv_nostage;
CREATE ROLE rtap_priv_outsider;

CREATE TABLE t (id text PRIMARY KEY, name text, version bigint NOT NULL,
    deleted boolean NOT NULL DEFAULT false, hash bytea);
SELECT reconcile_register('t', '{id}', 'version', 'deleted', 'hash');
CREATE TABLE s (object_key text, source_row bigint, operation text, id text, name text, version text);
INSERT INTO s VALUES ('p/1', 1, 'UPSERT', 'A', 'a', '1'), ('p/1', 2, 'UPSERT', NULL, 'b', '1'),
    ('p/2', 1, 'UPSERT', 'A', 'a2', '2');
GRANT SELECT, INSERT, UPDATE ON t TO rtap_priv_loader, rtap_priv_nostage;
GRANT SELECT, UPDATE ON t TO rtap_priv_noinsert;
GRANT SELECT, INSERT ON t TO rtap_priv_noupdate;
GRANT INSERT, UPDATE ON t TO rtap_priv_noselect;
GRANT SELECT ON s TO rtap_priv_loader, rtap_priv_noinsert, rtap_priv_noupdate, rtap_priv_noselect, rtap_priv_outsider;

CREATE FUNCTION pg_temp.state() RETURNS bigint LANGUAGE sql AS $$
    SELECT (SELECT count(*) FROM t) + (SELECT count(*) FROM reconcile.receipts)
         + (SELECT count(*) FROM reconcile.batch_objects) + (SELECT count(*) FROM reconcile.cursors)
         + (SELECT count(*) FROM reconcile.rejects) + (SELECT count(*) FROM reconcile.conflicts)
$$;

SELECT is(pg_temp.as_role('rtap_priv_noinsert', $$SELECT status FROM reconcile_batch('t', 's',
    '[{"object_key":"p/1","version_id":"1","content_hash":"x","rows":2}]', 'feed', 'p/1')$$),
    'ERROR 42501', 'a role without INSERT on the target is refused with 42501');
SELECT is(pg_temp.as_role('rtap_priv_noupdate', $$SELECT status FROM reconcile_batch('t', 's',
    '[{"object_key":"p/1","version_id":"1","content_hash":"x","rows":2}]', 'feed', 'p/1')$$),
    'ERROR 42501', 'a role without UPDATE on the target is refused with 42501');
SELECT is(pg_temp.as_role('rtap_priv_noselect', $$SELECT status FROM reconcile_batch('t', 's',
    '[{"object_key":"p/1","version_id":"1","content_hash":"x","rows":2}]', 'feed', 'p/1')$$),
    'ERROR 42501', 'a role without SELECT on the target is refused with 42501');
SELECT is(pg_temp.as_role('rtap_priv_nostage', $$SELECT status FROM reconcile_batch('t', 's',
    '[{"object_key":"p/1","version_id":"1","content_hash":"x","rows":2}]', 'feed', 'p/1')$$),
    'ERROR 42501', 'a role without SELECT on the staged relation is refused with 42501');
SELECT is(pg_temp.as_role('rtap_priv_outsider', $$SELECT status FROM reconcile_batch('t', 's',
    '[{"object_key":"p/1","version_id":"1","content_hash":"x","rows":2}]', 'feed', 'p/1')$$),
    'ERROR 42501', 'a role with no rights on the target is refused with 42501');
SELECT is(pg_temp.state(), 0::bigint, 'refused batches wrote nothing');

-- The message names the table, the role and the missing right.
CREATE FUNCTION pg_temp.error_as_role(r text, q text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    msg text;
    detail text;
BEGIN
    PERFORM set_config('role', r, true);
    EXECUTE q;
    RETURN NULL;
EXCEPTION WHEN OTHERS THEN
    GET STACKED DIAGNOSTICS msg = MESSAGE_TEXT, detail = PG_EXCEPTION_DETAIL;
    RETURN msg || ' / ' || detail;
END $$;
SELECT is(pg_temp.error_as_role('rtap_priv_noupdate', $$SELECT * FROM reconcile_batch('t', 's',
    '[{"object_key":"p/1","version_id":"1","content_hash":"x","rows":2}]')$$),
    'permission denied for table t / A batch or a resolution writes the target with the caller''s rights, which need SELECT, INSERT and UPDATE on it; role "rtap_priv_noupdate" lacks UPDATE.',
    'the refusal names the target, the role and the missing right');

-- A role with the rights loads, without being able to write reconcile.* directly.
SELECT is(pg_temp.as_role('rtap_priv_loader', $$SELECT status || ' ' || inserted || ' ' || rejected FROM reconcile_batch('t', 's',
    '[{"object_key":"p/1","version_id":"1","content_hash":"x","rows":2}]', 'feed', 'p/1')$$),
    'committed 1 1', 'a role with SELECT, INSERT and UPDATE on the target and SELECT on the stage loads the batch');
SELECT results_eq('SELECT id, name, version FROM t', $$VALUES ('A'::text, 'a'::text, 1::bigint)$$, 'the batch was applied');
SELECT results_eq('SELECT committed_by, "cursor" FROM reconcile.receipts',
    $$VALUES ('rtap_priv_loader'::name, 'p/1'::text)$$, 'the receipt names the loading role; the cursor moved');
SELECT is((SELECT count(*) FROM reconcile.rejects), 1::bigint, 'its reject was written on its behalf');
SELECT is(pg_temp.as_role('rtap_priv_loader', $$SELECT status FROM reconcile_batch('t', 's',
    '[{"object_key":"p/1","version_id":"1","content_hash":"x","rows":2}]', 'feed', 'p/1')$$),
    'replayed', 'the loading role can replay');

SELECT is(pg_temp.as_role('rtap_priv_loader',
    $$INSERT INTO reconcile.receipts (batch_id, target, manifest, staged_rows, inserted, updated, deleted, unchanged,
        stale, duplicates, conflicts, rejected, checksum, objects, committed_by, committed_at)
      VALUES ('forged', 't', '[]', 0, 0, 0, 0, 0, 0, 0, 0, 0, '', '[]', current_user, now()) RETURNING batch_id$$),
    'ERROR 42501', 'the loading role cannot INSERT INTO reconcile.receipts');
SELECT is(pg_temp.as_role('rtap_priv_loader', $$UPDATE reconcile.receipts SET inserted = 0 RETURNING batch_id$$),
    'ERROR 42501', 'nor UPDATE reconcile.receipts');
SELECT is(pg_temp.as_role('rtap_priv_loader', $$DELETE FROM reconcile.batch_objects RETURNING batch_id$$),
    'ERROR 42501', 'nor DELETE FROM reconcile.batch_objects (which would allow a changed content_hash)');
SELECT is(pg_temp.as_role('rtap_priv_loader', $$UPDATE reconcile.cursors SET "position" = 'x' RETURNING "position"$$),
    'ERROR 42501', 'nor move a cursor');
SELECT is(pg_temp.as_role('rtap_priv_loader', $$INSERT INTO reconcile.rejects (batch_id, target, object_key, reason) VALUES ('b', 't', 'o', 'r') RETURNING reason$$),
    'ERROR 42501', 'nor write reconcile.rejects');
SELECT is(pg_temp.as_role('rtap_priv_loader', $$DELETE FROM reconcile.targets RETURNING target::text$$),
    'ERROR 42501', 'nor unregister by writing reconcile.targets');
SELECT is(pg_temp.as_role('rtap_priv_loader', $$SELECT reconcile_register('t', '{id}', 'version', 'deleted', 'hash', 'abort')::text$$),
    'ERROR 42501', 'a role that does not own the target cannot register it');
SELECT is(pg_temp.as_role('rtap_priv_loader', $$SELECT reconcile_unregister('t')::text$$),
    'ERROR 42501', 'nor unregister it');
SELECT is((SELECT conflict_policy FROM reconcile.targets WHERE target = 't'::regclass), 'quarantine', 'the registration is untouched');

-- A conflict, so that reconcile.conflicts has a row of t.
INSERT INTO s VALUES ('p/3', 1, 'UPSERT', 'A', 'other', '1');
SELECT is(pg_temp.as_role('rtap_priv_loader', $$SELECT conflicts::text FROM reconcile_batch('t', 's',
    '[{"object_key":"p/3","version_id":"1","content_hash":"x","rows":1}]')$$), '1', 'a conflicting batch as the loading role');

-- Row-level security on the state tables: only roles that may SELECT the target see its rows.
SELECT is(pg_temp.as_role('rtap_priv_loader', 'SELECT count(*)::text FROM reconcile.receipts'), '2', 'the loader sees the receipts of t');
SELECT is(pg_temp.as_role('rtap_priv_loader', 'SELECT count(*)::text FROM reconcile.rejects'), '1', 'the loader sees the rejects of t');
SELECT is(pg_temp.as_role('rtap_priv_loader', 'SELECT count(*)::text FROM reconcile.conflicts'), '1', 'the loader sees the conflicts of t');
SELECT is(pg_temp.as_role('rtap_priv_noinsert', 'SELECT count(*)::text FROM reconcile.rejects'), '1', 'any role that may SELECT t sees its rejects');
SELECT is(pg_temp.as_role('rtap_priv_outsider', 'SELECT count(*)::text FROM reconcile.receipts'), '0', 'a role that may not SELECT t sees none of its receipts');
SELECT is(pg_temp.as_role('rtap_priv_outsider', 'SELECT count(*)::text FROM reconcile.rejects'), '0', 'nor its rejects');
SELECT is(pg_temp.as_role('rtap_priv_outsider', 'SELECT count(*)::text FROM reconcile.conflicts'), '0', 'nor its conflicts');
SELECT is(pg_temp.as_role('rtap_priv_outsider', 'SELECT count(*)::text FROM reconcile.cursors'), '0', 'nor its cursors');
SELECT is(pg_temp.as_role('rtap_priv_outsider', 'SELECT count(*)::text FROM reconcile.batch_objects'), '0', 'nor its objects');
SELECT is(pg_temp.as_role('rtap_priv_outsider', 'SELECT count(*)::text FROM reconcile.targets'), '0', 'nor its registration');
SELECT is(pg_temp.as_role('rtap_priv_noselect', 'SELECT count(*)::text FROM reconcile.rejects'), '0', 'INSERT and UPDATE without SELECT do not reveal rejects');

-- A replay by a role that lost its rights is refused too: the check comes first.
REVOKE INSERT ON t FROM rtap_priv_loader;
SELECT is(pg_temp.as_role('rtap_priv_loader', $$SELECT status FROM reconcile_batch('t', 's',
    '[{"object_key":"p/1","version_id":"1","content_hash":"x","rows":2}]')$$),
    'ERROR 42501', 'a replay is refused once the role lost INSERT');
GRANT INSERT ON t TO rtap_priv_loader;

-- Row-level security on the target: refused rather than bypassed.
ALTER TABLE t ENABLE ROW LEVEL SECURITY;
CREATE POLICY only_a ON t USING (id = 'A');
SELECT is(pg_temp.as_role('rtap_priv_loader', $$SELECT status FROM reconcile_batch('t', 's',
    '[{"object_key":"p/2","version_id":"1","content_hash":"x","rows":1}]')$$),
    'ERROR 0A000', 'a target with row-level security for the caller is refused');
SELECT is(pg_temp.as_role('rtap_priv_loader', 'SELECT count(*)::text FROM t'), '1', 'the policy applies to the loader (sanity)');
SELECT results_eq('SELECT version FROM t', $$VALUES (1::bigint)$$, 'the refused batch wrote nothing');

SELECT * FROM finish();
ROLLBACK;
