# A Citus cluster for the TAP files: a coordinator and its workers, each a
# PostgreSQL::Test::Cluster started here, talking over loopback TCP (trust
# authentication comes from initdb).
#
#   use FindBin;
#   use lib $FindBin::RealBin;
#   use CitusCluster;
#   plan skip_all => CitusCluster::missing() if CitusCluster::missing();
#   my ($coord, $w1) = CitusCluster::start(names => [ 'coordinator', 'worker1' ]);
#
# (use lib $FindBin::RealBin finds this file both in tools/test.sh's copy
# of test/t and when a file is run from the repository.)
package CitusCluster;

use strict;
use warnings;
use PostgreSQL::Test::Cluster;

# The reason to skip when Citus is not installed in the PostgreSQL on PATH,
# else undef.
sub missing
{
	my $pkglibdir = `pg_config --pkglibdir`;
	chomp $pkglibdir;
	return undef if -f "$pkglibdir/citus.so";
	return "Citus is not installed in this PostgreSQL ($pkglibdir/citus.so is missing; "
	  . "tools/setup.sh builds it, see docs/citus.md)";
}

# start(names => [coordinator, worker...], ...): the nodes, coordinator
# first, each with CREATE EXTENSION citus, the workers added to the
# coordinator, then CREATE EXTENSION reconcile on the coordinator (Citus
# propagates it to the workers).  Options:
#   max_prepared_transactions  (default 100)
#   conf         more postgresql.conf lines for every node
#   worker_conf  more postgresql.conf lines for the workers only
#   reconcile    0: do not create extension reconcile
# With one name the coordinator is the only node and holds the shards.
sub start
{
	my %args = @_;
	my @names = @{ $args{names} };
	my $mpt = $args{max_prepared_transactions} // 100;
	my @nodes;
	for my $i (0 .. $#names)
	{
		my $n = PostgreSQL::Test::Cluster->new($names[$i]);
		$n->init;
		$n->append_conf(
			'postgresql.conf', qq{
shared_preload_libraries = 'citus'
listen_addresses = '127.0.0.1'
max_prepared_transactions = $mpt
citus.node_conninfo = 'sslmode=disable'
} . ($args{conf} // ''));
		$n->append_conf('postgresql.conf', $args{worker_conf})
		  if $i > 0 && defined $args{worker_conf};
		$n->start;
		$n->safe_psql('postgres', 'CREATE EXTENSION citus');
		push @nodes, $n;
	}
	my ($coord, @workers) = @nodes;
	$coord->safe_psql('postgres',
		"SELECT citus_set_coordinator_host('127.0.0.1', " . $coord->port . ")");
	$coord->safe_psql('postgres', "SELECT citus_add_node('127.0.0.1', " . $_->port . ")")
	  for @workers;
	$coord->safe_psql('postgres',
		"SELECT citus_set_node_property('127.0.0.1', " . $coord->port . ", 'shouldhaveshards', true)")
	  unless @workers;
	$coord->safe_psql('postgres', 'CREATE EXTENSION reconcile')
	  unless defined $args{reconcile} && !$args{reconcile};
	return @nodes;
}

1;
