/*
 * probe.c
 *		Find a key's row in the target through its unique key index.
 *
 * The merge pass asks for keys in the index's own order.  For a single-
 * column key on a plain table one index scan walks forward alongside the
 * batch, stepping over the entries between two keys and descending the
 * btree again only across a gap of more than WALK_MAX_STEPS entries; other
 * targets (composite keys, partitions: one index per leaf) descend for
 * every key.  Index scans allocate lazily, so they run in the probe's own
 * memory context, never in a key's short-lived one.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/nbtree.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/partition.h"
#include "catalog/pg_inherits.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "ordering.h"
#include "payload.h"
#include "probe.h"

/* The target's key index, per leaf partition for a partitioned target. */
typedef struct ProbePart
{
	Relation	heap;
	Relation	index;
	IndexScanDesc scan;
	TupleTableSlot *slot;
	AttrNumber	version_attnum;
	AttrNumber *extra_attnums;	/* further version columns */
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

/*
 * The leaf's index that descends from the target's key index, through
 * every level of the partition tree: index_get_partition looks one level
 * down only, and a leaf of a two-level tree (a list partition divided by
 * hash) has the intermediate partitioned index as its parent.
 */
static Oid
leaf_key_index(Relation leaf, Oid key_index)
{
	List	   *indexes = RelationGetIndexList(leaf);
	ListCell   *lc;
	Oid			found = InvalidOid;

	foreach(lc, indexes)
	{
		Oid			index = lfirst_oid(lc);

		if (get_rel_relispartition(index) &&
			list_member_oid(get_partition_ancestors(index), key_index))
		{
			found = index;
			break;
		}
	}
	list_free(indexes);
	if (!OidIsValid(found))
		elog(ERROR, "partition \"%s\" has no index attached to key index %u",
			 RelationGetRelationName(leaf), key_index);
	return found;
}

/* Open index scans on the target's key index (each leaf's) for probing keys under snapshot. */
Probe *
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
								 leaf_key_index(part->heap, t->key_index) :
								 t->key_index, AccessShareLock);
		part->scan = index_beginscan(part->heap, part->index, p->snapshot,
									 t->nkeys, 0);
		part->slot = table_slot_create(part->heap, NULL);
		part->version_attnum = get_attnum(relid, t->version.name);
		part->extra_attnums = palloc(sizeof(AttrNumber) * Max(t->nextra, 1));
		for (int i = 0; i < t->nextra; i++)
			part->extra_attnums[i] = get_attnum(relid, t->extra[i].name);
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

/* End the scans probe_open started and release its snapshot. */
void
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
probe_read(ProbePart *part, TargetInfo *t, Datum *version, bytea **hash)
{
	bool		isnull;
	Datum		d;

	/* A copy in the caller's context: it outlives the slot's next row. */
	d = slot_getattr(part->slot, part->version_attnum, &isnull);
	if (t->nextra == 0)
		*version = datumCopy(d, t->version.typbyval, t->version.typlen);
	else
	{
		Datum		values[INDEX_MAX_KEYS + 1];

		values[0] = d;
		for (int i = 0; i < t->nextra; i++)
			values[i + 1] = slot_getattr(part->slot, part->extra_attnums[i], &isnull);
		*version = ordering_copy(t, ordering_make(t, values));
	}
	d = slot_getattr(part->slot, part->hash_attnum, &isnull);
	*hash = isnull ? NULL : DatumGetByteaPCopy(d);
}

/*
 * Find the target row of a key; returns NULL if there is none.  The
 * existing hash is copied into *hash (NULL when the row has none).  The
 * row stays in the returned slot until the next probe.
 */
TupleTableSlot *
probe_find(Probe *p, TargetInfo *t, Datum *keys, Datum *version, bytea **hash)
{
	MemoryContext caller = MemoryContextSwitchTo(p->cxt);
	ProbePart  *found = probe_locate(p, t, keys);

	MemoryContextSwitchTo(caller);
	if (found == NULL)
		return NULL;
	probe_read(found, t, version, hash);
	return found->slot;
}

/*
 * Find the key's row through p, as probe_find does, and, when latest is
 * not NULL (REPEATABLE READ: p reads the transaction's snapshot, latest
 * the latest one), check that a transaction that committed after this one
 * began did not write the key: a row p does not see, or (compare_versions)
 * one at another version, is a serialization failure, not a unique
 * violation or a decision taken on a row that is gone.  A caller that
 * writes every row it found (the merge) leaves the versions to the
 * update, which reports a concurrent update itself.
 */
TupleTableSlot *
probe_find_current(Probe *p, Probe *latest, TargetInfo *t, Datum *keys,
				   Datum *version, bytea **hash, bool compare_versions)
{
	TupleTableSlot *found = probe_find(p, t, keys, version, hash);
	Datum		lversion = (Datum) 0;
	bytea	   *lhash = NULL;
	bool		lfound;

	if (latest == NULL || (found != NULL && !compare_versions))
		return found;
	lfound = probe_find(latest, t, keys, &lversion, &lhash) != NULL;
	if (lfound != (found != NULL) || (found != NULL && ordering_compare(t, lversion, *version) != 0))
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 found == NULL ?
				 errmsg("could not serialize access to table \"%s\" due to a concurrent insert",
						t->relname) :
				 errmsg("could not serialize access to table \"%s\" due to a concurrent write",
						t->relname),
				 errdetail("Key %s was written by a transaction that committed after this one began.",
						   key_to_json(t, keys)),
				 errhint("Retry the transaction.")));
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

