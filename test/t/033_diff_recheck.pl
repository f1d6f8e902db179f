# Recheck before report and the limits, with a second session and across
# two servers (issue 24: 2, 4).  A row fixed while the diff waits in its
# recheck is not reported, on one server and when the source is a
# postgres_fdw foreign table compared by checksums; the reread sends the
# differing keys only, as one key list; a remote row changed during the
# wait is read as the remote transaction first saw it (postgres_fdw reads
# a remote server in one REPEATABLE READ transaction); max_differences
# stops a diff by checksums too.
use strict;
use warnings;
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $remote = PostgreSQL::Test::Cluster->new('recheck_remote');
$remote->init;
$remote->append_conf('postgresql.conf',
	"listen_addresses = '127.0.0.1'\nlog_statement = 'all'\n");
$remote->start;

my $local = PostgreSQL::Test::Cluster->new('recheck_local');
$local->init;
$local->start;

# Start a diff in another session; return its harness and output.
sub start_diff
{
	my ($node, $sql) = @_;
	my ($out, $err) = ('', '');
	local %ENV = $node->_get_env();
	my $h = IPC::Run::start(
		[
			$node->installed_command('psql'), '-XAtq', '-v', 'ON_ERROR_STOP=1',
			'-d', $node->connstr('postgres'), '-c', $sql
		],
		'>', \$out, '2>', \$err);
	return ($h, \$out, \$err);
}

# Wait until a session waits in a recheck (WaitLatch, wait event Extension).
sub wait_for_recheck
{
	my ($node) = @_;
	$node->poll_query_until('postgres',
		q{SELECT count(*) = 1 FROM pg_stat_activity
		   WHERE wait_event_type = 'Extension' AND query LIKE '%recheck%'})
	  or die "the diff never waited in its recheck";
}

# ---- one server: a second session fixes rows during the wait ----
$local->safe_psql('postgres', q{
CREATE EXTENSION reconcile;
CREATE EXTENSION postgres_fdw;
CREATE TABLE rs (id bigint PRIMARY KEY, v text);
CREATE TABLE rt (id bigint PRIMARY KEY, v text);
INSERT INTO rs VALUES (1, 'a'), (2, 'b'), (3, 'c'), (4, 'd');
INSERT INTO rt VALUES (1, 'a'), (2, 'B'), (5, 'e');
});
my $fix = q{
UPDATE rt SET v = 'b' WHERE id = 2;   -- the mismatch is fixed
INSERT INTO rt VALUES (3, 'c');        -- the missing row arrives
UPDATE rt SET v = 'X' WHERE id = 1;   -- a row that matched breaks
};

# Without a recheck, the rows on their way are reported.
is($local->safe_psql('postgres',
		q{SELECT string_agg(issue || ' ' || (key->>'id'), ', ' ORDER BY key->>'id')
		    FROM reconcile_diff('rs', 'rt', '{id}')}),
	'MISMATCH 2, MISSING_IN_TARGET 3, MISSING_IN_TARGET 4, EXTRA_IN_TARGET 5',
	'without a recheck: four findings, two of them rows on their way');

my ($h, $out, $err) = start_diff($local, q{
SELECT string_agg(issue || ' ' || (key->>'id'), ', ' ORDER BY key->>'id')
  FROM reconcile_diff('rs', 'rt', '{id}', '{"recheck": {"after": "3 seconds"}}')});
wait_for_recheck($local);
$local->safe_psql('postgres', $fix);
$h->finish;
is($$out, "MISSING_IN_TARGET 4, EXTRA_IN_TARGET 5\n",
	'with a recheck: the fixed and the delivered keys are not reported');
is($$err, '', 'the recheck ran without error');
is($local->safe_psql('postgres',
		q{SELECT string_agg(issue || ' ' || (key->>'id'), ', ' ORDER BY key->>'id')
		    FROM reconcile_diff('rs', 'rt', '{id}')}),
	'MISMATCH 1, MISSING_IN_TARGET 4, EXTRA_IN_TARGET 5',
	'the row broken during the wait is found by the next diff');

# A configured job keeps the recheck in its history.
$local->safe_psql('postgres', q{
UPDATE rt SET v = 'B' WHERE id = 2;
DELETE FROM rt WHERE id = 3;
INSERT INTO reconcile.diff_jobs (name, source, target, key_columns, options)
VALUES ('rj', 'public.rs', 'public.rt', '{id}', '{"recheck": {"after": "3 seconds", "times": 1}}');
});
($h, $out, $err) = start_diff($local,
	q{SELECT status, findings, rechecks, recheck FROM reconcile_diff_run('rj') /* recheck */});
wait_for_recheck($local);
$local->safe_psql('postgres', q{UPDATE rt SET v = 'b' WHERE id = 2; INSERT INTO rt VALUES (3, 'c')});
$h->finish;
is($$out, qq(complete|3|1|{"recheck": {"after": "3 seconds", "times": 1}}\n),
	'a job run: three findings survived one recheck, the settings recorded');
