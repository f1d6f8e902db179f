/*
 * repair_version.h
 *		The repair's compare-and-set on a registered target's version, in one
 *		place (repair_version.c): the version after the one the diff saw, a
 *		new key's first version, and "the target still holds that version".
 */
#ifndef RECONCILE_REPAIR_VERSION_H
#define RECONCILE_REPAIR_VERSION_H

#include "lib/stringinfo.h"

#include "loader/target.h"

extern bool repair_version_has_next(TargetInfo *t);
extern void repair_version_check(TargetInfo *t, bool has_source, bool deletes);
extern void repair_version_next_sql(StringInfo sql, const char *expr, Oid type);
extern void repair_version_first_sql(StringInfo sql, Oid type);
extern void repair_version_same_sql(StringInfo sql, const char *a, const char *b, Oid type);

#endif
