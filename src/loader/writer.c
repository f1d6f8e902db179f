/*
 * writer.c
 *		The choice between the two write paths (writers.h), made in one
 *		place for the merge (merge.c) and a resolution (resolve.c).
 *
 * The direct path (direct.c) writes a plain table without triggers or
 * rules in a READ COMMITTED transaction while the merge is at the key;
 * anything else, reconcile.write_path = 'general', or winners that must be
 * checked before any is written (attached dataset checks) take the general
 * path (apply.c).  Both give the same result.
 */
#include "postgres.h"

#include "ordering.h"
#include "writers.h"

void
writer_open(Writer *w, TargetInfo *t, const char *batch_id, bool check_winners)
{
	w->direct = NULL;
	w->apply = NULL;
	w->t = t;
	if (!check_winners && direct_allowed(t))
		w->direct = direct_open(t);
	else
		w->apply = apply_create(t, batch_id);
}

/*
 * Write a winner at its version over the target's row found at
 * found_version (found NULL: none); at an equal version the row is
 * replaced (a resolution).
 */
void
writer_put(Writer *w, TupleTableSlot *found, Datum found_version,
		   const Winner *winner)
{
	if (w->apply != NULL)
		apply_add(w->apply, winner, found == NULL ? ACTION_INSERT :
				  ordering_compare(w->t, found_version, winner->version) == 0 ? ACTION_REPLACE :
				  winner->tombstone && !winner->tombstone_payload ? ACTION_DELETE :
				  ACTION_UPDATE);	/* the UPDATE sets the deleted column too */
	else if (found == NULL)
		direct_insert(w->direct, winner);
	else
		direct_update(w->direct, found, winner);	/* replaces at found_version too */
}

/*
 * Remove the target's row found for a winning DELETE under delete_mode
 * 'remove' (removed.c keeps the key).
 */
void
writer_remove(Writer *w, TupleTableSlot *found, const Winner *winner)
{
	if (w->apply != NULL)
		apply_add(w->apply, winner, ACTION_REMOVE);
	else
		direct_remove(w->direct, found);
}

/* Write what is still buffered: the direct path's inserts, the general path's statements. */
void
writer_close(Writer *w)
{
	if (w->direct != NULL)
		direct_close(w->direct);
	else
		apply_run(w->apply);
}
