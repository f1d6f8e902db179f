/*
 * diff_remote.c
 *		The diff of a side on another server, by checksums of key ranges
 *		instead of its rows.
 *
 * When a side is a foreign table (postgres_fdw), reading it row by row
 * moves the whole table across the connection.  Instead, the key space is
 * cut into ranges of the first key column, and for each range every side
 * computes on its own server a row count and the sum of a 64-bit hash of
 * every row (its key and compared columns, each by value through
 * hash_array_extended, so that 1.0 and 1.00 hash alike and a timestamptz
 * hashes by its instant).  Those are plain built-in aggregates over
 * built-in immutable functions, which postgres_fdw pushes down: nothing is
 * installed on the remote server.  Ranges whose counts and sums agree are
 * matched as a whole; the others are split, level by level, until they
 * are a single cell of the grid (about leaf_rows rows); the rows of those
 * cells alone are then read and compared by the ordinary merge (diff.c),
 * so the findings are exactly the local diff's.
 *
 * The grid's boundaries are quantiles of the first key column on one side
 * (a local one where there is one).  Keys that are duplicated or NULL in
 * part are found first with a pushed-down GROUP BY ... HAVING, and their
 * cells always read, since equal checksums could hide them.  A column with
 * a numeric tolerance is hashed by its bucket of half the tolerance: equal
 * buckets are within the tolerance, other pairs are read and compared.
 *
 * Where a column cannot be hashed this way, or the aggregate would not be
 * pushed down (checked in the plan), the diff reads every row as before
 * (option "remote": "auto"), or fails ("checksum").
 *
 * A side that Citus distributes (hash-distributed or single-shard) is
 * compared the same way: Citus runs the counts and sums on each shard, in
 * parallel on the workers, and adds the shards' partial results on the
 * coordinator, so only the checksums of the ranges and the rows of the
 * cells that differ travel to it instead of every row.  Those queries are
 * read-only: they write nothing on any node.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/transam.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/plannodes.h"
#include "parser/parse_coerce.h"
#include "portability/instr_time.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/plancache.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "citus.h"
#include "diff.h"

/* Below this many intervals, a level's query also names them as key ranges. */
#define RANGE_PREDICATE_MAX 32

typedef struct RSide
{
	bool		is_source;
	const char *rel;			/* quoted, qualified */
	const char *name;			/* for messages */
	bool		foreign;
	bool		citus;			/* its rows live in shards on the workers */
	const char *k1;				/* first key column's expression */
	char	   *hash;			/* the row hash's expression */
	bool		find_special;	/* duplicates or NULL keys are possible */
} RSide;

/* Cells [lo, hi) of the grid. */
typedef struct CellRange
{
	int			lo;
	int			hi;
} CellRange;

typedef struct RemoteDiff
{
	DiffSpec   *spec;
	RSide		side[2];		/* source, target */
	Datum		cutoff;
	bool		has_cutoff;
	Oid			k1type;			/* base type of the first key column */
	Oid			k1array;
	int16		k1len;
	bool		k1byval;
	char		k1align;

	/* The grid: nbounds ascending values, nbounds + 1 cells. */
	Datum	   *grid;
	int			nbounds;
	int			ncells;
	int		   *special;		/* prefix counts of cells that must be read */
	bool		nulls;			/* a side has rows with a NULL first key */
} RemoteDiff;

/* ---------------------------------------------------------------------
 * Hash expressions
 * ---------------------------------------------------------------------
 */

/*
 * A type whose values hash by the same equality the merge compares with,
 * through built-in functions on both servers: a base type (not an array,
 * enum or composite: enums hash by OID, which differs between servers)
 * whose default hash operator class has a built-in extended hash.
 */
static bool
type_hashable(Oid basetype)
{
	TypeCacheEntry *tce;

	if (get_typtype(basetype) != TYPTYPE_BASE || type_is_array(basetype) ||
		!OidIsValid(get_array_type(basetype)))
		return false;
	tce = lookup_type_cache(basetype, TYPECACHE_HASH_EXTENDED_PROC);
	return OidIsValid(tce->hash_extended_proc) &&
		tce->hash_extended_proc < FirstGenbkiObjectId;
}

/*
 * What a column contributes to the row hash: its expression, or for a
 * numeric tolerance its bucket.  Sets *why and returns NULL when the
 * column cannot be hashed.
 */
static char *
column_value(DiffColumn *c, const char *expr, const char **why)
{
	if (c->tolerance == DIFF_TOL_TIME)
	{
		*why = psprintf("Column \"%s\" has a time tolerance, which has no pushable bucket.", c->name);
		return NULL;
	}
	if (!type_hashable(c->basetype))
	{
		*why = psprintf("Column \"%s\" is of type %s, which has no built-in hash by value.",
						c->name, format_type_be(c->typid));
		return NULL;
	}
	if (c->tolerance == DIFF_TOL_NUMERIC &&
		!DatumGetBool(DirectFunctionCall2(numeric_eq, c->tol_numeric,
										  DirectFunctionCall1(int4_numeric, Int32GetDatum(0)))))
	{
		/*
		 * Buckets of half the tolerance: two values in one bucket differ by
		 * less than the tolerance even after the division's rounding, so
		 * they are equal to the merge; other pairs are read and compared.
		 */
		Datum		half = DirectFunctionCall2(numeric_div, c->tol_numeric,
											   DirectFunctionCall1(int4_numeric, Int32GetDatum(2)));

		/* A numeric's text form is digits, a sign and a point only. */
		return psprintf("pg_catalog.floor(%s OPERATOR(pg_catalog./) '%s'::pg_catalog.numeric)",
						expr, DatumGetCString(DirectFunctionCall1(numeric_out, half)));
	}
	return pstrdup(expr);
}

/*
 * The extended hash function of a column's value when it can be called on
 * the value directly (its argument is the value's type, or one it is
 * binary coercible to), else InvalidOid.
 */
static Oid
direct_hash(DiffColumn *c)
{
	Oid			type = c->tolerance == DIFF_TOL_NUMERIC ? NUMERICOID : c->typid;
	TypeCacheEntry *tce = lookup_type_cache(getBaseType(type), TYPECACHE_HASH_EXTENDED_PROC);
	Oid		   *argtypes;
	int			nargs;

	if (!OidIsValid(tce->hash_extended_proc))
		return InvalidOid;
	(void) get_func_signature(tce->hash_extended_proc, &argtypes, &nargs);
	if (nargs != 2 || IsPolymorphicType(argtypes[0]) || argtypes[0] == INTERNALOID ||
		!IsBinaryCoercible(type, argtypes[0]))
		return InvalidOid;
	return tce->hash_extended_proc;
}

/*
 * The row hash of a side, over the key and compared columns:
 * hash_array_extended of an array of each column's hash (its type's
 * extended hash function, seeded by the column's place; NULL for NULL),
 * XORed with, for the types whose function takes another type (boolean,
 * date, timestamptz), hash_array_extended of an array of the columns of
 * that type (and collation), seeded by its place.  Both hash each value
 * with its type's hash operator class, which agrees with the type's
 * equality; hash_array_extended hashes NULL elements too.  One array of
 * hashes rather than one per type: fewer arrays to build for each row.
 */
