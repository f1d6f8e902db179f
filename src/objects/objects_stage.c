/*
 * objects_stage.c
 *		reconcile_stage_objects(staged, server, objects, options): reads each
 *		listed object version, hashes its bytes as they arrive, parses them
 *		(CSV through PostgreSQL's COPY parser fed by BeginCopyFrom's data
 *		source callback, or JSON lines through jsonb_in), inserts one staged
 *		row per source row with object_key, version_id and source_row, and
 *		returns the manifest of what was read.
 *
 *		A producer's content_hash or rows that the bytes do not bear out
 *		refuses the whole call.  A row that does not parse is staged with
 *		only its object, version and row (so the manifest's rows, the data
 *		rows read, equal the staged rows, and reconcile_batch rejects it and
 *		counts it against max_rejects / max_reject_share); with the option
 *		target, its reason and raw line are recorded in reconcile.rejects
 *		under the batch id of the returned manifest.
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/copy.h"
#include "commands/copyfrom_internal.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_node.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/formatting.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/tuplestore.h"

#include "common/jsonbuild.h"
#include "common/jsonread.h"
#include "loader/manifest.h"
#include "objects.h"
#include "common/sha256.h"
#include "common/state_schema.h"

PG_FUNCTION_INFO_V1(reconcile_stage_objects);

#define STAGE_BUFFER_ROWS	1000
#define STAGE_BUFFER_BYTES	(8 * 1024 * 1024)
#define RAW_LINE_KEPT		1000	/* bytes of a rejected line kept */
#define MAX_JSON_LINE		(64 * 1024 * 1024)

typedef enum StageFormat
{
	FORMAT_AUTO,
	FORMAT_CSV,
	FORMAT_JSONL
} StageFormat;

/* What a call stages and how (its options). */
struct StageOptions
{
	StageFormat format;
	int			compression;	/* -1 auto (.gz), 0 none, 1 gzip */
	bool		header;
	char	   *delimiter;
	char	   *quote;
	char	   *escape;
	char	   *null_string;
	char	   *encoding;		/* NULL: the database's */
	List	   *force_null;		/* column names (char *) */
	List	   *columns;		/* column names of a CSV without header */
	char	   *operation;
	bool		ignore_unknown;
	int64		max_rejects;	/* -1: none */
	Numeric		max_reject_share;	/* NULL: none */
	int			max_retries;
	Oid			target;			/* InvalidOid: parse rejects not recorded */
};

/* One object version to read, from the objects argument. */
typedef struct StageObject
{
	char	   *key;
	char	   *version_id;
	char	   *etag;
	int64		size;			/* -1: not given */
	char	   *content_hash;	/* producer's, 64 hex digits, or NULL */
	int64		rows;			/* producer's, or -1 */
} StageObject;

/* A column of the staged relation the call fills. */
typedef struct StageColumn
{
	char	   *name;
	char	   *type;			/* qualified, for the cast */
	int			attidx;			/* in the relation's tuple descriptor */
} StageColumn;

/*
 * The direct path into a plain table (no triggers, rules, row security,
 * generated columns, partitioning): rows go through table_multi_insert
 * in batches, as COPY FROM writes them, with the indexes and constraints
 * COPY checks; other staged relations take an INSERT through SPI.
 */
typedef struct DirectInsert
{
	EState	   *estate;
	ResultRelInfo *rri;
	TupleTableSlot **slots;
	int			nslots;
	BulkInsertState bis;
	CommandId	cid;
	FmgrInfo   *in;				/* per buffer column */
	Oid		   *ioparam;
	int32	   *typmod;
	bool	   *is_text;
	MemoryContext batchcxt;
} DirectInsert;

/* The staged rows waiting for their INSERT, one text array per column. */
typedef struct StageBuffer
{
	int			ncols;
	StageColumn *cols;
	Relation	rel;
	DirectInsert *direct;		/* NULL: the SPI path */
	SPIPlanPtr	plan;
	MemoryContext cxt;
	ArrayBuildState **arrays;
	int			nrows;
	size_t		bytes;
} StageBuffer;

/* Positions in StageBuffer's columns. */
#define COL_OBJECT_KEY	0
#define COL_SOURCE_ROW	1

typedef struct StageState
{
	Relation	staged;
	StageOptions *opts;
	StageBuffer buf;
	int			version_col;	/* -1: the staged relation has no version_id */
	int			operation_col;	/* -1: none, or the data supplies it */
	int			first_data_col;
	/* per object */
	StageObject *obj;
	const char *version_id;		/* staged as version_id */
	const char *what;
	ObjReader  *reader;
	int			ndata;			/* data columns of this object */
	int		   *data_map;		/* source field -> buffer column, -1 ignored */
	bool	   *force_null;		/* per source field */
	int64		rows;
	bool		row_counted;	/* rows counts the row being staged */
	/* the call */
	int64		rejected;
	int64		rows_total;
	Tuplestorestate *rejects;
	TupleDesc	reject_desc;
	MemoryContext rowcxt;
} StageState;

static StageState *current_stage;	/* for the COPY data source callback */

/* ---- options ---- */

static char *
opt_string(JsonbValue *v, const char *key)
{
	if (v->type != jbvString)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("staging option \"%s\" must be a string, not %s", key, jbv_type_name(v))));
	return jbv_string(v);
}

static List *
opt_names(JsonbValue *v, const char *key)
{
	JsonbIterator *it;
	JsonbValue	e;
	JsonbIteratorToken tok;
	List	   *names = NIL;

	if (!jbv_is_array(v))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("staging option \"%s\" must be an array of column names, not %s", key, jbv_type_name(v))));
	it = JsonbIteratorInit(v->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &e, true)) != WJB_DONE)
	{
		if (tok != WJB_ELEM)
			continue;
		if (e.type != jbvString || e.val.string.len == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("staging option \"%s\" must be an array of column names", key),
					 errdetail("An element is %s.", e.type == jbvString ? "an empty string" : jbv_type_name(&e))));
		names = lappend(names, jbv_string(&e));
	}
	return names;
}

#define STAGE_OPTION_KEYS "\"format\", \"compression\", \"header\", \"delimiter\", \"quote\", \"escape\", \"null\", \"encoding\", \"force_null\", \"columns\", \"operation\", \"unknown_columns\", \"max_rejects\", \"max_reject_share\", \"max_retries\" and \"target\""

