/*
 * diff_checksum.c
 *		The diff of a side on another server (postgres_fdw) or on Citus
 *		workers, by checksums of key ranges instead of its rows.  diff.c's
 *		diff_compare calls diff_checksum first; every other diff is
 *		diff_merge.c's ordered pass.
 *
 * The words this file uses, each in one sense:
 *
 *	grid		the ascending boundaries (quantiles) of the first key column
 *				that cut the key space into cells (RemoteDiff.grid).
 *	cell		one interval of the grid, [bound i-1, bound i), of about
 *				leaf_rows rows: the smallest unit compared by checksum;
 *				cell i is width_bucket(key, grid) = i.
 *	range		a run of adjacent cells [lo, hi) (CellRange), the unit of a
 *				checksum query; "key ranges" in the SQL are its bounds.
 *	level		one pass of checksums over the ranges still in question:
 *				the first level cuts the grid into split_factor ranges,
 *				each next one splits the ranges that differed by
 *				split_factor again, down to single cells.
 *	part		one side's share of a statement: the ranges that side is
 *				asked about (Part); a statement holds both sides' parts
 *				(UNION ALL), told apart by a tag column.
 *	leaf		a single cell, the bottom of the levels: a leaf that
 *				differs is not split again, its row hashes or rows are
 *				read (compare_levels with leaves starts at the cells).
 *	the sample	SAMPLE_CELLS cells spread over the grid, compared first to
 *				choose how to go on (sample_cells).
 *	row digest	SHA-256 of a row's encoded key and compared columns,
 *				computed on the side's own server (on Citus, on each
 *				shard); a range's checksum is built from its rows'
 *				digests in order.
 *	row hash	the first ROW_HASH_LEN bytes of a row digest, sent with the
 *				row's key for the cells that differ (single-column keys),
 *				so that only the rows of keys whose hashes differ are read.
 *	rows		the rows themselves, read at the end through diff_merge.c's merge
 *				(fetch_keys, fetch_cells) for the findings.
 *	special		keys duplicated or NULL in part, found first; their cells
 *				are always read (RemoteDiff.special).
 *
 * When a side is a foreign table (postgres_fdw), reading it row by row
 * moves the whole table across the connection.  Instead, the key space is
 * cut into ranges of the first key column, and for each range every side
 * computes on its own server a row count and a checksum: SHA-256 of the
 * SHA-256 digests of its rows in ascending order, each row's digest taken
 * over a type-tagged, length-prefixed binary encoding of its key and
 * compared columns with the merge's equality (1.0 = 1.00, a timestamptz by
 * its instant).  Equal checksums mean equal multisets of rows unless
 * SHA-256 collides; no permutation of values among rows cancels out.
 * Those are built-in aggregates over built-in immutable functions, which
 * postgres_fdw pushes down: nothing is installed on the remote server.
 * Ranges whose counts and checksums agree are matched as a whole; the
 * others are split, level by level, until they are a single cell of the
 * grid (about leaf_rows rows); the rows of those cells alone are then read
 * and compared by the ordinary merge (diff_merge.c), so the findings are exactly
 * the local diff's.
 *
 * The other server is not trusted: whatever comes back (counts, buckets,
 * checksums, arrays of keys, row hashes) is checked for NULL, type, length
 * and range before use, and an error names the server.  Its columns'
 * real types are checked against the declared ones before anything is
 * read (remote_type_mismatch).
 *
 * The grid's boundaries are quantiles of the first key column on one side
 * (a local one where there is one).  Keys that are duplicated or NULL in
 * part are found first with a pushed-down GROUP BY ... HAVING, and their
 * cells always read, since equal checksums could hide them.  A column with
 * a numeric tolerance is encoded by its bucket of half the tolerance: equal
 * buckets are within the tolerance, other pairs are read and compared.
 *
 * Where a column cannot be hashed this way, or the aggregate would not be
 * pushed down (checked in the plan), the diff reads every row as before
 * (option "remote": "auto"), or fails ("checksum").
 *
 * A side that Citus distributes (hash-distributed or single-shard) is
 * compared the same way: Citus computes the row digests on each shard, in
 * parallel on the workers, so only digests, the checksums of the ranges
 * and the rows of the cells that differ travel to the coordinator instead
 * of every row.  Those queries are read-only: they write nothing on any
 * node.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/transam.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "foreign/foreign.h"
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

#include "common/citus.h"
#include "diff.h"
#include "common/sqlname.h"

/*
 * Below this many intervals, a level's query also names them as key ranges
 * (key >= lo AND key < hi), besides width_bucket(key, grid) = ANY(...):
 * width_bucket() alone is no condition an index can serve, the ranges are,
 * so a query over a few ranges (a deep level, the sample's cells) reads
 * only their rows (bench/RESULTS.md, "After the speed-up").  Past a few
 * dozen ranges a query reads much of the side anyway and the list of ORs
 * only lengthens the statement; 32 is that cut, not a measured optimum.
 */
#define RANGE_PREDICATE_MAX 32

