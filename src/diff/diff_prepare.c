/*
 * diff_prepare.c
 *		Settle a reconciliation diff before anything is read: parse its
 *		options, resolve the key and compared columns on both sides, their
 *		common types, orderings, tolerances and the window, and check the
 *		caller's privileges.
 *
 * Every mistake a DBA can make in the arguments is reported here, naming
 * the option, the column and the side it concerns; diff.c then runs the
 * prepared diff.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "common/int.h"
#include "common/jsonapi.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "parser/parse_coerce.h"
#include "parser/scansup.h"
#include "pgtime.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datetime.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/portal.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

#include "common/colname.h"
#include "diff.h"
#include "common/jsonbuild.h"
#include "common/jsonread.h"
#include "common/sqlname.h"
#include "common/state.h"

static const char *const diff_option_names[] = {
	"compare", "ignore", "target_key_columns", "column_map", "trim_keys",
	"updated_column", "window", "cutoff", "tolerance", "time_zone", "lookback",
	"remote", "split_factor", "leaf_rows", "tombstones", "recheck", "min_age",
	"max_differences", "max_duration", "relative_tolerance",
	"case_insensitive", "trim", "timestamp_precision"
};

#define DIFF_VALID_OPTIONS "compare, ignore, target_key_columns, column_map, trim_keys, updated_column, window, cutoff, tolerance, time_zone, lookback, remote, split_factor, leaf_rows, tombstones, recheck, min_age, max_differences, max_duration, relative_tolerance, case_insensitive, trim, timestamp_precision"

typedef struct DiffOptions
{
	JsonbValue *v[lengthof(diff_option_names)];
} DiffOptions;

#define OPT_COMPARE		0
#define OPT_IGNORE		1
#define OPT_TARGET_KEYS	2
#define OPT_COLUMN_MAP	3
#define OPT_TRIM_KEYS	4
#define OPT_UPDATED		5
#define OPT_WINDOW		6
#define OPT_CUTOFF		7
#define OPT_TOLERANCE	8
#define OPT_TIME_ZONE	9
#define OPT_LOOKBACK	10
#define OPT_REMOTE		11
#define OPT_SPLIT		12
#define OPT_LEAF		13
#define OPT_TOMBSTONES	14
#define OPT_RECHECK		15
#define OPT_MIN_AGE		16
#define OPT_MAX_DIFFS	17
#define OPT_MAX_DURATION 18
#define OPT_REL_TOL		19
#define OPT_CASE_INS	20
#define OPT_TRIM		21
#define OPT_TS_PREC		22

/* A name-to-value pair of an option that is a JSON object. */
typedef struct OptPair
{
	char	   *name;
	JsonbValue	value;
} OptPair;

/* ---------------------------------------------------------------------
 * Options
 * ---------------------------------------------------------------------
 */

static void
parse_options(Jsonb *options, DiffOptions *opts)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken r;

	memset(opts, 0, sizeof(DiffOptions));
	if (options == NULL)
		return;
	if (!JB_ROOT_IS_OBJECT(options))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("options must be a JSON object"),
				 errhint("Pass for example '{\"compare\": [\"amount\"]}', or '{}' for none.")));

	it = JsonbIteratorInit(&options->root);
	while ((r = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		char	   *name;
		int			found = -1;

		if (r != WJB_KEY)
			continue;
		name = pnstrdup(v.val.string.val, v.val.string.len);
		for (int i = 0; i < lengthof(diff_option_names); i++)
			if (strcmp(name, diff_option_names[i]) == 0)
				found = i;
		if (found < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown option \"%s\"", name),
					 errdetail("Valid options are: %s.", DIFF_VALID_OPTIONS)));
		r = JsonbIteratorNext(&it, &v, true);
		Assert(r == WJB_VALUE);
		opts->v[found] = palloc(sizeof(JsonbValue));
		*opts->v[found] = v;
	}
}

/* The elements of an option that is a JSON array, in order. */
static JsonbValue *
opt_array(JsonbValue *v, const char *option, const char *what, int *n)
{
	JsonbIterator *it;
	JsonbValue	elem;
	JsonbIteratorToken r;
	JsonbValue *out;
	int			cap = 8;

	if (!jbv_is_array(v))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"%s\" must be a JSON array of %s", option, what)));
	out = palloc(sizeof(JsonbValue) * cap);
	*n = 0;
	it = JsonbIteratorInit(v->val.binary.data);
	while ((r = JsonbIteratorNext(&it, &elem, true)) != WJB_DONE)
	{
		if (r != WJB_ELEM)
			continue;
		if (*n == cap)
		{
			cap *= 2;
			out = repalloc(out, sizeof(JsonbValue) * cap);
		}
		out[(*n)++] = elem;
	}
	return out;
}

static char **
opt_name_array(JsonbValue *v, const char *option, int *n)
{
	JsonbValue *elems = opt_array(v, option, "column names", n);
	char	  **names = palloc(sizeof(char *) * Max(*n, 1));

	for (int i = 0; i < *n; i++)
	{
		if (elems[i].type != jbvString)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"%s\" must be a JSON array of column names", option),
					 errdetail("Element %d is not a string.", i + 1)));
		names[i] = pnstrdup(elems[i].val.string.val, elems[i].val.string.len);
	}
	return names;
}

static OptPair *
opt_object(JsonbValue *v, const char *option, const char *what, int *n)
{
	JsonbIterator *it;
	JsonbValue	jv;
	JsonbIteratorToken r;
	OptPair    *out;
	int			cap = 8;

	if (!jbv_is_object(v))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"%s\" must be a JSON object %s", option, what)));
	out = palloc(sizeof(OptPair) * cap);
	*n = 0;
	it = JsonbIteratorInit(v->val.binary.data);
	while ((r = JsonbIteratorNext(&it, &jv, true)) != WJB_DONE)
	{
		if (r == WJB_KEY)
		{
			if (*n == cap)
			{
				cap *= 2;
				out = repalloc(out, sizeof(OptPair) * cap);
			}
			out[*n].name = pnstrdup(jv.val.string.val, jv.val.string.len);
		}
		else if (r == WJB_VALUE)
			out[(*n)++].value = jv;
	}
	return out;
}

static char *
opt_string(JsonbValue *v, const char *option, const char *what)
{
	if (v->type != jbvString)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"%s\" must be a string: %s", option, what)));
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/* Says which option a type's input function was reading when it failed. */
static void
option_error_context(void *arg)
{
	errcontext("while reading option \"%s\"", (const char *) arg);
}

#define WITH_OPTION_CONTEXT(option, stmt) \
	do { \
		ErrorContextCallback cb_; \
		cb_.callback = option_error_context; \
		cb_.arg = (void *) (option); \
		cb_.previous = error_context_stack; \
		error_context_stack = &cb_; \
		stmt; \
		error_context_stack = cb_.previous; \
	} while (0)

/* ---------------------------------------------------------------------
 * Relations and columns
 * ---------------------------------------------------------------------
 */

/*
 * A regclass argument may hold the OID of a dropped relation, or any number:
 * that is the caller's mistake, reported as such rather than as relation_open's
 * internal error.
 */
static Relation
open_side(Oid relid, const char *side)
{
	Relation	rel = try_relation_open(relid, AccessShareLock);

	if (rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid),
				 errdetail("The %s of the diff names no relation.", side)));
	return rel;
}

/*
 * Not errdetail_relkind_not_supported(), on purpose: its detail names the
 * kind refused ("This operation is not supported for sequences."), ours
 * names the kinds a side may be, which tells the DBA what to pass instead.
 */
