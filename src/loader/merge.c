/*
 * merge.c
 *		One pass over the sorted staged rows: duplicates, conflicts,
 *		winners, and the version-monotonic write.
 *
 * The rows arrive grouped by key, highest version first, ties in source
 * order (object_key, source_row).  For each key the rows are gathered,
 * the target's row is found by probing the key's unique index (probe.c),
 * and decide.c decides every row by the loader's rule (its header states
 * it): a conflicting key has every staged row held back in
 * reconcile.conflicts, with its payload, under 'quarantine', or fails the
 * batch under 'abort'; otherwise a winner that decide.c writes goes to
 * the writer.
 *
 * Winners are written by one of two paths, which give the same result,
 * chosen by writer.c.  A target with attached dataset checks takes the
 * general path: the checks run over its winners (rules_attach.c) before
 * they are written.
 */
#include "postgres.h"

#include "access/nbtree.h"
#include "catalog/namespace.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"

#include "common/citus.h"
#include "citus_load.h"
#include "decide.h"
#include "loader.h"
#include "ordering.h"
#include "payload.h"
#include "probe.h"
#include "progress.h"
#include "removed.h"
#include "rules/rules.h"
#include "snapshot.h"
#include "sparse.h"
#include "common/state_schema.h"
#include "writers.h"

/* One staged row of the current key, as the sort delivered it. */
typedef struct GroupRow
{
	int32		obj;
	int64		source_row;
	MinimalTuple tuple;			/* rows after the first, for a held payload */
} GroupRow;

typedef struct Merger
{
	BatchState *b;
	TargetInfo *t;
	MemoryContext groupcxt;

	/* The current key's rows. */
	Datum	   *values;			/* first row's sort tuple, copied */
	bool	   *isnull;
	GroupRow   *rows;
	DecideRow  *cand;			/* the same rows as decide.c reads them */
	Disposition *disp;			/* and what it made of them */
	int			nrows;
	int			maxrows;

	FmgrInfo   *key_eq;			/* equality of each key column */
	TupleTableSlot *rowslot;	/* reads a GroupRow's tuple */

	Probe	   *probe;
	Probe	   *latest;			/* REPEATABLE READ: catches concurrent inserts */

	StateRows  *conflicts;
	bool		hold_payloads;	/* reconcile.conflicts has the 1.1 columns */
	int64		nconflicts;
	StringInfoData named;		/* conflicts named in an 'abort' error */

	Writer		writer;

	/* delete_mode 'remove': the kept removals (removed.c), else NULL. */
	Removed    *removed;
	bool		found_removed;	/* the current key's is a kept removal */
	/* A partial batch (sparse.c): its sparse rows merged before deciding. */
	SparseMerger *sparse;
	bool		group_sparse;	/* the current key has a sparse row */
	SparseGroup sgroup;			/* per row: merged payloads, NULL until merged */
} Merger;

/* How many conflicts an 'abort' error names. */
#define CONFLICTS_NAMED 5

/*
 * Hand the group's winner (its first row) to the writer: the key and
 * payload point into the group's copy of the sort tuple.
 */
static void
write_winner(Merger *m, TupleTableSlot *found, Datum tversion)
{
	DecideRow  *w = &m->cand[0];
	int			first_payload = SORT_ATT_FIRST_KEY - 1 + m->t->nkeys;
	Winner		winner;
	bytea	   *h = palloc(VARHDRSZ + RECONCILE_SHA256_LEN);

	SET_VARSIZE(h, VARHDRSZ + RECONCILE_SHA256_LEN);
	memcpy(VARDATA(h), w->hash, RECONCILE_SHA256_LEN);
	winner.keys = &m->values[SORT_ATT_FIRST_KEY - 1];
	winner.payload = &m->values[first_payload];	/* merged in place if sparse */
	winner.payload_isnull = &m->isnull[first_payload];
	winner.version = w->version;
	winner.tombstone = w->tombstone;
	winner.tombstone_payload = false;
	if (w->tombstone && m->group_sparse && m->sgroup.have_kept)
	{
		/* a partial batch's tombstone keeps the key's state below it (sparse.c) */
		winner.payload = m->sgroup.kept;
		winner.payload_isnull = m->sgroup.kept_isnull;
		winner.tombstone_payload = true;
	}
	winner.hash = PointerGetDatum(h);
	if (m->removed != NULL)
		removed_write(m->removed, &m->writer, found, m->found_removed, tversion, &winner);
	else
		writer_put(&m->writer, found, tversion, &winner);

	batch_checksum_add(m->b, w->hash);
}

