-- Targeted random calls: prints :n statements, one a line, each calling one
-- of reconcile's functions with arguments drawn from the fuzz database's
-- value lists (fuzz.rels, fuzz.docs, fuzz.name_lists, fuzz.words,
-- fuzz.nums: every relation kind, dropped OIDs, NULL, huge arrays and
-- strings, negative and out-of-range numbers, malformed manifests, rules and
-- options) and from generated JSON.  Half the calls are aimed at arguments
-- that get deep (a registered target with its own staged table and a
-- manifest of its objects); some run inside a transaction after DDL on the
-- relations they read, rolled back.  The same :seed gives the same
-- statements against the same fixture.
--
--   psql -XAtq -v seed=1 -v n=2000 -d reconcile_fuzz -f test/fuzz/calls.sql > calls.out
--
-- sqlsmith calls only functions that return one value and draws arguments
-- from column references, so this covers what it reaches seldom: the
-- set-returning functions, and arguments that are almost right.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
SELECT setseed(:seed::float8 / 2147483648.0) \g /dev/null

-- A random element of a list.
CREATE FUNCTION pg_temp.one(VARIADIC xs anycompatiblearray) RETURNS anycompatible LANGUAGE sql AS
$$ SELECT xs[1 + floor(random() * pg_catalog.cardinality(xs))::int] $$;

