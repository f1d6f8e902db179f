#!/usr/bin/env bash
# Repair benchmark: a source of N rows on one server, a target of N rows on
# another with 0.1% of them different (a quarter each: changed numbers,
# changed texts, rows missing in the target, rows only in the target), the
# target fixed from the source across servers (postgres_fdw over loopback
# TCP) by
#   repair    reconcile_repair (plain target; guarded UPDATE/INSERT/DELETE)
#   hand      the hand fix: reconcile_diff, then INSERT ... ON CONFLICT of
#             the source's rows of its findings and DELETE of the extra keys
#   pgcmp     pg_comparator --synchronize --do-it (Debian
#             postgresql-comparator), --max-ratio=2.0
# and, for scale, the diff alone (reconcile_diff, by checksums),
# each on its own copy of the damaged target, in one run; then the same
# diff must find nothing in each.  A proxy (bench/xdiff/proxy.py) in front
# of the source's server counts the bytes that cross it both ways.
#
#   bash bench/repair/run.sh [--rows N] [--share 0.001] [--repeat R] [--port P] [--no-install] [--keep]
#
# --repeat R measures R interleaved rounds (diff, repair, hand, pgcmp, diff,
# ...), each on fresh copies of the damaged target, and gives each ratio as
# the median of the rounds' ratios with its minimum and maximum.
# Run as root from the repository on a machine set up by tools/setup.sh
# (RECONCILE_PG_BINDIR names the PostgreSQL 15 to use); two throwaway
# clusters in bench/out/repair/ on ports P and P+1 (proxy on P+2; P
# defaults to 55446), removed at the end unless --keep.  Not part of the
# test run.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tools/lib.sh
source "$ROOT/tools/lib.sh"

ROWS=1000000
SHARE=0.001
PORT=${BENCH_PGPORT:-55446}
INSTALL=1
KEEP=0
REPEAT=1
while [ $# -gt 0 ]; do
	case $1 in
	--rows) ROWS=$2; shift 2 ;;
	--share) SHARE=$2; shift 2 ;;
	--port) PORT=$2; shift 2 ;;
	--no-install) INSTALL=0; shift ;;
	--keep) KEEP=1; shift ;;
	--repeat) REPEAT=$2; shift 2 ;;
	*) die "unknown argument $1" ;;
	esac
done
[[ $REPEAT =~ ^[1-9][0-9]*$ ]] || die "--repeat takes a positive number of rounds, not '$REPEAT'"
require_root

# shellcheck source=bench/two_clusters.sh
source "$ROOT/bench/two_clusters.sh"
two_clusters_init "$ROOT/bench/out/repair" "$PORT"
PROXY_PORT=$((PORT + 2))
[ "$INSTALL" = 1 ] && two_clusters_make_install
two_clusters_install_pgcmp
two_clusters_start
two_clusters_proxy "$PROXY_PORT"
sleep 1

COLS="id integer, c1 integer, c2 bigint, c3 numeric(12,2), c4 text, c5 varchar(40), c6 timestamptz, c7 date, c8 boolean"
MAKE_ROWS="
CREATE TABLE src ($COLS, PRIMARY KEY (id));
INSERT INTO src SELECT g, g % 1000, g::bigint * 7919, (g % 100000) / 7.0,
    md5(g::text), 'name ' || g, timestamptz '2026-01-01 00:00+00' + g * interval '1 second',
    date '2000-01-01' + g % 9000, g % 3 = 0
FROM generate_series(1, $ROWS) g;"
D=$(echo "$ROWS * $SHARE / 1" | bc)
log "building $ROWS rows on each server, $D differences"
start=$(date +%s)
src -c "$MAKE_ROWS" -c 'VACUUM ANALYZE src' -c 'CREATE EXTENSION pgcmp'
tgt -c "$MAKE_ROWS" -c 'CREATE EXTENSION pgcmp' -c 'CREATE EXTENSION reconcile' -c 'CREATE EXTENSION postgres_fdw' \
	-c "CREATE SERVER src_server FOREIGN DATA WRAPPER postgres_fdw OPTIONS (host '127.0.0.1', port '$PROXY_PORT', dbname 'bench')" \
	-c "CREATE USER MAPPING FOR postgres SERVER src_server" \
	-c "CREATE FOREIGN TABLE f_src ($COLS) SERVER src_server OPTIONS (table_name 'src')" \
	-c "
WITH picks AS (SELECT i, (i * ($ROWS / greatest($D, 1)))::integer - ($ROWS / greatest($D, 1) / 2)::integer + 1 AS id
               FROM generate_series(1, $D) i)
