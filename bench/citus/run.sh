#!/usr/bin/env bash
# The Citus loader benchmark.  See bench/README.md.
#
#   bash bench/citus/run.sh [--rows N]
#
# One reconcile_batch of N staged rows (default 1,000,000: half of them
# update rows of a target of N rows, half are new keys) into a plain table
# on one PostgreSQL node, and into a hash-distributed table on a Citus
# coordinator with two workers (staged relation co-located), side by side;
# then, on Citus, a diff of the target against a co-located copy with a few
# rows changed, reading every row and by checksums.
# Starts its own nodes with PostgreSQL::Test::Cluster (ports chosen free)
# and removes them at the end.  One run: every figure is from a single
# execution.  Needs Citus (tools/setup.sh builds it) and root.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
# shellcheck source=tools/lib.sh
source "$ROOT/tools/lib.sh"

ROWS=1000000
while [ $# -gt 0 ]; do
	case $1 in
	--rows) ROWS=$2; shift 2 ;;
	-h | --help) sed -n '2,14p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) die "unknown argument: $1" ;;
	esac
done
[[ $ROWS =~ ^[1-9][0-9]*$ ]] || die "--rows takes a positive integer, not '$ROWS'"
require_root
[ -f "$("$PG_BINDIR/pg_config" --pkglibdir)/citus.so" ] ||
	die "Citus is not installed in $PG_BINDIR's PostgreSQL; run tools/setup.sh"

make -s -C "$ROOT" PG_CONFIG="$PG_BINDIR/pg_config" install >/dev/null
scratch=$(mktemp -d /tmp/reconcile-bench-citus.XXXX)
trap '[ -n "${BENCH_KEEP:-}" ] || rm -rf "$scratch"' EXIT
cp "$HERE/bench.pl" "$scratch/"
chown -R postgres:postgres "$scratch"
cd "$scratch"
runuser -u postgres -- env -u PGHOST -u PGPORT -u PGUSER -u PGDATABASE \
	PATH="$PG_BINDIR:/usr/local/bin:/usr/bin:/bin" \
	PERL5LIB="$PG_PERL_DIR" PG_REGRESS="$PG_REGRESS_BIN" TESTDIR="$scratch" \
	BENCH_ROWS="$ROWS" perl bench.pl
