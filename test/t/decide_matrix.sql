-- The decision matrix's cases and driver, shared by sql/decide_matrix.sql
-- (the plain batch on both write paths, and reconcile_resolve) and
-- test/t/051_citus_pushdown.pl (the Citus pushed-down merge): one table of
-- cases, each expected outcome written from the README's rule for a key.
-- target: absent / live / tomb, at tversion with label tlabel (the payload);
-- staged: the key's rows in source order, operation:version:label;
-- expected: the receipt's non-zero counts; final: the target's row after
-- (absent, or live/tomb:version:label); a conflict case names the label
-- the owner keeps and the resolution's outcome and final row.  A DELETE at
-- a higher version moves version and hash and keeps the payload
-- (docs/loader.md, dispositions), so case 34 keeps label a.
CREATE TABLE decide_cases (id int PRIMARY KEY, target text, tversion int, tlabel text,
    staged text[], expected jsonb, final text,
    keep text, resolved text, resolved_final text);
INSERT INTO decide_cases VALUES
 ( 1, 'absent', NULL, NULL, '{U:1:a}',               '{"inserted":1}',                 'live:1:a', NULL, NULL, NULL),
 ( 2, 'absent', NULL, NULL, '{D:1:a}',               '{"deleted":1}',                  'tomb:1:a', NULL, NULL, NULL),
 ( 3, 'absent', NULL, NULL, '{U:2:a,U:2:a}',         '{"inserted":1,"duplicates":1}',  'live:2:a', NULL, NULL, NULL),
 ( 4, 'absent', NULL, NULL, '{U:2:a,U:2:b}',         '{"conflicts":2}',                'absent',   'b', 'inserted', 'live:2:b'),
 ( 5, 'absent', NULL, NULL, '{U:1:b,U:2:a}',         '{"inserted":1,"stale":1}',       'live:2:a', NULL, NULL, NULL),
 ( 6, 'absent', NULL, NULL, '{U:3:a,U:2:b,U:2:c}',   '{"conflicts":3}',                'absent',   'b', 'inserted', 'live:3:a'),
 ( 7, 'absent', NULL, NULL, '{U:1:b,D:2:a}',         '{"deleted":1,"stale":1}',        'tomb:2:a', NULL, NULL, NULL),
 ( 8, 'absent', NULL, NULL, '{U:1:b,U:1:b,U:3:a}',   '{"inserted":1,"stale":1,"duplicates":1}', 'live:3:a', NULL, NULL, NULL),
 (10, 'live', 2, 'a', '{U:3:b}',                     '{"updated":1}',                  'live:3:b', NULL, NULL, NULL),
 (11, 'live', 2, 'a', '{U:2:a}',                     '{"unchanged":1}',                'live:2:a', NULL, NULL, NULL),
 (12, 'live', 2, 'a', '{U:2:b}',                     '{"conflicts":1}',                'live:2:a', 'b', 'updated', 'live:2:b'),
 (13, 'live', 2, 'a', '{U:1:b}',                     '{"stale":1}',                    'live:2:a', NULL, NULL, NULL),
 (14, 'live', 2, 'a', '{U:3:b,U:2:b}',               '{"conflicts":2}',                'live:2:a', 'b', 'updated', 'live:3:b'),
 (15, 'live', 2, 'a', '{U:3:b,U:2:a}',               '{"updated":1,"stale":1}',        'live:3:b', NULL, NULL, NULL),
 (16, 'live', 2, 'a', '{D:3:a}',                     '{"deleted":1}',                  'tomb:3:a', NULL, NULL, NULL),
 (17, 'live', 2, 'a', '{U:2:a,U:2:a}',               '{"unchanged":1,"duplicates":1}', 'live:2:a', NULL, NULL, NULL),
 (18, 'live', 2, 'a', '{U:1:a,U:1:a}',               '{"stale":1,"duplicates":1}',     'live:2:a', NULL, NULL, NULL),
 (19, 'live', 2, 'a', '{U:3:b,U:3:b,U:1:c}',         '{"updated":1,"duplicates":1,"stale":1}', 'live:3:b', NULL, NULL, NULL),
 (20, 'live', 2, 'a', '{U:4:b,U:3:c,U:3:c}',         '{"updated":1,"stale":1,"duplicates":1}', 'live:4:b', NULL, NULL, NULL),
 (21, 'live', 3, 'a', '{U:2:b,U:2:c}',               '{"conflicts":2}',                'live:3:a', 'b', 'stale', 'live:3:a'),
 (22, 'live', 2, 'a', '{U:3:b,U:3:c}',               '{"conflicts":2}',                'live:2:a', 'c', 'updated', 'live:3:c'),
 (23, 'live', 2, 'a', '{U:2:a,U:2:b}',               '{"conflicts":2}',                'live:2:a', 'a', 'unchanged', 'live:2:a'),
 (30, 'tomb', 2, 'a', '{U:1:a}',                     '{"stale":1}',                    'tomb:2:a', NULL, NULL, NULL),
 (31, 'tomb', 2, 'a', '{U:3:a}',                     '{"updated":1}',                  'live:3:a', NULL, NULL, NULL),
 (32, 'tomb', 2, 'a', '{D:2:a}',                     '{"unchanged":1}',                'tomb:2:a', NULL, NULL, NULL),
 (33, 'tomb', 2, 'a', '{U:2:b}',                     '{"conflicts":1}',                'tomb:2:a', 'b', 'updated', 'live:2:b'),
 (34, 'tomb', 2, 'a', '{D:3:b}',                     '{"deleted":1}',                  'tomb:3:a', NULL, NULL, NULL),
 (35, 'tomb', 2, 'a', '{D:1:a,U:1:b}',               '{"conflicts":2}',                'tomb:2:a', 'b', 'stale', 'tomb:2:a');

