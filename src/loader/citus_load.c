/*
 * citus_load.c
 *		A batch into a target that Citus manages (see citus.c for how a
 *		batch runs there): the checks it needs before it writes, and the
 *		copy of the target rows its merge probes, read through Citus.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_index.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "common/citus.h"
#include "citus_load.h"
#include "common/sqlname.h"

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

			/*
			 * An array, or a domain over one, has no array type of its own
			 * or would be stacked by array_agg into one array of more
			 * dimensions: either way not one element per row.
			 */
			if (!OidIsValid(get_array_type(c->typid)) || type_is_array(getBaseType(c->typid)))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("column \"%s\" of reference table \"%s\" is of type %s, which reconcile cannot load into a reference table",
								c->name, t->relname, format_type_be(c->typid)),
						 errdetail("Batch %s would update the reference table from one array per column, and a value of type %s cannot be one element of an array.",
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
					 relid_quoted_name(staged), tcol ? tcol : "?", t->qualname)));
}

static void
append_column_type(StringInfo sql, TargetColumn *c)
{
	appendStringInfo(sql, "%s %s", quote_identifier(c->name),
					 format_type_extended(c->typid, c->typmod,
										  FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY));
	if (OidIsValid(c->collation))
		appendStringInfo(sql, " COLLATE %s", collation_quoted_name(c->collation));
}

/*
 * The key, version, hash and payload of the target rows the batch may touch, read
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
	/* kept until commit: a second batch of the batch id takes another name */
	char	   *name = temp_relation_name("reconcile_probe", batch_id, "_key");
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
	appendStringInfo(&cols, "t.%s, t.%s", quote_identifier(t->version.name),
					 quote_identifier(t->hash.name));
	for (int i = 0; i < t->nextra; i++)
	{
		appendStringInfoString(&sql, ", ");
		append_column_type(&sql, &t->extra[i]);
		appendStringInfo(&cols, ", t.%s", quote_identifier(t->extra[i].name));
	}
	/* The payload too: a conflict against the target keeps the target's. */
	for (int i = 0; i < t->npayload; i++)
	{
		appendStringInfoString(&sql, ", ");
		append_column_type(&sql, &t->payload[i]);
		appendStringInfo(&cols, ", t.%s", quote_identifier(t->payload[i].name));
	}
	appendStringInfoString(&sql, ") ON COMMIT DROP");
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
			appendStringInfo(&sql, " COLLATE %s", collation_quoted_name(t->key_collations[i]));
		appendStringInfo(&sql, " %s", opclass_quoted_name(indclass->values[i]));
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
						 relid_quoted_name(staged),
						 quote_identifier(distcol), operator_sql(t->key_eq_ops[k]),
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
