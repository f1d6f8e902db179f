/*
 * diff.c
 *		Reconciliation diff: what is missing, extra or different between a
 *		source and a target, matched by business key.
 *
 * Each side is read once, in key order, through an SPI cursor whose ORDER
 * BY the planner satisfies with a btree index on the key where there is
 * one, or with a sort that spills beyond work_mem where there is none.  The
 * two ordered streams are merged here: keys found on one side only are
 * missing or extra; paired rows are compared by a row hash first, and
 * column by column only when the hashes differ or a tolerance applies.  A
 * key that is NULL in part, or that is not unique on its side, is reported
 * and takes no further part.  Findings stream into a tuplestore (or are
 * only counted, for the summary); batches of fetched rows are freed as the
 * merge moves on, so memory stays flat however large the sides are.
 *
 * Everything runs with the caller's rights: SELECT on both sides is
 * checked up front, and row-level security applies to the reads.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
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
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/portal.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/typcache.h"

#include "diff.h"

PG_FUNCTION_INFO_V1(reconcile_diff);
PG_FUNCTION_INFO_V1(reconcile_diff_summary);

/*
 * Rows fetched from a side's cursor at a time: small batches stay in
 * memory the allocator reuses; large ones cost page faults on every batch.
 */
#define DIFF_FETCH_ROWS 100

static const char *const diff_option_names[] = {
	"compare", "ignore", "target_key_columns", "column_map", "trim_keys",
	"updated_column", "window", "cutoff", "tolerance"
};

#define DIFF_VALID_OPTIONS "compare, ignore, target_key_columns, column_map, trim_keys, updated_column, window, cutoff, tolerance"

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

static bool
jbv_is_container(JsonbValue *v, bool array)
{
	if (v->type != jbvBinary)
		return false;
	if (array)
		return JsonContainerIsArray(v->val.binary.data) &&
			!JsonContainerIsScalar(v->val.binary.data);
	return JsonContainerIsObject(v->val.binary.data);
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

	if (!jbv_is_container(v, true))
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

	if (!jbv_is_container(v, false))
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

static Form_pg_attribute
find_attribute(TupleDesc desc, const char *name)
{
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
			return att;
	}
	return NULL;
}

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

static char *
quoted_collation(Oid collid)
{
	HeapTuple	tup = SearchSysCache1(COLLOID, ObjectIdGetDatum(collid));
	Form_pg_collation coll;
	char	   *out;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for collation %u", collid);
	coll = (Form_pg_collation) GETSTRUCT(tup);
	out = quote_qualified_identifier(get_namespace_name(coll->collnamespace),
									 NameStr(coll->collname));
	ReleaseSysCache(tup);
	return out;
}

static DiffJsonKind
json_kind_of(Oid basetype)
{
	switch (basetype)
	{
		case BOOLOID:
			return DIFF_JSON_BOOL;
		case NUMERICOID:
			return DIFF_JSON_NUMERIC;
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case FLOAT4OID:
		case FLOAT8OID:
			return DIFF_JSON_NUMBER;
		case DATEOID:
		case TIMEOID:
		case TIMETZOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			return DIFF_JSON_DATETIME;
		case JSONBOID:
			return DIFF_JSON_JSONB;
		case JSONOID:
			return DIFF_JSON_JSON;
		default:
			return DIFF_JSON_STRING;
	}
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
	c->jkind = json_kind_of(c->basetype);
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

static Form_pg_attribute
require_attribute(TupleDesc desc, const char *name, const char *role,
				  const char *side, const char *relname, const char *hint)
{
	Form_pg_attribute att = find_attribute(desc, name);

	if (att == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("%s column \"%s\" does not exist in %s \"%s\"",
						role, name, side, relname),
				 hint ? errhint("%s", hint) : 0));
	return att;
}

static void
set_tolerance(DiffSpec *spec, DiffColumn *c, JsonbValue *v)
{
	switch (c->basetype)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case FLOAT4OID:
		case FLOAT8OID:
		case NUMERICOID:
			if (v->type != jbvNumeric)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("tolerance of column \"%s\" must be a number", c->name),
						 errdetail("Column \"%s\" is of type %s; its tolerance is the largest absolute difference that still counts as equal.",
								   c->name, format_type_be(c->typid))));
			if (numeric_is_nan(v->val.numeric) ||
				DatumGetBool(DirectFunctionCall2(numeric_lt, NumericGetDatum(v->val.numeric),
												 DirectFunctionCall1(int4_numeric, Int32GetDatum(0)))))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("tolerance of column \"%s\" must not be negative", c->name)));
			c->tolerance = DIFF_TOL_NUMERIC;
			c->tol_numeric = datumCopy(NumericGetDatum(v->val.numeric), false, -1);
			/* Compared in numeric: both sides are read as numeric. */
			if (c->basetype != NUMERICOID)
			{
				c->sexpr = psprintf("CAST(%s AS pg_catalog.numeric)", c->sexpr);
				c->texpr = psprintf("CAST(%s AS pg_catalog.numeric)", c->texpr);
				c->typid = c->basetype = NUMERICOID;
				c->typlen = -1;
				c->typbyval = false;
				fmgr_info(F_NUMERIC_OUT, &c->out);
				c->jkind = DIFF_JSON_NUMERIC;
			}
			break;
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

