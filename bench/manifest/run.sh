#!/usr/bin/env bash
# The manifest benchmark (issue 11, item 5).  See bench/README.md.
#
#   bash bench/manifest/run.sh [--objects N] [--workers W]
#
# Runs against the server that PGHOST, PGPORT and PGUSER name (a superuser,
# on this machine: the backend's memory is read from /proc), in a database
# reconcile_bench_manifest that it drops and re-creates.  Stages N objects
# of one row each (default 500,000, the most a manifest may list) and
# times one reconcile_batch of their manifest.  Reports the seconds and
# the peak of the backend's private memory (RssAnon sampled every 20 ms,
# its parallel workers' added) above what it held before, in all and per
# object.  --workers sets the batch session's
# max_parallel_maintenance_workers (default: the server's).  One run.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
OBJECTS=500000
DB=reconcile_bench_manifest

while [ $# -gt 0 ]; do
	case $1 in
	--objects) OBJECTS=$2; shift 2 ;;
	--workers) export PGOPTIONS="${PGOPTIONS:-} -c max_parallel_maintenance_workers=$2"; shift 2 ;;
	-h | --help) sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown argument: $1" >&2; exit 2 ;;
	esac
done
[[ $OBJECTS =~ ^[1-9][0-9]*$ ]] || { echo "--objects takes a positive integer" >&2; exit 2; }

BENCH_TMP=$(mktemp -d)
export BENCH_TMP
trap 'touch "$BENCH_TMP/mem.stop"; sleep 0.2; rm -rf "$BENCH_TMP"' EXIT

psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -v objects="$OBJECTS" -d "$DB" -f "$HERE/setup.sql"

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
measure_batch "$DB" "$HERE/batch.sql"
echo "objects: $OBJECTS"
echo "peak RssAnon - RssAnon before: $((PEAK_KB / 1024)) MB ($((PEAK_KB * 1024 / OBJECTS)) bytes per object)"
