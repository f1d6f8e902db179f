#!/usr/bin/env bash
# Cross-server diff benchmark: a source of N rows on one server, a target on
# another, compared through postgres_fdw over loopback TCP by
#   checksum  reconcile_diff's checksums of key ranges (option "remote": "auto")
#   async     the same through a foreign server with postgres_fdw's
#             async_capable 'true' (each statement's remote and local parts
#             run at the same time)
#   pull      reconcile_diff reading every source row ("remote": "pull")
#   pgcmp     pg_comparator (Debian postgresql-comparator), --max-ratio=2.0
# at 0, 10, 1,000 and 100,000 differences, on a plain link and on a link
# throttled to 100 Mbit/s with 1 ms of delay each way.  A small proxy
# (proxy.py) sits in front of the source's server and counts the bytes that
# cross it in both directions; the target's server is reached directly.
#
#   bash bench/xdiff/run.sh [--rows N] [--diffs "0 10 1000 100000"]
#                           [--methods "checksum async pull pgcmp"]
#                           [--options '{"split_factor": 16, "leaf_rows": 16}|{}']
#                           [--port P] [--no-throttle] [--no-install] [--keep] [--repeat N]
#
# --repeat N measures each link and difference count N times, the methods
# interleaved (checksum, async, pull, pgcmp, checksum, ...), and gives each
# ratio as the median of the rounds' ratios with its minimum and maximum.
# --options gives the checksum diff's options, several sets separated by |
# (each is a row of its own; the ratios use the first).
# Run as root from the repository on a machine set up by tools/setup.sh
# (RECONCILE_PG_BINDIR names the PostgreSQL 15 to use).  It installs
# postgresql-comparator with apt-get when pg_comparator is missing, starts
# two throwaway clusters as the postgres user in bench/out/xdiff/ (ports P
# and P+1, proxies on P+2 and P+3; P defaults to 55371) and removes them at
# the end (--keep leaves them).  Not part of the test run.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tools/lib.sh
source "$ROOT/tools/lib.sh"

ROWS=1000000
DIFFS="0 10 1000 100000"
PORT=${BENCH_PGPORT:-55371}
METHODS="checksum async pull pgcmp"
OPTIONS='{}'
THROTTLE=1
INSTALL=1
KEEP=0
REPEAT=1
while [ $# -gt 0 ]; do
	case $1 in
	--rows) ROWS=$2; shift 2 ;;
	--diffs) DIFFS=$2; shift 2 ;;
	--port) PORT=$2; shift 2 ;;
	--methods) METHODS=$2; shift 2 ;;
	--options) OPTIONS=$2; shift 2 ;;
	--no-throttle) THROTTLE=0; shift ;;
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
two_clusters_init "$ROOT/bench/out/xdiff" "$PORT"
FAST_PORT=$((PORT + 2))
SLOW_PORT=$((PORT + 3))
[ "$INSTALL" = 1 ] && two_clusters_make_install
two_clusters_install_pgcmp
two_clusters_start
two_clusters_proxy "$FAST_PORT"
two_clusters_proxy "$SLOW_PORT" --mbit 100 --delay-ms 1
sleep 1

# The same N rows on both servers: an int key and 8 columns of mixed types.
MAKE_ROWS="
CREATE TABLE src (id integer PRIMARY KEY, c1 integer, c2 bigint, c3 numeric(12,2),
    c4 text, c5 varchar(40), c6 timestamptz, c7 date, c8 boolean);
INSERT INTO src SELECT g, g % 1000, g::bigint * 7919, (g % 100000) / 7.0,
    md5(g::text), 'name ' || g, timestamptz '2026-01-01 00:00+00' + g * interval '1 second',
    date '2000-01-01' + g % 9000, g % 3 = 0
FROM generate_series(1, $ROWS) g;"
log "building $ROWS rows on each server"
start=$(date +%s)
src -c "$MAKE_ROWS" -c 'VACUUM ANALYZE src' -c 'CREATE EXTENSION pgcmp'
tgt -c "$MAKE_ROWS" -c 'VACUUM ANALYZE src' -c 'CREATE EXTENSION pgcmp' -c 'CREATE EXTENSION reconcile' \
	-c 'CREATE EXTENSION postgres_fdw'
