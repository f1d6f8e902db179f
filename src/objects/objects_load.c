/*
 * objects_load.c
 *		reconcile_load(target, server, prefix, options): one call from the
 *		listing to the receipt.  Lists the server after the cursor (the
 *		last key loaded from this server and prefix), stages the new object
 *		versions into a staged relation of its own (or the one the options
 *		name), and runs reconcile_batch with the manifest, the source and
 *		the new listing position as cursor, in the caller's transaction.
 *
 *		An object version is immutable: once a receipt names it, its hash
 *		and rows are in reconcile.batch_objects.  A listing whose versions
 *		are all known and whose manifest is a committed batch is a replay:
 *		the stored receipt comes back and nothing is downloaded.  What was
 *		read (version, ETag, size, bytes hash, rows) is kept per object in
 *		reconcile.object_reads, beside the receipt.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "nodes/makefuncs.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/tuplestore.h"

#include "common/jsonbuild.h"
#include "common/jsonread.h"
#include "loader/manifest.h"
#include "objects.h"
#include "common/state.h"
#include "common/state_schema.h"

PG_FUNCTION_INFO_V1(reconcile_load);

typedef struct LoadListing
{
	List	   *objects;		/* StageObject-shaped jsonb elements, in order */
	List	   *entries;		/* ObjEntry * copies */
	char	   *last_key;		/* the listing position after it */
	bool		latest_only;
} LoadListing;

static void
collect_entry(ObjEntry *e, void *arg)
{
	LoadListing *l = (LoadListing *) arg;
	ObjEntry   *c;

	l->last_key = pstrdup(e->key);
	if (e->is_delete_marker || (l->latest_only && !e->is_latest))
		return;
	c = palloc(sizeof(ObjEntry));
	*c = *e;
	c->key = pstrdup(e->key);
	c->version_id = e->version_id ? pstrdup(e->version_id) : NULL;
	c->etag = e->etag ? pstrdup(e->etag) : NULL;
	l->entries = lappend(l->entries, c);
}

/* The version id an entry is staged and recorded with. */
static const char *
entry_version(ObjEntry *e)
{
	if (e->version_id && strcmp(e->version_id, "null") != 0)
		return e->version_id;
	return e->etag;
}

/* Splits reconcile_load's options into the listing's, staging's and the batch's. */
typedef struct LoadOptions_
{
	Jsonb	   *list_opts;
	Jsonb	   *stage_opts;
	Jsonb	   *batch_opts;		/* NULL: none */
	char	   *staged;
	char	   *source;
	char	   *start_after;
	bool		has_start_after;
	bool		latest_only;
} LoadCallOptions;

static const char *const list_keys[] = {"versions", "max_keys", "max_retries", NULL};
static const char *const batch_keys[] = {"max_rejects", "max_reject_share", "unknown_columns", NULL};
static const char *const stage_only_keys[] = {"format", "compression", "header", "delimiter", "quote",
	"escape", "null", "encoding", "force_null", "columns", "operation", NULL};

static bool
key_in(const char *key, const char *const *keys)
{
	for (; *keys; keys++)
		if (strcmp(key, *keys) == 0)
			return true;
	return false;
}

#define LOAD_OPTION_KEYS_TEXT "\"staged\", \"source\", \"start_after\", \"latest_only\", the listing options (\"versions\", \"max_keys\", \"max_retries\"), the staging options (\"format\", \"compression\", \"header\", \"delimiter\", \"quote\", \"escape\", \"null\", \"encoding\", \"force_null\", \"columns\", \"operation\") and the load options (\"max_rejects\", \"max_reject_share\", \"unknown_columns\")"

