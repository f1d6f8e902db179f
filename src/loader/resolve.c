/*
 * resolve.c
 *		reconcile_resolve(): the target's owner decides a key that a batch
 *		held back in conflict, and the key is loaded as the batch would have
 *		loaded it.
 *
 * A batch under 'quarantine' holds back every staged row of a conflicting
 * key in reconcile.conflicts, each with its payload (merge.c).  The owner
 * names the payload to keep by its hash: one of the staged payloads at the
 * key's conflicting version (the highest version of the key in conflict),
 * or the target's own payload at that version.  The other payloads at that
 * version are then set aside, and the key's held rows are decided as the
 * batch would have decided them: the highest held version wins, lower ones
 * are stale, and the write is version-monotonic against the target as it
 * is now.  If the target has moved past that version since the batch, the
 * decision is recorded as 'stale' and nothing is written.
 *
 * Like a batch, a resolution locks the target (SHARE ROW EXCLUSIVE, so it
 * waits for batches and they for it) before it reads anything, runs in the
 * caller's transaction, writes the target through the same two write paths
 * (writers.h) with the caller's rights, and records itself in
 * reconcile.resolutions as the state tables' owner.  The same decision
 * again returns the stored one and changes nothing; another decision for
 * the same key is refused.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/snapmgr.h"

#include "common/args.h"
#include "common/citus.h"
#include "payload.h"
#include "probe.h"
#include "removed.h"
#include "common/sha256.h"
#include "common/sqlname.h"
#include "common/state.h"
#include "common/state_schema.h"
#include "decide.h"
#include "ordering.h"
#include "target.h"
#include "writers.h"

PG_FUNCTION_INFO_V1(reconcile_resolve);

/* One held row of the key, from reconcile.conflicts. */
typedef struct HeldRow
{
	Datum		version;		/* in the version column's type */
	bytea	   *staged_hash;
	bytea	   *existing_hash;	/* NULL unless at the target's version */
	bool		deleted;
	Jsonb	   *staged_payload;
	bool		at_target_version;	/* existing_payload is set */
	bool		sparse;			/* a partial batch's sparse row (sparse.c) */
	bytea	   *merged_over;	/* then: the target row's hash it was merged over */
} HeldRow;

#define RESOLVE_NATTS 7			/* 1.1's result; 1.2 adds ordering, written_ordering */
#define RESOLVE_NATTS_1_2 9

static bool
same_version(TargetInfo *t, Datum a, Datum b)
{
	return ordering_compare(t, a, b) == 0;
}

static bool
same_hash(bytea *a, bytea *b)
{
	return a != NULL && b != NULL && VARSIZE_ANY_EXHDR(a) == VARSIZE_ANY_EXHDR(b) &&
		memcmp(VARDATA_ANY(a), VARDATA_ANY(b), VARSIZE_ANY_EXHDR(a)) == 0;
}

static char *
hash_hex(bytea *h)
{
	return text_to_cstring(DatumGetTextPP(DirectFunctionCall2(binary_encode, PointerGetDatum(h),
															  CStringGetTextDatum("hex"))));
}

static Datum
copy_datum(HeapTuple tup, TupleDesc desc, int col, bool *isnull)
{
	Datum		d = SPI_getbinval(tup, desc, col, isnull);

	return *isnull ? (Datum) 0 : PointerGetDatum(PG_DETOAST_DATUM_COPY(d));
}

/*
 * The stored decision for the key, if any, into values (status, version,
 * choice, written_version, outcome, decided_by, decided_at, ordering,
 * written_ordering) and its hash.  version and written_version are NULL
 * for a version type other than an integer; ordering and written_ordering
 * are their text forms for any type.
 */
