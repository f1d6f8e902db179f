/*
 * merge.c
 *		One pass over the sorted staged rows: duplicates, conflicts,
 *		winners, and the version-monotonic write.
 *
 * The rows arrive grouped by key, highest version first, ties in source
 * order (object_key, source_row).  For each key the first row is the
 * candidate winner.  Two rows with the same version but different payload
 * hashes are a conflict, and so is a winner whose version equals the
 * target row's with another hash: under 'quarantine' every staged row of
 * such a key is held back in reconcile.conflicts, under 'abort' the batch
 * fails.  Otherwise the winner is compared with the target row found by
 * probing the key's unique index: a higher version is written (an UPSERT
 * as a live row, a DELETE as a tombstone), an equal one is unchanged and a
 * lower one is stale.  Within a version the first row takes that
 * disposition and the others are exact duplicates; rows of lower versions
 * are stale.
 *
 * Winners are written by one of two paths, which give the same result:
 *
 * - the direct path writes each winner while the pass is at its key: the
 *   row found by the probe is updated by its TID the way logical
 *   replication applies changes (ExecSimpleRelationUpdate), new keys are
 *   queued and inserted many rows at a time the way COPY does, stale rows
 *   cost one index probe; constraints, indexes, generated columns and
 *   defaults work;
 *
 * - the general path collects the winners in a temporary table and applies
 *   them with one INSERT and two UPDATE statements run with the caller's
 *   rights, so everything a statement honours is honoured: statement and
 *   row triggers, transition tables, partition routing, foreign keys.  The
 *   UPDATEs repeat the version check (target version < new version).
 *
 * The direct path is taken for a plain table without triggers or rules in
 * a READ COMMITTED transaction; anything else, or reconcile.write_path =
 * 'general', takes the general path.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/heapam.h"
#include "access/nbtree.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_operator.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/nodeModifyTable.h"
#include "executor/spi.h"
#include "optimizer/optimizer.h"
#include "rewrite/rewriteHandler.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "reconcile.h"

/* How many conflicts an 'abort' error names. */
#define CONFLICTS_NAMED 5

/* Actions in the apply table. */
#define ACTION_INSERT 'I'
#define ACTION_UPDATE 'U'
#define ACTION_DELETE 'D'

typedef struct GroupRow
{
	int32		obj;
	int64		source_row;
	bool		is_delete;
	int64		version;
	uint8		hash[RECONCILE_SHA256_LEN];
} GroupRow;

/* The target's key index, per leaf partition for a partitioned target. */
typedef struct ProbePart
{
	Relation	heap;
	Relation	index;
	IndexScanDesc scan;
	TupleTableSlot *slot;
	AttrNumber	version_attnum;
	AttrNumber	hash_attnum;
} ProbePart;

typedef struct Probe
{
	int			nparts;
	ProbePart  *parts;
	Snapshot	snapshot;
	ScanKeyData *skeys;

	/*
	 * Walking: keys arrive in the index's order, so instead of descending
	 * the btree for every key, one scan steps forward through the index
	 * alongside the batch and descends again only across a gap of more than
	 * WALK_MAX_STEPS entries.  Used for a single-column key on a plain table.
	 */
	bool		walk;
	bool		positioned;
	bool		exhausted;		/* the scan ran off the end of the index */
	FmgrInfo	cmp;			/* btree comparison of the key's type */
	Oid			ge_proc;
	Oid			collation;

	/* Index scans allocate lazily: never in a key's short-lived context. */
	MemoryContext cxt;
} Probe;

#define WALK_MAX_STEPS 64

#define DIRECT_INSERT_ROWS 1000

/* The direct path's executor state. */
typedef struct DirectWriter
{
	Relation	rel;
	EState	   *estate;
	ResultRelInfo *rri;
	TupleTableSlot *slot;		/* the new row, in the target's descriptor */
	int			ndefaults;		/* columns a new row takes defaults for */
	AttrNumber *default_atts;
	ExprState **default_exprs;

	/* New keys go in as multi-row inserts, the way COPY writes. */
	TupleTableSlot *inserts[DIRECT_INSERT_ROWS];
	int			ninserts;
	BulkInsertState bistate;
} DirectWriter;

