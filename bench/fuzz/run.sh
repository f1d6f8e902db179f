#!/usr/bin/env bash
# The long fuzz run: test/fuzz/run.sh with 100,000 sqlsmith queries and
# 3 x 10,000 targeted calls (as the targets' owner, as a reader, and as the
# superuser), against a cluster of its own, with a summary: statements run,
# errors by SQLSTATE, crashes with their queries and backtraces.
#
#   bash bench/fuzz/run.sh [--queries N] [--calls N] [--seed S] [--parallel] [--keep]
#   bash bench/fuzz/run.sh --valgrind          # 1,500 queries, 3 x 400 calls, under valgrind
#
# --parallel runs the three roles' calls and sqlsmith at the same time, each
# in a session of its own, so that DDL committed by one (the calls include
# column type changes, renames, RLS, REVOKE and re-registration, each held
# for 0.1 s) lands while another's batch waits for its lock.
#
# --valgrind runs the postmaster and every backend under valgrind memcheck
# with bench/valgrind/run.sh's options (VALGRIND_SUPP as there) and lists
# every valgrind error with a frame in reconcile.so in reconcile-errors.txt;
# it defaults to 1,500 queries and 3 x 400 calls (about 20 minutes), and a
# run with such an error fails.
#
# Run as root from the repository after tools/setup.sh (which installs
# sqlsmith and the extension into the PostgreSQL that RECONCILE_PG_BINDIR
# names).  Starts a throwaway cluster as the postgres OS user in
# bench/out/fuzz-<stamp>/ (port 54379, BENCH_FUZZ_PGPORT to change it;
# socket only) with restart_after_crash on, core files enabled
# (pg_ctl -c; kernel.core_pattern must be a file name, such as
# Debian's default "core", for gdb to find them in the data directory),
# log_line_prefix with the SQLSTATE and a 16 kB track_activity_query_size
# (so that the log names a crashing query in full), and stops it at the end
# (--keep leaves it running).  Exit status: 0 when nothing crashed.
set -uo pipefail
# shellcheck source=tools/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../tools/lib.sh"

queries=
calls=
seed=1
keep=0
parallel=()
valgrind=0
while [ $# -gt 0 ]; do
	case $1 in
	--queries) queries=$2; shift 2 ;;
	--calls) calls=$2; shift 2 ;;
	--valgrind) valgrind=1; shift ;;
	--seed) seed=$2; shift 2 ;;
	--keep) keep=1; shift ;;
	--parallel) parallel=(--parallel); shift ;;
	*) die "unknown option $1" ;;
	esac
done
require_root
if [ "$valgrind" -eq 1 ]; then
	queries=${queries:-1500} calls=${calls:-400}
else
	queries=${queries:-100000} calls=${calls:-10000}
fi

PORT=${BENCH_FUZZ_PGPORT:-54379}
STAMP=$(date -u +%Y%m%dT%H%M%SZ)
DIR=$RECONCILE_ROOT/bench/out/fuzz-$STAMP
DATA=$DIR/data
SERVER_LOG=$DIR/server.log
as_pg() { runuser -u postgres -- env -u PGHOST -u PGPORT -u PGUSER -u PGDATABASE "$@"; }

mkdir -p "$DIR"
chown postgres:postgres "$DIR"
log "initdb in $DATA"
as_pg "$PG_BINDIR/initdb" -D "$DATA" -U postgres --no-sync -A trust \
	--encoding=UTF8 --locale=C.UTF-8 >"$DIR/initdb.log" || die "initdb failed"
cat >>"$DATA/postgresql.conf" <<CONF
listen_addresses = ''
unix_socket_directories = '$DIR'
port = $PORT
fsync = off
autovacuum = off
restart_after_crash = on
log_line_prefix = '%m [%p] %e '
log_min_error_statement = panic
track_activity_query_size = 16384
CONF

log "starting the cluster on port $PORT (log in $SERVER_LOG)"
if [ "$valgrind" -eq 1 ]; then
	SUPP=()
	[ -n "${VALGRIND_SUPP:-}" ] && SUPP=(--suppressions="$VALGRIND_SUPP")
	mkdir -p "$DIR/vglog"
	chown postgres:postgres "$DIR/vglog"
	as_pg valgrind --quiet --trace-children=yes --track-origins=yes --read-var-info=yes \
		--leak-check=no --num-callers=30 "${SUPP[@]}" \
		--error-markers=VALGRINDERROR-BEGIN,VALGRINDERROR-END \
		--log-file="$DIR/vglog/%p.log" \
		"$PG_BINDIR/postgres" -D "$DATA" >"$SERVER_LOG" 2>&1 &
	for _ in $(seq 1 600); do
		as_pg "$PG_BINDIR/pg_isready" -q -h "$DIR" -p "$PORT" && break
		sleep 1
	done
	as_pg "$PG_BINDIR/pg_isready" -q -h "$DIR" -p "$PORT" || die "the cluster did not start"
