/*
 * manifest.c
 *		Parse a batch manifest, put it in canonical form and derive the
 *		batch id from it.
 *
 * The canonical form is what a client hashes to predict the batch id: the
 * entries sorted by object_key, then version_id (bytewise, UTF-8), each written as
 * {"object_key":...,"version_id":...,"content_hash":...,"rows":N} with
 * no blanks, joined with commas inside [ ].  Strings are escaped as JSON
 * requires and no more, which is what Python's
 * json.dumps(..., separators=(",", ":"), ensure_ascii=False) writes; rows
 * is read as an exact number and written as a plain integer (1e3 as 1000,
 * 2.0 as 2), which the README's Python does with int().
 */
#include "postgres.h"

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"
#include "mb/pg_wchar.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/memutils.h"
#include "utils/numeric.h"

#include "common/args.h"
#include "common/sqlname.h"
#include "common/jsonbuild.h"
#include "manifest.h"
#include "common/sha256.h"
#include "common/state_schema.h"

PG_FUNCTION_INFO_V1(reconcile_batch_id);
PG_FUNCTION_INFO_V1(reconcile_canonical_manifest);

/* Raise an error about entry n (1-based, in the order given). */
#define manifest_error(n, ...) \
	ereport(ERROR, \
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE), \
			 errmsg("invalid manifest entry %d%s", (n), manifest_where), \
			 errdetail(__VA_ARGS__), \
			 errhint("Each manifest entry is an object with the fields object_key, version_id and content_hash (non-empty strings of at most 1024 bytes) and rows (a non-negative integer).")))

/*
 * Where the entry being read comes from, for its errors: "" for a jsonb
 * manifest (entries are numbered in the order given), ' of relation "m"'
 * for a manifest relation (rows numbered in the order read).
 */
static const char *manifest_where = "";

/*
 * Object keys and version ids are indexed in reconcile.batch_objects; a
 * btree entry holds at most about 2.7 kB, so each may have 1024 bytes (as
 * an S3 key may).  Content hashes are digests.
 */
#define MANIFEST_FIELD_MAX 1024

/*
 * A manifest's size is bounded before any work is done.  Under schema 1.2
 * the receipt no longer keeps the objects as one jsonb document (its 256
 * MB cap stopped 1.1 at 500,000 objects): each is a row of
 * reconcile.batch_objects.  What bounds a batch now is the backend's
 * memory, some 300 bytes per object besides its strings (the entries, the
 * three text[] of the batch's queries, the per-object counts), and one
 * text[] of object keys, which may not exceed 1 GB.  5,000,000 objects
 * with 256 MB of object keys and version ids stay well within both; the
 * manifest itself, a jsonb, holds at most 256 MB of entries, which is
 * reached first for most manifests (about 1,400,000 entries with 64-digit
 * content hashes).  A database still at schema 1.1 keeps 1.1's bound.
 */
#define MANIFEST_MAX_OBJECTS 5000000
#define MANIFEST_MAX_OBJECTS_1_1 500000
#define MANIFEST_MAX_NAME_BYTES (256 * 1024 * 1024)
#define MANIFEST_MAX_NAME_BYTES_1_1 (64 * 1024 * 1024)

/* Strings longer than this are cut short in error messages. */
#define MANIFEST_SHOW_MAX 64

/*
 * The manifest's strings, packed one after another in large blocks: a
 * palloc'd chunk per string would add 16 bytes of header and round each up
 * to a power of two, doubling the memory a large manifest takes.
 */
#define MANIFEST_ARENA_BLOCK (256 * 1024)

typedef struct StringArena
{
	char	   *next;
	Size		free;
} StringArena;

static char *
arena_strdup(StringArena *arena, const char *s, int len)
{
	char	   *result;

	if (arena->free < (Size) len + 1)
	{
		Size		size = Max((Size) len + 1, MANIFEST_ARENA_BLOCK);

		arena->next = palloc(size);
		arena->free = size;
	}
	result = arena->next;
	memcpy(result, s, len);
	result[len] = '\0';
	arena->next += len + 1;
	arena->free -= len + 1;
	return result;
}