for link in fast slow; do
	p=$FAST_PORT
	[ $link = slow ] && p=$SLOW_PORT
	tgt -c "CREATE SERVER src_$link FOREIGN DATA WRAPPER postgres_fdw
	            OPTIONS (host '127.0.0.1', port '$p', dbname 'bench')" \
		-c "CREATE USER MAPPING FOR postgres SERVER src_$link" \
		-c "CREATE FOREIGN TABLE f_src_$link (id integer, c1 integer, c2 bigint, c3 numeric(12,2),
	            c4 text, c5 varchar(40), c6 timestamptz, c7 date, c8 boolean)
	            SERVER src_$link OPTIONS (table_name 'src')" \
		-c "CREATE SERVER src_${link}_async FOREIGN DATA WRAPPER postgres_fdw
	            OPTIONS (host '127.0.0.1', port '$p', dbname 'bench', async_capable 'true')" \
		-c "CREATE USER MAPPING FOR postgres SERVER src_${link}_async" \
		-c "CREATE FOREIGN TABLE f_src_${link}_async (id integer, c1 integer, c2 bigint, c3 numeric(12,2),
	            c4 text, c5 varchar(40), c6 timestamptz, c7 date, c8 boolean)
	            SERVER src_${link}_async OPTIONS (table_name 'src')"
done
# One target table per difference count, the differences spread evenly:
# a quarter each of changed amounts, changed texts, rows missing in the
# target and rows only in the target.
for d in $DIFFS; do
	tgt -c "CREATE TABLE t_$d AS SELECT * FROM src" -c "
WITH picks AS (SELECT i, (i * ($ROWS / greatest($d, 1)))::integer - ($ROWS / greatest($d, 1) / 2)::integer + 1 AS id
               FROM generate_series(1, $d) i)
, u1 AS (UPDATE t_$d t SET c3 = c3 + 1 FROM picks p WHERE p.id = t.id AND p.i % 4 = 0 RETURNING 1)
, u2 AS (UPDATE t_$d t SET c4 = c4 || 'x' FROM picks p WHERE p.id = t.id AND p.i % 4 = 1 RETURNING 1)
, d1 AS (DELETE FROM t_$d t USING picks p WHERE p.id = t.id AND p.i % 4 = 2 RETURNING 1)
INSERT INTO t_$d SELECT $ROWS + i, 1, 1, 1, 'extra', 'extra', now(), current_date, true
FROM picks WHERE i % 4 = 3" -c "ALTER TABLE t_$d ADD PRIMARY KEY (id)" -c "VACUUM ANALYZE t_$d"
done
src -c 'SELECT count(*) FROM src' >/dev/null
log "setup took $(($(date +%s) - start)) s"
SRC_BYTES=$(src -Atc "SELECT pg_relation_size('src')")

printf '\ncross-server diff benchmark, %s rows per side, %s (%s)\n' "$ROWS" \
	"$(date -u +%FT%TZ)" "$(git -C "$ROOT" rev-parse --short HEAD)"
printf 'source table: %s MB on disk; fetch_size: postgres_fdw default (100); checksum options: %s\n\n' \
	"$(echo "scale=1; $SRC_BYTES / 1000000" | bc)" "$OPTIONS"
