/*
 * ordering.h
 *		A target's ordering value, the version column, compared by its
 *		type's own default btree operator class (ordering.c).
 *
 * Every comparison of two versions in the loader, C or generated SQL, goes
 * through here: decide.c receives the comparator, the stage sort, the
 * probe, the writers and a resolution take the operators from here.  An
 * integer version (smallint, integer, bigint or a domain over one) is
 * today's shape; any other type with a default btree operator class orders
 * the same way, with the column's collation for a collatable type.
 * Several version columns (version_columns) compare in order, the first
 * that differs deciding; their ordering value is a pointer to their Datums
 * (ordering_make), one column's is the column's Datum.
 */
#ifndef RECONCILE_ORDERING_H
#define RECONCILE_ORDERING_H

#include "utils/sortsupport.h"

#include "target.h"

extern void ordering_resolve(TargetInfo *t, const char *relname);
extern SortSupport ordering_sortsupport(TargetInfo *t);
extern int	ordering_compare(TargetInfo *t, Datum a, Datum b);
extern char *ordering_text(TargetInfo *t, Datum v);
extern Datum ordering_from_text(TargetInfo *t, const char *text);
extern int64 ordering_int64(TargetInfo *t, Datum v);
extern Datum ordering_from_int64(TargetInfo *t, int64 v);
extern char *ordering_collate_sql(TargetInfo *t);
extern char *ordering_column_collate_sql(const TargetColumn *c);
extern bool ordering_column_is_integer(const TargetColumn *c);
extern TargetColumn *ordering_column(TargetInfo *t, int i);
extern Datum ordering_make(TargetInfo *t, const Datum *values);
extern Datum ordering_value(TargetInfo *t, Datum v, int i);
extern Datum ordering_copy(TargetInfo *t, Datum v);

#endif							/* RECONCILE_ORDERING_H */
