/*
 * repair_version.c
 *		The ordering values a repair writes into a registered target without
 *		a source version column: the target row's version at diff time plus
 *		one, applied only while the target still holds that version.
 *
 * Versions are compared in SQL in the version column's own type, with
 * schema-qualified operators, so that a version of another orderable type
 * needs a change here only (what "one more" means for it).
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/typcache.h"

#include "common/sqlname.h"
#include "repair_version.h"

/* The version after expr's: expr + 1, in the column's type. */
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
