/*
 * diff_run.c
 *		Configured diff runs: the jobs in reconcile.diff_jobs, each run
 *		recorded in reconcile.diff_runs with its findings in
 *		reconcile.diff_results.
 *
 * A job runs with the caller's rights, like reconcile_diff itself; only the
 * recording switches to the state tables' owner, after the diff has read
 * both sides as the caller.  Each job runs in its own subtransaction, so a
 * job that fails (a dropped table, a bad option) is recorded with its
 * error and the others still run; but a run that fails for want of the
 * caller's rights is not recorded: the error goes to the caller, and no
 * role can add failures to the history of jobs it may not run.  With
 * all_or_nothing, the first failure is the call's error instead.
 *
 * A run records whether its findings depend on the reader (a view side, or
 * a foreign table read through the runner's own user mapping): the
 * policies of diff_runs and diff_results then show them only to the runner
 * and its members (reconcile--1.1--1.2.sql, reconcile.diff_run_visible).
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_foreign_table.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/fmgroids.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/rls.h"
#include "utils/resowner.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "diff.h"
#include "common/jobs.h"
#include "common/state_schema.h"
#include "common/subxact.h"

PG_FUNCTION_INFO_V1(reconcile_diff_run);
PG_FUNCTION_INFO_V1(reconcile_diff_run_visible);

typedef struct DiffJob
{
	char	   *name;
	char	   *source;
	char	   *target;
	ArrayType  *key_columns;
	Jsonb	   *options;
} DiffJob;

/*
 * The run's row: the columns of 1.1, then (schema 1.2) reader_dependent
 * and sqlstate, then the run's status, the limit that stopped it and
 * where, the rechecks done, the recheck settings and the keys left out
 * for min_age.  The library also runs against a schema of 1.1 until
 * ALTER EXTENSION reconcile UPDATE, and writes 1.2's columns only where
 * they exist (state_schema.c: state_version).
 */
#define RUN_INSERT_NARGS_1_1 17
#define RUN_INSERT_NARGS 25
#define RUN_READER_DEPENDENT 17
#define RUN_SQLSTATE 18
#define RUN_STATUS 19
#define RUN_STOPPED_BY 20
#define RUN_STOPPED_AT_KEY 21
#define RUN_RECHECKS 22
#define RUN_RECHECK 23
#define RUN_YOUNG_KEYS 24

static const char *const run_insert_sql_1_1 =
"INSERT INTO reconcile.diff_runs (job, source, target, started_at,"
" finished_at, rows_source, rows_target, matched, missing_in_target,"
" extra_in_target, mismatched, duplicate_keys, null_keys,"
" column_mismatches, findings, error, run_by)"
" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,"
" $15, $16, $17) RETURNING *";

static const char *const run_insert_sql =
"INSERT INTO reconcile.diff_runs (job, source, target, started_at,"
" finished_at, rows_source, rows_target, matched, missing_in_target,"
" extra_in_target, mismatched, duplicate_keys, null_keys,"
" column_mismatches, findings, error, run_by, reader_dependent, sqlstate,"
" status, stopped_by, stopped_at_key, rechecks, recheck, young_keys)"
" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14,"
" $15, $16, $17, $18, $19, $20, $21, $22, $23, $24, $25) RETURNING *";

static const Oid run_insert_types[RUN_INSERT_NARGS] = {
	TEXTOID, REGCLASSOID, REGCLASSOID, TIMESTAMPTZOID, TIMESTAMPTZOID,
	INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID, INT8OID,
	JSONBOID, INT8OID, TEXTOID, NAMEOID, BOOLOID, TEXTOID,
	TEXTOID, TEXTOID, JSONBOID, INT4OID, JSONBOID, INT8OID
};

/*
 * Whether what the current role reads from relid may differ from what
 * another role reads: a view (its query may filter by current_user, and
 * reads its tables with its owner's rights and row-level security), or a
 * foreign table (itself, a partition or an inheritance child) read through
 * the role's own user mapping rather than the server's PUBLIC one, or a
 * foreign inheritance child of a plain table (the policies check the
 * mappings of partitions only).  Row-level security of a table is checked
 * when the findings are read, against the reader.
 */
