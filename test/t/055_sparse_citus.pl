# Sparse updates (option "partial") on Citus: a batch into a table Citus
# manages is refused with 0A000 before anything is read or written, on a
# hash-distributed target (whichever citus_merge says) and on a reference
# table, from the batch's options and from the registration's; the same
# target still loads whole rows.  (Sparse rows merge over the target's row
# as the coordinator's merge probes it; the coordinator's shell holds no
# rows and the workers' merge is SQL: docs/loader.md, "Sparse updates".)
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CitusCluster;

plan skip_all => CitusCluster::missing() if CitusCluster::missing();

my ($coord, $w1) = CitusCluster::start(names => [ 'coordinator', 'worker1' ]);
$coord->safe_psql('postgres', q{
CREATE TABLE dist (id int PRIMARY KEY, name text, city text, v bigint NOT NULL,
                   del boolean NOT NULL DEFAULT false, h bytea);
SELECT create_distributed_table('dist', 'id');
CREATE TABLE ref (id int PRIMARY KEY, name text, city text, v bigint NOT NULL,
                  del boolean NOT NULL DEFAULT false, h bytea);
SELECT create_reference_table('ref');
SELECT reconcile_register('dist', '{id}', 'v', 'del', 'h');
SELECT reconcile_register('ref', '{id}', 'v', 'del', 'h', options => '{"partial": true}');
CREATE TABLE st (object_key text, source_row bigint, operation text, id text, name text,
                 city text, v text, present_columns text[]);
INSERT INTO st VALUES ('o1', 1, 'UPSERT', '1', 'Ana', 'Oslo', '1', NULL),
                      ('o1', 2, 'UPSERT', '2', NULL, 'Rome', '1', '{city}');
CREATE TABLE whole (object_key text, source_row bigint, operation text, id text, name text,
                    city text, v text);
INSERT INTO whole VALUES ('w1', 1, 'UPSERT', '1', 'Ana', 'Oslo', '1');
CREATE TABLE whole_dist AS SELECT object_key, source_row, operation, id::int AS id, name, city, v FROM whole;
SELECT create_distributed_table('whole_dist', 'id', colocate_with => 'dist');
});

my $manifest = q{'[{"object_key":"o1","version_id":"1","content_hash":"h","rows":2}]'};
for my $case (
	[ 'dist', q{'{"partial": true}'}, 'batch option' ],
	[ 'dist', q{'{"partial": true, "citus_merge": "workers"}'}, 'batch option, citus_merge workers' ],
	[ 'dist', q{'{"partial": true, "citus_merge": "coordinator"}'}, 'batch option, citus_merge coordinator' ],
	[ 'ref', q{'{}'}, 'registration option, reference table' ])
{
	my ($tgt, $opts, $what) = @$case;
	my ($rc, $out, $err) = $coord->psql('postgres',
		"\\set VERBOSITY verbose\nSELECT status FROM reconcile_batch('$tgt', 'st', $manifest, options => $opts)");
	like($err, qr/ERROR:  0A000: partial batches into table "$tgt", which Citus manages, are not supported yet/,
		"$what: refused with 0A000");
	is($coord->safe_psql('postgres',
			"SELECT (SELECT count(*) FROM $tgt) + (SELECT count(*) FROM reconcile.receipts WHERE target = '$tgt'::regclass)"),
		'0', "$what: nothing written");
}

# Whole rows still load into the same targets.
for my $case ([ 'dist', 'whole_dist' ], [ 'ref', 'whole' ])
{
	my ($tgt, $stage) = @$case;
	is($coord->safe_psql('postgres',
			qq{SELECT status || '/' || inserted FROM reconcile_batch('$tgt', '$stage',
			   '[{"object_key":"w1","version_id":"1","content_hash":"h","rows":1}]',
			   options => '{"partial": false}')}),
		'committed/1', "$tgt: a whole-row batch commits");
}

done_testing();