is($local->safe_psql('postgres',
		q{SELECT string_agg(issue || ' ' || (key->>'id') || ' ' || rechecks, ', ' ORDER BY key->>'id')
		    FROM reconcile.diff_results}),
	'MISMATCH 1 1, MISSING_IN_TARGET 4 1, EXTRA_IN_TARGET 5 1',
	'its findings, each with the rechecks it survived');

# ---- across servers: the source is a foreign table ----
$remote->safe_psql('postgres', q{
CREATE TABLE src (id bigint PRIMARY KEY, v text);
INSERT INTO src SELECT g, 'v' || g FROM generate_series(1, 2000) g;
});
my $rport = $remote->port;
$local->safe_psql('postgres', qq{
CREATE SERVER xr FOREIGN DATA WRAPPER postgres_fdw
    OPTIONS (host '127.0.0.1', port '$rport', dbname 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER xr;
CREATE FOREIGN TABLE f_src (id bigint, v text) SERVER xr OPTIONS (table_name 'src');
CREATE TABLE tgt (id bigint PRIMARY KEY, v text);
INSERT INTO tgt SELECT g, 'v' || g FROM generate_series(1, 2000) g;
UPDATE tgt SET v = 'late' WHERE id = 10;
DELETE FROM tgt WHERE id = 20;
INSERT INTO tgt VALUES (3000, 'extra'), (3001, 'extra');
});
is($local->safe_psql('postgres',
		q{SELECT string_agg(issue || ' ' || (key->>'id'), ', ' ORDER BY (key->>'id')::int)
		    FROM reconcile_diff('f_src', 'tgt', '{id}', '{"remote": "checksum"}')}),
	'MISMATCH 10, MISSING_IN_TARGET 20, EXTRA_IN_TARGET 3000, EXTRA_IN_TARGET 3001',
	'across servers without a recheck: four findings');

my $log_offset = -s $remote->logfile;
($h, $out, $err) = start_diff($local, q{
SELECT string_agg(issue || ' ' || (key->>'id'), ', ' ORDER BY (key->>'id')::int)
  FROM reconcile_diff('f_src', 'tgt', '{id}',
                      '{"remote": "checksum", "recheck": {"after": "3 seconds"}}')});
wait_for_recheck($local);
# The local target catches up; the remote source gets key 3000 meanwhile.
$local->safe_psql('postgres',
	q{UPDATE tgt SET v = 'v10' WHERE id = 10; INSERT INTO tgt VALUES (20, 'v20')});
$remote->safe_psql('postgres', q{INSERT INTO src VALUES (3000, 'extra')});
$h->finish;
is($$out, "EXTRA_IN_TARGET 3000, EXTRA_IN_TARGET 3001\n",
	'across servers: the keys the local target caught up on are not reported');
like($$out, qr/EXTRA_IN_TARGET 3000/,
	'a remote row written during the wait is not seen: the remote transaction reads one snapshot');
my $log = slurp_file($remote->logfile, $log_offset);
my @lists = ($log =~ /id = ANY \('\{10,20,3000,3001\}'::bigint\[\]\)/g);
is(scalar(@lists), 2,
	'the remote server was sent the four differing keys as one list, by the checksum pass and by the recheck');
unlike($log, qr/id = ANY \('\{[^}]*\b(?:1|30|1999)\b[^}]*\}'::bigint\[\]\)/,
	'no key that matched was read again');
is($local->safe_psql('postgres',
		q{SELECT string_agg(issue || ' ' || (key->>'id'), ', ' ORDER BY (key->>'id')::int)
		    FROM reconcile_diff('f_src', 'tgt', '{id}', '{"remote": "checksum"}')}),
	'EXTRA_IN_TARGET 3001', 'the next diff sees the remote row');

# max_differences and min_age by checksums.
$local->safe_psql('postgres', q{DELETE FROM tgt WHERE id IN (100, 200, 300)});
is($local->safe_psql('postgres',
		q{SELECT missing_in_target || ' ' || extra_in_target || ' ' || stopped_by || ' ' || stopped_at_key
		    FROM reconcile_diff_summary('f_src', 'tgt', '{id}',
		                                '{"remote": "checksum", "max_differences": 2}')}),
	'2 0 max_differences {"id": 300}',
	'across servers: stopped after two findings, at the first key not compared');
$remote->safe_psql('postgres', q{
ALTER TABLE src ADD COLUMN upd timestamptz NOT NULL DEFAULT now() - interval '1 hour';
UPDATE src SET upd = now() WHERE id = 100;
});
$local->safe_psql('postgres', q{
ALTER TABLE tgt ADD COLUMN upd timestamptz NOT NULL DEFAULT now() - interval '1 hour';
ALTER FOREIGN TABLE f_src ADD COLUMN upd timestamptz;
});
is($local->safe_psql('postgres',
		q{SELECT string_agg(issue || ' ' || (key->>'id'), ', ' ORDER BY (key->>'id')::int)
		    FROM reconcile_diff('f_src', 'tgt', '{id}',
		         '{"remote": "checksum", "compare": ["v"], "updated_column": "upd", "min_age": "10 minutes"}')}),
	'MISSING_IN_TARGET 200, MISSING_IN_TARGET 300, EXTRA_IN_TARGET 3001',
	'across servers: a key young on the remote side is not compared');

done_testing();
