/*
 * rules_attach.c
 *		reconcile_set_rules(): attach a reviewed rules document to a target,
 *		keeping every version; and the hooks through which reconcile_batch
 *		applies the target's rules to its staged rows.
 *
 * In a batch the row rules are evaluated during the loader's one read of
 * the staged rows (stage.c), by rule_eval as reconcile_check evaluates
 * them: a drop rule violated rejects the row, warn and fail violations are
 * counted.  Before the merge (batch.c) a fail
 * violation, or a dataset check with rows over the batch's staged rows,
 * refuses the batch.  Attached rules run inside the batch, where nothing
 * rolls back what they do, so they may not call volatile functions.
 *
 * An attached rule is the target owner's code, and a batch may be run by a
 * more privileged role: like an index expression run by VACUUM, every
 * attached rule (planning, row rules on each staged row, dataset checks)
 * runs as the target's owner under SECURITY_RESTRICTED_OPERATION,
 * read-only, with search_path RULES_SEARCH_PATH.  So the staged rows reach
 * the rules not through the loader's query, which runs as the caller, but
 * as values: rule_eval evaluates the rules it can on them, and the others
 * (a subquery, a whole-row reference) run per row in a query of their own
 * whose parameters are the staged row's columns.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/sysattr.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "nodes/params.h"
#include "optimizer/optimizer.h"
#include "storage/lmgr.h"
#include "tcop/pquery.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/plancache.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "args.h"
#include "jsonbuild.h"
#include "loader.h"
#include "rules.h"
#include "state.h"

PG_FUNCTION_INFO_V1(reconcile_set_rules);

typedef struct RuleContext
{
	Rule	   *rule;
	const char *target;			/* attached to this target, or NULL */
} RuleContext;

static void
rule_error_context(void *arg)
{
	RuleContext *rc = arg;
	Rule	   *r = rc->rule;

	if (rc->target)
		errcontext("%s \"%s\" of the rules attached to table \"%s\"",
				   r->severity == RULE_DATASET ? "dataset check" : "rule", r->name, rc->target);
	else
		errcontext("%s \"%s\"", r->severity == RULE_DATASET ? "dataset check" : "rule", r->name);
}

/* Plan every rule against a relation; errors name the rule. */
static void
plan_rules_strict(RuleSet *rs, const char *relsql, const char *alias,
				  const char *prefix, const char *table, int nparams, Oid *types,
				  const char *target, Node **exprs)
{
	for (int i = 0; i < rs->nrules; i++)
	{
		Rule	   *r = &rs->rules[i];
		ErrorContextCallback cb;
		RuleContext rc = {r, target};

		cb.callback = rule_error_context;
		cb.arg = &rc;
		cb.previous = error_context_stack;
		error_context_stack = &cb;
		if (r->severity != RULE_DATASET)
			rules_plan_row_rule(r, relsql, alias, true, exprs != NULL ? &exprs[i] : NULL);
		else
		{
			SPIPlanPtr	plan = rules_prepare_dataset(r, rules_dataset_statement(r, prefix, table, "v"),
													 nparams, types);
			CachedPlanSource *ps;

			ps = linitial(SPI_plan_get_plan_sources(plan));
			rules_refuse_volatile(r, (Node *) linitial(ps->query_list));
			SPI_freeplan(plan);
		}
		error_context_stack = cb.previous;
	}
}

/* The role that owns a relation: attached rules run as it. */
static Oid
relation_owner(Oid relid)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	owner = ((Form_pg_class) GETSTRUCT(tup))->relowner;
	ReleaseSysCache(tup);
	return owner;
}

/*
 * reconcile_set_rules(target regclass, rules jsonb) RETURNS int4
 *		Attaches a rules document to target (NULL rules: detaches); returns
 *		the new version number of the target's rules.
 */
