/*
 * check_history.c
 *		Configured data-quality checks and their history: the jobs in
 *		reconcile.check_jobs, run by reconcile_check_run(job), and every run
 *		(a job's, or a batch's rules) recorded in reconcile.check_runs with
 *		one row per rule, passes included, in reconcile.check_results.
 *
 * As reconcile_diff_run does for diffs: a job runs with the caller's
 * rights, as reconcile_check; only the recording switches to the state
 * tables' owner.  Each job runs in its own subtransaction, so a job that
 * fails (a dropped relation, a bad document) is recorded with its error
 * and the others still run; a job the caller may not read is not recorded
 * (the error goes to the caller), so no role can add failures to the
 * history of a relation it may not read.
 */
#include "postgres.h"

#include <math.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/async.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "utils/guc.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/varlena.h"

#include "check.h"
#include "common/jobs.h"
#include "common/jsonbuild.h"
#include "common/jsonread.h"
#include "common/state_schema.h"
#include "common/subxact.h"

PG_FUNCTION_INFO_V1(reconcile_check_run);

/* reconcile.check_history: batches record their rules' counts (jobs always record). */
bool		reconcile_check_history = true;

/* Does the installed schema have the history (1.2), or is it still 1.1? */
bool
check_history_installed(void)
{
	return state_version() >= STATE_1_2;
}

#define RUN_INSERT_NARGS 14

static const char *const run_insert_sql =
"INSERT INTO reconcile.check_runs (job, relation, batch_id, started_at,"
" finished_at, total_rows, rules, passed, failed, errored, skipped, gate,"
" error, run_by)"
" VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14)"
" RETURNING *";

static const Oid run_insert_types[RUN_INSERT_NARGS] = {
	TEXTOID, REGCLASSOID, TEXTOID, TIMESTAMPTZOID, TIMESTAMPTZOID, INT8OID,
	INT4OID, INT4OID, INT4OID, INT4OID, INT4OID, TEXTOID, TEXTOID, NAMEOID
};

/*
 * Record one run: out is its outcome (NULL when the run failed with
 * error), job or batch_id says whose.  Written as the state tables'
 * owner; the caller checked the caller's rights.  Returns the run id,
 * and the run's row when row is not NULL.
 */
