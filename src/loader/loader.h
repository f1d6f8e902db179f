/*
 * loader.h
 *		What the loader's files share: a batch's state, the dispositions of
 *		its rows, the sorted stream's layout, and the phases' entry points.
 *
 * A batch flows through: manifest.c (parse, canonicalise, batch id, see
 * manifest.h), target.c (registration, privileges, see target.h), stage.c
 * (read the staged rows once: cast, reject, hash with payload.c, sort),
 * merge.c (one pass over the sorted rows: each key decided by decide.c,
 * see decide.h; it finds target rows with probe.c, see probe.h, and hands
 * each winner to a writer, direct.c or apply.c, chosen by writer.c, see
 * writers.h) and receipt.c (receipts,
 * objects, cursors, replay), driven by batch.c; progress.c reports its
 * phases and state.c writes the state tables.
 */
#ifndef RECONCILE_LOADER_H
#define RECONCILE_LOADER_H

#include "utils/jsonb.h"
#include "utils/tuplesort.h"

#include "manifest.h"
#include "common/sha256.h"
#include "target.h"

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
#define SORT_ATT_VERSION	4	/* the (first) version column's type */
#define SORT_ATT_HASH		5	/* bytea: payload hash */
#define SORT_ATT_FIRST_KEY	6
/*
 * After the payload, a target ordered by several version columns has the
 * further ones (version_columns after the first, ordering.c).  Last, a
 * partial batch's sparse row has a bitmap of its present payload columns
 * (bytea, bit i of byte i / 8 for payload column i); NULL for a whole
 * row.  Its hash is then made over the merged row by sparse.c, in the
 * merge.
 */
#define SORT_ATT_PRESENT(t)	(SORT_ATT_FIRST_KEY + (t)->nkeys + (t)->npayload + (t)->nextra)
#define PRESENT_BIT(bits, i)	(((bits)[(i) / 8] >> ((i) % 8)) & 1)

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

	/* rules_attach.c: the target's attached data-quality rules, or NULL. */
	struct BatchRules *rules;

	/* A parallel read's shared sort, until batch.c releases it (stage.c). */
	struct dsm_segment *stage_seg;

	/* The registration's load options, with the batch's over them (options.c). */
	LoadOptions options;

	/* The staged relation has a version_id column (stage.c). */
	bool		staged_versions;

	/* A batch merged on the Citus workers: its statements' state (citus_merge.c). */
	struct CitusRun *citus_run;

	/* Option snapshot: its state (snapshot.c), and the rows it tombstoned. */
	struct SnapshotRun *snapshot;
	int64		deleted_absent;
} BatchState;

extern void stage_read(BatchState *batch);
extern void stage_release(BatchState *batch);

/* How the staged relation feeds the target (stage_describe). */
typedef struct StagedShape
{
	int			ncols;			/* keys, version, payload, in that order */
	bool	   *convert;		/* cast through the text form */
	Oid		   *staged_types;
	bool		has_hash;		/* a payload_hash column */
	Oid			hash_type;
	bool		has_version_id; /* rows belong to (object_key, version_id) */
} StagedShape;

struct StateRows;
extern void stage_describe(BatchState *batch, StagedShape *shape);
extern bool stage_input_value(TargetColumn *col, char *text, Datum *out, char **error);
extern struct StateRows *stage_rejects_buffer(void);

/* ---- merge.c ---- */

typedef enum WritePath
{
	WRITE_PATH_AUTO,
	WRITE_PATH_GENERAL
} WritePath;

extern int	reconcile_write_path;
extern void loader_define_settings(void);

extern void merge_batch(BatchState *batch);

/* ---- receipt.c ---- */
extern void batch_checksum_add(BatchState *batch, const uint8 *hash);

extern bool receipt_lookup(const char *batch_id, Oid target, Datum *values,
						   bool *isnull);
extern void receipt_check_objects(BatchState *batch);
extern void receipt_write(BatchState *batch, const char *source,
						  const char *cursor, Datum manifest,
						  Datum *values, bool *isnull);

/* The receipt's attributes; 1.2's last, deleted_absent, is left out on a 1.1 schema. */
#define RECEIPT_NATTS 16

#endif							/* RECONCILE_LOADER_H */
