/*
 * repair_version.c
 *		The ordering values a repair writes into a registered target without
 *		a source version column: the target row's version at diff time plus
 *		one, applied only while the target still holds that version.
 *
 * Versions are compared in SQL in the version column's own type, with
 * schema-qualified operators, so that a version of another orderable type
 * needs a change here only (what "one more" means for it).  "One more"
 * exists for an integer version only (smallint, integer, bigint, a domain
 * over one): a target ordered otherwise (timestamptz, numeric, text, ...,
 * or several version columns) is repaired with the source's versions
 * (option version_column) and without deletes, or refused
 * (repair_version_check).
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

#include "common/sqlname.h"
#include "repair_version.h"

/*
 * Refuse a repair of registered target t that would need "one more" than a
 * version of a type without it: with the source's versions (has_source) the
 * inserts and updates take those, but a delete (deletes: extra is not
 * "keep") still needs a version above the target row's.
 */
void
repair_version_check(TargetInfo *t, bool has_source, bool deletes)
{
	if (t->nextra > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("reconcile_repair is not supported yet for table \"%s\", which orders by %d version columns",
						t->relname, t->nextra + 1),
				 errdetail("The repair's batch stages one version column."),
				 errhint("Repair the table with a batch of your own (reconcile_batch) staging every version column.")));
	if (repair_version_has_next(t))
		return;
	if (!has_source)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("reconcile_repair of table \"%s\" needs option \"version_column\": its version column \"%s\" is of type %s",
						t->relname, t->version.name, format_type_be(t->version.typid)),
				 errdetail("Without a source version the repair writes the target row's version plus one, which exists for integer versions only."),
				 errhint("Pass \"version_column\": the source's column that holds each row's version in type %s.",
						 format_type_be(t->version.typid))));
	if (deletes)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("reconcile_repair cannot delete rows of table \"%s\", whose version column \"%s\" is of type %s",
						t->relname, t->version.name, format_type_be(t->version.typid)),
				 errdetail("A key the source lacks has no source version; its delete would need the target row's version plus one, which exists for integer versions only."),
				 errhint("Pass \"extra\": \"keep\" to leave and report the rows only the target has, and delete them with a batch at a higher version.")));
}

/* Whether a version of t has a "one more" (repair_version_next_sql). */
bool
repair_version_has_next(TargetInfo *t)
{
	return t->nextra == 0 && t->version_integer;
}

/* The version after expr's: expr + 1, in the column's type (integer versions only). */
void
repair_version_next_sql(StringInfo sql, const char *expr, Oid type)
{
	appendStringInfo(sql, "CAST(%s OPERATOR(pg_catalog.+) 1 AS %s)", expr,
					 format_type_be_qualified(type));
}

/* The version a new key gets when the source gives none. */
void
repair_version_first_sql(StringInfo sql, Oid type)
{
	appendStringInfo(sql, "CAST(1 AS %s)", format_type_be_qualified(type));
}

/* a and b are the same version (NULL-safe), with the type's own "=". */
void
repair_version_same_sql(StringInfo sql, const char *a, const char *b, Oid type)
{
	TypeCacheEntry *tc = lookup_type_cache(type, TYPECACHE_EQ_OPR);

	if (!OidIsValid(tc->eq_opr))
		elog(ERROR, "version type %s has no equality operator", format_type_be(type));
	appendStringInfo(sql, "(%s %s %s OR (%s IS NULL AND %s IS NULL))",
					 a, operator_sql(tc->eq_opr), b, a, b);
}