-- A case's version n as the staged text of a version column of type vtype,
-- in the n-th of several spellings (variant): an int; a timestamptz at
-- base + n hours written at offsets +00..+02; a numeric n/10 with one to
-- three decimals.  Equal versions are spelled differently in one batch, so
-- that the rule sees the type's equality, not the text's.
CREATE FUNCTION decide_version(vtype text, n int, variant int) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE vtype
        WHEN 'timestamptz' THEN
            pg_catalog.to_char(timestamp '2026-03-01 00:00:00' + n * interval '1 hour'
                               + (variant % 3) * interval '1 hour', 'YYYY-MM-DD HH24:MI:SS')
            || '+0' || (variant % 3)
        WHEN 'numeric' THEN pg_catalog.round(n * 0.1, 1 + variant % 3)::text
        ELSE n::text END
$$;

-- One batch of one object; the object's key names the target, so that a
-- manifest is committed once per target.
CREATE FUNCTION decide_load(target regclass, obj text, rows text[], options jsonb)
RETURNS reconcile.receipt
LANGUAGE plpgsql AS $$
DECLARE
    r reconcile.receipt;
    stage regclass := (target::text || '_stage')::regclass;
    id int := split_part(obj, '/', 3)::int;
BEGIN
    EXECUTE format('INSERT INTO %s SELECT $1, n, CASE split_part(x, '':'', 1) WHEN ''D'' THEN ''DELETE'' ELSE ''UPSERT'' END,
           $2, split_part(x, '':'', 3), decide_version($4, split_part(x, '':'', 2)::int, n::int)
      FROM unnest($3) WITH ORDINALITY AS u(x, n)', stage) USING obj, id::text, rows, decide_vtype(target);
    SELECT * INTO r FROM reconcile_batch(target, stage,
        jsonb_build_array(jsonb_build_object('object_key', obj, 'version_id', '1',
            'content_hash', 'h', 'rows', cardinality(rows))), NULL, NULL, options);
    RETURN r;
END
$$;

CREATE FUNCTION decide_counts(r reconcile.receipt) RETURNS jsonb
LANGUAGE sql AS $$
    SELECT jsonb_strip_nulls(jsonb_build_object('inserted', nullif(r.inserted, 0),
        'updated', nullif(r.updated, 0), 'deleted', nullif(r.deleted, 0),
        'unchanged', nullif(r.unchanged, 0), 'stale', nullif(r.stale, 0),
        'duplicates', nullif(r.duplicates, 0), 'conflicts', nullif(r.conflicts, 0),
        'rejected', nullif(r.rejected, 0)))
$$;

-- The type of a decide target's version column.
CREATE FUNCTION decide_vtype(target regclass) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN a.atttypid = 'timestamptz'::regtype THEN 'timestamptz'
                WHEN a.atttypid = 'numeric'::regtype THEN 'numeric' ELSE 'int' END
      FROM pg_attribute a WHERE a.attrelid = target AND a.attname = 'version'
$$;

-- The target's row of a case, its version as the case's number n.
CREATE FUNCTION decide_row(target regclass, id int) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    s text;
BEGIN
    EXECUTE format('SELECT CASE WHEN is_deleted THEN ''tomb'' ELSE ''live'' END || '':''
                    || (SELECT n FROM generate_series(0, 9) n
                         WHERE decide_version($2, n, 0)::%s OPERATOR(pg_catalog.=) version)
                    || '':'' || label FROM %s WHERE id = $1', decide_vtype(target), target)
        INTO s USING id::text, decide_vtype(target);
    RETURN coalesce(s, 'absent');
END
$$;

-- A new target dt_<name> and its staged relation dt_<name>_stage; for Citus
-- both distributed, co-located, before the registration.
CREATE FUNCTION decide_setup(name text, citus boolean DEFAULT false, vtype text DEFAULT 'int')
RETURNS regclass
LANGUAGE plpgsql AS $$
DECLARE
    t regclass;
BEGIN
    EXECUTE format('CREATE TABLE %I (id text PRIMARY KEY, label text, version %s NOT NULL,
                    is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea)', 'dt_' || name,
                   vtype);
    EXECUTE format('CREATE TABLE %I (object_key text, source_row bigint, operation text,
                    id text, label text, version text)', 'dt_' || name || '_stage');
    t := ('dt_' || name)::regclass;
    IF citus THEN
        EXECUTE 'SELECT create_distributed_table($1, ''id'')' USING t;
        EXECUTE 'SELECT create_distributed_table($1, ''id'', colocate_with => $2)'
            USING t::text || '_stage', t::text;
    END IF;
    PERFORM reconcile_register(t, '{id}', 'version', 'is_deleted', 'payload_hash',
                               'quarantine', '{label}');
    RETURN t;
END
$$;

-- One case into dt_<name> with the batch options given, and, if resolve,
-- the owner's decision of a conflict case (Citus targets refuse
-- reconcile_resolve).  Returns what disagrees with the expected.
CREATE FUNCTION decide_case(name text, case_id int, options jsonb, resolve boolean)
RETURNS TABLE (id int, step text, expected text, got text)
LANGUAGE plpgsql AS $$
DECLARE
    c decide_cases;
    t regclass := ('dt_' || name)::regclass;
    r reconcile.receipt;
    res record;
