#!/usr/bin/env bash
# The loader benchmark.  See bench/README.md.
#
#   bash bench/loader/run.sh [--rows N] [--target T] [--work-mem SIZE] [--shared-buffers SIZE]
#                            [--parallel WORKERS] [--scale [--with-pipeline] [--sizes "N1 N2 ..."]]
#                            [--use-existing] [--port P] [--no-install] [--keep] [--repeat N]
#                            [--ordering]
#
# Defaults: N = T = 1,000,000; its own throwaway cluster on port 54339, with
# max_parallel_maintenance_workers one less than the machine's cores.
# One run: every figure is from a single execution, not the best of several.
# --repeat N runs the contenders N times, interleaved (a, b, c, e, f, d, a,
# b, ...), and reports each ratio as the median of the N rounds' ratios with
# their minimum and maximum, so that a change can be told from noise.
# --ordering times (a) alone, on the same batch with a bigint version and
# with a timestamptz one (ordering_ts.sql), interleaved for --repeat N
# rounds, and reports the ratio timestamptz / bigint.
set -euo pipefail
shopt -s inherit_errexit

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
PG_BINDIR=${RECONCILE_PG_BINDIR:-/usr/lib/postgresql/15/bin}   # as tools/lib.sh
OUT_DIR=$ROOT/bench/out

ROWS=1000000
TARGET=
WORK_MEM=4MB
SHARED_BUFFERS=1GB
PARALLEL=$(($(nproc) > 1 ? $(nproc) - 1 : 0))
SCALE=0
WITH_PIPELINE=0
SIZES="100000 1000000 10000000"
USE_EXISTING=0
PORT=${BENCH_PGPORT:-54339}
INSTALL=1
KEEP=0
REPEAT=1
ORDERING=0
OBJECTS=100
SEED=0.42
DB=reconcile_bench

usage() { sed -n '2,9p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }
log() { printf '==> %s\n' "$*" >&2; }
die() { printf '==> ERROR: %s\n' "$*" >&2; exit 1; }

while [ $# -gt 0 ]; do
	case $1 in
	--rows) ROWS=$2; shift 2 ;;
	--target) TARGET=$2; shift 2 ;;
	--work-mem) WORK_MEM=$2; shift 2 ;;
	--shared-buffers) SHARED_BUFFERS=$2; shift 2 ;;
	--parallel) PARALLEL=$2; shift 2 ;;
	--scale) SCALE=1; shift ;;
	--with-pipeline) WITH_PIPELINE=1; shift ;;
	--sizes) SIZES=$2; shift 2 ;;
	--use-existing) USE_EXISTING=1; shift ;;
	--port) PORT=$2; shift 2 ;;
	--no-install) INSTALL=0; shift ;;
	--keep) KEEP=1; shift ;;
	--repeat) REPEAT=$2; shift 2 ;;
	--ordering) ORDERING=1; shift ;;
	-h | --help) usage; exit 0 ;;
	*) usage >&2; die "unknown argument: $1" ;;
	esac
done
[[ $REPEAT =~ ^[1-9][0-9]*$ ]] || die "--repeat takes a positive number of rounds, not '$REPEAT'"
[[ $PARALLEL =~ ^[0-9]+$ ]] || die "--parallel takes a number of workers, not '$PARALLEL'"
for n in $ROWS ${TARGET:-1} $SIZES; do
	[[ $n =~ ^[1-9][0-9]*$ ]] || die "row counts must be positive integers, not '$n'"
done
TARGET=${TARGET:-$ROWS}

STAMP=$(date -u +%Y%m%dT%H%M%SZ)
RUN_ID=bench-$STAMP
mkdir -p "$OUT_DIR"
REPORT=$OUT_DIR/loader-$STAMP.txt
TMP=$OUT_DIR/tmp-$STAMP
mkdir -p "$TMP"

# ---- the cluster ----

