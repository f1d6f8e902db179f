/*
 * stage.c
 *		Read the staged rows of a batch once: cast, reject, hash and sort.
 *
 * Each staged row of the batch is read exactly once, through one cursor
 * over the staged relation with the caller's rights.  A row that cannot be
 * loaded (a value that does not cast, a NULL key, a bad version or
 * operation) is recorded in reconcile.rejects with every problem found and
 * goes no further.  The others are cast to the target's types, given their
 * payload hash and fed to a tuplesort (key, version descending, object,
 * source row), which stays within work_mem and spills beyond it; merge.c
 * reads the sorted stream.
 *
 * The payload hash is the SHA-256 of the JSON text
 *		[v1,v2,...,vn,deleted]
 * where v1..vn are the payload columns in the target's column order, each
 * a JSON string holding the value's PostgreSQL text form (or null), and
 * deleted is true for a DELETE and false for an UPSERT.  Text forms are
 * produced with DateStyle ISO, TimeZone UTC, IntervalStyle postgres,
 * extra_float_digits 1 and bytea_output hex whatever the session says, and
 * object names (regclass and the other reg* types) with search_path
 * pg_catalog, so schema-qualified: the same payload has the same hash in
 * every session.
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_opfamily.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "tcop/pquery.h"
#include "pgtime.h"
#include "utils/builtins.h"
#include "utils/bytea.h"
#include "utils/datetime.h"
#include "utils/float.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/resowner.h"

#include "reconcile.h"
#include "rules.h"

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
} StagedColumn;

typedef struct StageReader
{
	DestReceiver dest;			/* first: the executor hands rows to it */
	BatchState *batch;
	int			ncols;			/* keys, version, payload, in that order */
	StagedColumn *cols;
	int			source_row_pos;
	int			hash_pos;		/* 0 if the staged relation has none */
	Oid			hash_type;
	FmgrInfo	hash_out;
	StateBuffer *rejects;
	TupleTableSlot *slot;
	MemoryContext rowcxt;
	ResourceOwner owner;		/* the batch's, not the cursor's */
	Sha256Ctx  *sha;
	int64		nread;
} StageReader;

/* ---- canonical text forms for hashing ---- */

typedef struct OutputSettings
{
	int			date_style;
	int			date_order;
	int			interval_style;
	int			float_digits;
	int			bytea;
	pg_tz	   *tz;
} OutputSettings;

static void
output_settings_pin(OutputSettings *saved)
{
	static pg_tz *utc = NULL;

	if (utc == NULL)
		utc = pg_tzset("UTC");
	saved->date_style = DateStyle;
	saved->date_order = DateOrder;
	saved->interval_style = IntervalStyle;
	saved->float_digits = extra_float_digits;
	saved->bytea = bytea_output;
	saved->tz = session_timezone;
	DateStyle = USE_ISO_DATES;
	DateOrder = DATEORDER_YMD;
	IntervalStyle = INTSTYLE_POSTGRES;
	extra_float_digits = 1;
	bytea_output = BYTEA_OUTPUT_HEX;
	session_timezone = utc;
}

static void
output_settings_restore(OutputSettings *saved)
{
	DateStyle = saved->date_style;
	DateOrder = saved->date_order;
	IntervalStyle = saved->interval_style;
	extra_float_digits = saved->float_digits;
	bytea_output = saved->bytea;
	session_timezone = saved->tz;
}

/*
 * Append str as a JSON string, byte for byte what escape_json writes, but
 * copying the runs between characters to escape at once rather than one
 * character at a time: every payload value of every staged row goes
 * through here.
 */
