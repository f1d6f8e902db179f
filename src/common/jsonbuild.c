/*
 * jsonbuild.c
 *		JSON values built through pushJsonbValue, never as text reparsed by
 *		jsonb_in: fields of objects, and arrays of very many elements.
 *
 * pushJsonbValue holds the whole value as a tree of JsonbValues until it
 * is converted, some 1.5 kB per element of an array of small objects.  A
 * receipt's objects hold one element per manifest entry, hundreds of
 * thousands of them, so JsonbArrayBuilder converts each element on its own
 * (built with pushJsonbValue, in a context the caller resets) and appends
 * its bytes to the array: memory holds the finished jsonb, not a tree.
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "common/jsonapi.h"
#include "lib/stringinfo.h"
#include "nodes/makefuncs.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/fmgrprotos.h"
#include "utils/numeric.h"

#include "jsonbuild.h"

/* Push an object key. */
void
jsonb_push_key(JsonbParseState **st, const char *key)
{
	JsonbValue	v;

	v.type = jbvString;
	v.val.string.val = (char *) key;
	v.val.string.len = strlen(key);
	pushJsonbValue(st, WJB_KEY, &v);
}

/* Push the object field key: value, value as a JSON string. */
void
jsonb_push_string_field(JsonbParseState **st, const char *key, const char *value)
{
	JsonbValue	v;

	jsonb_push_key(st, key);
	v.type = jbvString;
	v.val.string.val = (char *) value;
	v.val.string.len = strlen(value);
	pushJsonbValue(st, WJB_VALUE, &v);
}

/* Push the object field key: value, value as a JSON number. */
void
jsonb_push_int64_field(JsonbParseState **st, const char *key, int64 value)
{
	jsonb_push_numeric_field(st, key, int64_to_numeric(value));
}

/* Push the object field key: value, value as a JSON number. */
void
jsonb_push_numeric_field(JsonbParseState **st, const char *key, Numeric value)
{
	JsonbValue	v;

	jsonb_push_key(st, key);
	v.type = jbvNumeric;
	v.val.numeric = value;
	pushJsonbValue(st, WJB_VALUE, &v);
}

/* Push the object field key: null. */
void
jsonb_push_null_field(JsonbParseState **st, const char *key)
{
	JsonbValue	v;

	jsonb_push_key(st, key);
	v.type = jbvNull;
	pushJsonbValue(st, WJB_VALUE, &v);
}

/*
 * A value of type as jsonb, as to_jsonb writes it: to_jsonb itself, called
 * with an expression that gives its argument's type.  Composite values
 * (type RECORDOID serves for any) and json documents, which to_jsonb
 * parses as the json-to-jsonb cast does.
 */
Jsonb *
jsonb_from_datum(Datum d, Oid type)
{
	FmgrInfo	flinfo;

	fmgr_info(F_TO_JSONB, &flinfo);
	fmgr_info_set_expr((Node *) makeFuncExpr(F_TO_JSONB, JSONBOID,
											 list_make1(makeNullConst(type, -1, InvalidOid)),
											 InvalidOid, InvalidOid, COERCE_EXPLICIT_CALL),
					   &flinfo);
	return DatumGetJsonbP(FunctionCall1(&flinfo, d));
}

/*
 * Whether a value of type, given as its output text, goes into JSON as a
 * number: integers, numeric and floats whose text is a JSON number (not
 * NaN or Infinity).  A float's negative zero stays text: a jsonb number is
 * a numeric, which has no sign on zero, and the value would read back as
 * +0.  The one test of "is this a number" in reconcile.
 */
bool
json_value_is_number(Oid type, const char *text)
{
	switch (type)
	{
		case FLOAT4OID:
		case FLOAT8OID:
			if (strcmp(text, "-0") == 0)
				return false;
			/* FALLTHROUGH */
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case NUMERICOID:
			return IsValidJsonNumber(text, strlen(text));
		default:
			return false;
	}
}

/*
 * Push a Datum of type as one JSON value (token WJB_VALUE or WJB_ELEM):
 * NULL as null, a boolean as true or false, a number whose text is a JSON
 * number (json_value_is_number) as a number, the rest as the string out
 * writes.  Flags keep a caller's established form: JSONB_DATUM_ISO_DATETIME
 * writes dates and times as JSON does (ISO 8601, JsonEncodeDateTime), and
 * JSONB_DATUM_EMBED_JSON embeds json and jsonb values instead of quoting
 * their text.  The one way reconcile turns a Datum into JSON.
 */