static void
stage_options_parse(StageOptions *o, Jsonb *doc)
{
	JsonbIterator *it;
	JsonbValue	v;
	char	   *key;

	memset(o, 0, sizeof(*o));
	o->format = FORMAT_AUTO;
	o->compression = -1;
	o->header = true;
	o->operation = "UPSERT";
	o->max_rejects = -1;
	o->max_retries = 4;
	if (doc == NULL)
		return;
	if (!JB_ROOT_IS_OBJECT(doc) || JB_ROOT_IS_SCALAR(doc))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("staging options must be a JSON object"),
				 errhint("Valid keys are %s.", STAGE_OPTION_KEYS)));
	it = JsonbIteratorInit(&doc->root);
	while (jsonb_object_next(&it, &key, &v))
	{
		if (strcmp(key, "format") == 0)
		{
			char	   *f = opt_string(&v, key);

			if (strcmp(f, "csv") == 0)
				o->format = FORMAT_CSV;
			else if (strcmp(f, "jsonl") == 0 || strcmp(f, "ndjson") == 0)
				o->format = FORMAT_JSONL;
			else if (strcmp(f, "auto") == 0)
				o->format = FORMAT_AUTO;
			else
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("unknown staging format \"%s\"", f),
						 errhint("The formats are \"csv\", \"jsonl\" and \"auto\" (by the key's suffix: .jsonl, .ndjson, else CSV).")));
		}
		else if (strcmp(key, "compression") == 0)
		{
			char	   *c = opt_string(&v, key);

			if (strcmp(c, "gzip") == 0)
				o->compression = 1;
			else if (strcmp(c, "none") == 0)
				o->compression = 0;
			else if (strcmp(c, "auto") == 0)
				o->compression = -1;
			else
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("unknown compression \"%s\"", c),
						 errhint("The compressions are \"gzip\", \"none\" and \"auto\" (gzip for keys ending in .gz).")));
		}
		else if (strcmp(key, "header") == 0)
		{
			if (v.type != jbvBool)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("staging option \"header\" must be a boolean, not %s", jbv_type_name(&v))));
			o->header = v.val.boolean;
		}
		else if (strcmp(key, "delimiter") == 0)
			o->delimiter = opt_string(&v, key);
		else if (strcmp(key, "quote") == 0)
			o->quote = opt_string(&v, key);
		else if (strcmp(key, "escape") == 0)
			o->escape = opt_string(&v, key);
		else if (strcmp(key, "null") == 0)
			o->null_string = opt_string(&v, key);
		else if (strcmp(key, "encoding") == 0)
		{
			o->encoding = opt_string(&v, key);
			if (pg_char_to_encoding(o->encoding) < 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("staging option \"encoding\" names no encoding: \"%s\"", o->encoding)));
		}
		else if (strcmp(key, "force_null") == 0)
			o->force_null = opt_names(&v, key);
		else if (strcmp(key, "columns") == 0)
			o->columns = opt_names(&v, key);
		else if (strcmp(key, "operation") == 0)
		{
			o->operation = opt_string(&v, key);
			if (strcmp(o->operation, "UPSERT") != 0 && strcmp(o->operation, "DELETE") != 0)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("staging option \"operation\" must be \"UPSERT\" or \"DELETE\", not \"%s\"", o->operation)));
		}
		else if (strcmp(key, "unknown_columns") == 0)
		{
			char	   *u = opt_string(&v, key);

			if (strcmp(u, "ignore") == 0)
				o->ignore_unknown = true;
			else if (strcmp(u, "error") == 0)
				o->ignore_unknown = false;
			else
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("staging option \"unknown_columns\" must be \"error\" or \"ignore\", not \"%s\"", u)));
		}
		else if (strcmp(key, "max_rejects") == 0)
		{
			if (v.type == jbvNull)
				o->max_rejects = -1;
			else if (v.type != jbvNumeric)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("staging option \"max_rejects\" must be a number, not %s", jbv_type_name(&v))));
			else
			{
				o->max_rejects = DatumGetInt64(DirectFunctionCall1(numeric_int8, NumericGetDatum(v.val.numeric)));
				if (o->max_rejects < 0)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("staging option \"max_rejects\" must not be negative")));
			}
		}
		else if (strcmp(key, "max_reject_share") == 0)
		{
			if (v.type == jbvNull)
				o->max_reject_share = NULL;
			else if (v.type != jbvNumeric)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("staging option \"max_reject_share\" must be a number, not %s", jbv_type_name(&v))));
			else
			{
				Numeric		n = v.val.numeric;

				if (DatumGetBool(DirectFunctionCall2(numeric_lt, NumericGetDatum(n), NumericGetDatum(int64_to_numeric(0)))) ||
					DatumGetBool(DirectFunctionCall2(numeric_gt, NumericGetDatum(n), NumericGetDatum(int64_to_numeric(1)))))
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("staging option \"max_reject_share\" must be between 0 and 1")));
				o->max_reject_share = n;
			}
		}
		else if (strcmp(key, "max_retries") == 0)
		{
			int64		n;

			if (v.type != jbvNumeric)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("staging option \"max_retries\" must be a number, not %s", jbv_type_name(&v))));
			n = DatumGetInt64(DirectFunctionCall1(numeric_int8, NumericGetDatum(v.val.numeric)));
			if (n < 0 || n > 20)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("staging option \"max_retries\" must be between 0 and 20")));
			o->max_retries = (int) n;
		}
		else if (strcmp(key, "target") == 0)
		{
			char	   *t = opt_string(&v, key);
			List	   *names = stringToQualifiedNameList(t);

			o->target = RangeVarGetRelid(makeRangeVarFromNameList(names), NoLock, false);
		}
		else if (strcmp(key, "start_after") == 0 || strcmp(key, "versions") == 0 ||
				 strcmp(key, "max_keys") == 0 || strcmp(key, "staged") == 0 ||
				 strcmp(key, "source") == 0)
			continue;			/* reconcile_load's, passed through */
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown staging option \"%s\"", key),
					 errhint("Valid keys are %s.", STAGE_OPTION_KEYS)));
	}
}

/* ---- the objects argument ---- */

static char *
normalise_hash(const char *h, const char *key)
{
	const char *hex = h;
	char	   *out;
	int			i;

	if (strncmp(h, "sha256:", 7) == 0)
		hex = h + 7;
	if (strlen(hex) != RECONCILE_HEX_LEN)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("content_hash of object \"%s\" is not a SHA-256", key),
				 errdetail("A content hash is \"sha256:\" and 64 hex digits (or the 64 digits alone); got \"%s\".", h)));
	out = pstrdup(hex);
	for (i = 0; i < RECONCILE_HEX_LEN; i++)
	{
		if (!isxdigit((unsigned char) out[i]))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("content_hash of object \"%s\" is not a SHA-256", key),
					 errdetail("A content hash is \"sha256:\" and 64 hex digits (or the 64 digits alone); got \"%s\".", h)));
		out[i] = pg_tolower((unsigned char) out[i]);
	}
	return out;
}

static int64
object_int(JsonbValue *v, const char *field, int n)
{
	int64		i;

	if (v->type != jbvNumeric)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("field \"%s\" of element %d of objects must be a number, not %s", field, n, jbv_type_name(v))));
	i = DatumGetInt64(DirectFunctionCall1(numeric_int8, NumericGetDatum(v->val.numeric)));
	if (i < 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("field \"%s\" of element %d of objects must not be negative", field, n)));
	return i;
}

static char *
object_string(JsonbValue *v, const char *field, int n)
{
	if (v->type != jbvString)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("field \"%s\" of element %d of objects must be a string, not %s", field, n, jbv_type_name(v))));
	return jbv_string(v);
}

/*
 * The objects to read: a JSON array of objects with object_key and
 * optionally version_id, etag, size, content_hash, rows; the other fields
 * of reconcile_list_objects' rows are accepted, and a delete marker is
 * refused.
 */
