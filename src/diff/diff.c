/*
 * diff.c
 *		The entry of every diff: by checksums of key ranges where a side is
 *		on another server or on Citus workers and they can be computed
 *		there (diff_checksum.c), else by one ordered pass over each side
 *		(diff_merge.c); then, with the option "recheck", the differing keys
 *		read again after a wait, and only those that still differ reported.
 *
 * Both are called from here, and neither calls back, so the choice of how
 * a diff runs has one home; the SQL functions (diff_sql.c) and the
 * configured jobs (diff_run.c) both come through diff_compare.
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "storage/latch.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/tuplesort.h"
#include "utils/typcache.h"
#include "executor/tuptable.h"
#include "utils/wait_event.h"

#include "diff.h"

/* The first pass: by checksums where they apply, else every row. */
static void
compare_once(DiffSpec *spec, Tuplestorestate *ts, TupleDesc desc, DiffCounts *counts)
{
	if (!diff_checksum(spec, ts, desc, counts))
		diff_execute(spec, ts, desc, counts);
}

static DiffCollector *
collector_create(void)
{
	DiffCollector *col = palloc0(sizeof(DiffCollector));

	col->cxt = AllocSetContextCreate(CurrentMemoryContext, "reconcile diff recheck",
									 ALLOCSET_DEFAULT_SIZES);
	return col;
}

/* Findings held for a recheck, ordered by key (NULL keys last). */
static int
held_cmp(const void *a, const void *b, void *arg)
{
	DiffSpec   *spec = arg;
	const DiffHeld *x = a;
	const DiffHeld *y = b;

	for (int i = 0; i < spec->nkeys; i++)
	{
		int			c = ApplySortComparator(x->key[i], x->knull[i], y->key[i], y->knull[i],
											&spec->keys[i].ssup);

		if (c != 0)
			return c;
	}
	return 0;
}

/* Sleep ms milliseconds, answering a cancel or a termination meanwhile. */
static void
recheck_wait(int64 ms)
{
	TimestampTz end = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ms);

	for (;;)
	{
		long		left;

		CHECK_FOR_INTERRUPTS();
		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), end);
		if (left <= 0)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 left, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/* The distinct first key values of held findings (sorted, no NULL keys). */
static Datum
first_key_array(DiffSpec *spec, DiffHeld *held, int64 n)
{
	DiffColumn *c = &spec->keys[0];
	Datum	   *elems = palloc_extended(sizeof(Datum) * Max(n, 1), MCXT_ALLOC_HUGE);
	int			ne = 0;
	int16		typlen;
	bool		typbyval;
	char		typalign;

	for (int64 i = 0; i < n; i++)
	{
		if (ne > 0 && ApplySortComparator(elems[ne - 1], false, held[i].key[0], false,
										  &c->ssup) == 0)
			continue;
		elems[ne++] = held[i].key[0];
	}
	get_typlenbyvalalign(c->basetype, &typlen, &typbyval, &typalign);
	return PointerGetDatum(construct_array(elems, ne, c->basetype, typlen, typbyval, typalign));
}

/*
 * Read the keys of the held findings (n > 0, sorted, none with a NULL in
 * the key) again from both sides, with a new snapshot, and return the
 * findings of that read whose key is among them: what still differs.  The
 * read is the ordered pass over those keys only, the first key column's
 * values sent as one array (pushed down to a foreign side as a key list).
 */
