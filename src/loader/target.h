/*
 * target.h
 *		A registered target table as a batch sees it (target.c): its
 *		columns, its key index, and the locks and rights a batch takes.
 */
#ifndef RECONCILE_TARGET_H
#define RECONCILE_TARGET_H

#include "access/attnum.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "utils/array.h"

#include "options.h"

/* One column of the target that a batch reads from the staged relation. */
typedef struct TargetColumn
{
	char	   *name;
	AttrNumber	attnum;			/* in the target */
	Oid			typid;
	int32		typmod;
	Oid			collation;
	int16		typlen;
	bool		typbyval;
	FmgrInfo	in;				/* the target type's input function */
	Oid			ioparam;
	FmgrInfo	out;			/* the target type's output function */
	bool		catch_directly; /* see stage.c: input_value() */
	Oid			basetype;		/* typid, or a domain's base type */
} TargetColumn;

typedef struct TargetInfo
{
	Oid			relid;
	char	   *relname;		/* for messages */
	char	   *qualname;		/* quoted schema.table, for SQL */
	bool		partitioned;
	bool		abort_on_conflict;
	int			citus_kind;		/* a CitusKind (citus.h): 0 unless Citus manages it */

	int			nkeys;
	TargetColumn *keys;
	TargetColumn version;		/* the ordering value (ordering.h) */
	Oid			version_lt_op;	/* its type's default btree operators */
	Oid			version_gt_op;
	Oid			version_eq_op;
	bool		version_integer;	/* one column: smallint, integer, bigint or a domain over one */
	struct SortSupportData *version_ssup;	/* made when first used, per process */

	/*
	 * version_columns beyond the first (version): compared in order after
	 * it, each by its type's default btree operators (ordering.c).
	 */
	int			nextra;
	TargetColumn *extra;
	Oid		   *extra_lt_op;
	Oid		   *extra_gt_op;
	Oid		   *extra_eq_op;
	TargetColumn deleted;
	TargetColumn hash;
	int			npayload;
	TargetColumn *payload;
	bool		payload_names_objects;	/* a reg* payload column: see payload.c */

	/* The registration's load options over the defaults (not for workers). */
	LoadOptions options;

	/* The unique index on exactly the key columns, and its semantics. */
	Oid			key_index;
	Oid		   *key_eq_ops;		/* equality operator per key column */
	Oid		   *key_eq_procs;	/* its function */
	Oid		   *key_lt_ops;		/* ordering operator per key column */
	Oid		   *key_collations;
} TargetInfo;

/* What a lock on a relation is taken for: whose rights it needs first. */
typedef enum TargetLockFor
{
	TARGET_LOCK_OWNER,			/* registration, rules: the owner */
	TARGET_LOCK_BATCH,			/* a batch's target: SELECT, INSERT, UPDATE */
	TARGET_LOCK_STAGED			/* a batch's staged relation: SELECT */
} TargetLockFor;

extern void target_lock(Oid relid, int lockmode, TargetLockFor purpose);
extern TargetInfo *target_resolve(Oid relid, char **keys, int nkeys, const char *version,
								  char **extra, int nextra,
								  const char *deleted, const char *hash, char **payload,
								  int npayload, const char *policy);
extern char **target_text_array(ArrayType *arr, const char *argname, int max,
								const char *why, int *n);
extern bool target_is_registered(Oid relid);
extern TargetInfo *target_load(Oid relid);
extern void target_serialize(TargetInfo *target, StringInfo buf);
extern TargetInfo *target_deserialize(const char *data);
extern void target_check_batch_privileges(Oid target, Oid staged);
extern int	target_loaded_columns(TargetInfo *t, TargetColumn ***cols);

#endif							/* RECONCILE_TARGET_H */
