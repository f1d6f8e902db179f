/*
 * diff.h
 *		Declarations shared by the reconciliation diff's files.
 *
 * A diff is prepared once (diff_prepare.c) and then run (diff.c: by
 * diff_checksum.c for a side on another server, else diff_merge.c),
 * streaming findings into a
 * tuplestore or only counting them; README.md in this folder maps the
 * files.
 */
#ifndef RECONCILE_DIFF_H
#define RECONCILE_DIFF_H

#include "datatype/timestamp.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/array.h"
#include "utils/jsonb.h"
#include "utils/sortsupport.h"
#include "utils/tuplestore.h"

/*
 * Columns of a finding, as reconcile_diff returns it: those of 1.1, then
 * (schema 1.2) the rechecks it survived.  A finding is written to a
 * tuplestore of either shape (diff_put_finding).
 */
#define DIFF_FINDING_NATTS 5
#define DIFF_FINDING_NATTS_1_2 6

/* How a compared column tolerates a difference. */
typedef enum DiffTolerance
{
	DIFF_TOL_NONE,
	DIFF_TOL_NUMERIC,			/* |s - t| <= tol_numeric */
	DIFF_TOL_TIME				/* |s - t| <= tol_usecs microseconds */
} DiffTolerance;

/* How a side on another server is compared (option "remote"). */
typedef enum DiffRemoteMode
{
	DIFF_REMOTE_AUTO,			/* checksums where they push down, else pull */
	DIFF_REMOTE_CHECKSUM,		/* checksums, or an error */
	DIFF_REMOTE_PULL			/* read every row, as on one server */
} DiffRemoteMode;

/*
 * Across servers (diff_checksum.c), the defaults of the options
 * split_factor and leaf_rows: of the pairs measured (16/16, 32/256,
 * 1000/64, 128/64 on 1,000,000 rows), 128/64 alone kept the bytes under
 * pg_comparator's at every count of differences and under 0.1% of the
 * table at 10, with at most two levels before the row hashes; 16/16 needs
 * five levels and is the slowest, 32/256 moves the most bytes at 1,000
 * differences, 1000/64 sends 1,000 checksums even when nothing differs
 * (bench/RESULTS.md, "Across servers").
 */
#define DIFF_DEFAULT_SPLIT_FACTOR	128
#define DIFF_DEFAULT_LEAF_ROWS		64
/*
 * The most cells a grid has: the grid's memory grows with its cells (each
 * level's ranges are held at most one a cell, whatever split_factor); with
 * the default leaf_rows, cells grow beyond 64 rows past 67 million rows.
 */
#define DIFF_MAX_CELLS				(1 << 20)

/*
 * Rows whose first key column falls in the buckets width_bucket(key,
 * bounds) = ANY(buckets), or (keys set) is one of keys; plus those where
 * it is NULL when nulls is set.
 */
typedef struct DiffKeyFilter
{
	Datum		bounds;			/* array of the first key column's type */
	Datum		buckets;		/* int4[] */
	Datum		keys;			/* array of the first key column's type, or 0 */
	bool		nulls;
} DiffKeyFilter;

/*
 * Only the rows of one group of reconcile_diff_totals (option then_rows):
 * each of its columns (read by its expressions) equal to its value, or
 * NULL where nulls says so.
 */
#define DIFF_MAX_GROUP_FILTER	32
typedef struct DiffGroupFilter
{
	int			ncols;
	struct DiffColumn *cols;
	Datum	   *values;
	bool	   *nulls;
} DiffGroupFilter;

