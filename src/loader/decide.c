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
 * A tombstone in the target is a row with a version like any other: the
 * write is monotonic, so no lower version brings a deleted row back.
 */
#include "postgres.h"

#include "decide.h"

Decision
decide_key(const DecideRow *rows, int nrows, const DecideTarget *target,
		   Disposition *disp)
{
	Decision	d = {false, false};
	const DecideRow *w = &rows[0];

	Assert(nrows > 0);

	/* Same version, another payload: the rows arrive sorted by version. */
	for (int i = 1, start = 0; i < nrows && !d.conflict; i++)
	{
		if (rows[i].version != rows[i - 1].version)
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
		 rows[i].version >= target->version; i++)
		if (rows[i].version == target->version &&
			(target->hash == NULL ||
			 memcmp(target->hash, rows[i].hash, RECONCILE_SHA256_LEN) != 0))
			d.conflict = true;

	if (d.conflict)
	{
		for (int i = 0; i < nrows; i++)
			disp[i] = DISP_CONFLICT;
		return d;
	}

	if (!target->exists || w->version > target->version)
	{
		d.write = true;
		disp[0] = w->tombstone ? DISP_DELETED :
			target->exists ? DISP_UPDATED : DISP_INSERTED;
	}
	else if (w->version == target->version)
		disp[0] = DISP_UNCHANGED;
	else
		disp[0] = DISP_STALE;

	for (int i = 1; i < nrows; i++)
		disp[i] = rows[i].version != rows[i - 1].version ? DISP_STALE : DISP_DUPLICATE;
	return d;
}
