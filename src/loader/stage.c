/*
 * stage.c
 *		Read the staged rows of a batch once: cast, reject, hash and sort.
 *
 * Each staged row of the batch is read exactly once, through one cursor
 * over the staged relation with the caller's rights.  A row that cannot be
 * loaded (a value that does not cast, a NULL key, a bad version or
 * operation) is recorded in reconcile.rejects with every problem found and
 * goes no further.  The others are cast to the target's types, given their
 * payload hash, held to the target's row rules (rules_attach.c: a drop
 * rule violated, or a rule's error on the row, rejects it) and fed to a
 * tuplesort (key, version descending, object, source row), which stays
 * within work_mem and spills beyond it; merge.c reads the sorted stream.
 * The payload hash's canonical form is payload.c's.
 */
#include "postgres.h"

#include "access/parallel.h"
#include "access/relation.h"
#include "access/xact.h"
#include "catalog/pg_am.h"
#include "catalog/namespace.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "optimizer/paths.h"
#include "port/atomics.h"
#include "storage/bufmgr.h"
#include "storage/dsm.h"
#include "storage/sharedfileset.h"
#include "storage/shm_toc.h"
#include "tcop/pquery.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/sharedtuplestore.h"
#include "utils/snapmgr.h"

#include "common/citus.h"
#include "loader.h"
#include "ordering.h"
#include "payload.h"
#include "common/pinned.h"
#include "progress.h"
#include "common/receiver.h"
#include "rules/rules.h"
#include "common/sqlname.h"
#include "common/state_schema.h"

const char *const disposition_names[DISP_COUNT] = {
	"inserted", "updated", "deleted", "unchanged", "stale", "duplicates",
	"conflicts", "rejected"
};

#define FETCH_ROWS 10000
#define PROGRESS_EVERY 1024

/* A target column as the staged relation provides it. */
typedef struct StagedColumn
{
	TargetColumn *tcol;
	int			pos;			/* in the staged query's result */
	bool		convert;		/* type differs: cast through its text form */
	FmgrInfo	staged_out;		/* the staged type's output function */
	bool		staged_names_objects;	/* its text form names objects */
} StagedColumn;

typedef struct StageReader
{
	DestReceiver dest;			/* first: the executor hands rows to it */
	BatchState *batch;
	int			ncols;			/* keys, version, payload, further version columns, in that order */
	StagedColumn *cols;
	int			source_row_pos;
	int			hash_pos;		/* 0 if the staged relation has none */
	Oid			hash_type;
	FmgrInfo	hash_out;
	bool		has_version_id; /* the query's last column is version_id */
	const char *version_id;		/* the manifest's, of the row being read */
	int			present_pos;	/* a partial batch's present_columns, else 0 */
	StateRows  *rejects;
	TupleTableSlot *slot;
	MemoryContext rowcxt;
	ResourceOwner owner;		/* the batch's, not the cursor's */
	Sha256Ctx  *sha;
	int64		nread;
	Tuplesortstate *sort;		/* valid rows go here */

	/*
	 * Reading in parallel (see "Parallel reading" below): rejects are
	 * spooled, since no process may write a table in parallel mode, and
	 * progress is counted across every participant.
	 */
	SharedTuplestoreAccessor *spool;
	TupleDesc	spooldesc;
	MemoryContext spoolcxt;		/* lives as long as the spool */
	pg_atomic_uint64 *shared_nread;
	int64		nread_shared;	/* how many of nread were added to it */
} StageReader;

/* ---- casting with rejects ---- */

/* Errors a bad value raises; anything else (cancel, out of memory) is not ours. */
static bool
is_value_error(int sqlerrcode)
{
	int			category = ERRCODE_TO_CATEGORY(sqlerrcode);

	return category == ERRCODE_DATA_EXCEPTION ||
		category == ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION;
}

/*
 * Read a text form into the target's type.  Built-in input functions of
 * base types do nothing but parse and palloc, so their errors are caught
 * directly; PostgreSQL 16 calls this a soft error.  Any other input
 * function (an extension's type, a domain's CHECK) may take resources, so
 * it runs in a subtransaction that is rolled back on error.
 */
bool
stage_input_value(TargetColumn *col, char *text, Datum *out, char **error)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	volatile bool ok = true;

	if (!col->catch_directly)
	{
		BeginInternalSubTransaction(NULL);
		MemoryContextSwitchTo(cxt);
	}
	PG_TRY();
	{
		*out = InputFunctionCall(&col->in, text, col->ioparam, col->typmod);
		if (!col->catch_directly)
		{
			ReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(cxt);
			CurrentResourceOwner = owner;
		}
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (!is_value_error(edata->sqlerrcode))
			PG_RE_THROW();
		FlushErrorState();
		if (!col->catch_directly)
		{
			RollbackAndReleaseCurrentSubTransaction();
			MemoryContextSwitchTo(cxt);
			CurrentResourceOwner = owner;
		}
		*error = edata->message;
		ok = false;
	}
	PG_END_TRY();
	return ok;
}

static void
add_reject(StageReader *r, const char *object_key, bool source_row_null,
		   int64 source_row, const char *column, const char *raw,
		   const char *reason)
{
	StateRows  *rejects = r->rejects;

	if (r->spool != NULL)
	{
		/* The spool's columns are those of reconcile.rejects from the third. */
		Datum		values[6];
		bool		isnull[6] = {false};
		MinimalTuple tup;
		MemoryContext oldcxt;

		values[0] = CStringGetTextDatum(object_key);
		values[1] = Int64GetDatum(source_row);
		isnull[1] = source_row_null;
		values[2] = column ? CStringGetTextDatum(column) : (Datum) 0;
		isnull[2] = (column == NULL);
		values[3] = raw ? CStringGetTextDatum(raw) : (Datum) 0;
		isnull[3] = (raw == NULL);
		values[4] = CStringGetTextDatum(reason);
		values[5] = CStringGetTextDatum(r->version_id);
		tup = heap_form_minimal_tuple(r->spooldesc, values, isnull);

		/*
		 * The spool opens its file on the first tuple, in the current
		 * context (PostgreSQL 15 does not switch to its own): not the
		 * row's, which is reset after every row.
		 */
		oldcxt = MemoryContextSwitchTo(r->spoolcxt);
		sts_puttuple(r->spool, NULL, tup);
		MemoryContextSwitchTo(oldcxt);
		pfree(tup);
		return;
	}
	state_row_set(rejects, "batch_id", CStringGetTextDatum(r->batch->batch_id));
	state_row_set(rejects, "target", ObjectIdGetDatum(r->batch->target->relid));
	state_row_set(rejects, "object_key", CStringGetTextDatum(object_key));
	if (!source_row_null)
		state_row_set(rejects, "source_row", Int64GetDatum(source_row));
	if (column)
		state_row_set(rejects, "column_name", CStringGetTextDatum(column));
	if (raw)
		state_row_set(rejects, "raw_value", CStringGetTextDatum(raw));
	state_row_set(rejects, "reason", CStringGetTextDatum(reason));
	state_row_set(rejects, "version_id", CStringGetTextDatum(r->version_id));
	state_row_add(rejects);
}

/* Parse a staged payload_hash: 32 bytes, or 64 hex digits as text. */
static bool
parse_staged_hash(StageReader *r, Datum value, uint8 *digest, char **raw)
{
	if (r->hash_type == BYTEAOID)
	{
		bytea	   *b = DatumGetByteaPP(value);

		if (VARSIZE_ANY_EXHDR(b) != RECONCILE_SHA256_LEN)
		{
			*raw = OutputFunctionCall(&r->hash_out, value);
			return false;
		}
		memcpy(digest, VARDATA_ANY(b), RECONCILE_SHA256_LEN);
		return true;
	}
	else
	{
		char	   *s = OutputFunctionCall(&r->hash_out, value);
		char	   *p = s;

		*raw = s;
		if (strncmp(p, "sha256:", 7) == 0)
			p += 7;
		else if (strncmp(p, "\\x", 2) == 0)
			p += 2;
		if (strlen(p) != RECONCILE_HEX_LEN ||
			strspn(p, "0123456789abcdefABCDEF") != RECONCILE_HEX_LEN)
			return false;
		hex_decode(p, RECONCILE_HEX_LEN, (char *) digest);
		return true;
	}
}

