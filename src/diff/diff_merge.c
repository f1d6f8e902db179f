/*
 * diff_merge.c
 *		Reconciliation diff: what is missing, extra or different between a
 *		source and a target, matched by business key.
 *
 * Each side is read once, in key order, through an SPI cursor whose ORDER
 * BY the planner satisfies with a btree index on the key where there is
 * one, or with a sort that spills beyond work_mem where there is none.  The
 * two ordered streams are merged here: keys found on one side only are
 * missing or extra; paired rows are compared by a row hash first, and
 * column by column only when the hashes differ or a tolerance applies.  A
 * key that is NULL in part, or that is not unique on its side, is reported
 * and takes no further part.  Findings stream into a tuplestore (or are
 * only counted, for the summary); batches of fetched rows are freed as the
 * merge moves on, so memory stays flat however large the sides are.
 *
 * Everything runs with the caller's rights: SELECT on both sides is
 * checked up front (diff_prepare.c), and row-level security applies to the
 * reads.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "common/int.h"
#include "common/jsonapi.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "parser/parse_coerce.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/date.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/portal.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"
#include "utils/tuplesort.h"
#include "utils/typcache.h"

#include "common/args.h"
#include "diff.h"
#include "common/jsonbuild.h"
#include "common/pinned.h"
#include "common/sqlname.h"

/*
 * Rows fetched from a side's cursor at a time: small batches stay in
 * memory the allocator reuses; large ones cost page faults on every batch.
 */
#define DIFF_FETCH_ROWS 100

/* ---------------------------------------------------------------------
 * Reading a side in key order
 * ---------------------------------------------------------------------
 */

typedef struct DiffSide
{
	bool		is_source;
	Portal		portal;
	TupleDesc	desc;
	bool		drained;		/* the cursor has no more rows */
	SPITupleTable *cur;			/* batch being read */
	SPITupleTable *old;			/* the one before, kept while a row needs it */
	uint64		pos;

	/* The current key group's first row. */
	HeapTuple	head;
	SPITupleTable *head_tt;		/* its batch; NULL once copied */
	Datum	   *hv;
	bool	   *hn;
	bool		have_prev;		/* hv before the swap was a valid key */
	MemoryContext headcxt;

	/* The row after the group, read ahead. */
	bool		has_look;
	HeapTuple	look;
	Datum	   *lv;
	bool	   *ln;

	bool		eof;
	bool		dup;			/* the current group is a duplicate key */
	int64		rows;
} DiffSide;

typedef struct DiffExec
{
	DiffSpec   *spec;
	Tuplestorestate *ts;		/* NULL: only count */
	TupleDesc	desc;
	DiffCounts *counts;
	int			natts;			/* keys, compared columns, (min_age) updated */
	int		   *diffcols;
	DiffSide	src;
	DiffSide	tgt;
	bool		stopped;		/* a limit was reached: read no further */
	uint32		steps;			/* for the deadline, checked now and then */
} DiffExec;

/* The deadline of max_duration is looked at every this many keys. */
#define DIFF_DEADLINE_EVERY 64

static void
side_copy_head(DiffExec *ex, DiffSide *side)
{
	MemoryContext old;

	/* An earlier copied head is no longer needed. */
	MemoryContextReset(side->headcxt);
	old = MemoryContextSwitchTo(side->headcxt);
	side->head = heap_copytuple(side->head);
	heap_deform_tuple(side->head, side->desc, side->hv, side->hn);
	side->head_tt = NULL;
	MemoryContextSwitchTo(old);
}

static HeapTuple
side_fetch(DiffExec *ex, DiffSide *side)
{
	MemoryContext cxt;

	if (side->cur && side->pos < side->cur->numvals)
		return side->cur->vals[side->pos++];
	if (side->drained)
		return NULL;
	if (side->old)
	{
		if (side->head_tt == side->old)
			side_copy_head(ex, side);
		SPI_freetuptable(side->old);
	}
	side->old = side->cur;
	/* SPI returns in its own procedure context: come back to the row's. */
	cxt = CurrentMemoryContext;
	SPI_cursor_fetch(side->portal, true, DIFF_FETCH_ROWS);
	MemoryContextSwitchTo(cxt);
	side->cur = SPI_tuptable;
	side->pos = 0;
	if (SPI_processed == 0)
	{
		side->drained = true;
		return NULL;
	}
	return side->cur->vals[side->pos++];
}

static bool
key_has_null(DiffExec *ex, bool *n)
{
	for (int i = 0; i < ex->spec->nkeys; i++)
		if (n[i])
			return true;
	return false;
}

/* Both keys without NULLs. */
static int
compare_keys(DiffExec *ex, Datum *av, bool *an, Datum *bv, bool *bn)
{
	for (int i = 0; i < ex->spec->nkeys; i++)
	{
		int			c = ApplySortComparator(av[i], an[i], bv[i], bn[i],
											&ex->spec->keys[i].ssup);

		if (c != 0)
			return c;
	}
	return 0;
}

/* ---------------------------------------------------------------------
 * Findings
 * ---------------------------------------------------------------------
 */

/*
 * A column's value: dates and times as ISO 8601, json and jsonb embedded;
 * the caller has pinned the settings (pinned.c), so that a finding (and
 * reconcile.diff_results) writes the same key and values in every session:
 * a timestamptz in UTC, a float as its shortest exact text, an interval in
 * the postgres style.
 */
