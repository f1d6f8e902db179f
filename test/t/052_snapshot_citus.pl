# Snapshot batches (issue 23, point 2) on tables Citus manages are not
# supported yet: a batch with option snapshot into a hash-distributed, a
# reference or a Citus local table is refused with 0A000 before anything
# is read or written, naming the table; the same batch without the option
# loads as usual (merged on the coordinator: on this one-node cluster, where
# the coordinator holds the shards, the merge on the workers reads no
# staged rows, with or without snapshots; 050_citus.pl covers it on two
# workers).  One Citus node.
#
# Skipped when Citus is not installed in this PostgreSQL.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CitusCluster;

plan skip_all => CitusCluster::missing() if CitusCluster::missing();

my ($node) = CitusCluster::start(names => ['coordinator'], max_prepared_transactions => 20);

my %make = (
	distributed => "SELECT create_distributed_table('%s', 'id')",
	reference   => "SELECT create_reference_table('%s')",
	local       => "SELECT citus_add_local_table_to_metadata('%s')");
for my $kind (sort keys %make)
{
	my $t = "t_$kind";
	my $stage = "stage_$kind";
	# A distributed target's stage is distributed with it (citus_merge.c).
	my $colocate = $kind eq 'distributed' ?
	  "SELECT create_distributed_table('$stage', 'id', colocate_with => '$t');" : '';
	$node->safe_psql('postgres', qq{
CREATE TABLE $t (id int PRIMARY KEY, val text, v bigint NOT NULL, del boolean NOT NULL DEFAULT false, h bytea);
} . sprintf($make{$kind}, $t) . qq{;
SELECT reconcile_register('$t', '{id}', 'v', 'del', 'h');
CREATE TABLE $stage (object_key text, source_row bigint, operation text, id int, val text, v bigint);
$colocate
INSERT INTO $stage VALUES ('o', 1, 'UPSERT', 1, 'a', 1), ('o', 2, 'UPSERT', 2, 'b', 1);
});
	my ($ret, $out, $err) = $node->psql('postgres', qq{
SELECT * FROM reconcile_batch('$t', '$stage',
    '[{"object_key":"o","version_id":"1","content_hash":"h","rows":2}]',
    options => '{"snapshot": {"version": 5}}');
}, extra_params => ['-v', 'VERBOSITY=verbose']);
	isnt($ret, 0, "$kind: a snapshot batch fails");
	like($err, qr/0A000: option "snapshot" of reconcile_batch is not supported yet for table "$t", which Citus manages/,
		"$kind: refused with 0A000, naming the table");
	is($node->safe_psql('postgres', qq{
SELECT (SELECT count(*) FROM $t) || '/' || (SELECT count(*) FROM reconcile.receipts WHERE target = '$t'::regclass)}),
		'0/0', "$kind: nothing written");
	is($node->safe_psql('postgres', qq{
SELECT status || '/' || inserted FROM reconcile_batch('$t', '$stage',
    '[{"object_key":"o","version_id":"1","content_hash":"h","rows":2}]',
    options => '{"citus_merge": "coordinator"}')}),
		'committed/2', "$kind: the same batch without snapshot loads");
}

$node->stop;
done_testing();
