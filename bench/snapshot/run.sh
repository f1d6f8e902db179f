#!/usr/bin/env bash
# Snapshot batches (docs/loader.md#snapshot-batches): what option snapshot
# costs over the same batch without it.
#
#   bash bench/snapshot/run.sh [--rows N] [--absent-share S] [--repeat R]
#
# Runs in database reconcile_bench_snapshot of the cluster that tools/lib.sh's
# export_pg_env names (RECONCILE_PG_BINDIR, RECONCILE_PGPORT), dropped and
# created afresh.  A target of N rows (default 1,000,000) at version 1 is
# loaded once; then R rounds (default 3) of two batches over the same staged
# extract of N * (1 - S) rows (S default 0.01) under new object versions:
# "plain" (every row unchanged) and "snapshot" (the same, with option
# snapshot at version 2, max_delete_share 1: the absent rows are deleted in
# the first round, found already tombstoned afterwards, so each round's
# snapshot also reads the whole target).  Prints each batch's seconds and
# the median per kind.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
ROWS=1000000
SHARE=0.01
REPEAT=3
while [ $# -gt 0 ]; do
	case $1 in
		--rows) ROWS=$2; shift 2 ;;
		--absent-share) SHARE=$2; shift 2 ;;
		--repeat) REPEAT=$2; shift 2 ;;
		*) sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 2 ;;
	esac
done
# shellcheck source=/dev/null
source "$ROOT/tools/lib.sh"
export_pg_env
DB=reconcile_bench_snapshot
dropdb --if-exists "$DB" >/dev/null 2>&1
createdb "$DB"
psql -X -q -v ON_ERROR_STOP=1 -d "$DB" -v rows="$ROWS" -v share="$SHARE" <<'SQL'
CREATE EXTENSION reconcile;
CREATE TABLE t (id bigint PRIMARY KEY, region text, name text, v bigint NOT NULL,
                del boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('t', '{id}', 'v', 'del', 'h');
CREATE TABLE s (object_key text, version_id text, source_row bigint, operation text,
                id bigint, region text, name text, v bigint);
INSERT INTO s SELECT 'o', 'load', g, 'UPSERT', g, 'R' || g % 5, 'name ' || g, 1 FROM generate_series(1, :rows) g;
VACUUM ANALYZE s;
SELECT count(*) FROM reconcile_batch('t', 's', jsonb_build_array(jsonb_build_object(
    'object_key', 'o', 'version_id', 'load', 'content_hash', 'h', 'rows', :rows)));
DELETE FROM s WHERE id % (1 / :share)::bigint = 0;
VACUUM ANALYZE s, t;
SQL
staged=$(psql -X -At -d "$DB" -c "SELECT count(*) FROM s")
declare -a plain snap
for r in $(seq 1 "$REPEAT"); do
	for kind in plain snapshot; do
		opts=NULL
		[ "$kind" = snapshot ] && opts="'{\"snapshot\": {\"version\": 2, \"max_delete_share\": 1}}'"
		secs=$(psql -X -At -v ON_ERROR_STOP=1 -d "$DB" <<SQL | tail -1
UPDATE s SET version_id = '$kind-$r';
VACUUM s;
SELECT extract(epoch FROM clock_timestamp()) AS t0 \gset
SELECT status, unchanged, deleted_absent FROM reconcile_batch('t', 's', jsonb_build_array(jsonb_build_object(
    'object_key', 'o', 'version_id', '$kind-$r', 'content_hash', 'h', 'rows', $staged)), options => $opts) \gset
SELECT :'status' || ' unchanged=' || :unchanged || ' deleted_absent=' || :deleted_absent
       || ' seconds=' || round((extract(epoch FROM clock_timestamp()) - :t0)::numeric, 2);
SQL
)
		echo "round $r $kind: $secs"
		s=${secs##*seconds=}
		if [ "$kind" = plain ]; then plain+=("$s"); else snap+=("$s"); fi
	done
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
echo "rows=$ROWS staged=$staged plain_median=$(median "${plain[@]}") snapshot_median=$(median "${snap[@]}")"
dropdb "$DB"