static void
check_relation_kind(Relation rel, const char *side)
{
	char		kind = rel->rd_rel->relkind;

	if (kind != RELKIND_RELATION && kind != RELKIND_PARTITIONED_TABLE &&
		kind != RELKIND_VIEW && kind != RELKIND_MATVIEW &&
		kind != RELKIND_FOREIGN_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("%s \"%s\" is not a table, view or foreign table",
						side, RelationGetRelationName(rel)),
				 errdetail("A side of a diff must be a table, a partitioned table, a view, a materialized view or a foreign table.")));
}

/* Any SELECT at all on the side, before its columns are looked at. */
static void
check_select_any(Oid relid, const char *side)
{
	Oid			user = GetUserId();

	if (pg_class_aclcheck(relid, user, ACL_SELECT) != ACLCHECK_OK &&
		pg_attribute_aclcheck_all(relid, user, ACL_SELECT, ACLMASK_ANY) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for %s \"%s\"", side, get_rel_name(relid)),
				 errdetail("A diff reads both sides with the caller's rights, and role \"%s\" may not SELECT from this one.",
						   GetUserNameFromId(user, false)),
				 errhint("GRANT SELECT on it to the role running the diff.")));
}

static void
check_select_column(Oid relid, const char *side, const char *column)
{
	Oid			user = GetUserId();
	AttrNumber	attnum;

	if (pg_class_aclcheck(relid, user, ACL_SELECT) == ACLCHECK_OK)
		return;
	attnum = get_attnum(relid, column);
	if (pg_attribute_aclcheck(relid, attnum, user, ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for column \"%s\" of %s \"%s\"",
						column, side, get_rel_name(relid)),
				 errdetail("A diff reads both sides with the caller's rights, and role \"%s\" may not SELECT this column.",
						   GetUserNameFromId(user, false))));
}

/*
 * A timestamptz against a timestamp or a date is compared as timestamps:
 * the timestamptz side as its wall-clock time in the diff's time zone
 * (UTC unless the option "time_zone" names one), the other side as it is
 * stored.  Converting the naive side to timestamptz instead would read it
 * in the session's TimeZone, and the same two tables would differ under
 * one zone and match under another.  The zone goes into the expression
 * as a literal, not a parameter: the expression is used in select lists,
 * ORDER BY and WHERE clauses alike, and must stand alone; the zone was
 * checked to be a known zone name when the option was read.
 */
static bool
zone_compared(DiffSpec *spec, DiffColumn *c, Oid s, Oid t,
			  const char *sident, const char *tident)
{
	Oid			sb = getBaseType(s);
	Oid			tb = getBaseType(t);
	const char *zone = quote_literal_cstr(spec->time_zone);

	if (sb == TIMESTAMPTZOID && (tb == TIMESTAMPOID || tb == DATEOID))
	{
		c->sexpr = psprintf("pg_catalog.timezone(%s::pg_catalog.text, %s)", zone, sident);
		c->texpr = psprintf("CAST(%s AS pg_catalog.timestamp)", tident);
	}
	else if (tb == TIMESTAMPTZOID && (sb == TIMESTAMPOID || sb == DATEOID))
	{
		c->sexpr = psprintf("CAST(%s AS pg_catalog.timestamp)", sident);
		c->texpr = psprintf("pg_catalog.timezone(%s::pg_catalog.text, %s)", zone, tident);
	}
	else
		return false;
	c->typid = TIMESTAMPOID;
	c->in_zone = true;
	return true;
}

/*
 * Settle the type both sides of a column are compared in: the same type,
 * or the one the other side's type converts to implicitly (integer and
 * bigint, varchar and text); anything else is an error naming the column.
 */
static void
resolve_column_type(DiffSpec *spec, DiffColumn *c, Form_pg_attribute sa,
					Form_pg_attribute ta, const char *role, bool trim)
{
	Oid			s = sa->atttypid;
	Oid			t = ta->atttypid;
	const char *sident = quote_identifier(NameStr(sa->attname));
	const char *tident = quote_identifier(NameStr(ta->attname));
	Oid			outfunc;
	bool		varlena;

	c->sexpr = pstrdup(sident);
	c->texpr = pstrdup(tident);
	if (trim && TypeCategory(getBaseType(s)) == TYPCATEGORY_STRING &&
		TypeCategory(getBaseType(t)) == TYPCATEGORY_STRING)
	{
		c->typid = TEXTOID;
		c->sexpr = psprintf("pg_catalog.btrim(CAST(%s AS pg_catalog.text))", sident);
		c->texpr = psprintf("pg_catalog.btrim(CAST(%s AS pg_catalog.text))", tident);
	}
	else if (s == t)
		c->typid = s;
	else if (zone_compared(spec, c, s, t, sident, tident))
		;
	else if (can_coerce_type(1, &t, &s, COERCION_IMPLICIT))
	{
		c->typid = s;
		c->texpr = psprintf("CAST(%s AS %s)", tident, format_type_be_qualified(s));
	}
	else if (can_coerce_type(1, &s, &t, COERCION_IMPLICIT))
	{
		c->typid = t;
		c->sexpr = psprintf("CAST(%s AS %s)", sident, format_type_be_qualified(t));
	}
	else
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s column \"%s\" has incompatible types: %s in source \"%s\", %s in target \"%s\"",
						role, NameStr(sa->attname), format_type_be(s), spec->sname,
						format_type_be(t), spec->tname),
				 errdetail("A column is compared when one side's type converts implicitly to the other's."),
				 errhint("Compare through a view that casts the column, or leave it out with the option \"ignore\".")));

	c->scollation = sa->attcollation;
	c->tcollation = ta->attcollation;
	c->basetype = getBaseType(c->typid);
	c->collation = InvalidOid;
	if (type_is_collatable(c->typid))
		c->collation = OidIsValid(sa->attcollation) ? sa->attcollation : DEFAULT_COLLATION_OID;
	get_typlenbyval(c->typid, &c->typlen, &c->typbyval);
	getTypeOutputInfo(c->typid, &outfunc, &varlena);
	fmgr_info(outfunc, &c->out);
}

/* Equality of a compared column. */
static void
prepare_comparison(DiffColumn *c)
{
	TypeCacheEntry *tce = lookup_type_cache(c->basetype, TYPECACHE_EQ_OPR_FINFO);

	c->has_eq = OidIsValid(tce->eq_opr_finfo.fn_oid);
	if (c->has_eq)
		fmgr_info_copy(&c->eq, &tce->eq_opr_finfo, CurrentMemoryContext);
}

/* Ordering of a key column, the same the cursors' ORDER BY uses. */
static void
prepare_ordering(DiffSpec *spec, DiffColumn *c)
{
	TypeCacheEntry *tce = lookup_type_cache(c->basetype, TYPECACHE_LT_OPR);

	if (!OidIsValid(tce->lt_opr))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("key column \"%s\" of type %s cannot be ordered",
						c->name, format_type_be(c->typid)),
				 errdetail("A diff reads both sides in key order, which needs a default btree operator class for every key column.")));
	memset(&c->ssup, 0, sizeof(SortSupportData));
	c->ssup.ssup_cxt = CurrentMemoryContext;
	c->ssup.ssup_collation = c->collation;
	c->ssup.ssup_nulls_first = false;
	PrepareSortSupportFromOrderingOp(tce->lt_opr, &c->ssup);
}

static const char *
map_column(OptPair *map, int nmap, const char *name)
{
	for (int i = 0; i < nmap; i++)
		if (strcmp(map[i].name, name) == 0)
			return map[i].value.val.string.val;
	return name;
}

/*
 * The column a user's name means (colname.c: the exact spelling, or else
 * the folded name), or an error naming it, with a hint on case when a
 * column differs from it only in case.
 */