static bool
read_resolution(Oid relid, text *batch_id, Jsonb *key, Datum *values, bool *nulls,
				bytea **hash)
{
	Oid			types[3] = {REGCLASSOID, TEXTOID, JSONBOID};
	Datum		args[3] = {ObjectIdGetDatum(relid), PointerGetDatum(batch_id), JsonbPGetDatum(key)};
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;

	state_query_latest(psprintf("SELECT version, choice, written_version, outcome, decided_by,"
								" decided_at, payload_hash, %s FROM reconcile.resolutions"
								" WHERE target OPERATOR(pg_catalog.=) $1"
								" AND batch_id OPERATOR(pg_catalog.=) $2"
								" AND key OPERATOR(pg_catalog.=) $3",
								state_version() >= STATE_1_2 ?
								"COALESCE(ordering, version::pg_catalog.text),"
								" COALESCE(written_ordering, written_version::pg_catalog.text)" :
								"version::pg_catalog.text, written_version::pg_catalog.text"),
					   3, types, args, 1);
	if (SPI_processed == 0)
		return false;
	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	values[0] = CStringGetTextDatum("replayed");
	for (int i = 1; i < RESOLVE_NATTS; i++)
		values[i] = SPI_getbinval(tup, desc, i, &nulls[i]);
	values[2] = PointerGetDatum(PG_DETOAST_DATUM_COPY(values[2]));
	values[4] = PointerGetDatum(PG_DETOAST_DATUM_COPY(values[4]));
	values[5] = datumCopy(values[5], false, NAMEDATALEN);
	*hash = (bytea *) DatumGetPointer(copy_datum(tup, desc, 7, &isnull));
	values[7] = copy_datum(tup, desc, 8, &nulls[7]);
	values[8] = copy_datum(tup, desc, 9, &nulls[8]);
	return true;
}

static bool
batch_committed(Oid relid, text *batch_id)
{
	Oid			types[2] = {REGCLASSOID, TEXTOID};
	Datum		args[2] = {ObjectIdGetDatum(relid), PointerGetDatum(batch_id)};

	state_query_latest("SELECT FROM reconcile.receipts WHERE target OPERATOR(pg_catalog.=) $1"
					   " AND batch_id OPERATOR(pg_catalog.=) $2", 2, types, args, 1);
	return SPI_processed > 0;
}

/*
 * The key's held rows, highest version first; *stored_key: the key as held,
 * *pinned: whether it was written under the pinned settings (pinned.c), as
 * reconcile 1.2 writes it (reconcile.conflicts.key_pinned), rather than
 * under the loading session's by 1.1.
 */
static HeldRow *
read_held(TargetInfo *t, Oid relid, text *batch_id, Jsonb *key, int *nrows,
		  Jsonb **stored_key, bool *pinned)
{
	Oid			types[3] = {REGCLASSOID, TEXTOID, JSONBOID};
	Datum		args[3] = {ObjectIdGetDatum(relid), PointerGetDatum(batch_id), JsonbPGetDatum(key)};
	HeldRow    *rows;

	/* Source order here; by version below, with the version type's ordering. */
	state_query_latest(psprintf("SELECT version, staged_hash, existing_hash, deleted, staged_payload,"
					   " existing_payload IS NOT NULL, key, %s, %s, %s FROM reconcile.conflicts"
					   " WHERE target OPERATOR(pg_catalog.=) $1"
					   " AND batch_id OPERATOR(pg_catalog.=) $2"
					   " AND key OPERATOR(pg_catalog.=) $3"
					   " ORDER BY object_key COLLATE pg_catalog.\"C\", source_row",
							   state_version() >= STATE_1_2 ? "key_pinned" : "false",
							   state_version() >= STATE_1_2 ?
							   "present_columns IS NOT NULL, merged_over" : "false, NULL::pg_catalog.bytea",
							   state_version() >= STATE_1_2 ? "ordering" : "NULL::pg_catalog.text"),
					   3, types, args, 0);
	*nrows = (int) SPI_processed;
	rows = palloc0(sizeof(HeldRow) * Max(*nrows, 1));
	for (int i = 0; i < *nrows; i++)
	{
		HeapTuple	tup = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		bool		no_deleted;

		char	   *ordering = SPI_getvalue(tup, desc, 11);

		/* A row held by 1.1 has its integer version only. */
		rows[i].version = ordering != NULL ? ordering_from_text(t, ordering) :
			ordering_from_int64(t, DatumGetInt64(SPI_getbinval(tup, desc, 1, &isnull)));
		rows[i].staged_hash = (bytea *) DatumGetPointer(copy_datum(tup, desc, 2, &isnull));
		rows[i].existing_hash = (bytea *) DatumGetPointer(copy_datum(tup, desc, 3, &isnull));
		rows[i].deleted = DatumGetBool(SPI_getbinval(tup, desc, 4, &no_deleted));
		rows[i].staged_payload = (Jsonb *) DatumGetPointer(copy_datum(tup, desc, 5, &isnull));
		rows[i].at_target_version = DatumGetBool(SPI_getbinval(tup, desc, 6, &isnull));
		rows[i].sparse = DatumGetBool(SPI_getbinval(tup, desc, 9, &isnull));
		rows[i].merged_over = (bytea *) DatumGetPointer(copy_datum(tup, desc, 10, &isnull));
		if (rows[i].staged_payload == NULL || no_deleted)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("key %s of batch %s in table \"%s\" was held back without its payloads",
							JsonbToCString(NULL, &key->root, VARSIZE(key)),
							text_to_cstring(batch_id), relation_display_name(relid)),
					 errdetail("Conflicts recorded before reconcile 1.1 keep their hashes only."),
					 errhint("Load the payload to keep with a new batch at a higher version.")));
		if (i == 0)
		{
			*stored_key = (Jsonb *) DatumGetPointer(copy_datum(tup, desc, 7, &isnull));
			*pinned = DatumGetBool(SPI_getbinval(tup, desc, 8, &isnull));
		}
	}

	/* Highest version first, ties in source order: a stable insertion sort. */
	for (int i = 1; i < *nrows; i++)
	{
		HeldRow		r = rows[i];
		int			j = i;

		for (; j > 0 && ordering_compare(t, rows[j - 1].version, r.version) < 0; j--)
			rows[j] = rows[j - 1];
		rows[j] = r;
	}
	return rows;
}