int64
check_history_record(const CheckOutcome *out, const char *job, const char *batch_id,
					 TimestampTz started, const char *error, HeapTuple *row,
					 TupleDesc *rowdesc)
{
	Datum		args[RUN_INSERT_NARGS];
	char		nulls[RUN_INSERT_NARGS];
	StateUser	su;
	int64		run_id;
	bool		isnull;

	memset(nulls, ' ', sizeof(nulls));
	memset(args, 0, sizeof(args));
	args[0] = job ? CStringGetTextDatum(job) : (Datum) 0;
	nulls[0] = job ? ' ' : 'n';
	args[1] = ObjectIdGetDatum(out ? out->relid : InvalidOid);
	nulls[1] = out && OidIsValid(out->relid) ? ' ' : 'n';
	args[2] = batch_id ? CStringGetTextDatum(batch_id) : (Datum) 0;
	nulls[2] = batch_id ? ' ' : 'n';
	args[3] = TimestampTzGetDatum(started);
	args[4] = TimestampTzGetDatum(GetCurrentTimestamp());
	if (out != NULL && error == NULL)
	{
		args[5] = Int64GetDatum(out->total_rows);
		args[6] = Int32GetDatum(out->nrules);
		args[7] = Int32GetDatum(out->passed);
		args[8] = Int32GetDatum(out->failed);
		args[9] = Int32GetDatum(out->errored);
		args[10] = Int32GetDatum(out->skipped);
		args[11] = CStringGetTextDatum(out->blocked ? "blocked" : "pass");
	}
	else
		for (int i = 5; i <= 11; i++)
			nulls[i] = 'n';
	args[12] = error ? CStringGetTextDatum(error) : (Datum) 0;
	nulls[12] = error ? ' ' : 'n';
	args[13] = CStringGetDatum(GetUserNameFromId(GetUserId(), false));

	state_user_enter(&su);
	if (SPI_execute_with_args(run_insert_sql, RUN_INSERT_NARGS, (Oid *) run_insert_types,
							  args, nulls, false, 0) != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "could not write reconcile.check_runs");
	state_user_leave(&su);
	run_id = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	if (row != NULL)
	{
		*row = heap_copytuple(SPI_tuptable->vals[0]);
		*rowdesc = CreateTupleDescCopy(SPI_tuptable->tupdesc);
	}

	if (out != NULL && error == NULL && out->nrules > 0)
	{
		StateRows  *buf = state_rows_create(&state_check_results);

		for (int i = 0; i < out->nrules; i++)
		{
			const CheckRuleOutcome *o = &out->rules[i];

			CHECK_FOR_INTERRUPTS();
			state_row_set(buf, "run_id", Int64GetDatum(run_id));
			state_row_set(buf, "relation", ObjectIdGetDatum(out->relid));
			state_row_set(buf, "rule", CStringGetTextDatum(o->rule));
			state_row_set(buf, "severity", CStringGetTextDatum(o->severity));
			state_row_set(buf, "status", CStringGetTextDatum(o->status));
			if (o->counted)
				state_row_set(buf, "invalid_rows", Int64GetDatum(o->invalid));
			if (o->counted && o->total >= 0)
			{
				state_row_set(buf, "total_rows", Int64GetDatum(o->total));
				state_row_set(buf, "invalid_share",
							  Float8GetDatum(o->total > 0 ? (double) o->invalid / (double) o->total : 0.0));
			}
			if (o->threshold)
				state_row_set(buf, "threshold", JsonbPGetDatum(o->threshold));
			state_row_set(buf, "gate_breach", BoolGetDatum(o->gate_breach));
			if (o->sample)
				state_row_set(buf, "sample", JsonbPGetDatum(o->sample));
			state_row_set_text(buf, "detail", o->detail);
			state_row_set_text(buf, "error", o->error);
			state_row_set_text(buf, "sqlstate", o->sqlstate);
			if (o->has_observed)
				state_row_set(buf, "observed", Float8GetDatum(o->observed));
			if (o->has_history)
			{
				if (!isnan(o->history_mean))
					state_row_set(buf, "history_mean", Float8GetDatum(o->history_mean));
				if (!isnan(o->history_stddev))
					state_row_set(buf, "history_stddev", Float8GetDatum(o->history_stddev));
				state_row_set(buf, "history_runs", Int32GetDatum(o->history_runs));
			}
			state_row_add(buf);
		}
		state_rows_flush(buf);
	}
	return run_id;
}

/* At most this many breaching rules are named in a notification. */
#define NOTIFY_RULES_NAMED 20

/*
 * A job's run that blocked its gate or failed is announced on channel
 * reconcile_check, with a JSON payload naming the job, the run and the
 * breaching rules (the first NOTIFY_RULES_NAMED: a payload has at most
 * 8000 bytes); a listener reads the rest in reconcile.check_results.
 * NOTIFY is transactional: it is delivered when the run's transaction
 * commits, with the run it announces.
 */
static void
notify_run(const CheckOutcome *out, const char *job, int64 run_id, Oid relid,
		   const char *error)
{
	JsonbParseState *st = NULL;
	int			named = 0;
	char	   *payload;

	if (error == NULL && (out == NULL || !out->blocked))
		return;
	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	jsonb_push_string_field(&st, "job", job);
	jsonb_push_int64_field(&st, "run_id", run_id);
	if (OidIsValid(relid) && get_rel_name(relid) != NULL)
		jsonb_push_string_field(&st, "relation",
								psprintf("%s.%s", get_namespace_name(get_rel_namespace(relid)),
										 get_rel_name(relid)));
	else
		jsonb_push_null_field(&st, "relation");
	if (error != NULL)
	{
		jsonb_push_null_field(&st, "gate");
		jsonb_push_string_field(&st, "error", pnstrdup(error, 1000));
	}
	else
	{
		jsonb_push_string_field(&st, "gate", "blocked");
		jsonb_push_key(&st, "breaching");
		pushJsonbValue(&st, WJB_BEGIN_ARRAY, NULL);
		for (int i = 0; i < out->nrules && named < NOTIFY_RULES_NAMED; i++)
			if (out->rules[i].gate_breach)
			{
				jsonb_push_string(&st, WJB_ELEM, pnstrdup(out->rules[i].rule, 200));
				named++;
			}
		pushJsonbValue(&st, WJB_END_ARRAY, NULL);
	}
	payload = JsonbToCString(NULL,
							 &JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, NULL))->root,
							 -1);
	Async_Notify("reconcile_check", payload);
}

