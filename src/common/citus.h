/*
 * citus.h
 *		Tables managed by Citus (citus.c): what kind a relation is, found in
 *		Citus's catalog at run time, and which kinds reconcile refuses.
 */
#ifndef RECONCILE_CITUS_H
#define RECONCILE_CITUS_H

#include "postgres_ext.h"

/* Kinds of Citus table; TargetInfo.citus_kind holds one. */
typedef enum CitusKind
{
	CITUS_NONE = 0,				/* not a Citus table, or Citus not installed */
	CITUS_DISTRIBUTED,			/* hash-distributed by a column */
	CITUS_SINGLE_SHARD,			/* distributed without a column (one shard) */
	CITUS_REFERENCE,			/* replicated to every node */
	CITUS_LOCAL,				/* a Citus-managed local table on the coordinator */
	CITUS_APPEND,				/* append-distributed */
	CITUS_RANGE					/* range-distributed */
} CitusKind;

extern CitusKind citus_table_kind(Oid relid, char **distcol, int32 *colocationid);
extern const char *citus_kind_name(CitusKind kind);
extern char *citus_function_call(const char *function, const char *args);
extern void citus_check_target(Oid relid, const char *relname, bool partitioned,
							   CitusKind kind);

#endif							/* RECONCILE_CITUS_H */
