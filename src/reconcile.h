/*
 * reconcile.h
 *		Declarations shared by the reconcile extension's C files.
 *
 * A batch flows through: manifest.c (parse, canonicalise, batch id),
 * target.c (registration, privileges), stage.c
 * (read the staged rows once: cast, reject, hash with payload.c, sort),
 * merge.c (one pass over the sorted rows: duplicates, conflicts, winners;
 * it finds target rows with probe.c, see probe.h, and hands each winner to
 * a writer, direct.c or apply.c, see writers.h) and receipt.c (receipts,
 * objects, cursors, replay), driven by batch.c; progress.c reports its
 * phases.
 */
#ifndef RECONCILE_H
#define RECONCILE_H

#include "access/attnum.h"
#include "fmgr.h"
#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "tcop/dest.h"
#include "utils/array.h"
#include "utils/jsonb.h"
#include "utils/tuplesort.h"

#include "sha256.h"

/* ---- manifest.c ---- */

typedef struct ManifestEntry
{
	char	   *object_key;
	char	   *version_id;
	char	   *content_hash;
	int64		rows;
} ManifestEntry;

typedef enum ManifestField
{
	MANIFEST_OBJECT_KEY,
	MANIFEST_VERSION_ID,
	MANIFEST_CONTENT_HASH,
	MANIFEST_ROWS,
	MANIFEST_NFIELDS
} ManifestField;

typedef struct Manifest
{
	int			nentries;
	ManifestEntry *entries;		/* sorted by object_key, bytewise */
	char		batch_id[RECONCILE_HEX_LEN + 1];
	Datum		arrays[MANIFEST_NFIELDS];	/* manifest_array(), made once */
} Manifest;

extern Manifest *manifest_parse(Jsonb *manifest);
extern int	manifest_find(const Manifest *manifest, const char *object_key);
extern Datum manifest_array(Manifest *manifest, ManifestField field);

/* ---- jsonbuild.c ---- */

extern void jsonb_push_key(JsonbParseState **st, const char *key);
extern void jsonb_push_string_field(JsonbParseState **st, const char *key, const char *value);
extern void jsonb_push_int64_field(JsonbParseState **st, const char *key, int64 value);
typedef struct JsonbArrayBuilder JsonbArrayBuilder;
extern JsonbArrayBuilder *jsonb_array_begin(int nelems);
extern void jsonb_array_add(JsonbArrayBuilder *ab, const Jsonb *elem);
extern Jsonb *jsonb_array_end(JsonbArrayBuilder *ab);

/* ---- target.c ---- */

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
} TargetColumn;

typedef struct TargetInfo
{
	Oid			relid;
	char	   *relname;		/* for messages */
	char	   *qualname;		/* quoted schema.table, for SQL */
	bool		partitioned;
	bool		abort_on_conflict;

	int			nkeys;
	TargetColumn *keys;
	TargetColumn version;
	TargetColumn deleted;
	TargetColumn hash;
	int			npayload;
	TargetColumn *payload;
	bool		payload_names_objects;	/* a reg* payload column: see payload.c */

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
extern bool target_is_registered(Oid relid);
extern TargetInfo *target_load(Oid relid);
extern void target_serialize(TargetInfo *target, StringInfo buf);
extern TargetInfo *target_deserialize(const char *data);
extern void target_check_batch_privileges(Oid target, Oid staged);
extern Datum version_datum(TargetInfo *t, int64 v);

/* ---- receiver.c ---- */

extern void receiver_init(DestReceiver *dest,
						  bool (*receive) (TupleTableSlot *, DestReceiver *));

/* ---- stage.c ---- */

/* Disposition of a staged row; the receipt counts one of each per row. */
typedef enum Disposition
{
	DISP_INSERTED,
	DISP_UPDATED,
	DISP_DELETED,
	DISP_UNCHANGED,
	DISP_STALE,
	DISP_DUPLICATE,
	DISP_CONFLICT,
	DISP_REJECTED,
	DISP_COUNT
} Disposition;

extern const char *const disposition_names[DISP_COUNT];

/*
 * Columns of the sorted stream of valid staged rows, followed by the key
 * columns and then the payload columns in the target's types.
 */
#define SORT_ATT_OBJECT		1	/* int4: index of the object in the manifest */
#define SORT_ATT_SOURCE_ROW	2	/* int8 */
#define SORT_ATT_DELETE		3	/* bool: operation is DELETE */
#define SORT_ATT_VERSION	4	/* int8 */
#define SORT_ATT_HASH		5	/* bytea: payload hash */
#define SORT_ATT_FIRST_KEY	6

typedef struct BatchState
{
	TargetInfo *target;
	Oid			staged;
	Manifest   *manifest;
	const char *batch_id;

	/* Per object, per disposition. */
	int64	  (*counts)[DISP_COUNT];
	int64	   *staged_rows;	/* per object */
	int64		totals[DISP_COUNT];

	TupleDesc	sortdesc;
	Tuplesortstate *sort;

	/* Sum modulo 2^256 of the payload hashes of the rows written. */
	uint8		checksum[RECONCILE_SHA256_LEN];

	/* rules.c: the target's attached data-quality rules, or NULL. */
	struct BatchRules *rules;

	/* A parallel read's shared sort, until batch.c releases it (stage.c). */
	struct dsm_segment *stage_seg;
} BatchState;

extern void stage_read(BatchState *batch);
extern void stage_release(BatchState *batch);

/* ---- merge.c ---- */

typedef enum WritePath
{
	WRITE_PATH_AUTO,
	WRITE_PATH_GENERAL
} WritePath;

extern int	reconcile_write_path;

extern void merge_batch(BatchState *batch);

/* ---- receipt.c ---- */

extern bool receipt_lookup(const char *batch_id, Oid target, Datum *values,
						   bool *isnull);
extern void receipt_check_objects(BatchState *batch);
extern void receipt_write(BatchState *batch, const char *source,
						  const char *cursor, Jsonb *manifest,
						  Datum *values, bool *isnull);

#define RECEIPT_NATTS 15

#endif							/* RECONCILE_H */