static void
push_column(JsonbParseState **st, DiffColumn *c, Datum d, bool isnull)
{
	jsonb_push_datum(st, WJB_VALUE, d, isnull, c->basetype, &c->out,
					 JSONB_DATUM_ISO_DATETIME | JSONB_DATUM_EMBED_JSON);
}

/* Whether a key or compared column's text form names an object. */
static bool
findings_name_objects(DiffSpec *spec)
{
	for (int i = 0; i < spec->nkeys; i++)
		if (type_names_objects(spec->keys[i].basetype))
			return true;
	for (int i = 0; i < spec->ncols; i++)
		if (type_names_objects(spec->cols[i].basetype))
			return true;
	return false;
}

static Jsonb *
key_jsonb(DiffExec *ex, Datum *v, bool *n)
{
	JsonbParseState *st = NULL;
	JsonbValue *volatile res = NULL;
	PinnedSettings saved;

	pinned_settings_enter(&saved, findings_name_objects(ex->spec));
	PG_TRY();
	{
		pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
		for (int i = 0; i < ex->spec->nkeys; i++)
		{
			jsonb_push_key(&st, ex->spec->keys[i].name);
			push_column(&st, &ex->spec->keys[i], v[i], n[i]);
		}
		res = pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	}
	PG_FINALLY();
	{
		pinned_settings_leave(&saved);
	}
	PG_END_TRY();
	return JsonbValueToJsonb(res);
}

/* The compared columns of a row (which == NULL: all) as an object. */
static JsonbValue *
push_row_values(JsonbParseState **st, DiffExec *ex, Datum *v, bool *n,
				int *which, int nwhich)
{
	int			k = ex->spec->nkeys;
	int			count = which ? nwhich : ex->spec->ncols;

	pushJsonbValue(st, WJB_BEGIN_OBJECT, NULL);
	for (int j = 0; j < count; j++)
	{
		int			i = which ? which[j] : j;

		jsonb_push_key(st, ex->spec->cols[i].name);
		push_column(st, &ex->spec->cols[i], v[k + i], n[k + i]);
	}
	return pushJsonbValue(st, WJB_END_OBJECT, NULL);
}

/* The same, under the pinned settings. */
static JsonbValue *
push_values(JsonbParseState **st, DiffExec *ex, Datum *v, bool *n,
			int *which, int nwhich)
{
	JsonbValue *volatile res = NULL;
	PinnedSettings saved;

	pinned_settings_enter(&saved, findings_name_objects(ex->spec));
	PG_TRY();
	{
		res = push_row_values(st, ex, v, n, which, nwhich);
	}
	PG_FINALLY();
	{
		pinned_settings_leave(&saved);
	}
	PG_END_TRY();
	return res;
}

static Jsonb *
values_jsonb(DiffExec *ex, Datum *v, bool *n, int *which, int nwhich)
{
	JsonbParseState *st = NULL;

	return JsonbValueToJsonb(push_values(&st, ex, v, n, which, nwhich));
}

/* Whether findings are written out (or held for a recheck), not only counted. */
static bool
keeps_findings(DiffExec *ex)
{
	return ex->ts != NULL || ex->spec->collect != NULL;
}

/*
 * Hold a finding for a recheck (diff.c): its values and its key's, in the
 * collector's memory, which outlives the row's.
 */
static void
hold_finding(DiffExec *ex, Datum *kv, bool *kn, Datum *values, bool *nulls)
{
	DiffCollector *col = ex->spec->collect;
	MemoryContext old;
	DiffHeld   *h;
	static const int16 lens[DIFF_FINDING_NATTS] = {-1, -1, -1, -1, -1};

	if (col->sorted)
	{
		int			nkeys = ex->spec->nkeys;
		TupleTableSlot *slot = col->slot;
		Datum	   *v = slot->tts_values;
		bool	   *n = slot->tts_isnull;
		bool		has_null = false;

		ExecClearTuple(slot);

		memcpy(v, values, sizeof(Datum) * DIFF_FINDING_NATTS);
		memcpy(n, nulls, sizeof(bool) * DIFF_FINDING_NATTS);
		for (int i = 0; i < nkeys; i++)
		{
			v[DIFF_FINDING_NATTS + i] = kv[i];
			n[DIFF_FINDING_NATTS + i] = kn[i];
			has_null |= kn[i];
		}
		ExecStoreVirtualTuple(slot);
		if (has_null)
			tuplestore_puttupleslot(col->nullkeyed, slot);
		else
		{
			tuplesort_puttupleslot(col->sorted, slot);
			col->nsorted++;
		}
		ExecClearTuple(slot);
		return;
	}
	old = MemoryContextSwitchTo(col->cxt);

	if (col->n == col->cap)
	{
		col->cap = col->cap ? col->cap * 2 : 64;
		col->held = col->held ? repalloc_huge(col->held, sizeof(DiffHeld) * col->cap)
			: palloc_extended(sizeof(DiffHeld) * col->cap, MCXT_ALLOC_HUGE);
	}
	h = &col->held[col->n++];
	h->key = palloc(sizeof(Datum) * ex->spec->nkeys);
	h->knull = palloc(sizeof(bool) * ex->spec->nkeys);
	h->has_null = false;
	for (int i = 0; i < ex->spec->nkeys; i++)
	{
		DiffColumn *c = &ex->spec->keys[i];

		h->knull[i] = kn[i];
		h->has_null |= kn[i];
		h->key[i] = kn[i] ? (Datum) 0 : datumCopy(kv[i], c->typbyval, c->typlen);
	}
	for (int i = 0; i < DIFF_FINDING_NATTS; i++)
	{
		h->nulls[i] = nulls[i];
		h->values[i] = nulls[i] ? (Datum) 0 : datumCopy(values[i], false, lens[i]);
	}
	MemoryContextSwitchTo(old);
}