List *
objects_stage_parse_objects(Jsonb *doc)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	List	   *objs = NIL;
	int			n = 0;

	if (!JB_ROOT_IS_ARRAY(doc) || JB_ROOT_IS_SCALAR(doc))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("objects must be a JSON array"),
				 errhint("Pass for example (SELECT jsonb_agg(l) FROM reconcile_list_objects('server', 'prefix/') l).")));
	it = JsonbIteratorInit(&doc->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		StageObject *o;
		JsonbIterator *fit;
		JsonbValue	fv;
		char	   *field;
		bool		marker = false;

		if (tok != WJB_ELEM)
			continue;
		n++;
		if (!jbv_is_object(&v))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("element %d of objects is %s, not an object", n, jbv_type_name(&v))));
		o = palloc0(sizeof(StageObject));
		o->size = -1;
		o->rows = -1;
		fit = JsonbIteratorInit(v.val.binary.data);
		while (jsonb_object_next(&fit, &field, &fv))
		{
			if (fv.type == jbvNull)
				continue;
			if (strcmp(field, "object_key") == 0)
				o->key = object_string(&fv, field, n);
			else if (strcmp(field, "version_id") == 0)
				o->version_id = object_string(&fv, field, n);
			else if (strcmp(field, "etag") == 0)
				o->etag = object_string(&fv, field, n);
			else if (strcmp(field, "size") == 0)
				o->size = object_int(&fv, field, n);
			else if (strcmp(field, "rows") == 0)
				o->rows = object_int(&fv, field, n);
			else if (strcmp(field, "content_hash") == 0)
				o->content_hash = object_string(&fv, field, n);
			else if (strcmp(field, "is_delete_marker") == 0)
				marker = fv.type == jbvBool && fv.val.boolean;
			else if (strcmp(field, "last_modified") == 0 || strcmp(field, "is_latest") == 0)
				continue;
			else
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("unknown field \"%s\" in element %d of objects", field, n),
						 errhint("The fields are object_key, version_id, etag, size, content_hash, rows, and the other columns of reconcile_list_objects.")));
		}
		if (o->key == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("element %d of objects has no object_key", n)));
		objects_check_key(o->key);
		if (o->version_id && o->version_id[0] == '\0')
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("object \"%s\" has an empty version_id", o->key)));
		if (marker)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("object \"%s\" version \"%s\" is a delete marker", o->key,
							o->version_id ? o->version_id : ""),
					 errdetail("A delete marker has no bytes to stage."),
					 errhint("Leave delete markers out: WHERE NOT is_delete_marker.")));
		if (o->content_hash)
			o->content_hash = normalise_hash(o->content_hash, o->key);
		objs = lappend(objs, o);
	}
	if (objs == NIL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("objects is an empty array"),
				 errhint("Pass at least one object to stage.")));
	return objs;
}

/* ---- the staged rows' buffer ---- */

static void
buffer_reset(StageBuffer *b)
{
	MemoryContextReset(b->cxt);
	b->arrays = MemoryContextAlloc(b->cxt, sizeof(ArrayBuildState *) * b->ncols);
	for (int i = 0; i < b->ncols; i++)
		b->arrays[i] = initArrayResult(TEXTOID, b->cxt, false);
	b->nrows = 0;
	b->bytes = 0;
}

static bool
direct_path_allowed(Relation rel)
{
	TupleDesc	desc = RelationGetDescr(rel);

	return rel->rd_rel->relkind == RELKIND_RELATION &&
		!rel->rd_rel->relispartition &&
		rel->trigdesc == NULL &&
		!rel->rd_rel->relhasrules &&
		!rel->rd_rel->relrowsecurity &&
		!(desc->constr && desc->constr->has_generated_stored);
}

static DirectInsert *
direct_begin(StageBuffer *b, Relation rel)
{
	DirectInsert *d = palloc0(sizeof(DirectInsert));
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	TupleDesc	desc = RelationGetDescr(rel);

	rte->rtekind = RTE_RELATION;
	rte->relid = RelationGetRelid(rel);
	rte->relkind = rel->rd_rel->relkind;
	rte->rellockmode = RowExclusiveLock;
	rte->requiredPerms = ACL_INSERT;
	d->estate = CreateExecutorState();
	ExecInitRangeTable(d->estate, list_make1(rte));
	d->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(d->rri, rel, 1, NULL, 0);
	ExecOpenIndices(d->rri, false);
	d->slots = palloc(sizeof(TupleTableSlot *) * STAGE_BUFFER_ROWS);
	for (int i = 0; i < STAGE_BUFFER_ROWS; i++)
		d->slots[i] = table_slot_create(rel, NULL);
	d->bis = GetBulkInsertState();
	d->cid = GetCurrentCommandId(true);
	d->in = palloc0(sizeof(FmgrInfo) * b->ncols);
	d->ioparam = palloc0(sizeof(Oid) * b->ncols);
	d->typmod = palloc0(sizeof(int32) * b->ncols);
	d->is_text = palloc0(sizeof(bool) * b->ncols);
	for (int i = 0; i < b->ncols; i++)
	{
		Form_pg_attribute a = TupleDescAttr(desc, b->cols[i].attidx);
		Oid			infunc;

		d->is_text[i] = a->atttypid == TEXTOID;
		getTypeInputInfo(a->atttypid, &infunc, &d->ioparam[i]);
		fmgr_info(infunc, &d->in[i]);
		d->typmod[i] = a->atttypmod;
	}
	d->batchcxt = AllocSetContextCreate(CurrentMemoryContext, "reconcile staged batch",
										ALLOCSET_DEFAULT_SIZES);
	return d;
}

static void
direct_flush(StageBuffer *b)
{
	DirectInsert *d = b->direct;
	TupleDesc	desc = RelationGetDescr(b->rel);

	if (d->nslots == 0)
		return;
	if (desc->constr)
		for (int i = 0; i < d->nslots; i++)
			ExecConstraints(d->rri, d->slots[i], d->estate);
	table_multi_insert(b->rel, d->slots, d->nslots, d->cid, 0, d->bis);
	if (d->rri->ri_NumIndices > 0)
		for (int i = 0; i < d->nslots; i++)
		{
			List	   *recheck;

			recheck = ExecInsertIndexTuples(d->rri, d->slots[i], d->estate, false, false, NULL, NIL);
			list_free(recheck);
			ResetPerTupleExprContext(d->estate);
		}
	for (int i = 0; i < d->nslots; i++)
		ExecClearTuple(d->slots[i]);
	d->nslots = 0;
	b->nrows = 0;
	b->bytes = 0;
	MemoryContextReset(d->batchcxt);
}

static void
direct_add(StageBuffer *b, char **values)
{
	DirectInsert *d = b->direct;
	TupleTableSlot *slot = d->slots[d->nslots];
	MemoryContext old = MemoryContextSwitchTo(d->batchcxt);

	ExecClearTuple(slot);
	memset(slot->tts_isnull, true, sizeof(bool) * slot->tts_tupleDescriptor->natts);
	for (int i = 0; i < b->ncols; i++)
	{
		int			att = b->cols[i].attidx;

		if (values[i] == NULL)
			continue;
		if (d->is_text[i])
		{
			size_t		len = strlen(values[i]);

			slot->tts_values[att] = PointerGetDatum(cstring_to_text_with_len(values[i], len));
			b->bytes += len;
		}
		else
			slot->tts_values[att] = InputFunctionCall(&d->in[i], values[i], d->ioparam[i], d->typmod[i]);
		slot->tts_isnull[att] = false;
	}
	ExecStoreVirtualTuple(slot);
	MemoryContextSwitchTo(old);
	d->nslots++;
	b->nrows++;
	if (d->nslots >= STAGE_BUFFER_ROWS || b->bytes >= STAGE_BUFFER_BYTES)
		direct_flush(b);
}

