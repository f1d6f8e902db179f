/*
 * options.c
 *		A batch's load options: the reject policy (max_rejects,
 *		max_reject_share) and the schema drift policy (unknown_columns).
 *
 * One document format for both places they are set: a target's
 * registration (reconcile_register's options) and a batch's call
 * (reconcile_batch's options), the batch's keys overriding the
 * registration's.  A key set to JSON null takes its default back.  Unknown
 * keys and values of the wrong type or range are errors that name the key,
 * so that a misspelt limit never silently means "no limit".
 */
#include "postgres.h"

#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "common/jsonread.h"
#include "options.h"

/* No limits, unknown staged columns refused: 1.1's defaults. */
void
load_options_init(LoadOptions *opts)
{
	opts->max_rejects = -1;
	opts->max_reject_share = NULL;
	opts->ignore_unknown_columns = false;
	opts->citus_merge = CITUS_MERGE_AUTO;
	opts->delete_remove = false;
	opts->snapshot = false;
	opts->snapshot_version = NULL;
	opts->snapshot_scope = NULL;
	opts->snapshot_max_delete_share = NULL;
	opts->partial = false;
}

static void
option_error(const char *what, const char *key, const char *expected, JsonbValue *v)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("option \"%s\" of %s must be %s", key, what, expected),
			 errdetail("It is %s.", v->type == jbvString ?
					   psprintf("the string \"%s\"", jbv_string(v)) :
					   v->type == jbvNumeric ?
					   psprintf("the number %s",
								DatumGetCString(DirectFunctionCall1(numeric_out,
																	NumericGetDatum(v->val.numeric)))) :
					   jbv_type_name(v))));
}

/* Whether a JSON number is integral (2 and 2.0 are; 2.5 is not). */
static bool
numeric_is_integral(Numeric n)
{
	Numeric		floor = DatumGetNumeric(DirectFunctionCall1(numeric_floor,
															NumericGetDatum(n)));

	return !numeric_is_nan(n) && !numeric_is_inf(n) &&
		DatumGetBool(DirectFunctionCall2(numeric_eq, NumericGetDatum(n),
										 NumericGetDatum(floor)));
}

static bool
numeric_between(Numeric n, int64 lo, int64 hi)
{
	Datum		d = NumericGetDatum(n);

	return !numeric_is_nan(n) &&
		DatumGetBool(DirectFunctionCall2(numeric_ge, d, NumericGetDatum(int64_to_numeric(lo)))) &&
		DatumGetBool(DirectFunctionCall2(numeric_le, d, NumericGetDatum(int64_to_numeric(hi))));
}

/*
 * Option snapshot: {"version": V, "scope": "<predicate>", "max_delete_share":
 * S}.  Only its shape is checked here; the version is read in the version
 * column's type and the scope against the target's columns when the batch
 * runs (snapshot.c).  A registration has no snapshot: it describes one batch.
 */
static void
apply_snapshot(LoadOptions *opts, JsonbValue *v, const char *what)
{
	JsonbIterator *it;
	JsonbValue	f;
	char	   *key = NULL;
	Jsonb	   *doc;

	if (strcmp(what, "reconcile_batch") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"snapshot\" of %s is refused: a snapshot describes one batch", what),
				 errhint("Pass it in the options of the reconcile_batch call that loads the extract.")));
	if (v->type == jbvNull)
	{
		opts->snapshot = false;
		return;
	}
	if (!jbv_is_object(v))
		option_error(what, "snapshot", "an object {\"version\": ..., \"scope\": ..., \"max_delete_share\": ...} or null", v);
	doc = JsonbValueToJsonb(v);
	opts->snapshot = true;
	opts->snapshot_version = NULL;
	opts->snapshot_scope = NULL;
	opts->snapshot_max_delete_share = DatumGetNumeric(DirectFunctionCall3(numeric_in,
																		  CStringGetDatum("0.1"),
																		  ObjectIdGetDatum(InvalidOid),
																		  Int32GetDatum(-1)));
	it = JsonbIteratorInit(&doc->root);
	while (jsonb_object_next(&it, &key, &f))
	{
		if (strcmp(key, "version") == 0)
		{
			if (f.type == jbvString)
				opts->snapshot_version = jbv_string(&f);
			else if (f.type == jbvNumeric)
				opts->snapshot_version = DatumGetCString(DirectFunctionCall1(numeric_out,
																			 NumericGetDatum(f.val.numeric)));
			else
				option_error(what, "snapshot.version", "a number or a string (the snapshot's version, in the target's version type)", &f);
		}
		else if (strcmp(key, "scope") == 0)
		{
			if (f.type == jbvNull)
				opts->snapshot_scope = NULL;
			else if (f.type != jbvString)
				option_error(what, "snapshot.scope", "a string (a predicate over the target's columns) or null", &f);
			else
				opts->snapshot_scope = jbv_string(&f);
		}
		else if (strcmp(key, "max_delete_share") == 0)
		{
			if (f.type != jbvNumeric || !numeric_between(f.val.numeric, 0, 1))
				option_error(what, "snapshot.max_delete_share", "a number from 0 to 1 (the largest share of the scope's live rows the snapshot may delete)", &f);
			else
				opts->snapshot_max_delete_share = DatumGetNumericCopy(NumericGetDatum(f.val.numeric));
		}
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown key \"%s\" in option \"snapshot\" of %s", key, what),
					 errhint("The keys of a snapshot are %s.", SNAPSHOT_OPTION_KEYS)));
	}
	if (opts->snapshot_version == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"snapshot\" of %s has no \"version\"", what),
				 errhint("Pass the version the extract was taken at, for example '{\"snapshot\": {\"version\": 42}}': rows absent from the extract become tombstones at it.")));
}