static DiffCollector *
recheck_once(DiffSpec *spec, DiffHeld *held, int64 n)
{
	DiffCollector *next = collector_create();
	DiffCollector *kept = collector_create();
	DiffKeyFilter filter;
	DiffCounts	rc;
	int64		max_differences = spec->max_differences;
	TimestampTz deadline = spec->deadline;

	memset(&filter, 0, sizeof(filter));
	filter.keys = first_key_array(spec, held, n);
	spec->filter = &filter;
	spec->fresh_snapshot = true;
	spec->collect = next;
	/* The keys are already as few as the limits allow; this read is short. */
	spec->max_differences = 0;
	spec->deadline = 0;
	diff_execute(spec, NULL, NULL, &rc);
	spec->max_differences = max_differences;
	spec->deadline = deadline;
	spec->collect = NULL;
	spec->fresh_snapshot = false;
	spec->filter = NULL;

	/*
	 * Keep a finding of this read when its whole key was held (a key of
	 * several columns shares its first column with keys that did not
	 * differ); its values are this read's, the row as it is now.
	 */
	kept->held = palloc_extended(sizeof(DiffHeld) * Max(next->n, 1), MCXT_ALLOC_HUGE);
	for (int64 i = 0; i < next->n; i++)
	{
		DiffHeld   *h = &next->held[i];

		CHECK_FOR_INTERRUPTS();
		if (!h->has_null &&
			bsearch_arg(h, held, n, sizeof(DiffHeld), held_cmp, spec) != NULL)
			kept->held[kept->n++] = *h;
	}
	/* kept's entries point into next's memory: keep that, drop kept's own. */
	MemoryContextSetParent(next->cxt, kept->cxt);
	qsort_arg(kept->held, kept->n, sizeof(DiffHeld), held_cmp, spec);
	return kept;
}

/*
 * Keys read again at a time: each chunk is one reread of both sides (the
 * first key column's values as one array), so memory holds one chunk's
 * findings, whatever the number of findings held (those spill: sorted
 * findings beyond work_mem go to disk).
 */
#define DIFF_RECHECK_CHUNK 10000

/* The tuples held for a recheck: the finding's columns, then the key's. */
static TupleDesc
held_desc(DiffSpec *spec)
{
	TupleDesc	desc = diff_findings_desc(DIFF_FINDING_NATTS + spec->nkeys);

	for (int i = 0; i < spec->nkeys; i++)
		TupleDescInitEntry(desc, DIFF_FINDING_NATTS + 1 + i, NULL, spec->keys[i].typid, -1, 0);
	return desc;
}

/* The first read's collector: keyed findings sorted by key, NULL keys apart. */
static DiffCollector *
collector_sorted(DiffSpec *spec)
{
	DiffCollector *col = collector_create();
	AttrNumber *attnums = palloc(sizeof(AttrNumber) * spec->nkeys);
	Oid		   *ops = palloc(sizeof(Oid) * spec->nkeys);
	Oid		   *colls = palloc(sizeof(Oid) * spec->nkeys);
	bool	   *nulls_first = palloc0(sizeof(bool) * spec->nkeys);

	col->desc = held_desc(spec);
	for (int i = 0; i < spec->nkeys; i++)
	{
		attnums[i] = DIFF_FINDING_NATTS + 1 + i;
		/* The order of the merge (diff_prepare.c: prepare_ordering). */
		ops[i] = lookup_type_cache(spec->keys[i].basetype, TYPECACHE_LT_OPR)->lt_opr;
		colls[i] = spec->keys[i].collation;
	}
	col->sorted = tuplesort_begin_heap(col->desc, spec->nkeys, attnums, ops, colls,
									   nulls_first, work_mem, NULL, TUPLESORT_NONE);
	col->nullkeyed = tuplestore_begin_heap(false, false, work_mem);
	col->slot = MakeSingleTupleTableSlot(col->desc, &TTSOpsVirtual);
	return col;
}

/* Reading held findings in key order: from the first sort, or a round's store. */
typedef struct HeldReader
{
	Tuplesortstate *sort;
	Tuplestorestate *store;
	TupleTableSlot *slot;
} HeldReader;

static bool
held_next(HeldReader *r)
{
	if (r->sort)
		return tuplesort_gettupleslot(r->sort, true, false, r->slot, NULL);
	return tuplestore_gettupleslot(r->store, true, false, r->slot);
}

/* The next chunk of held findings, copied into the current memory context. */
static int64
held_chunk(DiffSpec *spec, HeldReader *r, DiffHeld *chunk)
{
	int64		n = 0;

	while (n < DIFF_RECHECK_CHUNK && held_next(r))
	{
		HeapTuple	tup = ExecCopySlotHeapTuple(r->slot);
		int			natts = r->slot->tts_tupleDescriptor->natts;
		Datum	   *v = palloc(sizeof(Datum) * natts);
		bool	   *nl = palloc(sizeof(bool) * natts);
		DiffHeld   *h = &chunk[n++];

		CHECK_FOR_INTERRUPTS();
		heap_deform_tuple(tup, r->slot->tts_tupleDescriptor, v, nl);
		memcpy(h->values, v, sizeof(Datum) * DIFF_FINDING_NATTS);
		memcpy(h->nulls, nl, sizeof(bool) * DIFF_FINDING_NATTS);
		h->key = &v[DIFF_FINDING_NATTS];
		h->knull = &nl[DIFF_FINDING_NATTS];
		h->has_null = false;
	}
	return n;
}