static void
emit(DiffExec *ex, Datum *kv, bool *kn, const char *issue, Jsonb *key, Datum columns,
	 Jsonb *sv, Jsonb *tv)
{
	Datum		values[DIFF_FINDING_NATTS];
	bool		nulls[DIFF_FINDING_NATTS];

	values[0] = CStringGetTextDatum(issue);
	nulls[0] = false;
	values[1] = JsonbPGetDatum(key);
	nulls[1] = false;
	values[2] = columns;
	nulls[2] = (columns == (Datum) 0);
	values[3] = sv ? JsonbPGetDatum(sv) : (Datum) 0;
	nulls[3] = (sv == NULL);
	values[4] = tv ? JsonbPGetDatum(tv) : (Datum) 0;
	nulls[4] = (tv == NULL);
	if (ex->spec->collect)
		hold_finding(ex, kv, kn, values, nulls);
	else
		diff_put_finding(ex->ts, ex->desc, values, nulls, -1);
}

/*
 * A finding was counted: stop reading once there are max_differences.
 * The caller counts a finding only while the diff is not stopped.
 */
static void
finding_counted(DiffExec *ex)
{
	if (ex->spec->max_differences > 0 &&
		diff_findings_total(ex->counts) >= ex->spec->max_differences)
	{
		ex->stopped = true;
		ex->counts->stopped = "max_differences";
	}
}

/* A row found on one side only, or with a NULL in its key. */
static void
emit_row(DiffExec *ex, DiffSide *side, const char *issue)
{
	Jsonb	   *vals;

	if (!keeps_findings(ex))
		return;
	vals = values_jsonb(ex, side->hv, side->hn, NULL, 0);
	emit(ex, side->hv, side->hn, issue, key_jsonb(ex, side->hv, side->hn), (Datum) 0,
		 side->is_source ? vals : NULL, side->is_source ? NULL : vals);
}

/* ---------------------------------------------------------------------
 * Comparing a pair of rows
 * ---------------------------------------------------------------------
 */

/*
 * The hash of a row's compared columns (tolerance columns aside), over
 * their stored bytes: equal bytes mean equal values for every type, so
 * equal hashes settle the common case of an unchanged row without calling
 * any type's functions.  Values that are equal in different bytes (1.0 and
 * 1.00) only make the hashes differ, and the columns are then compared
 * with the type's own equality.
 */
static uint64
row_hash(DiffExec *ex, Datum *v, bool *n)
{
	uint64		h = 0;
	int			k = ex->spec->nkeys;

	for (int i = 0; i < ex->spec->ncols; i++)
	{
		DiffColumn *c = &ex->spec->cols[i];
		Datum		d = v[k + i];
		uint64		ch;

		if (c->tolerance != DIFF_TOL_NONE)
			continue;
		if (n[k + i])
			ch = UINT64CONST(0x9e3779b97f4a7c15);
		else if (c->typbyval)
			ch = hash_bytes_uint32_extended((uint32) d, (uint64) d >> 32);
		else if (c->typlen > 0)
			ch = hash_bytes_extended((const unsigned char *) DatumGetPointer(d), c->typlen, 0);
		else if (c->typlen == -1)
		{
			struct varlena *p = (struct varlena *) DatumGetPointer(d);

			if (VARATT_IS_EXTENDED(p) && !VARATT_IS_SHORT(p))
				p = pg_detoast_datum_packed(p);
			ch = hash_bytes_extended((const unsigned char *) VARDATA_ANY(p),
									 VARSIZE_ANY_EXHDR(p), 0);
		}
		else
		{
			const char *p = DatumGetCString(d);

			ch = hash_bytes_extended((const unsigned char *) p, strlen(p), 0);
		}
		h = hash_combine64(h, ch);
	}
	return h;
}

static bool
within_usecs(int64 a, int64 b, int64 tol)
{
	int64		d;

	if (pg_sub_s64_overflow(a, b, &d))
		return false;
	if (d < 0)
		d = -d;
	return d <= tol;
}

/*
 * Whether two numerics are within a tolerance: |a - b| <= tol (has_tol), or
 * |a - b| <= rel * greatest(|a|, |b|) (has_rel).  NaN and infinities are
 * within no tolerance.
 */
bool
diff_numeric_within(Datum a, Datum b, bool has_tol, Datum tol, bool has_rel, Datum rel)
{
	Numeric		na = DatumGetNumeric(a);
	Numeric		nb = DatumGetNumeric(b);
	Datum		d;
	Datum		big;

	if (numeric_is_nan(na) || numeric_is_nan(nb) ||
		numeric_is_inf(na) || numeric_is_inf(nb))
		return false;
	d = DirectFunctionCall1(numeric_abs, DirectFunctionCall2(numeric_sub, a, b));
	if (has_tol && DatumGetBool(DirectFunctionCall2(numeric_le, d, tol)))
		return true;
	if (!has_rel)
		return false;
	big = DirectFunctionCall2(numeric_larger,
							  DirectFunctionCall1(numeric_abs, a),
							  DirectFunctionCall1(numeric_abs, b));
	return DatumGetBool(DirectFunctionCall2(numeric_le, d,
											DirectFunctionCall2(numeric_mul, rel, big)));
}