else
	# pg_ctl -c raises the soft core-file limit to the hard one for the
	# postmaster and every backend (runuser's PAM session resets the shell's).
	ulimit -c unlimited
	as_pg "$PG_BINDIR/pg_ctl" -D "$DATA" -l "$SERVER_LOG" -c -w -t 60 start >/dev/null ||
		die "the cluster did not start"
fi
# shellcheck disable=SC2317  # called by the EXIT trap
stop() {
	[ "$keep" -eq 1 ] && return
	as_pg "$PG_BINDIR/pg_ctl" -D "$DATA" -m immediate -t 60 stop >/dev/null 2>&1 || true
}
trap stop EXIT

started=$(date +%s)
bash "$RECONCILE_ROOT/test/fuzz/run.sh" --host "$DIR" --port "$PORT" --log "$SERVER_LOG" \
	--queries "$queries" --calls "$calls" --seed "$seed" --superuser --no-dump "${parallel[@]}" \
	--out "$DIR" --keep-db 2>&1 | tee "$DIR/run.txt"
status=${PIPESTATUS[0]}
elapsed=$(($(date +%s) - started))

# A summary, from the run's own outputs and the server log.
{
	printf '\n==== fuzz summary (%s, seed %s, %s s%s) ====\n' "$STAMP" "$seed" "$elapsed" "${parallel:+, parallel}"
	printf 'build: %s\n' "$(git -C "$RECONCILE_ROOT" log -1 --format='%h %s' 2>/dev/null)"
	printf 'sqlsmith queries: %s\n' "$(sed -n 's/^queries: //p' "$DIR/sqlsmith.log" | tail -n 1)"
	for f in "$DIR"/calls-*.sql; do
		printf 'statements of the targeted calls as %s: %s\n' "$(basename "$f" .sql | sed 's/^calls-//')" "$(wc -l <"$f")"
	done
	printf 'errors by SQLSTATE (server log, every session):\n'
	grep -E -o '^[0-9-]+ [0-9:.]+ [A-Z]+ \[[0-9]+\] [0-9A-Z]{5} (ERROR|FATAL|PANIC):' "$SERVER_LOG" |
		awk '{ print $5, $6 }' | sort | uniq -c | sort -rn | awk '{ printf "  %-6s %-6s %s\n", $2, $3, $1 }'
	crashes=$(grep -E -c 'terminated by signal|terminated by exception|exited with exit code ([2-9]|[1-9][0-9])|PANIC:' "$SERVER_LOG")
	printf 'crashes: %s\n' "$crashes"
	grep -E -A 1 'terminated by signal|terminated by exception|exited with exit code ([2-9]|[1-9][0-9])|PANIC:' "$SERVER_LOG" |
		grep -v -E '^--$' | cut -c1-3000
	for core in "$DATA"/core*; do
		[ -f "$core" ] || continue
		printf '\n---- backtrace of %s ----\n' "$core"
		gdb -q -batch -ex 'bt 30' "$PG_BINDIR/postgres" "$core" 2>/dev/null | grep -E '^#' | awk '!seen[$0]++'
	done
} | tee "$DIR/summary.txt"
if [ "$valgrind" -eq 1 ]; then
	# Stop the server so that every backend's valgrind log is complete, then
	# keep the errors with a frame in reconcile.so, as bench/valgrind does.
	keep=0
	as_pg "$PG_BINDIR/pg_ctl" -D "$DATA" -m fast -t 600 stop >/dev/null 2>&1 || true
	awk '
		/VALGRINDERROR-BEGIN/ { inblk = 1; blk = ""; next }
		/VALGRINDERROR-END/ {
			inblk = 0; total++
			if (blk ~ /reconcile\.so/) { ours++; print "----- " FILENAME; printf "%s", blk }
			next
		}
		inblk { blk = blk $0 "\n" }
		END { printf "valgrind errors: %d in all, %d with a reconcile.so frame\n", total, ours > "/dev/stderr" }
	' "$DIR"/vglog/*.log >"$DIR/reconcile-errors.txt" 2>>"$DIR/summary.txt" || true
	tail -n 1 "$DIR/summary.txt"
	[ -s "$DIR/reconcile-errors.txt" ] && status=1
fi
log "outputs in $DIR"
exit "$status"
