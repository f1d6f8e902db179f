/*
 * drop.c
 *		reconcile_forget_dropped(): the sql_drop event trigger that removes
 *		the state of dropped relations.
 *
 * The state tables name relations by regclass, that is by OID.  A row left
 * behind by a dropped table would name whatever relation gets that OID
 * next, in this database or in a restored copy of it, and show that
 * relation's readers the dropped table's raw values.  So a drop takes the
 * state with it: registration, rules, receipts, objects, cursors, rejects,
 * conflicts, resolutions, and the findings of diff runs that read the
 * relation.  The runs themselves stay in the job's history, with the
 * dropped side set to NULL (they then show to the role that ran them only).
 *
 * The trigger fires for every role and every DROP in the database, so it
 * does nothing unless a relation was dropped, and tolerates state tables
 * that are gone (DROP EXTENSION takes them with it).  It runs as the
 * extension's owner (SECURITY DEFINER, search_path pg_catalog, pg_temp);
 * every name it uses is qualified.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/event_trigger.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"


PG_FUNCTION_INFO_V1(reconcile_forget_dropped);

typedef struct ForgetStep
{
	const char *table;			/* skipped when it does not exist */
	const char *sql;			/* $1: the dropped relations, regclass[] */
} ForgetStep;

/* Children before parents: batch_objects and diff_results reference others. */
static const ForgetStep forget_steps[] = {
	{"targets", "DELETE FROM reconcile.targets WHERE target OPERATOR(pg_catalog.=) ANY ($1)"},
	{"target_rules", "DELETE FROM reconcile.target_rules WHERE target OPERATOR(pg_catalog.=) ANY ($1)"},
	{"cursors", "DELETE FROM reconcile.cursors WHERE target OPERATOR(pg_catalog.=) ANY ($1)"},
	{"rejects", "DELETE FROM reconcile.rejects WHERE target OPERATOR(pg_catalog.=) ANY ($1)"},
	{"conflicts", "DELETE FROM reconcile.conflicts WHERE target OPERATOR(pg_catalog.=) ANY ($1)"},
	{"resolutions", "DELETE FROM reconcile.resolutions WHERE target OPERATOR(pg_catalog.=) ANY ($1)"},
	{"batch_objects", "DELETE FROM reconcile.batch_objects WHERE target OPERATOR(pg_catalog.=) ANY ($1)"},
	{"receipts", "DELETE FROM reconcile.receipts WHERE target OPERATOR(pg_catalog.=) ANY ($1)"},
	{"diff_results", "DELETE FROM reconcile.diff_results WHERE run_id OPERATOR(pg_catalog.=) ANY"
	 " (SELECT run_id FROM reconcile.diff_runs WHERE source OPERATOR(pg_catalog.=) ANY ($1)"
	 " OR target OPERATOR(pg_catalog.=) ANY ($1))"},
	{"diff_runs", "UPDATE reconcile.diff_runs SET"
	 " source = CASE WHEN source OPERATOR(pg_catalog.=) ANY ($1) THEN NULL ELSE source END,"
	 " target = CASE WHEN target OPERATOR(pg_catalog.=) ANY ($1) THEN NULL ELSE target END"
	 " WHERE source OPERATOR(pg_catalog.=) ANY ($1) OR target OPERATOR(pg_catalog.=) ANY ($1)"},
	/* 1.2: check history; runs stay, as diff runs do, without the relation */
	{"check_results", "DELETE FROM reconcile.check_results WHERE relation OPERATOR(pg_catalog.=) ANY ($1)"},
	{"check_runs", "UPDATE reconcile.check_runs SET relation = NULL"
	 " WHERE relation OPERATOR(pg_catalog.=) ANY ($1)"},
};

/*
 * The statements are planned once per session and kept: a DROP of anything
 * runs them, and planning them each time would cost more than running
 * them.  The plan cache replans them if the state tables change.
 */