static char *
row_hash_expr(DiffSpec *spec, bool is_source, const char **why)
{
	int			n = spec->nkeys + spec->ncols;
	bool	   *done = palloc0(sizeof(bool) * n);
	StringInfoData buf;
	int			group = 0;

	initStringInfo(&buf);
	for (int i = 0; i < n; i++)
	{
		DiffColumn *c = i < spec->nkeys ? &spec->keys[i] : &spec->cols[i - spec->nkeys];
		char	   *v = column_value(c, is_source ? c->sexpr : c->texpr, why);
		Oid			f;

		if (v == NULL)
			return NULL;
		f = direct_hash(c);
		if (!OidIsValid(f))
			continue;
		appendStringInfo(&buf, "%spg_catalog.%s(%s, %d::pg_catalog.int8)",
						 group ? ", " : "pg_catalog.hash_array_extended(ARRAY[",
						 quote_identifier(get_func_name(f)), v, i + 1);
		group++;
		done[i] = true;
	}
	if (group)
		appendStringInfoString(&buf, "], 0::pg_catalog.int8)");
	for (int i = 0; i < n; i++)
	{
		DiffColumn *c = i < spec->nkeys ? &spec->keys[i] : &spec->cols[i - spec->nkeys];
		const char *sep = "";

		if (done[i])
			continue;
		appendStringInfo(&buf, "%spg_catalog.hash_array_extended(ARRAY[",
						 group ? " OPERATOR(pg_catalog.#) " : "");
		for (int j = i; j < n; j++)
		{
			DiffColumn *d = j < spec->nkeys ? &spec->keys[j] : &spec->cols[j - spec->nkeys];
			char	   *v;
			bool		numeric_i = c->tolerance == DIFF_TOL_NUMERIC || c->basetype == NUMERICOID;
			bool		numeric_j = d->tolerance == DIFF_TOL_NUMERIC || d->basetype == NUMERICOID;

			if (done[j] || (j != i && (d->typid != c->typid || d->collation != c->collation ||
									   numeric_i != numeric_j)))
				continue;
			v = column_value(d, is_source ? d->sexpr : d->texpr, why);
			if (v == NULL)
				return NULL;
			appendStringInfo(&buf, "%s%s", sep, v);
			sep = ", ";
			done[j] = true;
		}
		appendStringInfo(&buf, "], %d::pg_catalog.int8)", ++group);
	}
	return buf.data;
}

/* ---------------------------------------------------------------------
 * Queries
 * ---------------------------------------------------------------------
 */

typedef struct Params
{
	int			n;
	int			cap;
	Oid		   *types;
	Datum	   *values;
} Params;

static void
params_init(Params *p)
{
	p->n = 0;
	p->cap = 8;
	p->types = palloc(sizeof(Oid) * p->cap);
	p->values = palloc(sizeof(Datum) * p->cap);
}

static int
params_add(Params *p, Oid type, Datum value)
{
	if (p->n + 3 >= p->cap)
	{
		p->cap *= 2;
		p->types = repalloc(p->types, sizeof(Oid) * p->cap);
		p->values = repalloc(p->values, sizeof(Datum) * p->cap);
	}
	p->types[p->n] = type;
	p->values[p->n] = value;
	return ++p->n;
}

/* " FROM rel WHERE <window and cutoff>" and the conjunction to go on. */
static const char *
append_from(StringInfo sql, RemoteDiff *rd, RSide *s, Params *p)
{
	int			before;

	appendStringInfo(sql, " FROM %s", s->rel);
	if (p->cap < p->n + 4)
	{
		p->cap = p->n + 8;
		p->types = repalloc(p->types, sizeof(Oid) * p->cap);
		p->values = repalloc(p->values, sizeof(Datum) * p->cap);
	}
	before = p->n;
	diff_append_where(sql, rd->spec, !s->is_source, rd->cutoff, rd->has_cutoff,
					  p->types, p->values, &p->n);
	return p->n > before ? " AND " : " WHERE ";
}

static Datum
make_k1_array(RemoteDiff *rd, Datum *elems, int n)
{
	return PointerGetDatum(construct_array(elems, n, rd->k1type, rd->k1len,
										   rd->k1byval, rd->k1align));
}

static Datum
make_int4_array(int *elems, int n)
{
	Datum	   *d = palloc(sizeof(Datum) * Max(n, 1));

	for (int i = 0; i < n; i++)
		d[i] = Int32GetDatum(elems[i]);
	return PointerGetDatum(construct_array(d, n, INT4OID, 4, true, TYPALIGN_INT));
}

/*
 * The bounds that delimit a sorted list of disjoint cell ranges, and the
 * bucket width_bucket(key, bounds) gives each range.
 */
static int
range_bounds(RemoteDiff *rd, CellRange *r, int nr, Datum *bounds, int *ids)
{
	int			nb = 0;
	int			last = -1;

	for (int i = 0; i < nr; i++)
	{
		if (r[i].lo > 0 && last != r[i].lo)
		{
			bounds[nb++] = rd->grid[r[i].lo - 1];
			last = r[i].lo;
		}
		ids[i] = r[i].lo > 0 ? nb : 0;
		if (r[i].hi < rd->ncells)
		{
			bounds[nb++] = rd->grid[r[i].hi - 1];
			last = r[i].hi;
		}
	}
	return nb;
}

/*
 * The condition that keeps a side to the given cell ranges: their buckets
 * and, for up to max_pred ranges, the ranges themselves, which an index
 * can serve.  Ranges that cover every cell are only "key IS NOT NULL".
 * Returns the number of the bounds' parameter.
 */
static int
append_ranges(StringInfo sql, RemoteDiff *rd, RSide *s, CellRange *r, int nr,
			  Params *p, const char *conj, int *ids, int max_pred)
{
	Datum	   *bounds = palloc(sizeof(Datum) * (2 * nr + 1));
	int			nb = range_bounds(rd, r, nr, bounds, ids);
	int			pb = params_add(p, rd->k1array, make_k1_array(rd, bounds, nb));
	CellRange  *merged;
	int			nm = 0;

	/* Adjacent ranges as one: a level's children come in runs. */
	merged = palloc(sizeof(CellRange) * Max(nr, 1));
	for (int i = 0; i < nr; i++)
	{
		if (nm > 0 && merged[nm - 1].hi == r[i].lo)
			merged[nm - 1].hi = r[i].hi;
		else
			merged[nm++] = r[i];
	}
	if (nm == 1 && merged[0].lo == 0 && merged[0].hi == rd->ncells)
	{
		/* Every cell: width_bucket gives each row one of the buckets. */
		appendStringInfo(sql, "%s%s IS NOT NULL", conj, s->k1);
		return pb;
	}
	appendStringInfo(sql, "%spg_catalog.width_bucket(%s, $%d) OPERATOR(pg_catalog.=) ANY ($%d)",
					 conj, s->k1, pb, params_add(p, INT4ARRAYOID, make_int4_array(ids, nr)));
	if (nm <= max_pred)
	{
		appendStringInfoString(sql, " AND (");
		for (int i = 0; i < nm; i++)
		{
			const char *sep = "";

			appendStringInfoString(sql, i ? " OR (" : "(");
			if (merged[i].lo > 0)
			{
				appendStringInfo(sql, "%s OPERATOR(pg_catalog.>=) $%d", s->k1,
								 params_add(p, rd->k1type, rd->grid[merged[i].lo - 1]));
				sep = " AND ";
			}
			if (merged[i].hi < rd->ncells)
				appendStringInfo(sql, "%s%s OPERATOR(pg_catalog.<) $%d", sep, s->k1,
								 params_add(p, rd->k1type, rd->grid[merged[i].hi - 1]));
			else if (merged[i].lo == 0)
				appendStringInfo(sql, "%s IS NOT NULL", s->k1);
			appendStringInfoChar(sql, ')');
		}
		appendStringInfoChar(sql, ')');
	}
	return pb;
}

