/*
 * decide.c
 *		The loader's rule for one key: which staged row wins, and what
 *		becomes of every other one.  Pure: it reads its arguments only.
 *
 * The candidates arrive highest version first, ties in source order
 * (object_key, source_row), so the first row is the candidate winner.
 * The rule, as the README states it:
 *
 * - two rows with the same version but different payload hashes are a
 *   conflict, and so is any row whose version equals the target row's
 *   with another hash (or the target row has none), whether or not a
 *   higher version is staged too: every row of the key is DISP_CONFLICT
 *   and nothing is written;
 * - otherwise the winner is compared with the target's row: absent or at
 *   a lower version, it is written (an UPSERT as a live row, DISP_INSERTED
 *   or DISP_UPDATED, a DELETE as a tombstone, DISP_DELETED); at an equal
 *   version it is DISP_UNCHANGED; at a lower one DISP_STALE;
 * - the other rows at the winner's version are exact duplicates
 *   (DISP_DUPLICATE); of each lower version the first row is DISP_STALE
 *   and its exact repeats DISP_DUPLICATE.
 *
 * "Same version" and "higher" are the comparator's (the version type's
 * btree ordering, with the column's collation): numeric 1.0 and 1.00 are
 * one version.  Rows of one key at one version keep source order, so a
 * tie is never broken by payload: it is a duplicate or a conflict.
 *
 * A tombstone in the target is a row with a version like any other: the
 * write is monotonic, so no lower version brings a deleted row back.
 */
#include "postgres.h"

#include "decide.h"

/* <0, 0, >0: version a orders before, as or after b. */
static inline int
version_cmp(Datum a, Datum b, SortSupport order)
{
	return ApplySortComparator(a, false, b, false, order);
}

Decision
decide_key(const DecideRow *rows, int nrows, const DecideTarget *target,
		   SortSupport order, Disposition *disp)
{
	Decision	d = {false, false};
	const DecideRow *w = &rows[0];
	int			cmp;

	Assert(nrows > 0);

	/* Same version, another payload: the rows arrive sorted by version. */
	for (int i = 1, start = 0; i < nrows && !d.conflict; i++)
	{
		if (version_cmp(rows[i].version, rows[i - 1].version, order) != 0)
			start = i;
		else if (memcmp(rows[i].hash, rows[start].hash, RECONCILE_SHA256_LEN) != 0)
			d.conflict = true;
	}

	/*
	 * Any staged row at the target's version with another hash, not only
	 * the winner: a higher version in the same batch does not make a
	 * disagreement about the target's own version go away.
	 */
	for (int i = 0; target->exists && !d.conflict && i < nrows &&
		 version_cmp(rows[i].version, target->version, order) >= 0; i++)
		if (version_cmp(rows[i].version, target->version, order) == 0 &&
			(target->hash == NULL ||
			 memcmp(target->hash, rows[i].hash, RECONCILE_SHA256_LEN) != 0))
			d.conflict = true;

	if (d.conflict)
	{
		for (int i = 0; i < nrows; i++)
			disp[i] = DISP_CONFLICT;
		return d;
	}

	cmp = target->exists ? version_cmp(w->version, target->version, order) : 1;
	if (cmp > 0)
	{
		d.write = true;
		disp[0] = w->tombstone ? DISP_DELETED :
			target->exists ? DISP_UPDATED : DISP_INSERTED;
	}
	else if (cmp == 0)
		disp[0] = DISP_UNCHANGED;
	else
		disp[0] = DISP_STALE;

	for (int i = 1; i < nrows; i++)
		disp[i] = version_cmp(rows[i].version, rows[i - 1].version, order) != 0 ?
			DISP_STALE : DISP_DUPLICATE;
	return d;
}
