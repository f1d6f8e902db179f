-- The diff's option tombstones: "absent" leaves out the tombstone rows of
-- a side registered with reconcile, so that a key the source deleted is
-- "absent or tombstoned" on the target: a target that keeps its deletes
-- as tombstone rows and one that removes them (delete_mode 'remove') then
-- diff alike against the same source.  Default "rows": tombstones are
-- rows like any (1.1's behaviour).
CREATE EXTENSION reconcile;
SET client_min_messages = warning;

CREATE TABLE src (id int PRIMARY KEY, name text);
CREATE TABLE kept_t (id int PRIMARY KEY, name text, version bigint NOT NULL,
                     deleted boolean NOT NULL DEFAULT false, hash bytea);
CREATE TABLE removed_t (LIKE kept_t INCLUDING ALL);
CREATE TABLE stage (object_key text, source_row int, operation text, id int, name text, version bigint);
SELECT reconcile_register('kept_t', '{id}', 'version', 'deleted', 'hash');
SELECT reconcile_register('removed_t', '{id}', 'version', 'deleted', 'hash',
                          options => '{"delete_mode": "remove"}');
INSERT INTO stage VALUES ('o1', 1, 'UPSERT', 1, 'Ana', 1), ('o1', 2, 'UPSERT', 2, 'Bo', 1),
                         ('o1', 3, 'UPSERT', 3, 'Cy', 1),
                         ('o2', 1, 'DELETE', 2, NULL, 2), ('o2', 2, 'UPSERT', 3, 'Cyd', 2);
SELECT t, o, status, inserted, updated, deleted
  FROM unnest(ARRAY['kept_t', 'removed_t']) AS t, unnest(ARRAY['o1', 'o2']) AS o,
       reconcile_batch(t::regclass, 'stage', jsonb_build_array(jsonb_build_object('object_key', o,
           'version_id', '1', 'content_hash', 'h', 'rows', (SELECT count(*) FROM stage WHERE object_key = o))))
 ORDER BY 1, 2;
-- The source: key 2 deleted, key 3 renamed, key 4 not loaded yet.
INSERT INTO src VALUES (1, 'Ana'), (3, 'Cyd'), (4, 'Dee');

-- Default: the tombstone row of key 2 is extra in kept_t, not in removed_t.
SELECT 'kept_t' AS target, issue, key FROM reconcile_diff('src', 'kept_t', '{id}', '{"compare": ["name"]}')
UNION ALL
SELECT 'removed_t', issue, key FROM reconcile_diff('src', 'removed_t', '{id}', '{"compare": ["name"]}')
 ORDER BY 1, 3;
-- tombstones "absent": both targets diff alike.
SELECT 'kept_t' AS target, issue, key
  FROM reconcile_diff('src', 'kept_t', '{id}', '{"compare": ["name"], "tombstones": "absent"}')
UNION ALL
SELECT 'removed_t', issue, key
  FROM reconcile_diff('src', 'removed_t', '{id}', '{"compare": ["name"], "tombstones": "absent"}')
 ORDER BY 1, 3;
-- As the source side too, and in reconcile_diff_summary.
SELECT issue, key FROM reconcile_diff('kept_t', 'removed_t', '{id}', '{"compare": ["name"], "tombstones": "absent"}');
SELECT issue, key FROM reconcile_diff('kept_t', 'src', '{id}', '{"compare": ["name"], "tombstones": "absent"}') ORDER BY 2;
SELECT missing_in_target, extra_in_target, mismatched
  FROM reconcile_diff_summary('src', 'kept_t', '{id}', '{"compare": ["name"], "tombstones": "absent"}');

-- Bad input.
SELECT * FROM reconcile_diff('src', 'kept_t', '{id}', '{"tombstones": "hidden"}');
SELECT * FROM reconcile_diff('src', 'kept_t', '{id}', '{"tombstones": true}');
SELECT * FROM reconcile_diff('src', 'src', '{id}', '{"tombstones": "absent"}');
SELECT count(*) FROM reconcile_diff('src', 'kept_t', '{id}', '{"compare": ["name"], "tombstones": "rows"}');

SELECT reconcile_unregister('removed_t');
DROP TABLE src, kept_t, removed_t, stage;
DROP EXTENSION reconcile;
