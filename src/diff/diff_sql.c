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
	SPI_finish();
	return (Datum) 0;
}


/*
 * reconcile_diff_summary(source regclass, target regclass, key_columns text[],
 *                        options jsonb DEFAULT '{}')
 *		The same comparison as reconcile_diff; returns one row of counts
 *		(rows on each side, matched, missing, extra, mismatched, duplicate
 *		and NULL keys, per-column counts as jsonb).
 */
Datum
reconcile_diff_summary(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	DiffSpec   *spec;
	DiffCounts	counts;
	Datum		values[DIFF_SUMMARY_NATTS];
	bool		nulls[DIFF_SUMMARY_NATTS] = {0};
	HeapTuple	tup;
	MemoryContext caller = CurrentMemoryContext;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	SPI_connect();
	spec = prepare_from_args(fcinfo, "reconcile_diff_summary");
	diff_compare(spec, NULL, NULL, &counts);
	MemoryContextSwitchTo(caller);
	diff_summary_values(spec, &counts, values);
	tup = heap_form_tuple(BlessTupleDesc(desc), values, nulls);
	SPI_finish();
	return HeapTupleGetDatum(tup);
}
