/*
 * apply.c
 *		The general write path: winners collected in a temporary table and
 *		applied with one INSERT and two UPDATE statements.
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

#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_operator.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "reconcile.h"
#include "merge.h"

/* Columns: keys, version, deleted, hash, payload, action. */
void
apply_create(Merger *m)
{
	TargetInfo *t = m->t;
	StringInfoData sql;
	TupleDesc	desc PG_USED_FOR_ASSERTS_ONLY;
	Oid			relid;

	m->apply_name = psprintf("reconcile_apply_%.16s", m->b->batch_id);
	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TEMPORARY TABLE pg_temp.%s (", quote_identifier(m->apply_name));
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
	appendStringInfoString(&sql, ", a pg_catalog.\"char\") ON COMMIT DROP");
	if (SPI_execute(sql.data, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not create %s", m->apply_name);

	relid = get_relname_relid(m->apply_name, LookupExplicitNamespace("pg_temp", false));
	if (!OidIsValid(relid))
		elog(ERROR, "could not find pg_temp.%s", m->apply_name);
	m->apply = table_open(relid, RowExclusiveLock);
	if (m->apply->rd_rel->relkind != RELKIND_RELATION)
		elog(ERROR, "pg_temp.%s is not a table", m->apply_name);
	desc = RelationGetDescr(m->apply);
	Assert(desc->natts == t->nkeys + 3 + t->npayload + 1);
	m->apply_slot = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	m->bistate = GetBulkInsertState();
}

/* Queue the group's winner (its first row) with an action. */
void
apply_add(Merger *m, char action)
{
	TargetInfo *t = m->t;
	TupleTableSlot *slot = m->apply_slot;
	GroupRow   *w = &m->rows[0];
	int			a = 0;
	bytea	   *h = palloc(VARHDRSZ + RECONCILE_SHA256_LEN);

	ExecClearTuple(slot);
	for (int i = 0; i < t->nkeys; i++, a++)
	{
		slot->tts_values[a] = m->values[SORT_ATT_FIRST_KEY - 1 + i];
		slot->tts_isnull[a] = false;
	}
	SET_VARSIZE(h, VARHDRSZ + RECONCILE_SHA256_LEN);
	memcpy(VARDATA(h), w->hash, RECONCILE_SHA256_LEN);
	slot->tts_values[a] = version_datum(t, w->version);
	slot->tts_isnull[a++] = false;
	slot->tts_values[a] = BoolGetDatum(w->is_delete);
	slot->tts_isnull[a++] = false;
	slot->tts_values[a] = PointerGetDatum(h);
	slot->tts_isnull[a++] = false;
	for (int i = 0; i < t->npayload; i++, a++)
	{
		slot->tts_values[a] = m->values[SORT_ATT_FIRST_KEY - 1 + t->nkeys + i];
		slot->tts_isnull[a] = m->isnull[SORT_ATT_FIRST_KEY - 1 + t->nkeys + i];
	}
	slot->tts_values[a] = CharGetDatum(action);
	slot->tts_isnull[a] = false;
	ExecStoreVirtualTuple(slot);
	table_tuple_insert(m->apply, slot, GetCurrentCommandId(true), 0, m->bistate);
}

static void
apply_check(Merger *m, const char *what, uint64 expected)
{
	if (SPI_processed != expected)
		ereport(ERROR,
				(errcode(ERRCODE_TRIGGERED_ACTION_EXCEPTION),
				 errmsg("batch %s expected its %s to write " UINT64_FORMAT " rows of table \"%s\", but it wrote " UINT64_FORMAT,
						m->b->batch_id, what, expected, m->t->relname, SPI_processed),
				 errdetail("A trigger on the target skipped rows, or the target changed during the batch."),
				 errhint("reconcile_batch refuses to commit a receipt that does not match the target; nothing was applied.")));
}

/* Write the queued winners to the target, with the caller's rights. */
void
apply_run(Merger *m)
{
	TargetInfo *t = m->t;
	StringInfoData cols,
				sel,
				keymatch,
				set;
	const char *tmp = psprintf("pg_temp.%s", quote_identifier(m->apply_name));
	char	   *sql;

	ExecDropSingleTupleTableSlot(m->apply_slot);
	FreeBulkInsertState(m->bistate);
	table_close(m->apply, NoLock);
	CommandCounterIncrement();

	initStringInfo(&cols);
	initStringInfo(&sel);
	initStringInfo(&keymatch);
	initStringInfo(&set);
	for (int i = 0; i < t->nkeys; i++)
	{
		HeapTuple	tup = SearchSysCache1(OPEROID, ObjectIdGetDatum(t->key_eq_ops[i]));
		Form_pg_operator op;

		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for operator %u", t->key_eq_ops[i]);
		op = (Form_pg_operator) GETSTRUCT(tup);
		appendStringInfo(&cols, "%s, ", quote_identifier(t->keys[i].name));
		appendStringInfo(&sel, "w.k%d, ", i + 1);
		appendStringInfo(&keymatch, " AND t.%s OPERATOR(%s.%s) w.k%d",
						 quote_identifier(t->keys[i].name),
						 quote_identifier(get_namespace_name(op->oprnamespace)),
						 NameStr(op->oprname), i + 1);
		ReleaseSysCache(tup);
	}
	appendStringInfo(&cols, "%s, %s, %s", quote_identifier(t->version.name),
					 quote_identifier(t->deleted.name), quote_identifier(t->hash.name));
	appendStringInfoString(&sel, "w.v, w.d, w.h");
	for (int i = 0; i < t->npayload; i++)
	{
		appendStringInfo(&cols, ", %s", quote_identifier(t->payload[i].name));
		appendStringInfo(&sel, ", w.p%d", i + 1);
		appendStringInfo(&set, ", %s = w.p%d", quote_identifier(t->payload[i].name), i + 1);
	}

	if (m->nactions[0] > 0)
	{
		sql = psprintf("INSERT INTO %s AS t (%s) SELECT %s FROM %s AS w WHERE w.a OPERATOR(pg_catalog.=) 'I'",
					   t->qualname, cols.data, sel.data, tmp);
		if (SPI_execute(sql, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not insert into %s", t->relname);
		apply_check(m, "INSERT", m->nactions[0]);
	}
	if (m->nactions[1] > 0)
	{
		sql = psprintf("UPDATE %s AS t SET %s = w.v, %s = false, %s = w.h%s FROM %s AS w"
					   " WHERE w.a OPERATOR(pg_catalog.=) 'U'%s AND t.%s OPERATOR(pg_catalog.<) w.v",
					   t->qualname, quote_identifier(t->version.name),
					   quote_identifier(t->deleted.name), quote_identifier(t->hash.name),
					   set.data, tmp, keymatch.data, quote_identifier(t->version.name));
		if (SPI_execute(sql, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not update %s", t->relname);
		apply_check(m, "UPDATE", m->nactions[1]);
	}
	if (m->nactions[2] > 0)
	{
		/* A tombstone keeps the row's last payload; only its state moves. */
		sql = psprintf("UPDATE %s AS t SET %s = w.v, %s = true, %s = w.h FROM %s AS w"
					   " WHERE w.a OPERATOR(pg_catalog.=) 'D'%s AND t.%s OPERATOR(pg_catalog.<) w.v",
					   t->qualname, quote_identifier(t->version.name),
					   quote_identifier(t->deleted.name), quote_identifier(t->hash.name),
					   tmp, keymatch.data, quote_identifier(t->version.name));
		if (SPI_execute(sql, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not update %s", t->relname);
		apply_check(m, "tombstone UPDATE", m->nactions[2]);
	}
	if (SPI_execute(psprintf("DROP TABLE %s", tmp), false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not drop %s", m->apply_name);
}