typedef struct RSide
{
	bool		is_source;
	const char *rel;			/* quoted, qualified */
	const char *name;			/* for messages */
	bool		foreign;
	bool		citus;			/* its rows live in shards on the workers */
	const char *k1;				/* first key column's expression */
	char	   *hash;			/* the row digest's expression (bytea) */
	const char *origin;			/* who computes its results, for messages */
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

static void checksum_error_context(void *arg);

/* ---------------------------------------------------------------------
 * Row digests
 * ---------------------------------------------------------------------
 */

/*
 * A column's value as bytes, by the equality the merge compares with: a
 * tag (0 for NULL, else the type's letter), then the value's binary form,
 * fixed-length for fixed-length types and length-prefixed for strings, so
 * that the concatenation of a row's columns is unambiguous.  Numerics
 * without their trailing zeros (1.0 = 1.00), floats plus zero (-0 = 0),
 * a timestamptz as its instant; a numeric tolerance as its bucket of half
 * the tolerance (equal buckets are within it, other pairs are read and
 * compared).  Every function is a built-in immutable one, which
 * postgres_fdw computes on the remote server.  Two values that the merge
 * finds equal may still differ here (two NaNs, a nondeterministic
 * collation): their rows are then read and compared, which costs time,
 * never a finding.  Returns NULL and sets *why for a type without such a
 * form.
 */
static char *
column_encoding(DiffColumn *c, const char *expr, Oid own, const char **why)
{
	const char *f = NULL;		/* send function of a fixed-length form */
	char		tag;
	char	   *val;

	if (c->tolerance == DIFF_TOL_TIME)
	{
		*why = psprintf("Column \"%s\" has a time tolerance, which has no pushable bucket.", c->name);
		return NULL;
	}
	if (c->has_rel_tol)
	{
		*why = psprintf("Column \"%s\" has a relative tolerance, which has no pushable bucket.", c->name);
		return NULL;
	}
	if (c->tolerance == DIFF_TOL_NUMERIC &&
		!DatumGetBool(DirectFunctionCall2(numeric_eq, c->tol_numeric,
										  DirectFunctionCall1(int4_numeric, Int32GetDatum(0)))))
	{
		/*
		 * Buckets of half the tolerance: two values in one bucket differ by
		 * less than the tolerance even after the division's rounding, so
		 * they are equal to the merge.  A numeric's text form is digits, a
		 * sign and a point only.
		 */
		Datum		half = DirectFunctionCall2(numeric_div, c->tol_numeric,
											   DirectFunctionCall1(int4_numeric, Int32GetDatum(2)));

		val = psprintf("pg_catalog.numeric_send(pg_catalog.trim_scale(pg_catalog.floor((%s) OPERATOR(pg_catalog./) '%s'::pg_catalog.numeric)))",
					   expr, DatumGetCString(DirectFunctionCall1(numeric_out, half)));
		tag = 'B';
	}
	else
	{
		switch (c->basetype)
		{
			case INT2OID:
				f = "int2send";
				tag = 'h';
				break;
			case INT4OID:
				f = "int4send";
				tag = 'i';
				break;
			case INT8OID:
				f = "int8send";
				tag = 'l';
				break;
			case BOOLOID:
				f = "boolsend";
				tag = 'b';
				break;
			case DATEOID:
				f = "date_send";
				tag = 'D';
				break;
			case TIMEOID:
				f = "time_send";
				tag = 'T';
				break;
			case TIMESTAMPOID:
				f = "timestamp_send";
				tag = 'S';
				break;
			case TIMESTAMPTZOID:
				f = "timestamptz_send";
				tag = 'Z';
				break;
			case UUIDOID:
				f = "uuid_send";
				tag = 'u';
				break;
			case NUMERICOID:
				/* numeric_send's form carries its length (ndigits). */
				f = NULL;
				tag = 'n';
				break;
			case FLOAT4OID:
			case FLOAT8OID:
			case TEXTOID:
			case VARCHAROID:
			case BPCHAROID:
			case BYTEAOID:
				tag = 0;
				break;
			default:
				*why = psprintf("Column \"%s\" is of type %s, which has no canonical binary form here.",
								c->name, format_type_be(c->typid));
				return NULL;
		}
		if (f)
			val = psprintf("pg_catalog.%s(%s)", f, expr);
		else if (c->basetype == NUMERICOID)
			val = psprintf("pg_catalog.numeric_send(pg_catalog.trim_scale(%s))", expr);
		else if (c->basetype == FLOAT4OID || c->basetype == FLOAT8OID)
		{
			const char *t = c->basetype == FLOAT4OID ? "float4" : "float8";

			val = psprintf("pg_catalog.%ssend((%s) OPERATOR(pg_catalog.+) '0'::pg_catalog.%s)",
						   t, expr, t);
			tag = c->basetype == FLOAT4OID ? 'e' : 'd';
		}
		else if (c->basetype == BYTEAOID)
		{
			val = psprintf("pg_catalog.int4send(pg_catalog.octet_length(%s)) OPERATOR(pg_catalog.||) (%s)",
						   expr, expr);
			tag = 'y';
		}
		else
		{
			/*
			 * A string's bytes in the server's encoding: decode(..,
			 * 'escape') of the text with its backslashes doubled is the
			 * text itself, without textsend's conversion to the session's
			 * client_encoding.  A char(n) without its trailing blanks, as
			 * its equality ignores them.
			 */
			const char *s = c->basetype == BPCHAROID
				? psprintf("pg_catalog.text(%s)", expr) : expr;

			/*
			 * replace() refuses a nondeterministic collation, and does not
			 * need one: "C" there (which postgres_fdw would not ship, so
			 * that a foreign side of such a collation is read in full).
			 */
			val = psprintf("pg_catalog.int4send(pg_catalog.octet_length(%s)) OPERATOR(pg_catalog.||) "
						   "pg_catalog.decode(pg_catalog.replace(%s%s, E'\\\\', E'\\\\\\\\'), 'escape')",
						   s, s, OidIsValid(own) && !get_collation_isdeterministic(own)
						   ? " COLLATE pg_catalog.\"C\"" : "");
			tag = 's';
		}
	}
	return psprintf("CASE WHEN (%s) IS NULL THEN '\\x00'::pg_catalog.bytea"
					" ELSE '\\x%02x'::pg_catalog.bytea OPERATOR(pg_catalog.||) %s END",
					expr, (unsigned char) tag, val);
}

/*
 * The row digest of a side: SHA-256 of its key and compared columns'
 * encodings, in the spec's order (keys, then compared columns).  Both
 * sides build the same bytes for rows the merge finds equal.
 */
static char *
row_digest_expr(DiffSpec *spec, bool is_source, const char **why)
{
	int			n = spec->nkeys + spec->ncols;
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoString(&buf, "pg_catalog.sha256(");
	for (int i = 0; i < n; i++)
	{
		DiffColumn *c = i < spec->nkeys ? &spec->keys[i] : &spec->cols[i - spec->nkeys];
		char	   *e = column_encoding(c, is_source ? c->sexpr : c->texpr,
									   is_source ? c->scollation : c->tcollation, why);

		if (e == NULL)
			return NULL;
		appendStringInfo(&buf, "%s(%s)", i ? " OPERATOR(pg_catalog.||) " : "", e);
	}
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

/*
 * A range's checksum: SHA-256 of its rows' digests in ascending order, a
 * digest of the multiset of its rows, cut to its first 128 bits (they
 * cross the link once per range and level).  Equal checksums mean equal
 * multisets unless SHA-256 collides in those bits; no permutation of
 * values among rows cancels out, as it could in a sum.
 */
static char *
range_digest_expr(const char *rowdigest)
{
	return psprintf("pg_catalog.substr(pg_catalog.sha256(pg_catalog.string_agg(%s, ''::pg_catalog.bytea ORDER BY %s)), 1, 16)",
					rowdigest, rowdigest);
}

/* A row's digest as the row hashes carry it: its first 128 bits. */
static char *
row_hash_expr(const char *rowdigest)
{
	return psprintf("pg_catalog.substr(%s, 1, 16)", rowdigest);
}

/*
 * The row hashes of a range from another server, in one bytea: their
 * concatenation, in the order of the keys' array.  No text function over
 * them: postgres_fdw (15) ships a function with a collatable argument
 * only when its collation comes from a column, and would fetch every
 * row's digest to compute it here.
 */
static char *
row_hashes_expr(const char *k1, const char *rowdigest)
{
	return psprintf("pg_catalog.string_agg(%s, ''::pg_catalog.bytea ORDER BY %s, %s)",
					row_hash_expr(rowdigest), k1, rowdigest);
}

/*
 * Bytes of a range's checksum and of a row hash: the first 128 bits of the
 * SHA-256.  128 bits keep a collision out of reach, where 1.1's 64-bit
 * hashes did not prove; all 256 bits crossed 0.188 MB at 10 differences in
 * the benchmark, above pg_comparator's 0.161 MB, and 128 bits 0.147 MB
 * (bench/RESULTS.md, "After the checksums that prove (1.2)").
 */
#define RANGE_DIGEST_LEN	16
#define ROW_HASH_LEN		16

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
	appendStringInfo(sql, " FROM %s", s->rel);
	if (p->cap < p->n + 4 + DIFF_MAX_GROUP_FILTER)
	{
		p->cap = p->n + 8 + DIFF_MAX_GROUP_FILTER;
		p->types = repalloc(p->types, sizeof(Oid) * p->cap);
		p->values = repalloc(p->values, sizeof(Datum) * p->cap);
	}
	return diff_append_where(sql, rd->spec, !s->is_source, rd->cutoff, rd->has_cutoff,
							 p->types, p->values, &p->n) ? " AND " : " WHERE ";
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
 * SELECT tag, bucket, count, checksum for the given cell ranges.
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
					 " %s%s GROUP BY 2", s->is_source ? 0 : 1, s->k1, pb,
					 range_digest_expr(s->hash), from.data);
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
	appendStringInfo(&sql, "SELECT %d, pg_catalog.width_bucket(%s, $%d), pg_catalog.array_agg(%s ORDER BY %s, %s),"
					 " %s%s GROUP BY 2", s->is_source ? 0 : 1, s->k1, pb,
					 s->k1, s->k1, s->hash, row_hashes_expr(s->k1, s->hash), from.data);
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
	appendStringInfo(&sql, "SELECT %s, %s", s->k1, row_hash_expr(s->hash));
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

/*
 * Whether a plan aggregates here, or computes an expression over what a
 * foreign scan returns (postgres_fdw may push an aggregate down but not
 * the function around it, and then fetch the aggregate's whole input).
 */
static bool
plan_has_agg(Plan *plan)
{
	ListCell   *lc;

	if (plan == NULL)
		return false;
	if (IsA(plan, Agg))
		return true;
	if (IsA(plan, ForeignScan))
		foreach(lc, plan->targetlist)
		{
			Node	   *e = (Node *) lfirst_node(TargetEntry, lc)->expr;

			if (!IsA(e, Var) && !IsA(e, Const))
				return true;
		}
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
	 * The ordered aggregates of the checksums sort their input whatever
	 * the settings; what JIT would compile for the digests' expressions
	 * costs more than it saves on the ranges of one statement.  The
	 * foreign side's query is planned there.
	 */
	(void) set_config_option("jit", "off", PGC_USERSET, PGC_S_SESSION,
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
 * What comes back: checked before use
 *
 * A foreign server (or a Citus worker) is not trusted: its pg_catalog may
 * have been changed so that count, array_agg or width_bucket return
 * anything.  Every value read back is checked for NULL, type, length and
 * range before it is used, and an error names the server.
 * ---------------------------------------------------------------------
 */

static const char *
side_origin(RemoteDiff *rd, int si)
{
	return rd->side[si].origin;
}

/* The server a result row came from when its side is not known. */
static const char *
any_origin(RemoteDiff *rd)
{
	if (rd->side[0].foreign || rd->side[0].citus)
		return rd->side[0].origin;
	return rd->side[1].origin;
}

static void pg_attribute_noreturn()
bad_result(RemoteDiff *rd, const char *origin, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_FDW_INVALID_DATA_TYPE),
			 errmsg("%s returned an invalid checksum result comparing \"%s\" and \"%s\"",
					origin, rd->side[0].name, rd->side[1].name),
			 errdetail("%s", detail),
			 errhint("A diff does not trust what another server computes. Check that the server's pg_catalog functions and aggregates are PostgreSQL's own, or compare with the option \"remote\": \"pull\".")));
}