static void
direct_end(StageBuffer *b)
{
	DirectInsert *d = b->direct;

	direct_flush(b);
	FreeBulkInsertState(d->bis);
	table_finish_bulk_insert(b->rel, 0);
	ExecCloseIndices(d->rri);
	for (int i = 0; i < STAGE_BUFFER_ROWS; i++)
		ExecDropSingleTupleTableSlot(d->slots[i]);
	FreeExecutorState(d->estate);
	MemoryContextDelete(d->batchcxt);
	b->direct = NULL;
}

static void
buffer_prepare(StageBuffer *b, Relation staged)
{
	StringInfoData sql;
	Oid		   *types = palloc(sizeof(Oid) * b->ncols);

	b->rel = staged;
	if (direct_path_allowed(staged))
	{
		b->direct = direct_begin(b, staged);
		return;
	}
	initStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s (",
					 quote_qualified_identifier(get_namespace_name(RelationGetNamespace(staged)),
												RelationGetRelationName(staged)));
	for (int i = 0; i < b->ncols; i++)
		appendStringInfo(&sql, "%s%s", i ? ", " : "", quote_identifier(b->cols[i].name));
	appendStringInfoString(&sql, ") SELECT ");
	for (int i = 0; i < b->ncols; i++)
		appendStringInfo(&sql, "%sCAST(u.c%d AS %s)", i ? ", " : "", i, b->cols[i].type);
	appendStringInfoString(&sql, " FROM ROWS FROM (");
	for (int i = 0; i < b->ncols; i++)
	{
		appendStringInfo(&sql, "%spg_catalog.unnest($%d)", i ? ", " : "", i + 1);
		types[i] = TEXTARRAYOID;
	}
	appendStringInfoString(&sql, ") AS u(");
	for (int i = 0; i < b->ncols; i++)
		appendStringInfo(&sql, "%sc%d", i ? ", " : "", i);
	appendStringInfoChar(&sql, ')');
	b->plan = SPI_prepare(sql.data, b->ncols, types);
	if (b->plan == NULL)
		elog(ERROR, "could not prepare the insert into the staged relation: %s",
			 SPI_result_code_string(SPI_result));
	b->cxt = AllocSetContextCreate(CurrentMemoryContext, "reconcile staged rows",
								   ALLOCSET_DEFAULT_SIZES);
	buffer_reset(b);
}

static void
buffer_flush(StageBuffer *b)
{
	Datum	   *args;
	int			rc;

	if (b->direct)
	{
		direct_flush(b);
		return;
	}
	if (b->nrows == 0)
		return;
	args = MemoryContextAlloc(b->cxt, sizeof(Datum) * b->ncols);
	for (int i = 0; i < b->ncols; i++)
		args[i] = makeArrayResult(b->arrays[i], b->cxt);
	rc = SPI_execute_plan(b->plan, args, NULL, false, 0);
	if (rc != SPI_OK_INSERT && rc != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "could not insert into the staged relation: %s", SPI_result_code_string(rc));
	buffer_reset(b);
}

/* values[i] for buffer column i (NULL: SQL NULL). */
static void
buffer_add(StageBuffer *b, char **values)
{
	if (b->direct)
	{
		direct_add(b, values);
		return;
	}
	for (int i = 0; i < b->ncols; i++)
	{
		Datum		d = (Datum) 0;

		if (values[i])
		{
			size_t		len = strlen(values[i]);

			d = PointerGetDatum(cstring_to_text_with_len(values[i], len));
			b->bytes += len;
		}
		accumArrayResult(b->arrays[i], d, values[i] == NULL, TEXTOID, b->cxt);
	}
	if (++b->nrows >= STAGE_BUFFER_ROWS || b->bytes >= STAGE_BUFFER_BYTES)
		buffer_flush(b);
}

/* ---- the staged relation's columns ---- */

static int
find_col(StageBuffer *b, const char *name)
{
	for (int i = 0; i < b->ncols; i++)
		if (strcmp(b->cols[i].name, name) == 0)
			return i;
	/* As the loader: the exact spelling, else the lower-case form. */
	{
		char	   *lower = asc_tolower(name, strlen(name));

		for (int i = 0; i < b->ncols; i++)
			if (strcmp(b->cols[i].name, lower) == 0)
				return i;
	}
	return -1;
}

/*
 * The buffer's columns: object_key, source_row, then version_id and
 * operation if the staged relation has them, then every other column.
 */
static void
stage_columns(StageState *st)
{
	TupleDesc	desc = RelationGetDescr(st->staged);
	StageBuffer *b = &st->buf;
	int			n = 0;
	int			okey = -1,
				srow = -1,
				vid = -1,
				op = -1;

	b->cols = palloc0(sizeof(StageColumn) * (desc->natts + 2));
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute a = TupleDescAttr(desc, i);
		const char *name = NameStr(a->attname);

		if (a->attisdropped)
			continue;
		if (strcmp(name, "object_key") == 0)
			okey = i;
		else if (strcmp(name, "source_row") == 0)
			srow = i;
		else if (strcmp(name, "version_id") == 0)
			vid = i;
		else if (strcmp(name, "operation") == 0)
			op = i;
	}
	if (okey < 0 || srow < 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("staged relation \"%s\" has no column \"%s\"", RelationGetRelationName(st->staged),
						okey < 0 ? "object_key" : "source_row"),
				 errdetail("Objects are staged with object_key, source_row (and version_id, where the relation has it).")));
#define ADD_COL(i) do { \
		Form_pg_attribute a_ = TupleDescAttr(desc, (i)); \
		b->cols[n].name = pstrdup(NameStr(a_->attname)); \
		b->cols[n].type = format_type_extended(a_->atttypid, a_->atttypmod, FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY); \
		b->cols[n].attidx = (i); \
		n++; } while (0)
	ADD_COL(okey);
	ADD_COL(srow);
	st->version_col = -1;
	st->operation_col = -1;
	if (vid >= 0)
	{
		st->version_col = n;
		ADD_COL(vid);
	}
	if (op >= 0)
	{
		st->operation_col = n;
		ADD_COL(op);
	}
	st->first_data_col = n;
	for (int i = 0; i < desc->natts; i++)
	{
		if (TupleDescAttr(desc, i)->attisdropped || i == okey || i == srow || i == vid || i == op)
			continue;
		ADD_COL(i);
	}
#undef ADD_COL
	b->ncols = n;
}

/*
 * Maps an object's field names (a CSV header, the columns option) to
 * buffer columns; -1 for an unknown name under unknown_columns "ignore".
 */