/*
 * SELECT tag, bucket, count, sum of row hashes for the given cell ranges.
 * The tag (the side's number) lets one statement hold both sides' parts.
 */
static char *
level_sql(RemoteDiff *rd, RSide *s, CellRange *r, int nr, Params *p, int *ids,
		  bool nulls, int max_pred)
{
	StringInfoData from;
	StringInfoData sql;
	const char *conj;
	int			pb;

	initStringInfo(&from);
	conj = append_from(&from, rd, s, p);
	if (nulls)
	{
		/* Rows with a NULL first key fall in no bucket: count them apart. */
		appendStringInfo(&from, "%s(%s IS NULL OR ", conj, s->k1);
		conj = "";
	}
	pb = append_ranges(&from, rd, s, r, nr, p, conj, ids, max_pred);
	if (nulls)
		appendStringInfoChar(&from, ')');
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT %d, pg_catalog.width_bucket(%s, $%d), pg_catalog.count(*),"
					 " pg_catalog.sum(%s)%s GROUP BY 2", s->is_source ? 0 : 1, s->k1, pb,
					 s->hash, from.data);
	return sql.data;
}

/* SELECT tag, bucket, the keys and the row hashes of the given cell ranges. */
static char *
rows_sql(RemoteDiff *rd, RSide *s, CellRange *r, int nr, Params *p, int *ids)
{
	StringInfoData from;
	StringInfoData sql;
	const char *conj;
	int			pb;

	initStringInfo(&from);
	conj = append_from(&from, rd, s, p);
	pb = append_ranges(&from, rd, s, r, nr, p, conj, ids, RANGE_PREDICATE_MAX);
	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT %d, pg_catalog.width_bucket(%s, $%d), pg_catalog.array_agg(%s),"
					 " pg_catalog.array_agg(%s)%s GROUP BY 2", s->is_source ? 0 : 1, s->k1, pb,
					 s->k1, s->hash, from.data);
	return sql.data;
}

/* SELECT the keys and row hashes of the given cell ranges, one row each. */
static char *
local_rows_sql(RemoteDiff *rd, RSide *s, CellRange *r, int nr, Params *p)
{
	StringInfoData sql;
	const char *conj;
	int		   *ids = palloc(sizeof(int) * Max(nr, 1));

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT %s, %s", s->k1, s->hash);
	conj = append_from(&sql, rd, s, p);
	(void) append_ranges(&sql, rd, s, r, nr, p, conj, ids, RANGE_PREDICATE_MAX);
	return sql.data;
}

/* Keys duplicated or NULL in part: their first key column's values. */
static char *
special_sql(RemoteDiff *rd, RSide *s, Params *p)
{
	DiffSpec   *spec = rd->spec;
	StringInfoData sql;

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT %s", s->k1);
	append_from(&sql, rd, s, p);
	appendStringInfoString(&sql, " GROUP BY ");
	for (int i = 0; i < spec->nkeys; i++)
		appendStringInfo(&sql, "%s%s", i ? ", " : "",
						 s->is_source ? spec->keys[i].sexpr : spec->keys[i].texpr);
	appendStringInfoString(&sql, " HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 1");
	for (int i = 0; i < spec->nkeys; i++)
		appendStringInfo(&sql, " OR %s IS NULL",
						 s->is_source ? spec->keys[i].sexpr : spec->keys[i].texpr);
	return sql.data;
}

static bool
plan_has_agg(Plan *plan)
{
	if (plan == NULL)
		return false;
	if (IsA(plan, Agg))
		return true;
	return plan_has_agg(plan->lefttree) || plan_has_agg(plan->righttree);
}

/* Would postgres_fdw compute the query's aggregates on the remote server? */
static bool
pushed_down(const char *sql, Params *p)
{
	SPIPlanPtr	plan = SPI_prepare(sql, p->n, p->types);
	CachedPlan *cplan;
	bool		pushed = true;
	ListCell   *lc;

	if (plan == NULL)
		elog(ERROR, "could not prepare a checksum query: %s", SPI_result_code_string(SPI_result));
	cplan = SPI_plan_get_cached_plan(plan);
	foreach(lc, cplan->stmt_list)
	{
		PlannedStmt *stmt = lfirst_node(PlannedStmt, lc);

		if (plan_has_agg(stmt->planTree))
			pushed = false;
	}
	/* An unsaved plan's cached plan has no resource owner. */
	ReleaseCachedPlan(cplan, NULL);
	SPI_freeplan(plan);
	return pushed;
}

static void
run_query(const char *sql, Params *p)
{
	instr_time	start,
				duration;

	int			nestlevel = NewGUCNestLevel();

	/*
	 * The planner takes width_bucket() to make as many groups as rows, and
	 * would sort a local side's rows (to disk) to group them: hash them,
	 * the groups are few.  The foreign side's query is planned there.
	 */
	(void) set_config_option("enable_sort", "off", PGC_USERSET, PGC_S_SESSION,
							 GUC_ACTION_SAVE, true, 0, false);
	INSTR_TIME_SET_CURRENT(start);
	if (SPI_execute_with_args(sql, p->n, p->types, p->values, NULL, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "checksum query failed: %s", sql);
	AtEOXact_GUC(true, nestlevel);
	INSTR_TIME_SET_CURRENT(duration);
	INSTR_TIME_SUBTRACT(duration, start);
	elog(DEBUG2, "reconcile diff checksum query (%.1f ms, " UINT64_FORMAT " rows): %.200s",
		 INSTR_TIME_GET_MILLISEC(duration), SPI_processed, sql);
}

/* ---------------------------------------------------------------------
 * Setting up
 * ---------------------------------------------------------------------
 */

/*
 * A local table with a unique, immediate, non-partial index on exactly
 * the key columns, all NOT NULL and read as they are, has no duplicate or
 * NULL keys to look for.
 */
static bool
keys_unique(DiffSpec *spec, Oid relid, bool is_source)
{
	Relation	rel = relation_open(relid, AccessShareLock);
	AttrNumber *attnums = palloc(sizeof(AttrNumber) * spec->nkeys);
	bool		unique = false;
	List	   *indexes;
	ListCell   *lc;

	for (int i = 0; i < spec->nkeys; i++)
	{
		DiffColumn *c = &spec->keys[i];
		const char *name = is_source ? c->name : c->tname;
		const char *expr = is_source ? c->sexpr : c->texpr;
		Form_pg_attribute att;

		attnums[i] = get_attnum(relid, name);
		if (attnums[i] <= 0 || strcmp(expr, quote_identifier(name)) != 0)
		{
			relation_close(rel, AccessShareLock);
			return false;
		}
		att = TupleDescAttr(RelationGetDescr(rel), attnums[i] - 1);
		if (!att->attnotnull)
		{
			relation_close(rel, AccessShareLock);
			return false;
		}
	}
	indexes = RelationGetIndexList(rel);
	foreach(lc, indexes)
	{
		HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(lfirst_oid(lc)));
		Form_pg_index idx;
		bool		match;

		if (!HeapTupleIsValid(tup))
			continue;
		idx = (Form_pg_index) GETSTRUCT(tup);
		match = idx->indisunique && idx->indimmediate && idx->indisvalid &&
			idx->indnkeyatts == spec->nkeys &&
			heap_attisnull(tup, Anum_pg_index_indexprs, NULL) &&
			heap_attisnull(tup, Anum_pg_index_indpred, NULL);
		for (int i = 0; match && i < idx->indnkeyatts; i++)
		{
			bool		found = false;

			for (int k = 0; k < spec->nkeys; k++)
				found |= idx->indkey.values[i] == attnums[k];
			match = found;
		}
		ReleaseSysCache(tup);
		if (match)
		{
			unique = true;
			break;
		}
	}
	relation_close(rel, AccessShareLock);
	return unique;
}