Datum
reconcile_set_rules(PG_FUNCTION_ARGS)
{
	Oid			relid;
	StateUser	su;
	Oid			types[3] = {REGCLASSOID, JSONBOID, TEXTOID};
	Datum		args[3];
	char		nulls[3] = {' ', ' ', ' '};
	bool		isnull;
	int32		version;

	check_arg_not_null(fcinfo, 0, "target", "reconcile_set_rules");
	relid = PG_GETARG_OID(0);
	SPI_connect();
	/* Rules change between batches, not during one: lock, then read. */
	target_lock(relid, ShareRowExclusiveLock, TARGET_LOCK_OWNER);
	if (!target_is_registered(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("table \"%s\" is not a registered reconcile target",
						relation_display_name(relid)),
				 errhint("Register it with reconcile_register first.")));

	if (!PG_ARGISNULL(1))
	{
		RuleSet    *rs = rules_parse(PG_GETARG_JSONB_P(1));
		char	   *relsql = rules_quote_relation(relid);
		int			nrow = 0;
		RulesEnv	env;

		/* Each row rule is one more column of the loader's staged read. */
		for (int i = 0; i < rs->nrules; i++)
			nrow += rs->rules[i].severity != RULE_DATASET;
		if (nrow > RULES_MAX_PER_SCAN)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("a rules document attached to a target holds at most %d row rules, not %d",
							RULES_MAX_PER_SCAN, nrow),
					 errhint("Combine rules, or run the larger document with reconcile_check.")));

		/* Checked where and as whom the rules will run: as the owner. */
		rules_env_enter(&env, relation_owner(relid));
		plan_rules_strict(rs, relsql, quote_identifier(get_rel_name(relid)), "",
						  relsql, 0, NULL, NULL, NULL);
		rules_env_leave(&env);
		args[1] = PointerGetDatum(PG_GETARG_JSONB_P(1));
	}
	else
	{
		args[1] = (Datum) 0;
		nulls[1] = 'n';
	}
	args[0] = ObjectIdGetDatum(relid);
	args[2] = CStringGetTextDatum(GetUserNameFromId(GetUserId(), false));

	state_user_enter(&su);
	if (SPI_execute_with_args("INSERT INTO reconcile.target_rules"
							  " (target, version, rules, set_by, set_at, previous_version)"
							  " SELECT $1, COALESCE(pg_catalog.max(version), 0) OPERATOR(pg_catalog.+) 1,"
							  " $2, $3, pg_catalog.now(), pg_catalog.max(version)"
							  " FROM reconcile.target_rules WHERE target OPERATOR(pg_catalog.=) $1"
							  " RETURNING version",
							  3, types, args, nulls, false, 0) != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "could not write reconcile.target_rules");
	version = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	state_user_leave(&su);
	SPI_finish();
	PG_RETURN_INT32(version);
}

/* ---- applying a target's rules to a batch ---- */

struct BatchRules
{
	ErrorContextCallback context;	/* while the staged rows are read */
	int			path_nestlevel; /* search_path set while they are read */
	const char *target_name;
	Oid			target;
	Oid			owner;			/* the target's owner: the rules run as it */
	Oid			staged;
	RuleSet    *rules;
	int			nrow;			/* row rules: rules[0 .. nrow-1] */
	Node	  **exprs;			/* per row rule, parse-analysed */

	/*
	 * Row rules are evaluated as the owner on the staged columns the
	 * loader's query appends: by rule_eval, as reconcile_check evaluates
	 * them, or, those it cannot evaluate (a subquery, a whole-row
	 * reference), by the executor: rowquery is the plan of
	 *		SELECT (r1) IS NOT TRUE, ... FROM unnest($1) AS s
	 * over the staged relation's row type, started once, whose projection
	 * is computed on each staged row put in its scan slot, as a scan would
	 * compute it (subqueries planned once, hashed subplans built once).
	 */
	int		   *source;			/* per row rule: its column in rowplan's
								 * result, or -1 - its index in eval */
	RuleEval   *eval;
	bool	   *violated;		/* per rule in eval, for the current row */
	SPIPlanPtr	rowplan;
	char	   *rowsql;
	int			nrowplan;		/* rules in rowplan */
	CachedPlan *rowcplan;
	QueryDesc  *rowquery;		/* started while the staged rows are read */
	int			nparams;		/* staged columns the loader hands to rowquery */
	AttrNumber *param_atts;		/* their attribute numbers in the staged relation */
	int		   *param_pos;		/* their positions (0-based) in the loader's row */
	Datum	   *param_values;	/* a staged row in the staged relation's layout */
	bool	   *param_nulls;
	int			staged_natts;
	bool	   *planned_violated;	/* per rowplan column, for the current row */
	bool	   *violated_now;	/* per row rule, for the current row */
	int64	   *violations;		/* per row rule: fail and warn counts */
	const char **dropped;
};

/* A WITH clause naming the batch's staged rows for dataset checks ($1: object keys). */
static char *
batch_rows_prefix(Oid staged)
{
	return psprintf("WITH reconcile_batch_rows AS (SELECT s.* FROM %s AS s"
					" WHERE s.object_key::pg_catalog.text OPERATOR(pg_catalog.=) ANY ($1)) ",
					rules_quote_relation(staged));
}

