-- What the fuzzer (test/fuzz, bench/fuzz) found, one case per defect, kept
-- so that it stays fixed.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

-- The SQLSTATE and message of a statement's error.
CREATE FUNCTION error_of(q text) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
    EXECUTE q;
    RETURN 'no error';
EXCEPTION WHEN OTHERS THEN
    RETURN SQLSTATE || ': ' || SQLERRM;
END $$;

CREATE TABLE fz_a (id integer PRIMARY KEY, v text);

-- A regclass that names no relation (a dropped table's OID, 0, an OID
-- never used) is a user's mistake, 42P01, not an internal error (XX000
-- "could not open relation with OID").
SELECT error_of($$SELECT * FROM reconcile_diff(4294967295::oid::regclass, 'fz_a', '{id}')$$);
SELECT error_of($$SELECT * FROM reconcile_diff('fz_a', 0::oid::regclass, '{id}')$$);
SELECT error_of($$SELECT * FROM reconcile_diff_summary(4294967295::oid::regclass, 'fz_a', '{id}')$$);
SELECT error_of($$SELECT * FROM reconcile_diff_summary('fz_a', 12::oid::regclass, '{id}')$$);
CREATE TABLE fz_gone (id integer);
SELECT 'fz_gone'::regclass::oid AS gone_oid \gset
DROP TABLE fz_gone;
SELECT error_of(format('SELECT * FROM reconcile_diff(%s::oid::regclass, %L, %L)',
                       :gone_oid, 'fz_a', '{id}')) LIKE '42P01: relation with OID % does not exist' AS dropped;
-- The other entry points that take a regclass answer the same way.
SELECT error_of($$SELECT * FROM reconcile_check(4294967295::oid::regclass, '{"fail": {"t": "true"}}')$$);
SELECT error_of($$SELECT reconcile_discover_rules(4294967295::oid::regclass)$$);

DROP TABLE fz_a;
DROP FUNCTION error_of(text);
DROP EXTENSION reconcile;