/* ---- reconcile_check_run ---- */

typedef struct CheckJob
{
	char	   *job;
	char	   *relation;
	Jsonb	   *rules;			/* NULL: the relation's attached rules */
	Jsonb	   *options;
} CheckJob;

static Oid
resolve_job_relation(CheckJob *job)
{
	JobRelationCheck chk = {"check job", job->job, "Run the job as a role that may read its relation."};
	RangeVar   *rv = makeRangeVarFromNameList(stringToQualifiedNameList(job->relation));
	Oid			relid = RangeVarGetRelidExtended(rv, AccessShareLock, RVR_MISSING_OK,
												 job_relation_check, &chk);

	if (!OidIsValid(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation \"%s\" of check job \"%s\" does not exist", job->relation, job->job),
				 errhint("Correct the job with UPDATE reconcile.check_jobs SET relation = ... WHERE job = '%s'.",
						 job->job)));
	return relid;
}

/*
 * The document the job runs: its own, run with the caller's rights, or the
 * relation's attached rules, the owner's code, run as the owner (*run_as),
 * restricted, as batches run them.
 */
static Jsonb *
job_rules(CheckJob *job, Oid relid, Oid *run_as)
{
	bool		isnull = true;
	Datum		d = (Datum) 0;
	HeapTuple	tup;

	*run_as = InvalidOid;
	if (job->rules != NULL)
		return job->rules;
	state_read_latest("SELECT rules FROM reconcile.target_rules"
					  " WHERE target OPERATOR(pg_catalog.=) $1"
					  " ORDER BY version DESC LIMIT 1", relid, 1);
	if (SPI_processed > 0)
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("check job \"%s\" has no rules: relation \"%s\" has no rules attached",
						job->job, job->relation),
				 errhint("Put a rules document in reconcile.check_jobs.rules, or attach one with reconcile_set_rules.")));
	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for relation %u", relid);
	*run_as = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return DatumGetJsonbPCopy(d);
}

/* A job records its breach in check_runs.gate: it has no use for fail_on_breach. */
static void
check_job_options(CheckJob *job)
{
	JsonbIterator *it;
	JsonbValue	v;
	char	   *key = NULL;

	if (job->options == NULL || JB_ROOT_IS_SCALAR(job->options) || !JB_ROOT_IS_OBJECT(job->options))
		return;					/* reconcile_check refuses a non-object */
	it = JsonbIteratorInit(&job->options->root);
	while (jsonb_object_next(&it, &key, &v))
		if (strcmp(key, "fail_on_breach") == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"fail_on_breach\" of check job \"%s\" is not for jobs", job->job),
					 errdetail("A job's run is recorded, breach or not, with the verdict in reconcile.check_runs.gate; an error would roll the record back."),
					 errhint("Remove the option, and test the returned run's gate (see \"Scheduling\" in docs/rules.md).")));
}

typedef struct JobRun
{
	CheckJob   *job;
	TimestampTz started;
	Oid			relid;			/* once resolved */
	MemoryContext oldcxt;
	MemoryContext jobcxt;
	HeapTuple	row;
	TupleDesc	rowdesc;
} JobRun;

static void
run_job_step(void *arg)
{
	JobRun	   *jr = arg;
	CheckOutcome *out;
	HeapTuple	r;
	TupleDesc	d;
	Jsonb	   *rules;
	Oid			run_as;

	MemoryContextSwitchTo(jr->jobcxt);
	jr->relid = resolve_job_relation(jr->job);
	check_job_options(jr->job);
	rules = job_rules(jr->job, jr->relid, &run_as);
	out = rules_check_outcome(jr->relid, rules, jr->job->options, jr->job->job, run_as);
	MemoryContextSwitchTo(jr->jobcxt);
	notify_run(out, jr->job->job,
			   check_history_record(out, jr->job->job, NULL, jr->started, NULL, &r, &d),
			   jr->relid, NULL);
	MemoryContextSwitchTo(jr->oldcxt);
	jr->row = heap_copytuple(r);
	jr->rowdesc = CreateTupleDescCopy(d);
}

