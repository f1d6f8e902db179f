/*
 * jsonread.h
 *		Reading the values of a jsonb document: options, rules (jsonread.c).
 */
#ifndef RECONCILE_JSONREAD_H
#define RECONCILE_JSONREAD_H

#include "utils/jsonb.h"

extern char *jbv_string(JsonbValue *v);
extern const char *jbv_type_name(JsonbValue *v);
extern bool jbv_is_object(JsonbValue *v);
extern bool jbv_is_array(JsonbValue *v);
extern bool jsonb_object_next(JsonbIterator **it, char **key, JsonbValue *v);

#endif							/* RECONCILE_JSONREAD_H */