/* ---- the pass over sorted rows ---- */

static void
count_row(Merger *m, const GroupRow *row, Disposition d)
{
	m->b->counts[row->obj][d]++;
	m->b->totals[d]++;
}

/* A held row's payload as jsonb (payload.c), from its copy of the sort tuple. */
static Jsonb *
held_payload(Merger *m, int i)
{
	int			first_payload = SORT_ATT_FIRST_KEY - 1 + m->t->nkeys;

	if (i == 0)
		return payload_to_jsonb(m->t, &m->values[first_payload], &m->isnull[first_payload]);
	if (m->group_sparse)		/* a sparse key's rows are held merged */
		return payload_to_jsonb(m->t, m->sgroup.payload[i], m->sgroup.payload_isnull[i]);
	ExecStoreMinimalTuple(m->rows[i].tuple, m->rowslot, false);
	slot_getallattrs(m->rowslot);
	return payload_to_jsonb(m->t, &m->rowslot->tts_values[first_payload],
							&m->rowslot->tts_isnull[first_payload]);
}

/*
 * The target row's payload as jsonb, its columns found by name: a leaf
 * partition may order them otherwise.
 */
static Jsonb *
target_payload(TargetInfo *t, TupleTableSlot *found)
{
	TupleDesc	desc = found->tts_tupleDescriptor;
	Datum	   *values = palloc(sizeof(Datum) * Max(t->npayload, 1));
	bool	   *isnull = palloc(sizeof(bool) * Max(t->npayload, 1));

	slot_getallattrs(found);
	for (int i = 0; i < t->npayload; i++)
	{
		int			a;

		for (a = 0; a < desc->natts; a++)
			if (!TupleDescAttr(desc, a)->attisdropped &&
				strcmp(NameStr(TupleDescAttr(desc, a)->attname), t->payload[i].name) == 0)
				break;
		if (a == desc->natts)
			elog(ERROR, "column \"%s\" not found in a row of \"%s\"", t->payload[i].name, t->relname);
		values[i] = found->tts_values[a];
		isnull[i] = found->tts_isnull[a];
	}
	return payload_to_jsonb(t, values, isnull);
}

/*
 * Hold back every row of the current key, each with its payload.  A row at
 * the target's version (found) is recorded with the target's hash and
 * payload.
 */
static void
record_conflicts(Merger *m, TupleTableSlot *found, Datum tversion, bytea *thash)
{
	TargetInfo *t = m->t;
	SortSupport order = ordering_sortsupport(t);
	char	   *key = key_to_json(t, &m->values[SORT_ATT_FIRST_KEY - 1]);
	Jsonb	   *keyjb = NULL;
	Jsonb	   *existing = NULL;

	for (int i = 0; i < m->nrows; i++)
	{
		GroupRow   *row = &m->rows[i];
		DecideRow  *c = &m->cand[i];
		/* at the version of the target's row or of its kept removal */
		bool		at_version = (found != NULL || m->found_removed) &&
			ApplySortComparator(c->version, false, tversion, false, order) == 0;
		bool		at_target = found != NULL && at_version;

		count_row(m, row, DISP_CONFLICT);
		m->nconflicts++;
		if (t->abort_on_conflict)
		{
			if (m->nconflicts <= CONFLICTS_NAMED)
				appendStringInfo(&m->named, "%skey %s version %s in object \"%s\"%s row " INT64_FORMAT,
								 m->nconflicts > 1 ? "; " : "", key, ordering_text(t, c->version),
								 m->b->manifest->entries[row->obj].object_key,
								 m->b->staged_versions ?
								 psprintf(" version \"%s\"", m->b->manifest->entries[row->obj].version_id) : "",
								 row->source_row);
		}
		else
		{
			StateRows  *out = m->conflicts;
			bytea	   *h = palloc(VARHDRSZ + RECONCILE_SHA256_LEN);

			SET_VARSIZE(h, VARHDRSZ + RECONCILE_SHA256_LEN);
			memcpy(VARDATA(h), c->hash, RECONCILE_SHA256_LEN);
			state_row_set(out, "batch_id", CStringGetTextDatum(m->b->batch_id));
			state_row_set(out, "target", ObjectIdGetDatum(t->relid));
			if (keyjb == NULL)
				keyjb = key_to_jsonb(t, &m->values[SORT_ATT_FIRST_KEY - 1]);
			state_row_set(out, "key", JsonbPGetDatum(keyjb));
			/* bigint for an integer version, as 1.1 wrote it; the pinned text form always */
			if (t->version_integer)
				state_row_set(out, "version", Int64GetDatum(ordering_int64(t, c->version)));
			state_row_set(out, "ordering", CStringGetTextDatum(ordering_text(t, c->version)));
			state_row_set(out, "object_key", CStringGetTextDatum(m->b->manifest->entries[row->obj].object_key));
			state_row_set(out, "source_row", Int64GetDatum(row->source_row));
			state_row_set(out, "staged_hash", PointerGetDatum(h));
			if (at_version && thash != NULL)
				state_row_set(out, "existing_hash", PointerGetDatum(thash));
			if (m->group_sparse && m->sgroup.present[i] != NULL)
			{
				/* reconcile_resolve writes it only over the same target row */
				state_row_set_text(out, "present_columns",
								   sparse_present_text(t, m->sgroup.present[i]));
				if (found && thash != NULL)
					state_row_set(out, "merged_over", PointerGetDatum(thash));
			}
			if (m->hold_payloads)
			{
				state_row_set(out, "version_id", CStringGetTextDatum(m->b->manifest->entries[row->obj].version_id));
				state_row_set(out, "deleted", BoolGetDatum(c->tombstone));
				state_row_set(out, "staged_payload", JsonbPGetDatum(held_payload(m, i)));
				if (at_target)
				{
					if (existing == NULL)
						existing = target_payload(t, found);
					state_row_set(out, "existing_payload", JsonbPGetDatum(existing));
				}
				else if (m->found_removed && at_version)
				{
					/* A kept removal has no payload: JSON null says so. */
					JsonbValue	jnull;

					jnull.type = jbvNull;
					state_row_set(out, "existing_payload",
								  JsonbPGetDatum(JsonbValueToJsonb(&jnull)));
				}
			}
			state_row_add(out);
		}
	}
}