static Form_pg_attribute
require_attribute(TupleDesc desc, const char *name, const char *role,
				  const char *side, const char *relname, const char *hint)
{
	Form_pg_attribute att = colname_find(desc, name);

	if (att == NULL)
	{
		char	   *case_hint = colname_hint(desc, name);

		if (case_hint)
			hint = case_hint;
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("%s column \"%s\" does not exist in %s \"%s\"",
						role, name, side, relname),
				 hint ? errhint("%s", hint) : 0));
	}
	return att;
}

/* The column's own name, as findings and SQL use it. */
static char *
resolve_name(TupleDesc desc, const char *name, const char *role,
			 const char *side, const char *relname, const char *hint)
{
	return pstrdup(NameStr(require_attribute(desc, name, role, side, relname, hint)->attname));
}

/* A column with a tolerance is compared in numeric: both sides are read as numeric. */
static void
read_as_numeric(DiffColumn *c)
{
	if (c->basetype != NUMERICOID)
	{
		c->sexpr = psprintf("CAST(%s AS pg_catalog.numeric)", c->sexpr);
		c->texpr = psprintf("CAST(%s AS pg_catalog.numeric)", c->texpr);
		c->typid = c->basetype = NUMERICOID;
		c->typlen = -1;
		c->typbyval = false;
		fmgr_info(F_NUMERIC_OUT, &c->out);
	}
}

/*
 * Whether a (base) type is one of the numbers a tolerance, a relative
 * tolerance or a sum applies to: smallint to numeric, real, double precision.
 */
bool
diff_is_numeric_type(Oid basetype)
{
	switch (basetype)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case FLOAT4OID:
		case FLOAT8OID:
		case NUMERICOID:
			return true;
	}
	return false;
}

/* Whether a JSON value is a number, not NaN and not below zero. */
bool
diff_jbv_is_nonnegative(JsonbValue *v)
{
	return v->type == jbvNumeric && !numeric_is_nan(v->val.numeric) &&
		!DatumGetBool(DirectFunctionCall2(numeric_lt, NumericGetDatum(v->val.numeric),
										  DirectFunctionCall1(int4_numeric, Int32GetDatum(0))));
}

static void
set_tolerance(DiffSpec *spec, DiffColumn *c, JsonbValue *v)
{
	if (diff_is_numeric_type(c->basetype))
	{
		if (v->type != jbvNumeric)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("tolerance of column \"%s\" must be a number", c->name),
					 errdetail("Column \"%s\" is of type %s; its tolerance is the largest absolute difference that still counts as equal.",
							   c->name, format_type_be(c->typid))));
		if (!diff_jbv_is_nonnegative(v))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("tolerance of column \"%s\" must not be negative", c->name)));
		c->tolerance = DIFF_TOL_NUMERIC;
		c->tol_numeric = datumCopy(NumericGetDatum(v->val.numeric), false, -1);
		read_as_numeric(c);
		return;
	}
	switch (c->basetype)
	{
		case DATEOID:
		case TIMEOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			{
				char	   *text;
				Interval   *iv;
				int64		usecs;

				if (v->type != jbvString)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("tolerance of column \"%s\" must be an interval, such as \"1 second\"", c->name),
							 errdetail("Column \"%s\" is of type %s.", c->name, format_type_be(c->typid))));
				text = pnstrdup(v->val.string.val, v->val.string.len);
				WITH_OPTION_CONTEXT("tolerance",
									iv = DatumGetIntervalP(DirectFunctionCall3(interval_in, CStringGetDatum(text),
																			   ObjectIdGetDatum(InvalidOid),
																			   Int32GetDatum(-1))));
				usecs = iv->time + (int64) iv->day * USECS_PER_DAY +
					(int64) iv->month * DAYS_PER_MONTH * USECS_PER_DAY;
				if (usecs < 0)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("tolerance of column \"%s\" must not be negative", c->name)));
				c->tolerance = DIFF_TOL_TIME;
				c->tol_usecs = usecs;
			}
			break;
		default:
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("column \"%s\" of type %s cannot have a tolerance",
							c->name, format_type_be(c->typid)),
					 errdetail("A tolerance applies to numeric columns (a number) and to date, time and timestamp columns (an interval).")));
	}
}

/*
 * A timestamptz read from text in the diff's zone rather than the
 * session's: a bound without an offset means the same instant under every
 * TimeZone.  The setting is undone with the nest level, or by the abort of
 * the (sub)transaction if the input fails.
 */
static Datum
timestamptz_in_zone(DiffSpec *spec, const char *text, const char *option)
{
	int			nest = NewGUCNestLevel();
	Datum		result;

	(void) set_config_option("TimeZone", spec->time_zone, PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	WITH_OPTION_CONTEXT(option,
						result = DirectFunctionCall3(timestamptz_in, CStringGetDatum(text),
													 ObjectIdGetDatum(InvalidOid),
													 Int32GetDatum(-1)));
	AtEOXact_GUC(true, nest);
	return result;
}

static Datum
window_bound(DiffSpec *spec, JsonbValue *v, const char *which, bool in_zone)
{
	char	   *text;
	Oid			infunc,
				ioparam;
	Datum		result;

	if (v->type == jbvString)
		text = pnstrdup(v->val.string.val, v->val.string.len);
	else if (v->type == jbvNumeric)
		text = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
	else
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the %s of option \"window\" must be a string, a number or null", which)));
	/*
	 * Compared in the zone (timestamptz against timestamp): read as an
	 * instant, so that an explicit offset counts, then as the zone's
	 * wall-clock time, as the timestamptz side is read.
	 */
	if (in_zone)
		return DirectFunctionCall2(timestamptz_zone, CStringGetTextDatum(spec->time_zone),
								   timestamptz_in_zone(spec, text, "window"));
	if (getBaseType(spec->upd_type) == TIMESTAMPTZOID)
	{
		result = timestamptz_in_zone(spec, text, "window");
		/* A domain's constraints still apply. */
		if (spec->upd_type != TIMESTAMPTZOID)
			WITH_OPTION_CONTEXT("window",
								domain_check(result, false, spec->upd_type, NULL, NULL));
		return result;
	}
	getTypeInputInfo(spec->upd_type, &infunc, &ioparam);
	WITH_OPTION_CONTEXT("window", result = OidInputFunctionCall(infunc, text, ioparam, -1));
	return result;
}

/* An option that is a whole number within [min, max]; hint may be NULL. */
static int
opt_int_hint(JsonbValue *v, const char *option, int min, int max, const char *hint)
{
	Datum		n;

	if (v->type != jbvNumeric ||
		!DatumGetBool(DirectFunctionCall2(numeric_eq, NumericGetDatum(v->val.numeric),
										  DirectFunctionCall1(numeric_floor,
															  NumericGetDatum(v->val.numeric)))))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"%s\" must be a whole number from %d to %d", option, min, max),
				 hint ? errhint("%s", hint) : 0));
	n = NumericGetDatum(v->val.numeric);
	if (DatumGetBool(DirectFunctionCall2(numeric_lt, n,
										 DirectFunctionCall1(int4_numeric, Int32GetDatum(min)))) ||
		DatumGetBool(DirectFunctionCall2(numeric_gt, n,
										 DirectFunctionCall1(int4_numeric, Int32GetDatum(max)))))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"%s\" must be a whole number from %d to %d", option, min, max),
				 errdetail("It is %s.", DatumGetCString(DirectFunctionCall1(numeric_out, n))),
				 hint ? errhint("%s", hint) : 0));
	return DatumGetInt32(DirectFunctionCall1(numeric_int4, n));
}

static int
opt_int(JsonbValue *v, const char *option, int min, int max)
{
	return opt_int_hint(v, option, min, max, NULL);
}