/* A string of the manifest for an error message, cut short if long. */
static char *
show(const char *s, int len)
{
	if (len <= MANIFEST_SHOW_MAX)
		return pnstrdup(s, len);
	return psprintf("%s... (%d bytes)", pnstrdup(s, pg_mbcliplen(s, len, MANIFEST_SHOW_MAX)), len);
}

typedef struct ManifestParse
{
	StringArena arena;
	Size		name_bytes;		/* of object keys and version ids so far */
	Size		max_name_bytes;
} ManifestParse;

/* The most objects a manifest may list under the installed schema. */
static int
manifest_max_objects(void)
{
	return state_version() < STATE_1_2 ? MANIFEST_MAX_OBJECTS_1_1 : MANIFEST_MAX_OBJECTS;
}

static char *
entry_string_bytes(ManifestParse *ps, int n, const char *field, const char *s, int len)
{
	if (len == 0)
		manifest_error(n, "Field \"%s\" must not be empty.", field);
	if (len > MANIFEST_FIELD_MAX)
		manifest_error(n, "Field \"%s\" is %d bytes long; the limit is %d bytes.",
					   field, len, MANIFEST_FIELD_MAX);
	return arena_strdup(&ps->arena, s, len);
}

static char *
entry_string(ManifestParse *ps, int n, const char *field, JsonbValue *v)
{
	if (v->type != jbvString)
		manifest_error(n, "Field \"%s\" must be a string.", field);
	return entry_string_bytes(ps, n, field, v->val.string.val, v->val.string.len);
}

static int64
entry_rows_numeric(int n, Numeric num)
{
	char	   *text;
	char	   *shown;
	int64		rows;
	char	   *end;
	char	   *point;

	/*
	 * numeric_out writes 1e3 as 1000 and 2.0 as 2.0: an integral value has
	 * only zeros after its point.  The value is exact (jsonb keeps numbers
	 * as numeric), so 2.0000000000000001 is not an integer.
	 */
	text = DatumGetCString(DirectFunctionCall1(numeric_out, NumericGetDatum(num)));
	shown = show(text, strlen(text));
	if (text[0] == '-')
		manifest_error(n, "Field \"rows\" must not be negative, but is %s.", shown);
	point = strchr(text, '.');
	if (point != NULL && strspn(point + 1, "0") == strlen(point + 1))
		*point = '\0';
	if (strspn(text, "0123456789") != strlen(text))
		manifest_error(n, "Field \"rows\" must be an integer, but is %s.", shown);
	errno = 0;
	rows = strtoi64(text, &end, 10);
	if (errno != 0 || *end != '\0')
		manifest_error(n, "Field \"rows\" is out of range: %s.", shown);
	pfree(text);
	pfree(shown);
	return rows;
}

static int64
entry_rows(int n, JsonbValue *v)
{
	if (v->type != jbvNumeric)
		manifest_error(n, "Field \"rows\" must be a number.");
	return entry_rows_numeric(n, v->val.numeric);
}

static bool
is_field(JsonbValue *key, const char *name)
{
	return key->val.string.len == strlen(name) &&
		memcmp(key->val.string.val, name, key->val.string.len) == 0;
}

static void check_entry(ManifestParse *ps, int n, ManifestEntry *entry, bool have_rows);

static void
parse_entry(ManifestParse *ps, int n, JsonbValue *elem, ManifestEntry *entry)
{
	JsonbIterator *it;
	JsonbValue	k;
	JsonbValue	v;
	JsonbIteratorToken tok;
	bool		have_rows = false;

	if (elem->type != jbvBinary || !JsonContainerIsObject(elem->val.binary.data))
		manifest_error(n, "Each entry must be a JSON object.");

	memset(entry, 0, sizeof(*entry));
	it = JsonbIteratorInit(elem->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &k, true)) != WJB_DONE)
	{
		if (tok != WJB_KEY)
			continue;
		tok = JsonbIteratorNext(&it, &v, true);
		Assert(tok == WJB_VALUE);

		if (is_field(&k, "object_key"))
		{
			entry->object_key = entry_string(ps, n, "object_key", &v);
			ps->name_bytes += v.val.string.len;
		}
		else if (is_field(&k, "version_id"))
		{
			entry->version_id = entry_string(ps, n, "version_id", &v);
			ps->name_bytes += v.val.string.len;
		}
		else if (is_field(&k, "content_hash"))
			entry->content_hash = entry_string(ps, n, "content_hash", &v);
		else if (is_field(&k, "rows"))
		{
			entry->rows = entry_rows(n, &v);
			have_rows = true;
		}
		else
			manifest_error(n, "Field \"%s\" is not a manifest field.",
						   show(k.val.string.val, k.val.string.len));
	}

	check_entry(ps, n, entry, have_rows);
}