static Datum
window_bound(DiffSpec *spec, JsonbValue *v, const char *which)
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
	getTypeInputInfo(spec->upd_type, &infunc, &ioparam);
	WITH_OPTION_CONTEXT("window", result = OidInputFunctionCall(infunc, text, ioparam, -1));
	return result;
}

/*
 * Check the arguments and options against both sides as they are now and
 * settle what to read and how to compare.  It runs no query, so that every
 * mistake in the arguments is reported before either side is read.
 */
DiffSpec *
diff_prepare(Oid source, Oid target, ArrayType *key_columns, Jsonb *options)
{
	DiffSpec   *spec = palloc0(sizeof(DiffSpec));
	DiffOptions opts;
	Relation	srel,
				trel;
	TupleDesc	sdesc,
				tdesc;
	char	  **keys;
	char	  **tkeys = NULL;
	int			nkeys,
				ntkeys = 0;
	OptPair    *map = NULL;
	int			nmap = 0;
	bool		trim = false;
	char	  **compare = NULL;
	int			ncompare = 0;
	char	  **ignore = NULL;
	int			nignore = 0;
	const char *map_hint = "Map differing names with the option \"column_map\", or leave the column out.";

	/* Arguments. */
	if (ARR_NDIM(key_columns) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key_columns must be a one-dimensional array")));
	{
		Datum	   *elems;
		bool	   *nulls;

		deconstruct_array(key_columns, TEXTOID, -1, false, TYPALIGN_INT,
						  &elems, &nulls, &nkeys);
		if (nkeys == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("key_columns must name at least one column")));
		keys = palloc(sizeof(char *) * nkeys);
		for (int i = 0; i < nkeys; i++)
		{
			if (nulls[i])
				ereport(ERROR,
						(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
						 errmsg("key_columns must not contain nulls")));
			keys[i] = TextDatumGetCString(elems[i]);
			for (int j = 0; j < i; j++)
				if (strcmp(keys[i], keys[j]) == 0)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("key column \"%s\" is named more than once", keys[i])));
		}
	}
	parse_options(options, &opts);

	/* Both sides: what they are and whether the caller may read them. */
	srel = relation_open(source, AccessShareLock);
	trel = relation_open(target, AccessShareLock);
	check_relation_kind(srel, "source");
	check_relation_kind(trel, "target");
	check_select_any(source, "source");
	check_select_any(target, "target");
	spec->source = source;
	spec->target = target;
	spec->sname = pstrdup(RelationGetRelationName(srel));
	spec->tname = pstrdup(RelationGetRelationName(trel));
	spec->squal = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(srel)),
											 spec->sname);
	spec->tqual = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(trel)),
											 spec->tname);
	sdesc = RelationGetDescr(srel);
	tdesc = RelationGetDescr(trel);

	/* Naming options. */
	if (opts.v[OPT_COLUMN_MAP])
	{
		map = opt_object(opts.v[OPT_COLUMN_MAP], "column_map",
						 "from source column names to target column names", &nmap);
		for (int i = 0; i < nmap; i++)
		{
			if (map[i].value.type != jbvString)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("option \"column_map\" must map column names to column names"),
						 errdetail("The value for \"%s\" is not a string.", map[i].name)));
			map[i].value.val.string.val = pnstrdup(map[i].value.val.string.val,
												   map[i].value.val.string.len);
			require_attribute(sdesc, map[i].name, "mapped", "source", spec->sname, NULL);
			require_attribute(tdesc, map[i].value.val.string.val, "mapped", "target",
							  spec->tname, NULL);
		}
	}
	if (opts.v[OPT_TARGET_KEYS])
	{
		tkeys = opt_name_array(opts.v[OPT_TARGET_KEYS], "target_key_columns", &ntkeys);
		if (ntkeys != nkeys)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"target_key_columns\" names %d columns, but key_columns names %d",
							ntkeys, nkeys),
					 errdetail("The target's key columns pair up with the source's in order.")));
	}
	if (opts.v[OPT_TRIM_KEYS])
	{
		if (opts.v[OPT_TRIM_KEYS]->type != jbvBool)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"trim_keys\" must be true or false")));
		trim = opts.v[OPT_TRIM_KEYS]->val.boolean;
	}

	/* Keys. */
	spec->nkeys = nkeys;
	spec->keys = palloc0(sizeof(DiffColumn) * nkeys);
	for (int i = 0; i < nkeys; i++)
	{
		DiffColumn *c = &spec->keys[i];
		Form_pg_attribute sa,
					ta;

		c->name = keys[i];
		c->tname = pstrdup(tkeys ? tkeys[i] : map_column(map, nmap, keys[i]));
		sa = require_attribute(sdesc, c->name, "key", "source", spec->sname, NULL);
		ta = require_attribute(tdesc, c->tname, "key", "target", spec->tname,
							   "Name the target's key columns with the option \"target_key_columns\", or map them with \"column_map\".");
		resolve_column_type(spec, c, sa, ta, "key", trim);
		prepare_ordering(spec, c);
		check_select_column(source, "source", c->name);
		check_select_column(target, "target", c->tname);
	}

	/* Compared columns: the given ones, or all on both sides but the key. */
	if (opts.v[OPT_COMPARE])
		compare = opt_name_array(opts.v[OPT_COMPARE], "compare", &ncompare);
	if (opts.v[OPT_IGNORE])
		ignore = opt_name_array(opts.v[OPT_IGNORE], "ignore", &nignore);
	for (int i = 0; i < nignore; i++)
	{
		require_attribute(sdesc, ignore[i], "ignored", "source", spec->sname, NULL);
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
			if (!skip && find_attribute(tdesc, map_column(map, nmap, NameStr(att->attname))) == NULL)
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
		c->tname = pstrdup(map_column(map, nmap, compare[i]));
		sa = require_attribute(sdesc, c->name, "compared", "source", spec->sname, NULL);
		ta = require_attribute(tdesc, c->tname, "compared", "target", spec->tname, map_hint);
		resolve_column_type(spec, c, sa, ta, "compared", false);
		prepare_comparison(c);
		check_select_column(source, "source", c->name);
		check_select_column(target, "target", c->tname);
	}

	/* Tolerances, on compared columns only. */
	if (opts.v[OPT_TOLERANCE])
	{
		int			ntol;
		OptPair    *tol = opt_object(opts.v[OPT_TOLERANCE], "tolerance",
									 "from column names to tolerances", &ntol);

		for (int i = 0; i < ntol; i++)
		{
			DiffColumn *c = NULL;

			for (int j = 0; j < spec->ncols; j++)
				if (strcmp(spec->cols[j].name, tol[i].name) == 0)
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

	/* The window on the updated column, and the cutoff. */
	if (opts.v[OPT_UPDATED])
	{
		char	   *supd = opt_string(opts.v[OPT_UPDATED], "updated_column",
									  "the name of the source's column of last update");
		const char *tupd = map_column(map, nmap, supd);
		Form_pg_attribute sa = require_attribute(sdesc, supd, "updated", "source",
												 spec->sname, NULL);
		Form_pg_attribute ta = require_attribute(tdesc, tupd, "updated", "target",
												 spec->tname, map_hint);
		DiffColumn	tmp;

		memset(&tmp, 0, sizeof(tmp));
		tmp.name = supd;
		resolve_column_type(spec, &tmp, sa, ta, "updated", false);
		if (!OidIsValid(lookup_type_cache(tmp.basetype, TYPECACHE_LT_OPR)->lt_opr))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_FUNCTION),
					 errmsg("updated column \"%s\" of type %s cannot be ordered",
							supd, format_type_be(tmp.typid))));
		spec->supd = tmp.sexpr;
		spec->tupd = tmp.texpr;
		spec->upd_type = tmp.typid;
		check_select_column(source, "source", supd);
		check_select_column(target, "target", tupd);
	}
	if (opts.v[OPT_WINDOW])
	{
		int			n;
		JsonbValue *bounds;

		if (spec->supd == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"window\" needs option \"updated_column\""),
					 errdetail("The window bounds the column of last update, which \"updated_column\" names.")));
		bounds = opt_array(opts.v[OPT_WINDOW], "window", "two bounds, [from, to]", &n);
		if (n != 2)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"window\" must be a JSON array of two bounds, [from, to]"),
					 errdetail_plural("It has %d element.", "It has %d elements.", n, n),
					 errhint("Use null for an open end.")));
		if (bounds[0].type != jbvNull)
		{
			spec->has_lo = true;
			spec->window_lo = window_bound(spec, &bounds[0], "start");
		}
		if (bounds[1].type != jbvNull)
		{
			spec->has_hi = true;
			spec->window_hi = window_bound(spec, &bounds[1], "end");
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
	if (opts.v[OPT_CUTOFF])
	{
		char	   *cutoff = opt_string(opts.v[OPT_CUTOFF], "cutoff", "\"source_max\"");

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

	relation_close(srel, AccessShareLock);
	relation_close(trel, AccessShareLock);
	return spec;
}

/* ---------------------------------------------------------------------
 * Reading a side in key order
 * ---------------------------------------------------------------------
 */

typedef struct DiffSide
{
	bool		is_source;
	Portal		portal;
	TupleDesc	desc;
	bool		drained;		/* the cursor has no more rows */
	SPITupleTable *cur;			/* batch being read */
	SPITupleTable *old;			/* the one before, kept while a row needs it */
	uint64		pos;

	/* The current key group's first row. */
	HeapTuple	head;
	SPITupleTable *head_tt;		/* its batch; NULL once copied */
	Datum	   *hv;
	bool	   *hn;
	bool		have_prev;		/* hv before the swap was a valid key */
	MemoryContext headcxt;

	/* The row after the group, read ahead. */
	bool		has_look;
	HeapTuple	look;
	Datum	   *lv;
	bool	   *ln;

	bool		eof;
	bool		dup;			/* the current group is a duplicate key */
	int64		rows;
} DiffSide;

typedef struct DiffExec
{
	DiffSpec   *spec;
	Tuplestorestate *ts;		/* NULL: only count */
	TupleDesc	desc;
	DiffCounts *counts;
	int			natts;			/* keys, then compared columns */
	int		   *diffcols;
	DiffSide	src;
	DiffSide	tgt;
} DiffExec;

static void
side_copy_head(DiffExec *ex, DiffSide *side)
{
	MemoryContext old;

	/* An earlier copied head is no longer needed. */
	MemoryContextReset(side->headcxt);
	old = MemoryContextSwitchTo(side->headcxt);
	side->head = heap_copytuple(side->head);
	heap_deform_tuple(side->head, side->desc, side->hv, side->hn);
	side->head_tt = NULL;
	MemoryContextSwitchTo(old);
}

static HeapTuple
side_fetch(DiffExec *ex, DiffSide *side)
{
	MemoryContext cxt;

	if (side->cur && side->pos < side->cur->numvals)
		return side->cur->vals[side->pos++];
	if (side->drained)
		return NULL;
	if (side->old)
	{
		if (side->head_tt == side->old)
			side_copy_head(ex, side);
		SPI_freetuptable(side->old);
	}
	side->old = side->cur;
	/* SPI returns in its own procedure context: come back to the row's. */
	cxt = CurrentMemoryContext;
	SPI_cursor_fetch(side->portal, true, DIFF_FETCH_ROWS);
	MemoryContextSwitchTo(cxt);
	side->cur = SPI_tuptable;
	side->pos = 0;
	if (SPI_processed == 0)
	{
		side->drained = true;
		return NULL;
	}
	return side->cur->vals[side->pos++];
}

static bool
key_has_null(DiffExec *ex, bool *n)
{
	for (int i = 0; i < ex->spec->nkeys; i++)
		if (n[i])
			return true;
	return false;
}

/* Both keys without NULLs. */
static int
compare_keys(DiffExec *ex, Datum *av, bool *an, Datum *bv, bool *bn)
{
	for (int i = 0; i < ex->spec->nkeys; i++)
	{
		int			c = ApplySortComparator(av[i], an[i], bv[i], bn[i],
											&ex->spec->keys[i].ssup);

		if (c != 0)
			return c;
	}
	return 0;
}

/* ---------------------------------------------------------------------
 * Findings
 * ---------------------------------------------------------------------
 */

static void
push_datum(JsonbParseState **st, DiffColumn *c, Datum d, bool isnull,
		   JsonbIteratorToken token)
{
	JsonbValue	v;
	char	   *s = NULL;

	if (isnull)
	{
		v.type = jbvNull;
		pushJsonbValue(st, token, &v);
		return;
	}
	switch (c->jkind)
	{
		case DIFF_JSON_BOOL:
			v.type = jbvBool;
			v.val.boolean = DatumGetBool(d);
			break;
		case DIFF_JSON_NUMERIC:
			if (numeric_is_nan(DatumGetNumeric(d)) || numeric_is_inf(DatumGetNumeric(d)))
				s = OutputFunctionCall(&c->out, d);
			else
			{
				v.type = jbvNumeric;
				v.val.numeric = DatumGetNumeric(d);
			}
			break;
		case DIFF_JSON_NUMBER:
			s = OutputFunctionCall(&c->out, d);
			if (IsValidJsonNumber(s, strlen(s)))
			{
				v.type = jbvNumeric;
				v.val.numeric = DatumGetNumeric(DirectFunctionCall3(numeric_in, CStringGetDatum(s),
																	ObjectIdGetDatum(InvalidOid),
																	Int32GetDatum(-1)));
				s = NULL;
			}
			break;
		case DIFF_JSON_DATETIME:
			s = JsonEncodeDateTime(NULL, d, c->basetype, NULL);
			break;
		case DIFF_JSON_JSONB:
		case DIFF_JSON_JSON:
			{
				Jsonb	   *jb;

				if (c->jkind == DIFF_JSON_JSONB)
					jb = DatumGetJsonbP(d);
				else
					jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in,
															CStringGetDatum(OutputFunctionCall(&c->out, d))));
				if (JB_ROOT_IS_SCALAR(jb))
					JsonbExtractScalar(&jb->root, &v);
				else
				{
					v.type = jbvBinary;
					v.val.binary.data = &jb->root;
					v.val.binary.len = VARSIZE(jb) - VARHDRSZ;
				}
			}
			break;
		default:
			s = OutputFunctionCall(&c->out, d);
			break;
	}
	if (s != NULL)
	{
		v.type = jbvString;
		v.val.string.val = s;
		v.val.string.len = strlen(s);
	}
	pushJsonbValue(st, token, &v);
}