BEGIN
    SELECT * INTO STRICT c FROM decide_cases WHERE decide_cases.id = case_id;
    IF c.target <> 'absent' THEN
        PERFORM decide_load(t, name || '/setup/' || c.id,
            ARRAY[CASE c.target WHEN 'tomb' THEN 'D' ELSE 'U' END || ':' || c.tversion || ':' || c.tlabel],
            options);
    END IF;
    r := decide_load(t, name || '/case/' || c.id, c.staged, options);
    RETURN QUERY SELECT c.id, v.step, v.expected, v.got
      FROM (VALUES ('batch', c.expected::text, decide_counts(r)::text),
                   ('batch row', c.final, decide_row(t, c.id))) v(step, expected, got)
     WHERE v.expected IS DISTINCT FROM v.got;
    IF c.keep IS NOT NULL AND resolve THEN
        SELECT * INTO res FROM reconcile_resolve(t, r.batch_id, jsonb_build_object('id', c.id::text),
            (SELECT staged_hash FROM reconcile.conflicts h
              WHERE h.target = t AND h.batch_id = r.batch_id
                AND h.staged_payload->>'label' = c.keep LIMIT 1));
        RETURN QUERY SELECT c.id, v.step, v.expected, v.got
          FROM (VALUES ('resolve', c.resolved, res.outcome::text),
                       ('resolve row', c.resolved_final, decide_row(t, c.id))) v(step, expected, got)
         WHERE v.expected IS DISTINCT FROM v.got;
    END IF;
END
$$;

-- Every case, resolutions included, under reconcile.write_path = path, on
-- a version column of type vtype (int, timestamptz or numeric).
CREATE FUNCTION decide_run(name text, path text, vtype text DEFAULT 'int')
RETURNS TABLE (id int, step text, expected text, got text)
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM decide_setup(name, false, vtype);
    PERFORM set_config('reconcile.write_path', path, true);
    RETURN QUERY SELECT d.* FROM decide_cases c, LATERAL decide_case(name, c.id, NULL, true) d
                  ORDER BY c.id;
END
$$;
