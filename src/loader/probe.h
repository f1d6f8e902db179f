/*
 * probe.h
 *		Finding a key's row in the target through its unique key index
 *		(probe.c), for the merge pass.
 */
#ifndef RECONCILE_PROBE_H
#define RECONCILE_PROBE_H

#include "executor/tuptable.h"
#include "utils/snapshot.h"

#include "target.h"

typedef struct Probe Probe;

extern Probe *probe_open(TargetInfo *t, Snapshot snapshot, bool walk);
extern void probe_close(Probe *p);
extern TupleTableSlot *probe_find(Probe *p, TargetInfo *t, Datum *keys,
								  Datum *version, bytea **hash);
extern TupleTableSlot *probe_find_current(Probe *p, Probe *latest, TargetInfo *t,
										  Datum *keys, Datum *version, bytea **hash,
										  bool compare_versions);

#endif							/* RECONCILE_PROBE_H */