typedef struct Merger
{
	BatchState *b;
	TargetInfo *t;
	MemoryContext groupcxt;

	/* The current key's rows. */
	Datum	   *values;			/* first row's sort tuple, copied */
	bool	   *isnull;
	GroupRow   *rows;
	int			nrows;
	int			maxrows;

	Probe	   *probe;
	Probe	   *latest;			/* REPEATABLE READ: catches concurrent inserts */

	StateBuffer *conflicts;
	int64		nconflicts;
	StringInfoData named;		/* conflicts named in an 'abort' error */

	DirectWriter *direct;		/* NULL on the general path */

	Relation	apply;
	char	   *apply_name;
	BulkInsertState bistate;
	TupleTableSlot *apply_slot;
	int64		nactions[3];	/* insert, update, delete */
} Merger;

/* ---- probing the target ---- */

static Probe *
probe_open(TargetInfo *t, Snapshot snapshot, bool walk)
{
	Probe	   *p = palloc0(sizeof(Probe));
	List	   *leaves = NIL;
	ListCell   *lc;
	int			n = 0;

	p->snapshot = RegisterSnapshot(snapshot);
	p->skeys = palloc0(sizeof(ScanKeyData) * t->nkeys);
	p->cxt = CurrentMemoryContext;
	if (!t->partitioned)
		leaves = list_make1_oid(t->relid);
	else
		foreach(lc, find_all_inheritors(t->relid, AccessShareLock, NULL))
			if (get_rel_relkind(lfirst_oid(lc)) == RELKIND_RELATION)
				leaves = lappend_oid(leaves, lfirst_oid(lc));

	p->parts = palloc0(sizeof(ProbePart) * Max(list_length(leaves), 1));
	foreach(lc, leaves)
	{
		ProbePart  *part = &p->parts[n++];
		Oid			relid = lfirst_oid(lc);

		part->heap = table_open(relid, AccessShareLock);
		part->index = index_open(t->partitioned ?
								 index_get_partition(part->heap, t->key_index) :
								 t->key_index, AccessShareLock);
		part->scan = index_beginscan(part->heap, part->index, p->snapshot,
									 t->nkeys, 0);
		part->slot = table_slot_create(part->heap, NULL);
		part->version_attnum = get_attnum(relid, t->version.name);
		part->hash_attnum = get_attnum(relid, t->hash.name);
	}
	p->nparts = n;

	if (walk && n == 1 && t->nkeys == 1 &&
		(p->parts[0].index->rd_indoption[0] & INDOPTION_DESC) == 0)
	{
		Relation	index = p->parts[0].index;
		Oid			opcintype = index->rd_opcintype[0];
		Oid			ge_op = get_opfamily_member(index->rd_opfamily[0], opcintype,
												opcintype, BTGreaterEqualStrategyNumber);

		p->walk = OidIsValid(ge_op);
		if (p->walk)
		{
			fmgr_info_copy(&p->cmp, index_getprocinfo(index, 1, BTORDER_PROC),
						   CurrentMemoryContext);
			p->ge_proc = get_opcode(ge_op);
			p->collation = t->key_collations[0];
			p->parts[0].scan->xs_want_itup = true;
		}
	}
	return p;
}

static void
probe_close(Probe *p)
{
	for (int i = 0; i < p->nparts; i++)
	{
		ProbePart  *part = &p->parts[i];

		index_endscan(part->scan);
		ExecDropSingleTupleTableSlot(part->slot);
		index_close(part->index, AccessShareLock);
		table_close(part->heap, AccessShareLock);
	}
	UnregisterSnapshot(p->snapshot);
}

static ProbePart *probe_locate(Probe *p, TargetInfo *t, Datum *keys);

/* Walking: move to the next index entry. */
static void
walk_advance(Probe *p)
{
	if (index_getnext_tid(p->parts[0].scan, ForwardScanDirection) == NULL)
		p->exhausted = true;
}