/*
 * A partial batch's key with a sparse row: every row's payload, in the
 * target's types, for sparse.c to merge in place (the first row's is the
 * group's copy, which the winner is written from), and its hash.
 */
static void
merge_sparse_rows(Merger *m, TupleTableSlot *found, Datum tversion)
{
	TargetInfo *t = m->t;
	int			first_payload = SORT_ATT_FIRST_KEY - 1 + t->nkeys;
	SparseGroup *g = &m->sgroup;

	g->nrows = m->nrows;
	g->cand = m->cand;
	g->payload = palloc(sizeof(Datum *) * m->nrows);
	g->payload_isnull = palloc(sizeof(bool *) * m->nrows);
	g->present = palloc(sizeof(bytea *) * m->nrows);
	for (int i = 0; i < m->nrows; i++)
	{
		Datum	   *values = m->values;
		bool	   *isnull = m->isnull;

		if (i > 0)
		{
			/* the row's tuple (group_add) outlives the slot's hold of it */
			ExecStoreMinimalTuple(m->rows[i].tuple, m->rowslot, false);
			slot_getallattrs(m->rowslot);
			values = palloc(sizeof(Datum) * m->b->sortdesc->natts);
			isnull = palloc(sizeof(bool) * m->b->sortdesc->natts);
			memcpy(values, m->rowslot->tts_values, sizeof(Datum) * m->b->sortdesc->natts);
			memcpy(isnull, m->rowslot->tts_isnull, sizeof(bool) * m->b->sortdesc->natts);
		}
		g->payload[i] = &values[first_payload];
		g->payload_isnull[i] = &isnull[first_payload];
		g->present[i] = isnull[SORT_ATT_PRESENT(t) - 1] ? NULL :
			DatumGetByteaP(values[SORT_ATT_PRESENT(t) - 1]);
	}
	sparse_merge(m->sparse, g, found, tversion);
}

