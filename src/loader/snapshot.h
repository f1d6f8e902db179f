/*
 * snapshot.h
 *		Snapshot batches (snapshot.c): a batch that is a complete extract of
 *		a scope of its target, whose absent keys become tombstones.
 */
#ifndef RECONCILE_SNAPSHOT_H
#define RECONCILE_SNAPSHOT_H

#include "loader.h"

typedef struct SnapshotRun SnapshotRun;

extern SnapshotRun *snapshot_begin(BatchState *b);
extern void snapshot_add_key(SnapshotRun *s, Datum *keys);
extern void snapshot_check_rejects(BatchState *b);
extern void snapshot_apply(BatchState *b);

#endif							/* RECONCILE_SNAPSHOT_H */
