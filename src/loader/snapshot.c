/*
 * snapshot.c
 *		Snapshot batches: option snapshot of reconcile_batch declares the
 *		batch a complete extract, as of a version, of its target or of a
 *		scope of it (a predicate over the target's columns).
 *
 * Every live target row of the scope whose key the batch does not stage,
 * and whose version is lower than the snapshot's, becomes a tombstone at
 * the snapshot's version: the row stays, marked deleted, keeping its last
 * payload, as a staged DELETE would leave it.  A row at the snapshot's
 * version or above was written after the extract and stays.
 *
 * The batch's keys are those of its valid staged rows, recorded by the
 * merge (merge.c calls snapshot_add_key for every key it decides, held
 * conflicts included) in a temporary table.  Once the merge has written its
 * winners, the absent rows are read under the target's lock and written
 * through the general write path's tombstone UPDATE (apply.c), which repeats
 * the version check.  Before anything of them is written, the guard
 * compares their number with the scope's live rows counted before the
 * merge: beyond max_delete_share of them the batch fails.
 *
 * The scope is the caller's SQL and runs with the caller's rights.  It
 * must be one boolean expression over the target's columns, with no
 * subquery, aggregate, window or set-returning function and only immutable
 * functions and operators, so that it means the same rows whenever it is
 * read; it is embedded as "(<scope>\n)" only after "SELECT (<scope>\n)" has
 * parsed as exactly one expression (as a row rule, see rules.c), and every
 * statement it is embedded in is checked to be one SELECT.
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "parser/parser.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/plancache.h"
#include "utils/typcache.h"

#include "common/citus.h"
#include "common/sqlname.h"
#include "common/state_schema.h"
#include "ordering.h"
#include "payload.h"
#include "snapshot.h"
#include "writers.h"

struct SnapshotRun
{
	Datum		version;		/* in the version column's type */
	const char *scope;			/* "(<scope>\n)", or NULL */
	int64		live;			/* the scope's live rows before the merge */
	char	   *keys_name;		/* the temporary table of the batch's keys */
	Relation	keys_rel;
	TupleTableSlot *keys_slot;
	BulkInsertState bistate;
};

/* The scope as the messages name it. */
static const char *
scope_display(BatchState *b)
{
	return b->options.snapshot_scope != NULL ?
		psprintf("\"%s\"", b->options.snapshot_scope) : "(the whole table)";
}

static void
refuse_scope(BatchState *b, int sqlerrcode, const char *why)
{
	ereport(ERROR,
			(errcode(sqlerrcode),
			 errmsg("scope of the snapshot of batch %s is refused: %s", b->batch_id, why),
			 errdetail("The scope is %s.", scope_display(b)),
			 errhint("A scope is one boolean expression over the columns of table \"%s\", with immutable functions and operators only, for example region = 'EU'.",
					 b->target->relname)));
}

/* Subqueries and parameters are refused in the raw tree, at any depth. */
static bool
raw_scope_walker(Node *node, const char **why)
{
	if (node == NULL)
		return false;
	if (IsA(node, SubLink))
	{
		*why = "it holds a subquery";
		return true;
	}
	if (IsA(node, ParamRef))
	{
		*why = "it holds a parameter";
		return true;
	}
	return raw_expression_tree_walker(node, raw_scope_walker, (void *) why);
}

/* Only the target's own columns: no system column, no whole-row reference. */
static bool
scope_vars_walker(Node *node, const char **why)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
	{
		Var		   *v = (Var *) node;

		if (v->varattno <= 0)
		{
			*why = v->varattno == 0 ? "it reads the whole row" : "it reads a system column";
			return true;
		}
		return false;
	}
	return expression_tree_walker(node, scope_vars_walker, (void *) why);
}

/*
 * Prepare sql, which embeds the scope if there is one, with the caller's
 * rights; an error of PostgreSQL's parse analysis then (an unknown column,
 * 42703; an unknown function, 42883) is the scope's and keeps its SQLSTATE.  The statement
 * must be one SELECT that only reads.
 */
