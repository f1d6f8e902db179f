/*
 * citus_load.h
 *		A batch into a target that Citus manages (citus_load.c): its checks
 *		and the copy of the target rows its merge probes.
 */
#ifndef RECONCILE_CITUS_LOAD_H
#define RECONCILE_CITUS_LOAD_H

#include "target.h"

extern void citus_check_batch(TargetInfo *t, Oid staged, const char *batch_id);
extern TargetInfo *citus_probe_copy(TargetInfo *t, Oid staged, const char *batch_id);

#endif							/* RECONCILE_CITUS_LOAD_H */
