/*
 * diff.c
 *		The entry of every diff: by checksums of key ranges where a side is
 *		on another server or on Citus workers and they can be computed
 *		there (diff_checksum.c), else by one ordered pass over each side
 *		(diff_merge.c).
 *
 * Both are called from here, and neither calls back, so the choice of how
 * a diff runs has one home; the SQL functions (diff_sql.c) and the
 * configured jobs (diff_run.c) both come through diff_compare.
 */
#include "postgres.h"

#include "diff.h"

/*
 * Run a prepared diff, the entry of every diff: by checksums where a side
 * is on another server or on Citus workers and they can be computed there
 * (diff_checksum.c), else by reading every row (diff_execute).  The caller
 * holds an SPI connection.
 */
void
diff_compare(DiffSpec *spec, Tuplestorestate *ts, TupleDesc desc, DiffCounts *counts)
{
	if (!diff_checksum(spec, ts, desc, counts))
		diff_execute(spec, ts, desc, counts);
}
