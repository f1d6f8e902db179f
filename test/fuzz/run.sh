#!/usr/bin/env bash
# The fuzz test: random SQL against a database holding reconcile with state
# in every table (test/fuzz/fixture.sql), failing only if the server crashed.
#
# The fixture also diffs across servers: postgres_fdw foreign tables on two
# more databases of the cluster (test/fuzz/remote.sql), one honest and one
# hostile, whose planted pg_catalog functions answer the checksum queries
# with NULLs, wrong shapes, lengths and buckets.
#
#   1. targeted calls (test/fuzz/calls.sql): every reconcile_* function with
#      random, NULL, huge, negative, malformed and odd-typed arguments, as the
#      owner of the targets and as a role that may only read one of them;
#   2. sqlsmith, as the owner, steered at reconcile's functions and tables
#      (the fixture's fuzz.pg_proc view is what sqlsmith reads as pg_proc).
#
# Ordinary SQL errors are expected and never fail the run; a backend that
# dies by a signal (or a PANIC) does, as does a server that does not answer
# afterwards.  Each crash is printed with the statement that caused it.
# Statement counts and the seed are fixed, so a run does the same work
# every time; only statement_timeout (1 s for sqlsmith, 5 s for the calls)
# depends on the machine's speed, and a timeout is an ordinary error.
#
#   bash test/fuzz/run.sh [--queries N] [--calls N] [--seed S] [--superuser]
#        [--host DIR --port P --log FILE] [--db NAME] [--out DIR] [--keep-db]
#        [--no-dump] [--parallel]
#
# Without --host it uses the throwaway cluster of tools/setup.sh (run that
# first) and its server log.  --superuser also runs the calls as the
# superuser (bench/fuzz/run.sh does; a superuser may register the catalogs).
# sqlsmith's queries are dumped to a file, deleted after a run without a
# crash, in which a crashing query is looked up (the server log keeps only
# its first track_activity_query_size bytes); --no-dump leaves that out,
# for a server whose track_activity_query_size is large.  --parallel runs
# each role's calls and sqlsmith at the same time, each in a session of its
# own (bench/fuzz/run.sh does; which statements meet is then up to the
# scheduler, so the test run never does).
# Exit status: 0 no crash, 1 a crash or a dead server, 2 a setup failure.
set -uo pipefail
# shellcheck source=tools/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib.sh"
FUZZ_DIR=$RECONCILE_ROOT/test/fuzz

queries=8000
calls=1500
seed=1
host=
port=
server_log=
db=reconcile_fuzz
out=
superuser=0
keep_db=0
dump_opt=--dump-all-queries
parallel=0
while [ $# -gt 0 ]; do
	case $1 in
	--queries) queries=$2; shift 2 ;;
	--calls) calls=$2; shift 2 ;;
	--seed) seed=$2; shift 2 ;;
	--host) host=$2; shift 2 ;;
	--port) port=$2; shift 2 ;;
	--log) server_log=$2; shift 2 ;;
	--db) db=$2; shift 2 ;;
	--out) out=$2; shift 2 ;;
	--superuser) superuser=1; shift ;;
	--keep-db) keep_db=1; shift ;;
	--no-dump) dump_opt=; shift ;;
	--parallel) parallel=1; shift ;;
	*) printf 'unknown option %s\n' "$1" >&2; exit 2 ;;
	esac
done

export_pg_env
[ -n "$host" ] && export PGHOST=$host
[ -n "$port" ] && export PGPORT=$port
[ -n "$server_log" ] || server_log=$PGCLUSTER_LOG
[ -n "$out" ] || out=$RECONCILE_STATE/.tmp/fuzz
mkdir -p "$out"
command -v sqlsmith >/dev/null || die "sqlsmith is not installed (apt-get install sqlsmith, or run tools/setup.sh)"
[ -r "$server_log" ] || die "cannot read the server log $server_log"

OWNER=reconcile_fuzz_owner
READER=reconcile_fuzz_reader
crashes=0

# Wait until the server accepts connections again (after a crash it
# reinitialises); false if it does not within a minute.
wait_ready() {
	for _ in $(seq 1 120); do
		if psql -X -q -d "$db" -c 'SELECT 1' >/dev/null 2>&1; then
			return 0
		fi
		sleep 0.5
	done
	return 1
}

# The server log written since byte offset $1.
log_since() { tail -c +"$(($1 + 1))" "$server_log"; }

