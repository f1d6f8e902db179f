-- bench/loader/ordering_ts.sql: the benchmark's data with a timestamptz
-- version column (run.sh --ordering): target_base_ts and stage_ts are
-- target_base and stage with every version n as the instant
-- 2026-01-01 00:00:00+00 plus n seconds (staged as text, written at
-- +02:00 for even keys and -05:00 for odd ones, so that the cast does the
-- work a feed's timestamps need); malformed versions stay malformed.
\set ON_ERROR_STOP 1
SET client_min_messages = warning;
DROP TABLE IF EXISTS target_base_ts, stage_ts;
CREATE TABLE target_base_ts AS
SELECT customer_id, name, amount, updated_at, qty,
       timestamptz '2026-01-01 00:00:00+00' + version * interval '1 second' AS version,
       is_deleted, payload_hash
  FROM target_base;
CREATE TABLE stage_ts AS
SELECT object_key, source_row, operation, customer_id,
       CASE WHEN version ~ '^[0-9]+$'
            THEN to_char((timestamp '2026-01-01 00:00:00' + version::bigint * interval '1 second')
                         + CASE WHEN customer_id::bigint % 2 = 0 THEN interval '2 hours' ELSE interval '-5 hours' END,
                         'YYYY-MM-DD HH24:MI:SS')
                 || CASE WHEN customer_id::bigint % 2 = 0 THEN '+02' ELSE '-05' END
            ELSE version END AS version,
       name, amount, updated_at, qty
  FROM stage;
