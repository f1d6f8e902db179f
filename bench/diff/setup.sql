-- Two tables of :n rows: the target lacks 1% of the source's keys, has 1%
-- keys of its own, and differs in one column on another 1%.  Both are keyed
-- by a primary key, as replicated tables usually are.
\set ON_ERROR_STOP on
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS reconcile;
DROP TABLE IF EXISTS bench_src, bench_tgt;
CREATE TABLE bench_src (
    id          bigint PRIMARY KEY,
    customer    integer NOT NULL,
    amount      numeric(12,2),
    status      text,
    updated_at  timestamptz NOT NULL
);
CREATE TABLE bench_tgt (
    id          bigint PRIMARY KEY,
    customer    integer NOT NULL,
    amount      numeric(12,2),
    status      text,
    updated_at  timestamptz NOT NULL
);
INSERT INTO bench_src
SELECT g, g % 50000, (g % 100000) / 100.0, (ARRAY['paid', 'open', 'void'])[g % 3 + 1],
       timestamptz '2026-01-01' + g * interval '1 second'
FROM generate_series(1, :n) g;
INSERT INTO bench_tgt
SELECT g, g % 50000,
       CASE WHEN g % 100 = 1 THEN (g % 100000) / 100.0 + 1 ELSE (g % 100000) / 100.0 END,
       (ARRAY['paid', 'open', 'void'])[g % 3 + 1],
       timestamptz '2026-01-01' + g * interval '1 second'
FROM generate_series(1, :n) g
WHERE g % 100 <> 0
UNION ALL
SELECT g, g % 50000, 1, 'extra', timestamptz '2026-01-01'
FROM generate_series(:n + 1, :n + :n / 100) g;
VACUUM ANALYZE bench_src;
VACUUM ANALYZE bench_tgt;
