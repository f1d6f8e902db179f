# Shared shell functions for tools/setup.sh, tools/demo.sh and tools/test.sh.
# Source it; it sets no shell options of its own and runs nothing on load
# except computing paths.
# shellcheck shell=bash disable=SC2034  # variables are used by the sourcing scripts

PG_MAJOR=15
# RECONCILE_PG_BINDIR points at another (relocated) copy of PostgreSQL 15,
# so that several checkouts can build, install and test side by side.
PG_BINDIR=${RECONCILE_PG_BINDIR:-/usr/lib/postgresql/$PG_MAJOR/bin}
PG_PGXS_DIR=$(dirname "$PG_BINDIR")/lib/pgxs
PG_PERL_DIR=$PG_PGXS_DIR/src/test/perl
PG_REGRESS_BIN=$PG_PGXS_DIR/src/test/regress/pg_regress

# The project root is the folder above tools/.
RECONCILE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
RECONCILE_PGPORT=${RECONCILE_PGPORT:-54329}

log() { printf '==> %s\n' "$*"; }
warn() { printf '==> WARNING: %s\n' "$*" >&2; }
die() { printf '==> ERROR: %s\n' "$*" >&2; exit 1; }

require_root() {
	[ "$(id -u)" -eq 0 ] || die "run this as root (it installs packages and switches to the postgres user)"
}

# Run a command as the postgres OS user; the server refuses to run as root.
as_postgres() { runuser -u postgres -- "$@"; }

# Where the throwaway cluster and the TAP scratch space live.  Normally the
# project folder itself; /tmp when the postgres user cannot reach the project
# (a clone under /root) or when the socket path would be too long for a unix
# socket (107 bytes, counting ".s.PGSQL.<port>").
state_dir() {
	local sock="$RECONCILE_ROOT/.pgcluster/.s.PGSQL.$RECONCILE_PGPORT"
	if id postgres >/dev/null 2>&1 &&
		runuser -u postgres -- test -x "$RECONCILE_ROOT" 2>/dev/null &&
		[ "${#sock}" -le 100 ]; then
		printf '%s\n' "$RECONCILE_ROOT"
	else
		printf '/tmp/reconcile-%s\n' "$(printf '%s' "$RECONCILE_ROOT" | md5sum | cut -c1-10)"
	fi
}

# Cluster paths, derived from state_dir.  Call once after packages exist.
set_cluster_paths() {
	RECONCILE_STATE=$(state_dir)
	PGCLUSTER_DIR=$RECONCILE_STATE/.pgcluster
	PGCLUSTER_DATA=$PGCLUSTER_DIR/data
	PGCLUSTER_LOG=$PGCLUSTER_DIR/log
}

# Point libpq (psql, pg_regress, pg_prove) at the throwaway cluster.
export_pg_env() {
	set_cluster_paths
	export PGHOST=$PGCLUSTER_DIR
	export PGPORT=$RECONCILE_PGPORT
	export PGUSER=postgres
	export PATH=$PG_BINDIR:$PATH
}

# psql against the throwaway cluster as the postgres superuser.
pg_psql() { "$PG_BINDIR/psql" -X -q -v ON_ERROR_STOP=1 "$@"; }

# Drop and recreate a database so every run starts clean.
recreate_db() {
	local db=$1
	log "recreating database $db"
	pg_psql -d postgres -c "SET client_min_messages = warning" \
		-c "DROP DATABASE IF EXISTS \"$db\" WITH (FORCE)" \
		-c "CREATE DATABASE \"$db\""
}

is_installed() {
	dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}