/* Walking: descend to the first index entry >= key. */
static void
walk_position(Probe *p, Datum key)
{
	ScanKeyInit(&p->skeys[0], 1, BTGreaterEqualStrategyNumber, p->ge_proc, key);
	p->skeys[0].sk_collation = p->collation;
	index_rescan(p->parts[0].scan, p->skeys, 1, NULL, 0);
	p->positioned = true;
	p->exhausted = false;
	walk_advance(p);
}

/* Walking: the visible row of key, or false; keys come in ascending order. */
static bool
walk_find(Probe *p, Datum key)
{
	IndexScanDesc scan = p->parts[0].scan;
	int			steps = 0;

	if (!p->positioned)
		walk_position(p, key);
	while (!p->exhausted)
	{
		bool		isnull;
		Datum		current = index_getattr(scan->xs_itup, 1, scan->xs_itupdesc, &isnull);
		int32		c = isnull ? 1 :
			DatumGetInt32(FunctionCall2Coll(&p->cmp, p->collation, current, key));

		if (c > 0)
			return false;		/* past the key: it is not there */
		if (c < 0)
		{
			if (++steps > WALK_MAX_STEPS)
			{
				walk_position(p, key);
				steps = 0;
			}
			else
				walk_advance(p);
			continue;
		}
		/* The key's entry; older versions of the row may have entries too. */
		if (index_fetch_heap(scan, p->parts[0].slot))
			return true;
		walk_advance(p);
	}
	return false;
}

/* The version and hash of the row a probe found. */
static void
probe_read(ProbePart *part, TargetInfo *t, int64 *version, bytea **hash)
{
	bool		isnull;
	Datum		d;

	d = slot_getattr(part->slot, part->version_attnum, &isnull);
	*version = t->version.typid == INT8OID ? DatumGetInt64(d) :
		t->version.typid == INT4OID ? DatumGetInt32(d) : DatumGetInt16(d);
	d = slot_getattr(part->slot, part->hash_attnum, &isnull);
	*hash = isnull ? NULL : DatumGetByteaPCopy(d);
}

/*
 * Find the target row of a key; returns NULL if there is none.  The
 * existing hash is copied into *hash (NULL when the row has none).  The
 * row stays in the returned part's slot until the next probe.
 */
static ProbePart *
probe_find(Probe *p, TargetInfo *t, Datum *keys, int64 *version, bytea **hash)
{
	MemoryContext caller = MemoryContextSwitchTo(p->cxt);
	ProbePart  *found = probe_locate(p, t, keys);

	MemoryContextSwitchTo(caller);
	if (found != NULL)
		probe_read(found, t, version, hash);
	return found;
}

/* The part whose slot now holds the key's row, or NULL. */
static ProbePart *
probe_locate(Probe *p, TargetInfo *t, Datum *keys)
{
	if (p->walk)
		return walk_find(p, keys[0]) ? &p->parts[0] : NULL;
	for (int i = 0; i < t->nkeys; i++)
	{
		ScanKeyInit(&p->skeys[i], i + 1, BTEqualStrategyNumber,
					t->key_eq_procs[i], keys[i]);
		p->skeys[i].sk_collation = t->key_collations[i];
	}
	for (int i = 0; i < p->nparts; i++)
	{
		ProbePart  *part = &p->parts[i];

		index_rescan(part->scan, p->skeys, t->nkeys, NULL, 0);
		if (index_getnext_slot(part->scan, ForwardScanDirection, part->slot))
			return part;
	}
	return NULL;
}

/* ---- the apply table ---- */

