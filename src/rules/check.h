/*
 * check.h
 *		The outcome of a data-quality check, rule by rule, as the check's
 *		history records it: produced by reconcile_check's run
 *		(rules_check.c) and by a batch's rules (rules_attach.c), written by
 *		check_history.c.
 */
#ifndef RECONCILE_CHECK_H
#define RECONCILE_CHECK_H

#include "access/htup.h"
#include "access/tupdesc.h"
#include "datatype/timestamp.h"
#include "utils/jsonb.h"

typedef struct CheckRuleOutcome
{
	const char *rule;
	const char *severity;		/* fail, warn, drop, dataset_check */
	const char *status;			/* PASS, FAIL, ERROR, SKIPPED */
	bool		counted;		/* invalid (and total) hold counts */
	int64		invalid;
	int64		total;			/* -1: unknown (a dataset check) */
	Jsonb	   *threshold;		/* NULL without */
	bool		gate_breach;
	Jsonb	   *sample;			/* NULL: none taken */
	char	   *detail;
	char	   *error;
	char	   *sqlstate;
	/* anomaly rules: the value measured and the history it was held to */
	bool		has_observed;
	double		observed;
	bool		has_history;
	double		history_mean;
	double		history_stddev;
	int			history_runs;
} CheckRuleOutcome;

typedef struct CheckOutcome
{
	Oid			relid;
	int64		total_rows;
	int			nrules;
	CheckRuleOutcome *rules;
	int			passed;
	int			failed;
	int			errored;
	int			skipped;
	bool		blocked;
} CheckOutcome;

/* rules_check.c: run a document over a relation (caller connected to SPI) */
extern CheckOutcome *rules_check_outcome(Oid relid, Jsonb *doc, Jsonb *options,
										 const char *job, Oid run_as);

/* check_history.c */
extern bool reconcile_check_history;
extern void check_history_define_settings(void);
extern bool check_history_installed(void);
extern int64 check_history_record(const CheckOutcome *out, const char *job,
								  const char *batch_id, TimestampTz started,
								  const char *error, HeapTuple *row, TupleDesc *rowdesc);

#endif							/* RECONCILE_CHECK_H */