# Report every backend that died since log offset $1; count them in $crashes.
# $2 names the phase; $3 (optional) is sqlsmith's dump of its queries, where
# the full text of a crashing query is looked up.
check_crashes() {
	local since=$1 phase=$2 dump=${3:-} found
	found=$(log_since "$since" | grep -E -c \
		'terminated by signal|terminated by exception|exited with exit code ([2-9]|[1-9][0-9])|PANIC:' || true)
	[ "$found" -gt 0 ] || return 0
	crashes=$((crashes + found))
	printf '\n==> CRASH in %s: %s backend(s) died; from the server log:\n' "$phase" "$found"
	log_since "$since" | grep -E -A 2 \
		'terminated by signal|terminated by exception|exited with exit code ([2-9]|[1-9][0-9])|PANIC:' |
		grep -v -E '^--$|terminating any other active|all server processes terminated'
	if [ -n "$dump" ] && [ -s "$dump" ]; then
		local prefix
		log_since "$since" | sed -n 's/.*DETAIL:  Failed process was running: //p' |
			while IFS= read -r prefix; do
				printf '==> the full query, from %s:\n' "$dump"
				# The log keeps the first track_activity_query_size bytes of
				# the query's first line; find the dumped query that starts so.
				awk -v p="${prefix:0:200}" 'BEGIN { RS = ";\n" }
					index($0, p) { print $0 ";"; exit }' "$dump"
			done
	fi
}

# Run one file of statements as role $1, one statement a line, continuing
# after a crash with the statement after the one that crashed.
run_statements() {
	local role=$1 file=$2 result=$3 start=1 rc line total
	total=$(wc -l <"$file")
	: >"$result"
	while [ "$start" -le "$total" ]; do
		# Results go to /dev/null, errors (with their SQLSTATE) to $result,
		# named by the line of $file they came from: psql counts the lines of
		# its input, whose first two lines are the \set and the \o.
		{ echo '\set VERBOSITY sqlstate'; echo '\o /dev/null'; tail -n +"$start" "$file"; } |
			PGOPTIONS='-c statement_timeout=5s -c client_min_messages=error' \
				psql -X -q -U "$role" -d "$db" -f - 2>&1 |
			awk -v off="$((start - 3))" '{
				if (match($0, /^psql:<stdin>:[0-9]+:/)) {
					n = substr($0, 14, RLENGTH - 14) + off
					$0 = "line " n ":" substr($0, RLENGTH + 1)
				}
				print
			}' >>"$result"
		rc=${PIPESTATUS[1]}
		[ "$rc" -eq 2 ] || break
		line=$(grep -E -o '^line [0-9]+: (server closed|connection to server|FATAL|no connection)' "$result" |
			tail -n 1 | cut -d' ' -f2 | tr -d :)
		[ -n "$line" ] || line=$start
		printf '==> connection lost at line %s of %s\n' "$line" "$file"
		sed -n "${line}p" "$file" | cut -c1-2000
		start=$((line + 1))
		wait_ready || return 1
	done
	return 0
}

# The fuzz database, and the two it diffs against through postgres_fdw
# (test/fuzz/remote.sql): an honest remote and a hostile one.
setup_db() {
	local d
	log "fuzz: database $db from test/fuzz/fixture.sql, ${db}_remote and ${db}_hostile from test/fuzz/remote.sql"
	for d in "$db" "${db}_remote" "${db}_hostile"; do
		psql -X -q -d postgres -c "SET client_min_messages = warning" \
			-c "DROP DATABASE IF EXISTS \"$d\" WITH (FORCE)" -c "CREATE DATABASE \"$d\"" || return 1
	done
	psql -X -q -v ON_ERROR_STOP=1 -v hostile=0 -d "${db}_remote" -f "$FUZZ_DIR/remote.sql" \
		>"$out/remote.out" 2>&1 &&
		psql -X -q -v ON_ERROR_STOP=1 -v hostile=1 -d "${db}_hostile" -f "$FUZZ_DIR/remote.sql" \
			>>"$out/remote.out" 2>&1 &&
		psql -X -q -v ON_ERROR_STOP=1 -v fdw_host="$PGHOST" -v fdw_port="$PGPORT" \
			-v fdw_user="$(psql -X -A -t -q -d postgres -c 'SELECT current_user')" \
			-v remote_db="${db}_remote" -v hostile_db="${db}_hostile" \
			-d "$db" -f "$FUZZ_DIR/fixture.sql" >"$out/fixture.out" 2>&1
}

gen_calls() {  # gen_calls ROLE SEED: write $out/calls-ROLE.sql
	log "fuzz: $calls targeted calls for $1 (seed $2)"
	if ! psql -X -A -t -q -v ON_ERROR_STOP=1 -v seed="$2" -v n="$calls" -U "$OWNER" -d "$db" \
		-f "$FUZZ_DIR/calls.sql" >"$out/calls-$1.sql" 2>"$out/calls-$1.err"; then
		printf '==> the generator test/fuzz/calls.sql failed:\n'
		head -n 20 "$out/calls-$1.err"
		return 2
	fi
}

calls_summary() {  # calls_summary ROLE
	printf '    errors by SQLSTATE of the calls as %s: %s\n' "$1" "$(grep -E -o 'ERROR:  [0-9A-Z]{5}' "$out/calls-$1.out" |
		awk '{ print $2 }' | sort | uniq -c | sort -rn | awk '{ printf "%s %s, ", $2, $1 }')"
}

