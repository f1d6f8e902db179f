#!/usr/bin/env bash
# Run every kind of reconcile test against a freshly set up machine:
#   1. pg_regress (sql/*.sql) and 2. isolation specs (test/isolation/specs)
#      via `make installcheck` against the throwaway cluster;
#   3. pgTAP files (test/pgtap/*.sql): make pgtap-installcheck, in database reconcile_tap;
#   4. TAP (Perl) tests (test/t/*.pl) with PostgreSQL::Test::Cluster:
#      make prove-installcheck, run as the postgres user in a scratch folder;
#   5. the fuzz test: make fuzz-installcheck (test/fuzz/run.sh), targeted random calls and a short
#      sqlsmith run against the throwaway cluster, failing only on a crash.
# A failing kind does not stop the others; the exit status is non-zero if
# any kind failed, and the diffs or logs of a failed kind are printed.
set -euo pipefail
# shellcheck source=tools/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

passed=0
failed=0
skipped=0
summary=()

record() {  # record KIND passed|failed|skipped
	summary+=("$(printf '%-10s %s' "$1" "$2")")
	case $2 in
	passed) passed=$((passed + 1)) ;;
	failed) failed=$((failed + 1)) ;;
	skipped) skipped=$((skipped + 1)) ;;
	esac
}

# Print a file under a banner if it exists and is not empty.
show_file() {
	[ -s "$1" ] || return 0
	printf '\n----- %s -----\n' "$1"
	cat "$1"
	printf -- '----- end of %s -----\n' "$1"
}

# make installcheck stops at the first failing recipe line, so pg_regress and
# the isolation specs run as two make calls, each emptying the other's list.
run_installcheck() {  # run_installcheck KIND GLOB DIFFS MAKE-ARGS...
	local kind=$1 glob=$2 diffs=$3
	shift 3
	# shellcheck disable=SC2206  # $glob is meant to expand
	local files=("$RECONCILE_ROOT"/$glob)
	if [ ! -e "${files[0]}" ]; then
		log "$kind: skipped, no $glob"
		record "$kind" skipped
		return
	fi
	log "$kind: make installcheck over ${#files[@]} file(s)"
	rm -f "$diffs"
	if make -C "$RECONCILE_ROOT" PG_CONFIG="$PG_BINDIR/pg_config" "$@" installcheck; then
		record "$kind" passed
	else
		show_file "$diffs"
		record "$kind" failed
	fi
}

run_pgtap() {
	local files=("$RECONCILE_ROOT"/test/pgtap/*.sql)
	if [ ! -e "${files[0]}" ]; then
		log "pgTAP: skipped, no test/pgtap/*.sql"
		record pgTAP skipped
		return
	fi
	log "pgTAP: make pgtap-installcheck over ${#files[@]} file(s) in database reconcile_tap"
	if make -C "$RECONCILE_ROOT" PG_CONFIG="$PG_BINDIR/pg_config" pgtap-installcheck; then
		record pgTAP passed
	else
		record pgTAP failed
	fi
}

run_perl_tap() {
	local files=("$RECONCILE_ROOT"/test/t/*.pl)
	if [ ! -e "${files[0]}" ]; then
		log "TAP: skipped, no test/t/*.pl"
		record TAP skipped
		return
	fi
	# initdb refuses root, so the tests run as postgres in a folder it owns,
	# on a copy of test/t in case it cannot read the project folder.
	local scratch=$RECONCILE_STATE/.tmp/tap
	log "TAP: prove over ${#files[@]} file(s) as postgres in $scratch"
	rm -rf "$scratch"
	mkdir -p "$scratch"
	cp -R "$RECONCILE_ROOT/test/t" "$scratch/t"
	# The shipped monitoring files, for test/t/060_postgres_exporter.pl.
	cp -R "$RECONCILE_ROOT/monitoring" "$scratch/monitoring"
	chown -R postgres:postgres "$RECONCILE_STATE/.tmp"
	# The local S3 API of test/t/070_objects.pl runs from root's pyenv,
	# which postgres cannot read: started here, stopped after the run.
	local moto_env=() moto_out
	if moto_out=$(bash "$RECONCILE_ROOT/tools/moto.sh" start "$RECONCILE_STATE/.tmp/moto"); then
		mapfile -t moto_env <<<"$moto_out"
	else
		warn "moto_server did not start; test/t/070_objects.pl will skip"
	fi
	# make runs here as root and prove as postgres (PROVE_AS), in the copy.
	local as="runuser -u postgres -- env -u PGHOST -u PGPORT -u PGUSER -u PGDATABASE ${moto_env[*]}"
	as="$as PATH=$PG_BINDIR:/usr/local/bin:/usr/bin:/bin"
	if make -C "$RECONCILE_ROOT" PG_CONFIG="$PG_BINDIR/pg_config" prove-installcheck \
		PROVE_DIR="$scratch" PROVE_AS="$as" PROVE_TESTS='t/*.pl'; then
		bash "$RECONCILE_ROOT/tools/moto.sh" stop "$RECONCILE_STATE/.tmp/moto"
		record TAP passed
	else
		local f
		for f in "$scratch"/tmp_check/log/*; do
			[ -f "$f" ] || continue
			printf '\n----- last 200 lines of %s -----\n' "$f"
			tail -n 200 "$f"
		done
		bash "$RECONCILE_ROOT/tools/moto.sh" stop "$RECONCILE_STATE/.tmp/moto"
		record TAP failed
	fi
}

# Last: a crash restarts the cluster under the other kinds' feet.
run_fuzz() {
	log "fuzz: make fuzz-installcheck (test/fuzz/run.sh)"
	if make -C "$RECONCILE_ROOT" PG_CONFIG="$PG_BINDIR/pg_config" fuzz-installcheck \
		PGLOG="$PGCLUSTER_LOG"; then
		record fuzz passed
	else
		record fuzz failed
	fi
}

main() {
	require_root
	bash "$RECONCILE_ROOT/tools/setup.sh"
	export_pg_env
	run_installcheck pg_regress 'sql/*.sql' \
		"$RECONCILE_ROOT/regression.diffs" ISOLATION=
	run_installcheck isolation 'test/isolation/specs/*.spec' \
		"$RECONCILE_ROOT/output_iso/regression.diffs" REGRESS=
	run_pgtap
	run_perl_tap
	run_fuzz
	log "summary:"
	printf '  %s\n' "${summary[@]}"
	# One line in the plain "N passed, N failed" form, counting test kinds.
	echo "suites: $passed passed, $failed failed, $skipped skipped"
	[ "$failed" -eq 0 ]
}

main "$@"
