# Listing object versions from a real S3 API on loopback (moto_server):
# a versioned bucket with an overwritten key and a delete marker, signed
# requests checked by the store (a wrong secret is 42501 and never shown),
# an unversioned bucket with keys holding spaces, '%', '+' and unicode, a
# multipart object (its ETag is no MD5), and more than 1,000 objects
# (every page followed, start_after).
#
# moto_server is started by the test if this user can run it; otherwise
# tools/test.sh starts it as root (tools/moto.sh) and passes the URLs in
# RECONCILE_MOTO_AUTH_URL and RECONCILE_MOTO_OPEN_URL.  Buckets are filled
# with the curl command (its --aws-sigv4), which the postgres user has.
use strict;
use warnings;
use Digest::MD5 qw(md5_hex);
use File::Temp qw(tempdir);
use IPC::Run;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my ($auth_url, $open_url) = ($ENV{RECONCILE_MOTO_AUTH_URL}, $ENV{RECONCILE_MOTO_OPEN_URL});
my ($tls_url, $tls_ca) = ($ENV{RECONCILE_MOTO_TLS_URL}, $ENV{RECONCILE_MOTO_TLS_CA});
my @motos;
if (!$auth_url || !$open_url)
{
	my $moto = `command -v moto_server 2>/dev/null`;
	chomp $moto;
	plan skip_all => 'moto_server is not runnable by this user and tools/test.sh did not start it'
	  unless $moto && -x $moto;
	for my $auth (1, 0)
	{
		my $port = PostgreSQL::Test::Cluster::get_free_port();
		local $ENV{INITIAL_NO_AUTH_ACTION_COUNT} = 3 if $auth;
		push @motos, IPC::Run::start([ $moto, '-H', '127.0.0.1', '-p', $port ],
			'>', "$PostgreSQL::Test::Utils::tmp_check/moto_$port.log", '2>&1');
		my $url = "http://127.0.0.1:$port";
		$auth ? ($auth_url = $url) : ($open_url = $url);
	}
	# The TLS server, with a self-signed certificate for 127.0.0.1.
	$tls_ca = "$PostgreSQL::Test::Utils::tmp_check/tls.crt";
	my $key = "$PostgreSQL::Test::Utils::tmp_check/tls.key";
	if (system('openssl', 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '2', '-subj', '/CN=127.0.0.1',
			'-addext', 'subjectAltName=IP:127.0.0.1', '-keyout', $key, '-out', $tls_ca) == 0)
	{
		my $port = PostgreSQL::Test::Cluster::get_free_port();
		push @motos, IPC::Run::start([ $moto, '-H', '127.0.0.1', '-p', $port, '-s', '-c', $tls_ca, '-k', $key ],
			'>', "$PostgreSQL::Test::Utils::tmp_check/moto_tls.log", '2>&1');
		$tls_url = "https://127.0.0.1:$port";
	}
	for my $url ($auth_url, $open_url)
	{
		my $up = 0;
		for (1 .. 100)
		{
			$up = 1, last if system("curl -s -o /dev/null $url/") == 0;
			select(undef, undef, undef, 0.1);
		}
		BAIL_OUT("moto_server at $url did not start") unless $up;
	}
}
END { $_->kill_kill for @motos; }

my $tmp = tempdir(CLEANUP => 1);

