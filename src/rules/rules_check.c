/*
 * rules_check.c
 *		reconcile_check() and reconcile_check_report(): run a rules document
 *		over a relation, with the caller's rights, read-only.
 *
 * All row rules of a document are evaluated in one scan of the relation:
 *		SELECT <sample columns>, (r1) IS NOT TRUE, (r2) IS NOT TRUE, ...
 * whose rows are consumed by a DestReceiver that counts violations and
 * keeps a few samples, without materialising the result.  A rule that does
 * not parse, is refused or cannot be planned is left out of the scan and
 * reported as ERROR, with its SQLSTATE, beside its descriptive keys; when
 * the scan itself fails at run time (division by zero on some row) the
 * rules are split in halves and rescanned until the failing rules are
 * isolated.  Every attempt runs in a subtransaction that is rolled back,
 * so nothing a rule does outlives the check but its counts.  With option
 * fail_on_breach a blocked gate becomes an error once the result is built.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "optimizer/optimizer.h"
#include "storage/lmgr.h"
#include "tcop/dest.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/float.h"
#include "utils/fmgrprotos.h"
#include "utils/json.h"
#include "utils/typcache.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/plancache.h"
#include "utils/resowner.h"
#include "utils/tuplestore.h"

#include "common/args.h"
#include "check.h"
#include "common/jsonbuild.h"
#include "common/jsonread.h"
#include "common/receiver.h"
#include "rules.h"
#include "common/sqlname.h"

PG_FUNCTION_INFO_V1(reconcile_check);
PG_FUNCTION_INFO_V1(reconcile_check_report);

#define DEFAULT_SAMPLE 10
#define RULES_PLAN_CHUNK_BYTES 65536

/* ---- running a document over a relation ---- */

typedef enum RuleStatus
{
	RS_PENDING,
	RS_PASS,
	RS_FAIL,
	RS_ERROR,
	RS_SKIPPED					/* an anomaly rule without enough history */
} RuleStatus;

typedef struct RuleResult
{
	Rule	   *rule;
	RuleStatus	status;
	int64		invalid;
	int			nsamples;
	JsonbParseState *samples;	/* an open JSON array of the samples */
	char	   *error;
	int			sqlerrcode;		/* of error */
	Node	   *expr;			/* parse-analysed, when rule_eval can run it */
	/* anomaly rules: the measure, the history it was held to, the verdict */
	bool		has_observed;
	double		observed;
	int			nhistory;
	double		history_mean;
	double		history_stddev;
	char	   *why;
} RuleResult;

typedef struct CheckRun
{
	Oid			relid;
	char	   *relsql;			/* quoted schema.relation */
	char	   *alias;			/* quoted relation name, the scan's alias */
	RuleSet    *rules;
	RuleResult *results;
	int			sample;
	int			nkeys;
	char	  **keys;
	AttrNumber *keyatts;
	TupleDesc	rowdesc;		/* the relation's row type, for whole-row samples */
	bool		fail_on_breach;
	const char *job;			/* the check job running, for anomaly rules' history */
	int64		total_rows;
	bool		counted;
	MemoryContext cxt;			/* outlives SPI and subtransactions */
} CheckRun;

/* One value of a sample row as JSON: numbers and booleans as such. */
static void
push_sample_value(JsonbParseState **st, JsonbIteratorToken token, Datum value,
				  bool isnull, Oid type)
{
	Oid			out;
	bool		varlena;
	FmgrInfo	flinfo;

	getTypeOutputInfo(type, &out, &varlena);
	fmgr_info(out, &flinfo);
	jsonb_push_datum(st, token, value, isnull, type, &flinfo, 0);
}

/* A whole row (a composite value) as a sample, as to_jsonb writes it. */
static void
push_sample_row(JsonbParseState **st, Datum row)
{
	Jsonb	   *jb = jsonb_from_datum(row, RECORDOID);
	JsonbValue	v;

	v.type = jbvBinary;
	v.val.binary.data = &jb->root;
	v.val.binary.len = VARSIZE(jb) - VARHDRSZ;
	pushJsonbValue(st, WJB_ELEM, &v);
}

/* Forget a rule's samples: start an empty array, in the run's context. */
static void
samples_reset(CheckRun *run, RuleResult *res)
{
	MemoryContext old = MemoryContextSwitchTo(run->cxt);

	res->nsamples = 0;
	res->samples = NULL;
	pushJsonbValue(&res->samples, WJB_BEGIN_ARRAY, NULL);
	MemoryContextSwitchTo(old);
}

/* A rule's samples as a jsonb array; closes the array, so once per result. */
static Jsonb *
samples_jsonb(RuleResult *res)
{
	return JsonbValueToJsonb(pushJsonbValue(&res->samples, WJB_END_ARRAY, NULL));
}

/*
 * The scan query returns the relation's columns at their own positions
 * (a column no rule or sample needs as a null), then one "IS NOT TRUE"
 * column per rule the query evaluates itself.  The other rules are
 * evaluated here, by rule_eval, on those columns.
 */
typedef struct ScanReceiver
{
	DestReceiver pub;
	CheckRun   *run;
	int			nactive;
	int		   *active;			/* indexes into run->results */
	int		   *source;			/* per active rule: its column, or -1 - its index in eval */
	RuleEval   *eval;
	bool	   *violated;		/* per rule in eval, for the current row */
	int64		rows;
}			ScanReceiver;