static void
push_key_name(JsonbParseState **st, const char *name)
{
	JsonbValue	k;

	k.type = jbvString;
	k.val.string.val = (char *) name;
	k.val.string.len = strlen(name);
	pushJsonbValue(st, WJB_KEY, &k);
}

static Jsonb *
key_jsonb(DiffExec *ex, Datum *v, bool *n)
{
	JsonbParseState *st = NULL;
	JsonbValue *res;

	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	for (int i = 0; i < ex->spec->nkeys; i++)
	{
		push_key_name(&st, ex->spec->keys[i].name);
		push_datum(&st, &ex->spec->keys[i], v[i], n[i], WJB_VALUE);
	}
	res = pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	return JsonbValueToJsonb(res);
}

/* The compared columns of a row (which == NULL: all) as an object. */
static JsonbValue *
push_values(JsonbParseState **st, DiffExec *ex, Datum *v, bool *n,
			int *which, int nwhich)
{
	int			k = ex->spec->nkeys;
	int			count = which ? nwhich : ex->spec->ncols;

	pushJsonbValue(st, WJB_BEGIN_OBJECT, NULL);
	for (int j = 0; j < count; j++)
	{
		int			i = which ? which[j] : j;

		push_key_name(st, ex->spec->cols[i].name);
		push_datum(st, &ex->spec->cols[i], v[k + i], n[k + i], WJB_VALUE);
	}
	return pushJsonbValue(st, WJB_END_OBJECT, NULL);
}