/*
 * Plan the row rules rule_eval cannot evaluate as the projection of a scan
 * of the staged relation's row type (aliased "s", as the rules were
 * planned against the staged relation).
 */
static void
prepare_row_plan(BatchRules *br)
{
	TupleDesc	sdesc = lookup_rowtype_tupdesc_copy(get_rel_type_id(br->staged), -1);
	StringInfoData sql;
	Oid			arraytype = get_array_type(get_rel_type_id(br->staged));

	initStringInfo(&sql);
	for (int i = 0; i < br->nrow; i++)
	{
		Rule	   *r = &br->rules->rules[i];
		ErrorContextCallback cb;
		RuleContext rc = {r, br->target_name};

		if (br->exprs[i] != NULL && rule_eval_supported(br->exprs[i]))
			continue;
		/* Alone first, so that an error (a system column) names the rule. */
		cb.callback = rule_error_context;
		cb.arg = &rc;
		cb.previous = error_context_stack;
		error_context_stack = &cb;
		if (OidIsValid(arraytype))
			SPI_freeplan(SPI_prepare(psprintf("SELECT (%s\n) IS NOT TRUE FROM pg_catalog.unnest($1) AS s",
											  r->text), 1, &arraytype));
		error_context_stack = cb.previous;
		appendStringInfo(&sql, "%s(%s\n) IS NOT TRUE", br->nrowplan > 0 ? ", " : "SELECT ", r->text);
		br->source[i] = br->nrowplan++;
	}
	if (br->nrowplan == 0)
		return;
	if (!OidIsValid(arraytype))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the row rules attached to table \"%s\" cannot be evaluated on the staged rows of \"%s\"",
						br->target_name, relation_display_name(br->staged)),
				 errdetail("The staged relation's row type has no array type.")));
	appendStringInfoString(&sql, " FROM pg_catalog.unnest($1) AS s");
	br->rowsql = sql.data;
	br->rowplan = SPI_prepare(sql.data, 1, &arraytype);
	if (br->rowplan == NULL)
		elog(ERROR, "SPI_prepare failed for the row rules attached to table \"%s\": %s",
			 br->target_name, SPI_result_code_string(SPI_result));
	br->param_atts = palloc(sizeof(AttrNumber) * Max(sdesc->natts, 1));
	for (int a = 1; a <= sdesc->natts; a++)
		if (!TupleDescAttr(sdesc, a - 1)->attisdropped)
			br->param_atts[br->nparams++] = a;
	br->param_pos = palloc(sizeof(int) * Max(br->nparams, 1));
	br->param_values = palloc0(sizeof(Datum) * Max(sdesc->natts, 1));
	br->param_nulls = palloc(sizeof(bool) * Max(sdesc->natts, 1));
	br->staged_natts = sdesc->natts;
	br->planned_violated = palloc0(sizeof(bool) * br->nrowplan);
}

/* Start rowquery's executor (as the owner: it checks the owner's rights). */
static void
start_row_query(BatchRules *br)
{
	PlannedStmt *stmt;
	ParamListInfo params = makeParamList(1);
	PlanState  *ps;

	params->params[0].isnull = true;
	params->params[0].ptype = get_array_type(get_rel_type_id(br->staged));
	br->rowcplan = SPI_plan_get_cached_plan(br->rowplan);
	if (br->rowcplan == NULL || list_length(br->rowcplan->stmt_list) != 1)
		elog(ERROR, "could not plan the row rules attached to table \"%s\"", br->target_name);
	stmt = linitial_node(PlannedStmt, br->rowcplan->stmt_list);
	br->rowquery = CreateQueryDesc(stmt, br->rowsql, GetActiveSnapshot(), InvalidSnapshot,
								   None_Receiver, params, NULL, 0);
	ExecutorStart(br->rowquery, 0);
	ps = br->rowquery->planstate;
	if (!IsA(ps, FunctionScanState) || ps->ps_ProjInfo == NULL ||
		((ScanState *) ps)->ss_ScanTupleSlot->tts_tupleDescriptor->natts != br->staged_natts)
		elog(ERROR, "unexpected plan for the row rules attached to table \"%s\"", br->target_name);
}

static void
end_row_query(BatchRules *br)
{
	ExecutorFinish(br->rowquery);
	ExecutorEnd(br->rowquery);
	FreeQueryDesc(br->rowquery);
	br->rowquery = NULL;
	ReleaseCachedPlan(br->rowcplan, NULL);
	br->rowcplan = NULL;
}