/* Decide every row of the current key (decide.c), then write or hold it. */
static void
merge_group(Merger *m)
{
	TargetInfo *t = m->t;
	Datum	   *keys = &m->values[SORT_ATT_FIRST_KEY - 1];
	TupleTableSlot *found;
	Datum		tversion = (Datum) 0;
	bytea	   *thash = NULL;
	DecideTarget target;
	Decision	d;

	/* A snapshot batch stages this key: it is not absent (snapshot.c). */
	if (m->b->snapshot != NULL)
		snapshot_add_key(m->b->snapshot, keys);
	found = probe_find_current(m->probe, m->latest, t, keys, &tversion, &thash, false);
	/* delete_mode 'remove': a key with no row may have a kept removal. */
	m->found_removed = found == NULL && m->removed != NULL &&
		removed_find(m->removed, keys, &tversion, &thash);
	target.exists = found != NULL || m->found_removed;
	target.version = tversion;
	target.hash = thash != NULL && VARSIZE_ANY_EXHDR(thash) == RECONCILE_SHA256_LEN ?
		(const uint8 *) VARDATA_ANY(thash) : NULL;
	target.tombstone = false;	/* the rule does not depend on it */
	/*
	 * A partial batch merges a key with a sparse row, and one whose winner
	 * is a DELETE above lower staged versions: its tombstone keeps their
	 * state (sparse.c).
	 */
	if (m->sparse != NULL && m->nrows > 1 && m->cand[0].tombstone)
		m->group_sparse = true;
	if (m->group_sparse)
		merge_sparse_rows(m, found, tversion);
	d = decide_key(m->cand, m->nrows, &target, ordering_sortsupport(t), m->disp);

	if (d.conflict)
	{
		record_conflicts(m, found, tversion, thash);
		return;
	}
	if (d.write)
		write_winner(m, found, tversion);
	/* A live row over a kept removal is a new row again. */
	if (m->found_removed && m->disp[0] == DISP_UPDATED)
		m->disp[0] = DISP_INSERTED;
	for (int i = 0; i < m->nrows; i++)
		count_row(m, &m->rows[i], m->disp[i]);
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

		if (!DatumGetBool(FunctionCall2Coll(&m->key_eq[i], t->key_collations[i],
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
	m->group_sparse = false;
}

static void
group_add(Merger *m, TupleTableSlot *slot)
{
	GroupRow   *row;
	DecideRow  *c;
	bool		isnull;
	bytea	   *h;

	if (m->nrows == m->maxrows)
	{
		m->maxrows *= 2;
		m->rows = repalloc_huge(m->rows, sizeof(GroupRow) * m->maxrows);
		m->cand = repalloc_huge(m->cand, sizeof(DecideRow) * m->maxrows);
		m->disp = repalloc_huge(m->disp, sizeof(Disposition) * m->maxrows);
	}
	c = &m->cand[m->nrows];
	row = &m->rows[m->nrows++];
	row->obj = DatumGetInt32(slot_getattr(slot, SORT_ATT_OBJECT, &isnull));
	row->source_row = DatumGetInt64(slot_getattr(slot, SORT_ATT_SOURCE_ROW, &isnull));
	c->tombstone = DatumGetBool(slot_getattr(slot, SORT_ATT_DELETE, &isnull));
	c->version = slot_getattr(slot, SORT_ATT_VERSION, &isnull);
	if (m->t->nextra > 0 || !m->t->version.typbyval)
	{
		/*
		 * The sort's slot moves on to the next row: keep a copy with the
		 * group.  Several version columns: the first, then the others from
		 * the end of the sort tuple (stage.c).
		 */
		MemoryContext old = MemoryContextSwitchTo(m->groupcxt);
		Datum		values[INDEX_MAX_KEYS + 1];

		values[0] = c->version;
		for (int i = 0; i < m->t->nextra; i++)
			values[i + 1] = slot_getattr(slot, SORT_ATT_FIRST_KEY + m->t->nkeys + m->t->npayload + i,
										 &isnull);
		c->version = ordering_copy(m->t, ordering_make(m->t, values));
		MemoryContextSwitchTo(old);
	}
	h = DatumGetByteaPP(slot_getattr(slot, SORT_ATT_HASH, &isnull));
	memcpy(c->hash, VARDATA_ANY(h), RECONCILE_SHA256_LEN);

	/*
	 * The first row's values are the group's copy; a later row's tuple is
	 * kept in case the key is held back with its payload, or in a partial
	 * batch for its merge (sparse.c).  Only keys with several staged rows
	 * pay for it.
	 */
	row->tuple = NULL;
	if (m->sparse != NULL && !slot_attisnull(slot, SORT_ATT_PRESENT(m->t)))
		m->group_sparse = true;
	if (m->nrows > 1 && ((m->hold_payloads && !m->t->abort_on_conflict) || m->sparse != NULL))
	{
		MemoryContext old = MemoryContextSwitchTo(m->groupcxt);

		row->tuple = ExecCopySlotMinimalTuple(slot);
		MemoryContextSwitchTo(old);
	}
}

/* Pick each key's winner among the sorted staged rows and write it to the target. */
void
merge_batch(BatchState *b)
{
	Merger		m;
	TupleTableSlot *slot;
	bool		in_group = false;
	int64		nmerged = 0;

	memset(&m, 0, sizeof(m));
	m.b = b;
	m.t = b->target;
	m.groupcxt = AllocSetContextCreate(CurrentMemoryContext, "reconcile key group",
									   ALLOCSET_DEFAULT_SIZES);
	m.values = palloc(sizeof(Datum) * b->sortdesc->natts);
	m.isnull = palloc(sizeof(bool) * b->sortdesc->natts);
	m.maxrows = 16;
	m.key_eq = palloc(sizeof(FmgrInfo) * m.t->nkeys);
	for (int i = 0; i < m.t->nkeys; i++)
		fmgr_info(m.t->key_eq_procs[i], &m.key_eq[i]);
	m.rows = palloc(sizeof(GroupRow) * m.maxrows);
	m.cand = palloc(sizeof(DecideRow) * m.maxrows);
	m.disp = palloc(sizeof(Disposition) * m.maxrows);
	initStringInfo(&m.named);
	/*
	 * Held rows keep their object version and payloads from 1.1 on; the 1.1
	 * library on a schema not yet updated (ALTER EXTENSION reconcile UPDATE)
	 * holds the hashes only, as 1.0 did (state_schema.c).
	 */
	m.conflicts = state_rows_create(&state_conflicts);
	m.hold_payloads = state_rows_has(m.conflicts, "staged_payload");
	if (!m.t->version_integer && !state_rows_has(m.conflicts, "ordering"))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"%s\" orders by a version column of type %s, which needs the reconcile 1.2 schema",
						m.t->relname, format_type_be(m.t->version.typid)),
				 errdetail("reconcile.conflicts of the installed schema holds bigint versions only."),
				 errhint("Run ALTER EXTENSION reconcile UPDATE.")));
	m.rowslot = MakeSingleTupleTableSlot(b->sortdesc, &TTSOpsMinimalTuple);
	if (b->options.partial)
		m.sparse = sparse_create(m.t);

	/*
	 * The target is locked against other writers; read it as of now.  Under
	 * REPEATABLE READ the transaction's snapshot may predate a batch that
	 * committed while this one waited for the lock: a second probe with the
	 * latest snapshot turns that into a serialization failure instead of a
	 * unique violation.
	 */
	if (m.t->citus_kind != CITUS_NONE)
	{
		/*
		 * The coordinator's shell holds none of the target's rows: probe a
		 * copy of the rows this batch may touch, read through Citus in this
		 * transaction under the target's lock (citus_load.c).
		 */
		m.probe = probe_open(citus_probe_copy(m.t, b->staged, b->batch_id),
							 GetLatestSnapshot(), true);
	}
	else if (IsolationUsesXactSnapshot())
	{
		m.probe = probe_open(m.t, GetTransactionSnapshot(), true);
		m.latest = probe_open(m.t, GetLatestSnapshot(), false);
	}
	else
		m.probe = probe_open(m.t, GetLatestSnapshot(), true);
	writer_open(&m.writer, m.t, b->batch_id, batch_rules_has_dataset_checks(b->rules));
	if (m.t->options.delete_remove)
		m.removed = removed_open(m.t, IsolationUsesXactSnapshot() ?
								 GetTransactionSnapshot() : GetLatestSnapshot(),
								 IsolationUsesXactSnapshot() ? GetLatestSnapshot() : NULL);

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
	progress_rows(nmerged);
	ExecDropSingleTupleTableSlot(slot);
	ExecDropSingleTupleTableSlot(m.rowslot);
	tuplesort_end(b->sort);
	b->sort = NULL;

	probe_close(m.probe);
	if (m.latest)
		probe_close(m.latest);
	if (m.removed)
		removed_close(m.removed);

	if (m.nconflicts > 0 && m.t->abort_on_conflict)
		ereport(ERROR,
				(errcode(ERRCODE_UNIQUE_VIOLATION),
				 errmsg("batch %s has " INT64_FORMAT " conflicting rows for table \"%s\"",
						b->batch_id, m.nconflicts, m.t->relname),
				 errdetail("Rows of keys where two payloads claim one version, in the batch or against the target's row: %s%s.",
						   m.named.data, m.nconflicts > CONFLICTS_NAMED ? "; ..." : ""),
				 errhint("Nothing was applied. Correct the source, or register the target with conflict_policy => 'quarantine' to hold conflicting keys back and load the rest.")));
	state_rows_flush(m.conflicts);
	if (m.writer.apply)
	{
		/* rules_attach.c: dataset checks over the winners, before any is written */
		if (batch_rules_has_dataset_checks(b->rules))
			batch_rules_check_winners(b, apply_winners_sql(m.writer.apply, batch_rules_owner(b->rules)));
		progress_phase(PHASE_APPLYING);
	}
	writer_close(&m.writer);
	MemoryContextDelete(m.groupcxt);
}