static void
map_fields(StageState *st, List *names)
{
	ListCell   *lc;
	int			i = 0;

	st->ndata = list_length(names);
	st->data_map = palloc(sizeof(int) * Max(st->ndata, 1));
	st->force_null = palloc0(sizeof(bool) * Max(st->ndata, 1));
	foreach(lc, names)
	{
		char	   *name = lfirst(lc);
		int			col = name ? find_col(&st->buf, name) : -1;

		if (col >= 0 && col < st->first_data_col && col != st->operation_col)
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_COLUMN),
					 errmsg("%s has a column \"%s\", which staging fills itself", st->what, name),
					 errhint("Rename the column in the object, or leave it out with a header-less \"columns\" list.")));
		for (int j = 0; j < i && col >= 0; j++)
			if (st->data_map[j] == col)
				ereport(ERROR,
						(errcode(ERRCODE_DUPLICATE_COLUMN),
						 errmsg("%s names column \"%s\" twice", st->what, name)));
		if (col < 0 && !st->opts->ignore_unknown)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("%s has a column \"%s\" that staged relation \"%s\" does not have",
							st->what, name ? name : "(null)", RelationGetRelationName(st->staged)),
					 errhint("Add the column to the staged relation, or pass \"unknown_columns\": \"ignore\".")));
		st->data_map[i] = col;
		if (col >= 0 && st->opts->force_null)
		{
			ListCell   *fc;

			foreach(fc, st->opts->force_null)
				if (find_col(&st->buf, lfirst(fc)) == col)
					st->force_null[i] = true;
		}
		i++;
	}
}

/* ---- rejects ---- */

/* The text of a raw line fit for a text column: invalid bytes as \xNN. */
static char *
printable_line(const char *s, int len)
{
	StringInfoData out;
	int			enc = GetDatabaseEncoding();
	int			i = 0;

	if (len > RAW_LINE_KEPT)
		len = RAW_LINE_KEPT;
	initStringInfo(&out);
	while (i < len)
	{
		int			l = pg_encoding_verifymbchar(enc, s + i, len - i);

		if (l <= 0 || s[i] == '\0')
		{
			appendStringInfo(&out, "\\x%02x", (unsigned char) s[i]);
			i++;
		}
		else
		{
			appendBinaryStringInfo(&out, s + i, l);
			i += l;
		}
	}
	return out.data;
}

static void
stage_reject(StageState *st, const char *raw, int rawlen, const char *reason)
{
	char	  **values = palloc0(sizeof(char *) * st->buf.ncols);
	Datum		rv[5];
	bool		rn[5] = {false};

	/* Staged with its object, version and row only: reconcile_batch rejects it. */
	values[COL_OBJECT_KEY] = st->obj->key;
	values[COL_SOURCE_ROW] = psprintf(INT64_FORMAT, st->rows);
	if (st->version_col >= 0)
		values[st->version_col] = (char *) st->version_id;
	if (st->operation_col >= 0)
		values[st->operation_col] = st->opts->operation;
	buffer_add(&st->buf, values);
	st->rejected++;

	rv[0] = CStringGetTextDatum(st->obj->key);
	rv[1] = CStringGetTextDatum(st->version_id);
	rv[2] = Int64GetDatum(st->rows);
	rv[3] = CStringGetTextDatum(printable_line(raw, rawlen));
	rv[4] = CStringGetTextDatum(reason);
	tuplestore_putvalues(st->rejects, st->reject_desc, rv, rn);
}

/* ---- CSV through COPY ---- */

static int
copy_source(void *outbuf, int minread, int maxread)
{
	StageState *st = current_stage;
	int			got = 0;

	while (got < minread)
	{
		size_t		n = objects_read(st->reader, (char *) outbuf + got, maxread - got);

		if (n == 0)
			break;
		got += (int) n;
	}
	return got;
}

static DefElem *
copy_opt(const char *name, const char *value)
{
	return makeDefElem(pstrdup(name), (Node *) makeString(pstrdup(value)), -1);
}

static void
stage_row(StageState *st, char **fields, int nfields)
{
	char	  **values = palloc0(sizeof(char *) * st->buf.ncols);

	values[COL_OBJECT_KEY] = st->obj->key;
	values[COL_SOURCE_ROW] = psprintf(INT64_FORMAT, st->rows);
	if (st->version_col >= 0)
		values[st->version_col] = (char *) st->version_id;
	if (st->operation_col >= 0)
		values[st->operation_col] = st->opts->operation;
	for (int i = 0; i < nfields; i++)
	{
		int			col = st->data_map[i];

		if (col < 0)
			continue;
		values[col] = fields[i];
	}
	buffer_add(&st->buf, values);
}

/* Where a COPY parse error happened: the object and its row. */
static void
stage_error_context(void *arg)
{
	StageState *st = (StageState *) arg;

	if (st->obj)
		errcontext("staging %s, data row %lld", st->what,
				   (long long) st->rows + (st->row_counted ? 0 : 1));
}

static void
stage_csv(StageState *st)
{
	ParseState *pstate = make_parsestate(NULL);
	List	   *copts = NIL;
	CopyFromState cstate;
	char	  **fields;
	int			nfields;
	int			dbenc = GetDatabaseEncoding();
	bool		verify = false;
	const char *null_string;
	ErrorContextCallback errctx;

	copts = lappend(copts, copy_opt("format", "csv"));
	if (st->opts->delimiter)
		copts = lappend(copts, copy_opt("delimiter", st->opts->delimiter));
	if (st->opts->quote)
		copts = lappend(copts, copy_opt("quote", st->opts->quote));
	if (st->opts->escape)
		copts = lappend(copts, copy_opt("escape", st->opts->escape));
	if (st->opts->null_string)
		copts = lappend(copts, copy_opt("null", st->opts->null_string));
	null_string = st->opts->null_string ? st->opts->null_string : "";

	/*
	 * An object in the database's encoding is read as SQL_ASCII and each
	 * row checked here, so that an invalid byte rejects its row instead of
	 * stopping the parser; another encoding is converted by COPY, and an
	 * invalid byte there refuses the object.
	 */
	if (st->opts->encoding == NULL || pg_char_to_encoding(st->opts->encoding) == dbenc)
	{
		if (dbenc != PG_SQL_ASCII && !PG_ENCODING_IS_CLIENT_ONLY(dbenc) &&
			pg_encoding_max_length(dbenc) > 1)
		{
			copts = lappend(copts, copy_opt("encoding", "SQL_ASCII"));
			verify = true;
		}
	}
	else
		copts = lappend(copts, copy_opt("encoding", st->opts->encoding));

	current_stage = st;
	cstate = BeginCopyFrom(pstate, st->staged, NULL, NULL, false, copy_source, NIL, copts);
	errctx.callback = stage_error_context;
	errctx.arg = st;
	errctx.previous = error_context_stack;
	error_context_stack = &errctx;

	if (st->opts->header)
	{
		List	   *names = NIL;

		if (!NextCopyFromRawFields(cstate, &fields, &nfields))
			nfields = -1;		/* an empty object: no header, no rows */
		for (int i = 0; i < nfields; i++)
		{
			if (fields[i] == NULL || fields[i][0] == '\0')
				ereport(ERROR,
						(errcode(ERRCODE_BAD_COPY_FILE_FORMAT),
						 errmsg("the header of %s has an empty column name (column %d)", st->what, i + 1)));
			if (verify && !pg_verify_mbstr(dbenc, fields[i], strlen(fields[i]), true))
				ereport(ERROR,
						(errcode(ERRCODE_CHARACTER_NOT_IN_REPERTOIRE),
						 errmsg("the header of %s is not valid %s", st->what, GetDatabaseEncodingName())));
			names = lappend(names, pstrdup(fields[i]));
		}
		if (nfields < 0)
		{
			error_context_stack = errctx.previous;
			EndCopyFrom(cstate);
			st->ndata = 0;
			return;
		}
		map_fields(st, names);
	}
	else
	{
		List	   *names = st->opts->columns;

		if (names == NIL)
			for (int i = st->first_data_col; i < st->buf.ncols; i++)
				names = lappend(names, st->buf.cols[i].name);
		map_fields(st, names);
	}

	for (;;)
	{
		MemoryContext old;
		bool		bad = false;

		CHECK_FOR_INTERRUPTS();
		MemoryContextReset(st->rowcxt);
		old = MemoryContextSwitchTo(st->rowcxt);
		st->row_counted = false;
		if (!NextCopyFromRawFields(cstate, &fields, &nfields))
		{
			MemoryContextSwitchTo(old);
			break;
		}
		st->rows++;
		st->row_counted = true;
		if (nfields != st->ndata)
		{
			stage_reject(st, cstate->line_buf.data, cstate->line_buf.len,
						 psprintf("row %lld of %s has %d fields, not %d",
								  (long long) st->rows, st->what, nfields, st->ndata));
			bad = true;
		}
		for (int i = 0; !bad && verify && i < nfields; i++)
			if (fields[i] && !pg_verify_mbstr(dbenc, fields[i], strlen(fields[i]), true))
			{
				stage_reject(st, cstate->line_buf.data, cstate->line_buf.len,
							 psprintf("row %lld of %s is not valid %s",
									  (long long) st->rows, st->what, GetDatabaseEncodingName()));
				bad = true;
			}
		if (!bad)
		{
			for (int i = 0; i < nfields; i++)
				if (st->force_null[i] && fields[i] && strcmp(fields[i], null_string) == 0)
					fields[i] = NULL;
			stage_row(st, fields, nfields);
		}
		MemoryContextSwitchTo(old);
	}
	st->row_counted = false;
	error_context_stack = errctx.previous;
	EndCopyFrom(cstate);
	current_stage = NULL;
}

