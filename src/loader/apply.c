/*
 * apply.c
 *		The general write path: winners collected in a temporary table and
 *		applied with one INSERT and two UPDATE statements (and, for a
 *		resolution, a third that replaces a row at its own version).
 *
 * The statements run with the caller's rights, so everything a statement
 * honours is honoured: statement and row triggers, transition tables,
 * rules, partition routing, foreign keys.  The UPDATEs repeat the version
 * check (target version < new version), and the rows each statement wrote
 * must match what the merge decided, or the batch fails.
 *
 * The temporary table is created, opened and named in SQL as
 * pg_temp.<name>, and opened by its OID: a relation of that name in a
 * schema earlier in the caller's search_path is never touched.
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"

#include "common/citus.h"
#include "common/sqlname.h"
#include "ordering.h"
#include "writers.h"

/* The temporary table of winners and what was queued in it. */
struct ApplyWriter
{
	TargetInfo *t;
	const char *batch_id;		/* for messages */
	char	   *name;			/* the temporary table, in pg_temp */
	Relation	rel;
	BulkInsertState bistate;
	TupleTableSlot *slot;
	int64		nactions[5];	/* insert, update, delete, replace, remove */
	bool		filled;			/* every winner queued, the table closed */
};

/*
 * The version guard of an UPDATE: the target's row t is at a lower version
 * than the winner w, by each version column's type's operators and
 * collation; several columns compare in order (the first that differs).
 */
static char *
version_guard_sql(TargetInfo *t)
{
	StringInfoData sql;

	initStringInfo(&sql);
	for (int i = t->nextra; i >= 0; i--)
	{
		TargetColumn *c = i == 0 ? &t->version : &t->extra[i - 1];
		const char *w = i == 0 ? "w.v" : psprintf("w.x%d", i);
		const char *coll = ordering_column_collate_sql(c);
		char	   *lt = psprintf("t.%s %s %s%s", quote_identifier(c->name),
								  operator_sql(i == 0 ? t->version_lt_op : t->extra_lt_op[i - 1]), w, coll);

		if (i == t->nextra)
			appendStringInfoString(&sql, lt);
		else
			sql.data = psprintf("(%s OR (t.%s %s %s%s AND %s))", lt, quote_identifier(c->name),
								operator_sql(i == 0 ? t->version_eq_op : t->extra_eq_op[i - 1]), w, coll,
								sql.data);
	}
	return sql.data;
}

/* The target's row t at the winner w's own version: every version column equal. */
static char *
version_same_sql(TargetInfo *t)
{
	StringInfoData sql;

	initStringInfo(&sql);
	for (int i = 0; i <= t->nextra; i++)
	{
		TargetColumn *c = i == 0 ? &t->version : &t->extra[i - 1];

		appendStringInfo(&sql, "%st.%s %s %s%s", i > 0 ? " AND " : "", quote_identifier(c->name),
						 operator_sql(i == 0 ? t->version_eq_op : t->extra_eq_op[i - 1]),
						 i == 0 ? "w.v" : psprintf("w.x%d", i), ordering_column_collate_sql(c));
	}
	return sql.data;
}