/* How a side on another server is compared (diff_checksum.c). */
static void
set_remote_options(DiffSpec *spec, DiffOptions *opts)
{
	spec->remote_mode = DIFF_REMOTE_AUTO;
	spec->split_factor = DIFF_DEFAULT_SPLIT_FACTOR;
	spec->leaf_rows = DIFF_DEFAULT_LEAF_ROWS;
	if (opts->v[OPT_REMOTE])
	{
		char	   *mode = opt_string(opts->v[OPT_REMOTE], "remote",
									  "\"auto\", \"checksum\" or \"pull\"");

		if (strcmp(mode, "auto") == 0)
			spec->remote_mode = DIFF_REMOTE_AUTO;
		else if (strcmp(mode, "checksum") == 0)
			spec->remote_mode = DIFF_REMOTE_CHECKSUM;
		else if (strcmp(mode, "pull") == 0)
			spec->remote_mode = DIFF_REMOTE_PULL;
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value \"%s\" for option \"remote\"", mode),
					 errhint("Use \"auto\" (checksums where they push down), \"checksum\" (checksums or an error) or \"pull\" (read every row).")));
	}
	if (opts->v[OPT_SPLIT])
		spec->split_factor = opt_int(opts->v[OPT_SPLIT], "split_factor", 2, 1000);
	if (opts->v[OPT_LEAF])
	{
		spec->leaf_rows = opt_int(opts->v[OPT_LEAF], "leaf_rows", 1, 1000000);
		spec->leaf_rows_set = true;
	}
}

/*
 * The start of a look-back window: now (the transaction's start) minus
 * the interval, counted on the wall clock of the diff's zone, so that a
 * day is a calendar day there whatever the session's TimeZone.
 */
static Datum now_minus(DiffSpec *spec, Interval *iv, bool in_zone);

static Datum
lookback_start(DiffSpec *spec, JsonbValue *v, bool in_zone)
{
	char	   *text = opt_string(v, "lookback", "an interval, such as \"7 days\"");
	Interval   *iv;
	Oid			base = getBaseType(spec->upd_type);

	WITH_OPTION_CONTEXT("lookback",
						iv = DatumGetIntervalP(DirectFunctionCall3(interval_in, CStringGetDatum(text),
																   ObjectIdGetDatum(InvalidOid),
																   Int32GetDatum(-1))));
	if (iv->time < 0 || iv->day < 0 || iv->month < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"lookback\" must not be negative"),
				 errdetail("The window starts that long before now and has no end.")));
	if (base != TIMESTAMPTZOID && base != TIMESTAMPOID && base != DATEOID)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"lookback\" needs a date or timestamp updated column"),
				 errdetail("Updated column \"%s\" is of type %s.", spec->upd_name,
						   format_type_be(spec->upd_type)),
				 errhint("Give the option \"window\" with bounds of that type instead.")));
	return now_minus(spec, iv, in_zone);
}

/*
 * Now (the transaction's start) minus iv, counted on the wall clock of the
 * diff's zone, in the updated column's type (a date, timestamp or
 * timestamptz): the start of a look-back window, the age of min_age.
 */
static Datum
now_minus(DiffSpec *spec, Interval *iv, bool in_zone)
{
	Datum		zone = CStringGetTextDatum(spec->time_zone);
	Datum		wall;
	Oid			base = getBaseType(spec->upd_type);

	wall = DirectFunctionCall2(timestamptz_zone, zone,
							   TimestampTzGetDatum(GetCurrentTransactionStartTimestamp()));
	wall = DirectFunctionCall2(timestamp_mi_interval, wall, IntervalPGetDatum(iv));
	if (base == TIMESTAMPTZOID && !in_zone)
		return DirectFunctionCall2(timestamp_zone, zone, wall);
	if (base == DATEOID)
		return DirectFunctionCall1(timestamp_date, wall);
	return wall;
}

/*
 * Whether zone means two things: timezone(zone, ...) takes a name that is
 * also an abbreviation (pg_timezone_abbrevs) as the abbreviation's fixed
 * offset, while the setting TimeZone, by which bounds are read, takes the
 * zone of that name with its daylight saving time ('CET').  The same
 * offset all year ('UTC', 'EST') is one meaning.
 */
static bool
zone_is_ambiguous(const char *zone, pg_tz *full)
{
	char	   *low = downcase_truncate_identifier(zone, strlen(zone), false);
	int			offset;
	pg_tz	   *abbrev_zone;
	long int	gmtoff;
	int			type = DecodeTimezoneAbbrev(0, low, &offset, &abbrev_zone);

	if (type != TZ && type != DTZ && type != DYNTZ)
		return false;
	if (type == DYNTZ || !pg_get_timezone_offset(full, &gmtoff))
		return true;
	return gmtoff != offset;
}

/* The option "time_zone": a zone name PostgreSQL knows; "UTC" without it. */
static char *
option_time_zone(DiffOptions *opts)
{
	char	   *zone;
	pg_tz	   *full;

	if (opts->v[OPT_TIME_ZONE] == NULL)
		return "UTC";
	zone = opt_string(opts->v[OPT_TIME_ZONE], "time_zone",
					  "a time zone name, such as \"America/New_York\"");
	full = zone[0] == '\0' ? NULL : pg_tzset(zone);
	if (full == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("time zone \"%s\" of option \"time_zone\" is not recognized", zone),
				 errhint("Name a zone of pg_timezone_names, such as \"America/New_York\" or \"UTC\".")));
	if (zone_is_ambiguous(zone, full))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("time zone \"%s\" of option \"time_zone\" is ambiguous", zone),
				 errdetail("\"%s\" is both a zone whose offset changes during the year and the abbreviation of a fixed offset, which PostgreSQL's timezone() would use instead.", zone),
				 errhint("Name the zone by its region, such as \"Europe/Berlin\", or a fixed offset, such as \"Etc/GMT-1\".")));
	return zone;
}

/*
 * What prepare_spec settles, piece by piece: the spec being filled, the
 * options, both sides' descriptors and the names the options give.
 */
typedef struct SpecDraft
{
	DiffSpec   *spec;
	DiffOptions opts;
	TupleDesc	sdesc;
	TupleDesc	tdesc;
	char	  **keys;			/* key_columns, then as the source spells them */
	int			nkeys;
	char	  **tkeys;			/* option "target_key_columns", or NULL */
	OptPair    *map;			/* option "column_map" */
	int			nmap;
	bool		trim;			/* option "trim_keys" */
	bool		upd_in_zone;	/* the updated column is read in the time zone */
	bool		check_privileges;
} SpecDraft;

static const char *const map_hint = "Map differing names with the option \"column_map\", or leave the column out.";

/* The argument key_columns: one or more column names, none null. */
static void
read_key_columns(SpecDraft *d, ArrayType *key_columns)
{
	if (ARR_NDIM(key_columns) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key_columns must be a one-dimensional array")));
	{
		Datum	   *elems;
		bool	   *nulls;

		deconstruct_array(key_columns, TEXTOID, -1, false, TYPALIGN_INT,
						  &elems, &nulls, &d->nkeys);
		if (d->nkeys == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("key_columns must name at least one column")));
		d->keys = palloc(sizeof(char *) * d->nkeys);
		for (int i = 0; i < d->nkeys; i++)
		{
			if (nulls[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("key_columns must not contain nulls")));
			d->keys[i] = TextDatumGetCString(elems[i]);
		}
	}
}

/*
 * Both sides: what they are and whether the caller may read them.  The
 * relations stay open (and locked) until prepare_spec closes them.
 */
