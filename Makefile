# reconcile: PGXS build.  See README.md for the two commands that set up,
# demo and test the extension.

EXTENSION = reconcile
MODULE_big = reconcile
OBJS = $(patsubst %.c,%.o,$(sort $(wildcard src/*.c)))
DATA = $(sort $(wildcard reconcile--*.sql))

# Every file under sql/ is a pg_regress test named for the feature it covers.
REGRESS = $(basename $(notdir $(sort $(wildcard sql/*.sql))))
REGRESS_OPTS = --inputdir=.

# Isolation specs live under test/isolation (specs/ and expected/).
ISOLATION = $(basename $(notdir $(sort $(wildcard test/isolation/specs/*.spec))))
ISOLATION_OPTS = --inputdir=test/isolation

PG_CONFIG ?= pg_config
PG_CPPFLAGS = -Wall -Wextra -Werror -Wno-unused-parameter -Wno-sign-compare \
	-Wno-missing-field-initializers -Wno-cast-function-type

# Payload hashes use OpenSSL's SHA-256 directly when the server was built
# with OpenSSL (src/sha256.c); LIBS comes from PGXS's Makefile.global.
SHLIB_LINK = $(filter -lcrypto,$(LIBS))

PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# PGXS does not track header dependencies: rebuild every object when a
# header changes, so no object is built against an old struct layout.
$(OBJS): $(wildcard src/*.h)
