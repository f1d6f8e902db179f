/*
 * diff_sql.c
 *		The SQL-callable diff functions, reconcile_diff and
 *		reconcile_diff_summary: prepare the diff from the arguments, run it
 *		(diff.c decides between checksums and reading every row) and
 *		return its findings or its counts.
 */
#include "postgres.h"

#include "executor/spi.h"
#include "funcapi.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"

#include "common/args.h"
#include "diff.h"

PG_FUNCTION_INFO_V1(reconcile_diff);
PG_FUNCTION_INFO_V1(reconcile_diff_summary);

static DiffSpec *
prepare_from_args(FunctionCallInfo fcinfo, const char *funcname)
{
	static const char *const names[] = {"source", "target", "key_columns"};

	for (int i = 0; i < lengthof(names); i++)
		check_arg_not_null(fcinfo, i, names[i], funcname);
	return diff_prepare(PG_GETARG_OID(0), PG_GETARG_OID(1),
						PG_GETARG_ARRAYTYPE_P(2),
						PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3));
}

/*
 * A diff that a limit stopped says so: findings are rows, and a stop is
 * not an error, so a NOTICE names the limit and the first key not
 * compared (reconcile_diff_summary returns both as columns).
 */
static void
report_stop(DiffCounts *counts)
{
	if (counts->stopped == NULL)
		return;
	ereport(NOTICE,
			(errmsg("diff stopped by option \"%s\" after %lld findings",
					counts->stopped, (long long) diff_findings_total(counts)),
			 counts->stopped_at_key
			 ? errdetail("Keys from %s on were not compared.",
						 JsonbToCString(NULL, &counts->stopped_at_key->root,
										VARSIZE(counts->stopped_at_key)))
			 : errdetail("Every key was compared; the rechecks were cut short."),
			 errhint("Raise the limit, or narrow the diff with \"window\" or \"lookback\".")));
}

/*
 * reconcile_diff(source regclass, target regclass, key_columns text[],
 *                options jsonb DEFAULT '{}')
 *		Compares two relations by key; returns one row per finding
 *		(issue, key, columns, source_values, target_values).
 */
Datum
reconcile_diff(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DiffSpec   *spec;
	DiffCounts	counts;

	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	spec = prepare_from_args(fcinfo, "reconcile_diff");
	diff_compare(spec, rsinfo->setResult, rsinfo->setDesc, &counts);
	report_stop(&counts);
	SPI_finish();
	return (Datum) 0;
}


/*
 * reconcile_diff_summary(source regclass, target regclass, key_columns text[],
 *                        options jsonb DEFAULT '{}')
 *		The same comparison as reconcile_diff; returns one row of counts
 *		(rows on each side, matched, missing, extra, mismatched, duplicate
 *		and NULL keys, per-column counts as jsonb; in 1.2 also the keys not
 *		compared for min_age, whether and where a limit stopped it, and
 *		the rechecks done).
 */
Datum
reconcile_diff_summary(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	DiffSpec   *spec;
	DiffCounts	counts;
	Datum		values[DIFF_SUMMARY_NATTS_1_2];
	bool		nulls[DIFF_SUMMARY_NATTS_1_2] = {0};
	HeapTuple	tup;
	MemoryContext caller = CurrentMemoryContext;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	SPI_connect();
	spec = prepare_from_args(fcinfo, "reconcile_diff_summary");
	diff_compare(spec, NULL, NULL, &counts);
	MemoryContextSwitchTo(caller);
	diff_summary_values(spec, &counts, values);
	/* Schema 1.2's columns, where the installed function has them. */
	if (desc->natts >= DIFF_SUMMARY_NATTS_1_2)
		diff_summary_values_1_2(&counts, &values[DIFF_SUMMARY_NATTS],
								&nulls[DIFF_SUMMARY_NATTS]);
	tup = heap_form_tuple(BlessTupleDesc(desc), values, nulls);
	SPI_finish();
	return HeapTupleGetDatum(tup);
}