static Jsonb *
values_jsonb(DiffExec *ex, Datum *v, bool *n, int *which, int nwhich)
{
	JsonbParseState *st = NULL;

	return JsonbValueToJsonb(push_values(&st, ex, v, n, which, nwhich));
}

static void
emit(DiffExec *ex, const char *issue, Jsonb *key, Datum columns,
	 Jsonb *sv, Jsonb *tv)
{
	Datum		values[DIFF_FINDING_NATTS];
	bool		nulls[DIFF_FINDING_NATTS];

	values[0] = CStringGetTextDatum(issue);
	nulls[0] = false;
	values[1] = JsonbPGetDatum(key);
	nulls[1] = false;
	values[2] = columns;
	nulls[2] = (columns == (Datum) 0);
	values[3] = sv ? JsonbPGetDatum(sv) : (Datum) 0;
	nulls[3] = (sv == NULL);
	values[4] = tv ? JsonbPGetDatum(tv) : (Datum) 0;
	nulls[4] = (tv == NULL);
	tuplestore_putvalues(ex->ts, ex->desc, values, nulls);
}

/* A row found on one side only, or with a NULL in its key. */
static void
emit_row(DiffExec *ex, DiffSide *side, const char *issue)
{
	Jsonb	   *vals;

	if (ex->ts == NULL)
		return;
	vals = values_jsonb(ex, side->hv, side->hn, NULL, 0);
	emit(ex, issue, key_jsonb(ex, side->hv, side->hn), (Datum) 0,
		 side->is_source ? vals : NULL, side->is_source ? NULL : vals);
}

