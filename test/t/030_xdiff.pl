# A diff across two servers, over loopback TCP through postgres_fdw, by
# checksums of key ranges: the remote server does not have reconcile in its
# database, the findings and counts equal the local diff's on the same data
# for every issue kind and option, and a connection that drops mid-diff is a
# clear error that leaves nothing half-written.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $remote = PostgreSQL::Test::Cluster->new('xdiff_remote');
$remote->init;
$remote->append_conf('postgresql.conf', "listen_addresses = '127.0.0.1'\n");
$remote->start;

my $local = PostgreSQL::Test::Cluster->new('xdiff_local');
$local->init;
$local->start;

# The same data on both servers: src and tgt are the remote tables, their
# local copies src_copy and tgt_copy are what the local diff compares.
my $tables = q{
CREATE TABLE src (id integer, k2 text, amount numeric, qty integer, price float8,
                  ts timestamptz, d date, note varchar(20), flag boolean, upd timestamp);
INSERT INTO src SELECT g, 'k' || (g % 7), g / 4.0, g % 13, g * 1.25,
    '2026-01-01 00:00+00'::timestamptz + g * interval '1 hour', date '2026-01-01' + g,
    'n' || g, g % 2 = 0, timestamp '2026-11-01' + g * interval '1 minute'
FROM generate_series(1, 3000) g;
CREATE TABLE tgt AS SELECT * FROM src;
DELETE FROM tgt WHERE id IN (7, 1234, 2999);
INSERT INTO tgt (id, k2, amount) VALUES (3001, 'k2', 1), (0, 'k0', 0);
UPDATE tgt SET amount = amount + 1 WHERE id = 10;
UPDATE tgt SET note = 'changed', flag = NOT flag WHERE id = 2000;
UPDATE tgt SET ts = ts + interval '1 microsecond' WHERE id = 300;
UPDATE tgt SET price = NULL WHERE id = 301;
UPDATE src SET note = NULL WHERE id = 303;
UPDATE src SET amount = 5.0 WHERE id = 20;
UPDATE tgt SET amount = 5.000 WHERE id = 20;
INSERT INTO src SELECT * FROM src WHERE id = 50;
INSERT INTO tgt SELECT * FROM tgt WHERE id = 50;
INSERT INTO tgt SELECT * FROM tgt WHERE id = 60;
INSERT INTO src (id, k2, amount) VALUES (NULL, 'kn', 1);
INSERT INTO tgt (id, k2, amount) VALUES (NULL, 'kn', 1);
UPDATE src SET k2 = NULL WHERE id = 250;
UPDATE tgt SET k2 = NULL WHERE id = 250;
UPDATE tgt SET amount = amount + 0.004 WHERE id = 30;
UPDATE tgt SET amount = amount + 0.006 WHERE id = 31;
ALTER TABLE src ADD COLUMN code text;
UPDATE src SET code = 'c' || id;
ALTER TABLE tgt ADD COLUMN code text;
UPDATE tgt SET code = CASE WHEN id % 500 = 0 THEN ' c' || id || ' ' ELSE 'c' || id END;
};
$remote->safe_psql('postgres', $tables);
$local->safe_psql('postgres', $tables);
$local->safe_psql('postgres', q{
ALTER TABLE src RENAME TO src_copy;
ALTER TABLE tgt RENAME TO tgt_copy;
});

is($remote->safe_psql('postgres',
		"SELECT count(*) FROM pg_extension WHERE extname = 'reconcile'"),
	'0', 'the remote server has no reconcile in its database');

