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

# Part 2 reads the same feed from a bucket of the local S3 API (moto, in
# root's pyenv; tools/moto.sh), filled with the AWS CLI.
aws=$(command -v aws || echo /root/.pyenv/shims/aws)
moto_dir=$RECONCILE_STATE/.tmp/demo-moto
if [ -x "$aws" ] && moto_env=$(bash "$RECONCILE_ROOT/tools/moto.sh" start "$moto_dir"); then
	trap 'bash "$RECONCILE_ROOT/tools/moto.sh" stop "$moto_dir"' EXIT
	eval "$moto_env"
	export AWS_ACCESS_KEY_ID=demo AWS_SECRET_ACCESS_KEY=demo AWS_DEFAULT_REGION=us-east-1
	# tools/demo_objects.sql uploads with it (\! sees the environment).
	export S3_CLI="$aws --endpoint-url $RECONCILE_MOTO_OPEN_URL s3"
	s3=$S3_CLI
	$s3 mb s3://crm >/dev/null
	"$aws" --endpoint-url "$RECONCILE_MOTO_OPEN_URL" s3api put-bucket-versioning --bucket crm \
		--versioning-configuration Status=Enabled
	printf 'customer_id,version,name\nC1,2,Ana Lee\nC2,1,Dev\nC2,1,Dev\nC3,v2?,Eve\nC1,1,Ana\n' |
		$s3 cp --quiet - s3://crm/crm/part-0001.csv
	log "running tools/demo_objects.sql (the local S3 API at $RECONCILE_MOTO_OPEN_URL)"
	"$PG_BINDIR/psql" -X -v ON_ERROR_STOP=1 -v endpoint="$RECONCILE_MOTO_OPEN_URL" \
		-d reconcile_demo -f "$RECONCILE_ROOT/tools/demo_objects.sql"
else
	warn "no local S3 API (moto_server and the AWS CLI); the bucket part of the demo is skipped"
fi
log "demo finished; explore it with: PGHOST=$PGHOST PGPORT=$PGPORT PGUSER=$PGUSER psql reconcile_demo"