/* ---- JSON lines ---- */

static bool
is_data_error(int sqlerrcode)
{
	int			category = ERRCODE_TO_CATEGORY(sqlerrcode);

	return category == ERRCODE_DATA_EXCEPTION;
}

/* A JSON value as staged text: strings as they are, the rest as JSON. */
static char *
json_value_text(JsonbValue *v)
{
	switch (v->type)
	{
		case jbvNull:
			return NULL;
		case jbvString:
			return jbv_string(v);
		case jbvNumeric:
			return DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(v->val.numeric)));
		case jbvBool:
			return pstrdup(v->val.boolean ? "true" : "false");
		default:
			return JsonbToCString(NULL, v->val.binary.data, v->val.binary.len);
	}
}

static void
stage_json_line(StageState *st, char *line, int len)
{
	int			dbenc = GetDatabaseEncoding();
	Jsonb	   *doc = NULL;
	char	   *error = NULL;
	MemoryContext cxt = CurrentMemoryContext;

	st->rows++;
	if (!pg_verify_mbstr(dbenc, line, len, true))
	{
		stage_reject(st, line, len, psprintf("row %lld of %s is not valid %s",
											 (long long) st->rows, st->what, GetDatabaseEncodingName()));
		return;
	}
	/* jsonb_in only parses and pallocs: its errors are caught directly. */
	PG_TRY();
	{
		doc = DatumGetJsonbP(DirectFunctionCall1(jsonb_in, CStringGetDatum(line)));
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (!is_data_error(edata->sqlerrcode))
			PG_RE_THROW();
		FlushErrorState();
		error = edata->message;
	}
	PG_END_TRY();
	if (error)
	{
		stage_reject(st, line, len, psprintf("row %lld of %s is not JSON: %s",
											 (long long) st->rows, st->what, error));
		return;
	}
	if (!JB_ROOT_IS_OBJECT(doc) || JB_ROOT_IS_SCALAR(doc))
	{
		stage_reject(st, line, len, psprintf("row %lld of %s is a JSON %s, not an object",
											 (long long) st->rows, st->what,
											 JB_ROOT_IS_SCALAR(doc) ? "scalar" : "array"));
		return;
	}
	{
		char	  **values = palloc0(sizeof(char *) * st->buf.ncols);
		JsonbIterator *it = JsonbIteratorInit(&doc->root);
		JsonbValue	v;
		char	   *key;

		while (jsonb_object_next(&it, &key, &v))
		{
			int			col = find_col(&st->buf, key);

			if (col >= 0 && col < st->first_data_col && col != st->operation_col)
			{
				stage_reject(st, line, len, psprintf("row %lld of %s has key \"%s\", which staging fills itself",
													 (long long) st->rows, st->what, key));
				return;
			}
			if (col < 0)
			{
				if (st->opts->ignore_unknown)
					continue;
				stage_reject(st, line, len, psprintf("row %lld of %s has key \"%s\", which staged relation \"%s\" has no column for",
													 (long long) st->rows, st->what, key,
													 RelationGetRelationName(st->staged)));
				return;
			}
			values[col] = json_value_text(&v);
		}
		values[COL_OBJECT_KEY] = st->obj->key;
		values[COL_SOURCE_ROW] = psprintf(INT64_FORMAT, st->rows);
		if (st->version_col >= 0)
			values[st->version_col] = (char *) st->version_id;
		if (st->operation_col >= 0 && values[st->operation_col] == NULL)
			values[st->operation_col] = st->opts->operation;
		buffer_add(&st->buf, values);
	}
}

static void
stage_jsonl(StageState *st)
{
	StringInfoData line;
	char	   *chunk = palloc(65536);
	size_t		n;

	if (st->opts->encoding && pg_char_to_encoding(st->opts->encoding) != GetDatabaseEncoding())
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("JSON lines are read in the database's encoding (%s), not %s",
						GetDatabaseEncodingName(), st->opts->encoding)));
	initStringInfo(&line);
	for (;;)
	{
		size_t		pos = 0;

		n = objects_read(st->reader, chunk, 65536);
		if (n == 0)
			break;
		while (pos < n)
		{
			char	   *nl = memchr(chunk + pos, '\n', n - pos);
			size_t		take = nl ? (size_t) (nl - (chunk + pos)) : n - pos;

			if (line.len + take > MAX_JSON_LINE)
				ereport(ERROR,
						(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
						 errmsg("row %lld of %s is longer than 64 MB", (long long) st->rows + 1, st->what)));
			appendBinaryStringInfo(&line, chunk + pos, take);
			pos += take;
			if (nl)
			{
				MemoryContext old;

				pos++;
				if (line.len > 0 && line.data[line.len - 1] == '\r')
					line.data[--line.len] = '\0';
				CHECK_FOR_INTERRUPTS();
				MemoryContextReset(st->rowcxt);
				old = MemoryContextSwitchTo(st->rowcxt);
				/* A blank line is no row. */
				if (strspn(line.data, " \t") != (size_t) line.len)
					stage_json_line(st, line.data, line.len);
				MemoryContextSwitchTo(old);
				resetStringInfo(&line);
			}
		}
	}
	if (line.len > 0 && strspn(line.data, " \t\r") != (size_t) line.len)
	{
		MemoryContext old;

		MemoryContextReset(st->rowcxt);
		old = MemoryContextSwitchTo(st->rowcxt);
		stage_json_line(st, line.data, line.len);
		MemoryContextSwitchTo(old);
	}
}

