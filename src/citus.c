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
#include "catalog/pg_collation.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_index.h"
#include "catalog/pg_opclass.h"
#include "catalog/pg_operator.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "nodes/primnodes.h"
#include "parser/parse_relation.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "citus.h"
#include "state.h"

/* A relation's schema-qualified, quoted name, for SQL text and hints. */
static char *
qualified_name(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

/* The OID of Citus's pg_dist_partition, or InvalidOid without Citus. */
static Oid
dist_partition_relid(void)
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
	return OidIsValid(schema) ? get_relname_relid("pg_dist_partition", schema) : InvalidOid;
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
						 qualified_name(relid))));
	if (kind != CITUS_NONE && partitioned)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"%s\" is a partitioned table managed by Citus (%s), which reconcile cannot load yet",
						relname, citus_kind_name(kind)),
				 errdetail("Loading partitioned Citus tables is not tested."),
				 errhint("Load a Citus table that is not partitioned, or a partitioned table that Citus does not manage.")));
}

/*
 * What a batch into a Citus target needs, checked before anything is
 * written.  A hash-distributed target takes a staged relation distributed
 * by the same column and co-located with it, so that the rows the merge
 * needs are read shard by shard on the workers.  A reference target is
 * updated from one array per column (apply.c), which a column whose type
 * has no array type (an array, for one) cannot be passed in.
 */
void
citus_check_batch(TargetInfo *t, Oid staged, const char *batch_id)
{
	char	   *tcol,
			   *scol;
	int32		tcoloc,
				scoloc;
	CitusKind	skind;

	if (t->citus_kind == CITUS_REFERENCE)
	{
		for (int i = 0; i < t->nkeys + t->npayload; i++)
		{
			TargetColumn *c = i < t->nkeys ? &t->keys[i] : &t->payload[i - t->nkeys];

			if (!OidIsValid(get_array_type(c->typid)))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("column \"%s\" of reference table \"%s\" is of type %s, which reconcile cannot load into a reference table",
								c->name, t->relname, format_type_be(c->typid)),
						 errdetail("Batch %s would update the reference table from one array per column, and type %s has no array type.",
								   batch_id, format_type_be(c->typid)),
						 errhint("Leave the column out of payload_columns, or load a hash-distributed table.")));
		}
		return;
	}
	if (t->citus_kind != CITUS_DISTRIBUTED)
		return;
	(void) citus_table_kind(t->relid, &tcol, &tcoloc);
	skind = citus_table_kind(staged, &scol, &scoloc);
	if (skind == CITUS_DISTRIBUTED && tcoloc == scoloc && tcol != NULL &&
		scol != NULL && strcmp(tcol, scol) == 0)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("staged relation \"%s\" of batch %s is not co-located with its distributed target \"%s\"",
					relation_display_name(staged), batch_id, t->relname),
			 errdetail("Table \"%s\" is hash-distributed by column \"%s\"; the staged relation is %s%s%s%s. reconcile_batch reads each shard of the target together with the staged rows of the same shard, on the worker that holds them.",
					   t->relname, tcol ? tcol : "?", citus_kind_name(skind),
					   scol ? " distributed by column \"" : "",
					   scol ? scol : "", scol ? "\"" : ""),
			 errhint("Distribute the staged relation by the same column, co-located with the target, before the batch: SELECT create_distributed_table('%s', '%s', colocate_with => '%s');",
					 qualified_name(staged), tcol ? tcol : "?", t->qualname)));
}

static char *
quoted_opclass(Oid opclass)
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

static char *
quoted_collation(Oid collid)
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

static char *
quoted_operator(Oid opno)
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

static void
append_column_type(StringInfo sql, TargetColumn *c)
{
	appendStringInfo(sql, "%s %s", quote_identifier(c->name),
					 format_type_extended(c->typid, c->typmod,
										  FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY));
	if (OidIsValid(c->collation))
		appendStringInfo(sql, " COLLATE %s", quoted_collation(c->collation));
}

/*
 * The key, version and hash of the target rows the batch may touch, read
 * through Citus into a temporary table with a unique index like the
 * target's key index (same operator classes and collations), and the
 * TargetInfo that makes probe.c read it instead of the target.  For a
 * hash-distributed target only the rows whose distribution column appears
 * in the co-located staged relation: Citus runs that semi-join on each
 * shard group in parallel.  For the other kinds, whose rows are on one
 * node each, every row.  Run after the target is locked, in the batch's
 * transaction: the copy is what the target holds for this batch.
 */
