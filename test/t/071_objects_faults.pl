# Faults of an S3 store, from a small hostile S3 server on loopback (this
# file's own, no moto needed): a 503 or 429 then success (retried with
# backoff), a 503 that never ends (an error naming object, version and
# status), a body cut mid-transfer, slow bytes against statement_timeout,
# a 403 whose body carries the request's signature material (never shown),
# answers that are not S3's, connection refused; and reconcile_load's
# replay downloading nothing, also after a crash (kill -9) following the
# commit.  Every fault leaves nothing staged.
use strict;
use warnings;
use IO::Socket::INET;
use POSIX ();
use Time::HiRes qw(time sleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $body = "id,name,v\n1,Ana,1\n2,Bo,1\n3,Cy,1\n";
my $big = "id,name,v\n" . join('', map { "$_,n$_,1\n" } 1 .. 20000);
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $log = "$PostgreSQL::Test::Utils::tmp_check/s3_faults.log";

# The server: one connection at a time; the bucket (path style) picks the
# behaviour; every object GET is logged as "GET bucket/key".
my $pid = fork();
die "fork: $!" unless defined $pid;
if ($pid == 0)
{
	my $srv = IO::Socket::INET->new(LocalAddr => '127.0.0.1', LocalPort => $port, Listen => 16, ReuseAddr => 1)
	  or POSIX::_exit(1);
	my %seen;
	open my $lf, '>>', $log or POSIX::_exit(1);
	$lf->autoflush(1);
	while (my $c = $srv->accept)
	{
		local $SIG{PIPE} = 'IGNORE';
		my $req = <$c>;
		next unless defined $req;
		while (my $l = <$c>) { last if $l =~ /^\r?\n$/; }
		my ($path) = $req =~ m{^GET (\S+)};
		$path //= '/';
		my ($bucket, $rest) = $path =~ m{^/([^/?]+)(.*)$};
		$bucket //= '';
		$rest //= '';
		my $n = ++$seen{$bucket};
		my $send = sub {
			my ($status, $content, %h) = @_;
			my $len = $h{len} // length($content);
			print $c "HTTP/1.1 $status\r\nContent-Length: $len\r\nConnection: close\r\n"
			  . ($h{etag} ? "ETag: \"$h{etag}\"\r\n" : '') . "\r\n";
			print $c $content unless $h{slow};
			if ($h{slow})
			{
				for my $line (split /(?<=\n)/, $content)
				{
					print $c $line or last;
					$c->flush;
					sleep 0.2;
				}
			}
		};
		my $s3err = sub {
			my ($status, $code, $extra) = @_;
			$send->($status, "<?xml version=\"1.0\"?><Error><Code>$code</Code><Message>We said $code.</Message>" . ($extra // '') . "</Error>");
		};
		if ($rest =~ /^\?versioning/)
		{
			$send->('200 OK', '<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"/>');
		}
		elsif ($rest =~ /^\?/ || $rest eq '')
		{
			if ($bucket eq 'f-notxml') { $send->('200 OK', 'this is not <xml'); }
			elsif ($bucket eq 'f-truncated-list')
			{
				$send->('200 OK', '<ListBucketResult><IsTruncated>true</IsTruncated><Contents><Key>a.csv</Key><Size>1</Size></Contents></ListBucketResult>');
			}
			elsif ($bucket eq 'f-list-503' && $n <= 2) { $s3err->('503 Slow Down', 'SlowDown'); }
			else
			{
				my ($after) = $rest =~ /[?&]start-after=([^&]*)/;
				$after //= '';
				$after =~ s/%([0-9A-F]{2})/chr(hex($1))/ge;
				my $x = '<ListBucketResult><IsTruncated>false</IsTruncated>';
				$x .= sprintf('<Contents><Key>%s</Key><ETag>"e-%s"</ETag><Size>%d</Size><LastModified>2026-12-01T00:00:00.000Z</LastModified></Contents>', $_, $_, length($body))
				  for grep { $_ gt $after } ('in/a.csv', 'in/b.csv');
				$send->('200 OK', $x . '</ListBucketResult>');
			}
		}
		else
		{
			print $lf "GET $bucket$rest\n";
			my ($key) = $rest =~ m{^/([^?]*)};
			if ($bucket eq 'f-503-once' && $n == 1) { $s3err->('503 Slow Down', 'SlowDown'); }
			elsif ($bucket eq 'f-429-once' && $n == 1) { $s3err->('429 Too Many Requests', 'TooManyRequests'); }
			elsif ($bucket eq 'f-503-always') { $s3err->('503 Service Unavailable', 'ServiceUnavailable'); }
			elsif ($bucket eq 'f-403')
			{
				$s3err->('403 Forbidden', 'SignatureDoesNotMatch',
					'<AWSAccessKeyId>AKIDFAULTS</AWSAccessKeyId><StringToSign>AWS4-HMAC-SHA256 SECRET-MATERIAL</StringToSign><SignatureProvided>deadbeef</SignatureProvided>');
			}
			elsif ($bucket eq 'f-reset') { $send->('200 OK', substr($big, 0, 70000), len => length($big)); }
			elsif ($bucket eq 'f-slow') { $send->('200 OK', $big, slow => 1); }
			elsif ($bucket eq 'f-etag' && $key eq 'in/b.csv') { $s3err->('412 Precondition Failed', 'PreconditionFailed'); }
			else { $send->('200 OK', $body, etag => "e-$key"); }
		}
		close $c;
	}
	POSIX::_exit(0);
}
END { kill 'KILL', $pid if $pid; }
for (1 .. 50)
{
	last if IO::Socket::INET->new(PeerAddr => '127.0.0.1', PeerPort => $port);
	sleep 0.1;
}

my $node = PostgreSQL::Test::Cluster->new('objects_faults');
$node->init;
$node->append_conf('postgresql.conf', "restart_after_crash = on\n");
$node->start;
my $url = "http://127.0.0.1:$port";
my $closed = PostgreSQL::Test::Cluster::get_free_port();
$node->safe_psql('postgres', qq{
CREATE EXTENSION reconcile;
CREATE TABLE st (object_key text, version_id text, source_row bigint, operation text, id text, name text, v text);
CREATE TABLE t (id int PRIMARY KEY, name text, v bigint NOT NULL, gone boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('t', '{id}', 'v', 'gone', 'h');
CREATE SERVER refused FOREIGN DATA WRAPPER reconcile_objects OPTIONS (endpoint 'http://127.0.0.1:$closed', bucket 'crm');
CREATE USER MAPPING FOR PUBLIC SERVER refused OPTIONS (access_key_id 'AKIDFAULTS', secret_access_key 'S3CRET-faults');
});
for my $b (qw(f-ok f-503-once f-429-once f-503-always f-403 f-reset f-slow f-etag f-notxml f-truncated-list f-list-503))
{
	(my $s = $b) =~ tr/-/_/;
	$node->safe_psql('postgres', qq{
CREATE SERVER $s FOREIGN DATA WRAPPER reconcile_objects OPTIONS (endpoint '$url', bucket '$b');
CREATE USER MAPPING FOR PUBLIC SERVER $s OPTIONS (access_key_id 'AKIDFAULTS', secret_access_key 'S3CRET-faults');
});
}

my $obj = q{'[{"object_key": "in/a.csv", "version_id": "v1"}]'};
sub stage
{
	my ($server, $opts) = @_;
	$opts //= '{}';
	my $t0 = time;
	my ($rc, $out, $err) = $node->psql('postgres',
		"SELECT reconcile_stage_objects('st', '$server', $obj, '$opts')",
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	return ($rc, $out, $err, time - $t0);
}
sub staged { $node->safe_psql('postgres', 'SELECT count(*) FROM st') }

my ($rc, $out, $err, $secs) = stage('f_ok');
like($out, qr/"rows": 3/, 'a good store stages its rows');
$node->safe_psql('postgres', 'TRUNCATE st');

($rc, $out, $err, $secs) = stage('f_503_once');
like($out, qr/"rows": 3/, 'a 503 then success is retried and stages');
cmp_ok($secs, '>=', 0.09, 'after a backoff');
$node->safe_psql('postgres', 'TRUNCATE st');
($rc, $out, $err) = stage('f_429_once');
like($out, qr/"rows": 3/, 'a 429 (throttling) then success is retried');
$node->safe_psql('postgres', 'TRUNCATE st');

($rc, $out, $err, $secs) = stage('f_503_always', '{"max_retries": 3}');
like($err, qr/ERROR:  08006: could not read object "in\/a.csv" version "v1" of server "f_503_always": HTTP status 503 ServiceUnavailable/,
	'a 503 that never ends: 08006 naming object, version and status');
like($err, qr/HINT:  The store kept failing after the retries/, 'with a hint');
cmp_ok($secs, '>=', 0.1 + 0.2 + 0.4, 'after three backoffs of 100, 200 and 400 ms');
is(scalar(() = slurp_file($log) =~ /^GET f-503-always/mg), 4, 'one try and three retries');

($rc, $out, $err) = stage('f_403');
like($err, qr/ERROR:  42501: could not read object "in\/a.csv" version "v1" of server "f_403": HTTP status 403 SignatureDoesNotMatch/, '403 is 42501');
like($err, qr/DETAIL:  The store says: We said SignatureDoesNotMatch\./, 'with the store\'s message');
unlike($err, qr/SECRET-MATERIAL|deadbeef|S3CRET|StringToSign/, 'and none of the signature material or the secret');
is(scalar(() = slurp_file($log) =~ /^GET f-403/mg), 1, 'a 403 is not retried');

($rc, $out, $err) = stage('f_reset');
like($err, qr/ERROR:  08006: could not read object "in\/a.csv" version "v1" of server "f_reset": /, 'a body cut mid-transfer is 08006');
is(staged(), '0', 'and stages nothing');

$node->safe_psql('postgres', "ALTER DATABASE postgres SET statement_timeout = '1s'");
($rc, $out, $err, $secs) = stage('f_slow');
like($err, qr/ERROR:  57014: canceling statement due to statement timeout/, 'slow bytes: statement_timeout stops the download');
cmp_ok($secs, '<', 3, "within the timeout's reach (${secs}s)");
$node->safe_psql('postgres', "ALTER DATABASE postgres RESET statement_timeout");
is(staged(), '0', 'and stages nothing');
# A cancel from another session, mid-download.
my $bg = $node->background_psql('postgres');
$bg->query_until(qr/started/, q{\echo started
SELECT pg_backend_pid();
});
my $h = IPC::Run::start(['psql', '-XAtq', '-d', $node->connstr('postgres'), '-c',
	"SELECT reconcile_stage_objects('st', 'f_slow', $obj)"], '>', \my $o2, '2>', \my $e2);
sleep 0.5;
$node->safe_psql('postgres', q{SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE query LIKE '%f_slow%' AND pid <> pg_backend_pid()});
$h->finish;
like($e2, qr/canceling statement due to user request/, 'a cancel stops the download');
$bg->quit;

($rc, $out, $err, $secs) = stage('refused', '{"max_retries": 2}');
like($err, qr/ERROR:  08006: could not read object "in\/a.csv" version "v1" of server "refused": Failed to connect to 127.0.0.1 port $closed/, 'connection refused is 08006');
like($err, qr/DETAIL:  3 attempt\(s\) failed\./, 'after the retries');
cmp_ok($secs, '>=', 0.3, 'with backoff');

($rc, $out, $err) = $node->psql('postgres', q{SELECT * FROM reconcile_list_objects('f_notxml')}, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/ERROR:  08P01: could not parse the answer to the listing of bucket "f-notxml"/, 'a listing that is not XML is 08P01');
($rc, $out, $err) = $node->psql('postgres', q{SELECT * FROM reconcile_list_objects('f_truncated_list')}, extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/ERROR:  08P01: could not follow the listing of bucket "f-truncated-list".*\nDETAIL:  Page 1 is truncated but has no continuation token/, 'a truncated page without a token is 08P01');
is($node->safe_psql('postgres', q{SELECT count(*) FROM reconcile_list_objects('f_list_503')}), '2', 'a listing page that fails twice is retried');

# An unversioned object overwritten between the listing and the read.
($rc, $out, $err) = $node->psql('postgres',
	q{SELECT reconcile_stage_objects('st', 'f_etag', (SELECT jsonb_agg(l) FROM reconcile_list_objects('f_etag') l))},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/ERROR:  55000: could not read object "in\/b.csv" of server "f_etag": HTTP status 412 PreconditionFailed/, 'an object overwritten after the listing is 55000');
is(staged(), '0', 'and nothing of the call is staged, not even the object before it');

# reconcile_load: the replay downloads nothing, also after a crash that
# followed the commit.
my $gets = sub { scalar(() = slurp_file($log) =~ /^GET f-ok\/in\//mg) };
my $before = $gets->();
my $loader = $node->background_psql('postgres');
my $loader_pid = $loader->query_safe('SELECT pg_backend_pid()');
is($loader->query_safe(q{SELECT status || ':' || inserted || ':' || staged_rows FROM reconcile_load('t', 'f_ok', 'in/')}),
	'committed:3:6', 'reconcile_load lists, stages and commits');
is($gets->() - $before, 2, 'reading each object once');
is($node->safe_psql('postgres', q{SELECT string_agg(object_key || ':' || version_id || ':' || size || ':' || rows, ',' ORDER BY object_key) FROM reconcile.object_reads}),
	'in/a.csv:e-in/a.csv:' . length($body) . ':3,in/b.csv:e-in/b.csv:' . length($body) . ':3', 'what was read is kept: the ETag as version, size, rows');
# kill -9 of the loader's backend after its commit: the server restarts.
kill 'KILL', $loader_pid;
eval { $loader->quit };
$node->poll_query_until('postgres', 'SELECT true') or die 'the server did not come back';
is($node->safe_psql('postgres', q{SELECT count(*) FROM reconcile_load('t', 'f_ok', 'in/')}), '0', 'after a crash, the retry finds nothing new');
$before = $gets->();
is($node->safe_psql('postgres', q{SELECT status || ':' || inserted FROM reconcile_load('t', 'f_ok', 'in/', '{"start_after": null}')}),
	'replayed:3', 'a rewound retry returns the one receipt');
is($gets->() - $before, 0, 'without downloading anything');
is($node->safe_psql('postgres', q{SELECT count(*) FROM reconcile.receipts}), '1', 'one receipt');

$node->stop;
done_testing();