/* ---------------------------------------------------------------------
 * Comparing a pair of rows
 * ---------------------------------------------------------------------
 */

/*
 * The hash of a row's compared columns (tolerance columns aside), over
 * their stored bytes: equal bytes mean equal values for every type, so
 * equal hashes settle the common case of an unchanged row without calling
 * any type's functions.  Values that are equal in different bytes (1.0 and
 * 1.00) only make the hashes differ, and the columns are then compared
 * with the type's own equality.
 */
static uint64
row_hash(DiffExec *ex, Datum *v, bool *n)
{
	uint64		h = 0;
	int			k = ex->spec->nkeys;

	for (int i = 0; i < ex->spec->ncols; i++)
	{
		DiffColumn *c = &ex->spec->cols[i];
		Datum		d = v[k + i];
		uint64		ch;

		if (c->tolerance != DIFF_TOL_NONE)
			continue;
		if (n[k + i])
			ch = UINT64CONST(0x9e3779b97f4a7c15);
		else if (c->typbyval)
			ch = hash_bytes_uint32_extended((uint32) d, (uint64) d >> 32);
		else if (c->typlen > 0)
			ch = hash_bytes_extended((const unsigned char *) DatumGetPointer(d), c->typlen, 0);
		else if (c->typlen == -1)
		{
			struct varlena *p = (struct varlena *) DatumGetPointer(d);

			if (VARATT_IS_EXTENDED(p) && !VARATT_IS_SHORT(p))
				p = pg_detoast_datum_packed(p);
			ch = hash_bytes_extended((const unsigned char *) VARDATA_ANY(p),
									 VARSIZE_ANY_EXHDR(p), 0);
		}
		else
		{
			const char *p = DatumGetCString(d);

			ch = hash_bytes_extended((const unsigned char *) p, strlen(p), 0);
		}
		h = hash_combine64(h, ch);
	}
	return h;
}

static bool
within_usecs(int64 a, int64 b, int64 tol)
{
	int64		d;

	if (pg_sub_s64_overflow(a, b, &d))
		return false;
	if (d < 0)
		d = -d;
	return d <= tol;
}

static bool
values_equal(DiffColumn *c, Datum a, bool an, Datum b, bool bn)
{
	if (an || bn)
		return an && bn;
	if (c->has_eq &&
		DatumGetBool(FunctionCall2Coll(&c->eq, c->collation, a, b)))
		return true;
	if (!c->has_eq &&
		strcmp(OutputFunctionCall(&c->out, a), OutputFunctionCall(&c->out, b)) == 0)
		return true;

	switch (c->tolerance)
	{
		case DIFF_TOL_NONE:
			return false;
		case DIFF_TOL_NUMERIC:
			{
				Numeric		na = DatumGetNumeric(a);
				Numeric		nb = DatumGetNumeric(b);
				Datum		d;

				if (numeric_is_nan(na) || numeric_is_nan(nb) ||
					numeric_is_inf(na) || numeric_is_inf(nb))
					return false;
				d = DirectFunctionCall1(numeric_abs,
										DirectFunctionCall2(numeric_sub, a, b));
				return DatumGetBool(DirectFunctionCall2(numeric_le, d, c->tol_numeric));
			}
		case DIFF_TOL_TIME:
			switch (c->basetype)
			{
				case TIMESTAMPOID:
				case TIMESTAMPTZOID:
					if (TIMESTAMP_NOT_FINITE(DatumGetTimestamp(a)) ||
						TIMESTAMP_NOT_FINITE(DatumGetTimestamp(b)))
						return false;
					return within_usecs(DatumGetTimestamp(a), DatumGetTimestamp(b),
										c->tol_usecs);
				case DATEOID:
					if (DATE_NOT_FINITE(DatumGetDateADT(a)) ||
						DATE_NOT_FINITE(DatumGetDateADT(b)))
						return false;
					return within_usecs((int64) DatumGetDateADT(a) * USECS_PER_DAY,
										(int64) DatumGetDateADT(b) * USECS_PER_DAY,
										c->tol_usecs);
				case TIMEOID:
					return within_usecs(DatumGetTimeADT(a), DatumGetTimeADT(b),
										c->tol_usecs);
			}
			return false;
	}
	return false;
}