/* ---- one object ---- */

static bool
ends_with(const char *s, const char *suffix)
{
	size_t		ls = strlen(s),
				lf = strlen(suffix);

	return ls >= lf && pg_strcasecmp(s + ls - lf, suffix) == 0;
}

static void
manifest_add(JsonbParseState **ps, const char *key, const char *version, const char *hash, int64 rows)
{
	pushJsonbValue(ps, WJB_BEGIN_OBJECT, NULL);
	jsonb_push_string_field(ps, "object_key", key);
	jsonb_push_string_field(ps, "version_id", version);
	jsonb_push_string_field(ps, "content_hash", hash);
	jsonb_push_int64_field(ps, "rows", rows);
	pushJsonbValue(ps, WJB_END_OBJECT, NULL);
}

/*
 * Reads one object version into the buffer and checks what the bytes say
 * against what the listing and the producer said.  Returns the version id
 * the rows were staged with and the hash.
 */
static void
stage_one(StageState *st, ObjServer *srv, StageObject *o, ObjectRead *out)
{
	StageOptions *opts = st->opts;
	bool		gzip = opts->compression == 1 || (opts->compression < 0 && ends_with(o->key, ".gz"));
	StageFormat fmt = opts->format;
	const char *key_noext = o->key;
	uint8		digest[RECONCILE_SHA256_LEN];
	char		hex[RECONCILE_HEX_LEN + 1];
	uint64		bytes;
	int64		dir_size = -1;
	char	   *dir_hash = NULL;

	if (fmt == FORMAT_AUTO)
	{
		if (gzip && ends_with(o->key, ".gz"))
			key_noext = pnstrdup(o->key, strlen(o->key) - 3);
		fmt = (ends_with(key_noext, ".jsonl") || ends_with(key_noext, ".ndjson")) ? FORMAT_JSONL : FORMAT_CSV;
	}
	st->obj = o;
	st->rows = 0;
	st->what = psprintf("object \"%s\"%s%s%s of server \"%s\"", o->key,
						o->version_id ? " version \"" : "", o->version_id ? o->version_id : "",
						o->version_id ? "\"" : "", srv->name);

	/*
	 * A directory file without a version id gets its content hash first:
	 * the rows are staged with it, and the read below must find the same.
	 */
	if (srv->kind == OBJSERVER_DIRECTORY && o->version_id == NULL)
		dir_hash = dir_content_hash(srv, o->key, &dir_size);

	st->reader = objects_open_reader(srv, o->key, o->version_id,
									 o->version_id && strcmp(o->version_id, "null") != 0 ? NULL : o->etag,
									 gzip, st->what, opts->max_retries);
	if (o->version_id && strcmp(o->version_id, "null") != 0)
		st->version_id = o->version_id;
	else if (dir_hash)
		st->version_id = dir_hash;
	else if (objects_reader_version(st->reader) && strcmp(objects_reader_version(st->reader), "null") != 0)
		st->version_id = objects_reader_version(st->reader);
	else if (objects_reader_etag(st->reader))
		st->version_id = objects_reader_etag(st->reader);	/* unversioned: the ETag */
	else
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("%s has neither a version id nor an ETag", st->what)));
	if (o->version_id && srv->kind == OBJSERVER_S3 && objects_reader_version(st->reader) &&
		strcmp(o->version_id, objects_reader_version(st->reader)) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("%s was answered with version \"%s\"", st->what, objects_reader_version(st->reader)),
				 errhint("The store ignored the version asked for; check that the bucket is versioned.")));

	if (fmt == FORMAT_JSONL)
		stage_jsonl(st);
	else
		stage_csv(st);

	objects_reader_finish(st->reader, digest, &bytes);
	reconcile_hex(digest, RECONCILE_SHA256_LEN, hex);
	hex[RECONCILE_HEX_LEN] = '\0';
	if (objects_reader_etag(st->reader))
		out->etag = pstrdup(objects_reader_etag(st->reader));
	objects_close_reader(st->reader);
	st->reader = NULL;

	/* What the bytes say against what was said about them. */
	if (o->size >= 0 && (uint64) o->size != bytes)
		ereport(ERROR,
				(errcode(ERRCODE_DATA_CORRUPTED),
				 errmsg("%s has %llu bytes, not the %lld listed", st->what,
						(unsigned long long) bytes, (long long) o->size),
				 errhint("The object changed or the read was cut short; list it again. Nothing was staged.")));
	if (srv->kind == OBJSERVER_DIRECTORY)
	{
		const char *expected = o->version_id ? o->version_id : dir_hash;

		if (strcmp(expected, hex) != 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("%s changed since it was listed", st->what),
					 errdetail("Its version id is the SHA-256 of its content when listed, %s; the bytes read hash to %s.", expected, hex),
					 errhint("List the directory again. Nothing was staged.")));
	}
	if (o->content_hash && strcmp(o->content_hash, hex) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION),
				 errmsg("%s does not have the producer's content hash", st->what),
				 errdetail("The producer says sha256:%s and %lld rows; the %llu bytes read hash to sha256:%s and hold %lld rows.",
						   o->content_hash, (long long) o->rows, (unsigned long long) bytes, hex, (long long) st->rows),
				 errhint("Nothing of the call was staged. Check the object and its producer.")));
	if (o->rows >= 0 && o->rows != st->rows)
		ereport(ERROR,
				(errcode(ERRCODE_CARDINALITY_VIOLATION),
				 errmsg("%s has %lld data rows, not the %lld the producer says", st->what,
						(long long) st->rows, (long long) o->rows),
				 errdetail("The bytes read hash to sha256:%s (%llu bytes)%s%s.", hex, (unsigned long long) bytes,
						   o->content_hash ? ", as the producer's content hash says" : "", ""),
				 errhint("Nothing of the call was staged. Check the object's format options (header, delimiter) and its producer.")));

	out->version_id = pstrdup(st->version_id);
	snprintf(out->content_hash, sizeof(out->content_hash), "sha256:%s", hex);
	out->rows = st->rows;
	out->bytes = bytes;
	st->rows_total += st->rows;
}

/* The reject limits over the call's rows, as reconcile_batch applies them. */
static void
check_reject_limits(StageState *st)
{
	StageOptions *o = st->opts;
	const char *limit = NULL;

	if (o->max_rejects >= 0 && st->rejected > o->max_rejects)
		limit = psprintf("max_rejects is " INT64_FORMAT, o->max_rejects);
	else if (o->max_reject_share != NULL &&
			 DatumGetBool(DirectFunctionCall2(numeric_gt,
											  NumericGetDatum(int64_to_numeric(st->rejected)),
											  DirectFunctionCall2(numeric_mul,
																  NumericGetDatum(o->max_reject_share),
																  NumericGetDatum(int64_to_numeric(st->rows_total))))))
		limit = psprintf("max_reject_share is %s",
						 DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(o->max_reject_share))));
	if (limit)
	{
		TupleTableSlot *slot = MakeSingleTupleTableSlot(st->reject_desc, &TTSOpsMinimalTuple);
		StringInfoData named;
		int			n = 0;

		initStringInfo(&named);
		tuplestore_rescan(st->rejects);
		while (n < 5 && tuplestore_gettupleslot(st->rejects, true, false, slot))
		{
			bool		isnull;

			appendStringInfo(&named, "%s%s", n ? "; " : "",
							 TextDatumGetCString(slot_getattr(slot, 5, &isnull)));
			n++;
		}
		ExecDropSingleTupleTableSlot(slot);
		ereport(ERROR,
				(errcode(ERRCODE_DATA_EXCEPTION),
				 errmsg("staging is beyond the reject limit: %lld of %lld rows do not parse (%s)",
						(long long) st->rejected, (long long) st->rows_total, limit),
				 errdetail("First rejects: %s.", named.data),
				 errhint("Correct the objects or their format options, or raise the limit; nothing was staged.")));
	}
}