/* Columns: keys, version, deleted, hash, payload, action, further version columns. */
ApplyWriter *
apply_create(TargetInfo *t, const char *batch_id)
{
	ApplyWriter *m = palloc0(sizeof(ApplyWriter));
	StringInfoData sql;
	TupleDesc	desc PG_USED_FOR_ASSERTS_ONLY;
	Oid			relid;

	m->t = t;
	m->batch_id = batch_id;
	m->name = temp_relation_name("reconcile_apply", batch_id, NULL);
	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TEMPORARY TABLE pg_temp.%s (", quote_identifier(m->name));
	for (int i = 0; i < t->nkeys; i++)
		appendStringInfo(&sql, "k%d %s, ", i + 1,
						 format_type_extended(t->keys[i].typid, t->keys[i].typmod,
											  FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY));
	appendStringInfo(&sql, "v %s, d pg_catalog.bool, h pg_catalog.bytea",
					 format_type_be_qualified(t->version.typid));
	for (int i = 0; i < t->npayload; i++)
		appendStringInfo(&sql, ", p%d %s", i + 1,
						 format_type_extended(t->payload[i].typid, t->payload[i].typmod,
											  FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY));
	appendStringInfoString(&sql, ", a pg_catalog.\"char\"");
	/* Further version columns last, x1, x2, ... */
	for (int i = 0; i < t->nextra; i++)
		appendStringInfo(&sql, ", x%d %s", i + 1,
						 format_type_extended(t->extra[i].typid, t->extra[i].typmod,
											  FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY));
	appendStringInfoString(&sql, ") ON COMMIT DROP");
	if (SPI_execute(sql.data, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not create %s", m->name);

	relid = get_relname_relid(m->name, LookupExplicitNamespace("pg_temp", false));
	if (!OidIsValid(relid))
		elog(ERROR, "could not find pg_temp.%s", m->name);
	m->rel = table_open(relid, RowExclusiveLock);
	if (m->rel->rd_rel->relkind != RELKIND_RELATION)
		elog(ERROR, "pg_temp.%s is not a table", m->name);
	desc = RelationGetDescr(m->rel);
	Assert(desc->natts == t->nkeys + 3 + t->npayload + 1 + t->nextra);
	m->slot = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	m->bistate = GetBulkInsertState();
	return m;
}

/* Queue a winner with the action the statements take for it. */
void
apply_add(ApplyWriter *m, const Winner *winner, char action)
{
	TargetInfo *t = m->t;
	TupleTableSlot *slot = m->slot;
	int			a = 0;

	ExecClearTuple(slot);
	for (int i = 0; i < t->nkeys; i++, a++)
	{
		slot->tts_values[a] = winner->keys[i];
		slot->tts_isnull[a] = false;
	}
	slot->tts_values[a] = ordering_value(t, winner->version, 0);
	slot->tts_isnull[a++] = false;
	slot->tts_values[a] = BoolGetDatum(winner->tombstone);
	slot->tts_isnull[a++] = false;
	slot->tts_values[a] = winner->hash;
	slot->tts_isnull[a++] = false;
	for (int i = 0; i < t->npayload; i++, a++)
	{
		slot->tts_values[a] = winner->payload[i];
		slot->tts_isnull[a] = winner->payload_isnull[i];
	}
	slot->tts_values[a] = CharGetDatum(action);
	slot->tts_isnull[a++] = false;
	for (int i = 0; i < t->nextra; i++, a++)
	{
		slot->tts_values[a] = ordering_value(t, winner->version, i + 1);
		slot->tts_isnull[a] = false;
	}
	ExecStoreVirtualTuple(slot);
	table_tuple_insert(m->rel, slot, GetCurrentCommandId(true), 0, m->bistate);
	m->nactions[action == ACTION_INSERT ? 0 : action == ACTION_UPDATE ? 1 :
				action == ACTION_DELETE ? 2 : action == ACTION_REPLACE ? 3 : 4]++;
}

static void
apply_check(ApplyWriter *m, const char *what, uint64 expected, uint64 written)
{
	if (written != expected)
		ereport(ERROR,
				(errcode(ERRCODE_TRIGGERED_ACTION_EXCEPTION),
				 errmsg("batch %s expected its %s to write " UINT64_FORMAT " rows of table \"%s\", but it wrote " UINT64_FORMAT,
						m->batch_id, what, expected, m->t->relname, written),
				 errdetail("A trigger on the target skipped rows, or the target changed during the batch."),
				 errhint("reconcile_batch refuses to commit a receipt that does not match the target; nothing was applied.")));
}

/* Every winner is queued: close the table and make its rows visible. */
static void
apply_fill_end(ApplyWriter *m)
{
	if (m->filled)
		return;
	ExecDropSingleTupleTableSlot(m->slot);
	FreeBulkInsertState(m->bistate);
	table_close(m->rel, NoLock);
	CommandCounterIncrement();
	m->filled = true;
}

/*
 * Once every winner is queued: a SELECT of the rows the batch would leave
 * live in the target (inserted and updated, not tombstones), under the
 * target's names for the columns a batch loads, in the table's column
 * order.  reader, the target's owner that runs the dataset checks over
 * them, is granted SELECT on the temporary table: on this table only, for
 * as long as it lives (the batch's transaction; no other session can read
 * a temporary table).
 */
char *
apply_winners_sql(ApplyWriter *m, Oid reader)
{
	TargetInfo *t = m->t;
	TargetColumn **cols;
	int			ncols = target_loaded_columns(t, &cols);
	const char *tmp = psprintf("pg_temp.%s", quote_identifier(m->name));
	StringInfoData sql;

	apply_fill_end(m);
	if (reader != GetUserId() &&
		SPI_execute(psprintf("GRANT SELECT ON TABLE %s TO %s", tmp,
							 quote_identifier(GetUserNameFromId(reader, false))),
					false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not grant SELECT on %s", m->name);

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	for (int i = 0; i < ncols; i++)
	{
		TargetColumn *c = cols[i];
		char	   *src = NULL;

		if (c == &t->version)
			src = "w.v";
		else if (c == &t->deleted)
			src = "w.d";
		else if (c == &t->hash)
			src = "w.h";
		for (int x = 0; src == NULL && x < t->nextra; x++)
			if (c == &t->extra[x])
				src = psprintf("w.x%d", x + 1);
		for (int k = 0; src == NULL && k < t->nkeys; k++)
			if (c == &t->keys[k])
				src = psprintf("w.k%d", k + 1);
		for (int p = 0; src == NULL && p < t->npayload; p++)
			if (c == &t->payload[p])
				src = psprintf("w.p%d", p + 1);
		appendStringInfo(&sql, "%s%s AS %s", i > 0 ? ", " : "", src, quote_identifier(c->name));
	}
	appendStringInfo(&sql, " FROM %s AS w WHERE NOT w.d", tmp);
	return sql.data;
}

/* Where an UPDATE of the target reads the winners of one action from. */
typedef struct UpdateSource
{
	char	   *from;			/* a FROM item named w */
	const char *filter;			/* the condition that picks the action's rows */
	const char *deleted;		/* an update's deleted column: w.d, or false where
								 * the winners come as arrays (no tombstone among
								 * them: only a partial batch, refused on Citus,
								 * updates to a tombstone with its payload) */
	int			nparams;
	Oid		   *types;
	Datum	   *values;
} UpdateSource;

/*
 * Where the winners of one action are read from, in *nsrc statements.
 *
 * Normally the temporary table, in one statement.  Citus cannot join a
 * reference table that it modifies with a local table, but it ships
 * parameters with the statement to every placement: there the winners
 * come as one array per column, unnested in the statement (citus.c
 * refuses a reference target with a column whose type has no array type).
 *
 * A hash-distributed target joined with the temporary table would get the
 * whole table, as an intermediate result, in the task of every shard,
 * each of which reads all of it: work that grows with the number of
 * shards.  Its winners are grouped by the shard of their distribution
 * column (Citus's get_shard_id_for_distribution_column) and each group is
 * written by a statement of its own, with its arrays and a condition
 * "distribution column = ANY (the group's keys)", from which Citus routes
 * the statement to the one shard that holds them.  A target with a column
 * whose values would not come back from an array (an array column, which
 * array_agg would stack into a dimension more) keeps the one statement.  The grouping only
 * spares work: every statement keeps the full key match and version
 * check, and their row counts are added up and checked as one.
 */
static UpdateSource *
update_sources(ApplyWriter *m, const char *tmp, char action, int *nsrc)
{
	TargetInfo *t = m->t;
	StringInfoData agg,
				from,
				names;
	int			npay = action == ACTION_UPDATE ? t->npayload : 0;
	int			ncols = t->nkeys + 2 + npay + t->nextra;
	int			distk = -1;
	int			first;
	Oid			argtypes[1] = {REGCLASSOID};
	Datum		args[1];
	UpdateSource *src;
	char	   *sql;

	if (t->citus_kind == CITUS_DISTRIBUTED)
	{
		char	   *distcol = NULL;

		(void) citus_table_kind(t->relid, &distcol, NULL);
		for (int k = 0; distcol != NULL && k < t->nkeys; k++)
			if (strcmp(t->keys[k].name, distcol) == 0)
				distk = k;
		/* Only columns whose values make arrays that unnest gives back. */
		for (int i = 0; distk >= 0 && i < ncols; i++)
		{
			TargetColumn *c = i < t->nkeys ? &t->keys[i] : i == t->nkeys ? &t->version :
				i == t->nkeys + 1 ? &t->hash : i < t->nkeys + 2 + npay ? &t->payload[i - t->nkeys - 2] :
				&t->extra[i - t->nkeys - 2 - npay];

			if (!OidIsValid(get_array_type(c->typid)) || type_is_array(getBaseType(c->typid)))
				distk = -1;
		}
	}
	if (t->citus_kind != CITUS_REFERENCE && distk < 0)
	{
		src = palloc0(sizeof(UpdateSource));
		src->from = psprintf("%s AS w", tmp);
		src->filter = action == ACTION_UPDATE ? "w.a OPERATOR(pg_catalog.=) 'U'" :
			"w.a OPERATOR(pg_catalog.=) 'D'";
		src->deleted = "w.d";
		*nsrc = 1;
		return src;
	}

	initStringInfo(&agg);
	initStringInfo(&from);
	initStringInfo(&names);
	for (int i = 0; i < ncols; i++)
	{
		TargetColumn *c;
		char	   *name;

		if (i < t->nkeys)
			c = &t->keys[i], name = psprintf("k%d", i + 1);
		else if (i == t->nkeys)
			c = &t->version, name = "v";
		else if (i == t->nkeys + 1)
			c = &t->hash, name = "h";
		else if (i < t->nkeys + 2 + npay)
			c = &t->payload[i - t->nkeys - 2], name = psprintf("p%d", i - t->nkeys - 1);
		else
			c = &t->extra[i - t->nkeys - 2 - npay], name = psprintf("x%d", i - t->nkeys - 1 - npay);
		if (!OidIsValid(get_array_type(c->typid)))
			elog(ERROR, "type %s has no array type", format_type_be(c->typid));
		appendStringInfo(&agg, "%spg_catalog.array_agg(w.%s)", i ? ", " : "", name);
		appendStringInfo(&from, "%spg_catalog.unnest($%d)", i ? ", " : "", i + 1);
		appendStringInfo(&names, "%s%s", i ? ", " : "", name);
	}
	if (distk >= 0)
	{
		sql = psprintf("SELECT %s, %s FROM %s AS w WHERE w.a OPERATOR(pg_catalog.=) '%c' GROUP BY 1",
					   citus_function_call("get_shard_id_for_distribution_column",
										   psprintf("$1, w.k%d", distk + 1)),
					   agg.data, tmp, action);
		first = 2;
	}
	else
	{
		sql = psprintf("SELECT %s FROM %s AS w WHERE w.a OPERATOR(pg_catalog.=) '%c'",
					   agg.data, tmp, action);
		first = 1;
	}
	args[0] = ObjectIdGetDatum(t->relid);
	if (SPI_execute_with_args(sql, distk >= 0 ? 1 : 0, argtypes, args, NULL, false, 0) != SPI_OK_SELECT ||
		SPI_processed < 1)
		elog(ERROR, "could not read %s", tmp);

	*nsrc = (int) SPI_processed;
	src = palloc0(sizeof(UpdateSource) * *nsrc);
	for (int r = 0; r < *nsrc; r++)
	{
		src[r].types = palloc(sizeof(Oid) * ncols);
		src[r].values = palloc(sizeof(Datum) * ncols);
		for (int i = 0; i < ncols; i++)
		{
			bool		isnull;

			src[r].types[i] = SPI_gettypeid(SPI_tuptable->tupdesc, first + i);
			src[r].values[i] = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc,
											 first + i, &isnull);
			if (isnull)
				elog(ERROR, "%s holds no rows of action '%c'", tmp, action);
			src[r].values[i] = PointerGetDatum(PG_DETOAST_DATUM_COPY(src[r].values[i]));
		}
		src[r].nparams = ncols;
		src[r].from = psprintf("ROWS FROM (%s) AS w(%s)", from.data, names.data);
		src[r].deleted = "false";
		src[r].filter = distk < 0 ? "true" :
			psprintf("t.%s %s ANY ($%d)", quote_identifier(t->keys[distk].name),
					 operator_sql(t->key_eq_ops[distk]), distk + 1);
	}
	SPI_freetuptable(SPI_tuptable);
	return src;
}

/* Write the queued winners to the target, with the caller's rights. */
void
apply_run(ApplyWriter *m)
{
	TargetInfo *t = m->t;
	StringInfoData cols,
				sel,
				keymatch,
				set,
				keep,
				vset;			/* further version columns */
	const char *tmp = psprintf("pg_temp.%s", quote_identifier(m->name));
	char	   *sql;

	/*
	 * The version guard: the version type's own ordering, in the column's
	 * collation; several version columns compare in order.
	 */
	const char *guard = version_guard_sql(t);
	const char *same = version_same_sql(t);

	apply_fill_end(m);

	initStringInfo(&cols);
	initStringInfo(&sel);
	initStringInfo(&keymatch);
	initStringInfo(&set);
	initStringInfo(&keep);
	initStringInfo(&vset);
	for (int i = 0; i < t->nkeys; i++)
	{
		appendStringInfo(&cols, "%s, ", quote_identifier(t->keys[i].name));
		appendStringInfo(&sel, "w.k%d, ", i + 1);
		appendStringInfo(&keymatch, " AND t.%s %s w.k%d", quote_identifier(t->keys[i].name),
						 operator_sql(t->key_eq_ops[i]), i + 1);
	}
	appendStringInfo(&cols, "%s, %s, %s", quote_identifier(t->version.name),
					 quote_identifier(t->deleted.name), quote_identifier(t->hash.name));
	appendStringInfoString(&sel, "w.v, w.d, w.h");
	for (int i = 0; i < t->nextra; i++)
	{
		appendStringInfo(&cols, ", %s", quote_identifier(t->extra[i].name));
		appendStringInfo(&sel, ", w.x%d", i + 1);
		appendStringInfo(&vset, ", %s = w.x%d", quote_identifier(t->extra[i].name), i + 1);
	}
	for (int i = 0; i < t->npayload; i++)
	{
		appendStringInfo(&cols, ", %s", quote_identifier(t->payload[i].name));
		appendStringInfo(&sel, ", w.p%d", i + 1);
		appendStringInfo(&set, ", %s = w.p%d", quote_identifier(t->payload[i].name), i + 1);
		appendStringInfo(&keep, ", %s = CASE WHEN w.d THEN t.%s ELSE w.p%d END",
						 quote_identifier(t->payload[i].name),
						 quote_identifier(t->payload[i].name), i + 1);
	}

	if (m->nactions[0] > 0)
	{
		/*
		 * Citus copies a plain INSERT ... SELECT into the shards over
		 * connections that, once the batch's reads have used them, it does
		 * not count as having written: it would commit them after the
		 * coordinator, without two-phase commit (a worker lost then keeps
		 * none of its rows while the receipt stays).  With ON CONFLICT it
		 * runs the insert as tasks that it does count.  The merge found none
		 * of these keys, so the clause changes nothing: a row it skipped
		 * would fail apply_check.
		 */
		sql = psprintf("INSERT INTO %s AS t (%s) SELECT %s FROM %s AS w WHERE w.a OPERATOR(pg_catalog.=) 'I'%s",
					   t->qualname, cols.data, sel.data, tmp,
					   t->citus_kind != CITUS_NONE ? " ON CONFLICT DO NOTHING" : "");
		if (SPI_execute(sql, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not insert into %s", t->relname);
		apply_check(m, "INSERT", m->nactions[0], SPI_processed);
	}
	if (m->nactions[1] > 0)
	{
		int			nsrc;
		UpdateSource *src = update_sources(m, tmp, ACTION_UPDATE, &nsrc);
		uint64		written = 0;

		for (int i = 0; i < nsrc; i++)
		{
			sql = psprintf("UPDATE %s AS t SET %s = w.v%s, %s = %s, %s = w.h%s FROM %s"
						   " WHERE %s%s AND %s",
						   t->qualname, quote_identifier(t->version.name), vset.data,
						   quote_identifier(t->deleted.name), src[i].deleted,
						   quote_identifier(t->hash.name), set.data, src[i].from, src[i].filter,
						   keymatch.data, guard);
			if (SPI_execute_with_args(sql, src[i].nparams, src[i].types, src[i].values, NULL,
									  false, 0) != SPI_OK_UPDATE)
				elog(ERROR, "could not update %s", t->relname);
			written += SPI_processed;
		}
		apply_check(m, "UPDATE", m->nactions[1], written);
	}
	if (m->nactions[2] > 0)
	{
		int			nsrc;
		UpdateSource *src;
		uint64		written = 0;

		/* A tombstone keeps the row's last payload; only its state moves. */
		src = update_sources(m, tmp, ACTION_DELETE, &nsrc);
		for (int i = 0; i < nsrc; i++)
		{
			sql = psprintf("UPDATE %s AS t SET %s = w.v%s, %s = true, %s = w.h FROM %s"
						   " WHERE %s%s AND %s",
						   t->qualname, quote_identifier(t->version.name), vset.data,
						   quote_identifier(t->deleted.name), quote_identifier(t->hash.name),
						   src[i].from, src[i].filter, keymatch.data, guard);
			if (SPI_execute_with_args(sql, src[i].nparams, src[i].types, src[i].values, NULL,
									  false, 0) != SPI_OK_UPDATE)
				elog(ERROR, "could not update %s", t->relname);
			written += SPI_processed;
		}
		apply_check(m, "tombstone UPDATE", m->nactions[2], written);
	}
	if (m->nactions[3] > 0)
	{
		/*
		 * A resolution's replacement of the payload at the row's own version
		 * (resolve.c checked the row's hash under the lock); a tombstone
		 * keeps the row's last payload.
		 */
		sql = psprintf("UPDATE %s AS t SET %s = w.d, %s = w.h%s FROM %s AS w"
					   " WHERE w.a OPERATOR(pg_catalog.=) 'R'%s AND %s",
					   t->qualname, quote_identifier(t->deleted.name),
					   quote_identifier(t->hash.name), keep.data, tmp, keymatch.data, same);
		if (SPI_execute(sql, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not update %s", t->relname);
		apply_check(m, "replacing UPDATE", m->nactions[3], SPI_processed);
	}
	if (m->nactions[4] > 0)
	{
		/*
		 * delete_mode 'remove' (removed.c): the row goes; its key is kept.
		 * At an equal version, a resolution's DELETE (Citus targets do not
		 * take this mode).
		 */
		sql = psprintf("DELETE FROM %s AS t USING %s AS w"
					   " WHERE w.a OPERATOR(pg_catalog.=) 'X'%s AND (%s OR %s)",
					   t->qualname, tmp, keymatch.data, guard, same);
		if (SPI_execute(sql, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "could not delete from %s", t->relname);
		apply_check(m, "DELETE", m->nactions[4], SPI_processed);
	}
	if (SPI_execute(psprintf("DROP TABLE %s", tmp), false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not drop %s", m->name);
}

