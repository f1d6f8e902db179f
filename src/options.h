/*
 * options.h
 *		A batch's load options (options.c): the reject and schema drift
 *		policies, from the target's registration and the batch's call.
 */
#ifndef RECONCILE_OPTIONS_H
#define RECONCILE_OPTIONS_H

#include "utils/jsonb.h"
#include "utils/numeric.h"

typedef struct LoadOptions
{
	int64		max_rejects;	/* -1: no limit */
	Numeric		max_reject_share;	/* NULL: no limit */
	bool		ignore_unknown_columns;
} LoadOptions;

#define LOAD_OPTION_KEYS "\"max_rejects\", \"max_reject_share\" and \"unknown_columns\""

extern void load_options_init(LoadOptions *opts);
extern void load_options_apply(LoadOptions *opts, Jsonb *doc, const char *what);

#endif							/* RECONCILE_OPTIONS_H */
