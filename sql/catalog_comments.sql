-- Every member of the extension explains itself: each function, table,
-- view, type, event trigger and schema has a description (\df+, \dt+,
-- \dv+, \dT+), and each function that takes options names them.  A query
-- lists whatever lacks one, so a failure names the object.  Sequences are
-- left out (an identity or serial column's sequence is an implementation
-- detail of its table).
CREATE EXTENSION reconcile;

CREATE FUNCTION undescribed() RETURNS TABLE (object text) LANGUAGE sql AS $$
    SELECT pg_catalog.pg_describe_object(d.classid, d.objid, 0)
      FROM pg_catalog.pg_depend d
      JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
     WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
       AND e.extname = 'reconcile'
       AND d.deptype = 'e'
       AND NOT (d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass
                AND (SELECT c.relkind FROM pg_catalog.pg_class c WHERE c.oid = d.objid) = 'S')
       AND pg_catalog.obj_description(d.objid,
               (SELECT c.relname FROM pg_catalog.pg_class c WHERE c.oid = d.classid)) IS NULL
     ORDER BY 1
$$;

CREATE FUNCTION options_undescribed() RETURNS TABLE (function text) LANGUAGE sql AS $$
    SELECT p.oid::pg_catalog.regprocedure::text
      FROM pg_catalog.pg_proc p
      JOIN pg_catalog.pg_depend d ON d.classid = 'pg_catalog.pg_proc'::pg_catalog.regclass
                                 AND d.objid = p.oid AND d.deptype = 'e'
      JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid AND e.extname = 'reconcile'
     WHERE 'options' = ANY (p.proargnames)
       AND pg_catalog.obj_description(p.oid, 'pg_proc') !~* 'options'
     ORDER BY 1
$$;

-- What the extension has, by kind (every kind must be checked below).
SELECT (SELECT c.relname FROM pg_catalog.pg_class c WHERE c.oid = d.classid) AS catalog,
       pg_catalog.count(*) > 0 AS has_members
  FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_extension e ON e.oid = d.refobjid
 WHERE d.refclassid = 'pg_catalog.pg_extension'::pg_catalog.regclass
   AND e.extname = 'reconcile' AND d.deptype = 'e'
 GROUP BY 1 ORDER BY 1;

-- Installed at the default version: nothing lacks a description.
SELECT * FROM undescribed();
SELECT * FROM options_undescribed();

-- The same after an upgrade from the released 1.0.
DROP EXTENSION reconcile;
CREATE EXTENSION reconcile VERSION '1.0';
ALTER EXTENSION reconcile UPDATE;
SELECT * FROM undescribed();
SELECT * FROM options_undescribed();

-- The check itself finds an object without a description.
COMMENT ON FUNCTION reconcile_batch_id(pg_catalog.jsonb) IS NULL;
COMMENT ON TABLE reconcile.cursors IS NULL;
SELECT * FROM undescribed();

DROP FUNCTION undescribed(), options_undescribed();
DROP EXTENSION reconcile;