static bool
scan_receive(TupleTableSlot *slot, DestReceiver *self)
{
	ScanReceiver *sr = (ScanReceiver *) self;
	CheckRun   *run = sr->run;

	CHECK_FOR_INTERRUPTS();
	slot_getallattrs(slot);
	sr->rows++;
	if (sr->eval != NULL)
		rule_eval_row(sr->eval, slot, sr->violated);
	for (int j = 0; j < sr->nactive; j++)
	{
		RuleResult *res = &run->results[sr->active[j]];
		int			col = sr->source[j];

		if (col >= 0 ?
			slot->tts_isnull[col] || !DatumGetBool(slot->tts_values[col]) :
			!sr->violated[-1 - col])
			continue;
		res->invalid++;
		if (res->nsamples < run->sample)
		{
			MemoryContext old = MemoryContextSwitchTo(run->cxt);
			TupleDesc	desc = slot->tts_tupleDescriptor;

			res->nsamples++;
			if (run->nkeys == 0)
			{
				/* The row as to_jsonb(r.*) writes it. */
				HeapTuple	row = heap_form_tuple(run->rowdesc, slot->tts_values,
												  slot->tts_isnull);

				push_sample_row(&res->samples, heap_copy_tuple_as_datum(row, run->rowdesc));
			}
			else
			{
				pushJsonbValue(&res->samples, WJB_BEGIN_OBJECT, NULL);
				for (int k = 0; k < run->nkeys; k++)
				{
					int			pos = run->keyatts[k] - 1;

					jsonb_push_key(&res->samples, run->keys[k]);
					push_sample_value(&res->samples, WJB_VALUE, slot->tts_values[pos],
									  slot->tts_isnull[pos], TupleDescAttr(desc, pos)->atttypid);
				}
				pushJsonbValue(&res->samples, WJB_END_OBJECT, NULL);
			}
			MemoryContextSwitchTo(old);
		}
	}
	return true;
}

typedef struct ScanArgs
{
	CheckRun   *run;
	int		   *idx;
	int			n;
} ScanArgs;

static void
scan_rules(void *arg)
{
	ScanArgs   *a = arg;
	CheckRun   *run = a->run;
	TupleDesc	rowdesc = run->rowdesc;
	StringInfoData sql;
	ScanReceiver sr;
	SPIExecuteOptions opts;
	bool		samples = run->sample > 0 && a->n > 0;
	bool	   *needed = palloc0(sizeof(bool) * (rowdesc->natts + 1));
	Node	  **exprs = palloc(sizeof(Node *) * Max(a->n, 1));
	int			nexprs = 0;
	int			ncols = rowdesc->natts;

	memset(&sr, 0, sizeof(sr));
	receiver_init(&sr.pub, scan_receive);
	sr.run = run;
	sr.nactive = a->n;
	sr.active = a->idx;
	sr.source = palloc(sizeof(int) * Max(a->n, 1));

	/*
	 * Without key columns a sample is the whole row: every column is
	 * selected (they are deformed anyway) and put together only for the few
	 * rows that become samples, not for every row scanned.
	 */
	for (int c = 1; c <= rowdesc->natts; c++)
		needed[c] = samples && run->nkeys == 0;
	for (int k = 0; samples && k < run->nkeys; k++)
		needed[run->keyatts[k]] = true;
	for (int j = 0; j < a->n; j++)
	{
		RuleResult *res = &run->results[a->idx[j]];

		if (res->expr != NULL)
		{
			Bitmapset  *atts = NULL;
			int			x = -1;

			pull_varattnos(res->expr, 1, &atts);
			while ((x = bms_next_member(atts, x)) >= 0)
				needed[x + FirstLowInvalidHeapAttributeNumber] = true;
			sr.source[j] = -1 - nexprs;
			exprs[nexprs++] = res->expr;
		}
		else
			sr.source[j] = ncols++;
	}

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	for (int c = 1; c <= rowdesc->natts; c++)
	{
		Form_pg_attribute att = TupleDescAttr(rowdesc, c - 1);

		appendStringInfoString(&sql, c > 1 ? ", " : "");
		if (att->attisdropped || !needed[c])
			appendStringInfoString(&sql, "NULL::pg_catalog.int4");
		else
			appendStringInfo(&sql, "%s.%s", run->alias,
							 quote_identifier(NameStr(att->attname)));
	}
	for (int j = 0; j < a->n; j++)
		if (sr.source[j] >= 0)
			appendStringInfo(&sql, "%s(%s\n) IS NOT TRUE",
							 sr.source[j] > 0 ? ", " : "",
							 run->results[a->idx[j]].rule->text);
	appendStringInfo(&sql, " FROM %s AS %s", run->relsql, run->alias);

	if (nexprs > 0)
	{
		sr.eval = rule_eval_begin(exprs, nexprs, rowdesc, NULL);
		sr.violated = palloc(sizeof(bool) * nexprs);
		elog(DEBUG1, "reconcile_check: %d of %d rules evaluated on the scanned rows, %d shared subexpressions computed once per row",
			 nexprs, a->n, rule_eval_shared(sr.eval));
	}
	for (int j = 0; j < a->n; j++)
	{
		RuleResult *res = &run->results[a->idx[j]];

		res->invalid = 0;
		samples_reset(run, res);
	}

	memset(&opts, 0, sizeof(opts));
	opts.read_only = true;
	opts.dest = (DestReceiver *) &sr;
	if (SPI_execute_extended(sql.data, &opts) < 0)
		elog(ERROR, "could not scan relation %s", run->relsql);
	if (sr.eval != NULL)
		rule_eval_end(sr.eval);
	run->total_rows = sr.rows;
	run->counted = true;
	for (int j = 0; j < a->n; j++)
	{
		RuleResult *res = &run->results[a->idx[j]];

		res->status = rule_within_threshold(res->rule, res->invalid, sr.rows) ?
			RS_PASS : RS_FAIL;
	}
}

