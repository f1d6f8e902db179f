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
