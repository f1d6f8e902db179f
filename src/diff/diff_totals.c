/*
 * diff_totals.c
 *		reconcile_diff_totals: control totals per group (row counts, and
 *		count, sum, min, max of named columns) of two relations, compared
 *		group by group with per-measure tolerances; optionally the row diff
 *		of the groups that differ (option "then_rows").
 *
 * Each side is aggregated by one statement on its own server: the
 * statement is a UNION ALL of one GROUP BY per side, which postgres_fdw
 * pushes down to the foreign server as an aggregate query (and Citus to
 * its workers), so only one row per group crosses the connection.  The
 * outer GROUP BY pairs the groups of both sides; GROUP BY puts NULLs
 * together, so a NULL group value is a group of its own on both sides.
 *
 * The group and measured columns are resolved by diff_prepare as a diff's
 * key and compared columns, so names, "column_map", the window options and
 * privileges mean what they mean for reconcile_diff.
 */
#include "postgres.h"

#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "parser/parse_coerce.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/typcache.h"

#include "common/args.h"
#include "common/jsonbuild.h"
#include "common/jsonread.h"
#include "common/pinned.h"
#include "common/sqlname.h"
#include "diff.h"

PG_FUNCTION_INFO_V1(reconcile_diff_totals);

/* Columns of reconcile_diff_totals' result. */
#define TOTALS_NATTS 6

/* At most this many group columns (then_rows binds one parameter each). */
#define TOTALS_MAX_GROUP_COLUMNS 32

typedef enum TotalsAgg
{
	AGG_COUNT,
	AGG_SUM,
	AGG_MIN,
	AGG_MAX
} TotalsAgg;

static const char *const agg_names[] = {"count", "sum", "min", "max"};

typedef struct TotalsMeasure
{
	char	   *label;			/* "count(*)", "sum(amount)": names it in the results */
	TotalsAgg	agg;
	int			col;			/* index into spec->cols; -1 for "*" */
	bool		as_numeric;		/* read as numeric (count, sum, numeric min/max) */
	Oid			typid;			/* as read */
	Oid			collation;
	FmgrInfo	out;
	bool		has_eq;
	FmgrInfo	eq;
	bool		has_tol;
	Datum		tol;			/* absolute, numeric */
	bool		has_rel;
	Datum		rel;			/* relative, numeric */
} TotalsMeasure;

typedef struct TotalsSpec
{
	DiffSpec   *spec;			/* keys: the group columns; cols: the measured ones */
	int			nmeasures;
	TotalsMeasure *measures;
	bool		include_matches;
	bool		names_objects;	/* a group or measured type's text names objects */
	bool		then_rows;
	ArrayType  *row_keys;		/* option "key_columns" of then_rows */
	Jsonb	   *row_options;	/* the row diff's options */
} TotalsSpec;

/* Options of reconcile_diff_totals; the first ones pass on to diff_prepare. */
static const char *const totals_passed[] = {
	"column_map", "updated_column", "window", "lookback", "cutoff", "time_zone",
	"trim_keys"
};
static const char *const totals_own[] = {
	"tolerance", "relative_tolerance", "include_matches", "then_rows", "key_columns",
	"row_options"
};

#define TOTALS_VALID_OPTIONS "column_map, updated_column, window, lookback, cutoff, time_zone, trim_keys, tolerance, relative_tolerance, include_matches, then_rows, key_columns, row_options"

static bool
name_in(const char *name, const char *const *list, int n)
{
	for (int i = 0; i < n; i++)
		if (strcmp(name, list[i]) == 0)
			return true;
	return false;
}

/* ---------------------------------------------------------------------
 * Reading the arguments
 * ---------------------------------------------------------------------
 */

typedef struct MeasureDraft
{
	char	   *column;			/* NULL for "*" */
	TotalsAgg	agg;
} MeasureDraft;

