/*
 * sqlname.h
 *		Catalog objects named as SQL text: relations, collations, operator
 *		classes and operators, schema-qualified and quoted (sqlname.c).
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

#endif							/* RECONCILE_SQLNAME_H */
