/*
 * subxact.c
 *		One way to run a piece of work in a subtransaction: the rules check
 *		tries each attempt and rolls it back, the profiler tries each
 *		proposed rule, the diff runner runs each job and keeps its writes.
 *		An error is caught and handed back, the subtransaction rolled back;
 *		the caller decides which errors are findings and which to rethrow.
 */
#include "postgres.h"

#include "access/xact.h"
#include "utils/memutils.h"
#include "utils/resowner.h"

#include "subxact.h"

/*
 * Run fn(arg) in a subtransaction, in the caller's memory context; keep:
 * commit it, else roll it back.  On error roll back and return the error,
 * copied into the caller's context (the caller rethrows with ReThrowError
 * what it does not record); NULL when fn returned.
 */
ErrorData *
run_in_subtransaction(void (*fn) (void *), void *arg, bool keep)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ErrorData  *volatile error = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		fn(arg);
		if (keep)
			ReleaseCurrentSubTransaction();
		else
			RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		MemoryContextSwitchTo(cxt);
		error = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_END_TRY();
	return error;
}