static bool
relation_reader_dependent(Oid relid)
{
	char		relkind = get_rel_relkind(relid);
	List	   *members;
	ListCell   *lc;
	bool		dependent = false;

	/* A view, or a relation dropped since (after a failed run). */
	if (relkind == RELKIND_VIEW || relkind == '\0')
		return true;
	members = find_all_inheritors(relid, NoLock, NULL);
	foreach(lc, members)
	{
		Oid			member = lfirst_oid(lc);

		if (get_rel_relkind(member) != RELKIND_FOREIGN_TABLE)
			continue;
		if (member != relid && relkind == RELKIND_RELATION)
			dependent = true;
		else
		{
			/* By syscache: after a failed run the table may be gone. */
			HeapTuple	ft = SearchSysCache1(FOREIGNTABLEREL, ObjectIdGetDatum(member));

			if (!HeapTupleIsValid(ft))
				dependent = true;
			else
			{
				Oid			server = ((Form_pg_foreign_table) GETSTRUCT(ft))->ftserver;

				ReleaseSysCache(ft);
				if (SearchSysCacheExists2(USERMAPPINGUSERSERVER,
										  ObjectIdGetDatum(GetUserId()),
										  ObjectIdGetDatum(server)))
					dependent = true;
			}
		}
	}
	list_free(members);
	return dependent;
}

/*
 * Whether user reads relid as every reader without rows of its own does:
 * table-level SELECT, no row-level security restricting it there, and
 * every foreign table of it (itself, a partition or an inheritance child)
 * read through its server's PUBLIC user mapping (a role with a mapping of
 * its own may read other rows; without any mapping, none).
 */
static bool
relation_shared_for(Oid relid, Oid user)
{
	List	   *members;
	ListCell   *lc;
	bool		shared = true;

	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
		return false;
	if (pg_class_aclcheck(relid, user, ACL_SELECT) != ACLCHECK_OK ||
		check_enable_rls(relid, InvalidOid, true) == RLS_ENABLED)
		return false;
	members = find_all_inheritors(relid, NoLock, NULL);
	foreach(lc, members)
	{
		HeapTuple	ft = SearchSysCache1(FOREIGNTABLEREL, ObjectIdGetDatum(lfirst_oid(lc)));
		Oid			server;

		if (!HeapTupleIsValid(ft))
			continue;
		server = ((Form_pg_foreign_table) GETSTRUCT(ft))->ftserver;
		ReleaseSysCache(ft);
		if (!SearchSysCacheExists2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(InvalidOid),
								   ObjectIdGetDatum(server)) ||
			SearchSysCacheExists2(USERMAPPINGUSERSERVER, ObjectIdGetDatum(user),
								  ObjectIdGetDatum(server)))
		{
			shared = false;
			break;
		}
	}
	list_free(members);
	return shared;
}

/*
 * reconcile.diff_run_visible(run_by name, reader_dependent boolean,
 *							  source regclass, target regclass)
 *		The row-level security of reconcile.diff_runs and diff_results:
 *		whether the current role may see a run and its findings.  The role
 *		that ran it and every member of that role (who may SET ROLE to it
 *		and read the sides as it did; superusers are members of every
 *		role) see it; other roles only when it is not reader-dependent and
 *		they read both sides as shared (relation_shared_for).  In C: a
 *		policy runs it for every row read.
 */
Datum
reconcile_diff_run_visible(PG_FUNCTION_ARGS)
{
	Oid			user = GetUserId();

	if (!PG_ARGISNULL(0))
	{
		Oid			runner = get_role_oid(NameStr(*PG_GETARG_NAME(0)), true);

		if (OidIsValid(runner) && is_member_of_role(user, runner))
			PG_RETURN_BOOL(true);
	}
	if (PG_ARGISNULL(1) || PG_GETARG_BOOL(1) || PG_ARGISNULL(2) || PG_ARGISNULL(3))
		PG_RETURN_BOOL(false);
	PG_RETURN_BOOL(relation_shared_for(PG_GETARG_OID(2), user) &&
				   relation_shared_for(PG_GETARG_OID(3), user));
}

static Oid
resolve_job_relation(DiffJob *job, const char *side, const char *name)
{
	JobRelationCheck chk = {"diff job", job->name, "Run the job as a role that may read both of its relations."};
	RangeVar   *rv = makeRangeVarFromNameList(stringToQualifiedNameList(name));
	Oid			relid = RangeVarGetRelidExtended(rv, AccessShareLock, RVR_MISSING_OK,
												 job_relation_check, &chk);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("%s \"%s\" of diff job \"%s\" does not exist", side, name, job->name),
				 errhint("Correct the job with UPDATE reconcile.diff_jobs SET %s = ... WHERE name = '%s'.",
						 side, job->name)));
	return relid;
}

