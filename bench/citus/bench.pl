# Run by bench/citus/run.sh as the postgres user: one reconcile_batch on a
# plain table on one node, and on a distributed table on a coordinator and
# two workers, merged on the coordinator and merged on the workers (two
# identical targets).  Wall and CPU seconds per node (from /proc: the
# postmaster's own and reaped children's time, plus its live children's),
# the ratios, and a projection for workers of more cores.  Prints Markdown.
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
sub batch_sql
{
	my ($target, $path) = @_;
	my $opts = $path ? qq{'{"citus_merge": "$path"}'} : 'NULL';
	return "SELECT status, inserted, updated, checksum FROM reconcile_batch('$target', 'stage', '$manifest', NULL, NULL, $opts)";
}

# CPU seconds a node has used so far: its postmaster's, its reaped
# children's (backends that exited), and its live children's.
my $tck = 100;
sub node_cpu
{
	my ($node) = @_;
	my $pm = $node->{_pid};
	my $sum = 0;
	my @st = split ' ', (slurp_file("/proc/$pm/stat") =~ s/^.*\) //sr);
	$sum += $st[11] + $st[12] + $st[13] + $st[14];    # utime stime cutime cstime
	for my $c (split /\s+/, `pgrep -P $pm`)
	{
		next unless $c && -r "/proc/$c/stat";
		my @cs = split ' ', (slurp_file("/proc/$c/stat") =~ s/^.*\) //sr);
		$sum += $cs[11] + $cs[12];
	}
	return $sum / $tck;
}

sub run_batch
{
	my ($node, $sql, @all) = @_;
	# The batch's own backend stays open until its CPU is read.
	my $session = $node->background_psql('postgres');
	$session->query_safe('SELECT 1');
	my @before = map { node_cpu($_) } @all;
	my $t0 = time;
	my $out = $session->query_safe($sql);
	my $secs = time - $t0;
	my @cpu = map { node_cpu($all[$_]) - $before[$_] } 0 .. $#all;
	$session->quit;
	$out =~ s/^\s+|\s+$//g;
	return ($secs, $out, \@cpu);
}

my @result;

my $single = node('single', 0);
$single->safe_psql('postgres',
	'CREATE EXTENSION reconcile;' . sprintf($schema, '') . $load);
my ($secs, $out, $cpu) = run_batch($single, batch_sql('cust'), $single);
push @result, [ 'one node, plain table', $secs, $out, $cpu ];
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
	  . $load
	  . q{CREATE TABLE cust2 (LIKE cust INCLUDING ALL);
SELECT create_distributed_table('cust2', 'id', colocate_with => 'cust');
INSERT INTO cust2 SELECT * FROM cust;
VACUUM ANALYZE cust2;
SELECT reconcile_register('cust2', '{id}', 'version', 'is_deleted', 'h');
CHECKPOINT;});
($secs, $out, $cpu) = run_batch($coord, batch_sql('cust', 'coordinator'), @nodes);
push @result, [ 'coordinator + 2 workers (32 shards), merged on the coordinator', $secs, $out, $cpu ];
$coord->safe_psql('postgres', 'CHECKPOINT');
($secs, $out, $cpu) = run_batch($coord, batch_sql('cust2', 'workers'), @nodes);
push @result, [ 'coordinator + 2 workers (32 shards), merged on the workers', $secs, $out, $cpu ];
my $same = $coord->safe_psql('postgres',
	'SELECT count(*) FROM cust a FULL JOIN cust2 b USING (id) WHERE a IS DISTINCT FROM b');

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
	my ($ret, $summary, $err) = $coord->psql('postgres',
		qq{SELECT rows_source, rows_target, matched, mismatched FROM reconcile_diff_summary('src', 'cust', '{id}', '{"remote": "$mode"}')}
	);
	$summary = "failed: $err" if $ret != 0;
	push @diffs, [ $mode, time - $t0, $summary ];
}
$_->stop for @nodes;

# PostgreSQL::Test::Utils sends STDOUT to its log; the report goes
# where Test::More writes.
my $report = Test::More->builder->output;
print $report "\n| setup | rows staged | wall s | CPU s (node, or coordinator / worker 1 / worker 2) | receipt (status, inserted, updated, checksum) |\n|---|---:|---:|---|---|\n";
print $report sprintf("| %s | %d | %.1f | %s | %s |\n", $_->[0], $rows, $_->[1],
	join(' / ', map { sprintf('%.1f', $_) } @{ $_->[3] }), $_->[2] =~ s/\|/, /gr) for @result;
my ($plain, $onc, $onw) = @result;
my $wcpu = ($onw->[3][1] + $onw->[3][2]) / 2;
my $rest = $onw->[1] - $wcpu > $onw->[3][0] ? $onw->[1] - $wcpu : $onw->[3][0];
print $report sprintf("\nmerged on the workers / on the coordinator: wall %.2f; coordinator CPU / workers' CPU: %.3f;"
  . " workers / one node: wall %.2f\n", $onw->[1] / $onc->[1], $onw->[3][0] / ($onw->[3][1] + $onw->[3][2]),
  $onw->[1] / $plain->[1]);
print $report sprintf("projection (two workers, wall ~ CPU per worker / k cores + the rest): k = 4: %.1f s, k = 8: %.1f s"
  . " (CPU per worker %.1f s; the rest %.1f s: wall less CPU per worker, at least the coordinator's CPU)\n",
  $wcpu / 4 + $rest, $wcpu / 8 + $rest, $wcpu, $rest);
is($same, '0', 'both Citus paths leave the same target');
is($onw->[2], $onc->[2], 'both Citus paths give the same receipt');
is($onw->[2], $plain->[2], 'and the same as one node');
print $report "\n| diff of a co-located pair (coordinator + 2 workers) | seconds | source rows, target rows, matched, mismatched |\n|---|---:|---|\n";
print $report sprintf("| %s | %.1f | %s |\n", $_->[0], $_->[1], $_->[2] =~ s/\|/, /gr) for @diffs;
is($diffs[1][2], $diffs[0][2], 'the checksum diff finds what the full read finds');
ok(1, 'benchmark ran');
done_testing();
