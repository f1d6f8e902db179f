/*
 * ordering.c
 *		The version column's ordering: its type's default btree operator
 *		class, and the column's collation for a collatable type.
 *
 * The registration resolves the operators once (ordering_resolve); a
 * batch compares Datums with the type's SortSupport comparator, which for
 * bigint is the same signed comparison the loader made before any other
 * type was allowed.  Two values are the same version when the comparator
 * says 0: numeric 1.0 and 1.00 are one version, and two texts equal under
 * a nondeterministic collation are one version too.  The text form of a
 * version held in reconcile.conflicts is the type's output under pinned
 * settings (pinned.c), so that it reads back as the same value whatever
 * the session's TimeZone or DateStyle.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "common/jsonbuild.h"
#include "common/pinned.h"
#include "common/sqlname.h"
#include "ordering.h"

/* The default btree operators of one ordering column, or an error. */
static void
resolve_column_ops(TargetColumn *c, const char *relname, Oid *lt, Oid *gt, Oid *eq)
{
	TypeCacheEntry *tc = lookup_type_cache(c->typid,
										   TYPECACHE_BTREE_OPFAMILY | TYPECACHE_LT_OPR |
										   TYPECACHE_GT_OPR | TYPECACHE_EQ_OPR);

	if (!OidIsValid(tc->btree_opf) || !OidIsValid(tc->lt_opr) || !OidIsValid(tc->gt_opr))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("version column \"%s\" of table \"%s\" must be of a type with a default btree operator class, not %s",
						c->name, relname, format_type_be(c->typid)),
				 errdetail("reconcile orders the versions of a key with the type's own btree ordering; %s has none.",
						   format_type_be(c->typid)),
				 errhint("Use a version column of an orderable type (bigint, numeric, timestamptz, pg_lsn, text, ...), or cast the ordering value into one in the staged relation.")));
	*lt = tc->lt_opr;
	*gt = tc->gt_opr;
	*eq = tc->eq_opr;
}

/*
 * Find the btree operators of the version column (and of the further
 * version_columns); a type without a default btree operator class cannot
 * order versions.
 */
void
ordering_resolve(TargetInfo *t, const char *relname)
{
	Oid			base = t->version.basetype;

	resolve_column_ops(&t->version, relname, &t->version_lt_op, &t->version_gt_op,
					   &t->version_eq_op);
	t->extra_lt_op = palloc(sizeof(Oid) * Max(t->nextra, 1));
	t->extra_gt_op = palloc(sizeof(Oid) * Max(t->nextra, 1));
	t->extra_eq_op = palloc(sizeof(Oid) * Max(t->nextra, 1));
	for (int i = 0; i < t->nextra; i++)
		resolve_column_ops(&t->extra[i], relname, &t->extra_lt_op[i], &t->extra_gt_op[i],
						   &t->extra_eq_op[i]);
	t->version_integer = t->nextra == 0 &&
		(base == INT2OID || base == INT4OID || base == INT8OID);
	t->version_ssup = NULL;
}

/* Whether a column's type is an integer (the negative-version rule). */
bool
ordering_column_is_integer(const TargetColumn *c)
{
	Oid			base = c->basetype;

	return base == INT2OID || base == INT4OID || base == INT8OID;
}

/* The ordering's i-th column (0: the version column). */
TargetColumn *
ordering_column(TargetInfo *t, int i)
{
	return i == 0 ? &t->version : &t->extra[i - 1];
}

/*
 * An ordering value of several columns is a pointer to their Datums, in
 * order; of one column, the column's Datum itself.
 */
Datum
ordering_make(TargetInfo *t, const Datum *values)
{
	Datum	   *v;

	if (t->nextra == 0)
		return values[0];
	v = palloc(sizeof(Datum) * (t->nextra + 1));
	memcpy(v, values, sizeof(Datum) * (t->nextra + 1));
	return PointerGetDatum(v);
}

/* The i-th column's value of an ordering value. */
Datum
ordering_value(TargetInfo *t, Datum v, int i)
{
	Assert(i == 0 || t->nextra > 0);
	return t->nextra == 0 ? v : ((const Datum *) DatumGetPointer(v))[i];
}

/* A copy of an ordering value in the current memory context. */
Datum
ordering_copy(TargetInfo *t, Datum v)
{
	Datum		values[INDEX_MAX_KEYS + 1];

	for (int i = 0; i <= t->nextra; i++)
	{
		TargetColumn *c = ordering_column(t, i);

		values[i] = datumCopy(ordering_value(t, v, i), c->typbyval, c->typlen);
	}
	return t->nextra == 0 ? values[0] : ordering_make(t, values);
}

/* The comparators of several version columns (a SortSupport's ssup_extra). */
typedef struct OrderingColumns
{
	int			n;
	SortSupportData *cols;
} OrderingColumns;

/* Several columns: the first that differs decides. */
static int
compare_columns(Datum a, Datum b, SortSupport ssup)
{
	OrderingColumns *oc = (OrderingColumns *) ssup->ssup_extra;
	const Datum *va = (const Datum *) DatumGetPointer(a);
	const Datum *vb = (const Datum *) DatumGetPointer(b);

	for (int i = 0; i < oc->n; i++)
	{
		int			c = ApplySortComparator(va[i], false, vb[i], false, &oc->cols[i]);

		if (c != 0)
			return c;
	}
	return 0;
}

/*
 * The comparator of two versions, made once per TargetInfo in the memory
 * context that holds it (a key group's context is reset after each key).
 */
