-- reconcile demo, run by tools/demo.sh in a fresh database reconcile_demo.
-- Placeholder: the walkthrough of the extension's features goes here.
CREATE EXTENSION reconcile;
SELECT 'demo placeholder';
