/*
 * receipt.c
 *		Receipts, loaded objects and cursors: what makes a replay a no-op.
 *
 * A committed batch leaves one receipt (keyed by its target and its batch
 * id), one row per object it loaded and, when it names a source, the
 * source's cursor, all in the transaction that merged it.  A manifest
 * whose batch id has a receipt for the same target is a replay and gets
 * the stored receipt back; the same manifest may be committed into other
 * targets, each with its receipt.  The state tables are written as their
 * owner, set-based (see state.c).
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/toast_compression.h"
#include "access/toast_internals.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "common/jsonbuild.h"
#include "loader.h"
#include "rules/rules.h"
#include "common/state_schema.h"

/*
 * The receipt's checksum: sum of the written payload hashes mod 2^256
 * (merge.c adds its winners, snapshot.c a snapshot's tombstones).
 */
void
batch_checksum_add(BatchState *b, const uint8 *hash)
{
	int			carry = 0;

	for (int i = RECONCILE_SHA256_LEN - 1; i >= 0; i--)
	{
		int			sum = b->checksum[i] + hash[i] + carry;

		b->checksum[i] = sum & 0xff;
		carry = sum >> 8;
	}
}

/*
 * Under REPEATABLE READ or SERIALIZABLE the transaction may not see a
 * receipt that a concurrent session committed while this one waited for
 * the target's lock; look with the latest snapshot too.
 */
static bool
receipt_committed_concurrently(const char *batch_id, Oid target)
{
	SPIPlanPtr	plan;
	Oid			types[2] = {REGCLASSOID, TEXTOID};
	Datum		args[2];
	int			ret;

	args[0] = ObjectIdGetDatum(target);
	args[1] = CStringGetTextDatum(batch_id);
	plan = SPI_prepare("SELECT 1 FROM reconcile.receipts"
					   " WHERE target OPERATOR(pg_catalog.=) $1"
					   " AND batch_id OPERATOR(pg_catalog.=) $2",
					   2, types);
	if (plan == NULL)
		elog(ERROR, "could not prepare the look-up of reconcile.receipts");
	ret = SPI_execute_snapshot(plan, args, NULL, GetLatestSnapshot(),
							   InvalidSnapshot, true, false, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "could not read reconcile.receipts");
	SPI_freeplan(plan);
	return SPI_processed > 0;
}

/*
 * Look the batch up in the target's receipts.  When it has one, fill
 * values/isnull with it (status 'replayed') and return true.  A batch is
 * identified by its target and its batch id: a manifest committed into
 * another table, by whichever role, is not this target's business.
 */
bool
receipt_lookup(const char *batch_id, Oid target, Datum *values, bool *isnull)
{
	StateUser	su;
	Datum		args[2];
	Oid			types[2] = {REGCLASSOID, TEXTOID};
	int			ret;
	int			natts;

	args[0] = ObjectIdGetDatum(target);
	args[1] = CStringGetTextDatum(batch_id);
	state_user_enter(&su);
	/* deleted_absent came with 1.2 (snapshot batches); 1.1's receipts read 0. */
	natts = state_version() >= STATE_1_2 ? RECEIPT_NATTS : RECEIPT_NATTS - 1;
	ret = SPI_execute_with_args(psprintf("SELECT batch_id, target, 'replayed', inserted, updated,"
										 " deleted, unchanged, stale, duplicates, conflicts, rejected,"
										 " checksum, committed_at, staged_rows, objects%s"
										 " FROM reconcile.receipts WHERE target OPERATOR(pg_catalog.=) $1"
										 " AND batch_id OPERATOR(pg_catalog.=) $2",
										 natts == RECEIPT_NATTS ? ", deleted_absent" : ""),
								2, types, args, NULL, false, 1);
	if (ret != SPI_OK_SELECT)
		elog(ERROR, "could not read reconcile.receipts");
	if (SPI_processed == 0 && IsolationUsesXactSnapshot() &&
		receipt_committed_concurrently(batch_id, target))
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access: batch %s was committed by a concurrent transaction",
						batch_id),
				 errhint("Retry the transaction; the retry returns the stored receipt with status 'replayed'.")));
	state_user_leave(&su);

	if (SPI_processed == 0)
		return false;

	for (int i = 0; i < natts; i++)
		values[i] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, i + 1, &isnull[i]);
	for (int i = natts; i < RECEIPT_NATTS; i++)
		values[i] = Int64GetDatum(0), isnull[i] = false;
	return true;
}

