/*
 * profile.c
 *		reconcile_discover_rules(): profile a relation, propose rules.
 */
#include "postgres.h"

#include "fmgr.h"

#include "rules.h"

PG_FUNCTION_INFO_V1(reconcile_discover_rules);

Datum
reconcile_discover_rules(PG_FUNCTION_ARGS)
{
	PG_RETURN_NULL();
}