/* The measures argument: {"column": ["sum", "max"], "*": ["count"]}. */
static MeasureDraft *
read_measures(Jsonb *measures, int *n)
{
	JsonbIterator *it;
	JsonbValue	v;
	char	   *column = NULL;
	MeasureDraft *out;
	int			cap = 8;

	*n = 0;
	out = palloc(sizeof(MeasureDraft) * cap);
	if (measures == NULL)
		return out;
	if (!JB_ROOT_IS_OBJECT(measures))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("measures must be a JSON object from column names to arrays of aggregates"),
				 errhint("Pass for example '{\"amount\": [\"sum\", \"max\"], \"*\": [\"count\"]}', or '{}' for row counts only.")));
	it = JsonbIteratorInit(&measures->root);
	while (jsonb_object_next(&it, &column, &v))
	{
		JsonbIterator *ait;
		JsonbValue	e;
		JsonbIteratorToken r;

		if (!jbv_is_array(&v))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("measures of column \"%s\" must be a JSON array of aggregates", column),
					 errhint("Use some of \"count\", \"sum\", \"min\", \"max\", as in {\"%s\": [\"sum\"]}.", column)));
		ait = JsonbIteratorInit(v.val.binary.data);
		while ((r = JsonbIteratorNext(&ait, &e, true)) != WJB_DONE)
		{
			char	   *agg;
			int			a = -1;

			if (r != WJB_ELEM)
				continue;
			if (e.type != jbvString)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("measures of column \"%s\" must be a JSON array of aggregates", column),
						 errhint("Use some of \"count\", \"sum\", \"min\", \"max\".")));
			agg = pnstrdup(e.val.string.val, e.val.string.len);
			for (int i = 0; i < lengthof(agg_names); i++)
				if (strcmp(agg, agg_names[i]) == 0)
					a = i;
			if (a < 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("unknown measure \"%s\" of column \"%s\"", agg, column),
						 errhint("The measures are \"count\", \"sum\", \"min\" and \"max\".")));
			if (strcmp(column, "*") == 0 && a != AGG_COUNT)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("measure \"%s\" cannot apply to \"*\"", agg),
						 errhint("\"*\" takes \"count\" only (the row count, always measured); name a column for \"%s\".", agg)));
			if (strcmp(column, "*") == 0)
				continue;		/* count(*) is always measured */
			if (*n == cap)
			{
				cap *= 2;
				out = repalloc(out, sizeof(MeasureDraft) * cap);
			}
			out[*n].column = column;
			out[*n].agg = (TotalsAgg) a;
			(*n)++;
		}
	}
	return out;
}

/*
 * Split the options: those of the diff (passed on to diff_prepare with
 * "compare" set to the measured columns) and the totals' own.
 */
static Jsonb *
split_options(Jsonb *options, MeasureDraft *md, int nmd, JsonbValue **own, Jsonb **inherited)
{
	JsonbParseState *st = NULL;		/* the diff's options */
	JsonbParseState *ist = NULL;	/* what the row diff of then_rows inherits */
	JsonbIterator *it;
	JsonbValue	v;
	JsonbValue *res;
	char	   *name;

	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	pushJsonbValue(&ist, WJB_BEGIN_OBJECT, NULL);
	if (options != NULL)
	{
		if (!JB_ROOT_IS_OBJECT(options))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("options must be a JSON object"),
					 errhint("Pass for example '{\"tolerance\": {\"sum(amount)\": 0.01}}', or '{}' for none.")));
		it = JsonbIteratorInit(&options->root);
		while (jsonb_object_next(&it, &name, &v))
		{
			if (name_in(name, totals_passed, lengthof(totals_passed)))
			{
				/* The same names and window for the totals and the row diff. */
				jsonb_push_key(&st, name);
				pushJsonbValue(&st, WJB_VALUE, &v);
				jsonb_push_key(&ist, name);
				pushJsonbValue(&ist, WJB_VALUE, &v);
			}
			else if (name_in(name, totals_own, lengthof(totals_own)))
			{
				for (int i = 0; i < lengthof(totals_own); i++)
					if (strcmp(name, totals_own[i]) == 0)
					{
						own[i] = palloc(sizeof(JsonbValue));
						*own[i] = v;
					}
			}
			else
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("unknown option \"%s\" of reconcile_diff_totals", name),
						 errdetail("Valid options are: %s.", TOTALS_VALID_OPTIONS)));
		}
	}
	*inherited = JsonbValueToJsonb(pushJsonbValue(&ist, WJB_END_OBJECT, NULL));
	/* The measured columns, each once, are the diff's compared columns. */
	jsonb_push_key(&st, "compare");
	pushJsonbValue(&st, WJB_BEGIN_ARRAY, NULL);
	for (int i = 0; i < nmd; i++)
	{
		bool		seen = false;

		for (int j = 0; j < i; j++)
			seen |= strcmp(md[i].column, md[j].column) == 0;
		if (!seen)
			jsonb_push_string(&st, WJB_ELEM, md[i].column);
	}
	pushJsonbValue(&st, WJB_END_ARRAY, NULL);
	res = pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	return JsonbValueToJsonb(res);
}