static TupleDesc
findings_desc(void)
{
	TupleDesc	desc = diff_findings_desc(DIFF_FINDING_NATTS_1_2);

	TupleDescInitEntry(desc, 6, "rechecks", INT4OID, -1, 0);
	return desc;
}

/* Insert the run's row as the state owner; returns a copy of it. */
static HeapTuple
insert_run(Datum *args, const char *nulls, TupleDesc *desc)
{
	StateUser	su;
	HeapTuple	row;

	bool		v1_2 = state_version() >= STATE_1_2;

	state_user_enter(&su);
	if (SPI_execute_with_args(v1_2 ? run_insert_sql : run_insert_sql_1_1,
							  v1_2 ? RUN_INSERT_NARGS : RUN_INSERT_NARGS_1_1,
							  (Oid *) run_insert_types, args, nulls,
							  false, 0) != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "could not write reconcile.diff_runs");
	state_user_leave(&su);
	row = heap_copytuple(SPI_tuptable->vals[0]);
	*desc = SPI_tuptable->tupdesc;
	return row;
}

/* Insert the run's findings as the state owner, set-based (see receipt.c). */
static void
insert_results(int64 run_id, Oid source, Oid target, Tuplestorestate *ts,
			   TupleDesc desc)
{
	/* A finding's attributes, in order (diff.h: DIFF_FINDING_NATTS). */
	static const char *const finding_columns[DIFF_FINDING_NATTS_1_2] = {
		"issue", "key", "columns", "source_values", "target_values", "rechecks"
	};
	StateRows  *rows = state_rows_create(&state_diff_results);
	TupleTableSlot *slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);

	tuplestore_rescan(ts);
	while (tuplestore_gettupleslot(ts, true, false, slot))
	{
		CHECK_FOR_INTERRUPTS();
		slot_getallattrs(slot);
		state_row_set(rows, "run_id", Int64GetDatum(run_id));
		state_row_set(rows, "source", ObjectIdGetDatum(source));
		state_row_set(rows, "target", ObjectIdGetDatum(target));
		for (int i = 0; i < DIFF_FINDING_NATTS_1_2; i++)
			if (!slot->tts_isnull[i])
				state_row_set(rows, finding_columns[i], slot->tts_values[i]);
		/* columns (text[]) travels as its text form: arrays of arrays are 2-D. */
		if (!slot->tts_isnull[2])
			state_row_set(rows, "columns",
						  CStringGetTextDatum(OidOutputFunctionCall(F_ARRAY_OUT, slot->tts_values[2])));
		state_row_add(rows);
	}
	state_rows_flush(rows);
	ExecDropSingleTupleTableSlot(slot);
}

/*
 * Run one job and record it; returns the run's row.  The relations are
 * passed back as soon as they are known, for the record of a failure.
 */
static HeapTuple
run_job(DiffJob *job, const char *runner, TupleDesc *rowdesc,
		Oid *resolved)
{
	TimestampTz started = GetCurrentTimestamp();
	Oid			source = (resolved[0] = resolve_job_relation(job, "source", job->source));
	Oid			target = (resolved[1] = resolve_job_relation(job, "target", job->target));
	DiffSpec   *spec = diff_prepare(source, target, job->key_columns, job->options);
	TupleDesc	desc = findings_desc();
	Tuplestorestate *ts = tuplestore_begin_heap(false, false, work_mem);
	DiffCounts	counts;
	Datum		args[RUN_INSERT_NARGS];
	char		nulls[RUN_INSERT_NARGS];
	HeapTuple	row;
	bool		isnull;

	diff_compare(spec, ts, desc, &counts);

	memset(nulls, ' ', sizeof(nulls));
	args[0] = CStringGetTextDatum(job->name);
	args[1] = ObjectIdGetDatum(source);
	args[2] = ObjectIdGetDatum(target);
	args[3] = TimestampTzGetDatum(started);
	args[4] = TimestampTzGetDatum(GetCurrentTimestamp());
	diff_summary_values(spec, &counts, &args[5]);	/* args[5] .. args[13] */
	args[14] = Int64GetDatum(diff_findings_total(&counts));
	args[15] = (Datum) 0;
	nulls[15] = 'n';
	args[16] = CStringGetDatum(runner);
	args[RUN_READER_DEPENDENT] = BoolGetDatum(relation_reader_dependent(source) ||
											  relation_reader_dependent(target));
	args[RUN_SQLSTATE] = (Datum) 0;
	nulls[RUN_SQLSTATE] = 'n';
	args[RUN_STATUS] = CStringGetTextDatum(counts.stopped ? "stopped" : "complete");
	args[RUN_STOPPED_BY] = counts.stopped ? CStringGetTextDatum(counts.stopped) : (Datum) 0;
	nulls[RUN_STOPPED_BY] = counts.stopped ? ' ' : 'n';
	args[RUN_STOPPED_AT_KEY] = counts.stopped_at_key ? JsonbPGetDatum(counts.stopped_at_key) : (Datum) 0;
	nulls[RUN_STOPPED_AT_KEY] = counts.stopped_at_key ? ' ' : 'n';
	args[RUN_RECHECKS] = Int32GetDatum(counts.rechecks);
	nulls[RUN_RECHECKS] = counts.rechecks < 0 ? 'n' : ' ';
	args[RUN_RECHECK] = spec->recheck_settings ? JsonbPGetDatum(spec->recheck_settings) : (Datum) 0;
	nulls[RUN_RECHECK] = spec->recheck_settings ? ' ' : 'n';
	args[RUN_YOUNG_KEYS] = Int64GetDatum(counts.young_keys);
	row = insert_run(args, nulls, rowdesc);

	insert_results(DatumGetInt64(heap_getattr(row, 1, *rowdesc, &isnull)),
				   source, target, ts, desc);
	tuplestore_end(ts);
	return row;
}