/* Scan with the given rules; on a run-time error, halve and retry. */
static void
scan_subset(CheckRun *run, int *idx, int n)
{
	ScanArgs	a = {run, idx, n};
	ErrorData  *error;

	if (n == 0 && run->counted)
		return;
	error = rules_try(scan_rules, &a);
	if (error == NULL)
		return;
	if (n <= 1)
	{
		if (n == 1)
		{
			run->results[idx[0]].status = RS_ERROR;
			run->results[idx[0]].error = MemoryContextStrdup(run->cxt, error->message);
			run->results[idx[0]].sqlerrcode = error->sqlerrcode;
		}
		else
			ereport(ERROR,
					(errcode(error->sqlerrcode),
					 errmsg("could not read relation %s", run->relsql),
					 errdetail("%s", error->message)));
		return;
	}
	scan_subset(run, idx, n / 2);
	scan_subset(run, idx + n / 2, n - n / 2);
}

typedef struct DatasetReceiver
{
	DestReceiver pub;
	CheckRun   *run;
	RuleResult *res;
}			DatasetReceiver;

static bool
dataset_receive(TupleTableSlot *slot, DestReceiver *self)
{
	DatasetReceiver *dr = (DatasetReceiver *) self;
	RuleResult *res = dr->res;
	TupleDesc	desc = slot->tts_tupleDescriptor;

	CHECK_FOR_INTERRUPTS();
	slot_getallattrs(slot);
	res->invalid++;
	/* The statement is "SELECT v FROM (check) AS v": one composite column. */
	if (res->nsamples < dr->run->sample && desc->natts >= 1 && !slot->tts_isnull[0])
	{
		MemoryContext old = MemoryContextSwitchTo(dr->run->cxt);
		Oid			type = TupleDescAttr(desc, 0)->atttypid;

		res->nsamples++;
		if (type_is_rowtype(type))
			push_sample_row(&res->samples, slot->tts_values[0]);
		else
			push_sample_value(&res->samples, WJB_ELEM, slot->tts_values[0], false, type);
		MemoryContextSwitchTo(old);
	}
	return true;
}

typedef struct DatasetArgs
{
	CheckRun   *run;
	RuleResult *res;
	const char *prefix;			/* a WITH clause, or "" */
	const char *table;			/* what {{TABLE}} stands for */
	ParamListInfo params;
} DatasetArgs;

static void
run_dataset_check(void *arg)
{
	DatasetArgs *a = arg;
	DatasetReceiver dr;
	SPIExecuteOptions opts;
	char	   *sql = rules_dataset_statement(a->res->rule, a->prefix, a->table, "v");
	SPIPlanPtr	plan = rules_prepare_dataset(a->res->rule, sql, 0, NULL);

	memset(&dr, 0, sizeof(dr));
	receiver_init(&dr.pub, dataset_receive);
	dr.run = a->run;
	dr.res = a->res;
	a->res->invalid = 0;
	samples_reset(a->run, a->res);
	memset(&opts, 0, sizeof(opts));
	opts.read_only = true;
	opts.dest = (DestReceiver *) &dr;
	opts.params = a->params;
	if (SPI_execute_plan_extended(plan, &opts) < 0)
		elog(ERROR, "could not run dataset check \"%s\"", a->res->rule->name);
	a->res->status = rule_within_threshold(a->res->rule, a->res->invalid, 0) ?
		RS_PASS : RS_FAIL;
}

typedef struct PlanArgs
{
	CheckRun   *run;
	RuleResult *res;
	int			index;			/* of res in run->results */
} PlanArgs;

/*
 * Keep the parse-analysed expressions of planned rules (targets, in the
 * order of idx) that rule_eval can run; the others stay in the scan query.
 */
static void
keep_rule_exprs(CheckRun *run, int *idx, List *targets)
{
	MemoryContext old = MemoryContextSwitchTo(run->cxt);
	ListCell   *lc;
	int			j = 0;

	foreach(lc, targets)
	{
		Node	   *expr = (Node *) lfirst_node(TargetEntry, lc)->expr;

		run->results[idx[j++]].expr = rule_eval_supported(expr) ? copyObject(expr) : NULL;
	}
	MemoryContextSwitchTo(old);
}

static void
plan_row_rule_cb(void *arg)
{
	PlanArgs   *a = arg;
	Node	   *expr;

	rules_plan_row_rule(a->res->rule, a->run->relsql, a->run->alias, false, &expr);
	keep_rule_exprs(a->run, &a->index, list_make1(makeTargetEntry((Expr *) expr, 1, NULL, false)));
}

/*
 * Plan a chunk of row rules in one query, with the checks that
 * rules_plan_row_rule makes for one; any failure sends the caller to
 * planning them one by one.
 */
static void
plan_rules_together(void *arg)
{
	ScanArgs   *a = arg;
	CheckRun   *run = a->run;
	StringInfoData sql;
	SPIPlanPtr	plan;
	CachedPlanSource *ps;
	Query	   *q;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	for (int j = 0; j < a->n; j++)
		appendStringInfo(&sql, "%s(%s\n)", j > 0 ? ", " : "",
						 run->results[a->idx[j]].rule->text);
	appendStringInfo(&sql, " FROM %s AS %s LIMIT 0", run->relsql, run->alias);
	plan = SPI_prepare(sql.data, 0, NULL);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	ps = linitial(SPI_plan_get_plan_sources(plan));
	q = linitial_node(Query, ps->query_list);
	if (q->hasAggs || q->hasWindowFuncs || q->hasTargetSRFs)
		elog(ERROR, "a rule is not a plain row expression");
	for (int j = 0; j < ps->resultDesc->natts; j++)
		if (TupleDescAttr(ps->resultDesc, j)->atttypid != BOOLOID)
			elog(ERROR, "a rule is not boolean");
	if (SPI_execute_plan(plan, NULL, NULL, true, 0) < 0)
		elog(ERROR, "could not run the rules");
	keep_rule_exprs(run, a->idx, q->targetList);
	SPI_freeplan(plan);
}