static void
append_json_string(StringInfo buf, const char *str)
{
	const char *run = str;
	const char *p;

	appendStringInfoChar(buf, '"');
	for (p = str; *p; p++)
	{
		unsigned char c = (unsigned char) *p;

		if (c >= ' ' && c != '"' && c != '\\')
			continue;
		appendBinaryStringInfo(buf, run, p - run);
		run = p + 1;
		switch (c)
		{
			case '\b':
				appendStringInfoString(buf, "\\b");
				break;
			case '\f':
				appendStringInfoString(buf, "\\f");
				break;
			case '\n':
				appendStringInfoString(buf, "\\n");
				break;
			case '\r':
				appendStringInfoString(buf, "\\r");
				break;
			case '\t':
				appendStringInfoString(buf, "\\t");
				break;
			case '"':
				appendStringInfoString(buf, "\\\"");
				break;
			case '\\':
				appendStringInfoString(buf, "\\\\");
				break;
			default:
				appendStringInfo(buf, "\\u%04x", (int) c);
				break;
		}
	}
	appendBinaryStringInfo(buf, run, p - run);
	appendStringInfoChar(buf, '"');
}

void
payload_hash_compute(TargetInfo *t, Datum *values, bool *isnull,
					 bool is_delete, Sha256Ctx *sha, uint8 *digest)
{
	StringInfoData buf;
	OutputSettings saved;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	output_settings_pin(&saved);
	if (t->payload_names_objects)
	{
		OverrideSearchPath path = {NIL, true, false, 0};

		PushOverrideSearchPath(&path);
	}
	PG_TRY();
	{
		for (int i = 0; i < t->npayload; i++)
		{
			if (isnull[i])
				appendStringInfoString(&buf, "null");
			else
				append_json_string(&buf, OutputFunctionCall(&t->payload[i].out, values[i]));
			appendStringInfoChar(&buf, ',');
		}
	}
	PG_FINALLY();
	{
		output_settings_restore(&saved);
		if (t->payload_names_objects)
			PopOverrideSearchPath();
	}
	PG_END_TRY();
	appendStringInfoString(&buf, is_delete ? "true]" : "false]");
	reconcile_sha256_with(sha, buf.data, buf.len, digest);
	pfree(buf.data);
}

/* The key as a JSON object: numbers and booleans as such, the rest as text. */
char *
key_to_json(TargetInfo *t, Datum *values)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int i = 0; i < t->nkeys; i++)
	{
		TargetColumn *k = &t->keys[i];
		char	   *text = OutputFunctionCall(&k->out, values[i]);

		if (i > 0)
			appendStringInfoChar(&buf, ',');
		escape_json(&buf, k->name);
		appendStringInfoChar(&buf, ':');
		if (k->typid == INT2OID || k->typid == INT4OID || k->typid == INT8OID ||
			(k->typid == NUMERICOID && strspn(text, "-0123456789.") == strlen(text)))
			appendStringInfoString(&buf, text);
		else if (k->typid == BOOLOID)
			appendStringInfoString(&buf, text[0] == 't' ? "true" : "false");
		else
			escape_json(&buf, text);
	}
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

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
static bool
input_value(TargetColumn *col, char *text, Datum *out, char **error)
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
	Datum		values[7];
	bool		isnull[7] = {false};

	values[0] = CStringGetTextDatum(r->batch->batch_id);
	values[1] = ObjectIdGetDatum(r->batch->target->relid);
	values[2] = CStringGetTextDatum(object_key);
	values[3] = Int64GetDatum(source_row);
	isnull[3] = source_row_null;
	values[4] = column ? CStringGetTextDatum(column) : (Datum) 0;
	isnull[4] = (column == NULL);
	values[5] = raw ? CStringGetTextDatum(raw) : (Datum) 0;
	isnull[5] = (raw == NULL);
	values[6] = CStringGetTextDatum(reason);
	state_buffer_add(r->rejects, values, isnull);
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

