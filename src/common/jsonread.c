/*
 * jsonread.c
 *		Small readers of jsonb values shared by the option and document
 *		parsers (diff options, rules documents, reconcile_check options),
 *		so that each names a value's type the same way in its errors.
 */
#include "postgres.h"

#include "utils/jsonb.h"

#include "jsonread.h"

/* A string value as a palloc'd C string. */
char *
jbv_string(JsonbValue *v)
{
	return pnstrdup(v->val.string.val, v->val.string.len);
}

/* A value's JSON type with its article, for messages ("an array"). */
const char *
jbv_type_name(JsonbValue *v)
{
	switch (v->type)
	{
		case jbvNull:
			return "null";
		case jbvString:
			return "a string";
		case jbvNumeric:
			return "a number";
		case jbvBool:
			return "a boolean";
		case jbvBinary:
			return JsonContainerIsArray(v->val.binary.data) ? "an array" : "an object";
		default:
			return "a JSON value";
	}
}

/* Whether a value read with skipNested is a JSON object. */
bool
jbv_is_object(JsonbValue *v)
{
	return v->type == jbvBinary && JsonContainerIsObject(v->val.binary.data);
}

/* Whether a value read with skipNested is a JSON array (not a raw scalar). */
bool
jbv_is_array(JsonbValue *v)
{
	return v->type == jbvBinary && JsonContainerIsArray(v->val.binary.data) &&
		!JsonContainerIsScalar(v->val.binary.data);
}

/*
 * The next field of the object an iterator was started on (nested values
 * come back whole, as jbvBinary): its key in *key, its value in *v.  False
 * once the object is done.
 */
bool
jsonb_object_next(JsonbIterator **it, char **key, JsonbValue *v)
{
	JsonbIteratorToken tok;

	while ((tok = JsonbIteratorNext(it, v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
			*key = jbv_string(v);
		else if (tok == WJB_VALUE)
			return true;
	}
	return false;
}
