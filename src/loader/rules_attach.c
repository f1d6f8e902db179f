/*
 * rules_attach.c
 *		reconcile_set_rules(): attach a reviewed rules document to a target,
 *		keeping every version; and the hooks through which reconcile_batch
 *		applies the target's rules to its batches.
 *
 * Rules are attached to the target, so they name the target's columns and
 * are planned against it; in a batch they see what the batch would write.
 * The row rules are evaluated during the loader's one read of the staged
 * rows (stage.c), on each row that passed staging, cast to the target's
 * types and laid out as a row of the target (the columns a batch loads;
 * a rule naming another is refused), by rule_eval as reconcile_check
 * evaluates them: a drop rule violated, or a data error a rule raises on
 * the row, rejects it; warn and fail violations are counted, and after the
 * read (batch.c) a fail violation refuses the batch.  The dataset checks
 * run after the merge (merge.c), over the winners queued in the general
 * write path's temporary table, before anything is written.  Attached
 * rules run inside the batch, where nothing rolls back what they do, so
 * they may not call volatile functions.
 *
 * An attached rule is the target owner's code, and a batch may be run by a
 * more privileged role: like an index expression run by VACUUM, every
 * attached rule (planning, row rules on each staged row, dataset checks)
 * runs as the target's owner under SECURITY_RESTRICTED_OPERATION,
 * read-only, with search_path RULES_SEARCH_PATH.  So the staged rows reach
 * the row rules not through the loader's query, which runs as the caller,
 * but as values: rule_eval evaluates the rules it can on them, and the
 * others (a subquery, a whole-row reference) run in a plan of their own,
 * started once, whose scan slot receives each row.  The dataset checks
 * read the winners' temporary table, on which the caller's batch grants
 * the owner SELECT (apply.c).
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

#include "common/args.h"
#include "rules/check.h"
#include "common/jsonbuild.h"
#include "loader.h"
#include "rules/rules.h"
#include "common/sqlname.h"
#include "common/state.h"
#include "common/subxact.h"

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

static void plan_rules_for_batches(RuleSet *rs, TargetInfo *t, const char *target_name,
								   Node **exprs);

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
		int			nrow = 0;
		RulesEnv	env;
		TargetInfo *t;

		/* Anomaly rules run in check jobs, not batches: their columns must exist. */
		for (int i = 0; i < rs->nrules; i++)
			if (rs->rules[i].anomaly != NULL && rs->rules[i].anomaly->column != NULL &&
				get_attnum(relid, rs->rules[i].anomaly->column) == InvalidAttrNumber)
				ereport(ERROR,
						(errcode(ERRCODE_UNDEFINED_COLUMN),
						 errmsg("column \"%s\" of anomaly rule \"%s\" does not exist in table \"%s\"",
								rs->rules[i].anomaly->column, rs->rules[i].name,
								relation_display_name(relid))));
		rules_drop_anomalies(rs);

		/* Each row rule is one more column of the projection evaluated per staged row. */
		for (int i = 0; i < rs->nrules; i++)
			nrow += rs->rules[i].severity != RULE_DATASET;
		if (nrow > RULES_MAX_PER_SCAN)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("a rules document attached to a target holds at most %d row rules, not %d",
							RULES_MAX_PER_SCAN, nrow),
					 errhint("Combine rules, or run the larger document with reconcile_check.")));

		/*
		 * Checked where, as whom and on what the rules will run: as the
		 * owner, on what a batch loads into the target.
		 */
		t = target_load(relid);
		rules_env_enter(&env, relation_owner(relid));
		plan_rules_for_batches(rs, t, NULL, NULL);
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
	MemoryContext cxt;			/* the batch's: lives as long as the rules */
	const char *target_name;
	Oid			target;
	Oid			owner;			/* the target's owner: the rules run as it */
	RuleSet    *rules;
	int			nrow;			/* row rules: rules[0 .. nrow-1] */
	Node	  **exprs;			/* per row rule, parse-analysed over the target */

	/*
	 * A staged row reaches the rules as the batch would write it: a row of
	 * the target's row type (row), holding the key, version, tombstone,
	 * hash and payload columns in the target's types, NULL elsewhere.
	 * rule_eval evaluates the rules it can on it, each row in a
	 * subtransaction so that a rule's error on one row rejects that row;
	 * the others (a subquery, a whole-row reference) are the projection of
	 * rowquery, the plan of
	 *		SELECT (r1) IS NOT TRUE, ... FROM unnest($1) AS <target>
	 * over the target's row type, started once, whose projection is
	 * computed on each row put in its scan slot, as a scan would compute it
	 * (subqueries planned once, hashed subplans built once).
	 */
	TupleDesc	rowdesc;
	TupleTableSlot *row;
	int		   *source;			/* per row rule: its column in rowplan's
								 * result, or -1 - its index in eval */
	int			neval;
	Node	  **eval_exprs;		/* per rule in eval */
	int		   *eval_rule;		/* per rule in eval: its index in rules */
	RuleEval   *eval;
	RuleEval  **alone;			/* per rule in eval, made at a row's first error */
	bool	   *violated;		/* per rule in eval, for the current row */
	SPIPlanPtr	rowplan;
	char	   *rowsql;
	int			nrowplan;		/* rules in rowplan */
	CachedPlan *rowcplan;
	QueryDesc  *rowquery;		/* started while the staged rows are read */
	bool	   *planned_violated;	/* per rowplan column, for the current row */
	bool	   *violated_now;	/* per row rule, for the current row */
	int64	   *violations;		/* per rule: fail and warn counts; rows a
								 * dataset check returned */
	int64		rows_counted;	/* rows whose violations were counted */
	int64		rows_evaluated; /* rows the row rules were evaluated on */
	bool		checked_winners;	/* the dataset checks ran */
	TimestampTz started;		/* for the check history */
	const char **reasons;		/* why the current row is rejected */
};