static bool
values_equal(DiffColumn *c, Datum a, bool an, Datum b, bool bn)
{
	if (an || bn)
		return an && bn;
	if (c->has_eq &&
		DatumGetBool(FunctionCall2Coll(&c->eq, c->collation, a, b)))
		return true;
	if (!c->has_eq &&
		strcmp(OutputFunctionCall(&c->out, a), OutputFunctionCall(&c->out, b)) == 0)
		return true;

	switch (c->tolerance)
	{
		case DIFF_TOL_NONE:
			return false;
		case DIFF_TOL_NUMERIC:
			return diff_numeric_within(a, b, true, c->tol_numeric, c->has_rel_tol, c->rel_tol);
		case DIFF_TOL_TIME:
			switch (c->basetype)
			{
				case TIMESTAMPOID:
				case TIMESTAMPTZOID:
					if (TIMESTAMP_NOT_FINITE(DatumGetTimestamp(a)) ||
						TIMESTAMP_NOT_FINITE(DatumGetTimestamp(b)))
						return false;
					return within_usecs(DatumGetTimestamp(a), DatumGetTimestamp(b),
										c->tol_usecs);
				case DATEOID:
					if (DATE_NOT_FINITE(DatumGetDateADT(a)) ||
						DATE_NOT_FINITE(DatumGetDateADT(b)))
						return false;
					return within_usecs((int64) DatumGetDateADT(a) * USECS_PER_DAY,
										(int64) DatumGetDateADT(b) * USECS_PER_DAY,
										c->tol_usecs);
				case TIMEOID:
					return within_usecs(DatumGetTimeADT(a), DatumGetTimeADT(b),
										c->tol_usecs);
			}
			return false;
	}
	return false;
}

static void
compare_pair(DiffExec *ex)
{
	DiffSpec   *spec = ex->spec;
	Datum	   *sv = ex->src.hv;
	bool	   *sn = ex->src.hn;
	Datum	   *tv = ex->tgt.hv;
	bool	   *tn = ex->tgt.hn;
	int			k = spec->nkeys;
	int			ndiff = 0;
	bool		hashes_differ;

	/* Equal row hashes mean equal columns (tolerance columns aside). */
	hashes_differ = row_hash(ex, sv, sn) != row_hash(ex, tv, tn);
	for (int i = 0; i < spec->ncols; i++)
	{
		DiffColumn *c = &spec->cols[i];

		if (!hashes_differ && c->tolerance == DIFF_TOL_NONE)
			continue;
		if (!values_equal(c, sv[k + i], sn[k + i], tv[k + i], tn[k + i]))
			ex->diffcols[ndiff++] = i;
	}
	if (ndiff == 0)
	{
		ex->counts->matched++;
		return;
	}
	if (ex->stopped)
		return;
	ex->counts->mismatched++;
	for (int j = 0; j < ndiff; j++)
		ex->counts->column_mismatches[ex->diffcols[j]]++;
	finding_counted(ex);
	if (keeps_findings(ex))
	{
		Datum	   *names = palloc(sizeof(Datum) * ndiff);
		ArrayType  *arr;

		for (int j = 0; j < ndiff; j++)
			names[j] = CStringGetTextDatum(spec->cols[ex->diffcols[j]].name);
		arr = construct_array(names, ndiff, TEXTOID, -1, false, TYPALIGN_INT);
		emit(ex, sv, sn, "MISMATCH", key_jsonb(ex, sv, sn), PointerGetDatum(arr),
			 values_jsonb(ex, sv, sn, ex->diffcols, ndiff),
			 values_jsonb(ex, tv, tn, ex->diffcols, ndiff));
	}
}

/* ---------------------------------------------------------------------
 * The merge
 * ---------------------------------------------------------------------
 */

static void
swap_head_look(DiffSide *side)
{
	Datum	   *v = side->hv;
	bool	   *n = side->hn;

	side->hv = side->lv;
	side->hn = side->ln;
	side->lv = v;
	side->ln = n;
	side->head = side->look;
	side->head_tt = side->cur;
	side->has_look = false;
}

/*
 * Move a side to its next key group.  Rows with a NULL in the key are
 * reported on the way; a key with several rows is reported once, with all
 * of them, and marked so that the merge does not pair it.
 */
