# reconcile on Citus: a batch into a hash-distributed target merged on the
# workers (src/loader/citus_merge.c), one task per shard group, inside the
# coordinator's two-phase commit.
#
# Every loader scenario (every disposition, tombstones, rejects of every
# kind, casts under the caller's DateStyle, TimeZone and IntervalStyle,
# replays, conflicts under both policies with their payloads, reject
# limits, unknown columns, object versions, a composite key distributed by
# one of its columns, a staged payload_hash) gives the same receipts,
# rejects, conflicts, cursors and rows on the pushed-down path (forced with
# the option citus_merge = workers) and on the coordinator path as on a
# plain table.  Then, from citus.log_remote_commands and the workers' logs:
# each writing statement runs as one task per shard group, the first
# statement on the shards is the work table's INSERT and its TRUNCATE
# comes last (the design's pitfall of DDL pinning connections), nothing is
# copied through the coordinator, and every connection that wrote is
# prepared, none committed plainly (the pitfall of Citus's 1PC COPY path).
# What merges on the coordinator instead (rules, a target distributed after
# its registration, a distribution column cast) says why under "workers";
# the decision matrix's cases (test/t/decide_matrix.sql) give the outcomes
# the rule says on both; two batches into co-located targets run at once; a
# shard move racing a batch waits for it, then moves its rows.
# Last, faults: a worker killed with kill -9 before PREPARE fails the
# batch on every node and the retry commits once; a batch whose COMMIT
# PREPARED a worker missed (its connections stopped, then the worker
# killed) is committed by Citus's recovery, once.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use File::Basename qw(dirname);
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CitusCluster;

plan skip_all => CitusCluster::missing() if CitusCluster::missing();

my @nodes = CitusCluster::start(
	names       => [ 'coordinator', 'worker1', 'worker2' ],
	conf        => "max_connections = 120\nrestart_after_crash = on\n",
	worker_conf => "log_statement = 'all'\n");
my ($coord, $w1, $w2) = @nodes;

# ---- the scenarios ----