/* Is the target column attnum one a batch loads? */
static bool
column_loaded(TargetColumn **cols, int ncols, AttrNumber attnum)
{
	for (int i = 0; i < ncols; i++)
		if (cols[i]->attnum == attnum)
			return true;
	return false;
}

/*
 * A row rule may read only the columns a batch loads: the others have no
 * staged value (a whole-row reference sees them NULL).
 */
static void
refuse_unloaded_columns(Rule *r, Node *expr, TargetInfo *t, TargetColumn **cols, int ncols)
{
	ListCell   *lc;

	foreach(lc, pull_vars_of_level(expr, 0))
	{
		Var		   *var = lfirst(lc);
		char	   *name;

		if (!IsA(var, Var) || var->varattno == 0 ||
			column_loaded(cols, ncols, var->varattno))
			continue;
		name = get_attname(t->relid, var->varattno, true);
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("rule \"%s\" reads column \"%s\" of table \"%s\", which batches do not load",
						r->name, name ? name : "?", t->relname),
				 errdetail("In a batch, rules see the target's key, version, tombstone, hash and payload columns, with the values the batch would write."),
				 errhint("Name the column in the target's payload_columns (reconcile_register), or leave the rule to reconcile_check.")));
	}
}

/*
 * The relation a dataset check reads in a batch, as SQL: the target's
 * loaded columns, from the target itself (for planning) or, in a batch,
 * from the winners (rows_sql, see apply.c: apply_winners_sql).
 */
static char *
batch_rows_prefix(TargetInfo *t, const char *rows_sql)
{
	StringInfoData sql;
	TargetColumn **cols;
	int			ncols;

	if (rows_sql != NULL)
		return psprintf("WITH reconcile_batch_rows AS (%s) ", rows_sql);
	ncols = target_loaded_columns(t, &cols);
	initStringInfo(&sql);
	appendStringInfoString(&sql, "WITH reconcile_batch_rows AS (SELECT ");
	for (int i = 0; i < ncols; i++)
		appendStringInfo(&sql, "%st.%s", i > 0 ? ", " : "", quote_identifier(cols[i]->name));
	appendStringInfo(&sql, " FROM %s AS t) ", t->qualname);
	return sql.data;
}

/*
 * Plan every rule as batches run it, as the owner under RULES_SEARCH_PATH;
 * errors name the rule.  A row rule is planned against the target (so it
 * names the target's columns, plainly or through the table's name) and may
 * read only the columns a batch loads; a dataset check is planned over
 * those columns.  target_name: for the error context, NULL outside a batch.
 */
