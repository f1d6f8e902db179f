-- (a) reconcile_batch end to end (conflict_policy 'quarantine').
SELECT * FROM reconcile_batch(target => 'customer', staged => 'stage',
    manifest => (SELECT manifest FROM bench_manifest WHERE name = 'batch')) \gset r_