printf '| link | differences | round | method | findings | seconds | MB across |\n|---|---|---|---|---|---|---|\n'
RESULTS=$OUT/results.tsv
: >"$RESULTS"
links=fast
[ "$THROTTLE" = 1 ] && links="fast slow"
for link in $links; do
	p=$FAST_PORT
	[ $link = slow ] && p=$SLOW_PORT
	for d in $DIFFS; do
		for ((round = 1; round <= REPEAT; round++)); do
		for method in $METHODS; do
			optsets=("$OPTIONS")
			[ "$method" = checksum ] && IFS='|' read -ra optsets <<<"$OPTIONS"
			for opts in "${optsets[@]}"; do
				label=$method
				[ "$method" = checksum ] && [ "$opts" != "${optsets[0]}" ] && label="checksum $opts"
				case $method in
				checksum | pull)
					measure "$method" tgt -Atc "SELECT count(*) FROM reconcile_diff('f_src_$link', 't_$d', '{id}', '$opts'::jsonb || '{\"remote\": \"$([ $method = pull ] && echo pull || echo checksum)\"}')"
					found=$(tail -n 1 "$OUT/last.out")
					;;
				async)
					measure "$method" tgt -Atc "SELECT count(*) FROM reconcile_diff('f_src_${link}_async', 't_$d', '{id}', '{\"remote\": \"checksum\"}')"
					found=$(tail -n 1 "$OUT/last.out")
					;;
				pgcmp)
					measure pgcmp pg_comparator --max-ratio=2.0 --no-lock \
						"pgsql://postgres@127.0.0.1:$p/bench/public.src?id" \
						"pgsql://postgres@127.0.0.1:$TGT_PORT/bench/public.t_$d?id"
					found=$(grep -Ec '^(UPDATE|INSERT|DELETE) ' "$OUT/last.out" || true)
					;;
				esac
				printf '| %s | %s | %s | %s | %s | %.2f | %.3f |\n' "$link" "$d" "$round" "$label" "$found" "$SECS" \
					"$(echo "scale=6; $BYTES / 1000000" | bc)"
				printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$link" "$d" "$label" "$found" "$SECS" "$BYTES" "$round" >>"$RESULTS"
			done
		done
		done
	done
done

# The ratios need the three methods (a glob such as *" checksum "*" pull "*
# cannot match: two patterns cannot share the space between the names).
for m in checksum pull pgcmp; do
	case " $METHODS " in
	*" $m "*) ;;
	*) exit 0 ;;
	esac
done
printf '\nratios (checksum against the others; time and bytes across)'
[ "$REPEAT" -gt 1 ] && printf ': median [min, max] over %s interleaved rounds' "$REPEAT"
printf '\n\n'
printf '| link | differences | bytes / pull | bytes / pg_comparator | bytes / source table on disk | time / pull | time / pg_comparator | async: time / pull | async: time / pg_comparator |\n|---|---|---|---|---|---|---|---|---|\n'
awk -F'\t' -v src="$SRC_BYTES" "$AWK_SPREAD"'
{ k = $1 " " $2; r = $7; t[k, r, $3] = $5; b[k, r, $3] = $6
  if (!(k in seen)) { seen[k] = 1; order[n++] = k }
  if (!((k, r) in rs)) { rs[k, r] = 1; rounds[k] = rounds[k] " " r } }
END {
	for (i = 0; i < n; i++) {
		split(order[i], f, " ")
		k = order[i]
		nr = split(rounds[k], R, " ")
		bp = bg = bs = tp = tg = ap = ag = ""
		for (j = 1; j <= nr; j++) {
			r = R[j]
			bp = bp " " b[k, r, "checksum"] / b[k, r, "pull"]
			bg = bg " " b[k, r, "checksum"] / b[k, r, "pgcmp"]
			bs = bs " " 100 * b[k, r, "checksum"] / src
			tp = tp " " t[k, r, "checksum"] / t[k, r, "pull"]
			tg = tg " " t[k, r, "checksum"] / t[k, r, "pgcmp"]
			if (t[k, r, "async"] != "") {
				ap = ap " " t[k, r, "async"] / t[k, r, "pull"]
				ag = ag " " t[k, r, "async"] / t[k, r, "pgcmp"]
			}
		}
		printf "| %s | %s | %s | %s | %s%% | %s | %s | %s | %s |\n", f[1], f[2],
			spread(bp, "%.5f"), spread(bg, "%.3f"), spread(bs, "%.6f"),
			spread(tp, "%.2f"), spread(tg, "%.2f"), spread(ap, "%.2f"), spread(ag, "%.2f")
	}
}' "$RESULTS"
