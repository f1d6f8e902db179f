#!/usr/bin/env bash
# bench/stage/run.sh [--objects N] [--rows R] [--big-mb M]: N CSV objects of R rows each
# (default 100 x 10,000 = 1,000,000 rows) on the local S3 API (moto, started by
# tools/moto.sh), side by side in one run:
#   load    reconcile_load end to end (list, stage, manifest, reconcile_batch);
#   hand    the hand pipeline it replaces: AWS CLI download to disk, object_key and
#           source_row added with awk, sha256sum and a row count per file, COPY FROM
#           each file, the manifest built by hand, reconcile_batch;
#   stage   reconcile_stage_objects alone from the bucket (hashing included), and
#           from a server directory of the same files;
#   copy    plain COPY FROM of the same files from local disk (the floor).
# Then the backend's peak private memory (RssAnon) staging one object of 1 MB and
# one of M MB (default 256).  Run as root (moto and the AWS CLI live in root's
# pyenv) with RECONCILE_PG_BINDIR/RECONCILE_PGPORT set, after tools/setup.sh.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=tools/lib.sh
source "$ROOT/tools/lib.sh"
export_pg_env
# shellcheck source=bench/lib.sh
source "$ROOT/bench/lib.sh"

objects=100 rows=10000 big_mb=256
while [ $# -gt 0 ]; do
	case $1 in
	--objects) objects=$2; shift 2 ;;
	--rows) rows=$2; shift 2 ;;
	--big-mb) big_mb=$2; shift 2 ;;
	*) echo "usage: $0 [--objects N] [--rows R] [--big-mb M]" >&2; exit 2 ;;
	esac
done
aws=$(command -v aws || echo /root/.pyenv/shims/aws)
BENCH_TMP=$(mktemp -d /tmp/reconcile_bench_stage.XXXXXX)
chmod 755 "$BENCH_TMP"
trap 'bash "$ROOT/tools/moto.sh" stop "$BENCH_TMP/moto"; rm -rf "$BENCH_TMP"' EXIT
eval "$(bash "$ROOT/tools/moto.sh" start "$BENCH_TMP/moto")"
url=$RECONCILE_MOTO_OPEN_URL
export AWS_ACCESS_KEY_ID=test AWS_SECRET_ACCESS_KEY=test AWS_DEFAULT_REGION=us-east-1
s3() { "$aws" --endpoint-url "$url" s3 "$@"; }
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }
db=reconcile_bench_stage
q() { psql -X -q -v ON_ERROR_STOP=1 -d "$db" "$@"; }

log "generating $objects objects of $rows rows"
mkdir -p "$BENCH_TMP/src/in" "$BENCH_TMP/dl" "$BENCH_TMP/hand"
for i in $(seq 1 "$objects"); do
	awk -v i="$i" -v r="$rows" 'BEGIN { print "id,name,version";
		for (k = 1; k <= r; k++) { id = (i - 1) * r + k; printf "%d,customer name %d,1\n", id, id } }' \
		>"$BENCH_TMP/src/in/$(printf 'part-%04d.csv' "$i")"
done
head -c $((1024 * 1024)) /dev/zero | tr '\0' 'x' | fold -w 99 | awk 'BEGIN { print "id,name,version" } { printf "%d,%s,1\n", NR, $0 }' >"$BENCH_TMP/small.csv"
awk -v mb="$big_mb" 'BEGIN { print "id,name,version"; n = mb * 1024 * 1024 / 120;
	pad = sprintf("%100s", ""); gsub(/ /, "y", pad); for (k = 1; k <= n; k++) printf "%d,%s,1\n", k, pad }' >"$BENCH_TMP/big.csv"
chmod -R a+rX "$BENCH_TMP/src" "$BENCH_TMP/small.csv" "$BENCH_TMP/big.csv"
s3 mb s3://bench >/dev/null
s3 cp --quiet "$BENCH_TMP/src/in/" s3://bench/in/ --recursive
s3 cp --quiet "$BENCH_TMP/small.csv" s3://bench/mem/small.csv
s3 cp --quiet "$BENCH_TMP/big.csv" s3://bench/mem/big.csv