/*
 * reconcile_check_run(job text DEFAULT NULL)
 *		Runs the check job named (NULL: every job in reconcile.check_jobs) and
 *		records each run; returns SETOF reconcile.check_runs, the rows recorded.
 */
Datum
reconcile_check_run(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *only = PG_ARGISNULL(0) ? NULL : text_to_cstring(PG_GETARG_TEXT_PP(0));
	Datum		arg;
	Oid			argtype = TEXTOID;
	int			njobs;
	CheckJob   *jobs;

	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	if (!check_history_installed())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("check jobs need the reconcile 1.2 schema"),
				 errhint("Run ALTER EXTENSION reconcile UPDATE.")));

	arg = only ? CStringGetTextDatum(only) : (Datum) 0;
	if (SPI_execute_with_args("SELECT job, relation, rules, options FROM reconcile.check_jobs"
							  " WHERE $1 IS NULL OR job OPERATOR(pg_catalog.=) $1"
							  " ORDER BY job COLLATE \"C\"",
							  1, &argtype, &arg, only ? NULL : "n", true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read reconcile.check_jobs");
	if (only && SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("check job \"%s\" does not exist", only),
				 errhint("The jobs are the rows of reconcile.check_jobs.")));

	njobs = SPI_processed;
	jobs = palloc0(sizeof(CheckJob) * Max(njobs, 1));
	for (int i = 0; i < njobs; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		Datum		d;

		jobs[i].job = SPI_getvalue(tup, desc, 1);
		jobs[i].relation = SPI_getvalue(tup, desc, 2);
		d = SPI_getbinval(tup, desc, 3, &isnull);
		jobs[i].rules = isnull ? NULL : DatumGetJsonbPCopy(d);
		d = SPI_getbinval(tup, desc, 4, &isnull);
		jobs[i].options = isnull ? NULL : DatumGetJsonbPCopy(d);
	}

	for (int i = 0; i < njobs; i++)
	{
		JobRun		jr = {&jobs[i], GetCurrentTimestamp(), InvalidOid,
						  CurrentMemoryContext, NULL, NULL, NULL};
		ErrorData  *edata;
		HeapTuple	row;
		TupleDesc	rowdesc;

		CHECK_FOR_INTERRUPTS();
		jr.jobcxt = AllocSetContextCreate(jr.oldcxt, "reconcile check job",
										  ALLOCSET_DEFAULT_SIZES);
		edata = run_in_subtransaction(run_job_step, &jr, true);
		MemoryContextSwitchTo(jr.oldcxt);

		/*
		 * A cancel is not a failed job: stop.  Nor is a run the caller has
		 * not the rights for: no role adds failures to the history of a
		 * relation it may not read.
		 */
		if (edata != NULL &&
			(edata->sqlerrcode == ERRCODE_QUERY_CANCELED ||
			 edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN ||
			 edata->sqlerrcode == ERRCODE_INSUFFICIENT_PRIVILEGE))
			ReThrowError(edata);
		MemoryContextDelete(jr.jobcxt);
		row = jr.row;
		rowdesc = jr.rowdesc;
		if (edata != NULL)
		{
			CheckOutcome failed;

			memset(&failed, 0, sizeof(failed));
			failed.relid = jr.relid;
			notify_run(NULL, jobs[i].job,
					   check_history_record(&failed, jobs[i].job, NULL, jr.started,
											edata->message, &row, &rowdesc),
					   jr.relid, edata->message);
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

/* The check history's setting: reconcile.check_history. */
void
check_history_define_settings(void)
{
	DefineCustomBoolVariable("reconcile.check_history",
							 "Record the per-rule counts of every batch into a target with rules.",
							 "Batches into targets with attached rules add a run to reconcile.check_runs "
							 "and one row per rule to reconcile.check_results; runs of check jobs are "
							 "always recorded.",
							 &reconcile_check_history, true, PGC_SUSET, 0,
							 NULL, NULL, NULL);
}