# One request to the S3 API with the curl command, signed (UNSIGNED-PAYLOAD,
# so uploads need no hash; the server that checks no signature still wants
# one: moto refuses an unsigned overwrite).  Returns status, headers, body.
sub s3
{
	my (%o) = (key => 'test', secret => 'test', @_);
	my @cmd = ('curl', '-s', '-D', "$tmp/headers", '-o', "$tmp/body", '-w', '%{http_code}');
	push @cmd, '--aws-sigv4', "aws:amz:us-east-1:" . ($o{service} // 's3'), '-u', "$o{key}:$o{secret}",
	  '-H', 'x-amz-content-sha256: UNSIGNED-PAYLOAD';
	push @cmd, '-X', $o{method} if $o{method};
	push @cmd, '-T', $o{upload} if $o{upload};
	push @cmd, '--data-binary', $o{data} if defined $o{data};
	push @cmd, @{ $o{args} } if $o{args};
	push @cmd, $o{url};
	my ($out, $err);
	IPC::Run::run(\@cmd, '>', \$out, '2>', \$err) or die "curl failed: $err";
	my $headers = slurp_file("$tmp/headers");
	my $body = -e "$tmp/body" ? slurp_file("$tmp/body") : '';
	unlink "$tmp/body";
	return ($out, $headers, $body);
}

sub header
{
	my ($headers, $name) = @_;
	return $headers =~ /^\Q$name\E:\s*([^\r\n]*)/mi ? $1 : undef;
}

sub encode_key
{
	my $k = shift;
	$k =~ s/([^A-Za-z0-9\-_.~\/])/sprintf('%%%02X', ord($1))/ge;
	return $k;
}

# The IAM user the signatures are checked against: moto's first three
# requests need none.
my ($status, $h, $b) = s3(url => "$auth_url/", key => 'bootstrap', secret => 'bootstrap', service => 'iam',
	data => 'Action=CreateUser&UserName=reconcile&Version=2010-05-08');
is($status, '200', 'IAM user created');
($status, $h, $b) = s3(url => "$auth_url/", key => 'bootstrap', secret => 'bootstrap', service => 'iam',
	data => 'Action=CreateAccessKey&UserName=reconcile&Version=2010-05-08');
my ($ak) = $b =~ m{<AccessKeyId>([^<]+)</AccessKeyId>};
my ($sk) = $b =~ m{<SecretAccessKey>([^<]+)</SecretAccessKey>};
ok($ak && $sk, 'access key created');
my $policy = '{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Action":"*","Resource":"*"}]}';
($status) = s3(url => "$auth_url/", key => 'bootstrap', secret => 'bootstrap', service => 'iam',
	args => [ '--data-urlencode', "PolicyDocument=$policy" ],
	data => 'Action=PutUserPolicy&UserName=reconcile&PolicyName=all&Version=2010-05-08');
is($status, '200', 'policy attached');
my %signed = (key => $ak, secret => $sk);

# Signatures are checked from now on.
($status, $h, $b) = s3(url => "$auth_url/crm", method => 'PUT', key => $ak, secret => 'wrong');
is($status, '403', 'the store checks signatures');

sub put_object
{
	my ($base, $bucket, $key, $content, %o) = @_;
	open my $f, '>', "$tmp/upload" or die;
	binmode $f;
	print $f $content;
	close $f;
	my ($st, $hd) = s3(url => "$base/$bucket/" . encode_key($key), upload => "$tmp/upload", %o);
	die "PUT $key: $st" unless $st eq '200';
	return header($hd, 'x-amz-version-id');
}

# A versioned bucket: in-a.csv written twice, in-p2.csv written and
# deleted.  moto's signature check mishandles '/' in query values (boto3
# fails on it too), so the signed bucket's keys have none; the unsigned
# server below has keys with '/' and prefixes ending in it.
($status) = s3(url => "$auth_url/crm", method => 'PUT', %signed);
is($status, '200', 'bucket crm created');
open my $vf, '>', "$tmp/versioning.xml" or die;
print $vf '<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>Enabled</Status></VersioningConfiguration>';
close $vf;
($status) = s3(url => "$auth_url/crm?versioning=", upload => "$tmp/versioning.xml", %signed);
is($status, '200', 'versioning enabled');
my $a1 = put_object($auth_url, 'crm', 'in-a.csv', "id,name\n1,Ana\n", %signed);
my $a2 = put_object($auth_url, 'crm', 'in-a.csv', "id,name\n1,Ann\n2,Bo\n", %signed);
my $p1 = put_object($auth_url, 'crm', 'in-p2.csv', "id,name\n3,Cy\n", %signed);
($status, $h) = s3(url => "$auth_url/crm/in-p2.csv", method => 'DELETE', %signed);
my $marker = header($h, 'x-amz-version-id');
ok($a1 && $a2 && $p1 && $marker, 'versions written');

my $node = PostgreSQL::Test::Cluster->new('objects');
$node->init;
$node->start;
$node->safe_psql('postgres', qq{
CREATE EXTENSION reconcile;
CREATE SERVER landing FOREIGN DATA WRAPPER reconcile_objects
    OPTIONS (endpoint '$auth_url', region 'us-east-1', bucket 'crm', url_style 'path');
CREATE USER MAPPING FOR CURRENT_USER SERVER landing
    OPTIONS (access_key_id '$ak', secret_access_key '$sk');
CREATE SERVER flat FOREIGN DATA WRAPPER reconcile_objects
    OPTIONS (endpoint '$open_url', bucket 'flat');
CREATE SERVER many FOREIGN DATA WRAPPER reconcile_objects
    OPTIONS (endpoint '$open_url', bucket 'many');
CREATE SERVER vmany FOREIGN DATA WRAPPER reconcile_objects
    OPTIONS (endpoint '$open_url', bucket 'vmany');
CREATE ROLE wrong_key;
GRANT USAGE ON FOREIGN SERVER landing TO wrong_key;
CREATE USER MAPPING FOR wrong_key SERVER landing
    OPTIONS (access_key_id '$ak', secret_access_key 'S3CRET-wrong-secret');
CREATE USER MAPPING FOR CURRENT_USER SERVER flat OPTIONS (access_key_id 'test', secret_access_key 'test');
CREATE USER MAPPING FOR CURRENT_USER SERVER many OPTIONS (access_key_id 'test', secret_access_key 'test');
CREATE USER MAPPING FOR CURRENT_USER SERVER vmany OPTIONS (access_key_id 'test', secret_access_key 'test');
});

my $md5_a2 = md5_hex("id,name\n1,Ann\n2,Bo\n");
my $md5_a1 = md5_hex("id,name\n1,Ana\n");
my $md5_p1 = md5_hex("id,name\n3,Cy\n");
my $list = $node->safe_psql('postgres', q{
SELECT object_key, version_id, size, etag, is_latest, is_delete_marker,
       last_modified > now() - interval '1 hour'
FROM reconcile_list_objects('landing', 'in-')
ORDER BY object_key, is_delete_marker, is_latest DESC});
is($list, join("\n",
	"in-a.csv|$a2|19|$md5_a2|t|f|t",
	"in-a.csv|$a1|14|$md5_a1|f|f|t",
	"in-p2.csv|$p1|13|$md5_p1|f|f|t",
	"in-p2.csv|$marker|||t|t|t"),
  'a versioned bucket lists every version and the delete marker, signed');
is($node->safe_psql('postgres', q{SELECT count(*) FROM reconcile_list_objects('landing', 'in-a')}),
	'2', 'the prefix narrows the listing');
is($node->safe_psql('postgres',
	q{SELECT string_agg(object_key || ':' || (version_id IS NULL), ',') FROM reconcile_list_objects('landing', '', '{"versions": false}')}),
	'in-a.csv:true', 'ListObjectsV2 lists the latest versions only, without version ids');

# A wrong secret and an unsigned request: 42501, never the secret.
my ($rc, $out, $err) = $node->psql('postgres',
	q{SET ROLE wrong_key; SELECT * FROM reconcile_list_objects('landing', '', '{"versions": true}')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/ERROR:  42501: could not read the listing of bucket "crm" of server "landing": HTTP status 403 SignatureDoesNotMatch/,
	'a wrong secret is 42501 SignatureDoesNotMatch');
unlike($err, qr/S3CRET|\Q$sk\E|Signature=|Credential=/, 'the message shows no secret and no signature');
# The TAP cluster logs every statement, so the CREATE USER MAPPING lines
# hold the secrets; no other line may.
my @leaks = grep { !/CREATE USER MAPPING|OPTIONS \(access_key_id/ && /\Q$sk\E|S3CRET-wrong/ }
  split /\n/, slurp_file($node->logfile);
is(scalar(@leaks), 0, 'the server log holds no secret but in the logged DDL');

# An unversioned bucket with awkward keys, and a multipart object.
s3(url => "$open_url/flat", method => 'PUT');
my @keys = ('a b/x%yé.csv', 'plus+sign.csv', "quote'(1).csv", 'tab-日本.csv');
put_object($open_url, 'flat', $_, "id\n1\n") for @keys;
($status, $h, $b) = s3(url => "$open_url/flat/big.csv?uploads=", method => 'POST');
my ($upload) = $b =~ m{<UploadId>([^<]+)</UploadId>};
($status, $h) = s3(url => "$open_url/flat/big.csv?partNumber=1&uploadId=$upload",
	upload => do { open my $f, '>', "$tmp/part" or die; print $f "id\n" . ("7\n" x 1000); close $f; "$tmp/part" });
my $part_etag = header($h, 'ETag');
($status, $h, $b) = s3(url => "$open_url/flat/big.csv?uploadId=$upload", method => 'POST',
	args => [ '-H', 'Content-Type: application/xml' ],
	data => "<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>$part_etag</ETag></Part></CompleteMultipartUpload>");
is($status, '200', 'multipart upload completed');
$list = $node->safe_psql('postgres', q{
SELECT object_key, version_id IS NULL, size, etag ~ '^[0-9a-f]{32}-1$', is_latest
FROM reconcile_list_objects('flat')});
is($list, join("\n",
	"a b/x%yé.csv|t|5|f|t",
	"big.csv|t|2003|t|t",
	"plus+sign.csv|t|5|f|t",
	"quote'(1).csv|t|5|f|t",
	"tab-日本.csv|t|5|f|t"),
  'an unversioned bucket lists keys with spaces, %, +, quotes and unicode; a multipart ETag is no MD5');
is($node->safe_psql('postgres',
	q{SELECT string_agg(object_key, ',') FROM reconcile_list_objects('flat', '', '{"start_after": "big.csv"}')}),
	"plus+sign.csv,quote'(1).csv,tab-日本.csv", 'start_after lists only the keys after it');
is($node->safe_psql('postgres',
	q{SELECT string_agg(object_key, ',') FROM reconcile_list_objects('flat', '', '{"start_after": "a b/x%yé.csv", "max_keys": 1}')}),
	"big.csv,plus+sign.csv,quote'(1).csv,tab-日本.csv", 'start_after with an awkward key, one key a page');

# More than 1,000 objects: every page followed, in ListObjectsV2 and in
# ListObjectVersions (whose pages can end inside a key's versions).
s3(url => "$open_url/many", method => 'PUT');
open my $cfg, '>', "$tmp/many.cfg" or die;
open my $one, '>', "$tmp/one" or die;
print $one "id\n1\n";
close $one;
print $cfg "aws-sigv4 = \"aws:amz:us-east-1:s3\"\nuser = \"test:test\"\nheader = \"x-amz-content-sha256: UNSIGNED-PAYLOAD\"\n";
printf $cfg "upload-file = \"%s\"\nurl = \"%s/many/k%04d.csv\"\noutput = \"/dev/null\"\n", "$tmp/one", $open_url, $_
  for 1 .. 1001;
close $cfg;
system('curl', '-s', '-f', '-K', "$tmp/many.cfg") == 0 or die 'filling bucket many failed';
is($node->safe_psql('postgres',
	q{SELECT count(*), count(DISTINCT object_key), min(object_key), max(object_key) FROM reconcile_list_objects('many')}),
	'1001|1001|k0001.csv|k1001.csv', '1,001 objects over two pages');
is($node->safe_psql('postgres',
	q{SELECT count(*), count(DISTINCT object_key) FROM reconcile_list_objects('many', 'k0', '{"max_keys": 7}')}),
	'999|999', 'pages of 7 keys');
is($node->safe_psql('postgres',
	q{SELECT count(*), min(object_key) FROM reconcile_list_objects('many', '', '{"start_after": "k0500.csv", "max_keys": 100}')}),
	'501|k0501.csv', 'start_after over several pages');

s3(url => "$open_url/vmany", method => 'PUT');
s3(url => "$open_url/vmany?versioning=", upload => "$tmp/versioning.xml");
my %versions;
for my $round (1 .. 3)
{
	push @{ $versions{"v$_.csv"} }, put_object($open_url, 'vmany', "v$_.csv", "id\n$round\n") for 1 .. 5;
}
my $expected = join("\n", map { my $k = $_; map { "$k|$_" } reverse @{ $versions{$k} } } sort keys %versions);
is($node->safe_psql('postgres',
	q{SELECT object_key || '|' || version_id FROM reconcile_list_objects('vmany', '', '{"max_keys": 2}')}),
	$expected, 'versions over pages of 2: every version once, each key newest first');

# Staging from the buckets: each version pinned, the bytes hashed.
$node->safe_psql('postgres', q{
CREATE TABLE st (object_key text, version_id text, source_row bigint, operation text, id text, name text);
CREATE TABLE t (id int PRIMARY KEY, name text, v bigint NOT NULL DEFAULT 1, gone boolean NOT NULL DEFAULT false, h bytea);
GRANT INSERT ON st TO wrong_key;
});
my $m = $node->safe_psql('postgres', q{
SELECT reconcile_stage_objects('st', 'landing',
    (SELECT jsonb_agg(l ORDER BY object_key, last_modified) FROM reconcile_list_objects('landing', 'in-') l WHERE NOT is_delete_marker))});
my $sha = sub { require Digest::SHA; return 'sha256:' . Digest::SHA::sha256_hex(shift) };
is($node->safe_psql('postgres', q{SELECT string_agg(object_key || '|' || source_row || '|' || version_id || '|' || id || '|' || name, E'\n' ORDER BY object_key, name) FROM st}),
	join("\n", "in-a.csv|1|$a1|1|Ana", "in-a.csv|1|$a2|1|Ann", "in-a.csv|2|$a2|2|Bo", "in-p2.csv|1|$p1|3|Cy"),
	'every listed version staged with its own rows, pinned by version id');
like($m, qr/"content_hash": "\Q@{[$sha->("id,name\n1,Ana\n")]}\E"/, 'the manifest hashes the bytes of the old version');
like($m, qr/"content_hash": "\Q@{[$sha->("id,name\n1,Ann\n2,Bo\n")]}\E"/, 'and of the new one');
$node->safe_psql('postgres', 'TRUNCATE st');

# NoSuchKey, NoSuchVersion, a delete marker, a wrong secret while staging.
($rc, $out, $err) = $node->psql('postgres',
	q{SELECT reconcile_stage_objects('st', 'landing', '[{"object_key": "in-none.csv"}]')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/ERROR:  42704: could not read object "in-none.csv" of server "landing": HTTP status 404 NoSuchKey/, 'NoSuchKey is 42704');
($rc, $out, $err) = $node->psql('postgres',
	q{SELECT reconcile_stage_objects('st', 'landing', '[{"object_key": "in-a.csv", "version_id": "not-a-version"}]')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/ERROR:  42704: could not read object "in-a.csv" version "not-a-version" of server "landing": HTTP status 404 NoSuch/, 'an unknown version is 42704');
($rc, $out, $err) = $node->psql('postgres',
	qq{SELECT reconcile_stage_objects('st', 'landing', '[{"object_key": "in-p2.csv", "version_id": "$marker"}]')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/ERROR:  \w+: could not read object "in-p2.csv" version "\Q$marker\E" of server "landing": HTTP status (404|405)/, 'reading a delete marker version is refused by the store');
($rc, $out, $err) = $node->psql('postgres',
	q{SELECT reconcile_stage_objects('st', 'landing', (SELECT jsonb_agg(l) FROM reconcile_list_objects('landing', 'in-', '{"versions": true}') l))},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/ERROR:  22023: object "in-p2.csv" version "\Q$marker\E" is a delete marker/, 'a listed delete marker is refused before anything is read');
($rc, $out, $err) = $node->psql('postgres',
	qq{SET ROLE wrong_key; SELECT reconcile_stage_objects('st', 'landing', '[{"object_key": "in-a.csv", "version_id": "$a1"}]')},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/ERROR:  42501: could not read object "in-a.csv" version "\Q$a1\E" of server "landing": HTTP status 403 SignatureDoesNotMatch/,
	'a wrong secret while staging is 42501');
unlike($err, qr/S3CRET|\Q$sk\E|Signature=/, 'and shows no secret');
is($node->safe_psql('postgres', 'SELECT count(*) FROM st'), '0', 'nothing staged by the failed calls');

# An unversioned bucket: the ETag is the version id, If-Match pins it, so
# an object overwritten after it was listed is refused.
$node->safe_psql('postgres', q{CREATE TABLE flat_list AS SELECT * FROM reconcile_list_objects('flat') WHERE object_key <> 'big.csv'});
my $flat = q{(SELECT jsonb_agg(l) FROM flat_list l)};
$m = $node->safe_psql('postgres', qq{SELECT reconcile_stage_objects('st', 'flat', $flat)});
is($node->safe_psql('postgres', q{SELECT string_agg(object_key || ':' || source_row || ':' || id || ':' || (version_id = md5(E'id\n1\n')), ',' ORDER BY object_key) FROM st}),
	"a b/x%yé.csv:1:1:true,plus+sign.csv:1:1:true,quote'(1).csv:1:1:true,tab-日本.csv:1:1:true",
	'keys with spaces, %, +, quotes and unicode staged; the version id of an unversioned object is its ETag');
$node->safe_psql('postgres', 'TRUNCATE st');
put_object($open_url, 'flat', 'plus+sign.csv', "id\n2\n3\n");
($rc, $out, $err) = $node->psql('postgres',
	qq{SELECT reconcile_stage_objects('st', 'flat', $flat)},
	extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/ERROR:  55000: could not read object "plus\+sign.csv" of server "flat": HTTP status 412/, 'an object overwritten since it was listed is refused (412)');
is($node->safe_psql('postgres', 'SELECT count(*) FROM st'), '0', 'nothing of that call staged');
# The multipart object: its ETag is no MD5, its hash is of the bytes.
$m = $node->safe_psql('postgres', q{SELECT reconcile_stage_objects('st', 'flat', (SELECT jsonb_agg(l) FROM reconcile_list_objects('flat', 'big') l))});
like($m, qr/"rows": 1000/, 'the multipart object has its 1,000 rows');
like($m, qr/"content_hash": "\Q@{[$sha->("id\n" . ("7\n" x 1000))]}\E"/, 'and the hash of its bytes');
$node->safe_psql('postgres', 'TRUNCATE st');

# A bucket versioned after an object was written: that object's version
# is S3's "null"; it is pinned by If-Match and staged and recorded under
# its ETag, so a rewound load recognises it.
s3(url => "$open_url/mixed", method => 'PUT');
put_object($open_url, 'mixed', 'old.csv', "id\n1\n");
s3(url => "$open_url/mixed?versioning=", upload => "$tmp/versioning.xml");
my $newv = put_object($open_url, 'mixed', 'new.csv', "id\n2\n");
$node->safe_psql('postgres', qq{
CREATE SERVER mixed FOREIGN DATA WRAPPER reconcile_objects OPTIONS (endpoint '$open_url', bucket 'mixed');
CREATE USER MAPPING FOR CURRENT_USER SERVER mixed OPTIONS (access_key_id 'test', secret_access_key 'test');
TRUNCATE st;
});
is($node->safe_psql('postgres', q{SELECT string_agg(object_key || ':' || version_id, ',' ORDER BY object_key) FROM reconcile_list_objects('mixed')}),
	"new.csv:$newv,old.csv:null", 'an object written before versioning lists as version "null"');
is($node->safe_psql('postgres', q{SELECT string_agg(e->>'object_key' || ':' || (e->>'version_id'), ',' ORDER BY e->>'object_key') FROM jsonb_array_elements(reconcile_stage_objects('st', 'mixed', (SELECT jsonb_agg(l) FROM reconcile_list_objects('mixed') l))) e}),
	"new.csv:$newv,old.csv:" . md5_hex("id\n1\n"), 'and is staged under its ETag');
$node->safe_psql('postgres', q{CREATE TABLE mt (id int PRIMARY KEY, v bigint NOT NULL DEFAULT 1, gone boolean NOT NULL DEFAULT false, h bytea);
SELECT reconcile_register('mt', '{id}', 'v', 'gone', 'h');});
is($node->safe_psql('postgres', q{SELECT status || ':' || staged_rows FROM reconcile_load('mt', 'mixed', '', '{"max_rejects": 2}')}),
	'committed:2', 'reconcile_load from it');
is($node->safe_psql('postgres', q{SELECT string_agg(status, ',') FROM reconcile_load('mt', 'mixed', '', '{"start_after": null}')}),
	'replayed', 'and a rewind replays it');

# The replay runbook end to end from a versioned bucket: a load, an
# update, a late replay of an older version, a delete, a conflicting
# object at the same version, a shadow target from the same listing, and
# the cutover comparison of the objects actually read.
s3(url => "$open_url/runbook", method => 'PUT');
s3(url => "$open_url/runbook?versioning=", upload => "$tmp/versioning.xml");
$node->safe_psql('postgres', qq{
CREATE SERVER runbook FOREIGN DATA WRAPPER reconcile_objects OPTIONS (endpoint '$open_url', bucket 'runbook');
CREATE USER MAPPING FOR CURRENT_USER SERVER runbook OPTIONS (access_key_id 'test', secret_access_key 'test');
CREATE TABLE cust (customer_id text PRIMARY KEY, name text, version bigint NOT NULL,
                   is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea);
CREATE TABLE cust_shadow (LIKE cust INCLUDING ALL);
SELECT reconcile_register('cust', '{customer_id}', 'version', 'is_deleted', 'payload_hash');
SELECT reconcile_register('cust_shadow', '{customer_id}', 'version', 'is_deleted', 'payload_hash');
});
my $load = sub {
	my ($opts) = @_;
	$opts //= '{}';
	return $node->safe_psql('postgres',
		qq{SELECT string_agg(status || ' i' || inserted || ' u' || updated || ' d' || deleted || ' n' || unchanged || ' s' || stale || ' c' || conflicts, ',' ORDER BY committed_at) FROM reconcile_load('cust', 'runbook', 'crm/', '$opts')});
};
my $hdr = "customer_id,version,name,operation\n";
put_object($open_url, 'runbook', 'crm/p1.csv', $hdr . "C1,1,Ana,UPSERT\nC2,1,Bo,UPSERT\n");
is($load->(), 'committed i2 u0 d0 n0 s0 c0', 'runbook: the first object loads');
put_object($open_url, 'runbook', 'crm/p2.csv', $hdr . "C1,2,Ana Lee,UPSERT\n");
is($load->(), 'committed i0 u1 d0 n0 s0 c0', 'runbook: a later object updates');
put_object($open_url, 'runbook', 'crm/p1.csv', $hdr . "C1,1,Ana,UPSERT\nC2,1,Bo,UPSERT\n");
is($load->(), '', 'runbook: an older key written again is not after the cursor');
is($load->('{"start_after": null}'), 'replayed i2 u0 d0 n0 s0 c0,replayed i0 u1 d0 n0 s0 c0,committed i0 u0 d0 n1 s1 c0',
	'runbook: a rewind replays both batches and loads the late version of p1, which changes nothing');
put_object($open_url, 'runbook', 'crm/p3.csv', $hdr . "C2,2,,DELETE\n");
is($load->(), 'committed i0 u0 d1 n0 s0 c0', 'runbook: a delete');
put_object($open_url, 'runbook', 'crm/p4.csv', $hdr . "C1,2,Ana Smith,UPSERT\n");
is($load->(), 'committed i0 u0 d0 n0 s0 c1', 'runbook: another payload at the same version is held as a conflict');
is($node->safe_psql('postgres', q{SELECT string_agg(customer_id || ':' || version || ':' || coalesce(name, '') || ':' || is_deleted, ',' ORDER BY 1) FROM cust}),
	'C1:2:Ana Lee:false,C2:2:Bo:true', 'runbook: the target after it all');
is($node->safe_psql('postgres',
	q{SELECT status || ' c' || conflicts FROM reconcile_load('cust_shadow', 'runbook', 'crm/', '{"source": "shadow"}')}),
	'committed c4', 'runbook: the shadow target loads the same listing in one batch: the four rows of C1 held (two payloads at version 2)');
is($node->safe_psql('postgres', q{
SELECT t::text || ':' || count(*) FILTER (WHERE r.object_key IS NULL)
  FROM (VALUES ('cust'::regclass), ('cust_shadow'::regclass)) v(t)
 CROSS JOIN reconcile_list_objects('runbook', 'crm/') l
  LEFT JOIN reconcile.object_reads r ON r.target = v.t AND r.object_key = l.object_key
       AND r.version_id = coalesce(nullif(l.version_id, 'null'), l.etag)
 WHERE NOT l.is_delete_marker GROUP BY t ORDER BY t::text}),
	"cust:0\ncust_shadow:0", 'cutover: every listed object version was read by both targets');
is($node->safe_psql('postgres', q{SELECT count(*) FROM reconcile.object_reads WHERE target = 'cust'::regclass}),
	'5', 'five object versions read for the live target');

# TLS: certificates are verified; a private CA is named by ca_file.
SKIP:
{
	skip 'no TLS S3 API', 3 unless $tls_url && $tls_ca;
	my $up = 0;
	for (1 .. 100)
	{
		$up = 1, last if system("curl -s -o /dev/null --cacert $tls_ca $tls_url/") == 0;
		select(undef, undef, undef, 0.1);
	}
	s3(url => "$tls_url/secure", method => 'PUT', args => [ '--cacert', $tls_ca ]);
	$node->safe_psql('postgres', qq{
CREATE SERVER tls_default FOREIGN DATA WRAPPER reconcile_objects OPTIONS (endpoint '$tls_url', bucket 'secure');
CREATE SERVER tls_ca FOREIGN DATA WRAPPER reconcile_objects OPTIONS (endpoint '$tls_url', bucket 'secure', ca_file '$tls_ca');
CREATE USER MAPPING FOR CURRENT_USER SERVER tls_default OPTIONS (access_key_id 'test', secret_access_key 'test');
CREATE USER MAPPING FOR CURRENT_USER SERVER tls_ca OPTIONS (access_key_id 'test', secret_access_key 'test');
});
	($rc, $out, $err) = $node->psql('postgres', q{SELECT * FROM reconcile_list_objects('tls_default', '', '{"max_retries": 0}')},
		extra_params => [ '-v', 'VERBOSITY=verbose' ]);
	like($err, qr/ERROR:  08006: could not read the versioning of bucket "secure" of server "tls_default": SSL certificate problem/,
		'a self-signed certificate is refused by default');
	put_object($tls_url, 'secure', 'k.csv', "id\n1\n", args => [ '--cacert', $tls_ca ]);
	is($node->safe_psql('postgres', q{SELECT object_key || ':' || size FROM reconcile_list_objects('tls_ca')}),
		'k.csv:5', 'ca_file names the private CA: listing over TLS');
	like($node->safe_psql('postgres', q{SELECT reconcile_stage_objects('st', 'tls_ca', '[{"object_key": "k.csv"}]')}),
		qr/"rows": 1/, 'and staging over TLS');
}

$node->stop;
done_testing();