static SPIPlanPtr
prepare_with_scope(BatchState *b, const char *sql, int nargs, Oid *types)
{
	MemoryContext cxt = CurrentMemoryContext;
	SPIPlanPtr volatile plan = NULL;
	List	   *sources;
	CachedPlanSource *ps;
	Query	   *q;

	PG_TRY();
	{
		plan = SPI_prepare(sql, nargs, types);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (b->options.snapshot_scope == NULL ||
			(ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_TO_CATEGORY(ERRCODE_SYNTAX_ERROR_OR_ACCESS_RULE_VIOLATION) &&
			 ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_TO_CATEGORY(ERRCODE_DATA_EXCEPTION)))
			PG_RE_THROW();
		FlushErrorState();
		refuse_scope(b, edata->sqlerrcode, edata->message);
	}
	PG_END_TRY();
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for the snapshot of batch %s: %s", b->batch_id,
			 SPI_result_code_string(SPI_result));
	sources = SPI_plan_get_plan_sources(plan);
	ps = list_length(sources) == 1 ? linitial(sources) : NULL;
	q = ps != NULL && list_length(ps->query_list) == 1 ? linitial_node(Query, ps->query_list) : NULL;
	if (q == NULL || ps->commandTag != CMDTAG_SELECT || q->commandType != CMD_SELECT ||
		q->hasModifyingCTE || q->rowMarks != NIL || q->utilityStmt != NULL)
		refuse_scope(b, ERRCODE_SYNTAX_ERROR, "it is not exactly one expression");
	return plan;
}

/*
 * The scope, checked: "SELECT (<scope>\n)" is one SELECT of one expression
 * and nothing else (the text cannot close the parenthesis early, open a
 * FROM or WHERE, start a second statement or comment out what follows);
 * analysed over the target, it is a boolean of the target's columns with
 * immutable functions only.  Returns the text to embed.
 */
static const char *
check_scope(BatchState *b)
{
	const char *scope = b->options.snapshot_scope;
	MemoryContext cxt = CurrentMemoryContext;
	List	   *volatile parsed = NIL;
	SelectStmt *s;
	ResTarget  *rt;
	const char *why = NULL;
	SPIPlanPtr	plan;
	Query	   *q;
	TargetEntry *tle;
	char	   *embedded;

	if (scope == NULL)
		return NULL;
	PG_TRY();
	{
		parsed = raw_parser(psprintf("SELECT (%s\n)", scope), RAW_PARSE_DEFAULT);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		refuse_scope(b, ERRCODE_SYNTAX_ERROR, psprintf("it does not parse: %s", edata->message));
	}
	PG_END_TRY();
	if (list_length(parsed) != 1)
		refuse_scope(b, ERRCODE_SYNTAX_ERROR, "it is not exactly one expression");
	s = (SelectStmt *) ((RawStmt *) linitial(parsed))->stmt;
	if (!IsA(s, SelectStmt) || s->op != SETOP_NONE ||
		list_length(s->targetList) != 1 || s->distinctClause != NIL ||
		s->intoClause != NULL || s->fromClause != NIL || s->whereClause != NULL ||
		s->groupClause != NIL || s->havingClause != NULL || s->windowClause != NIL ||
		s->valuesLists != NIL || s->sortClause != NIL || s->limitOffset != NULL ||
		s->limitCount != NULL || s->lockingClause != NIL || s->withClause != NULL)
		refuse_scope(b, ERRCODE_SYNTAX_ERROR, "it is not exactly one expression");
	rt = linitial_node(ResTarget, s->targetList);
	if (rt->name != NULL || rt->indirection != NIL)
		refuse_scope(b, ERRCODE_SYNTAX_ERROR, "it is not exactly one expression");
	if (raw_scope_walker(rt->val, &why))
		refuse_scope(b, ERRCODE_SYNTAX_ERROR, why);

	embedded = psprintf("(%s\n)", scope);
	plan = prepare_with_scope(b, psprintf("SELECT %s FROM %s AS t", embedded, b->target->qualname),
							  0, NULL);
	q = linitial_node(Query, ((CachedPlanSource *) linitial(SPI_plan_get_plan_sources(plan)))->query_list);
	tle = list_length(q->targetList) == 1 ? linitial_node(TargetEntry, q->targetList) : NULL;
	if (tle == NULL || q->hasSubLinks || q->rtable == NIL || list_length(q->rtable) != 1)
		refuse_scope(b, ERRCODE_SYNTAX_ERROR, "it is not exactly one expression over the target");
	if (q->hasAggs || q->hasWindowFuncs || q->hasTargetSRFs)
		refuse_scope(b, ERRCODE_SYNTAX_ERROR,
					 "it holds an aggregate, a window function or a set-returning function");
	if (scope_vars_walker((Node *) tle->expr, &why))
		refuse_scope(b, ERRCODE_UNDEFINED_COLUMN, why);
	if (exprType((Node *) tle->expr) != BOOLOID)
		refuse_scope(b, ERRCODE_DATATYPE_MISMATCH,
					 psprintf("it is of type %s, not boolean", format_type_be(exprType((Node *) tle->expr))));
	if (contain_mutable_functions((Node *) tle->expr))
		refuse_scope(b, ERRCODE_INVALID_OBJECT_DEFINITION,
					 "it calls a function or operator that is not immutable (its rows could change between two readings)");
	SPI_freeplan(plan);
	return embedded;
}