static HeapTuple
record_failure(DiffJob *job, const char *runner, TimestampTz started,
			   ErrorData *edata, Oid *resolved, TupleDesc *rowdesc)
{
	Datum		args[RUN_INSERT_NARGS];
	char		nulls[RUN_INSERT_NARGS];

	memset(nulls, 'n', sizeof(nulls));
	memset(args, 0, sizeof(args));
	args[0] = CStringGetTextDatum(job->name);
	nulls[0] = ' ';
	for (int i = 0; i < 2; i++)
		if (OidIsValid(resolved[i]))
		{
			args[1 + i] = ObjectIdGetDatum(resolved[i]);
			nulls[1 + i] = ' ';
		}
	args[3] = TimestampTzGetDatum(started);
	nulls[3] = ' ';
	args[4] = TimestampTzGetDatum(GetCurrentTimestamp());
	nulls[4] = ' ';
	args[15] = CStringGetTextDatum(edata->message);
	nulls[15] = ' ';
	args[16] = CStringGetDatum(runner);
	nulls[16] = ' ';

	/*
	 * Error messages may quote values of the sides (an invalid input, a
	 * remote error): reader-dependent unless both sides are known and
	 * shared.
	 */
	args[RUN_READER_DEPENDENT] =
		BoolGetDatum(!OidIsValid(resolved[0]) || !OidIsValid(resolved[1]) ||
					 relation_reader_dependent(resolved[0]) ||
					 relation_reader_dependent(resolved[1]));
	nulls[RUN_READER_DEPENDENT] = ' ';
	args[RUN_SQLSTATE] = CStringGetTextDatum(unpack_sql_state(edata->sqlerrcode));
	nulls[RUN_SQLSTATE] = ' ';
	args[RUN_STATUS] = CStringGetTextDatum("failed");
	nulls[RUN_STATUS] = ' ';
	return insert_run(args, nulls, rowdesc);
}

/*
 * A connection to a foreign server that broke during a job: postgres_fdw
 * could not roll the remote subtransaction back, and refuses to commit the
 * transaction around it, so the run could not be recorded anyway.  The
 * caller gets the connection's own error (SQLSTATE class 08), and nothing
 * of the call is written.  A connection that could not be made at all
 * (08001, 08004: a server down or unreachable, a refused login) leaves no
 * remote transaction behind: that is the job's failure, recorded as any.
 */
static bool
diff_error_ends_run(ErrorData *edata)
{
	return ERRCODE_TO_CATEGORY(edata->sqlerrcode) == ERRCODE_CONNECTION_EXCEPTION &&
		edata->sqlerrcode != ERRCODE_SQLCLIENT_UNABLE_TO_ESTABLISH_SQLCONNECTION &&
		edata->sqlerrcode != ERRCODE_SQLSERVER_REJECTED_ESTABLISHMENT_OF_SQLCONNECTION;
}

/* One job's run, handed to run_in_subtransaction and back. */
typedef struct JobRun
{
	DiffJob    *job;
	const char *runner;
	Oid			resolved[2];	/* the relations, once resolved */
	MemoryContext oldcxt;		/* where row and rowdesc are kept */
	MemoryContext jobcxt;		/* the run's own memory */
	HeapTuple	row;			/* the run's history row */
	TupleDesc	rowdesc;
} JobRun;