/*
 * Records the parse rejects in reconcile.rejects under the batch id of
 * the manifest, for the target named (the caller must be able to load it:
 * INSERT on it).  Idempotent: a second staging of the same batch replaces
 * the rows the first one recorded.
 */
static void
record_rejects(StageState *st, const char *batch_id)
{
	StateRows  *buf;
	TupleTableSlot *slot;
	StateUser	su;
	Datum		args[2];
	Oid			argtypes[2] = {TEXTOID, REGCLASSOID};

	if (pg_class_aclcheck(st->opts->target, GetUserId(), ACL_INSERT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", get_rel_name(st->opts->target)),
				 errdetail("Recording rejects for a target takes INSERT on it.")));
	args[0] = CStringGetTextDatum(batch_id);
	args[1] = ObjectIdGetDatum(st->opts->target);
	state_user_enter(&su);
	if (SPI_execute_with_args("DELETE FROM reconcile.rejects WHERE batch_id OPERATOR(pg_catalog.=) $1"
							  " AND target OPERATOR(pg_catalog.=) $2 AND column_name IS NULL"
							  " AND reason OPERATOR(pg_catalog.~) '^row [0-9]+ of object '",
							  2, argtypes, args, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not clear earlier staging rejects");
	state_user_leave(&su);
	if (st->rejected == 0)
		return;
	buf = state_rows_create(&state_rejects);
	slot = MakeSingleTupleTableSlot(st->reject_desc, &TTSOpsMinimalTuple);
	tuplestore_rescan(st->rejects);
	while (tuplestore_gettupleslot(st->rejects, true, false, slot))
	{
		slot_getallattrs(slot);
		state_row_set(buf, "batch_id", args[0]);
		state_row_set(buf, "target", args[1]);
		state_row_set(buf, "object_key", slot->tts_values[0]);
		state_row_set(buf, "source_row", slot->tts_values[2]);
		state_row_set(buf, "raw_value", slot->tts_values[3]);
		state_row_set(buf, "reason", slot->tts_values[4]);
		state_row_set(buf, "version_id", slot->tts_values[1]);
		state_row_add(buf);
	}
	state_rows_flush(buf);
	ExecDropSingleTupleTableSlot(slot);
}

/*
 * Stages the objects into staged (already locked by the caller or here)
 * and returns the manifest; *reads gets one ObjectRead per object, in
 * the objects' order.
 */
Jsonb *
objects_stage(Oid stagedid, ObjServer *srv, List *objects, StageOptions *opts,
			  ObjectRead **reads)
{
	StageState	st;
	JsonbParseState *ps = NULL;
	JsonbValue *res;
	Jsonb	   *manifest;
	ListCell   *lc;
	volatile int i = 0;
	TupleDesc	rdesc;

	memset(&st, 0, sizeof(st));
	st.opts = opts;
	st.staged = table_open(stagedid, RowExclusiveLock);
	if (pg_class_aclcheck(stagedid, GetUserId(), ACL_INSERT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", RelationGetRelationName(st.staged))));
	stage_columns(&st);
	buffer_prepare(&st.buf, st.staged);
	st.rowcxt = AllocSetContextCreate(CurrentMemoryContext, "reconcile staged row",
									  ALLOCSET_DEFAULT_SIZES);
	rdesc = CreateTemplateTupleDesc(5);
	TupleDescInitEntry(rdesc, 1, "object_key", TEXTOID, -1, 0);
	TupleDescInitEntry(rdesc, 2, "version_id", TEXTOID, -1, 0);
	TupleDescInitEntry(rdesc, 3, "source_row", INT8OID, -1, 0);
	TupleDescInitEntry(rdesc, 4, "raw_value", TEXTOID, -1, 0);
	TupleDescInitEntry(rdesc, 5, "reason", TEXTOID, -1, 0);
	st.reject_desc = rdesc;
	st.rejects = tuplestore_begin_heap(true, false, work_mem);

	*reads = palloc0(sizeof(ObjectRead) * list_length(objects));
	pushJsonbValue(&ps, WJB_BEGIN_ARRAY, NULL);
	PG_TRY();
	{
		foreach(lc, objects)
		{
			StageObject *o = lfirst(lc);

			CHECK_FOR_INTERRUPTS();
			(*reads)[i].object_key = o->key;
			stage_one(&st, srv, o, &(*reads)[i]);
			manifest_add(&ps, o->key, (*reads)[i].version_id, (*reads)[i].content_hash, (*reads)[i].rows);
			i++;
		}
	}
	PG_FINALLY();
	{
		current_stage = NULL;
	}
	PG_END_TRY();
	buffer_flush(&st.buf);
	if (st.buf.direct)
		direct_end(&st.buf);
	res = pushJsonbValue(&ps, WJB_END_ARRAY, NULL);
	manifest = JsonbValueToJsonb(res);

	check_reject_limits(&st);
	if (OidIsValid(opts->target))
		record_rejects(&st, manifest_parse(manifest)->batch_id);
	tuplestore_end(st.rejects);
	table_close(st.staged, NoLock);
	return manifest;
}

StageOptions *
objects_stage_options(Jsonb *doc)
{
	StageOptions *opts = palloc(sizeof(StageOptions));

	stage_options_parse(opts, doc);
	return opts;
}

/* reconcile_load records the parse rejects for its target. */
void
objects_stage_set_target(StageOptions *opts, Oid target)
{
	opts->target = target;
}

/*
 * reconcile_stage_objects(staged regclass, server name, objects jsonb,
 *                         options jsonb DEFAULT '{}') RETURNS jsonb
 */
Datum
reconcile_stage_objects(PG_FUNCTION_ARGS)
{
	Oid			staged;
	ObjServer  *srv;
	List	   *objects;
	StageOptions *opts;
	ObjectRead *reads;
	Jsonb	   *manifest;
	MemoryContext cxt = CurrentMemoryContext;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1) || PG_ARGISNULL(2))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("%s must not be NULL", PG_ARGISNULL(0) ? "staged" : PG_ARGISNULL(1) ? "server" : "objects")));
	staged = PG_GETARG_OID(0);
	srv = objects_open_server(NameStr(*PG_GETARG_NAME(1)));
	opts = objects_stage_options(PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3));
	objects = objects_stage_parse_objects(PG_GETARG_JSONB_P(2));

	if (SPI_connect() != SPI_OK_CONNECT)
		elog(ERROR, "SPI_connect failed");
	manifest = objects_stage(staged, srv, objects, opts, &reads);
	MemoryContextSwitchTo(cxt);
	manifest = DatumGetJsonbP(SPI_datumTransfer(JsonbPGetDatum(manifest), false, -1));
	SPI_finish();
	PG_RETURN_JSONB_P(manifest);
}
