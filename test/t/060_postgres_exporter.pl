# Debian's prometheus-postgres-exporter, with the shipped
# monitoring/postgres_exporter/queries.yaml, against a node on which a
# batch, a diff job and a check job ran: /metrics, fetched over loopback,
# has every reconcile metric with its labels and values, and every metric
# the example alert rules use.
use strict;
use warnings;
use HTTP::Tiny;
use IPC::Run;
use Time::HiRes qw(usleep);
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $exporter = '/usr/bin/prometheus-postgres-exporter';
plan skip_all => "$exporter is not installed (tools/setup.sh installs it)"
  unless -x $exporter;

# The monitoring files: copied beside t/ by tools/test.sh, else the project's.
my ($queries, $alerts);
for my $root (grep { defined } ($ENV{TESTDIR}, $ENV{RECONCILE_ROOT}))
{
	next unless -r "$root/monitoring/postgres_exporter/queries.yaml";
	$queries = "$root/monitoring/postgres_exporter/queries.yaml";
	$alerts = "$root/monitoring/prometheus/reconcile_alerts.yml";
	last;
}
BAIL_OUT('monitoring/postgres_exporter/queries.yaml not found (TESTDIR, RECONCILE_ROOT)')
  unless $queries;

my $node = PostgreSQL::Test::Cluster->new('exporter');
$node->init;
$node->start;

$node->safe_psql('postgres', q{
CREATE EXTENSION reconcile;
CREATE TABLE acct (id int PRIMARY KEY, name text, v bigint NOT NULL,
                   gone boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE acct_stage (object_key text, source_row int, operation text, id text, name text, v text);
CREATE TABLE acct_copy (id int PRIMARY KEY, name text);
SELECT reconcile_register('acct', '{id}', 'v', 'gone', 'h');
SELECT reconcile_set_rules('acct', '{"warn": {"short_name": "length(name) < 3"}}');
INSERT INTO acct_stage VALUES ('o1', 1, 'UPSERT', '1', 'Ana', '1'),
                              ('o1', 2, 'UPSERT', '2', NULL, 'v?'),
                              ('o1', 3, 'UPSERT', '3', 'Bo', '1'),
                              ('o1', 4, 'UPSERT', '3', 'Bea', '1'),
                              ('o1', 5, 'UPSERT', '5', 'Di', '1');
SELECT reconcile_batch('acct', 'acct_stage',
    '[{"object_key":"o1","version_id":"1","content_hash":"h1","rows":5}]');
INSERT INTO acct_copy VALUES (1, 'Ana'), (5, 'Dee'), (9, 'Zed');
INSERT INTO reconcile.diff_jobs VALUES ('acct_copy', 'public.acct_copy', 'public.acct', '{id}', '{"compare": ["name"]}');
SELECT reconcile_diff_run();
INSERT INTO reconcile.check_jobs VALUES
  ('acct_quality', 'acct', '{"fail": {"named": "name IS NOT NULL", "short": "length(name) < 3"}}', NULL);
SELECT reconcile_check_run();
});

# What the view says, to compare with what the exporter serves.
my %view;
for my $line (split /\n/, $node->safe_psql('postgres', q{
	SELECT metric || '|' || (SELECT string_agg(key || '=' || value, ',' ORDER BY key)
	                           FROM jsonb_each_text(labels)) || '|' || value
	  FROM reconcile.metrics}))
{
	my ($metric, $labels, $value) = split /\|/, $line;
	$view{"$metric\{$labels\}"} = $value;
}
ok(scalar(keys %view) >= 20, 'reconcile.metrics has rows after a batch, a diff and a check');

# The exporter, on a free loopback port, reading this node over its socket.
my $port = PostgreSQL::Test::Cluster::get_free_port();
my $dsn = sprintf('host=%s port=%d user=%s dbname=postgres sslmode=disable',
	$node->host, $node->port, scalar(getpwuid($<)));
my ($out, $err) = ('', '');
local $ENV{DATA_SOURCE_NAME} = $dsn;
my $h = IPC::Run::start(
	[
		$exporter, "--web.listen-address=127.0.0.1:$port",
		"--extend.query-path=$queries", '--disable-default-metrics',
		'--disable-settings-metrics', '--log.level=warn'
	],
	'<', \undef, '>', \$out, '2>', \$err);

# Scrape until the reconcile metrics are there (bounded: 60 tries, 30 s).
my $http = HTTP::Tiny->new(timeout => 5);
my $body = '';
for (1 .. 60)
{
	my $res = $http->get("http://127.0.0.1:$port/metrics");
	if ($res->{success} && $res->{content} =~ /^reconcile_batches_total/m)
	{
		$body = $res->{content};
		last;
	}
	usleep(500_000);
}
$h->kill_kill;
diag("exporter stderr: $err") if $err ne '' && $body eq '';
isnt($body, '', 'the exporter serves /metrics with the reconcile metrics');

# Parse the exposition format: name{label="value",...} value
my %scraped;
my %names;
for my $line (split /\n/, $body)
{
	next if $line =~ /^#/;
	next unless $line =~ /^(reconcile_\w+)(?:\{(.*)\})?\s+(\S+)$/;
	my ($name, $labels, $value) = ($1, $2 // '', $3);
	my %l;
	while ($labels =~ /(\w+)="((?:[^"\\]|\\.)*)"/g) { $l{$1} = $2; }
	delete $l{server};    # the exporter's own label
	my $key = "$name\{" . join(',', map { "$_=$l{$_}" } sort keys %l) . '}';
	$scraped{$key} = $value;
	$names{$name} = 1;
}