run_calls() {  # run_calls ROLE SEED
	local since rc=0
	gen_calls "$1" "$2" || return 2
	since=$(stat -c %s "$server_log")
	run_statements "$1" "$out/calls-$1.sql" "$out/calls-$1.out" || rc=1
	check_crashes "$since" "calls as $1"
	calls_summary "$1"
	return "$rc"
}

exec_sqlsmith() {
	local dumpfile=$out/sqlsmith-queries.sql rc
	# search_path puts the fixture's fuzz.pg_proc before pg_catalog.pg_proc
	# for sqlsmith's schema queries; the queries it generates qualify their
	# routines and tables.
	# shellcheck disable=SC2086  # $dump_opt is one option or none
	sqlsmith --target="host=$PGHOST port=$PGPORT dbname=$db user=$OWNER options='-csearch_path=fuzz,pg_catalog,public'" \
		--seed="$seed" --max-queries="$queries" --exclude-catalog --verbose \
		$dump_opt >"$dumpfile" 2>"$out/sqlsmith.log"
	rc=$?
	tail -n 200 "$out/sqlsmith.log" | sed -n '/^queries:/,/^error rate/p' | head -n 25 | sed 's/^/    /'
	# sqlsmith exits non-zero when it cannot load the schema or connect.
	[ "$rc" -eq 0 ] || { tail -n 20 "$out/sqlsmith.log"; return 2; }
}

run_sqlsmith() {
	local since rc
	log "fuzz: sqlsmith, $queries queries as $OWNER (seed $seed)"
	since=$(stat -c %s "$server_log")
	exec_sqlsmith
	rc=$?
	check_crashes "$since" sqlsmith "$out/sqlsmith-queries.sql"
	return "$rc"
}

# Everything at once, each role's calls and sqlsmith in a session of its
# own, so that one session's DDL lands while another's batch waits.  Which
# statements meet is up to the scheduler: for the long run only.
run_parallel() {
	local since rc=0 roles=("$OWNER" "$READER") role pids=() i
	[ "$superuser" -eq 1 ] && roles+=("$PGUSER")
	for i in "${!roles[@]}"; do
		gen_calls "${roles[$i]}" "$((seed + i))" || return 2
	done
	log "fuzz: in parallel: the calls of ${roles[*]}, and sqlsmith ($queries queries, seed $seed)"
	since=$(stat -c %s "$server_log")
	for role in "${roles[@]}"; do
		run_statements "$role" "$out/calls-$role.sql" "$out/calls-$role.out" >"$out/calls-$role.log" 2>&1 &
		pids+=($!)
	done
	exec_sqlsmith >"$out/sqlsmith.summary" 2>&1 &
	pids+=($!)
	for i in "${pids[@]}"; do
		wait "$i" || rc=1
	done
	cat "$out/sqlsmith.summary"
	for role in "${roles[@]}"; do
		calls_summary "$role"
	done
	# After a crash every session loses its connection: the log, not the
	# sessions, says which statement crashed.
	check_crashes "$since" "the parallel run"
	return "$rc"
}

# Fold a step's exit status into $status: 1 (a crash) beats 2 (a setup step
# failed).
note() {
	case $1 in
	0) ;;
	1) status=1 ;;
	*) [ "$status" -eq 0 ] && status=2 ;;
	esac
}

main() {
	status=0
	setup_db || { tail -n 30 "$out/fixture.out"; die "the fixture did not load"; }
	if [ "$parallel" -eq 1 ]; then
		run_parallel
		note $?
	else
		run_calls "$OWNER" "$seed"
		note $?
		run_calls "$READER" "$((seed + 1))"
		note $?
		if [ "$superuser" -eq 1 ]; then
			run_calls "$PGUSER" "$((seed + 2))"
			note $?
		fi
		run_sqlsmith
		note $?
	fi
	if ! wait_ready; then
		printf '==> the server does not answer after the fuzz run\n'
		status=1
	fi
	if [ "$crashes" -gt 0 ]; then
		printf '==> fuzz: %s crash(es); outputs in %s\n' "$crashes" "$out"
		status=1
	elif [ "$status" -eq 0 ]; then
		log "fuzz: no crash"
		rm -f "$out/sqlsmith-queries.sql"
	else
		printf '==> fuzz: no crash, but a step could not run (see above); outputs in %s\n' "$out"
	fi
	if [ "$keep_db" -eq 0 ] && [ "$status" -eq 0 ]; then
		for d in "$db" "${db}_remote" "${db}_hostile"; do
			psql -X -q -d postgres -c "DROP DATABASE IF EXISTS \"$d\" WITH (FORCE)" >/dev/null 2>&1
		done
	fi
	return "$status"
}

main
