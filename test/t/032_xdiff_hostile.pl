# A hostile foreign server: its superuser plants functions and aggregates in
# pg_catalog that postgres_fdw's shipped checksum queries resolve to
# (array_agg, width_bucket, sha256, string_agg, count), so that what comes back is NULL, of the
# wrong shape or length, out of range or malformed.  Every case is an error
# with SQLSTATE HV004 naming the foreign server, or findings equal to
# reading every row; the local server survives every case (same postmaster,
# the session goes on).  Also: remote columns of another type than declared
# fall back to reading every row.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $remote = PostgreSQL::Test::Cluster->new('xhost_remote');
$remote->init;
$remote->append_conf('postgresql.conf', "listen_addresses = '127.0.0.1'\n");
$remote->start;
my $local = PostgreSQL::Test::Cluster->new('xhost_local');
$local->init;
$local->start;

my $data = q{
CREATE TABLE t (id integer, v text, n numeric);
INSERT INTO t SELECT g, 'v' || g, g / 4.0 FROM generate_series(1, 2000) g;
};
$local->safe_psql('postgres', $data);
$remote->safe_psql('postgres', $data . q{
UPDATE t SET v = 'changed' WHERE id % 97 = 0;
CREATE TABLE wide (id bigint, v character(6), n numeric);
INSERT INTO wide SELECT g, 'x', g / 4.0 FROM generate_series(1, 2000) g;
});
my $rport = $remote->port;
$local->safe_psql('postgres', qq{
CREATE EXTENSION reconcile;
CREATE EXTENSION postgres_fdw;
CREATE SERVER xremote FOREIGN DATA WRAPPER postgres_fdw
    OPTIONS (host '127.0.0.1', port '$rport', dbname 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER xremote;
CREATE FOREIGN TABLE f_t (id integer, v text, n numeric) SERVER xremote OPTIONS (table_name 't');
-- Declared integer and text; on the remote bigint and char(6).
CREATE FOREIGN TABLE f_wide (id integer, v text, n numeric) SERVER xremote OPTIONS (table_name 'wide');
CREATE TABLE narrow (id integer, v text, n numeric);
INSERT INTO narrow SELECT g, 'x', g / 4.0 FROM generate_series(1, 2000) g;
});
my $start = $local->safe_psql('postgres', 'SELECT pg_postmaster_start_time()');
my $expected = $local->safe_psql('postgres',
	q{SELECT mismatched FROM reconcile_diff_summary('t', 'f_t', '{id}', '{"remote": "pull"}')});
is($expected, '20', 'reading every row finds the 20 changed rows');
is( $local->safe_psql('postgres',
		q{SELECT mismatched FROM reconcile_diff_summary('t', 'f_t', '{id}', '{"remote": "checksum"}')}),
	'20', 'so do the checksums, while the remote is honest');

# Each case: what the remote's superuser plants, and what undoes it.
my @cases = (
	[
		'array_agg(integer) returns NULL',
		q{CREATE FUNCTION pg_catalog.h_sf(integer[], integer) RETURNS integer[] LANGUAGE sql AS 'SELECT NULL::integer[]';
		  CREATE AGGREGATE pg_catalog.array_agg(integer) (sfunc = pg_catalog.h_sf, stype = integer[]);},
		q{DROP AGGREGATE pg_catalog.array_agg(integer); DROP FUNCTION pg_catalog.h_sf(integer[], integer);}
	],
	[
		'array_agg(integer) returns a two-dimensional array',
		q{CREATE FUNCTION pg_catalog.h_sf(integer[], integer) RETURNS integer[] LANGUAGE sql AS $$SELECT '{{1,2},{3,4}}'::integer[]$$;
		  CREATE AGGREGATE pg_catalog.array_agg(integer) (sfunc = pg_catalog.h_sf, stype = integer[]);},
		q{DROP AGGREGATE pg_catalog.array_agg(integer); DROP FUNCTION pg_catalog.h_sf(integer[], integer);}
	],
	[
		'array_agg(integer) returns each key twice (more keys than row hashes)',
		q{CREATE FUNCTION pg_catalog.h_sf(integer[], integer) RETURNS integer[] LANGUAGE sql AS 'SELECT $1 || $2 || $2';
		  CREATE AGGREGATE pg_catalog.array_agg(integer) (sfunc = pg_catalog.h_sf, stype = integer[], initcond = '{}');},
		q{DROP AGGREGATE pg_catalog.array_agg(integer); DROP FUNCTION pg_catalog.h_sf(integer[], integer);}
	],
	[
		'array_agg(integer) returns NULL elements',
		q{CREATE FUNCTION pg_catalog.h_sf(integer[], integer) RETURNS integer[] LANGUAGE sql AS 'SELECT $1 || NULL::integer';
		  CREATE AGGREGATE pg_catalog.array_agg(integer) (sfunc = pg_catalog.h_sf, stype = integer[], initcond = '{}');},
		q{DROP AGGREGATE pg_catalog.array_agg(integer); DROP FUNCTION pg_catalog.h_sf(integer[], integer);}
	],
	[
		'array_agg(integer) returns keys of other ranges',
		q{CREATE FUNCTION pg_catalog.h_sf(integer[], integer) RETURNS integer[] LANGUAGE sql AS 'SELECT $1 || ($2 + 100000)';
		  CREATE AGGREGATE pg_catalog.array_agg(integer) (sfunc = pg_catalog.h_sf, stype = integer[], initcond = '{}');},
		q{DROP AGGREGATE pg_catalog.array_agg(integer); DROP FUNCTION pg_catalog.h_sf(integer[], integer);}
	],
	[
		'width_bucket(integer, integer[]) returns NULL',
		q{CREATE FUNCTION pg_catalog.width_bucket(integer, integer[]) RETURNS integer LANGUAGE sql IMMUTABLE AS 'SELECT NULL::integer';},
		q{DROP FUNCTION pg_catalog.width_bucket(integer, integer[]);}
	],
	[
		'width_bucket(integer, integer[]) returns buckets out of range',
		q{CREATE FUNCTION pg_catalog.width_bucket(integer, integer[]) RETURNS integer LANGUAGE sql IMMUTABLE AS 'SELECT 1000000 - $1';},
		q{DROP FUNCTION pg_catalog.width_bucket(integer, integer[]);}
	],
	[
		'width_bucket(integer, integer[]) returns negative buckets',
		q{CREATE FUNCTION pg_catalog.width_bucket(integer, integer[]) RETURNS integer LANGUAGE sql IMMUTABLE AS 'SELECT -1';},
		q{DROP FUNCTION pg_catalog.width_bucket(integer, integer[]);}
	],
	[
		'sha256(bytea) returns a short digest',
		q{ALTER FUNCTION pg_catalog.sha256(bytea) RENAME TO h_sha256;
		  CREATE FUNCTION pg_catalog.sha256(bytea) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$SELECT '\\x0102'::bytea$$;},
		q{DROP FUNCTION pg_catalog.sha256(bytea); ALTER FUNCTION pg_catalog.h_sha256(bytea) RENAME TO sha256;}
	],
	[
		'sha256(bytea) returns NULL',
		q{ALTER FUNCTION pg_catalog.sha256(bytea) RENAME TO h_sha256;
		  CREATE FUNCTION pg_catalog.sha256(bytea) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$SELECT NULL::bytea$$;},
		q{DROP FUNCTION pg_catalog.sha256(bytea); ALTER FUNCTION pg_catalog.h_sha256(bytea) RENAME TO sha256;}
	],
	[
		'sha256(bytea) returns a valid digest of other data',
		q{ALTER FUNCTION pg_catalog.sha256(bytea) RENAME TO h_sha256;
		  CREATE FUNCTION pg_catalog.sha256(bytea) RETURNS bytea LANGUAGE sql IMMUTABLE AS $$SELECT pg_catalog.h_sha256('x')$$;},
		q{DROP FUNCTION pg_catalog.sha256(bytea); ALTER FUNCTION pg_catalog.h_sha256(bytea) RENAME TO sha256;}
	],
	[
		'string_agg(bytea, bytea) returns NULL',
		q{ALTER AGGREGATE pg_catalog.string_agg(bytea, bytea) RENAME TO h_string_agg;
		  CREATE FUNCTION pg_catalog.h_sf(bytea, bytea, bytea) RETURNS bytea LANGUAGE sql AS 'SELECT NULL::bytea';
		  CREATE AGGREGATE pg_catalog.string_agg(bytea, bytea) (sfunc = pg_catalog.h_sf, stype = bytea);},
		q{DROP AGGREGATE pg_catalog.string_agg(bytea, bytea); DROP FUNCTION pg_catalog.h_sf(bytea, bytea, bytea);
		  ALTER AGGREGATE pg_catalog.h_string_agg(bytea, bytea) RENAME TO string_agg;}
	],
	[
		'string_agg(bytea, bytea) returns one byte too many',
		q{ALTER AGGREGATE pg_catalog.string_agg(bytea, bytea) RENAME TO h_string_agg;
		  CREATE FUNCTION pg_catalog.h_sf(bytea, bytea, bytea) RETURNS bytea LANGUAGE sql AS $$SELECT coalesce($1, '\\x00'::bytea) || $2$$;
		  CREATE AGGREGATE pg_catalog.string_agg(bytea, bytea) (sfunc = pg_catalog.h_sf, stype = bytea);},
		q{DROP AGGREGATE pg_catalog.string_agg(bytea, bytea); DROP FUNCTION pg_catalog.h_sf(bytea, bytea, bytea);
		  ALTER AGGREGATE pg_catalog.h_string_agg(bytea, bytea) RENAME TO string_agg;}
	],
	[
		'count(*) returns a wrong type (text that is no number)',
		q{ALTER AGGREGATE pg_catalog.count(*) RENAME TO h_count;
		  CREATE FUNCTION pg_catalog.h_cf(text) RETURNS text LANGUAGE sql AS $$SELECT 'many'$$;
		  CREATE AGGREGATE pg_catalog.count(*) (sfunc = pg_catalog.h_cf, stype = text, initcond = 'x');},
		q{DROP AGGREGATE pg_catalog.count(*); DROP FUNCTION pg_catalog.h_cf(text); ALTER AGGREGATE pg_catalog.h_count(*) RENAME TO count;}
	],
	[
		'count(*) returns 0 and negative counts',
		q{ALTER AGGREGATE pg_catalog.count(*) RENAME TO h_count;
		  CREATE FUNCTION pg_catalog.h_cf(bigint) RETURNS bigint LANGUAGE sql AS $$SELECT $1 - 1$$;
		  CREATE AGGREGATE pg_catalog.count(*) (sfunc = pg_catalog.h_cf, stype = bigint, initcond = '0');},
		q{DROP AGGREGATE pg_catalog.count(*); DROP FUNCTION pg_catalog.h_cf(bigint); ALTER AGGREGATE pg_catalog.h_count(*) RENAME TO count;}
	],);

foreach my $case (@cases)
{
	my ($what, $plant, $undo) = @$case;
	foreach my $opts ('{"remote": "checksum"}', '{"remote": "checksum", "leaf_rows": 4, "split_factor": 4}')
	{
		$remote->safe_psql('postgres', $plant);
		my ($ret, $stdout, $stderr) = $local->psql('postgres', qq{
\\set VERBOSITY verbose
SELECT mismatched FROM reconcile_diff_summary('t', 'f_t', '{id}', '$opts')});
		$remote->safe_psql('postgres', $undo);
		ok( ($ret == 3 && $stderr =~ /ERROR:\s+(HV004|22P02|42883|42804):/ && $stderr !~ /server closed/)
			  || ($ret == 0 && $stdout eq $expected),
			"$what, $opts: an error or the true findings")
		  or diag "ret $ret, stdout $stdout, stderr $stderr";
		like($stderr, qr/foreign server "xremote"|remote SQL command/, "$what: the error names the server")
		  if $ret == 3;
		is($local->safe_psql('postgres', 'SELECT pg_postmaster_start_time()'),
			$start, "$what, $opts: the local server survives");
	}
}

# A remote bigint declared integer, a remote char(6) declared text: the
# checksums are not used, the full read finds what it finds, and a NOTICE
# says why.
my ($ret, $stdout, $stderr) = $local->psql('postgres',
	q{SELECT rows_source, mismatched FROM reconcile_diff_summary('narrow', 'f_wide', '{id}')});
is($ret, 0, 'remote columns of other types than declared: no error');
is($stdout, '2000|2000', 'the char(6) values padded with blanks differ from the text ones, as the full read finds');
like($stderr, qr/NOTICE:  diff of "narrow" and "f_wide" reads every row of "f_wide"/,
	'a notice says the checksums were not used');
like($stderr, qr/another type or collation on foreign server "xremote" than declared/, 'and why');
($ret, $stdout, $stderr) = $local->psql('postgres',
	q{SELECT rows_source FROM reconcile_diff_summary('narrow', 'f_wide', '{id}', '{"remote": "checksum"}')});
like($stderr, qr/ERROR:  cannot compare "narrow" and "f_wide" by checksums/,
	'with "remote": "checksum", an error instead');

$local->stop;
$remote->stop;
done_testing();
