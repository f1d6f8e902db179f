# Two clusters (postgres_fdw): control totals across servers, and value
# normalisation on the checksum path (issue 24, points 3 and 5).
#  - reconcile_diff_totals with a foreign side gives the totals it gives
#    when both sides are local, in either direction, then_rows included;
#    the foreign side is aggregated on its server: every Remote SQL of the
#    statement (EXPLAIN VERBOSE through auto_explain) has a GROUP BY.
#  - A property test in the style of 031_xdiff_property.pl: with each
#    normalisation option on (trim, case_insensitive, timestamp_precision,
#    relative_tolerance, and all of them), the diff that compares checksums
#    (or falls back where the option is not pushable) finds exactly what
#    reading every row finds, on random tables with random edits of case,
#    blanks, sub-unit times and small relative changes, besides real ones.
#    The model is the documented rule: checksums decide which rows are
#    read, never what is found.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $seed = $ENV{RECONCILE_PROPERTY_SEED} // (time() % 100000);
my $rounds = $ENV{RECONCILE_PROPERTY_ROUNDS} // 6;
note "seed $seed, $rounds rounds (RECONCILE_PROPERTY_SEED, RECONCILE_PROPERTY_ROUNDS)";
srand($seed);

my $remote = PostgreSQL::Test::Cluster->new('totals_remote');
$remote->init;
$remote->append_conf('postgresql.conf', "listen_addresses = '127.0.0.1'\n");
$remote->start;
my $local = PostgreSQL::Test::Cluster->new('totals_local');
$local->init;
$local->start;
my $rport = $remote->port;