/*
 * The key's conflicting version: the highest version with two staged
 * hashes, or with a staged hash other than the target's.  Returns false
 * when none is (the batch held the key for another reason: cannot happen).
 */
static bool
conflicting_version(TargetInfo *t, HeldRow *rows, int nrows, Datum *v)
{
	for (int start = 0, end; start < nrows; start = end)
	{
		bool		conflict = false;

		for (end = start; end < nrows && same_version(t, rows[end].version, rows[start].version); end++)
		{
			if (!same_hash(rows[end].staged_hash, rows[start].staged_hash))
				conflict = true;
			if (rows[end].at_target_version &&
				!same_hash(rows[end].staged_hash, rows[end].existing_hash))
				conflict = true;
		}
		if (conflict)
		{
			*v = rows[start].version;
			return true;
		}
	}
	return false;
}

/*
 * Whether the target's row at version v still has the hash (or the NULL
 * hash) it had when the batch held the key back: then a staged payload
 * chosen at v replaces it.
 */
static bool
target_unchanged(TargetInfo *t, HeldRow *rows, int nrows, Datum v, bytea *thash)
{
	for (int i = 0; i < nrows; i++)
		if (same_version(t, rows[i].version, v) && rows[i].at_target_version)
			return rows[i].existing_hash == NULL ? thash == NULL :
				same_hash(rows[i].existing_hash, thash);
	return false;
}

/* The hashes one may choose at version v, for a message. */
static char *
list_choices(TargetInfo *t, HeldRow *rows, int nrows, Datum v)
{
	StringInfoData buf;
	bytea	   *target = NULL;

	initStringInfo(&buf);
	for (int i = 0; i < nrows; i++)
	{
		bool		seen = false;

		if (!same_version(t, rows[i].version, v))
			continue;
		for (int j = 0; j < i; j++)
			seen |= same_version(t, rows[j].version, v) && same_hash(rows[j].staged_hash, rows[i].staged_hash);
		if (!seen)
			appendStringInfo(&buf, "%s\\x%s (staged)", buf.len > 0 ? ", " : "",
							 hash_hex(rows[i].staged_hash));
		if (rows[i].at_target_version && rows[i].existing_hash != NULL)
			target = rows[i].existing_hash;
	}
	if (target != NULL)
		appendStringInfo(&buf, ", \\x%s (the target's)", hash_hex(target));
	return buf.data;
}