/*
 * Apply the keys of an options document over opts; what names the
 * argument in errors ("reconcile_batch", "the registration of ...").  A
 * NULL document changes nothing.
 */
void
load_options_apply(LoadOptions *opts, Jsonb *doc, const char *what)
{
	JsonbIterator *it;
	JsonbValue	v;
	char	   *key = NULL;

	if (doc == NULL)
		return;
	if (JB_ROOT_IS_SCALAR(doc) || !JB_ROOT_IS_OBJECT(doc))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("options of %s must be a JSON object", what),
				 errhint("Pass for example '{\"max_rejects\": 10, \"unknown_columns\": \"ignore\"}'; the keys are %s.",
						 LOAD_OPTION_KEYS)));

	it = JsonbIteratorInit(&doc->root);
	while (jsonb_object_next(&it, &key, &v))
	{
		if (strcmp(key, "max_rejects") == 0)
		{
			if (v.type == jbvNull)
				opts->max_rejects = -1;
			else if (v.type != jbvNumeric || !numeric_is_integral(v.val.numeric) ||
					 !numeric_between(v.val.numeric, 0, PG_INT64_MAX))
				option_error(what, key, "a non-negative integer (the most rejected rows a batch may have) or null", &v);
			else
				opts->max_rejects = DatumGetInt64(DirectFunctionCall1(numeric_int8,
																	  NumericGetDatum(v.val.numeric)));
		}
		else if (strcmp(key, "max_reject_share") == 0)
		{
			if (v.type == jbvNull)
				opts->max_reject_share = NULL;
			else if (v.type != jbvNumeric || !numeric_between(v.val.numeric, 0, 1))
				option_error(what, key, "a number from 0 to 1 (the largest share of a batch's staged rows that may be rejected) or null", &v);
			else
				opts->max_reject_share = DatumGetNumericCopy(NumericGetDatum(v.val.numeric));
		}
		else if (strcmp(key, "unknown_columns") == 0)
		{
			char	   *s = v.type == jbvString ? jbv_string(&v) : NULL;

			if (v.type == jbvNull)
				opts->ignore_unknown_columns = false;
			else if (s != NULL && strcmp(s, "error") == 0)
				opts->ignore_unknown_columns = false;
			else if (s != NULL && strcmp(s, "ignore") == 0)
				opts->ignore_unknown_columns = true;
			else
				option_error(what, key, "\"error\" or \"ignore\"", &v);
		}
		else if (strcmp(key, "citus_merge") == 0)
		{
			char	   *s = v.type == jbvString ? jbv_string(&v) : NULL;

			if (v.type == jbvNull)
				opts->citus_merge = CITUS_MERGE_AUTO;
			else if (s != NULL && strcmp(s, "workers") == 0)
				opts->citus_merge = CITUS_MERGE_WORKERS;
			else if (s != NULL && strcmp(s, "coordinator") == 0)
				opts->citus_merge = CITUS_MERGE_COORDINATOR;
			else
				option_error(what, key, "\"workers\" or \"coordinator\"", &v);
		}
		else if (strcmp(key, "delete_mode") == 0)
		{
			char	   *s = v.type == jbvString ? jbv_string(&v) : NULL;

			/*
			 * The registration is the contract: a batch that removed rows
			 * another batch keeps as tombstones would leave the target half
			 * of each (removed.c).
			 */
			if (strcmp(what, "reconcile_batch") == 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("option \"delete_mode\" of reconcile_batch is not supported"),
						 errdetail("How a target keeps its deletes is part of its registration."),
						 errhint("Register the target again with options => '{\"delete_mode\": \"remove\"}' (or \"tombstone\").")));
			if (v.type == jbvNull)
				opts->delete_remove = false;
			else if (s != NULL && strcmp(s, "tombstone") == 0)
				opts->delete_remove = false;
			else if (s != NULL && strcmp(s, "remove") == 0)
				opts->delete_remove = true;
			else
				option_error(what, key, "\"tombstone\" or \"remove\"", &v);
		}
		else if (strcmp(key, "snapshot") == 0)
			apply_snapshot(opts, &v, what);
		else if (strcmp(key, "partial") == 0)
		{
			if (v.type == jbvNull)
				opts->partial = false;
			else if (v.type == jbvBool)
				opts->partial = v.val.boolean;
			else
				option_error(what, key, "true (staged rows may name their present columns in present_columns), false or null", &v);
		}
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown option \"%s\" of %s", key, what),
					 errhint("The options are %s.", LOAD_OPTION_KEYS)));
	}
}
