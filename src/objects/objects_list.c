/*
 * objects_list.c
 *		reconcile_list_objects(server, prefix, options): one row per object
 *		version of an S3 bucket or a server directory, in key order (the
 *		versions of a key newest first).
 */
#include "postgres.h"

#include "funcapi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "common/jsonread.h"
#include "objects.h"

PG_FUNCTION_INFO_V1(reconcile_list_objects);

#define LIST_OPTION_KEYS "\"start_after\", \"max_keys\", \"versions\" and \"max_retries\""

static int
option_int(JsonbValue *v, const char *key, int lo, int hi)
{
	int64		n;

	if (v->type != jbvNumeric)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"%s\" must be a number, not %s", key, jbv_type_name(v))));
	n = DatumGetInt64(DirectFunctionCall1(numeric_int8, NumericGetDatum(v->val.numeric)));
	if (n < lo || n > hi)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"%s\" must be between %d and %d, not " INT64_FORMAT, key, lo, hi, n)));
	return (int) n;
}

/* Reads the listing options; shared with reconcile_load through opts. */
void
objects_list_options(ObjListOptions *opts, const char *prefix, Jsonb *doc)
{
	JsonbIterator *it;
	JsonbValue	v;
	char	   *key;

	memset(opts, 0, sizeof(*opts));
	opts->prefix = pstrdup(prefix);
	opts->max_keys = 1000;
	opts->versions = -1;
	opts->max_retries = 4;
	if (doc == NULL)
		return;
	if (!JB_ROOT_IS_OBJECT(doc) || JB_ROOT_IS_SCALAR(doc))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("listing options must be a JSON object"),
				 errhint("Valid keys are %s.", LIST_OPTION_KEYS)));
	it = JsonbIteratorInit(&doc->root);
	while (jsonb_object_next(&it, &key, &v))
	{
		if (strcmp(key, "start_after") == 0)
		{
			if (v.type == jbvNull)
				continue;
			if (v.type != jbvString)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("option \"start_after\" must be a string, not %s", jbv_type_name(&v))));
			opts->start_after = jbv_string(&v);
		}
		else if (strcmp(key, "max_keys") == 0)
			opts->max_keys = option_int(&v, key, 1, 1000);
		else if (strcmp(key, "max_retries") == 0)
			opts->max_retries = option_int(&v, key, 0, 20);
		else if (strcmp(key, "versions") == 0)
		{
			if (v.type == jbvBool)
				opts->versions = v.val.boolean ? 1 : 0;
			else if (v.type == jbvString && v.val.string.len == 4 &&
					 strncmp(v.val.string.val, "auto", 4) == 0)
				opts->versions = -1;
			else
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("option \"versions\" must be true, false or \"auto\", not %s",
								jbv_type_name(&v))));
		}
		else if (strcmp(key, "rows") == 0 || strcmp(key, "format") == 0)
			continue;			/* staging options, read by the stager */
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown listing option \"%s\"", key),
					 errhint("Valid keys are %s.", LIST_OPTION_KEYS)));
	}
}

/* Lists srv under opts, calling cb for each entry. */
void
objects_list(ObjServer *srv, ObjListOptions *opts, ObjEntryCallback cb, void *arg)
{
	if (srv->kind == OBJSERVER_DIRECTORY)
		dir_list(srv, opts, cb, arg);
	else
		s3_list(srv, opts, cb, arg);
}

typedef struct ListState
{
	Tuplestorestate *store;
	TupleDesc	desc;
} ListState;

static void
list_add_row(ObjEntry *e, void *arg)
{
	ListState  *ls = (ListState *) arg;
	Datum		values[7];
	bool		nulls[7] = {false};

	values[0] = CStringGetTextDatum(e->key);
	if (e->version_id)
		values[1] = CStringGetTextDatum(e->version_id);
	else
		nulls[1] = true;
	values[2] = Int64GetDatum(e->size);
	if (e->is_delete_marker)
		nulls[2] = true;
	if (e->etag)
		values[3] = CStringGetTextDatum(e->etag);
	else
		nulls[3] = true;
	values[4] = TimestampTzGetDatum(e->last_modified);
	values[5] = BoolGetDatum(e->is_latest);
	values[6] = BoolGetDatum(e->is_delete_marker);
	tuplestore_putvalues(ls->store, ls->desc, values, nulls);
}

Datum
reconcile_list_objects(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	char	   *server;
	char	   *prefix;
	Jsonb	   *doc;
	ObjServer  *srv;
	ObjListOptions opts;
	ListState	ls;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("server must not be NULL")));
	server = NameStr(*PG_GETARG_NAME(0));
	prefix = PG_ARGISNULL(1) ? "" : text_to_cstring(PG_GETARG_TEXT_PP(1));
	doc = PG_ARGISNULL(2) ? NULL : PG_GETARG_JSONB_P(2);

	srv = objects_open_server(server);
	objects_list_options(&opts, prefix, doc);

	InitMaterializedSRF(fcinfo, 0);
	ls.store = rsinfo->setResult;
	ls.desc = rsinfo->setDesc;
	objects_list(srv, &opts, list_add_row, &ls);
	return (Datum) 0;
}