/* The target's current rules, checked against the staged relation. */
BatchRules *
batch_rules_load(Oid target, Oid staged)
{
	bool		isnull = true;
	Datum		d = (Datum) 0;
	BatchRules *br;
	RuleSet    *rs;
	char	   *relsql;
	RulesEnv	env;
	Oid			argtype = TEXTARRAYOID;

	/* As current as the registration, in every isolation level. */
	state_read_latest("SELECT rules FROM reconcile.target_rules"
					  " WHERE target OPERATOR(pg_catalog.=) $1"
					  " ORDER BY version DESC LIMIT 1", target, 1);
	if (SPI_processed > 0)
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		return NULL;

	rs = rules_parse(DatumGetJsonbP(d));
	br = palloc0(sizeof(BatchRules));
	br->target = target;
	br->target_name = relation_display_name(target);
	br->owner = relation_owner(target);
	br->staged = staged;
	br->rules = rs;
	while (br->nrow < rs->nrules && rs->rules[br->nrow].severity != RULE_DATASET)
		br->nrow++;
	br->violations = palloc0(sizeof(int64) * Max(rs->nrules, 1));
	br->dropped = palloc0(sizeof(char *) * Max(rs->nrules, 1));
	br->exprs = palloc0(sizeof(Node *) * Max(rs->nrules, 1));
	br->source = palloc0(sizeof(int) * Max(rs->nrules, 1));
	br->violated_now = palloc0(sizeof(bool) * Max(rs->nrules, 1));

	/*
	 * The rules run as the target's owner, and read the staged rows (a
	 * dataset check reads them all): the owner must be able to.
	 */
	if (pg_class_aclcheck(staged, br->owner, ACL_SELECT) != ACLCHECK_OK &&
		pg_attribute_aclcheck_all(staged, br->owner, ACL_SELECT, ACLMASK_ALL) != ACLCHECK_OK)
	{
		char	   *owner = GetUserNameFromId(br->owner, false);

		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("role \"%s\", owner of table \"%s\", may not read staged relation \"%s\"",
						owner, br->target_name, relation_display_name(staged)),
				 errdetail("The data-quality rules attached to table \"%s\" run as its owner, and read the staged rows.",
						   br->target_name),
				 errhint("Grant SELECT on \"%s\" to role \"%s\", or detach the rules with reconcile_set_rules(target, NULL).",
						 relation_display_name(staged), owner)));
	}

	relsql = rules_quote_relation(staged);
	rules_env_enter(&env, br->owner);
	plan_rules_strict(rs, relsql, "s", batch_rows_prefix(staged),
					  "reconcile_batch_rows", 1, &argtype, relation_display_name(target),
					  br->exprs);
	prepare_row_plan(br);
	rules_env_leave(&env);
	return br;
}

/*
 * A run-time error in a row rule (division by zero on some staged row)
 * surfaces while the loader reads the staged rows, where nothing tells
 * which expression raised it; say that rules were being evaluated.
 */
static void
batch_rules_error_context(void *arg)
{
	BatchRules *br = arg;

	if (br->nrow > 0)
		errcontext("reading the staged rows with the row rules attached to table \"%s\" (reconcile_check over the staged relation names a rule that fails)",
				   br->target_name);
}

/*
 * While the staged rows are read, search_path is the rules' own: the row
 * rules were planned under it and are evaluated under it.  (The loader's
 * own query qualifies every name.)  An error leaves the reset to the
 * transaction's abort.
 */
void
batch_rules_context_push(BatchState *b)
{
	BatchRules *br = b->rules;

	if (br == NULL)
		return;
	br->context.callback = batch_rules_error_context;
	br->context.arg = br;
	br->context.previous = error_context_stack;
	error_context_stack = &br->context;
	br->path_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", RULES_SEARCH_PATH, PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
}

/* Undo batch_rules_context_push: restore search_path and the error context. */
void
batch_rules_context_pop(BatchState *b)
{
	if (b->rules == NULL)
		return;
	if (b->rules->rowquery != NULL)
	{
		RulesEnv	env;

		rules_user_enter(&env, b->rules->owner);
		end_row_query(b->rules);
		rules_user_leave(&env);
	}
	AtEOXact_GUC(false, b->rules->path_nestlevel);
	error_context_stack = b->rules->context.previous;
}