/*
 * The held row to load for the owner's choice at the conflicting version v
 * (NULL: the target's own payload is kept), or an error naming the
 * choices; *staged_choice: the choice is a staged payload.  A higher held
 * version, in conflict with nothing, is what loads.
 */
static HeldRow *
choose_row(HeldRow *rows, int nrows, Datum v, bytea *choice, bool *staged_choice,
		   TargetInfo *t, text *batch_id, const char *keytext)
{
	HeldRow    *w = NULL;

	*staged_choice = false;
	for (int i = 0; i < nrows; i++)
	{
		if (same_version(t, rows[i].version, v) && same_hash(rows[i].staged_hash, choice))
		{
			*staged_choice = true;
			if (w == NULL)
				w = &rows[i];
		}
	}
	if (!*staged_choice)
	{
		bool		target_choice = false;

		for (int i = 0; i < nrows; i++)
			target_choice |= same_version(t, rows[i].version, v) && rows[i].at_target_version &&
				same_hash(rows[i].existing_hash, choice);
		if (!target_choice)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("payload hash \\x%s is not one of the payloads of key %s at version %s",
							hash_hex(choice), keytext, ordering_text(t, v)),
					 errdetail("Batch %s held back key %s of table \"%s\" in conflict at version %s; the payloads there are: %s.",
							   text_to_cstring(batch_id), keytext, t->relname, ordering_text(t, v),
							   list_choices(t, rows, nrows, v))));
	}
	if (ordering_compare(t, rows[0].version, v) > 0)
		w = &rows[0];
	return w;
}

/*
 * Decide the chosen row against the target as it is now, as the merge
 * would (decide.c), and write it if it wins: returns the outcome.  At the
 * chosen version the rule sees a conflict; the resolution replaces the
 * target's row there only if it is still the one the batch held the key
 * against.  Under REPEATABLE READ the transaction's snapshot may predate a
 * batch committed while this waited for the lock: a second probe with the
 * latest snapshot turns that into a serialization failure, as in the merge.
 */