/* The n-th (1-based) column of the staged row. */
#define GETARG(n, isnullp) \
	(*(isnullp) = in->tts_isnull[(n) - 1], in->tts_values[(n) - 1])

/*
 * A staged row that passed staging as the target's row, for the rules:
 * keys, version, tombstone, hash and payload as the batch would write
 * them (out: the sort tuple's values), every other column NULL.
 */
static TupleTableSlot *
rules_row(BatchState *b, Datum *out, bool *outnull, bool is_delete, Datum version)
{
	TargetInfo *t = b->target;
	TupleTableSlot *row = batch_rules_slot(b->rules);

	for (int i = 0; i < t->nkeys; i++)
	{
		row->tts_values[t->keys[i].attnum - 1] = out[SORT_ATT_FIRST_KEY - 1 + i];
		row->tts_isnull[t->keys[i].attnum - 1] = false;
	}
	row->tts_values[t->version.attnum - 1] = version;
	row->tts_isnull[t->version.attnum - 1] = false;
	for (int i = 0; i < t->nextra; i++)
	{
		row->tts_values[t->extra[i].attnum - 1] = out[SORT_ATT_FIRST_KEY - 1 + t->nkeys + t->npayload + i];
		row->tts_isnull[t->extra[i].attnum - 1] = false;
	}
	row->tts_values[t->deleted.attnum - 1] = BoolGetDatum(is_delete);
	row->tts_isnull[t->deleted.attnum - 1] = false;
	row->tts_values[t->hash.attnum - 1] = out[SORT_ATT_HASH - 1];
	row->tts_isnull[t->hash.attnum - 1] = false;
	for (int i = 0; i < t->npayload; i++)
	{
		int			a = SORT_ATT_FIRST_KEY - 1 + t->nkeys + i;

		row->tts_values[t->payload[i].attnum - 1] = out[a];
		row->tts_isnull[t->payload[i].attnum - 1] = outnull[a];
	}
	return ExecStoreVirtualTuple(row);
}

/* An integer ordering column's value. */
static int64
integer_value(TargetColumn *col, Datum d)
{
	Oid			base = col->basetype;

	return base == INT8OID ? DatumGetInt64(d) :
		base == INT4OID ? DatumGetInt32(d) : DatumGetInt16(d);
}

/* One staged row on its way through stage_row. */
typedef struct StagedRow
{
	char	   *object_key;
	int			obj;			/* its manifest entry */
	int64		source_row;
	bool		source_row_null;
	bool		is_delete;
	Datum		version;		/* in the version column's type */
	int			problems;		/* rejects recorded so far */
	uint8		digest[RECONCILE_SHA256_LEN];
	bool		have_digest;	/* digest was staged, not yet computed */
	bytea	   *present;		/* a sparse row's present payload columns, else NULL */
} StagedRow;

/* Record a reject of the row's column and count it as a problem of the row. */
#define REJECT(r, row, column, raw, ...) \
	do { \
		add_reject((r), (row)->object_key, (row)->source_row_null, (row)->source_row, \
				   (column), (raw), psprintf(__VA_ARGS__)); \
		(row)->problems++; \
	} while (0)

/*
 * The manifest entry the row belongs to, by its (object_key, version_id):
 * false when it belongs to none (not in the manifest, or matched under a
 * non-bytewise collation), and the row is left out.
 */
static bool
find_row_object(StageReader *r, TupleTableSlot *in, StagedRow *row)
{
	BatchState *b = r->batch;
	bool		isnull;
	Datum		d;

	row->object_key = TextDatumGetCString(GETARG(1, &isnull));
	if (r->has_version_id)
	{
		/* A row belongs to the manifest entry of its (object_key, version_id). */
		d = GETARG(in->tts_tupleDescriptor->natts, &isnull);
		if (isnull)
			return false;		/* no object version of the manifest */
		row->obj = manifest_find(b->manifest, row->object_key, TextDatumGetCString(d));
	}
	else
		row->obj = manifest_find(b->manifest, row->object_key, NULL);
	if (row->obj < 0)
		return false;			/* not in the manifest, or matched under a non-bytewise collation */
	r->version_id = b->manifest->entries[row->obj].version_id;
	b->staged_rows[row->obj]++;
	return true;
}

/* The row's source_row and operation, or their rejects. */
static void
read_source_row_and_operation(StageReader *r, TupleTableSlot *in, StagedRow *row)
{
	bool		isnull;
	Datum		d;

	d = GETARG(r->source_row_pos, &row->source_row_null);
	if (row->source_row_null)
	{
		add_reject(r, row->object_key, true, 0, "source_row", NULL, "source_row is null");
		row->problems++;
	}
	else
	{
		Oid			type = TupleDescAttr(in->tts_tupleDescriptor, r->source_row_pos - 1)->atttypid;

		row->source_row = type == INT8OID ? DatumGetInt64(d) :
			type == INT4OID ? DatumGetInt32(d) : DatumGetInt16(d);
	}

	d = GETARG(3, &isnull);
	if (isnull)
		REJECT(r, row, "operation", NULL, "operation is null");
	else
	{
		char	   *op = TextDatumGetCString(d);

		if (strcmp(op, "UPSERT") == 0)
			row->is_delete = false;
		else if (strcmp(op, "DELETE") == 0)
			row->is_delete = true;
		else
			REJECT(r, row, "operation", op, "unknown operation, expected UPSERT or DELETE");
	}
}

/*
 * Keys, version and payload cast into the target's types; keys and
 * payload land in the sort tuple's columns (out), the version in the row.
 */
static void
cast_columns(StageReader *r, TupleTableSlot *in, StagedRow *row, Datum *out, bool *outnull)
{
	TargetInfo *t = r->batch->target;
	Datum	   *payload = &out[SORT_ATT_FIRST_KEY - 1 + t->nkeys];
	bool	   *payload_null = &outnull[SORT_ATT_FIRST_KEY - 1 + t->nkeys];
	bool		isnull;
	Datum		d;

	for (int i = 0; i < r->ncols; i++)
	{
		StagedColumn *sc = &r->cols[i];
		TargetColumn *col = sc->tcol;
		bool		is_key = i < t->nkeys;
		bool		is_extra = i > t->nkeys + t->npayload;	/* a further version column */
		bool		is_version = i == t->nkeys || is_extra;
		Datum		value;
		Datum	   *dest;
		bool	   *destnull;
		char	   *raw = NULL;
		char	   *error = NULL;

		if (is_key)
		{
			dest = &out[SORT_ATT_FIRST_KEY - 1 + i];
			destnull = &outnull[SORT_ATT_FIRST_KEY - 1 + i];
		}
		else if (is_extra)
		{
			int			a = SORT_ATT_FIRST_KEY - 1 + t->nkeys + t->npayload + (i - t->nkeys - 1 - t->npayload);

			dest = &out[a];
			destnull = &outnull[a];
		}
		else if (is_version)
		{
			dest = &value;
			destnull = &isnull;
		}
		else
		{
			dest = &payload[i - t->nkeys - 1];
			destnull = &payload_null[i - t->nkeys - 1];
		}

		if (!is_key && !is_version && row->present != NULL &&
			!PRESENT_BIT((uint8 *) VARDATA(row->present), i - t->nkeys - 1))
		{
			/* absent from a sparse row: its staged value is not read */
			*destnull = true;
			continue;
		}
		d = GETARG(sc->pos, destnull);
		if (*destnull)
		{
			if (is_key)
				REJECT(r, row, col->name, NULL, "key column is null");
			else if (is_version)
				REJECT(r, row, col->name, NULL, "version is null");
			continue;
		}
		if (!sc->convert)
			*dest = d;
		else
		{
			raw = OutputFunctionCall(&sc->staged_out, d);
			if (!stage_input_value(col, raw, dest, &error))
			{
				/*
				 * reconcile.rejects holds the value as the pinned settings
				 * write it (pinned.c), not as this session does: the
				 * same staged value is one raw_value in every session.
				 */
				raw = pinned_output(&sc->staged_out, d, sc->staged_names_objects);
				if (is_version)
					REJECT(r, row, col->name, raw, "version is not a valid %s: %s",
						   format_type_be(col->typid), error);
				else
					REJECT(r, row, col->name, raw, "%s", error);
				continue;
			}
		}
		if (is_version)
		{
			/*
			 * An integer version is never negative (1.0's rule); other types
			 * order as they are.  The first version column's value is the
			 * row's; further ones stay in the sort tuple (out).
			 */
			if (!is_extra)
				row->version = value;
			if (ordering_column_is_integer(col) &&
				integer_value(col, *dest) < 0)
				REJECT(r, row, col->name, raw ? raw : psprintf(INT64_FORMAT, integer_value(col, *dest)),
					   "version is negative");
		}
	}
}