/*
 * The grid: quantiles of the first key column on one side, about
 * leaf_rows rows a cell, ascending and distinct.
 */
static void
build_grid(RemoteDiff *rd, RSide *s)
{
	DiffSpec   *spec = rd->spec;
	StringInfoData sql;
	Params		p;
	const char *conj;
	int64		n;
	int64		cells;
	bool		isnull;
	Datum		arr;
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;
	MemoryContext cxt = CurrentMemoryContext;

	params_init(&p);
	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT pg_catalog.count(*)");
	conj = append_from(&sql, rd, s, &p);
	appendStringInfo(&sql, "%s%s IS NOT NULL", conj, s->k1);
	run_query(sql.data, &p);
	n = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	MemoryContextSwitchTo(cxt);

	rd->grid = palloc(sizeof(Datum));
	rd->nbounds = 0;
	cells = n / spec->leaf_rows;
	if (cells > DIFF_MAX_CELLS)
	{
		/*
		 * The grid's memory (its bounds, each cell's sums and marks) grows
		 * with its cells: bounded, with larger cells by default, and an
		 * error where the option asks for more.
		 */
		if (spec->leaf_rows_set)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("option \"leaf_rows\" %d makes too many cells for the diff of \"%s\" and \"%s\"",
							spec->leaf_rows, spec->sname, spec->tname),
					 errdetail("The " INT64_FORMAT " rows would make " INT64_FORMAT " cells; a diff by checksums has at most %d.",
							   n, cells, DIFF_MAX_CELLS),
					 errhint("Set \"leaf_rows\" to at least " INT64_FORMAT ", or leave it out: by default cells grow with the table.",
							 (n + DIFF_MAX_CELLS - 1) / DIFF_MAX_CELLS)));
		cells = DIFF_MAX_CELLS;
	}
	if (cells >= 2)
	{
		Datum	   *fractions;
		int			pf;

		fractions = palloc(sizeof(Datum) * (cells - 1));
		for (int64 i = 1; i < cells; i++)
			fractions[i - 1] = Float8GetDatum((double) i / (double) cells);
		params_init(&p);
		pf = params_add(&p, FLOAT8ARRAYOID,
						PointerGetDatum(construct_array(fractions, cells - 1, FLOAT8OID,
														8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE)));
		resetStringInfo(&sql);
		appendStringInfo(&sql, "SELECT pg_catalog.percentile_disc($%d) WITHIN GROUP (ORDER BY %s)",
						 pf, s->k1);
		conj = append_from(&sql, rd, s, &p);
		appendStringInfo(&sql, "%s%s IS NOT NULL", conj, s->k1);
		run_query(sql.data, &p);
		arr = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
		MemoryContextSwitchTo(cxt);
		if (!isnull)
		{
			SortSupport ssup = &spec->keys[0].ssup;

			deconstruct_array(DatumGetArrayTypeP(arr), rd->k1type, rd->k1len,
							  rd->k1byval, rd->k1align, &elems, &nulls, &nelems);
			rd->grid = palloc(sizeof(Datum) * Max(nelems, 1));
			for (int i = 0; i < nelems; i++)
			{
				if (nulls[i])
					continue;
				if (rd->nbounds > 0 &&
					ApplySortComparator(rd->grid[rd->nbounds - 1], false,
										elems[i], false, ssup) >= 0)
					continue;
				rd->grid[rd->nbounds++] = datumCopy(elems[i], rd->k1byval, rd->k1len);
			}
		}
	}
	rd->ncells = rd->nbounds + 1;
}

/* The cell of a first key value: the number of bounds at or below it. */
static int
cell_of(RemoteDiff *rd, Datum v)
{
	SortSupport ssup = &rd->spec->keys[0].ssup;
	int			lo = 0,
				hi = rd->nbounds;

	while (lo < hi)
	{
		int			mid = (lo + hi) / 2;

		if (ApplySortComparator(rd->grid[mid], false, v, false, ssup) <= 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Mark the cells of duplicated and NULL keys, which must be read. */
static void
find_special(RemoteDiff *rd, RSide *s, bool *marks)
{
	Params		p;
	char	   *sql;
	MemoryContext cxt = CurrentMemoryContext;

	params_init(&p);
	sql = special_sql(rd, s, &p);
	run_query(sql, &p);
	MemoryContextSwitchTo(cxt);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		isnull;
		Datum		v = SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc, 1, &isnull);

		CHECK_FOR_INTERRUPTS();
		if (isnull)
			rd->nulls = true;
		else
			marks[cell_of(rd, v)] = true;
	}
	SPI_freetuptable(SPI_tuptable);
}

/* ---------------------------------------------------------------------
 * The levels
 * ---------------------------------------------------------------------
 */

typedef struct RangeSum
{
	int64		count[2];
	Datum		sum[2];			/* numeric; 0 for an empty range */
} RangeSum;

/* A side's part of a checksum statement: its cell ranges and buckets. */
typedef struct Part
{
	CellRange  *r;
	int			nr;				/* -1: the side has no part */
	int		   *byid;			/* bucket to range, -1 for none */
	int			maxid;
} Part;

static void
part_sql(RemoteDiff *rd, int si, Part *part, Params *p, bool nulls, int max_pred,
		 bool rows, StringInfo sql)
{
	int		   *ids = palloc(sizeof(int) * Max(part->nr, 1));
	char	   *one;

	one = rows ? rows_sql(rd, &rd->side[si], part->r, part->nr, p, ids)
		: level_sql(rd, &rd->side[si], part->r, part->nr, p, ids, nulls, max_pred);
	part->maxid = 0;
	for (int i = 0; i < part->nr; i++)
		part->maxid = Max(part->maxid, ids[i]);
	part->byid = palloc(sizeof(int) * (part->maxid + 1));
	for (int i = 0; i <= part->maxid; i++)
		part->byid[i] = -1;
	for (int i = 0; i < part->nr; i++)
		part->byid[ids[i]] = i;
	appendStringInfo(sql, "%s(%s)", sql->len > 0 ? " UNION ALL " : "", one);
}

/*
 * Run one statement holding the parts of both sides (a UNION ALL): where
 * the foreign server or table has postgres_fdw's async_capable, its part
 * is computed there while the local part runs here.
 */
static void
run_parts(RemoteDiff *rd, Part *parts, bool nulls, int max_pred, bool rows,
		  Params *p)
{
	StringInfoData sql;

	initStringInfo(&sql);
	for (int si = 0; si < 2; si++)
		if (parts[si].nr >= 0)
			part_sql(rd, si, &parts[si], p, nulls, max_pred, rows, &sql);
	run_query(sql.data, p);
}

/* The range a result row of run_parts is about: sets *si, returns -1 for a NULL key. */
static int
part_row(Part *parts, HeapTuple t, TupleDesc desc, int *si, bool nulls)
{
	bool		isnull;
	int			id;

	*si = DatumGetInt32(SPI_getbinval(t, desc, 1, &isnull));
	if (isnull || *si < 0 || *si > 1 || parts[*si].nr < 0)
		elog(ERROR, "checksum query returned an unexpected side");
	id = DatumGetInt32(SPI_getbinval(t, desc, 2, &isnull));
	if (isnull && nulls)
		return -1;
	if (isnull || id < 0 || id > parts[*si].maxid || parts[*si].byid[id] < 0)
		elog(ERROR, "checksum query returned an unexpected bucket %d", id);
	return parts[*si].byid[id];
}

/*
 * Counts and sums of the ranges of each side's part: out[si][range].
 * Rows with a NULL first key set rd->nulls when nulls is set.
 */
static void
checksum_parts(RemoteDiff *rd, Part *parts, RangeSum **out, bool nulls, int max_pred)
{
	Params		p;
	MemoryContext cxt = CurrentMemoryContext;

	params_init(&p);
	run_parts(rd, parts, nulls, max_pred, false, &p);
	MemoryContextSwitchTo(cxt);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	t = SPI_tuptable->vals[i];
		bool		isnull;
		int			si;
		int			k = part_row(parts, t, SPI_tuptable->tupdesc, &si, nulls);
		Datum		sum;

		if (k < 0)
		{
			rd->nulls = true;
			continue;
		}
		out[si][k].count[si] = DatumGetInt64(SPI_getbinval(t, SPI_tuptable->tupdesc, 3, &isnull));
		sum = SPI_getbinval(t, SPI_tuptable->tupdesc, 4, &isnull);
		out[si][k].sum[si] = isnull ? (Datum) 0 : datumCopy(sum, false, -1);
	}
	SPI_freetuptable(SPI_tuptable);
}