static void
side_next_group(DiffExec *ex, DiffSide *side)
{
	const char *null_issue = side->is_source ? "NULL_KEY_IN_SOURCE" : "NULL_KEY_IN_TARGET";
	const char *dup_issue = side->is_source ? "DUPLICATE_KEY_IN_SOURCE" : "DUPLICATE_KEY_IN_TARGET";

	for (;;)
	{
		HeapTuple	t;
		JsonbParseState *dupst = NULL;
		bool		report;

		CHECK_FOR_INTERRUPTS();
		if (!side->has_look)
		{
			t = side_fetch(ex, side);
			if (t == NULL)
			{
				side->eof = true;
				return;
			}
			side->rows++;
			side->look = t;
			heap_deform_tuple(t, side->desc, side->lv, side->ln);
			side->has_look = true;
		}
		swap_head_look(side);

		if (key_has_null(ex, side->hn))
		{
			if (ex->stopped)
				return;
			ex->counts->null_keys++;
			finding_counted(ex);
			emit_row(ex, side, null_issue);
			side->have_prev = false;
			if (ex->stopped)
				return;
			continue;
		}
		/* The ORDER BY and this comparison must agree, or the merge is wrong. */
		if (side->have_prev &&
			compare_keys(ex, side->lv, side->ln, side->hv, side->hn) >= 0)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_EXCEPTION),
					 errmsg("rows of the %s do not come in key order",
							side->is_source ? "source" : "target"),
					 errdetail("The diff reads both sides ordered by key and merges them; this side returned a key lower than the one before it."),
					 errhint("A foreign table may sort text keys in another collation than this database: compare through a view that orders the key the same way on both servers.")));
		side->have_prev = true;

		side->dup = false;
		report = false;
		while ((t = side_fetch(ex, side)) != NULL)
		{
			side->rows++;
			heap_deform_tuple(t, side->desc, side->lv, side->ln);
			if (key_has_null(ex, side->ln) ||
				compare_keys(ex, side->hv, side->hn, side->lv, side->ln) != 0)
			{
				side->look = t;
				side->has_look = true;
				break;
			}
			if (!side->dup)
			{
				side->dup = true;
				/* Past a limit the key is still read to its end, not reported. */
				report = !ex->stopped && keeps_findings(ex);
				if (!ex->stopped)
				{
					ex->counts->duplicate_keys++;
					finding_counted(ex);
				}
				if (report)
				{
					pushJsonbValue(&dupst, WJB_BEGIN_ARRAY, NULL);
					push_values(&dupst, ex, side->hv, side->hn, NULL, 0);
				}
			}
			if (report)
				push_values(&dupst, ex, side->lv, side->ln, NULL, 0);
			CHECK_FOR_INTERRUPTS();
		}
		/*
		 * The look-ahead row's values now sit in lv; the head stays valid
		 * (side_fetch copies it before freeing its batch).
		 */
		if (side->dup && report)
		{
			Jsonb	   *copies = JsonbValueToJsonb(pushJsonbValue(&dupst, WJB_END_ARRAY, NULL));

			emit(ex, side->hv, side->hn, dup_issue, key_jsonb(ex, side->hv, side->hn), (Datum) 0,
				 side->is_source ? copies : NULL, side->is_source ? NULL : copies);
		}
		return;
	}
}

/* The window and the cutoff; whether it wrote a WHERE. */
static bool
append_where(StringInfo sql, DiffSpec *spec, const char *upd, bool target,
			 Datum cutoff, bool has_cutoff, Oid *types, Datum *values, int *nparams)
{
	const char *sep = " WHERE ";
	char	   *deleted = target ? spec->tdeleted : spec->sdeleted;

	/*
	 * Option tombstones "absent": not a tombstone row.  As a parameter
	 * (true), like every condition here: callers tell from the parameter
	 * count whether a WHERE was written.
	 */
	if (deleted != NULL)
	{
		types[*nparams] = BOOLOID;
		values[(*nparams)++] = BoolGetDatum(true);
		appendStringInfo(sql, "%s(%s IS NOT TRUE) OPERATOR(pg_catalog.=) $%d", sep, deleted, *nparams);
		sep = " AND ";
	}
	if (upd == NULL)
		return sep[1] == 'A';
	if (spec->has_lo)
	{
		types[*nparams] = spec->upd_type;
		values[(*nparams)++] = spec->window_lo;
		appendStringInfo(sql, "%s%s OPERATOR(pg_catalog.>=) $%d", sep, upd, *nparams);
		sep = " AND ";
	}
	if (spec->has_hi)
	{
		types[*nparams] = spec->upd_type;
		values[(*nparams)++] = spec->window_hi;
		appendStringInfo(sql, "%s%s OPERATOR(pg_catalog.<=) $%d", sep, upd, *nparams);
		sep = " AND ";
	}
	if (target && has_cutoff)
	{
		types[*nparams] = spec->upd_type;
		values[(*nparams)++] = cutoff;
		appendStringInfo(sql, "%s%s OPERATOR(pg_catalog.<=) $%d", sep, upd, *nparams);
		sep = " AND ";
	}
	return sep[1] == 'A';
}

/*
 * Only the rows of one group of reconcile_diff_totals (then_rows): each
 * group column equal to its value, or NULL.  At most
 * DIFF_MAX_GROUP_FILTER parameters.
 */
static bool
append_group_filter(StringInfo sql, DiffSpec *spec, bool target, bool has_where,
					Oid *types, Datum *values, int *nparams)
{
	DiffGroupFilter *g = spec->group_filter;

	if (g == NULL)
		return has_where;
	for (int i = 0; i < g->ncols; i++)
	{
		DiffColumn *c = &g->cols[i];
		const char *e = target ? c->texpr : c->sexpr;
		const char *sep = has_where || i > 0 ? " AND " : " WHERE ";

		if (g->nulls[i])
			appendStringInfo(sql, "%s%s IS NULL", sep, e);
		else
		{
			types[*nparams] = c->typid;
			values[(*nparams)++] = g->values[i];
			appendStringInfo(sql, "%s%s OPERATOR(pg_catalog.=) $%d", sep, e, *nparams);
		}
	}
	return has_where || g->ncols > 0;
}

/*
 * Only the key ranges diff_checksum.c asks for: the first key column's
 * buckets among spec->filter's bounds, and its NULLs if asked.
 */