static void
totals_prepare_context(void *arg)
{
	errcontext("reconcile_diff_totals resolves group_by as the diff's key_columns and the measured columns as its compared columns");
}

static void
set_measure_type(TotalsMeasure *m, DiffColumn *c)
{
	Oid			outfunc;
	bool		varlena;

	m->as_numeric = m->agg == AGG_COUNT || m->agg == AGG_SUM ||
		(c != NULL && diff_is_numeric_type(c->basetype));
	m->typid = m->as_numeric ? NUMERICOID : c->typid;
	m->collation = m->as_numeric ? InvalidOid : c->collation;
	getTypeOutputInfo(m->typid, &outfunc, &varlena);
	fmgr_info(outfunc, &m->out);
	{
		TypeCacheEntry *tce = lookup_type_cache(getBaseType(m->typid), TYPECACHE_EQ_OPR_FINFO);

		m->has_eq = OidIsValid(tce->eq_opr_finfo.fn_oid);
		if (m->has_eq)
			fmgr_info_copy(&m->eq, &tce->eq_opr_finfo, CurrentMemoryContext);
	}
}

/* The measures, checked against the columns' types. */
static void
resolve_measures(TotalsSpec *ts, MeasureDraft *md, int nmd)
{
	DiffSpec   *spec = ts->spec;

	ts->measures = palloc0(sizeof(TotalsMeasure) * (nmd + 1));
	ts->measures[0].label = "count(*)";
	ts->measures[0].agg = AGG_COUNT;
	ts->measures[0].col = -1;
	set_measure_type(&ts->measures[0], NULL);
	ts->nmeasures = 1;
	for (int i = 0; i < nmd; i++)
	{
		TotalsMeasure *m = &ts->measures[ts->nmeasures];
		DiffColumn *c = NULL;
		int			ci = -1;

		/* diff_prepare resolved each name; they are in the order given. */
		for (int j = 0, k = 0; j < i + 1 && k < spec->ncols; j++)
		{
			bool		seen = false;

			for (int p = 0; p < j; p++)
				seen |= strcmp(md[j].column, md[p].column) == 0;
			if (seen)
				continue;
			if (strcmp(md[j].column, md[i].column) == 0)
			{
				ci = k;
				break;
			}
			k++;
		}
		Assert(ci >= 0);
		c = &spec->cols[ci];
		if (md[i].agg == AGG_SUM && !diff_is_numeric_type(c->basetype))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("cannot sum column \"%s\" of type %s", c->name, format_type_be(c->typid)),
					 errdetail("\"sum\" applies to numeric columns (smallint to numeric, real, double precision)."),
					 errhint("Measure \"count\", \"min\" or \"max\" of it instead.")));
		if ((md[i].agg == AGG_MIN || md[i].agg == AGG_MAX) &&
			!OidIsValid(lookup_type_cache(c->basetype, TYPECACHE_LT_OPR)->lt_opr))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("column \"%s\" of type %s has no \"%s\"", c->name,
							format_type_be(c->typid), agg_names[md[i].agg]),
					 errdetail("\"min\" and \"max\" need a type with a default btree ordering."),
					 errhint("Measure \"count\" of it instead.")));
		m->label = psprintf("%s(%s)", agg_names[md[i].agg], c->name);
		for (int j = 1; j < ts->nmeasures; j++)
			if (strcmp(ts->measures[j].label, m->label) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("measure %s is named more than once", m->label)));
		m->agg = md[i].agg;
		m->col = ci;
		set_measure_type(m, c);
		ts->nmeasures++;
	}
}

/*
 * Options "tolerance" and "relative_tolerance": per measure ("sum(amount)")
 * or per column ("amount": every numeric measure of it, "*": the row count).
 */
