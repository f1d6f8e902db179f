/*
 * sparse.h
 *		A partial batch's sparse rows merged over the target's row
 *		(sparse.c), before decide.c compares their hashes.
 */
#ifndef RECONCILE_SPARSE_H
#define RECONCILE_SPARSE_H

#include "executor/tuptable.h"

#include "decide.h"
#include "target.h"

/* One key's staged rows as the merge holds them, highest version first. */
typedef struct SparseGroup
{
	int			nrows;
	DecideRow  *cand;			/* version, tombstone, hash (rewritten) */
	Datum	  **payload;		/* per row: npayload values, merged in place */
	bool	  **payload_isnull;
	bytea	  **present;		/* per row: its bitmap (loader.h), NULL if whole */

	/* Out: the payload a DELETE winner's tombstone keeps, if have_kept. */
	bool		have_kept;
	Datum	   *kept;
	bool	   *kept_isnull;
} SparseGroup;

typedef struct SparseMerger SparseMerger;

extern SparseMerger *sparse_create(TargetInfo *t);
extern void sparse_merge(SparseMerger *s, SparseGroup *g, TupleTableSlot *found,
						 Datum tversion);
extern char *sparse_present_text(TargetInfo *t, bytea *present);

#endif							/* RECONCILE_SPARSE_H */
