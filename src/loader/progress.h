/*
 * progress.h
 *		A batch's progress report and its test pause points (progress.c).
 *
 * The phases and the progress parameter numbers live together here:
 * reconcile--1.0.sql's view reconcile.batch_progress maps them (param8 is
 * the phase, param9..param11 the rows done, the rows in the manifest and
 * the workers; param7 holds PROGRESS_MAGIC), so change them only together
 * with that view.
 */
#ifndef RECONCILE_PROGRESS_H
#define RECONCILE_PROGRESS_H

/*
 * A batch reports as COPY (extensions can only use a built-in command
 * type); pg_stat_get_progress_info numbers its parameters from 1, so
 * parameter N here is the view's param(N+1).
 */
#define PROGRESS_MAGIC			0x7265636f	/* "reco" */
#define PROGRESS_PARAM_TUPLES	2	/* pg_stat_progress_copy.tuples_processed */
#define PROGRESS_PARAM_MAGIC	6
#define PROGRESS_PARAM_PHASE	7
#define PROGRESS_PARAM_DONE		8
#define PROGRESS_PARAM_TOTAL	9
#define PROGRESS_PARAM_WORKERS	10

/* The phase column of reconcile.batch_progress. */
typedef enum BatchPhase
{
	PHASE_READING = 1,			/* reading, casting and hashing staged rows */
	PHASE_SORTING,				/* sorting them by key and version */
	PHASE_MERGING,				/* deciding each key and writing winners */
	PHASE_APPLYING,				/* general path: applying the statements */
	PHASE_RECEIPT				/* writing rejects, conflicts and the receipt */
} BatchPhase;

extern void progress_start(Oid target, int64 total_rows);
extern void progress_end(void);
extern void progress_phase(BatchPhase phase);
extern void progress_rows(int64 done);
extern void progress_workers(int workers);

/* reconcile.pause_at (a GUC, see reconcile.c): where a batch waits, for tests. */
extern char *reconcile_pause_at;
extern void pause_point(const char *name);

#endif							/* RECONCILE_PROGRESS_H */
