# The TAP plumbing works: a throwaway node can load the installed extension.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('main');
$node->init;
$node->start;

$node->safe_psql('postgres', 'CREATE EXTENSION reconcile');
is( $node->safe_psql(
		'postgres',
		"SELECT extversion FROM pg_extension WHERE extname = 'reconcile'"),
	'1.2',
	'reconcile 1.2 is installed in a fresh node');

$node->stop;
done_testing();