void
jsonb_push_datum(JsonbParseState **st, JsonbIteratorToken token, Datum d,
				 bool isnull, Oid type, FmgrInfo *out, int flags)
{
	JsonbValue	v;
	char	   *s;

	if (isnull)
	{
		v.type = jbvNull;
		pushJsonbValue(st, token, &v);
		return;
	}
	switch (type)
	{
		case BOOLOID:
			v.type = jbvBool;
			v.val.boolean = DatumGetBool(d);
			pushJsonbValue(st, token, &v);
			return;
		case NUMERICOID:
			if (!numeric_is_nan(DatumGetNumeric(d)) && !numeric_is_inf(DatumGetNumeric(d)))
			{
				v.type = jbvNumeric;
				v.val.numeric = DatumGetNumeric(d);
				pushJsonbValue(st, token, &v);
				return;
			}
			break;
		case DATEOID:
		case TIMEOID:
		case TIMETZOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
			if (flags & JSONB_DATUM_ISO_DATETIME)
			{
				jsonb_push_string(st, token, JsonEncodeDateTime(NULL, d, type, NULL));
				return;
			}
			break;
		case JSONBOID:
		case JSONOID:
			if (flags & JSONB_DATUM_EMBED_JSON)
			{
				Jsonb	   *jb;

				if (type == JSONBOID)
					jb = DatumGetJsonbP(d);
				else
					jb = jsonb_from_datum(d, JSONOID);
				if (JB_ROOT_IS_SCALAR(jb))
					JsonbExtractScalar(&jb->root, &v);
				else
				{
					v.type = jbvBinary;
					v.val.binary.data = &jb->root;
					v.val.binary.len = VARSIZE(jb) - VARHDRSZ;
				}
				pushJsonbValue(st, token, &v);
				return;
			}
			break;
		default:
			break;
	}
	s = OutputFunctionCall(out, d);
	if (json_value_is_number(type, s))
	{
		v.type = jbvNumeric;
		v.val.numeric = DatumGetNumeric(DirectFunctionCall3(numeric_in, CStringGetDatum(s),
															ObjectIdGetDatum(InvalidOid),
															Int32GetDatum(-1)));
		pushJsonbValue(st, token, &v);
	}
	else
		jsonb_push_string(st, token, s);
}

/* Push a string as one JSON value (token WJB_VALUE or WJB_ELEM). */
void
jsonb_push_string(JsonbParseState **st, JsonbIteratorToken token, const char *s)
{
	JsonbValue	v;

	v.type = jbvString;
	v.val.string.val = (char *) s;
	v.val.string.len = strlen(s);
	pushJsonbValue(st, token, &v);
}

/*
 * Append a value of type, given as its output text, as a JSON value:
 * a number as a number, a boolean as true or false, the rest as a string.
 */
void
json_append_value_text(StringInfo buf, Oid type, const char *text)
{
	if (json_value_is_number(type, text))
		appendStringInfoString(buf, text);
	else if (type == BOOLOID)
		appendStringInfoString(buf, text[0] == 't' ? "true" : "false");
	else
		escape_json(buf, text);
}

/*
 * The array is laid out as PostgreSQL's convertJsonbArray() lays it out
 * (jsonb_util.c): a varlena header, the container header, one JEntry per
 * element, then each element's container bytes, aligned to 4 bytes; every
 * JB_OFFSET_STRIDE'th JEntry holds the end offset instead of the length.
 */
struct JsonbArrayBuilder
{
	StringInfoData buf;
	int			nelems;
	int			added;
	int			jentries;		/* offset of the first JEntry in buf */
	uint32		totallen;		/* element bytes so far, padding included */
};

/* Start an array of exactly nelems elements, laid out as convertJsonbArray does. */
JsonbArrayBuilder *
jsonb_array_begin(int nelems)
{
	JsonbArrayBuilder *ab = palloc0(sizeof(JsonbArrayBuilder));
	uint32		header = (uint32) nelems | JB_FARRAY;

	if (nelems < 0 || nelems > JB_CMASK)
		elog(ERROR, "invalid number of jsonb array elements: %d", nelems);
	ab->nelems = nelems;
	initStringInfo(&ab->buf);
	appendStringInfoSpaces(&ab->buf, VARHDRSZ);
	appendBinaryStringInfo(&ab->buf, (char *) &header, sizeof(uint32));
	ab->jentries = ab->buf.len;
	enlargeStringInfo(&ab->buf, sizeof(JEntry) * nelems);
	ab->buf.len += sizeof(JEntry) * nelems;
	return ab;
}

/* Append an element: a jsonb object or array (not a scalar). */
void
jsonb_array_add(JsonbArrayBuilder *ab, const Jsonb *elem)
{
	int			start = ab->buf.len;
	int			padding = INTALIGN(start) - start;
	uint32		len = VARSIZE(elem) - VARHDRSZ;
	JEntry		meta;

	if (JB_ROOT_IS_SCALAR(elem) || ab->added >= ab->nelems)
		elog(ERROR, "invalid jsonb array element");
	if ((uint64) ab->totallen + padding + len > JENTRY_OFFLENMASK)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("total size of jsonb array elements exceeds the maximum of %u bytes",
						JENTRY_OFFLENMASK)));
	appendStringInfoSpaces(&ab->buf, padding);
	memset(ab->buf.data + start, 0, padding);
	appendBinaryStringInfo(&ab->buf, (const char *) &elem->root, len);
	ab->totallen += padding + len;
	if (ab->added % JB_OFFSET_STRIDE == 0)
		meta = JENTRY_ISCONTAINER | JENTRY_HAS_OFF | ab->totallen;
	else
		meta = JENTRY_ISCONTAINER | (padding + len);
	memcpy(ab->buf.data + ab->jentries + sizeof(JEntry) * ab->added, &meta, sizeof(JEntry));
	ab->added++;
}

/* Finish the array once all its elements are added; returns the jsonb. */
Jsonb *
jsonb_array_end(JsonbArrayBuilder *ab)
{
	Jsonb	   *result = (Jsonb *) ab->buf.data;

	if (ab->added != ab->nelems)
		elog(ERROR, "jsonb array has %d of its %d elements", ab->added, ab->nelems);
	SET_VARSIZE(result, ab->buf.len);
	pfree(ab);
	return result;
}

/*
 * Append str as a JSON string, byte for byte what escape_json writes, but
 * copying the runs between characters to escape at once rather than one
 * character at a time: every payload value of every staged row goes
 * through here.
 */
void
json_append_string(StringInfo buf, const char *str)
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