SortSupport
ordering_sortsupport(TargetInfo *t)
{
	if (t->version_ssup == NULL)
	{
		MemoryContext cxt = GetMemoryChunkContext(t);
		MemoryContext old = MemoryContextSwitchTo(cxt);
		int			n = t->nextra + 1;
		SortSupport cols = palloc0(sizeof(SortSupportData) * n);

		for (int i = 0; i < n; i++)
		{
			cols[i].ssup_cxt = cxt;
			cols[i].ssup_collation = ordering_column(t, i)->collation;
			cols[i].ssup_nulls_first = false;
			cols[i].abbreviate = false;
			PrepareSortSupportFromOrderingOp(i == 0 ? t->version_lt_op : t->extra_lt_op[i - 1],
											 &cols[i]);
		}
		if (n == 1)
			t->version_ssup = cols;
		else
		{
			/* One comparator over the columns in order, for decide.c. */
			SortSupport ssup = palloc0(sizeof(SortSupportData));
			OrderingColumns *oc = palloc(sizeof(OrderingColumns));

			oc->n = n;
			oc->cols = cols;
			ssup->ssup_cxt = cxt;
			ssup->ssup_extra = oc;
			ssup->comparator = compare_columns;
			t->version_ssup = ssup;
		}
		MemoryContextSwitchTo(old);
	}
	return t->version_ssup;
}

/* <0, 0, >0 as version a orders before, with or after b. */
int
ordering_compare(TargetInfo *t, Datum a, Datum b)
{
	return ApplySortComparator(a, false, b, false, ordering_sortsupport(t));
}

/*
 * A version's text form, under pinned settings: what reconcile.conflicts
 * holds.  Several columns: a JSON array of their text forms, in order.
 */
char *
ordering_text(TargetInfo *t, Datum v)
{
	JsonbParseState *st = NULL;
	JsonbValue *res;

	if (t->nextra == 0)
		return pinned_output(&t->version.out, v, false);
	pushJsonbValue(&st, WJB_BEGIN_ARRAY, NULL);
	for (int i = 0; i <= t->nextra; i++)
		jsonb_push_string(&st, WJB_ELEM,
						  pinned_output(&ordering_column(t, i)->out, ordering_value(t, v, i), false));
	res = pushJsonbValue(&st, WJB_END_ARRAY, NULL);
	return JsonbToCString(NULL, &JsonbValueToJsonb(res)->root, 0);
}

/* One column's value from its pinned text form. */
static Datum
column_from_text(TargetColumn *c, const char *text)
{
	PinnedSettings saved;
	Datum		v;

	pinned_settings_enter(&saved, false);
	v = InputFunctionCall(&c->in, (char *) text, c->ioparam, c->typmod);
	pinned_settings_leave(&saved);
	return v;
}

/* The version a pinned text form names (ordering_text's inverse). */
Datum
ordering_from_text(TargetInfo *t, const char *text)
{
	Jsonb	   *jb;
	Datum		values[INDEX_MAX_KEYS + 1];
	int			n = 0;

	if (t->nextra == 0)
		return column_from_text(&t->version, text);
	jb = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(text)));
	if (JB_ROOT_IS_ARRAY(jb) && JB_ROOT_COUNT(jb) == t->nextra + 1)
	{
		JsonbIterator *it = JsonbIteratorInit(&jb->root);
		JsonbValue	jv;
		JsonbIteratorToken tok;

		while ((tok = JsonbIteratorNext(&it, &jv, true)) != WJB_DONE)
			if (tok == WJB_ELEM && jv.type == jbvString && n <= t->nextra)
			{
				values[n] = column_from_text(ordering_column(t, n),
											 pnstrdup(jv.val.string.val, jv.val.string.len));
				n++;
			}
	}
	if (n != t->nextra + 1)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a key of table \"%s\" was held back at version %s, which is not a value of its %d version columns",
						t->relname, text, t->nextra + 1),
				 errdetail("The key was held while the table was registered with other version columns."),
				 errhint("Load the payload to keep with a new batch.")));
	return ordering_make(t, values);
}

/* An integer version as int64 (version_integer only). */
int64
ordering_int64(TargetInfo *t, Datum v)
{
	Oid			base = t->version.basetype;

	Assert(t->version_integer);
	return base == INT8OID ? DatumGetInt64(v) :
		base == INT4OID ? DatumGetInt32(v) : DatumGetInt16(v);
}

/*
 * " COLLATE schema.name" when the version column is collatable: generated
 * comparisons then use the column's collation whatever the other side's.
 */
char *
ordering_collate_sql(TargetInfo *t)
{
	return ordering_column_collate_sql(&t->version);
}

/* The same for one ordering column. */
char *
ordering_column_collate_sql(const TargetColumn *c)
{
	if (!OidIsValid(c->collation))
		return "";
	return psprintf(" COLLATE %s", collation_quoted_name(c->collation));
}

/*
 * A bigint version as 1.1 held it (reconcile.conflicts.version), in the
 * version column's type; only an integer version column has such rows.
 */
Datum
ordering_from_int64(TargetInfo *t, int64 v)
{
	Oid			base = t->version.basetype;

	if (!t->version_integer)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a key of table \"%s\" was held back at bigint version " INT64_FORMAT ", but the version column is of type %s",
						t->relname, v, format_type_be(t->version.typid)),
				 errdetail("The key was held while the table was registered with another version column."),
				 errhint("Load the payload to keep with a new batch.")));
	return base == INT8OID ? Int64GetDatum(v) :
		base == INT4OID ? Int32GetDatum((int32) v) : Int16GetDatum((int16) v);
}
