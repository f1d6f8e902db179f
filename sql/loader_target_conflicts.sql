-- Conflicts against the target at every staged version of a key, not only
-- the winner's (issue 12, point 1): a staged row whose version equals the
-- target row's version with another payload hash is a conflict even when
-- the batch also brings a higher version.  Every case under both policies
-- and both write paths: 'quarantine' holds every staged row of the key
-- back and leaves the target's row as it was, 'abort' fails with 23505 and
-- writes nothing.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

CREATE TABLE tc (customer_id text PRIMARY KEY, name text, version bigint NOT NULL,
                 is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea);
CREATE TABLE tc_stage (object_key text, source_row bigint, operation text,
                       customer_id text, version text, name text);

-- The target before each case: C1 v2 'Ana Lee', C2 v1 'Dev' and C3 a
-- tombstone at v2, all loaded by a batch (so with their hashes).  Then the
-- case's rows (operation, key, version, name) as one object, loaded under
-- the policy and write path given.  Returns the receipt's counts or the
-- error, then the target's rows, then what reconcile.conflicts holds.
CREATE FUNCTION run_case(policy text, path text, rows text[][]) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
    r record;
BEGIN
    TRUNCATE tc, tc_stage;
    DELETE FROM reconcile.receipts WHERE target = 'tc'::regclass;
    DELETE FROM reconcile.conflicts WHERE target = 'tc'::regclass;
    PERFORM reconcile_register('tc', '{customer_id}', 'version', 'is_deleted',
                               'payload_hash', policy);
    INSERT INTO tc_stage VALUES ('base', 1, 'UPSERT', 'C1', '2', 'Ana Lee'),
                                ('base', 2, 'UPSERT', 'C2', '1', 'Dev'),
                                ('base', 3, 'UPSERT', 'C3', '1', 'Cy'),
                                ('base', 4, 'DELETE', 'C3', '2', NULL);
    PERFORM reconcile_batch('tc', 'tc_stage',
        '[{"object_key":"base","version_id":"1","content_hash":"b","rows":4}]');
    FOR i IN 1 .. array_length(rows, 1) LOOP
        INSERT INTO tc_stage VALUES ('case', i, rows[i][1], rows[i][2], rows[i][3], rows[i][4]);
    END LOOP;
    PERFORM set_config('reconcile.write_path', path, true);
    BEGIN
        SELECT * INTO r FROM reconcile_batch('tc', 'tc_stage',
            jsonb_build_array(jsonb_build_object('object_key', 'case', 'version_id', '1',
                              'content_hash', 'c', 'rows', array_length(rows, 1))));
        RETURN NEXT format('%s: inserted %s updated %s deleted %s unchanged %s stale %s duplicates %s conflicts %s',
                           r.status, r.inserted, r.updated, r.deleted, r.unchanged, r.stale,
                           r.duplicates, r.conflicts);
    EXCEPTION WHEN OTHERS THEN
        DECLARE
            detail text;
        BEGIN
            GET STACKED DIAGNOSTICS detail = PG_EXCEPTION_DETAIL;
            RETURN NEXT format('error %s: %s', SQLSTATE, SQLERRM);
            RETURN NEXT format('  detail: %s', detail);
        END;
    END;
    RETURN QUERY SELECT format('  target %s v%s %s%s', customer_id, version, name,
                               CASE WHEN is_deleted THEN ' (tombstone)' ELSE '' END)
                   FROM tc ORDER BY customer_id;
    RETURN QUERY SELECT format('  held %s v%s row %s%s', key, version, source_row,
                               CASE WHEN existing_hash IS NOT NULL THEN ' (at the target''s version)' ELSE '' END)
                   FROM reconcile.conflicts WHERE target = 'tc'::regclass
                  ORDER BY source_row;
END
$$;

-- Every case under quarantine and abort, direct and general write path.
CREATE FUNCTION run_all(rows text[][]) RETURNS SETOF text LANGUAGE plpgsql AS $$
DECLARE
    policy text;
    path text;
BEGIN
    FOREACH policy IN ARRAY '{quarantine,abort}'::text[] LOOP
        FOREACH path IN ARRAY '{auto,general}'::text[] LOOP
            RETURN NEXT format('-- %s, %s', policy, path);
            RETURN QUERY SELECT * FROM run_case(policy, path, rows);
        END LOOP;
    END LOOP;
END
$$;

-- The issue's example: C1 v2 'Ana Smith' disagrees with the target's
-- C1 v2 'Ana Lee'; the batch's C1 v3 does not settle that.
SELECT * FROM run_all('{{UPSERT,C1,2,Ana Smith},{UPSERT,C1,3,Ana Smith}}');

-- The conflicting row is the lowest of three staged versions.
SELECT * FROM run_all('{{UPSERT,C1,4,Ana Q},{UPSERT,C1,3,Ana P},{UPSERT,C1,2,Ana Smith},{UPSERT,C2,2,Dev B}}');

-- A tombstone at the target's version is another payload.
SELECT * FROM run_all('{{DELETE,C1,2,NULL},{UPSERT,C1,3,Ana Lee}}');

-- The target's tombstone against a live row at its version.
SELECT * FROM run_all('{{UPSERT,C3,2,Cy},{UPSERT,C3,5,Cy}}');

-- Not a conflict: an exact repeat of the target's row at its version, and
-- a higher version (C1 moves to v3, the repeat is stale); the same repeat
-- alone is unchanged.
SELECT * FROM run_all('{{UPSERT,C1,2,Ana Lee},{UPSERT,C1,3,Ana Lee-Smith},{UPSERT,C2,1,Dev}}');
-- Nor is a row of another payload below the target's version.
SELECT * FROM run_all('{{UPSERT,C1,1,Ana},{UPSERT,C1,3,Ana Lee-Smith}}');

DROP FUNCTION run_all(text[]), run_case(text, text, text[]);
DROP TABLE tc, tc_stage;
DROP EXTENSION reconcile;