/* A finding into a round's store, with its key, for the next round. */
static void
held_put(DiffSpec *spec, Tuplestorestate *store, TupleDesc desc, DiffHeld *h)
{
	Datum	   *v = palloc(sizeof(Datum) * desc->natts);
	bool	   *nl = palloc(sizeof(bool) * desc->natts);

	memcpy(v, h->values, sizeof(Datum) * DIFF_FINDING_NATTS);
	memcpy(nl, h->nulls, sizeof(bool) * DIFF_FINDING_NATTS);
	memcpy(&v[DIFF_FINDING_NATTS], h->key, sizeof(Datum) * spec->nkeys);
	memcpy(&nl[DIFF_FINDING_NATTS], h->knull, sizeof(bool) * spec->nkeys);
	tuplestore_putvalues(store, desc, v, nl);
}

/* Count a finding reported after the rechecks. */
static void
count_finding(DiffSpec *spec, DiffCounts *counts, Datum *values)
{
	const char *issue = TextDatumGetCString(values[0]);

	if (strcmp(issue, "MISSING_IN_TARGET") == 0)
		counts->missing_in_target++;
	else if (strcmp(issue, "EXTRA_IN_TARGET") == 0)
		counts->extra_in_target++;
	else if (strcmp(issue, "MISMATCH") == 0)
	{
		Datum	   *names;
		int			nnames;

		counts->mismatched++;
		deconstruct_array(DatumGetArrayTypeP(values[2]), TEXTOID, -1, false, TYPALIGN_INT,
						  &names, NULL, &nnames);
		for (int j = 0; j < nnames; j++)
			for (int c = 0; c < spec->ncols; c++)
				if (strcmp(TextDatumGetCString(names[j]), spec->cols[c].name) == 0)
					counts->column_mismatches[c]++;
	}
	else if (strncmp(issue, "DUPLICATE_KEY", 13) == 0)
		counts->duplicate_keys++;
	else
		counts->null_keys++;
}

/*
 * A diff with the option "recheck": the first read's findings are held
 * (sorted by key, spilling beyond work_mem), and their keys read again
 * recheck_times times, recheck_after_ms apart, DIFF_RECHECK_CHUNK keys
 * at a time; a finding is reported only if its key differed at every
 * read, with the values of the last.  Findings with a NULL in the key are
 * reported as found: they have no key to read again.  A deadline
 * (max_duration) that would pass during a wait ends the rechecks there:
 * the findings are reported with the rechecks they survived.
 */
