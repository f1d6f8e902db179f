/*
 * jobs.h
 *		What a configured job (a diff job, a check job) asks of the relations
 *		it names, before it locks them (jobs.c).
 */
#ifndef RECONCILE_JOBS_H
#define RECONCILE_JOBS_H

#include "nodes/primnodes.h"

/* The argument of job_relation_check: whose relation, for the messages. */
typedef struct JobRelationCheck
{
	const char *kind;			/* "diff job", "check job" */
	const char *job;			/* the job's name */
	const char *hint;			/* what to do without SELECT on it */
} JobRelationCheck;

/* A RangeVarGetRelidExtended callback; arg is a JobRelationCheck. */
extern void job_relation_check(const RangeVar *rv, Oid relid, Oid oldrelid, void *arg);

#endif