static void
open_sides(SpecDraft *d, Oid source, Oid target, Relation *srel, Relation *trel)
{
	DiffSpec   *spec = d->spec;

	*srel = open_side(source, "source");
	*trel = open_side(target, "target");
	check_relation_kind(*srel, "source");
	check_relation_kind(*trel, "target");
	if (d->check_privileges)
	{
		check_select_any(source, "source");
		check_select_any(target, "target");
	}
	spec->source = source;
	spec->target = target;
	spec->sname = pstrdup(RelationGetRelationName(*srel));
	spec->tname = pstrdup(RelationGetRelationName(*trel));
	spec->squal = relation_quoted_name(*srel);
	spec->tqual = relation_quoted_name(*trel);
	d->sdesc = RelationGetDescr(*srel);
	d->tdesc = RelationGetDescr(*trel);
}

/* Naming options: "column_map", "target_key_columns" and "trim_keys". */
static void
read_naming_options(SpecDraft *d)
{
	DiffSpec   *spec = d->spec;
	int			ntkeys = 0;

	if (d->opts.v[OPT_COLUMN_MAP])
	{
		d->map = opt_object(d->opts.v[OPT_COLUMN_MAP], "column_map",
						 "from source column names to target column names", &d->nmap);
		for (int i = 0; i < d->nmap; i++)
		{
			if (d->map[i].value.type != jbvString)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("option \"column_map\" must map column names to column names"),
						 errdetail("The value for \"%s\" is not a string.", d->map[i].name)));
			d->map[i].name = resolve_name(d->sdesc, d->map[i].name, "mapped", "source",
									   spec->sname, NULL);
			d->map[i].value.val.string.val =
				resolve_name(d->tdesc, pnstrdup(d->map[i].value.val.string.val,
											 d->map[i].value.val.string.len),
							 "mapped", "target", spec->tname, NULL);
		}
	}
	if (d->opts.v[OPT_TARGET_KEYS])
	{
		d->tkeys = opt_name_array(d->opts.v[OPT_TARGET_KEYS], "target_key_columns", &ntkeys);
		if (ntkeys != d->nkeys)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"target_key_columns\" names %d columns, but key_columns names %d",
							ntkeys, d->nkeys),
					 errdetail("The target's key columns pair up with the source's in order.")));
	}
	if (d->opts.v[OPT_TRIM_KEYS])
	{
		if (d->opts.v[OPT_TRIM_KEYS]->type != jbvBool)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"trim_keys\" must be true or false")));
		d->trim = d->opts.v[OPT_TRIM_KEYS]->val.boolean;
	}
}

/* Keys: each source key column, its target column, type and ordering. */
static void
resolve_keys(SpecDraft *d)
{
	DiffSpec   *spec = d->spec;
	char	  **keys = d->keys;
	int			nkeys = d->nkeys;

	spec->nkeys = nkeys;
	spec->keys = palloc0(sizeof(DiffColumn) * nkeys);
	for (int i = 0; i < nkeys; i++)
	{
		DiffColumn *c = &spec->keys[i];
		Form_pg_attribute sa,
					ta;

		sa = require_attribute(d->sdesc, keys[i], "key", "source", spec->sname, NULL);
		c->name = keys[i] = pstrdup(NameStr(sa->attname));
		for (int j = 0; j < i; j++)
			if (strcmp(keys[i], keys[j]) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("key column \"%s\" is named more than once", keys[i])));
		ta = require_attribute(d->tdesc, d->tkeys ? d->tkeys[i] : map_column(d->map, d->nmap, c->name),
							   "key", "target", spec->tname,
							   "Name the target's key columns with the option \"target_key_columns\", or map them with \"column_map\".");
		c->tname = pstrdup(NameStr(ta->attname));
		resolve_column_type(spec, c, sa, ta, "key", d->trim);
		prepare_ordering(spec, c);
		if (d->check_privileges)
		{
			check_select_column(spec->source, "source", c->name);
			check_select_column(spec->target, "target", c->tname);
		}
	}
}

/* Compared columns: the given ones, or all on both sides but the key. */
static void
resolve_compared(SpecDraft *d)
{
	DiffSpec   *spec = d->spec;
	TupleDesc	sdesc = d->sdesc;
	TupleDesc	tdesc = d->tdesc;
	char	  **keys = d->keys;
	int			nkeys = d->nkeys;
	char	  **compare = NULL;
	int			ncompare = 0;
	char	  **ignore = NULL;
	int			nignore = 0;

	if (d->opts.v[OPT_COMPARE])
		compare = opt_name_array(d->opts.v[OPT_COMPARE], "compare", &ncompare);
	if (d->opts.v[OPT_IGNORE])
		ignore = opt_name_array(d->opts.v[OPT_IGNORE], "ignore", &nignore);
	for (int i = 0; i < nignore; i++)
	{
		ignore[i] = resolve_name(sdesc, ignore[i], "ignored", "source", spec->sname, NULL);
		for (int k = 0; k < nkeys; k++)
			if (strcmp(ignore[i], keys[k]) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("key column \"%s\" cannot be ignored", ignore[i])));
	}
	if (compare == NULL)
	{
		compare = palloc(sizeof(char *) * Max(sdesc->natts, 1));
		for (int a = 0; a < sdesc->natts; a++)
		{
			Form_pg_attribute att = TupleDescAttr(sdesc, a);
			bool		skip = att->attisdropped;

			for (int k = 0; !skip && k < nkeys; k++)
				skip = strcmp(NameStr(att->attname), keys[k]) == 0;
			if (!skip && colname_find(tdesc, map_column(d->map, d->nmap, NameStr(att->attname))) == NULL)
				skip = true;
			if (!skip)
				compare[ncompare++] = pstrdup(NameStr(att->attname));
		}
	}
	spec->cols = palloc0(sizeof(DiffColumn) * Max(ncompare, 1));
	for (int i = 0; i < ncompare; i++)
	{
		DiffColumn *c;
		Form_pg_attribute sa,
					ta;
		bool		skip = false;

		compare[i] = resolve_name(sdesc, compare[i], "compared", "source", spec->sname, NULL);
		for (int k = 0; k < nkeys; k++)
			if (strcmp(compare[i], keys[k]) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("key column \"%s\" cannot be compared", compare[i]),
						 errdetail("Key columns pair the rows up; option \"compare\" lists the other columns.")));
		for (int j = 0; j < i; j++)
			if (strcmp(compare[i], compare[j]) == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("column \"%s\" is named more than once in option \"compare\"",
								compare[i])));
		for (int j = 0; j < nignore; j++)
			if (strcmp(compare[i], ignore[j]) == 0)
				skip = true;
		if (skip)
			continue;
		c = &spec->cols[spec->ncols++];
		c->name = compare[i];
		sa = require_attribute(sdesc, c->name, "compared", "source", spec->sname, NULL);
		ta = require_attribute(tdesc, map_column(d->map, d->nmap, compare[i]), "compared", "target",
							   spec->tname, map_hint);
		c->tname = pstrdup(NameStr(ta->attname));
		resolve_column_type(spec, c, sa, ta, "compared", false);
		prepare_comparison(c);
		if (d->check_privileges)
		{
			check_select_column(spec->source, "source", c->name);
			check_select_column(spec->target, "target", c->tname);
		}
	}
}

/* Tolerances, on compared columns only. */
static void
set_tolerances(SpecDraft *d)
{
	DiffSpec   *spec = d->spec;

	if (d->opts.v[OPT_TOLERANCE])
	{
		int			ntol;
		OptPair    *tol = opt_object(d->opts.v[OPT_TOLERANCE], "tolerance",
									 "from column names to tolerances", &ntol);

		for (int i = 0; i < ntol; i++)
		{
			DiffColumn *c = NULL;
			Form_pg_attribute att = colname_find(d->sdesc, tol[i].name);
			const char *name = att ? NameStr(att->attname) : tol[i].name;

			for (int j = 0; j < spec->ncols; j++)
				if (strcmp(spec->cols[j].name, name) == 0)
					c = &spec->cols[j];
			if (c == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("tolerance names column \"%s\", which is not compared", tol[i].name),
						 errdetail("The compared columns of this diff are set by the options \"compare\" and \"ignore\".")));
			set_tolerance(spec, c, &tol[i].value);
			prepare_comparison(c);
		}
	}
}

