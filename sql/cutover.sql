-- docs/cutover.md, run exactly as documented: one manifest loaded into a
-- public and a shadow target, then the cutover check (keys, versions and
-- tombstones, payloads, objects, receipts, rejects).  The SQL between the
-- markers is the page's, in its order.
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

-- ---- docs/cutover.md begins ----
CREATE SCHEMA shadow;
CREATE TABLE public.orders (order_id int PRIMARY KEY, status text, amount numeric(10,2),
    version bigint NOT NULL, deleted boolean NOT NULL DEFAULT false, payload_hash bytea);
CREATE TABLE shadow.orders (LIKE public.orders INCLUDING ALL);
SELECT reconcile_register('public.orders', '{order_id}', 'version', 'deleted', 'payload_hash');
SELECT reconcile_register('shadow.orders', '{order_id}', 'version', 'deleted', 'payload_hash');

CREATE TABLE orders_stage (object_key text, source_row bigint, operation text,
                           order_id text, status text, amount text, version text);
INSERT INTO orders_stage VALUES
    ('orders/2026-11-29.csv', 1, 'UPSERT', '101', 'PAID', '10.00', '1'),
    ('orders/2026-11-29.csv', 2, 'UPSERT', '102', 'NEW',  '25.50', '1'),
    ('orders/2026-11-29.csv', 3, 'UPSERT', '102', 'PAID', '25.50', '2'),
    ('orders/2026-11-29.csv', 4, 'DELETE', '103', NULL,   NULL,    '1'),
    ('orders/2026-11-29.csv', 5, 'UPSERT', '104', 'PAID', 'ten',   '1');

-- One manifest into both targets: two receipts with one batch id.
SELECT r.target, r.status, r.inserted, r.deleted, r.stale, r.rejected, left(r.batch_id, 12) AS batch
  FROM unnest('{public.orders,shadow.orders}'::regclass[]) AS t,
       reconcile_batch(t, 'orders_stage',
           '[{"object_key":"orders/2026-11-29.csv","version_id":"v7","content_hash":"sha256:51f0","rows":5}]',
           'orders-feed', 'orders/2026-11-29.csv@v7') AS r;

-- Meanwhile the old pipeline's own job, still running, moved order 102.
UPDATE public.orders SET status = 'SHIPPED', version = 3 WHERE order_id = 102;

-- Keys, versions and tombstones:
SELECT * FROM reconcile_diff('public.orders', 'shadow.orders', '{order_id}',
                             '{"compare": ["version", "deleted"]}');
-- Every payload column the two have in common, counted per column:
SELECT rows_source, rows_target, matched, mismatched, column_mismatches
  FROM reconcile_diff_summary('public.orders', 'shadow.orders', '{order_id}',
                              '{"ignore": ["payload_hash"]}');

-- The objects each target loaded, per batch:
CREATE VIEW parity_objects_old AS
    SELECT batch_id, object_key, version_id, content_hash, "rows"
      FROM reconcile.batch_objects WHERE target = 'public.orders'::regclass;
CREATE VIEW parity_objects_new AS
    SELECT batch_id, object_key, version_id, content_hash, "rows"
      FROM reconcile.batch_objects WHERE target = 'shadow.orders'::regclass;
SELECT * FROM reconcile_diff('parity_objects_old', 'parity_objects_new', '{batch_id,object_key}');

-- The receipts' counts and checksums, per batch:
CREATE VIEW parity_receipts_old AS
    SELECT batch_id, "cursor", staged_rows, inserted, updated, deleted, unchanged, stale,
           duplicates, conflicts, rejected, checksum
      FROM reconcile.receipts WHERE target = 'public.orders'::regclass;
CREATE VIEW parity_receipts_new AS
    SELECT batch_id, "cursor", staged_rows, inserted, updated, deleted, unchanged, stale,
           duplicates, conflicts, rejected, checksum
      FROM reconcile.receipts WHERE target = 'shadow.orders'::regclass;
SELECT * FROM reconcile_diff('parity_receipts_old', 'parity_receipts_new', '{batch_id}');

-- The rejects, row by row:
CREATE VIEW parity_rejects_old AS
    SELECT batch_id, object_key, source_row, column_name, raw_value, reason
      FROM reconcile.rejects WHERE target = 'public.orders'::regclass;
CREATE VIEW parity_rejects_new AS
    SELECT batch_id, object_key, source_row, column_name, raw_value, reason
      FROM reconcile.rejects WHERE target = 'shadow.orders'::regclass;
SELECT * FROM reconcile_diff('parity_rejects_old', 'parity_rejects_new',
                             '{batch_id,object_key,source_row,column_name}');
-- ---- docs/cutover.md ends ----

DROP VIEW parity_objects_old, parity_objects_new, parity_receipts_old, parity_receipts_new,
    parity_rejects_old, parity_rejects_new;
DROP TABLE public.orders, shadow.orders, orders_stage;
DROP SCHEMA shadow;
DROP EXTENSION reconcile;