static bool
sums_equal(Datum a, Datum b)
{
	if (a == (Datum) 0 || b == (Datum) 0)
		return a == b;
	return DatumGetBool(DirectFunctionCall2(numeric_eq, a, b));
}

static bool
range_same(RemoteDiff *rd, RangeSum *s, CellRange *r)
{
	return s->count[0] == s->count[1] && sums_equal(s->sum[0], s->sum[1]) &&
		rd->special[r->hi] == rd->special[r->lo];
}

/* Split a range of cells into at most factor ranges of about equal width. */
static int
split_range(CellRange *r, int factor, CellRange *out)
{
	int64		width = r->hi - r->lo;
	int			n = (int) Min((int64) factor, width);

	for (int i = 0; i < n; i++)
	{
		out[i].lo = r->lo + (int) (width * i / n);
		out[i].hi = r->lo + (int) (width * (i + 1) / n);
	}
	return n;
}

/* Every cell as a range of its own. */
static CellRange *
all_cells(RemoteDiff *rd)
{
	CellRange  *r = palloc(sizeof(CellRange) * rd->ncells);

	for (int i = 0; i < rd->ncells; i++)
	{
		r[i].lo = i;
		r[i].hi = i + 1;
	}
	return r;
}

/*
 * The local side's checksums of every cell, from one pass: prefix counts
 * and numeric prefix sums, from which any range's are taken without
 * reading its rows again.
 */
typedef struct LeafSums
{
	int64	   *count;			/* count[i]: rows in cells [0, i) */
	Datum	   *sum;			/* numeric sum of their hashes */
} LeafSums;

static LeafSums *
leaf_sums(RemoteDiff *rd, RangeSum *cells, int si)
{
	LeafSums   *ls = palloc(sizeof(LeafSums));
	Datum		zero = DirectFunctionCall1(int4_numeric, Int32GetDatum(0));

	ls->count = palloc(sizeof(int64) * (rd->ncells + 1));
	ls->sum = palloc(sizeof(Datum) * (rd->ncells + 1));
	ls->count[0] = 0;
	ls->sum[0] = zero;
	for (int i = 0; i < rd->ncells; i++)
	{
		ls->count[i + 1] = ls->count[i] + cells[i].count[si];
		ls->sum[i + 1] = cells[i].sum[si] == (Datum) 0 ? ls->sum[i]
			: DirectFunctionCall2(numeric_add, ls->sum[i], cells[i].sum[si]);
	}
	return ls;
}

static void
range_from_leaves(LeafSums *ls, CellRange *r, RangeSum *out, int si)
{
	out->count[si] = ls->count[r->hi] - ls->count[r->lo];
	out->sum[si] = out->count[si] == 0 ? (Datum) 0
		: DirectFunctionCall2(numeric_sub, ls->sum[r->hi], ls->sum[r->lo]);
}

/*
 * Compare the ranges level by level; matched ranges go into the counts,
 * differing single cells into fetch.  Returns the number of cells to read.
 *
 * The first level also counts rows with a NULL first key.  A local side
 * is read once, at the first level, for the checksums of every cell, and
 * the deeper levels take its sums from those; a foreign side computes
 * each level's ranges on its server (sending every cell's checksums at
 * once would cost more bytes than the levels when few ranges differ).
 * With leaves, the first level is already the cells.
 */
static int
compare_levels(RemoteDiff *rd, DiffCounts *counts, CellRange *fetch, bool leaves)
{
	int			factor = rd->spec->split_factor;
	int			nfetch = 0;
	int			nr;
	CellRange  *cur;
	CellRange	all = {0, rd->ncells};
	CellRange  *every = NULL;
	LeafSums   *local[2] = {NULL, NULL};
	bool		top = true;		/* the first level also looks for NULL keys */

	if (leaves)
	{
		cur = all_cells(rd);
		nr = rd->ncells;
	}
	else
	{
		cur = palloc(sizeof(CellRange) * factor);
		nr = split_range(&all, factor, cur);
	}
	while (nr > 0)
	{
		RangeSum   *sums = palloc0(sizeof(RangeSum) * nr);
		RangeSum   *cells = NULL;
		RangeSum   *out[2];
		Part		parts[2];
		/* the ranges of a level are disjoint: at most one a cell */
		CellRange  *next = palloc(sizeof(CellRange) *
								  Min((Size) nr * (leaves ? 1 : factor), (Size) rd->ncells));
		int			nnext = 0;

		CHECK_FOR_INTERRUPTS();
		for (int si = 0; si < 2; si++)
		{
			out[si] = sums;
			parts[si].nr = -1;
			if (local[si])
				continue;		/* from the leaves */
			if (top && !rd->side[si].foreign)
			{
				if (every == NULL)
					every = leaves ? cur : all_cells(rd);
				if (cells == NULL)
					cells = palloc0(sizeof(RangeSum) * rd->ncells);
				parts[si].r = every;
				parts[si].nr = rd->ncells;
				out[si] = cells;
			}
			else
			{
				parts[si].r = cur;
				parts[si].nr = nr;
			}
		}
		checksum_parts(rd, parts, out, top, RANGE_PREDICATE_MAX);
		for (int si = 0; si < 2; si++)
		{
			if (top && !rd->side[si].foreign)
				local[si] = leaf_sums(rd, cells, si);
			if (local[si])
				for (int i = 0; i < nr; i++)
					range_from_leaves(local[si], &cur[i], &sums[i], si);
		}
		top = false;
		for (int i = 0; i < nr; i++)
		{
			CellRange  *r = &cur[i];
			bool		same = range_same(rd, &sums[i], r);

			elog(DEBUG3, "reconcile diff cells [%d, %d): " INT64_FORMAT " and " INT64_FORMAT " rows, %s",
				 r->lo, r->hi, sums[i].count[0], sums[i].count[1], same ? "equal" : "different");
			if (same)
			{
				counts->matched += sums[i].count[0];
				counts->rows_source += sums[i].count[0];
				counts->rows_target += sums[i].count[1];
			}
			else if (r->hi - r->lo == 1)
				fetch[nfetch++] = *r;
			else
				nnext += split_range(r, factor, next + nnext);
		}
		pfree(sums);
		cur = next;
		nr = nnext;
	}
	return nfetch;
}