/*
 * An object version, once committed, cannot come back with other content:
 * that would mean the source rewrote history.
 */
void
receipt_check_objects(BatchState *b)
{
	StateUser	su;
	Oid			types[4] = {REGCLASSOID, TEXTARRAYOID, TEXTARRAYOID, TEXTARRAYOID};
	Datum		args[4];

	args[0] = ObjectIdGetDatum(b->target->relid);
	args[1] = manifest_array(b->manifest, MANIFEST_OBJECT_KEY);
	args[2] = manifest_array(b->manifest, MANIFEST_VERSION_ID);
	args[3] = manifest_array(b->manifest, MANIFEST_CONTENT_HASH);
	state_user_enter(&su);
	/*
	 * The join is planned apart from the LIMIT (a materialized CTE): with
	 * it, the planner may expect a difference early and walk
	 * reconcile.batch_objects in index order, rescanning the whole manifest
	 * per row (seen once: over 13 minutes for 34,000 entries of 1,000-byte
	 * keys against 500,001 rows held, in sql/manifest.sql).
	 */
	if (SPI_execute_with_args("WITH d AS MATERIALIZED ("
							  "SELECT m.object_key, m.version_id, o.content_hash AS held_hash, o.batch_id, m.content_hash"
							  " FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3), pg_catalog.unnest($4)) AS m(object_key, version_id, content_hash)"
							  " JOIN reconcile.batch_objects AS o"
							  " ON o.target OPERATOR(pg_catalog.=) $1"
							  " AND o.object_key OPERATOR(pg_catalog.=) m.object_key"
							  " AND o.version_id OPERATOR(pg_catalog.=) m.version_id"
							  " WHERE o.content_hash OPERATOR(pg_catalog.<>) m.content_hash)"
							  " SELECT * FROM d ORDER BY object_key LIMIT 1",
							  4, types, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read reconcile.batch_objects");
	state_user_leave(&su);
	/* Only this query reads them (object keys: the serial read too). */
	manifest_array_release(b->manifest, MANIFEST_VERSION_ID);
	manifest_array_release(b->manifest, MANIFEST_CONTENT_HASH);
	if (SPI_processed > 0)
	{
		HeapTuple	tup = SPI_tuptable->vals[0];
		TupleDesc	desc = SPI_tuptable->tupdesc;

		ereport(ERROR,
				(errcode(ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION),
				 errmsg("object \"%s\" version \"%s\" was already committed with a different content hash",
						SPI_getvalue(tup, desc, 1), SPI_getvalue(tup, desc, 2)),
				 errdetail("Batch %s loaded it into table \"%s\" with content_hash \"%s\"; manifest of batch %s says \"%s\".",
						   SPI_getvalue(tup, desc, 4), b->target->relname,
						   SPI_getvalue(tup, desc, 3), b->batch_id,
						   SPI_getvalue(tup, desc, 5)),
				 errhint("An object version's content never changes. Give changed content a new version_id.")));
	}
}

/*
 * Per-object counts, as a JSON array in object_key order.  Each object is
 * built in a context reset after it: memory holds the array's bytes only
 * (jsonbuild.c).
 */
static Jsonb *
objects_jsonb(BatchState *b)
{
	JsonbArrayBuilder *ab = jsonb_array_begin(b->manifest->nentries);
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext, "reconcile receipt object",
											  ALLOCSET_SMALL_SIZES);

	for (int i = 0; i < b->manifest->nentries; i++)
	{
		ManifestEntry *e = &b->manifest->entries[i];
		MemoryContext old = MemoryContextSwitchTo(cxt);
		JsonbParseState *st = NULL;
		Jsonb	   *obj;

		CHECK_FOR_INTERRUPTS();
		pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
		jsonb_push_string_field(&st, "object_key", e->object_key);
		jsonb_push_string_field(&st, "version_id", e->version_id);
		jsonb_push_int64_field(&st, "rows", b->staged_rows[i]);
		for (int d = 0; d < DISP_COUNT; d++)
			jsonb_push_int64_field(&st, disposition_names[d], b->counts[i][d]);
		obj = JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, NULL));
		MemoryContextSwitchTo(old);
		jsonb_array_add(ab, obj);
		MemoryContextReset(cxt);
	}
	MemoryContextDelete(cxt);
	return jsonb_array_end(ab);
}

