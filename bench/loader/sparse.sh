#!/usr/bin/env bash
# Sparse updates (option "partial") against the same change as whole rows,
# and against a hand-written SQL merge of the same sparse feed.
#
#   bash bench/loader/sparse.sh [--rows N] [--changes M] [--repeat R] [--db NAME]
#                               [--contenders "full sparse sql"]
#
# Runs on the cluster tools/lib.sh's export_pg_env points at (set
# RECONCILE_PG_BINDIR and RECONCILE_PGPORT first; tools/setup.sh makes one),
# in a database of its own (default reconcile_bench_sparse, dropped first).
# A target of N rows (default 1,000,000) at version 1 with five payload
# columns; a feed of M changes (default N / 2) at version 2, each carrying
# one or two of the five columns.  Contenders, each on a fresh copy of the
# target, interleaved for R rounds (default 3):
#   full:   reconcile_batch of the changes as whole rows (the producer has
#           merged them already);
#   sparse: reconcile_batch of the sparse feed with options partial;
#   sql:    one hand-written statement merging the sparse feed: UPDATE ...
#           FROM the feed, CASE per column on present_columns, the version
#           check and the payload hash recomputed as reconcile writes it.
# Reports each contender's median time and the ratios sparse/full and
# sparse/sql (median of the rounds' ratios, with min and max).
set -euo pipefail

ROWS=1000000
CHANGES=
REPEAT=3
DB=reconcile_bench_sparse
CONTENDERS="full sparse sql"
while [ $# -gt 0 ]; do
	case $1 in
	--rows) ROWS=$2; shift 2 ;;
	--changes) CHANGES=$2; shift 2 ;;
	--repeat) REPEAT=$2; shift 2 ;;
	--db) DB=$2; shift 2 ;;
	--contenders) CONTENDERS=$2; shift 2 ;;
	-h | --help) sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "unknown argument: $1" >&2; exit 2 ;;
	esac
done
CHANGES=${CHANGES:-$((ROWS / 2))}
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=../../tools/lib.sh
source "$ROOT/tools/lib.sh"
export_pg_env
export PGOPTIONS="${PGOPTIONS:-} -c client_min_messages=warning"
PSQL=(psql -X -q -v ON_ERROR_STOP=1)

"${PSQL[@]}" -d postgres -c "DROP DATABASE IF EXISTS $DB" -c "CREATE DATABASE $DB"
"${PSQL[@]}" -d "$DB" <<SQL
CREATE EXTENSION reconcile;
SET work_mem = '64MB';
CREATE TABLE base (id bigint PRIMARY KEY, name text, city text, score integer, note text,
                   amount numeric(12,2), v bigint NOT NULL, del boolean NOT NULL DEFAULT false,
                   h bytea);
INSERT INTO base (id, name, city, score, note, amount, v)
SELECT g, 'name ' || g, 'city ' || (g % 1000), (g % 100)::integer, repeat('n', 20 + (g % 30)),
       (g % 100000) / 100.0, 1
  FROM generate_series(1, $ROWS) AS g;
CREATE FUNCTION row_hash(name text, city text, score integer, note text, amount numeric,
                         del boolean) RETURNS bytea LANGUAGE sql IMMUTABLE PARALLEL SAFE AS \$\$
    SELECT pg_catalog.sha256(pg_catalog.convert_to('[' || coalesce(to_json(name)::text, 'null')
        || ',' || coalesce(to_json(city)::text, 'null') || ',' || coalesce(to_json(score::text)::text, 'null')
        || ',' || coalesce(to_json(note)::text, 'null') || ',' || coalesce(to_json(amount::text)::text, 'null')
        || ',' || del || ']', 'UTF8'))
\$\$;
UPDATE base SET h = row_hash(name, city, score, note, amount, del);
-- The sparse feed: one or two of the five columns per change.
CREATE TABLE feed_sparse (object_key text, source_row bigint, operation text, id bigint,
                          v bigint, name text, city text, score integer, note text,
                          amount numeric(12,2), present_columns text[]);
INSERT INTO feed_sparse
SELECT 'o' || (g % 100), g, 'UPSERT', k, 2,
       'new ' || k, 'newcity ' || (k % 77), (k % 50)::integer, NULL, k / 10.0,
       CASE g % 4 WHEN 0 THEN '{name}' WHEN 1 THEN '{city,score}' WHEN 2 THEN '{amount}'
                  ELSE '{name,amount}' END::text[]
  FROM (SELECT g, (g * 7919) % $ROWS + 1 AS k FROM generate_series(1, $CHANGES) AS g) AS x;