# ---- Control totals across servers ----
my $ledger = q{
DROP TABLE IF EXISTS led;
CREATE TABLE led (id bigint PRIMARY KEY, day date, cur text, amount numeric(12,2));
SELECT setseed(0.24);
INSERT INTO led SELECT g, CASE WHEN g % 97 = 0 THEN NULL ELSE date '2026-11-01' + (g % 30) END,
    (ARRAY['EUR','USD','GBP'])[1 + g % 3], round((random() * 1000)::numeric, 2)
FROM generate_series(1, 20000) g;
};
$remote->safe_psql('postgres', $ledger);
$local->safe_psql('postgres', $ledger . q{
ALTER TABLE led RENAME TO led_copy;
CREATE TABLE led_local AS SELECT * FROM led_copy;
UPDATE led_local SET amount = amount + 0.01 WHERE id IN (5, 1234, 9999);
DELETE FROM led_local WHERE id IN (7, 194);       -- 194: a NULL day
DELETE FROM led_local WHERE day = date '2026-11-10' AND cur = 'EUR';
INSERT INTO led_local VALUES (30001, '2026-12-24', 'EUR', 1.00), (30002, NULL, 'CHF', 2.00);
CREATE EXTENSION reconcile;
CREATE EXTENSION postgres_fdw;
}
  . qq{CREATE SERVER xremote FOREIGN DATA WRAPPER postgres_fdw
    OPTIONS (host '127.0.0.1', port '$rport', dbname 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER xremote;
CREATE FOREIGN TABLE f_led (id bigint, day date, cur text, amount numeric(12,2))
    SERVER xremote OPTIONS (table_name 'led');
});

my $measures = q{'{"amount": ["sum", "min", "max", "count"], "id": ["max"]}'};
foreach my $opts ('{"include_matches": true}',
	'{"include_matches": true, "tolerance": {"sum(amount)": 0.01}}',
	'{"then_rows": true, "key_columns": ["id"]}')
{
	foreach my $pair ([ 'f_led', 'led_local', 'led_copy', 'led_local' ],
		[ 'led_local', 'f_led', 'led_local', 'led_copy' ])
	{
		my ($s, $t, $ls, $lt) = @$pair;
		my $q = sub {
			my ($a, $b) = @_;
			return qq{SELECT string_agg(row(d.*)::text, E'\\n' ORDER BY row(d.*)::text COLLATE "C")
FROM reconcile_diff_totals('$a', '$b', '{day,cur}', $measures, '$opts') d};
		};
		my $across = $local->safe_psql('postgres', $q->($s, $t));
		is($across, $local->safe_psql('postgres', $q->($ls, $lt)),
			"totals $s vs $t, $opts: as with both sides local");
		isnt($across, '', "totals $s vs $t, $opts: differences found");
	}
}
is( $local->safe_psql('postgres', q{
SELECT string_agg(issue || ' ' || "group"::text, ', ' ORDER BY "group"::text COLLATE "C")
FROM reconcile_diff_totals('f_led', 'led_local', '{day,cur}', '{"amount": ["sum"]}')
WHERE issue <> 'MISMATCH'}),
	'EXTRA_GROUP {"cur": "CHF", "day": null}, MISSING_GROUP {"cur": "EUR", "day": "2026-11-10"}, '
	  . 'EXTRA_GROUP {"cur": "EUR", "day": "2026-12-24"}',
	'groups on one side only, a NULL day among them');

# The foreign side is aggregated there: every Remote SQL has a GROUP BY.
my ($ret, $stdout, $stderr) = $local->psql('postgres', q{
LOAD 'auto_explain';
SET auto_explain.log_min_duration = 0;
SET auto_explain.log_nested_statements = on;
SET auto_explain.log_verbose = on;
SET client_min_messages = log;
SELECT count(*) FROM reconcile_diff_totals('f_led', 'led_local', '{day,cur}',
    '{"amount": ["sum", "max"]}', '{"updated_column": "day", "window": ["2026-11-01", null]}');
});
is($ret, 0, 'totals under auto_explain');
my @remote_sql = ($stderr =~ /Remote SQL: ([^\n]*)/g);
ok(scalar(@remote_sql) >= 1, 'the statement reads the foreign side') or diag($stderr);
foreach my $r (@remote_sql)
{
	like($r, qr/GROUP BY/, "remote SQL aggregates there: $r");
	like($r, qr/WHERE \(\(day >= / , 'and filters there by the window');
}

# ---- Normalised values on the checksum path ----
my $ncols = 'id integer, t text, ts timestamp, tz timestamptz, n numeric';
$local->safe_psql('postgres', qq{
CREATE FOREIGN TABLE f_a ($ncols) SERVER xremote OPTIONS (table_name 'a');
-- Findings that differ between the two modes, and the pull's findings.
CREATE FUNCTION pcheck(s regclass, t regclass, opts jsonb, mode text) RETURNS text LANGUAGE sql AS \$\$
    WITH ck AS (SELECT * FROM reconcile_diff(s, t, '{id}', opts || jsonb_build_object('remote', mode))),
         pl AS (SELECT * FROM reconcile_diff(s, t, '{id}', opts || '{"remote": "pull"}'))
    SELECT (SELECT count(*) FROM ((TABLE ck EXCEPT ALL TABLE pl)
                                  UNION ALL (TABLE pl EXCEPT ALL TABLE ck)) x)
        || '/' || (SELECT count(*) FROM pl)
\$\$;
});

sub rnd { my ($lo, $hi) = @_; return $lo + int(rand($hi - $lo + 1)); }

# Which options push down (checksum must succeed) and which fall back.
my @options = (
	[ '{"trim": ["t"]}', 'checksum' ],
	[ '{"case_insensitive": ["t"]}', 'checksum' ],
	[ '{"trim": ["t"], "case_insensitive": ["t"]}', 'checksum' ],
	[ '{"timestamp_precision": {"ts": "second", "tz": "minute"}}', 'auto' ],
	[ '{"timestamp_precision": {"tz": "day"}, "time_zone": "America/New_York"}', 'auto' ],
	[ '{"relative_tolerance": {"n": 0.001}}', 'auto' ],
	[ '{"trim": ["t"], "case_insensitive": ["t"], "relative_tolerance": {"n": 0.001}, '
	  . '"timestamp_precision": {"ts": "minute"}, "tolerance": {"n": 0.5}}', 'auto' ],
	[ '{}', 'checksum' ]);
my %normalised_away;
for my $round (1 .. $rounds)
{
	my $n = rnd(200, 1500);
	my @edits;
	for (1 .. rnd(5, 20))
	{
		my $kind = rnd(0, 7);
		my $i = rnd(1, $n);
		my $w = rnd(0, 30);
		my $range = "id BETWEEN $i AND $i + $w";
		push @edits,
		  (   "UPDATE b SET t = upper(t) WHERE $range;",
			"UPDATE b SET t = '  ' || t || ' ' WHERE $range;",
			"UPDATE b SET ts = ts + interval '0.4 second' WHERE $range;",
			"UPDATE b SET tz = tz + interval '20 seconds' WHERE $range;",
			"UPDATE b SET n = n * 1.0004 WHERE $range;",
			"UPDATE b SET t = t || 'x', n = n + 5 WHERE id = $i;",
			"DELETE FROM b WHERE id = $i;",
			"UPDATE b SET t = NULL WHERE id = $i;")[$kind];
	}
	my $setup = qq{
DROP TABLE IF EXISTS a, b;
CREATE TABLE a ($ncols);
SELECT setseed(0.$round);
INSERT INTO a SELECT g, CASE WHEN random() < 0.05 THEN NULL ELSE 'Value ' || (random() * 500)::int END,
    timestamp '2026-01-01 00:00' + (random() * 100000)::int * interval '1 second',
    timestamptz '2026-01-01 00:00+00' + (random() * 100000)::int * interval '1 second',
    round((random() * 1000)::numeric, 3)
FROM generate_series(1, $n) g;
CREATE TABLE b AS SELECT * FROM a;
};
	$remote->safe_psql('postgres', $setup);
	$local->safe_psql('postgres', $setup . join("\n", @edits));
	foreach my $o (@options)
	{
		my ($opts, $mode) = @$o;
		foreach my $pair ([ 'b', 'f_a' ], [ 'f_a', 'b' ])
		{
			my ($s, $t) = @$pair;
			my $r = $local->safe_psql('postgres', qq{SELECT pcheck('$s', '$t', '$opts', '$mode')});
			my ($bad, $found) = split m{/}, $r;
			is($bad, 0, "round $round, $s vs $t, $opts ($mode): the same findings as reading every row ($found)");
			$normalised_away{$opts} += $found;
		}
	}
}
# The options do something: fewer findings than without them.
ok($normalised_away{'{"trim": ["t"], "case_insensitive": ["t"]}'} < $normalised_away{'{}'},
	'trim and case_insensitive leave fewer findings than none');
ok($normalised_away{'{"relative_tolerance": {"n": 0.001}}'} < $normalised_away{'{}'},
	'relative_tolerance leaves fewer findings than none');

# Pushed down or not, as documented.
foreach my $o (@options)
{
	my ($opts, $mode) = @$o;
	my ($r, $out, $err) = $local->psql('postgres',
		qq{SELECT count(*) FROM reconcile_diff('b', 'f_a', '{id}', '$opts'::jsonb || '{"remote": "checksum"}')});
	if ($mode eq 'checksum')
	{
		is($r, 0, "$opts: compared by checksums") or diag($err);
	}
	else
	{
		like($err, qr/cannot compare "b" and "f_a" by checksums/, "$opts: not pushable, said so");
	}
}

done_testing();
