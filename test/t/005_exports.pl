# The installed reconcile.so exports exactly the names PostgreSQL looks up
# with dlsym: _PG_init, the magic block, every C function that an install or
# upgrade script names (AS 'MODULE_PATHNAME', 'name') with its pg_finfo_
# record, and the parallel workers' entry points named in
# CreateParallelContext calls.  Everything else is local, so no internal
# name can clash with another extension's in the server's one symbol space.
use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Test::More;

my $root = $ENV{RECONCILE_ROOT} or plan skip_all => 'RECONCILE_ROOT is not set';
my ($pkglibdir) = run_command([ 'pg_config', '--pkglibdir' ]);
chomp $pkglibdir;
my $lib = "$pkglibdir/reconcile.so";
ok(-f $lib, "the library is installed at $lib");

my %want = map { $_ => 1 } qw(_PG_init Pg_magic_func);
for my $script (glob "$root/reconcile--*.sql")
{
	my $text = slurp_file($script);
	while ($text =~ /'MODULE_PATHNAME'\s*,\s*'([A-Za-z_0-9]+)'/g)
	{
		$want{$1} = 1;
		$want{"pg_finfo_$1"} = 1;
	}
}
for my $src (glob "$root/src/*.c $root/src/*/*.c")
{
	my $text = slurp_file($src);
	$want{$1} = 1 while $text =~ /CreateParallelContext\(\s*"reconcile"\s*,\s*"([A-Za-z_0-9]+)"/g;
}
cmp_ok(scalar(keys %want), '>', 20, 'the scripts name the library\'s functions');

my ($out) = run_command([ 'nm', '-D', '--defined-only', $lib ]);
my %have;
for my $line (split /\n/, $out)
{
	my @f = split ' ', $line;
	$have{ $f[-1] } = 1 if @f >= 3;
}
my @missing = sort grep { !$have{$_} } keys %want;
my @extra = sort grep { !$want{$_} } keys %have;
is("@missing", '', 'every name PostgreSQL looks up is exported');
is("@extra", '', 'nothing else is exported');

done_testing();