my $rport = $remote->port;
$local->safe_psql('postgres', qq{
CREATE EXTENSION reconcile;
CREATE EXTENSION postgres_fdw;
CREATE SERVER xremote FOREIGN DATA WRAPPER postgres_fdw
    OPTIONS (host '127.0.0.1', port '$rport', dbname 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER xremote;
CREATE FOREIGN TABLE f_src (id integer, k2 text, amount numeric, qty integer, price float8,
    ts timestamptz, d date, note varchar(20), flag boolean, upd timestamp, code text)
    SERVER xremote OPTIONS (table_name 'src');
CREATE FOREIGN TABLE f_tgt (id integer, k2 text, amount numeric, qty integer, price float8,
    ts timestamptz, d date, note varchar(20), flag boolean, upd timestamp, code text)
    SERVER xremote OPTIONS (table_name 'tgt');
-- Checksum findings and counts against the local diff's on the copies.
CREATE FUNCTION xcheck(ls regclass, lt regclass, fs regclass, ft regclass, keys text[], opts jsonb)
RETURNS text LANGUAGE sql AS \$\$
    WITH remote AS (SELECT * FROM reconcile_diff(fs, ft, keys, opts || '{"remote": "checksum"}')),
         local AS (SELECT * FROM reconcile_diff(ls, lt, keys, opts))
    SELECT (SELECT count(*) FROM ((TABLE remote EXCEPT ALL TABLE local)
                                  UNION ALL (TABLE local EXCEPT ALL TABLE remote)) x)
        || '/' || (SELECT count(*) FROM local) || '/' ||
           ((SELECT row(s.*)::text FROM reconcile_diff_summary(fs, ft, keys, opts || '{"remote": "checksum"}') s)
          = (SELECT row(s.*)::text FROM reconcile_diff_summary(ls, lt, keys, opts) s))
\$\$;
});
$local->safe_psql('postgres', "SET TimeZone = 'Asia/Kolkata'");

my @cases = (
	[ '{id}', '{}' ],
	[ '{id}', '{"leaf_rows": 1, "split_factor": 2}' ],
	[ '{id}', '{"leaf_rows": 64, "split_factor": 32}' ],
	[ '{id}', '{"leaf_rows": 5000}' ],
	[ '{id,k2}', '{"leaf_rows": 4}' ],
	[ '{k2,id}', '{}' ],
	[ '{code}', '{"trim_keys": true, "leaf_rows": 3}' ],
	[ '{code}', '{}' ],
	[ '{id}', '{"tolerance": {"amount": 0.005}, "leaf_rows": 2}' ],
	[ '{id}', '{"tolerance": {"amount": 0.005, "qty": 2, "price": 0.5}}' ],
	[ '{id}', '{"updated_column": "upd", "window": ["2026-11-01 00:05", "2026-11-01 06:00"]}' ],
	[ '{id}', '{"updated_column": "upd", "cutoff": "source_max", "window": [null, "2026-11-01 08:00"], "leaf_rows": 2}' ],
	[ '{id}', '{"compare": ["amount", "note"]}' ],
	[ '{id}', '{"ignore": ["ts", "note", "flag"]}' ],
	[ '{id}', '{"column_map": {"note": "note"}, "target_key_columns": ["id"]}' ],);
foreach my $case (@cases)
{
	my ($keys, $opts) = @$case;
	foreach my $pair ([ 'f_src', 'tgt_copy' ], [ 'src_copy', 'f_tgt' ], [ 'f_src', 'f_tgt' ])
	{
		my ($s, $t) = @$pair;
		my $got = $local->safe_psql('postgres', qq{
SET TimeZone = 'Asia/Kolkata';
SELECT xcheck('src_copy', 'tgt_copy', '$s', '$t', '$keys', '$opts')});
		my $local_findings = (split m{/}, $got)[1];
		is($got, "0/$local_findings/true",
			"$s vs $t, key $keys, $opts: the same findings and counts as the local diff");
		cmp_ok($local_findings, '>', 0, "$keys, $opts: the local diff finds something")
		  if $s eq 'f_src' && $t eq 'tgt_copy';
	}
}

# A configured job records the same.
$local->safe_psql('postgres', q{
INSERT INTO reconcile.diff_jobs VALUES ('xjob', 'public.f_src', 'public.tgt_copy', '{id}', '{"remote": "checksum"}');
INSERT INTO reconcile.diff_jobs VALUES ('xjob_local', 'public.src_copy', 'public.tgt_copy', '{id}', NULL);
});
is( $local->safe_psql('postgres', q{
SELECT string_agg(concat_ws(',', rows_source, rows_target, matched, missing_in_target, extra_in_target,
                            mismatched, duplicate_keys, null_keys, findings, error IS NULL), ' ' ORDER BY job)
FROM reconcile_diff_run()}),
	'3002,3002,2983,3,2,12,3,2,22,t 3002,3002,2983,3,2,12,3,2,22,t',
	'a configured job across servers records the counts of the local job');

# A connection that drops mid-diff: the remote query waits behind a lock,
# and its backend is terminated from the remote side.
sub wait_for_fdw_backend
{
	$remote->poll_query_until('postgres', q{
SELECT count(*) > 0 FROM pg_stat_activity
WHERE application_name = 'postgres_fdw' AND wait_event_type = 'Lock'})
	  or die 'the diff never reached the remote server';
}

# postgres_fdw cannot commit a transaction whose remote subtransaction it
# could not roll back, so the run cannot be recorded: the call fails with
# the connection's error and writes nothing.
my $runs_before = $local->safe_psql('postgres', 'SELECT count(*) FROM reconcile.diff_runs');
my $holder = $remote->background_psql('postgres');
$holder->query_safe('BEGIN; LOCK TABLE src IN ACCESS EXCLUSIVE MODE');
my $session = $local->background_psql('postgres', on_error_stop => 0);
$session->query_safe('\set VERBOSITY verbose');
$session->query_until(qr/started/,
	"\\echo started\nSELECT job, findings, error FROM reconcile_diff_run();\n");
wait_for_fdw_backend();
$remote->safe_psql('postgres', q{
SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE application_name = 'postgres_fdw'});
$holder->query_safe('COMMIT');
$session->query('SELECT 1');
my $stderr = $session->{stderr};
$session->quit;
like($stderr, qr/ERROR:\s+08\w\w\w:/,
	'reconcile_diff_run fails with the connection\'s SQLSTATE when the remote backend is terminated');
unlike($stderr, qr/abort cleanup failure/, 'and with the error itself, not a later one');
is($local->safe_psql('postgres', 'SELECT count(*) FROM reconcile.diff_runs'),
	$runs_before, 'no run of that call is recorded, not even the other job\'s');

# The same through reconcile_diff: a clear error with the FDW's SQLSTATE,
# and the session goes on.
$holder = $remote->background_psql('postgres');
$holder->query_safe('BEGIN; LOCK TABLE src IN ACCESS EXCLUSIVE MODE');
$session = $local->background_psql('postgres', on_error_stop => 0);
$session->query_safe('\set VERBOSITY verbose');
$session->query_until(qr/started/,
	"\\echo started\nSELECT count(*) FROM reconcile_diff('f_src', 'tgt_copy', '{id}');\n");
wait_for_fdw_backend();
$remote->safe_psql('postgres', q{
SELECT pg_terminate_backend(pid) FROM pg_stat_activity
WHERE application_name = 'postgres_fdw'});
$holder->query_safe('COMMIT');
$holder->quit;
$session->query('SELECT 1');
$stderr = $session->{stderr};
$session->quit;
like($stderr, qr/ERROR:\s+08\w\w\w:/,
	'reconcile_diff fails with the remote error\'s SQLSTATE when the connection drops');
like($stderr, qr/checksums of key ranges/, 'the error says what the diff was doing');

# The remote server stops mid-diff.
$holder = $remote->background_psql('postgres');
$holder->query_safe('BEGIN; LOCK TABLE src IN ACCESS EXCLUSIVE MODE');
$session = $local->background_psql('postgres', on_error_stop => 0);
$session->query_safe('\set VERBOSITY verbose');
$session->query_until(qr/started/,
	"\\echo started\nSELECT job, error FROM reconcile_diff_run('xjob');\n");
wait_for_fdw_backend();
$remote->stop('immediate');
$session->query('SELECT 1');
$stderr = $session->{stderr};
$session->quit;
eval { $holder->quit; };
like($stderr, qr/ERROR:\s+08\w\w\w:/,
	'a remote server that stops mid-diff fails the run with the connection\'s SQLSTATE');
is($local->safe_psql('postgres', 'SELECT count(*) FROM reconcile.diff_runs'),
	$runs_before, 'and nothing is recorded');

# Back up, the same job finds the same.
$remote->start;
is( $local->safe_psql('postgres', q{
SELECT concat_ws(',', matched, findings, error IS NULL) FROM reconcile_diff_run('xjob')}),
	'2983,22,t', 'after the remote server is back, the job runs');

$local->stop;
$remote->stop;
done_testing();
