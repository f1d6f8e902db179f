-- reconcile 1.1 -> 1.2
\echo Use "ALTER EXTENSION reconcile UPDATE TO '1.2'" to load this file. \quit

-- ---- Keys stored with pinned settings (issue 19, point 4) ----
-- reconcile 1.2 writes held keys under pinned settings (ISO dates, UTC,
-- IntervalStyle postgres, the shortest exact floats), 1.1 wrote them under
-- the loading session's.  key_pinned tells them apart: the rows already
-- held are 1.1's (false); every row written from now on is 1.2's (the
-- default true).  A 1.1 key is resolved only where its text names one key
-- whatever the settings it was written under were (see docs/loader.md).
ALTER TABLE reconcile.conflicts ADD COLUMN key_pinned pg_catalog.bool NOT NULL DEFAULT false;
ALTER TABLE reconcile.conflicts ALTER COLUMN key_pinned SET DEFAULT true;
COMMENT ON COLUMN reconcile.conflicts.key_pinned IS
    'true: key written by reconcile 1.2 under pinned settings (ISO dates, UTC, shortest exact floats); false: by 1.1 under the loading session''s DateStyle, TimeZone, IntervalStyle and extra_float_digits';
