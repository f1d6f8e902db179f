#!/bin/sh
# Writes the linker version script of reconcile.so to stdout: the names
# PostgreSQL looks up with dlsym (_PG_init, the magic block, each
# PG_FUNCTION_INFO_V1 function with its pg_finfo_ record, and functions
# declared PGDLLEXPORT such as the parallel staging worker); every other
# symbol is local.  Usage: sh tools/exports.sh src/*.c > reconcile.exports
set -eu
echo '{'
echo '  global:'
echo '    _PG_init;'
echo '    Pg_magic_func;'
{
	sed -n 's/^PG_FUNCTION_INFO_V1(\([A-Za-z_0-9]*\)).*/\1\npg_finfo_\1/p' "$@"
	sed -n 's/^\(extern \)\{0,1\}PGDLLEXPORT [^(]*[ *]\([A-Za-z_0-9]*\)(.*/\2/p' "$@"
} | sort -u | sed 's/.*/    &;/'
echo '  local:'
echo '    *;'
echo '};'