static const char *
load_choice(TargetInfo *t, HeldRow *rows, int nrows, HeldRow *w, Datum v,
			bytea *choice, Datum *keys, text *batch_id, const char *keytext)
{
	bool		rr = IsolationUsesXactSnapshot();
	Probe	   *probe = probe_open(t, rr ? GetTransactionSnapshot() : GetLatestSnapshot(), false);
	Probe	   *latest = rr ? probe_open(t, GetLatestSnapshot(), false) : NULL;
	Datum		tversion = (Datum) 0;
	bytea	   *thash = NULL;
	TupleTableSlot *found = probe_find_current(probe, latest, t, keys, &tversion, &thash, true);
	Removed    *removed = NULL;
	bool		found_removed = false;
	Datum		wversion = w ? w->version : v;
	bytea	   *whash = w ? w->staged_hash : choice;
	DecideRow	cand;
	DecideTarget target;
	Disposition disp;
	Decision	d;
	const char *outcome;

	if (latest)
		probe_close(latest);
	/* delete_mode 'remove': a key with no row may have a kept removal (removed.c). */
	if (t->options.delete_remove)
	{
		removed = removed_open(t, rr ? GetTransactionSnapshot() : GetLatestSnapshot(),
							   rr ? GetLatestSnapshot() : NULL);
		found_removed = found == NULL && removed_find(removed, keys, &tversion, &thash);
	}
	cand.version = wversion;
	cand.tombstone = w ? w->deleted : false;
	memcpy(cand.hash, VARDATA_ANY(whash), RECONCILE_SHA256_LEN);
	target.exists = found != NULL || found_removed;
	target.version = tversion;
	target.hash = thash != NULL && VARSIZE_ANY_EXHDR(thash) == RECONCILE_SHA256_LEN ?
		(const uint8 *) VARDATA_ANY(thash) : NULL;
	target.tombstone = false;
	d = decide_key(&cand, 1, &target, ordering_sortsupport(t), &disp);

	if (disp == DISP_STALE)
		outcome = "stale";
	else if (disp == DISP_UNCHANGED)
		outcome = "unchanged";
	else if (d.conflict && (w == NULL || !target_unchanged(t, rows, nrows, wversion, thash)))
		ereport(ERROR,
				(errcode(ERRCODE_UNIQUE_VIOLATION),
				 errmsg("table \"%s\" now holds another payload for key %s at version %s",
						t->relname, keytext, ordering_text(t, tversion)),
				 errdetail("The target's row changed since batch %s held the key back.",
						   text_to_cstring(batch_id)),
				 errhint("See the target's row and decide again with its payload hash, or load a higher version.")));
	else if (w == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" no longer holds the payload to keep for key %s at version %s",
						t->relname, keytext, ordering_text(t, v)),
				 errdetail("The target's row is %s since batch %s held the key back.",
						   found ? psprintf("at version %s", ordering_text(t, tversion)) :
						   found_removed ? psprintf("removed at version %s", ordering_text(t, tversion)) : "gone",
						   text_to_cstring(batch_id)),
				 errhint("Accept one of the staged payloads, or load the payload to keep with a new batch.")));
	else if (w->sparse && (w->merged_over != NULL ?
						   found == NULL || thash == NULL || !same_hash(thash, w->merged_over) :
						   found != NULL && thash != NULL))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" no longer holds the row that the sparse payload to keep for key %s was merged over",
						t->relname, keytext),
				 errdetail("Batch %s held a sparse row of a partial batch, merged over the target's row as it was then; the target's row is %s now.",
						   text_to_cstring(batch_id),
						   found ? psprintf("at version %s", ordering_text(t, tversion)) : "gone"),
				 errhint("Load the change again with a new partial batch, merged over the target's row as it is now.")));
	else
	{
		Winner		winner;
		Writer		writer;
		Datum	   *payload = palloc(sizeof(Datum) * Max(t->npayload, 1));
		bool	   *payload_isnull = palloc(sizeof(bool) * Max(t->npayload, 1));

		payload_from_jsonb(t, w->staged_payload, payload, payload_isnull);
		winner.keys = keys;
		winner.payload = payload;
		winner.payload_isnull = payload_isnull;
		winner.version = w->version;
		winner.tombstone = w->deleted;
		winner.tombstone_payload = false;
		winner.hash = PointerGetDatum(w->staged_hash);
		writer_open(&writer, t, text_to_cstring(batch_id), false);
		if (removed != NULL)
			removed_write(removed, &writer, found, found_removed, tversion, &winner);
		else
			writer_put(&writer, found, tversion, &winner);
		writer_close(&writer);
		outcome = w->deleted ? "deleted" : found ? "updated" : "inserted";
	}
	if (removed != NULL)
		removed_close(removed);
	probe_close(probe);
	return outcome;
}

/*
 * Record the decision in reconcile.resolutions, as the state tables'
 * owner, decided_by the caller, and return it in values.  An integer
 * version is recorded as bigint, as 1.1 did; from schema 1.2 on every
 * version is recorded in its pinned text form too (ordering.c).
 */