static void
load_options_split(LoadCallOptions *o, Jsonb *doc)
{
	JsonbParseState *lps = NULL,
			   *sps = NULL,
			   *bps = NULL;
	JsonbIterator *it;
	JsonbValue	v;
	char	   *key;
	bool		any_batch = false;

	memset(o, 0, sizeof(*o));
	pushJsonbValue(&lps, WJB_BEGIN_OBJECT, NULL);
	pushJsonbValue(&sps, WJB_BEGIN_OBJECT, NULL);
	pushJsonbValue(&bps, WJB_BEGIN_OBJECT, NULL);
	if (doc)
	{
		if (!JB_ROOT_IS_OBJECT(doc) || JB_ROOT_IS_SCALAR(doc))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("the options of reconcile_load must be a JSON object"),
					 errhint("Valid keys are %s.", LOAD_OPTION_KEYS_TEXT)));
		it = JsonbIteratorInit(&doc->root);
		while (jsonb_object_next(&it, &key, &v))
		{
			if (strcmp(key, "staged") == 0 || strcmp(key, "source") == 0 || strcmp(key, "start_after") == 0)
			{
				char	   *s;

				if (v.type == jbvNull && strcmp(key, "start_after") == 0)
				{
					o->has_start_after = true;
					continue;
				}
				if (v.type != jbvString || v.val.string.len == 0)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("option \"%s\" of reconcile_load must be a non-empty string%s", key,
									strcmp(key, "start_after") == 0 ? " or null" : "")));
				s = jbv_string(&v);
				if (strcmp(key, "staged") == 0)
					o->staged = s;
				else if (strcmp(key, "source") == 0)
					o->source = s;
				else
				{
					o->start_after = s;
					o->has_start_after = true;
				}
			}
			else if (strcmp(key, "latest_only") == 0)
			{
				if (v.type != jbvBool)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("option \"latest_only\" of reconcile_load must be a boolean, not %s", jbv_type_name(&v))));
				o->latest_only = v.val.boolean;
			}
			else if (key_in(key, list_keys))
			{
				jsonb_push_key(&lps, key);
				pushJsonbValue(&lps, WJB_VALUE, &v);
				if (strcmp(key, "max_retries") == 0)
				{
					jsonb_push_key(&sps, key);
					pushJsonbValue(&sps, WJB_VALUE, &v);
				}
			}
			else if (key_in(key, batch_keys))
			{
				/* The batch's limits; staging checks the same early. */
				jsonb_push_key(&bps, key);
				pushJsonbValue(&bps, WJB_VALUE, &v);
				jsonb_push_key(&sps, key);
				pushJsonbValue(&sps, WJB_VALUE, &v);
				any_batch = true;
			}
			else if (key_in(key, stage_only_keys))
			{
				jsonb_push_key(&sps, key);
				pushJsonbValue(&sps, WJB_VALUE, &v);
			}
			else
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("unknown option \"%s\" of reconcile_load", key),
						 errhint("Valid keys are %s.", LOAD_OPTION_KEYS_TEXT)));
		}
	}
	o->list_opts = JsonbValueToJsonb(pushJsonbValue(&lps, WJB_END_OBJECT, NULL));
	o->stage_opts = JsonbValueToJsonb(pushJsonbValue(&sps, WJB_END_OBJECT, NULL));
	o->batch_opts = any_batch ? JsonbValueToJsonb(pushJsonbValue(&bps, WJB_END_OBJECT, NULL)) : NULL;
}

