#!/usr/bin/env bash
# The limits and the recheck on a wholly different pair (issue 24: 2, 4):
# source ids 1..N, target ids N+1..2N, so every row is a finding (2N).
# Times reconcile_diff and reconcile_diff_summary without a limit and with
# max_differences, and the recheck with a limit (and, with
# RECHECK_UNCAPPED=1, without one: the recheck holds every finding in
# memory), with the backend's peak memory.  Not part of the test run.
#
#   bench/diff/limits.sh [N]          (default 1000000)
#
# Connects with the usual PG* variables.  Each case runs in a backend of
# its own; memory in kB from /proc/self/status read by that backend after
# the query (needs a superuser on the same host): VmHWM is the peak
# resident set, private VmHWM less shared memory and mapped files at the
# end, a lower bound of the peak private memory.  Parallel query is off.
set -euo pipefail
export PGOPTIONS="${PGOPTIONS:-} -c max_parallel_workers_per_gather=0"
N=${1:-1000000}
PSQL=(psql -X -q -v ON_ERROR_STOP=1)

echo "limits benchmark: N=$N rows per side, $((2 * N)) findings ($(date -u +%FT%TZ)), work_mem=$("${PSQL[@]}" -Atc 'SHOW work_mem')"
"${PSQL[@]}" -v n="$N" <<'SQL' >/dev/null
CREATE EXTENSION IF NOT EXISTS reconcile;
DROP TABLE IF EXISTS lim_src, lim_tgt;
CREATE TABLE lim_src (id bigint PRIMARY KEY, v text);
CREATE TABLE lim_tgt (id bigint PRIMARY KEY, v text);
INSERT INTO lim_src SELECT i, 'v' || i FROM generate_series(1, :n) i;
INSERT INTO lim_tgt SELECT i, 'v' || i FROM generate_series(:n + 1, 2 * :n) i;
VACUUM ANALYZE lim_src, lim_tgt;
SQL

# case NAME SQL: prints NAME, ms, VmHWM kB, private kB, the query's result.
case_run() {
    local name=$1 sql=$2 out ms res mem
    out=$("${PSQL[@]}" -At -c '\timing on' -c "$sql" -c '\timing off' \
        -c "SELECT (regexp_match(s, 'VmHWM:\s+(\d+)'))[1]::bigint || ' ' ||
                   ((regexp_match(s, 'VmHWM:\s+(\d+)'))[1]::bigint
                    - (regexp_match(s, 'RssShmem:\s+(\d+)'))[1]::bigint
                    - (regexp_match(s, 'RssFile:\s+(\d+)'))[1]::bigint)
              FROM pg_catalog.pg_read_file('/proc/self/status') s" 2>&1 | grep -v '^NOTICE\|^DETAIL\|^HINT')
    res=$(sed -n 1p <<<"$out")
    ms=$(grep -o 'Time: [0-9.]*' <<<"$out" | head -1 | cut -d' ' -f2)
    mem=$(tail -1 <<<"$out")
    printf '%-34s %10s ms  VmHWM %8s kB  private %8s kB  result %s\n' "$name" "$ms" \
        "${mem%% *}" "${mem##* }" "$res"
}

case_run "diff, no limit" "SELECT count(*) FROM reconcile_diff('lim_src', 'lim_tgt', '{id}')"
case_run "diff, max_differences 100" "SELECT count(*) FROM reconcile_diff('lim_src', 'lim_tgt', '{id}', '{\"max_differences\": 100}')"
case_run "diff, max_differences 10000" "SELECT count(*) FROM reconcile_diff('lim_src', 'lim_tgt', '{id}', '{\"max_differences\": 10000}')"
case_run "summary, no limit" "SELECT missing_in_target + extra_in_target FROM reconcile_diff_summary('lim_src', 'lim_tgt', '{id}')"
case_run "summary, max_differences 100" "SELECT rows_source || '/' || rows_target || ' read, ' || stopped_at_key FROM reconcile_diff_summary('lim_src', 'lim_tgt', '{id}', '{\"max_differences\": 100}')"
case_run "summary, max_duration 200 ms" "SELECT rows_source || '/' || rows_target || ' read, ' || coalesce(stopped_by, 'not stopped') FROM reconcile_diff_summary('lim_src', 'lim_tgt', '{id}', '{\"max_duration\": \"200 milliseconds\"}')"
case_run "diff, recheck, max_differences 10000" "SELECT count(*) FROM reconcile_diff('lim_src', 'lim_tgt', '{id}', '{\"max_differences\": 10000, \"recheck\": {\"after\": \"0 seconds\"}}')"
if [ "${RECHECK_UNCAPPED:-0}" = 1 ]; then
    case_run "diff, recheck, no limit" "SELECT count(*) FROM reconcile_diff('lim_src', 'lim_tgt', '{id}', '{\"recheck\": {\"after\": \"0 seconds\"}}')"
fi
"${PSQL[@]}" -c 'DROP TABLE lim_src, lim_tgt' >/dev/null
