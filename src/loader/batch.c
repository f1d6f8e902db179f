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

#include "access/detoast.h"
#include "catalog/pg_class.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "tcop/utility.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"

#include "common/args.h"
#include "common/citus.h"
#include "citus_load.h"
#include "citus_merge.h"
#include "loader.h"
#include "progress.h"
#include "snapshot.h"
#include "rules/rules.h"
#include "common/state_schema.h"
#include "common/sqlname.h"
#include "common/state.h"

PG_FUNCTION_INFO_V1(reconcile_batch);
PG_FUNCTION_INFO_V1(reconcile_batch_table);

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

/*
 * Parse the manifest argument, and set *kept to what the receipt stores of
 * it.  A manifest read from a table usually arrives compressed (on disk or
 * inline): the receipt keeps those compressed bytes as they are, and the
 * decompressed copy is given up once parsed, so that a large manifest is
 * neither held twice nor compressed again (a fifth of a 300,000-object
 * batch's time went to compressing it).  Any other manifest is kept as
 * parsed, and the receipt compresses it.
 */
static Manifest *
manifest_parse_argument(Datum arg, Datum *kept)
{
	struct varlena *raw = (struct varlena *) DatumGetPointer(arg);
	struct varlena *compressed = NULL;
	Jsonb	   *jb;
	Manifest   *m;

	if (VARATT_IS_EXTERNAL_ONDISK(raw))
	{
		struct varlena *fetched = detoast_external_attr(raw);

		if (VARATT_IS_COMPRESSED(fetched))
			compressed = fetched;
		else
			pfree(fetched);
	}
	else if (VARATT_IS_COMPRESSED(raw))
		compressed = raw;

	if (compressed == NULL)
	{
		jb = DatumGetJsonbP(arg);
		*kept = JsonbPGetDatum(jb);
		return manifest_parse(jb);
	}
	jb = DatumGetJsonbP(PointerGetDatum(compressed));
	m = manifest_parse(jb);
	pfree(jb);
	*kept = PointerGetDatum(compressed);
	return m;
}

/*
 * A manifest relation is a table or view that the caller may read: SELECT
 * on it, or on the four columns that are read (the query names only them).
 */
static const char *const manifest_column_names[] = {
	"object_key", "version_id", "content_hash", "rows"
};

static bool
may_read_manifest(Oid relid)
{
	Oid			user = GetUserId();

	if (pg_class_aclcheck(relid, user, ACL_SELECT) == ACLCHECK_OK)
		return true;
	for (int i = 0; i < lengthof(manifest_column_names); i++)
	{
		AttrNumber	att = get_attnum(relid, manifest_column_names[i]);

		if (att == InvalidAttrNumber ||
			pg_attribute_aclcheck(relid, att, user, ACL_SELECT) != ACLCHECK_OK)
			return false;
	}
	return true;
}

static void
check_manifest_relation(Oid relid)
{
	char		relkind;

	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	relkind = get_rel_relkind(relid);
	if (relkind != RELKIND_RELATION && relkind != RELKIND_PARTITIONED_TABLE &&
		relkind != RELKIND_VIEW && relkind != RELKIND_MATVIEW &&
		relkind != RELKIND_FOREIGN_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("manifest \"%s\" is not a table or view", relation_display_name(relid)),
				 errhint("Pass a table or view with the columns object_key, version_id, content_hash and rows.")));
	if (!may_read_manifest(relid))
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for relation %s", relation_display_name(relid)),
				 errdetail("reconcile_batch_table reads the manifest relation with the caller's rights, which need SELECT on it (or on its columns object_key, version_id, content_hash and rows)."),
				 errhint("Grant SELECT on the manifest relation to the role that runs the batch.")));
}

/*
 * Lock, then check: the manifest relation against DDL, its rights checked
 * again once the lock is granted.
 */
static void
lock_manifest_relation(Oid relid)
{
	check_manifest_relation(relid);
	LockRelationOid(relid, AccessShareLock);
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid),
				 errdetail("It was dropped while waiting for its lock.")));
	check_manifest_relation(relid);
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
					 errmsg("batch %s is incomplete: object \"%s\"%s has " INT64_FORMAT " staged rows, the manifest says " INT64_FORMAT,
							b->batch_id, e->object_key,
							b->staged_versions ? psprintf(" version \"%s\"", e->version_id) : "",
							b->staged_rows[i], e->rows),
					 errdetail("Staged relation \"%s\" must hold every row of every object in the manifest, and no more.",
							   relation_display_name(b->staged)),
					 errhint("Finish staging the object (or correct its row count) and call reconcile_batch again; nothing was applied.")));
	}
}

/* How many rejects the error of a batch beyond its reject limit names. */
#define REJECTS_NAMED 5

