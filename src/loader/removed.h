/*
 * removed.h
 *		delete_mode 'remove' (removed.c): a winning DELETE removes the row
 *		from the target and keeps its key, version and hash in the target's
 *		companion table of kept removals, which the merge and a resolution
 *		consult where the target holds no row.
 */
#ifndef RECONCILE_REMOVED_H
#define RECONCILE_REMOVED_H

#include "executor/tuptable.h"
#include "utils/snapshot.h"

#include "target.h"
#include "writers.h"

typedef struct Removed Removed;

extern Oid	removed_table(Oid target);
extern void removed_register(TargetInfo *t, bool remove);
extern void removed_unregister(Oid target);
extern Removed *removed_open(TargetInfo *t, Snapshot snapshot, Snapshot latest);
extern bool removed_find(Removed *r, Datum *keys, Datum *version, bytea **hash);
extern void removed_write(Removed *r, Writer *w, TupleTableSlot *found,
						  bool found_removed, Datum found_version,
						  const Winner *winner);
extern void removed_close(Removed *r);

#endif							/* RECONCILE_REMOVED_H */
