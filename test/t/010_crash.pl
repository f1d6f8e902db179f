# A batch survives every crash: kill -9 of its backend at each pause point,
# an immediate shutdown mid-batch, a client that never heard the commit, and
# a pg_dump/restore.  After each: no partial rows, no receipt, the cursor
# where it was; the retry commits exactly once, and a replay is 'replayed'.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('crash');
$node->init;
$node->append_conf('postgresql.conf', "restart_after_crash = on\n");
$node->start;

# The advisory lock reconcile.pause_at waits for (see batch.c).
my $pause_key = "x'7265636f6e63696c'::bigint";

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION reconcile;
CREATE TABLE customer_state (customer_id text PRIMARY KEY, name text,
    version bigint NOT NULL, is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea);
SELECT reconcile_register('customer_state', '{customer_id}', 'version', 'is_deleted', 'payload_hash');
CREATE TABLE customer_stage (object_key text, source_row bigint, operation text,
                             customer_id text, version text, name text);
INSERT INTO customer_stage VALUES ('o0', 1, 'UPSERT', 'C1', '1', 'Ana');
SELECT status FROM reconcile_batch('customer_state', 'customer_stage',
    '[{"object_key":"o0","version_id":"1","content_hash":"h0","rows":1}]', 'feed', 'o0@1');
INSERT INTO customer_stage
SELECT 'o1', g, 'UPSERT', 'C' || g, '2', 'name ' || g FROM generate_series(1, 5000) g;
});

my $manifest = '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":5000}]';
my $batch = "SELECT status, inserted, updated FROM reconcile_batch('customer_state', "
  . "'customer_stage', '$manifest', 'feed', 'o1\@1')";

# The state a batch that did not commit must leave behind.
sub state_unchanged
{
	my ($what) = @_;
	is( $node->safe_psql(
			'postgres', q{
SELECT count(*) || '/' || max(version) || '/' || max(name)
  FROM customer_state}),
		'1/1/Ana',
		"$what: the target holds only its earlier row");
	is($node->safe_psql('postgres', 'SELECT count(*) FROM reconcile.receipts'),
		'1', "$what: no new receipt");
	is($node->safe_psql('postgres', 'SELECT position FROM reconcile.cursors'),
		'o0@1', "$what: the cursor did not move");
	is( $node->safe_psql(
			'postgres',
			'SELECT count(*) FROM reconcile.rejects UNION ALL SELECT count(*) FROM reconcile.conflicts'
		),
		"0\n0",
		"$what: no rejects or conflicts recorded");
}

# Start the batch in its own session, paused at $point behind an advisory
# lock that $holder holds, and return that session and its backend pid.
sub start_paused_batch
{
	my ($point, $holder, $sql) = @_;
	$sql //= $batch;
	$holder->query_safe("SELECT pg_advisory_lock($pause_key)");
	my $session = $node->background_psql('postgres', on_error_stop => 0);
	my $pid = $session->query_safe('SELECT pg_backend_pid()');
	$session->query_safe("SET reconcile.pause_at = '$point'");
	$session->{stdin} .= "$sql;\n";
	$session->{run}->pump_nb();
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND pid = $pid"
	) or die "the batch did not reach pause point $point";
	return ($session, $pid);
}

foreach my $point ('staged', 'merged', 'receipt')
{
	my $holder = $node->background_psql('postgres');
	my ($session, $pid) = start_paused_batch($point, $holder);
	# Crash: the postmaster restarts every backend and recovers.
	kill 'KILL', $pid;
	$session->{run}->finish;
	$node->poll_query_until('postgres', 'SELECT true')
	  or die "the server did not come back after the crash";
	eval { $holder->quit };
	state_unchanged("kill -9 at $point");
}

# An immediate shutdown while a batch is paused after its merge.
{
	my $holder = $node->background_psql('postgres');
	my ($session, $pid) = start_paused_batch('merged', $holder);
	$node->stop('immediate');
	eval { $session->{run}->finish };
	eval { $holder->{run}->finish };
	$node->start;
	state_unchanged('immediate shutdown after the merge');
}

# The retry commits exactly once.
is($node->safe_psql('postgres', $batch), 'committed|4999|1',
	'the retried batch commits');
is($node->safe_psql('postgres', 'SELECT count(*) FROM customer_state'),
	'5000', 'every row is there once');
is($node->safe_psql('postgres', 'SELECT position FROM reconcile.cursors'),
	'o1@1', 'the cursor moved with the batch');

# A client that never heard back from its commit retries: 'replayed', with
# the stored receipt.  The batch is held after its receipt is written, the
# client is killed, then the batch goes on: the backend commits before it
# flushes the answer to the vanished client.
{
	my $o2 = "SELECT status FROM reconcile_batch('customer_state', 'customer_stage', "
	  . "'[{\"object_key\":\"o2\",\"version_id\":\"1\",\"content_hash\":\"h2\",\"rows\":0}]')";
	my $holder = $node->background_psql('postgres');
	my ($session, $pid) = start_paused_batch('receipt', $holder, $o2);
	$session->{run}->kill_kill;
	$holder->query_safe("SELECT pg_advisory_unlock($pause_key)");
	$node->poll_query_until('postgres',
		"SELECT count(*) = 1 FROM reconcile.receipts WHERE manifest @> '[{\"object_key\":\"o2\"}]'"
	) or die "the unacknowledged batch did not commit";
	$holder->quit;
	is($node->safe_psql('postgres', $o2), 'replayed',
		'the retry of an unacknowledged commit is replayed');
}
is($node->safe_psql('postgres', $batch), 'replayed|4999|1',
	'replaying the crashed batch returns its receipt');
is($node->safe_psql('postgres', 'SELECT count(*) FROM reconcile.receipts'),
	'3', 'one receipt per manifest');

# pg_dump keeps receipts, cursors, rejects and conflicts: after a restore
# into a new database, a replay is still recognised.
{
	my $dump = $node->basedir . '/reconcile.dump';
	$node->command_ok(
		[ 'pg_dump', '-Fc', '-f', $dump, '-d', $node->connstr('postgres') ],
		'pg_dump of a database using reconcile');
	$node->safe_psql('postgres', 'CREATE DATABASE restored');
	$node->command_ok(
		[ 'pg_restore', '-d', $node->connstr('restored'), $dump ],
		'pg_restore into a new database');
	is( $node->safe_psql(
			'restored',
			'SELECT count(*) FROM reconcile.receipts UNION ALL SELECT count(*) FROM reconcile.cursors UNION ALL SELECT count(*) FROM reconcile.targets'
		),
		"3\n1\n1",
		'receipts, cursors and registrations are restored');
	is($node->safe_psql('restored', $batch), 'replayed|4999|1',
		'a replay after restore is recognised');
	is($node->safe_psql('restored', 'SELECT count(*) FROM customer_state'),
		'5000', 'and changes nothing');
}

$node->stop;
done_testing();