, u1 AS (UPDATE src t SET c3 = c3 + 1 FROM picks p WHERE p.id = t.id AND p.i % 4 = 0 RETURNING 1)
, u2 AS (UPDATE src t SET c4 = c4 || 'x' FROM picks p WHERE p.id = t.id AND p.i % 4 = 1 RETURNING 1)
, d1 AS (DELETE FROM src t USING picks p WHERE p.id = t.id AND p.i % 4 = 2 RETURNING 1)
INSERT INTO src SELECT $ROWS + i, 1, 1, 1, 'extra', 'extra', now(), current_date, true
FROM picks WHERE i % 4 = 3" -c "ALTER TABLE src RENAME TO damaged"
log "setup took $(($(date +%s) - start)) s"

SETS="c1 = EXCLUDED.c1, c2 = EXCLUDED.c2, c3 = EXCLUDED.c3, c4 = EXCLUDED.c4, c5 = EXCLUDED.c5, c6 = EXCLUDED.c6, c7 = EXCLUDED.c7, c8 = EXCLUDED.c8"
HAND="
BEGIN;
CREATE TEMP TABLE f ON COMMIT DROP AS SELECT issue, (key->>'id')::integer AS id FROM reconcile_diff('f_src', 't_hand', '{id}');
INSERT INTO t_hand SELECT * FROM f_src WHERE id = ANY (ARRAY(SELECT id FROM f WHERE issue IN ('MISSING_IN_TARGET', 'MISMATCH')))
    ON CONFLICT (id) DO UPDATE SET $SETS;
DELETE FROM t_hand WHERE id = ANY (ARRAY(SELECT id FROM f WHERE issue = 'EXTRA_IN_TARGET'));
COMMIT;"

printf '\nrepair benchmark, %s rows per side, %s differences, %s (%s)\n\n' "$ROWS" "$D" \
	"$(date -u +%FT%TZ)" "$(git -C "$ROOT" rev-parse --short HEAD)"
printf '| round | method | seconds | MB across | findings after |\n|---|---|---|---|---|\n'
RESULTS=$OUT/results.tsv
: >"$RESULTS"
for ((round = 1; round <= REPEAT; round++)); do
	for m in repair hand pgcmp; do
		tgt -c "DROP TABLE IF EXISTS t_$m" -c "CREATE TABLE t_$m AS SELECT * FROM damaged" \
			-c "ALTER TABLE t_$m ADD PRIMARY KEY (id)" -c "VACUUM ANALYZE t_$m"
	done
	for m in diff repair hand pgcmp; do
		case $m in
		diff) measure diff tgt -Atc "SELECT count(*) FROM reconcile_diff('f_src', 't_repair', '{id}')" ;;
		repair) measure repair tgt -Atc "SELECT count(*) FROM reconcile_repair('f_src', 't_repair', '{id}')" ;;
		hand) measure hand tgt -c "$HAND" ;;
		pgcmp) measure pgcmp pg_comparator --synchronize --do-it --max-ratio=2.0 --no-lock \
			"pgsql://postgres@127.0.0.1:$PROXY_PORT/bench/public.src?id" \
			"pgsql://postgres@127.0.0.1:$TGT_PORT/bench/public.t_pgcmp?id" ;;
		esac
		after=-
		[ $m != diff ] && after=$(tgt -Atc "SELECT count(*) FROM reconcile_diff('f_src', 't_$m', '{id}')")
		[ "$after" = - ] || [ "$after" = 0 ] || die "$m left $after differences"
		printf '| %s | %s | %.2f | %.3f | %s |\n' "$round" "$m" "$SECS" "$(echo "scale=6; $BYTES / 1000000" | bc)" "$after"
		printf '%s\t%s\t%s\t%s\n' "$round" "$m" "$SECS" "$BYTES" >>"$RESULTS"
	done
done

printf '\nratios'
[ "$REPEAT" -gt 1 ] && printf ': median [min, max] over %s interleaved rounds' "$REPEAT"
printf '\n\n| | time | bytes across |\n|---|---|---|\n'
awk -F'\t' "$AWK_SPREAD"'
{ t[$1, $2] = $3; b[$1, $2] = $4; if ($1 > n) n = $1 }
END {
	split("hand pgcmp diff", others, " ")
	split("the hand fix|pg_comparator --synchronize|the diff alone", label, "|")
	for (o = 1; o <= 3; o++) {
		tl = bl = ""
		for (r = 1; r <= n; r++) {
			tl = tl " " t[r, "repair"] / t[r, others[o]]
			bl = bl " " b[r, "repair"] / b[r, others[o]]
		}
		printf "| reconcile_repair / %s | %s | %s |\n", label[o], spread(tl, "%.2f"), spread(bl, "%.2f")
	}
}' "$RESULTS"