/* Process one staged row: reject it, or cast, hash and sort it. */
static void
stage_row(StageReader *r, TupleTableSlot *in)
{
	BatchState *b = r->batch;
	TargetInfo *t = b->target;
	TupleTableSlot *slot = r->slot;
	Datum	   *out = slot->tts_values;
	bool	   *outnull = slot->tts_isnull;
	bool		isnull;
	char	   *object_key;
	int			obj;
	int64		source_row = 0;
	bool		source_row_null;
	bool		is_delete = false;
	int			problems = 0;
	Datum		d;
	int64		version = 0;
	Datum	   *payload;
	bool	   *payload_null;
	uint8		digest[RECONCILE_SHA256_LEN];
	bool		have_digest = false;

	slot_getallattrs(in);
	object_key = TextDatumGetCString(GETARG(1, &isnull));
	obj = manifest_find(b->manifest, object_key);
	if (obj < 0)
		return;					/* matched under a non-bytewise collation */
	b->staged_rows[obj]++;

	d = GETARG(r->source_row_pos, &source_row_null);
	if (source_row_null)
	{
		add_reject(r, object_key, true, 0, "source_row", NULL, "source_row is null");
		problems++;
	}
	else
	{
		Oid			type = TupleDescAttr(in->tts_tupleDescriptor, r->source_row_pos - 1)->atttypid;

		source_row = type == INT8OID ? DatumGetInt64(d) :
			type == INT4OID ? DatumGetInt32(d) : DatumGetInt16(d);
	}

#define REJECT(column, raw, ...) \
	do { \
		add_reject(r, object_key, source_row_null, source_row, (column), (raw), \
				   psprintf(__VA_ARGS__)); \
		problems++; \
	} while (0)

	d = GETARG(3, &isnull);
	if (isnull)
		REJECT("operation", NULL, "operation is null");
	else
	{
		char	   *op = TextDatumGetCString(d);

		if (strcmp(op, "UPSERT") == 0)
			is_delete = false;
		else if (strcmp(op, "DELETE") == 0)
			is_delete = true;
		else
			REJECT("operation", op, "unknown operation, expected UPSERT or DELETE");
	}

	/* Keys, version and payload land in the sort tuple's columns. */
	payload = &out[SORT_ATT_FIRST_KEY - 1 + t->nkeys];
	payload_null = &outnull[SORT_ATT_FIRST_KEY - 1 + t->nkeys];
	for (int i = 0; i < r->ncols; i++)
	{
		StagedColumn *sc = &r->cols[i];
		TargetColumn *col = sc->tcol;
		bool		is_key = i < t->nkeys;
		bool		is_version = i == t->nkeys;
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

		d = GETARG(sc->pos, destnull);
		if (*destnull)
		{
			if (is_key)
				REJECT(col->name, NULL, "key column is null");
			else if (is_version)
				REJECT(col->name, NULL, "version is null");
			continue;
		}
		if (!sc->convert)
			*dest = d;
		else
		{
			raw = OutputFunctionCall(&sc->staged_out, d);
			if (!input_value(col, raw, dest, &error))
			{
				if (is_version)
					REJECT(col->name, raw, "version is not a valid %s: %s",
						   format_type_be(col->typid), error);
				else
					REJECT(col->name, raw, "%s", error);
				continue;
			}
		}
		if (is_version)
		{
			version = col->typid == INT8OID ? DatumGetInt64(value) :
				col->typid == INT4OID ? DatumGetInt32(value) : DatumGetInt16(value);
			if (version < 0)
				REJECT(col->name, raw ? raw : psprintf(INT64_FORMAT, version),
					   "version is negative");
		}
	}

	if (r->hash_pos > 0)
	{
		d = GETARG(r->hash_pos, &isnull);
		if (!isnull)
		{
			char	   *raw = NULL;

			if (parse_staged_hash(r, d, digest, &raw))
				have_digest = true;
			else
				REJECT("payload_hash", raw,
					   "payload_hash is not a SHA-256 digest (32 bytes, or 64 hex digits)");
		}
	}
#undef REJECT

	/* Data-quality rules (rules.c): a drop rule violated rejects the row. */
	if (b->rules != NULL)
	{
		const char **dropped;
		int			ndropped = batch_rules_row(b->rules, in, problems > 0, &dropped);

		for (int i = 0; i < ndropped; i++)
			add_reject(r, object_key, source_row_null, source_row, NULL, NULL,
					   psprintf("violates drop rule \"%s\"", dropped[i]));
		problems += ndropped;
	}

	if (problems > 0)
	{
		b->counts[obj][DISP_REJECTED]++;
		b->totals[DISP_REJECTED]++;
		return;
	}

	if (!have_digest)
		payload_hash_compute(t, payload, payload_null, is_delete, r->sha, digest);

	{
		bytea	   *h = palloc(VARHDRSZ + RECONCILE_SHA256_LEN);

		SET_VARSIZE(h, VARHDRSZ + RECONCILE_SHA256_LEN);
		memcpy(VARDATA(h), digest, RECONCILE_SHA256_LEN);
		out[SORT_ATT_HASH - 1] = PointerGetDatum(h);
	}
	out[SORT_ATT_OBJECT - 1] = Int32GetDatum(obj);
	out[SORT_ATT_SOURCE_ROW - 1] = Int64GetDatum(source_row);
	out[SORT_ATT_DELETE - 1] = BoolGetDatum(is_delete);
	out[SORT_ATT_VERSION - 1] = Int64GetDatum(version);
	for (int i = 0; i < SORT_ATT_FIRST_KEY - 1; i++)
		outnull[i] = false;
	ExecStoreVirtualTuple(slot);
	tuplesort_puttupleslot(b->sort, slot);
	ExecClearTuple(slot);
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
		progress_rows(r->nread);
	CurrentResourceOwner = portal_owner;
	MemoryContextSwitchTo(old);
	MemoryContextReset(r->rowcxt);
	return true;
}