static SPIPlanPtr dropped_plan = NULL;
static SPIPlanPtr forget_plans[lengthof(forget_steps)];

static SPIPlanPtr
keep_plan(const char *sql, int nargs, Oid *argtypes)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, argtypes);

	if (plan == NULL)
		elog(ERROR, "could not prepare \"%s\": %s", sql, SPI_result_code_string(SPI_result));
	if (SPI_keepplan(plan) != 0)
		elog(ERROR, "could not keep the plan of \"%s\"", sql);
	return plan;
}

/*
 * 1.2, delete_mode 'remove': a target's kept removals (loader/removed.c)
 * depend on it and are dropped with it, but pg_dump keeps no such
 * dependency: in a restored database they are dropped here, found through
 * reconcile.targets.removed_table before its rows go.
 */
static void
forget_kept_removals(Datum dropped, Oid nsp)
{
	Oid			targets = get_relname_relid("targets", nsp);
	Oid			argtype = REGCLASSARRAYOID;
	List	   *tables = NIL;
	ListCell   *lc;

	if (!OidIsValid(targets) || get_attnum(targets, "removed_table") == InvalidAttrNumber)
		return;
	if (SPI_execute_with_args("SELECT removed_table::pg_catalog.oid FROM reconcile.targets"
							  " WHERE target OPERATOR(pg_catalog.=) ANY ($1) AND removed_table IS NOT NULL",
							  1, &argtype, &dropped, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read reconcile.targets");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;

		tables = lappend_oid(tables, DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[i],
																	 SPI_tuptable->tupdesc, 1, &isnull)));
	}
	foreach(lc, tables)
	{
		char	   *name = get_rel_name(lfirst_oid(lc));

		if (name == NULL)
			continue;			/* gone with the target, through its dependency */
		if (SPI_execute(psprintf("DROP TABLE %s",
								 quote_qualified_identifier(get_namespace_name(get_rel_namespace(lfirst_oid(lc))), name)),
						false, 0) != SPI_OK_UTILITY)
			elog(ERROR, "could not drop the kept removals of a dropped target");
	}
}

/*
 * reconcile.forget_dropped() RETURNS event_trigger
 *		On sql_drop, deletes the extension's state rows of the tables dropped.
 */
Datum
reconcile_forget_dropped(PG_FUNCTION_ARGS)
{
	Oid			nsp;
	Datum		dropped;
	bool		isnull;
	Oid			argtype = REGCLASSARRAYOID;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("reconcile_forget_dropped() must be called as an event trigger")));

	/* DROP EXTENSION reconcile: nothing left to clean. */
	nsp = get_namespace_oid("reconcile", true);
	if (!OidIsValid(nsp))
		PG_RETURN_VOID();

	SPI_connect();
	if (dropped_plan == NULL)
		dropped_plan = keep_plan("SELECT pg_catalog.array_agg(objid::pg_catalog.regclass)"
								 " FROM pg_catalog.pg_event_trigger_dropped_objects()"
								 " WHERE classid OPERATOR(pg_catalog.=) 'pg_catalog.pg_class'::pg_catalog.regclass"
								 " AND objsubid OPERATOR(pg_catalog.=) 0",
								 0, NULL);
	if (SPI_execute_plan(dropped_plan, NULL, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the dropped objects");
	dropped = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull)
	{
		forget_kept_removals(dropped, nsp);
		for (int i = 0; i < lengthof(forget_steps); i++)
		{
			if (!OidIsValid(get_relname_relid(forget_steps[i].table, nsp)))
				continue;
			if (forget_plans[i] == NULL)
				forget_plans[i] = keep_plan(forget_steps[i].sql, 1, &argtype);
			if (SPI_execute_plan(forget_plans[i], &dropped, NULL, false, 0) < 0)
				elog(ERROR, "could not forget the state of dropped relations: %s",
					 forget_steps[i].sql);
		}
	}
	SPI_finish();
	PG_RETURN_VOID();
}
