#!/usr/bin/env bash
# The manifest benchmark (issue 11, item 5; issue 23, point 5).  See bench/README.md.
#
#   bash bench/manifest/run.sh [--objects N[,N...]] [--workers W] [--form jsonb|table[,...]]
#
# Runs against the server that PGHOST, PGPORT and PGUSER name (a superuser,
# on this machine: the backend's memory is read from /proc), in a database
# reconcile_bench_manifest that it drops and re-creates.  For each N
# (default 100,000, 1,000,000 and 5,000,000) stages N objects of one row
# each and times one reconcile_batch of their manifest, then its replay.
# Reports per N: objects, seconds, the peak of the backend's private
# memory (RssAnon sampled every 20 ms, its parallel workers' added) above
# what it held before, in all and per object, the backend's CPU seconds
# (without its parallel workers'), and the replay's seconds.
# A manifest PostgreSQL cannot build (one jsonb holds at most 256 MB) is
# reported as such.  --workers sets the batch session's
# max_parallel_maintenance_workers (default: the server's).  --form (default
# jsonb) says how the manifest is given: jsonb (reconcile_batch) or table
# (reconcile_batch_table, a table of one entry per row); both: jsonb,table.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OBJECTS=100000,1000000,5000000
FORMS=jsonb
DB=reconcile_bench_manifest

while [ $# -gt 0 ]; do
	case $1 in
	--objects) OBJECTS=$2; shift 2 ;;
	--form) FORMS=$2; shift 2 ;;
	--workers) export PGOPTIONS="${PGOPTIONS:-} -c max_parallel_maintenance_workers=$2"; shift 2 ;;
	-h | --help) sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown argument: $1" >&2; exit 2 ;;
	esac
done
[[ $FORMS =~ ^(jsonb|table)(,(jsonb|table))*$ ]] || { echo "--form takes jsonb or table, comma-separated" >&2; exit 2; }
[[ $OBJECTS =~ ^[1-9][0-9]*(,[1-9][0-9]*)*$ ]] || { echo "--objects takes positive integers, comma-separated" >&2; exit 2; }

BENCH_TMP=$(mktemp -d)
export BENCH_TMP
trap 'touch "$BENCH_TMP/mem.stop"; sleep 0.2; rm -rf "$BENCH_TMP"' EXIT

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

IFS=, read -r -a COUNTS <<<"$OBJECTS"
IFS=, read -r -a FORM_LIST <<<"$FORMS"
for FORM in "${FORM_LIST[@]}"; do
for N in "${COUNTS[@]}"; do
	psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" >/dev/null
	if ! psql -X -q -v ON_ERROR_STOP=1 -v objects="$N" -v form="$FORM" -d "$DB" -f "$HERE/setup.sql" >"$BENCH_TMP/setup" 2>&1; then
		echo "form: $FORM  objects: $N: no manifest: $(grep -m1 ERROR "$BENCH_TMP/setup")"
		continue
	fi
	cat "$BENCH_TMP/setup"
	rm -f "$BENCH_TMP/go" "$BENCH_TMP/pid" "$BENCH_TMP/anon0" "$BENCH_TMP/mem"* 
	if [ "$FORM" = table ]; then
		measure_batch "$DB" "$HERE/batch_table.sql"
		replay_sql="SELECT status FROM reconcile_batch_table('bench_target', 'bench_stage', 'bench_manifest_rows');"
	else
		measure_batch "$DB" "$HERE/batch.sql"
		replay_sql="SELECT status FROM bench_manifest, reconcile_batch('bench_target', 'bench_stage', manifest);"
	fi
	seconds=$(grep -m1 '^Time:' "$BENCH_TMP/out" | awk '{printf "%.1f", $2 / 1000}')
	cpu=$(grep -A2 'backend CPU seconds' "$BENCH_TMP/out" | tail -1 | awk '{printf "%.1f s", $1}')
	replay=$( { echo '\timing on'; echo "$replay_sql"; } |
		psql -X -d "$DB" | grep -m1 '^Time:' | awk '{printf "%.2f", $2 / 1000}')
	echo "form: $FORM  objects: $N  seconds: $seconds (backend CPU: $cpu)  peak RssAnon - RssAnon before: $((PEAK_KB / 1024)) MB ($((PEAK_KB * 1024 / N)) bytes per object)  replay seconds: $replay"
done
done
