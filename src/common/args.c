/*
 * args.c
 *		Checks on the arguments of the SQL-callable functions, so that every
 *		entry point words the same refusal the same way.  The functions are
 *		CALLED ON NULL INPUT (some arguments may be NULL), so each checks
 *		the ones that may not.
 */
#include "postgres.h"

#include "fmgr.h"

#include "args.h"

/* Refuse a NULL argument argname (number argno) of funcname, naming both. */
void
check_arg_not_null(FunctionCallInfo fcinfo, int argno,
				   const char *argname, const char *funcname)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument %s of %s must not be null", argname, funcname)));
}
