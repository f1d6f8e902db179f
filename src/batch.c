/*
 * batch.c
 *		reconcile_batch(): stage, check and merge one batch, then write its
 *		receipt, all in the caller's transaction.
 *
 * The order matters.  The target is locked against other writers before
 * anything about it is read (its registration, its columns, the caller's
 * rights) and before the receipt is looked up, so of two sessions loading
 * one manifest the second waits and then finds the first one's receipt,
 * and DDL committed during the wait is what the batch sees.  Every check that
 * can refuse the batch runs before anything is written to the target, and
 * any error leaves nothing behind: it is one transaction.
 */
#include "postgres.h"

#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "storage/lmgr.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"

#include "args.h"
#include "citus.h"
#include "citus_load.h"
#include "loader.h"
#include "progress.h"
#include "rules.h"
#include "state.h"

PG_FUNCTION_INFO_V1(reconcile_batch);

/*
 * A transaction-level advisory lock on the batch in its target: the
 * target's OID and the first 32 bits of the batch id.  Its fourth tag field
 * (3) is one no SQL-level advisory lock function uses, so it cannot collide
 * with an application's advisory locks; a batch of another target never
 * waits for it.
 */
static void
lock_batch_id(Oid target, const char *batch_id)
{
	LOCKTAG		tag;
	uint32		key = (uint32) strtoul(pnstrdup(batch_id, 8), NULL, 16);

	SET_LOCKTAG_ADVISORY(tag, MyDatabaseId, target, key, 3);
	(void) LockAcquire(&tag, ExclusiveLock, false, false);
}

/* Refuse the batch when an object's staged rows differ from the manifest. */
static void
check_row_counts(BatchState *b)
{
	for (int i = 0; i < b->manifest->nentries; i++)
	{
		ManifestEntry *e = &b->manifest->entries[i];

		if (b->staged_rows[i] != e->rows)
			ereport(ERROR,
					(errcode(ERRCODE_CARDINALITY_VIOLATION),
					 errmsg("batch %s is incomplete: object \"%s\" has " INT64_FORMAT " staged rows, the manifest says " INT64_FORMAT,
							b->batch_id, e->object_key, b->staged_rows[i], e->rows),
					 errdetail("Staged relation \"%s\" must hold every row of every object in the manifest, and no more.",
							   relation_display_name(b->staged)),
					 errhint("Finish staging the object (or correct its row count) and call reconcile_batch again; nothing was applied.")));
	}
}

/*
 * reconcile_batch(target regclass, staged regclass, manifest jsonb,
 *                 source text DEFAULT NULL, cursor text DEFAULT NULL)
 *		Applies the staged rows of one manifest's batch to target, once per
 *		batch_id; returns SETOF reconcile.receipt (one row, the receipt).
 */
Datum
reconcile_batch(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Jsonb	   *manifest_arg;
	char	   *source = NULL;
	char	   *cursor = NULL;
	BatchState *b;
	Datum		values[RECEIPT_NATTS];
	bool		isnull[RECEIPT_NATTS];
	int			save_nestlevel;

	check_arg_not_null(fcinfo, 0, "target", "reconcile_batch");
	check_arg_not_null(fcinfo, 1, "staged", "reconcile_batch");
	check_arg_not_null(fcinfo, 2, "manifest", "reconcile_batch");
	if (!PG_ARGISNULL(3))
		source = text_to_cstring(PG_GETARG_TEXT_PP(3));
	if (!PG_ARGISNULL(4))
		cursor = text_to_cstring(PG_GETARG_TEXT_PP(4));
	if ((source == NULL) != (cursor == NULL))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("arguments source and cursor of reconcile_batch go together"),
				 errhint("Pass both to move the source's cursor with the batch, or neither.")));

	InitMaterializedSRF(fcinfo, 0);

	b = palloc0(sizeof(BatchState));
	manifest_arg = PG_GETARG_JSONB_P(2);
	b->manifest = manifest_parse(manifest_arg);
	b->batch_id = b->manifest->batch_id;
	b->staged = PG_GETARG_OID(1);
	b->counts = palloc0(sizeof(int64) * DISP_COUNT * b->manifest->nentries);
	b->staged_rows = palloc0(sizeof(int64) * b->manifest->nentries);

	SPI_connect();

	/*
	 * Lock, then read.  One batch at a time per target; readers are not
	 * blocked.  The staged relation keeps its columns until the batch ends.
	 * Only then are the rights checked, the registration read and the
	 * columns resolved, so that DDL, a GRANT or REVOKE or a new registration
	 * committed while the batch waited is what it sees.
	 */
	target_lock(PG_GETARG_OID(0), ShareRowExclusiveLock, TARGET_LOCK_BATCH);
	target_lock(b->staged, AccessShareLock, TARGET_LOCK_STAGED);
	target_check_batch_privileges(PG_GETARG_OID(0), b->staged);

	/*
	 * The statement's snapshot was taken before the wait: in READ COMMITTED
	 * the batch's own reads of the state tables (rules, receipts) use one
	 * taken now.  (Under REPEATABLE READ this is the transaction's; the
	 * registration itself is read with the latest snapshot, see target.c.)
	 */
	PushActiveSnapshot(GetTransactionSnapshot());
	b->target = target_load(PG_GETARG_OID(0));

	/*
	 * One session at a time per manifest and target.  A batch is identified
	 * by its target and batch id: the same manifest may be loaded into other
	 * targets at the same time, and nothing done to another table (by
	 * whatever role) makes this one wait or fail.
	 */
	lock_batch_id(b->target->relid, b->batch_id);

	if (receipt_lookup(b->batch_id, b->target->relid, values, isnull))
	{
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
		PopActiveSnapshot();
		SPI_finish();
		return (Datum) 0;
	}

	/* A replay only reads; a new batch is refused before it writes. */
	PreventCommandIfReadOnly("reconcile_batch()");

	/*
	 * The batch's own queries are plain scans and set-based writes of state
	 * rows; JIT would compile them for nothing once the staged relation is
	 * large, and load LLVM (some 8 MB of private memory) to do so.
	 */
	save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("jit", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	receipt_check_objects(b);
	citus_check_batch(b->target, b->staged, b->batch_id);	/* citus.c */
	b->rules = batch_rules_load(b->target->relid, b->staged);	/* rules_attach.c */
	{
		int64		total = 0;

		for (int i = 0; i < b->manifest->nentries; i++)
			total += b->manifest->entries[i].rows;
		progress_start(b->target->relid, total);
	}
	progress_phase(PHASE_READING);
	batch_rules_context_push(b);	/* rules_attach.c: run-time errors mention the rules */
	stage_read(b);
	batch_rules_context_pop(b);
	check_row_counts(b);
	batch_rules_gate(b);		/* rules_attach.c: fail rules and dataset checks */
	pause_point("staged");
	merge_batch(b);
	stage_release(b);			/* the parallel read's shared sort, now read */
	pause_point("merged");
	progress_phase(PHASE_RECEIPT);
	receipt_write(b, source, cursor, manifest_arg, values, isnull);
	progress_end();
	pause_point("receipt");
	AtEOXact_GUC(true, save_nestlevel);

	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	PopActiveSnapshot();
	SPI_finish();
	return (Datum) 0;
}
