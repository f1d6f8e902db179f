/*
 * direct.c
 *		The direct write path: winners written while the merge pass is at
 *		their key.
 *
 * The row the probe found is updated by its TID, the way logical
 * replication applies changes (ExecSimpleRelationUpdate); new keys are
 * queued and inserted many rows at a time, the way COPY does; a stale row
 * costs one probe and no write.  CHECK and NOT NULL constraints, unique and
 * exclusion indexes, defaults and generated columns work as for any
 * statement (but for a uniqueness check that cannot fail: see
 * direct_split_indexes).  It is taken only where nothing else must fire: a
 * plain table without triggers or rules, in a READ COMMITTED transaction.
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/nbtree.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "executor/executor.h"
#include "executor/nodeModifyTable.h"
#include "optimizer/optimizer.h"
#include "rewrite/rewriteHandler.h"

#include "loader.h"
#include "ordering.h"
#include "writers.h"

#define DIRECT_INSERT_ROWS 1000

/* The direct path's executor state. */
struct DirectWriter
{
	TargetInfo *t;
	Relation	rel;
	EState	   *estate;
	ResultRelInfo *rri;
	TupleTableSlot *slot;		/* the new row, in the target's descriptor */
	int			ndefaults;		/* columns a new row takes defaults for */
	AttrNumber *default_atts;
	ExprState **default_exprs;

	EPQState	epq;			/* never used for rechecks: nothing runs concurrently */

	/*
	 * For updates, the unique indexes over key columns only, which need no
	 * uniqueness check (see direct_open), and a copy of rri holding the
	 * other indexes, which ExecInsertIndexTuples maintains as usual.
	 */
	int			nkeyindexes;
	int		   *keyindexes;		/* positions in rri's index arrays */
	ResultRelInfo *update_rri;

	/* New keys go in as multi-row inserts, the way COPY writes. */
	TupleTableSlot *inserts[DIRECT_INSERT_ROWS];
	int			ninserts;
	BulkInsertState bistate;
};

/* Whether the direct path may write this target. */
bool
direct_allowed(TargetInfo *t)
{
	Relation	rel;
	bool		ok;

	/* A Citus table's rows are in its shards, reached only through SQL. */
	if (reconcile_write_path == WRITE_PATH_GENERAL || t->partitioned ||
		t->citus_kind != 0 || IsolationUsesXactSnapshot())
		return false;
	rel = table_open(t->relid, NoLock);
	ok = rel->trigdesc == NULL && !rel->rd_rel->relhasrules &&
		rel->rd_rel->relkind == RELKIND_RELATION;
	table_close(rel, NoLock);
	return ok;
}

/*
 * An update keeps the key.  In a unique index over key columns only (no
 * expressions, no predicate) its new entry can meet nothing but the row's
 * own older versions, and under the batch's lock no other session can
 * insert the key: the uniqueness check, a heap fetch per update, is
 * skipped for such indexes.  New keys keep the check.
 */
static void
direct_split_indexes(DirectWriter *w, TargetInfo *t)
{
	ResultRelInfo *rri = w->rri;
	ResultRelInfo *upd = palloc(sizeof(ResultRelInfo));

	*upd = *rri;
	upd->ri_NumIndices = 0;
	upd->ri_IndexRelationDescs = palloc(sizeof(Relation) * Max(rri->ri_NumIndices, 1));
	upd->ri_IndexRelationInfo = palloc(sizeof(IndexInfo *) * Max(rri->ri_NumIndices, 1));
	w->keyindexes = palloc(sizeof(int) * Max(rri->ri_NumIndices, 1));
	for (int i = 0; i < rri->ri_NumIndices; i++)
	{
		IndexInfo  *ii = rri->ri_IndexRelationInfo[i];
		bool		key_only = ii->ii_Unique && ii->ii_ExclusionOps == NULL &&
			ii->ii_Predicate == NIL && ii->ii_Expressions == NIL &&
			rri->ri_IndexRelationDescs[i]->rd_index->indimmediate;

		for (int k = 0; key_only && k < ii->ii_NumIndexKeyAttrs; k++)
		{
			bool		is_key = false;

			for (int j = 0; j < t->nkeys; j++)
				is_key |= ii->ii_IndexAttrNumbers[k] == t->keys[j].attnum;
			key_only = is_key;
		}
		if (key_only)
			w->keyindexes[w->nkeyindexes++] = i;
		else
		{
			upd->ri_IndexRelationDescs[upd->ri_NumIndices] = rri->ri_IndexRelationDescs[i];
			upd->ri_IndexRelationInfo[upd->ri_NumIndices++] = ii;
		}
	}
	w->update_rri = upd;
}