static void
set_measure_tolerances(TotalsSpec *ts, JsonbValue *v, bool relative)
{
	const char *option = relative ? "relative_tolerance" : "tolerance";
	JsonbIterator *it;
	JsonbValue	jv;
	char	   *name = NULL;

	if (v == NULL)
		return;
	if (!jbv_is_object(v))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"%s\" must be a JSON object from measures to numbers", option),
				 errhint("Pass for example {\"%s\": {\"sum(amount)\": 0.01}}.", option)));
	it = JsonbIteratorInit(v->val.binary.data);
	while (jsonb_object_next(&it, &name, &jv))
	{
		int			hits = 0;

		if (!diff_jbv_is_nonnegative(&jv))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s of measure \"%s\" must be a non-negative number", option, name),
					 relative ? errdetail("It is a fraction of the larger absolute value: 0.001 lets the totals differ by 0.1%%.")
					 : errdetail("It is the largest absolute difference that still counts as equal.")));
		for (int i = 0; i < ts->nmeasures; i++)
		{
			TotalsMeasure *m = &ts->measures[i];
			const char *col = m->col < 0 ? "*" : ts->spec->cols[m->col].name;
			bool		named = strcmp(m->label, name) == 0;

			if (!named && strcmp(col, name) != 0)
				continue;
			if (!m->as_numeric)
			{
				if (!named)
					continue;
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("measure %s of type %s cannot have a %s", m->label,
								format_type_be(m->typid), option),
						 errhint("A tolerance applies to counts, sums and the min or max of numeric columns.")));
			}
			hits++;
			if (relative)
			{
				m->has_rel = true;
				m->rel = datumCopy(NumericGetDatum(jv.val.numeric), false, -1);
			}
			else
			{
				m->has_tol = true;
				m->tol = datumCopy(NumericGetDatum(jv.val.numeric), false, -1);
			}
		}
		if (hits == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s names \"%s\", which is not a numeric measure", option, name),
					 errhint("Name a measure as the results do (\"count(*)\", \"sum(amount)\"), or a measured column for all its numeric measures.")));
	}
}

static bool
opt_bool(JsonbValue *v, const char *option)
{
	if (v == NULL)
		return false;
	if (v->type != jbvBool)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"%s\" must be true or false", option)));
	return v->val.boolean;
}

/* Options "then_rows", "key_columns" and "row_options". */
static void
set_then_rows(TotalsSpec *ts, JsonbValue **own)
{
	ts->then_rows = opt_bool(own[3], "then_rows");
	if (!ts->then_rows)
	{
		if (own[4] || own[5])
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("options \"key_columns\" and \"row_options\" need option \"then_rows\"")));
		return;
	}
	if (own[4] == NULL || !jbv_is_array(own[4]))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"then_rows\" needs option \"key_columns\", a JSON array of column names"),
				 errdetail("The row diff of the groups that differ pairs rows up by key."),
				 errhint("Pass for example {\"then_rows\": true, \"key_columns\": [\"id\"]}.")));
	{
		JsonbIterator *it = JsonbIteratorInit(own[4]->val.binary.data);
		JsonbValue	jv;
		JsonbIteratorToken r;
		ArrayBuildState *abs = initArrayResult(TEXTOID, CurrentMemoryContext, false);

		while ((r = JsonbIteratorNext(&it, &jv, true)) != WJB_DONE)
		{
			if (r != WJB_ELEM)
				continue;
			if (jv.type != jbvString)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("option \"key_columns\" must be a JSON array of column names")));
			accumArrayResult(abs, PointerGetDatum(cstring_to_text_with_len(jv.val.string.val, jv.val.string.len)),
							 false, TEXTOID, CurrentMemoryContext);
		}
		ts->row_keys = DatumGetArrayTypeP(makeArrayResult(abs, CurrentMemoryContext));
	}
	if (own[5])
	{
		if (!jbv_is_object(own[5]))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"row_options\" must be a JSON object of reconcile_diff's options")));
		ts->row_options = JsonbValueToJsonb(own[5]);
	}
}