UPDATE feed_sparse SET name = NULL WHERE NOT 'name' = ANY (present_columns);
UPDATE feed_sparse SET city = NULL WHERE NOT 'city' = ANY (present_columns);
UPDATE feed_sparse SET score = NULL WHERE NOT 'score' = ANY (present_columns);
UPDATE feed_sparse SET amount = NULL WHERE NOT 'amount' = ANY (present_columns);
-- The same changes as whole rows, merged by the producer.
CREATE TABLE feed_full AS
SELECT f.object_key, f.source_row, f.operation, f.id, f.v,
       CASE WHEN 'name' = ANY (f.present_columns) THEN f.name ELSE b.name END AS name,
       CASE WHEN 'city' = ANY (f.present_columns) THEN f.city ELSE b.city END AS city,
       CASE WHEN 'score' = ANY (f.present_columns) THEN f.score ELSE b.score END AS score,
       b.note,
       CASE WHEN 'amount' = ANY (f.present_columns) THEN f.amount ELSE b.amount END AS amount
  FROM feed_sparse f JOIN base b USING (id);
CREATE TABLE manifest AS
SELECT jsonb_agg(jsonb_build_object('object_key', object_key, 'version_id', '1',
                                    'content_hash', 'h', 'rows', n)) AS m
  FROM (SELECT object_key, count(*) AS n FROM feed_sparse GROUP BY 1) AS o;
VACUUM ANALYZE;
SQL

run() {	# contender round -> seconds
	local c=$1 r=$2 t sql
	case $c in
	full) sql="SELECT inserted + updated FROM reconcile_batch('t_$c', 'feed_full', (SELECT m FROM manifest), source => 'r$r', cursor => 'r$r')" ;;
	sparse) sql="SELECT inserted + updated FROM reconcile_batch('t_$c', 'feed_sparse', (SELECT m FROM manifest), source => 'r$r', cursor => 'r$r', options => '{\"partial\": true}')" ;;
	sql) sql="UPDATE t_sql AS t SET v = f.v, del = false,
	    name = CASE WHEN 'name' = ANY (f.present_columns) THEN f.name ELSE t.name END,
	    city = CASE WHEN 'city' = ANY (f.present_columns) THEN f.city ELSE t.city END,
	    score = CASE WHEN 'score' = ANY (f.present_columns) THEN f.score ELSE t.score END,
	    note = CASE WHEN 'note' = ANY (f.present_columns) THEN f.note ELSE t.note END,
	    amount = CASE WHEN 'amount' = ANY (f.present_columns) THEN f.amount ELSE t.amount END,
	    h = row_hash(CASE WHEN 'name' = ANY (f.present_columns) THEN f.name ELSE t.name END,
	                 CASE WHEN 'city' = ANY (f.present_columns) THEN f.city ELSE t.city END,
	                 CASE WHEN 'score' = ANY (f.present_columns) THEN f.score ELSE t.score END,
	                 CASE WHEN 'note' = ANY (f.present_columns) THEN f.note ELSE t.note END,
	                 CASE WHEN 'amount' = ANY (f.present_columns) THEN f.amount ELSE t.amount END, false)
	  FROM feed_sparse AS f WHERE t.id = f.id AND t.v < f.v" ;;
	esac
	"${PSQL[@]}" -d "$DB" -c "DROP TABLE IF EXISTS t_$c" \
		-c "CREATE TABLE t_$c (LIKE base INCLUDING ALL)" -c "INSERT INTO t_$c SELECT * FROM base" \
		-c "VACUUM ANALYZE t_$c" \
		-c "SELECT reconcile_register('t_$c', '{id}', 'v', 'del', 'h')" >/dev/null
	t=$("${PSQL[@]}" -d "$DB" -At <<SQL | tail -1
SET work_mem = '64MB';
SET max_parallel_maintenance_workers = 0;
SELECT clock_timestamp() AS t0 \gset
$sql;
SELECT extract(epoch FROM clock_timestamp() - :'t0'::timestamptz);
SQL
)
	echo "$t"
}

declare -A times
for r in $(seq 1 "$REPEAT"); do
	for c in $CONTENDERS; do
		times[$c,$r]=$(run "$c" "$r")
		printf 'round %s %-6s %8.3f s\n' "$r" "$c" "${times[$c,$r]}"
	done
done
median() { sort -g | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
for c in $CONTENDERS; do
	printf '%-6s median %8.3f s\n' "$c" "$(for r in $(seq 1 "$REPEAT"); do echo "${times[$c,$r]}"; done | median)"
done
case " $CONTENDERS " in *" sparse "*) ;; *) CONTENDERS= ;; esac
for d in full sql; do
	case " $CONTENDERS " in *" $d "*) ;; *) continue ;; esac
	# The targets must agree row for row.
	"${PSQL[@]}" -d "$DB" -At -c "SELECT 'rows differing, $d vs sparse: ' || count(*) FROM t_$d a JOIN t_sparse b USING (id) WHERE (a.*)::text <> (b.*)::text"
	ratios=$(for r in $(seq 1 "$REPEAT"); do echo "${times[sparse,$r]} ${times[$d,$r]}" | awk '{printf "%.3f\n", $1 / $2}'; done)
	printf 'sparse/%-4s median %s (min %s, max %s)\n' "$d" "$(echo "$ratios" | median)" \
		"$(echo "$ratios" | sort -g | head -1)" "$(echo "$ratios" | sort -g | tail -1)"
done
echo "rows $ROWS, changes $CHANGES, rounds $REPEAT, commit $(git -C "$ROOT" rev-parse --short HEAD)"