/* ---------------------------------------------------------------------
 * Normalising values: "relative_tolerance", "trim", "case_insensitive",
 * "timestamp_precision".  trim, case_insensitive and timestamp_precision
 * rewrite the expressions that read the column on both sides, so that the
 * ordered pass, the row encodings of the checksums and the findings all
 * see the normalised value; relative_tolerance is a comparison, like
 * tolerance.
 * ---------------------------------------------------------------------
 */

/* The compared column an option names: 42703 if none, 22023 if not compared. */
static DiffColumn *
compared_column(SpecDraft *d, const char *name, const char *option)
{
	DiffSpec   *spec = d->spec;
	const char *own = NameStr(require_attribute(d->sdesc, name, "normalised", "source",
												spec->sname,
												psprintf("Option \"%s\" names compared columns by their names in the source.", option))->attname);

	for (int j = 0; j < spec->ncols; j++)
		if (strcmp(spec->cols[j].name, own) == 0)
			return &spec->cols[j];
	for (int k = 0; k < spec->nkeys; k++)
		if (strcmp(spec->keys[k].name, own) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"%s\" names key column \"%s\"", option, own),
					 errdetail("The option normalises compared values; keys are compared as they are."),
					 errhint("Trim text keys with the option \"trim_keys\".")));
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("option \"%s\" names column \"%s\", which is not compared", option, own),
			 errdetail("The compared columns of this diff are set by the options \"compare\" and \"ignore\".")));
	return NULL;
}

/* A compared column now read through new expressions of type text. */
static void
read_as_text(DiffColumn *c, const char *fn, const char *option)
{
	Oid			outfunc;
	bool		varlena;

	if (TypeCategory(c->basetype) != TYPCATEGORY_STRING)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"%s\" names column \"%s\" of type %s", option, c->name,
						format_type_be(c->typid)),
				 errdetail("The option applies to text columns (text, varchar, char, name)."),
				 errhint("Leave the column out of option \"%s\".", option)));
	c->sexpr = psprintf("pg_catalog.%s(CAST(%s AS pg_catalog.text))", fn, c->sexpr);
	c->texpr = psprintf("pg_catalog.%s(CAST(%s AS pg_catalog.text))", fn, c->texpr);
	c->typid = c->basetype = TEXTOID;
	get_typlenbyval(TEXTOID, &c->typlen, &c->typbyval);
	getTypeOutputInfo(TEXTOID, &outfunc, &varlena);
	fmgr_info(outfunc, &c->out);
	if (!OidIsValid(c->collation))
		c->collation = DEFAULT_COLLATION_OID;
}

/* The units date_trunc knows, the only ones spliced into its call. */
static const char *const precision_units[] = {
	"microseconds", "milliseconds", "second", "minute", "hour", "day", "week",
	"month", "quarter", "year", "decade", "century", "millennium"
};

static void
set_precision(DiffSpec *spec, DiffColumn *c, JsonbValue *v)
{
	const char *unit = NULL;

	if (v->type == jbvString)
	{
		char	   *given = pnstrdup(v->val.string.val, v->val.string.len);

		for (int i = 0; i < lengthof(precision_units); i++)
			if (pg_strcasecmp(given, precision_units[i]) == 0)
				unit = precision_units[i];
	}
	if (unit == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"timestamp_precision\" of column \"%s\" must be a unit of date_trunc", c->name),
				 errhint("Use one of microseconds, milliseconds, second, minute, hour, day, week, month, quarter, year, decade, century, millennium.")));

	/*
	 * The unit is one of the list above and the zone was checked when the
	 * option was read: both go into the expression as literals, since it
	 * must stand alone in select lists, ORDER BY and WHERE clauses (as
	 * zone_compared's do).  A timestamptz is truncated on the wall clock of
	 * the diff's time zone with immutable functions only.
	 */
	switch (c->basetype)
	{
		case TIMESTAMPOID:
			c->sexpr = psprintf("pg_catalog.date_trunc('%s'::pg_catalog.text, %s)", unit, c->sexpr);
			c->texpr = psprintf("pg_catalog.date_trunc('%s'::pg_catalog.text, %s)", unit, c->texpr);
			break;
		case TIMESTAMPTZOID:
			{
				const char *zone = quote_literal_cstr(spec->time_zone);

				c->sexpr = psprintf("pg_catalog.timezone(%s::pg_catalog.text, pg_catalog.date_trunc('%s'::pg_catalog.text, pg_catalog.timezone(%s::pg_catalog.text, %s)))",
									zone, unit, zone, c->sexpr);
				c->texpr = psprintf("pg_catalog.timezone(%s::pg_catalog.text, pg_catalog.date_trunc('%s'::pg_catalog.text, pg_catalog.timezone(%s::pg_catalog.text, %s)))",
									zone, unit, zone, c->texpr);
			}
			break;
		default:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"timestamp_precision\" names column \"%s\" of type %s", c->name,
							format_type_be(c->typid)),
					 errdetail("The option applies to timestamp and timestamptz columns."),
					 errhint("Leave the column out of option \"timestamp_precision\".")));
	}
}

static void
set_relative_tolerance(DiffColumn *c, JsonbValue *v)
{
	if (!diff_is_numeric_type(c->basetype))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("column \"%s\" of type %s cannot have a relative tolerance",
						c->name, format_type_be(c->typid)),
				 errdetail("A relative tolerance applies to numeric columns (smallint to numeric, real, double precision)."),
				 errhint("Leave the column out of option \"relative_tolerance\".")));
	if (!diff_jbv_is_nonnegative(v))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("relative tolerance of column \"%s\" must be a non-negative number", c->name),
				 errdetail("It is a fraction of the larger absolute value: 0.001 lets the values differ by 0.1%%."),
				 errhint("Pass for example {\"relative_tolerance\": {\"%s\": 0.001}}.", c->name)));
	if (c->tolerance == DIFF_TOL_NONE)
	{
		c->tolerance = DIFF_TOL_NUMERIC;
		c->tol_numeric = DirectFunctionCall1(int4_numeric, Int32GetDatum(0));
	}
	c->has_rel_tol = true;
	c->rel_tol = datumCopy(NumericGetDatum(v->val.numeric), false, -1);
	read_as_numeric(c);
}

static void
set_normalisations(SpecDraft *d)
{
	DiffSpec   *spec = d->spec;
	int			n;

	if (d->opts.v[OPT_TRIM])
	{
		char	  **names = opt_name_array(d->opts.v[OPT_TRIM], "trim", &n);

		for (int i = 0; i < n; i++)
			read_as_text(compared_column(d, names[i], "trim"), "btrim", "trim");
	}
	if (d->opts.v[OPT_CASE_INS])
	{
		char	  **names = opt_name_array(d->opts.v[OPT_CASE_INS], "case_insensitive", &n);

		for (int i = 0; i < n; i++)
			read_as_text(compared_column(d, names[i], "case_insensitive"), "lower",
						 "case_insensitive");
	}
	if (d->opts.v[OPT_TS_PREC])
	{
		OptPair    *p = opt_object(d->opts.v[OPT_TS_PREC], "timestamp_precision",
								   "from column names to units, such as \"second\"", &n);

		for (int i = 0; i < n; i++)
			set_precision(spec, compared_column(d, p[i].name, "timestamp_precision"), &p[i].value);
	}
	if (d->opts.v[OPT_REL_TOL])
	{
		OptPair    *p = opt_object(d->opts.v[OPT_REL_TOL], "relative_tolerance",
								   "from column names to fractions", &n);

		for (int i = 0; i < n; i++)
		{
			DiffColumn *c = compared_column(d, p[i].name, "relative_tolerance");

			set_relative_tolerance(c, &p[i].value);
			prepare_comparison(c);
		}
	}
	for (int j = 0; j < spec->ncols; j++)
		prepare_comparison(&spec->cols[j]);
}