/* Column col of a result row: of type type, and not NULL unless null_ok. */
static Datum
result_value(RemoteDiff *rd, const char *origin, HeapTuple t, TupleDesc desc,
			 int col, Oid type, bool null_ok, bool *isnull, const char *what)
{
	Datum		d;

	if (col > desc->natts || SPI_gettypeid(desc, col) != type)
		bad_result(rd, origin, psprintf("The %s is not of type %s.", what, format_type_be(type)));
	d = SPI_getbinval(t, desc, col, isnull);
	if (*isnull && !null_ok)
		bad_result(rd, origin, psprintf("The %s is NULL.", what));
	return d;
}

static int64
result_count(RemoteDiff *rd, const char *origin, HeapTuple t, TupleDesc desc, int col)
{
	bool		isnull;
	int64		n = DatumGetInt64(result_value(rd, origin, t, desc, col, INT8OID, false,
											   &isnull, "row count"));

	if (n <= 0)
		bad_result(rd, origin, psprintf("A key range's row count is " INT64_FORMAT ".", n));
	return n;
}

/* A bytea of exactly len bytes (a digest), copied into out. */
static void
result_digest(RemoteDiff *rd, const char *origin, HeapTuple t, TupleDesc desc,
			  int col, int len, uint8 *out)
{
	bool		isnull;
	bytea	   *v = DatumGetByteaPP(result_value(rd, origin, t, desc, col, BYTEAOID, false,
												 &isnull, "checksum"));

	if (VARSIZE_ANY_EXHDR(v) != len)
		bad_result(rd, origin, psprintf("A checksum is %d bytes long instead of %d.",
										(int) VARSIZE_ANY_EXHDR(v), len));
	memcpy(out, VARDATA_ANY(v), len);
}

