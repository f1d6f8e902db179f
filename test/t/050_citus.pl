# reconcile on a Citus cluster: a coordinator and two workers started here.
# Every loader scenario (dispositions, tombstones, rejects, replay, rules,
# conflicts under both policies) gives the same receipts, rejects,
# conflicts, cursors and final target on a hash-distributed, a
# single-shard, a reference and a Citus local table as on a plain table;
# a composite key distributed by one of its columns, a table distributed
# after it was loaded and a batch under REPEATABLE READ load as on one
# server; the kinds reconcile does not load are refused before anything
# is written; the diff of a co-located pair equals the plain diff, read
# row by row and by checksums computed on the shards; a distributed
# target's UPDATEs are routed shard by shard and prepared; two batches of
# one manifest into two Citus targets commit in one transaction; and a
# worker killed with kill -9 during a batch leaves nothing of it on any
# node, after which the retry commits once.
#
# Skipped when Citus is not installed in this PostgreSQL (tools/setup.sh
# builds it with the shared script, see docs/citus.md).
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib $FindBin::RealBin;
use CitusCluster;

plan skip_all => CitusCluster::missing() if CitusCluster::missing();

# reconcile runs on the coordinator only; Citus propagates CREATE EXTENSION
# to the workers, so the files must be installed on every node.
my @nodes = CitusCluster::start(
	names                     => [ 'coordinator', 'worker1', 'worker2' ],
	max_prepared_transactions => 20,
	conf                      => "restart_after_crash = on\n");
my ($coord, $w1, $w2) = @nodes;
is($w1->safe_psql('postgres', "SELECT count(*) FROM pg_extension WHERE extname = 'reconcile'"),
	'1', 'CREATE EXTENSION reconcile is propagated to the workers');

# ---- the loader scenarios, once per kind of target ----

# How each kind makes its target and staged relation Citus tables.
my %distribute = (
	plain => '',
	distributed => q{
SELECT create_distributed_table('cust', 'id');
SELECT create_distributed_table('stage', 'id', colocate_with => 'cust');},
	single_shard => q{SELECT create_distributed_table('cust', NULL);},
	reference => q{SELECT create_reference_table('cust');},
	citus_local => q{SELECT citus_add_local_table_to_metadata('cust');},);

my $rowcount = 0;