/* "t.<deleted> = false" and the scope: the scope's live rows. */
static char *
live_condition(TargetInfo *t, const char *scope)
{
	return psprintf("t.%s OPERATOR(pg_catalog.=) false%s%s", quote_identifier(t->deleted.name),
					scope ? " AND " : "", scope ? scope : "");
}

/*
 * Check the snapshot before the batch reads anything: the target's kind,
 * the version in the version column's type, the scope; count the scope's
 * live rows; create the table of the batch's keys.
 */
SnapshotRun *
snapshot_begin(BatchState *b)
{
	TargetInfo *t = b->target;
	SnapshotRun *s = palloc0(sizeof(SnapshotRun));
	char	   *error = NULL;
	SPIPlanPtr	plan;
	StringInfoData sql;
	Oid			relid;
	bool		isnull;

	/* The receipt must be able to say what the snapshot deleted. */
	if (state_version() < STATE_1_2)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("option \"snapshot\" of reconcile_batch needs reconcile's 1.2 schema"),
				 errdetail("The installed schema has no receipt column deleted_absent to count the rows a snapshot deletes."),
				 errhint("Run ALTER EXTENSION reconcile UPDATE, then call reconcile_batch again; nothing was applied.")));
	if (t->citus_kind != CITUS_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("option \"snapshot\" of reconcile_batch is not supported yet for table \"%s\", which Citus manages",
						t->relname),
				 errdetail("A snapshot batch tombstones the target's rows absent from the extract; for Citus tables that is not implemented yet."),
				 errhint("Load the extract without option \"snapshot\", and stage the absent keys as DELETE rows.")));
	if (t->options.delete_remove)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("option \"snapshot\" of reconcile_batch is not supported yet for table \"%s\", registered with delete_mode \"remove\"",
						t->relname),
				 errdetail("A snapshot writes the absent rows as tombstone rows; a target under delete_mode \"remove\" keeps no tombstone rows."),
				 errhint("Load the extract without option \"snapshot\", and stage the absent keys as DELETE rows.")));
	if (t->nextra > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("option \"snapshot\" of reconcile_batch is not supported yet for table \"%s\", which orders by %d version columns",
						t->relname, t->nextra + 1),
				 errdetail("\"snapshot.version\" is one value, of the version column's type; a snapshot version of several columns is not implemented yet."),
				 errhint("Load the extract without option \"snapshot\", and stage the absent keys as DELETE rows.")));
	if (!stage_input_value(&t->version, b->options.snapshot_version, &s->version, &error))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"snapshot.version\" of reconcile_batch must be a value of type %s, the type of version column \"%s\" of table \"%s\"",
						format_type_be(t->version.typid), t->version.name, t->relname),
				 errdetail("It is \"%s\": %s", b->options.snapshot_version, error),
				 errhint("Pass the version the extract was taken at, as the version column holds it.")));
	s->scope = check_scope(b);

	plan = prepare_with_scope(b, psprintf("SELECT pg_catalog.count(*) FROM %s AS t WHERE %s",
										  t->qualname, live_condition(t, s->scope)),
							  0, NULL);
	if (SPI_execute_plan(plan, NULL, NULL, false, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not count the live rows of \"%s\"", t->relname);
	s->live = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	SPI_freeplan(plan);

	/* The batch's keys, in the target's key types, in pg_temp (see apply.c). */
	s->keys_name = temp_relation_name("reconcile_snapshot", b->batch_id, NULL);
	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TEMPORARY TABLE pg_temp.%s (", quote_identifier(s->keys_name));
	for (int i = 0; i < t->nkeys; i++)
		appendStringInfo(&sql, "%sk%d %s", i ? ", " : "", i + 1,
						 format_type_extended(t->keys[i].typid, t->keys[i].typmod,
											  FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY));
	appendStringInfoString(&sql, ") ON COMMIT DROP");
	if (SPI_execute(sql.data, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not create %s", s->keys_name);
	relid = get_relname_relid(s->keys_name, LookupExplicitNamespace("pg_temp", false));
	if (!OidIsValid(relid))
		elog(ERROR, "could not find pg_temp.%s", s->keys_name);
	s->keys_rel = table_open(relid, RowExclusiveLock);
	if (s->keys_rel->rd_rel->relkind != RELKIND_RELATION)
		elog(ERROR, "pg_temp.%s is not a table", s->keys_name);
	s->keys_slot = MakeSingleTupleTableSlot(RelationGetDescr(s->keys_rel), &TTSOpsVirtual);
	s->bistate = GetBulkInsertState();
	return s;
}

/* One key the batch stages (merge.c, for every key it decides). */
void
snapshot_add_key(SnapshotRun *s, Datum *keys)
{
	TupleTableSlot *slot = s->keys_slot;
	int			n = slot->tts_tupleDescriptor->natts;

	ExecClearTuple(slot);
	for (int i = 0; i < n; i++)
	{
		slot->tts_values[i] = keys[i];
		slot->tts_isnull[i] = false;
	}
	ExecStoreVirtualTuple(slot);
	table_tuple_insert(s->keys_rel, slot, GetCurrentCommandId(true), 0, s->bistate);
}

/*
 * A rejected row's key may be one the extract holds, and a row whose key
 * does not even read names none: with rejects the batch cannot tell which
 * keys are absent.
 */
void
snapshot_check_rejects(BatchState *b)
{
	if (!b->options.snapshot || b->totals[DISP_REJECTED] == 0)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_DATA_EXCEPTION),
			 errmsg("snapshot batch %s of table \"%s\" has " INT64_FORMAT " rejected rows",
					b->batch_id, b->target->relname, b->totals[DISP_REJECTED]),
			 errdetail("A rejected row's key may be one the extract holds; a snapshot batch deletes only keys it knows are absent, so it accepts no rejected row."),
			 errhint("Correct the staged rows (reconcile.rejects names them only for batches that commit: load the extract without option \"snapshot\" to see them) and call reconcile_batch again; nothing was applied.")));
}

