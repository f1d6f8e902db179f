/*
 * payload.h
 *		The canonical forms of a staged row (payload.c): the payload hash,
 *		the key and the payload as JSON, and back.
 */
#ifndef RECONCILE_PAYLOAD_H
#define RECONCILE_PAYLOAD_H

#include "utils/jsonb.h"

#include "target.h"
#include "common/sha256.h"

extern void payload_hash_compute(TargetInfo *target, Datum *values,
								 bool *isnull, bool is_delete,
								 Sha256Ctx *sha, uint8 *digest);
extern char *key_to_json(TargetInfo *target, Datum *values);
extern Jsonb *key_to_jsonb(TargetInfo *target, Datum *values);
extern void key_from_jsonb(TargetInfo *target, Jsonb *key, bool pinned,
						   const char *batch_id, Datum *values);
extern Jsonb *payload_to_jsonb(TargetInfo *target, Datum *values, bool *isnull);
extern void payload_from_jsonb(TargetInfo *target, Jsonb *payload, Datum *values,
							   bool *isnull);

#endif							/* RECONCILE_PAYLOAD_H */
