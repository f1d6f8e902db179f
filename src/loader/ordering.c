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
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "common/pinned.h"
#include "common/sqlname.h"
#include "ordering.h"

/*
 * Find the version type's btree operators; a type without a default btree
 * operator class cannot order versions.
 */
void
ordering_resolve(TargetInfo *t, const char *relname)
{
	TypeCacheEntry *tc = lookup_type_cache(t->version.typid,
										   TYPECACHE_BTREE_OPFAMILY | TYPECACHE_LT_OPR |
										   TYPECACHE_GT_OPR | TYPECACHE_EQ_OPR);
	Oid			base = getBaseType(t->version.typid);

	if (!OidIsValid(tc->btree_opf) || !OidIsValid(tc->lt_opr) || !OidIsValid(tc->gt_opr))
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("version column \"%s\" of table \"%s\" must be of a type with a default btree operator class, not %s",
						t->version.name, relname, format_type_be(t->version.typid)),
				 errdetail("reconcile orders the versions of a key with the type's own btree ordering; %s has none.",
						   format_type_be(t->version.typid)),
				 errhint("Use a version column of an orderable type (bigint, numeric, timestamptz, pg_lsn, text, ...), or cast the ordering value into one in the staged relation.")));
	t->version_lt_op = tc->lt_opr;
	t->version_gt_op = tc->gt_opr;
	t->version_eq_op = tc->eq_opr;
	t->version_integer = base == INT2OID || base == INT4OID || base == INT8OID;
	t->version_ssup = NULL;
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
		SortSupport ssup = palloc0(sizeof(SortSupportData));

		ssup->ssup_cxt = cxt;
		ssup->ssup_collation = t->version.collation;
		ssup->ssup_nulls_first = false;
		ssup->abbreviate = false;
		PrepareSortSupportFromOrderingOp(t->version_lt_op, ssup);
		t->version_ssup = ssup;
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

/* A version's text form, under pinned settings: what reconcile.conflicts holds. */
char *
ordering_text(TargetInfo *t, Datum v)
{
	return pinned_output(&t->version.out, v, false);
}

/* The version a pinned text form names (ordering_text's inverse). */
Datum
ordering_from_text(TargetInfo *t, const char *text)
{
	PinnedSettings saved;
	Datum		v;

	pinned_settings_enter(&saved, false);
	v = InputFunctionCall(&t->version.in, (char *) text, t->version.ioparam,
						  t->version.typmod);
	pinned_settings_leave(&saved);
	return v;
}

/* An integer version as int64 (version_integer only). */
int64
ordering_int64(TargetInfo *t, Datum v)
{
	Oid			base = getBaseType(t->version.typid);

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
	if (!OidIsValid(t->version.collation))
		return "";
	return psprintf(" COLLATE %s", collation_quoted_name(t->version.collation));
}

/*
 * A bigint version as 1.1 held it (reconcile.conflicts.version), in the
 * version column's type; only an integer version column has such rows.
 */
Datum
ordering_from_int64(TargetInfo *t, int64 v)
{
	Oid			base = getBaseType(t->version.typid);

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
