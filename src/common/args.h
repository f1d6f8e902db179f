/*
 * args.h
 *		Checks on the arguments of the SQL-callable functions (args.c).
 */
#ifndef RECONCILE_ARGS_H
#define RECONCILE_ARGS_H

#include "fmgr.h"

extern void check_arg_not_null(FunctionCallInfo fcinfo, int argno,
							   const char *argname, const char *funcname);

#endif							/* RECONCILE_ARGS_H */