/*
 * A partial batch's present_columns: NULL, or naming every payload column,
 * is a whole row; otherwise the row is sparse and row->present its bitmap.
 * A name that is not a payload column, a NULL element, a name given twice
 * or an array of more than one dimension is a reject.  A DELETE is whole:
 * its present_columns is not read.
 */
static void
read_present_columns(StageReader *r, TupleTableSlot *in, StagedRow *row)
{
	TargetInfo *t = r->batch->target;
	bool		isnull;
	Datum		d;
	ArrayType  *arr;
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;
	int			npresent = 0;
	bytea	   *bits;
	uint8	   *b;
	int			problems = row->problems;

	if (r->present_pos <= 0 || row->is_delete)
		return;
	d = GETARG(r->present_pos, &isnull);
	if (isnull)
		return;
	arr = DatumGetArrayTypeP(d);
	if (ARR_NDIM(arr) > 1)
	{
		Oid			outfunc;
		bool		varlena;

		getTypeOutputInfo(TEXTARRAYOID, &outfunc, &varlena);
		REJECT(r, row, "present_columns", OidOutputFunctionCall(outfunc, d),
			   "present_columns must be a one-dimensional array of payload column names");
		return;
	}
	bits = palloc0(VARHDRSZ + (t->npayload + 7) / 8 + 1);
	SET_VARSIZE(bits, VARHDRSZ + (t->npayload + 7) / 8 + 1);
	b = (uint8 *) VARDATA(bits);
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &nelems);
	for (int e = 0; e < nelems; e++)
	{
		char	   *name;
		int			i;

		if (nulls[e])
		{
			REJECT(r, row, "present_columns", NULL, "present_columns has a null element");
			continue;
		}
		name = TextDatumGetCString(elems[e]);
		for (i = 0; i < t->npayload; i++)
			if (strcmp(t->payload[i].name, name) == 0)
				break;
		if (i == t->npayload)
			REJECT(r, row, "present_columns", name,
				   "present_columns names \"%s\", which is not a payload column of table \"%s\"",
				   name, t->relname);
		else if (PRESENT_BIT(b, i))
			REJECT(r, row, "present_columns", name,
				   "present_columns names \"%s\" twice", name);
		else
		{
			b[i / 8] |= 1 << (i % 8);
			npresent++;
		}
	}
	if (row->problems == problems && npresent < t->npayload)
		row->present = bits;
}

/* A payload_hash staged with the row, or its reject. */
static void
read_staged_hash(StageReader *r, TupleTableSlot *in, StagedRow *row)
{
	bool		isnull;
	Datum		d;

	if (r->hash_pos <= 0)
		return;
	d = GETARG(r->hash_pos, &isnull);
	if (!isnull && row->present != NULL)
		REJECT(r, row, "payload_hash", NULL,
			   "a sparse row cannot stage its payload_hash: the hash is made over the merged row");
	else if (!isnull)
	{
		char	   *raw = NULL;

		if (parse_staged_hash(r, d, row->digest, &raw))
			row->have_digest = true;
		else
			REJECT(r, row, "payload_hash", raw,
				   "payload_hash is not a SHA-256 digest (32 bytes, or 64 hex digits)");
	}
}
#undef REJECT

/* Count the row as rejected in its object's and the batch's counts. */
static void
count_rejected(BatchState *b, StagedRow *row)
{
	b->counts[row->obj][DISP_REJECTED]++;
	b->totals[DISP_REJECTED]++;
}

/*
 * Data-quality rules (rules_attach.c) see the row as the batch would
 * write it, in the target's types: a drop rule it violates, or a rule
 * that raises an error on it, rejects it.  False when it is rejected.
 */
static bool
row_passes_rules(StageReader *r, StagedRow *row, Datum *out, bool *outnull)
{
	BatchState *b = r->batch;
	const char **reasons;
	int			nreasons;

	if (!batch_rules_has_row_rules(b->rules))
		return true;
	nreasons = batch_rules_row(b->rules, rules_row(b, out, outnull, row->is_delete, row->version),
							   &reasons);
	for (int i = 0; i < nreasons; i++)
		add_reject(r, row->object_key, row->source_row_null, row->source_row, NULL, NULL, reasons[i]);
	return nreasons == 0;
}

/* Process one staged row: reject it, or cast, hash and sort it. */
static void
stage_row(StageReader *r, TupleTableSlot *in)
{
	BatchState *b = r->batch;
	TargetInfo *t = b->target;
	TupleTableSlot *slot = r->slot;
	Datum	   *out = slot->tts_values;
	bool	   *outnull = slot->tts_isnull;
	StagedRow	row;

	slot_getallattrs(in);
	memset(&row, 0, sizeof(row));
	if (!find_row_object(r, in, &row))
		return;
	read_source_row_and_operation(r, in, &row);
	read_present_columns(r, in, &row);
	cast_columns(r, in, &row, out, outnull);
	read_staged_hash(r, in, &row);
	if (row.problems > 0)
	{
		count_rejected(b, &row);
		return;
	}

	if (row.present != NULL)
		memset(row.digest, 0, RECONCILE_SHA256_LEN);	/* sparse.c: over the merged row */
	else if (!row.have_digest)
		payload_hash_compute(t, &out[SORT_ATT_FIRST_KEY - 1 + t->nkeys],
							 &outnull[SORT_ATT_FIRST_KEY - 1 + t->nkeys],
							 row.is_delete, r->sha, row.digest);

	{
		bytea	   *h = palloc(VARHDRSZ + RECONCILE_SHA256_LEN);

		SET_VARSIZE(h, VARHDRSZ + RECONCILE_SHA256_LEN);
		memcpy(VARDATA(h), row.digest, RECONCILE_SHA256_LEN);
		out[SORT_ATT_HASH - 1] = PointerGetDatum(h);
	}

	if (!row_passes_rules(r, &row, out, outnull))
	{
		count_rejected(b, &row);
		return;
	}

	out[SORT_ATT_OBJECT - 1] = Int32GetDatum(row.obj);
	out[SORT_ATT_SOURCE_ROW - 1] = Int64GetDatum(row.source_row);
	out[SORT_ATT_DELETE - 1] = BoolGetDatum(row.is_delete);
	out[SORT_ATT_VERSION - 1] = row.version;
	for (int i = 0; i < SORT_ATT_FIRST_KEY - 1; i++)
		outnull[i] = false;
	out[SORT_ATT_PRESENT(t) - 1] = PointerGetDatum(row.present);
	outnull[SORT_ATT_PRESENT(t) - 1] = row.present == NULL;
	ExecStoreVirtualTuple(slot);
	tuplesort_puttupleslot(r->sort, slot);
	ExecClearTuple(slot);
}

/*
 * A parallel read: add the rows read since the last call to the count of
 * every participant's, which the leader reports.
 */
static void
progress_shared(StageReader *r)
{
	uint64		all = pg_atomic_add_fetch_u64(r->shared_nread, r->nread - r->nread_shared);

	r->nread_shared = r->nread;
	if (!IsParallelWorker())
		progress_rows(all);
}