/*
 * After the merge has written its winners: tombstone the scope's live rows
 * absent from the batch, at the snapshot's version, unless there are more
 * than max_delete_share of the scope's live rows.  Sets b->deleted_absent.
 */
void
snapshot_apply(BatchState *b)
{
	TargetInfo *t = b->target;
	SnapshotRun *s = b->snapshot;
	StringInfoData sql;
	Oid			types[1];
	Datum		args[1];
	SPIPlanPtr	plan;
	Portal		portal;
	ApplyWriter *writer;
	MemoryContext rowcxt;
	Datum	   *keys = palloc(sizeof(Datum) * t->nkeys);
	Datum	   *payload = palloc(sizeof(Datum) * Max(t->npayload, 1));
	bool	   *payload_isnull = palloc(sizeof(bool) * Max(t->npayload, 1));
	int64		absent = 0;
	Sha256Ctx  *sha = reconcile_sha256_begin();

	ExecDropSingleTupleTableSlot(s->keys_slot);
	FreeBulkInsertState(s->bistate);
	table_close(s->keys_rel, NoLock);
	CommandCounterIncrement();

	/*
	 * The absent rows: live, in the scope, lower than the snapshot (by the
	 * version type's own ordering, in the column's collation: ordering.c),
	 * not staged.
	 */
	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	for (int i = 0; i < t->nkeys; i++)
		appendStringInfo(&sql, "%st.%s", i ? ", " : "", quote_identifier(t->keys[i].name));
	for (int i = 0; i < t->npayload; i++)
		appendStringInfo(&sql, ", t.%s", quote_identifier(t->payload[i].name));
	appendStringInfo(&sql, " FROM %s AS t WHERE %s AND t.%s %s $1%s"
					 " AND NOT EXISTS (SELECT FROM pg_temp.%s AS k WHERE ",
					 t->qualname, live_condition(t, s->scope), quote_identifier(t->version.name),
					 operator_sql(t->version_lt_op), ordering_collate_sql(t),
					 quote_identifier(s->keys_name));
	for (int i = 0; i < t->nkeys; i++)
		appendStringInfo(&sql, "%sk.k%d %s t.%s", i ? " AND " : "", i + 1,
						 operator_sql(t->key_eq_ops[i]), quote_identifier(t->keys[i].name));
	appendStringInfoChar(&sql, ')');
	types[0] = t->version.typid;
	args[0] = s->version;
	plan = prepare_with_scope(b, sql.data, 1, types);

	writer = apply_create(t, b->batch_id);
	rowcxt = AllocSetContextCreate(CurrentMemoryContext, "reconcile snapshot row",
								   ALLOCSET_DEFAULT_SIZES);
	portal = SPI_cursor_open(NULL, plan, args, NULL, false);
	for (;;)
	{
		SPI_cursor_fetch(portal, true, 10000);
		if (SPI_processed == 0)
			break;
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	tup = SPI_tuptable->vals[r];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			MemoryContext old;
			uint8		digest[RECONCILE_SHA256_LEN];
			bytea	   *h;
			Winner		w;
			bool		isnull;

			CHECK_FOR_INTERRUPTS();
			old = MemoryContextSwitchTo(rowcxt);
			for (int i = 0; i < t->nkeys; i++)
				keys[i] = SPI_getbinval(tup, desc, i + 1, &isnull);
			for (int i = 0; i < t->npayload; i++)
				payload[i] = SPI_getbinval(tup, desc, t->nkeys + i + 1, &payload_isnull[i]);
			/* The hash of a DELETE of the row's last payload, as a staged DELETE has. */
			payload_hash_compute(t, payload, payload_isnull, true, sha, digest);
			h = palloc(VARHDRSZ + RECONCILE_SHA256_LEN);
			SET_VARSIZE(h, VARHDRSZ + RECONCILE_SHA256_LEN);
			memcpy(VARDATA(h), digest, RECONCILE_SHA256_LEN);
			w.keys = keys;
			w.payload = payload;
			w.payload_isnull = payload_isnull;
			w.version = s->version;
			w.tombstone = true;
			w.hash = PointerGetDatum(h);
			apply_add(writer, &w, ACTION_DELETE);
			batch_checksum_add(b, digest);
			absent++;
			MemoryContextSwitchTo(old);
			MemoryContextReset(rowcxt);
		}
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	SPI_freeplan(plan);
	MemoryContextDelete(rowcxt);
	reconcile_sha256_end(sha);

	/* The guard, exactly: absent > share * live fails. */
	if (absent > 0 &&
		DatumGetBool(DirectFunctionCall2(numeric_gt,
										 NumericGetDatum(int64_to_numeric(absent)),
										 DirectFunctionCall2(numeric_mul,
															 NumericGetDatum(b->options.snapshot_max_delete_share),
															 NumericGetDatum(int64_to_numeric(s->live))))))
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("snapshot batch %s would delete too many rows of table \"%s\"",
						b->batch_id, t->relname),
				 errdetail("It would delete " INT64_FORMAT " of " INT64_FORMAT " live rows (%.1f%%) of scope %s; max_delete_share is %s.",
						   absent, s->live, s->live > 0 ? 100.0 * absent / s->live : 100.0,
						   scope_display(b),
						   DatumGetCString(DirectFunctionCall1(numeric_out,
															   NumericGetDatum(b->options.snapshot_max_delete_share)))),
				 errhint("Check that the extract is complete; if those rows are gone, raise \"max_delete_share\" in option \"snapshot\" of reconcile_batch and call it again; nothing was applied.")));

	/* The general path's tombstone UPDATE: version-checked, row count checked. */
	apply_run(writer);
	if (SPI_execute(psprintf("DROP TABLE pg_temp.%s", quote_identifier(s->keys_name)), false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not drop %s", s->keys_name);
	b->deleted_absent = absent;
}