/* Columns: keys, version, deleted, hash, payload, action. */
static void
apply_create(Merger *m)
{
	TargetInfo *t = m->t;
	StringInfoData sql;
	TupleDesc	desc PG_USED_FOR_ASSERTS_ONLY;

	m->apply_name = psprintf("reconcile_apply_%.16s", m->b->batch_id);
	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TEMPORARY TABLE %s (", quote_identifier(m->apply_name));
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

	m->apply = table_open(RelnameGetRelid(m->apply_name), RowExclusiveLock);
	desc = RelationGetDescr(m->apply);
	Assert(desc->natts == t->nkeys + 3 + t->npayload + 1);
	m->apply_slot = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	m->bistate = GetBulkInsertState();
}

static Datum
version_datum(TargetInfo *t, int64 v)
{
	return t->version.typid == INT8OID ? Int64GetDatum(v) :
		t->version.typid == INT4OID ? Int32GetDatum((int32) v) : Int16GetDatum((int16) v);
}

/* Queue the group's winner (its first row) with an action. */
static void
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
static void
apply_run(Merger *m)
{
	TargetInfo *t = m->t;
	StringInfoData cols,
				sel,
				keymatch,
				set;
	const char *tmp = quote_identifier(m->apply_name);
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

/* ---- the direct path ---- */

/* Whether the direct path may write this target. */
static bool
direct_allowed(TargetInfo *t)
{
	Relation	rel;
	bool		ok;

	if (reconcile_write_path == WRITE_PATH_GENERAL || t->partitioned ||
		IsolationUsesXactSnapshot())
		return false;
	rel = table_open(t->relid, NoLock);
	ok = rel->trigdesc == NULL && !rel->rd_rel->relhasrules &&
		rel->rd_rel->relkind == RELKIND_RELATION;
	table_close(rel, NoLock);
	return ok;
}

static DirectWriter *
direct_open(TargetInfo *t)
{
	DirectWriter *w = palloc0(sizeof(DirectWriter));
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	TupleDesc	desc;

	w->rel = table_open(t->relid, NoLock);	/* locked by reconcile_batch */
	desc = RelationGetDescr(w->rel);
	w->estate = CreateExecutorState();
	rte->rtekind = RTE_RELATION;
	rte->relid = t->relid;
	rte->relkind = w->rel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
	ExecInitRangeTable(w->estate, list_make1(rte));
	w->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(w->rri, w->rel, 1, NULL, 0);
	w->estate->es_output_cid = GetCurrentCommandId(true);
	w->estate->es_snapshot = GetActiveSnapshot();
	ExecOpenIndices(w->rri, false);
	w->slot = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	for (int i = 0; i < DIRECT_INSERT_ROWS; i++)
		w->inserts[i] = table_slot_create(w->rel, NULL);
	w->bistate = GetBulkInsertState();

	/* Columns the batch does not provide take their defaults on insert. */
	w->default_atts = palloc(sizeof(AttrNumber) * desc->natts);
	w->default_exprs = palloc(sizeof(ExprState *) * desc->natts);
	for (int a = 1; a <= desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a - 1);
		bool		provided = a == t->version.attnum || a == t->deleted.attnum ||
			a == t->hash.attnum;
		Node	   *def;

		for (int i = 0; i < t->nkeys; i++)
			provided |= a == t->keys[i].attnum;
		for (int i = 0; i < t->npayload; i++)
			provided |= a == t->payload[i].attnum;
		if (provided || att->attisdropped || att->attgenerated)
			continue;
		def = build_column_default(w->rel, a);
		if (def == NULL)
			continue;
		w->default_atts[w->ndefaults] = a;
		w->default_exprs[w->ndefaults++] =
			ExecPrepareExpr(expression_planner((Expr *) def), w->estate);
	}
	return w;
}

/* Write the queued new rows, then their index entries. */
static void
direct_flush_inserts(DirectWriter *w)
{
	if (w->ninserts == 0)
		return;
	table_multi_insert(w->rel, w->inserts, w->ninserts, w->estate->es_output_cid,
					   0, w->bistate);
	for (int i = 0; i < w->ninserts; i++)
	{
		ResetPerTupleExprContext(w->estate);
		if (w->rri->ri_NumIndices > 0)
			list_free(ExecInsertIndexTuples(w->rri, w->inserts[i], w->estate,
											false, false, NULL, NIL));
		ExecClearTuple(w->inserts[i]);
	}
	w->ninserts = 0;
}

static void
direct_close(DirectWriter *w)
{
	direct_flush_inserts(w);
	FreeBulkInsertState(w->bistate);
	for (int i = 0; i < DIRECT_INSERT_ROWS; i++)
		ExecDropSingleTupleTableSlot(w->inserts[i]);
	ExecDropSingleTupleTableSlot(w->slot);
	ExecCloseIndices(w->rri);
	ExecResetTupleTable(w->estate->es_tupleTable, false);
	FreeExecutorState(w->estate);
	table_close(w->rel, NoLock);
}

/* Fill the new row's key, version, deleted, hash and (optionally) payload. */
static void
direct_fill(Merger *m, TupleTableSlot *slot, bool with_payload)
{
	TargetInfo *t = m->t;
	GroupRow   *w = &m->rows[0];
	bytea	   *h = palloc(VARHDRSZ + RECONCILE_SHA256_LEN);

	for (int i = 0; i < t->nkeys; i++)
	{
		slot->tts_values[t->keys[i].attnum - 1] = m->values[SORT_ATT_FIRST_KEY - 1 + i];
		slot->tts_isnull[t->keys[i].attnum - 1] = false;
	}
	SET_VARSIZE(h, VARHDRSZ + RECONCILE_SHA256_LEN);
	memcpy(VARDATA(h), w->hash, RECONCILE_SHA256_LEN);
	slot->tts_values[t->version.attnum - 1] = version_datum(t, w->version);
	slot->tts_isnull[t->version.attnum - 1] = false;
	slot->tts_values[t->deleted.attnum - 1] = BoolGetDatum(w->is_delete);
	slot->tts_isnull[t->deleted.attnum - 1] = false;
	slot->tts_values[t->hash.attnum - 1] = PointerGetDatum(h);
	slot->tts_isnull[t->hash.attnum - 1] = false;
	if (!with_payload)
		return;
	for (int i = 0; i < t->npayload; i++)
	{
		int			src = SORT_ATT_FIRST_KEY - 1 + t->nkeys + i;

		slot->tts_values[t->payload[i].attnum - 1] = m->values[src];
		slot->tts_isnull[t->payload[i].attnum - 1] = m->isnull[src];
	}
}

/*
 * Queue a new row: defaults, generated columns and constraints are done
 * now, the row is copied into its slot's own memory (the key's context is
 * about to go), and the heap and index writes happen in direct_flush_inserts.
 * The direct path is only taken without triggers, so there are none to fire.
 */
static void
direct_insert(Merger *m)
{
	DirectWriter *w = m->direct;
	TupleTableSlot *slot = w->inserts[w->ninserts];
	ExprContext *econtext = GetPerTupleExprContext(w->estate);
	TupleConstr *constr = RelationGetDescr(w->rel)->constr;

	ResetPerTupleExprContext(w->estate);
	ExecClearTuple(slot);
	memset(slot->tts_isnull, true, sizeof(bool) * slot->tts_tupleDescriptor->natts);
	for (int i = 0; i < w->ndefaults; i++)
	{
		AttrNumber	a = w->default_atts[i];

		slot->tts_values[a - 1] = ExecEvalExpr(w->default_exprs[i], econtext,
											   &slot->tts_isnull[a - 1]);
	}
	direct_fill(m, slot, true);
	ExecStoreVirtualTuple(slot);
	if (constr && constr->has_generated_stored)
		ExecComputeStoredGenerated(w->rri, w->estate, slot, CMD_INSERT);
	if (constr)
		ExecConstraints(w->rri, slot, w->estate);
	ExecMaterializeSlot(slot);
	if (++w->ninserts == DIRECT_INSERT_ROWS)
		direct_flush_inserts(w);
}

/* Update the row the probe found in place, by its TID. */
static void
direct_update(Merger *m, ProbePart *found)
{
	DirectWriter *w = m->direct;
	TupleTableSlot *slot = w->slot;
	EPQState	epq;

	ResetPerTupleExprContext(w->estate);
	ExecClearTuple(slot);
	slot_getallattrs(found->slot);
	memcpy(slot->tts_values, found->slot->tts_values,
		   sizeof(Datum) * slot->tts_tupleDescriptor->natts);
	memcpy(slot->tts_isnull, found->slot->tts_isnull,
		   sizeof(bool) * slot->tts_tupleDescriptor->natts);
	/* A tombstone keeps the row's last payload; only its state moves. */
	direct_fill(m, slot, !m->rows[0].is_delete);
	ExecStoreVirtualTuple(slot);
	EvalPlanQualInit(&epq, w->estate, NULL, NIL, -1);
	ExecSimpleRelationUpdate(w->rri, w->estate, &epq, found->slot, slot);
	EvalPlanQualEnd(&epq);
}

/* Write the group's winner, or queue it for the general path. */
static void
write_winner(Merger *m, ProbePart *found)
{
	GroupRow   *w = &m->rows[0];
	char		action = found == NULL ? ACTION_INSERT :
		w->is_delete ? ACTION_DELETE : ACTION_UPDATE;

	if (m->direct == NULL)
		apply_add(m, action);
	else if (found == NULL)
		direct_insert(m);
	else
		direct_update(m, found);
	m->nactions[action == ACTION_INSERT ? 0 : action == ACTION_UPDATE ? 1 : 2]++;

	/* The receipt's checksum: sum of the written payload hashes mod 2^256. */
	{
		int			carry = 0;

		for (int i = RECONCILE_SHA256_LEN - 1; i >= 0; i--)
		{
			int			sum = m->b->checksum[i] + w->hash[i] + carry;

			m->b->checksum[i] = sum & 0xff;
			carry = sum >> 8;
		}
	}
}

/* ---- the pass over sorted rows ---- */

static void
count_row(Merger *m, GroupRow *row, Disposition d)
{
	m->b->counts[row->obj][d]++;
	m->b->totals[d]++;
}

static void
record_conflicts(Merger *m, bytea *existing)
{
	TargetInfo *t = m->t;
	char	   *key = key_to_json(t, &m->values[SORT_ATT_FIRST_KEY - 1]);

	for (int i = 0; i < m->nrows; i++)
	{
		GroupRow   *row = &m->rows[i];

		count_row(m, row, DISP_CONFLICT);
		m->nconflicts++;
		if (t->abort_on_conflict)
		{
			if (m->nconflicts <= CONFLICTS_NAMED)
				appendStringInfo(&m->named, "%skey %s version " INT64_FORMAT " in object \"%s\" row " INT64_FORMAT,
								 m->nconflicts > 1 ? "; " : "", key, row->version,
								 m->b->manifest->entries[row->obj].object_key,
								 row->source_row);
		}
		else
		{
			Datum		values[8];
			bool		isnull[8] = {false};
			bytea	   *h = palloc(VARHDRSZ + RECONCILE_SHA256_LEN);

			SET_VARSIZE(h, VARHDRSZ + RECONCILE_SHA256_LEN);
			memcpy(VARDATA(h), row->hash, RECONCILE_SHA256_LEN);
			values[0] = CStringGetTextDatum(m->b->batch_id);
			values[1] = ObjectIdGetDatum(t->relid);
			values[2] = DirectFunctionCall1(jsonb_in, CStringGetDatum(key));
			values[3] = Int64GetDatum(row->version);
			values[4] = CStringGetTextDatum(m->b->manifest->entries[row->obj].object_key);
			values[5] = Int64GetDatum(row->source_row);
			values[6] = PointerGetDatum(h);
			values[7] = PointerGetDatum(existing);
			isnull[7] = (existing == NULL);
			state_buffer_add(m->conflicts, values, isnull);
		}
	}
}

static bool
hash_equals(bytea *a, const uint8 *b)
{
	return a != NULL && VARSIZE_ANY_EXHDR(a) == RECONCILE_SHA256_LEN &&
		memcmp(VARDATA_ANY(a), b, RECONCILE_SHA256_LEN) == 0;
}

/* Decide every row of the current key. */
static void
merge_group(Merger *m)
{
	TargetInfo *t = m->t;
	Datum	   *keys = &m->values[SORT_ATT_FIRST_KEY - 1];
	GroupRow   *w = &m->rows[0];
	bool		conflict = false;
	ProbePart  *found;
	int64		tversion = 0;
	bytea	   *thash = NULL;
	Disposition first;

	/* Same version, another payload: the rows arrive sorted by version. */
	for (int i = 1, start = 0; i < m->nrows; i++)
	{
		if (m->rows[i].version != m->rows[i - 1].version)
			start = i;
		else if (memcmp(m->rows[i].hash, m->rows[start].hash, RECONCILE_SHA256_LEN) != 0)
			conflict = true;
	}

	found = probe_find(m->probe, t, keys, &tversion, &thash);
	if (found == NULL && m->latest != NULL &&
		probe_find(m->latest, t, keys, &tversion, &thash) != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access to table \"%s\" due to a concurrent insert",
						t->relname),
				 errdetail("Key %s was written by a transaction that committed after this one began.",
						   key_to_json(t, keys)),
				 errhint("Retry the transaction.")));

	if (!conflict && found && tversion == w->version && !hash_equals(thash, w->hash))
		conflict = true;

	if (conflict)
	{
		record_conflicts(m, found && tversion == w->version ? thash : NULL);
		return;
	}

	if (found == NULL)
		first = w->is_delete ? DISP_DELETED : DISP_INSERTED;
	else if (w->version > tversion)
		first = w->is_delete ? DISP_DELETED : DISP_UPDATED;
	else if (w->version == tversion)
		first = DISP_UNCHANGED;
	else
		first = DISP_STALE;
	if (found == NULL || w->version > tversion)
		write_winner(m, found);

	count_row(m, w, first);
	for (int i = 1; i < m->nrows; i++)
	{
		if (m->rows[i].version != m->rows[i - 1].version)
			count_row(m, &m->rows[i], DISP_STALE);
		else
			count_row(m, &m->rows[i], DISP_DUPLICATE);
	}
}