static bool
stage_receive(TupleTableSlot *slot, DestReceiver *self)
{
	StageReader *r = (StageReader *) self;
	MemoryContext old = MemoryContextSwitchTo(r->rowcxt);
	ResourceOwner portal_owner = CurrentResourceOwner;

	/*
	 * The executor runs the cursor under the portal's resource owner, which
	 * is released when the cursor closes; the sort's temporary files must
	 * outlive it.
	 */
	CurrentResourceOwner = r->owner;
	CHECK_FOR_INTERRUPTS();
	stage_row(r, slot);
	if (++r->nread % PROGRESS_EVERY == 0)
	{
		if (r->shared_nread == NULL)
			progress_rows(r->nread);
		else
			progress_shared(r);
	}
	CurrentResourceOwner = portal_owner;
	MemoryContextSwitchTo(old);
	MemoryContextReset(r->rowcxt);
	return true;
}

/* Find a column of the staged relation by name. */
static int
staged_column(Relation srel, const char *name, bool required, Oid *type)
{
	/* get_attnum also finds system columns (ctid...): those are no column here. */
	AttrNumber	attnum = get_attnum(RelationGetRelid(srel), name);

	if (attnum > 0)
	{
		if (type)
			*type = TupleDescAttr(RelationGetDescr(srel), attnum - 1)->atttypid;
		return attnum;
	}
	if (required)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("staged relation \"%s\" has no column \"%s\"",
						RelationGetRelationName(srel), name),
				 errdetail("A staged relation has the columns object_key, source_row and operation, and the target's key, version and payload columns under the target's names."),
				 errhint("Add the column to the staged relation, or register the target with payload_columns naming only the columns the stage provides.")));
	return 0;
}

/*
 * Schema drift: a staged column that is neither a loader column nor a
 * column of the target would be silently ignored; it is refused unless the
 * batch's options accept it (unknown_columns: 'ignore').  Columns of the
 * target that the registration does not load (its hash or deleted column,
 * a column left out of payload_columns) are not drift.
 */
static void
check_unknown_columns(BatchState *b, Relation srel)
{
	static const char *const loader_columns[] = {
		"object_key", "source_row", "operation", "version_id", "payload_hash"
	};
	TupleDesc	desc = RelationGetDescr(srel);
	StringInfoData unknown;
	char	   *first = NULL;
	int			nunknown = 0;

	if (b->options.ignore_unknown_columns)
		return;
	initStringInfo(&unknown);
	for (int a = 0; a < desc->natts; a++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, a);
		const char *name = NameStr(att->attname);
		bool		known = false;

		if (att->attisdropped)
			continue;
		for (int i = 0; i < lengthof(loader_columns); i++)
			if (strcmp(name, loader_columns[i]) == 0)
				known = true;
		if (b->options.partial && strcmp(name, "present_columns") == 0)
			known = true;
		if (known || get_attnum(b->target->relid, name) > 0)
			continue;
		if (first == NULL)
			first = pstrdup(name);
		appendStringInfo(&unknown, "%s%s", nunknown++ > 0 ? ", " : "", quote_identifier(name));
	}
	if (nunknown > 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of staged relation \"%s\" is neither a loader column nor a column of table \"%s\"",
						first, RelationGetRelationName(srel), b->target->relname),
				 errdetail("Staged columns unknown to the batch: %s. A batch reads object_key, source_row, operation, the optional version_id and payload_hash, and columns of the target under its names.",
						   unknown.data),
				 errhint("Drop or rename the column, or pass options => '{\"unknown_columns\": \"ignore\"}' to reconcile_batch or reconcile_register to load without it.")));
	pfree(unknown.data);
}

static TupleDesc
sort_desc_create(TargetInfo *t)
{
	TupleDesc	desc = CreateTemplateTupleDesc(SORT_ATT_PRESENT(t));
	AttrNumber	a = SORT_ATT_FIRST_KEY;

	TupleDescInitEntry(desc, SORT_ATT_OBJECT, "object", INT4OID, -1, 0);
	TupleDescInitEntry(desc, SORT_ATT_SOURCE_ROW, "source_row", INT8OID, -1, 0);
	TupleDescInitEntry(desc, SORT_ATT_DELETE, "is_delete", BOOLOID, -1, 0);
	TupleDescInitEntry(desc, SORT_ATT_VERSION, "version", t->version.typid, t->version.typmod, 0);
	TupleDescInitEntryCollation(desc, SORT_ATT_VERSION, t->version.collation);
	TupleDescInitEntry(desc, SORT_ATT_HASH, "hash", BYTEAOID, -1, 0);
	for (int i = 0; i < t->nkeys; i++, a++)
	{
		TupleDescInitEntry(desc, a, t->keys[i].name, t->keys[i].typid, t->keys[i].typmod, 0);
		TupleDescInitEntryCollation(desc, a, t->key_collations[i]);
	}
	for (int i = 0; i < t->npayload; i++, a++)
	{
		TupleDescInitEntry(desc, a, t->payload[i].name, t->payload[i].typid, t->payload[i].typmod, 0);
		TupleDescInitEntryCollation(desc, a, t->payload[i].collation);
	}
	/* Further version columns after the payload: the offsets of keys and payload stay. */
	for (int i = 0; i < t->nextra; i++, a++)
	{
		TupleDescInitEntry(desc, a, t->extra[i].name, t->extra[i].typid, t->extra[i].typmod, 0);
		TupleDescInitEntryCollation(desc, a, t->extra[i].collation);
	}
	/* Last, a partial batch's bitmap of present columns (loader.h). */
	Assert(a == SORT_ATT_PRESENT(t));
	TupleDescInitEntry(desc, a, "present", BYTEAOID, -1, 0);
	return desc;
}

/*
 * Sort by key, then version descending, then object and source row.  In a
 * parallel read each participant sorts its share and the leader merges
 * them (coordinate); serially coordinate is NULL.
 */
static Tuplesortstate *
sort_begin(TargetInfo *t, TupleDesc desc, int sortmem, SortCoordinate coordinate)
{
	int			nsort = t->nkeys + 3 + t->nextra;
	AttrNumber *atts = palloc(sizeof(AttrNumber) * nsort);
	Oid		   *ops = palloc(sizeof(Oid) * nsort);
	Oid		   *colls = palloc0(sizeof(Oid) * nsort);
	bool	   *nullsfirst = palloc0(sizeof(bool) * nsort);
	int			n = 0;

	for (int i = 0; i < t->nkeys; i++, n++)
	{
		atts[n] = SORT_ATT_FIRST_KEY + i;
		ops[n] = t->key_lt_ops[i];
		colls[n] = t->key_collations[i];
	}
	/* Highest version first, by the version type's own ordering (ordering.c). */
	atts[n] = SORT_ATT_VERSION;
	colls[n] = t->version.collation;
	ops[n++] = t->version_gt_op;
	for (int i = 0; i < t->nextra; i++)
	{
		atts[n] = SORT_ATT_FIRST_KEY + t->nkeys + t->npayload + i;
		colls[n] = t->extra[i].collation;
		ops[n++] = t->extra_gt_op[i];
	}
	atts[n] = SORT_ATT_OBJECT;
	ops[n++] = get_opfamily_member(INTEGER_BTREE_FAM_OID, INT4OID, INT4OID,
								   BTLessStrategyNumber);
	atts[n] = SORT_ATT_SOURCE_ROW;
	ops[n++] = get_opfamily_member(INTEGER_BTREE_FAM_OID, INT8OID, INT8OID,
								   BTLessStrategyNumber);
	return tuplesort_begin_heap(desc, nsort, atts, ops, colls, nullsfirst,
								sortmem, coordinate, TUPLESORT_NONE);
}

/*
 * A partial batch reads present_columns as text[] (sparse rows, see
 * read_present_columns); a stage with that column in a batch that is not
 * partial is refused, since its rows would load their absent columns as
 * NULL.  A target with a loaded column of that name cannot take a partial
 * batch.
 */