-- A value of one of the fuzz lists as SQL text: a literal when short, else a
-- subquery naming its row (so that each statement stays one short line).
CREATE FUNCTION pg_temp.pick(list text, typ text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    rid integer;
    rval text;
BEGIN
    EXECUTE format('SELECT id, val::text FROM fuzz.%I ORDER BY random(), id LIMIT 1', list)
        INTO rid, rval;
    IF rval IS NULL THEN
        RETURN 'NULL::' || typ;
    ELSIF length(rval) <= 200 AND position(E'\n' IN rval) = 0 THEN
        RETURN quote_literal(rval) || '::' || typ;
    END IF;
    RETURN format('(SELECT val FROM fuzz.%I WHERE id = %s)', list, rid);
END $$;

CREATE FUNCTION pg_temp.lit(v text, typ text) RETURNS text LANGUAGE sql AS
$$ SELECT CASE WHEN v IS NULL THEN 'NULL::' || typ ELSE quote_literal(v) || '::' || typ END $$;

-- A JSON number, or something that is almost one.
CREATE FUNCTION pg_temp.jnum() RETURNS jsonb LANGUAGE plpgsql AS $$
DECLARE
    x float8 := random();
BEGIN
    IF x < 0.3 THEN
        RETURN to_jsonb((SELECT val FROM fuzz.nums ORDER BY random(), id LIMIT 1));
    ELSIF x < 0.5 THEN
        RETURN to_jsonb(floor(random() * 60)::int);
    ELSIF x < 0.6 THEN
        RETURN pg_temp.one('1e3', '2.0', '0.5', '-0', '1e308', '-1e308', '1e-300', '"7"',
                           'null', 'true', '[]', '{}', '18446744073709551616')::jsonb;
    ELSE
        RETURN to_jsonb(round((random() * 3 - 1)::numeric, 3));
    END IF;
END $$;

-- Targets with a staged relation of theirs and that relation's objects.
CREATE TEMP TABLE pairs (target text, staged text, objects text[], cols text[]);
INSERT INTO pairs VALUES
    ('customer', 'customer_stage',
     '{crm/part-0001.csv,crm/part-0002.csv,crm/part-0003.csv,crm/part-0004.csv,crm/none}',
     '{customer_id,name,amount,updated_at,tags,version,is_deleted,payload_hash}'),
    ('customer', 'customer_stage_typed', '{typed/part-0001}',
     '{customer_id,name,amount,updated_at,tags,version}'),
    ('customer', 'customer_stage_view', '{typed/part-0001}',
     '{customer_id,name,amount,updated_at,tags,version}'),
    ('account', 'account_stage', '{acct/1}',
     '{region,account_no,balance,opened,meta,status,version,deleted,loaded_at}'),
    ('event', 'event_stage', '{ev/1}', '{event_id,at,kind,amount,version,gone,hash}'),
    ('ledger', 'ledger_stage', '{ledger/1}', '{entry_id,amount,note,version,deleted,h}'),
    ('odd', 'odd', '{odd/1}', '{id,n,f,r,i2,i8,t,ts,d,b,j,iv,u,arr,bt}');

-- The fixture's registrations, to bring back what an unregister took away.
CREATE TEMP TABLE registrations AS
SELECT * FROM (VALUES
    ('customer', '{customer_id}',
     'SELECT reconcile_register(''customer'', ''{customer_id}'', ''version'', ''is_deleted'', ''payload_hash'', ''quarantine'')'),
    ('account', '{region,account_no}',
     'SELECT reconcile_register(''account'', ''{region,account_no}'', ''version'', ''deleted'', ''h'', ''abort'', ''{balance,opened,meta,status}'')'),
    ('ledger', '{entry_id}',
     'SELECT reconcile_register(''ledger'', ''{entry_id}'', ''version'', ''deleted'', ''h'')'),
    ('event', '{event_id,at}',
     'SELECT reconcile_register(''event'', ''{event_id,at}'', ''version'', ''gone'', ''hash'', ''quarantine'')')
    ) AS r(target, keys, registration);

-- A manifest for some of a staged relation's objects, with counts and
-- fields sometimes right, sometimes not.
CREATE FUNCTION pg_temp.manifest(staged text, objects text[]) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    m jsonb := '[]';
    o text;
    e jsonb;
    k int := 1 + floor(random() * 3)::int;
    n bigint;
BEGIN
    IF random() < 0.15 THEN
        RETURN pg_temp.pick('docs', 'jsonb');
    END IF;
    FOR i IN 1..k LOOP
        o := objects[1 + floor(random() * cardinality(objects))::int];
        BEGIN
            EXECUTE format('SELECT count(*) FROM %I WHERE object_key = $1', staged) INTO n USING o;
        EXCEPTION WHEN undefined_column THEN
            n := 0;
        END;
        e := jsonb_build_object('object_key', o,
                                'version_id', pg_temp.one('1', '2', 'a', floor(random() * 1e6)::text),
                                'content_hash', pg_temp.one('h', 'sha256:01', 'sha256:' || md5(random()::text)),
                                'rows', CASE WHEN random() < 0.6 THEN to_jsonb(n) ELSE pg_temp.jnum() END);
        IF random() < 0.1 THEN
            e := e - pg_temp.one('object_key', 'version_id', 'content_hash', 'rows');
        END IF;
        IF random() < 0.05 THEN
            e := e || jsonb_build_object(pg_temp.one('extra', 'ROWS', ''), pg_temp.jnum());
        END IF;
        m := m || jsonb_build_array(e);
    END LOOP;
    RETURN pg_temp.lit(m::text, 'jsonb');
END $$;

-- A rules document over some columns: expressions built from fragments.
CREATE FUNCTION pg_temp.rules(cols text[]) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    doc jsonb := '{}';
    sev text;
    expr text;
BEGIN
    IF random() < 0.3 THEN
        RETURN pg_temp.pick('docs', 'jsonb');
    END IF;
    FOR i IN 1..1 + floor(random() * 3)::int LOOP
        sev := pg_temp.one('fail', 'warn', 'drop');
        expr := format('%s %s %s', cols[1 + floor(random() * cardinality(cols))::int],
                       pg_temp.one('=', '<>', '>=', 'IS DISTINCT FROM', '~', '::text ~', '::text <'),
                       pg_temp.one('0', '''x''', 'NULL', '-1', '''^[a-z]{300}$''', '1e400',
                                   '''2026-01-01''', 'length(''abc'')', '(SELECT 1)',
                                   cols[1 + floor(random() * cardinality(cols))::int]));
        -- Now and then a rule that calls reconcile itself, while it runs.
        IF random() < 0.1 THEN
            expr := pg_temp.one(
                'reconcile_batch_id(''[{"object_key":"r","version_id":"1","content_hash":"h","rows":1}]'') IS NOT NULL',
                'reconcile_check_report(''customer'', ''{"fail": {"t": "true"}}'') IS NOT NULL',
                'reconcile_discover_rules(''plain'') IS NOT NULL',
                '(SELECT count(*) FROM reconcile_check(''customer'', ''{"warn": {"n": "name IS NOT NULL"}}'')) > 0',
                '(SELECT count(*) FROM reconcile_diff(''customer'', ''customer_copy'', ''{customer_id}'')) >= 0',
                '(SELECT rows_source FROM reconcile_diff_summary(''customer'', ''customer_copy'', ''{customer_id}'')) > 0',
                '(SELECT count(*) FROM reconcile.receipts) >= 0');
        END IF;
        IF random() < 0.2 THEN
            expr := 'NOT COALESCE((' || expr || '), false)';
        END IF;
        doc := jsonb_set(doc, ARRAY[sev], COALESCE(doc -> sev, '{}') || jsonb_build_object('r' || i, expr));
    END LOOP;
    IF random() < 0.3 THEN
        doc := doc || jsonb_build_object('dataset_checks', jsonb_build_array(jsonb_build_object(
            'name', 'd', 'sql', format(pg_temp.one(
                'SELECT %s FROM {{TABLE}} GROUP BY 1 HAVING count(*) > 1',
                'SELECT %s FROM {{DATAFRAME}} WHERE %s IS NULL',
                'SELECT count(%s) FROM {{TABLE}};',
                'SELECT %s FROM {{TABLE}} WHERE reconcile_check_report(''customer'', ''{"fail": {"t": "true"}}'') IS NULL',
                'SELECT %s FROM reconcile_check(''plain'', ''{"dataset_checks": [{"name": "n", "sql": "SELECT 1 FROM {{TABLE}}"}]}'') WHERE false'), cols[1 + floor(random() * cardinality(cols))::int],
                cols[1 + floor(random() * cardinality(cols))::int]))));
    END IF;
    RETURN pg_temp.lit(doc::text, 'jsonb');
END $$;

-- Options for reconcile_check, reconcile_discover_rules or reconcile_diff.
CREATE FUNCTION pg_temp.options(cols text[], kind text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    c text := cols[1 + floor(random() * cardinality(cols))::int];
    x float8 := random();
BEGIN
    IF x < 0.6 AND kind = 'check' THEN
        RETURN pg_temp.lit(pg_temp.one(
            jsonb_build_object('sample', pg_temp.jnum()),
            jsonb_build_object('sample', pg_temp.jnum(), 'key_columns', jsonb_build_array(c)),
            jsonb_build_object('key_columns', jsonb_build_array(c, cols[1])),
            jsonb_build_object('fail_on_breach', pg_temp.one('true', 'false', 'null', '1', '"yes"')::jsonb),
            jsonb_build_object('sample', pg_temp.jnum(), 'fail_on_breach', true)
            )::text, 'jsonb');
    ELSIF x < 0.6 AND kind = 'load' THEN
        RETURN pg_temp.lit(pg_temp.one(
            jsonb_build_object('max_rejects', pg_temp.jnum()),
            jsonb_build_object('max_reject_share', pg_temp.jnum()),
            jsonb_build_object('unknown_columns', pg_temp.one('error', 'ignore', 'IGNORE', '')),
            jsonb_build_object('max_rejects', pg_temp.jnum(), 'max_reject_share', pg_temp.jnum(),
                               'unknown_columns', 'ignore')
            )::text, 'jsonb');
    ELSIF x < 0.6 AND kind = 'discover' THEN
        RETURN pg_temp.lit(pg_temp.one(
            jsonb_build_object('max_values', pg_temp.jnum()),
            jsonb_build_object('min_share', pg_temp.jnum()),
            jsonb_build_object('sample_rows', pg_temp.jnum()),
            jsonb_build_object('max_values', pg_temp.jnum(), 'min_share', pg_temp.jnum(),
                               'sample_rows', pg_temp.jnum())
            )::text, 'jsonb');
    ELSIF x < 0.25 THEN
        RETURN pg_temp.pick('docs', 'jsonb');
    ELSIF x < 0.45 THEN
        RETURN '''{}''::jsonb';
    END IF;
    RETURN pg_temp.lit(pg_temp.one(
        jsonb_build_object('sample', pg_temp.jnum()),
        jsonb_build_object('sample', pg_temp.jnum(), 'key_columns', jsonb_build_array(c)),
        jsonb_build_object('max_values', pg_temp.jnum()),
        jsonb_build_object('min_share', pg_temp.jnum()),
        jsonb_build_object('sample_rows', pg_temp.jnum()),
        jsonb_build_object('compare', jsonb_build_array(c)),
        jsonb_build_object('ignore', jsonb_build_array(c)),
        jsonb_build_object('tolerance', jsonb_build_object(c, pg_temp.jnum())),
        jsonb_build_object('tolerance', jsonb_build_object(c, pg_temp.one('1 day', '-1 second', 'x'))),
        jsonb_build_object('updated_column', c, 'window', jsonb_build_array(pg_temp.jnum(), pg_temp.jnum())),
        jsonb_build_object('updated_column', c, 'cutoff', 'source_max'),
        jsonb_build_object('trim_keys', pg_temp.jnum()),
        jsonb_build_object('column_map', jsonb_build_object(c, pg_temp.one('name', 'amount', 'x', ''))),
        jsonb_build_object('target_key_columns', jsonb_build_array(c, c)),
        jsonb_build_object('time_zone', pg_temp.one('UTC', 'America/New_York', 'Asia/Kathmandu', 'CET', 'Mars/Olympus', '')),
        jsonb_build_object('updated_column', c, 'lookback', pg_temp.one('7 days', 'P7D', '-1 day', 'soon', '')),
        jsonb_build_object('remote', pg_temp.one('auto', 'checksum', 'pull', 'push'), 'split_factor', pg_temp.jnum(),
                           'leaf_rows', pg_temp.jnum())
        )::text, 'jsonb');
END $$;

CREATE FUNCTION pg_temp.call() RETURNS text LANGUAGE plpgsql AS $$
DECLARE
    p record;
    f int := floor(random() * 19)::int;
    deep boolean := random() < 0.5;
    rel text;
    stmt text;
BEGIN
    SELECT * INTO p FROM pairs ORDER BY random(), target, staged LIMIT 1;
    rel := CASE WHEN deep THEN pg_temp.lit(p.target, 'regclass') ELSE pg_temp.pick('rels', 'regclass') END;
    stmt := CASE
    WHEN f = 0 THEN format('SELECT reconcile_register(%s, %s, %s, %s, %s, %s, %s)', rel,
        CASE WHEN deep THEN pg_temp.lit((SELECT keys FROM registrations
                                           WHERE target = p.target), 'text[]')
             ELSE pg_temp.pick('name_lists', 'text[]') END,
        pg_temp.pick('words', 'text'), pg_temp.pick('words', 'text'), pg_temp.pick('words', 'text'),
        pg_temp.pick('words', 'text'), pg_temp.pick('name_lists', 'text[]'))
    WHEN f = 1 THEN format('SELECT reconcile_register(target => %s, key_columns => %s, version_column => %s, deleted_column => %s, hash_column => %s%s)',
        rel, pg_temp.pick('name_lists', 'text[]'),
        pg_temp.lit(pg_temp.one('version', 'ver', 'customer_id', 'name'), 'text'),
        pg_temp.lit(pg_temp.one('is_deleted', 'deleted', 'gone', 'version'), 'text'),
        pg_temp.lit(pg_temp.one('payload_hash', 'h', 'hash', 'tags'), 'text'),
        CASE WHEN random() < 0.5 THEN ', payload_columns => ' || pg_temp.pick('name_lists', 'text[]') ELSE '' END)
    WHEN f = 2 THEN format('SELECT reconcile_unregister(%s)', pg_temp.pick('rels', 'regclass'))
    WHEN f = 3 THEN format('SELECT reconcile_batch_id(%s)', pg_temp.manifest(p.staged, p.objects))
    WHEN f = 4 THEN format('SELECT reconcile_canonical_manifest(%s)', pg_temp.manifest(p.staged, p.objects))
    WHEN f BETWEEN 5 AND 7 THEN format('SELECT * FROM reconcile_batch(%s, %s, %s, %s, %s%s)', rel,
        CASE WHEN deep OR random() < 0.3 THEN pg_temp.lit(p.staged, 'regclass') ELSE pg_temp.pick('rels', 'regclass') END,
        pg_temp.manifest(p.staged, p.objects), pg_temp.pick('words', 'text'), pg_temp.pick('words', 'text'),
        CASE WHEN random() < 0.4 THEN ', ' || pg_temp.options(p.cols, 'load') ELSE '' END)
    WHEN f = 8 THEN format('SELECT * FROM reconcile_diff(%s, %s, %s, %s)', rel,
        CASE WHEN deep THEN pg_temp.lit(pg_temp.one('customer_copy', p.staged, p.target, 'remote_customer',
                                                         'hostile_customer', 'remote_wide'), 'regclass')
             ELSE pg_temp.pick('rels', 'regclass') END,
        CASE WHEN deep THEN pg_temp.lit(pg_temp.one('{customer_id}', '{name}', '{region,account_no}', '{version}',
                                                         '{' || p.cols[1] || '}', '{' || p.cols[2] || '}'), 'text[]')
             ELSE pg_temp.pick('name_lists', 'text[]') END,
        pg_temp.options(p.cols, 'diff'))
    WHEN f = 9 THEN format('SELECT * FROM reconcile_diff_summary(%s, %s, %s, %s)', rel,
        CASE WHEN deep THEN pg_temp.lit(pg_temp.one('customer_copy', p.staged, p.target, 'remote_customer',
                                                         'hostile_customer', 'remote_wide'), 'regclass')
             ELSE pg_temp.pick('rels', 'regclass') END,
        CASE WHEN deep THEN pg_temp.lit(pg_temp.one('{customer_id}', '{name}', '{region,account_no}', '{event_id,at}',
                                                         '{' || p.cols[1] || '}', '{' || p.cols[3] || '}'), 'text[]')
             ELSE pg_temp.pick('name_lists', 'text[]') END,
        pg_temp.options(p.cols, 'diff'))
    WHEN f = 10 THEN format('SELECT * FROM reconcile_diff_run(%s)', pg_temp.pick('words', 'text'))
    WHEN f = 11 THEN format('SELECT * FROM reconcile_check(%s, %s, %s)', rel, pg_temp.rules(p.cols), pg_temp.options(p.cols, 'check'))
    WHEN f = 12 THEN format('SELECT reconcile_check_report(%s, %s, %s)', rel, pg_temp.rules(p.cols), pg_temp.options(p.cols, 'check'))
    WHEN f = 13 THEN format('SELECT reconcile_discover_rules(%s, %s)',
        CASE WHEN deep THEN pg_temp.lit(pg_temp.one(p.target, p.staged, 'plain', 'reconcile.rejects'), 'regclass')
             ELSE pg_temp.pick('rels', 'regclass') END,
        pg_temp.options(p.cols, 'discover'))
    WHEN f = 14 AND random() < 0.5 THEN format('SELECT * FROM reconcile_resolve(%s, %s, %s, %s)', rel,
        CASE WHEN deep THEN '(SELECT batch_id FROM reconcile.conflicts ORDER BY random() LIMIT 1)'
             ELSE pg_temp.pick('words', 'text') END,
        CASE WHEN deep THEN '(SELECT key FROM reconcile.conflicts ORDER BY random() LIMIT 1)'
             ELSE pg_temp.pick('docs', 'jsonb') END,
        CASE WHEN deep THEN '(SELECT staged_hash FROM reconcile.conflicts ORDER BY random() LIMIT 1)'
             ELSE format('pg_catalog.sha256(pg_catalog.convert_to(%s, ''UTF8''))', pg_temp.pick('words', 'text')) END)
    WHEN f = 15 THEN (SELECT registration FROM registrations ORDER BY random(), registration LIMIT 1)
    WHEN f = 16 THEN format('INSERT INTO reconcile.diff_job_config VALUES (%s, %s, %s, %s, %s, %s)',
        pg_temp.pick('words', 'text'),
        CASE WHEN deep THEN pg_temp.lit(p.target, 'text') ELSE pg_temp.pick('words', 'text') END,
        CASE WHEN deep THEN pg_temp.lit(pg_temp.one('customer_copy', p.staged, p.target), 'text')
             ELSE pg_temp.pick('words', 'text') END,
        pg_temp.lit(pg_temp.one(array_to_string(p.cols[1:2], ','), upper(p.cols[1]), ' , ', '"' || p.cols[1], p.cols[1]), 'text'),
        pg_temp.lit(pg_temp.one(NULL, p.cols[2], upper(p.cols[3])), 'text'),
        pg_temp.lit(pg_temp.one(NULL, '7 days', '2026-01-01/2026-02-01', '/', 'x/y/z'), 'text'))
    WHEN f = 17 THEN format('SELECT * FROM reconcile_check_run(%s)',
        CASE WHEN deep THEN '(SELECT job FROM reconcile.check_jobs ORDER BY random() LIMIT 1)'
             ELSE pg_temp.pick('words', 'text') END)
    -- Control totals, and the diff's value normalisation (issue 24).
    WHEN f = 18 AND random() < 0.5 THEN pg_temp.one(
        format('SELECT * FROM reconcile_diff_totals(%s, %s, %s, %s, %s)', rel,
            CASE WHEN deep THEN pg_temp.lit(pg_temp.one('customer_copy', p.staged, p.target, 'remote_customer',
                                                             'hostile_customer', 'remote_wide'), 'regclass')
                 ELSE pg_temp.pick('rels', 'regclass') END,
            CASE WHEN deep THEN pg_temp.lit(pg_temp.one('{' || p.cols[1] || '}', '{' || coalesce(p.cols[2], p.cols[1]) || '}',
                                                             '{' || p.cols[1] || ',' || coalesce(p.cols[3], p.cols[1]) || '}', '{}'), 'text[]')
                 ELSE pg_temp.pick('name_lists', 'text[]') END,
            pg_temp.lit(pg_temp.one(
                jsonb_build_object(coalesce(p.cols[2], p.cols[1]), jsonb_build_array('sum', 'max')),
                jsonb_build_object(coalesce(p.cols[3], p.cols[1]), jsonb_build_array('min', 'count'), '*', jsonb_build_array('count')),
                jsonb_build_object(coalesce(p.cols[2], p.cols[1]), 'sum'),
                jsonb_build_object(coalesce(p.cols[2], p.cols[1]), jsonb_build_array('avg', pg_temp.jnum())),
                jsonb_build_object('*', jsonb_build_array('sum')),
                '[]'::jsonb, '{}'::jsonb)::text, 'jsonb'),
            pg_temp.lit(pg_temp.one(
                jsonb_build_object('then_rows', true, 'key_columns', jsonb_build_array(p.cols[1])),
                jsonb_build_object('then_rows', pg_temp.jnum(), 'key_columns', pg_temp.jnum(), 'row_options', pg_temp.jnum()),
                jsonb_build_object('tolerance', jsonb_build_object('sum(' || coalesce(p.cols[2], p.cols[1]) || ')', pg_temp.jnum())),
                jsonb_build_object('relative_tolerance', jsonb_build_object(coalesce(p.cols[2], p.cols[1]), pg_temp.jnum(), '*', pg_temp.jnum())),
                jsonb_build_object('include_matches', pg_temp.jnum()),
                jsonb_build_object('updated_column', coalesce(p.cols[3], p.cols[1]), 'window', jsonb_build_array(pg_temp.jnum(), pg_temp.jnum())),
                '{}'::jsonb)::text, 'jsonb')),
        format('SELECT * FROM reconcile_diff(%s, %s, %s, %s)', rel,
            CASE WHEN deep THEN pg_temp.lit(pg_temp.one('customer_copy', p.staged, p.target, 'remote_customer',
                                                             'hostile_customer', 'remote_wide'), 'regclass')
                 ELSE pg_temp.pick('rels', 'regclass') END,
            CASE WHEN deep THEN pg_temp.lit('{' || p.cols[1] || '}', 'text[]')
                 ELSE pg_temp.pick('name_lists', 'text[]') END,
            pg_temp.lit(pg_temp.one(
                jsonb_build_object('trim', jsonb_build_array(coalesce(p.cols[2], p.cols[1]), coalesce(p.cols[3], p.cols[1]))),
                jsonb_build_object('case_insensitive', jsonb_build_array(coalesce(p.cols[2], p.cols[1])), 'trim', jsonb_build_array(coalesce(p.cols[2], p.cols[1]))),
                jsonb_build_object('timestamp_precision', jsonb_build_object(coalesce(p.cols[3], p.cols[1]), pg_temp.one('second', 'DAY', 'fortnight', ''))),
                jsonb_build_object('timestamp_precision', jsonb_build_object(coalesce(p.cols[2], p.cols[1]), pg_temp.jnum())),
                jsonb_build_object('relative_tolerance', jsonb_build_object(coalesce(p.cols[2], p.cols[1]), pg_temp.jnum()), 'remote', 'checksum'),
                jsonb_build_object('trim', pg_temp.jnum(), 'case_insensitive', pg_temp.jnum()))::text, 'jsonb')))
    ELSE format('SELECT reconcile_set_rules(%s, %s)', rel, pg_temp.rules(p.cols))
    END;
    -- Now and then: DDL on what the call reads, in a transaction rolled back.
    IF random() < 0.08 THEN
        stmt := format('BEGIN; %s; %s; ROLLBACK;', pg_temp.one(
            format('ALTER TABLE %I ADD COLUMN fuzz_extra text DEFAULT ''x''', p.staged),
            format('ALTER TABLE %I DROP COLUMN %I', p.target, p.cols[1 + floor(random() * cardinality(p.cols))::int]),
            format('ALTER TABLE %I RENAME COLUMN %I TO renamed', p.target, p.cols[1 + floor(random() * cardinality(p.cols))::int]),
            format('ALTER TABLE %I ALTER COLUMN %I TYPE text', p.target, p.cols[1 + floor(random() * cardinality(p.cols))::int]),
            format('ALTER TABLE %I ALTER COLUMN version TYPE text', p.staged),
            format('ALTER TABLE %I ENABLE ROW LEVEL SECURITY', p.target),
            format('TRUNCATE %I', p.target),
            format('UPDATE %I SET version = NULL', CASE WHEN p.staged LIKE '%view' THEN 'customer_stage_typed' ELSE p.staged END)),
            stmt);
    ELSIF random() < 0.04 THEN
        -- DDL committed before the call and undone after it: run alone it
        -- changes nothing for the calls after; run beside other sessions
        -- (bench/fuzz/run.sh --parallel) it lands while their batches wait.
        -- The change holds its lock a moment, so that other sessions'
        -- batches queue behind it.
        SELECT format(E'BEGIN; %s; SELECT pg_sleep(0.1); COMMIT;\n%s;\n%s;', c, stmt, r) INTO stmt FROM (VALUES
            ('ALTER TABLE customer ALTER COLUMN amount TYPE text',
             'ALTER TABLE customer ALTER COLUMN amount TYPE numeric(12,2) USING amount::numeric'),
            ('ALTER TABLE account RENAME COLUMN status TO state',
             'ALTER TABLE account RENAME COLUMN state TO status'),
            ('ALTER TABLE ledger ALTER COLUMN amount TYPE text',
             'ALTER TABLE ledger ALTER COLUMN amount TYPE numeric USING amount::numeric'),
            ('ALTER TABLE customer ALTER COLUMN name TYPE varchar(300)',
             'ALTER TABLE customer ALTER COLUMN name TYPE text'),
            ('ALTER TABLE account ALTER COLUMN balance TYPE float8',
             'ALTER TABLE account ALTER COLUMN balance TYPE numeric'),
            ('ALTER TABLE event ALTER COLUMN kind TYPE varchar(50)',
             'ALTER TABLE event ALTER COLUMN kind TYPE text'),
            ('ALTER TABLE customer ADD COLUMN fuzz_note text',
             'ALTER TABLE customer DROP COLUMN fuzz_note'),
            ('ALTER TABLE ledger ENABLE ROW LEVEL SECURITY',
             'ALTER TABLE ledger DISABLE ROW LEVEL SECURITY'),
            ('REVOKE UPDATE ON account FROM reconcile_fuzz_owner',
             'GRANT UPDATE ON account TO reconcile_fuzz_owner'),
            ('SELECT reconcile_register(''customer'', ''{customer_id}'', ''version'', ''is_deleted'', ''payload_hash'', payload_columns => ''{name,amount}'')',
             'SELECT reconcile_register(''customer'', ''{customer_id}'', ''version'', ''is_deleted'', ''payload_hash'')')
            ) AS ddl(c, r)
        ORDER BY random(), c LIMIT 1;
    ELSE
        stmt := stmt || ';';
    END IF;
    RETURN stmt;
END $$;

SELECT pg_temp.call() FROM generate_series(1, :n);