static TotalsSpec *
totals_prepare(Oid source, Oid target, ArrayType *group_by, Jsonb *measures, Jsonb *options)
{
	TotalsSpec *ts = palloc0(sizeof(TotalsSpec));
	JsonbValue *own[lengthof(totals_own)] = {0};
	MeasureDraft *md;
	int			nmd;
	Jsonb	   *diff_options;
	Jsonb	   *inherited;
	ErrorContextCallback cb;

	md = read_measures(measures, &nmd);
	diff_options = split_options(options, md, nmd, own, &inherited);
	if (ArrayGetNItems(ARR_NDIM(group_by), ARR_DIMS(group_by)) > TOTALS_MAX_GROUP_COLUMNS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("group_by names more than %d columns", TOTALS_MAX_GROUP_COLUMNS)));
	if (ArrayGetNItems(ARR_NDIM(group_by), ARR_DIMS(group_by)) == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("group_by must name at least one column"),
				 errhint("For the totals of whole tables, group by a column that has one value, or compare with reconcile_diff_summary.")));

	{
		Datum	   *elems;
		bool	   *nulls;
		int			ng;

		deconstruct_array(group_by, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &ng);
		for (int i = 0; i < ng; i++)
			for (int j = 0; j < nmd; j++)
				if (!nulls[i] && strcmp(TextDatumGetCString(elems[i]), md[j].column) == 0)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("group column \"%s\" cannot be measured", md[j].column),
							 errdetail("Each group has one value of it."),
							 errhint("Leave it out of measures; the row count is always measured.")));
	}
	cb.callback = totals_prepare_context;
	cb.arg = NULL;
	cb.previous = error_context_stack;
	error_context_stack = &cb;
	ts->spec = diff_prepare(source, target, group_by, diff_options);
	error_context_stack = cb.previous;

	resolve_measures(ts, md, nmd);
	for (int i = 0; i < ts->spec->nkeys; i++)
		ts->names_objects |= type_names_objects(ts->spec->keys[i].basetype);
	for (int i = 0; i < ts->nmeasures; i++)
		ts->names_objects |= type_names_objects(getBaseType(ts->measures[i].typid));
	set_measure_tolerances(ts, own[0], false);
	set_measure_tolerances(ts, own[1], true);
	ts->include_matches = opt_bool(own[2], "include_matches");
	set_then_rows(ts, own);
	/* row_options over what the totals' options say for the row diff too */
	if (ts->then_rows)
		ts->row_options = ts->row_options == NULL ? inherited :
			DatumGetJsonbP(DirectFunctionCall2(jsonb_concat, JsonbPGetDatum(inherited),
											   JsonbPGetDatum(ts->row_options)));
	return ts;
}

/* ---------------------------------------------------------------------
 * The statement
 * ---------------------------------------------------------------------
 */

static void
append_side(StringInfo sql, TotalsSpec *ts, bool is_source, Datum cutoff, bool has_cutoff,
			Oid *types, Datum *values, int *nparams)
{
	DiffSpec   *spec = ts->spec;

	appendStringInfo(sql, "SELECT %s AS side", is_source ? "true" : "false");
	for (int i = 0; i < spec->nkeys; i++)
	{
		DiffColumn *c = &spec->keys[i];
		Oid			own = is_source ? c->scollation : c->tcollation;

		appendStringInfo(sql, ", %s", is_source ? c->sexpr : c->texpr);
		/* Both sides group in the source's collation, as the diff orders keys. */
		if (OidIsValid(c->collation) && own != c->collation)
			appendStringInfo(sql, " COLLATE %s", collation_quoted_name(c->collation));
		appendStringInfo(sql, " AS g%d", i + 1);
	}
	for (int i = 0; i < ts->nmeasures; i++)
	{
		TotalsMeasure *m = &ts->measures[i];
		char	   *arg = "*";

		if (m->col >= 0)
		{
			DiffColumn *c = &spec->cols[m->col];
			Oid			own = is_source ? c->scollation : c->tcollation;

			arg = is_source ? c->sexpr : c->texpr;
			if (m->agg != AGG_COUNT && OidIsValid(c->collation) && own != c->collation)
				arg = psprintf("%s COLLATE %s", arg, collation_quoted_name(c->collation));
		}
		if (m->as_numeric)
			appendStringInfo(sql, ", CAST(pg_catalog.%s(%s) AS pg_catalog.numeric) AS m%d",
							 agg_names[m->agg], arg, i + 1);
		else
			appendStringInfo(sql, ", pg_catalog.%s(%s) AS m%d", agg_names[m->agg], arg, i + 1);
	}
	appendStringInfo(sql, " FROM %s", is_source ? spec->squal : spec->tqual);
	diff_append_where(sql, spec, !is_source, cutoff, has_cutoff, types, values, nparams);
	appendStringInfoString(sql, " GROUP BY ");
	for (int i = 0; i < spec->nkeys; i++)
		appendStringInfo(sql, "%s%d", i ? ", " : "", i + 2);
}

/*
 * One statement: per side its groups and measures, then per group whether
 * each side has it and each side's measures.  A side has at most one row
 * per group, so (array_agg(x) FILTER (WHERE side))[1] is that side's
 * value whatever its type.
 */