/*
 * The reject policy (options max_rejects, max_reject_share): a batch with
 * more rejected rows than the limit fails, naming its first rejects (in
 * object and row order, as reconcile.rejects holds them until the error
 * rolls them back with the rest of the batch).  A share is compared
 * exactly, as numeric: rejected > share * staged rows.
 */
static void
check_reject_limit(BatchState *b)
{
	LoadOptions *o = &b->options;
	int64		rejected = b->totals[DISP_REJECTED];
	int64		staged = 0;
	const char *limit = NULL;
	StringInfoData named;
	StateUser	su;
	Oid			types[2] = {REGCLASSOID, TEXTOID};
	Datum		args[2];

	for (int i = 0; i < b->manifest->nentries; i++)
		staged += b->staged_rows[i];
	if (o->max_rejects >= 0 && rejected > o->max_rejects)
		limit = psprintf("max_rejects is " INT64_FORMAT, o->max_rejects);
	else if (o->max_reject_share != NULL &&
			 DatumGetBool(DirectFunctionCall2(numeric_gt,
											  NumericGetDatum(int64_to_numeric(rejected)),
											  DirectFunctionCall2(numeric_mul,
																  NumericGetDatum(o->max_reject_share),
																  NumericGetDatum(int64_to_numeric(staged))))))
		limit = psprintf("max_reject_share is %s",
						 DatumGetCString(DirectFunctionCall1(numeric_out,
															 NumericGetDatum(o->max_reject_share))));
	if (limit == NULL)
		return;

	args[0] = ObjectIdGetDatum(b->target->relid);
	args[1] = CStringGetTextDatum(b->batch_id);
	/* Not read-only: a new snapshot that sees the rejects just written. */
	state_user_enter(&su);
	if (SPI_execute_with_args(b->staged_versions ?
							  "SELECT object_key, source_row, column_name, reason, version_id"
							  " FROM reconcile.rejects WHERE target OPERATOR(pg_catalog.=) $1"
							  " AND batch_id OPERATOR(pg_catalog.=) $2"
							  " ORDER BY object_key COLLATE \"C\", version_id COLLATE \"C\", source_row, column_name COLLATE \"C\", reason COLLATE \"C\"" :
							  "SELECT object_key, source_row, column_name, reason"
							  " FROM reconcile.rejects WHERE target OPERATOR(pg_catalog.=) $1"
							  " AND batch_id OPERATOR(pg_catalog.=) $2"
							  " ORDER BY object_key COLLATE \"C\", source_row, column_name COLLATE \"C\", reason COLLATE \"C\"",
							  2, types, args, NULL, false, REJECTS_NAMED) != SPI_OK_SELECT)
		elog(ERROR, "could not read reconcile.rejects");
	state_user_leave(&su);
	initStringInfo(&named);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		char	   *row = SPI_getvalue(tup, desc, 2);
		char	   *column = SPI_getvalue(tup, desc, 3);

		appendStringInfo(&named, "%sobject \"%s\"%s row %s%s: %s",
						 i > 0 ? "; " : "", SPI_getvalue(tup, desc, 1),
						 b->staged_versions ? psprintf(" version \"%s\"", SPI_getvalue(tup, desc, 5)) : "",
						 row ? row : "NULL",
						 column ? psprintf(" column \"%s\"", column) : "",
						 SPI_getvalue(tup, desc, 4));
	}
	ereport(ERROR,
			(errcode(ERRCODE_DATA_EXCEPTION),
			 errmsg("batch %s is beyond the reject limit of table \"%s\": " INT64_FORMAT " of " INT64_FORMAT " staged rows rejected (%s)",
					b->batch_id, b->target->relname, rejected, staged, limit),
			 errdetail("First rejects, in object and row order: %s.", named.data),
			 errhint("Correct the staged rows, or raise the limit with the options of reconcile_batch or reconcile_register, and call reconcile_batch again; nothing was applied.")));
}

/*
 * reconcile_batch(target regclass, staged regclass, manifest jsonb,
 *                 source text DEFAULT NULL, cursor text DEFAULT NULL,
 *                 options jsonb DEFAULT NULL)
 *		Applies the staged rows of one manifest's batch to target, once per
 *		batch_id; returns SETOF reconcile.receipt (one row, the receipt).
 *		Called through 1.0's definition it has no options argument.
 */
/*
 * A partial batch (sparse.c) merges its sparse rows over the target's row
 * as the merge probes it; a Citus target's coordinator holds no rows and
 * its workers merge in SQL, and row rules run in the read, before a sparse
 * row is merged (check_partial_rules, once the rules are loaded): both are
 * refused before anything is read, and so is a schema before 1.2, whose
 * reconcile.conflicts cannot say a held row was sparse.
 */
