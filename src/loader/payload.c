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
 * produced under the pinned settings of pinned.c whatever the session
 * says: the same payload has the same hash in every session.  The key and
 * the payload a conflict holds are written and read back under the same
 * settings.
 */
#include "postgres.h"

#include <float.h>

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "pgtime.h"
#include "utils/builtins.h"
#include "utils/bytea.h"
#include "utils/datetime.h"
#include "utils/float.h"
#include "utils/json.h"
#include "utils/lsyscache.h"
#include "utils/timestamp.h"

#include "common/jsonbuild.h"
#include "payload.h"
#include "common/pinned.h"

/* The payload hash of one row's payload values (in the target's types). */
void
payload_hash_compute(TargetInfo *t, Datum *values, bool *isnull,
					 bool is_delete, Sha256Ctx *sha, uint8 *digest)
{
	StringInfoData buf;
	PinnedSettings saved;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	pinned_settings_enter(&saved, t->payload_names_objects);
	PG_TRY();
	{
		for (int i = 0; i < t->npayload; i++)
		{
			if (isnull[i])
				appendStringInfoString(&buf, "null");
			else
				json_append_string(&buf, OutputFunctionCall(&t->payload[i].out, values[i]));
			appendStringInfoChar(&buf, ',');
		}
	}
	PG_FINALLY();
	{
		pinned_settings_leave(&saved);
	}
	PG_END_TRY();
	appendStringInfoString(&buf, is_delete ? "true]" : "false]");
	reconcile_sha256_with(sha, buf.data, buf.len, digest);
	pfree(buf.data);
}

/* Whether a key column's text form names an object (see pinned.c). */
static bool
keys_name_objects(TargetInfo *t)
{
	for (int i = 0; i < t->nkeys; i++)
		if (type_names_objects(t->keys[i].typid))
			return true;
	return false;
}

/*
 * The key as a jsonb object, the same value key_to_json writes: numbers and
 * booleans as such, the rest as text, under the pinned settings, as
 * reconcile.conflicts holds it.
 */
Jsonb *
key_to_jsonb(TargetInfo *t, Datum *values)
{
	JsonbParseState *st = NULL;
	JsonbValue *volatile res = NULL;
	PinnedSettings saved;

	pinned_settings_enter(&saved, keys_name_objects(t));
	PG_TRY();
	{
		pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
		for (int i = 0; i < t->nkeys; i++)
		{
			TargetColumn *k = &t->keys[i];

			jsonb_push_key(&st, k->name);
			jsonb_push_datum(&st, WJB_VALUE, values[i], false, k->typid, &k->out, 0);
		}
		res = pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	}
	PG_FINALLY();
	{
		pinned_settings_leave(&saved);
	}
	PG_END_TRY();
	return JsonbValueToJsonb(res);
}

/*
 * The key as a JSON object, for messages: numbers and booleans as such, the
 * rest as text, under the pinned settings.
 */
char *
key_to_json(TargetInfo *t, Datum *values)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int i = 0; i < t->nkeys; i++)
	{
		TargetColumn *k = &t->keys[i];
		char	   *text = pinned_output(&k->out, values[i], type_names_objects(k->typid));

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
	PinnedSettings saved;

	pinned_settings_enter(&saved, t->payload_names_objects);
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
		pinned_settings_leave(&saved);
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
	PinnedSettings saved;

	if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_COUNT(jb) != t->npayload)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("a held payload of table \"%s\" does not match its payload columns", t->relname),
				 errdetail("The payload has %d fields, the registration names %d payload columns.",
						   JB_ROOT_IS_OBJECT(jb) ? (int) JB_ROOT_COUNT(jb) : -1, t->npayload),
				 errhint("The target was registered again with other payload columns since the batch; resolve the key by hand.")));
	pinned_settings_enter(&saved, t->payload_names_objects);
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
		pinned_settings_leave(&saved);
	}
	PG_END_TRY();
}

/* Significant digits of a number's text: "0.00120" has 2, "0" none. */
static int
significant_digits(const char *text)
{
	int			first = -1;
	int			last = -1;
	int			n = 0;

	for (const char *p = text; *p && *p != 'e' && *p != 'E'; p++)
	{
		if (*p < '0' || *p > '9')
			continue;
		if (*p != '0')
		{
			if (first < 0)
				first = n;
			last = n;
		}
		n++;
	}
	return first < 0 ? 0 : last - first + 1;
}

/*
 * Whether text, a key column's value as reconcile 1.1 held it (written with
 * the loading session's DateStyle, IntervalStyle, TimeZone and
 * extra_float_digits, which are not known), names value and nothing else
 * whatever those settings were.  value is text read under the pinned
 * settings (which are in force), pinned its pinned text form.  Only forms
 * that no other setting writes for another value are taken: ISO dates and
 * times (a timestamptz with a numeric offset), intervals in the postgres or
 * ISO 8601 style, floats with more digits than extra_float_digits 0 writes;
 * the rest of the types have one text form.
 */
