# delete_mode 'remove' across a dump and restore, and on Citus.
#
# pg_dump keeps a target's kept removals (an ordinary table of schema
# reconcile, named by reconcile.targets.removed_table): in the restored
# copy a late lower version of a removed key is still stale, a higher one
# re-creates the row, and dropping the target drops its kept removals (the
# dependency is not dumped; the sql_drop trigger does it).  On Citus the
# mode is refused (0A000), at registration of a Citus table and at the
# batch of a table distributed after it was registered.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CitusCluster;

my $old = PostgreSQL::Test::Cluster->new('remove_old');
$old->init;
$old->start;
my $new = PostgreSQL::Test::Cluster->new('remove_new');
$new->init;
$new->start;

my $setup = q{
CREATE TABLE acct (id int PRIMARY KEY, name text, v bigint NOT NULL,
                   gone boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE stage (object_key text, source_row int, operation text, id int, name text, v bigint);
CREATE FUNCTION load(o text) RETURNS text LANGUAGE sql AS $$
    SELECT format('%s i%s u%s d%s s%s', status, inserted, updated, deleted, stale)
      FROM reconcile_batch('acct', 'stage', jsonb_build_array(jsonb_build_object('object_key', o,
           'version_id', '1', 'content_hash', 'h', 'rows', (SELECT count(*) FROM stage WHERE object_key = o))))
$$;
INSERT INTO stage VALUES ('o1', 1, 'UPSERT', 1, 'Ana', 1), ('o1', 2, 'UPSERT', 2, 'Bo', 1),
                         ('o2', 1, 'DELETE', 1, NULL, 5), ('o2', 2, 'DELETE', 3, NULL, 2),
                         ('o3', 1, 'UPSERT', 1, 'Ana late', 4), ('o3', 2, 'UPSERT', 3, 'Cy', 3);
};

$old->safe_psql('postgres', 'CREATE DATABASE app');
$old->safe_psql('app', qq{
CREATE EXTENSION reconcile;
$setup
SELECT reconcile_register('acct', '{id}', 'v', 'gone', 'h', options => '{"delete_mode": "remove"}');
SELECT load('o1');
SELECT load('o2');
});
is($old->safe_psql('app', q{SELECT string_agg(id || ':' || name, ',' ORDER BY id) FROM acct}),
	'2:Bo', 'the DELETEs removed key 1 and kept key 3 out');

my $dump = $old->basedir . '/app.dump';
$old->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $old->connstr('app') ],
	'pg_dump of a database with kept removals');
$new->safe_psql('postgres', 'CREATE DATABASE app');
$new->command_ok(
	[ 'pg_restore', '--exit-on-error', '-d', $new->connstr('app'), $dump ],
	'pg_restore into the other cluster');

my $kept = q{SELECT pg_catalog.format('SELECT string_agg(id || '':v'' || v, '','' ORDER BY id) FROM %s', removed_table)
               FROM reconcile.targets WHERE target = 'acct'::regclass};
my $kept_sql = $new->safe_psql('app', $kept);
is($new->safe_psql('app', $kept_sql), '1:v5,3:v2',
	'the restored registration names the restored kept removals');
is($new->safe_psql('app', q{SELECT load('o3')}), 'committed i1 u0 d0 s1',
	'in the restored copy a late lower version stays stale, a higher one re-creates the key');
is($new->safe_psql('app', q{SELECT string_agg(id || ':' || name, ',' ORDER BY id) FROM acct}),
	'2:Bo,3:Cy', 'and the target holds what the rule says');
is($new->safe_psql('app', $kept_sql), '1:v5', 'key 3 is no longer kept as removed');

my $companion = $new->safe_psql('app',
	q{SELECT removed_table::oid FROM reconcile.targets WHERE target = 'acct'::regclass});
$new->safe_psql('app', 'DROP FUNCTION load(text); DROP TABLE acct');
is($new->safe_psql('app', "SELECT count(*) FROM pg_class WHERE oid = $companion"),
	'0', 'dropping the restored target drops its kept removals');
is($new->safe_psql('app', 'SELECT count(*) FROM reconcile.targets'), '0',
	'and its registration');

$old->stop;
$new->stop;

# ---- Citus ----
SKIP:
{
	skip CitusCluster::missing(), 3 if CitusCluster::missing();

	my @nodes = CitusCluster::start(
		names                     => [ 'remove_coordinator', 'remove_worker' ],
		max_prepared_transactions => 50,
		conf                      => "citus.shard_count = 4\n");
	my ($coord, $w1) = @nodes;
	$coord->safe_psql('postgres', "$setup
        CREATE TABLE dist (LIKE acct INCLUDING ALL);
        SELECT create_distributed_table('dist', 'id');");

	my ($ret, $out, $err) = $coord->psql('postgres',
		q{SELECT reconcile_register('dist', '{id}', 'v', 'gone', 'h', options => '{"delete_mode": "remove"}')},
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/0A000: delete_mode "remove" is not supported for table "dist", which Citus manages/,
		'registering a Citus table with delete_mode remove is refused with 0A000');

	$coord->safe_psql('postgres', q{
        SELECT reconcile_register('acct', '{id}', 'v', 'gone', 'h', options => '{"delete_mode": "remove"}');
        SELECT load('o1');
        SELECT reconcile_purge_tombstones('acct', older_than => '0');
        SELECT create_distributed_table('acct', 'id');
        SELECT create_distributed_table('stage', 'id', colocate_with => 'acct');});
	($ret, $out, $err) = $coord->psql('postgres',
		q{SELECT status FROM reconcile_batch('acct', 'stage',
              '[{"object_key": "o2", "version_id": "1", "content_hash": "h", "rows": 2}]')},
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/0A000: delete_mode "remove" is not supported for table "acct", which Citus manages/,
		'a batch into a target distributed since its registration with delete_mode remove is refused with 0A000');
	is($coord->safe_psql('postgres', q{SELECT string_agg(id || ':' || name, ',' ORDER BY id) FROM acct}),
		'1:Ana,2:Bo', 'and wrote nothing');
	$_->stop for @nodes;
}

done_testing();