/* Run one job in its own memory; keep its history row outside it. */
static void
run_job_step(void *arg)
{
	JobRun	   *jr = arg;
	TupleDesc	d;
	HeapTuple	r;

	MemoryContextSwitchTo(jr->jobcxt);
	r = run_job(jr->job, jr->runner, &d, jr->resolved);
	MemoryContextSwitchTo(jr->oldcxt);
	jr->row = heap_copytuple(r);
	jr->rowdesc = CreateTupleDescCopy(d);
}

/*
 * reconcile_diff_run(job text DEFAULT NULL, all_or_nothing boolean DEFAULT false)
 *		Runs the diff job named (NULL: every job in reconcile.diff_jobs) and records
 *		each run; returns SETOF reconcile.diff_runs, the rows it recorded.
 *		The function of schema 1.1 has the first argument only.
 */
Datum
reconcile_diff_run(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *only = PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0));
	char	   *runner = GetUserNameFromId(GetUserId(), false);
	bool		all_or_nothing = PG_NARGS() > 1 && !PG_ARGISNULL(1) && PG_GETARG_BOOL(1);
	Datum		arg;
	Oid			argtype = TEXTOID;
	int			njobs;
	DiffJob    *jobs;

	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();

	arg = only ? CStringGetTextDatum(only) : (Datum) 0;
	if (SPI_execute_with_args("SELECT name, source, target, key_columns, options"
							  " FROM reconcile.diff_jobs"
							  " WHERE $1 IS NULL OR name OPERATOR(pg_catalog.=) $1"
							  " ORDER BY name COLLATE \"C\"",
							  1, &argtype, &arg, only ? NULL : "n", true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read reconcile.diff_jobs");
	if (only && SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("diff job \"%s\" does not exist", only),
				 errhint("The jobs are the rows of reconcile.diff_jobs.")));

	njobs = SPI_processed;
	jobs = palloc0(sizeof(DiffJob) * Max(njobs, 1));
	for (int i = 0; i < njobs; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		d;

		jobs[i].name = SPI_getvalue(tup, desc, 1);
		jobs[i].source = SPI_getvalue(tup, desc, 2);
		jobs[i].target = SPI_getvalue(tup, desc, 3);
		d = SPI_getbinval(tup, desc, 4, &isnull);
		jobs[i].key_columns = DatumGetArrayTypePCopy(d);
		d = SPI_getbinval(tup, desc, 5, &isnull);
		jobs[i].options = isnull ? NULL : DatumGetJsonbPCopy(d);
	}

	for (int i = 0; i < njobs; i++)
	{
		TimestampTz started = GetCurrentTimestamp();
		JobRun		jr = {&jobs[i], runner, {InvalidOid, InvalidOid},
						  CurrentMemoryContext, NULL, NULL, NULL};
		HeapTuple	row;
		TupleDesc	rowdesc;
		ErrorData  *edata;
		Oid		   *resolved = jr.resolved;

		jr.jobcxt = AllocSetContextCreate(jr.oldcxt, "reconcile diff job",
										  ALLOCSET_DEFAULT_SIZES);
		edata = run_in_subtransaction(run_job_step, &jr, true);
		MemoryContextSwitchTo(jr.oldcxt);

		/*
		 * A cancelled run is not a failed job: stop.  Nor is a run the
		 * caller has not the rights for: the job's history records runs
		 * of roles that may read both relations (and of any role, a
		 * relation that does not exist), so that no role can add
		 * failures to another's jobs.  All or nothing: any failure.
		 */
		if (edata != NULL &&
			(all_or_nothing ||
			 edata->sqlerrcode == ERRCODE_QUERY_CANCELED ||
			 edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN ||
			 edata->sqlerrcode == ERRCODE_INSUFFICIENT_PRIVILEGE ||
			 diff_error_ends_run(edata)))
			ReThrowError(edata);
		MemoryContextDelete(jr.jobcxt);
		row = jr.row;
		rowdesc = jr.rowdesc;

		if (edata != NULL)
		{
			TupleDesc	d;

			row = record_failure(&jobs[i], runner, started, edata, resolved, &d);
			rowdesc = d;
			FreeErrorData(edata);
		}
		{
			Datum	   *values = palloc(sizeof(Datum) * rowdesc->natts);
			bool	   *nulls = palloc(sizeof(bool) * rowdesc->natts);

			heap_deform_tuple(row, rowdesc, values, nulls);
			tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
		}
	}

	SPI_finish();
	return (Datum) 0;
}
