/*
 * writers.h
 *		The two write paths that merge.c hands each winner to: direct.c
 *		(executor-level writes while the merge is at the key) and apply.c
 *		(a temporary table applied with INSERT and UPDATE statements).
 *
 * A writer receives the value it writes, a Winner, and never the pass that
 * produced it; both writers are opaque to the merge.
 */
#ifndef RECONCILE_WRITERS_H
#define RECONCILE_WRITERS_H

#include "executor/tuptable.h"

#include "target.h"

/*
 * One key's winning row, in the target's types.  keys and payload point
 * into the merge's copy of the sort tuple (no copy per row); they and hash
 * live until the key's group is done.
 */
typedef struct Winner
{
	Datum	   *keys;			/* TargetInfo.nkeys values, never null */
	Datum	   *payload;		/* TargetInfo.npayload values */
	bool	   *payload_isnull;
	Datum		version;		/* in the version column's type */
	bool		tombstone;		/* a DELETE: the row stays, marked deleted */
	bool		tombstone_payload;	/* and takes payload (a partial batch: sparse.c) */
	Datum		hash;			/* bytea: the payload hash */
} Winner;

/* What the general path's statements do with a winner. */
#define ACTION_INSERT 'I'
#define ACTION_UPDATE 'U'
#define ACTION_DELETE 'D'
/* A resolution (resolve.c): the row at the winner's own version replaced. */
#define ACTION_REPLACE 'R'
/* delete_mode 'remove' (removed.c): the row deleted from the target. */
#define ACTION_REMOVE 'X'

/* direct.c: the direct path */
typedef struct DirectWriter DirectWriter;

extern bool direct_allowed(TargetInfo *t);
extern DirectWriter *direct_open(TargetInfo *t);
extern void direct_insert(DirectWriter *w, const Winner *winner);
extern void direct_update(DirectWriter *w, TupleTableSlot *found,
						  const Winner *winner);
extern void direct_remove(DirectWriter *w, TupleTableSlot *found);
extern void direct_close(DirectWriter *w);

/* apply.c: the general path */
typedef struct ApplyWriter ApplyWriter;

extern ApplyWriter *apply_create(TargetInfo *t, const char *batch_id);
extern void apply_add(ApplyWriter *a, const Winner *winner, char action);
extern char *apply_winners_sql(ApplyWriter *a, Oid reader);
extern void apply_run(ApplyWriter *a);

/* writer.c: which of the two, chosen once for the merge and a resolution */
typedef struct Writer
{
	DirectWriter *direct;		/* one of the two is set */
	ApplyWriter *apply;
	TargetInfo *t;				/* whose version ordering tells a replacement */
} Writer;

extern void writer_open(Writer *w, TargetInfo *t, const char *batch_id,
						bool check_winners);
extern void writer_put(Writer *w, TupleTableSlot *found, Datum found_version,
					   const Winner *winner);
extern void writer_remove(Writer *w, TupleTableSlot *found, const Winner *winner);
extern void writer_close(Writer *w);

#endif							/* RECONCILE_WRITERS_H */
