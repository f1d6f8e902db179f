# reconcile_repair on a Citus cluster (a coordinator and a worker started
# here): a hash-distributed plain target and a distributed source are
# repaired by plain SQL that Citus routes, and the same diff then finds
# nothing; an application update racing the repair of the distributed
# target survives it; a registered Citus target is refused (0A000) before
# anything is written.  Skipped when Citus is not installed in this
# PostgreSQL.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CitusCluster;

plan skip_all => CitusCluster::missing() if CitusCluster::missing();

my ($coord, $w1) = CitusCluster::start(
	names => [ 'coordinator', 'worker1' ],
	conf  => "citus.shard_count = 4\n");

my $damage = q{DELETE FROM %1$s WHERE id IN (5, 77); UPDATE %1$s SET name = 'x' WHERE id IN (6, 50);
UPDATE %1$s SET name = NULL WHERE id = 7; INSERT INTO %1$s (id, name) VALUES (200, 'extra'), (201, NULL);};
$coord->safe_psql('postgres', q{
CREATE TABLE src (id int PRIMARY KEY, name text);
INSERT INTO src SELECT g, 'n' || g FROM generate_series(1, 100) g;
CREATE TABLE dtgt (id int PRIMARY KEY, name text);
INSERT INTO dtgt SELECT * FROM src;
SELECT create_distributed_table('dtgt', 'id');
CREATE TABLE dsrc (LIKE src INCLUDING ALL);
INSERT INTO dsrc SELECT * FROM src;
SELECT create_distributed_table('dsrc', 'id');
CREATE TABLE ltgt (LIKE src INCLUDING ALL);
INSERT INTO ltgt SELECT * FROM src;
CREATE TABLE rtgt (id int PRIMARY KEY, name text, version bigint NOT NULL DEFAULT 1,
                   is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea);
INSERT INTO rtgt (id, name) SELECT * FROM src;
SELECT create_distributed_table('rtgt', 'id');
SELECT reconcile_register(target => 'rtgt', key_columns => '{id}', version_column => 'version',
    deleted_column => 'is_deleted', hash_column => 'payload_hash');
});
$coord->safe_psql('postgres', sprintf($damage, $_)) for ('dtgt', 'ltgt', 'rtgt');

foreach my $case ([ 'src', 'dtgt', '{}' ], [ 'dsrc', 'ltgt', '{}' ],
	[ 'src', 'dtgt', '{"compare": ["name"], "extra": "keep"}' ])
{
	my ($s, $t, $o) = @$case;
	(my $d = $o) =~ s/, "extra": "keep"//;
	my $before = $coord->safe_psql('postgres', "SELECT count(*) FROM reconcile_diff('$s', '$t', '{id}', '$d')");
	is($coord->safe_psql('postgres', qq{
SELECT string_agg(DISTINCT outcome, ',') FROM reconcile_repair('$s', '$t', '{id}', '$o')}),
		$o =~ /keep/ ? 'applied,kept' : 'applied', "$s into $t, $o: every action applied ($before findings)");
	is($coord->safe_psql('postgres', "SELECT count(*) FROM reconcile_diff('$s', '$t', '{id}', '$d')"),
		$o =~ /keep/ ? '2' : '0', "$s into $t, $o: the same diff finds nothing after the repair but what it kept");
	$coord->safe_psql('postgres', sprintf($damage, $t)) if $t eq 'dtgt' && $o eq '{}';
}
is($coord->safe_psql('postgres', q{
SELECT string_agg(DISTINCT outcome, ',') FROM reconcile_repair('src', 'dtgt', '{id}')}), 'applied',
	'the extra rows kept are deleted by the next repair');

# An application's update committed while the repair waits survives it.
$coord->safe_psql('postgres', "UPDATE dtgt SET name = 'stale' WHERE id IN (10, 11)");
my $app = $coord->background_psql('postgres');
$app->query_safe("BEGIN; UPDATE dtgt SET name = 'app' WHERE id = 10;");
my $repair = $coord->background_psql('postgres');
$repair->query_until(qr/started/, q{\echo started
SELECT string_agg(key::text || ':' || outcome, ' ' ORDER BY key::text) FROM reconcile_repair('src', 'dtgt', '{id}');
\echo done
});
$coord->poll_query_until('postgres',
	"SELECT count(*) > 0 FROM pg_locks WHERE NOT granted AND relation = 'dtgt'::regclass")
  or die 'the repair did not wait for the application';
$app->query_safe('COMMIT');
my $out = $repair->query_until(qr/done/, '');
like($out, qr/\{"id": 10\}:changed_since_diff \{"id": 11\}:applied/,
	'the application update racing the repair is reported changed_since_diff, the other key applied');
is($coord->safe_psql('postgres', "SELECT string_agg(name, ',' ORDER BY id) FROM dtgt WHERE id IN (10, 11)"),
	'app,n11', 'and the application row survives');
$app->quit;
$repair->quit;

my ($rc, $o, $err) = $coord->psql('postgres',
	"SELECT * FROM reconcile_repair('src', 'rtgt', '{id}')");
like($err, qr/ERROR:  reconcile_repair does not support a registered target managed by Citus yet: "rtgt"/,
	'a registered Citus target is refused');
is($coord->safe_psql('postgres', q{SELECT (SELECT count(*) FROM rtgt WHERE id IN (5, 200)) || '/' ||
    (SELECT count(*) FROM reconcile.receipts)}), '1/0', 'and nothing was written');

done_testing();
