/*
 * jsonbuild.h
 *		Building jsonb values with pushJsonbValue (jsonbuild.c).
 */
#ifndef RECONCILE_JSONBUILD_H
#define RECONCILE_JSONBUILD_H

#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

extern void jsonb_push_key(JsonbParseState **st, const char *key);
extern void jsonb_push_string_field(JsonbParseState **st, const char *key, const char *value);
extern void jsonb_push_int64_field(JsonbParseState **st, const char *key, int64 value);
extern void jsonb_push_null_field(JsonbParseState **st, const char *key);
extern Jsonb *jsonb_from_datum(Datum d, Oid type);
extern void jsonb_push_numeric_field(JsonbParseState **st, const char *key, Numeric value);
/* jsonb_push_datum flags */
#define JSONB_DATUM_ISO_DATETIME	0x01	/* dates and times as ISO 8601 */
#define JSONB_DATUM_EMBED_JSON		0x02	/* json, jsonb as values, not text */

extern void jsonb_push_datum(JsonbParseState **st, JsonbIteratorToken token, Datum d,
							 bool isnull, Oid type, FmgrInfo *out, int flags);
extern void jsonb_push_string(JsonbParseState **st, JsonbIteratorToken token, const char *s);
extern bool json_value_is_number(Oid type, const char *text);
extern void json_append_value_text(StringInfo buf, Oid type, const char *text);
extern void json_append_string(StringInfo buf, const char *str);
typedef struct JsonbArrayBuilder JsonbArrayBuilder;
extern JsonbArrayBuilder *jsonb_array_begin(int nelems);
extern void jsonb_array_add(JsonbArrayBuilder *ab, const Jsonb *elem);
extern Jsonb *jsonb_array_end(JsonbArrayBuilder *ab);

#endif							/* RECONCILE_JSONBUILD_H */
