/*
 * decide.h
 *		The loader's one rule for a key, as a pure function (decide.c): no
 *		I/O, no SPI, no catalog access.
 *
 * Versions are compared by one comparator, the version type's own btree
 * ordering (ordering.c hands it over as a SortSupport): 0 is the same
 * version, whatever the type.
 *
 * merge.c decides every key of a batch with it, resolve.c the key an owner
 * resolves; citus_merge.c states the same rule in SQL, and the test
 * decide_matrix (with its Citus sibling in test/t) checks all of them
 * against one table of cases.
 */
#ifndef RECONCILE_DECIDE_H
#define RECONCILE_DECIDE_H

#include "utils/sortsupport.h"

#include "common/sha256.h"
#include "loader.h"

/* One staged candidate of a key. */
typedef struct DecideRow
{
	Datum		version;		/* the ordering value, in the version column's type */
	bool		tombstone;		/* a DELETE */
	uint8		hash[RECONCILE_SHA256_LEN];	/* the payload hash */
} DecideRow;

/* The target's row of the key, as the merge found it. */
typedef struct DecideTarget
{
	bool		exists;
	Datum		version;
	const uint8 *hash;			/* NULL: no hash (or not a SHA-256 one) */
	bool		tombstone;		/* kept as a row: it has a version like any */
} DecideTarget;

/* What happens to the key. */
typedef struct Decision
{
	bool		conflict;		/* every row is DISP_CONFLICT, nothing written */
	bool		write;			/* rows[0] is written over (or as) the target's row */
} Decision;

extern Decision decide_key(const DecideRow *rows, int nrows,
						   const DecideTarget *target, SortSupport order,
						   Disposition *disp);

#endif							/* RECONCILE_DECIDE_H */