static void
compare_with_recheck(DiffSpec *spec, Tuplestorestate *ts, TupleDesc desc,
					 DiffCounts *counts)
{
	DiffCollector *first;
	HeldReader	in;
	int64		nheld;
	int			done = 0;
	int64		before;
	MemoryContext chunkcxt,
				old;
	DiffHeld   *chunk;

	if (IsolationUsesXactSnapshot())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("option \"recheck\" needs the READ COMMITTED isolation level"),
				 errdetail("Under %s every read of the transaction sees the snapshot of its first, so a recheck could not see rows that arrived since.",
						   IsolationIsSerializable() ? "SERIALIZABLE" : "REPEATABLE READ"),
				 errhint("Run the diff in a READ COMMITTED transaction, or leave out \"recheck\".")));

	first = collector_sorted(spec);
	spec->collect = first;
	compare_once(spec, NULL, NULL, counts);
	spec->collect = NULL;
	tuplesort_performsort(first->sorted);

	memset(&in, 0, sizeof(in));
	in.sort = first->sorted;
	in.slot = MakeSingleTupleTableSlot(first->desc, &TTSOpsMinimalTuple);
	nheld = first->nsorted;
	chunk = palloc_extended(sizeof(DiffHeld) * DIFF_RECHECK_CHUNK, MCXT_ALLOC_HUGE);
	chunkcxt = AllocSetContextCreate(CurrentMemoryContext, "reconcile diff recheck chunk",
									 ALLOCSET_DEFAULT_SIZES);

	while (done < spec->recheck_times && nheld > 0)
	{
		Tuplestorestate *out;
		int64		n;

		if (spec->deadline != 0 &&
			TimestampTzPlusMilliseconds(GetCurrentTimestamp(), spec->recheck_after_ms) >= spec->deadline)
		{
			if (counts->stopped == NULL)
				counts->stopped = "max_duration";
			break;
		}
		recheck_wait(spec->recheck_after_ms);
		out = tuplestore_begin_heap(false, false, work_mem);
		nheld = 0;
		old = MemoryContextSwitchTo(chunkcxt);
		while ((n = held_chunk(spec, &in, chunk)) > 0)
		{
			DiffCollector *kept = recheck_once(spec, chunk, n);

			for (int64 i = 0; i < kept->n; i++)
				held_put(spec, out, first->desc, &kept->held[i]);
			nheld += kept->n;
			MemoryContextDelete(kept->cxt);
			/* A tuple read back from disk is the slot's, in chunkcxt: let go first. */
			ExecClearTuple(in.slot);
			MemoryContextReset(chunkcxt);
		}
		MemoryContextSwitchTo(old);
		if (in.sort)
			tuplesort_end(in.sort);
		else
			tuplestore_end(in.store);
		in.sort = NULL;
		in.store = out;
		done++;
	}
	counts->rechecks = done;

	/* Report and count what survived (all of it, if no recheck was done). */
	before = counts->missing_in_target + counts->extra_in_target + counts->mismatched;
	counts->missing_in_target = counts->extra_in_target = counts->mismatched = 0;
	counts->duplicate_keys = counts->null_keys = 0;
	memset(counts->column_mismatches, 0, sizeof(int64) * Max(spec->ncols, 1));
	old = MemoryContextSwitchTo(chunkcxt);
	while (held_next(&in))
	{
		slot_getallattrs(in.slot);
		count_finding(spec, counts, in.slot->tts_values);
		if (ts)
			diff_put_finding(ts, desc, in.slot->tts_values, in.slot->tts_isnull, done);
		ExecClearTuple(in.slot);
		MemoryContextReset(chunkcxt);
	}
	/* The same slot (the same descriptor): it lives outside chunkcxt. */
	while (tuplestore_gettupleslot(first->nullkeyed, true, false, in.slot))
	{
		slot_getallattrs(in.slot);
		count_finding(spec, counts, in.slot->tts_values);
		if (ts)
			diff_put_finding(ts, desc, in.slot->tts_values, in.slot->tts_isnull, 0);
		ExecClearTuple(in.slot);
		MemoryContextReset(chunkcxt);
	}
	MemoryContextSwitchTo(old);
	ExecDropSingleTupleTableSlot(in.slot);
	if (in.sort)
		tuplesort_end(in.sort);
	else
		tuplestore_end(in.store);
	tuplestore_end(first->nullkeyed);
	ExecDropSingleTupleTableSlot(first->slot);
	MemoryContextDelete(chunkcxt);

	/* A differing key a recheck found agreeing (or gone from both sides). */
	counts->matched += Max(before - (counts->missing_in_target + counts->extra_in_target +
									 counts->mismatched), 0);
}

/*
 * Run a prepared diff, the entry of every diff: by checksums where a side
 * is on another server or on Citus workers and they can be computed there
 * (diff_checksum.c), else by reading every row (diff_execute); with
 * "recheck", the differing keys again (compare_with_recheck).  The
 * deadline of max_duration counts from here.  The caller holds an SPI
 * connection.
 */
void
diff_compare(DiffSpec *spec, Tuplestorestate *ts, TupleDesc desc, DiffCounts *counts)
{
	spec->deadline = spec->max_duration_ms > 0
		? TimestampTzPlusMilliseconds(GetCurrentTimestamp(), spec->max_duration_ms) : 0;
	if (spec->recheck_times > 0)
		compare_with_recheck(spec, ts, desc, counts);
	else
		compare_once(spec, ts, desc, counts);
	spec->deadline = 0;
}
