-- bench/loader/winners.sql: untimed preparation for contenders (c), (e) and
-- (f): the batch's winners, already cast, hashed and de-duplicated, in a
-- typed table in key order.  Per key the highest version (ties by
-- object_key bytewise, then source_row) of the valid rows; keys with two
-- payloads at one version in the batch are left out, as reconcile
-- quarantines them.  Same checks and hash as pipeline.sql.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO';
DROP TABLE IF EXISTS winners;
CREATE TEMP TABLE w_valid AS
SELECT c.*,
       sha256(convert_to('[' || coalesce(to_json(c.name)::text, 'null')
                      || ',' || coalesce(to_json(c.amount::text)::text, 'null')
                      || ',' || coalesce(to_json(c.updated_at::text)::text, 'null')
                      || ',' || coalesce(to_json(c.qty::text)::text, 'null')
                      || ',' || c.is_deleted || ']', 'UTF8')) AS payload_hash
FROM (
    SELECT s.object_key, s.source_row, s.operation = 'DELETE' AS is_deleted,
           s.customer_id::bigint AS customer_id, s.version::bigint AS version,
           s.name, s.amount::numeric AS amount, s.updated_at::timestamptz AS updated_at,
           s.qty::integer AS qty
    FROM stage s
    WHERE s.source_row IS NOT NULL
      AND s.operation IN ('UPSERT', 'DELETE')
      AND s.customer_id ~ '^\s*[+-]?\d{1,18}\s*$'
      AND s.version ~ '^\s*\+?\d{1,18}\s*$'
      AND coalesce(s.amount ~ '^\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\s*$', true)
      AND coalesce(s.updated_at ~ '^\d{4}-\d{2}-\d{2}([ T]\d{2}:\d{2}(:\d{2}(\.\d+)?)?)?\s*(Z|[+-]\d{2}(:?\d{2})?)?$', true)
      AND coalesce(s.qty ~ '^\s*[+-]?\d{1,9}\s*$', true)
) c;
CREATE TABLE winners AS
SELECT customer_id, name, amount, updated_at, qty, version, is_deleted, payload_hash
FROM (SELECT DISTINCT ON (customer_id) *
      FROM w_valid
      WHERE customer_id NOT IN (SELECT customer_id FROM w_valid
                                GROUP BY customer_id, version HAVING count(DISTINCT payload_hash) > 1)
      ORDER BY customer_id, version DESC, object_key COLLATE "C", source_row) w
ORDER BY customer_id;
DROP TABLE w_valid;
VACUUM (FREEZE, ANALYZE) winners;