/*
 * Everything a key allocates (probe results, new rows, executor state)
 * lives in the group's context and goes with it: memory stays flat however
 * many keys the batch has.
 */
static void
merge_group_in_context(Merger *m)
{
	MemoryContext old = MemoryContextSwitchTo(m->groupcxt);

	merge_group(m);
	MemoryContextSwitchTo(old);
	MemoryContextReset(m->groupcxt);
}

static bool
same_key(Merger *m, TupleTableSlot *slot)
{
	TargetInfo *t = m->t;

	for (int i = 0; i < t->nkeys; i++)
	{
		AttrNumber	a = SORT_ATT_FIRST_KEY + i;
		bool		isnull;
		Datum		d = slot_getattr(slot, a, &isnull);

		if (!DatumGetBool(OidFunctionCall2Coll(t->key_eq_procs[i], t->key_collations[i],
											   m->values[a - 1], d)))
			return false;
	}
	return true;
}

/* Start a new group with the slot's row: copy the values it needs. */
static void
group_start(Merger *m, TupleTableSlot *slot)
{
	TupleDesc	desc = slot->tts_tupleDescriptor;
	MemoryContext old = MemoryContextSwitchTo(m->groupcxt);

	slot_getallattrs(slot);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		m->isnull[i] = slot->tts_isnull[i];
		m->values[i] = slot->tts_isnull[i] ? (Datum) 0 :
			datumCopy(slot->tts_values[i], att->attbyval, att->attlen);
	}
	MemoryContextSwitchTo(old);
	m->nrows = 0;
}

