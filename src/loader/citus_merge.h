/*
 * citus_merge.h
 *		A batch into a hash-distributed Citus target merged on the workers
 *		(citus_merge.c): its work table, the choice of path, the statements.
 */
#ifndef RECONCILE_CITUS_MERGE_H
#define RECONCILE_CITUS_MERGE_H

#include "loader.h"

extern void citus_merge_create_work(TargetInfo *t);
extern bool citus_merge_choose(BatchState *b, StagedShape *shape);
extern void citus_merge_stage(BatchState *b, StagedShape *shape);
extern void citus_merge_apply(BatchState *b);

#endif							/* RECONCILE_CITUS_MERGE_H */