TargetInfo *
citus_probe_copy(TargetInfo *t, Oid staged, const char *batch_id)
{
	TargetInfo *copy = palloc(sizeof(TargetInfo));
	char	   *name = psprintf("reconcile_probe_%.16s", batch_id);
	char	   *qual = psprintf("pg_temp.%s", quote_identifier(name));
	char	   *distcol = NULL;
	StringInfoData sql,
				cols;
	HeapTuple	indtup;
	oidvector  *indclass;
	bool		isnull;
	Oid			relid;

	initStringInfo(&sql);
	initStringInfo(&cols);
	appendStringInfo(&sql, "CREATE TEMPORARY TABLE %s (", qual);
	for (int i = 0; i < t->nkeys; i++)
	{
		append_column_type(&sql, &t->keys[i]);
		appendStringInfoString(&sql, " NOT NULL, ");
		appendStringInfo(&cols, "t.%s, ", quote_identifier(t->keys[i].name));
	}
	append_column_type(&sql, &t->version);
	appendStringInfoString(&sql, ", ");
	append_column_type(&sql, &t->hash);
	appendStringInfoString(&sql, ") ON COMMIT DROP");
	appendStringInfo(&cols, "t.%s, t.%s", quote_identifier(t->version.name),
					 quote_identifier(t->hash.name));
	if (SPI_execute(sql.data, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not create %s", qual);

	/* The index the probe reads: the target key index's semantics. */
	resetStringInfo(&sql);
	appendStringInfo(&sql, "CREATE UNIQUE INDEX %s ON %s (",
					 quote_identifier(psprintf("%s_key", name)), qual);
	indtup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(t->key_index));
	if (!HeapTupleIsValid(indtup))
		elog(ERROR, "cache lookup failed for index %u", t->key_index);
	indclass = (oidvector *) DatumGetPointer(SysCacheGetAttr(INDEXRELID, indtup,
															 Anum_pg_index_indclass, &isnull));
	for (int i = 0; i < t->nkeys; i++)
	{
		appendStringInfo(&sql, "%s%s", i ? ", " : "", quote_identifier(t->keys[i].name));
		if (OidIsValid(t->key_collations[i]))
			appendStringInfo(&sql, " COLLATE %s", quoted_collation(t->key_collations[i]));
		appendStringInfo(&sql, " %s", quoted_opclass(indclass->values[i]));
	}
	ReleaseSysCache(indtup);
	appendStringInfoChar(&sql, ')');
	if (SPI_execute(sql.data, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not create the index of %s", qual);

	resetStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s SELECT %s FROM %s AS t", qual, cols.data, t->qualname);
	if (t->citus_kind == CITUS_DISTRIBUTED)
	{
		int			k;

		(void) citus_table_kind(t->relid, &distcol, NULL);
		for (k = 0; k < t->nkeys; k++)
			if (distcol && strcmp(t->keys[k].name, distcol) == 0)
				break;
		if (k == t->nkeys)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("distribution column of table \"%s\" is not one of its key columns",
							t->relname),
					 errdetail("reconcile keeps one row per key, which Citus can enforce only with a unique index that includes the distribution column.")));
		appendStringInfo(&sql, " WHERE EXISTS (SELECT 1 FROM %s AS s WHERE s.%s %s t.%s)",
						 qualified_name(staged),
						 quote_identifier(distcol), quoted_operator(t->key_eq_ops[k]),
						 quote_identifier(distcol));
	}
	if (SPI_execute(sql.data, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not read the rows of table \"%s\"", t->relname);

	relid = get_relname_relid(name, LookupExplicitNamespace("pg_temp", false));
	if (!OidIsValid(relid))
		elog(ERROR, "could not find %s", qual);
	*copy = *t;
	copy->relid = relid;
	copy->key_index = get_relname_relid(psprintf("%s_key", name),
										LookupExplicitNamespace("pg_temp", false));
	copy->partitioned = false;
	copy->citus_kind = CITUS_NONE;
	return copy;
}
