/*
 * payload.c
 *		The documented canonical forms of a staged row: the payload hash's
 *		text and the key as JSON.
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

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "pgtime.h"
#include "utils/builtins.h"
#include "utils/bytea.h"
#include "utils/datetime.h"
#include "utils/float.h"
#include "utils/json.h"

#include "jsonbuild.h"
#include "payload.h"

typedef struct OutputSettings
{
	int			date_style;
	int			date_order;
	int			interval_style;
	int			float_digits;
	int			bytea;
	pg_tz	   *tz;
} OutputSettings;

/*
 * The settings are assigned directly and put back in a PG_FINALLY rather
 * than through set_config_option and a GUC nest level, as postgres_fdw's
 * set_transmission_modes does: this runs for every staged row, and the GUC
 * machinery's cost per call would show in a batch's time.
 */
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

/* The payload hash of one row's payload values (in the target's types). */
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

/*
 * The key as a jsonb object, the same value key_to_json writes: numbers and
 * booleans as such, the rest as text.
 */
Jsonb *
key_to_jsonb(TargetInfo *t, Datum *values)
{
	JsonbParseState *st = NULL;
	JsonbValue *res;

	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	for (int i = 0; i < t->nkeys; i++)
	{
		TargetColumn *k = &t->keys[i];

		jsonb_push_key(&st, k->name);
		jsonb_push_datum(&st, WJB_VALUE, values[i], false, k->typid, &k->out, 0);
	}
	res = pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	return JsonbValueToJsonb(res);
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
		json_append_value_text(&buf, k->typid, text);
	}
	appendStringInfoChar(&buf, '}');
	return buf.data;
}

/*
 * The payload as a jsonb object, column name to value, for a held conflict:
 * the values the hash is over, written under the same pinned settings
 * (numbers and booleans as such, the rest as their text form; json and
 * jsonb values as text, as the hash has them).  payload_from_jsonb reads
 * it back.
 */
Jsonb *
payload_to_jsonb(TargetInfo *t, Datum *values, bool *isnull)
{
	JsonbParseState *st = NULL;
	JsonbValue *volatile res = NULL;
	OutputSettings saved;

	output_settings_pin(&saved);
	if (t->payload_names_objects)
	{
		OverrideSearchPath path = {NIL, true, false, 0};

		PushOverrideSearchPath(&path);
	}
	PG_TRY();
	{
		pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
		for (int i = 0; i < t->npayload; i++)
		{
			TargetColumn *c = &t->payload[i];

			jsonb_push_key(&st, c->name);
			jsonb_push_datum(&st, WJB_VALUE, values[i], isnull[i], c->typid, &c->out, 0);
		}
		res = pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	}
	PG_FINALLY();
	{
		output_settings_restore(&saved);
		if (t->payload_names_objects)
			PopOverrideSearchPath();
	}
	PG_END_TRY();
	return JsonbValueToJsonb(res);
}

/*
 * The text of one scalar of a payload or key object, as its column's input
 * function reads it, or NULL for a JSON null.  what names the column for
 * the error.
 */
static char *
json_scalar_text(JsonbValue *v, const char *what, const char *column)
{
	switch (v->type)
	{
		case jbvNull:
			return NULL;
		case jbvString:
			return pnstrdup(v->val.string.val, v->val.string.len);
		case jbvNumeric:
			return DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
		case jbvBool:
			return pstrdup(v->val.boolean ? "true" : "false");
		default:
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("%s value of column \"%s\" is not a JSON scalar", what, column)));
	}
	return NULL;				/* keep compiler quiet */
}

/* The value named name in object jb, or NULL when it has none. */
static JsonbValue *
object_field(Jsonb *jb, const char *name)
{
	JsonbValue	k;

	k.type = jbvString;
	k.val.string.val = (char *) name;
	k.val.string.len = strlen(name);
	return findJsonbValueFromContainer(&jb->root, JB_FOBJECT, &k);
}

/*
 * Read a payload object that payload_to_jsonb wrote back into the target's
 * types, under the same pinned settings.  The object must name exactly the
 * target's payload columns: a target registered with other payload columns
 * since is refused.
 */
void
payload_from_jsonb(TargetInfo *t, Jsonb *jb, Datum *values, bool *isnull)
{
	OutputSettings saved;

	if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_COUNT(jb) != t->npayload)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a held payload of table \"%s\" does not match its payload columns", t->relname),
				 errdetail("The payload has %d fields, the registration names %d payload columns.",
						   JB_ROOT_IS_OBJECT(jb) ? (int) JB_ROOT_COUNT(jb) : -1, t->npayload),
				 errhint("The target was registered again with other payload columns since the batch; resolve the key by hand.")));
	output_settings_pin(&saved);
	PG_TRY();
	{
		for (int i = 0; i < t->npayload; i++)
		{
			TargetColumn *c = &t->payload[i];
			JsonbValue *v = object_field(jb, c->name);
			char	   *text;

			if (v == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("a held payload of table \"%s\" has no column \"%s\"", t->relname, c->name),
						 errhint("The target was registered again with other payload columns since the batch; resolve the key by hand.")));
			text = json_scalar_text(v, "held payload", c->name);
			isnull[i] = (text == NULL);
			values[i] = InputFunctionCall(&c->in, text, c->ioparam, c->typmod);
		}
	}
	PG_FINALLY();
	{
		output_settings_restore(&saved);
	}
	PG_END_TRY();
}

/*
 * Read a key object (as key_to_jsonb writes it) into the target's key
 * types; the caller checks that it writes back the same.  Refuses a key
 * that does not name exactly the key columns, or names one null.
 */
void
key_from_jsonb(TargetInfo *t, Jsonb *jb, Datum *values)
{
	if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_COUNT(jb) != t->nkeys)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key %s does not name the key columns of table \"%s\"",
						JsonbToCString(NULL, &jb->root, VARSIZE(jb)), t->relname),
				 errdetail("A key is a JSON object with one field per key column, as reconcile.conflicts.key shows it.")));
	for (int i = 0; i < t->nkeys; i++)
	{
		TargetColumn *c = &t->keys[i];
		JsonbValue *v = object_field(jb, c->name);
		char	   *text = v ? json_scalar_text(v, "key", c->name) : NULL;

		if (text == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("key %s does not name the key columns of table \"%s\"",
							JsonbToCString(NULL, &jb->root, VARSIZE(jb)), t->relname),
					 errdetail("Key column \"%s\" is missing or null.", c->name)));
		values[i] = InputFunctionCall(&c->in, text, c->ioparam, c->typmod);
	}
}