/* The cursor of (target, source), or NULL. */
static char *
read_cursor(Oid target, const char *source)
{
	Oid			types[2] = {REGCLASSOID, TEXTOID};
	Datum		args[2] = {ObjectIdGetDatum(target), CStringGetTextDatum(source)};
	StateUser	su;
	char	   *pos = NULL;

	state_user_enter(&su);
	if (SPI_execute_with_args("SELECT \"position\" FROM reconcile.cursors WHERE target OPERATOR(pg_catalog.=) $1"
							  " AND source OPERATOR(pg_catalog.=) $2", 2, types, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read reconcile.cursors");
	if (SPI_processed > 0)
		pos = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
	state_user_leave(&su);
	return pos;
}

/*
 * The committed batches of the target whose object versions are all in
 * the listing, oldest first, none overlapping an earlier one: their
 * manifests (jsonb) in *manifests, and the listed entries they cover
 * marked in covered[].  A rewound load replays them from their receipts,
 * reading nothing.
 */
static List *
listed_batches(Oid target, List *entries, bool *covered)
{
	int			n = list_length(entries);
	Datum	   *keys = palloc(sizeof(Datum) * n);
	Datum	   *versions = palloc(sizeof(Datum) * n);
	bool	   *vnulls = palloc(sizeof(bool) * n);
	int			dims[1] = {n};
	int			lbs[1] = {1};
	Oid			types[3] = {REGCLASSOID, TEXTARRAYOID, TEXTARRAYOID};
	Datum		args[3];
	StateUser	su;
	List	   *manifests = NIL;
	ListCell   *lc;
	int			i = 0;

	foreach(lc, entries)
	{
		ObjEntry   *e = lfirst(lc);
		const char *v = entry_version(e);

		keys[i] = CStringGetTextDatum(e->key);
		versions[i] = v ? CStringGetTextDatum(v) : (Datum) 0;
		vnulls[i] = v == NULL;
		i++;
	}
	args[0] = ObjectIdGetDatum(target);
	args[1] = PointerGetDatum(construct_md_array(keys, NULL, 1, dims, lbs, TEXTOID, -1, false, TYPALIGN_INT));
	args[2] = PointerGetDatum(construct_md_array(versions, vnulls, 1, dims, lbs, TEXTOID, -1, false, TYPALIGN_INT));
	state_user_enter(&su);
	if (SPI_execute_with_args("WITH l(k, v) AS (SELECT * FROM ROWS FROM (pg_catalog.unnest($2), pg_catalog.unnest($3))),"
							  " b AS (SELECT DISTINCT bo.batch_id FROM reconcile.batch_objects bo JOIN l"
							  " ON bo.object_key OPERATOR(pg_catalog.=) l.k AND bo.version_id OPERATOR(pg_catalog.=) l.v"
							  " WHERE bo.target OPERATOR(pg_catalog.=) $1)"
							  " SELECT COALESCE(r.manifest, (SELECT pg_catalog.jsonb_agg(pg_catalog.jsonb_build_object('object_key', bo.object_key,"
							  " 'version_id', bo.version_id, 'content_hash', bo.content_hash, 'rows', bo.\"rows\"))"
							  " FROM reconcile.batch_objects bo WHERE bo.target OPERATOR(pg_catalog.=) r.target"
							  " AND bo.batch_id OPERATOR(pg_catalog.=) r.batch_id)), (SELECT pg_catalog.array_agg(bo.object_key OPERATOR(pg_catalog.||) '/' OPERATOR(pg_catalog.||) bo.version_id)"
							  " FROM reconcile.batch_objects bo WHERE bo.target OPERATOR(pg_catalog.=) r.target"
							  " AND bo.batch_id OPERATOR(pg_catalog.=) r.batch_id)"
							  " FROM reconcile.receipts r JOIN b USING (batch_id)"
							  " WHERE r.target OPERATOR(pg_catalog.=) $1"
							  " AND NOT EXISTS (SELECT FROM reconcile.batch_objects bo WHERE bo.target OPERATOR(pg_catalog.=) r.target"
							  " AND bo.batch_id OPERATOR(pg_catalog.=) r.batch_id AND NOT EXISTS (SELECT FROM l"
							  " WHERE l.k OPERATOR(pg_catalog.=) bo.object_key AND l.v OPERATOR(pg_catalog.=) bo.version_id))"
							  " ORDER BY r.committed_at, r.batch_id",
							  3, types, args, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the receipts of the listed objects");
	state_user_leave(&su);

	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		bool		isnull;
		Datum		m = SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &isnull);
		ArrayType  *objs = DatumGetArrayTypeP(SPI_getbinval(tup, SPI_tuptable->tupdesc, 2, &isnull));
		Datum	   *ov;
		int			no;
		bool	   *mark = palloc0(sizeof(bool) * n);
		bool		overlap = false;

		deconstruct_array(objs, TEXTOID, -1, false, TYPALIGN_INT, &ov, NULL, &no);
		for (int k = 0; k < no && !overlap; k++)
		{
			char	   *kv = TextDatumGetCString(ov[k]);

			i = 0;
			foreach(lc, entries)
			{
				ObjEntry   *e = lfirst(lc);
				const char *v = entry_version(e);

				if (v && strlen(kv) == strlen(e->key) + 1 + strlen(v) &&
					strncmp(kv, e->key, strlen(e->key)) == 0 && kv[strlen(e->key)] == '/' &&
					strcmp(kv + strlen(e->key) + 1, v) == 0)
				{
					if (covered[i])
						overlap = true;
					mark[i] = true;
				}
				i++;
			}
		}
		if (overlap)
			continue;
		for (i = 0; i < n; i++)
			if (mark[i])
				covered[i] = true;
		manifests = lappend(manifests, DatumGetJsonbPCopy(m));
	}
	return manifests;
}

/*
 * A staged relation of the call's own: a temporary table, dropped at
 * commit, with the loader's columns and the target's key, version and
 * payload columns, all text (the loader casts and rejects).
 */
static Oid
own_staged_relation(Oid target)
{
	Oid			types[1] = {REGCLASSOID};
	Datum		args[1] = {ObjectIdGetDatum(target)};
	StateUser	su;
	StringInfoData sql;
	static int	counter = 0;
	char	   *name;
	Datum		d;
	bool		isnull;
	ArrayType  *cols;
	Datum	   *elems;
	int			nelems;

	state_user_enter(&su);
	/* Every version column of the target (1.2: version_columns when there are several). */
	if (SPI_execute_with_args(state_version() >= STATE_1_2 ?
							  "SELECT key_columns OPERATOR(pg_catalog.||)"
							  " COALESCE(version_columns, ARRAY[version_column]) OPERATOR(pg_catalog.||) payload_columns"
							  " FROM reconcile.targets WHERE target OPERATOR(pg_catalog.=) $1" :
							  "SELECT key_columns OPERATOR(pg_catalog.||) version_column OPERATOR(pg_catalog.||) payload_columns"
							  " FROM reconcile.targets WHERE target OPERATOR(pg_catalog.=) $1",
							  1, types, args, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read reconcile.targets");
	if (SPI_processed == 0)
	{
		state_user_leave(&su);
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("table \"%s\" is not registered", get_rel_name(target)),
				 errhint("Register it with reconcile_register first.")));
	}
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	cols = DatumGetArrayTypePCopy(d);
	state_user_leave(&su);
	deconstruct_array(cols, TEXTOID, -1, false, TYPALIGN_INT, &elems, NULL, &nelems);

	name = psprintf("reconcile_load_%u_%d", target, ++counter);
	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TEMPORARY TABLE %s (object_key pg_catalog.text, version_id pg_catalog.text,"
					 " source_row pg_catalog.int8, operation pg_catalog.text", quote_identifier(name));
	for (int i = 0; i < nelems; i++)
	{
		const char *col = TextDatumGetCString(elems[i]);

		if (strcmp(col, "object_key") == 0 || strcmp(col, "version_id") == 0 ||
			strcmp(col, "source_row") == 0 || strcmp(col, "operation") == 0)
			continue;
		appendStringInfo(&sql, ", %s pg_catalog.text", quote_identifier(col));
	}
	appendStringInfoString(&sql, ") ON COMMIT DROP");
	if (SPI_execute(sql.data, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not create the staged relation of reconcile_load");
	return RangeVarGetRelid(makeRangeVar("pg_temp", name, -1), NoLock, false);
}

/* Records what was read, beside the receipt (as the state's owner). */
static void
record_reads(Oid target, const char *batch_id, ObjServer *srv, ObjectRead *reads, List *entries)
{
	StateUser	su;
	SPIPlanPtr	plan;
	Oid			types[9] = {TEXTOID, REGCLASSOID, TEXTOID, TEXTOID, TEXTOID, TEXTOID, INT8OID, TEXTOID, INT8OID};
	int			nreads = list_length(entries);

	state_user_enter(&su);
	plan = SPI_prepare("INSERT INTO reconcile.object_reads (batch_id, target, server, object_key, version_id,"
					   " etag, size, content_hash, \"rows\") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)"
					   " ON CONFLICT DO NOTHING", 9, types);
	if (plan == NULL)
		elog(ERROR, "could not prepare the insert into reconcile.object_reads");
	for (int i = 0; i < nreads; i++)
	{
		ObjectRead *r = &reads[i];
		Datum		v[9];
		char		n[9] = {' ', ' ', ' ', ' ', ' ', ' ', ' ', ' ', ' '};

		v[0] = CStringGetTextDatum(batch_id);
		v[1] = ObjectIdGetDatum(target);
		v[2] = CStringGetTextDatum(srv->name);
		v[3] = CStringGetTextDatum(r->object_key);
		v[4] = CStringGetTextDatum(r->version_id);
		if (r->etag)
			v[5] = CStringGetTextDatum(r->etag);
		else
			n[5] = 'n';
		v[6] = Int64GetDatum((int64) r->bytes);
		v[7] = CStringGetTextDatum(r->content_hash);
		v[8] = Int64GetDatum(r->rows);
		if (SPI_execute_plan(plan, v, n, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not write reconcile.object_reads");
	}
	SPI_freeplan(plan);
	state_user_leave(&su);
}

/* The objects argument of staging, from the listed entries. */
static List *
entries_to_objects(List *entries)
{
	JsonbParseState *ps = NULL;
	ListCell   *lc;

	pushJsonbValue(&ps, WJB_BEGIN_ARRAY, NULL);
	foreach(lc, entries)
	{
		ObjEntry   *e = lfirst(lc);

		pushJsonbValue(&ps, WJB_BEGIN_OBJECT, NULL);
		jsonb_push_string_field(&ps, "object_key", e->key);
		if (e->version_id)
			jsonb_push_string_field(&ps, "version_id", e->version_id);
		if (e->etag)
			jsonb_push_string_field(&ps, "etag", e->etag);
		jsonb_push_int64_field(&ps, "size", e->size);
		pushJsonbValue(&ps, WJB_END_OBJECT, NULL);
	}
	return objects_stage_parse_objects(JsonbValueToJsonb(pushJsonbValue(&ps, WJB_END_ARRAY, NULL)));
}

/* Runs one reconcile_batch and returns its receipt row(s). */
static void
run_batch(const char *sql, Oid *argtypes, Datum *args, char *nulls, ReturnSetInfo *rsinfo,
		  MemoryContext cxt, bool downloaded, Oid target, ObjServer *srv,
		  ObjectRead *reads, List *entries)
{
	SPITupleTable *tt;
	uint64		n;

	if (SPI_execute_with_args(sql, 6, argtypes, args, nulls, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not run reconcile_batch");
	tt = SPI_tuptable;
	n = SPI_processed;
	for (uint64 i = 0; i < n; i++)
	{
		HeapTuple	tup = tt->vals[i];
		bool		isnull;
		char	   *status = SPI_getvalue(tup, tt->tupdesc, 3);
		Datum		bid = SPI_getbinval(tup, tt->tupdesc, 1, &isnull);
		MemoryContext old;

		if (downloaded && strcmp(status, "committed") == 0)
			record_reads(target, TextDatumGetCString(bid), srv, reads, entries);
		old = MemoryContextSwitchTo(cxt);
		tuplestore_puttuple(rsinfo->setResult, tup);
		MemoryContextSwitchTo(old);
	}
}

/*
 * reconcile_load(target regclass, server name, prefix text,
 *                options jsonb DEFAULT '{}') RETURNS SETOF reconcile.receipt
 */
Datum
reconcile_load(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	Oid			target;
	char	   *server;
	char	   *prefix;
	ObjServer  *srv;
	LoadCallOptions o;
	ObjListOptions lopts;
	LoadListing listing;
	char	   *cursor;
	Oid			staged;
	bool	   *covered;
	ListCell   *lc;
	char	   *schema;
	StageOptions *sopts;
	StringInfoData sql;
	Oid			argtypes[6] = {REGCLASSOID, REGCLASSOID, JSONBOID, TEXTOID, TEXTOID, JSONBOID};
	Datum		args[6];
	char		nulls[6] = {' ', ' ', ' ', ' ', ' ', ' '};
	MemoryContext cxt = CurrentMemoryContext;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", PG_ARGISNULL(0) ? "target" : "server")));
	target = PG_GETARG_OID(0);
	server = NameStr(*PG_GETARG_NAME(1));
	prefix = PG_ARGISNULL(2) ? "" : text_to_cstring(PG_GETARG_TEXT_PP(2));
	load_options_split(&o, PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3));
	srv = objects_open_server(server);
	objects_list_options(&lopts, prefix, o.list_opts);
	if (o.source == NULL)
		o.source = psprintf("%s:%s", srv->name, prefix);
	/* Every option is checked before anything is listed or replayed. */
	sopts = objects_stage_options(o.stage_opts);
	objects_stage_set_target(sopts, target);
	InitMaterializedSRF(fcinfo, 0);

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");

	/* The listing after the cursor (or after start_after: a rewind). */
	cursor = o.has_start_after ? o.start_after : read_cursor(target, o.source);
	lopts.start_after = cursor;
	memset(&listing, 0, sizeof(listing));
	listing.latest_only = o.latest_only;
	objects_list(srv, &lopts, collect_entry, &listing);
	if (listing.entries == NIL)
	{
		/* Nothing new: no batch, no row. */
		SPI_finish();
		return (Datum) 0;
	}

	if (o.staged)
	{
		List	   *names = stringToQualifiedNameList(o.staged);

		staged = RangeVarGetRelid(makeRangeVarFromNameList(names), NoLock, false);
	}
	else
		staged = own_staged_relation(target);

	schema = get_namespace_name(get_func_namespace(fcinfo->flinfo->fn_oid));
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT * FROM %s.reconcile_batch($1, $2, $3, $4, $5, $6)", quote_identifier(schema));
	args[0] = ObjectIdGetDatum(target);
	args[1] = ObjectIdGetDatum(staged);
	args[3] = CStringGetTextDatum(o.source);
	args[4] = CStringGetTextDatum(listing.last_key);
	if (o.batch_opts)
		args[5] = JsonbPGetDatum(o.batch_opts);
	else
		nulls[5] = 'n';

	/*
	 * Committed batches whose versions are all listed again (a rewound
	 * cursor): their stored receipts, nothing downloaded.
	 */
	covered = palloc0(sizeof(bool) * list_length(listing.entries));
	foreach(lc, listed_batches(target, listing.entries, covered))
	{
		args[2] = JsonbPGetDatum((Jsonb *) lfirst(lc));
		run_batch(sql.data, argtypes, args, nulls, rsinfo, cxt, false, target, srv, NULL, NIL);
	}
	{
		List	   *fresh = NIL;
		int			i = 0;

		foreach(lc, listing.entries)
		{
			if (!covered[i++])
				fresh = lappend(fresh, lfirst(lc));
		}
		if (fresh != NIL)
		{
			ObjectRead *reads;

			args[2] = JsonbPGetDatum(objects_stage(staged, srv, entries_to_objects(fresh), sopts, &reads));
			run_batch(sql.data, argtypes, args, nulls, rsinfo, cxt, true, target, srv, reads, fresh);
		}
	}
	SPI_finish();
	return (Datum) 0;
}