static void
parse_options(CheckRun *run, Jsonb *options)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *key = NULL;
	List	   *keys = NIL;
	List	   *keyatts = NIL;

	run->sample = DEFAULT_SAMPLE;
	if (options == NULL)
		return;
	if (JB_ROOT_IS_SCALAR(options) || !JB_ROOT_IS_OBJECT(options))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("options must be a JSON object"),
				 errhint("Pass for example '{\"sample\": 5, \"key_columns\": [\"id\"]}'.")));
	it = JsonbIteratorInit(&options->root);
	while (jsonb_object_next(&it, &key, &v))
	{
		if (strcmp(key, "sample") == 0)
		{
			int64		n = -1;

			if (v.type == jbvNumeric)
				n = DatumGetInt64(DirectFunctionCall1(numeric_int8,
													  NumericGetDatum(v.val.numeric)));
			if (n < 0 || n > 10000)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("option \"sample\" must be an integer between 0 and 10000")));
			run->sample = (int) n;
		}
		else if (strcmp(key, "key_columns") == 0)
		{
			JsonbIterator *ait;
			JsonbValue	av;

			if (!jbv_is_array(&v))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("option \"key_columns\" must be an array of column names")));
			ait = JsonbIteratorInit(v.val.binary.data);
			while ((tok = JsonbIteratorNext(&ait, &av, true)) != WJB_DONE)
			{
				char	   *col;

				if (tok != WJB_ELEM)
					continue;
				if (av.type != jbvString)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("option \"key_columns\" must be an array of column names")));
				col = jbv_string(&av);
				keyatts = lappend_int(keyatts, get_attnum(run->relid, col));
				if (llast_int(keyatts) == InvalidAttrNumber)
					ereport(ERROR,
							(errcode(ERRCODE_UNDEFINED_COLUMN),
							 errmsg("key column \"%s\" does not exist in relation %s",
									col, run->relsql)));
				keys = lappend(keys, col);
			}
		}
		else if (strcmp(key, "fail_on_breach") == 0)
		{
			if (v.type != jbvBool)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("option \"fail_on_breach\" must be a boolean, not %s",
								jbv_type_name(&v))));
			run->fail_on_breach = v.val.boolean;
		}
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown option \"%s\"", key),
					 errhint("The options are \"sample\", \"key_columns\" and \"fail_on_breach\".")));
	}
	run->nkeys = list_length(keys);
	run->keys = palloc(sizeof(char *) * Max(run->nkeys, 1));
	run->keyatts = palloc(sizeof(AttrNumber) * Max(run->nkeys, 1));
	for (int i = 0; i < run->nkeys; i++)
	{
		run->keys[i] = list_nth(keys, i);
		run->keyatts[i] = list_nth_int(keyatts, i);
	}
}

/*
 * Samples read columns the rules may not: refuse up front, rather than as
 * a permission error charged to every rule, when the caller may not read
 * them.
 */
static void
check_sample_privileges(CheckRun *run)
{
	Oid			user = GetUserId();

	if (run->sample == 0 || pg_class_aclcheck(run->relid, user, ACL_SELECT) == ACLCHECK_OK)
		return;
	/* Not a column at all: each rule reports PostgreSQL's own error. */
	if (pg_attribute_aclcheck_all(run->relid, user, ACL_SELECT, ACLMASK_ANY) != ACLCHECK_OK)
		return;
	if (run->nkeys == 0 &&
		pg_attribute_aclcheck_all(run->relid, user, ACL_SELECT, ACLMASK_ALL) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied to sample whole rows of relation %s", run->relsql),
				 errdetail("Without option \"key_columns\", a sample is the whole row, and role \"%s\" may not read every column.",
						   GetUserNameFromId(user, false)),
				 errhint("Name columns you may read in \"key_columns\", or pass \"sample\": 0.")));
	for (int k = 0; k < run->nkeys; k++)
		if (pg_attribute_aclcheck(run->relid, run->keyatts[k], user, ACL_SELECT) != ACLCHECK_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied for column \"%s\" of relation %s", run->keys[k], run->relsql),
					 errdetail("Key column \"%s\" identifies sample rows.", run->keys[k]),
					 errhint("Name columns you may read in \"key_columns\", or pass \"sample\": 0.")));
}

/*
 * Run a rules document over a relation.  The caller has connected to SPI;
 * results live in run->cxt.
 */
/* An anomaly rule: measure the relation, read the job's history, judge. */
static void
run_anomaly_rule(void *arg)
{
	PlanArgs   *a = arg;
	RuleResult *res = a->res;
	Rule	   *r = res->rule;
	double	   *history = palloc(sizeof(double) * Max(r->anomaly->runs, 1));
	double		mean = 0,
				stddev = 0;
	AnomalyVerdict v;
	char	   *why;
	MemoryContext old;

	res->has_observed = rules_anomaly_measure(r, a->run->relid, a->run->relsql,
											  a->run->total_rows, &res->observed);
	res->nhistory = r->anomaly->runs > 0 ? rules_anomaly_history(r, a->run->job, history) : 0;
	v = rules_anomaly_judge(r, res->has_observed, res->observed, history, res->nhistory,
							&mean, &stddev, &why);
	res->history_mean = mean;
	res->history_stddev = stddev;
	res->status = v == ANOMALY_PASS ? RS_PASS : v == ANOMALY_FAIL ? RS_FAIL : RS_SKIPPED;
	old = MemoryContextSwitchTo(a->run->cxt);
	res->why = why ? pstrdup(why) : NULL;
	MemoryContextSwitchTo(old);
}