static void
stage_prepare_present(BatchState *b, Relation srel, StageReader *r, StringInfo sql)
{
	TargetInfo *t = b->target;
	Oid			type = InvalidOid;
	bool		staged = staged_column(srel, "present_columns", false, &type) > 0;
	bool		target_has = false;

	for (int i = 0; i < r->ncols; i++)
		if (strcmp(r->cols[i].tcol->name, "present_columns") == 0)
			target_has = true;
	if (!b->options.partial)
	{
		if (staged && !target_has)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("staged relation \"%s\" has a column \"present_columns\", but the batch into table \"%s\" is not partial",
							RelationGetRelationName(srel), t->relname),
					 errdetail("Without option \"partial\" every staged row is a whole row: its absent columns would be loaded as NULL."),
					 errhint("Pass options => '{\"partial\": true}' to reconcile_batch or reconcile_register, or drop the column from the staged relation.")));
		return;
	}
	if (target_has)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"%s\" loads a column named \"present_columns\", which a partial batch reads as the staged rows' present columns",
						t->relname),
				 errhint("Rename the column, or load the table without option \"partial\".")));
	if (!staged)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("staged relation \"%s\" has no column \"present_columns\", which a partial batch reads",
						RelationGetRelationName(srel)),
				 errdetail("Option \"partial\" makes each staged row name the payload columns it carries in present_columns text[] (NULL: all of them)."),
				 errhint("Add the column to the staged relation, or load without option \"partial\".")));
	if (type != TEXTARRAYOID && type != VARCHARARRAYOID && type != NAMEARRAYOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"present_columns\" of staged relation \"%s\" must be text[], not %s",
						RelationGetRelationName(srel), format_type_be(type)),
				 errhint("Stage the names of the payload columns each row carries as a text array (NULL: all of them).")));
	r->present_pos = 4 + r->ncols + (r->hash_pos > 0 ? 1 : 0);
	appendStringInfoString(sql, ", s.present_columns::pg_catalog.text[]");
}

/*
 * Set up a reader of the batch's staged rows: which staged column feeds
 * which target column, and the query that reads them, which a parallel
 * read narrows to one chunk of blocks at a time (stage_scan_chunks).  The
 * same in the leader and in every parallel worker.
 */
static void
stage_prepare(BatchState *b, Relation srel, StageReader *r, StringInfo sql)
{
	TargetInfo *t = b->target;
	char	   *srelname = relation_quoted_name(srel);
	Oid			type;

	r->batch = b;
	appendStringInfoString(sql, "SELECT s.object_key::pg_catalog.text, s.source_row,"
						   " s.operation::pg_catalog.text");
	staged_column(srel, "object_key", true, NULL);
	staged_column(srel, "source_row", true, &type);
	if (type != INT8OID && type != INT4OID && type != INT2OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"source_row\" of staged relation \"%s\" must be an integer, not %s",
						RelationGetRelationName(srel), format_type_be(type))));
	staged_column(srel, "operation", true, NULL);
	r->source_row_pos = 2;

	r->ncols = t->nkeys + 1 + t->npayload + t->nextra;
	r->cols = palloc0(sizeof(StagedColumn) * r->ncols);
	for (int i = 0; i < r->ncols; i++)
	{
		StagedColumn *sc = &r->cols[i];
		TupleDesc	sdesc = RelationGetDescr(srel);
		Form_pg_attribute att;
		int			attno;

		sc->tcol = i < t->nkeys ? &t->keys[i] :
			i == t->nkeys ? &t->version :
			i <= t->nkeys + t->npayload ? &t->payload[i - t->nkeys - 1] :
			&t->extra[i - t->nkeys - 1 - t->npayload];
		attno = staged_column(srel, sc->tcol->name, true, NULL);
		att = TupleDescAttr(sdesc, attno - 1);
		sc->pos = 4 + i;
		sc->convert = !(att->atttypid == sc->tcol->typid &&
						(sc->tcol->typmod < 0 || att->atttypmod == sc->tcol->typmod));
		if (sc->convert)
		{
			Oid			outfunc;
			bool		varlena;

			getTypeOutputInfo(att->atttypid, &outfunc, &varlena);
			fmgr_info(outfunc, &sc->staged_out);
			sc->staged_names_objects = type_names_objects(att->atttypid);
		}
		appendStringInfo(sql, ", s.%s", quote_identifier(sc->tcol->name));
	}
	if (staged_column(srel, "payload_hash", false, &type) > 0)
	{
		Oid			outfunc;
		bool		varlena;

		r->hash_pos = 4 + r->ncols;
		r->hash_type = type;
		getTypeOutputInfo(type, &outfunc, &varlena);
		fmgr_info(outfunc, &r->hash_out);
		appendStringInfoString(sql, ", s.payload_hash");
	}
	stage_prepare_present(b, srel, r, sql);
	/*
	 * Object versions: with a version_id column, a row belongs to the
	 * manifest entry of its (object_key, version_id), so several versions of
	 * an object can be staged side by side; it is the query's last
	 * column.  Without it, an object's rows are those of its one
	 * version in the manifest, which must then list no object twice.  A
	 * target whose key or payload has a column version_id reads it as that
	 * column, as before.
	 */
	r->has_version_id = staged_column(srel, "version_id", false, NULL) > 0;
	for (int i = 0; i < r->ncols; i++)
		if (strcmp(r->cols[i].tcol->name, "version_id") == 0)
			r->has_version_id = false;
	if (r->has_version_id)
		appendStringInfoString(sql, ", s.version_id::pg_catalog.text");
	else if (b->manifest->repeated_object >= 0)
	{
		ManifestEntry *e = &b->manifest->entries[b->manifest->repeated_object];

		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("staged relation \"%s\" has no column \"version_id\", but the manifest lists object \"%s\" in more than one version",
						RelationGetRelationName(srel), e->object_key),
				 errdetail("The manifest lists versions \"%s\" and \"%s\" of it; without a version_id column the staged rows of one version cannot be told from another's.",
						   e->version_id, (e + 1)->version_id),
				 errhint("Add a column version_id to the staged relation, or list one version of each object in the manifest.")));
	}
	appendStringInfo(sql, " FROM %s AS s", srelname);

	r->slot = MakeSingleTupleTableSlot(b->sortdesc, &TTSOpsVirtual);
	r->rowcxt = AllocSetContextCreate(CurrentMemoryContext, "reconcile staged row",
									  ALLOCSET_DEFAULT_SIZES);
	r->sha = reconcile_sha256_begin();
	r->owner = CurrentResourceOwner;
}

/*
 * Run the reader's prepared query with its arguments, handing each row to
 * stage_receive().  read_only runs it with the active snapshot, as a
 * parallel read must (every participant reads with the leader's);
 * otherwise with a new one.
 */
static void
stage_scan(StageReader *r, SPIPlanPtr plan, Datum *args, bool read_only)
{
	Portal		portal;

	/*
	 * The executor hands each row straight to stage_receive(), without the
	 * copy SPI_cursor_fetch makes.  Rows come in chunks so that the rejects
	 * buffer is flushed between them, never while the cursor's query runs.
	 */
	portal = SPI_cursor_open(NULL, plan, args, NULL, read_only);
	receiver_init(&r->dest, stage_receive);
	while (PortalRunFetch(portal, FETCH_FORWARD, FETCH_ROWS, &r->dest) > 0)
	{
		if (r->rejects != NULL)
			state_rows_flush(r->rejects);
	}
	SPI_cursor_close(portal);
	if (r->shared_nread != NULL)
		progress_shared(r);
}

static void
stage_finish(StageReader *r)
{
	MemoryContextDelete(r->rowcxt);
	reconcile_sha256_end(r->sha);
	ExecDropSingleTupleTableSlot(r->slot);
}

/* The rejects' buffer, with the columns the installed schema has. */
StateRows *
stage_rejects_buffer(void)
{
	return state_rows_create(&state_rejects);
}

/* ---- parallel reading ---- */