static void
check_partial_supported(BatchState *b)
{
	if (!b->options.partial)
		return;
	if (state_version() < STATE_1_2)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("partial batches need the reconcile 1.2 schema"),
				 errdetail("Batch %s into table \"%s\" has option \"partial\"; the installed schema is older and cannot hold a sparse row's conflicts.",
						   b->batch_id, b->target->relname),
				 errhint("Run ALTER EXTENSION reconcile UPDATE.")));
	if (b->target->citus_kind != CITUS_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("partial batches into table \"%s\", which Citus manages, are not supported yet",
						b->target->relname),
				 errdetail("Batch %s has option \"partial\"; sparse rows are merged over the target's row by the coordinator's merge only for tables Citus does not manage.",
						   b->batch_id),
				 errhint("Stage whole rows and load without option \"partial\".")));
}

static void
check_partial_rules(BatchState *b)
{
	if (b->options.partial && batch_rules_has_row_rules(b->rules))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("partial batches into table \"%s\", which has attached row rules, are not supported yet",
						b->target->relname),
				 errdetail("Batch %s has option \"partial\"; row rules are evaluated as the rows are read, before a sparse row is merged over the target's row.",
						   b->batch_id),
				 errhint("Load whole rows, or detach the row rules with reconcile_set_rules (dataset checks are supported).")));
}

/*
 * The body of reconcile_batch and reconcile_batch_table: the manifest is
 * argument 2, a jsonb (from_relation false) or the OID of a relation
 * holding one entry per row.
 */