/*
 * reconcile.batch_objects' rows, one per manifest entry, written straight
 * into the heap a thousand at a time with table_multi_insert and their
 * index entries, the way COPY FROM writes (copyfrom.c), not through an
 * INSERT that runs the foreign key's check to reconcile.receipts once per
 * row.  That check is skipped knowingly: the receipt these rows name was
 * inserted just before, in this transaction, and the foreign key stays for
 * what it does on delete (a receipt's rows go with it).  Under schema 1.2
 * the rows carry the object's counts (which 1.1 kept in the receipt's
 * objects document); a column the installed schema lacks is left out.
 * Memory: one flush's values, reset after it.
 */
#define OBJECTS_FLUSH_ROWS 1000

static void
write_batch_objects(BatchState *b, Datum batch_id)
{
	Oid			relid = get_relname_relid("batch_objects", get_namespace_oid("reconcile", false));
	Relation	rel;
	TupleDesc	desc;
	EState	   *estate;
	ResultRelInfo *rri;
	TupleTableSlot **slots;
	CommandId	cid = GetCurrentCommandId(true);
	MemoryContext cxt;
	MemoryContext old;
	AttrNumber	att_batch_id,
				att_target,
				att_object_key,
				att_version_id,
				att_content_hash,
				att_rows;
	AttrNumber	att_counts[DISP_COUNT];
	int			n = 0;

	if (!OidIsValid(relid))
		elog(ERROR, "reconcile.batch_objects is missing");
	rel = table_open(relid, RowExclusiveLock);
	desc = RelationGetDescr(rel);
	att_batch_id = get_attnum(relid, "batch_id");
	att_target = get_attnum(relid, "target");
	att_object_key = get_attnum(relid, "object_key");
	att_version_id = get_attnum(relid, "version_id");
	att_content_hash = get_attnum(relid, "content_hash");
	att_rows = get_attnum(relid, "rows");
	if (att_batch_id <= 0 || att_target <= 0 || att_object_key <= 0 ||
		att_version_id <= 0 || att_content_hash <= 0 || att_rows <= 0)
		elog(ERROR, "reconcile.batch_objects lacks a column of schema 1.0");
	for (int d = 0; d < DISP_COUNT; d++)
		att_counts[d] = state_version() >= STATE_1_2 ?
			get_attnum(relid, disposition_names[d]) : InvalidAttrNumber;

	estate = CreateExecutorState();
	rri = makeNode(ResultRelInfo);
	InitResultRelInfo(rri, rel, 1, NULL, 0);
	ExecOpenIndices(rri, false);
	slots = palloc(sizeof(TupleTableSlot *) * OBJECTS_FLUSH_ROWS);
	for (int i = 0; i < OBJECTS_FLUSH_ROWS; i++)
		slots[i] = table_slot_create(rel, NULL);
	cxt = AllocSetContextCreate(CurrentMemoryContext, "reconcile batch objects",
								ALLOCSET_DEFAULT_SIZES);

	for (int i = 0; i < b->manifest->nentries; i++)
	{
		ManifestEntry *e = &b->manifest->entries[i];
		TupleTableSlot *slot = slots[n];

		CHECK_FOR_INTERRUPTS();
		old = MemoryContextSwitchTo(cxt);
		ExecClearTuple(slot);
		memset(slot->tts_isnull, true, sizeof(bool) * desc->natts);
		slot->tts_values[att_batch_id - 1] = batch_id;
		slot->tts_values[att_target - 1] = ObjectIdGetDatum(b->target->relid);
		slot->tts_values[att_object_key - 1] = CStringGetTextDatum(e->object_key);
		slot->tts_values[att_version_id - 1] = CStringGetTextDatum(e->version_id);
		slot->tts_values[att_content_hash - 1] = CStringGetTextDatum(e->content_hash);
		slot->tts_values[att_rows - 1] = Int64GetDatum(e->rows);
		slot->tts_isnull[att_batch_id - 1] = false;
		slot->tts_isnull[att_target - 1] = false;
		slot->tts_isnull[att_object_key - 1] = false;
		slot->tts_isnull[att_version_id - 1] = false;
		slot->tts_isnull[att_content_hash - 1] = false;
		slot->tts_isnull[att_rows - 1] = false;
		for (int d = 0; d < DISP_COUNT; d++)
			if (att_counts[d] > 0)
			{
				slot->tts_values[att_counts[d] - 1] = Int64GetDatum(b->counts[i][d]);
				slot->tts_isnull[att_counts[d] - 1] = false;
			}
		ExecStoreVirtualTuple(slot);
		MemoryContextSwitchTo(old);

		if (++n == OBJECTS_FLUSH_ROWS || i == b->manifest->nentries - 1)
		{
			table_multi_insert(rel, slots, n, cid, 0, NULL);
			for (int j = 0; j < n; j++)
			{
				List	   *recheck = ExecInsertIndexTuples(rri, slots[j], estate, false,
															false, NULL, NIL);

				list_free(recheck);
				ExecClearTuple(slots[j]);
			}
			ResetPerTupleExprContext(estate);
			MemoryContextReset(cxt);
			n = 0;
		}
	}

	for (int i = 0; i < OBJECTS_FLUSH_ROWS; i++)
		ExecDropSingleTupleTableSlot(slots[i]);
	pfree(slots);
	MemoryContextDelete(cxt);
	ExecCloseIndices(rri);
	FreeExecutorState(estate);
	table_close(rel, NoLock);
	CommandCounterIncrement();
}

