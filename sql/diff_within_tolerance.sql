-- The numeric tolerances of reconcile_diff and reconcile_diff_totals
-- (absolute, relative, both): one rule for both (diff_numeric_within).
-- A difference at the tolerance is a match, just above it a mismatch; NaN
-- and infinities are within no tolerance, even against themselves...
-- unless the values are equal, which the equality test says first.
CREATE EXTENSION reconcile;
CREATE TABLE wt_src (id int PRIMARY KEY, g text, amount numeric);
CREATE TABLE wt_tgt (id int PRIMARY KEY, g text, amount numeric);
INSERT INTO wt_src VALUES (1, 'a', 100), (2, 'b', 100), (3, 'c', 100), (4, 'd', 'NaN'),
    (5, 'e', 'Infinity'), (6, 'f', 'Infinity'), (7, 'g', 1000), (8, 'h', 1000);
INSERT INTO wt_tgt VALUES (1, 'a', 100.5), (2, 'b', 100.51), (3, 'c', 99.5), (4, 'd', 100),
    (5, 'e', 'Infinity'), (6, 'f', 100), (7, 'g', 1001), (8, 'h', 1001.01);

-- Absolute 0.5: ids 1 and 3 match, 2 does not; 4 and 6 never; 5 is equal.
SELECT key->>'id' AS id, issue FROM reconcile_diff('wt_src', 'wt_tgt', '{id}',
    '{"tolerance": {"amount": 0.5}}') ORDER BY 1;
-- Relative 0.001 (of the larger absolute value): 7 matches (1 <= 1.001),
-- 8 does not (1.01 > 1.00101), nor 1, 2, 3 (0.5 > 0.1005).
SELECT key->>'id' AS id, issue FROM reconcile_diff('wt_src', 'wt_tgt', '{id}',
    '{"relative_tolerance": {"amount": 0.001}}') ORDER BY 1;
-- Both: within either.
SELECT key->>'id' AS id, issue FROM reconcile_diff('wt_src', 'wt_tgt', '{id}',
    '{"tolerance": {"amount": 0.5}, "relative_tolerance": {"amount": 0.001}}') ORDER BY 1;

-- The same three on the totals per group (one row a group: sum = the value).
SELECT "group"->>'g' AS g, issue FROM reconcile_diff_totals('wt_src', 'wt_tgt', '{g}',
    '{"amount": ["sum"]}', '{"tolerance": {"sum(amount)": 0.5}}') ORDER BY 1;
SELECT "group"->>'g' AS g, issue FROM reconcile_diff_totals('wt_src', 'wt_tgt', '{g}',
    '{"amount": ["sum"]}', '{"relative_tolerance": {"sum(amount)": 0.001}}') ORDER BY 1;
SELECT "group"->>'g' AS g, issue FROM reconcile_diff_totals('wt_src', 'wt_tgt', '{g}',
    '{"amount": ["sum"]}', '{"tolerance": {"sum(amount)": 0.5}, "relative_tolerance": {"sum(amount)": 0.001}}') ORDER BY 1;

DROP TABLE wt_src, wt_tgt;
DROP EXTENSION reconcile;