/*
 * A large plain table is read by the leader and parallel workers together,
 * the way CREATE INDEX builds in parallel (nbtsort.c): each participant
 * claims chunks of the staged relation's blocks until none is left, reads
 * each with the same query and the leader's snapshot, casts, rejects and
 * hashes its rows, and sorts them into runs in shared temporary files; the
 * leader merges the runs.  Chunks, rather than one range per participant,
 * keep a participant that gets less of the machine from holding the others
 * up: the leader cannot merge before every participant is done.
 * Rejects are spooled to a shared tuplestore, since no process may write a
 * table in parallel mode, and written by the leader afterwards.
 *
 * The sort's shared state lives in a segment of its own, not in the
 * parallel context's: the leader's merge is read while the batch writes
 * the target, which must happen after parallel mode has ended and the
 * context is gone.  batch.c detaches it after the merge (stage_release).
 */
#define STAGE_KEY_PARAMS	UINT64CONST(0x7265636f00000001)
#define STAGE_KEY_OBJECTS	UINT64CONST(0x7265636f00000002)
#define STAGE_KEY_COUNTS	UINT64CONST(0x7265636f00000003)
#define STAGE_KEY_TARGET	UINT64CONST(0x7265636f00000004)

typedef struct StageParams
{
	Oid			staged;
	int			nobjects;
	int			sortmem;		/* each participant's share of work_mem */
	dsm_handle	handle;			/* of the StageShared segment */
} StageParams;

/* Chunks per participant: small enough to even out, few enough to plan. */
#define CHUNKS_PER_PARTICIPANT 8

typedef struct StageShared
{
	pg_atomic_uint64 nread;		/* rows read by every participant */
	pg_atomic_uint32 next_chunk;	/* the next chunk to claim */
	uint32		nchunks;
	BlockNumber chunk_blocks;	/* the last chunk also takes any blocks added */
	SharedFileSet fileset;		/* the rejects spool's files */
	Size		sort_offset;	/* of the Sharedsort */
	Size		spool_offset;	/* of the SharedTuplestore */
} StageShared;

#define SHARED_SORT(sh) ((Sharedsort *) ((char *) (sh) + (sh)->sort_offset))
#define SHARED_SPOOL(sh) ((SharedTuplestore *) ((char *) (sh) + (sh)->spool_offset))

PGDLLEXPORT void reconcile_stage_worker(dsm_segment *seg, shm_toc *toc);

/*
 * Read chunks of the staged relation until none is left, with one plan
 * made once per participant: the chunk's bounds are its parameters, and
 * the manifest's objects are not (a plan with the object keys as an
 * array constant was planned again for every chunk, its selectivity
 * estimated element by element: 0.7 s per chunk at 500,000 objects).  A
 * row of an object the manifest does not list is skipped by
 * stage_receive(), which looks every row's object up anyway.  The last
 * chunk ends past any block (a tid of block InvalidBlockNumber is above
 * every real one): blocks added since the leader counted them may hold
 * rows its snapshot sees.
 */
static void
stage_scan_chunks(StageReader *r, StageShared *shared, const char *sql)
{
	StringInfoData chunk;
	uint32		c;
	Oid			types[2] = {TIDOID, TIDOID};
	ItemPointerData bounds[2];
	Datum		args[2] = {PointerGetDatum(&bounds[0]), PointerGetDatum(&bounds[1])};
	SPIPlanPtr	plan;

	initStringInfo(&chunk);
	appendStringInfo(&chunk, "%s WHERE s.ctid OPERATOR(pg_catalog.>=) $1"
					 " AND s.ctid OPERATOR(pg_catalog.<) $2", sql);
	plan = SPI_prepare_cursor(chunk.data, 2, types, CURSOR_OPT_GENERIC_PLAN | CURSOR_OPT_NO_SCROLL);
	if (plan == NULL)
		elog(ERROR, "could not prepare the read of the staged relation: %s",
			 SPI_result_code_string(SPI_result));
	while ((c = pg_atomic_fetch_add_u32(&shared->next_chunk, 1)) < shared->nchunks)
	{
		BlockNumber from = c * shared->chunk_blocks;

		ItemPointerSet(&bounds[0], from, 0);
		ItemPointerSet(&bounds[1], c < shared->nchunks - 1 ? from + shared->chunk_blocks :
					   InvalidBlockNumber, 0);
		stage_scan(r, plan, args, true);
	}
	SPI_freeplan(plan);
	pfree(chunk.data);
}

/* The rejects spool's columns: reconcile.rejects' from object_key on. */
static TupleDesc
spool_desc_create(void)
{
	TupleDesc	desc = CreateTemplateTupleDesc(6);

	TupleDescInitEntry(desc, 1, "object_key", TEXTOID, -1, 0);
	TupleDescInitEntry(desc, 2, "source_row", INT8OID, -1, 0);
	TupleDescInitEntry(desc, 3, "column_name", TEXTOID, -1, 0);
	TupleDescInitEntry(desc, 4, "raw_value", TEXTOID, -1, 0);
	TupleDescInitEntry(desc, 5, "reason", TEXTOID, -1, 0);
	TupleDescInitEntry(desc, 6, "version_id", TEXTOID, -1, 0);
	return desc;
}

/*
 * How many workers may help read: as for a parallel scan of the staged
 * relation (min_parallel_table_scan_size, one more worker for every
 * threefold size, the parallel_workers storage parameter), at most
 * max_parallel_maintenance_workers.  None where a worker could not do what
 * the leader does: a relation that is not a plain permanent heap table
 * (workers cannot see temporary tables; views may hide anything), attached
 * data-quality rules, or a value whose input function runs in a
 * subtransaction (stage.c: input_value), which parallel mode forbids.
 */
static int
stage_parallel_workers(BatchState *b, Relation srel, StageReader *r, BlockNumber *nblocks)
{
	int			workers;
	BlockNumber threshold;

	if (max_parallel_maintenance_workers <= 0 || batch_rules_has_row_rules(b->rules) ||
		b->options.partial ||
		IsInParallelMode() || !IsUnderPostmaster ||
		srel->rd_rel->relkind != RELKIND_RELATION ||
		srel->rd_rel->relam != HEAP_TABLE_AM_OID ||
		srel->rd_rel->relpersistence == RELPERSISTENCE_TEMP ||
		b->target->citus_kind != CITUS_NONE ||
		citus_table_kind(RelationGetRelid(srel), NULL, NULL) != CITUS_NONE)
		return 0;				/* a Citus shell's blocks are not its rows */
	for (int i = 0; i < r->ncols; i++)
		if (r->cols[i].convert && !r->cols[i].tcol->catch_directly)
			return 0;

	*nblocks = RelationGetNumberOfBlocks(srel);
	workers = RelationGetParallelWorkers(srel, -1);
	if (workers < 0)
	{
		threshold = Max(min_parallel_table_scan_size, 1);
		if (*nblocks < (BlockNumber) min_parallel_table_scan_size)
			return 0;
		workers = 1;
		while (*nblocks >= threshold * 3 && threshold <= INT_MAX / 3)
		{
			workers++;
			threshold *= 3;
		}
	}
	return Min(workers, max_parallel_maintenance_workers);
}

/* Bytes of the manifest's (object_key, version_id) pairs, each NUL-terminated. */
static Size
objects_size(Manifest *m)
{
	Size		size = 0;

	for (int i = 0; i < m->nentries; i++)
		size += strlen(m->entries[i].object_key) + strlen(m->entries[i].version_id) + 2;
	return size;
}

/*
 * The segment every participant shares: the rows-read counter, the chunks
 * of the staged relation's blocks, the shared sort and the spool of
 * rejects.
 */