static char *
totals_sql(TotalsSpec *ts, Datum cutoff, bool has_cutoff, Oid *types, Datum *values, int *nparams)
{
	DiffSpec   *spec = ts->spec;
	StringInfoData sql;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	for (int i = 0; i < spec->nkeys; i++)
		appendStringInfo(&sql, "u.g%d, ", i + 1);
	appendStringInfoString(&sql, "pg_catalog.bool_or(u.side), pg_catalog.bool_or(NOT u.side)");
	for (int i = 0; i < ts->nmeasures; i++)
		appendStringInfo(&sql, ", (pg_catalog.array_agg(u.m%d) FILTER (WHERE u.side))[1]"
						 ", (pg_catalog.array_agg(u.m%d) FILTER (WHERE NOT u.side))[1]",
						 i + 1, i + 1);
	appendStringInfoString(&sql, " FROM (");
	append_side(&sql, ts, true, cutoff, has_cutoff, types, values, nparams);
	appendStringInfoString(&sql, " UNION ALL ");
	append_side(&sql, ts, false, cutoff, has_cutoff, types, values, nparams);
	appendStringInfoString(&sql, ") u GROUP BY ");
	for (int i = 0; i < spec->nkeys; i++)
		appendStringInfo(&sql, "%su.g%d", i ? ", " : "", i + 1);
	appendStringInfoString(&sql, " ORDER BY ");
	for (int i = 0; i < spec->nkeys; i++)
		appendStringInfo(&sql, "%su.g%d", i ? ", " : "", i + 1);
	return sql.data;
}

/* ---------------------------------------------------------------------
 * Comparing and reporting
 * ---------------------------------------------------------------------
 */

static bool
measure_equal(TotalsMeasure *m, Datum a, bool an, Datum b, bool bn)
{
	if (an || bn)
		return an && bn;
	if (m->has_eq)
	{
		if (DatumGetBool(FunctionCall2Coll(&m->eq, m->collation, a, b)))
			return true;
	}
	else if (strcmp(OutputFunctionCall(&m->out, a), OutputFunctionCall(&m->out, b)) == 0)
		return true;
	if (!m->as_numeric || !(m->has_tol || m->has_rel))
		return false;
	return diff_numeric_within(a, b, m->has_tol, m->tol, m->has_rel, m->rel);
}

/* A side's measures as an object, {"count(*)": 3, "sum(amount)": 10.5}. */
static Jsonb *
measures_jsonb(TotalsSpec *ts, HeapTuple tup, TupleDesc desc, int first)
{
	JsonbParseState *st = NULL;
	JsonbValue *res;

	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	for (int i = 0; i < ts->nmeasures; i++)
	{
		TotalsMeasure *m = &ts->measures[i];
		bool		isnull;
		Datum		d = SPI_getbinval(tup, desc, first + 2 * i, &isnull);

		jsonb_push_key(&st, m->label);
		jsonb_push_datum(&st, WJB_VALUE, d, isnull, getBaseType(m->typid), &m->out,
						 JSONB_DATUM_ISO_DATETIME | JSONB_DATUM_EMBED_JSON);
	}
	res = pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	return JsonbValueToJsonb(res);
}

static Jsonb *
group_jsonb(DiffSpec *spec, HeapTuple tup, TupleDesc desc)
{
	JsonbParseState *st = NULL;
	JsonbValue *res;

	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	for (int i = 0; i < spec->nkeys; i++)
	{
		DiffColumn *c = &spec->keys[i];
		bool		isnull;
		Datum		d = SPI_getbinval(tup, desc, i + 1, &isnull);

		jsonb_push_key(&st, c->name);
		jsonb_push_datum(&st, WJB_VALUE, d, isnull, c->basetype, &c->out,
						 JSONB_DATUM_ISO_DATETIME | JSONB_DATUM_EMBED_JSON);
	}
	res = pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	return JsonbValueToJsonb(res);
}

/* A differing group, kept for then_rows: its values, copied. */
typedef struct TotalsGroup
{
	Datum	   *values;
	bool	   *nulls;
	Jsonb	   *group;
} TotalsGroup;

static void
emit_total(Tuplestorestate *out, TupleDesc desc, const char *issue, Jsonb *group,
		   Jsonb *key, Datum columns, Jsonb *sv, Jsonb *tv)
{
	Datum		values[TOTALS_NATTS];
	bool		nulls[TOTALS_NATTS] = {0};

	values[0] = CStringGetTextDatum(issue);
	values[1] = JsonbPGetDatum(group);
	values[2] = key ? JsonbPGetDatum(key) : (Datum) 0;
	nulls[2] = key == NULL;
	values[3] = columns;
	nulls[3] = columns == (Datum) 0;
	values[4] = sv ? JsonbPGetDatum(sv) : (Datum) 0;
	nulls[4] = sv == NULL;
	values[5] = tv ? JsonbPGetDatum(tv) : (Datum) 0;
	nulls[5] = tv == NULL;
	tuplestore_putvalues(out, desc, values, nulls);
}

