-- Manifests: the canonical form, the batch id, and every way a manifest
-- can be refused, including the limits on its size.
CREATE EXTENSION reconcile;

-- The batch id is part of the interface (README "The batch id"): clients
-- compute it.  These values were fixed before the manifest code was
-- rewritten for speed and must never change.  rows 1e3 and 2.0 are the
-- integers 1000 and 2 and hash as such (README's Python does the same).
CREATE TEMP TABLE fixed (n int, manifest jsonb);
INSERT INTO fixed VALUES
    (1, $m$[{"object_key":"crm/part-0001.csv","version_id":"3Lg","content_hash":"sha256:9f2c","rows":5}]$m$),
    (2, $m$[{"object_key":"b","version_id":"1","content_hash":"h","rows":0},{"object_key":"a","version_id":"2","content_hash":"h2","rows":9223372036854775807}]$m$),
    (3, $m$[{"rows":1,"content_hash":"c","version_id":"v","object_key":"z\"q\\b\n\t\u0001\u001f/é€😀"},{"object_key":"Z","version_id":"ü","content_hash":"x","rows":3}]$m$),
    (4, $m$[{"object_key":"k","version_id":"v","content_hash":"c","rows":1e3}]$m$),
    (5, $m$[{"object_key":"k","version_id":"v","content_hash":"c","rows":1000}]$m$),
    (6, $m$[{"object_key":"k","version_id":"v","content_hash":"c","rows":2.0}]$m$),
    (7, $m$[{"object_key":"k","version_id":"v","content_hash":"c","rows":2}]$m$),
    (8, $m$[{"object_key":"k","version_id":"v","content_hash":"c","rows":10}]$m$),
    (9, $m$[{"object_key":"k","version_id":"v","content_hash":"c","rows":1.5e1}]$m$),
    (10, $m$[{"object_key":"k","version_id":"v","content_hash":"c","rows":100E-2}]$m$),
    (11, $m$[{"object_key":"k","version_id":"v","content_hash":"c","rows":-0}]$m$),
    (12, $m$[{"object_key":"k","version_id":"v","content_hash":"c","rows":9223372036854775807.000}]$m$);
SELECT n, reconcile_batch_id(manifest) FROM fixed ORDER BY n;
SELECT n, reconcile_canonical_manifest(manifest) FROM fixed ORDER BY n;
-- 1e3 is 1000, 2.0 is 2: one batch id each.
SELECT count(DISTINCT reconcile_batch_id(manifest)) AS ids FROM fixed WHERE n BETWEEN 4 AND 5;
SELECT count(DISTINCT reconcile_batch_id(manifest)) AS ids FROM fixed WHERE n BETWEEN 6 AND 7;
DROP TABLE fixed;
DROP EXTENSION reconcile;