/* An entry has every field, and the manifest's names are within bounds. */
static void
check_entry(ManifestParse *ps, int n, ManifestEntry *entry, bool have_rows)
{
	if (entry->object_key == NULL)
		manifest_error(n, "Field \"object_key\" is missing.");
	if (entry->version_id == NULL)
		manifest_error(n, "Field \"version_id\" is missing in object \"%s\".",
					   entry->object_key);
	if (entry->content_hash == NULL)
		manifest_error(n, "Field \"content_hash\" is missing in object \"%s\".",
					   entry->object_key);
	if (!have_rows)
		manifest_error(n, "Field \"rows\" is missing in object \"%s\".",
					   entry->object_key);
	if (ps->name_bytes > ps->max_name_bytes)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("manifest is too large: its object keys and version ids exceed %d MB at entry %d",
						(int) (ps->max_name_bytes / (1024 * 1024)), n),
				 errdetail("A batch's object keys and version ids may take %d MB together.",
						   (int) (ps->max_name_bytes / (1024 * 1024))),
				 errhint("Split the objects into several batches, each with a manifest of its own.")));
}

/* Entries are ordered by object_key, then version_id, both bytewise. */
static int
compare_entries(const void *a, const void *b)
{
	const ManifestEntry *ea = (const ManifestEntry *) a;
	const ManifestEntry *eb = (const ManifestEntry *) b;
	int			c = strcmp(ea->object_key, eb->object_key);

	return c != 0 ? c : strcmp(ea->version_id, eb->version_id);
}

/*
 * The sort of a large manifest is bound by cache misses: each comparison
 * reads two object keys at random places.  Each entry carries the 16 bytes
 * of its object key that follow the prefix all keys share (zero-padded,
 * which sorts a shorter key first, as strcmp does), so that most
 * comparisons are decided inside the entries; only equal abbreviations
 * read the keys.  1,000,000 entries sorted in 4 s before, on this
 * project's machine.
 */
static void
abbreviate_keys(Manifest *m)
{
	size_t		common = m->nentries > 0 ? strlen(m->entries[0].object_key) : 0;

	for (int i = 1; i < m->nentries && common > 0; i++)
	{
		const char *a = m->entries[0].object_key;
		const char *b = m->entries[i].object_key;
		size_t		n = 0;

		while (n < common && a[n] == b[n])
			n++;
		common = n;
	}
	for (int i = 0; i < m->nentries; i++)
	{
		ManifestEntry *e = &m->entries[i];

		/* common is at most the key's length: strncpy pads with zeros */
		strncpy(e->abbrev, e->object_key + common, MANIFEST_ABBREV_LEN);
	}
	m->common_prefix = common;
}

static int
compare_entries_abbreviated(const void *a, const void *b, void *arg)
{
	const ManifestEntry *ea = (const ManifestEntry *) a;
	const ManifestEntry *eb = (const ManifestEntry *) b;
	size_t		common = *(const size_t *) arg;
	int			c = memcmp(ea->abbrev, eb->abbrev, MANIFEST_ABBREV_LEN);

	if (c != 0)
		return c;
	c = strcmp(ea->object_key + common, eb->object_key + common);
	return c != 0 ? c : strcmp(ea->version_id, eb->version_id);
}

/* For a look-up by object_key alone: the object is listed in one version. */
static int
compare_object_keys(const void *a, const void *b)
{
	return strcmp(((const ManifestEntry *) a)->object_key,
				  ((const ManifestEntry *) b)->object_key);
}

