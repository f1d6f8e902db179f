-- (a) reconcile_batch end to end into the timestamptz-versioned target (run.sh --ordering).
SELECT * FROM reconcile_batch(target => 'customer_ts', staged => 'stage_ts',
    manifest => (SELECT manifest FROM bench_manifest WHERE name = 'batch')) \gset r_
