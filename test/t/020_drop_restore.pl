# A dropped target leaves nothing to restore: its state is not dumped, so
# that in a restored copy no row names the unrelated table that got the
# dropped table's OID there.  One target is dropped under 1.0 (its orphaned
# state is removed by ALTER EXTENSION ... UPDATE), one under 1.1 (the
# sql_drop event trigger removes it).  In the second cluster, unrelated
# tables are made to take both OIDs before the dump is restored; a role
# allowed to read only them sees no reject, receipt or conflict.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $old = PostgreSQL::Test::Cluster->new('old');
$old->init;
$old->start;
my $new = PostgreSQL::Test::Cluster->new('new');
$new->init;
$new->start;

my $target_ddl = q{(id int PRIMARY KEY, ssn text, v bigint NOT NULL,
    gone boolean NOT NULL DEFAULT false, h bytea)};
# Each load leaves a receipt, a cursor, a reject holding an SSN-like raw
# value and two conflicts.
sub load_sql
{
	my ($table, $hash) = @_;
	return qq{
SELECT reconcile_register('$table', '{id}', 'v', 'gone', 'h');
SELECT status FROM reconcile_batch('$table', 'stage',
    '[{"object_key":"o","version_id":"1","content_hash":"$hash","rows":4}]', 'feed', 'o');
};
}

$old->safe_psql('postgres', 'CREATE DATABASE app');
$old->safe_psql(
	'app', qq{
CREATE EXTENSION reconcile VERSION '1.0';
CREATE TABLE stage (object_key text, source_row int, operation text, id text, ssn text, v text);
INSERT INTO stage VALUES ('o', 1, 'UPSERT', '1', '123-45-6789', '1'),
                         ('o', 2, 'UPSERT', '2', '987-65-4321', 'bad'),
                         ('o', 3, 'UPSERT', '3', 'a', '1'),
                         ('o', 4, 'UPSERT', '3', 'b', '1');
CREATE TABLE kept $target_ddl;
CREATE TABLE dropped_1_0 $target_ddl;
} . load_sql('kept', 'h1') . load_sql('dropped_1_0', 'h2'));
my $oid_1_0 = $old->safe_psql('app', q{SELECT 'dropped_1_0'::regclass::oid});
$old->safe_psql('app', 'DROP TABLE dropped_1_0');
is( $old->safe_psql(
		'app',
		"SELECT count(*) FROM reconcile.rejects WHERE target::oid = $oid_1_0"),
	'1',
	'under 1.0 a dropped target leaves its rejects behind');

$old->safe_psql('app', 'ALTER EXTENSION reconcile UPDATE');
$old->safe_psql('app',
	"CREATE TABLE dropped_1_1 $target_ddl;" . load_sql('dropped_1_1', 'h3'));
my $oid_1_1 = $old->safe_psql('app', q{SELECT 'dropped_1_1'::regclass::oid});
$old->safe_psql('app', 'DROP TABLE dropped_1_1');

my $left = q{SELECT count(*) FROM (
    SELECT target FROM reconcile.targets UNION ALL SELECT target FROM reconcile.receipts
    UNION ALL SELECT target FROM reconcile.batch_objects UNION ALL SELECT target FROM reconcile.cursors
    UNION ALL SELECT target FROM reconcile.rejects UNION ALL SELECT target FROM reconcile.conflicts
    UNION ALL SELECT target FROM reconcile.target_rules UNION ALL SELECT target FROM reconcile.diff_results
    UNION ALL SELECT source FROM reconcile.diff_results UNION ALL SELECT target FROM reconcile.diff_runs
    UNION ALL SELECT source FROM reconcile.diff_runs) s
  WHERE NOT EXISTS (SELECT FROM pg_class c WHERE c.oid = s.target)};
is($old->safe_psql('app', $left),
	'0', 'no state row names a relation that does not exist');

my $dump = $old->basedir . '/app.dump';
$old->command_ok([ 'pg_dump', '-Fc', '-f', $dump, '-d', $old->connstr('app') ],
	'pg_dump of the database');

# In the other cluster, unrelated tables take the dropped tables' OIDs:
# large objects use up the OIDs below each, then CREATE TABLE takes it.
$new->safe_psql('postgres', 'CREATE DATABASE app');
for my $oid ($oid_1_0, $oid_1_1)
{
	$new->safe_psql(
		'app', qq{
DO \$\$
DECLARE o oid;
BEGIN
    LOOP
        o := pg_catalog.lo_create(0);
        EXIT WHEN o >= $oid - 1;
    END LOOP;
    IF o <> $oid - 1 THEN
        RAISE EXCEPTION 'OID % passed, wanted %', o, $oid - 1;
    END IF;
END
\$\$;
CREATE TABLE other_$oid (id int PRIMARY KEY, note text);
});
	is($new->safe_psql('app', "SELECT 'other_$oid'::regclass::oid"),
		$oid, "an unrelated table has OID $oid in the other cluster");
}

$new->command_ok(
	[ 'pg_restore', '--exit-on-error', '-d', $new->connstr('app'), $dump ],
	'pg_restore into the other cluster');

is( $new->safe_psql(
		'app', q{SELECT extversion FROM pg_extension WHERE extname = 'reconcile'}),
	'1.2',
	'the restored extension is 1.2');
is( $new->safe_psql(
		'app', q{SELECT string_agg(DISTINCT target::text, ',') FROM reconcile.rejects}),
	'kept',
	'the restored rejects are those of kept, by name');
is( $new->safe_psql(
		'app', q{SELECT string_agg(DISTINCT target::text, ',') FROM reconcile.receipts}),
	'kept',
	'and so are the receipts');

$new->safe_psql(
	'app', qq{
CREATE ROLE reader;
GRANT SELECT ON other_$oid_1_0, other_$oid_1_1 TO reader;
});
is( $new->safe_psql(
		'app', q{SET ROLE reader;
SELECT (SELECT count(*) FROM reconcile.rejects) + (SELECT count(*) FROM reconcile.receipts)
     + (SELECT count(*) FROM reconcile.conflicts) + (SELECT count(*) FROM reconcile.cursors)
     + (SELECT count(*) FROM reconcile.targets)}),
	'0',
	'a reader of the unrelated tables sees no state of the dropped ones');
is( $new->safe_psql(
		'app', qq{SELECT count(*) FROM (
    SELECT target FROM reconcile.receipts UNION ALL SELECT target FROM reconcile.rejects
    UNION ALL SELECT target FROM reconcile.conflicts UNION ALL SELECT target FROM reconcile.cursors
    UNION ALL SELECT target FROM reconcile.targets UNION ALL SELECT target FROM reconcile.batch_objects) s
  WHERE target::oid IN ($oid_1_0, $oid_1_1)}),
	'0',
	'no restored state row names the unrelated tables');

$old->stop;
$new->stop;
done_testing();