static void
record_resolution(TargetInfo *t, Oid relid, text *batch_id, Jsonb *stored_key, Datum v,
				  bool staged_choice, bytea *choice, Datum wversion,
				  const char *outcome, Datum *values, bool *nulls)
{
	Oid			types[11] = {REGCLASSOID, TEXTOID, JSONBOID, INT8OID, TEXTOID, BYTEAOID,
	INT8OID, TEXTOID, NAMEOID, TEXTOID, TEXTOID};
	Datum		args[11];
	char		argnulls[11];
	bool		texts = state_version() >= STATE_1_2;
	StateUser	su;
	bool		isnull;
	Name		user = palloc(sizeof(NameData));

	memset(argnulls, ' ', sizeof(argnulls));
	namestrcpy(user, GetUserNameFromId(GetUserId(), false));
	args[0] = ObjectIdGetDatum(relid);
	args[1] = PointerGetDatum(batch_id);
	args[2] = JsonbPGetDatum(stored_key);
	args[3] = t->version_integer ? Int64GetDatum(ordering_int64(t, v)) : (Datum) 0;
	args[4] = CStringGetTextDatum(staged_choice ? "staged" : "target");
	args[5] = PointerGetDatum(choice);
	args[6] = t->version_integer ? Int64GetDatum(ordering_int64(t, wversion)) : (Datum) 0;
	args[7] = CStringGetTextDatum(outcome);
	args[8] = NameGetDatum(user);
	args[9] = CStringGetTextDatum(ordering_text(t, v));
	args[10] = CStringGetTextDatum(ordering_text(t, wversion));
	if (!t->version_integer)
		argnulls[3] = argnulls[6] = 'n';
	state_user_enter(&su);
	if (SPI_execute_with_args(texts ?
							  "INSERT INTO reconcile.resolutions (target, batch_id, key,"
							  " version, choice, payload_hash, written_version, outcome,"
							  " decided_by, decided_at, ordering, written_ordering)"
							  " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, pg_catalog.now(), $10, $11)"
							  " RETURNING decided_at" :
							  "INSERT INTO reconcile.resolutions (target, batch_id, key,"
							  " version, choice, payload_hash, written_version, outcome,"
							  " decided_by, decided_at)"
							  " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, pg_catalog.now())"
							  " RETURNING decided_at",
							  texts ? 11 : 9, types, args, argnulls, false, 0) != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "could not write reconcile.resolutions");
	state_user_leave(&su);
	values[0] = CStringGetTextDatum("resolved");
	values[1] = args[3];
	nulls[1] = !t->version_integer;
	values[2] = args[4];
	values[3] = args[6];
	nulls[3] = !t->version_integer;
	values[4] = args[7];
	values[5] = NameGetDatum(user);
	values[6] = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	values[7] = args[9];
	values[8] = args[10];
}

/*
 * The target's row may only be read by a resolution when it is the
 * target's own heap: for a table Citus manages that is the coordinator's
 * shell (citus_load.c reads such targets through Citus for batches only).
 */
static void
check_not_citus(TargetInfo *t, const char *keytext, text *batch_id)
{
	if (t->citus_kind != CITUS_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("reconcile_resolve does not support table \"%s\", %s",
						t->relname, citus_kind_name(t->citus_kind)),
				 errdetail("Key %s of batch %s stays held back in reconcile.conflicts.",
						   keytext, text_to_cstring(batch_id)),
				 errhint("Load the payload you choose with a new batch at a higher version.")));
}

/*
 * The key's held rows from a committed batch, or an error: the batch must
 * be committed and hold the key.
 */
static HeldRow *
read_held_key(TargetInfo *t, Oid relid, text *batch_id, Jsonb *key, const char *keytext, int *nrows,
			  Jsonb **stored_key, bool *key_pinned, Datum *v)
{
	HeldRow    *rows;

	if (!batch_committed(relid, batch_id))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("batch %s was not committed into table \"%s\"",
						text_to_cstring(batch_id), t->relname),
				 errhint("The batches of a target are in reconcile.receipts.")));
	rows = read_held(t, relid, batch_id, key, nrows, stored_key, key_pinned);
	if (*nrows == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key %s is not held back by batch %s in table \"%s\"",
						keytext, text_to_cstring(batch_id), t->relname),
				 errhint("The keys a batch held back are in reconcile.conflicts, with their key as written there.")));
	if (!conflicting_version(t, rows, *nrows, v))
		elog(ERROR, "key %s of batch %s holds no conflict", keytext, text_to_cstring(batch_id));
	return rows;
}

/*
 * reconcile_resolve(target regclass, batch_id text, key jsonb,
 *                   payload_hash bytea) RETURNS record
 *		Decides a key that batch_id held back in target: keeps the payload
 *		whose hash is payload_hash, then loads the key as the batch would
 *		have.  Returns the decision (status 'resolved', or 'replayed' when it
 *		was already made).
 */