static void
plan_rules_for_batches(RuleSet *rs, TargetInfo *t, const char *target_name, Node **exprs)
{
	char	   *relsql = relid_quoted_name(t->relid);
	const char *alias = quote_identifier(get_rel_name(t->relid));
	char	   *prefix = batch_rows_prefix(t, NULL);
	TargetColumn **cols;
	int			ncols = target_loaded_columns(t, &cols);

	for (int i = 0; i < rs->nrules; i++)
	{
		Rule	   *r = &rs->rules[i];
		ErrorContextCallback cb;
		RuleContext rc = {r, target_name};

		CHECK_FOR_INTERRUPTS();
		cb.callback = rule_error_context;
		cb.arg = &rc;
		cb.previous = error_context_stack;
		error_context_stack = &cb;
		if (r->severity != RULE_DATASET)
		{
			Node	   *expr;

			rules_plan_row_rule(r, relsql, alias, true, &expr);
			refuse_unloaded_columns(r, expr, t, cols, ncols);
			if (exprs != NULL)
				exprs[i] = expr;
		}
		else
		{
			SPIPlanPtr	plan = rules_prepare_dataset(r, rules_dataset_statement(r, prefix, "reconcile_batch_rows", "v"),
													 0, NULL);
			CachedPlanSource *ps;

			ps = linitial(SPI_plan_get_plan_sources(plan));
			rules_refuse_volatile(r, (Node *) linitial(ps->query_list));
			SPI_freeplan(plan);
		}
		error_context_stack = cb.previous;
	}
}

/*
 * Plan the row rules rule_eval cannot evaluate as the projection of a scan
 * of the target's row type (aliased by the table's name, as the rules
 * were planned against the target).
 */
static void
prepare_row_plan(BatchRules *br)
{
	StringInfoData sql;
	Oid			arraytype = get_array_type(br->rowdesc->tdtypeid);
	const char *alias = quote_identifier(get_rel_name(br->target));

	initStringInfo(&sql);
	for (int i = 0; i < br->nrow; i++)
	{
		Rule	   *r = &br->rules->rules[i];
		ErrorContextCallback cb;
		RuleContext rc = {r, br->target_name};

		if (rule_eval_supported(br->exprs[i]))
			continue;
		/* Alone first, so that an error names the rule. */
		cb.callback = rule_error_context;
		cb.arg = &rc;
		cb.previous = error_context_stack;
		error_context_stack = &cb;
		if (OidIsValid(arraytype))
			SPI_freeplan(SPI_prepare(psprintf("SELECT (%s\n) IS NOT TRUE FROM pg_catalog.unnest($1) AS %s",
											  r->text, alias), 1, &arraytype));
		error_context_stack = cb.previous;
		appendStringInfo(&sql, "%s(%s\n) IS NOT TRUE", br->nrowplan > 0 ? ", " : "SELECT ", r->text);
		br->source[i] = br->nrowplan++;
	}
	if (br->nrowplan == 0)
		return;
	if (!OidIsValid(arraytype))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("the row rules attached to table \"%s\" cannot be evaluated in batches",
						br->target_name),
				 errdetail("The table's row type has no array type.")));
	appendStringInfo(&sql, " FROM pg_catalog.unnest($1) AS %s", alias);
	br->rowsql = sql.data;
	br->rowplan = SPI_prepare(sql.data, 1, &arraytype);
	if (br->rowplan == NULL)
		elog(ERROR, "SPI_prepare failed for the row rules attached to table \"%s\": %s",
			 br->target_name, SPI_result_code_string(SPI_result));
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
	params->params[0].ptype = get_array_type(br->rowdesc->tdtypeid);
	br->rowcplan = SPI_plan_get_cached_plan(br->rowplan);
	if (br->rowcplan == NULL || list_length(br->rowcplan->stmt_list) != 1)
		elog(ERROR, "could not plan the row rules attached to table \"%s\"", br->target_name);
	stmt = linitial_node(PlannedStmt, br->rowcplan->stmt_list);
	br->rowquery = CreateQueryDesc(stmt, br->rowsql, GetActiveSnapshot(), InvalidSnapshot,
								   None_Receiver, params, NULL, 0);
	ExecutorStart(br->rowquery, 0);
	ps = br->rowquery->planstate;
	if (!IsA(ps, FunctionScanState) || ps->ps_ProjInfo == NULL ||
		((ScanState *) ps)->ss_ScanTupleSlot->tts_tupleDescriptor->natts != br->rowdesc->natts)
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