/* Cells looked at before choosing how to compare. */
#define PROBE_CELLS 64

/*
 * How many of PROBE_CELLS cells spread evenly over the grid differ: a
 * cheap estimate of the share of cells that differ, read through the
 * cells' key ranges (an index serves them).
 */
static int
probe(RemoteDiff *rd, int *nprobe)
{
	int			n = Min(PROBE_CELLS, rd->ncells);
	CellRange  *r = palloc(sizeof(CellRange) * n);
	RangeSum   *sums = palloc0(sizeof(RangeSum) * n);
	RangeSum   *out[2] = {sums, sums};
	Part		parts[2];
	int			differ = 0;

	for (int i = 0; i < n; i++)
	{
		r[i].lo = (int) ((int64) rd->ncells * i / n + (int64) rd->ncells / n / 2);
		r[i].hi = r[i].lo + 1;
	}
	for (int si = 0; si < 2; si++)
	{
		parts[si].r = r;
		parts[si].nr = n;
	}
	checksum_parts(rd, parts, out, false, PROBE_CELLS);
	for (int i = 0; i < n; i++)
		if (!range_same(rd, &sums[i], &r[i]))
			differ++;
	*nprobe = n;
	return differ;
}

static void
add_counts(DiffSpec *spec, DiffCounts *counts, DiffCounts *fc)
{
	counts->rows_source += fc->rows_source;
	counts->rows_target += fc->rows_target;
	counts->matched += fc->matched;
	counts->missing_in_target += fc->missing_in_target;
	counts->extra_in_target += fc->extra_in_target;
	counts->mismatched += fc->mismatched;
	counts->duplicate_keys += fc->duplicate_keys;
	counts->null_keys += fc->null_keys;
	for (int i = 0; i < spec->ncols; i++)
		counts->column_mismatches[i] += fc->column_mismatches[i];
}

static int
cell_range_cmp(const void *a, const void *b)
{
	int			x = ((const CellRange *) a)->lo;
	int			y = ((const CellRange *) b)->lo;

	return (x > y) - (x < y);
}

/* Read the differing cells (and NULL keys) and compare them by the merge. */
static void
fetch_cells(RemoteDiff *rd, CellRange *cells, int ncells, Tuplestorestate *ts,
			TupleDesc desc, DiffCounts *counts)
{
	DiffSpec   *spec = rd->spec;
	DiffKeyFilter filter;
	DiffCounts	fc;
	CellRange  *merged = palloc(sizeof(CellRange) * Max(ncells, 1));
	int			nm = 0;
	Datum	   *bounds;
	int		   *ids;
	int			nb;

	/* Cells come level by level: in key order, adjacent ones read as one range. */
	qsort(cells, ncells, sizeof(CellRange), cell_range_cmp);
	for (int i = 0; i < ncells; i++)
	{
		if (nm > 0 && merged[nm - 1].hi == cells[i].lo)
			merged[nm - 1].hi = cells[i].hi;
		else
			merged[nm++] = cells[i];
	}
	bounds = palloc(sizeof(Datum) * (2 * nm + 1));
	ids = palloc(sizeof(int) * Max(nm, 1));
	nb = range_bounds(rd, merged, nm, bounds, ids);
	filter.keys = (Datum) 0;
	filter.bounds = make_k1_array(rd, bounds, nb);
	filter.buckets = make_int4_array(ids, nm);
	filter.nulls = rd->nulls;

	spec->filter = &filter;
	diff_execute(spec, ts, desc, &fc);
	spec->filter = NULL;
	add_counts(spec, counts, &fc);
}

/* A key and its row's hash, from one side. */
typedef struct RowHash
{
	Datum		key;
	int64		hash;
} RowHash;

static SortSupport sort_ssup;

static int
row_hash_cmp(const void *a, const void *b)
{
	return ApplySortComparator(((const RowHash *) a)->key, false,
							   ((const RowHash *) b)->key, false, sort_ssup);
}

/*
 * Every key and row hash of both sides in the given cells, each side's
 * sorted by key: a foreign side's as arrays, one row per range, a local
 * side's row by row.
 */