Datum
reconcile_resolve(PG_FUNCTION_ARGS)
{
	Oid			relid;
	text	   *batch_id;
	Jsonb	   *key;
	bytea	   *choice;
	TupleDesc	tupdesc;
	Datum		values[RESOLVE_NATTS_1_2];
	bool		nulls[RESOLVE_NATTS_1_2] = {false};
	MemoryContext outer = CurrentMemoryContext;
	TargetInfo *t;
	bytea	   *stored_hash;
	HeldRow    *rows;
	int			nrows;
	Jsonb	   *stored_key = NULL;
	bool		key_pinned = false;
	char	   *keytext;
	Datum		v;
	HeldRow    *w;				/* the row to load, NULL: the target's is kept */
	bool		staged_choice;
	Datum	   *keys;
	const char *outcome;
	HeapTuple	result;

	check_arg_not_null(fcinfo, 0, "target", "reconcile_resolve");
	check_arg_not_null(fcinfo, 1, "batch_id", "reconcile_resolve");
	check_arg_not_null(fcinfo, 2, "key", "reconcile_resolve");
	check_arg_not_null(fcinfo, 3, "payload_hash", "reconcile_resolve");
	relid = PG_GETARG_OID(0);
	batch_id = PG_GETARG_TEXT_PP(1);
	key = PG_GETARG_JSONB_P(2);
	choice = PG_GETARG_BYTEA_PP(3);
	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	tupdesc = BlessTupleDesc(tupdesc);
	if (VARSIZE_ANY_EXHDR(choice) != RECONCILE_SHA256_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("payload_hash must be %d bytes, not %d", RECONCILE_SHA256_LEN,
						(int) VARSIZE_ANY_EXHDR(choice)),
				 errhint("Pass a staged_hash or existing_hash of the key's rows in reconcile.conflicts.")));

	SPI_connect();

	/* Lock, then read: the owner only, one writer of the target at a time. */
	target_lock(relid, ShareRowExclusiveLock, TARGET_LOCK_OWNER);
	target_check_batch_privileges(relid, relid);
	PushActiveSnapshot(GetTransactionSnapshot());
	t = target_load(relid);
	keytext = JsonbToCString(NULL, &key->root, VARSIZE(key));
	check_not_citus(t, keytext, batch_id);

	/* The same decision again returns the stored one; another is refused. */
	if (read_resolution(relid, batch_id, key, values, nulls, &stored_hash))
	{
		if (!same_hash(stored_hash, choice))
			ereport(ERROR,
					(errcode(ERRCODE_UNIQUE_VIOLATION),
					 errmsg("key %s of batch %s in table \"%s\" was already resolved otherwise",
							keytext, text_to_cstring(batch_id), t->relname),
					 errdetail("It was resolved by \"%s\" at version %s with payload hash \\x%s.",
							   NameStr(*DatumGetName(values[5])), TextDatumGetCString(values[7]),
							   hash_hex(stored_hash)),
					 errhint("A decision is final; load another payload with a new batch at a higher version.")));
	}
	else
	{
		PreventCommandIfReadOnly("reconcile_resolve()");
		rows = read_held_key(t, relid, batch_id, key, keytext, &nrows, &stored_key,
							 &key_pinned, &v);
		w = choose_row(rows, nrows, v, choice, &staged_choice, t, batch_id, keytext);

		/* The key in the target's types, exactly as it was held, or refused. */
		keys = palloc(sizeof(Datum) * t->nkeys);
		key_from_jsonb(t, stored_key, key_pinned, text_to_cstring(batch_id), keys);

		outcome = load_choice(t, rows, nrows, w, v, choice, keys, batch_id, keytext);
		record_resolution(t, relid, batch_id, stored_key, v, staged_choice, choice,
						  w ? w->version : v, outcome, values, nulls);
	}

	PopActiveSnapshot();
	MemoryContextSwitchTo(outer);
	/* 1.1's result has no ordering columns: tupdesc has as many as the schema. */
	Assert(tupdesc->natts == RESOLVE_NATTS || tupdesc->natts == RESOLVE_NATTS_1_2);
	result = heap_form_tuple(tupdesc, values, nulls);
	SPI_finish();
	PG_RETURN_DATUM(HeapTupleGetDatum(result));
}
