/*-------------------------------------------------------------------------
 *
 * sqlname.c
 *		Catalog objects named as SQL text.
 *
 * Every statement the extension builds names what it uses with its schema,
 * quoted, so that no name is resolved through the caller's search_path:
 * relations, collations and operator classes as schema.name, operators as
 * OPERATOR(schema.op).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_opclass.h"
#include "catalog/pg_operator.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "sqlname.h"

/* A relation's name for a message, or its OID when it is gone. */
char *
relation_display_name(Oid relid)
{
	char	   *name = get_rel_name(relid);

	return name ? name : psprintf("%u", relid);
}

/* An open relation's schema-qualified, quoted name, for SQL text and hints. */
char *
relation_quoted_name(Relation rel)
{
	return quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
									  RelationGetRelationName(rel));
}

/* The same for a relation known by its OID; an error if it is gone. */
char *
relid_quoted_name(Oid relid)
{
	char	   *nsp = get_namespace_name(get_rel_namespace(relid));
	char	   *rel = get_rel_name(relid);

	if (nsp == NULL || rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	return quote_qualified_identifier(nsp, rel);
}

char *
collation_quoted_name(Oid collid)
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

char *
opclass_quoted_name(Oid opclass)
{
	HeapTuple	tup = SearchSysCache1(CLAOID, ObjectIdGetDatum(opclass));
	Form_pg_opclass opc;
	char	   *out;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for operator class %u", opclass);
	opc = (Form_pg_opclass) GETSTRUCT(tup);
	out = quote_qualified_identifier(get_namespace_name(opc->opcnamespace),
									 NameStr(opc->opcname));
	ReleaseSysCache(tup);
	return out;
}

/* An operator as OPERATOR(schema.name), to stand between its operands. */
char *
operator_sql(Oid opno)
{
	HeapTuple	tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(opno));
	Form_pg_operator op;
	char	   *out;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for operator %u", opno);
	op = (Form_pg_operator) GETSTRUCT(tup);
	out = psprintf("OPERATOR(%s.%s)", quote_identifier(get_namespace_name(op->oprnamespace)),
				   NameStr(op->oprname));
	ReleaseSysCache(tup);
	return out;
}

/*
 * A name for a temporary relation of a batch, free in this session's
 * pg_temp: <prefix>_<first 16 characters of the batch id>, or that with
 * _2, _3, ... appended where the name is taken.  It is taken when one
 * transaction runs two batches of one batch id (one manifest loading
 * several targets, or a batch started by a trigger of another's write) and
 * the first keeps its relation until commit or is still writing.  also,
 * when given, is a suffix whose name must be free too (the relation's
 * index).  The caller creates the relation in pg_temp at once.
 */
char *
temp_relation_name(const char *prefix, const char *batch_id, const char *also)
{
	Oid			nsp = LookupExplicitNamespace("pg_temp", true);
	char	   *base = psprintf("%s_%.16s", prefix, batch_id);

	for (int n = 1;; n++)
	{
		char	   *name = n == 1 ? base : psprintf("%s_%d", base, n);

		CHECK_FOR_INTERRUPTS();
		if (!OidIsValid(nsp) ||
			(!OidIsValid(get_relname_relid(name, nsp)) &&
			 (also == NULL || !OidIsValid(get_relname_relid(psprintf("%s%s", name, also), nsp)))))
			return name;
	}
}
