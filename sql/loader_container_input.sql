-- Staged values of composite, array and range types whose elements run
-- user code on input (a domain whose CHECK calls a PL/pgSQL function):
-- a bad value becomes a reject with the element's error as its reason, in
-- a subtransaction of its own, so that nothing leaks and no warning about
-- a leaked TupleDesc or SPI stack appears.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

-- 0 raises from inside the function (with the function's SPI stack
-- active); a negative number fails the domain's CHECK.
CREATE FUNCTION ci_positive(n integer) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    IF n = 0 THEN
        RAISE EXCEPTION 'zero is not a count' USING ERRCODE = 'invalid_parameter_value';
    END IF;
    RETURN n > 0;
END $$;
CREATE DOMAIN ci_count AS integer CHECK (ci_positive(VALUE));
CREATE TYPE ci_pair AS (n ci_count, label text);
CREATE TYPE ci_span AS RANGE (subtype = ci_count);

CREATE TABLE ci_target (id integer PRIMARY KEY, version bigint NOT NULL,
                        deleted boolean NOT NULL DEFAULT false, hash bytea,
                        pair ci_pair, counts ci_count[], span ci_span,
                        pairs ci_pair[], plain int4range);
SELECT reconcile_register('ci_target', '{id}', 'version', 'deleted', 'hash');
CREATE TABLE ci_stage (object_key text, source_row bigint, operation text, id text,
                       version text, pair text, counts text, span text, pairs text,
                       plain text);

INSERT INTO ci_stage VALUES
    ('o1', 1, 'UPSERT', '1', '1', '(1,a)', '{1,2}', '[1,5)', '{"(2,b)"}', '[1,2)'),
    ('o1', 2, 'UPSERT', '2', '1', '(0,a)', '{1,2}', '[1,5)', NULL, NULL),
    ('o1', 3, 'UPSERT', '3', '1', '(-1,a)', '{1,2}', '[1,5)', NULL, NULL),
    ('o1', 4, 'UPSERT', '4', '1', '(x,a)', '{1,2}', '[1,5)', NULL, NULL),
    ('o1', 5, 'UPSERT', '5', '1', '(1,a)', '{1,0}', '[1,5)', NULL, NULL),
    ('o1', 6, 'UPSERT', '6', '1', '(1,a)', '{1,-2}', '[1,5)', NULL, NULL),
    ('o1', 7, 'UPSERT', '7', '1', '(1,a)', '{1,2}', '[0,5)', NULL, NULL),
    ('o1', 8, 'UPSERT', '8', '1', '(1,a)', '{1,2}', '[-3,5)', NULL, NULL),
    ('o1', 9, 'UPSERT', '9', '1', '(1,a)', '{1,2}', '[5,1)', NULL, NULL),
    ('o1', 10, 'UPSERT', '10', '1', NULL, NULL, NULL, '{"(0,b)"}', NULL),
    ('o1', 11, 'UPSERT', '11', '1', NULL, NULL, NULL, NULL, '[2,1)'),
    ('o1', 12, 'UPSERT', '12', '1', '(2,b)', '{3}', '[2,3)', '{}', 'empty');
SELECT status, staged_rows, inserted, rejected
  FROM reconcile_batch('ci_target', 'ci_stage',
       '[{"object_key":"o1","version_id":"1","content_hash":"h","rows":12}]');
SELECT source_row, column_name, raw_value, reason
  FROM reconcile.rejects ORDER BY source_row, column_name;
SELECT id, pair, counts, span, pairs, plain FROM ci_target ORDER BY id;

-- 20,000 bad values in one batch: rejects, and no warning.  (The memory
-- this takes is measured in bench/RESULTS.md, "Input errors inside
-- containers"; it stays flat.)
TRUNCATE ci_stage;
INSERT INTO ci_stage
SELECT 'o2', g, 'UPSERT', (100 + g)::text, '1',
       CASE g % 4 WHEN 0 THEN '(0,a)' ELSE '(1,a)' END,
       CASE g % 4 WHEN 1 THEN '{1,0}' ELSE '{1}' END,
       CASE g % 4 WHEN 2 THEN '[0,5)' ELSE '[1,5)' END,
       CASE g % 4 WHEN 3 THEN '{"(-1,b)"}' ELSE '{}' END,
       NULL
  FROM generate_series(1, 20000) AS g;
SELECT status, staged_rows, inserted, rejected
  FROM reconcile_batch('ci_target', 'ci_stage',
       '[{"object_key":"o2","version_id":"1","content_hash":"h","rows":20000}]');
SELECT column_name, reason, count(*)
  FROM reconcile.rejects WHERE object_key = 'o2' GROUP BY 1, 2 ORDER BY 1, 2;

SELECT reconcile_unregister('ci_target');
DROP TABLE ci_target, ci_stage;
DROP TYPE ci_span, ci_pair;
DROP DOMAIN ci_count;
DROP FUNCTION ci_positive(integer);
DROP EXTENSION reconcile CASCADE;
