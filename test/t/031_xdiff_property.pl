# Property test of the cross-server diff: on random tables with random
# edits of every kind that defeats a weak checksum (values swapped between
# neighbouring rows and between distant ones, a column shifted by a row or
# permuted within a block, rows duplicated and deleted, NULL against a
# value, numerics equal by value but not by scale), the checksum diff
# ("remote": "checksum") finds exactly what reading every row ("remote":
# "pull") finds, every time, whichever side is on the other server.  The
# model is the documented rule: checksums only decide which rows are read,
# never what is found.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $seed = $ENV{RECONCILE_PROPERTY_SEED} // (time() % 100000);
my $rounds = $ENV{RECONCILE_PROPERTY_ROUNDS} // 20;
note "seed $seed, $rounds rounds (RECONCILE_PROPERTY_SEED, RECONCILE_PROPERTY_ROUNDS)";
srand($seed);

my $remote = PostgreSQL::Test::Cluster->new('xprop_remote');
$remote->init;
$remote->append_conf('postgresql.conf', "listen_addresses = '127.0.0.1'\n");
$remote->start;
my $local = PostgreSQL::Test::Cluster->new('xprop_local');
$local->init;
$local->start;

my $rport = $remote->port;
my $cols = 'id integer, v text, n numeric, x integer, ts timestamptz, f float8, b boolean';
$local->safe_psql('postgres', qq{
CREATE EXTENSION reconcile;
CREATE EXTENSION postgres_fdw;
CREATE SERVER xremote FOREIGN DATA WRAPPER postgres_fdw
    OPTIONS (host '127.0.0.1', port '$rport', dbname 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER xremote;
CREATE FOREIGN TABLE f_a ($cols) SERVER xremote OPTIONS (table_name 'a');
CREATE FOREIGN TABLE f_b ($cols) SERVER xremote OPTIONS (table_name 'b');
-- Findings that differ between the two modes, the pull's findings, and
-- whether the summaries agree.
CREATE FUNCTION pcheck(s regclass, t regclass, opts jsonb) RETURNS text LANGUAGE sql AS \$\$
    WITH ck AS (SELECT * FROM reconcile_diff(s, t, '{id}', opts || '{"remote": "checksum"}')),
         pl AS (SELECT * FROM reconcile_diff(s, t, '{id}', opts || '{"remote": "pull"}'))
    SELECT (SELECT count(*) FROM ((TABLE ck EXCEPT ALL TABLE pl)
                                  UNION ALL (TABLE pl EXCEPT ALL TABLE ck)) x)
        || '/' || (SELECT count(*) FROM pl) || '/' ||
           ((SELECT row(d.*)::text FROM reconcile_diff_summary(s, t, '{id}', opts || '{"remote": "checksum"}') d)
          = (SELECT row(d.*)::text FROM reconcile_diff_summary(s, t, '{id}', opts || '{"remote": "pull"}') d))
\$\$;
});

# The issue's case: 1,000 rows, v of rows 10/11, 20/21, ..., 990/991
# swapped on the other side: 198 mismatches, whichever side is remote.
my $swap = q{
DROP TABLE IF EXISTS a, b;
CREATE TABLE a (id integer, v text, n numeric, x integer, ts timestamptz, f float8, b boolean);
INSERT INTO a (id, v) SELECT g, 'value ' || g FROM generate_series(1, 1000) g;
CREATE TABLE b AS SELECT * FROM a;
UPDATE b SET v = o.v FROM a o
WHERE b.id % 10 IN (0, 1) AND b.id BETWEEN 10 AND 991
  AND o.id = CASE WHEN b.id % 10 = 0 THEN b.id + 1 ELSE b.id - 1 END;
};
$remote->safe_psql('postgres', $swap);
$local->safe_psql('postgres', $swap);
foreach my $pair ([ 'a', 'f_b' ], [ 'f_a', 'b' ], [ 'f_a', 'f_b' ])
{
	my ($s, $t) = @$pair;
	is( $local->safe_psql('postgres', qq{
SELECT mismatched FROM reconcile_diff_summary('$s', '$t', '{id}', '{"remote": "checksum"}')}),
		'198', "swapped values of neighbouring rows, $s vs $t: all 198 mismatches found");
}

# A nondeterministic (case-insensitive ICU) key collation on the local
# side: the remote's 'KEY500' is the local 'key500'.  The checksums read
# the differing keys back in the diff's key collation, as the full read
# compares them (before: a false MISSING_IN_TARGET and a row short).
$local->safe_psql('postgres', q{
CREATE COLLATION ci (provider = icu, locale = 'und-u-ks-level2', deterministic = false);
CREATE TABLE cs (k text COLLATE ci, v integer);
INSERT INTO cs SELECT 'key' || g, g FROM generate_series(1, 1000) g;
CREATE FOREIGN TABLE f_ct (k text, v integer) SERVER xremote OPTIONS (table_name 'ct');
});
$remote->safe_psql('postgres', q{
CREATE TABLE ct (k text, v integer);
INSERT INTO ct SELECT 'key' || g, g FROM generate_series(1, 1000) g;
UPDATE ct SET k = upper(k), v = v + 1 WHERE v = 500;
UPDATE ct SET k = upper(k) WHERE v = 600;
});
foreach my $opts ('{}', '{"leaf_rows": 4}', '{"leaf_rows": 1, "split_factor": 2}')
{
	foreach my $pair ([ 'cs', 'f_ct' ], [ 'f_ct', 'cs' ])
	{
		my ($s, $t) = @$pair;
		is( $local->safe_psql('postgres', qq{
SELECT row(d.*)::text FROM reconcile_diff_summary('$s', '$t', '{k}', '$opts'::jsonb || '{"remote": "checksum"}') d}),
			$local->safe_psql('postgres', qq{
SELECT row(d.*)::text FROM reconcile_diff_summary('$s', '$t', '{k}', '$opts'::jsonb || '{"remote": "pull"}') d}),
			"case-insensitive key collation, $s vs $t, $opts: the checksums count what the full read counts");
	}
}
is( $local->safe_psql('postgres', q{
SELECT concat_ws(',', rows_source, rows_target, matched, mismatched, missing_in_target)
FROM reconcile_diff_summary('cs', 'f_ct', '{k}', '{"remote": "checksum"}')}),
	'1000,1000,999,1,0', 'KEY500 is key500 there, KEY600 matches key600');

# Random tables and edits.
sub rnd { my ($lo, $hi) = @_; return $lo + int(rand($hi - $lo + 1)); }

for my $round (1 .. $rounds)
{
	my $n = rnd(50, 1500);
	my $sparse = rand() < 0.5 ? 'true' : 'false';
	my @edits;
	my $k = rnd(1, 8);
	for (1 .. $k)
	{
		# Swaps and permutations, which cancel in a weak checksum, most often.
		my $kind = (0, 0, 1, 2, 2, 3, 4, 5, 6, 7, 8, 9, 10, 10, 10)[ rnd(0, 14) ];
		my $i = rnd(1, $n);
		my $j = rnd(1, $n);
		my $w = rnd(2, 40);
		my $col = (qw(v n x ts f b))[ rnd(0, 5) ];
		if ($kind == 0)
		{
			# Swap one column between two rows (neighbours or far apart).
			$j = $i + 1 if rand() < 0.5;
			push @edits, qq{
UPDATE b SET $col = o.$col FROM (SELECT id, $col FROM b WHERE id IN ($i, $j)) o
WHERE b.id IN ($i, $j) AND o.id = $i + $j - b.id;};
		}
		elsif ($kind == 1)
		{
			# Shift a column by one row over a block.
			push @edits, qq{
UPDATE b SET $col = o.$col FROM (SELECT id, lag($col) OVER (ORDER BY id) AS $col FROM b) o
WHERE o.id = b.id AND b.id BETWEEN $i AND $i + $w;};
		}
		elsif ($kind == 2)
		{
			# Permute a column within a block (reverse it).
			push @edits, qq{
UPDATE b SET $col = o.$col FROM (SELECT id, $col FROM b WHERE id BETWEEN $i AND $i + $w) o
WHERE b.id BETWEEN $i AND $i + $w AND o.id = 2 * $i + $w - b.id;};
		}
		elsif ($kind == 3)
		{
			push @edits, "INSERT INTO b SELECT * FROM b WHERE id = $i;";
		}
		elsif ($kind == 4)
		{
			push @edits, "DELETE FROM b WHERE id BETWEEN $i AND $i + " . rnd(0, 3) . ";";
		}
		elsif ($kind == 5)
		{
			push @edits, "UPDATE b SET $col = NULL WHERE id = $i;";
		}
		elsif ($kind == 6)
		{
			# Equal by value, not by scale: no finding.
			push @edits, "UPDATE b SET n = n * 1.000 WHERE id BETWEEN $i AND $i + $w;";
		}
		elsif ($kind == 7)
		{
			push @edits, "INSERT INTO b (id, v) VALUES (" . ($n + rnd(1, 50)) . ", 'new');";
		}
		elsif ($kind == 8)
		{
			# The same instant in another zone, -0 for 0: no finding.
			push @edits, "UPDATE b SET ts = (ts AT TIME ZONE 'Asia/Kolkata') AT TIME ZONE 'Asia/Kolkata', "
			  . "f = CASE WHEN f = 0 THEN '-0'::float8 ELSE f END WHERE id BETWEEN $i AND $i + $w;";
		}
		elsif ($kind == 10)
		{
			# Neighbours swapped every few rows over a stretch, as an ETL
			# job that shifts values between neighbouring rows would.
			my $stride = rnd(2, 12);
			my $len = rnd(20, 400);
			push @edits, qq{
UPDATE b SET $col = o.$col FROM (SELECT id, $col FROM b) o
WHERE b.id BETWEEN $i AND $i + $len AND (b.id - $i) % $stride IN (0, 1)
  AND o.id = CASE WHEN (b.id - $i) % $stride = 0 THEN b.id + 1 ELSE b.id - 1 END;};
		}
		else
		{
			# Swap whole keys: rows i and j exchange their ids.
			push @edits, "UPDATE b SET id = $i + $j - id WHERE id IN ($i, $j);";
		}
	}
	my $setup = qq{
DROP TABLE IF EXISTS a, b;
CREATE TABLE a ($cols);
SELECT setseed(0.$round);
INSERT INTO a SELECT g, CASE WHEN random() < 0.05 THEN NULL ELSE 'v' || (random() * 500)::int END,
    round((random() * 100)::numeric, (random() * 3)::int), (random() * 5)::int,
    timestamptz '2026-01-01 00:00+00' + (random() * 30)::int * interval '1 hour',
    CASE WHEN random() < 0.2 THEN 0 ELSE (random() * 4)::int / 2.0 END, random() < 0.5
FROM generate_series(1, $n) g;
-- Sparse rows in some rounds: most columns NULL.
UPDATE a SET n = CASE WHEN random() < 0.9 THEN NULL ELSE n END,
    x = CASE WHEN random() < 0.9 THEN NULL ELSE x END, ts = NULL,
    f = CASE WHEN random() < 0.9 THEN NULL ELSE f END, b = NULL WHERE $sparse;
CREATE TABLE b AS SELECT * FROM a;
} . join("\n", @edits);
	$remote->safe_psql('postgres', $setup);
	$local->safe_psql('postgres', $setup);
	my $opts = (
		'{}', '{"leaf_rows": 1, "split_factor": 2}',
		'{"leaf_rows": 4, "split_factor": 3}', '{"leaf_rows": 16, "split_factor": 8}'
	)[ rnd(0, 3) ];
	foreach my $pair ([ 'a', 'f_b' ], [ 'f_a', 'b' ], [ 'f_a', 'f_b' ])
	{
		my ($s, $t) = @$pair;
		my $got = $local->safe_psql('postgres', "SELECT pcheck('$s', '$t', '$opts')");
		my $pulled = (split m{/}, $got)[1];
		is($got, "0/$pulled/true",
			"seed $seed round $round ($n rows, $opts, $s vs $t): the checksum diff finds what reading every row finds")
		  or diag join("\n", @edits);
	}
}

$local->stop;
$remote->stop;
done_testing();
