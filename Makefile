# reconcile: PGXS build.  See README.md for the two commands that set up,
# demo and test the extension.

EXTENSION = reconcile
MODULE_big = reconcile
# Sources by product: src/reconcile.c (the library's entry) and one folder
# each for common/, loader/, diff/, rules/ and objects/ (src/README.md).
OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/*.c src/*/*.c)))
DATA = $(sort $(wildcard reconcile--*.sql))

# Every file under sql/ is a pg_regress test named for the feature it covers.
REGRESS = $(basename $(notdir $(sort $(wildcard sql/*.sql))))
REGRESS_OPTS = --inputdir=.

# Isolation specs live under test/isolation (specs/ and expected/).
ISOLATION = $(basename $(notdir $(sort $(wildcard test/isolation/specs/*.spec))))
ISOLATION_OPTS = --inputdir=test/isolation

PG_CONFIG ?= pg_config
PG_CPPFLAGS = -I$(srcdir)/src -Wall -Wextra -Werror -Wno-unused-parameter -Wno-sign-compare \
	-Wno-missing-field-initializers -Wno-cast-function-type

# Payload hashes use OpenSSL's SHA-256 directly when the server was built
# with OpenSSL (src/common/sha256.c); LIBS comes from PGXS's Makefile.global.
SHLIB_LINK = $(filter -lcrypto,$(LIBS))
# Staging from object storage (src/objects_*.c): libcurl for HTTP, libxml2
# (which the server links) for S3's XML answers, zlib for gzip'd objects.
SHLIB_LINK += -lcurl $(filter -lxml2 -lz,$(LIBS))

# Export only what PostgreSQL looks up by name: _PG_init, the magic block,
# the SQL-callable functions with their pg_finfo_ records, and functions
# declared PGDLLEXPORT (the parallel staging worker).  PostgreSQL 15 loads
# every extension library into one symbol space and, unlike 16, does not
# build them with hidden visibility, so an internal name such as
# merge_batch could clash with another library's.  The linker version
# script is made from the sources; test/t/005_exports.pl checks the result.
EXPORTS = reconcile.exports
SHLIB_LINK += -Wl,--version-script=$(EXPORTS)
EXTRA_CLEAN = $(EXPORTS)


PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS does not track header dependencies: rebuild every object when a
# header changes, so no object is built against an old struct layout.
$(OBJS): $(wildcard src/*.h src/*/*.h)

# The version script (EXPORTS above) is made before the library is linked.
$(EXPORTS): $(OBJS:.o=.c) tools/exports.sh
	sh tools/exports.sh $(OBJS:.o=.c) > $@

$(shlib): $(EXPORTS)

# The other kinds of test, against a server you started yourself (libpq's
# PGHOST, PGPORT and PGUSER say where; no root needed; docs/development.md).
# TAP tests start their own nodes with PostgreSQL::Test::Cluster, which
# needs pg_regress and the Perl modules that PGXS installs.
PROVE_TESTS ?= test/t/*.pl
PGTAP_DB ?= reconcile_tap
PGTAP_TESTS ?= test/pgtap/*.sql
PG_PROVE ?= pg_prove
FUZZ_OPTS ?=

.PHONY: prove-installcheck pgtap-installcheck fuzz-installcheck

# PROVE_DIR is where the tests run and write tmp_check (default: here);
# PROVE_AS a command prefix to run them as another OS user (tools/test.sh
# runs them as postgres, since initdb refuses root, on a copy of test/t).
PROVE_DIR ?= $(CURDIR)
PROVE_AS ?=

prove-installcheck:
	rm -rf '$(PROVE_DIR)'/tmp_check
	cd '$(PROVE_DIR)' && $(PROVE_AS) env \
	TESTDIR='$(PROVE_DIR)' RECONCILE_ROOT='$(CURDIR)' \
	PATH="$(bindir):$$PATH" \
	PERL5LIB='$(pgxsdir)/src/test/perl'"$${PERL5LIB:+:$$PERL5LIB}" \
	PG_REGRESS='$(pgxsdir)/src/test/regress/pg_regress' \
	$(PROVE) --timer --ext .pl $(PROVE_FLAGS) $(PROVE_TESTS)

# pg_prove into a database dropped and created afresh (pgTAP must be
# installed in the same PostgreSQL).
pgtap-installcheck:
	'$(bindir)/psql' -X -q -v ON_ERROR_STOP=1 -d postgres \
		-c 'SET client_min_messages = warning' \
		-c 'DROP DATABASE IF EXISTS "$(PGTAP_DB)" WITH (FORCE)' \
		-c 'CREATE DATABASE "$(PGTAP_DB)"'
	$(PG_PROVE) --dbname '$(PGTAP_DB)' --psql-bin '$(bindir)/psql' $(PGTAP_TESTS)

# test/fuzz/run.sh connects as the role postgres, reads the server's log to
# spot crashes (PGLOG=, the file given to pg_ctl -l) and needs sqlsmith.
fuzz-installcheck:
	@test -n '$(PGLOG)' || { echo 'fuzz-installcheck: set PGLOG to the server log (pg_ctl -l FILE)' >&2; exit 2; }
	$(MKDIR_P) '$(CURDIR)'/tmp_check/fuzz
	RECONCILE_PG_BINDIR='$(bindir)' bash test/fuzz/run.sh \
		--host "$${PGHOST:-/tmp}" --port "$${PGPORT:-5432}" --log '$(PGLOG)' \
		--out '$(CURDIR)'/tmp_check/fuzz $(FUZZ_OPTS)