static Datum
run_batch(FunctionCallInfo fcinfo, const char *funcname, bool from_relation)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Datum		manifest_kept;
	char	   *source = NULL;
	char	   *cursor = NULL;
	BatchState *b;
	Datum		values[RECEIPT_NATTS];
	bool		isnull[RECEIPT_NATTS];
	int			save_nestlevel;
	StagedShape shape;
	bool		on_workers = false;

	check_arg_not_null(fcinfo, 0, "target", funcname);
	check_arg_not_null(fcinfo, 1, "staged", funcname);
	check_arg_not_null(fcinfo, 2, "manifest", funcname);
	if (!PG_ARGISNULL(3))
		source = text_to_cstring(PG_GETARG_TEXT_PP(3));
	if (!PG_ARGISNULL(4))
		cursor = text_to_cstring(PG_GETARG_TEXT_PP(4));
	if ((source == NULL) != (cursor == NULL))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("arguments source and cursor of %s go together", funcname),
				 errhint("Pass both to move the source's cursor with the batch, or neither.")));

	InitMaterializedSRF(fcinfo, 0);

	b = palloc0(sizeof(BatchState));
	if (from_relation)
	{
		/*
		 * Lock, then read: the manifest relation is read with the caller's
		 * rights (SELECT, checked again once locked) under one snapshot
		 * (manifest.c), and keeps its columns until the batch ends.  The
		 * receipt keeps no copy of it: its entries are the rows of
		 * reconcile.batch_objects, and the batch id is their digest.
		 */
		lock_manifest_relation(PG_GETARG_OID(2));
		b->manifest = manifest_read_relation(PG_GETARG_OID(2));
		manifest_kept = (Datum) 0;
	}
	else
		b->manifest = manifest_parse_argument(PG_GETARG_DATUM(2), &manifest_kept);
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
	 * The batch's options over the registration's (options.c).  Called
	 * through 1.0's definition (five arguments: the library is newer than
	 * the schema until ALTER EXTENSION reconcile UPDATE), a batch keeps 1.0's
	 * behaviour and ignores staged columns it does not know, since its
	 * caller has no way to say otherwise.
	 */
	b->options = b->target->options;
	/* delete_mode 'remove' on a table distributed since its registration (removed.c) */
	if (b->options.delete_remove && b->target->citus_kind != CITUS_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("delete_mode \"remove\" is not supported for table \"%s\", which Citus manages",
						b->target->relname),
				 errhint("Register the target again with delete_mode \"tombstone\".")));
	/* Its winning DELETEs delete rows: the direct path as the general one. */
	if (b->options.delete_remove &&
		pg_class_aclcheck(b->target->relid, GetUserId(), ACL_DELETE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", b->target->relname),
				 errdetail("Table \"%s\" is registered with delete_mode \"remove\": a batch deletes the rows its DELETEs win.",
						   b->target->relname),
				 errhint("Grant DELETE on the table to the role that loads it.")));
	if (PG_NARGS() <= 5)
		b->options.ignore_unknown_columns = true;
	else if (!PG_ARGISNULL(5))
		load_options_apply(&b->options, PG_GETARG_JSONB_P(5), funcname);

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
	/* snapshot.c: checked, and the scope's live rows counted, before the read */
	if (b->options.snapshot)
		b->snapshot = snapshot_begin(b);
	check_partial_supported(b);
	citus_check_batch(b->target, b->staged, b->batch_id);	/* citus_load.c */
	b->rules = batch_rules_load(b->target, b->staged);	/* rules_attach.c */
	check_partial_rules(b);
	{
		int64		total = 0;

		for (int i = 0; i < b->manifest->nentries; i++)
			total += b->manifest->entries[i].rows;
		progress_start(b->target->relid, total);
	}
	progress_phase(PHASE_READING);

	/*
	 * A hash-distributed Citus target merges on the workers where it can
	 * (citus_merge.c), else on the coordinator (option citus_merge).
	 */
	if (b->target->citus_kind != CITUS_NONE || b->options.citus_merge == CITUS_MERGE_WORKERS)
	{
		stage_describe(b, &shape);
		on_workers = citus_merge_choose(b, &shape);
	}
	if (on_workers)
	{
		citus_merge_stage(b, &shape);
		check_row_counts(b);
		check_reject_limit(b);
		pause_point("staged");
		citus_merge_apply(b);
	}
	else
	{
		batch_rules_context_push(b);	/* rules_attach.c: row rules evaluated in the read */
		stage_read(b);
		batch_rules_context_pop(b);
		check_row_counts(b);
		check_reject_limit(b);
		snapshot_check_rejects(b);	/* snapshot.c: a snapshot needs every key */
		batch_rules_gate(b);	/* rules_attach.c: fail rules (dataset checks: merge.c) */
		pause_point("staged");
		if (b->target->citus_kind != CITUS_NONE)
		{
			/*
			 * Citus sends the merge's values to the workers as text, which
			 * the workers read with their own settings, not the caller's:
			 * the writes are made with settings whose text forms read back
			 * the same under any (ISO dates, postgres intervals, exact
			 * floats, hex bytea).  The casts above used the caller's.
			 */
			int			nest = NewGUCNestLevel();

			(void) set_config_option("DateStyle", "ISO", PGC_USERSET, PGC_S_SESSION,
									 GUC_ACTION_SAVE, true, 0, false);
			(void) set_config_option("IntervalStyle", "postgres", PGC_USERSET, PGC_S_SESSION,
									 GUC_ACTION_SAVE, true, 0, false);
			(void) set_config_option("extra_float_digits", "1", PGC_USERSET, PGC_S_SESSION,
									 GUC_ACTION_SAVE, true, 0, false);
			(void) set_config_option("bytea_output", "hex", PGC_USERSET, PGC_S_SESSION,
									 GUC_ACTION_SAVE, true, 0, false);
			merge_batch(b);
			AtEOXact_GUC(true, nest);
		}
		else
			merge_batch(b);
		stage_release(b);		/* the parallel read's shared sort, now read */
		if (b->snapshot != NULL)
			snapshot_apply(b);	/* snapshot.c: the absent rows become tombstones */
	}
	pause_point("merged");
	progress_phase(PHASE_RECEIPT);
	receipt_write(b, source, cursor, manifest_kept, values, isnull);
	batch_rules_record(b);		/* rules_attach.c: the rules' counts, in the check history */
	progress_end();
	pause_point("receipt");
	AtEOXact_GUC(true, save_nestlevel);

	tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	PopActiveSnapshot();
	SPI_finish();
	return (Datum) 0;
}

Datum
reconcile_batch(PG_FUNCTION_ARGS)
{
	return run_batch(fcinfo, "reconcile_batch", false);
}

/*
 * reconcile_batch_table(target regclass, staged regclass, manifest regclass,
 *                       source text DEFAULT NULL, cursor text DEFAULT NULL,
 *                       options jsonb DEFAULT NULL)
 *		reconcile_batch with the manifest given as a relation, one entry per
 *		row: for a manifest larger than one jsonb value may be (256 MB).  A
 *		function of its own, not an overload of reconcile_batch: a quoted
 *		literal manifest would fit both jsonb and regclass.
 */
Datum
reconcile_batch_table(PG_FUNCTION_ARGS)
{
	return run_batch(fcinfo, "reconcile_batch_table", true);
}

int			reconcile_write_path = WRITE_PATH_AUTO;

static const struct config_enum_entry write_path_options[] = {
	{"auto", WRITE_PATH_AUTO, false},
	{"general", WRITE_PATH_GENERAL, false},
	{NULL, 0, false}
};

/* The loader's settings: reconcile.write_path and reconcile.pause_at. */
void
loader_define_settings(void)
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
}