/* Find a column of the staged relation by name. */
static int
staged_column(Relation srel, const char *name, bool required, Oid *type)
{
	TupleDesc	desc = RelationGetDescr(srel);

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
		{
			if (type)
				*type = att->atttypid;
			return i + 1;
		}
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

static TupleDesc
sort_desc_create(TargetInfo *t)
{
	TupleDesc	desc = CreateTemplateTupleDesc(SORT_ATT_FIRST_KEY - 1 + t->nkeys + t->npayload);
	AttrNumber	a = SORT_ATT_FIRST_KEY;

	TupleDescInitEntry(desc, SORT_ATT_OBJECT, "object", INT4OID, -1, 0);
	TupleDescInitEntry(desc, SORT_ATT_SOURCE_ROW, "source_row", INT8OID, -1, 0);
	TupleDescInitEntry(desc, SORT_ATT_DELETE, "is_delete", BOOLOID, -1, 0);
	TupleDescInitEntry(desc, SORT_ATT_VERSION, "version", INT8OID, -1, 0);
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
	return desc;
}

/* Sort by key, then version descending, then object and source row. */
static Tuplesortstate *
sort_begin(TargetInfo *t, TupleDesc desc)
{
	int			nsort = t->nkeys + 3;
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
	atts[n] = SORT_ATT_VERSION;
	ops[n++] = get_opfamily_member(INTEGER_BTREE_FAM_OID, INT8OID, INT8OID,
								   BTGreaterStrategyNumber);
	atts[n] = SORT_ATT_OBJECT;
	ops[n++] = get_opfamily_member(INTEGER_BTREE_FAM_OID, INT4OID, INT4OID,
								   BTLessStrategyNumber);
	atts[n] = SORT_ATT_SOURCE_ROW;
	ops[n++] = get_opfamily_member(INTEGER_BTREE_FAM_OID, INT8OID, INT8OID,
								   BTLessStrategyNumber);
	return tuplesort_begin_heap(desc, nsort, atts, ops, colls, nullsfirst,
								work_mem, NULL, TUPLESORT_NONE);
}

/*
 * Read every staged row of the batch once.  On return the valid rows are
 * in batch->sort (not yet sorted), rejects are written, and per-object
 * staged row counts are known.
 */
void
stage_read(BatchState *b)
{
	TargetInfo *t = b->target;
	Relation	srel = relation_open(b->staged, AccessShareLock);
	char	   *srelname = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(srel)),
													  RelationGetRelationName(srel));
	StageReader r;
	StringInfoData sql;
	Oid			type;
	Oid			argtype = TEXTARRAYOID;
	Datum		arg;
	ArrayBuildState *keys;
	Portal		portal;

	memset(&r, 0, sizeof(r));
	r.batch = b;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT s.object_key::pg_catalog.text, s.source_row,"
						   " s.operation::pg_catalog.text");
	staged_column(srel, "object_key", true, NULL);
	staged_column(srel, "source_row", true, &type);
	if (type != INT8OID && type != INT4OID && type != INT2OID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("column \"source_row\" of staged relation \"%s\" must be an integer, not %s",
						RelationGetRelationName(srel), format_type_be(type))));
	staged_column(srel, "operation", true, NULL);
	r.source_row_pos = 2;

	r.ncols = t->nkeys + 1 + t->npayload;
	r.cols = palloc0(sizeof(StagedColumn) * r.ncols);
	for (int i = 0; i < r.ncols; i++)
	{
		StagedColumn *sc = &r.cols[i];
		TupleDesc	sdesc = RelationGetDescr(srel);
		Form_pg_attribute att;
		int			attno;

		sc->tcol = i < t->nkeys ? &t->keys[i] :
			i == t->nkeys ? &t->version : &t->payload[i - t->nkeys - 1];
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
		}
		appendStringInfo(&sql, ", s.%s", quote_identifier(sc->tcol->name));
	}
	if (staged_column(srel, "payload_hash", false, &type) > 0)
	{
		Oid			outfunc;
		bool		varlena;

		r.hash_pos = 4 + r.ncols;
		r.hash_type = type;
		getTypeOutputInfo(type, &outfunc, &varlena);
		fmgr_info(outfunc, &r.hash_out);
		appendStringInfoString(&sql, ", s.payload_hash");
	}
	/* Data-quality rules (rules.c): one boolean column per row rule. */
	if (b->rules != NULL)
		batch_rules_append_columns(b->rules, &sql, (r.hash_pos > 0 ? r.hash_pos : 3 + r.ncols) + 1);
	appendStringInfo(&sql, " FROM %s AS s WHERE s.object_key::pg_catalog.text"
					 " OPERATOR(pg_catalog.=) ANY ($1)", srelname);
	relation_close(srel, AccessShareLock);

	keys = initArrayResult(TEXTOID, CurrentMemoryContext, false);
	for (int i = 0; i < b->manifest->nentries; i++)
		keys = accumArrayResult(keys, CStringGetTextDatum(b->manifest->entries[i].object_key),
								false, TEXTOID, CurrentMemoryContext);
	arg = makeArrayResult(keys, CurrentMemoryContext);

	b->sortdesc = sort_desc_create(t);
	b->sort = sort_begin(t, b->sortdesc);
	r.slot = MakeSingleTupleTableSlot(b->sortdesc, &TTSOpsVirtual);
	{
		static const Oid reject_types[7] = {TEXTOID, REGCLASSOID, TEXTOID, INT8OID,
		TEXTOID, TEXTOID, TEXTOID};

		r.rejects = state_buffer_create("INSERT INTO reconcile.rejects (batch_id, target,"
										" object_key, source_row, column_name, raw_value, reason)"
										" SELECT * FROM ROWS FROM (pg_catalog.unnest($1), pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4), pg_catalog.unnest($5), pg_catalog.unnest($6), pg_catalog.unnest($7))",
										7, reject_types);
	}

	/*
	 * The executor hands each row straight to stage_receive(), without the
	 * copy SPI_cursor_fetch makes.  Rows come in chunks so that the rejects
	 * buffer is flushed between them, never while the cursor's query runs.
	 */
	portal = SPI_cursor_open_with_args(NULL, sql.data, 1, &argtype, &arg, NULL,
									   false, CURSOR_OPT_NO_SCROLL);
	r.rowcxt = AllocSetContextCreate(CurrentMemoryContext, "reconcile staged row",
									 ALLOCSET_DEFAULT_SIZES);
	r.sha = reconcile_sha256_begin();
	r.owner = CurrentResourceOwner;
	receiver_init(&r.dest, stage_receive);
	while (PortalRunFetch(portal, FETCH_FORWARD, FETCH_ROWS, &r.dest) > 0)
		state_buffer_flush(r.rejects);
	progress_rows(r.nread);
	SPI_cursor_close(portal);
	MemoryContextDelete(r.rowcxt);
	reconcile_sha256_end(r.sha);
	state_buffer_flush(r.rejects);
	ExecDropSingleTupleTableSlot(r.slot);
}