# Targets: acct (a text key, payload of many types cast from text), orders
# (a composite key distributed by region), hashed (a staged payload_hash),
# and versioned (object versions: a version_id column).
my $setup = q{
CREATE TABLE acct (id text PRIMARY KEY, name text, score numeric(8,2), born date,
                   seen timestamptz, span interval, ratio float8,
                   version bigint NOT NULL, is_deleted boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE acct_stage (object_key text, source_row bigint, operation text, id text,
                         version text, name text, score text, born text, seen text,
                         span text, ratio text);
CREATE TABLE orders (region text, order_no int, item text, v int NOT NULL,
                     d boolean NOT NULL DEFAULT false, h bytea, PRIMARY KEY (region, order_no));
CREATE TABLE orders_stage (object_key text, source_row int, operation text, region text,
                           order_no text, v text, item text);
CREATE TABLE hashed (id int PRIMARY KEY, val text, version bigint NOT NULL,
                     del boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE hashed_stage (object_key text, source_row bigint, operation text, id int,
                           version bigint, val text, payload_hash text);
CREATE TABLE versioned (id int PRIMARY KEY, val text, version bigint NOT NULL,
                        del boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE versioned_stage (object_key text, version_id text, source_row bigint,
                              operation text, id int, version bigint, val text, extra text);
%s
SELECT reconcile_register('acct', '{id}', 'version', 'is_deleted', 'h');
SELECT reconcile_register('orders', '{region,order_no}', 'v', 'd', 'h');
SELECT reconcile_register('hashed', '{id}', 'version', 'del', 'h', 'abort');
SELECT reconcile_register('versioned', '{id}', 'version', 'del', 'h');
};
my $distribute = q{
SELECT create_distributed_table('acct', 'id');
SELECT create_distributed_table('acct_stage', 'id', colocate_with => 'acct');
SELECT create_distributed_table('orders', 'region');
SELECT create_distributed_table('orders_stage', 'region', colocate_with => 'orders');
SELECT create_distributed_table('hashed', 'id');
SELECT create_distributed_table('hashed_stage', 'id', colocate_with => 'hashed');
SELECT create_distributed_table('versioned', 'id');
SELECT create_distributed_table('versioned_stage', 'id', colocate_with => 'versioned');
};

# One batch: stage the rows of each object, run the batch with the kind's
# options (psql variable o) merged with the batch's own, show the receipt.
# Each object is [object_key, version_id, rows...].
my $nbatch = 0;

sub batch
{
	my ($target, $objects, $pos, $opts, $stagecols) = @_;
	my (@manifest, @values);
	for my $o (@$objects)
	{
		my ($key, $version_id, @rows) = @$o;
		push @manifest,
		  qq[{"object_key":"$key","version_id":"$version_id","content_hash":"h-$key","rows":]
		  . scalar(@rows) . '}';
		push @values, "($_)" for @rows;
	}
	my $manifest = '[' . join(',', @manifest) . ']';
	$opts //= '{}';
	$nbatch++;
	my $sql = "TRUNCATE ${target}_stage;\n";
	$sql .= "INSERT INTO ${target}_stage "
	  . ($stagecols ? "($stagecols) " : '')
	  . "VALUES " . join(",\n  ", @values) . ";\n" if @values;
	$sql .= "SELECT 'receipt $nbatch', status, staged_rows, inserted, updated, deleted, unchanged, stale, duplicates, conflicts, rejected, checksum"
	  . " FROM reconcile_batch('$target', '${target}_stage', '$manifest', '$target-feed', '$pos', :'o'::jsonb || '$opts');\n";
	return $sql;
}

# acct rows: object_key, source_row, operation, id, version, name, score, born, seen, span, ratio
sub acct { my ($o, $n, $op, $id, $v, @p) = @_; return join(', ', "'$o'", $n, map { defined $_ ? "'$_'" : 'NULL' } $op, $id, $v, @p); }

my @a1 = (
	[
		'a1', '1',
		acct('a1', 1, 'UPSERT', 'K1', '1', 'Ana', '10.5', '03/04/2020', '2020-01-01 12:00', '1 2:03:04', '0.1'),
		acct('a1', 2, 'UPSERT', 'K2', '1', 'Bo', '7', '31/12/1999', '1999-12-31 23:59:59', '-1 0:00:01', '1e-7'),
		acct('a1', 3, 'UPSERT', 'K2', '1', 'Bo', '7', '31/12/1999', '1999-12-31 23:59:59', '-1 0:00:01', '1e-7'),
		acct('a1', 4, 'UPSERT', 'K3', '1', 'Cy', '1', '01/01/2001', '2001-06-01 00:00', '10:00:00', '3.14159'),
		acct('a1', 5, 'UPSERT', 'K4', '1', 'Di', '2', '01/02/2002', '2002-06-01 00:00', '2 0:0:0', '2'),
		acct('a1', 6, 'UPSERT', 'K5', '1', 'Ed', '3', '01/03/2003', '2003-06-01 00:00', '0:0:1', '-0'),
		acct('a1', 7, 'UPSERT', 'K6', '1', "O''Neil \"q\" \\ tab\tnl", '4', '01/04/2004', '2004-06-01 00:00', '0:1:0', 'NaN'),
		# rejects: a bad version, a negative one, no version, a bad number,
		# a bad date, an unknown operation, no operation, no source_row,
		# several problems in one row
		acct('a1', 8, 'UPSERT', 'K7', 'v?', 'Gu', '5', '01/05/2005', '2005-06-01', '1', '1'),
		acct('a1', 9, 'UPSERT', 'K8', '-3', 'Ha', '5', '01/05/2005', '2005-06-01', '1', '1'),
		acct('a1', 10, 'UPSERT', 'K9', undef, 'Ib', '5', '01/05/2005', '2005-06-01', '1', '1'),
		acct('a1', 11, 'UPSERT', 'K10', '1', 'Jo', 'lots', '01/05/2005', '2005-06-01', '1', '1'),
		acct('a1', 12, 'UPSERT', 'K11', '1', 'Ku', '5', '32/13/2005', '2005-06-01', '1', '1'),
		acct('a1', 13, 'MERGE', 'K12', '1', 'Li', '5', '01/05/2005', '2005-06-01', '1', '1'),
		acct('a1', 14, undef, 'K13', '1', 'Mo', '5', '01/05/2005', '2005-06-01', '1', '1'),
		"'a1', NULL, 'UPSERT', 'K14', '1', 'Nu', '5', '01/05/2005', '2005-06-01', '1', '1'",
		acct('a1', 16, 'UPSERT', 'K15', 'x', 'Ot', '123456789', 'never', 'soon', 'long', 'big'),
		acct('a1', 17, 'UPSERT', 'K16', '1', 'Pi', '5', '01/05/2005', '2005-06-01', '1', '1e999'),
	]);
my @a2 = (
	[
		'a2', '1',
		acct('a2', 1, 'UPSERT', 'K1', '2', 'Ana Lee', '11', '03/04/2020', '2020-01-01 12:00', '1 2:03:04', '0.1'),  # updated
		acct('a2', 2, 'UPSERT', 'K2', '1', 'Bo', '7', '31/12/1999', '1999-12-31 23:59:59', '-1 0:00:01', '1e-7'),   # unchanged (same text, same instant)
		acct('a2', 3, 'UPSERT', 'K3', '0', 'Old', '1', '01/01/2001', '2001-06-01', '0', '0'),                   # stale
		acct('a2', 4, 'DELETE', 'K4', '2', undef, undef, undef, undef, undef, undef),                             # tombstone
		acct('a2', 5, 'DELETE', 'K20', '1', undef, undef, undef, undef, undef, undef),                            # new tombstone
		acct('a2', 6, 'UPSERT', 'K5', '2', 'X', '1', '01/01/2001', '2001-06-01', '0', '0'),                     # conflict in the batch
		acct('a2', 7, 'DELETE', 'K6', '0', undef, undef, undef, undef, undef, undef),                             # stale tombstone
		acct('a2', 8, 'UPSERT', 'K21', '5', 'Hi', '1', '01/01/2001', '2001-06-01', '0', '0'),                   # new, then
		acct('a2', 9, 'UPSERT', 'K21', '4', 'Lo', '1', '01/01/2001', '2001-06-01', '0', '0'),                   # stale in the batch
		acct('a2', 10, 'UPSERT', 'K22', '3', 'Same', '1', '01/01/2001', '2001-06-01', '0', '0'),
		acct('a2', 11, 'UPSERT', 'K22', '3', 'Same', '1.00', '01/01/2001', '2001-06-01', '0', '0'),             # duplicate by value
	],
	[ 'a3', '1',
		acct('a3', 1, 'UPSERT', 'K5', '2', 'Y', '1', '01/01/2001', '2001-06-01', '0', '0'),
		acct('a3', 2, 'UPSERT', 'K3', '1', 'Cy2', '1', '01/01/2001', '2001-06-01 00:00', '10:00:00', '3.14159') ]  # against the target's version
);

my $scenario =
  # The caller's settings, which casts must follow on the workers too.
  "SET DateStyle = 'SQL, DMY'; SET TimeZone = 'America/New_York'; SET IntervalStyle = 'sql_standard'; SET extra_float_digits = 0;\n"
  . batch('acct', \@a1, 'a1@1')
  . batch('acct', \@a2, 'a3@1')
  # the same manifest again: the stored receipt, nothing written
  . batch('acct', \@a2, 'a3@1')
  # reject limits: refused, naming the first rejects, nothing written
  . batch('acct', [ [ 'a4', '1', acct('a4', 1, 'UPSERT', 'K30', 'a', 'n'), acct('a4', 2, 'UPSERT', 'K31', 'b', 'n'),
	acct('a4', 3, 'UPSERT', 'K32', '1', 'ok') ] ], 'a4@1', '{"max_rejects": 1}', 'object_key, source_row, operation, id, version, name')
  . batch('acct', [ [ 'a5', '1', acct('a5', 1, 'UPSERT', 'K30', 'a', 'n'), acct('a5', 2, 'UPSERT', 'K31', '1', 'ok') ] ],
	'a5@1', '{"max_reject_share": 0.25}', 'object_key, source_row, operation, id, version, name')
  . batch('acct', [ [ 'a6', '1', acct('a6', 1, 'UPSERT', 'K30', 'a', 'n'), acct('a6', 2, 'UPSERT', 'K31', '1', 'ok') ] ],
	'a6@1', '{"max_reject_share": 0.5, "max_rejects": 1}', 'object_key, source_row, operation, id, version, name')
  # a manifest that says more rows than are staged
  . "SELECT 'short', count(*) FROM reconcile_batch('acct', 'acct_stage', '[{\"object_key\":\"a6\",\"version_id\":\"1\",\"content_hash\":\"x\",\"rows\":3}]', NULL, NULL, :'o'::jsonb);\n"
  # composite key: a key column cast from text, null and malformed
  . batch('orders', [ [ 'c1', '1', "'c1', 1, 'UPSERT', 'north', '1', '1', 'tea'", "'c1', 2, 'UPSERT', 'north', '2', '1', 'milk'",
	"'c1', 3, 'UPSERT', 'south', '1', '1', 'rice'", "'c1', 4, 'UPSERT', 'south', NULL, '1', 'x'",
	"'c1', 5, 'UPSERT', 'south', 'two', '1', 'x'", "'c1', 6, 'UPSERT', 'south', '99999999999', '1', 'x'" ] ], 'c1@1')
  . batch('orders', [ [ 'c2', '1', "'c2', 1, 'UPSERT', 'north', '1', '2', 'green tea'", "'c2', 2, 'UPSERT', 'north', '2', '1', 'milk'",
	"'c2', 3, 'UPSERT', 'north', '3', '1', 'bread'", "'c2', 4, 'DELETE', 'south', '1', '2', NULL",
	"'c2', 5, 'UPSERT', 'north', '3', '1', 'rolls'" ] ], 'c2@1')
  # a staged payload_hash (under 'abort'): trusted when valid, a reject when not
  . q{SELECT 'hash of [x,false]', encode(sha256('["x",false]'), 'hex');
}
  . batch('hashed', [ [ 'h1', '1', "'h1', 1, 'UPSERT', 1, 1, 'x', NULL", "'h1', 2, 'UPSERT', 2, 1, 'y', 'sha256:' || encode(sha256('[\"x\",false]'), 'hex')",
	"'h1', 3, 'UPSERT', 3, 1, 'z', 'nothex'", "'h1', 4, 'UPSERT', 4, 1, 'w', '\\x' || repeat('ab', 32)" ] ], 'h1@1')
  # under 'abort' a conflict fails the batch and names it
  . batch('hashed', [ [ 'h2', '1', "'h2', 1, 'UPSERT', 1, 1, 'changed', NULL", "'h2', 2, 'UPSERT', 5, 1, 'a', NULL",
	"'h2', 3, 'UPSERT', 5, 1, 'b', NULL" ] ], 'h2@1')
  # object versions: two versions of one object side by side; a row of no
  # listed version is not the batch's; an unknown column is refused, then ignored
  . batch('versioned', [ [ 'v1', 'a', "'v1', 'a', 1, 'UPSERT', 1, 1, 'one', NULL", "'v1', 'a', 2, 'UPSERT', 2, 1, 'two', NULL" ],
	[ 'v1', 'b', "'v1', 'b', 1, 'UPSERT', 1, 2, 'one b', NULL", "'v1', 'b', 2, 'UPSERT', 2, 1, 'two b', NULL" ] ], 'v1@b')
  . batch('versioned', [ [ 'v2', 'a', "'v2', 'a', 1, 'UPSERT', 3, 1, 'three', 'x'" ] ], 'v2@a')
  . batch('versioned', [ [ 'v2', 'a', "'v2', 'a', 1, 'UPSERT', 3, 1, 'three', 'x'", "'v2', 'z', 1, 'UPSERT', 4, 1, 'other', 'x'" ] ],
	'v2@a', '{"unknown_columns": "ignore"}')
  . q{RESET ALL;
SELECT 'acct', id, name, score, born, seen, span, ratio, version, is_deleted, encode(h, 'hex') FROM acct ORDER BY id;
SELECT 'orders', region, order_no, item, v, d, encode(h, 'hex') FROM orders ORDER BY 1, 2, 3;
SELECT 'hashed', id, val, version, del, encode(h, 'hex') FROM hashed ORDER BY id;
SELECT 'versioned', id, val, version, del, encode(h, 'hex') FROM versioned ORDER BY id;
SELECT 'receipts', target::regclass::text, status, staged_rows, inserted, updated, deleted, unchanged, stale, duplicates,
       conflicts, rejected, checksum, reconcile_receipt_objects(target, batch_id), "cursor"
  FROM reconcile.receipts ORDER BY committed_at, batch_id;
SELECT 'rejects', target::regclass::text, batch_id, object_key, version_id, source_row, column_name, raw_value, reason
  FROM reconcile.rejects ORDER BY 2, 3, 4, 5, 6, 7, 8, 9;
SELECT 'conflicts', target::regclass::text, batch_id, key, version, object_key, version_id, source_row, deleted,
       encode(staged_hash, 'hex'), encode(existing_hash, 'hex'), staged_payload, existing_payload
  FROM reconcile.conflicts ORDER BY 2, 3, 6, 8;
SELECT 'cursor', target::regclass::text, source, position, batch_id FROM reconcile.cursors ORDER BY 2, 3;
};

sub run_kind
{
	my ($db, $dist, $opts) = @_;
	$coord->safe_psql('postgres', "CREATE DATABASE $db");
	$coord->safe_psql($db, 'CREATE EXTENSION reconcile');
	$coord->safe_psql($db, sprintf($setup, $dist));
	my ($ret, $out, $err) = $coord->psql(
		$db, $scenario,
		on_error_stop => 0,
		extra_params => [ '-A', '-t', '-F', '|', '-v', "o=$opts" ]);
	$err =~ s/^psql:<stdin>:\d+: //mg;
	return "$out\n--- errors ---\n$err";
}

# Citus needs the databases on the workers too: one database per kind,
# created on every node (CREATE DATABASE is not propagated by default).
sub make_db
{
	my ($db) = @_;
	for my $n ($w1, $w2)
	{
		$n->safe_psql('postgres', "CREATE DATABASE $db");
		$n->safe_psql($db, 'CREATE EXTENSION citus');
	}
}

my $plain = run_kind('plaindb', '', '{}');
like($plain, qr/^receipt 2\|committed\|/m, 'plain: the second batch commits');
like($plain, qr/^receipt 3\|replayed\|/m,  'plain: the replay returns the stored receipt');
like($plain, qr/beyond the reject limit/, 'plain: a reject limit fails the batch');
like($plain, qr/has 3 conflicting rows for table "hashed"/, 'plain: a conflict under abort fails the batch');
like($plain, qr/^rejects\|acct\|.*\|a1\|1\|16\|ratio\|/m, 'plain: rejects of several columns of one row');
like($plain, qr/^conflicts\|acct\|.*\{"id": "K3"\}\|1\|a3\|/m, 'plain: a conflict with the target at its version');
like($plain, qr/^acct\|K1\|Ana Lee\|11\.00\|2020-04-03\|/m, 'plain: dates are read with the caller\'s DateStyle');

make_db($_) for ('pushed', 'coord');

sub citus_db
{
	my ($db, $opts) = @_;
	$coord->safe_psql('postgres', "CREATE DATABASE $db");
	$coord->safe_psql($db, 'SET client_min_messages = warning; CREATE EXTENSION citus;');
	$coord->safe_psql($db, "SELECT citus_set_coordinator_host('127.0.0.1', " . $coord->port . ")");
	$coord->safe_psql($db, "SELECT citus_add_node('127.0.0.1', " . $_->port . ")") for ($w1, $w2);
	$coord->safe_psql($db, 'CREATE EXTENSION reconcile');
	$coord->safe_psql($db, sprintf($setup, $distribute));
	my ($ret, $out, $err) = $coord->psql(
		$db, $scenario,
		on_error_stop => 0,
		extra_params => [ '-A', '-t', '-F', '|', '-v', "o=$opts" ]);
	$err =~ s/^psql:<stdin>:\d+: //mg;
	$out =~ s/^\n//mg;
	return "$out\n--- errors ---\n$err";
}
$plain =~ s/^\n//mg;
my $pushed = citus_db('pushed', '{"citus_merge": "workers"}');
is($pushed, $plain,
	'merged on the workers: the same receipts, rejects, conflicts, cursors and rows as a plain table');
my $coordinated = citus_db('coord', '{"citus_merge": "coordinator"}');
if ($coordinated ne $plain)
{
	open my $fa, '>', "$PostgreSQL::Test::Utils::tmp_check/plain.out"; print $fa $plain; close $fa;
	open my $fb, '>', "$PostgreSQL::Test::Utils::tmp_check/coord.out"; print $fb $coordinated; close $fb;
}
is($coordinated, $plain,
	'merged on the coordinator: the same receipts, rejects, conflicts, cursors and rows as a plain table');

# ---- the decision matrix ----

# The table of cases sql/decide_matrix.sql checks the plain batch (both
# write paths) and reconcile_resolve against (test/t/decide_matrix.sql),
# through the pushed-down merge and the coordinator's: one case a
# transaction, each outcome as the README's rule has it.
{
	my $matrix = slurp_file(dirname(__FILE__) . '/decide_matrix.sql');
	$coord->safe_psql('pushed', "SET client_min_messages = warning;\n$matrix");
	my @cases = split /\n/, $coord->safe_psql('pushed', 'SELECT id FROM decide_cases ORDER BY id');
	for my $kind ('workers', 'coordinator')
	{
		$coord->safe_psql('pushed', "SET client_min_messages = warning; SELECT decide_setup('$kind', true)");
		my $disagree = '';
		$disagree .= $coord->safe_psql('pushed',
			"SELECT * FROM decide_case('$kind', $_, '{\"citus_merge\": \"$kind\"}', false)")
		  for @cases;
		is($disagree, '', "decision matrix: all " . scalar(@cases) . " cases as the rule has them, merged on the $kind");
	}

	# The same cases over a timestamptz version, each staged row spelling
	# its instant at another UTC offset: the pushed-down SQL compares with
	# the type's own operators, as decide.c does.
	for my $kind ('workers', 'coordinator')
	{
		$coord->safe_psql('pushed', "SET client_min_messages = warning; SELECT decide_setup('ts_$kind', true, 'timestamptz')");
		my $disagree = '';
		$disagree .= $coord->safe_psql('pushed',
			"SELECT * FROM decide_case('ts_$kind', $_, '{\"citus_merge\": \"$kind\"}', false)")
		  for @cases;
		is($disagree, '', "decision matrix over timestamptz: all " . scalar(@cases) . " cases as the rule has them, merged on the $kind");
	}
	is($coord->safe_psql('pushed', q{SELECT count(DISTINCT ordering) FILTER (WHERE version IS NULL), count(*) FILTER (WHERE ordering IS NULL)
		FROM reconcile.conflicts WHERE target = 'dt_ts_workers'::regclass}), '3|0',
		'decision matrix over timestamptz: held rows carry the version as text, merged on the workers');
}

# ---- what merges on the coordinator instead ----

# Attached rules are evaluated on the coordinator: "workers" is refused
# saying so, and by default the batch merges on the coordinator.
$coord->safe_psql('pushed', q{SELECT reconcile_set_rules('versioned', '{"drop": {"named": "val IS NOT NULL"}}');
TRUNCATE versioned_stage;
INSERT INTO versioned_stage VALUES ('r1', 'a', 1, 'UPSERT', 50, 1, 'fifty', NULL), ('r1', 'a', 2, 'UPSERT', 51, 1, NULL, NULL);});
my $rules_batch = q{SELECT status, inserted, rejected FROM reconcile_batch('versioned', 'versioned_stage',
  '[{"object_key":"r1","version_id":"a","content_hash":"h","rows":2}]', NULL, NULL, '{"unknown_columns": "ignore"%s}')};
my ($rret, $rout, $rerr) = $coord->psql('pushed', sprintf($rules_batch, ', "citus_merge": "workers"'));
like($rerr, qr/ERROR:  batch \w+ cannot merge on the Citus workers\nDETAIL:  table "versioned" has attached data-quality rules, which are evaluated on the coordinator\./,
	'a target with rules: "workers" is refused, saying why');
is($coord->safe_psql('pushed', sprintf($rules_batch, '')), 'committed|1|1',
	'a target with rules: by default the batch merges on the coordinator');
# A target distributed after its registration has no work table until it is registered again.
$coord->safe_psql('pushed', q{CREATE TABLE late (id int PRIMARY KEY, val text, version bigint NOT NULL, del boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('late', '{id}', 'version', 'del', 'h');
SELECT create_distributed_table('late', 'id');
CREATE TABLE late_stage (object_key text, source_row bigint, operation text, id int, version bigint, val text);
SELECT create_distributed_table('late_stage', 'id', colocate_with => 'late');
INSERT INTO late_stage VALUES ('l1', 1, 'UPSERT', 1, 1, 'one');});
my $late = q{SELECT status, inserted FROM reconcile_batch('late', 'late_stage',
  '[{"object_key":"l1","version_id":"1","content_hash":"h","rows":1}]', NULL, NULL, '{"citus_merge": "workers"}')};
($rret, $rout, $rerr) = $coord->psql('pushed', $late);
like($rerr, qr/DETAIL:  table "late" has no work table on the workers/, 'a target distributed after its registration: no work table yet');
$coord->safe_psql('pushed', q{SELECT reconcile_register('late', '{id}', 'version', 'del', 'h')});
is($coord->safe_psql('pushed', $late), 'committed|1', 'registered again, it merges on the workers');

# Several version columns compared in order (binlog file, offset): the
# merge on the workers compares one, so "workers" is refused saying so, and
# by default the batch merges on the coordinator, by the pair: a later file
# wins at a lower offset, in the batch and against the target's row (the
# UPDATE's version guard, run through Citus, compares the pair in order).
$coord->safe_psql('pushed', q{CREATE TABLE binlog (id int PRIMARY KEY, val text, f text NOT NULL, pos bigint NOT NULL, del boolean NOT NULL DEFAULT false, h bytea);
SELECT create_distributed_table('binlog', 'id');
SELECT reconcile_register('binlog', '{id}', version_columns => '{f,pos}', deleted_column => 'del', hash_column => 'h');
CREATE TABLE binlog_stage (object_key text, source_row bigint, operation text, id int, f text, pos text, val text);
SELECT create_distributed_table('binlog_stage', 'id', colocate_with => 'binlog');
INSERT INTO binlog_stage VALUES ('b1', 1, 'UPSERT', 1, 'bin.000001', '900', 'old'), ('b1', 2, 'UPSERT', 1, 'bin.000002', '4', 'new'),
                                ('b1', 3, 'UPSERT', 2, 'bin.000001', '7', 'x'), ('b1', 4, 'UPSERT', 2, 'bin.000001', '7', 'y'),
                                ('b2', 1, 'UPSERT', 1, 'bin.000003', '1', 'newer'), ('b2', 2, 'UPSERT', 3, 'bin.000001', '1', 'three');});
my $binlog = q{SELECT status, inserted, updated, stale, conflicts FROM reconcile_batch('binlog', 'binlog_stage',
  '[{"object_key":"%s","version_id":"1","content_hash":"h","rows":%d}]', NULL, NULL, '{%s}')};
($rret, $rout, $rerr) = $coord->psql('pushed', sprintf($binlog, 'b1', 4, '"citus_merge": "workers"'));
like($rerr, qr/DETAIL:  table "binlog" orders by 2 version columns; the merge on the workers compares one\./,
	'two version columns: "workers" is refused, saying why');
is($coord->safe_psql('pushed', sprintf($binlog, 'b1', 4, '')), 'committed|1|0|1|2',
	'two version columns: merged on the coordinator, the later file wins at a lower offset');
is($coord->safe_psql('pushed', sprintf($binlog, 'b2', 2, '')), 'committed|1|1|0|0',
	'two version columns: the version guard of the update compares the pair');
is($coord->safe_psql('pushed', q{SELECT string_agg(id || ':' || val || ':' || f || ':' || pos, ' ' ORDER BY id) FROM binlog}),
	'1:newer:bin.000003:1 3:three:bin.000001:1', 'two version columns: the rows as the rule has them');
is($coord->safe_psql('pushed', q{SELECT DISTINCT ordering FROM reconcile.conflicts WHERE target = 'binlog'::regclass}),
	'["bin.000001", "7"]', 'two version columns: held rows carry the pair as text');

# A staged distribution column of another type modifier would be cast, and
# Citus would route the rows through the coordinator: not pushed down.
$coord->safe_psql('pushed', q{CREATE TABLE narrow (id varchar(4) PRIMARY KEY, val text, version bigint NOT NULL, del boolean NOT NULL DEFAULT false, h bytea);
SELECT create_distributed_table('narrow', 'id');
SELECT reconcile_register('narrow', '{id}', 'version', 'del', 'h');
CREATE TABLE narrow_stage (object_key text, source_row bigint, operation text, id varchar(8), version bigint, val text);
SELECT create_distributed_table('narrow_stage', 'id', colocate_with => 'narrow');
INSERT INTO narrow_stage VALUES ('n1', 1, 'UPSERT', 'abc', 1, 'one');});
my $narrow = q{SELECT status, inserted FROM reconcile_batch('narrow', 'narrow_stage',
  '[{"object_key":"n1","version_id":"1","content_hash":"h","rows":1}]', NULL, NULL, '{"citus_merge": %s}')};
($rret, $rout, $rerr) = $coord->psql('pushed', sprintf($narrow, '"workers"'));
like($rerr, qr/DETAIL:  distribution column "id" of the staged relation has another type or type modifier than the target's/,
	'a staged distribution column of another type modifier: not merged on the workers');
is($coord->safe_psql('pushed', sprintf($narrow, 'null')), 'committed|1', 'it merges on the coordinator');

# Two batches into two co-located targets at once: one held after its
# apply, before its commit, does not hold the other up; both commit.
{
	$coord->safe_psql('pushed', q{TRUNCATE hashed_stage;
INSERT INTO hashed_stage SELECT 'cc', g, 'UPSERT', 1000 + g, 1, 'held ' || g, NULL FROM generate_series(1, 200) g;
TRUNCATE late_stage;
INSERT INTO late_stage SELECT 'cc', g, 'UPSERT', 1000 + g, 1, 'free ' || g FROM generate_series(1, 200) g;});
	my $pk = "x'7265636f6e63696c'::bigint";
	my $holder = $coord->background_psql('pushed');
	$holder->query_safe("SELECT pg_advisory_lock($pk)");
	my $held = $coord->background_psql('pushed', on_error_stop => 0);
	my $hpid = $held->query_safe('SELECT pg_backend_pid()');
	$held->query_safe("SET reconcile.pause_at = 'merged'");
	$held->{stdin} .= q{SELECT status, inserted FROM reconcile_batch('hashed', 'hashed_stage',
  '[{"object_key":"cc","version_id":"1","content_hash":"h","rows":200}]', NULL, NULL, '{"citus_merge": "workers"}');
};
	$held->{run}->pump_nb();
	$coord->poll_query_until('pushed',
		"SELECT count(*) = 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND pid = $hpid")
	  or die 'the held batch did not reach its pause point';
	is($coord->safe_psql('pushed', q{SET statement_timeout = '60s'; SELECT status, inserted FROM reconcile_batch('late', 'late_stage',
  '[{"object_key":"cc","version_id":"1","content_hash":"h","rows":200}]', NULL, NULL, '{"citus_merge": "workers"}')}),
		'committed|200', 'a batch into a co-located target commits while another is held before its commit');
	# A diff of the held batch's target, by checksums on the shards, does not
	# wait for the batch either: it reads the target as it was before it.
	is($coord->safe_psql('pushed', q{SET statement_timeout = '60s';
SELECT count(*) FROM reconcile_diff('hashed', 'hashed', '{id}', '{"remote": "checksum"}')}),
		'0', 'a checksum diff of the held target runs while its batch is held');
	is($coord->safe_psql('pushed', q{SET statement_timeout = '60s';
SELECT count(*) FROM hashed WHERE val LIKE 'held %'}),
		'0', 'and sees none of the held batch\'s rows');
	$holder->query_safe("SELECT pg_advisory_unlock($pk)");
	$holder->quit;
	$held->quit;
	like($held->{stdout}, qr/committed\|200/, 'and the held batch commits after it');
}

# A shard move racing a batch: the move of a shard group (target, staged
# relation and work table move together) waits for the batch held before
# its commit, then moves its rows with the rest; both succeed and the rows
# are all there.
{
	$coord->safe_psql('pushed', q{TRUNCATE late_stage;
INSERT INTO late_stage SELECT 'mv', g, 'UPSERT', 5000 + g, 1, 'moved ' || g FROM generate_series(1, 300) g;});
	my ($shard, $from) = split /\|/, $coord->safe_psql('pushed', q{SELECT s.shardid, p.nodeport FROM pg_dist_shard s
  JOIN pg_dist_placement pl USING (shardid) JOIN pg_dist_node p USING (groupid)
 WHERE s.logicalrelid = 'late'::regclass ORDER BY s.shardid LIMIT 1});
	my $to = $from == $w1->port ? $w2->port : $w1->port;
	my $pk = "x'7265636f6e63696c'::bigint";
	my $holder = $coord->background_psql('pushed');
	$holder->query_safe("SELECT pg_advisory_lock($pk)");
	my $held = $coord->background_psql('pushed', on_error_stop => 0);
	my $hpid = $held->query_safe('SELECT pg_backend_pid()');
	$held->query_safe("SET reconcile.pause_at = 'merged'");
	$held->{stdin} .= q{SELECT status, inserted FROM reconcile_batch('late', 'late_stage',
  '[{"object_key":"mv","version_id":"1","content_hash":"h","rows":300}]', NULL, NULL, '{"citus_merge": "workers"}');
};
	$held->{run}->pump_nb();
	$coord->poll_query_until('pushed',
		"SELECT count(*) = 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND pid = $hpid")
	  or die 'the batch did not reach its pause point';
	my $mover = $coord->background_psql('pushed', on_error_stop => 0);
	my $mpid = $mover->query_safe('SELECT pg_backend_pid()');
	$mover->{stdin} .= "SELECT citus_move_shard_placement($shard, '127.0.0.1', $from, '127.0.0.1', $to, shard_transfer_mode => 'block_writes');\n";
	$mover->{run}->pump_nb();
	ok($coord->poll_query_until('pushed', "SELECT wait_event_type = 'Lock' FROM pg_stat_activity WHERE pid = $mpid"),
		'a shard move waits for the batch held before its commit');
	$holder->query_safe("SELECT pg_advisory_unlock($pk)");
	$holder->quit;
	$held->quit;
	like($held->{stdout}, qr/committed\|300/, 'the batch commits');
	$mover->quit;
	is($mover->{stderr}, '', 'then the shard moves');
	is($coord->safe_psql('pushed', qq{SELECT p.nodeport FROM pg_dist_placement pl JOIN pg_dist_node p USING (groupid) WHERE pl.shardid = $shard}),
		$to, 'to the other worker');
	is($coord->safe_psql('pushed', "SELECT count(*) FROM late WHERE val LIKE 'moved %'"), '300',
		'and every row of the batch is there after the move');
}

# ---- parallel and atomic: what Citus sent, and what the workers ran ----

my $nshards = $coord->safe_psql('pushed',
	"SELECT count(*) FROM pg_dist_shard WHERE logicalrelid = 'acct'::regclass");
$coord->safe_psql(
	'pushed', q{
TRUNCATE acct_stage;
INSERT INTO acct_stage (object_key, source_row, operation, id, version, name, score)
SELECT 't1', g, 'UPSERT', 'T' || g, '1', 'name ' || g, (g % 100)::text FROM generate_series(1, 300) g;
INSERT INTO acct_stage (object_key, source_row, operation, id, version, name)
SELECT 't1', 300 + g, 'UPSERT', 'K' || g, '9', 'again' FROM generate_series(1, 6) g;
INSERT INTO acct_stage (object_key, source_row, operation, id, version, name) VALUES ('t1', 400, 'UPSERT', 'R1', 'bad', 'x');
});
my %logpos = map { $_->name => -s $_->logfile } ($w1, $w2);
my ($ret, $out, $log) = $coord->psql(
	'pushed', q{SET citus.log_remote_commands = on;
SELECT status, inserted, updated, rejected FROM reconcile_batch('acct', 'acct_stage',
  '[{"object_key":"t1","version_id":"1","content_hash":"h","rows":307}]', 't-feed', 't1@1');});
is($out, 'committed|300|6|1', 'a logged batch merged on the workers commits');

# The remote commands in order, each with the connection it went over.
my @cmds;
while ($log =~ /NOTICE:  issuing (.*?)\n(?:DETAIL:  on server \S+ connectionId: (\d+))?/g)
{
	push @cmds, [ $1, $2 // -1 ];
}
my @kind = map { $_->[0] =~ /^INSERT INTO reconcile\.citus_work_/ ? 'classify'
	  : $_->[0] =~ /^MERGE INTO / ? 'apply'
	  : $_->[0] =~ /^TRUNCATE TABLE reconcile\.citus_work_/ ? 'empty'
	  : $_->[0] =~ /^PREPARE TRANSACTION/ ? 'prepare'
	  : $_->[0] =~ /^COMMIT PREPARED/ ? 'commit prepared'
	  : $_->[0] =~ /^(COMMIT|END)\b/ ? 'commit'
	  : $_->[0] =~ /^COPY\b/ ? 'copy'
	  : $_->[0] =~ /^(BEGIN|SELECT assign_distributed)/ ? 'begin'
	  : 'other' } @cmds;
my %count;
$count{$_}++ for @kind;
is($count{classify}, $nshards, "the classifying INSERT runs as one task per shard group ($nshards)");
is($count{apply}, $nshards, 'the MERGE runs as one task per shard group');
is($count{empty}, $nshards, 'the work table is emptied on every shard group');
my ($first) = grep { $kind[$_] ne 'begin' } 0 .. $#kind;
is($kind[$first], 'classify',
	'the first statement on the shards is the work table\'s INSERT (no DDL or read pins connections before it)');
my ($last_apply) = reverse grep { $kind[$_] eq 'apply' } 0 .. $#kind;
my ($first_empty) = grep { $kind[$_] eq 'empty' } 0 .. $#kind;
ok($first_empty > $last_apply, 'the work table is emptied after the apply, at the end');
ok(!$count{copy}, 'nothing is copied into the shards through the coordinator');
my %wrote = map { $cmds[$_][1] => 1 } grep { $kind[$_] =~ /^(classify|apply|empty)$/ } 0 .. $#kind;
my %prepared = map { $cmds[$_][1] => 1 } grep { $kind[$_] eq 'prepare' } 0 .. $#kind;
ok(scalar(keys %wrote) > 1, 'the writes went over several connections in parallel (' . scalar(keys %wrote) . ')');
is_deeply([ sort { $a <=> $b } grep { !$prepared{$_} } keys %wrote ], [],
	'every connection that wrote was prepared');
is($count{'commit prepared'}, $count{prepare}, 'every prepared transaction was committed');
ok(!$count{commit}, 'no connection was committed without two-phase commit');

# The workers' own logs say the same.
my ($wprepare, $wcommit, $wplain) = (0, 0, 0);
for my $n ($w1, $w2)
{
	my $text = slurp_file($n->logfile, $logpos{ $n->name });
	$wprepare += () = $text =~ /statement: PREPARE TRANSACTION/g;
	$wcommit += () = $text =~ /statement: COMMIT PREPARED/g;
	$wplain += () = $text =~ /statement: COMMIT\s*$/mg;
}
is($wprepare, $count{prepare}, "the workers ran PREPARE TRANSACTION $wprepare times");
is($wcommit, $wprepare, 'and COMMIT PREPARED as often');
is($wplain, 0, 'and no plain COMMIT');
is($coord->safe_psql('pushed', "SELECT count(*) FROM reconcile.citus_work_" . $coord->safe_psql('pushed', "SELECT 'acct'::regclass::oid")),
	'0', 'the work table is empty after the batch');

# ---- faults ----

# A worker killed with kill -9 after the apply, before PREPARE: the batch
# fails on every node, nothing of it stays, the retry commits once.
my $pause_key = "x'7265636f6e63696c'::bigint";
my $big = q{SELECT status, inserted, updated FROM reconcile_batch('acct', 'acct_stage',
  '[{"object_key":"k1","version_id":"1","content_hash":"hk","rows":2006}]', 'kill-feed', 'k1@1', '{"citus_merge": "workers"}')};
$coord->safe_psql(
	'pushed', q{
TRUNCATE acct_stage;
INSERT INTO acct_stage (object_key, source_row, operation, id, version, name)
SELECT 'k1', g, 'UPSERT', 'N' || g, '1', 'name ' || g FROM generate_series(1, 2000) g;
INSERT INTO acct_stage (object_key, source_row, operation, id, version, name)
SELECT 'k1', 2000 + g, 'UPSERT', 'T' || g, '100', 'updated' FROM generate_series(1, 6) g;
});
my $state = q{SELECT count(*), sum(version), count(*) FILTER (WHERE name = 'updated') FROM acct};
my $before = $coord->safe_psql('pushed', $state);

sub kill_node
{
	my ($n) = @_;
	my $pid = $n->{_pid};
	my @children = split /\s+/, `pgrep -P $pid`;
	kill 9, $pid, @children;
	$n->{_pid} = undef;
}

sub restart_node
{
	my ($n) = @_;
	for (1 .. 60)
	{
		$n->{_pid} = undef;
		return 1 if $n->start(fail_ok => 1);
		sleep 1;
	}
	return 0;
}

my $holder = $coord->background_psql('pushed');
$holder->query_safe("SELECT pg_advisory_lock($pause_key)");
my $session = $coord->background_psql('pushed', on_error_stop => 0);
my $pid = $session->query_safe('SELECT pg_backend_pid()');
$session->query_safe("SET reconcile.pause_at = 'merged'");
$session->{stdin} .= "$big;\n";
$session->{run}->pump_nb();
$coord->poll_query_until('pushed',
	"SELECT count(*) = 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND pid = $pid")
  or die 'the batch did not reach its pause point';
kill_node($w1);
$holder->query_safe("SELECT pg_advisory_unlock($pause_key)");
$holder->quit;
$session->quit;
like($session->{stderr}, qr/ERROR/, 'worker killed before PREPARE: the batch fails');
ok(restart_node($w1), 'the killed worker restarts');
$coord->safe_psql('pushed', 'SELECT recover_prepared_transactions()');
is($coord->safe_psql('pushed', $state), $before, 'after recovery the target holds none of the failed batch');
is($coord->safe_psql('pushed', "SELECT count(*) FROM reconcile.receipts WHERE \"cursor\" = 'k1\@1'"),
	'0', 'and there is no receipt');
is($_->safe_psql('pushed', 'SELECT count(*) FROM pg_prepared_xacts'), '0', $_->name . ': no prepared transaction left')
  for ($coord, $w1, $w2);
is($coord->safe_psql('pushed', $big), 'committed|2000|6', 'the retry commits');
is($coord->safe_psql('pushed', $big), 'replayed|2000|6', 'and only once');
is($coord->safe_psql('pushed', "SELECT count(*) FROM acct WHERE id LIKE 'N%'"), '2000', 'the retry wrote every row once');

# A batch stopped between PREPARE and COMMIT PREPARED: at its pause before
# commit, worker 1's connections are stopped (SIGSTOP), so the commit
# waits on worker 1's PREPARE while worker 2 prepares; then worker 2's
# connections are stopped and worker 1's resumed: the coordinator commits
# its receipt and COMMIT PREPARED reaches worker 1 only.  Then worker 2 is
# killed with kill -9 (and, in the second run, the coordinator too, after
# its local commit).  After recovery the batch is there exactly once.
sub citus_backends
{
	my ($n) = @_;
	return split /\n/, $n->safe_psql('pushed',
		"SELECT pid FROM pg_stat_activity WHERE datname = 'pushed' AND application_name LIKE 'citus_internal%' AND state = 'idle in transaction'");
}

my $round = 0;
sub fault_after_prepare
{
	my ($kill_coordinator) = @_;
	$round++;
	my $obj = "p$round";
	my $batch = qq{SELECT status, inserted FROM reconcile_batch('acct', 'acct_stage',
  '[{"object_key":"$obj","version_id":"1","content_hash":"hp","rows":500}]', 'prep-feed', '$obj\@1', '{"citus_merge": "workers"}')};
	$coord->safe_psql('pushed', qq{TRUNCATE acct_stage;
INSERT INTO acct_stage (object_key, source_row, operation, id, version, name)
SELECT '$obj', g, 'UPSERT', '$obj-' || g, '1', 'prepared ' || g FROM generate_series(1, 500) g;});
	my $holder = $coord->background_psql('pushed');
	$holder->query_safe("SELECT pg_advisory_lock($pause_key)");
	my $session = $coord->background_psql('pushed', on_error_stop => 0);
	my $pid = $session->query_safe('SELECT pg_backend_pid()');
	$session->query_safe("SET reconcile.pause_at = 'receipt'");
	$session->{stdin} .= "$batch;\n";
	$session->{run}->pump_nb();
	$coord->poll_query_until('pushed',
		"SELECT count(*) = 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND pid = $pid")
	  or die 'the batch did not reach its pause point';
	my @b1 = citus_backends($w1);
	my @b2 = citus_backends($w2);
	ok(@b1 > 0 && @b2 > 0, "round $round: the batch holds connections on both workers");
	kill 'STOP', @b1;
	$holder->query_safe("SELECT pg_advisory_unlock($pause_key)");
	$holder->quit;
	# Worker 2 prepares; wait until its count of prepared transactions settles.
	my ($n2, $stable) = (0, 0);
	for (1 .. 100)
	{
		my $n = $w2->safe_psql('pushed', 'SELECT count(*) FROM pg_prepared_xacts');
		$stable = ($n > 0 && $n == $n2) ? $stable + 1 : 0;
		$n2 = $n;
		last if $stable >= 5;
		select(undef, undef, undef, 0.2);
	}
	ok($n2 > 0, "round $round: worker 2 prepared ($n2) while worker 1 was stopped");
	kill 'STOP', @b2;
	kill 'CONT', @b1;
	ok( $coord->poll_query_until('pushed',
			"SELECT count(*) = 1 FROM reconcile.receipts WHERE \"cursor\" = '$obj\@1'"),
		"round $round: the coordinator committed the receipt");
	is($w2->safe_psql('pushed', 'SELECT count(*) FROM pg_prepared_xacts'), $n2,
		"round $round: worker 2 still holds its prepared transactions");
	kill_node($w2);
	if ($kill_coordinator)
	{
		kill_node($coord);
		ok(restart_node($coord), "round $round: the coordinator restarts after its local commit");
	}
	else
	{
		$session->quit;
		like($session->{stdout}, qr/committed\|500/, "round $round: the batch reports its commit");
	}
	ok(restart_node($w2), "round $round: worker 2 restarts");
	$coord->safe_psql('pushed', 'SELECT recover_prepared_transactions()');
	is($_->safe_psql('pushed', 'SELECT count(*) FROM pg_prepared_xacts'), '0',
		"round $round: " . $_->name . ': no prepared transaction left') for ($coord, $w1, $w2);
	is($coord->safe_psql('pushed', "SELECT count(*) FROM acct WHERE id LIKE '$obj-%'"), '500',
		"round $round: recovery committed worker 2's share: every row is there");
	is($coord->safe_psql('pushed', "SELECT count(*) FROM reconcile.receipts WHERE \"cursor\" = '$obj\@1'"),
		'1', "round $round: one receipt");
	is($coord->safe_psql('pushed', $batch), 'replayed|500', "round $round: the retry replays");
}
fault_after_prepare(0);
fault_after_prepare(1);

$_->stop for @nodes;
done_testing();
