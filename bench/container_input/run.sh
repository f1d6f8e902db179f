#!/usr/bin/env bash
# Input errors inside containers (issue 11, item 6).  See bench/README.md.
#
#   bash bench/container_input/run.sh [--values N]
#
# Runs against the server that PGHOST, PGPORT and PGUSER name (a superuser,
# on this machine), in a database reconcile_bench_input that it drops and
# re-creates.  Stages N rows (default 20,000), each with one bad value in a
# column of a composite, array or range type over a domain whose CHECK
# calls a PL/pgSQL function, and times one reconcile_batch; reports the
# peak of the backend's private memory above what it held before, the
# number of WARNING lines (leaked TupleDescs or SPI stacks), and the time.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
VALUES=20000
DB=reconcile_bench_input

while [ $# -gt 0 ]; do
	case $1 in
	--values) VALUES=$2; shift 2 ;;
	-h | --help) sed -n '2,13p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown argument: $1" >&2; exit 2 ;;
	esac
done
[[ $VALUES =~ ^[1-9][0-9]*$ ]] || { echo "--values takes a positive integer" >&2; exit 2; }

BENCH_TMP=$(mktemp -d)
export BENCH_TMP
trap 'touch "$BENCH_TMP/mem.stop"; sleep 0.2; rm -rf "$BENCH_TMP"' EXIT

psql -X -q -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB" >/dev/null
psql -X -q -v ON_ERROR_STOP=1 -v values="$VALUES" -d "$DB" -f "$HERE/setup.sql" >/dev/null

# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"
measure_batch "$DB" "$HERE/batch.sql" >"$BENCH_TMP/session"
grep -v '^WARNING\|^HINT' "$BENCH_TMP/session" || true
echo "bad values: $VALUES"
echo "warnings: $(grep -c '^WARNING' "$BENCH_TMP/session" || true)"
echo "peak RssAnon - RssAnon before: $((PEAK_KB / 1024)) MB"
