/*
 * reconcile.c
 *		Module entry point: wires up the extension's settings.
 *
 * Everything else lives in a folder per product, each with a README.md
 * that maps its files (src/README.md): common/, loader/, diff/, rules/ and
 * objects/.  Each product defines its own settings; this file calls them.
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/guc.h"

#include "loader/loader.h"
#include "rules/check.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

/* Module load: define the reconcile.* settings and reserve the prefix. */
void
_PG_init(void)
{
	loader_define_settings();
	check_history_define_settings();
	MarkGUCPrefixReserved("reconcile");
}
