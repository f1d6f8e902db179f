-- reconcile_diff: one ordered pass over each side.
SELECT * FROM reconcile_diff('bench_src', 'bench_tgt', '{id}');
