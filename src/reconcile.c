/*
 * reconcile.c
 *		Module entry point: wires up the extension's settings.
 *
 * Everything else lives in a file named for its job.  The loader (see
 * loader.h): batch.c (reconcile_batch), manifest.c (parse, canonicalise),
 * sha256.c (digests), target.c (registration and privileges), stage.c
 * (cast, reject, sort staged rows), payload.c (the payload hash's and the
 * key's canonical forms), merge.c (the pass: conflicts and winners),
 * probe.c (finding target rows), direct.c and apply.c (the two write
 * paths, see writers.h), receipt.c (receipts, cursors and replay),
 * progress.c (progress and pause points) and state.c (writing the state
 * tables as their owner).  The reconciliation diff:
 * diff_prepare.c, diff.c and diff_run.c (see diff.h).  Data-quality rules:
 * rules.c, rules_check.c and rules_attach.c (see rules.h).
 */
#include "postgres.h"

#include "fmgr.h"
#include "utils/guc.h"

#include "check.h"
#include "loader.h"
#include "progress.h"

PG_MODULE_MAGIC;

int			reconcile_write_path = WRITE_PATH_AUTO;

static const struct config_enum_entry write_path_options[] = {
	{"auto", WRITE_PATH_AUTO, false},
	{"general", WRITE_PATH_GENERAL, false},
	{NULL, 0, false}
};

void		_PG_init(void);

/* Module load: define the reconcile.* settings and reserve the prefix. */
void
_PG_init(void)
{
	DefineCustomEnumVariable("reconcile.write_path",
							 "How reconcile_batch writes winners to the target.",
							 "auto writes directly where the target allows it (a plain table "
							 "without triggers, in READ COMMITTED); general always applies "
							 "them with INSERT and UPDATE statements.",
							 &reconcile_write_path,
							 WRITE_PATH_AUTO,
							 write_path_options,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	DefineCustomStringVariable("reconcile.pause_at",
							   "For tests: pause a batch at a named point.",
							   "At the named point (reading, staged, merged or receipt) the batch waits for "
							   "advisory lock 7265636f6e63696c on the current database, so a test can "
							   "hold that lock, crash the server at a known point, or release it.",
							   &reconcile_pause_at,
							   "",
							   PGC_SUSET,
							   GUC_NOT_IN_SAMPLE,
							   NULL, NULL, NULL);
	DefineCustomBoolVariable("reconcile.check_history",
							 "Record the per-rule counts of every batch into a target with rules.",
							 "Batches into targets with attached rules add a run to reconcile.check_runs "
							 "and one row per rule to reconcile.check_results; runs of check jobs are "
							 "always recorded.",
							 &reconcile_check_history, true, PGC_SUSET, 0,
							 NULL, NULL, NULL);
	MarkGUCPrefixReserved("reconcile");
}