# One batch: truncate the staged relation, stage the rows of each object,
# and show the receipt (its columns that do not vary from run to run).
sub batch
{
	my ($objects, $pos) = @_;
	my (@manifest, @values);
	for my $o (@$objects)
	{
		my ($key, $version_id, @rows) = @$o;
		push @manifest,
		  qq[{"object_key":"$key","version_id":"$version_id","content_hash":"h-$key","rows":]
		  . scalar(@rows) . '}';
		my $n = 0;
		push @values, "('$key', " . ++$n . ", $_)" for @rows;
	}
	my $manifest = '[' . join(',', @manifest) . ']';
	my $sql = "TRUNCATE stage;\n";
	$sql .= "INSERT INTO stage VALUES " . join(",\n  ", @values) . ";\n" if @values;
	$sql .= "SELECT 'receipt', status, staged_rows, inserted, updated, deleted, unchanged, stale, duplicates, conflicts, rejected"
	  . " FROM reconcile_batch('cust', 'stage', '$manifest', current_schema() || '-feed', '$pos');\n";
	return $sql;
}

# Staged rows: operation, id, version, name, age.
#
# Two objects: an update, an unchanged row, a stale row, a tombstone, a new
# tombstone, a new key, and a conflict held back (quarantine); loaded, then
# replayed.
my @o2_o3 = (
	[
		[
			'o2', '1',
			"'UPSERT', 'C1', '2', 'Ana Lee', 31",
			"'UPSERT', 'C2', '1', 'Bo', 40",
			"'UPSERT', 'C3', '0', 'Old', 1",
			"'DELETE', 'C4', '2', NULL, NULL",
			"'DELETE', 'C9', '1', NULL, NULL",
			"'UPSERT', 'C5', '2', 'X', 1"
		],
		[ 'o3', '1', "'UPSERT', 'C8', '1', 'He', 20", "'UPSERT', 'C5', '2', 'Y', 1" ]
	],
	'o3@1');

my $scenario =
  # Inserts, an exact duplicate and a reject (a malformed version).
  batch(
	[
		[
			'o1', '1',
			"'UPSERT', 'C1', '1', 'Ana', 30",
			"'UPSERT', 'C2', '1', 'Bo', 40",
			"'UPSERT', 'C2', '1', 'Bo', 40",
			"'UPSERT', 'C3', '1', 'Cy', 17",
			"'UPSERT', 'C4', '1', 'Di', 50",
			"'UPSERT', 'C5', '1', 'Ed', 60",
			"'UPSERT', 'C6', '1', 'Fa', 70",
			"'UPSERT', 'C7', 'v?', 'Gu', 80"
		]
	],
	'o1@1')
  . batch(@o2_o3)
  # The same manifest again: the stored receipt, nothing written.
  . batch(@o2_o3)
  # Rules: a row without a name is dropped, a minor is a warning.
  . q{SELECT reconcile_set_rules('cust', '{"drop": {"has_name": "name IS NOT NULL"}, "warn": {"adult": "age >= 18"}}');
}
  . batch(
	[
		[
			'o4', '1',
			"'UPSERT', 'C10', '1', NULL, 20",
			"'UPSERT', 'C11', '1', 'Io', 10",
			"'UPSERT', 'C1', '3', 'Ana Lee-Park', 32"
		]
	],
	'o4@1')
  # Under 'abort' a conflict fails the batch, and nothing is written.
  . q{SELECT reconcile_register('cust', '{id}', 'version', 'is_deleted', 'h', 'abort');
}
  . batch([ [ 'o5', '1', "'UPSERT', 'C6', '5', 'P', 1", "'UPSERT', 'C6', '5', 'Q', 1" ] ],
	'o5@1')
  . batch([ [ 'o6', '1', "'UPSERT', 'C6', '5', 'P', 1" ] ], 'o6@1')
  # The same version as the target's with another payload.
  . batch([ [ 'o7', '1', "'UPSERT', 'C1', '3', 'Someone else', 1" ] ], 'o7@1')
  . q{SELECT reconcile_register('cust', '{id}', 'version', 'is_deleted', 'h', 'quarantine');
}
  . batch([ [ 'o8', '1', "'UPSERT', 'C1', '3', 'Someone else', 1" ] ], 'o8@1')
  # What the target and the state tables hold at the end.
  . q{SELECT 'row', id, name, age, version, is_deleted, encode(h, 'hex') FROM cust ORDER BY id;
SELECT 'receipts', inserted, updated, deleted, unchanged, stale, duplicates, conflicts, rejected,
       checksum, reconcile_receipt_objects(target, batch_id), warnings, "cursor"
  FROM reconcile.receipts WHERE target = 'cust'::regclass ORDER BY committed_at, batch_id;
SELECT 'rejects', batch_id, object_key, source_row, column_name, raw_value, reason
  FROM reconcile.rejects WHERE target = 'cust'::regclass ORDER BY batch_id, object_key, source_row, column_name;
SELECT 'conflicts', batch_id, key, version, object_key, source_row, encode(staged_hash, 'hex'), encode(existing_hash, 'hex')
  FROM reconcile.conflicts WHERE target = 'cust'::regclass ORDER BY batch_id, object_key, source_row;
SELECT 'cursor', position, batch_id FROM reconcile.cursors WHERE target = 'cust'::regclass;
};

sub run_kind
{
	my ($kind) = @_;
	$coord->safe_psql(
		'postgres', qq{
CREATE SCHEMA $kind;
SET search_path = $kind, public;
CREATE TABLE cust (id text PRIMARY KEY, name text, age int, version bigint NOT NULL,
                   is_deleted boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE stage (object_key text, source_row bigint, operation text, id text,
                    version text, name text, age int);
$distribute{$kind}
SELECT reconcile_register('cust', '{id}', 'version', 'is_deleted', 'h');
});
	my ($ret, $out, $err) = $coord->psql(
		'postgres',
		"SET search_path = $kind, public;\n$scenario",
		on_error_stop => 0,
		extra_params => [ '-A', '-t', '-F', '|' ]);
	$err =~ s/^psql:<stdin>:\d+: //mg;
	return "$out\n--- errors ---\n$err";
}

my $plain = run_kind('plain');
like($plain, qr/^receipt\|replayed\|/m, 'plain: the replay returns the stored receipt');
like($plain, qr/ERROR:  batch \w+ has 2 conflicting rows for table "cust"/,
	'plain: a conflict under abort fails the batch');
like($plain, qr/^rejects\|/m,   'plain: a reject is recorded');
like($plain, qr/^conflicts\|/m, 'plain: conflicts are recorded under quarantine');
like($plain, qr/^row\|C9\|\|\|1\|t\|/m, 'plain: a new tombstone');

for my $kind ('distributed', 'single_shard', 'reference', 'citus_local')
{
	my $got = run_kind($kind);
	is($got, $plain,
		"$kind: the same receipts, rejects, conflicts, cursor and target as a plain table");
}

# A key held back by a batch (o8) is resolved on a plain table; a Citus
# table refuses reconcile_resolve, whose probe would read the shell, before
# anything is decided.
my $resolve = q{SELECT r.outcome FROM reconcile.conflicts c,
       reconcile_resolve('cust', c.batch_id, c.key, c.staged_hash) AS r
 WHERE c.target = 'cust'::regclass AND c.object_key = 'o8' LIMIT 1};
is($coord->safe_psql('postgres', "SET search_path = plain, public; $resolve"),
	'updated', 'plain: the held key is resolved');
for my $kind ('distributed', 'reference')
{
	my ($ret, $out, $err) =
	  $coord->psql('postgres', "SET search_path = $kind, public; $resolve");
	like($err, qr/reconcile_resolve does not support table "cust", a [\w -]+ table/,
		"$kind: reconcile_resolve is refused");
	is($coord->safe_psql('postgres', "SELECT count(*) FROM reconcile.resolutions WHERE target = '$kind.cust'::regclass"),
		'0', "$kind: nothing is decided");
}

# The rows are in the shards, read through Citus, not in the shell table.
is($coord->safe_psql('postgres', 'SELECT count(*) FROM distributed.cust'),
	$coord->safe_psql('postgres', 'SELECT count(*) FROM plain.cust'),
	'distributed: every row is in the shards');
is( $w1->safe_psql('postgres',
		"SET citus.show_shards_for_app_name_prefixes = '*'; SELECT count(*) > 0 FROM pg_class WHERE relname ~ '^cust_[0-9]+\$' AND relkind = 'r'"),
	't',
	'distributed: worker 1 holds shards of the target');

# ---- a composite key, and a table distributed after it was loaded ----

# Distributed by one of two key columns: the probe's semi-join on the
# distribution column finds every row of the batch's keys.
my $composite = q{
CREATE TABLE orders (region text, order_no int, item text, v bigint NOT NULL,
                     d boolean NOT NULL DEFAULT false, h bytea, PRIMARY KEY (region, order_no));
CREATE TABLE orders_stage (object_key text, source_row bigint, operation text, region text,
                           order_no int, v text, item text);
%s
SELECT reconcile_register('orders', '{region,order_no}', 'v', 'd', 'h');
INSERT INTO orders_stage VALUES ('c1', 1, 'UPSERT', 'north', 1, '1', 'tea'),
    ('c1', 2, 'UPSERT', 'north', 2, '1', 'milk'), ('c1', 3, 'UPSERT', 'south', 1, '1', 'rice');
SELECT status, inserted, updated, unchanged FROM reconcile_batch('orders', 'orders_stage',
    '[{"object_key":"c1","version_id":"1","content_hash":"h","rows":3}]');
TRUNCATE orders_stage;
INSERT INTO orders_stage VALUES ('c2', 1, 'UPSERT', 'north', 1, '2', 'green tea'),
    ('c2', 2, 'UPSERT', 'north', 2, '1', 'milk'), ('c2', 3, 'UPSERT', 'north', 3, '1', 'bread'),
    ('c2', 4, 'DELETE', 'south', 1, '2', NULL);
SELECT status, inserted, updated, deleted, unchanged FROM reconcile_batch('orders', 'orders_stage',
    '[{"object_key":"c2","version_id":"1","content_hash":"h","rows":4}]');
SELECT region, order_no, item, v, d, encode(h, 'hex') FROM orders ORDER BY 1, 2;
};
my %orders;
for my $kind ('plain', 'distributed')
{
	my $dist =
	  $kind eq 'distributed'
	  ? q{SELECT create_distributed_table('orders', 'region');
          SELECT create_distributed_table('orders_stage', 'region', colocate_with => 'orders');}
	  : '';
	$orders{$kind} = $coord->safe_psql('postgres',
		"SET search_path = $kind, public;\n" . sprintf($composite, $dist));
	$orders{$kind} =~ s/^\n//mg;    # create_distributed_table's empty lines
}
like($orders{plain}, qr/^committed\|1\|1\|1\|1$/m, 'composite key, plain: the second batch');
is($orders{distributed}, $orders{plain},
	'composite key, distributed by one key column: the same receipts and rows as plain');

# An array payload column: array_agg would stack its values into one
# dimension more, so its UPDATE stays one statement; same rows as plain.
my $tagged = q{
CREATE TABLE tagged (id int PRIMARY KEY, tags text[], v bigint NOT NULL,
                     d boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE tagged_stage (object_key text, source_row bigint, operation text, id int,
                           v text, tags text[]);
%s
SELECT reconcile_register('tagged', '{id}', 'v', 'd', 'h');
INSERT INTO tagged_stage VALUES ('t1', 1, 'UPSERT', 1, '1', '{a,b}'),
    ('t1', 2, 'UPSERT', 2, '1', '{c}'), ('t1', 3, 'UPSERT', 3, '1', NULL);
SELECT status, inserted FROM reconcile_batch('tagged', 'tagged_stage',
    '[{"object_key":"t1","version_id":"1","content_hash":"h","rows":3}]');
TRUNCATE tagged_stage;
INSERT INTO tagged_stage VALUES ('t2', 1, 'UPSERT', 1, '2', '{x,"y z"}'),
    ('t2', 2, 'UPSERT', 3, '2', '{}'), ('t2', 3, 'DELETE', 2, '2', NULL);
SELECT status, updated, deleted FROM reconcile_batch('tagged', 'tagged_stage',
    '[{"object_key":"t2","version_id":"1","content_hash":"h","rows":3}]');
SELECT id, tags, v, d, encode(h, 'hex') FROM tagged ORDER BY 1;
};
my %tagged;
for my $kind ('plain', 'distributed')
{
	my $dist =
	  $kind eq 'distributed'
	  ? q{SELECT create_distributed_table('tagged', 'id');
          SELECT create_distributed_table('tagged_stage', 'id', colocate_with => 'tagged');}
	  : '';
	$tagged{$kind} = $coord->safe_psql('postgres',
		"SET search_path = $kind, public;\n" . sprintf($tagged, $dist));
	$tagged{$kind} =~ s/^\n//mg;
}
like($tagged{plain}, qr/^committed\|2\|1$/m, 'array column, plain: the second batch');
like($tagged{plain}, qr/^1\|\{x,"y z"\}\|2\|f\|/m, 'array column, plain: the array is written whole');
is($tagged{distributed}, $tagged{plain}, 'array column, distributed: the same receipts and rows as plain');

# The issue's case: a loaded table distributed afterwards keeps its old
# rows on disk in the coordinator's shell; the batch reads the shards.
is( $coord->safe_psql(
		'postgres', q{
SET client_min_messages = warning;
CREATE TABLE public.legacy (id text PRIMARY KEY, name text, version bigint NOT NULL,
                            del boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE public.legacy_stage (object_key text, source_row bigint, operation text,
                                  id text, version text, name text);
SELECT reconcile_register('public.legacy', '{id}', 'version', 'del', 'h');
INSERT INTO public.legacy_stage VALUES ('l1', 1, 'UPSERT', 'A', '1', 'Ada'), ('l1', 2, 'UPSERT', 'B', '1', 'Bob');
SELECT count(*) FROM reconcile_batch('public.legacy', 'public.legacy_stage',
    '[{"object_key":"l1","version_id":"1","content_hash":"h","rows":2}]');
SELECT create_distributed_table('public.legacy', 'id');
TRUNCATE public.legacy_stage;
SELECT create_distributed_table('public.legacy_stage', 'id', colocate_with => 'public.legacy');
INSERT INTO public.legacy_stage VALUES ('l2', 1, 'UPSERT', 'A', '2', 'Ada L'), ('l2', 2, 'UPSERT', 'B', '1', 'Bob'),
    ('l2', 3, 'UPSERT', 'C', '1', 'Cy');
SELECT status, inserted, updated, unchanged FROM reconcile_batch('public.legacy', 'public.legacy_stage',
    '[{"object_key":"l2","version_id":"1","content_hash":"h","rows":3}]');
SELECT string_agg(id || '=' || name || '/' || version, ' ' ORDER BY id) FROM public.legacy;
}),
	"\n1\n\n\ncommitted|1|1|1\nA=Ada L/2 B=Bob/1 C=Cy/1",    # void results print empty lines
	'a table distributed after it was loaded: the keys in its shards are found');

# Two batches of one manifest into two Citus targets in one transaction:
# the first batch's probe copy lives until commit, so the second takes the
# next free name (it failed with 'relation "reconcile_probe_..." already
# exists'), and each target gets its own rows, loaded and then updated.
$coord->safe_psql(
	'postgres', q{
SET client_min_messages = warning;
CREATE TABLE public.twin_a (id int PRIMARY KEY, name text, version bigint NOT NULL,
                            del boolean NOT NULL DEFAULT false, h bytea);
CREATE TABLE public.twin_b (LIKE public.twin_a INCLUDING ALL);
CREATE TABLE public.twin_stage (object_key text, source_row bigint, operation text,
                                id int, version text, name text);
SELECT create_distributed_table('public.twin_a', 'id');
SELECT create_distributed_table('public.twin_b', 'id', colocate_with => 'public.twin_a');
SELECT create_distributed_table('public.twin_stage', 'id', colocate_with => 'public.twin_a');
SELECT reconcile_register('public.twin_a', '{id}', 'version', 'del', 'h');
SELECT reconcile_register('public.twin_b', '{id}', 'version', 'del', 'h');
INSERT INTO public.twin_b VALUES (2, 'Bea', 0, false, NULL);
});
my $twin_batches = q{
BEGIN;
SELECT status, inserted, updated, unchanged FROM reconcile_batch('public.twin_a', 'public.twin_stage', '%1$s');
SELECT status, inserted, updated, unchanged FROM reconcile_batch('public.twin_b', 'public.twin_stage', '%1$s');
COMMIT;
SELECT string_agg(id || '=' || name || '/' || version, ' ' ORDER BY id) FROM public.twin_a;
SELECT string_agg(id || '=' || name || '/' || version, ' ' ORDER BY id) FROM public.twin_b;
};
my ($out, $err);
$coord->psql(
	'postgres', q{
INSERT INTO public.twin_stage VALUES ('w1', 1, 'UPSERT', 1, '1', 'Ada'), ('w1', 2, 'UPSERT', 2, '1', 'Bob');
} . sprintf($twin_batches, '[{"object_key":"w1","version_id":"1","content_hash":"h","rows":2}]'),
	stdout => \$out,
	stderr => \$err);
is($out, "committed|2|0|0\ncommitted|1|1|0\n1=Ada/1 2=Bob/1\n1=Ada/1 2=Bob/1",
	'one manifest into two distributed targets in one transaction: both batches commit')
  or diag($err);
$coord->psql(
	'postgres', q{
TRUNCATE public.twin_stage;
INSERT INTO public.twin_stage VALUES ('w2', 1, 'UPSERT', 1, '2', 'Ada L'), ('w2', 2, 'UPSERT', 2, '1', 'Bob'),
    ('w2', 3, 'UPSERT', 3, '1', 'Cy');
} . sprintf($twin_batches, '[{"object_key":"w2","version_id":"1","content_hash":"h","rows":3}]'),
	stdout => \$out,
	stderr => \$err);
is($out, "committed|1|1|1\ncommitted|1|1|1\n1=Ada L/2 2=Bob/1 3=Cy/1\n1=Ada L/2 2=Bob/1 3=Cy/1",
	'and again, updating the rows each probe copy read from its own target')
  or diag($err);

# ---- refusals, before anything is written ----

sub refused
{
	my ($sql, $pattern, $what) = @_;
	my $receipts = $coord->safe_psql('postgres', 'SELECT count(*) FROM reconcile.receipts');
	my ($ret, $out, $err) = $coord->psql('postgres', $sql);
	isnt($ret, 0, "$what: refused");
	like($err, $pattern, "$what: the error says why and how");
	is($coord->safe_psql('postgres', 'SELECT count(*) FROM reconcile.receipts'),
		$receipts, "$what: nothing written");
}

my $one = q{'[{"object_key":"r1","version_id":"1","content_hash":"h","rows":1}]'};
$coord->safe_psql(
	'postgres', q{
CREATE TABLE distributed.stage_local (object_key text, source_row bigint, operation text, id text,
                                      version text, name text, age int);
INSERT INTO distributed.stage_local VALUES ('r1', 1, 'UPSERT', 'C1', '9', 'Z', 1);
CREATE TABLE distributed.stage_apart (LIKE distributed.stage_local);
SELECT create_distributed_table('distributed.stage_apart', 'id', colocate_with => 'none');
INSERT INTO distributed.stage_apart SELECT * FROM distributed.stage_local;
CREATE TABLE distributed.stage_ref (LIKE distributed.stage_local);
SELECT create_reference_table('distributed.stage_ref');
INSERT INTO distributed.stage_ref SELECT * FROM distributed.stage_local;
});
refused(
	"SELECT * FROM reconcile_batch('distributed.cust', 'distributed.stage_local', $one)",
	qr/staged relation "stage_local" of batch \w+ is not co-located with its distributed target "cust".*\n.*not a Citus table.*\n.*HINT:  Distribute the staged relation .*create_distributed_table\('distributed.stage_local', 'id', colocate_with => 'distributed.cust'\)/,
	'a local staged relation into a distributed target');
refused(
	"SELECT * FROM reconcile_batch('distributed.cust', 'distributed.stage_apart', $one)",
	qr/is not co-located with its distributed target "cust"/,
	'a staged relation distributed apart from its target');
refused(
	"SELECT * FROM reconcile_batch('distributed.cust', 'distributed.stage_ref', $one)",
	qr/the staged relation is a reference table/,
	'a reference table staged into a distributed target');
refused(
	q{CREATE TABLE distributed.appended (id text PRIMARY KEY, version bigint NOT NULL, d boolean NOT NULL, h bytea);
      SELECT create_distributed_table('distributed.appended', 'id', 'append');
      SELECT reconcile_register('distributed.appended', '{id}', 'version', 'd', 'h');},
	qr/table "appended" is an append-distributed table, which reconcile cannot load/,
	'registering an append-distributed table');

# A reference table is updated from one array per column: a column that is
# an array, or a domain over one, cannot be an element of one.
$coord->safe_psql('postgres', 'CREATE DOMAIN distributed.tags AS text[]');
for my $type ('text[]', 'distributed.tags')
{
	(my $name = "ref_$type") =~ s/\W+/_/g;
	refused(
		qq{CREATE TABLE distributed.$name (id text PRIMARY KEY, tags $type, version bigint NOT NULL,
                                          d boolean NOT NULL DEFAULT false, h bytea);
          SELECT create_reference_table('distributed.$name');
          SELECT reconcile_register('distributed.$name', '{id}', 'version', 'd', 'h');
          CREATE TABLE distributed.${name}_stage (object_key text, source_row bigint, operation text,
                                                  id text, version text, tags $type);
          INSERT INTO distributed.${name}_stage VALUES ('t1', 1, 'UPSERT', 'A', '1', '{x,y}');
          SELECT * FROM reconcile_batch('distributed.$name', 'distributed.${name}_stage',
              '[{"object_key":"t1","version_id":"1","content_hash":"h","rows":1}]');},
		qr/column "tags" of reference table "$name" is of type .*, which reconcile cannot load into a reference table/,
		"a reference table with a column of type $type");
}

# ---- the diff of a co-located pair equals the plain diff ----

my $diff_setup = q{
CREATE TABLE src AS SELECT id, name, age FROM cust WHERE NOT is_deleted;
%s
UPDATE src SET name = 'changed' WHERE id = 'C2';
DELETE FROM src WHERE id = 'C3';
INSERT INTO src VALUES ('C99', 'new', 1);
};
my $diff_query = q{SELECT issue, key, columns, source_values, target_values
  FROM reconcile_diff('src', 'cust', '{id}', '{"compare": ["name", "age"]}') ORDER BY key::text, issue;};
my %diff;
for my $kind ('plain', 'distributed')
{
	my $dist =
	  $kind eq 'distributed'
	  ? q{SELECT create_distributed_table('src', 'id', colocate_with => 'cust');}
	  : '';
	$coord->safe_psql('postgres',
		"SET search_path = $kind, public;\n" . sprintf($diff_setup, $dist));
	$diff{$kind} =
	  $coord->safe_psql('postgres', "SET search_path = $kind, public;\n$diff_query");
}
like($diff{plain}, qr/C99/, 'plain diff: finds the extra source row');
is($diff{distributed}, $diff{plain}, 'distributed diff: the same findings as the plain diff');

# A distributed side is compared by checksums of key ranges, which Citus
# computes on the shards: every issue kind, over enough rows and a small
# leaf size for several levels, gives the findings of the plain diff and of
# the distributed diff that reads every row.
my $cs_setup = q{
CREATE SCHEMA %1$s;
SET search_path = %1$s;
CREATE TABLE a (id int, grp text, val numeric, ts timestamptz);
CREATE TABLE b (id int PRIMARY KEY, grp text, val numeric, ts timestamptz);
INSERT INTO a SELECT g, 'g' || (g %% 7), g * 1.5, timestamptz '2026-01-01 00:00+00' + g * interval '1 hour'
  FROM generate_series(1, 400) g;
INSERT INTO b SELECT * FROM a;
UPDATE a SET val = 1.50 WHERE id = 1;
UPDATE a SET grp = 'changed' WHERE id = 40;
UPDATE a SET val = NULL WHERE id = 41;
UPDATE b SET ts = ts + interval '1 second' WHERE id = 333;
DELETE FROM a WHERE id IN (100, 101);
INSERT INTO a VALUES (1000, 'new', 1, timestamptz '2026-02-01 00:00+00'),
  (150, 'g3', 225.0, timestamptz '2026-01-07 06:00+00');
%2$s
};
my $cs_query = q{SELECT issue, key, columns, source_values, target_values
  FROM reconcile_diff('a', 'b', '{id}', '{"leaf_rows": 10, "split_factor": 4%s}')
  ORDER BY key::text, issue, source_values::text;
SELECT * FROM reconcile_diff_summary('a', 'b', '{id}', '{"leaf_rows": 10, "split_factor": 4%s}');};
$coord->safe_psql('postgres', sprintf($cs_setup, 'cs_plain', ''));
$coord->safe_psql(
	'postgres',
	sprintf($cs_setup, 'cs_dist',
		q{SELECT create_distributed_table('a', 'id'); SELECT create_distributed_table('b', 'id', colocate_with => 'a');}
	));
my $cs_plain = $coord->safe_psql('postgres', "SET search_path = cs_plain, public;\n" . sprintf($cs_query, '', ''));
like($cs_plain, qr/^DUPLICATE_KEY_IN_SOURCE\|\{"id": 150\}/m, 'checksum diff: the plain diff finds the duplicate key');
like($cs_plain, qr/^MISMATCH\|\{"id": 333\}/m, 'checksum diff: the plain diff finds the mismatch on the target side');
my ($ret, $cs_dist, $cs_log) = $coord->psql('postgres',
	"SET search_path = cs_dist, public;\nSET client_min_messages = debug2;\n"
	  . sprintf($cs_query, ', "remote": "checksum"', ', "remote": "checksum"'));
is($ret, 0, 'checksum diff: the distributed pair is compared by checksums');
is($cs_dist, $cs_plain, 'checksum diff: the same findings and summary as the plain diff');
like($cs_log, qr/reconcile diff checksum query/, 'checksum diff: the checksum queries ran');
unlike($cs_log, qr/reads every row/, 'checksum diff: no side was read row by row');
is( $coord->safe_psql(
		'postgres',
		"SET search_path = cs_dist, public;\n" . sprintf($cs_query, ', "remote": "pull"', ', "remote": "pull"')),
	$cs_plain,
	'checksum diff: reading every row of the distributed pair finds the same');
# Single-shard tables, compared by checksums too.
$coord->safe_psql(
	'postgres',
	sprintf($cs_setup, 'cs_single',
		q{SELECT create_distributed_table('a', NULL); SELECT create_distributed_table('b', NULL, colocate_with => 'a');}
	));
($ret, my $cs_single, $cs_log) = $coord->psql('postgres',
	"SET search_path = cs_single, public;\nSET client_min_messages = debug2;\n"
	  . sprintf($cs_query, ', "remote": "checksum"', ', "remote": "checksum"'));
is($cs_single, $cs_plain, 'checksum diff: single-shard tables give the plain findings');
like($cs_log, qr/reconcile diff checksum query/, 'checksum diff: single-shard tables are compared by checksums');
# One side local: the grid comes from it, the other side's sums from the shards.
is( $coord->safe_psql(
		'postgres',
		q{SELECT issue, key FROM reconcile_diff('cs_plain.a', 'cs_dist.b', '{id}', '{"leaf_rows": 10}')
		  ORDER BY key::text, issue, source_values::text}),
	$coord->safe_psql(
		'postgres',
		q{SELECT issue, key FROM reconcile_diff('cs_plain.a', 'cs_plain.b', '{id}', '{"leaf_rows": 10}')
		  ORDER BY key::text, issue, source_values::text}),
	'checksum diff: a local source against a distributed target');

# The checksums prove on Citus too: values swapped between neighbouring
# rows (v of rows 10/11, 20/21, ..., 990/991: 198 mismatches, of which a
# linear row hash summed per range found 106), then random edits of every
# kind (swaps near and far, a column shifted or permuted in a block,
# duplicated and deleted rows, NULL against a value, numerics equal by
# value): the checksum diff of the distributed pair finds what reading
# every row finds, each time.
$coord->safe_psql('postgres', q{
CREATE SCHEMA cs_prop;
SET search_path = cs_prop;
CREATE TABLE a (id integer, v text, n numeric, x integer);
CREATE TABLE b (id integer, v text, n numeric, x integer);
SELECT create_distributed_table('a', 'id');
SELECT create_distributed_table('b', 'id', colocate_with => 'a');
-- The edits are made on plain copies, then loaded into the distributed pair.
CREATE TABLE pa (id integer, v text, n numeric, x integer);
CREATE TABLE pb (id integer, v text, n numeric, x integer);
});
my $prop_check = q{
SELECT row(d.*)::text FROM reconcile_diff_summary('cs_prop.a', 'cs_prop.b', '{id}', '%1$s'::jsonb || '{"remote": "checksum"}') d
UNION ALL
SELECT row(d.*)::text FROM reconcile_diff_summary('cs_prop.a', 'cs_prop.b', '{id}', '%1$s'::jsonb || '{"remote": "pull"}') d};
$coord->safe_psql('postgres', q{
SET search_path = cs_prop;
INSERT INTO pa (id, v) SELECT g, 'value ' || g FROM generate_series(1, 1000) g;
INSERT INTO pb SELECT * FROM pa;
UPDATE pb SET v = o.v FROM pa o
WHERE pb.id % 10 IN (0, 1) AND pb.id BETWEEN 10 AND 991
  AND o.id = CASE WHEN pb.id % 10 = 0 THEN pb.id + 1 ELSE pb.id - 1 END;
INSERT INTO a SELECT * FROM pa;
INSERT INTO b SELECT * FROM pb;
});
is( $coord->safe_psql('postgres',
		q{SELECT mismatched FROM reconcile_diff_summary('cs_prop.a', 'cs_prop.b', '{id}', '{"remote": "checksum"}')}),
	'198', 'checksum diff: all 198 values swapped between neighbouring rows of a distributed pair are found');
my $prop_seed = $ENV{RECONCILE_PROPERTY_SEED} // (time() % 100000);
srand($prop_seed);
for my $round (1 .. 5)
{
	my @edits;
	for (1 .. 1 + int(rand(6)))
	{
		my ($i, $j, $w) = (1 + int(rand(600)), 1 + int(rand(600)), 2 + int(rand(30)));
		my $col = (qw(v n x))[ int(rand(3)) ];
		push @edits, (
			"UPDATE pb SET $col = o.$col FROM (SELECT id, $col FROM pb WHERE id IN ($i, $j)) o WHERE pb.id IN ($i, $j) AND o.id = $i + $j - pb.id;",
			"UPDATE pb SET $col = o.$col FROM (SELECT id, $col FROM pb WHERE id IN ($i, $i + 1)) o WHERE pb.id IN ($i, $i + 1) AND o.id = 2 * $i + 1 - pb.id;",
			"UPDATE pb SET $col = o.$col FROM (SELECT id, lag($col) OVER (ORDER BY id) AS $col FROM pb) o WHERE o.id = pb.id AND pb.id BETWEEN $i AND $i + $w;",
			"UPDATE pb SET $col = o.$col FROM (SELECT id, $col FROM pb WHERE id BETWEEN $i AND $i + $w) o WHERE pb.id BETWEEN $i AND $i + $w AND o.id = 2 * $i + $w - pb.id;",
			"INSERT INTO pb SELECT * FROM pb WHERE id = $i;",
			"DELETE FROM pb WHERE id = $i;",
			"UPDATE pb SET $col = NULL WHERE id = $i;",
			"UPDATE pb SET n = n * 1.000 WHERE id BETWEEN $i AND $i + $w;")[ int(rand(8)) ];
	}
	my $opts = ('{}', '{"leaf_rows": 4, "split_factor": 3}', '{"leaf_rows": 16, "split_factor": 8}')[ int(rand(3)) ];
	$coord->safe_psql('postgres', "SET search_path = cs_prop;\nTRUNCATE a, b, pa, pb;\n"
		  . "INSERT INTO pa SELECT g, 'v' || (random() * 300)::int, round((random() * 50)::numeric, (random() * 2)::int), (random() * 4)::int FROM generate_series(1, 600) g;\n"
		  . "UPDATE pa SET n = NULL, x = NULL WHERE random() < 0.5;\n"
		  . "INSERT INTO pb SELECT * FROM pa;\n" . join("\n", @edits)
		  . "\nINSERT INTO a SELECT * FROM pa;\nINSERT INTO b SELECT * FROM pb;");
	my ($ck, $pl) = split /\n/, $coord->safe_psql('postgres', sprintf($prop_check, $opts));
	is($ck, $pl, "checksum diff: seed $prop_seed round $round ($opts) on a distributed pair: the findings of reading every row")
	  or diag join("\n", @edits);
}

# Under REPEATABLE READ too (the general path, as on one server).
is( $coord->safe_psql(
		'postgres', q{
TRUNCATE distributed.stage;
INSERT INTO distributed.stage VALUES ('rr', 1, 'UPSERT', 'C2', '7', 'Bo RR', 41), ('rr', 2, 'UPSERT', 'R1', '1', 'New RR', 42);
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT status, inserted, updated FROM reconcile_batch('distributed.cust', 'distributed.stage',
    '[{"object_key":"rr","version_id":"1","content_hash":"h","rows":2}]');
COMMIT;
SELECT string_agg(id || '=' || name || '/' || version, ' ' ORDER BY id) FROM distributed.cust WHERE id IN ('C2', 'R1');
}),
	"committed|1|1\nC2=Bo RR/7 R1=New RR/1",
	'distributed: a batch under REPEATABLE READ');

# The winners of a distributed target are written by one UPDATE per shard
# that holds some, each routed to that shard alone (not one statement whose
# every shard task reads all of them), and the workers' writes are prepared.
my ($rt_ret, $rt_out, $rt_log) = $coord->psql(
	'postgres', q{
TRUNCATE distributed.stage;
INSERT INTO distributed.stage SELECT 'rt', g, 'UPSERT', 'C' || g, '9', 'Routed', 50 FROM generate_series(1, 8) g;
SET citus.log_remote_commands = on;
SELECT status, inserted + updated FROM reconcile_batch('distributed.cust', 'distributed.stage',
    '[{"object_key":"rt","version_id":"1","content_hash":"h","rows":8}]');
});
is($rt_out, 'committed|8', 'distributed: a batch of updates commits');
my @updates = grep { /issuing UPDATE distributed\.cust/ } split /\n/, $rt_log;
my %shards = map { /(cust_\d+)/ ? ($1 => 1) : () } @updates;
ok(@updates > 1, 'distributed: the updates go to more than one shard');
ok(@updates <= 8, 'distributed: only the shards that hold winners are written');
is(scalar(keys %shards), scalar(@updates), 'distributed: one UPDATE per shard');
ok(!grep({ /read_intermediate_result/ || /cust_\d+.*cust_\d+/ } @updates),
	'distributed: each UPDATE reads its own winners and names one shard');
like($rt_log, qr/issuing PREPARE TRANSACTION/, 'distributed: the shards\' writes are prepared');
is($coord->safe_psql('postgres', "SELECT count(*) FROM distributed.cust WHERE name = 'Routed' AND version = 9"),
	'8', 'distributed: every routed row is written');

# ---- a worker killed with kill -9 during a batch ----

my $pause_key = "x'7265636f6e63696c'::bigint";
my $big_manifest = q{'[{"object_key":"k1","version_id":"1","content_hash":"hk","rows":2006}]'};
my $big_batch =
  "SELECT status, inserted, updated FROM reconcile_batch('distributed.cust', 'distributed.stage', $big_manifest, 'kill-feed', 'k1\@1')";
$coord->safe_psql(
	'postgres', q{
TRUNCATE distributed.stage;
INSERT INTO distributed.stage
SELECT 'k1', g, 'UPSERT', 'K' || g, '1', 'name ' || g, 20 FROM generate_series(1, 2000) g;
INSERT INTO distributed.stage
SELECT 'k1', 2000 + g, 'UPSERT', 'C' || g, '100', 'updated', 20 FROM generate_series(1, 6) g;
});
my $before = $coord->safe_psql('postgres',
	'SELECT count(*), sum(version), count(*) FILTER (WHERE name = $$updated$$) FROM distributed.cust');

my $holder = $coord->background_psql('postgres');
$holder->query_safe("SELECT pg_advisory_lock($pause_key)");
my $session = $coord->background_psql('postgres', on_error_stop => 0);
my $pid = $session->query_safe('SELECT pg_backend_pid()');
$session->query_safe("SET reconcile.pause_at = 'merged'");
$session->{stdin} .= "$big_batch;\n";
$session->{run}->pump_nb();
$coord->poll_query_until('postgres',
	"SELECT count(*) = 1 FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND pid = $pid"
) or die 'the batch did not reach its pause point';

# The batch has written every shard and waits before its receipt: kill
# worker 1, its postmaster and every backend, so none of them can answer
# the coordinator's PREPARE TRANSACTION.
my $w1_pid = $w1->{_pid};
my @w1_children = split /\s+/, `pgrep -P $w1_pid`;
kill 9, $w1_pid, @w1_children;
$w1->{_pid} = undef;
$holder->query_safe("SELECT pg_advisory_unlock($pause_key)");
$holder->quit;
$session->quit;
like($session->{stderr}, qr/ERROR/, 'the batch whose worker died fails');

# Its backends exit when they see the postmaster gone; then it restarts
# and recovers.
my $started = 0;
for (1 .. 60)
{
	$w1->{_pid} = undef;
	last if ($started = $w1->start(fail_ok => 1));
	sleep 1;
}
ok($started, 'the killed worker restarts');
$coord->safe_psql('postgres', 'SELECT recover_prepared_transactions()');
is( $coord->safe_psql(
		'postgres',
		'SELECT count(*), sum(version), count(*) FILTER (WHERE name = $$updated$$) FROM distributed.cust'),
	$before, 'after recovery the target holds none of the failed batch');
is( $coord->safe_psql(
		'postgres',
		"SELECT count(*) FROM reconcile.receipts WHERE \"cursor\" = 'k1\@1'"),
	'0',
	'after recovery no receipt of the failed batch');
for my $n ($coord, $w1, $w2)
{
	is($n->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts'),
		'0', $n->name . ': no prepared transaction left');
}
is($coord->safe_psql('postgres', $big_batch), 'committed|2000|6', 'the retry commits');
is($coord->safe_psql('postgres', $big_batch), 'replayed|2000|6', 'and only once');
is( $coord->safe_psql(
		'postgres',
		"SELECT count(*) FROM distributed.cust WHERE id LIKE 'K%'"),
	'2000',
	'the retry wrote every row once');
is($coord->safe_psql('postgres', "SELECT count(*) FROM distributed.cust WHERE name = 'updated' AND version = 100"),
	'6', 'the retry updated every row once');

$_->stop for @nodes;
done_testing();