/* The updated column: its name on both sides, its type, ordered. */
static void
resolve_updated_column(SpecDraft *d)
{
	DiffSpec   *spec = d->spec;

	if (d->opts.v[OPT_UPDATED])
	{
		char	   *supd = opt_string(d->opts.v[OPT_UPDATED], "updated_column",
									  "the name of the source's column of last update");
		Form_pg_attribute sa = require_attribute(d->sdesc, supd, "updated", "source",
												 spec->sname, NULL);
		Form_pg_attribute ta;
		const char *tupd;
		DiffColumn	tmp;

		supd = pstrdup(NameStr(sa->attname));
		ta = require_attribute(d->tdesc, map_column(d->map, d->nmap, supd), "updated", "target",
							   spec->tname, map_hint);
		tupd = NameStr(ta->attname);

		memset(&tmp, 0, sizeof(tmp));
		tmp.name = supd;
		resolve_column_type(spec, &tmp, sa, ta, "updated", false);
		if (!OidIsValid(lookup_type_cache(tmp.basetype, TYPECACHE_LT_OPR)->lt_opr))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("updated column \"%s\" of type %s cannot be ordered",
							supd, format_type_be(tmp.typid))));
		spec->upd_name = supd;
		spec->supd = tmp.sexpr;
		spec->tupd = tmp.texpr;
		spec->upd_type = tmp.typid;
		d->upd_in_zone = tmp.in_zone;
		if (d->check_privileges)
		{
			check_select_column(spec->source, "source", supd);
			check_select_column(spec->target, "target", tupd);
		}
	}
}

/* The window on the updated column ("window" or "lookback"), and the cutoff. */
static void
set_window_and_cutoff(SpecDraft *d)
{
	DiffSpec   *spec = d->spec;

	if (d->opts.v[OPT_WINDOW])
	{
		int			n;
		JsonbValue *bounds;

		if (spec->supd == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"window\" needs option \"updated_column\""),
					 errdetail("The window bounds the column of last update, which \"updated_column\" names.")));
		bounds = opt_array(d->opts.v[OPT_WINDOW], "window", "two bounds, [from, to]", &n);
		if (n != 2)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"window\" must be a JSON array of two bounds, [from, to]"),
					 errdetail_plural("It has %d element.", "It has %d elements.", n, n),
					 errhint("Use null for an open end.")));
		if (bounds[0].type != jbvNull)
		{
			spec->has_lo = true;
			spec->window_lo = window_bound(spec, &bounds[0], "start", d->upd_in_zone);
		}
		if (bounds[1].type != jbvNull)
		{
			spec->has_hi = true;
			spec->window_hi = window_bound(spec, &bounds[1], "end", d->upd_in_zone);
		}
		if (spec->has_lo && spec->has_hi)
		{
			TypeCacheEntry *tce = lookup_type_cache(getBaseType(spec->upd_type),
													TYPECACHE_CMP_PROC_FINFO);

			if (OidIsValid(tce->cmp_proc_finfo.fn_oid) &&
				DatumGetInt32(FunctionCall2Coll(&tce->cmp_proc_finfo, DEFAULT_COLLATION_OID,
												spec->window_lo, spec->window_hi)) > 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("option \"window\" is empty: its start is after its end")));
		}
	}
	if (d->opts.v[OPT_LOOKBACK])
	{
		if (spec->supd == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"lookback\" needs option \"updated_column\""),
					 errdetail("The look-back window bounds the column of last update, which \"updated_column\" names.")));
		if (d->opts.v[OPT_WINDOW])
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("options \"window\" and \"lookback\" cannot be combined"),
					 errhint("Use \"window\" for fixed bounds, \"lookback\" for the time up to now.")));
		spec->has_lo = true;
		spec->window_lo = lookback_start(spec, d->opts.v[OPT_LOOKBACK], d->upd_in_zone);
	}
	if (d->opts.v[OPT_CUTOFF])
	{
		char	   *cutoff = opt_string(d->opts.v[OPT_CUTOFF], "cutoff", "\"source_max\"");

		if (strcmp(cutoff, "source_max") != 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("invalid value \"%s\" for option \"cutoff\"", cutoff),
					 errhint("The only cutoff is \"source_max\": leave out target rows updated after the newest source row.")));
		if (spec->supd == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"cutoff\" needs option \"updated_column\"")));
		spec->cutoff_source_max = true;
	}
}

/* A registered target's deleted column, quoted, or NULL (not registered). */
static char *
registered_deleted_column(Oid relid)
{
	MemoryContext cxt = CurrentMemoryContext;
	char	   *col = NULL;

	SPI_connect();
	state_read_latest("SELECT deleted_column FROM reconcile.targets"
					  " WHERE target OPERATOR(pg_catalog.=) $1", relid, 1);
	if (SPI_processed > 0)
		col = MemoryContextStrdup(cxt, quote_identifier(SPI_getvalue(SPI_tuptable->vals[0],
																	 SPI_tuptable->tupdesc, 1)));
	SPI_finish();
	return col;
}

/*
 * Option "tombstones": "rows" (the default) reads tombstone rows as any;
 * "absent" leaves out the tombstone rows of a side that is a registered
 * target, so that a key deleted at the source is absent on the target
 * whether the target keeps its deletes as tombstone rows or removes them
 * (delete_mode 'remove').
 */
static void
set_tombstones(SpecDraft *d)
{
	DiffSpec   *spec = d->spec;
	char	   *mode;

	if (d->opts.v[OPT_TOMBSTONES] == NULL)
		return;
	mode = opt_string(d->opts.v[OPT_TOMBSTONES], "tombstones", "\"rows\" or \"absent\"");
	if (strcmp(mode, "rows") == 0)
		return;
	if (strcmp(mode, "absent") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid value \"%s\" for option \"tombstones\"", mode),
				 errhint("Pass \"absent\" to leave out the tombstone rows of registered targets, or \"rows\" (the default) to read them as rows.")));
	spec->sdeleted = registered_deleted_column(spec->source);
	spec->tdeleted = registered_deleted_column(spec->target);
	if (spec->sdeleted == NULL && spec->tdeleted == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"tombstones\" needs a side registered with reconcile_register"),
				 errdetail("Neither \"%s\" nor \"%s\" is a registered target, so neither has a deleted column.",
						   spec->sname, spec->tname)));
}

/* ---------------------------------------------------------------------
 * Before a finding is reported: recheck, min_age; and the limits
 * ---------------------------------------------------------------------
 */

/* An interval's length in microseconds, a month counted as 30 days. */
static double
interval_usecs(Interval *iv)
{
	return (double) iv->time + (double) iv->day * USECS_PER_DAY +
		(double) iv->month * DAYS_PER_MONTH * USECS_PER_DAY;
}

/*
 * An option that is an interval of at least min_usecs and at most
 * max_usecs: any mistake is the option's (22023), with the hint.
 * interval_in's own error is caught and said as the option's; interval_in
 * keeps no state, so nothing needs undoing after it fails.
 */