static CheckRun *
check_run(Oid relid, Jsonb *doc, Jsonb *options, const char *job, Oid run_as)
{
	CheckRun   *run = palloc0(sizeof(CheckRun));
	RuleSet    *rs;
	int		   *idx;
	int			n = 0;
	RulesEnv	env;
	char		relkind;

	/*
	 * Rules are analysed once and evaluated over the scan's rows: the
	 * relation's columns must not change in between.  Each attempt runs in
	 * a subtransaction whose locks go with it, so lock for the whole check.
	 */
	LockRelationOid(relid, AccessShareLock);
	relkind = get_rel_relkind(relid);
	if (relkind == '\0')
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	run->relid = relid;
	run->job = job;
	run->relsql = relid_quoted_name(relid);
	run->alias = pstrdup(quote_identifier(get_rel_name(relid)));
	if (relkind != RELKIND_RELATION && relkind != RELKIND_VIEW &&
		relkind != RELKIND_MATVIEW && relkind != RELKIND_FOREIGN_TABLE &&
		relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table, view or materialized view", get_rel_name(relid))));
	run->cxt = CurrentMemoryContext;
	run->rowdesc = lookup_rowtype_tupdesc_copy(get_rel_type_id(relid), -1);
	parse_options(run, options);
	check_sample_privileges(run);
	/* A rule that does not pass its checks is ERROR; the others run. */
	rs = rules_parse_for_report(doc);
	run->rules = rs;
	run->results = palloc0(sizeof(RuleResult) * Max(rs->nrules, 1));
	idx = palloc(sizeof(int) * Max(rs->nrules, 1));
	for (int i = 0; i < rs->nrules; i++)
	{
		run->results[i].rule = &rs->rules[i];
		samples_reset(run, &run->results[i]);
		if (rs->rules[i].error != NULL)
		{
			run->results[i].status = RS_ERROR;
			run->results[i].error = rs->rules[i].error;
			run->results[i].sqlerrcode = rs->rules[i].sqlerrcode;
		}
	}

	/*
	 * The caller's own rules run with the caller's rights, but read-only,
	 * whatever functions they call, and under the rules' search_path; a
	 * target's attached rules (run_as, from a check job) as its owner,
	 * restricted, as batches run them.
	 */
	rules_env_enter(&env, run_as);
	{
		int			nrow = 0;
		int		   *rows = palloc(sizeof(int) * Max(rs->nrules, 1));

		for (int i = 0; i < rs->nrules; i++)
			if (rs->rules[i].severity != RULE_DATASET && run->results[i].status != RS_ERROR &&
				rs->rules[i].anomaly == NULL)
				rows[nrow++] = i;

		/*
		 * Plan the rules together first, a chunk at a time; only when that
		 * fails, one by one, to find the rules at fault.  A chunk ends at
		 * RULES_MAX_PER_SCAN rules or once its text passes
		 * RULES_PLAN_CHUNK_BYTES: PostgreSQL parses and plans a statement
		 * without looking for interrupts, so a cancel waits for at most
		 * one chunk, not for the whole document.
		 */
		for (int done = 0, take; done < nrow; done += take)
		{
			ScanArgs	together;
			size_t		bytes = 0;

			CHECK_FOR_INTERRUPTS();
			for (take = 0; take < Min(nrow - done, RULES_MAX_PER_SCAN) &&
				 (take == 0 || bytes < RULES_PLAN_CHUNK_BYTES); take++)
				bytes += strlen(rs->rules[rows[done + take]].text);
			together.run = run;
			together.idx = rows + done;
			together.n = take;
			if (rules_try(plan_rules_together, &together) == NULL)
			{
				for (int j = 0; j < together.n; j++)
					idx[n++] = together.idx[j];
				continue;
			}
			for (int j = 0; j < together.n; j++)
			{
				RuleResult *res = &run->results[together.idx[j]];
				PlanArgs	pa = {run, res, together.idx[j]};
				ErrorData  *error;

				CHECK_FOR_INTERRUPTS();
				error = rules_try(plan_row_rule_cb, &pa);
				if (error != NULL)
				{
					res->status = RS_ERROR;
					res->error = error->message;
					res->sqlerrcode = error->sqlerrcode;
				}
				else
					idx[n++] = together.idx[j];
			}
		}
		/* A query has at most 1664 columns: beyond 1000 rules, scan in chunks. */
		for (int done = 0; done < n; done += RULES_MAX_PER_SCAN)
			scan_subset(run, idx + done, Min(n - done, RULES_MAX_PER_SCAN));
		if (!run->counted)
			scan_subset(run, idx, 0);

		for (int i = 0; i < rs->nrules; i++)
		{
			RuleResult *res = &run->results[i];
			DatasetArgs da = {run, res, "", run->relsql, NULL};
			ErrorData  *error;

			if (res->rule->severity != RULE_DATASET || res->status == RS_ERROR ||
				res->rule->anomaly != NULL)
				continue;
			CHECK_FOR_INTERRUPTS();
			error = rules_try(run_dataset_check, &da);
			if (error != NULL)
			{
				res->status = RS_ERROR;
				res->error = error->message;
				res->sqlerrcode = error->sqlerrcode;
			}
		}

		/* Anomaly rules, after the scan that counted the rows. */
		for (int i = 0; i < rs->nrules; i++)
		{
			RuleResult *res = &run->results[i];
			PlanArgs	pa = {run, res, i};
			ErrorData  *error;

			if (res->rule->anomaly == NULL || res->status == RS_ERROR)
				continue;
			CHECK_FOR_INTERRUPTS();
			error = rules_try(run_anomaly_rule, &pa);
			if (error != NULL)
			{
				res->status = RS_ERROR;
				res->error = error->message;
				res->sqlerrcode = error->sqlerrcode;
			}
		}
	}
	rules_env_leave(&env);
	return run;
}

static bool
result_breaches(RuleResult *res)
{
	switch (res->rule->severity)
	{
		case RULE_FAIL:
		case RULE_DATASET:
			return res->status == RS_FAIL || res->status == RS_ERROR;
		default:
			return false;
	}
}

static const char *
status_name(RuleStatus s)
{
	return s == RS_PASS ? "PASS" : s == RS_FAIL ? "FAIL" : s == RS_SKIPPED ? "SKIPPED" : "ERROR";
}

static Datum
invalid_pct(CheckRun *run, int64 invalid)
{
	Datum		num;

	if (run->total_rows == 0)
		return DirectFunctionCall2(numeric_round,
								   NumericGetDatum(int64_to_numeric(0)), Int32GetDatum(2));
	num = DirectFunctionCall2(numeric_div,
							  NumericGetDatum(int64_to_numeric(invalid * 100)),
							  NumericGetDatum(int64_to_numeric(run->total_rows)));
	return DirectFunctionCall2(numeric_round, num, Int32GetDatum(2));
}

/*
 * With thresholds, a rule that found violations says whether they are
 * within them: ", within mostly 0.99" or ", beyond mostly 0.99".
 */
static const char *
threshold_clause(RuleResult *res)
{
	char	   *t = rule_threshold_text(res->rule);

	if (t == NULL)
		return "";
	return psprintf(", %s %s", res->status == RS_PASS ? "within" : "beyond", t);
}

static char *
result_detail(CheckRun *run, RuleResult *res)
{
	if (res->status == RS_ERROR)
		return res->error;
	if (res->rule->anomaly != NULL)
		return psprintf("%s%s%s%s", rules_anomaly_kind_name(res->rule),
						res->rule->anomaly->column ? " of " : "",
						res->rule->anomaly->column ? res->rule->anomaly->column : "",
						res->why ? psprintf(": %s", res->why) :
						res->has_observed ? psprintf(" %g", res->observed) : "");
	if (res->rule->severity == RULE_DATASET)
	{
		if (res->invalid > 0)
			return psprintf("the check returned " INT64_FORMAT " %s%s%s%s", res->invalid,
							res->invalid == 1 ? "row" : "rows", threshold_clause(res),
							res->rule->description ? ": " : "",
							res->rule->description ? res->rule->description : "");
		return res->rule->description;
	}
	if (res->invalid > 0)
		return psprintf("false or null on " INT64_FORMAT " of " INT64_FORMAT " rows%s",
						res->invalid, run->total_rows, threshold_clause(res));
	return NULL;
}

/* The SQLSTATE of a rule in ERROR, as text; NULL otherwise. */
static char *
result_sqlstate(RuleResult *res)
{
	if (res->status != RS_ERROR || res->sqlerrcode == 0)
		return NULL;
	return pstrdup(unpack_sql_state(res->sqlerrcode));
}

/* A rule's "columns" as a text[]; NULL when the rule has no such key. */
static Datum
rule_columns_array(Rule *r, bool *isnull)
{
	Datum	   *elems = palloc(sizeof(Datum) * Max(list_length(r->columns), 1));
	ListCell   *lc;
	int			n = 0;

	*isnull = !r->has_columns;
	if (*isnull)
		return (Datum) 0;
	foreach(lc, r->columns)
		elems[n++] = CStringGetTextDatum(lfirst(lc));
	return PointerGetDatum(construct_array(elems, n, TEXTOID, -1, false, TYPALIGN_INT));
}

/* At most this many breaching rules are named in fail_on_breach's error. */
#define BREACHES_NAMED 20

/*
 * Option fail_on_breach: once the check has run in full and its result is
 * built, a blocked gate becomes an error whose detail names the breaching
 * rules, for jobs (pg_cron, CI) that see only success or failure.  23514,
 * as reconcile_batch's refusal of a batch that breaches its rules: the
 * data violates the rules declared for it; distinct from the errors that
 * mean the check could not run (22023, 42P01, 42501).
 */
static void
raise_if_blocked(CheckRun *run)
{
	StringInfoData detail;
	int			nbreach = 0;

	if (!run->fail_on_breach)
		return;
	initStringInfo(&detail);
	for (int i = 0; i < run->rules->nrules; i++)
	{
		RuleResult *res = &run->results[i];
		Rule	   *r = res->rule;

		if (!result_breaches(res))
			continue;
		if (++nbreach > BREACHES_NAMED)
			continue;
		appendStringInfo(&detail, "%s%s \"%s\": ", nbreach > 1 ? "; " : "",
						 r->severity == RULE_DATASET ? "dataset check" : "fail rule", r->name);
		if (res->status == RS_ERROR)
			appendStringInfo(&detail, "ERROR %s (%s)", result_sqlstate(res) ? result_sqlstate(res) : "",
							 res->error);
		else
			appendStringInfo(&detail, INT64_FORMAT " %s%s", res->invalid,
							 res->invalid == 1 ? "row" : "rows", threshold_clause(res));
	}
	if (nbreach == 0)
		return;
	if (nbreach > BREACHES_NAMED)
		appendStringInfo(&detail, "; and %d more", nbreach - BREACHES_NAMED);
	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 errmsg("relation %s breaches %d of %d data-quality rules",
					run->relsql, nbreach, run->rules->nrules),
			 errdetail("Breached: %s.", detail.data),
			 errhint("Option \"fail_on_breach\" turns a blocked gate into this error once every rule has run; run the check without it for the whole report.")));
}