# Every row of the view is a series of the same name, labels and value
# (ages move: within a minute of the view's).
my @missing = grep { !exists $scraped{$_} } sort keys %view;
is_deeply(\@missing, [], 'every metric of reconcile.metrics is exported with its labels');
for my $key (sort keys %view)
{
	next unless exists $scraped{$key};
	if ($key =~ /age_seconds/)
	{
		ok(abs($scraped{$key} - $view{$key}) < 60 && $scraped{$key} >= 0,
			"$key is an age in seconds");
	}
	else
	{
		is($scraped{$key} + 0, $view{$key} + 0, "$key = $view{$key}");
	}
}

# The values the scenario makes, spelled out.
my %expect = (
	'reconcile_batches_total{target=public.acct}' => 1,
	'reconcile_rows_total{disposition=inserted,target=public.acct}' => 2,
	'reconcile_rows_total{disposition=conflicts,target=public.acct}' => 2,
	'reconcile_rows_total{disposition=rejected,target=public.acct}' => 1,
	'reconcile_rejects_total{target=public.acct}' => 1,
	'reconcile_conflicts_held{target=public.acct}' => 1,
	'reconcile_diff_findings{issue=missing_in_target,job=acct_copy}' => 1,
	'reconcile_diff_findings{issue=extra_in_target,job=acct_copy}' => 0,
	'reconcile_diff_findings{issue=mismatched,job=acct_copy}' => 1,
	'reconcile_diff_failed_runs_total{job=acct_copy}' => 0,
	'reconcile_check_breaching_rules{job=acct_quality}' => 1,
	'reconcile_check_failing_rules{job=acct_quality}' => 1,
	'reconcile_check_failed_runs_total{job=acct_quality}' => 0,
);
for my $key (sort keys %expect)
{
	is($scraped{$key}, $expect{$key}, "scraped $key");
}
ok(defined $scraped{'reconcile_last_batch_age_seconds{target=public.acct}'},
	'the age of the last batch is exported');

# The example alert rules name only metrics the exporter serves.
open(my $fh, '<', $alerts) or die "$alerts: $!";
my $rules = do { local $/; <$fh> };
close $fh;
my %used;
while ($rules =~ /expr:.*/g)
{
	my $expr = $&;
	$used{$1} = 1 while $expr =~ /\b(reconcile_\w+)/g;
}
my @unknown = grep { !$names{$_} } sort keys %used;
ok(scalar(keys %used) >= 5, 'the alert rules use the reconcile metrics');
is_deeply(\@unknown, [], 'every metric of the alert rules is exported');

$node->stop;
done_testing();
