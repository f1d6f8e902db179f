/*
 * citus.c
 *		Loading tables that Citus manages.
 *
 * On a Citus coordinator a distributed, reference or Citus-managed local
 * table is a shell whose rows live in shards, on the workers or on the
 * coordinator itself; the shell is empty, or holds rows left on disk from
 * before the table was distributed.  A batch therefore never reads or
 * writes it below SQL: the merge probes a copy of the target rows it
 * needs, read through Citus (citus_probe_copy), and writes with the
 * general path's statements, which Citus routes to the shards inside the
 * coordinator's distributed transaction, so the receipt and the cursor on
 * the coordinator commit with every shard's writes through Citus's
 * two-phase commit.  For a hash-distributed target the staged relation
 * must be distributed by the same column and co-located with it: the copy
 * is then read with a join Citus pushes down to each shard group, in
 * parallel across the workers.  Kinds no test covers are refused before
 * anything is written.
 *
 * That is the path on the coordinator.  A hash-distributed target merges
 * on the workers instead where it can (citus_merge.c): every statement of
 * the merge is co-located SQL that Citus runs as one task per shard group.
 *
 * Citus is found at run time, in the catalog: its extension, and its
 * metadata table pg_dist_partition in that extension's schema.  Nothing
 * is linked against it, and nothing is resolved through search_path.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_extension.h"
#include "commands/extension.h"
#include "nodes/primnodes.h"
#include "parser/parse_relation.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "citus.h"
#include "sqlname.h"

/* The schema of the citus extension, or InvalidOid without Citus. */
static Oid
citus_schema(void)
{
	Oid			ext = get_extension_oid("citus", true);
	Oid			schema = InvalidOid;
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;

	if (!OidIsValid(ext))
		return InvalidOid;
	/* PostgreSQL 15 does not export get_extension_schema(). */
	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(ext));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		schema = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return schema;
}

/* The OID of Citus's pg_dist_partition, or InvalidOid without Citus. */
static Oid
dist_partition_relid(void)
{
	Oid			schema = citus_schema();

	return OidIsValid(schema) ? get_relname_relid("pg_dist_partition", schema) : InvalidOid;
}

/*
 * SQL text that calls one of Citus's functions, qualified by the citus
 * extension's schema (never through search_path).
 */
char *
citus_function_call(const char *function, const char *args)
{
	Oid			schema = citus_schema();

	if (!OidIsValid(schema))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("extension \"citus\" is not installed"),
				 errdetail("reconcile called Citus's function %s.", function)));
	return psprintf("%s(%s)", quote_qualified_identifier(get_namespace_name(schema), function),
					args);
}

/*
 * The Citus kind of a relation, and for a hash-distributed one its
 * distribution column's name and its co-location group (either pointer may
 * be NULL).
 */
CitusKind
citus_table_kind(Oid relid, char **distcol, int32 *colocationid)
{
	Oid			catalog = dist_partition_relid();
	Relation	rel;
	TupleDesc	desc;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;
	CitusKind	kind = CITUS_NONE;

	if (distcol)
		*distcol = NULL;
	if (colocationid)
		*colocationid = 0;
	if (!OidIsValid(catalog))
		return CITUS_NONE;

	rel = table_open(catalog, AccessShareLock);
	desc = RelationGetDescr(rel);
	ScanKeyInit(&key, attnameAttNum(rel, "logicalrelid", false),
				BTEqualStrategyNumber, F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(rel, InvalidOid, false, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
	{
		bool		isnull;
		char		method = DatumGetChar(heap_getattr(tup, attnameAttNum(rel, "partmethod", false),
													   desc, &isnull));
		char		repmodel = DatumGetChar(heap_getattr(tup, attnameAttNum(rel, "repmodel", false),
														 desc, &isnull));
		int32		coloc = DatumGetInt32(heap_getattr(tup, attnameAttNum(rel, "colocationid", false),
													   desc, &isnull));
		Datum		partkey = heap_getattr(tup, attnameAttNum(rel, "partkey", false),
										   desc, &isnull);

		/* As Citus's own IsCitusTableTypeInternal tells them apart. */
		if (method == 'h')
			kind = CITUS_DISTRIBUTED;
		else if (method == 'a')
			kind = CITUS_APPEND;
		else if (method == 'r')
			kind = CITUS_RANGE;
		else if (repmodel == 't')
			kind = CITUS_REFERENCE;
		else if (coloc != 0)
			kind = CITUS_SINGLE_SHARD;
		else
			kind = CITUS_LOCAL;

		if (colocationid)
			*colocationid = coloc;
		if (distcol && !isnull && kind == CITUS_DISTRIBUTED)
		{
			/* partkey is the distribution column as a Var in node form. */
			Node	   *node = stringToNode(TextDatumGetCString(partkey));

			if (IsA(node, Var))
				*distcol = get_attname(relid, ((Var *) node)->varattno, false);
		}
	}
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return kind;
}

const char *
citus_kind_name(CitusKind kind)
{
	switch (kind)
	{
		case CITUS_NONE:
			return "not a Citus table";
		case CITUS_DISTRIBUTED:
			return "a hash-distributed table";
		case CITUS_SINGLE_SHARD:
			return "a single-shard distributed table";
		case CITUS_REFERENCE:
			return "a reference table";
		case CITUS_LOCAL:
			return "a Citus local table";
		case CITUS_APPEND:
			return "an append-distributed table";
		case CITUS_RANGE:
			return "a range-distributed table";
	}
	return "an unknown kind of Citus table";
}

/*
 * Refuse, at registration and at every batch, a target of a Citus kind
 * reconcile does not load.
 */
void
citus_check_target(Oid relid, const char *relname, bool partitioned, CitusKind kind)
{
	if (kind == CITUS_APPEND || kind == CITUS_RANGE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"%s\" is %s, which reconcile cannot load", relname,
						citus_kind_name(kind)),
				 errdetail("reconcile loads hash-distributed, single-shard, reference and Citus local tables; the key of an append- or range-distributed table is not kept unique across its shards."),
				 errhint("Distribute the table by hash on a key column, for example: SELECT create_distributed_table('%s', '<key column>');",
						 relid_quoted_name(relid))));
	if (kind != CITUS_NONE && partitioned)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"%s\" is a partitioned table managed by Citus (%s), which reconcile cannot load yet",
						relname, citus_kind_name(kind)),
				 errdetail("Loading partitioned Citus tables is not tested."),
				 errhint("Load a Citus table that is not partitioned, or a partitioned table that Citus does not manage.")));
}