/* A string field of the report, null when the value is absent. */
static void
push_optional_string(JsonbParseState **st, const char *key, const char *value)
{
	if (value)
		jsonb_push_string_field(st, key, value);
	else
		jsonb_push_null_field(st, key);
}

static void
check_args(FunctionCallInfo fcinfo, const char *fn)
{
	check_arg_not_null(fcinfo, 0, "relation", fn);
	check_arg_not_null(fcinfo, 1, "rules", fn);
}

/*
 * A check's outcome, rule by rule, for its history (check_history.c):
 * the values reconcile_check_report shows.  The caller has connected to
 * SPI; option fail_on_breach has no effect here.
 */
CheckOutcome *
rules_check_outcome(Oid relid, Jsonb *doc, Jsonb *options, const char *job, Oid run_as)
{
	MemoryContext cxt = CurrentMemoryContext;
	CheckRun   *run = check_run(relid, doc, options, job, run_as);
	CheckOutcome *out;

	MemoryContextSwitchTo(cxt);
	out = palloc0(sizeof(CheckOutcome));
	out->relid = relid;
	out->total_rows = run->total_rows;
	out->nrules = run->rules->nrules;
	out->rules = palloc0(sizeof(CheckRuleOutcome) * Max(out->nrules, 1));
	for (int i = 0; i < out->nrules; i++)
	{
		RuleResult *res = &run->results[i];
		CheckRuleOutcome *o = &out->rules[i];

		o->rule = res->rule->name;
		o->severity = rule_severity_names[res->rule->severity];
		o->status = status_name(res->status);
		o->counted = res->status != RS_ERROR && res->rule->anomaly == NULL;
		o->invalid = res->invalid;
		o->total = res->rule->severity == RULE_DATASET ? -1 : run->total_rows;
		o->threshold = rule_threshold_jsonb(res->rule);
		o->gate_breach = result_breaches(res);
		o->sample = o->counted ? samples_jsonb(res) : NULL;
		o->detail = result_detail(run, res);
		o->error = res->status == RS_ERROR ? res->error : NULL;
		o->sqlstate = result_sqlstate(res);
		o->has_observed = res->has_observed;
		o->observed = res->observed;
		o->has_history = res->rule->anomaly != NULL && res->rule->anomaly->runs > 0 &&
			res->status != RS_ERROR;
		o->history_runs = res->nhistory;
		o->history_mean = res->nhistory >= 2 ? res->history_mean : get_float8_nan();
		o->history_stddev = res->nhistory >= 2 ? res->history_stddev : get_float8_nan();
		out->skipped += res->status == RS_SKIPPED;
		out->passed += res->status == RS_PASS;
		out->failed += res->status == RS_FAIL;
		out->errored += res->status == RS_ERROR;
		out->blocked |= o->gate_breach;
	}
	return out;
}