CLUSTER=
if [ "$USE_EXISTING" -eq 0 ]; then
	[ "$(id -u)" -eq 0 ] || die "run as root: the throwaway cluster runs as the postgres OS user (or give --use-existing)"
	id postgres >/dev/null 2>&1 || die "no postgres OS user: install PostgreSQL 15 first (bash tools/setup.sh)"
	[ -x "$PG_BINDIR/postgres" ] || die "no $PG_BINDIR/postgres: install PostgreSQL 15 first (bash tools/setup.sh)"
	CLUSTER=$OUT_DIR/cluster-$PORT
	sock="$CLUSTER/.s.PGSQL.$PORT"
	if ! runuser -u postgres -- test -x "$ROOT" 2>/dev/null || [ "${#sock}" -gt 100 ]; then
		CLUSTER=/tmp/reconcile-bench-$PORT
	fi
	export PGHOST=$CLUSTER PGPORT=$PORT PGUSER=postgres PGDATABASE=postgres
fi
# The server writes the COPY file of (d): a folder it can write.
if [ -n "$CLUSTER" ]; then
	COPY_FILE=$CLUSTER/stage.copy
else
	COPY_FILE=/tmp/reconcile-bench-stage-$STAMP.copy
fi
MAINT_DB=${PGDATABASE:-postgres}
export BENCH_TMP=$TMP BENCH_LOADER_DIR=$HERE

stop_cluster() {
	if [ -n "$CLUSTER" ] && [ -f "$CLUSTER/data/postmaster.pid" ]; then
		runuser -u postgres -- "$PG_BINDIR/pg_ctl" -D "$CLUSTER/data" -m fast -w stop >/dev/null || true
	fi
}

cleanup() {
	rm -rf "$TMP"
	if [ "$KEEP" -eq 0 ]; then
		stop_cluster
		[ -n "$CLUSTER" ] && rm -rf "$CLUSTER"
	else
		[ -n "$CLUSTER" ] && log "cluster kept running: PGHOST=$CLUSTER PGPORT=$PORT PGUSER=postgres psql -d $DB"
	fi
	return 0
}
trap cleanup EXIT

start_cluster() {
	stop_cluster
	rm -rf "$CLUSTER"
	mkdir -p "$CLUSTER"
	chown postgres:postgres "$CLUSTER"
	log "initdb in $CLUSTER/data"
	runuser -u postgres -- "$PG_BINDIR/initdb" -D "$CLUSTER/data" -U postgres -A trust \
		-E UTF8 --locale=C >"$CLUSTER/initdb.log" 2>&1 || {
		cat "$CLUSTER/initdb.log" >&2
		die "initdb failed"
	}
	cat >>"$CLUSTER/data/postgresql.conf" <<-EOF
		# reconcile loader benchmark
		port = $PORT
		listen_addresses = ''
		unix_socket_directories = '$CLUSTER'
		shared_buffers = $SHARED_BUFFERS
		max_wal_size = 4GB
		checkpoint_timeout = 30min
		work_mem = '$WORK_MEM'
		# reconcile_batch reads large staged tables with parallel workers
		# (docs/loader.md, "Parallel reading"); one per spare core
		max_parallel_maintenance_workers = $PARALLEL
		synchronous_commit = on
		fsync = on
		autovacuum = off
		log_checkpoints = on
	EOF
	runuser -u postgres -- "$PG_BINDIR/pg_ctl" -D "$CLUSTER/data" -l "$CLUSTER/server.log" -w start >/dev/null ||
		{ tail -n 50 "$CLUSTER/server.log" >&2; die "the benchmark cluster did not start"; }
}

