# Run by bench/citus/run.sh as the postgres user: one reconcile_batch on a
# plain table on one node, and on a distributed table on a coordinator and
# two workers.  Prints a Markdown table.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Time::HiRes qw(time);
use Test::More;

my $rows = $ENV{BENCH_ROWS} || 1000000;
my $half = int($rows / 2);

# Settings of the loader benchmark's cluster (bench/loader/run.sh).
my $conf = qq{
shared_buffers = 512MB
max_wal_size = 4GB
checkpoint_timeout = 30min
work_mem = 4MB
fsync = off
synchronous_commit = off
log_statement = none
log_min_messages = warning
};

sub node
{
	my ($name, $citus) = @_;
	my $n = PostgreSQL::Test::Cluster->new($name);
	$n->init;
	$n->append_conf('postgresql.conf', $conf);
	$n->append_conf(
		'postgresql.conf', qq{
shared_preload_libraries = 'citus'
listen_addresses = '127.0.0.1'
max_prepared_transactions = 50
citus.node_conninfo = 'sslmode=disable'
}) if $citus;
	$n->start;
	$n->safe_psql('postgres', 'CREATE EXTENSION citus') if $citus;
	return $n;
}

# The target holds keys 1..rows at version 1; the batch updates the upper
# half (version 2) and adds as many new keys.
my $schema = q{
CREATE TABLE cust (id bigint PRIMARY KEY, name text, city text, balance numeric,
                   version bigint NOT NULL, is_deleted boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE stage (object_key text, source_row bigint, operation text, id bigint,
                    version text, name text, city text, balance text);
%s
SELECT reconcile_register('cust', '{id}', 'version', 'is_deleted', 'h');
};
my $load = qq{
INSERT INTO cust SELECT g, 'name ' || g, 'city ' || (g % 100), g * 1.5, 1, false, NULL
  FROM generate_series(1, $rows) g;
INSERT INTO stage SELECT 'o1', g, 'UPSERT', $half + g, '2', 'new name ' || g, 'city ' || (g % 7), (g * 2.5)::text
  FROM generate_series(1, $rows) g;
VACUUM ANALYZE cust;
VACUUM ANALYZE stage;
};
my $manifest = qq{[{"object_key":"o1","version_id":"1","content_hash":"h","rows":$rows}]};
my $batch = "SELECT status, inserted, updated FROM reconcile_batch('cust', 'stage', '$manifest')";

sub run_batch
{
	my ($node) = @_;
	my $t0 = time;
	my $out = $node->safe_psql('postgres', $batch);
	return (time - $t0, $out);
}

my @result;

my $single = node('single', 0);
$single->safe_psql('postgres',
	'CREATE EXTENSION reconcile;' . sprintf($schema, '') . $load);
my ($secs, $out) = run_batch($single);
push @result, [ 'one node, plain table', $secs, $out ];
$single->stop;

my @nodes = map { node($_, 1) } ('coordinator', 'worker1', 'worker2');
my $coord = $nodes[0];
$coord->safe_psql('postgres',
	"SELECT citus_set_coordinator_host('127.0.0.1', " . $coord->port . ")");
$coord->safe_psql('postgres', "SELECT citus_add_node('127.0.0.1', " . $_->port . ")")
  for @nodes[ 1, 2 ];
$coord->safe_psql(
	'postgres',
	'CREATE EXTENSION reconcile;'
	  . sprintf($schema,
		"SELECT create_distributed_table('cust', 'id'); SELECT create_distributed_table('stage', 'id', colocate_with => 'cust');"
	  )
	  . $load);
($secs, $out) = run_batch($coord);
push @result, [ 'coordinator + 2 workers, distributed (32 shards)', $secs, $out ];

# The diff of a co-located pair: the loaded target against a copy with a
# few rows changed, read row by row ("remote": "pull", as before 1.1's
# Citus checksums) and by checksums of key ranges computed on the shards.
$coord->safe_psql(
	'postgres', q{
CREATE TABLE src (LIKE cust);
SELECT create_distributed_table('src', 'id', colocate_with => 'cust');
INSERT INTO src SELECT * FROM cust;
UPDATE src SET name = 'changed ' || id::text WHERE id % 100000 = 7;
VACUUM ANALYZE src;
VACUUM ANALYZE cust;
});
my @diffs;
for my $mode ('pull', 'checksum')
{
	my $t0 = time;
	my $summary = $coord->safe_psql('postgres',
		qq{SELECT rows_source, rows_target, matched, mismatched FROM reconcile_diff_summary('src', 'cust', '{id}', '{"remote": "$mode"}')}
	);
	push @diffs, [ $mode, time - $t0, $summary ];
}
$_->stop for @nodes;

# PostgreSQL::Test::Utils sends STDOUT to its log; the report goes
# where Test::More writes.
my $report = Test::More->builder->output;
print $report "\n| setup | rows staged | seconds | receipt (status, inserted, updated) |\n|---|---:|---:|---|\n";
print $report sprintf("| %s | %d | %.1f | %s |\n", $_->[0], $rows, $_->[1], $_->[2] =~ s/\|/, /gr) for @result;
print $report "\n| diff of a co-located pair (coordinator + 2 workers) | seconds | source rows, target rows, matched, mismatched |\n|---|---:|---|\n";
print $report sprintf("| %s | %.1f | %s |\n", $_->[0], $_->[1], $_->[2] =~ s/\|/, /gr) for @diffs;
is($diffs[1][2], $diffs[0][2], 'the checksum diff finds what the full read finds');
ok(1, 'benchmark ran');
done_testing();
