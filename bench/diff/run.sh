#!/usr/bin/env bash
# Benchmark reconcile_diff against the seed approach (two anti joins plus a
# mismatch join) and one FULL OUTER JOIN, on two tables of N rows with 1%
# missing, 1% extra and 1% mismatched.  Not part of the test run.
#
#   bench/diff/run.sh [N]        (default 2000000)
#
# Connects with the usual PG* variables (PGHOST, PGPORT, PGUSER,
# PGDATABASE).  Each query runs once, in its own backend, after a warm-up
# read of both tables; its result rows go to /dev/null.  Peak memory is
# sampled from /proc/<backend pid>/status while the query runs: RssAnon is
# the backend's private memory (what the query allocates), VmHWM its peak
# resident set including the shared buffers it touched.
set -euo pipefail

N=${1:-2000000}
HERE=$(cd "$(dirname "$0")" && pwd)
PSQL=(psql -X -q -v ON_ERROR_STOP=1)

echo "reconcile_diff benchmark: N=$N rows per side ($(date -u +%FT%TZ))"
start=$(date +%s)
"${PSQL[@]}" -v n="$N" -f "$HERE/setup.sql" >/dev/null
echo "setup: $(( $(date +%s) - start )) s; work_mem=$("${PSQL[@]}" -Atc 'SHOW work_mem')," \
     "shared_buffers=$("${PSQL[@]}" -Atc 'SHOW shared_buffers')"
"${PSQL[@]}" -Atc "SELECT 'findings expected: ' || (SELECT count(*) FROM bench_src s WHERE NOT EXISTS (SELECT FROM bench_tgt t WHERE t.id = s.id)) || ' missing, ' || (SELECT count(*) FROM bench_tgt t WHERE NOT EXISTS (SELECT FROM bench_src s WHERE s.id = t.id)) || ' extra'"
"${PSQL[@]}" -Atc "SELECT count(*) FROM bench_src" -c "SELECT count(*) FROM bench_tgt" >/dev/null

# run NAME FILE: prints "NAME ms rows rss_anon_kb vm_hwm_kb"
run() {
    local name=$1 file=$2 app="diffbench_$1_$$" out pid="" psql_pid
    out=$(mktemp)
    PGAPPNAME=$app "${PSQL[@]}" -o /dev/null -c '\timing on' -f "$file" \
        -c '\o' -c '\timing off' -c 'SELECT 1' >"$out" 2>&1 &
    psql_pid=$!
    local peak_anon=0 peak_hwm=0
    while kill -0 "$psql_pid" 2>/dev/null; do
        if [ -z "$pid" ]; then
            pid=$("${PSQL[@]}" -Atc "SELECT pid FROM pg_stat_activity WHERE application_name = '$app'" 2>/dev/null || true)
        fi
        if [ -n "$pid" ] && [ -r "/proc/$pid/status" ]; then
            local anon hwm
            anon=$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
            hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$pid/status" 2>/dev/null || echo 0)
            [ "${anon:-0}" -gt "$peak_anon" ] && peak_anon=$anon
            [ "${hwm:-0}" -gt "$peak_hwm" ] && peak_hwm=$hwm
        fi
        sleep 0.05
    done
    wait "$psql_pid"
    local ms
    ms=$(awk '/^Time:/ {print $2; exit}' "$out")
    rm -f "$out"
    echo "$name $ms $peak_anon $peak_hwm"
}

rows=$("${PSQL[@]}" -Atc "SELECT count(*) FROM reconcile_diff('bench_src', 'bench_tgt', '{id}')")
echo "reconcile_diff findings: $rows"

results=()
for q in diff seed full_join; do
    results+=("$(run "$q" "$HERE/$q.sql")")
done

printf '%-16s %12s %10s %16s %14s\n' query time_ms vs_diff peak_RssAnon_MB peak_VmHWM_MB
diff_ms=$(echo "${results[0]}" | awk '{print $2}')
for r in "${results[@]}"; do
    echo "$r" | awk -v d="$diff_ms" '{printf "%-16s %12.1f %9.2fx %16.1f %14.1f\n", $1, $2, $2 / d, $3 / 1024, $4 / 1024}'
done
seed_ms=$(echo "${results[1]}" | awk '{print $2}')
foj_ms=$(echo "${results[2]}" | awk '{print $2}')
awk -v d="$diff_ms" -v s="$seed_ms" -v f="$foj_ms" 'BEGIN {
    printf "reconcile_diff takes %.2f of the seed approach'"'"'s time and %.2f of the full outer join'"'"'s\n", d / s, d / f }'
echo "total: $(( $(date +%s) - start )) s"
