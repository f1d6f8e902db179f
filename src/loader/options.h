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
	int			citus_merge;	/* a CitusMergePath: where a Citus batch merges */
	bool		delete_remove;	/* delete_mode 'remove' (registration only): removed.c */

	/*
	 * Option snapshot (snapshot.c), a batch's only: the batch is a complete
	 * extract of a scope as of a version.  The version and scope are kept as
	 * given (text) and read against the target when the batch runs.
	 */
	bool		snapshot;
	char	   *snapshot_version;	/* the version's text form */
	char	   *snapshot_scope; /* a predicate over the target's columns, or NULL */
	Numeric		snapshot_max_delete_share;	/* default 0.1 */
	bool		partial;		/* sparse rows: the stage's present_columns (stage.c, sparse.c) */
} LoadOptions;

/* Option citus_merge (citus_merge.c): which path a Citus batch takes. */
typedef enum CitusMergePath
{
	CITUS_MERGE_AUTO = 0,		/* on the workers where eligible */
	CITUS_MERGE_COORDINATOR,	/* the merge on the coordinator */
	CITUS_MERGE_WORKERS			/* on the workers, or an error saying why not */
} CitusMergePath;

#define LOAD_OPTION_KEYS "\"max_rejects\", \"max_reject_share\", \"unknown_columns\", \"citus_merge\", \"partial\", \"delete_mode\" (a registration's only) and \"snapshot\" (a batch's only)"
#define SNAPSHOT_OPTION_KEYS "\"version\", \"scope\" and \"max_delete_share\""

extern void load_options_init(LoadOptions *opts);
extern void load_options_apply(LoadOptions *opts, Jsonb *doc, const char *what);

#endif							/* RECONCILE_OPTIONS_H */