typedef struct DiffColumn
{
	char	   *name;			/* in the source; the name findings use */
	char	   *tname;			/* in the target */
	char	   *sexpr;			/* SQL expression reading it from the source */
	char	   *texpr;			/* ... and from the target */
	Oid			typid;			/* common type both expressions yield */
	Oid			basetype;
	Oid			collation;
	Oid			scollation;		/* each side's own collation (keys) */
	Oid			tcollation;
	int16		typlen;
	bool		typbyval;
	FmgrInfo	out;

	/* Equality: the type's "=" or, lacking one, the text forms. */
	bool		has_eq;
	FmgrInfo	eq;

	/* Keys only: the type's btree order, as the ORDER BY uses it. */
	SortSupportData ssup;

	DiffTolerance tolerance;
	Datum		tol_numeric;
	int64		tol_usecs;

	/*
	 * Option "relative_tolerance" (numeric columns, compared as numeric):
	 * also equal when |s - t| <= rel_tol * greatest(|s|, |t|).  Such a
	 * column has tolerance DIFF_TOL_NUMERIC (tol_numeric 0 unless given).
	 */
	bool		has_rel_tol;
	Datum		rel_tol;

	/* timestamptz against timestamp or date: compared in the diff's zone */
	bool		in_zone;
} DiffColumn;

typedef struct DiffSpec
{
	Oid			source;
	Oid			target;
	char	   *sname;			/* for messages */
	char	   *tname;
	char	   *squal;			/* quoted, schema-qualified, for SQL */
	char	   *tqual;
	char	   *time_zone;		/* zone of naive times and bounds; "UTC" */

	int			nkeys;
	DiffColumn *keys;
	int			ncols;
	DiffColumn *cols;

	/* Window on the updated column, and the cutoff. */
	char	   *upd_name;		/* the source's updated column, or NULL */
	char	   *supd;			/* expressions reading it, or NULL */
	char	   *tupd;
	Oid			upd_type;
	bool		has_lo;
	bool		has_hi;
	Datum		window_lo;
	Datum		window_hi;
	bool		cutoff_source_max;

	/* A side on another server (diff_checksum.c): how to compare it. */
	DiffRemoteMode remote_mode;
	int			split_factor;
	int			leaf_rows;
	bool		leaf_rows_set;	/* given as an option, not the default */

	/* Only keys in these ranges of the first key column (NULL: all). */
	struct DiffKeyFilter *filter;

	/*
	 * Option tombstones "absent": a registered side's deleted column
	 * (quoted), whose tombstone rows are left out, as rows removed under
	 * delete_mode 'remove' are; NULL: every row is read.
	 */
	char	   *sdeleted;
	char	   *tdeleted;

	/*
	 * Before a finding is reported (diff.c): rows updated after young_after
	 * (now minus the option "min_age") on either side are not compared;
	 * differing keys are read again recheck_times times, recheck_after_ms
	 * apart, and only those that still differ are reported.
	 */
	bool		has_min_age;
	Datum		young_after;	/* in upd_type */
	FmgrInfo	upd_cmp;		/* the updated column's btree comparison */
	Oid			upd_collation;
	int			recheck_times;	/* 0: no recheck */
	int64		recheck_after_ms;
	Jsonb	   *recheck_settings;	/* recheck and min_age as given, for history */

	/* Limits: stop cleanly after this many findings, or at the deadline. */
	int64		max_differences;	/* 0: none */
	int64		max_duration_ms;	/* 0: none */
	TimestampTz deadline;		/* set when the diff starts; 0: none */

	/* Set by diff.c for a recheck's reads (diff_merge.c). */
	bool		fresh_snapshot; /* each read takes a new snapshot */
	struct DiffCollector *collect;	/* findings kept here, not in the tuplestore */
	/* Only the rows of one group (NULL: all). */
	DiffGroupFilter *group_filter;
} DiffSpec;

/* A finding held for a recheck (diff.c), with its key's values. */
typedef struct DiffHeld
{
	Datum	   *key;			/* the key columns' values, in the key's types */
	bool	   *knull;
	bool		has_null;		/* a NULL in the key: never rechecked */
	Datum		values[DIFF_FINDING_NATTS];
	bool		nulls[DIFF_FINDING_NATTS];
} DiffHeld;