static Interval *
opt_interval(JsonbValue *v, const char *option, double min_usecs, double max_usecs,
			 const char *hint)
{
	char	   *text;
	Interval   *volatile iv = NULL;
	MemoryContext cxt = CurrentMemoryContext;
	double		usecs;

	if (v->type != jbvString)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"%s\" must be an interval, such as \"30 seconds\"", option),
				 errhint("%s", hint)));
	text = pnstrdup(v->val.string.val, v->val.string.len);
	PG_TRY();
	{
		iv = DatumGetIntervalP(DirectFunctionCall3(interval_in, CStringGetDatum(text),
												   ObjectIdGetDatum(InvalidOid),
												   Int32GetDatum(-1)));
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_DATA_EXCEPTION)
			PG_RE_THROW();
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"%s\" must be an interval, such as \"30 seconds\"", option),
				 errdetail("\"%s\" does not read as an interval: %s", text, edata->message),
				 errhint("%s", hint)));
	}
	PG_END_TRY();
	usecs = interval_usecs(iv);
	if (iv->time < 0 || iv->day < 0 || iv->month < 0 || usecs < min_usecs || usecs > max_usecs)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"%s\" is out of range: \"%s\"", option, text),
				 errhint("%s", hint)));
	return iv;
}

#define RECHECK_HINT "Give \"recheck\" as {\"after\": \"30 seconds\", \"times\": 2}: the wait before each reread (up to 1 day) and how many rereads (1 to 100)."
#define MIN_AGE_HINT "Give \"min_age\" as an interval such as \"5 minutes\", with \"updated_column\" naming a date or timestamp column."
#define MAX_DIFFS_HINT "Give \"max_differences\" as a whole number of findings, such as 1000."
#define MAX_DURATION_HINT "Give \"max_duration\" as a positive interval, such as \"10 minutes\"."

/* The option "recheck": {"after": interval, "times": n}. */
static void
set_recheck(DiffSpec *spec, JsonbValue *v)
{
	int			n;
	OptPair    *pairs;
	bool		has_after = false;

	if (!jbv_is_object(v))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"recheck\" must be a JSON object"),
				 errhint(RECHECK_HINT)));
	pairs = opt_object(v, "recheck", "", &n);
	spec->recheck_times = 1;
	for (int i = 0; i < n; i++)
	{
		if (strcmp(pairs[i].name, "after") == 0)
		{
			Interval   *iv = opt_interval(&pairs[i].value, "recheck.after", 0,
										  (double) USECS_PER_DAY, RECHECK_HINT);

			spec->recheck_after_ms = (int64) (interval_usecs(iv) / 1000.0);
			has_after = true;
		}
		else if (strcmp(pairs[i].name, "times") == 0)
			spec->recheck_times = opt_int_hint(&pairs[i].value, "recheck.times", 1, 100,
											   RECHECK_HINT);
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown field \"%s\" in option \"recheck\"", pairs[i].name),
					 errdetail("Option \"recheck\" has the fields \"after\" and \"times\"."),
					 errhint(RECHECK_HINT)));
	}
	if (!has_after)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"recheck\" needs the field \"after\""),
				 errhint(RECHECK_HINT)));
}

/* The option "min_age": rows updated since now minus it are not compared. */
static void
set_min_age(SpecDraft *d, JsonbValue *v)
{
	DiffSpec   *spec = d->spec;
	Interval   *iv = opt_interval(v, "min_age", 0, 1e18, MIN_AGE_HINT);
	Oid			base;
	TypeCacheEntry *tce;

	if (spec->supd == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"min_age\" needs option \"updated_column\""),
				 errdetail("A row's age is read from the column of last update, which \"updated_column\" names."),
				 errhint(MIN_AGE_HINT)));
	base = getBaseType(spec->upd_type);
	if (base != TIMESTAMPTZOID && base != TIMESTAMPOID && base != DATEOID)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"min_age\" needs a date or timestamp updated column"),
				 errdetail("Updated column \"%s\" is of type %s.", spec->upd_name,
						   format_type_be(spec->upd_type)),
				 errhint(MIN_AGE_HINT)));
	spec->has_min_age = true;
	spec->young_after = now_minus(spec, iv, d->upd_in_zone);
	tce = lookup_type_cache(base, TYPECACHE_CMP_PROC_FINFO);
	fmgr_info_copy(&spec->upd_cmp, &tce->cmp_proc_finfo, CurrentMemoryContext);
	spec->upd_collation = InvalidOid;
}

/*
 * "recheck", "min_age", "max_differences" and "max_duration"; recheck and
 * min_age as given are kept for the runs' history.
 */
static void
set_recheck_and_limits(SpecDraft *d)
{
	DiffSpec   *spec = d->spec;
	DiffOptions *opts = &d->opts;

	if (opts->v[OPT_RECHECK])
		set_recheck(spec, opts->v[OPT_RECHECK]);
	if (opts->v[OPT_MIN_AGE])
		set_min_age(d, opts->v[OPT_MIN_AGE]);
	if (opts->v[OPT_MAX_DIFFS])
		spec->max_differences = opt_int_hint(opts->v[OPT_MAX_DIFFS], "max_differences",
											 1, 1000000000, MAX_DIFFS_HINT);
	if (opts->v[OPT_MAX_DURATION])
	{
		Interval   *iv = opt_interval(opts->v[OPT_MAX_DURATION], "max_duration", 1,
									  1e18, MAX_DURATION_HINT);

		spec->max_duration_ms = Max((int64) (interval_usecs(iv) / 1000.0), 1);
	}
	if (opts->v[OPT_RECHECK] || opts->v[OPT_MIN_AGE])
	{
		JsonbParseState *st = NULL;

		pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
		if (opts->v[OPT_RECHECK])
		{
			jsonb_push_key(&st, "recheck");
			pushJsonbValue(&st, WJB_VALUE, opts->v[OPT_RECHECK]);
		}
		if (opts->v[OPT_MIN_AGE])
		{
			jsonb_push_key(&st, "min_age");
			pushJsonbValue(&st, WJB_VALUE, opts->v[OPT_MIN_AGE]);
		}
		spec->recheck_settings = JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, NULL));
	}
}

/* diff_prepare and diff_validate, with or without the privilege checks. */
static DiffSpec *
prepare_spec(Oid source, Oid target, ArrayType *key_columns, Jsonb *options,
			 bool check_privileges)
{
	SpecDraft	d;
	Relation	srel,
				trel;

	memset(&d, 0, sizeof(d));
	d.spec = palloc0(sizeof(DiffSpec));
	d.check_privileges = check_privileges;
	read_key_columns(&d, key_columns);
	parse_options(options, &d.opts);
	d.spec->time_zone = option_time_zone(&d.opts);
	open_sides(&d, source, target, &srel, &trel);
	read_naming_options(&d);
	resolve_keys(&d);
	resolve_compared(&d);
	set_tolerances(&d);
	set_normalisations(&d);
	resolve_updated_column(&d);
	set_window_and_cutoff(&d);
	set_remote_options(d.spec, &d.opts);
	set_tombstones(&d);
	set_recheck_and_limits(&d);

	relation_close(srel, AccessShareLock);
	relation_close(trel, AccessShareLock);
	return d.spec;
}

/*
 * Check the arguments and options against both sides as they are now and
 * settle what to read and how to compare.  It runs no query, so that every
 * mistake in the arguments is reported before either side is read.
 */
DiffSpec *
diff_prepare(Oid source, Oid target, ArrayType *key_columns, Jsonb *options)
{
	return prepare_spec(source, target, key_columns, options, true);
}

/*
 * The same checks, leaving out the caller's right to read the sides: a
 * job is configured by a role that need not be the one that runs it, and
 * each run checks its runner's rights.  The resolved column names are in
 * the result.
 */
DiffSpec *
diff_validate(Oid source, Oid target, ArrayType *key_columns, Jsonb *options)
{
	return prepare_spec(source, target, key_columns, options, false);
}