/*
 * reconcile_check(relation regclass, rules jsonb, options jsonb DEFAULT '{}')
 *		Evaluates a rules document against a relation; returns one row per rule
 *		(rule, severity, status, invalid_rows, invalid_pct, gate_breach,
 *		sample, detail, sqlstate, description, columns, reference_context);
 *		with option fail_on_breach, an error instead when the gate is blocked.
 */
Datum
reconcile_check(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext cxt;
	CheckRun   *run;

	check_args(fcinfo, "reconcile_check");
	InitMaterializedSRF(fcinfo, 0);
	cxt = CurrentMemoryContext;
	SPI_connect();
	MemoryContextSwitchTo(cxt);
	run = check_run(PG_GETARG_OID(0), PG_GETARG_JSONB_P(1),
					PG_ARGISNULL(2) ? NULL : PG_GETARG_JSONB_P(2), NULL, InvalidOid);
	MemoryContextSwitchTo(cxt);
	for (int i = 0; i < run->rules->nrules; i++)
	{
		RuleResult *res = &run->results[i];
		Datum		values[12];
		bool		isnull[12] = {false};
		char	   *detail = result_detail(run, res);
		char	   *sqlstate = result_sqlstate(res);
		Rule	   *r = res->rule;

		values[0] = CStringGetTextDatum(res->rule->name);
		values[1] = CStringGetTextDatum(rule_severity_names[res->rule->severity]);
		values[2] = CStringGetTextDatum(status_name(res->status));
		if (res->status == RS_ERROR || r->anomaly != NULL)
		{
			/* An anomaly rule counts no rows: its measure is in detail. */
			isnull[3] = isnull[4] = isnull[6] = true;
		}
		else
		{
			values[3] = Int64GetDatum(res->invalid);
			values[4] = invalid_pct(run, res->invalid);
			values[6] = JsonbPGetDatum(samples_jsonb(res));
		}
		values[5] = BoolGetDatum(result_breaches(res));
		values[7] = detail ? CStringGetTextDatum(detail) : (Datum) 0;
		isnull[7] = detail == NULL;
		values[8] = sqlstate ? CStringGetTextDatum(sqlstate) : (Datum) 0;
		isnull[8] = sqlstate == NULL;
		values[9] = r->description ? CStringGetTextDatum(r->description) : (Datum) 0;
		isnull[9] = r->description == NULL;
		values[10] = rule_columns_array(r, &isnull[10]);
		values[11] = r->reference_context ? CStringGetTextDatum(r->reference_context) : (Datum) 0;
		isnull[11] = r->reference_context == NULL;
		/* Under the 1.0 declaration (8 columns) the later ones are left out. */
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	}
	SPI_finish();
	raise_if_blocked(run);
	return (Datum) 0;
}