static void
append_key_filter(StringInfo sql, DiffSpec *spec, bool is_source, bool has_where,
				  Oid *types, Datum *values, int *nparams)
{
	DiffKeyFilter *f = spec->filter;
	DiffColumn *c = &spec->keys[0];
	const char *k1 = is_source ? c->sexpr : c->texpr;
	Oid			own = is_source ? c->scollation : c->tcollation;

	/* The keys compare in the diff's key collation, as the merge does. */
	if (OidIsValid(c->collation) && own != c->collation)
		k1 = psprintf("(%s) COLLATE %s", k1, collation_quoted_name(c->collation));

	appendStringInfoString(sql, has_where ? " AND (" : " WHERE (");
	types[*nparams] = get_array_type(spec->keys[0].basetype);
	if (f->keys)
	{
		values[(*nparams)++] = f->keys;
		appendStringInfo(sql, "%s OPERATOR(pg_catalog.=) ANY ($%d)", k1, *nparams);
	}
	else
	{
		values[(*nparams)++] = f->bounds;
		types[*nparams] = INT4ARRAYOID;
		values[(*nparams)++] = f->buckets;
		appendStringInfo(sql, "pg_catalog.width_bucket(%s, $%d) OPERATOR(pg_catalog.=) ANY ($%d)",
						 k1, *nparams - 1, *nparams);
	}
	if (f->nulls)
		appendStringInfo(sql, " OR %s IS NULL", k1);
	appendStringInfoChar(sql, ')');
}

static void
side_open(DiffExec *ex, DiffSide *side, bool is_source, Datum cutoff, bool has_cutoff)
{
	DiffSpec   *spec = ex->spec;
	StringInfoData sql;
	Oid			types[4 + 2 + DIFF_MAX_GROUP_FILTER];
	Datum		values[4 + 2 + DIFF_MAX_GROUP_FILTER];
	int			nparams = 0;
	bool		has_where;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	for (int i = 0; i < spec->nkeys; i++)
		appendStringInfo(&sql, "%s%s", i ? ", " : "",
						 is_source ? spec->keys[i].sexpr : spec->keys[i].texpr);
	for (int i = 0; i < spec->ncols; i++)
		appendStringInfo(&sql, ", %s", is_source ? spec->cols[i].sexpr : spec->cols[i].texpr);
	/* min_age: the updated column, after the compared ones (row_is_young). */
	if (spec->has_min_age)
		appendStringInfo(&sql, ", %s", is_source ? spec->supd : spec->tupd);
	appendStringInfo(&sql, " FROM %s", is_source ? spec->squal : spec->tqual);
	has_where = append_where(&sql, spec, is_source ? spec->supd : spec->tupd, !is_source,
							 cutoff, has_cutoff, types, values, &nparams);
	has_where = append_group_filter(&sql, spec, !is_source, has_where, types, values, &nparams);
	if (spec->filter)
		append_key_filter(&sql, spec, is_source, has_where, types, values, &nparams);
	appendStringInfoString(&sql, " ORDER BY ");
	for (int i = 0; i < spec->nkeys; i++)
	{
		DiffColumn *c = &spec->keys[i];
		Oid			own = is_source ? c->scollation : c->tcollation;

		appendStringInfo(&sql, "%s%s", i ? ", " : "", is_source ? c->sexpr : c->texpr);
		/* Both sides in the same order; the same collation keeps an index usable. */
		if (OidIsValid(c->collation) && own != c->collation)
			appendStringInfo(&sql, " COLLATE %s", collation_quoted_name(c->collation));
	}

	side->is_source = is_source;
	/* A recheck reads with a new snapshot: what committed since the last read. */
	side->portal = SPI_cursor_open_with_args(NULL, sql.data, nparams, types, values,
											 NULL, !spec->fresh_snapshot,
											 CURSOR_OPT_NO_SCROLL);
	side->desc = side->portal->tupDesc;
	side->headcxt = AllocSetContextCreate(CurrentMemoryContext, "reconcile diff head",
										  ALLOCSET_SMALL_SIZES);
	side->hv = palloc(sizeof(Datum) * ex->natts);
	side->hn = palloc(sizeof(bool) * ex->natts);
	side->lv = palloc(sizeof(Datum) * ex->natts);
	side->ln = palloc(sizeof(bool) * ex->natts);
}