/*
 * Write the canonical form of the sorted entries.  With a digest context,
 * the text is digested a piece at a time and not kept; without, it is
 * left whole in buf.
 */
#define CANONICAL_PIECE (64 * 1024)

static void
write_canonical(const Manifest *m, StringInfo buf, Sha256Ctx *sha)
{
	appendStringInfoChar(buf, '[');
	for (int i = 0; i < m->nentries; i++)
	{
		ManifestEntry *e = &m->entries[i];

		if (i > 0)
			appendStringInfoChar(buf, ',');
		appendStringInfoString(buf, "{\"object_key\":");
		json_append_string(buf, e->object_key);
		appendStringInfoString(buf, ",\"version_id\":");
		json_append_string(buf, e->version_id);
		appendStringInfoString(buf, ",\"content_hash\":");
		json_append_string(buf, e->content_hash);
		appendStringInfo(buf, ",\"rows\":" INT64_FORMAT "}", e->rows);
		if (sha != NULL && buf->len >= CANONICAL_PIECE)
		{
			reconcile_sha256_update(sha, buf->data, buf->len);
			resetStringInfo(buf);
		}
	}
	appendStringInfoChar(buf, ']');
	if (sha != NULL)
	{
		reconcile_sha256_update(sha, buf->data, buf->len);
		resetStringInfo(buf);
	}
}

/*
 * Parse and validate a manifest; the entries come back sorted by
 * object_key, with the batch id filled in.  Memory: the entries and their
 * strings, some 40 bytes per entry besides the strings.
 */
/* Check a manifest's size and make room for its entries. */
static void
manifest_start(Manifest *m, ManifestParse *ps, int64 nentries)
{
	if (nentries == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("manifest has no entries"),
				 errhint("A batch loads at least one object.")));
	if (nentries > manifest_max_objects())
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("manifest has " INT64_FORMAT " entries; a batch loads at most %d objects",
						nentries, manifest_max_objects()),
				 state_version() < STATE_1_2 ?
				 errdetail("Schema 1.1 keeps a receipt's objects in one jsonb document; ALTER EXTENSION reconcile UPDATE raises the limit to %d objects.",
						   MANIFEST_MAX_OBJECTS) : 0,
				 errhint("Split the objects into several batches, each with a manifest of its own.")));
	m->nentries = (int) nentries;
	ps->max_name_bytes = state_version() < STATE_1_2 ? MANIFEST_MAX_NAME_BYTES_1_1 :
		MANIFEST_MAX_NAME_BYTES;
	m->entries = palloc_extended(sizeof(ManifestEntry) * m->nentries, MCXT_ALLOC_ZERO);
}

/*
 * Sort the parsed entries, refuse a version listed twice, and derive the
 * batch id from the canonical form: the same for a manifest however it
 * arrived (jsonb or relation).
 */
static void
manifest_finish(Manifest *m)
{
	StringInfoData buf;
	Sha256Ctx  *sha;
	uint8		digest[RECONCILE_SHA256_LEN];

	/*
	 * Several versions of one object may be listed (a stage with a
	 * version_id column tells their rows apart, stage.c); one version twice
	 * may not.
	 */
	abbreviate_keys(m);
	qsort_arg(m->entries, m->nentries, sizeof(ManifestEntry), compare_entries_abbreviated,
			  &m->common_prefix);
	m->repeated_object = -1;
	for (int i = 1; i < m->nentries; i++)
	{
		if (strcmp(m->entries[i - 1].object_key, m->entries[i].object_key) != 0)
			continue;
		if (strcmp(m->entries[i - 1].version_id, m->entries[i].version_id) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("manifest lists object \"%s\" version \"%s\" more than once",
							m->entries[i].object_key, m->entries[i].version_id),
					 errhint("A batch loads each object version once.")));
		if (m->repeated_object < 0)
			m->repeated_object = i - 1;
	}

	initStringInfo(&buf);
	sha = reconcile_sha256_begin();
	reconcile_sha256_init(sha);
	write_canonical(m, &buf, sha);
	reconcile_sha256_final(sha, digest);
	reconcile_sha256_end(sha);
	pfree(buf.data);
	reconcile_hex(digest, RECONCILE_SHA256_LEN, m->batch_id);
}