static void
compare_pair(DiffExec *ex)
{
	DiffSpec   *spec = ex->spec;
	Datum	   *sv = ex->src.hv;
	bool	   *sn = ex->src.hn;
	Datum	   *tv = ex->tgt.hv;
	bool	   *tn = ex->tgt.hn;
	int			k = spec->nkeys;
	int			ndiff = 0;
	bool		hashes_differ;

	/* Equal row hashes mean equal columns (tolerance columns aside). */
	hashes_differ = row_hash(ex, sv, sn) != row_hash(ex, tv, tn);
	for (int i = 0; i < spec->ncols; i++)
	{
		DiffColumn *c = &spec->cols[i];

		if (!hashes_differ && c->tolerance == DIFF_TOL_NONE)
			continue;
		if (!values_equal(c, sv[k + i], sn[k + i], tv[k + i], tn[k + i]))
			ex->diffcols[ndiff++] = i;
	}
	if (ndiff == 0)
	{
		ex->counts->matched++;
		return;
	}
	ex->counts->mismatched++;
	for (int j = 0; j < ndiff; j++)
		ex->counts->column_mismatches[ex->diffcols[j]]++;
	if (ex->ts)
	{
		Datum	   *names = palloc(sizeof(Datum) * ndiff);
		ArrayType  *arr;

		for (int j = 0; j < ndiff; j++)
			names[j] = CStringGetTextDatum(spec->cols[ex->diffcols[j]].name);
		arr = construct_array(names, ndiff, TEXTOID, -1, false, TYPALIGN_INT);
		emit(ex, "MISMATCH", key_jsonb(ex, sv, sn), PointerGetDatum(arr),
			 values_jsonb(ex, sv, sn, ex->diffcols, ndiff),
			 values_jsonb(ex, tv, tn, ex->diffcols, ndiff));
	}
}

/* ---------------------------------------------------------------------
 * The merge
 * ---------------------------------------------------------------------
 */

static void
swap_head_look(DiffSide *side)
{
	Datum	   *v = side->hv;
	bool	   *n = side->hn;

	side->hv = side->lv;
	side->hn = side->ln;
	side->lv = v;
	side->ln = n;
	side->head = side->look;
	side->head_tt = side->cur;
	side->has_look = false;
}

/*
 * Move a side to its next key group.  Rows with a NULL in the key are
 * reported on the way; a key with several rows is reported once, with all
 * of them, and marked so that the merge does not pair it.
 */
static void
side_next_group(DiffExec *ex, DiffSide *side)
{
	const char *null_issue = side->is_source ? "NULL_KEY_IN_SOURCE" : "NULL_KEY_IN_TARGET";
	const char *dup_issue = side->is_source ? "DUPLICATE_KEY_IN_SOURCE" : "DUPLICATE_KEY_IN_TARGET";

	for (;;)
	{
		HeapTuple	t;
		JsonbParseState *dupst = NULL;

		CHECK_FOR_INTERRUPTS();
		if (!side->has_look)
		{
			t = side_fetch(ex, side);
			if (t == NULL)
			{
				side->eof = true;
				return;
			}
			side->rows++;
			side->look = t;
			heap_deform_tuple(t, side->desc, side->lv, side->ln);
			side->has_look = true;
		}
		swap_head_look(side);

		if (key_has_null(ex, side->hn))
		{
			ex->counts->null_keys++;
			emit_row(ex, side, null_issue);
			side->have_prev = false;
			continue;
		}
		/* The ORDER BY and this comparison must agree, or the merge is wrong. */
		if (side->have_prev &&
			compare_keys(ex, side->lv, side->ln, side->hv, side->hn) >= 0)
			elog(ERROR, "rows of the %s are not in key order",
				 side->is_source ? "source" : "target");
		side->have_prev = true;

		side->dup = false;
		while ((t = side_fetch(ex, side)) != NULL)
		{
			side->rows++;
			heap_deform_tuple(t, side->desc, side->lv, side->ln);
			if (key_has_null(ex, side->ln) ||
				compare_keys(ex, side->hv, side->hn, side->lv, side->ln) != 0)
			{
				side->look = t;
				side->has_look = true;
				break;
			}
			if (!side->dup)
			{
				side->dup = true;
				ex->counts->duplicate_keys++;
				if (ex->ts)
				{
					pushJsonbValue(&dupst, WJB_BEGIN_ARRAY, NULL);
					push_values(&dupst, ex, side->hv, side->hn, NULL, 0);
				}
			}
			if (ex->ts)
				push_values(&dupst, ex, side->lv, side->ln, NULL, 0);
			CHECK_FOR_INTERRUPTS();
		}
		/*
		 * The look-ahead row's values now sit in lv; the head stays valid
		 * (side_fetch copies it before freeing its batch).
		 */
		if (side->dup && ex->ts)
		{
			Jsonb	   *copies = JsonbValueToJsonb(pushJsonbValue(&dupst, WJB_END_ARRAY, NULL));

			emit(ex, dup_issue, key_jsonb(ex, side->hv, side->hn), (Datum) 0,
				 side->is_source ? copies : NULL, side->is_source ? NULL : copies);
		}
		return;
	}
}