/* The newest source row's update time in the window; false if none. */
static bool
source_max(DiffSpec *spec, Datum *result)
{
	StringInfoData sql;
	Oid			types[4];
	Datum		values[4];
	int			nparams = 0;
	bool		isnull;

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT pg_catalog.max(%s) FROM %s", spec->supd, spec->squal);
	append_where(&sql, spec, spec->supd, false, (Datum) 0, false, types, values, &nparams);
	if (SPI_execute_with_args(sql.data, nparams, types, values, NULL,
							  !spec->fresh_snapshot, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read the newest update of the source");
	*result = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (!isnull)
	{
		int16		typlen;
		bool		typbyval;

		get_typlenbyval(spec->upd_type, &typlen, &typbyval);
		*result = datumCopy(*result, typbyval, typlen);
	}
	return !isnull;
}

/*
 * The window's and the cutoff's conditions on a side, and the group
 * filter's, for other queries; whether it wrote a WHERE.  types and
 * values have room for 3 + DIFF_MAX_GROUP_FILTER more parameters.
 */
bool
diff_append_where(StringInfo sql, DiffSpec *spec, bool target, Datum cutoff,
				  bool has_cutoff, Oid *types, Datum *values, int *nparams)
{
	bool		has_where = append_where(sql, spec, target ? spec->tupd : spec->supd, target,
										 cutoff, has_cutoff, types, values, nparams);

	return append_group_filter(sql, spec, target, has_where, types, values, nparams);
}

/* The cutoff's value, as diff_execute computes it; false if none. */
bool
diff_cutoff(DiffSpec *spec, Datum *result)
{
	if (!spec->cutoff_source_max)
		return false;
	return source_max(spec, result);
}

/*
 * min_age: whether the row at the head of a side was updated after now
 * minus min_age (a NULL update time is old).  A key young on either side
 * is not compared: its change may still be on its way to the other side.
 */
static bool
row_is_young(DiffExec *ex, DiffSide *side)
{
	int			i = ex->spec->nkeys + ex->spec->ncols;

	if (!ex->spec->has_min_age || side->hn[i])
		return false;
	return DatumGetInt32(FunctionCall2Coll(&ex->spec->upd_cmp, ex->spec->upd_collation,
										   side->hv[i], ex->spec->young_after)) > 0;
}

/*
 * A diff stopped by a limit: where it stopped, as the first key not
 * compared (the lower of the two sides' next keys), or none when both
 * sides were read to their end, which is no stop at all.
 */
static void
note_stop(DiffExec *ex)
{
	DiffSide   *next;

	if (ex->src.eof && ex->tgt.eof)
	{
		ex->counts->stopped = NULL;
		return;
	}
	if (ex->src.eof)
		next = &ex->tgt;
	else if (ex->tgt.eof)
		next = &ex->src;
	else
		next = compare_keys(ex, ex->src.hv, ex->src.hn, ex->tgt.hv, ex->tgt.hn) <= 0
			? &ex->src : &ex->tgt;
	ex->counts->stopped_at_key = key_jsonb(ex, next->hv, next->hn);
}

/*
 * Run a prepared diff: findings into ts (when not NULL), counts into
 * counts.  The caller holds an SPI connection.
 */
void
diff_execute(DiffSpec *spec, Tuplestorestate *ts, TupleDesc desc, DiffCounts *counts)
{
	DiffExec	ex;
	MemoryContext callercxt = CurrentMemoryContext;
	MemoryContext rowcxt,
				old;
	Datum		cutoff = (Datum) 0;
	bool		has_cutoff = false;

	memset(&ex, 0, sizeof(ex));
	memset(counts, 0, sizeof(DiffCounts));
	counts->rechecks = -1;
	counts->column_mismatches = palloc0(sizeof(int64) * Max(spec->ncols, 1));
	ex.spec = spec;
	ex.ts = ts;
	ex.desc = desc;
	ex.counts = counts;
	ex.natts = spec->nkeys + spec->ncols + (spec->has_min_age ? 1 : 0);
	ex.diffcols = palloc(sizeof(int) * Max(spec->ncols, 1));

	if (spec->cutoff_source_max)
		has_cutoff = source_max(spec, &cutoff);
	MemoryContextSwitchTo(callercxt);
	side_open(&ex, &ex.src, true, cutoff, has_cutoff);
	MemoryContextSwitchTo(callercxt);
	side_open(&ex, &ex.tgt, false, cutoff, has_cutoff);
	MemoryContextSwitchTo(callercxt);

	rowcxt = AllocSetContextCreate(CurrentMemoryContext, "reconcile diff row",
								   ALLOCSET_DEFAULT_SIZES);
	old = MemoryContextSwitchTo(rowcxt);
	side_next_group(&ex, &ex.src);
	side_next_group(&ex, &ex.tgt);
	while (!ex.stopped && (!ex.src.eof || !ex.tgt.eof))
	{
		int			c;

		CHECK_FOR_INTERRUPTS();
		if (spec->deadline != 0 && ++ex.steps % DIFF_DEADLINE_EVERY == 0 &&
			GetCurrentTimestamp() >= spec->deadline)
		{
			ex.stopped = true;
			counts->stopped = "max_duration";
			break;
		}
		if (ex.src.eof)
			c = 1;
		else if (ex.tgt.eof)
			c = -1;
		else
			c = compare_keys(&ex, ex.src.hv, ex.src.hn, ex.tgt.hv, ex.tgt.hn);

		/* A key whose row is younger than min_age on a side is not compared. */
		if ((c <= 0 && !ex.src.dup && row_is_young(&ex, &ex.src)) ||
			(c >= 0 && !ex.tgt.dup && row_is_young(&ex, &ex.tgt)))
		{
			counts->young_keys++;
			MemoryContextReset(rowcxt);
			if (c <= 0)
				side_next_group(&ex, &ex.src);
			if (c >= 0)
				side_next_group(&ex, &ex.tgt);
			continue;
		}

		if (c < 0)
		{
			if (!ex.src.dup)
			{
				counts->missing_in_target++;
				finding_counted(&ex);
				emit_row(&ex, &ex.src, "MISSING_IN_TARGET");
			}
			MemoryContextReset(rowcxt);
			side_next_group(&ex, &ex.src);
		}
		else if (c > 0)
		{
			if (!ex.tgt.dup)
			{
				counts->extra_in_target++;
				finding_counted(&ex);
				emit_row(&ex, &ex.tgt, "EXTRA_IN_TARGET");
			}
			MemoryContextReset(rowcxt);
			side_next_group(&ex, &ex.tgt);
		}
		else
		{
			/* A duplicate key is reported as such, never paired. */
			if (!ex.src.dup && !ex.tgt.dup)
				compare_pair(&ex);
			MemoryContextReset(rowcxt);
			side_next_group(&ex, &ex.src);
			side_next_group(&ex, &ex.tgt);
		}
	}
	MemoryContextSwitchTo(old);
	if (ex.stopped)
		note_stop(&ex);
	MemoryContextDelete(rowcxt);

	counts->rows_source = ex.src.rows;
	counts->rows_target = ex.tgt.rows;
	SPI_cursor_close(ex.src.portal);
	SPI_cursor_close(ex.tgt.portal);
	if (ex.src.cur)
		SPI_freetuptable(ex.src.cur);
	if (ex.src.old)
		SPI_freetuptable(ex.src.old);
	if (ex.tgt.cur)
		SPI_freetuptable(ex.tgt.cur);
	if (ex.tgt.old)
		SPI_freetuptable(ex.tgt.old);
	MemoryContextDelete(ex.src.headcxt);
	MemoryContextDelete(ex.tgt.headcxt);
}

static Jsonb *
diff_column_counts_jsonb(DiffSpec *spec, DiffCounts *counts)
{
	JsonbParseState *st = NULL;
	JsonbValue *res;

	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	for (int i = 0; i < spec->ncols; i++)
	{
		JsonbValue	v;

		jsonb_push_key(&st, spec->cols[i].name);
		v.type = jbvNumeric;
		v.val.numeric = DatumGetNumeric(DirectFunctionCall1(int8_numeric,
															Int64GetDatum(counts->column_mismatches[i])));
		pushJsonbValue(&st, WJB_VALUE, &v);
	}
	res = pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	return JsonbValueToJsonb(res);
}

/*
 * A tuple descriptor of natts columns whose first five are a finding's, as
 * reconcile_diff returns them (issue, key, columns, source_values,
 * target_values); the caller names the others.
 */
TupleDesc
diff_findings_desc(int natts)
{
	TupleDesc	desc = CreateTemplateTupleDesc(natts);

	Assert(natts >= DIFF_FINDING_NATTS);
	TupleDescInitEntry(desc, 1, "issue", TEXTOID, -1, 0);
	TupleDescInitEntry(desc, 2, "key", JSONBOID, -1, 0);
	TupleDescInitEntry(desc, 3, "columns", TEXTARRAYOID, -1, 0);
	TupleDescInitEntry(desc, 4, "source_values", JSONBOID, -1, 0);
	TupleDescInitEntry(desc, 5, "target_values", JSONBOID, -1, 0);
	return desc;
}

/*
 * A finding into a tuplestore of reconcile_diff's shape: 1.1's five
 * columns, or 1.2's six with the rechecks it survived (NULL when none were
 * asked for, rechecks < 0).
 */
void
diff_put_finding(Tuplestorestate *ts, TupleDesc desc, Datum *values, bool *nulls,
				 int rechecks)
{
	Datum		v[DIFF_FINDING_NATTS_1_2];
	bool		n[DIFF_FINDING_NATTS_1_2];

	if (desc->natts < DIFF_FINDING_NATTS_1_2)
	{
		tuplestore_putvalues(ts, desc, values, nulls);
		return;
	}
	memcpy(v, values, sizeof(Datum) * DIFF_FINDING_NATTS);
	memcpy(n, nulls, sizeof(bool) * DIFF_FINDING_NATTS);
	v[DIFF_FINDING_NATTS] = Int32GetDatum(rechecks);
	n[DIFF_FINDING_NATTS] = rechecks < 0;
	tuplestore_putvalues(ts, desc, v, n);
}

/*
 * The summary's columns of 1.2: keys not compared for min_age, why and
 * where the diff stopped, the rechecks done (NULL when none were asked).
 */
void
diff_summary_values_1_2(DiffCounts *counts, Datum *values, bool *nulls)
{
	values[0] = Int64GetDatum(counts->young_keys);
	nulls[0] = false;
	values[1] = counts->stopped ? CStringGetTextDatum(counts->stopped) : (Datum) 0;
	nulls[1] = counts->stopped == NULL;
	values[2] = counts->stopped_at_key ? JsonbPGetDatum(counts->stopped_at_key) : (Datum) 0;
	nulls[2] = counts->stopped_at_key == NULL;
	values[3] = Int32GetDatum(counts->rechecks);
	nulls[3] = counts->rechecks < 0;
}

/* The number of findings a diff reports: every count except the matched rows. */
int64
diff_findings_total(DiffCounts *counts)
{
	return counts->missing_in_target + counts->extra_in_target +
		counts->mismatched + counts->duplicate_keys + counts->null_keys;
}

/*
 * The counts as the summary's columns: rows on each side, matched,
 * missing, extra, mismatched, duplicate and NULL keys, per-column jsonb.
 */
void
diff_summary_values(DiffSpec *spec, DiffCounts *counts, Datum *values)
{
	values[0] = Int64GetDatum(counts->rows_source);
	values[1] = Int64GetDatum(counts->rows_target);
	values[2] = Int64GetDatum(counts->matched);
	values[3] = Int64GetDatum(counts->missing_in_target);
	values[4] = Int64GetDatum(counts->extra_in_target);
	values[5] = Int64GetDatum(counts->mismatched);
	values[6] = Int64GetDatum(counts->duplicate_keys);
	values[7] = Int64GetDatum(counts->null_keys);
	values[8] = JsonbPGetDatum(diff_column_counts_jsonb(spec, counts));
}
