/*
 * progress.c
 *		A batch's progress, seen in reconcile.batch_progress, and the pause
 *		points tests hold a batch at.
 *
 * Progress goes through PostgreSQL's command progress reporting, which
 * extensions can only use under a built-in command type: a batch reports
 * as COPY, marked with PROGRESS_MAGIC so that reconcile.batch_progress can
 * tell its rows from a real COPY's (see progress.h for the numbers).  The
 * phases below the driver (stage.c, merge.c) report here rather than to
 * batch.c, which runs them.
 */
#include "postgres.h"

#include "miscadmin.h"
#include "pgstat.h"
#include "utils/backend_progress.h"
#include "utils/backend_status.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"

#include "progress.h"

char	   *reconcile_pause_at = NULL;

static bool progress_active = false;

/* reconcile.pause_at: the advisory lock a paused batch waits for. */
#define PAUSE_LOCK_KEY INT64CONST(0x7265636f6e63696c)	/* "reconcil" */

void
pause_point(const char *name)
{
	if (reconcile_pause_at == NULL || strcmp(reconcile_pause_at, name) != 0)
		return;
	DirectFunctionCall1(pg_advisory_xact_lock_int8, Int64GetDatum(PAUSE_LOCK_KEY));
}

/*
 * Start reporting a batch into target of total_rows staged rows, unless
 * another command (the statement that called reconcile_batch) reports.
 */
void
progress_start(Oid target, int64 total_rows)
{
	progress_active = false;	/* an earlier batch may have failed */
	if (pgstat_track_activities == false || MyBEEntry == NULL ||
		MyBEEntry->st_progress_command != PROGRESS_COMMAND_INVALID)
		return;
	pgstat_progress_start_command(PROGRESS_COMMAND_COPY, target);
	pgstat_progress_update_param(PROGRESS_PARAM_MAGIC, PROGRESS_MAGIC);
	pgstat_progress_update_param(PROGRESS_PARAM_TOTAL, total_rows);
	progress_active = true;
}

/* End the batch's progress report, if one was started. */
void
progress_end(void)
{
	if (progress_active)
		pgstat_progress_end_command();
	progress_active = false;
}

/* Report entry into phase, with its row counters back at zero. */
void
progress_phase(BatchPhase phase)
{
	if (progress_active)
	{
		const int	index[] = {PROGRESS_PARAM_PHASE, PROGRESS_PARAM_DONE, PROGRESS_PARAM_TUPLES};
		const int64 value[] = {phase, 0, 0};

		pgstat_progress_update_multi_param(3, index, value);
	}
}

/* Parallel workers reading the staged rows with the batch's own process. */
void
progress_workers(int workers)
{
	if (progress_active)
		pgstat_progress_update_param(PROGRESS_PARAM_WORKERS, workers);
}

/* Report the rows done so far in the current phase. */
void
progress_rows(int64 done)
{
	if (progress_active)
	{
		const int	index[] = {PROGRESS_PARAM_DONE, PROGRESS_PARAM_TUPLES};
		const int64 value[] = {done, done};

		pgstat_progress_update_multi_param(2, index, value);
	}
}