static dsm_segment *
create_shared_segment(int nparticipants, BlockNumber nblocks, StageShared **sharedp,
					  SharedTuplestoreAccessor **spoolp)
{
	Size		segsize;
	dsm_segment *seg;
	StageShared *shared;

	segsize = MAXALIGN(sizeof(StageShared)) + MAXALIGN(tuplesort_estimate_shared(nparticipants)) +
		sts_estimate(nparticipants);
	seg = dsm_create(segsize, 0);
	shared = dsm_segment_address(seg);
	pg_atomic_init_u64(&shared->nread, 0);
	pg_atomic_init_u32(&shared->next_chunk, 0);
	shared->chunk_blocks = Max(nblocks / (nparticipants * CHUNKS_PER_PARTICIPANT), 1);
	shared->nchunks = Max((nblocks + shared->chunk_blocks - 1) / shared->chunk_blocks, 1);
	shared->sort_offset = MAXALIGN(sizeof(StageShared));
	shared->spool_offset = shared->sort_offset + MAXALIGN(tuplesort_estimate_shared(nparticipants));
	tuplesort_initialize_shared(SHARED_SORT(shared), nparticipants, seg);
	SharedFileSetInit(&shared->fileset, seg);
	*spoolp = sts_initialize(SHARED_SPOOL(shared), nparticipants, 0, 0,
							 SHARED_TUPLESTORE_SINGLE_PASS, &shared->fileset,
							 "reconcile rejects");
	*sharedp = shared;
	return seg;
}

/*
 * What the workers read from the parallel context's table of contents: the
 * parameters, the manifest's objects, their counts (zeroed) and the
 * target as the leader resolved it.
 */
static StageParams *
fill_worker_toc(ParallelContext *pcxt, BatchState *b, dsm_segment *seg, int nparticipants,
				Size objects_size, Size counts_size, StringInfo target, int64 **countsp)
{
	Manifest   *m = b->manifest;
	StageParams *params;
	char	   *objects;
	int64	   *counts;
	char	   *target_shared;

	params = shm_toc_allocate(pcxt->toc, sizeof(StageParams));
	params->staged = b->staged;
	params->nobjects = m->nentries;
	params->sortmem = Max(work_mem / nparticipants, 64);
	params->handle = dsm_segment_handle(seg);
	shm_toc_insert(pcxt->toc, STAGE_KEY_PARAMS, params);
	objects = shm_toc_allocate(pcxt->toc, objects_size);
	for (int i = 0, off = 0; i < m->nentries; i++)
	{
		strcpy(objects + off, m->entries[i].object_key);
		off += strlen(m->entries[i].object_key) + 1;
		strcpy(objects + off, m->entries[i].version_id);
		off += strlen(m->entries[i].version_id) + 1;
	}
	shm_toc_insert(pcxt->toc, STAGE_KEY_OBJECTS, objects);
	counts = shm_toc_allocate(pcxt->toc, counts_size);
	memset(counts, 0, counts_size);
	shm_toc_insert(pcxt->toc, STAGE_KEY_COUNTS, counts);
	target_shared = shm_toc_allocate(pcxt->toc, target->len);
	memcpy(target_shared, target->data, target->len);
	shm_toc_insert(pcxt->toc, STAGE_KEY_TARGET, target_shared);
	*countsp = counts;
	return params;
}

/* The leader reads chunks too, as one more participant. */
static void
leader_read_chunks(BatchState *b, StageReader *r, StageShared *shared,
				   SharedTuplestoreAccessor *spool, const char *sql, int sortmem)
{
	SortCoordinateData coordinate;

	coordinate.isWorker = true;
	coordinate.nParticipants = -1;
	coordinate.sharedsort = SHARED_SORT(shared);
	r->sort = sort_begin(b->target, b->sortdesc, sortmem, &coordinate);
	r->spool = spool;
	r->spooldesc = spool_desc_create();
	r->spoolcxt = CurrentMemoryContext;
	r->shared_nread = &shared->nread;
	stage_scan_chunks(r, shared, sql);
	tuplesort_performsort(r->sort);
	tuplesort_end(r->sort);
	sts_end_write(spool);
}

/* Add each worker's staged and rejected rows to the batch's counts. */
static void
add_worker_counts(BatchState *b, int64 *counts, int launched)
{
	Manifest   *m = b->manifest;

	for (int w = 0; w < launched; w++)
	{
		int64	   *c = counts + (Size) w * 2 * m->nentries;

		for (int i = 0; i < m->nentries; i++)
		{
			b->staged_rows[i] += c[i];
			b->counts[i][DISP_REJECTED] += c[m->nentries + i];
			b->totals[DISP_REJECTED] += c[m->nentries + i];
		}
	}
}

/* Write the rejects every participant spooled, once they have all finished. */
static void
write_spooled_rejects(BatchState *b, StageReader *r, SharedTuplestoreAccessor *spool)
{
	TargetInfo *t = b->target;
	StateRows  *rejects = stage_rejects_buffer();
	TupleTableSlot *slot = MakeSingleTupleTableSlot(r->spooldesc, &TTSOpsMinimalTuple);
	Datum		batch_id = CStringGetTextDatum(b->batch_id);
	MinimalTuple tup;

	sts_begin_parallel_scan(spool);
	while ((tup = sts_parallel_scan_next(spool, NULL)) != NULL)
	{
		/* The buffer copies the values: nothing is allocated per row here. */
		ExecStoreMinimalTuple(tup, slot, false);
		slot_getallattrs(slot);
		state_row_set(rejects, "batch_id", batch_id);
		state_row_set(rejects, "target", ObjectIdGetDatum(t->relid));
		/* The spool's columns are named for those of reconcile.rejects. */
		for (int i = 0; i < r->spooldesc->natts; i++)
			if (!slot->tts_isnull[i])
				state_row_set(rejects, NameStr(TupleDescAttr(r->spooldesc, i)->attname),
							  slot->tts_values[i]);
		state_row_add(rejects);
	}
	sts_end_parallel_scan(spool);
	state_rows_flush(rejects);
	ExecDropSingleTupleTableSlot(slot);
}

/*
 * Read the batch in parallel with nworkers workers.  Returns false, having
 * read nothing, if no worker could be started.
 */
static bool
stage_read_parallel(BatchState *b, StageReader *r, const char *sql,
					int nworkers, BlockNumber nblocks)
{
	TargetInfo *t = b->target;
	Manifest   *m = b->manifest;
	int			nparticipants = nworkers + 1;
	ParallelContext *pcxt;
	StageParams *params;
	int64	   *counts;
	Size		objsize = objects_size(m);
	Size		counts_size = sizeof(int64) * 2 * m->nentries * nworkers;
	dsm_segment *seg;
	StageShared *shared;
	SortCoordinateData coordinate;
	int			launched;
	SharedTuplestoreAccessor *spool;
	StringInfoData target;

	/*
	 * The workers use the target as the leader resolved it under its lock,
	 * never a fresh read of the registration or of the table's columns: all
	 * participants must build the same sort tuples.
	 */
	initStringInfo(&target);
	target_serialize(t, &target);

	/*
	 * Every participant reads with one snapshot, taken now as a serial read
	 * would take it (after a command counter increment), since none may be
	 * taken in parallel mode.
	 */
	CommandCounterIncrement();
	PushActiveSnapshot(GetTransactionSnapshot());
	EnterParallelMode();
	pcxt = CreateParallelContext("reconcile", "reconcile_stage_worker", nworkers);
	shm_toc_estimate_chunk(&pcxt->estimator, sizeof(StageParams));
	shm_toc_estimate_chunk(&pcxt->estimator, objsize);
	shm_toc_estimate_chunk(&pcxt->estimator, counts_size);
	shm_toc_estimate_chunk(&pcxt->estimator, target.len);
	shm_toc_estimate_keys(&pcxt->estimator, 4);
	InitializeParallelDSM(pcxt);

	seg = create_shared_segment(nparticipants, nblocks, &shared, &spool);
	params = fill_worker_toc(pcxt, b, seg, nparticipants, objsize, counts_size, &target,
							 &counts);

	LaunchParallelWorkers(pcxt);
	launched = pcxt->nworkers_launched;
	ereport(DEBUG1,
			(errmsg_internal("batch %s: %d of %d parallel workers started to read staged relation \"%s\"",
							 b->batch_id, launched, nworkers, relation_display_name(b->staged))));
	if (launched == 0)
	{
		DestroyParallelContext(pcxt);
		ExitParallelMode();
		PopActiveSnapshot();
		dsm_detach(seg);
		return false;			/* the caller reads serially */
	}
	progress_workers(launched);
	pause_point("reading");		/* tests: a batch held while its workers read */

	leader_read_chunks(b, r, shared, spool, sql, params->sortmem);

	WaitForParallelWorkersToFinish(pcxt);
	add_worker_counts(b, counts, launched);
	DestroyParallelContext(pcxt);
	ExitParallelMode();
	PopActiveSnapshot();
	progress_rows(pg_atomic_read_u64(&shared->nread));

	/* The merge of every participant's runs, read by merge.c. */
	coordinate.isWorker = false;
	coordinate.nParticipants = launched + 1;
	b->sort = sort_begin(t, b->sortdesc, work_mem, &coordinate);
	b->stage_seg = seg;

	/* Now the rejects can be written. */
	write_spooled_rejects(b, r, spool);
	return true;
}

