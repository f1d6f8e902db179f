-- reconcile 1.0: replay-safe batch loading with receipts.
\echo Use "CREATE EXTENSION reconcile" to load this file. \quit