/* Open the direct writer on target t: its relation, indexes and insert slots. */
DirectWriter *
direct_open(TargetInfo *t)
{
	DirectWriter *w = palloc0(sizeof(DirectWriter));
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	TupleDesc	desc;
	TupleDesc	slotdesc;

	w->t = t;
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

	/*
	 * The slots get a private copy of the descriptor.  A slot of the
	 * relation's own descriptor pins it in the resource owner, and with a
	 * thousand pins of one descriptor every further pin (one per unique
	 * index check of an update, by nbtree) walks past them all: 7% of a
	 * batch's time before this copy.
	 */
	slotdesc = CreateTupleDescCopy(desc);
	w->slot = MakeSingleTupleTableSlot(slotdesc, &TTSOpsVirtual);
	for (int i = 0; i < DIRECT_INSERT_ROWS; i++)
		w->inserts[i] = MakeSingleTupleTableSlot(slotdesc, table_slot_callbacks(w->rel));
	w->bistate = GetBulkInsertState();
	EvalPlanQualInit(&w->epq, w->estate, NULL, NIL, -1);
	direct_split_indexes(w, t);

	/* Columns the batch does not provide take their defaults on insert. */
	w->default_atts = palloc(sizeof(AttrNumber) * desc->natts);
	w->default_exprs = palloc(sizeof(ExprState *) * desc->natts);
	for (int a = 1; a <= desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a - 1);
		bool		provided = a == t->version.attnum || a == t->deleted.attnum ||
			a == t->hash.attnum;
		Node	   *def;

		for (int i = 0; i < t->nextra; i++)
			provided |= a == t->extra[i].attnum;
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

/* Flush the pending inserts and release what direct_open set up. */
void
direct_close(DirectWriter *w)
{
	direct_flush_inserts(w);
	EvalPlanQualEnd(&w->epq);
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
direct_fill(DirectWriter *w, const Winner *winner, TupleTableSlot *slot,
			bool with_payload)
{
	TargetInfo *t = w->t;

	for (int i = 0; i < t->nkeys; i++)
	{
		slot->tts_values[t->keys[i].attnum - 1] = winner->keys[i];
		slot->tts_isnull[t->keys[i].attnum - 1] = false;
	}
	slot->tts_values[t->version.attnum - 1] = ordering_value(t, winner->version, 0);
	slot->tts_isnull[t->version.attnum - 1] = false;
	for (int i = 0; i < t->nextra; i++)
	{
		slot->tts_values[t->extra[i].attnum - 1] = ordering_value(t, winner->version, i + 1);
		slot->tts_isnull[t->extra[i].attnum - 1] = false;
	}
	slot->tts_values[t->deleted.attnum - 1] = BoolGetDatum(winner->tombstone);
	slot->tts_isnull[t->deleted.attnum - 1] = false;
	slot->tts_values[t->hash.attnum - 1] = winner->hash;
	slot->tts_isnull[t->hash.attnum - 1] = false;
	if (!with_payload)
		return;
	for (int i = 0; i < t->npayload; i++)
	{
		slot->tts_values[t->payload[i].attnum - 1] = winner->payload[i];
		slot->tts_isnull[t->payload[i].attnum - 1] = winner->payload_isnull[i];
	}
}

/*
 * Queue a new row: defaults, generated columns and constraints are done
 * now, the row is copied into its slot's own memory (the key's context is
 * about to go), and the heap and index writes happen in direct_flush_inserts.
 * The direct path is only taken without triggers, so there are none to fire.
 */
void
direct_insert(DirectWriter *w, const Winner *winner)
{
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
	direct_fill(w, winner, slot, true);
	ExecStoreVirtualTuple(slot);
	if (constr && constr->has_generated_stored)
		ExecComputeStoredGenerated(w->rri, w->estate, slot, CMD_INSERT);
	if (constr)
		ExecConstraints(w->rri, slot, w->estate);
	/* A partition registered as the target: as an INSERT into it would. */
	if (w->rel->rd_rel->relispartition)
		ExecPartitionCheck(w->rri, slot, w->estate, true);
	ExecMaterializeSlot(slot);
	if (++w->ninserts == DIRECT_INSERT_ROWS)
		direct_flush_inserts(w);
}

/*
 * What ExecSimpleRelationUpdate does for a table without triggers, but
 * with the key's unique indexes maintained without a uniqueness check
 * (direct_split_indexes).
 */
static void
direct_update_row(DirectWriter *w, ItemPointer tid, TupleTableSlot *slot)
{
	Relation	rel = w->rel;
	bool		update_indexes;

	CheckCmdReplicaIdentity(rel, CMD_UPDATE);
	if (rel->rd_att->constr && rel->rd_att->constr->has_generated_stored)
		ExecComputeStoredGenerated(w->rri, w->estate, slot, CMD_UPDATE);
	if (rel->rd_att->constr)
		ExecConstraints(w->rri, slot, w->estate);
	if (rel->rd_rel->relispartition)
		ExecPartitionCheck(w->rri, slot, w->estate, true);
	simple_table_tuple_update(rel, tid, slot, w->estate->es_snapshot, &update_indexes);
	if (!update_indexes)
		return;					/* a heap-only update: no index changes */
	if (w->update_rri->ri_NumIndices > 0)
		list_free(ExecInsertIndexTuples(w->update_rri, slot, w->estate, true, false,
										NULL, NIL));
	for (int k = 0; k < w->nkeyindexes; k++)
	{
		int			i = w->keyindexes[k];
		IndexInfo  *ii = w->rri->ri_IndexRelationInfo[i];
		Datum		values[INDEX_MAX_KEYS];
		bool		isnull[INDEX_MAX_KEYS];

		FormIndexDatum(ii, slot, w->estate, values, isnull);
		index_insert(w->rri->ri_IndexRelationDescs[i], values, isnull, &slot->tts_tid,
					 rel, UNIQUE_CHECK_NO, true, ii);
	}
}

/* Update the row the probe found (in found) in place, by its TID. */
void
direct_update(DirectWriter *w, TupleTableSlot *found, const Winner *winner)
{
	TupleTableSlot *slot = w->slot;

	ResetPerTupleExprContext(w->estate);
	ExecClearTuple(slot);
	slot_getallattrs(found);
	memcpy(slot->tts_values, found->tts_values,
		   sizeof(Datum) * slot->tts_tupleDescriptor->natts);
	memcpy(slot->tts_isnull, found->tts_isnull,
		   sizeof(bool) * slot->tts_tupleDescriptor->natts);
	/*
	 * A tombstone keeps the row's last payload, only its state moves; a
	 * partial batch's keeps the key's state below it (sparse.c).
	 */
	direct_fill(w, winner, slot, !winner->tombstone || winner->tombstone_payload);
	ExecStoreVirtualTuple(slot);
	direct_update_row(w, &found->tts_tid, slot);
}


/* Delete the row the probe found (delete_mode 'remove'), by its TID. */
void
direct_remove(DirectWriter *w, TupleTableSlot *found)
{
	CheckCmdReplicaIdentity(w->rel, CMD_DELETE);
	simple_table_tuple_delete(w->rel, &found->tts_tid, w->estate->es_snapshot);
}