static bool
held_text_exact(TargetColumn *c, const char *text, Datum value, const char *pinned)
{
	Oid			type = getBaseType(c->typid);

	if (type == FLOAT4OID || type == FLOAT8OID)
	{
		int			digits;

		/* NaN and the infinities are strings in the key. */
		if (!json_value_is_number(type, pinned) || !json_value_is_number(type, text))
			return strcmp(text, pinned) == 0;
		/*
		 * extra_float_digits 0 or less writes at most FLT_DIG / DBL_DIG
		 * digits, rounded; more than 0 (the default 1) the shortest text
		 * that reads back exactly.  A text with more digits is the latter:
		 * it reads as the float that was written, whatever its form as a
		 * JSON number (0.00001 for 1e-05).
		 */
		digits = significant_digits(text);
		return digits == 0 || digits > (type == FLOAT4OID ? FLT_DIG : DBL_DIG);
	}
	if (strcmp(text, pinned) == 0)
		return true;
	if (type == TIMESTAMPTZOID)
	{
		/* Written with a numeric offset: the ISO form in that offset. */
		Timestamp	wall = DatumGetTimestamp(DirectFunctionCall3(timestamp_in,
																 CStringGetDatum(text),
																 ObjectIdGetDatum(InvalidOid),
																 Int32GetDatum(-1)));
		int64		offset = wall - DatumGetTimestampTz(value);
		pg_tz	   *saved_tz = session_timezone;
		char	   *form;

		if (TIMESTAMP_NOT_FINITE(wall) || offset % USECS_PER_SEC != 0)
			return false;
		/* On error the caller's PG_FINALLY puts the session's zone back. */
		session_timezone = pg_tzset_offset(-(long) (offset / USECS_PER_SEC));
		form = OutputFunctionCall(&c->out, value);
		session_timezone = saved_tz;
		return strcmp(text, form) == 0;
	}
	if (type == INTERVALOID)
	{
		/* ISO 8601 intervals read the same under every IntervalStyle. */
		int			saved_style = IntervalStyle;
		char	   *form;

		IntervalStyle = INTSTYLE_ISO_8601;
		form = OutputFunctionCall(&c->out, value);
		IntervalStyle = saved_style;
		return strcmp(text, form) == 0;
	}
	return false;
}

/*
 * Read a value of a key held by reconcile 1.1 under the pinned settings:
 * false when it is not a valid value there ('13/02/2024', written under
 * DateOrder DMY).  Only the errors of built-in input functions are caught
 * (stage.c's input_value says why); others propagate.
 */
static bool
held_input(TargetColumn *c, char *text, Datum *value)
{
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool ok = true;

	if (!c->catch_directly)
	{
		*value = InputFunctionCall(&c->in, text, c->ioparam, c->typmod);
		return true;
	}
	PG_TRY();
	{
		*value = InputFunctionCall(&c->in, text, c->ioparam, c->typmod);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (ERRCODE_TO_CATEGORY(edata->sqlerrcode) != ERRCODE_DATA_EXCEPTION)
			PG_RE_THROW();
		FlushErrorState();
		FreeErrorData(edata);
		ok = false;
	}
	PG_END_TRY();
	return ok;
}

/*
 * Read a held key object (as key_to_jsonb writes it) back into the target's
 * key types, under the pinned settings, and make sure it is exactly the key
 * the batch held.  pinned says the key was written under them (reconcile
 * 1.2): it must then write back as it was held.  A key held by reconcile
 * 1.1 was written under the loading session's settings: each of its values
 * must be in a form that names one value whatever those were
 * (held_text_exact).  Anything else is refused: the key would name another
 * row.  Refuses too a key that does not name exactly the key columns, or
 * names one null.  batch_id is for messages.
 */
void
key_from_jsonb(TargetInfo *t, Jsonb *jb, bool pinned, const char *batch_id, Datum *values)
{
	char	   *keytext = JsonbToCString(NULL, &jb->root, VARSIZE(jb));
	PinnedSettings saved;
	const char *volatile inexact = NULL;
	char	   *volatile inexact_text = NULL;

	if (!JB_ROOT_IS_OBJECT(jb) || JB_ROOT_COUNT(jb) != t->nkeys)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key %s does not name the key columns of table \"%s\"",
						keytext, t->relname),
				 errdetail("A key is a JSON object with one field per key column, as reconcile.conflicts.key shows it.")));
	pinned_settings_enter(&saved, keys_name_objects(t));
	PG_TRY();
	{
		for (int i = 0; i < t->nkeys; i++)
		{
			TargetColumn *c = &t->keys[i];
			JsonbValue *v = object_field(jb, c->name);
			char	   *text = v ? json_scalar_text(v, "key", c->name) : NULL;

			if (text == NULL)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("key %s does not name the key columns of table \"%s\"",
								keytext, t->relname),
						 errdetail("Key column \"%s\" is missing or null.", c->name)));
			if (pinned)
				values[i] = InputFunctionCall(&c->in, text, c->ioparam, c->typmod);
			else if (!held_input(c, text, &values[i]) ||
					 !held_text_exact(c, text, values[i], OutputFunctionCall(&c->out, values[i])))
			{
				if (inexact == NULL)
				{
					inexact = c->name;
					inexact_text = text;
				}
			}
		}
	}
	PG_FINALLY();
	{
		pinned_settings_leave(&saved);
	}
	PG_END_TRY();

	if (inexact != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("key %s of batch %s in table \"%s\" does not name one key exactly",
						keytext, batch_id, t->relname),
				 errdetail("The key was held by reconcile 1.1, which wrote it with the loading session's DateStyle, IntervalStyle, TimeZone and extra_float_digits; \"%s\" of column \"%s\" may stand for another value under other settings.",
						   inexact_text, inexact),
				 errhint("Load the payload to keep with a new batch at a higher version; keys held by reconcile 1.2 are written in a form independent of the session.")));
	if (pinned &&
		!DatumGetBool(DirectFunctionCall2(jsonb_eq, JsonbPGetDatum(key_to_jsonb(t, values)),
										  JsonbPGetDatum(jb))))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("key %s of batch %s in table \"%s\" does not read back as the same key",
						keytext, batch_id, t->relname),
				 errdetail("The key's columns read it back as %s.", key_to_json(t, values)),
				 errhint("The target's key columns changed type since the batch; load the payload to keep with a new batch at a higher version.")));
}