/*
 * reconcile_check_report(relation regclass, rules jsonb, options jsonb DEFAULT '{}')
 *		The same check as reconcile_check; returns its report as one jsonb.
 */
Datum
reconcile_check_report(PG_FUNCTION_ARGS)
{
	MemoryContext cxt;
	CheckRun   *run;
	JsonbParseState *st = NULL;
	int			passed = 0,
				failed = 0,
				errored = 0,
				skipped = 0;
	bool		blocked = false;
	bool		anomalies = false;
	Datum		result;

	check_args(fcinfo, "reconcile_check_report");
	cxt = CurrentMemoryContext;
	SPI_connect();
	MemoryContextSwitchTo(cxt);
	run = check_run(PG_GETARG_OID(0), PG_GETARG_JSONB_P(1),
					PG_ARGISNULL(2) ? NULL : PG_GETARG_JSONB_P(2), NULL, InvalidOid);
	/* SPI calls leave SPI's own context current; the result must outlive it. */
	MemoryContextSwitchTo(cxt);

	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	jsonb_push_key(&st, "rules");
	pushJsonbValue(&st, WJB_BEGIN_ARRAY, NULL);
	for (int i = 0; i < run->rules->nrules; i++)
	{
		RuleResult *res = &run->results[i];
		char	   *detail = result_detail(run, res);
		JsonbValue	v;

		passed += res->status == RS_PASS;
		failed += res->status == RS_FAIL;
		errored += res->status == RS_ERROR;
		skipped += res->status == RS_SKIPPED;
		anomalies |= res->rule->anomaly != NULL;
		blocked |= result_breaches(res);
		pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
		jsonb_push_string_field(&st, "rule", res->rule->name);
		jsonb_push_string_field(&st, "severity", rule_severity_names[res->rule->severity]);
		jsonb_push_string_field(&st, "status", status_name(res->status));
		if (res->status == RS_ERROR || res->rule->anomaly != NULL)
		{
			jsonb_push_null_field(&st, "invalid_rows");
			jsonb_push_null_field(&st, "invalid_pct");
		}
		else
		{
			jsonb_push_int64_field(&st, "invalid_rows", res->invalid);
			jsonb_push_numeric_field(&st, "invalid_pct",
									 DatumGetNumeric(invalid_pct(run, res->invalid)));
		}
		jsonb_push_key(&st, "gate_breach");
		v.type = jbvBool;
		v.val.boolean = result_breaches(res);
		pushJsonbValue(&st, WJB_VALUE, &v);
		if (res->status == RS_ERROR || res->rule->anomaly != NULL)
			jsonb_push_null_field(&st, "sample");
		else
		{
			Jsonb	   *samples = samples_jsonb(res);

			jsonb_push_key(&st, "sample");
			v.type = jbvBinary;
			v.val.binary.data = &samples->root;
			v.val.binary.len = VARSIZE(samples) - VARHDRSZ;
			pushJsonbValue(&st, WJB_VALUE, &v);
		}
		if (detail)
			jsonb_push_string_field(&st, "detail", detail);
		else
			jsonb_push_null_field(&st, "detail");
		push_optional_string(&st, "sqlstate", result_sqlstate(res));
		push_optional_string(&st, "description", res->rule->description);
		jsonb_push_key(&st, "columns");
		if (res->rule->has_columns)
		{
			ListCell   *lc;

			pushJsonbValue(&st, WJB_BEGIN_ARRAY, NULL);
			foreach(lc, res->rule->columns)
				jsonb_push_string(&st, WJB_ELEM, lfirst(lc));
			pushJsonbValue(&st, WJB_END_ARRAY, NULL);
		}
		else
		{
			v.type = jbvNull;
			pushJsonbValue(&st, WJB_VALUE, &v);
		}
		push_optional_string(&st, "reference_context", res->rule->reference_context);
		/* Only a rule with thresholds has the key: reports without stay as they were. */
		if (res->rule->threshold != NULL)
		{
			jsonb_push_key(&st, "threshold");
			rules_push_threshold(&st, res->rule);
		}
		/* Only anomaly rules have a measure and a history. */
		if (res->rule->anomaly != NULL)
		{
			if (res->has_observed)
			{
				v.type = jbvNumeric;
				v.val.numeric = DatumGetNumeric(DirectFunctionCall1(float8_numeric,
																	Float8GetDatum(res->observed)));
				jsonb_push_key(&st, "observed");
				pushJsonbValue(&st, WJB_VALUE, &v);
			}
			else
				jsonb_push_null_field(&st, "observed");
		}
		pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	}
	pushJsonbValue(&st, WJB_END_ARRAY, NULL);
	jsonb_push_key(&st, "summary");
	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	jsonb_push_int64_field(&st, "rules", run->rules->nrules);
	jsonb_push_int64_field(&st, "passed", passed);
	jsonb_push_int64_field(&st, "failed", failed);
	jsonb_push_int64_field(&st, "errored", errored);
	if (anomalies)
		jsonb_push_int64_field(&st, "skipped", skipped);
	jsonb_push_string_field(&st, "gate", blocked ? "blocked" : "pass");
	pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	result = JsonbPGetDatum(JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, NULL)));
	SPI_finish();
	raise_if_blocked(run);
	PG_RETURN_DATUM(result);
}