static void
append_where(StringInfo sql, DiffSpec *spec, const char *upd, bool target,
			 Datum cutoff, bool has_cutoff, Oid *types, Datum *values, int *nparams)
{
	const char *sep = " WHERE ";

	if (upd == NULL)
		return;
	if (spec->has_lo)
	{
		types[*nparams] = spec->upd_type;
		values[(*nparams)++] = spec->window_lo;
		appendStringInfo(sql, "%s%s OPERATOR(pg_catalog.>=) $%d", sep, upd, *nparams);
		sep = " AND ";
	}
	if (spec->has_hi)
	{
		types[*nparams] = spec->upd_type;
		values[(*nparams)++] = spec->window_hi;
		appendStringInfo(sql, "%s%s OPERATOR(pg_catalog.<=) $%d", sep, upd, *nparams);
		sep = " AND ";
	}
	if (target && has_cutoff)
	{
		types[*nparams] = spec->upd_type;
		values[(*nparams)++] = cutoff;
		appendStringInfo(sql, "%s%s OPERATOR(pg_catalog.<=) $%d", sep, upd, *nparams);
	}
}

static void
side_open(DiffExec *ex, DiffSide *side, bool is_source, Datum cutoff, bool has_cutoff)
{
	DiffSpec   *spec = ex->spec;
	StringInfoData sql;
	Oid			types[3];
	Datum		values[3];
	int			nparams = 0;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	for (int i = 0; i < spec->nkeys; i++)
		appendStringInfo(&sql, "%s%s", i ? ", " : "",
						 is_source ? spec->keys[i].sexpr : spec->keys[i].texpr);
	for (int i = 0; i < spec->ncols; i++)
		appendStringInfo(&sql, ", %s", is_source ? spec->cols[i].sexpr : spec->cols[i].texpr);
	appendStringInfo(&sql, " FROM %s", is_source ? spec->squal : spec->tqual);
	append_where(&sql, spec, is_source ? spec->supd : spec->tupd, !is_source,
				 cutoff, has_cutoff, types, values, &nparams);
	appendStringInfoString(&sql, " ORDER BY ");
	for (int i = 0; i < spec->nkeys; i++)
	{
		DiffColumn *c = &spec->keys[i];
		Oid			own = is_source ? c->scollation : c->tcollation;

		appendStringInfo(&sql, "%s%s", i ? ", " : "", is_source ? c->sexpr : c->texpr);
		/* Both sides in the same order; the same collation keeps an index usable. */
		if (OidIsValid(c->collation) && own != c->collation)
			appendStringInfo(&sql, " COLLATE %s", quoted_collation(c->collation));
	}

	side->is_source = is_source;
	side->portal = SPI_cursor_open_with_args(NULL, sql.data, nparams, types, values,
											 NULL, true, CURSOR_OPT_NO_SCROLL);
	side->desc = side->portal->tupDesc;
	side->headcxt = AllocSetContextCreate(CurrentMemoryContext, "reconcile diff head",
										  ALLOCSET_SMALL_SIZES);
	side->hv = palloc(sizeof(Datum) * ex->natts);
	side->hn = palloc(sizeof(bool) * ex->natts);
	side->lv = palloc(sizeof(Datum) * ex->natts);
	side->ln = palloc(sizeof(bool) * ex->natts);
}