/*
 * The target's current rules, planned as batches run them.  The caller
 * holds the batch's lock on the target, and t is its registration.
 */
BatchRules *
batch_rules_load(TargetInfo *t, Oid staged)
{
	bool		isnull = true;
	Datum		d = (Datum) 0;
	BatchRules *br;
	RuleSet    *rs;
	RulesEnv	env;

	/* As current as the registration, in every isolation level. */
	state_read_latest("SELECT rules FROM reconcile.target_rules"
					  " WHERE target OPERATOR(pg_catalog.=) $1"
					  " ORDER BY version DESC LIMIT 1", t->relid, 1);
	if (SPI_processed > 0)
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		return NULL;

	rs = rules_parse(DatumGetJsonbP(d));
	rules_drop_anomalies(rs);	/* they measure a relation, in check jobs */
	br = palloc0(sizeof(BatchRules));
	br->cxt = CurrentMemoryContext;
	br->target = t->relid;
	br->target_name = relation_display_name(t->relid);
	br->owner = relation_owner(t->relid);
	br->rules = rs;
	br->started = GetCurrentTimestamp();
	while (br->nrow < rs->nrules && rs->rules[br->nrow].severity != RULE_DATASET)
		br->nrow++;
	br->violations = palloc0(sizeof(int64) * Max(rs->nrules, 1));
	br->reasons = palloc0(sizeof(char *) * Max(rs->nrules, 1));
	br->exprs = palloc0(sizeof(Node *) * Max(rs->nrules, 1));
	br->source = palloc0(sizeof(int) * Max(rs->nrules, 1));
	br->violated_now = palloc0(sizeof(bool) * Max(rs->nrules, 1));
	br->rowdesc = lookup_rowtype_tupdesc_copy(get_rel_type_id(t->relid), -1);
	br->row = MakeSingleTupleTableSlot(br->rowdesc, &TTSOpsVirtual);

	/*
	 * The rules run as the target's owner, on the staged rows' values: the
	 * owner must be able to read them.
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

	rules_env_enter(&env, br->owner);
	plan_rules_for_batches(rs, t, br->target_name, br->exprs);
	prepare_row_plan(br);
	rules_env_leave(&env);

	br->eval_exprs = palloc(sizeof(Node *) * Max(br->nrow, 1));
	br->eval_rule = palloc(sizeof(int) * Max(br->nrow, 1));
	for (int i = 0; i < br->nrow; i++)
	{
		if (!rule_eval_supported(br->exprs[i]))
			continue;
		br->source[i] = -1 - br->neval;
		br->eval_rule[br->neval] = i;
		br->eval_exprs[br->neval++] = br->exprs[i];
	}
	br->alone = palloc0(sizeof(RuleEval *) * Max(br->neval, 1));
	br->violated = palloc0(sizeof(bool) * Max(br->neval, 1));
	return br;
}

/* Does the batch evaluate row rules (on each staged row)? */
bool
batch_rules_has_row_rules(BatchRules *br)
{
	return br != NULL && br->nrow > 0;
}

/* Does the batch run dataset checks (over its winners)? */
bool
batch_rules_has_dataset_checks(BatchRules *br)
{
	return br != NULL && br->nrow < br->rules->nrules;
}

/* The role the rules run as: the target's owner. */
Oid
batch_rules_owner(BatchRules *br)
{
	return br->owner;
}

/*
 * A run-time error in a row rule that rowquery evaluates (a subquery)
 * surfaces while the loader reads the staged rows, where nothing tells
 * which expression raised it; say that rules were being evaluated.
 */
static void
batch_rules_error_context(void *arg)
{
	BatchRules *br = arg;

	if (br->nrow > 0)
		errcontext("evaluating the row rules attached to table \"%s\" on a staged row (reconcile_check over the staged relation names a rule that fails)",
				   br->target_name);
}

/*
 * While the staged rows are read, search_path is the rules' own: the row
 * rules were planned under it and are evaluated under it.  (The loader's
 * own query qualifies every name.)  An error leaves the reset to the
 * transaction's abort.  The evaluators start here, as the owner: compiling
 * checks EXECUTE rights and inlines SQL functions.
 */
void
batch_rules_context_push(BatchState *b)
{
	BatchRules *br = b->rules;

	if (br == NULL || br->nrow == 0)
		return;
	br->path_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", RULES_SEARCH_PATH, PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	{
		RulesEnv	env;

		rules_user_enter(&env, br->owner);
		if (br->neval > 0)
			br->eval = rule_eval_begin(br->eval_exprs, br->neval, br->rowdesc, NULL);
		if (br->rowplan != NULL)
			start_row_query(br);
		rules_user_leave(&env);
	}
}

