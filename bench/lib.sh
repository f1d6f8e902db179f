# Shared by bench/manifest/run.sh and bench/container_input/run.sh.
# measure_batch DB SQLFILE: run SQLFILE in a session of its own while
# bench/loader/memsample.sh samples the backend's RssAnon every 20 ms;
# print the session's output, then set PEAK_KB to the peak RssAnon above
# the RssAnon the session held before SQLFILE.  Needs BENCH_TMP and ROOT.
measure_batch() {
	local db=$1 sqlfile=$2 psql_pid pid sampler anon0 peak
	# The batch's session: psql writes its backend pid, then waits for the
	# sampler to start before the timed statement.
	mkfifo "$BENCH_TMP/go"
	{
		echo "SELECT pg_backend_pid() \\g (tuples_only=on format=unaligned) $BENCH_TMP/pid"
		echo "SELECT (regexp_match(pg_read_file('/proc/' || pg_backend_pid() || '/status'), 'RssAnon:\\s+(\\d+)'))[1] \\g (tuples_only=on format=unaligned) $BENCH_TMP/anon0"
		cat "$BENCH_TMP/go" >/dev/null
		cat "$sqlfile"
	} | psql -X -v ON_ERROR_STOP=1 -d "$db" >"$BENCH_TMP/out" 2>&1 &
	psql_pid=$!
	while [ ! -s "$BENCH_TMP/anon0" ]; do sleep 0.05; done
	pid=$(cat "$BENCH_TMP/pid")
	bash "$ROOT/bench/loader/memsample.sh" "$pid" "$BENCH_TMP/mem" 2>/dev/null &
	sampler=$!
	echo go >"$BENCH_TMP/go"
	wait "$psql_pid" || { cat "$BENCH_TMP/out"; exit 1; }
	touch "$BENCH_TMP/mem.stop"
	wait "$sampler"
	anon0=$(cat "$BENCH_TMP/anon0")
	peak=$(cat "$BENCH_TMP/mem.peak_anon")
	cat "$BENCH_TMP/out"
	PEAK_KB=$((peak - anon0))
}