/*
 * Where findings are held for a recheck: the first read's go to a sort
 * by key (tuplesort, spilling beyond work_mem) and, with a NULL in the
 * key, to a tuplestore, as tuples of desc (the finding's columns, then the
 * key's); a reread's (a chunk of keys) to memory, as DiffHeld.
 */
typedef struct DiffCollector
{
	TupleDesc	desc;			/* finding columns, then key columns */
	struct Tuplesortstate *sorted;	/* NULL: held in memory */
	struct TupleTableSlot *slot;	/* of desc, to put a finding */
	Tuplestorestate *nullkeyed;
	int64		nsorted;
	MemoryContext cxt;
	DiffHeld   *held;
	int64		n;
	int64		cap;
} DiffCollector;

typedef struct DiffCounts
{
	int64		rows_source;
	int64		rows_target;
	int64		matched;
	int64		missing_in_target;
	int64		extra_in_target;
	int64		mismatched;
	int64		duplicate_keys;
	int64		null_keys;
	int64	   *column_mismatches;	/* per compared column */

	/* Keys not compared because a side's row is younger than min_age. */
	int64		young_keys;
	/* Why the diff stopped before the end (NULL: it did not), and where. */
	const char *stopped;		/* "max_differences" or "max_duration" */
	Jsonb	   *stopped_at_key; /* the first key not compared, or NULL */
	int			rechecks;		/* rechecks done; -1: none asked for */
} DiffCounts;

/* diff_merge.c; diff_execute needs an SPI connection. */
extern DiffSpec *diff_prepare(Oid source, Oid target, ArrayType *key_columns,
							  Jsonb *options);
/* The same checks without the caller's privileges: a job being configured. */
extern DiffSpec *diff_validate(Oid source, Oid target, ArrayType *key_columns,
							   Jsonb *options);
extern void diff_execute(DiffSpec *spec, Tuplestorestate *findings,
						 TupleDesc findings_desc, DiffCounts *counts);
extern int64 diff_findings_total(DiffCounts *counts);
/* diff_prepare.c: what the tolerances and reconcile_diff_totals accept. */
extern bool diff_is_numeric_type(Oid basetype);
extern bool diff_jbv_is_nonnegative(JsonbValue *v);
extern bool diff_append_where(StringInfo sql, DiffSpec *spec, bool target,
							  Datum cutoff, bool has_cutoff, Oid *types,
							  Datum *values, int *nparams);
extern bool diff_cutoff(DiffSpec *spec, Datum *result);

/* diff.c: every diff's entry point, by checksums where they apply. */
extern void diff_compare(DiffSpec *spec, Tuplestorestate *findings,
						 TupleDesc findings_desc, DiffCounts *counts);

/* diff_checksum.c: by checksums where a side is on another server. */
extern bool diff_checksum(DiffSpec *spec, Tuplestorestate *findings,
						  TupleDesc findings_desc, DiffCounts *counts);

/* The summary's columns, in reconcile_diff_summary's order; 1.2 adds four. */
#define DIFF_SUMMARY_NATTS 9
#define DIFF_SUMMARY_NATTS_1_2 13
extern void diff_summary_values(DiffSpec *spec, DiffCounts *counts, Datum *values);
/* The four of 1.2: young_keys, stopped, stopped_at_key, rechecks. */
extern void diff_summary_values_1_2(DiffCounts *counts, Datum *values, bool *nulls);

/* diff_merge.c: numerics within an absolute and/or a relative tolerance. */
extern bool diff_numeric_within(Datum a, Datum b, bool has_tol, Datum tol,
								bool has_rel, Datum rel);
/* A descriptor whose first five columns are a finding's; the caller adds the rest. */
extern TupleDesc diff_findings_desc(int natts);
/* A finding into a tuplestore of 1.1's shape or 1.2's (rechecks < 0: NULL). */
extern void diff_put_finding(Tuplestorestate *ts, TupleDesc desc, Datum *values,
							 bool *nulls, int rechecks);

#endif							/* RECONCILE_DIFF_H */