static void
row_hashes(RemoteDiff *rd, CellRange *cells, int ncells, RowHash **out, int64 *n)
{
	Params		p;
	Part		parts[2];
	int64		cap[2] = {1024, 1024};
	MemoryContext cxt = CurrentMemoryContext;
	SPITupleTable *tt;

	params_init(&p);
	for (int si = 0; si < 2; si++)
	{
		parts[si].r = cells;
		parts[si].nr = rd->side[si].foreign ? ncells : -1;
		out[si] = palloc(sizeof(RowHash) * cap[si]);
		n[si] = 0;
	}

	/*
	 * A local side's rows one by one, through a cursor: grouping them into
	 * arrays as the foreign side does (to save round trips) would only cost
	 * memory and time here.
	 */
	for (int si = 0; si < 2; si++)
	{
		Params		lp;
		char	   *sql;
		Portal		portal;

		if (rd->side[si].foreign)
			continue;
		params_init(&lp);
		sql = local_rows_sql(rd, &rd->side[si], cells, ncells, &lp);
		portal = SPI_cursor_open_with_args(NULL, sql, lp.n, lp.types, lp.values, NULL, true,
										   CURSOR_OPT_NO_SCROLL);
		for (;;)
		{
			SPI_cursor_fetch(portal, true, 10000);
			MemoryContextSwitchTo(cxt);
			if (SPI_processed == 0)
				break;
			tt = SPI_tuptable;
			if (n[si] + (int64) SPI_processed > cap[si])
			{
				cap[si] = Max(cap[si] * 2, n[si] + (int64) SPI_processed);
				out[si] = repalloc_huge(out[si], sizeof(RowHash) * cap[si]);
			}
			for (uint64 i = 0; i < SPI_processed; i++)
			{
				bool		isnull;

				CHECK_FOR_INTERRUPTS();
				out[si][n[si]].key = datumCopy(SPI_getbinval(tt->vals[i], tt->tupdesc, 1, &isnull),
											   rd->k1byval, rd->k1len);
				out[si][n[si]++].hash = DatumGetInt64(SPI_getbinval(tt->vals[i], tt->tupdesc, 2, &isnull));
			}
			SPI_freetuptable(tt);
		}
		SPI_freetuptable(SPI_tuptable);
		SPI_cursor_close(portal);
	}
	if (parts[0].nr >= 0 || parts[1].nr >= 0)
	{
		run_parts(rd, parts, false, RANGE_PREDICATE_MAX, true, &p);
		MemoryContextSwitchTo(cxt);
		tt = SPI_tuptable;
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			bool		isnull;
			Datum	   *keys;
			Datum	   *hashes;
			int			nk,
						nh,
						si;

			CHECK_FOR_INTERRUPTS();
			(void) part_row(parts, tt->vals[i], tt->tupdesc, &si, false);
			deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(tt->vals[i], tt->tupdesc, 3, &isnull)),
							  rd->k1type, rd->k1len, rd->k1byval, rd->k1align, &keys, NULL, &nk);
			deconstruct_array(DatumGetArrayTypeP(SPI_getbinval(tt->vals[i], tt->tupdesc, 4, &isnull)),
							  INT8OID, 8, FLOAT8PASSBYVAL, TYPALIGN_DOUBLE, &hashes, NULL, &nh);
			if (nk != nh)
				elog(ERROR, "row hash query returned %d keys and %d hashes", nk, nh);
			if (n[si] + nk > cap[si])
			{
				cap[si] = Max(cap[si] * 2, n[si] + nk);
				out[si] = repalloc_huge(out[si], sizeof(RowHash) * cap[si]);
			}
			for (int j = 0; j < nk; j++)
			{
				out[si][n[si]].key = datumCopy(keys[j], rd->k1byval, rd->k1len);
				out[si][n[si]++].hash = DatumGetInt64(hashes[j]);
			}
			pfree(keys);
			pfree(hashes);
		}
		SPI_freetuptable(tt);
	}
	sort_ssup = &rd->spec->keys[0].ssup;
	for (int si = 0; si < 2; si++)
		qsort(out[si], n[si], sizeof(RowHash), row_hash_cmp);
}

/*
 * For a single-column key: the keys and row hashes of the differing cells
 * from both sides, compared here.  A key on both sides once with equal
 * hashes is matched; the others are read in full and compared by the
 * merge.  Returns those keys as an array, or 0 if there are none.
 */
static Datum
differing_keys(RemoteDiff *rd, CellRange *cells, int ncells, DiffCounts *counts)
{
	RowHash    *both[2];
	int64		nboth[2];
	RowHash    *s,
			   *t;
	int64		ns,
				nt;
	SortSupport ssup = &rd->spec->keys[0].ssup;
	Datum	   *keys;
	int64		nkeys = 0;
	int64		i = 0,
				j = 0;

	row_hashes(rd, cells, ncells, both, nboth);
	s = both[0];
	t = both[1];
	ns = nboth[0];
	nt = nboth[1];
	keys = palloc_extended(sizeof(Datum) * Max(ns + nt, 1), MCXT_ALLOC_HUGE);

	while (i < ns || j < nt)
	{
		int64		ie = i,
					je = j;
		int			c;
		Datum		key;

		CHECK_FOR_INTERRUPTS();
		if (i >= ns)
			c = 1;
		else if (j >= nt)
			c = -1;
		else
			c = ApplySortComparator(s[i].key, false, t[j].key, false, ssup);
		key = c <= 0 ? s[i].key : t[j].key;
		if (c <= 0)
			while (ie < ns && ApplySortComparator(s[ie].key, false, key, false, ssup) == 0)
				ie++;
		if (c >= 0)
			while (je < nt && ApplySortComparator(t[je].key, false, key, false, ssup) == 0)
				je++;
		if (ie - i == 1 && je - j == 1 && s[i].hash == t[j].hash)
		{
			counts->matched++;
			counts->rows_source++;
			counts->rows_target++;
		}
		else
			keys[nkeys++] = key;
		i = ie;
		j = je;
	}
	if (nkeys == 0)
		return (Datum) 0;
	if (nkeys > MaxAllocSize / sizeof(Datum) / 2)
		elog(ERROR, "too many differing keys");
	return make_k1_array(rd, keys, (int) nkeys);
}

/* Read the rows of the given keys (and NULL keys) and compare them by the merge. */
static void
fetch_keys(RemoteDiff *rd, Datum keys, Tuplestorestate *ts, TupleDesc desc,
		   DiffCounts *counts)
{
	DiffSpec   *spec = rd->spec;
	DiffKeyFilter filter;
	DiffCounts	fc;

	memset(&filter, 0, sizeof(filter));
	filter.keys = keys ? keys : make_k1_array(rd, NULL, 0);
	filter.nulls = rd->nulls;
	spec->filter = &filter;
	diff_execute(spec, ts, desc, &fc);
	spec->filter = NULL;
	add_counts(spec, counts, &fc);
}

/* Log the time since *clock at DEBUG2, and restart it. */
static void
elapsed(instr_time *clock, const char *what)
{
	instr_time	now;

	INSTR_TIME_SET_CURRENT(now);
	INSTR_TIME_SUBTRACT(now, *clock);
	elog(DEBUG2, "reconcile diff: %s took %.1f ms", what, INSTR_TIME_GET_MILLISEC(now));
	INSTR_TIME_SET_CURRENT(*clock);
}

static void
checksum_error_context(void *arg)
{
	RemoteDiff *rd = (RemoteDiff *) arg;

	errcontext("comparing \"%s\" and \"%s\" by checksums of key ranges",
			   rd->side[0].name, rd->side[1].name);
}

/* Why the checksums cannot be used: an error, or a quiet fall back. */
static bool
cannot_checksum(DiffSpec *spec, const char *why)
{
	if (spec->remote_mode == DIFF_REMOTE_CHECKSUM)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot compare \"%s\" and \"%s\" by checksums", spec->sname, spec->tname),
				 errdetail("%s", why),
				 errhint("Use the option \"remote\": \"pull\" to read every row, or \"auto\" to do so where checksums cannot be used.")));
	elog(DEBUG1, "reconcile diff of \"%s\" and \"%s\" reads every row: %s",
		 spec->sname, spec->tname, why);
	return false;
}

/*
 * Settle whether the checksums can be used, and the sides' expressions.
 */