/* Undo batch_rules_context_push: restore search_path. */
void
batch_rules_context_pop(BatchState *b)
{
	BatchRules *br = b->rules;

	if (br == NULL || br->nrow == 0)
		return;
	if (br->rowquery != NULL)
	{
		RulesEnv	env;

		rules_user_enter(&env, br->owner);
		end_row_query(br);
		rules_user_leave(&env);
	}
	AtEOXact_GUC(false, br->path_nestlevel);
}

/*
 * The slot in which the loader hands a staged row to batch_rules_row: the
 * target's row type, every column NULL.
 */
TupleTableSlot *
batch_rules_slot(BatchRules *br)
{
	TupleTableSlot *slot = br->row;

	ExecClearTuple(slot);
	for (int a = 0; a < slot->tts_tupleDescriptor->natts; a++)
	{
		slot->tts_values[a] = (Datum) 0;
		slot->tts_isnull[a] = true;
	}
	return slot;
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
	old = MemoryContextSwitchTo(econtext->ecxt_per_tuple_memory);
	ExecStoreMinimalTuple(heap_form_minimal_tuple(scan->tts_tupleDescriptor,
												  row->tts_values, row->tts_isnull),
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

/* run_row_plan, as the owner, restricted. */
static void
run_row_plan_as_owner(BatchRules *br, TupleTableSlot *row)
{
	RulesEnv	env;

	rules_user_enter(&env, br->owner);
	PG_TRY();
	{
		run_row_plan(br, row);
	}
	PG_FINALLY();
	{
		rules_user_leave(&env);
	}
	PG_END_TRY();
}

/* One evaluation by rule_eval, run in a subtransaction: all rules, or one alone. */
typedef struct RowEval
{
	BatchRules *br;
	TupleTableSlot *row;
	RuleEval   *eval;
	bool	   *violated;
} RowEval;

static void
run_row_eval(void *arg)
{
	RowEval    *re = arg;
	RulesEnv	env;

	rules_user_enter(&env, re->br->owner);
	PG_TRY();
	{
		rule_eval_row(re->eval, re->row, re->violated);
	}
	PG_FINALLY();
	{
		rules_user_leave(&env);
	}
	PG_END_TRY();
}

/*
 * Errors a staged value can make a rule raise (division by zero, a cast,
 * an overflow, a domain's check): the row's, not the batch's.  Anything
 * else (a permission, a write refused as read-only, a cancel) fails the
 * batch.
 */
static bool
is_row_error(ErrorData *e)
{
	int			category = ERRCODE_TO_CATEGORY(e->sqlerrcode);

	return category == ERRCODE_DATA_EXCEPTION ||
		category == ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION;
}

/*
 * Evaluate the rules rule_eval evaluates on one row, in a subtransaction.
 * If a rule raises a row's error, each rule is evaluated again alone, each
 * in a subtransaction of its own: those that raise it are named in the
 * row's reasons, the others' results stand.  Returns how many erred.
 */
static int
eval_row_trapped(BatchRules *br, TupleTableSlot *row, int nreasons)
{
	RowEval		re = {br, row, br->eval, br->violated};
	ErrorData  *e = run_in_subtransaction(run_row_eval, &re, true);
	int			nerrors = 0;

	if (e == NULL)
		return 0;
	if (!is_row_error(e))
		ReThrowError(e);
	for (int k = 0; k < br->neval; k++)
	{
		Rule	   *r = &br->rules->rules[br->eval_rule[k]];

		if (br->alone[k] == NULL)
		{
			MemoryContext old = MemoryContextSwitchTo(br->cxt);
			RulesEnv	env;

			rules_user_enter(&env, br->owner);
			br->alone[k] = rule_eval_begin(&br->eval_exprs[k], 1, br->rowdesc, NULL);
			rules_user_leave(&env);
			MemoryContextSwitchTo(old);
		}
		re.eval = br->alone[k];
		re.violated = &br->violated[k];
		e = run_in_subtransaction(run_row_eval, &re, true);
		if (e == NULL)
			continue;
		if (!is_row_error(e))
			ReThrowError(e);
		br->violated[k] = false;
		br->reasons[nreasons + nerrors++] = psprintf("rule \"%s\" could not be evaluated: %s",
													r->name, e->message);
	}
	return nerrors;
}

/*
 * Look at one staged row's rules: row, filled in batch_rules_slot(), holds
 * a row that passed staging, as the batch would write it.  Returns how
 * many reasons reject it (their texts in *reasons): a drop rule it
 * violates, or a rule that raised an error on it.  A row that is not
 * rejected has its fail and warn violations counted.
 */
int
batch_rules_row(BatchRules *br, TupleTableSlot *row, const char ***reasons)
{
	int			nreasons = 0;

	/* Only errors raised while the rules run are said to come from them. */
	br->context.callback = batch_rules_error_context;
	br->context.arg = br;
	br->context.previous = error_context_stack;
	error_context_stack = &br->context;
	if (br->eval != NULL)
		nreasons = eval_row_trapped(br, row, 0);
	if (br->rowquery != NULL)
		run_row_plan_as_owner(br, row);
	error_context_stack = br->context.previous;
	br->rows_evaluated++;
	for (int i = 0; i < br->nrow; i++)
	{
		int			src = br->source[i];

		br->violated_now[i] = src >= 0 ? br->planned_violated[src] : br->violated[-1 - src];
		if (br->violated_now[i] && br->rules->rules[i].severity == RULE_DROP)
		{
			br->reasons[nreasons++] = psprintf("violates drop rule \"%s\"",
											   br->rules->rules[i].name);
			br->violations[i]++;	/* rows it rejects, for the history */
		}
	}
	*reasons = br->reasons;
	if (nreasons > 0)
		return nreasons;
	br->rows_counted++;
	for (int i = 0; i < br->nrow; i++)
		if (br->violated_now[i] && br->rules->rules[i].severity != RULE_DROP)
			br->violations[i]++;
	return 0;
}

static void
refuse_batch(BatchState *b, const char *breaches)
{
	ereport(ERROR,
			(errcode(ERRCODE_CHECK_VIOLATION),
			 errmsg("batch %s breaches the data-quality rules of table \"%s\"",
					b->batch_id, b->target->relname),
			 errdetail("Breached: %s.", breaches),
			 errhint("Correct the staged rows, or review the rules with reconcile_set_rules, and call reconcile_batch again; nothing was applied.")));
}

/*
 * Before the merge: a fail rule violated by loaded rows beyond its
 * thresholds (any row, without thresholds) refuses the whole batch.  Shares
 * are of the rows whose violations were counted: those not rejected.
 */
void
batch_rules_gate(BatchState *b)
{
	BatchRules *br = b->rules;
	StringInfoData breaches;
	int			nbreaches = 0;

	if (br == NULL)
		return;
	initStringInfo(&breaches);
	for (int i = 0; i < br->nrow; i++)
	{
		Rule	   *r = &br->rules->rules[i];

		if (r->severity == RULE_FAIL &&
			!rule_within_threshold(r, br->violations[i], br->rows_counted))
			appendStringInfo(&breaches, "%sfail rule \"%s\": " INT64_FORMAT " %s%s%s",
							 nbreaches++ > 0 ? "; " : "", r->name, br->violations[i],
							 br->violations[i] == 1 ? "row" : "rows",
							 r->threshold ? " of " : "",
							 r->threshold ? psprintf(INT64_FORMAT " counted, beyond %s",
													 br->rows_counted, rule_threshold_text(r)) : "");
	}
	if (nbreaches > 0)
		refuse_batch(b, breaches.data);
}

/*
 * After the merge, before anything is written: run the dataset checks
 * over the batch's winners (rows_sql: a SELECT of them under the target's
 * column names that the owner may read, see apply.c), as the owner,
 * restricted, as the row rules run.  A check that returns rows refuses
 * the batch.
 */
void
batch_rules_check_winners(BatchState *b, const char *rows_sql)
{
	BatchRules *br = b->rules;
	StringInfoData breaches;
	int			nbreaches = 0;
	char	   *prefix = batch_rows_prefix(b->target, rows_sql);
	RulesEnv	env;

	initStringInfo(&breaches);

	/* The batch's snapshot, seeing the winners just queued. */
	PushCopiedSnapshot(GetActiveSnapshot());
	UpdateActiveSnapshotCommandId();
	rules_env_enter(&env, br->owner);
	for (int i = br->nrow; i < br->rules->nrules; i++)
	{
		Rule	   *r = &br->rules->rules[i];
		ErrorContextCallback cb;
		RuleContext rc = {r, b->target->relname};
		bool		isnull;
		int64		n;
		SPIPlanPtr	plan;
		CachedPlanSource *ps;

		cb.callback = rule_error_context;
		cb.arg = &rc;
		cb.previous = error_context_stack;
		error_context_stack = &cb;
		plan = rules_prepare_dataset(r, rules_dataset_statement(r, prefix, "reconcile_batch_rows",
																 "pg_catalog.count(*)"),
									 0, NULL);
		ps = linitial(SPI_plan_get_plan_sources(plan));
		rules_refuse_volatile(r, (Node *) linitial(ps->query_list));
		if (SPI_execute_plan(plan, NULL, NULL, true, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not run dataset check \"%s\"", r->name);
		n = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
		error_context_stack = cb.previous;
		br->violations[i] = n;
		if (!rule_within_threshold(r, n, 0))
			appendStringInfo(&breaches, "%sdataset check \"%s\": " INT64_FORMAT " %s%s%s",
							 nbreaches++ > 0 ? "; " : "", r->name, n, n == 1 ? "row" : "rows",
							 r->threshold ? ", beyond " : "",
							 r->threshold ? rule_threshold_text(r) : "");
		SPI_freeplan(plan);
	}
	rules_env_leave(&env);
	PopActiveSnapshot();
	br->checked_winners = true;
	if (nbreaches > 0)
		refuse_batch(b, breaches.data);
}

/*
 * After the receipt: the batch's per-rule counts as a run of the check
 * history (check_history.c), passes included, unless reconcile.check_history
 * is off or the schema is still 1.1.  A refused batch records nothing: its
 * error rolls back everything it wrote.  Shares are of the rows counted:
 * for a drop rule, the rows evaluated (the rows it rejected among them);
 * for fail and warn rules, the rows not rejected.
 */
void
batch_rules_record(BatchState *b)
{
	BatchRules *br = b->rules;
	CheckOutcome out;

	if (br == NULL || br->rules->nrules == 0 || !reconcile_check_history ||
		!check_history_installed())
		return;
	memset(&out, 0, sizeof(out));
	out.relid = br->target;
	out.total_rows = br->rows_evaluated;
	out.nrules = br->rules->nrules;
	out.rules = palloc0(sizeof(CheckRuleOutcome) * Max(out.nrules, 1));
	for (int i = 0; i < out.nrules; i++)
	{
		Rule	   *r = &br->rules->rules[i];
		CheckRuleOutcome *o = &out.rules[i];
		int64		total = r->severity == RULE_DROP ? br->rows_evaluated :
			r->severity == RULE_DATASET ? -1 : br->rows_counted;
		bool		pass;

		o->rule = r->name;
		o->severity = rule_severity_names[r->severity];
		o->threshold = rule_threshold_jsonb(r);
		o->invalid = br->violations[i];
		o->total = total;
		if (r->severity == RULE_DATASET && !br->checked_winners)
		{
			/* The direct write path never runs them; a target with checks takes the general one. */
			o->status = "SKIPPED";
			out.skipped++;
			continue;
		}
		o->counted = true;
		pass = rule_within_threshold(r, o->invalid, total < 0 ? 0 : total);
		o->status = pass ? "PASS" : "FAIL";
		if (o->invalid > 0)
			o->detail = r->severity == RULE_DATASET ?
				psprintf("the check returned " INT64_FORMAT " %s over the batch's winners",
						 o->invalid, o->invalid == 1 ? "row" : "rows") :
				psprintf("%s " INT64_FORMAT " of " INT64_FORMAT " rows",
						 r->severity == RULE_DROP ? "rejected" : "false or null on",
						 o->invalid, total);
		out.passed += pass;
		out.failed += !pass;
	}
	check_history_record(&out, NULL, b->batch_id, br->started, NULL, NULL, NULL);
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