/* One group of the statement's result: compared, reported. */
static bool
compare_group(TotalsSpec *ts, HeapTuple tup, TupleDesc tdesc, Tuplestorestate *out,
			  TupleDesc desc, Jsonb **group_out)
{
	DiffSpec   *spec = ts->spec;
	int			k = spec->nkeys;
	bool		isnull;
	bool		in_s = DatumGetBool(SPI_getbinval(tup, tdesc, k + 1, &isnull)) && !isnull;
	bool		in_t;
	const char *issue;
	Datum	   *diffs = palloc(sizeof(Datum) * ts->nmeasures);
	int			ndiff = 0;
	Jsonb	   *volatile group = NULL;
	Jsonb	   *volatile sv = NULL;
	Jsonb	   *volatile tv = NULL;
	PinnedSettings saved;

	in_t = DatumGetBool(SPI_getbinval(tup, tdesc, k + 2, &isnull)) && !isnull;
	if (in_s && in_t)
	{
		for (int i = 0; i < ts->nmeasures; i++)
		{
			bool		an,
						bn;
			Datum		a = SPI_getbinval(tup, tdesc, k + 3 + 2 * i, &an);
			Datum		b = SPI_getbinval(tup, tdesc, k + 4 + 2 * i, &bn);

			if (!measure_equal(&ts->measures[i], a, an, b, bn))
				diffs[ndiff++] = CStringGetTextDatum(ts->measures[i].label);
		}
		issue = ndiff ? "MISMATCH" : "MATCH";
	}
	else
		issue = in_s ? "MISSING_GROUP" : "EXTRA_GROUP";

	if (strcmp(issue, "MATCH") == 0 && !ts->include_matches)
		return false;
	/* Values in the text forms of the diff's findings, whatever the session's. */
	pinned_settings_enter(&saved, ts->names_objects);
	PG_TRY();
	{
		group = group_jsonb(spec, tup, tdesc);
		sv = in_s ? measures_jsonb(ts, tup, tdesc, k + 3) : NULL;
		tv = in_t ? measures_jsonb(ts, tup, tdesc, k + 4) : NULL;
	}
	PG_FINALLY();
	{
		pinned_settings_leave(&saved);
	}
	PG_END_TRY();
	emit_total(out, desc, issue, group, NULL,
			   ndiff ? PointerGetDatum(construct_array(diffs, ndiff, TEXTOID, -1, false, TYPALIGN_INT)) : (Datum) 0,
			   sv, tv);
	*group_out = group;
	return strcmp(issue, "MATCH") != 0;
}

/* ---------------------------------------------------------------------
 * then_rows: the row diff of each group that differs
 * ---------------------------------------------------------------------
 */

static void
rows_of_groups(TotalsSpec *ts, List *groups, Tuplestorestate *out, TupleDesc desc)
{
	DiffSpec   *rows = diff_prepare(ts->spec->source, ts->spec->target, ts->row_keys,
									ts->row_options);
	TupleDesc	fdesc = diff_findings_desc(DIFF_FINDING_NATTS);
	ListCell   *lc;
	MemoryContext groupcxt;

	/* The group columns, as the totals read them, filter the row diff. */
	rows->group_filter = palloc0(sizeof(DiffGroupFilter));
	rows->group_filter->ncols = ts->spec->nkeys;
	rows->group_filter->cols = ts->spec->keys;

	groupcxt = AllocSetContextCreate(CurrentMemoryContext, "reconcile totals group",
									 ALLOCSET_DEFAULT_SIZES);
	foreach(lc, groups)
	{
		TotalsGroup *g = lfirst(lc);
		MemoryContext old = MemoryContextSwitchTo(groupcxt);
		Tuplestorestate *found = tuplestore_begin_heap(false, false, work_mem);
		TupleTableSlot *slot = MakeSingleTupleTableSlot(fdesc, &TTSOpsMinimalTuple);
		DiffCounts	counts;

		CHECK_FOR_INTERRUPTS();
		rows->group_filter->values = g->values;
		rows->group_filter->nulls = g->nulls;
		diff_compare(rows, found, fdesc, &counts);
		while (tuplestore_gettupleslot(found, true, false, slot))
		{
			bool		n[DIFF_FINDING_NATTS];
			Datum		v[DIFF_FINDING_NATTS];

			for (int i = 0; i < DIFF_FINDING_NATTS; i++)
				v[i] = slot_getattr(slot, i + 1, &n[i]);
			emit_total(out, desc, TextDatumGetCString(v[0]), g->group,
					   DatumGetJsonbP(v[1]), n[2] ? (Datum) 0 : v[2],
					   n[3] ? NULL : DatumGetJsonbP(v[3]), n[4] ? NULL : DatumGetJsonbP(v[4]));
		}
		ExecDropSingleTupleTableSlot(slot);
		tuplestore_end(found);
		/* Each group's diff allocates afresh: the output holds copies. */
		MemoryContextSwitchTo(old);
		MemoryContextReset(groupcxt);
	}
	MemoryContextDelete(groupcxt);
	rows->group_filter = NULL;
}

