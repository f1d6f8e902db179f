# reconcile_diff_totals with a Citus-distributed side (issue 24, point 3):
# the totals equal those of two local tables, and each shard is aggregated
# on its worker: the workers receive GROUP BY queries on the shards, never
# the shards' rows.  And normalised values (point 5) on the Citus checksum
# path.
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
	names                     => [ 'tcoordinator', 'tworker1' ],
	max_prepared_transactions => 20,
	conf                      => "log_statement = 'all'\n");
$coord->safe_psql('postgres', q{
CREATE TABLE led (id bigint PRIMARY KEY, day date, cur text, amount numeric(12,2));
INSERT INTO led SELECT g, CASE WHEN g % 97 = 0 THEN NULL ELSE date '2026-11-01' + (g % 30) END,
    (ARRAY['EUR','USD','GBP'])[1 + g % 3], (g % 1000) / 10.0
FROM generate_series(1, 5000) g;
CREATE TABLE led_dist AS SELECT * FROM led;
ALTER TABLE led_dist ADD PRIMARY KEY (id);
SELECT create_distributed_table('led_dist', 'id', shard_count => 4);
UPDATE led SET amount = amount + 0.01 WHERE id IN (5, 1234);
DELETE FROM led WHERE id = 194;
INSERT INTO led VALUES (9001, NULL, 'CHF', 2.00);
-- the same rows as led_dist, in a local table
CREATE TABLE led_plain AS SELECT * FROM led_dist;
});

my $q = sub {
	my ($s, $t, $opts) = @_;
	return qq{SELECT string_agg(row(d.*)::text, E'\\n' ORDER BY row(d.*)::text COLLATE "C")
FROM reconcile_diff_totals('$s', '$t', '{day,cur}', '{"amount": ["sum", "max"], "id": ["min"]}', '$opts') d};
};
foreach my $opts ('{"include_matches": true}', '{"then_rows": true, "key_columns": ["id"]}')
{
	my $dist = $coord->safe_psql('postgres', $q->('led_dist', 'led', $opts));
	is($dist, $coord->safe_psql('postgres', $q->('led_plain', 'led', $opts)),
		"distributed source, $opts: the totals of a local copy");
	is($coord->safe_psql('postgres', $q->('led', 'led_dist', $opts)),
		$coord->safe_psql('postgres', $q->('led', 'led_plain', $opts)),
		"distributed target, $opts: the totals of a local copy");
	like($dist, qr/MISMATCH/, "$opts: the differing groups found");
}

# What the worker was sent: GROUP BY queries on the shards.
my $log = slurp_file($w1->logfile);
my @shard_reads = ($log =~ /(?:statement|execute <unnamed>): (SELECT [^\n]*led_dist_\d+[^\n]*)/g);
my @totals = grep { /count\(\*\)/ } @shard_reads;
ok(scalar(@totals) >= 4, 'each shard aggregated on the worker (' . scalar(@totals) . ' queries)');
like($_, qr/GROUP BY/, "shard query groups there: " . substr($_, 0, 160)) for @totals[0 .. 3];

# Normalised values with a distributed side: the checksums (computed on
# the workers for trim, case_insensitive and timestamp_precision, whose
# functions are immutable; relative_tolerance has no bucket) or the fall
# back find what reading every row finds.
$coord->safe_psql('postgres', q{
ALTER TABLE led_dist ADD COLUMN at timestamp;
UPDATE led_dist SET at = timestamp '2026-11-01' + id * interval '1 minute';
CREATE TABLE led_norm AS SELECT * FROM led_dist;
UPDATE led_norm SET cur = lower(cur) WHERE id % 50 = 1;
UPDATE led_norm SET cur = ' ' || cur WHERE id % 70 = 2;
UPDATE led_norm SET at = at + interval '0.3 second' WHERE id % 30 = 3;
UPDATE led_norm SET amount = amount * 1.0001 WHERE id % 40 = 4;
UPDATE led_norm SET amount = amount + 7 WHERE id IN (10, 20);
});
foreach my $opts ('{"trim": ["cur"]}', '{"case_insensitive": ["cur"]}',
	'{"trim": ["cur"], "case_insensitive": ["cur"]}', '{"timestamp_precision": {"at": "second"}}',
	'{"relative_tolerance": {"amount": 0.001}}')
{
	foreach my $pair ([ 'led_dist', 'led_norm' ], [ 'led_norm', 'led_dist' ])
	{
		my ($s, $t) = @$pair;
		is( $coord->safe_psql('postgres', qq{
WITH ck AS (SELECT * FROM reconcile_diff('$s', '$t', '{id}', '$opts'::jsonb || '{"remote": "auto"}')),
     pl AS (SELECT * FROM reconcile_diff('$s', '$t', '{id}', '$opts'::jsonb || '{"remote": "pull"}'))
SELECT count(*) FROM ((TABLE ck EXCEPT ALL TABLE pl) UNION ALL (TABLE pl EXCEPT ALL TABLE ck)) x}),
			'0', "distributed $s vs $t, $opts: the findings of reading every row");
	}
	my ($r, $out, $err) = $coord->psql('postgres',
		qq{SELECT count(*) FROM reconcile_diff('led_dist', 'led_norm', '{id}', '$opts'::jsonb || '{"remote": "checksum"}')});
	if ($opts =~ /relative_tolerance/)
	{
		like($err, qr/relative tolerance, which has no pushable bucket/, "$opts on Citus: not by checksums, said so");
	}
	else
	{
		is($r, 0, "$opts on Citus: by checksums computed on the workers ($out findings)") or diag($err);
	}
}

done_testing();