/*
 * A receipt's manifest and objects, compressed here as the toaster would
 * compress them on insert: the INSERT then copies the compressed bytes into
 * its tuple instead of the whole documents (see state_execute_generic), some 470
 * bytes per object of a large manifest.
 */
static Datum
compress_document(Datum value)
{
	Datum		compressed = toast_compress_datum(value, default_toast_compression);

	if (compressed == (Datum) 0)
		return value;
	return compressed;
}

/*
 * Write the receipt, the objects and the cursor; fill values/isnull with
 * the receipt as reconcile_batch returns it.
 */
void
receipt_write(BatchState *b, const char *source, const char *cursor,
			  Datum manifest, Datum *values, bool *isnull)
{
	StateUser	su;
	char		checksum[RECONCILE_HEX_LEN + 1];
	TimestampTz now = GetCurrentTimestamp();
	int64		staged = 0;
	StateRows  *receipt = state_row_create(&state_receipts);
	Datum		batch_id = CStringGetTextDatum(b->batch_id);
	Datum		target = ObjectIdGetDatum(b->target->relid);
	Datum		checksum_text;
	Datum		committed_at = TimestampTzGetDatum(now);
	Datum		warnings;
	bool		warnings_null;	/* rules_attach.c: warn rule counts */
	Datum		objects = (Datum) 0;

	for (int i = 0; i < b->manifest->nentries; i++)
		staged += b->staged_rows[i];
	reconcile_hex(b->checksum, RECONCILE_SHA256_LEN, checksum);

	/*
	 * Schema 1.1 keeps the per-object counts as the receipt's objects
	 * document (NOT NULL there); 1.2 keeps them in reconcile.batch_objects
	 * (write_batch_objects) and leaves the document NULL.
	 */
	if (state_version() < STATE_1_2)
	{
		Jsonb	   *raw_objects = objects_jsonb(b);

		objects = compress_document(JsonbPGetDatum(raw_objects));
		if (objects != JsonbPGetDatum(raw_objects))
			pfree(raw_objects);
	}

	checksum_text = CStringGetTextDatum(checksum);
	state_row_set(receipt, "batch_id", batch_id);
	state_row_set(receipt, "target", target);
	state_row_set_text(receipt, "source", source);
	state_row_set_text(receipt, "cursor", cursor);
	/* A manifest given as a relation is not kept: batch_objects holds it. */
	if (manifest != (Datum) 0)
		state_row_set(receipt, "manifest",
					  VARATT_IS_COMPRESSED(DatumGetPointer(manifest)) ? manifest : compress_document(manifest));
	state_row_set(receipt, "staged_rows", Int64GetDatum(staged));
	for (int d = 0; d < DISP_COUNT; d++)
		state_row_set(receipt, disposition_names[d], Int64GetDatum(b->totals[d]));
	state_row_set(receipt, "checksum", checksum_text);
	state_row_set(receipt, "deleted_absent", Int64GetDatum(b->deleted_absent));
	if (objects != (Datum) 0)
		state_row_set(receipt, "objects", objects);
	state_row_set(receipt, "committed_at", committed_at);
	state_row_set(receipt, "committed_by", CStringGetTextDatum(GetUserNameFromId(GetUserId(), false)));
	warnings = batch_rules_warnings(b->rules, &warnings_null);
	if (!warnings_null)
		state_row_set(receipt, "warnings", warnings);

	state_user_enter(&su);
	state_row_insert(receipt);

	write_batch_objects(b, batch_id);

	if (source != NULL)
	{
		Oid			ctypes[5] = {REGCLASSOID, TEXTOID, TEXTOID, TEXTOID, TIMESTAMPTZOID};
		Datum		cargs[5] = {target, CStringGetTextDatum(source),
		cursor ? CStringGetTextDatum(cursor) : (Datum) 0, batch_id, committed_at};
		char		cnulls[5] = {' ', ' ', cursor ? ' ' : 'n', ' ', ' '};

		if (SPI_execute_with_args("INSERT INTO reconcile.cursors AS c (target, source,"
								  " \"position\", batch_id, updated_at)"
								  " VALUES ($1, $2, $3, $4, $5)"
								  " ON CONFLICT (target, source) DO UPDATE SET"
								  " \"position\" = excluded.\"position\","
								  " batch_id = excluded.batch_id,"
								  " updated_at = excluded.updated_at",
								  5, ctypes, cargs, cnulls, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not write reconcile.cursors");
	}
	state_user_leave(&su);

	values[0] = batch_id;
	values[1] = target;
	values[2] = CStringGetTextDatum("committed");
	for (int d = 0; d < DISP_COUNT; d++)
		values[3 + d] = Int64GetDatum(b->totals[d]);
	values[11] = checksum_text;
	values[12] = committed_at;
	values[13] = Int64GetDatum(staged);
	values[14] = objects;
	values[15] = Int64GetDatum(b->deleted_absent);
	memset(isnull, 0, sizeof(bool) * RECEIPT_NATTS);
	isnull[14] = objects == (Datum) 0;
}