/* A parallel worker's share of the read; see "parallel reading" above. */
void
reconcile_stage_worker(dsm_segment *pseg, shm_toc *toc)
{
	StageParams *params = shm_toc_lookup(toc, STAGE_KEY_PARAMS, false);
	char	   *objects = shm_toc_lookup(toc, STAGE_KEY_OBJECTS, false);
	int64	   *counts = shm_toc_lookup(toc, STAGE_KEY_COUNTS, false);
	char	   *target = shm_toc_lookup(toc, STAGE_KEY_TARGET, false);
	int			w = ParallelWorkerNumber;
	dsm_segment *seg;
	StageShared *shared;
	BatchState *b = palloc0(sizeof(BatchState));
	Manifest   *m = palloc0(sizeof(Manifest));
	StageReader r;
	StringInfoData sql;
	Relation	srel;
	SortCoordinateData coordinate;

	seg = dsm_attach(params->handle);
	if (seg == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("could not map the shared memory of a parallel batch read")));
	shared = dsm_segment_address(seg);

	/*
	 * The manifest's object keys and version ids, in the leader's order: an
	 * object's index is the same.  The leader has checked them
	 * (repeated_object: stage_prepare).
	 */
	m->nentries = params->nobjects;
	m->entries = palloc0(sizeof(ManifestEntry) * Max(m->nentries, 1));
	m->repeated_object = -1;
	for (int i = 0; i < m->nentries; i++)
	{
		m->entries[i].object_key = objects;
		objects += strlen(objects) + 1;
		m->entries[i].version_id = objects;
		objects += strlen(objects) + 1;
	}
	b->manifest = m;
	b->batch_id = "";			/* rejects are spooled: the leader names the batch */
	b->staged = params->staged;
	b->counts = palloc0(sizeof(int64) * DISP_COUNT * Max(m->nentries, 1));
	b->staged_rows = palloc0(sizeof(int64) * Max(m->nentries, 1));

	SPI_connect();
	b->target = target_deserialize(target);
	b->sortdesc = sort_desc_create(b->target);
	memset(&r, 0, sizeof(r));
	srel = relation_open(params->staged, AccessShareLock);
	initStringInfo(&sql);
	stage_prepare(b, srel, &r, &sql);
	relation_close(srel, AccessShareLock);

	SharedFileSetAttach(&shared->fileset, seg);
	r.spool = sts_attach(SHARED_SPOOL(shared), w + 1, &shared->fileset);
	r.spooldesc = spool_desc_create();
	r.spoolcxt = CurrentMemoryContext;
	r.shared_nread = &shared->nread;
	tuplesort_attach_shared(SHARED_SORT(shared), seg);
	coordinate.isWorker = true;
	coordinate.nParticipants = -1;
	coordinate.sharedsort = SHARED_SORT(shared);
	r.sort = sort_begin(b->target, b->sortdesc, params->sortmem, &coordinate);

	stage_scan_chunks(&r, shared, sql.data);
	tuplesort_performsort(r.sort);
	tuplesort_end(r.sort);
	sts_end_write(r.spool);
	stage_finish(&r);

	counts += (Size) w * 2 * m->nentries;
	for (int i = 0; i < m->nentries; i++)
	{
		counts[i] = b->staged_rows[i];
		counts[m->nentries + i] = b->counts[i][DISP_REJECTED];
	}
	SPI_finish();
	dsm_detach(seg);
}

/*
 * Read every staged row of the batch once.  On return the valid rows are
 * in batch->sort (not yet sorted), rejects are written, and per-object
 * staged row counts are known.
 */
void
stage_read(BatchState *b)
{
	Relation	srel = relation_open(b->staged, AccessShareLock);
	StageReader r;
	StringInfoData sql;
	int			nworkers;
	BlockNumber nblocks = 0;

	memset(&r, 0, sizeof(r));
	b->sortdesc = sort_desc_create(b->target);
	initStringInfo(&sql);
	stage_prepare(b, srel, &r, &sql);
	check_unknown_columns(b, srel);
	b->staged_versions = r.has_version_id;
	nworkers = stage_parallel_workers(b, srel, &r, &nblocks);
	relation_close(srel, AccessShareLock);

	if (nworkers == 0 || !stage_read_parallel(b, &r, sql.data, nworkers, nblocks))
	{
		Oid			argtype = TEXTARRAYOID;
		Datum		object_keys = manifest_array(b->manifest, MANIFEST_OBJECT_KEY);
		SPIPlanPtr	plan;

		b->sort = sort_begin(b->target, b->sortdesc, work_mem, NULL);
		r.sort = b->sort;
		/* Read once: planned for the manifest's object keys themselves. */
		appendStringInfoString(&sql, " WHERE s.object_key::pg_catalog.text"
							   " OPERATOR(pg_catalog.=) ANY ($1)");
		plan = SPI_prepare_cursor(sql.data, 1, &argtype, CURSOR_OPT_NO_SCROLL);
		if (plan == NULL)
			elog(ERROR, "could not prepare the read of the staged relation: %s",
				 SPI_result_code_string(SPI_result));
		r.rejects = stage_rejects_buffer();
		stage_scan(&r, plan, &object_keys, false);
		SPI_freeplan(plan);
		progress_rows(r.nread);
		state_rows_flush(r.rejects);
	}
	stage_finish(&r);
}

/* Give up the shared memory of a parallel read, once its sort is done. */
void
stage_release(BatchState *b)
{
	if (b->stage_seg != NULL)
		dsm_detach(b->stage_seg);
	b->stage_seg = NULL;
}

/*
 * The staged relation as a batch reads it, without reading it: the same
 * checks as stage_read (required columns, source_row's type, object
 * versions, unknown columns) and, per key, version and payload column in
 * that order, whether its staged type differs from the target's (then it
 * is cast through its text form) and which type it has.  For the Citus
 * merge on the workers (citus_merge.c), which casts where the rows are.
 */
void
stage_describe(BatchState *b, StagedShape *shape)
{
	Relation	srel = relation_open(b->staged, AccessShareLock);
	StageReader r;
	StringInfoData sql;

	memset(&r, 0, sizeof(r));
	b->sortdesc = sort_desc_create(b->target);
	initStringInfo(&sql);
	stage_prepare(b, srel, &r, &sql);
	check_unknown_columns(b, srel);
	b->staged_versions = r.has_version_id;
	shape->ncols = r.ncols;
	shape->convert = palloc0(sizeof(bool) * Max(r.ncols, 1));
	shape->staged_types = palloc0(sizeof(Oid) * Max(r.ncols, 1));
	for (int i = 0; i < r.ncols; i++)
	{
		shape->convert[i] = r.cols[i].convert;
		shape->staged_types[i] = TupleDescAttr(RelationGetDescr(srel),
											   get_attnum(b->staged, r.cols[i].tcol->name) - 1)->atttypid;
	}
	shape->has_hash = r.hash_pos > 0;
	shape->hash_type = r.hash_type;
	shape->has_version_id = r.has_version_id;
	relation_close(srel, AccessShareLock);
	stage_finish(&r);
}