static void
group_add(Merger *m, TupleTableSlot *slot)
{
	GroupRow   *row;
	bool		isnull;
	bytea	   *h;

	if (m->nrows == m->maxrows)
	{
		m->maxrows *= 2;
		m->rows = repalloc_huge(m->rows, sizeof(GroupRow) * m->maxrows);
	}
	row = &m->rows[m->nrows++];
	row->obj = DatumGetInt32(slot_getattr(slot, SORT_ATT_OBJECT, &isnull));
	row->source_row = DatumGetInt64(slot_getattr(slot, SORT_ATT_SOURCE_ROW, &isnull));
	row->is_delete = DatumGetBool(slot_getattr(slot, SORT_ATT_DELETE, &isnull));
	row->version = DatumGetInt64(slot_getattr(slot, SORT_ATT_VERSION, &isnull));
	h = DatumGetByteaPP(slot_getattr(slot, SORT_ATT_HASH, &isnull));
	memcpy(row->hash, VARDATA_ANY(h), RECONCILE_SHA256_LEN);
}

void
merge_batch(BatchState *b)
{
	Merger		m;
	TupleTableSlot *slot;
	bool		in_group = false;
	int64		nmerged = 0;
	static const Oid conflict_types[8] = {TEXTOID, REGCLASSOID, JSONBOID, INT8OID,
	TEXTOID, INT8OID, BYTEAOID, BYTEAOID};

	memset(&m, 0, sizeof(m));
	m.b = b;
	m.t = b->target;
	m.groupcxt = AllocSetContextCreate(CurrentMemoryContext, "reconcile key group",
									   ALLOCSET_DEFAULT_SIZES);
	m.values = palloc(sizeof(Datum) * b->sortdesc->natts);
	m.isnull = palloc(sizeof(bool) * b->sortdesc->natts);
	m.maxrows = 16;
	m.rows = palloc(sizeof(GroupRow) * m.maxrows);
	initStringInfo(&m.named);
	m.conflicts = state_buffer_create("INSERT INTO reconcile.conflicts (batch_id, target,"
									  " key, version, object_key, source_row, staged_hash,"
									  " existing_hash)"
									  " SELECT * FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4), pg_catalog.unnest($5), pg_catalog.unnest($6), pg_catalog.unnest($7), pg_catalog.unnest($8))",
									  8, conflict_types);

	/*
	 * The target is locked against other writers; read it as of now.  Under
	 * REPEATABLE READ the transaction's snapshot may predate a batch that
	 * committed while this one waited for the lock: a second probe with the
	 * latest snapshot turns that into a serialization failure instead of a
	 * unique violation.
	 */
	if (IsolationUsesXactSnapshot())
	{
		m.probe = probe_open(m.t, GetTransactionSnapshot(), true);
		m.latest = probe_open(m.t, GetLatestSnapshot(), false);
	}
	else
		m.probe = probe_open(m.t, GetLatestSnapshot(), true);
	if (direct_allowed(m.t))
		m.direct = direct_open(m.t);
	else
		apply_create(&m);

	progress_phase(PHASE_SORTING);
	tuplesort_performsort(b->sort);
	progress_phase(PHASE_MERGING);
	slot = MakeSingleTupleTableSlot(b->sortdesc, &TTSOpsMinimalTuple);
	while (tuplesort_gettupleslot(b->sort, true, false, slot, NULL))
	{
		CHECK_FOR_INTERRUPTS();
		if (++nmerged % 1024 == 0)
			progress_rows(nmerged);
		if (in_group && !same_key(&m, slot))
		{
			merge_group_in_context(&m);
			in_group = false;
		}
		if (!in_group)
		{
			group_start(&m, slot);
			in_group = true;
		}
		group_add(&m, slot);
	}
	if (in_group)
		merge_group_in_context(&m);
	ExecDropSingleTupleTableSlot(slot);
	tuplesort_end(b->sort);
	b->sort = NULL;

	probe_close(m.probe);
	if (m.latest)
		probe_close(m.latest);

	if (m.nconflicts > 0 && m.t->abort_on_conflict)
		ereport(ERROR,
				(errcode(ERRCODE_UNIQUE_VIOLATION),
				 errmsg("batch %s has " INT64_FORMAT " conflicting rows for table \"%s\"",
						b->batch_id, m.nconflicts, m.t->relname),
				 errdetail("Different payloads claim the same key and version: %s%s.",
						   m.named.data, m.nconflicts > CONFLICTS_NAMED ? "; ..." : ""),
				 errhint("Nothing was applied. Correct the source, or register the target with conflict_policy => 'quarantine' to hold conflicting keys back and load the rest.")));
	state_buffer_flush(m.conflicts);
	if (m.direct)
		direct_close(m.direct);
	else
	{
		progress_phase(PHASE_APPLYING);
		apply_run(&m);
	}
	MemoryContextDelete(m.groupcxt);
}