psql_db() { "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -d "$DB" "$@"; }
psql_at() { psql_db -At -F'|' "$@"; }

# ---- the extension ----

install_extension() {
	if [ "$INSTALL" -eq 1 ] && [ "$(id -u)" -eq 0 ]; then
		log "make install (the extension as the repository has it now)"
		make -s -C "$ROOT" PG_CONFIG="$PG_BINDIR/pg_config" install >"$TMP/make.log" 2>&1 || {
			tail -n 40 "$TMP/make.log" >&2
			die "make install failed; fix the build or give --no-install to measure the installed one"
		}
	fi
	[ -f "$("$PG_BINDIR/pg_config" --sharedir)/extension/reconcile.control" ] ||
		[ "$USE_EXISTING" -eq 1 ] || die "the reconcile extension is not installed (make install)"
}

# ---- one data set ----

setup_data() {  # setup_data N T
	log "database $DB: target of $2 rows, batch of $1 staged rows in $OBJECTS objects"
	"$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -d "$MAINT_DB" \
		-c "SET client_min_messages = warning" \
		-c "DROP DATABASE IF EXISTS $DB WITH (FORCE)" -c "CREATE DATABASE $DB"
	psql_db -c "CREATE EXTENSION reconcile"
	local t0=$SECONDS
	psql_db -v N="$1" -v T="$2" -v objects="$OBJECTS" -v run_id="$RUN_ID-$1" -v seed="$SEED" \
		-f "$HERE/setup.sql" >/dev/null
	log "data ready in $((SECONDS - t0)) s"
}

# Time one contender on a fresh copy of the target; prints
# "name|seconds|wal_bytes|vmrss_before_kB|vmhwm_after_kB|rssanon_before_kB|rssanon_peak_kB".
run_contender() {  # run_contender NAME SQLFILE
	local name=$1 file=$2 mem=$TMP/mem-$1
	psql_db -f "$HERE/${RESTORE_SQL:-restore.sql}" >/dev/null
	# (b)'s own state starts empty at each of its runs (--repeat), and is
	# kept until its next run for the checks.
	[ "$name" = b ] && psql_db -c "TRUNCATE bench_rejects, bench_conflicts, bench_receipts" >/dev/null
	rm -f "$mem".*
	psql_at -v name="$name" -v copy_file="$COPY_FILE" >"$TMP/result-$name" <<-EOF
		SET client_min_messages = warning;
		SELECT pg_backend_pid() AS pid \gset
		\setenv BENCH_PID :pid
		\setenv BENCH_MEM $mem
		\! grep -sE '^(VmRSS|VmHWM|RssAnon):' /proc/\$BENCH_PID/status > \$BENCH_MEM.before; bash "\$BENCH_LOADER_DIR/memsample.sh" "\$BENCH_PID" "\$BENCH_MEM" </dev/null >/dev/null 2>&1 &
		SELECT clock_timestamp() AS t0, pg_current_wal_lsn() AS lsn0 \gset
		\i $file
		SELECT :'name', extract(epoch FROM clock_timestamp() - :'t0'::timestamptz),
		       pg_wal_lsn_diff(pg_current_wal_lsn(), :'lsn0');
		\! grep -sE '^(VmRSS|VmHWM|RssAnon):' /proc/\$BENCH_PID/status > \$BENCH_MEM.after; touch \$BENCH_MEM.stop
	EOF
	local i=0
	while [ ! -e "$mem.peak_anon" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
	kv() { awk -v k="$1:" '$1 == k { print $2 }' "$2" 2>/dev/null || true; }
	printf '%s|%s|%s|%s|%s|%s\n' "$(tail -n 1 "$TMP/result-$name")" \
		"$(kv VmRSS "$mem.before")" "$(kv VmHWM "$mem.after")" \
		"$(kv RssAnon "$mem.before")" "$(cat "$mem.peak_anon" 2>/dev/null || true)"
}

# save_result NAME: keep the target a contender left.  For (a), also its
# receipt, rejects and conflicts: the next restore drops the target, and a
# dropped target takes its reconcile state with it.
save_result() {
	psql_db -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS result_$1" -c "CREATE TABLE result_$1 AS SELECT * FROM customer"
	[ "$1" = a ] || return 0
	local t
	for t in receipts rejects conflicts; do
		psql_db -c "SET client_min_messages = warning" -c "DROP TABLE IF EXISTS result_a_$t" \
			-c "CREATE TABLE result_a_$t AS SELECT * FROM reconcile.$t WHERE target = 'customer'::regclass"
	done
}

fmt_row() {  # fmt_row LABEL N RESULTLINE
	local label=$1 n=$2
	IFS='|' read -r _ secs wal rss0 hwm anon0 anonpk <<<"$3"
	local mem='' rate
	rate=$(awk -v n="$n" -v s="$secs" 'BEGIN { printf "%.0f", (s > 0 ? n / s : 0) }')
	if [ -n "$hwm" ] && [ -n "$rss0" ]; then
		mem=$(awk -v h="$hwm" -v r="$rss0" -v a0="$anon0" -v ap="$anonpk" \
			'BEGIN { printf "%.1f / %.1f / %.1f", (h - r) / 1024, h / 1024, (ap - a0) / 1024 }')
	fi
	printf '%-44s %9.2f %12s %10.1f  %s\n' "$label" "$secs" "$rate" \
		"$(awk -v w="$wal" 'BEGIN { print w / 1048576 }')" "$mem"
}

secs_of() { IFS='|' read -r _ secs _ <<<"$1"; echo "$secs"; }
# spread R1 R2 ...: "median [min, max]" of the ratios given.
spread() {
	printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 }
		END { m = (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2;
		      printf "%.2f [%.2f, %.2f]", m, v[1], v[NR] }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }

header() {
	printf '%-44s %9s %12s %10s  %s\n' contender seconds rows/s 'WAL MB' \
		'memory MB: VmHWM-VmRSS0 / VmHWM / peak RssAnon-RssAnon0'
}

machine() {
	printf 'machine: %s cores (%s), %s GB RAM, %s; PostgreSQL %s\n' "$(nproc)" \
		"$(awk -F': ' '/^model name/ { print $2; exit }' /proc/cpuinfo)" \
		"$(awk '/^MemTotal/ { printf "%.0f", $2 / 1048576 }' /proc/meminfo)" "$(uname -sr)" \
		"$(psql_at -c 'SHOW server_version')"
	printf 'settings: shared_buffers %s, work_mem %s, max_parallel_maintenance_workers %s, max_wal_size %s, synchronous_commit %s, fsync %s, full_page_writes %s\n' \
		"$(psql_at -c 'SHOW shared_buffers')" "$(psql_at -c 'SHOW work_mem')" \
		"$(psql_at -c 'SHOW max_parallel_maintenance_workers')" \
		"$(psql_at -c 'SHOW max_wal_size')" "$(psql_at -c 'SHOW synchronous_commit')" \
		"$(psql_at -c 'SHOW fsync')" "$(psql_at -c 'SHOW full_page_writes')"
	local so now
	so=$("$PG_BINDIR/pg_config" --pkglibdir)/reconcile.so
	now=$(date -u -r "$so" '+%F %T UTC' 2>/dev/null || echo '?')
	[ "$now" = "$SO_MTIME" ] || now="$SO_MTIME, REINSTALLED during the run ($now): figures may mix builds"
	printf 'extension: %s of %s; repository at git %s%s\n' "$so" "$now" \
		"$(git -C "$ROOT" rev-parse --short HEAD 2>/dev/null || echo '?')" \
		"$(git -C "$ROOT" diff --quiet HEAD -- src 2>/dev/null || echo ', src/ modified')"
}

receipt_of_a() {
	psql_at -c "SELECT format('staged %s: inserted %s, updated %s, deleted %s, unchanged %s, stale %s, duplicates %s, conflicts %s, rejected %s',
	                          staged_rows, inserted, updated, deleted, unchanged, stale, duplicates, conflicts, rejected)
	            FROM result_a_receipts r JOIN bench_manifest m ON r.batch_id = reconcile_batch_id(m.manifest)
	            WHERE m.name = 'batch'"
}

# ---- the runs ----

default_run() {
	setup_data "$ROWS" "$TARGET"
	local mix
	mix=$(psql_at -c "SELECT string_agg(format('%s %s', cat, rows), ', ' ORDER BY rows DESC) FROM plan_mix")
	log "winners for (c), (e), (f): computed beforehand, untimed"
	psql_db -f "$HERE/winners.sql"
	local nwin
	nwin=$(psql_at -c "SELECT count(*) FROM winners")
	psql_db -c "COPY stage TO '$COPY_FILE'"

	log "(a) reconcile_batch"
	local ra rb rc rd re rf
	ra=$(run_contender a "$HERE/contender_a.sql"); save_result a
	log "(b) hand-written pipeline"
	rb=$(run_contender b "$HERE/contender_b.sql"); save_result b
	log "(c) bare MERGE of the winners"
	rc=$(run_contender c "$HERE/contender_c.sql"); save_result c
	log "(e) bare INSERT ... ON CONFLICT of the winners"
	re=$(run_contender e "$HERE/contender_e.sql"); save_result e
	log "(f) plain INSERT of the winners into an empty indexed table"
	rf=$(run_contender f "$HERE/contender_f.sql")
	log "(d) COPY of the staged rows into an empty table"
	rd=$(run_contender d "$HERE/contender_d.sql")
	# Further rounds, each contender once per round in the same order; the
	# first round's targets are the ones checked below.
	local round name sa=() sb=() sc=() se=() sf=() sd=()
	sa+=("$(secs_of "$ra")"); sb+=("$(secs_of "$rb")"); sc+=("$(secs_of "$rc")")
	se+=("$(secs_of "$re")"); sf+=("$(secs_of "$rf")"); sd+=("$(secs_of "$rd")")
	for ((round = 2; round <= REPEAT; round++)); do
		log "round $round of $REPEAT: a, b, c, e, f, d"
		for name in a b c e f d; do
			local -n acc=s$name
			acc+=("$(secs_of "$(run_contender "$name" "$HERE/contender_$name.sql")")")
			unset -n acc
		done
	done
	local -A pairs=()
	for name in b c e f d; do
		local -n acc=s$name
		local r=() i
		for ((i = 0; i < REPEAT; i++)); do r+=("$(ratio "${sa[$i]}" "${acc[$i]}")"); done
		pairs[$name]=$(spread "${r[@]}")
		unset -n acc
	done
	rm -f "$COPY_FILE"

	log "checks"
	local checks extra
	checks=$(psql_at -f "$HERE/check.sql")
	extra=$(psql_at -c "
		SELECT 'CHECK', 'target c = a (same winners by MERGE)',
		       CASE WHEN n = 0 THEN 'ok' ELSE 'FAIL' END, n || ' rows differ'
		FROM (SELECT (SELECT count(*) FROM (SELECT * FROM result_a EXCEPT SELECT * FROM result_c) d)
		           + (SELECT count(*) FROM (SELECT * FROM result_c EXCEPT SELECT * FROM result_a) d) AS n) x
		UNION ALL
		SELECT 'CHECK', 'target e = a (same winners by ON CONFLICT)',
		       CASE WHEN n = 0 THEN 'ok' ELSE 'FAIL' END, n || ' rows differ'
		FROM (SELECT (SELECT count(*) FROM (SELECT * FROM result_a EXCEPT SELECT * FROM result_e) d)
		           + (SELECT count(*) FROM (SELECT * FROM result_e EXCEPT SELECT * FROM result_a) d) AS n) x")

	{
		printf 'reconcile loader benchmark, %s\n' "$STAMP"
		printf 'command: bash bench/loader/run.sh --rows %s --target %s --work-mem %s --shared-buffers %s --repeat %s\n' "$ROWS" "$TARGET" "$WORK_MEM" "$SHARED_BUFFERS" "$REPEAT"
		machine
		printf 'batch: %s staged rows in %s objects, target %s rows; %s winners for (c), (e), (f)\n' \
			"$ROWS" "$OBJECTS" "$TARGET" "$nwin"
		printf 'mix: %s\n' "$mix"
		printf 'receipt of (a): %s\n' "$(receipt_of_a)"
		printf '%s, on identical fresh copies of the target; rows/s = %s staged rows / seconds\n\n' "$( [ "$REPEAT" -gt 1 ] && echo "round 1 of $REPEAT below" || echo 'one run each')" "$ROWS"
		header
		fmt_row "(a) reconcile_batch" "$ROWS" "$ra"
		fmt_row "(b) hand-written SQL pipeline" "$ROWS" "$rb"
		fmt_row "(c) bare MERGE of the winners" "$ROWS" "$rc"
		fmt_row "(e) bare INSERT ON CONFLICT of the winners" "$ROWS" "$re"
		fmt_row "(f) INSERT winners into empty indexed table" "$ROWS" "$rf"
		fmt_row "(d) COPY staged rows into empty table" "$ROWS" "$rd"
		printf '\nratios: a/b %s   a/c %s   a/e %s   a/f %s   a/d %s\n' \
			"$(ratio "$(secs_of "$ra")" "$(secs_of "$rb")")" "$(ratio "$(secs_of "$ra")" "$(secs_of "$rc")")" \
			"$(ratio "$(secs_of "$ra")" "$(secs_of "$re")")" "$(ratio "$(secs_of "$ra")" "$(secs_of "$rf")")" \
			"$(ratio "$(secs_of "$ra")" "$(secs_of "$rd")")"
		if [ "$REPEAT" -gt 1 ]; then
			printf 'over %s interleaved rounds, median [min, max] of the rounds'"'"' ratios:\n' "$REPEAT"
			printf '  a/b %s   a/c %s   a/e %s   a/f %s   a/d %s\n' "${pairs[b]}" "${pairs[c]}" \
				"${pairs[e]}" "${pairs[f]}" "${pairs[d]}"
			printf '  seconds of a per round: %s\n' "${sa[*]}"
		fi
		printf '(targets: a/b <= 0.5 and a/c <= 1.0 at the default size)\n\n'
		printf '%s\n%s\n' "$checks" "$extra" | awk -F'|' 'NF >= 4 { printf "check %-44s %-4s %s\n", $2, $3, $4 }'
	} | tee "$REPORT"
	if printf '%s\n%s\n' "$checks" "$extra" | grep -q '|FAIL|'; then
		printf '\n==> FAILED: the contenders do not leave the same target or counts; the figures above are not comparable.\n' | tee -a "$REPORT" >&2
		printf '==> the database %s is left as it is for inspection (result_a, result_b, bench_*, reconcile.*)\n' "$DB" >&2
		KEEP=1
		exit 1
	fi
	printf '\nreport written to %s\n' "${REPORT#"$ROOT"/}"
}

# (a) with a bigint and with a timestamptz version, interleaved.
ordering_run() {
	setup_data "$ROWS" "$TARGET"
	psql_db -f "$HERE/ordering_ts.sql" >/dev/null
	local round sbig=() sts=() r=() rbig rts
	for ((round = 1; round <= REPEAT; round++)); do
		log "round $round of $REPEAT: (a) bigint, (a) timestamptz"
		rbig=$(run_contender a "$HERE/contender_a.sql")
		rts=$(RESTORE_SQL=restore_ts.sql run_contender a_ts "$HERE/contender_a_ts.sql")
		sbig+=("$(secs_of "$rbig")"); sts+=("$(secs_of "$rts")")
		r+=("$(ratio "${sts[-1]}" "${sbig[-1]}")")
	done
	{
		printf 'reconcile loader benchmark, --ordering, %s\n' "$STAMP"
		printf 'command: bash bench/loader/run.sh --ordering --rows %s --target %s --repeat %s\n' "$ROWS" "$TARGET" "$REPEAT"
		machine
		printf 'receipt, bigint:      %s\n' "$(psql_at -c "SELECT format('inserted %s, updated %s, deleted %s, unchanged %s, stale %s, duplicates %s, conflicts %s, rejected %s', inserted, updated, deleted, unchanged, stale, duplicates, conflicts, rejected) FROM reconcile.receipts WHERE target = 'customer'::regclass ORDER BY committed_at DESC LIMIT 1")"
		printf 'receipt, timestamptz: %s\n\n' "$(psql_at -c "SELECT format('inserted %s, updated %s, deleted %s, unchanged %s, stale %s, duplicates %s, conflicts %s, rejected %s', inserted, updated, deleted, unchanged, stale, duplicates, conflicts, rejected) FROM reconcile.receipts WHERE target = 'customer_ts'::regclass ORDER BY committed_at DESC LIMIT 1")"
		header
		fmt_row "(a) bigint version, last round" "$ROWS" "$rbig"
		fmt_row "(a) timestamptz version, last round" "$ROWS" "$rts"
		printf '\nseconds of (a) per round, bigint:      %s\n' "${sbig[*]}"
		printf 'seconds of (a) per round, timestamptz: %s\n' "${sts[*]}"
		printf 'ratio timestamptz / bigint, median [min, max] of the rounds: %s\n' "$(spread "${r[@]}")"
	} | tee "$REPORT"
	printf '\nreport written to %s\n' "${REPORT#"$ROOT"/}"
}

scale_run() {
	local lines=() n r rb
	for n in $SIZES; do
		setup_data "$n" "$n"
		log "(a) reconcile_batch, N = T = $n"
		r=$(run_contender a "$HERE/contender_a.sql")
		lines+=("$n|a|$r")
		if [ "$WITH_PIPELINE" -eq 1 ]; then
			save_result a
			log "(b) hand-written pipeline, N = T = $n"
			rb=$(run_contender b "$HERE/contender_b.sql")
			save_result b
			lines+=("$n|b|$rb")
			local checks
			checks=$(psql_at -f "$HERE/check.sql")
			printf '%s\n' "$checks" | awk -F'|' '{ printf "  check %s: %s %s\n", $2, $3, $4 }' >&2
			if printf '%s\n' "$checks" | grep -q '|FAIL|'; then
				KEEP=1
				die "(a) and (b) disagree at N = $n"
			fi
		fi
	done
	{
		printf 'reconcile loader benchmark, --scale, %s\n' "$STAMP"
		printf 'command: bash bench/loader/run.sh --scale%s --sizes "%s" --work-mem %s --shared-buffers %s\n' \
			"$([ "$WITH_PIPELINE" -eq 1 ] && echo ' --with-pipeline')" "$SIZES" "$WORK_MEM" "$SHARED_BUFFERS"
		machine
		printf 'one run per size, T = N, each on a freshly generated data set\n\n'
		printf '%-12s %-3s %9s %10s %12s %10s %12s %10s %12s\n' N '' seconds 'us/row' rows/s 'WAL MB' \
			'VmHWM-RSS0' 'VmHWM' 'RssAnon+'
		local line prev_s='' prev_n='' prev_m='' growth=''
		for line in "${lines[@]}"; do
			IFS='|' read -r n who _ secs wal rss0 hwm anon0 anonpk <<<"$line"
			awk -v n="$n" -v who="$who" -v s="$secs" -v w="$wal" -v r="$rss0" -v h="$hwm" -v a0="$anon0" -v ap="$anonpk" \
				'BEGIN { printf "%-12s (%s) %9.2f %10.2f %12.0f %10.1f %10.1f MB %7.1f MB %9.1f MB\n",
				         n, who, s, s * 1e6 / n, n / s, w / 1048576, (h - r) / 1024, h / 1024, (ap - a0) / 1024 }'
			if [ "$who" = a ]; then
				[ -n "$prev_s" ] && growth+=$(awk -v n="$n" -v pn="$prev_n" -v s="$secs" -v ps="$prev_s" \
					-v m="$((anonpk - anon0))" -v pm="$prev_m" \
					'BEGIN { printf "  %s -> %s rows: time x%.2f for rows x%.1f (per row x%.2f); private memory (RssAnon+) %.1f -> %.1f MB, x%.2f\n",
					         pn, n, s / ps, n / pn, (s / n) / (ps / pn), pm / 1024, m / 1024, (pm > 0 ? m / pm : 0) }')$'\n'
				prev_s=$secs prev_n=$n prev_m=$((anonpk - anon0))
			fi
		done
		printf '\ngrowth of (a):\n%s' "$growth"
	} | tee "$REPORT"
	printf '\nreport written to %s\n' "${REPORT#"$ROOT"/}"
}

main() {
	if [ -n "$CLUSTER" ]; then
		start_cluster
	fi
	install_extension
	SO_MTIME=$(date -u -r "$("$PG_BINDIR/pg_config" --pkglibdir)/reconcile.so" '+%F %T UTC' 2>/dev/null || echo '?')
	if [ "$SCALE" -eq 1 ]; then
		scale_run
	elif [ "$ORDERING" -eq 1 ]; then
		ordering_run
	else
		default_run
	fi
}

main