/*
 * reconcile_diff_totals(source regclass, target regclass, group_by text[],
 *                       measures jsonb DEFAULT '{}', options jsonb DEFAULT '{}')
 *		Control totals per group of both sides: one row per group that
 *		differs (MISSING_GROUP, EXTRA_GROUP, MISMATCH; MATCH with the option
 *		include_matches), and with then_rows the row findings inside them.
 */
Datum
reconcile_diff_totals(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext callcxt = CurrentMemoryContext;
	MemoryContext batchcxt;
	TotalsSpec *ts;
	Datum		cutoff = (Datum) 0;
	bool		has_cutoff;
	Oid			types[8];
	Datum		values[8];
	int			nparams = 0;
	char	   *sql;
	Portal		portal;
	List	   *groups = NIL;

	check_arg_not_null(fcinfo, 0, "source", "reconcile_diff_totals");
	check_arg_not_null(fcinfo, 1, "target", "reconcile_diff_totals");
	check_arg_not_null(fcinfo, 2, "group_by", "reconcile_diff_totals");
	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	ts = totals_prepare(PG_GETARG_OID(0), PG_GETARG_OID(1), PG_GETARG_ARRAYTYPE_P(2),
						PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3),
						PG_ARGISNULL(4) ? NULL : PG_GETARG_JSONB_P(4));
	has_cutoff = diff_cutoff(ts->spec, &cutoff);
	sql = totals_sql(ts, cutoff, has_cutoff, types, values, &nparams);
	elog(DEBUG1, "reconcile_diff_totals: %s", sql);
	portal = SPI_cursor_open_with_args(NULL, sql, nparams, types, values, NULL, true,
									   CURSOR_OPT_NO_SCROLL);
	batchcxt = AllocSetContextCreate(callcxt, "reconcile totals batch", ALLOCSET_DEFAULT_SIZES);
	for (;;)
	{
		MemoryContext old;

		SPI_cursor_fetch(portal, true, 1000);
		if (SPI_processed == 0)
			break;
		old = MemoryContextSwitchTo(batchcxt);
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			Jsonb	   *group = NULL;
			HeapTuple	tup = SPI_tuptable->vals[r];

			CHECK_FOR_INTERRUPTS();
			if (compare_group(ts, tup, SPI_tuptable->tupdesc, rsinfo->setResult,
							  rsinfo->setDesc, &group) && ts->then_rows)
			{
				/* Kept for the row diff: the group's values, in the call's context. */
				TotalsGroup *g;
				int			k = ts->spec->nkeys;

				MemoryContextSwitchTo(callcxt);
				g = palloc(sizeof(TotalsGroup));

				g->values = palloc(sizeof(Datum) * k);
				g->nulls = palloc(sizeof(bool) * k);
				for (int i = 0; i < k; i++)
				{
					Datum		d = SPI_getbinval(tup, SPI_tuptable->tupdesc, i + 1, &g->nulls[i]);

					g->values[i] = g->nulls[i] ? (Datum) 0 :
						datumCopy(d, ts->spec->keys[i].typbyval, ts->spec->keys[i].typlen);
				}
				g->group = DatumGetJsonbP(datumCopy(PointerGetDatum(group), false, -1));
				groups = lappend(groups, g);
				MemoryContextSwitchTo(batchcxt);
			}
		}
		MemoryContextSwitchTo(old);
		MemoryContextReset(batchcxt);
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	if (ts->then_rows && groups != NIL)
		rows_of_groups(ts, groups, rsinfo->setResult, rsinfo->setDesc);
	SPI_finish();
	return (Datum) 0;
}
