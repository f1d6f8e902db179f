/*
 * reconcile.c
 *		Module entry point: wires up the extension's settings.
 *
 * Everything else lives in a file named for its job: manifest.c (parse,
 * canonicalise, digest), stage.c (cast, reject, hash staged rows), merge.c
 * (conflicts, winners and the write), receipt.c (receipts, cursors and
 * replay), target.c (registration and privileges).
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/guc.h"

#include "reconcile.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

void
_PG_init(void)
{
	MarkGUCPrefixReserved("reconcile");
}