/*
 * Append to the staged query, whose next column is at (1-based) position
 * firstpos, the staged columns the row rules read: those rule_eval reads,
 * and every column for rowplan.
 */
void
batch_rules_append_columns(BatchRules *br, StringInfo sql, int firstpos)
{
	TupleDesc	sdesc = lookup_rowtype_tupdesc_copy(get_rel_type_id(br->staged), -1);
	int		   *positions = palloc0(sizeof(int) * Max(sdesc->natts, 1));
	Node	  **exprs = palloc(sizeof(Node *) * Max(br->nrow, 1));
	int			nexprs = 0;
	int			pos = firstpos - 1;
	Bitmapset  *atts = NULL;
	int			x = -1;

	for (int i = 0; i < br->nrow; i++)
	{
		if (br->exprs[i] != NULL && rule_eval_supported(br->exprs[i]))
		{
			pull_varattnos(br->exprs[i], 1, &atts);
			br->source[i] = -1 - nexprs;
			exprs[nexprs++] = br->exprs[i];
		}
	}
	while ((x = bms_next_member(atts, x)) >= 0)
	{
		AttrNumber	a = x + FirstLowInvalidHeapAttributeNumber;

		appendStringInfo(sql, ", s.%s", quote_identifier(NameStr(TupleDescAttr(sdesc, a - 1)->attname)));
		positions[a - 1] = pos++;
	}
	for (int k = 0; k < br->nparams; k++)
	{
		appendStringInfo(sql, ", s.%s",
						 quote_identifier(NameStr(TupleDescAttr(sdesc, br->param_atts[k] - 1)->attname)));
		br->param_pos[k] = pos++;
	}
	if (nexprs > 0 || br->rowplan != NULL)
	{
		RulesEnv	env;

		/* Compiling checks EXECUTE rights and inlines SQL functions: as the owner. */
		rules_user_enter(&env, br->owner);
		if (nexprs > 0)
			br->eval = rule_eval_begin(exprs, nexprs, sdesc, positions);
		if (br->rowplan != NULL)
			start_row_query(br);
		rules_user_leave(&env);
		br->violated = palloc(sizeof(bool) * Max(nexprs, 1));
	}
}

/* Evaluate the rules rule_eval cannot on one staged row: rowquery's projection. */
static void
run_row_plan(BatchRules *br, TupleTableSlot *row)
{
	PlanState  *ps = br->rowquery->planstate;
	ExprContext *econtext = ps->ps_ExprContext;
	TupleTableSlot *scan = ((ScanState *) ps)->ss_ScanTupleSlot;
	TupleTableSlot *result;
	MemoryContext old;

	ResetExprContext(econtext);
	slot_getallattrs(row);
	for (int a = 0; a < br->staged_natts; a++)
		br->param_nulls[a] = true;
	for (int k = 0; k < br->nparams; k++)
	{
		int			a = br->param_atts[k] - 1;

		br->param_values[a] = row->tts_values[br->param_pos[k]];
		br->param_nulls[a] = row->tts_isnull[br->param_pos[k]];
	}
	old = MemoryContextSwitchTo(econtext->ecxt_per_tuple_memory);
	ExecStoreMinimalTuple(heap_form_minimal_tuple(scan->tts_tupleDescriptor,
												  br->param_values, br->param_nulls),
						  scan, false);
	MemoryContextSwitchTo(old);
	econtext->ecxt_scantuple = scan;
	result = ExecProject(ps->ps_ProjInfo);
	slot_getallattrs(result);
	/* "(rule) IS NOT TRUE" is never null: true means violated. */
	for (int j = 0; j < br->nrowplan; j++)
		br->planned_violated[j] = !result->tts_isnull[j] && DatumGetBool(result->tts_values[j]);
	ExecClearTuple(scan);
}

/* Evaluate every row rule on one staged row, as the owner, restricted. */
static void
evaluate_row(BatchRules *br, TupleTableSlot *row)
{
	RulesEnv	env;

	rules_user_enter(&env, br->owner);
	PG_TRY();
	{
		if (br->eval != NULL)
			rule_eval_row(br->eval, row, br->violated);
		if (br->rowquery != NULL)
			run_row_plan(br, row);
	}
	PG_FINALLY();
	{
		rules_user_leave(&env);
	}
	PG_END_TRY();
}

/*
 * Look at one staged row's rules.  Returns how many drop rules it violates
 * (their names in *dropped); fail and warn violations are counted for rows
 * that are loaded, that is neither rejected nor dropped.
 */