recreate_db "$db"
q <<SQL
CREATE EXTENSION reconcile;
CREATE SERVER bench FOREIGN DATA WRAPPER reconcile_objects OPTIONS (endpoint '$url', bucket 'bench');
CREATE USER MAPPING FOR CURRENT_USER SERVER bench OPTIONS (access_key_id 'test', secret_access_key 'test');
CREATE SERVER bench_dir FOREIGN DATA WRAPPER reconcile_objects OPTIONS (directory '$BENCH_TMP/src');
CREATE TABLE t_load (id int PRIMARY KEY, name text, version bigint NOT NULL, gone boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE t_hand (LIKE t_load INCLUDING ALL);
SELECT reconcile_register('t_load', '{id}', 'version', 'gone', 'h');
SELECT reconcile_register('t_hand', '{id}', 'version', 'gone', 'h');
CREATE TABLE hand_stage (object_key text, source_row bigint, operation text, id text, name text, version text);
CREATE TABLE s3_stage (object_key text, version_id text, source_row bigint, id text, name text, version text);
CREATE TABLE dir_stage (LIKE s3_stage);
CREATE TABLE mem_stage (LIKE s3_stage);
CREATE TABLE plain_copy (id text, name text, version text);
CREATE TABLE keyed_copy (object_key text, source_row bigint, operation text, id text, name text, version text);
CREATE TABLE s3_stage_nv (object_key text, source_row bigint, id text, name text, version text);
SQL

log "load: reconcile_load end to end"
t0=$(now)
q -c "SELECT status, inserted, staged_rows FROM reconcile_load('t_load', 'bench', 'in/')"
t_load=$(secs "$t0" "$(now)")

log "hand: AWS CLI download, awk, sha256sum, COPY, manifest, reconcile_batch"
t0=$(now)
s3 cp --quiet s3://bench/in/ "$BENCH_TMP/dl/" --recursive
manifest='['
sep=''
copy_sql="$BENCH_TMP/hand.sql"
: >"$copy_sql"
for f in "$BENCH_TMP"/dl/*.csv; do
	key="in/$(basename "$f")"
	hash=$(sha256sum "$f" | cut -d' ' -f1)
	awk -v k="$key" -F, 'NR > 1 { printf "%s,%d,UPSERT,%s\n", k, NR - 1, $0 }' "$f" >"$BENCH_TMP/hand/$(basename "$f")"
	n=$(($(wc -l <"$f") - 1))
	manifest+="$sep{\"object_key\":\"$key\",\"version_id\":\"$hash\",\"content_hash\":\"sha256:$hash\",\"rows\":$n}"
	sep=','
	echo "COPY hand_stage FROM '$BENCH_TMP/hand/$(basename "$f")' (FORMAT csv);" >>"$copy_sql"
done
manifest+=']'
chmod -R a+rX "$BENCH_TMP/hand"
q -f "$copy_sql"
q -c "SELECT status, inserted, staged_rows FROM reconcile_batch('t_hand', 'hand_stage', '$manifest', 'hand', 'in/')"
t_hand=$(secs "$t0" "$(now)")

log "stage: reconcile_stage_objects from the bucket, and from a directory"
t0=$(now)
q -c "SELECT jsonb_array_length(reconcile_stage_objects('s3_stage', 'bench', (SELECT jsonb_agg(l) FROM reconcile_list_objects('bench', 'in/') l)))"
t_stage=$(secs "$t0" "$(now)")
t0=$(now)
q -c "SELECT jsonb_array_length(reconcile_stage_objects('dir_stage', 'bench_dir', (SELECT jsonb_agg(l) FROM reconcile_list_objects('bench_dir', 'in/') l)))"
t_stage_dir=$(secs "$t0" "$(now)")

t0=$(now)
q -c "SELECT jsonb_array_length(reconcile_stage_objects('s3_stage_nv', 'bench', (SELECT jsonb_agg(l) FROM reconcile_list_objects('bench', 'in/') l)))"
t_stage_nv=$(secs "$t0" "$(now)")

log "copy: plain COPY FROM local files"
: >"$BENCH_TMP/copy.sql"
for f in "$BENCH_TMP"/src/in/*.csv; do
	echo "COPY plain_copy FROM '$f' (FORMAT csv, HEADER);" >>"$BENCH_TMP/copy.sql"
done
t0=$(now)
q -f "$BENCH_TMP/copy.sql"
t_copy=$(secs "$t0" "$(now)")
sed 's/COPY hand_stage FROM \(.*\) (FORMAT csv);/COPY keyed_copy FROM \1 (FORMAT csv);/' "$copy_sql" >"$BENCH_TMP/keyed.sql"
t0=$(now)
q -f "$BENCH_TMP/keyed.sql"
t_keyed=$(secs "$t0" "$(now)")

log "memory: staging a 1 MB and a $big_mb MB object"
echo "SELECT reconcile_stage_objects('mem_stage', 'bench', '[{\"object_key\": \"mem/small.csv\"}]') -> 0 -> 'rows';" >"$BENCH_TMP/small.sql"
fresh_measure() { rm -f "$BENCH_TMP/go" "$BENCH_TMP"/mem.* "$BENCH_TMP/pid" "$BENCH_TMP/anon0" "$BENCH_TMP/out"; }
fresh_measure
measure_batch "$db" "$BENCH_TMP/small.sql" >/dev/null
peak_small=$PEAK_KB
q -c 'TRUNCATE mem_stage'
echo "SELECT reconcile_stage_objects('mem_stage', 'bench', '[{\"object_key\": \"mem/big.csv\"}]') -> 0 -> 'rows';" >"$BENCH_TMP/big.sql"
fresh_measure
t0=$(now)
measure_batch "$db" "$BENCH_TMP/big.sql" >/dev/null
t_big=$(secs "$t0" "$(now)")
peak_big=$PEAK_KB

counts=$(q -At -c "SELECT (SELECT count(*) FROM t_load) || '/' || (SELECT count(*) FROM t_hand) || '/' || (SELECT count(*) FROM s3_stage) || '/' || (SELECT count(*) FROM dir_stage) || '/' || (SELECT count(*) FROM plain_copy)")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", a / b }'; }
cat <<EOF_OUT

rows (load/hand/stage s3/stage dir/copy): $counts
version ids: S3 UUIDs (36 characters) in s3_stage, SHA-256 hex (64) in dir_stage
| contender | seconds | vs plain COPY |
|---|---:|---:|
| reconcile_load end to end | $t_load | $(ratio "$t_load" "$t_copy") |
| hand pipeline (CLI download, awk, sha256sum, COPY, manifest, reconcile_batch) | $t_hand | $(ratio "$t_hand" "$t_copy") |
| reconcile_stage_objects from the bucket (hashing included) | $t_stage | $(ratio "$t_stage" "$t_copy") |
| reconcile_stage_objects from the bucket into a stage without version_id | $t_stage_nv | $(ratio "$t_stage_nv" "$t_copy") |
| reconcile_stage_objects from a server directory | $t_stage_dir | $(ratio "$t_stage_dir" "$t_copy") |
| plain COPY FROM local files | $t_copy | 1.00 |
| plain COPY FROM local files with object_key, source_row, operation added (the hand pipeline's) | $t_keyed | $(ratio "$t_keyed" "$t_copy") |

| object | peak backend RssAnon above the session's start |
|---|---:|
| 1 MB | $peak_small kB |
| $big_mb MB ($t_big s) | $peak_big kB |
EOF_OUT