/*
 * A one-dimensional array of n elements of type elemtype, none NULL
 * (n < 0: any number of at least one); returns its elements.
 */
static Datum *
result_array(RemoteDiff *rd, const char *origin, HeapTuple t, TupleDesc desc, int col,
			 Oid elemtype, int16 len, bool byval, char align, int *n, const char *what)
{
	bool		isnull;
	Datum		d = result_value(rd, origin, t, desc, col, get_array_type(elemtype), false,
								 &isnull, what);
	ArrayType  *a = DatumGetArrayTypeP(d);
	Datum	   *elems;
	bool	   *nulls;
	int			nelems;

	if (ARR_NDIM(a) != 1 || ARR_ELEMTYPE(a) != elemtype || ARR_LBOUND(a)[0] != 1)
		bad_result(rd, origin, psprintf("The %s is not a one-dimensional array of %s.",
										what, format_type_be(elemtype)));
	deconstruct_array(a, elemtype, len, byval, align, &elems, &nulls, &nelems);
	for (int i = 0; i < nelems; i++)
		if (nulls[i])
			bad_result(rd, origin, psprintf("The %s has a NULL element.", what));
	if (nelems == 0 || (*n >= 0 && nelems != *n))
		bad_result(rd, origin, psprintf("The %s has %d elements.", what, nelems));
	*n = nelems;
	return elems;
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
	MemoryContextSwitchTo(cxt);
	if (SPI_processed != 1)
		bad_result(rd, s->origin, "The row count of the grid is not one row.");
	n = DatumGetInt64(result_value(rd, s->origin, SPI_tuptable->vals[0], SPI_tuptable->tupdesc,
								   1, INT8OID, false, &isnull, "row count"));
	if (n < 0)
		bad_result(rd, s->origin, "The row count of the grid is negative.");

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
		MemoryContextSwitchTo(cxt);
		if (SPI_processed != 1)
			bad_result(rd, s->origin, "The grid's quantiles are not one row.");
		arr = result_value(rd, s->origin, SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
						   rd->k1array, true, &isnull, "array of quantiles");
		if (!isnull)
		{
			SortSupport ssup = &spec->keys[0].ssup;
			ArrayType  *a = DatumGetArrayTypeP(arr);

			/* Any bounds make a correct grid, if ascending: the others are skipped. */
			if (ARR_NDIM(a) > 1 || ARR_ELEMTYPE(a) != rd->k1type)
				bad_result(rd, s->origin, "The grid's quantiles are not a one-dimensional array of the key's type.");
			deconstruct_array(a, rd->k1type, rd->k1len,
							  rd->k1byval, rd->k1align, &elems, &nulls, &nelems);
			if (nelems > cells)
				bad_result(rd, s->origin, psprintf("The grid has %d quantiles instead of at most " INT64_FORMAT ".",
												   nelems, cells - 1));
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
		Datum		v = result_value(rd, s->origin, SPI_tuptable->vals[i], SPI_tuptable->tupdesc,
									 1, rd->k1type, true, &isnull, "duplicated key");

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
	uint8		digest[2][RANGE_DIGEST_LEN];	/* zeros for an empty range */
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

/*
 * The range a result row of run_parts is about: sets *si, returns -1 for a
 * NULL key (when nulls).  seen[si][range] marks the ranges already
 * answered: one row for each at most.
 */
static int
part_row(RemoteDiff *rd, Part *parts, HeapTuple t, TupleDesc desc, int *si, bool nulls,
		 bool **seen)
{
	bool		isnull;
	int			id;
	int			k;
	const char *origin = any_origin(rd);

	*si = DatumGetInt32(result_value(rd, origin, t, desc, 1, INT4OID, true, &isnull, "side"));
	if (isnull || *si < 0 || *si > 1 || parts[*si].nr < 0)
		bad_result(rd, origin, "A result row names no side of the diff.");
	origin = side_origin(rd, *si);
	id = DatumGetInt32(result_value(rd, origin, t, desc, 2, INT4OID, true, &isnull, "bucket"));
	if (isnull && nulls)
		k = -1;
	else if (isnull || id < 0 || id > parts[*si].maxid || parts[*si].byid[id] < 0)
		bad_result(rd, origin, isnull ? "A bucket is NULL." :
				   psprintf("Bucket %d is not one of the key ranges asked for.", id));
	else
		k = parts[*si].byid[id];
	if (seen)
	{
		bool	   *s = &seen[*si][k + 1];

		if (*s)
			bad_result(rd, origin, "Two result rows answer for the same key range.");
		*s = true;
	}
	return k;
}

static bool **
seen_marks(Part *parts)
{
	bool	  **seen = palloc(sizeof(bool *) * 2);

	for (int si = 0; si < 2; si++)
		seen[si] = palloc0(sizeof(bool) * (Max(parts[si].nr, 0) + 1));
	return seen;
}

/*
 * Counts and checksums of the ranges of each side's part: out[range].
 * Rows with a NULL first key set rd->nulls when nulls is set.
 */
static void
checksum_parts(RemoteDiff *rd, Part *parts, RangeSum *out, bool nulls, int max_pred)
{
	Params		p;
	MemoryContext cxt = CurrentMemoryContext;
	bool	  **seen = seen_marks(parts);

	params_init(&p);
	run_parts(rd, parts, nulls, max_pred, false, &p);
	MemoryContextSwitchTo(cxt);
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	t = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		int			si;
		int			k = part_row(rd, parts, t, desc, &si, nulls, seen);
		int64		n = result_count(rd, side_origin(rd, si), t, desc, 3);

		CHECK_FOR_INTERRUPTS();
		if (k < 0)
		{
			rd->nulls = true;
			continue;
		}
		out[k].count[si] = n;
		result_digest(rd, side_origin(rd, si), t, desc, 4, RANGE_DIGEST_LEN, out[k].digest[si]);
	}
	SPI_freetuptable(SPI_tuptable);
}

static bool
range_same(RemoteDiff *rd, RangeSum *s, CellRange *r)
{
	return s->count[0] == s->count[1] &&
		memcmp(s->digest[0], s->digest[1], RANGE_DIGEST_LEN) == 0 &&
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
 * Compare the ranges level by level; matched ranges go into the counts,
 * differing single cells into fetch.  Returns the number of cells to read.
 *
 * The first level also counts rows with a NULL first key.  Each level's
 * ranges are computed on each side's server (a range's checksum is not
 * the sum of its cells', so a local side is asked again at each level,
 * for the ranges still in question only).  With leaves, the first level
 * is already the cells.
 */
static int
compare_levels(RemoteDiff *rd, DiffCounts *counts, CellRange *fetch, bool leaves)
{
	int			factor = rd->spec->split_factor;
	int			nfetch = 0;
	int			nr;
	CellRange  *cur;
	CellRange	all = {0, rd->ncells};
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
		Part		parts[2];
		/* the ranges of a level are disjoint: at most one a cell */
		CellRange  *next = palloc(sizeof(CellRange) *
								  Min((Size) nr * (leaves ? 1 : factor), (Size) rd->ncells));
		int			nnext = 0;

		CHECK_FOR_INTERRUPTS();
		for (int si = 0; si < 2; si++)
		{
			parts[si].r = cur;
			parts[si].nr = nr;
		}
		checksum_parts(rd, parts, sums, top, RANGE_PREDICATE_MAX);
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

/*
 * Cells of the sample, looked at before choosing how to compare: enough to
 * tell none or one differing cell from a few and from half or more, at
 * about 8 kB more for every diff (bench/RESULTS.md, "After the speed-up":
 * it sent 100,000 differences straight to the row hashes, which made that
 * diff no slower than reading every row).
 */
#define SAMPLE_CELLS 64

/*
 * How many of SAMPLE_CELLS cells spread over the grid differ: a
 * cheap estimate of the share of cells that differ, read through the
 * cells' key ranges (an index serves them).
 */
static int
sample_cells(RemoteDiff *rd, int *nsample)
{
	int			n = Min(SAMPLE_CELLS, rd->ncells);
	CellRange  *r = palloc(sizeof(CellRange) * n);
	RangeSum   *sums = palloc0(sizeof(RangeSum) * n);
	Part		parts[2];
	int			differ = 0;

	for (int i = 0; i < n; i++)
	{
		/*
		 * One cell in each of n equal strides, at a place within it that
		 * moves from stride to stride (the golden ratio's fractions): at a
		 * fixed place, differences spaced as regularly as the strides
		 * (every thousandth key) would all be missed, or all be hit.
		 */
		int64		stride = (int64) rd->ncells / n;
		double		frac = (double) (i + 1) * 0.6180339887498949;

		frac -= (double) (int64) frac;
		r[i].lo = (int) ((int64) rd->ncells * i / n + (int64) (frac * (double) stride));
		r[i].hi = r[i].lo + 1;
	}
	for (int si = 0; si < 2; si++)
	{
		parts[si].r = r;
		parts[si].nr = n;
	}
	checksum_parts(rd, parts, sums, false, SAMPLE_CELLS);
	for (int i = 0; i < n; i++)
		if (!range_same(rd, &sums[i], &r[i]))
			differ++;
	*nsample = n;
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
	/* The one read of rows (diff_execute) says whether a limit stopped it. */
	counts->young_keys += fc->young_keys;
	counts->stopped = fc->stopped;
	counts->stopped_at_key = fc->stopped_at_key;
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
	uint8		hash[ROW_HASH_LEN];
} RowHash;

static SortSupport sort_ssup;

static int
row_hash_cmp(const void *a, const void *b)
{
	return ApplySortComparator(((const RowHash *) a)->key, false,
							   ((const RowHash *) b)->key, false, sort_ssup);
}

static void
row_hash_add(RemoteDiff *rd, RowHash **out, int64 *n, int64 *cap, int si, Datum key,
			 const uint8 *hash)
{
	if (n[si] >= cap[si])
	{
		cap[si] *= 2;
		out[si] = repalloc_huge(out[si], sizeof(RowHash) * cap[si]);
	}
	out[si][n[si]].key = datumCopy(key, rd->k1byval, rd->k1len);
	memcpy(out[si][n[si]].hash, hash, ROW_HASH_LEN);
	n[si]++;
}

/*
 * Every key and row hash of both sides in the given cells, each side's
 * sorted by key: a foreign side's as arrays, one row per range, a local
 * side's row by row.  A key from another server must lie in the range it
 * was returned for.
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
		const char *origin = side_origin(rd, si);

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
			for (uint64 i = 0; i < SPI_processed; i++)
			{
				bool		isnull;
				Datum		key;
				bytea	   *h;

				CHECK_FOR_INTERRUPTS();
				key = result_value(rd, origin, tt->vals[i], tt->tupdesc, 1, rd->k1type, false,
								   &isnull, "key");
				h = DatumGetByteaPP(result_value(rd, origin, tt->vals[i], tt->tupdesc, 2, BYTEAOID,
												 false, &isnull, "row hash"));
				if (VARSIZE_ANY_EXHDR(h) != ROW_HASH_LEN)
					bad_result(rd, origin, "A row hash is not 16 bytes long.");
				row_hash_add(rd, out, n, cap, si, key, (uint8 *) VARDATA_ANY(h));
			}
			SPI_freetuptable(tt);
		}
		SPI_freetuptable(SPI_tuptable);
		SPI_cursor_close(portal);
	}
	if (parts[0].nr >= 0 || parts[1].nr >= 0)
	{
		bool	  **seen = seen_marks(parts);

		run_parts(rd, parts, false, RANGE_PREDICATE_MAX, true, &p);
		MemoryContextSwitchTo(cxt);
		tt = SPI_tuptable;
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			Datum	   *keys;
			uint8	   *hashes;
			bool		isnull;
			bytea	   *h;
			int			nk = -1,
						si,
						k;
			const char *origin;
			CellRange  *r;

			CHECK_FOR_INTERRUPTS();
			k = part_row(rd, parts, tt->vals[i], tt->tupdesc, &si, false, seen);
			origin = side_origin(rd, si);
			r = &parts[si].r[k];
			keys = result_array(rd, origin, tt->vals[i], tt->tupdesc, 3, rd->k1type, rd->k1len,
								rd->k1byval, rd->k1align, &nk, "array of keys");
			h = DatumGetByteaPP(result_value(rd, origin, tt->vals[i], tt->tupdesc, 4, BYTEAOID,
											 false, &isnull, "string of row hashes"));
			if (VARSIZE_ANY_EXHDR(h) != (Size) nk * ROW_HASH_LEN)
				bad_result(rd, origin, psprintf("There are %d bytes of row hashes for %d keys.",
												(int) VARSIZE_ANY_EXHDR(h), nk));
			hashes = (uint8 *) VARDATA_ANY(h);
			for (int j = 0; j < nk; j++)
			{
				int			cell = cell_of(rd, keys[j]);

				/* A collatable key may be ordered otherwise there. */
				if ((cell < r->lo || cell >= r->hi) && !OidIsValid(rd->spec->keys[0].collation))
					bad_result(rd, origin, "A key lies outside the key range it was returned for.");
				row_hash_add(rd, out, n, cap, si, keys[j], hashes + (Size) j * ROW_HASH_LEN);
			}
			pfree(keys);
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
		if (ie - i == 1 && je - j == 1 && memcmp(s[i].hash, t[j].hash, ROW_HASH_LEN) == 0)
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

/*
 * Whether the remote columns are of the foreign table's declared types,
 * which the digests' functions assume: the remote server parses
 * array_larger(ARRAY[col], '{}'::declared[]), which takes two arrays of
 * one type exactly, over one row, and replace() of its strings, which a
 * nondeterministic collation refuses.  A remote char(6) declared text,
 * or bigint declared integer, is refused there.  Returns
 * why not, or NULL when they are.
 */
static const char *
remote_type_mismatch(RemoteDiff *rd, RSide *s, Oid relid)
{
	DiffSpec   *spec = rd->spec;
	StringInfoData sql;
	const char *sep = " WHERE ";
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	const char *why = NULL;
	Params		p;

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT NULL FROM %s", s->rel);
	for (int i = 0; i < spec->nkeys + spec->ncols; i++)
	{
		DiffColumn *c = i < spec->nkeys ? &spec->keys[i] : &spec->cols[i - spec->nkeys];
		const char *name = s->is_source ? c->name : c->tname;
		AttrNumber	att = get_attnum(relid, name);
		Oid			type;

		if (att <= 0)
			continue;
		/* A domain's base type: the remote may not have the domain. */
		type = getBaseType(get_atttype(relid, att));
		if (!OidIsValid(get_array_type(type)))
			continue;
		appendStringInfo(&sql, "%spg_catalog.array_larger(ARRAY[%s], '{}'::%s[]) IS NOT NULL",
						 sep, quote_identifier(name), format_type_be_qualified(type));
		sep = " AND ";
		/* A remote nondeterministic collation: replace() refuses it. */
		if (TypeCategory(getBaseType(type)) == TYPCATEGORY_STRING)
			appendStringInfo(&sql, " AND pg_catalog.replace(%s, E'\\\\', E'\\\\\\\\') IS DISTINCT FROM E'\\\\'",
							 quote_identifier(name));
	}
	/* Always true, for one row: with LIMIT 0, the query might not be sent. */
	appendStringInfoString(&sql, " LIMIT 1");
	params_init(&p);

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		run_query(sql.data, &p);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		/* Only the remote's "no such function": others are errors of their own. */
		if (edata->sqlerrcode != ERRCODE_UNDEFINED_FUNCTION &&
			edata->sqlerrcode != ERRCODE_DATATYPE_MISMATCH &&
			edata->sqlerrcode != ERRCODE_AMBIGUOUS_FUNCTION &&
			edata->sqlerrcode != ERRCODE_FEATURE_NOT_SUPPORTED)
			ReThrowError(edata);
		why = psprintf("A column of foreign table \"%s\" is of another type or collation on %s than declared (the remote server said: %s).",
					   s->name, s->origin, edata->message);
	}
	PG_END_TRY();
	return why;
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

		/*
		 * Ranges, buckets and orders of the first key column of a side on
		 * this server in the diff's key collation, as the grid and the
		 * merge compare it.  Not on a foreign side: postgres_fdw sends no
		 * COLLATE, and a row that falls in another cell there than here
		 * makes both cells differ, which reads them.
		 */
		{
			Oid			own = i == 0 ? spec->keys[0].scollation : spec->keys[0].tcollation;
			Oid			coll = spec->keys[0].collation;

			if (!s->foreign && OidIsValid(coll) && own != coll)
				s->k1 = psprintf("(%s) COLLATE %s", s->k1, collation_quoted_name(coll));
		}
		if (s->foreign)
			s->origin = psprintf("foreign server \"%s\"",
								 GetForeignServer(GetForeignTable(rels[i])->serverid)->servername);
		else if (s->citus)
			s->origin = psprintf("the Citus workers of \"%s\"", s->name);
		else
			s->origin = "this server";
		any_spread |= s->foreign || s->citus;
	}
	if (spec->remote_mode == DIFF_REMOTE_PULL || !any_spread)
		return false;

	for (int i = 0; i < 2; i++)
	{
		rd->side[i].hash = row_digest_expr(spec, i == 0, &why);
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

	/* The remote columns must be of the types the digests assume. */
	for (int i = 0; i < 2; i++)
	{
		ErrorContextCallback errcb;

		if (!rd->side[i].foreign)
			continue;
		errcb.callback = checksum_error_context;
		errcb.arg = rd;
		errcb.previous = error_context_stack;
		error_context_stack = &errcb;
		why = remote_type_mismatch(rd, &rd->side[i], rels[i]);
		error_context_stack = errcb.previous;
		if (why != NULL)
		{
			if (spec->remote_mode != DIFF_REMOTE_CHECKSUM)
				ereport(NOTICE,
						(errmsg("diff of \"%s\" and \"%s\" reads every row of \"%s\" instead of comparing checksums",
								spec->sname, spec->tname, rd->side[i].name),
						 errdetail("%s", why),
						 errhint("Declare the foreign table's columns with the remote columns' types.")));
			return cannot_checksum(spec, why);
		}
	}

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
 * Run a prepared diff by checksums, where a side is on another server or
 * on Citus workers and they can be computed there: false, with nothing
 * found, when they cannot (diff_compare then reads every row).  The caller
 * holds an SPI connection.
 */
bool
diff_checksum(DiffSpec *spec, Tuplestorestate *ts, TupleDesc desc, DiffCounts *counts)
{
	RemoteDiff	rd;
	ErrorContextCallback errcb;
	CellRange  *fetch;
	bool	   *marks;
	int			nfetch;
	int			ndiffer;
	int			nsample;
	instr_time	clock;
	MemoryContext cxt = CurrentMemoryContext;

	if (!remote_setup(&rd, spec))
		return false;

	INSTR_TIME_SET_CURRENT(clock);
	errcb.callback = checksum_error_context;
	errcb.arg = &rd;
	errcb.previous = error_context_stack;
	error_context_stack = &errcb;

	memset(counts, 0, sizeof(DiffCounts));
	counts->column_mismatches = palloc0(sizeof(int64) * Max(spec->ncols, 1));
	counts->rechecks = -1;
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
	ndiffer = sample_cells(&rd, &nsample);
	if (ndiffer * 2 >= nsample && rd.ncells >= 2 * SAMPLE_CELLS)
	{
		CellRange	all = {0, rd.ncells};

		elog(DEBUG1, "reconcile diff of \"%s\" and \"%s\": %d of %d sampled cells differ, reading every %s",
			 spec->sname, spec->tname, ndiffer, nsample, spec->nkeys == 1 ? "row's hash" : "row");
		nfetch = split_range(&all, spec->split_factor, fetch);
		rd.nulls = true;
	}
	else
	{
		elog(DEBUG1, "reconcile diff of \"%s\" and \"%s\": %d of %d sampled cells differ, comparing %s",
			 spec->sname, spec->tname, ndiffer, nsample, ndiffer >= 2 ? "every cell" : "ranges");
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
	return true;
}