/*
 * Parse and validate a manifest; the entries come back sorted by
 * object_key, with the batch id filled in.  Memory: the entries and their
 * strings, some 40 bytes per entry besides the strings.
 */
Manifest *
manifest_parse(Jsonb *jb)
{
	Manifest   *m = palloc0(sizeof(Manifest));
	ManifestParse ps = {{NULL, 0}, 0, 0};
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	int			n = 0;

	if (!JB_ROOT_IS_ARRAY(jb) || JB_ROOT_IS_SCALAR(jb))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("manifest must be a JSON array"),
				 errhint("Pass one object per staged object, for example [{\"object_key\":\"crm/part-0001.csv\",\"version_id\":\"3Lg\",\"content_hash\":\"sha256:...\",\"rows\":5}].")));

	manifest_start(m, &ps, JB_ROOT_COUNT(jb));
	manifest_where = "";
	it = JsonbIteratorInit(&jb->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok != WJB_ELEM)
			continue;
		CHECK_FOR_INTERRUPTS();
		parse_entry(&ps, n + 1, &v, &m->entries[n]);
		n++;
	}
	Assert(n == m->nentries);
	manifest_finish(m);
	return m;
}

/* The columns a manifest relation has, in the order of MANIFEST_*. */
static const char *const manifest_columns[MANIFEST_NFIELDS] = {
	"object_key", "version_id", "content_hash", "rows"
};

/* Rows fetched from a manifest relation at a time. */
#define MANIFEST_FETCH 10000

/*
 * Check a manifest relation's columns: the three strings text or varchar,
 * rows an integer or numeric.  Other columns are ignored.  Returns whether
 * rows is of an integer type (read as bigint) rather than numeric.
 */
static bool
check_relation_columns(Oid relid)
{
	bool		rows_integer = false;

	for (int f = 0; f < MANIFEST_NFIELDS; f++)
	{
		AttrNumber	att = get_attnum(relid, manifest_columns[f]);
		Oid			type;
		bool		ok;

		if (att == InvalidAttrNumber || att < 0)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("manifest relation \"%s\" has no column \"%s\"",
							relation_display_name(relid), manifest_columns[f]),
					 errhint("A manifest relation has the columns object_key, version_id and content_hash (text) and rows (an integer).")));
		type = getBaseType(get_atttype(relid, att));
		ok = f == MANIFEST_ROWS ?
			(type == INT2OID || type == INT4OID || type == INT8OID || type == NUMERICOID) :
			(type == TEXTOID || type == VARCHAROID);
		if (!ok)
			ereport(ERROR,
					(errcode(ERRCODE_DATATYPE_MISMATCH),
					 errmsg("column \"%s\" of manifest relation \"%s\" has type %s",
							manifest_columns[f], relation_display_name(relid),
							format_type_be(get_atttype(relid, att))),
					 errhint(f == MANIFEST_ROWS ?
							 "Column \"rows\" of a manifest relation is an integer (smallint, integer, bigint or numeric)." :
							 "Columns object_key, version_id and content_hash of a manifest relation are text or varchar.")));
		if (f == MANIFEST_ROWS)
			rows_integer = type != NUMERICOID;
	}
	return rows_integer;
}

/*
 * Read a manifest from a relation (a table, view, materialized view or
 * foreign table with the columns object_key, version_id, content_hash and
 * rows), with the caller's rights; the caller has locked it and checked
 * SELECT.  Each row is an entry, validated as a jsonb manifest's entry is
 * (its errors number the rows in the order read), and the canonical form,
 * hence the batch id, is that of the same entries given as jsonb.  The
 * count and the rows are read under one snapshot, taken now.  Memory: the
 * entries and their strings, as manifest_parse; the relation is fetched
 * MANIFEST_FETCH rows at a time and never held whole.
 */