int
batch_rules_row(BatchRules *br, TupleTableSlot *row, bool rejected, const char ***dropped)
{
	int			ndropped = 0;

	evaluate_row(br, row);
	for (int i = 0; i < br->nrow; i++)
	{
		int			src = br->source[i];

		br->violated_now[i] = src >= 0 ? br->planned_violated[src] : br->violated[-1 - src];
		if (br->violated_now[i] && br->rules->rules[i].severity == RULE_DROP)
			br->dropped[ndropped++] = br->rules->rules[i].name;
	}
	*dropped = br->dropped;
	if (rejected || ndropped > 0)
		return ndropped;
	for (int i = 0; i < br->nrow; i++)
		if (br->violated_now[i] && br->rules->rules[i].severity != RULE_DROP)
			br->violations[i]++;
	return 0;
}

/*
 * Before the merge: a fail rule violated by a loaded row, or a dataset
 * check with rows over the batch's staged rows, refuses the whole batch.
 */
void
batch_rules_gate(BatchState *b)
{
	BatchRules *br = b->rules;
	StringInfoData breaches;
	int			nbreaches = 0;
	ArrayBuildState *keys;
	Oid			argtype = TEXTARRAYOID;
	Datum		arg;
	char	   *prefix;
	RulesEnv	env;

	if (br == NULL)
		return;
	initStringInfo(&breaches);
	for (int i = 0; i < br->nrow; i++)
	{
		Rule	   *r = &br->rules->rules[i];

		if (r->severity == RULE_FAIL && br->violations[i] > 0)
			appendStringInfo(&breaches, "%sfail rule \"%s\": " INT64_FORMAT " %s",
							 nbreaches++ > 0 ? "; " : "", r->name, br->violations[i],
							 br->violations[i] == 1 ? "row" : "rows");
	}

	keys = initArrayResult(TEXTOID, CurrentMemoryContext, false);
	for (int i = 0; i < b->manifest->nentries; i++)
		keys = accumArrayResult(keys, CStringGetTextDatum(b->manifest->entries[i].object_key),
								false, TEXTOID, CurrentMemoryContext);
	arg = makeArrayResult(keys, CurrentMemoryContext);
	prefix = batch_rows_prefix(br->staged);

	/* Dataset checks run as the owner, restricted, as the row rules do. */
	rules_env_enter(&env, br->owner);
	{
		for (int i = br->nrow; i < br->rules->nrules; i++)
		{
			Rule	   *r = &br->rules->rules[i];
			ErrorContextCallback cb;
			RuleContext rc = {r, b->target->relname};
			bool		isnull;
			int64		n;
			SPIPlanPtr	plan;

			cb.callback = rule_error_context;
			cb.arg = &rc;
			cb.previous = error_context_stack;
			error_context_stack = &cb;
			plan = rules_prepare_dataset(r, rules_dataset_statement(r, prefix, "reconcile_batch_rows",
																	 "pg_catalog.count(*)"),
										 1, &argtype);
			if (SPI_execute_plan(plan, &arg, NULL, true, 1) != SPI_OK_SELECT)
				elog(ERROR, "could not run dataset check \"%s\"", r->name);
			n = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
			error_context_stack = cb.previous;
			if (n > 0)
				appendStringInfo(&breaches, "%sdataset check \"%s\": " INT64_FORMAT " %s",
								 nbreaches++ > 0 ? "; " : "", r->name, n, n == 1 ? "row" : "rows");
			SPI_freeplan(plan);
		}
	}
	rules_env_leave(&env);

	if (nbreaches > 0)
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("batch %s breaches the data-quality rules of table \"%s\"",
						b->batch_id, b->target->relname),
				 errdetail("Breached: %s.", breaches.data),
				 errhint("Correct the staged rows, or review the rules with reconcile_set_rules, and call reconcile_batch again; nothing was applied.")));
}

/* The receipt's warnings: violations per warn rule, as a jsonb object. */
Datum
batch_rules_warnings(BatchRules *br, bool *isnull)
{
	JsonbParseState *st = NULL;
	JsonbValue *res;

	*isnull = (br == NULL);
	if (br == NULL)
		return (Datum) 0;
	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	for (int i = 0; i < br->nrow; i++)
	{
		Rule	   *r = &br->rules->rules[i];

		if (r->severity != RULE_WARN)
			continue;
		jsonb_push_int64_field(&st, r->name, br->violations[i]);
	}
	res = pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	return JsonbPGetDatum(JsonbValueToJsonb(res));
}

