-- One pgbench transaction of the load test (bench/load/run.sh).
SELECT bench_batch(:client_id, :keys, :versions, :replay_pct, :pool_pct);