Manifest *
manifest_read_relation(Oid relid)
{
	MemoryContext outer = CurrentMemoryContext;
	Manifest   *m = palloc0(sizeof(Manifest));
	ManifestParse ps = {{NULL, 0}, 0, 0};
	char	   *rel = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
												 get_rel_name(relid));
	Portal		portal;
	SPIPlanPtr	plan;
	int			n = 0;
	bool		isnull;
	int64		count;
	bool		rows_integer;

	rows_integer = check_relation_columns(relid);
	manifest_where = psprintf(" of relation \"%s\"", relation_display_name(relid));

	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	if (SPI_execute(psprintf("SELECT pg_catalog.count(*) FROM %s", rel), true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not count the manifest relation");
	count = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	MemoryContextSwitchTo(outer);
	manifest_start(m, &ps, count);

	plan = SPI_prepare(psprintf("SELECT object_key::pg_catalog.text, version_id::pg_catalog.text,"
								" content_hash::pg_catalog.text, \"rows\"::pg_catalog.%s FROM %s",
								rows_integer ? "int8" : "numeric", rel), 0, NULL);
	if (plan == NULL)
		elog(ERROR, "could not read the manifest relation: %s", SPI_result_code_string(SPI_result));
	portal = SPI_cursor_open(NULL, plan, NULL, NULL, true);
	for (;;)
	{
		SPI_cursor_fetch(portal, true, MANIFEST_FETCH);
		if (SPI_processed == 0)
			break;
		MemoryContextSwitchTo(outer);
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	tup = SPI_tuptable->vals[r];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			ManifestEntry *e;
			char	  **field[3];

			CHECK_FOR_INTERRUPTS();
			if (n >= m->nentries)
				elog(ERROR, "manifest relation changed while it was read");
			e = &m->entries[n];
			field[0] = &e->object_key;
			field[1] = &e->version_id;
			field[2] = &e->content_hash;
			for (int f = 0; f < 3; f++)
			{
				Datum		d = SPI_getbinval(tup, desc, f + 1, &isnull);
				text	   *t;

				if (isnull)
				{
					if (f == 0)
						manifest_error(n + 1, "Field \"object_key\" is NULL.");
					manifest_error(n + 1, "Field \"%s\" is NULL in object \"%s\".",
								   manifest_columns[f], e->object_key);
				}
				t = DatumGetTextPP(d);
				*field[f] = entry_string_bytes(&ps, n + 1, manifest_columns[f],
											   VARDATA_ANY(t), VARSIZE_ANY_EXHDR(t));
				if (f < 2)
					ps.name_bytes += VARSIZE_ANY_EXHDR(t);
				if ((Pointer) t != DatumGetPointer(d))
					pfree(t);
			}
			{
				Datum		d = SPI_getbinval(tup, desc, 4, &isnull);

				if (isnull)
					manifest_error(n + 1, "Field \"rows\" is NULL in object \"%s\".",
								   e->object_key);
				if (!rows_integer)
					e->rows = entry_rows_numeric(n + 1, DatumGetNumeric(d));
				else if ((e->rows = DatumGetInt64(d)) < 0)
					manifest_error(n + 1, "Field \"rows\" must not be negative, but is " INT64_FORMAT ".",
								   e->rows);
			}
			check_entry(&ps, n + 1, e, true);
			n++;
		}
		SPI_freetuptable(SPI_tuptable);
	}
	SPI_cursor_close(portal);
	PopActiveSnapshot();
	SPI_finish();
	if (n != m->nentries)
		elog(ERROR, "manifest relation changed while it was read");
	manifest_where = "";
	manifest_finish(m);
	return m;
}

/*
 * One field of the sorted entries as an array (text[], or int8[] for
 * rows), made once and kept with the manifest: the batch's queries take the
 * manifest as arrays.  The text[] is laid out directly, as construct_array
 * would lay it out, rather than from a text datum per string that
 * construct_array would copy again.
 */
