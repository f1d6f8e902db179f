#!/usr/bin/env bash
# Benchmark reconcile_diff against the seed approach (two anti joins plus a
# mismatch join) and one FULL OUTER JOIN, on two tables of N rows with 1%
# missing, 1% extra and 1% mismatched.  Not part of the test run.
#
#   bench/diff/run.sh [N]        (default 2000000)
#   NO_INDEX=1 bench/diff/run.sh [N]   (no key index: every side is sorted)
#
# Connects with the usual PG* variables (PGHOST, PGPORT, PGUSER,
# PGDATABASE).  Each query runs once, in its own backend, after a warm-up
# read of both tables; its result rows go to /dev/null.  Memory, in MB:
# VmHWM is the backend's peak resident set, shared buffers it touched
# included; private_peak is VmHWM less the shared memory and files mapped
# at the end (a lower bound of the peak private memory); sampled_anon is
# the largest RssAnon seen by polling every 50 ms (0 for quick queries).
# Needs a superuser (pg_read_file of /proc/self/status) on the same host.
# Parallel query is off (each query is one process, so time and memory
# compare like with like); run with PARALLEL=1 to leave it to the planner.
set -euo pipefail

if [ "${PARALLEL:-0}" != 1 ]; then
    export PGOPTIONS="${PGOPTIONS:-} -c max_parallel_workers_per_gather=0"
fi

N=${1:-2000000}
HERE=$(cd "$(dirname "$0")" && pwd)
PSQL=(psql -X -q -v ON_ERROR_STOP=1)

echo "reconcile_diff benchmark: N=$N rows per side ($(date -u +%FT%TZ))"
start=$(date +%s)
"${PSQL[@]}" -v n="$N" -f "$HERE/setup.sql" >/dev/null
if [ "${NO_INDEX:-0}" = 1 ]; then
    "${PSQL[@]}" -c 'ALTER TABLE bench_src DROP CONSTRAINT bench_src_pkey' \
                 -c 'ALTER TABLE bench_tgt DROP CONSTRAINT bench_tgt_pkey'
    echo "no key index"
fi
echo "setup: $(( $(date +%s) - start )) s; work_mem=$("${PSQL[@]}" -Atc 'SHOW work_mem'),"\
     "max_parallel_workers_per_gather=$("${PSQL[@]}" -Atc 'SHOW max_parallel_workers_per_gather')," \
     "shared_buffers=$("${PSQL[@]}" -Atc 'SHOW shared_buffers')"
"${PSQL[@]}" -Atc "SELECT 'findings expected: ' || (SELECT count(*) FROM bench_src s WHERE NOT EXISTS (SELECT FROM bench_tgt t WHERE t.id = s.id)) || ' missing, ' || (SELECT count(*) FROM bench_tgt t WHERE NOT EXISTS (SELECT FROM bench_src s WHERE s.id = t.id)) || ' extra'"
"${PSQL[@]}" -Atc "SELECT count(*) FROM bench_src" -c "SELECT count(*) FROM bench_tgt" >/dev/null

# run NAME FILE: prints "NAME ms sampled_peak_anon_kb vm_hwm_kb private_kb".
# After the query the same backend reads its own /proc/self/status: VmHWM
# is its peak resident set; minus the shared memory and files it has
# mapped by then, a lower bound of its peak private memory.  A sampler
# also polls RssAnon every 50 ms while the query runs.
run() {
    local name=$1 file=$2 app="diffbench_$1_$$" out pid="" psql_pid
    out=$(mktemp)
    PGAPPNAME=$app "${PSQL[@]}" -o /dev/null -c '\timing on' -f "$file" \
        -c '\o' -c '\timing off' \
        -c "SELECT 'MEM', (SELECT (regexp_match(s, 'VmHWM:\s+(\d+)'))[1]::bigint),
                   (SELECT (regexp_match(s, 'VmHWM:\s+(\d+)'))[1]::bigint
                         - (regexp_match(s, 'RssShmem:\s+(\d+)'))[1]::bigint
                         - (regexp_match(s, 'RssFile:\s+(\d+)'))[1]::bigint)
            FROM pg_catalog.pg_read_file('/proc/self/status') s" \
        -At >"$out" 2>&1 &
    psql_pid=$!
    local peak_anon=0
    while kill -0 "$psql_pid" 2>/dev/null; do
        if [ -z "$pid" ]; then
            pid=$("${PSQL[@]}" -Atc "SELECT pid FROM pg_stat_activity WHERE application_name = '$app' AND backend_type = 'client backend'" 2>/dev/null || true)
        fi
        if [ -n "$pid" ] && [ -r "/proc/$pid/status" ]; then
            local anon
            anon=$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
            [ "${anon:-0}" -gt "$peak_anon" ] && peak_anon=$anon
        fi
        sleep 0.05
    done
    wait "$psql_pid"
    local ms mem
    ms=$(awk '/^Time:/ {print $2; exit}' "$out")
    mem=$(awk -F'|' '/^MEM\|/ {print $2, $3}' "$out")
    rm -f "$out"
    echo "$name $ms $peak_anon $mem"
}

rows=$("${PSQL[@]}" -Atc "SELECT count(*) FROM reconcile_diff('bench_src', 'bench_tgt', '{id}')")
echo "reconcile_diff findings: $rows"

results=()
for q in diff seed full_join; do
    results+=("$(run "$q" "$HERE/$q.sql")")
done

printf '%-10s %10s %8s %14s %10s %16s\n' query time_ms vs_diff sampled_anon_MB VmHWM_MB private_peak_MB
diff_ms=$(echo "${results[0]}" | awk '{print $2}')
for r in "${results[@]}"; do
    echo "$r" | awk -v d="$diff_ms" '{printf "%-10s %10.1f %7.2fx %14.1f %10.1f %16.1f\n", $1, $2, $2 / d, $3 / 1024, $4 / 1024, $5 / 1024}'
done
seed_ms=$(echo "${results[1]}" | awk '{print $2}')
foj_ms=$(echo "${results[2]}" | awk '{print $2}')
awk -v d="$diff_ms" -v s="$seed_ms" -v f="$foj_ms" 'BEGIN {
    printf "reconcile_diff takes %.2f of the seed approach'"'"'s time and %.2f of the full outer join'"'"'s\n", d / s, d / f }'
echo "total: $(( $(date +%s) - start )) s"
