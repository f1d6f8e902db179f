/*
 * merge.h
 *		What the merge pass (merge.c) shares with the target probes
 *		(probe.c) and the two write paths (direct.c, apply.c).
 */
#ifndef RECONCILE_MERGE_H
#define RECONCILE_MERGE_H

#include "access/genam.h"
#include "access/heapam.h"
#include "executor/execdesc.h"
#include "nodes/execnodes.h"
#include "utils/snapshot.h"

#include "reconcile.h"

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

	FmgrInfo   *key_eq;			/* equality of each key column */

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

/* probe.c */
extern Probe *probe_open(TargetInfo *t, Snapshot snapshot, bool walk);
extern void probe_close(Probe *p);
extern ProbePart *probe_find(Probe *p, TargetInfo *t, Datum *keys, int64 *version,
							 bytea **hash);

/* apply.c: the general path */
extern void apply_create(Merger *m);
extern void apply_add(Merger *m, char action);
extern void apply_run(Merger *m);

/* direct.c: the direct path */
extern bool direct_allowed(TargetInfo *t);
extern DirectWriter *direct_open(TargetInfo *t);
extern void direct_close(DirectWriter *w);
extern void direct_insert(Merger *m);
extern void direct_update(Merger *m, ProbePart *found);

/* merge.c */
extern Datum version_datum(TargetInfo *t, int64 v);

#endif							/* RECONCILE_MERGE_H */