static bool
remote_setup(RemoteDiff *rd, DiffSpec *spec)
{
	const char *why = NULL;
	Oid			rels[2] = {spec->source, spec->target};
	bool		unique[2];
	bool		any_spread = false;

	memset(rd, 0, sizeof(RemoteDiff));
	rd->spec = spec;
	for (int i = 0; i < 2; i++)
	{
		RSide	   *s = &rd->side[i];

		s->is_source = (i == 0);
		s->rel = i == 0 ? spec->squal : spec->tqual;
		s->name = i == 0 ? spec->sname : spec->tname;
		s->foreign = get_rel_relkind(rels[i]) == RELKIND_FOREIGN_TABLE;
		if (!s->foreign)
		{
			CitusKind	kind = citus_table_kind(rels[i], NULL, NULL);

			s->citus = kind == CITUS_DISTRIBUTED || kind == CITUS_SINGLE_SHARD;
		}
		s->k1 = i == 0 ? spec->keys[0].sexpr : spec->keys[0].texpr;
		any_spread |= s->foreign || s->citus;
	}
	if (spec->remote_mode == DIFF_REMOTE_PULL || !any_spread)
		return false;

	for (int i = 0; i < 2; i++)
	{
		rd->side[i].hash = row_hash_expr(spec, i == 0, &why);
		if (rd->side[i].hash == NULL)
			return cannot_checksum(spec, why);
		unique[i] = !rd->side[i].foreign && keys_unique(spec, rels[i], i == 0);
	}

	/*
	 * Only the same duplicate (or NULL in a key column) on both sides gives
	 * equal checksums: where one side's key is unique and NOT NULL, any on
	 * the other side changes the counts or sums of its range.  A NULL
	 * first key falls in no range; the first level counts those apart.
	 */
	for (int i = 0; i < 2; i++)
		rd->side[i].find_special = !unique[0] && !unique[1];
	rd->k1type = spec->keys[0].basetype;
	rd->k1array = get_array_type(rd->k1type);
	if (!OidIsValid(rd->k1array))
		return cannot_checksum(spec, psprintf("Key column \"%s\" is of a type without an array type.",
											  spec->keys[0].name));
	get_typlenbyvalalign(rd->k1type, &rd->k1len, &rd->k1byval, &rd->k1align);

	/*
	 * Every query on a foreign side must be computed there.  Citus computes
	 * counts, sums and array_agg on the shards by itself (its partial
	 * aggregates); had it not, it would gather the rows and aggregate them
	 * on the coordinator, slower but with the same result.
	 */
	for (int i = 0; i < 2; i++)
	{
		RSide	   *s = &rd->side[i];
		CellRange	r = {0, 1};
		int			id;
		Params		p;

		if (!s->foreign)
			continue;
		/* The plan over a grid of one cell, only to look at it. */
		rd->nbounds = 0;
		rd->ncells = 1;
		params_init(&p);
		if (!pushed_down(level_sql(rd, s, &r, 1, &p, &id, true, RANGE_PREDICATE_MAX), &p))
			return cannot_checksum(spec, psprintf("The server of foreign table \"%s\" would not compute the checksums: an expression or the aggregate is not pushed down.", s->name));
		params_init(&p);
		if (spec->nkeys == 1 && !pushed_down(rows_sql(rd, s, &r, 1, &p, &id), &p))
			return cannot_checksum(spec, psprintf("The server of foreign table \"%s\" would not compute the row hashes: the aggregate is not pushed down.", s->name));
		params_init(&p);
		if (!pushed_down(special_sql(rd, s, &p), &p))
			return cannot_checksum(spec, psprintf("The server of foreign table \"%s\" would not look for duplicate keys: the grouping is not pushed down.", s->name));
	}
	rd->grid = NULL;
	rd->nbounds = 0;
	return true;
}

/*
 * Run a prepared diff, by checksums where a side is on another server and
 * they can be computed there, else by reading every row (diff_execute).
 * The caller holds an SPI connection.
 */
void
diff_compare(DiffSpec *spec, Tuplestorestate *ts, TupleDesc desc, DiffCounts *counts)
{
	RemoteDiff	rd;
	ErrorContextCallback errcb;
	CellRange  *fetch;
	bool	   *marks;
	int			nfetch;
	int			ndiffer;
	int			nprobe;
	instr_time	clock;
	MemoryContext cxt = CurrentMemoryContext;

	if (!remote_setup(&rd, spec))
	{
		diff_execute(spec, ts, desc, counts);
		return;
	}

	INSTR_TIME_SET_CURRENT(clock);
	errcb.callback = checksum_error_context;
	errcb.arg = &rd;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	memset(counts, 0, sizeof(DiffCounts));
	counts->column_mismatches = palloc0(sizeof(int64) * Max(spec->ncols, 1));
	rd.has_cutoff = diff_cutoff(spec, &rd.cutoff);
	MemoryContextSwitchTo(cxt);
	if (rd.has_cutoff)
	{
		int16		len;
		bool		byval;

		get_typlenbyval(spec->upd_type, &len, &byval);
		rd.cutoff = datumCopy(rd.cutoff, byval, len);
	}

	/*
	 * The grid from a local side where there is one: its reads are free.
	 * Citus computes percentile_disc on the coordinator, over the first
	 * key column gathered from the shards.
	 */
	build_grid(&rd, (rd.side[0].foreign || rd.side[0].citus) &&
			   !(rd.side[1].foreign || rd.side[1].citus) ? &rd.side[1] : &rd.side[0]);

	marks = palloc0(sizeof(bool) * rd.ncells);
	for (int i = 0; i < 2; i++)
		if (rd.side[i].find_special)
			find_special(&rd, &rd.side[i], marks);
	rd.special = palloc0(sizeof(int) * (rd.ncells + 1));
	for (int i = 0; i < rd.ncells; i++)
		rd.special[i + 1] = rd.special[i] + (marks[i] ? 1 : 0);

	/*
	 * How to go on, by the share of cells that differ in a sample: few or
	 * none, level by level from ranges of many cells (the fewest bytes);
	 * a few, from the cells themselves (one pass on each server); many,
	 * straight to every row's hash (or row), since nearly every cell
	 * would be read anyway.
	 */
	elapsed(&clock, "the grid");
	fetch = palloc(sizeof(CellRange) * rd.ncells);
	ndiffer = probe(&rd, &nprobe);
	if (ndiffer * 2 >= nprobe && rd.ncells >= 2 * PROBE_CELLS)
	{
		CellRange	all = {0, rd.ncells};

		elog(DEBUG1, "reconcile diff of \"%s\" and \"%s\": %d of %d sampled cells differ, reading every %s",
			 spec->sname, spec->tname, ndiffer, nprobe, spec->nkeys == 1 ? "row's hash" : "row");
		nfetch = split_range(&all, spec->split_factor, fetch);
		rd.nulls = true;
	}
	else
	{
		elog(DEBUG1, "reconcile diff of \"%s\" and \"%s\": %d of %d sampled cells differ, comparing %s",
			 spec->sname, spec->tname, ndiffer, nprobe, ndiffer >= 2 ? "every cell" : "ranges");
		nfetch = compare_levels(&rd, counts, fetch, ndiffer >= 2);
	}
	elapsed(&clock, "the checksums");
	qsort(fetch, nfetch, sizeof(CellRange), cell_range_cmp);
	if (spec->nkeys == 1)
	{
		/* Row hashes first, then the rows of the keys that differ. */
		Datum		keys = nfetch > 0 ? differing_keys(&rd, fetch, nfetch, counts) : (Datum) 0;

		elapsed(&clock, "the row hashes of the differing cells");
		if (keys || rd.nulls)
			fetch_keys(&rd, keys, ts, desc, counts);
	}
	else if (nfetch > 0 || rd.nulls)
		fetch_cells(&rd, fetch, nfetch, ts, desc, counts);
	elapsed(&clock, "the rows that differ");

	error_context_stack = errcb.previous;
}