/* The newest source row's update time in the window; false if none. */
static bool
source_max(DiffSpec *spec, Datum *result)
{
	StringInfoData sql;
	Oid			types[3];
	Datum		values[3];
	int			nparams = 0;
	bool		isnull;

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT pg_catalog.max(%s) FROM %s", spec->supd, spec->squal);
	append_where(&sql, spec, spec->supd, false, (Datum) 0, false, types, values, &nparams);
	if (SPI_execute_with_args(sql.data, nparams, types, values, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the newest update of the source");
	*result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull)
	{
		int16		typlen;
		bool		typbyval;

		get_typlenbyval(spec->upd_type, &typlen, &typbyval);
		*result = datumCopy(*result, typbyval, typlen);
	}
	return !isnull;
}

/*
 * Run a prepared diff: findings into ts (when not NULL), counts into
 * counts.  The caller holds an SPI connection.
 */
void
diff_execute(DiffSpec *spec, Tuplestorestate *ts, TupleDesc desc, DiffCounts *counts)
{
	DiffExec	ex;
	MemoryContext callercxt = CurrentMemoryContext;
	MemoryContext rowcxt,
				old;
	Datum		cutoff = (Datum) 0;
	bool		has_cutoff = false;

	memset(&ex, 0, sizeof(ex));
	memset(counts, 0, sizeof(DiffCounts));
	counts->column_mismatches = palloc0(sizeof(int64) * Max(spec->ncols, 1));
	ex.spec = spec;
	ex.ts = ts;
	ex.desc = desc;
	ex.counts = counts;
	ex.natts = spec->nkeys + spec->ncols;
	ex.diffcols = palloc(sizeof(int) * Max(spec->ncols, 1));

	if (spec->cutoff_source_max)
		has_cutoff = source_max(spec, &cutoff);
	MemoryContextSwitchTo(callercxt);
	side_open(&ex, &ex.src, true, cutoff, has_cutoff);
	MemoryContextSwitchTo(callercxt);
	side_open(&ex, &ex.tgt, false, cutoff, has_cutoff);
	MemoryContextSwitchTo(callercxt);

	rowcxt = AllocSetContextCreate(CurrentMemoryContext, "reconcile diff row",
								   ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(rowcxt);
	side_next_group(&ex, &ex.src);
	side_next_group(&ex, &ex.tgt);
	while (!ex.src.eof || !ex.tgt.eof)
	{
		int			c;

		CHECK_FOR_INTERRUPTS();
		if (ex.src.eof)
			c = 1;
		else if (ex.tgt.eof)
			c = -1;
		else
			c = compare_keys(&ex, ex.src.hv, ex.src.hn, ex.tgt.hv, ex.tgt.hn);

		if (c < 0)
		{
			if (!ex.src.dup)
			{
				counts->missing_in_target++;
				emit_row(&ex, &ex.src, "MISSING_IN_TARGET");
			}
			MemoryContextReset(rowcxt);
			side_next_group(&ex, &ex.src);
		}
		else if (c > 0)
		{
			if (!ex.tgt.dup)
			{
				counts->extra_in_target++;
				emit_row(&ex, &ex.tgt, "EXTRA_IN_TARGET");
			}
			MemoryContextReset(rowcxt);
			side_next_group(&ex, &ex.tgt);
		}
		else
		{
			/* A duplicate key is reported as such, never paired. */
			if (!ex.src.dup && !ex.tgt.dup)
				compare_pair(&ex);
			MemoryContextReset(rowcxt);
			side_next_group(&ex, &ex.src);
			side_next_group(&ex, &ex.tgt);
		}
	}
	MemoryContextSwitchTo(old);
	MemoryContextDelete(rowcxt);

	counts->rows_source = ex.src.rows;
	counts->rows_target = ex.tgt.rows;
	SPI_cursor_close(ex.src.portal);
	SPI_cursor_close(ex.tgt.portal);
	if (ex.src.cur)
		SPI_freetuptable(ex.src.cur);
	if (ex.src.old)
		SPI_freetuptable(ex.src.old);
	if (ex.tgt.cur)
		SPI_freetuptable(ex.tgt.cur);
	if (ex.tgt.old)
		SPI_freetuptable(ex.tgt.old);
	MemoryContextDelete(ex.src.headcxt);
	MemoryContextDelete(ex.tgt.headcxt);
}

Jsonb *
diff_column_counts_jsonb(DiffSpec *spec, DiffCounts *counts)
{
	JsonbParseState *st = NULL;
	JsonbValue *res;

	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	for (int i = 0; i < spec->ncols; i++)
	{
		JsonbValue	v;

		push_key_name(&st, spec->cols[i].name);
		v.type = jbvNumeric;
		v.val.numeric = DatumGetNumeric(DirectFunctionCall1(int8_numeric,
															Int64GetDatum(counts->column_mismatches[i])));
		pushJsonbValue(&st, WJB_VALUE, &v);
	}
	res = pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	return JsonbValueToJsonb(res);
}

int64
diff_findings_total(DiffCounts *counts)
{
	return counts->missing_in_target + counts->extra_in_target +
		counts->mismatched + counts->duplicate_keys + counts->null_keys;
}

/* ---------------------------------------------------------------------
 * SQL-callable functions
 * ---------------------------------------------------------------------
 */

static void
check_diff_args(FunctionCallInfo fcinfo)
{
	static const char *const names[] = {"source", "target", "key_columns"};

	for (int i = 0; i < lengthof(names); i++)
		if (PG_ARGISNULL(i))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("argument %s must not be null", names[i])));
}

static DiffSpec *
prepare_from_args(FunctionCallInfo fcinfo)
{
	check_diff_args(fcinfo);
	return diff_prepare(PG_GETARG_OID(0), PG_GETARG_OID(1),
						PG_GETARG_ARRAYTYPE_P(2),
						PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3));
}

Datum
reconcile_diff(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	DiffSpec   *spec;
	DiffCounts	counts;

	InitMaterializedSRF(fcinfo, 0);
	SPI_connect();
	spec = prepare_from_args(fcinfo);
	diff_execute(spec, rsinfo->setResult, rsinfo->setDesc, &counts);
	SPI_finish();
	return (Datum) 0;
}

Datum
reconcile_diff_summary(PG_FUNCTION_ARGS)
{
	TupleDesc	desc;
	DiffSpec   *spec;
	DiffCounts	counts;
	Datum		values[9];
	bool		nulls[9] = {0};
	HeapTuple	tup;
	MemoryContext caller = CurrentMemoryContext;
	Jsonb	   *percol;

	if (get_call_result_type(fcinfo, NULL, &desc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	SPI_connect();
	spec = prepare_from_args(fcinfo);
	diff_execute(spec, NULL, NULL, &counts);
	MemoryContextSwitchTo(caller);
	percol = diff_column_counts_jsonb(spec, &counts);
	values[0] = Int64GetDatum(counts.rows_source);
	values[1] = Int64GetDatum(counts.rows_target);
	values[2] = Int64GetDatum(counts.matched);
	values[3] = Int64GetDatum(counts.missing_in_target);
	values[4] = Int64GetDatum(counts.extra_in_target);
	values[5] = Int64GetDatum(counts.mismatched);
	values[6] = Int64GetDatum(counts.duplicate_keys);
	values[7] = Int64GetDatum(counts.null_keys);
	values[8] = JsonbPGetDatum(percol);
	tup = heap_form_tuple(BlessTupleDesc(desc), values, nulls);
	SPI_finish();
	return HeapTupleGetDatum(tup);
}
