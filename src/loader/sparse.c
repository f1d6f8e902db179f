/*
 * sparse.c
 *		Sparse rows of a partial batch (option "partial"): each one merged
 *		over the key's row as the batch's lower versions leave it.
 *
 * A sparse UPSERT names the payload columns it carries (present_columns,
 * read by stage.c); its absent columns take their values from the state
 * of the key just below its version: the target's row, with the batch's
 * staged UPSERTs of higher versions than the target's applied one by one
 * in version order.  Its payload hash is then made over the merged row, so
 * decide.c's rule applies unchanged: two rows of one version whose merged
 * payloads differ are a conflict, a merged row equal to the target's at
 * the target's version is unchanged, and the winner, written whole by
 * either write path, is what applying the rows one at a time in version
 * order would leave.  Rows at or below the target's version (stale or at
 * its version) merge over the target's row and move nothing.  A DELETE is
 * whole (its hash is its staged row's) and moves the key's state no
 * further: its tombstone keeps the payload below it, with the batch's
 * lower versions applied (the writers then write the tombstone's payload
 * too), except on a key nothing holds yet, where its own staged payload is
 * what the tombstone keeps, as for any new key.  A key that neither the
 * target nor a lower staged UPSERT holds gives absent columns NULL.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"

#include "loader.h"
#include "ordering.h"
#include "payload.h"
#include "sparse.h"

struct SparseMerger
{
	TargetInfo *t;
	Sha256Ctx  *sha;
	TupleDesc	mapped;			/* the descriptor attmap was made for */
	int		   *attmap;			/* per payload column, its index in mapped */
	Datum	   *base;			/* the key's state below the current version */
	bool	   *base_isnull;
};

SparseMerger *
sparse_create(TargetInfo *t)
{
	SparseMerger *s = palloc0(sizeof(SparseMerger));

	s->t = t;
	s->sha = reconcile_sha256_begin();
	s->attmap = palloc(sizeof(int) * Max(t->npayload, 1));
	s->base = palloc(sizeof(Datum) * Max(t->npayload, 1));
	s->base_isnull = palloc(sizeof(bool) * Max(t->npayload, 1));
	return s;
}

/*
 * The target row's payload, its columns found by name (a leaf partition
 * may order them otherwise), copied: the found slot is the writers'.
 */
static void
base_from_target(SparseMerger *s, TupleTableSlot *found)
{
	TargetInfo *t = s->t;
	TupleDesc	desc = found->tts_tupleDescriptor;

	if (s->mapped != desc)
	{
		for (int i = 0; i < t->npayload; i++)
		{
			int			a;

			for (a = 0; a < desc->natts; a++)
				if (!TupleDescAttr(desc, a)->attisdropped &&
					strcmp(NameStr(TupleDescAttr(desc, a)->attname), t->payload[i].name) == 0)
					break;
			if (a == desc->natts)
				elog(ERROR, "column \"%s\" not found in a row of \"%s\"", t->payload[i].name, t->relname);
			s->attmap[i] = a;
		}
		s->mapped = desc;
	}
	slot_getallattrs(found);
	for (int i = 0; i < t->npayload; i++)
	{
		int			a = s->attmap[i];

		s->base_isnull[i] = found->tts_isnull[a];
		s->base[i] = found->tts_isnull[a] ? (Datum) 0 :
			datumCopy(found->tts_values[a], t->payload[i].typbyval, t->payload[i].typlen);
	}
}

static void
base_from_row(SparseMerger *s, SparseGroup *g, int k)
{
	memcpy(s->base, g->payload[k], sizeof(Datum) * s->t->npayload);
	memcpy(s->base_isnull, g->payload_isnull[k], sizeof(bool) * s->t->npayload);
}

/*
 * Merge the group's sparse UPSERTs in place and give each its hash.  The
 * group is the key's rows, highest version first (found: the target's row,
 * at version tversion, or NULL); they are walked lowest version first,
 * versions compared by the target's ordering (ordering.c).
 */
void
sparse_merge(SparseMerger *s, SparseGroup *g, TupleTableSlot *found, Datum tversion)
{
	TargetInfo *t = s->t;
	bool		have_base = found != NULL;

	g->have_kept = false;
	if (found != NULL)
		base_from_target(s, found);
	else
		for (int c = 0; c < t->npayload; c++)
			s->base_isnull[c] = true;

	for (int hi = g->nrows - 1; hi >= 0;)
	{
		int			lo = hi;
		int			next = -1;

		/* The rows of one version: lo..hi. */
		while (lo > 0 && ordering_compare(t, g->cand[lo - 1].version, g->cand[hi].version) == 0)
			lo--;

		/*
		 * The winner's version, a DELETE above the target's: its tombstone
		 * keeps the key's state below it, as applying the batch's versions
		 * one at a time would leave it (where nothing holds the key yet, its
		 * own staged payload, as for any new key's tombstone).
		 */
		if (lo == 0 && g->cand[0].tombstone && have_base &&
			(found == NULL || ordering_compare(t, g->cand[0].version, tversion) > 0))
		{
			g->kept = palloc(sizeof(Datum) * Max(t->npayload, 1));
			g->kept_isnull = palloc(sizeof(bool) * Max(t->npayload, 1));
			memcpy(g->kept, s->base, sizeof(Datum) * t->npayload);
			memcpy(g->kept_isnull, s->base_isnull, sizeof(bool) * t->npayload);
			g->have_kept = true;
		}
		for (int k = lo; k <= hi; k++)
		{
			if (g->cand[k].tombstone || g->present[k] == NULL)
				continue;
			for (int c = 0; c < t->npayload; c++)
				if (!PRESENT_BIT((uint8 *) VARDATA(g->present[k]), c))
				{
					g->payload[k][c] = s->base[c];
					g->payload_isnull[k][c] = s->base_isnull[c];
				}
			payload_hash_compute(t, g->payload[k], g->payload_isnull[k], false,
								 s->sha, g->cand[k].hash);
		}

		/*
		 * The state the next version merges over: this version's payload,
		 * where it is above the target's (below or at it, the batch's rows
		 * move nothing).  Rows of one version that differ make the key a
		 * conflict whichever is taken.
		 */
		if (found == NULL || ordering_compare(t, g->cand[hi].version, tversion) > 0)
		{
			for (int k = lo; k <= hi && next < 0; k++)
				if (!g->cand[k].tombstone)
					next = k;
			if (next < 0 && !have_base)
				next = lo;		/* a new key's tombstone keeps its own payload */
		}
		if (next >= 0)
		{
			base_from_row(s, g, next);
			have_base = true;
		}
		hi = lo - 1;
	}
}

/* A sparse row's present columns as a text[]'s text form, for a held row. */
char *
sparse_present_text(TargetInfo *t, bytea *present)
{
	Datum	   *names = palloc(sizeof(Datum) * Max(t->npayload, 1));
	int			n = 0;
	Oid			outfunc;
	bool		varlena;

	for (int c = 0; c < t->npayload; c++)
		if (PRESENT_BIT((uint8 *) VARDATA(present), c))
			names[n++] = CStringGetTextDatum(t->payload[c].name);
	getTypeOutputInfo(TEXTARRAYOID, &outfunc, &varlena);
	return OidOutputFunctionCall(outfunc,
								 PointerGetDatum(construct_array(names, n, TEXTOID, -1, false,
																 TYPALIGN_INT)));
}