Datum
manifest_array(Manifest *m, ManifestField field)
{
	MemoryContext old = MemoryContextSwitchTo(GetMemoryChunkContext(m));

	if (m->arrays[field] != (Datum) 0)
		;
	else if (field == MANIFEST_ROWS)
	{
		Datum	   *rows = palloc(sizeof(Datum) * Max(m->nentries, 1));

		for (int i = 0; i < m->nentries; i++)
			rows[i] = Int64GetDatum(m->entries[i].rows);
		m->arrays[field] = PointerGetDatum(construct_array(rows, m->nentries, INT8OID,
														   sizeof(int64), FLOAT8PASSBYVAL,
														   TYPALIGN_DOUBLE));
		pfree(rows);
	}
	else
	{
		Size		size = ARR_OVERHEAD_NONULLS(1);
		ArrayType  *a;
		char	   *p;

		for (int i = 0; i < m->nentries; i++)
		{
			ManifestEntry *e = &m->entries[i];
			const char *s = field == MANIFEST_OBJECT_KEY ? e->object_key :
				field == MANIFEST_VERSION_ID ? e->version_id : e->content_hash;

			size += INTALIGN(VARHDRSZ + strlen(s));
		}
		if (!AllocSizeIsValid(size))
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("array size exceeds the maximum allowed (%d)", (int) MaxAllocSize)));
		a = palloc0(size);
		SET_VARSIZE(a, size);
		a->ndim = 1;
		a->dataoffset = 0;
		a->elemtype = TEXTOID;
		ARR_DIMS(a)[0] = m->nentries;
		ARR_LBOUND(a)[0] = 1;
		p = ARR_DATA_PTR(a);
		for (int i = 0; i < m->nentries; i++)
		{
			ManifestEntry *e = &m->entries[i];
			const char *s = field == MANIFEST_OBJECT_KEY ? e->object_key :
				field == MANIFEST_VERSION_ID ? e->version_id : e->content_hash;
			int			len = strlen(s);

			SET_VARSIZE(p, VARHDRSZ + len);
			memcpy(VARDATA(p), s, len);
			p += INTALIGN(VARHDRSZ + len);
		}
		m->arrays[field] = PointerGetDatum(a);
	}
	MemoryContextSwitchTo(old);
	return m->arrays[field];
}

/* Give up an array made by manifest_array once no query needs it. */
void
manifest_array_release(Manifest *m, ManifestField field)
{
	if (m->arrays[field] != (Datum) 0)
		pfree(DatumGetPointer(m->arrays[field]));
	m->arrays[field] = (Datum) 0;
}

/*
 * Index of an object version in the manifest's sorted entries, or -1.
 * Without a version_id, the object's only entry (the caller made sure that
 * no object is listed in two versions: repeated_object).
 */
int
manifest_find(const Manifest *m, const char *object_key, const char *version_id)
{
	ManifestEntry key;
	ManifestEntry *found;

	if (m->nentries == 0)
		return -1;
	key.object_key = (char *) object_key;
	key.version_id = (char *) version_id;
	found = bsearch(&key, m->entries, m->nentries, sizeof(ManifestEntry),
					version_id != NULL ? compare_entries : compare_object_keys);
	return found ? (int) (found - m->entries) : -1;
}

static Manifest *
manifest_from_arg(FunctionCallInfo fcinfo, const char *funcname)
{
	check_arg_not_null(fcinfo, 0, "manifest", funcname);
	return manifest_parse(PG_GETARG_JSONB_P(0));
}

/*
 * reconcile_batch_id(manifest jsonb) RETURNS text
 *		The batch_id of a manifest: the hex SHA-256 of its canonical form.
 */
Datum
reconcile_batch_id(PG_FUNCTION_ARGS)
{
	PG_RETURN_TEXT_P(cstring_to_text(manifest_from_arg(fcinfo, "reconcile_batch_id")->batch_id));
}

/*
 * reconcile_canonical_manifest(manifest jsonb) RETURNS text
 *		The canonical text of a manifest, the one its batch_id is computed from.
 */
Datum
reconcile_canonical_manifest(PG_FUNCTION_ARGS)
{
	StringInfoData buf;

	initStringInfo(&buf);
	write_canonical(manifest_from_arg(fcinfo, "reconcile_canonical_manifest"), &buf, NULL);
	PG_RETURN_TEXT_P(cstring_to_text_with_len(buf.data, buf.len));
}
