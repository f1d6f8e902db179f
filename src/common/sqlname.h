/*
 * sqlname.h
 *		Catalog objects named as SQL text: relations, collations, operator
 *		classes and operators, schema-qualified and quoted, and the names of
 *		a batch's temporary relations (sqlname.c).
 */
#ifndef RECONCILE_SQLNAME_H
#define RECONCILE_SQLNAME_H

#include "utils/relcache.h"

extern char *relation_display_name(Oid relid);
extern char *relation_quoted_name(Relation rel);
extern char *relid_quoted_name(Oid relid);
extern char *collation_quoted_name(Oid collid);
extern char *opclass_quoted_name(Oid opclass);
extern char *operator_sql(Oid opno);
extern char *temp_relation_name(const char *prefix, const char *batch_id, const char *also);

#endif							/* RECONCILE_SQLNAME_H */
