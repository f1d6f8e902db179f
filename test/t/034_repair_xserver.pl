# reconcile_repair across two servers, over loopback TCP through
# postgres_fdw: a remote source repairs a local plain target and a local
# registered one, and a local source repairs a remote (foreign) plain
# target, for every issue kind and with options; after each repair the same
# diff finds nothing.  The source's rows are fetched only for the differing
# keys: the remote server's log shows the key filter shipped with them.
use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $remote = PostgreSQL::Test::Cluster->new('repair_remote');
$remote->init;
$remote->append_conf('postgresql.conf', "listen_addresses = '127.0.0.1'\nlog_statement = 'all'\n");
$remote->start;

my $local = PostgreSQL::Test::Cluster->new('repair_local');
$local->init;
$local->start;

my $src = q{
CREATE TABLE src (id integer PRIMARY KEY, k2 text, amount numeric, note text, upd timestamp);
INSERT INTO src SELECT g, 'k' || (g % 7), g / 4.0, 'n' || g, timestamp '2026-11-01' + g * interval '1 minute'
FROM generate_series(1, 2000) g;
};
my $damage = q{
DELETE FROM %1$s WHERE id IN (7, 1234, 1999);
INSERT INTO %1$s (id, k2, amount, note, upd) VALUES (3001, 'k2', 1, 'extra', '2026-11-02'), (0, 'k0', 0, 'extra', '2026-11-01');
UPDATE %1$s SET amount = amount + 1 WHERE id = 10;
UPDATE %1$s SET note = NULL WHERE id = 20;
UPDATE %1$s SET amount = amount + 0.004 WHERE id = 30;
UPDATE %1$s SET amount = amount + 0.006 WHERE id = 31;
};
$remote->safe_psql('postgres', $src);
$remote->safe_psql('postgres', q{
CREATE TABLE tgt (LIKE src INCLUDING ALL);
INSERT INTO tgt SELECT * FROM src;
});
$remote->safe_psql('postgres', sprintf($damage, 'tgt'));

my $rport = $remote->port;
$local->safe_psql('postgres', $src . qq{
ALTER TABLE src RENAME TO lsrc;
CREATE EXTENSION reconcile;
CREATE EXTENSION postgres_fdw;
CREATE SERVER xremote FOREIGN DATA WRAPPER postgres_fdw
    OPTIONS (host '127.0.0.1', port '$rport', dbname 'postgres');
CREATE USER MAPPING FOR CURRENT_USER SERVER xremote;
CREATE FOREIGN TABLE f_src (id integer, k2 text, amount numeric, note text, upd timestamp)
    SERVER xremote OPTIONS (table_name 'src');
CREATE FOREIGN TABLE f_tgt (id integer, k2 text, amount numeric, note text, upd timestamp)
    SERVER xremote OPTIONS (table_name 'tgt');
CREATE TABLE ltgt (LIKE lsrc INCLUDING ALL);
INSERT INTO ltgt SELECT * FROM lsrc;
CREATE TABLE rtgt (id integer PRIMARY KEY, k2 text, amount numeric, note text, upd timestamp,
                   version bigint NOT NULL DEFAULT 1, is_deleted boolean NOT NULL DEFAULT false, payload_hash bytea);
INSERT INTO rtgt (id, k2, amount, note, upd) SELECT * FROM lsrc;
SELECT reconcile_register(target => 'rtgt', key_columns => '{id}', version_column => 'version',
    deleted_column => 'is_deleted', hash_column => 'payload_hash');
CREATE VIEW rtgt_live AS SELECT id, k2, amount, note, upd FROM rtgt WHERE NOT is_deleted;
});
$local->safe_psql('postgres', sprintf($damage, 'ltgt'));
$local->safe_psql('postgres', sprintf($damage, 'rtgt'));

my @cases = (
	[ '{}', 8 ],
	[ '{"tolerance": {"amount": 0.005}}', 7 ],
	[ '{"remote": "pull"}', 8 ],
	[ '{"updated_column": "upd", "window": ["2026-11-01 00:05", "2026-11-01 06:00"]}', 4 ],
	[ '{"compare": ["amount"], "column_map": {"amount": "amount"}}', 7 ],);
foreach my $case (@cases)
{
	my ($opts, $n) = @$case;
	foreach my $pair ([ 'f_src', 'ltgt', 'ltgt' ], [ 'f_src', 'rtgt', 'rtgt_live' ], [ 'lsrc', 'f_tgt', 'f_tgt' ])
	{
		my ($s, $t, $seen) = @$pair;
		my $o = $opts;
		my $before = $local->safe_psql('postgres',
			"SELECT count(*) FROM reconcile_diff('$s', '$seen', '{id}', '$o')");
		my $got = $local->safe_psql('postgres', qq{
SELECT string_agg(outcome, ',' ORDER BY outcome) FROM (SELECT DISTINCT outcome FROM reconcile_repair('$s', '$t', '{id}', '$o')) x});
		is($got, $before eq '0' ? '' : 'applied', "$s into $t, $opts: every action applied");
		is($local->safe_psql('postgres', "SELECT count(*) FROM reconcile_diff('$s', '$seen', '{id}', '$o')"),
			'0', "$s into $t, $opts: the same diff finds nothing after the repair ($before before)");
		# The next case starts from damaged targets again.
		$local->safe_psql('postgres', "TRUNCATE ltgt; INSERT INTO ltgt SELECT * FROM lsrc;")
		  if $t eq 'ltgt';
		$local->safe_psql('postgres', sprintf($damage, 'ltgt')) if $t eq 'ltgt';
		$remote->safe_psql('postgres', "TRUNCATE tgt; INSERT INTO tgt SELECT * FROM src;" . sprintf($damage, 'tgt'))
		  if $t eq 'f_tgt';
		if ($t eq 'rtgt')
		{
			# Damage again as an application would, bumping versions.
			$local->safe_psql('postgres', q{
UPDATE rtgt SET amount = amount + 1, version = version + 1 WHERE id = 10;
UPDATE rtgt SET is_deleted = true, version = version + 1 WHERE id = 1234;
INSERT INTO rtgt (id, k2, amount, note, upd) VALUES (4000, 'x', 1, 'x', '2026-11-01 00:10')
    ON CONFLICT (id) DO UPDATE SET is_deleted = false, version = rtgt.version + 1});
		}
	}
}

# The remote log: the source's rows of the differing keys were asked for by key.
my $log = slurp_file($remote->logfile);
like($log, qr/SELECT id, k2, amount, note, upd FROM public\.src WHERE \(\(id = ANY \((\$1::integer\[\]|'\{0,7,10,20,30,31,1234,1999,3001\}'::integer\[\])\)\)\)/,
	'the key filter on the source is shipped to its server');

# A registered repair across servers replays by its name.
$local->safe_psql('postgres', "UPDATE rtgt SET note = 'x' WHERE id = 5");
is($local->safe_psql('postgres', q{
SELECT string_agg(DISTINCT outcome, ',') FROM reconcile_repair('f_src', 'rtgt', '{id}',
    '{"run": "x1"}')}), 'applied', 'a named run across servers');
$local->safe_psql('postgres', "UPDATE rtgt SET note = 'y' WHERE id = 5");
is($local->safe_psql('postgres', q{
SELECT string_agg(DISTINCT outcome, ',') FROM reconcile_repair('f_src', 'rtgt', '{id}',
    '{"run": "x1"}')}), 'replayed', 'and again: replayed');

done_testing();
