/*
 * reconcile.h
 *		Small helpers shared across the extension: JSON building and a
 *		DestReceiver shell.
 *
 * Each concept has its own header: loader.h (a batch), manifest.h,
 * target.h, progress.h, state.h, payload.h, probe.h, writers.h and
 * sha256.h for the loader; diff.h for the diff; rules.h for the rules.
 */
#ifndef RECONCILE_H
#define RECONCILE_H

#include "tcop/dest.h"
#include "utils/jsonb.h"

/* ---- jsonbuild.c ---- */

extern void jsonb_push_key(JsonbParseState **st, const char *key);
extern void jsonb_push_string_field(JsonbParseState **st, const char *key, const char *value);
extern void jsonb_push_int64_field(JsonbParseState **st, const char *key, int64 value);
typedef struct JsonbArrayBuilder JsonbArrayBuilder;
extern JsonbArrayBuilder *jsonb_array_begin(int nelems);
extern void jsonb_array_add(JsonbArrayBuilder *ab, const Jsonb *elem);
extern Jsonb *jsonb_array_end(JsonbArrayBuilder *ab);

/* ---- receiver.c ---- */

extern void receiver_init(DestReceiver *dest,
						  bool (*receive) (TupleTableSlot *, DestReceiver *));

#endif							/* RECONCILE_H */
