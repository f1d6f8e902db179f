/*
 * colname.h
 *		Column names as users write them: the exact spelling if a column of
 *		that spelling exists, otherwise the name folded to lower case, as
 *		PostgreSQL folds an unquoted identifier.
 */
#ifndef RECONCILE_COLNAME_H
#define RECONCILE_COLNAME_H

#include "access/tupdesc.h"

extern Form_pg_attribute colname_find(TupleDesc desc, const char *name);
extern char *colname_hint(TupleDesc desc, const char *name);

#endif							/* RECONCILE_COLNAME_H */
