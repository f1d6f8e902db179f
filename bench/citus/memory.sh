#!/usr/bin/env bash
# Memory per worker of a batch merged on the Citus workers, at two sizes.
#
#   bash bench/citus/memory.sh HOST_DIR COORD_PORT WORKER1_PORT WORKER2_PORT ROWS...
#
# On a running coordinator with two workers (reconcile installed, the
# workers' postmasters local): for each ROWS, a target of ROWS rows and
# ROWS staged rows (half updating the upper half of the target, half new
# keys), loaded merged on the workers; while the batch runs, each worker's
# backends are sampled every 0.5 s for their private memory (RssAnon),
# and the largest sum per worker and the largest backend are printed with
# the wall time.  Prints Markdown.
set -euo pipefail
H=$1; C=$2; W1=$3; W2=$4; shift 4
PSQL=${PSQL:-psql}
q() { "$PSQL" -h "$H" -p "$C" -U postgres -d postgres -X -qAt -c "$1"; }
pm_pid() { head -1 "$("$PSQL" -h "$H" -p "$1" -U postgres -d postgres -XAt -c 'SHOW data_directory')/postmaster.pid"; }
sample() {   # largest sum of RssAnon (kB) over a worker's children, and largest one
	local pm=$1 sum=0 top=0 kb
	for c in $(pgrep -P "$pm"); do
		kb=$(awk '/^RssAnon:/ {print $2}' "/proc/$c/status" 2>/dev/null || echo 0)
		kb=${kb:-0}; sum=$((sum + kb)); [ "$kb" -gt "$top" ] && top=$kb
	done
	echo "$sum $top"
}
echo "| staged rows = target rows | wall s | worker 1: peak sum of backends' private memory, largest backend (MB) | worker 2: the same | receipt |"
echo "|---:|---:|---|---|---|"
for rows in "$@"; do
	half=$((rows / 2))
	q "SET client_min_messages = warning; DROP SCHEMA IF EXISTS mem CASCADE" >/dev/null
	q "CREATE SCHEMA mem;
CREATE TABLE mem.cust (id bigint PRIMARY KEY, name text, city text, balance numeric, version bigint NOT NULL, is_deleted boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE mem.stage (object_key text, source_row bigint, operation text, id bigint, version text, name text, city text, balance text);
SELECT create_distributed_table('mem.cust', 'id');
SELECT create_distributed_table('mem.stage', 'id', colocate_with => 'mem.cust');
INSERT INTO mem.cust SELECT g, 'name ' || g, 'city ' || (g % 100), g * 1.5, 1, false, NULL FROM generate_series(1, $rows) g;
INSERT INTO mem.stage SELECT 'o1', g, 'UPSERT', $half + g, '2', 'new name ' || g, 'city ' || (g % 7), (g * 2.5)::text FROM generate_series(1, $rows) g;
SELECT reconcile_register('mem.cust', '{id}', 'version', 'is_deleted', 'h');" >/dev/null
	q "VACUUM ANALYZE mem.cust" && q "VACUUM ANALYZE mem.stage" && q "CHECKPOINT"
	p1=$(pm_pid "$W1"); p2=$(pm_pid "$W2")
	t0=$(date +%s.%N)
	q "SELECT status || ', ' || inserted || ', ' || updated FROM reconcile_batch('mem.cust', 'mem.stage', '[{\"object_key\":\"o1\",\"version_id\":\"1\",\"content_hash\":\"h\",\"rows\":$rows}]', NULL, NULL, '{\"citus_merge\": \"workers\"}')" > /tmp/reconcile-mem.$$ &
	bp=$!
	m1=0; t1=0; m2=0; t2=0
	while kill -0 "$bp" 2>/dev/null; do
		read -r s t < <(sample "$p1"); [ "$s" -gt "$m1" ] && m1=$s; [ "$t" -gt "$t1" ] && t1=$t
		read -r s t < <(sample "$p2"); [ "$s" -gt "$m2" ] && m2=$s; [ "$t" -gt "$t2" ] && t2=$t
		sleep 0.5
	done
	wait "$bp"
	t=$(echo "$(date +%s.%N) - $t0" | bc)
	printf "| %d | %.1f | %d, %d | %d, %d | %s |\n" "$rows" "$t" $((m1 / 1024)) $((t1 / 1024)) $((m2 / 1024)) $((t2 / 1024)) "$(cat /tmp/reconcile-mem.$$)"
	rm -f /tmp/reconcile-mem.$$
done
q "DROP SCHEMA mem CASCADE" >/dev/null
