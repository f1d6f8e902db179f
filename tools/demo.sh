#!/usr/bin/env bash
# Show reconcile at work: set everything up (tools/setup.sh), then run
# tools/demo.sql in a freshly recreated database reconcile_demo.
set -euo pipefail
# shellcheck source=tools/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bash "$RECONCILE_ROOT/tools/setup.sh"
export_pg_env
recreate_db reconcile_demo
log "running tools/demo.sql in reconcile_demo"
"$PG_BINDIR/psql" -X -v ON_ERROR_STOP=1 -d reconcile_demo -f "$RECONCILE_ROOT/tools/demo.sql"
log "demo finished; explore it with: PGHOST=$PGHOST PGPORT=$PGPORT PGUSER=$PGUSER psql reconcile_demo"
