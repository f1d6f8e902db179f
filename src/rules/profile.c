/*
 * profile.c
 *		reconcile_discover_rules(): profile a relation and propose a rules
 *		document, each rule with its description and evidence.
 *
 * One scan profiles every column in bounded memory: null counts, min and
 * max of numbers, an approximate distinct count (HyperLogLog, 2^10
 * registers), the exact values of low-cardinality columns (up to TOP_K,
 * then the column is marked high-cardinality), the one shape text values
 * share if they do (character classes and run lengths), and a reservoir
 * sample of rows.  Candidate cross-column rules (linear relations with
 * coefficients +1/-1 among two to four numeric columns, two of them at
 * least high-cardinality, the others of a few values such as a tiered fee,
 * with a constant term where the data shows one, overall or within one
 * value of a categorical column, and implications between categorical
 * columns) are screened on the sample and verified with one counting query
 * each over the whole relation; only those that hold on at least min_share
 * of the rows, and do not follow from those already found, are proposed.
 *
 * Proposals that hold on every row go under "fail" (not-null, allowed
 * values, non-negative, pattern, exact relations); ranges, which new data
 * may legitimately extend, and relations that hold on nearly all rows go
 * under "warn".  The reviewer decides: the output is a starting point.
 */
#include "postgres.h"

#include <ctype.h>
#include <math.h>

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/xact.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "common/pg_prng.h"
#include "executor/spi.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "tcop/dest.h"
#include "utils/builtins.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/rel.h"
#include "utils/typcache.h"

#include "common/args.h"
#include "common/jsonbuild.h"
#include "common/jsonread.h"
#include "common/receiver.h"
#include "rules.h"
#include "common/sqlname.h"
#include "common/subxact.h"

PG_FUNCTION_INFO_V1(reconcile_discover_rules);

#define HLL_BITS 10
#define HLL_REGS (1 << HLL_BITS)
#define TOP_K 32
#define TOP_VALUE_MAXLEN 200
#define MAX_RUNS 12
#define MAX_LINEAR_COLUMNS 12	/* high-cardinality terms */
#define MAX_LOW_CARD_TERMS 4	/* terms with 2 to max_values values (a fee) */
#define MAX_TERMS (MAX_LINEAR_COLUMNS + MAX_LOW_CARD_TERMS)
#define MAX_IMPLICATIONS 20
#define MAX_CONDITIONAL 10
#define MIN_IMPLICATION_SUPPORT 10
/*
 * Counting queries over the whole relation that verify candidates found
 * on the sample: each is a scan, and a sample can make many candidates
 * that the relation does not bear out; past this many, none is verified.
 */
#define MAX_VERIFICATIONS 256

typedef struct ShapeRun
{
	char		cls;			/* 'd' digit, 'U' upper, 'l' lower, or the literal */
	int			minlen;
	int			maxlen;
} ShapeRun;

typedef struct TopValue
{
	char	   *value;
	int64		count;
	uint32		hash;
} TopValue;

typedef struct ColumnProfile
{
	char	   *name;
	const char *qname;			/* quoted */
	Oid			type;
	bool		numeric;
	bool		is_float;
	bool		textual;
	bool		has_eq;			/* has an equality operator: IN, GROUP BY */
	bool		has_nan;		/* NaN sorts above everything: no range */
	FmgrInfo	out;
	int64		nonnull;
	int64		nulls;
	double		min;
	double		max;
	char	   *mintext;
	char	   *maxtext;
	uint8		hll[HLL_REGS];
	TopValue	top[TOP_K];
	int			ntop;
	bool		overflow;
	bool		shape_ok;
	int			nruns;
	ShapeRun	runs[MAX_RUNS];
} ColumnProfile;

typedef struct Profile
{
	DestReceiver pub;
	Oid			relid;
	char	   *relsql;
	int			ncols;
	ColumnProfile *cols;
	int64		rows;
	int			sample_size;
	int			nsampled;
	double	   *snum;			/* [row * ncols + col] */
	uint32	   *shash;
	bool	   *snull;
	pg_prng_state prng;
	MemoryContext cxt;			/* profile data */
	MemoryContext rowcxt;		/* reset per row */
	/* options */
	int			max_values;
	double		min_share;
	int			nverified;		/* counting queries run for candidates */
	bool		verify_capped;	/* candidates left out at MAX_VERIFICATIONS */
}			Profile;

/* A proposed rule with its evidence. */
typedef struct Proposal
{
	char	   *name;
	const char *section;		/* fail, warn, drop or dataset_checks */
	const char *kind;
	char	   *text;
	char	   *description;
	List	   *columns;		/* dataset checks */
	int64		checked;
	int64		holding;
} Proposal;

/* ---- one scan ---- */

static int
value_shape(const char *s, ShapeRun *runs)
{
	int			n = 0;

	for (const char *p = s; *p; p++)
	{
		unsigned char c = (unsigned char) *p;
		char		cls;

		if (c >= 0x80 || c < 0x20)
			return -1;
		cls = isdigit(c) ? 'd' : isupper(c) ? 'U' : islower(c) ? 'l' : (char) c;
		if (n > 0 && runs[n - 1].cls == cls)
			runs[n - 1].minlen = ++runs[n - 1].maxlen;
		else
		{
			if (n == MAX_RUNS)
				return -1;
			runs[n].cls = cls;
			runs[n].minlen = runs[n].maxlen = 1;
			n++;
		}
	}
	return n;
}

static void
profile_value(Profile *p, ColumnProfile *c, Datum value, int col, int slot)
{
	char	   *text = OutputFunctionCall(&c->out, value);
	size_t		len = strlen(text);
	uint64		h = hash_bytes_extended((const unsigned char *) text, len, 0);
	int			reg = h >> (64 - HLL_BITS);
	uint64		rest = h << HLL_BITS;
	uint8		rho;

	rho = rest == 0 ? (uint8) (64 - HLL_BITS + 1) : (uint8) (63 - pg_leftmost_one_pos64(rest) + 1);
	if (rho > c->hll[reg])
		c->hll[reg] = rho;
	c->nonnull++;

	if (!c->overflow)
	{
		uint32		h32 = (uint32) h;
		int			i;

		for (i = 0; i < c->ntop; i++)
			if (c->top[i].hash == h32 && strcmp(c->top[i].value, text) == 0)
				break;
		if (i < c->ntop)
			c->top[i].count++;
		else if (c->ntop < TOP_K && len <= TOP_VALUE_MAXLEN)
		{
			c->top[i].value = MemoryContextStrdup(p->cxt, text);
			c->top[i].count = 1;
			c->top[i].hash = h32;
			c->ntop++;
		}
		else
			c->overflow = true;
	}

	if (c->numeric)
	{
		double		v;

		if (c->type == INT2OID)
			v = DatumGetInt16(value);
		else if (c->type == INT4OID)
			v = DatumGetInt32(value);
		else if (c->type == INT8OID)
			v = (double) DatumGetInt64(value);
		else if (c->type == FLOAT4OID)
			v = DatumGetFloat4(value);
		else if (c->type == FLOAT8OID)
			v = DatumGetFloat8(value);
		else
			v = DatumGetFloat8(DirectFunctionCall1(numeric_float8_no_overflow, value));
		if (isnan(v))
			c->has_nan = true;
		else if (c->mintext == NULL || v < c->min)
		{
			c->min = v;
			if (c->mintext)
				pfree(c->mintext);
			c->mintext = MemoryContextStrdup(p->cxt, text);
		}
		if (!isnan(v) && (c->maxtext == NULL || v > c->max))
		{
			c->max = v;
			if (c->maxtext)
				pfree(c->maxtext);
			c->maxtext = MemoryContextStrdup(p->cxt, text);
		}
		if (slot >= 0)
			p->snum[slot * p->ncols + col] = v;
	}
	if (slot >= 0)
		p->shash[slot * p->ncols + col] = (uint32) h;

	if (c->textual && c->shape_ok)
	{
		ShapeRun	runs[MAX_RUNS];
		int			n = value_shape(text, runs);

		if (n <= 0)
			c->shape_ok = false;
		else if (c->nonnull == 1)
		{
			c->nruns = n;
			memcpy(c->runs, runs, sizeof(ShapeRun) * n);
		}
		else if (n != c->nruns)
			c->shape_ok = false;
		else
		{
			for (int i = 0; i < n && c->shape_ok; i++)
			{
				if (runs[i].cls != c->runs[i].cls)
					c->shape_ok = false;
				c->runs[i].minlen = Min(c->runs[i].minlen, runs[i].minlen);
				c->runs[i].maxlen = Max(c->runs[i].maxlen, runs[i].maxlen);
			}
		}
	}
}

static bool
profile_receive(TupleTableSlot *slot, DestReceiver *self)
{
	Profile    *p = (Profile *) self;
	MemoryContext old;
	int			s = -1;

	CHECK_FOR_INTERRUPTS();
	slot_getallattrs(slot);
	/* Reservoir sampling (algorithm R), seeded: the same data, the same sample. */
	if (p->rows < p->sample_size)
		s = p->nsampled++;
	else
	{
		uint64		j = pg_prng_uint64_range(&p->prng, 0, p->rows);

		if (j < (uint64) p->sample_size)
			s = (int) j;
	}
	p->rows++;
	old = MemoryContextSwitchTo(p->rowcxt);
	for (int i = 0; i < p->ncols; i++)
	{
		ColumnProfile *c = &p->cols[i];

		if (s >= 0)
			p->snull[s * p->ncols + i] = slot->tts_isnull[i];
		if (slot->tts_isnull[i])
			c->nulls++;
		else
			profile_value(p, c, slot->tts_values[i], i, s);
	}
	MemoryContextSwitchTo(old);
	MemoryContextReset(p->rowcxt);
	return true;
}

/*
 * HyperLogLog by hand rather than PostgreSQL's lib/hyperloglog.h, on
 * purpose for now: this one takes a 64-bit hash of the value's text (no
 * large-range correction needed), PostgreSQL's takes a 32-bit hash and
 * corrects near 2^32, so its estimate differs slightly, and the estimate
 * decides (against 0.9 of the non-null rows) whether a column is proposed
 * as unique.  Switching needs the rules_discover results checked first.
 */
static double
hll_estimate(ColumnProfile *c)
{
	double		sum = 0;
	int			zeros = 0;
	double		m = HLL_REGS;
	double		e;

	for (int i = 0; i < HLL_REGS; i++)
	{
		sum += ldexp(1.0, -c->hll[i]);
		zeros += c->hll[i] == 0;
	}
	e = (0.7213 / (1 + 1.079 / m)) * m * m / sum;
	if (e <= 2.5 * m && zeros > 0)
		e = m * log(m / zeros);
	return e;
}

/* ---- helpers for proposals ---- */

static int64
count_query(const char *sql, int nargs, Oid *types, Datum *args, int64 *second)
{
	bool		isnull;
	int64		first;

	if (SPI_execute_with_args(sql, nargs, types, args, NULL, true, 1) != SPI_OK_SELECT ||
		SPI_processed != 1)
		elog(ERROR, "could not run profiling query: %s", sql);
	first = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	if (second)
		*second = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2, &isnull));
	return isnull ? 0 : first;
}

/* Whether one more candidate may be verified over the whole relation. */
static bool
verify_allowed(Profile *p)
{
	CHECK_FOR_INTERRUPTS();
	if (p->nverified >= MAX_VERIFICATIONS)
	{
		p->verify_capped = true;
		return false;
	}
	p->nverified++;
	return true;
}

static Proposal *
propose(List **props, const char *section, const char *kind, char *name,
		char *text, char *description, int64 checked, int64 holding)
{
	Proposal   *pr = palloc0(sizeof(Proposal));
	ListCell   *lc;
	int			suffix = 2;
	char	   *base = name;

	/* Names are unique in a document. */
again:
	foreach(lc, *props)
	{
		if (strcmp(((Proposal *) lfirst(lc))->name, name) == 0)
		{
			name = psprintf("%s_%d", base, suffix++);
			goto again;
		}
	}
	pr->name = name;
	pr->section = section;
	pr->kind = kind;
	pr->text = text;
	pr->description = description;
	pr->checked = checked;
	pr->holding = holding;
	*props = lappend(*props, pr);
	return pr;
}

/* A name fragment from a value: lowercase letters, digits and underscores. */
static char *
name_part(const char *s)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (const char *p = s; *p && buf.len < 24; p++)
		appendStringInfoChar(&buf, isalnum((unsigned char) *p) ? tolower((unsigned char) *p) : '_');
	return buf.data;
}

/* "cond", or "col IS NULL OR (cond)" when the column has nulls. */
static char *
null_tolerant(ColumnProfile *c, char *cond)
{
	if (c->nulls == 0)
		return cond;
	return psprintf("%s IS NULL OR %s", c->qname, cond);
}

/*
 * A number as SQL: plain when it is a number, quoted otherwise (NaN,
 * Infinity).  A JSON number is also an SQL numeric literal, so the one
 * number test serves here too.
 */
static char *
numeric_literal(const char *text)
{
	if (json_value_is_number(NUMERICOID, text))
		return pstrdup(text);
	return quote_literal_cstr(text);
}

static int
top_cmp(const void *a, const void *b)
{
	return strcmp(((const TopValue *) a)->value, ((const TopValue *) b)->value);
}

#define REGEX_DUP_MAX 255

static char *
shape_regex(ColumnProfile *c)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '^');
	for (int i = 0; i < c->nruns; i++)
	{
		ShapeRun   *r = &c->runs[i];

		if (r->cls == 'd')
			appendStringInfoString(&buf, "[0-9]");
		else if (r->cls == 'U')
			appendStringInfoString(&buf, "[A-Z]");
		else if (r->cls == 'l')
			appendStringInfoString(&buf, "[a-z]");
		else if (strchr(".^$*+?()[]{}|\\", r->cls))
			appendStringInfo(&buf, "\\%c", r->cls);
		else
			appendStringInfoChar(&buf, r->cls);
		/* PostgreSQL's regular expressions count repetitions up to 255 (DUPMAX). */
		if (r->maxlen > REGEX_DUP_MAX)
			appendStringInfo(&buf, "{%d,}", Min(r->minlen, REGEX_DUP_MAX));
		else if (r->minlen != r->maxlen)
			appendStringInfo(&buf, "{%d,%d}", r->minlen, r->maxlen);
		else if (r->minlen > 1)
			appendStringInfo(&buf, "{%d}", r->minlen);
	}
	appendStringInfoChar(&buf, '$');
	return buf.data;
}

static bool
is_categorical(Profile *p, ColumnProfile *c)
{
	return c->has_eq && !c->overflow && c->ntop >= 2 && c->ntop <= p->max_values &&
		c->type != BOOLOID && c->nonnull >= 2 * c->ntop;
}

/*
 * A term of a linear relation: a numeric column with finite values that
 * are not all equal (a constant column enters as the constant term).
 */
static bool
is_linear_term(ColumnProfile *c)
{
	return c->numeric && c->mintext != NULL && !c->has_nan && c->min < c->max &&
		!isinf(c->min) && !isinf(c->max);
}

static bool
is_high_cardinality(Profile *p, ColumnProfile *c)
{
	return c->overflow || c->ntop > p->max_values;
}

/* ---- single-column rules ---- */

static void
propose_column_rules(Profile *p, List **props)
{
	for (int i = 0; i < p->ncols; i++)
	{
		ColumnProfile *c = &p->cols[i];
		char	   *n = name_part(c->name);

		CHECK_FOR_INTERRUPTS();
		if (c->nulls == 0)
			propose(props, "fail", "not_null", psprintf("%s_not_null", n),
					psprintf("%s IS NOT NULL", c->qname),
					psprintf("Column %s is never null.", c->name), p->rows, p->rows);

		/* Candidate keys, verified exactly. */
		if (c->nonnull >= 2 && c->has_eq && !c->is_float && c->type != BOOLOID &&
			c->type != NUMERICOID &&
			((!c->overflow && c->ntop == c->nonnull) ||
			 (c->overflow && hll_estimate(c) >= 0.9 * c->nonnull)))
		{
			int64		dup_rows = count_query(psprintf("SELECT COALESCE(pg_catalog.sum(n), 0)::pg_catalog.int8 FROM"
														" (SELECT pg_catalog.count(*) AS n FROM %s WHERE %s IS NOT NULL"
														" GROUP BY %s HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 1) AS d",
														p->relsql, c->qname, c->qname),
											   0, NULL, NULL, NULL);

			if (dup_rows == 0)
			{
				Proposal   *pr = propose(props, "dataset_checks", "unique", psprintf("%s_unique", n),
										 psprintf("SELECT %s, COUNT(*) FROM {{TABLE}} WHERE %s IS NOT NULL GROUP BY %s HAVING COUNT(*) > 1",
												  c->qname, c->qname, c->qname),
										 psprintf("Each value of %s appears at most once.", c->name),
										 c->nonnull, c->nonnull);

				pr->columns = list_make1(c->name);
			}
		}

		if (is_categorical(p, c))
		{
			StringInfoData list;
			StringInfoData shown;
			TopValue   *vals = palloc(sizeof(TopValue) * c->ntop);

			memcpy(vals, c->top, sizeof(TopValue) * c->ntop);
			qsort(vals, c->ntop, sizeof(TopValue), top_cmp);
			initStringInfo(&list);
			initStringInfo(&shown);
			for (int v = 0; v < c->ntop; v++)
			{
				appendStringInfo(&list, "%s%s", v > 0 ? ", " : "", quote_literal_cstr(vals[v].value));
				appendStringInfo(&shown, "%s%s", v > 0 ? ", " : "", vals[v].value);
			}
			propose(props, "fail", "allowed_values", psprintf("%s_allowed_values", n),
					null_tolerant(c, psprintf("%s IN (%s)", c->qname, list.data)),
					psprintf("Column %s takes one of %d values: %s.", c->name, c->ntop, shown.data),
					p->rows, p->rows);
		}

		if (c->numeric && c->mintext != NULL && !c->has_nan)
		{
			if (c->min >= 0 && c->max > 0)
				propose(props, "fail", "non_negative", psprintf("%s_non_negative", n),
						null_tolerant(c, psprintf("%s >= 0", c->qname)),
						psprintf("Column %s is never negative.", c->name), p->rows, p->rows);
			if (c->min < c->max && !is_categorical(p, c))
				propose(props, "warn", "range", psprintf("%s_range", n),
						null_tolerant(c, psprintf("%s BETWEEN %s AND %s", c->qname,
												  numeric_literal(c->mintext),
												  numeric_literal(c->maxtext))),
						psprintf("Column %s lies between %s and %s, its range in the profiled data.",
								 c->name, c->mintext, c->maxtext),
						p->rows, p->rows);
		}

		if (c->textual && c->shape_ok && c->nruns > 0 && c->nonnull >= 2 &&
			!is_categorical(p, c))
		{
			char	   *re = shape_regex(c);

			propose(props, "fail", "pattern", psprintf("%s_pattern", n),
					null_tolerant(c, psprintf("%s ~ %s", c->qname, quote_literal_cstr(re))),
					psprintf("Every value of %s has one shape: %s.", c->name, re),
					p->rows, p->rows);
		}
	}
}

/* ---- linear relations ---- */

/* What the sample says of sum(signs[j] * col[j]). */
typedef struct LinearScreen
{
	int64		checked;		/* sampled rows with every column set */
	int64		held;			/* ... where the sum is 0 */
	bool		has_constant;	/* a nonzero sum is the majority's */
	double		constant;		/* ... that sum */
	int64		held_constant;	/* ... and the rows where the sum is it */
} LinearScreen;

/*
 * Screen sum(signs[j] * col[j]) on the sample.  holds[s] is set for the
 * sampled rows where every column is set and the sum is 0 (up to rounding:
 * the columns are compared as doubles here, exactly later).  A constant
 * term must hold on min_share (at least half) of the rows, so it is the
 * majority's sum, found in one more pass by the Boyer-Moore vote;
 * holds_constant[s] is set where the sum is that constant.
 */
static void
sample_relation(Profile *p, int *cols, int *signs, int k, bool *complete,
				bool *holds, bool *holds_constant, double *sums, double *scales,
				LinearScreen *sc)
{
	double		vote = 0;
	int64		votes = 0;

	memset(sc, 0, sizeof(LinearScreen));
	for (int s = 0; s < p->nsampled; s++)
	{
		double		sum = 0,
					scale = 1;

		complete[s] = true;
		holds[s] = holds_constant[s] = false;
		for (int j = 0; j < k; j++)
		{
			if (p->snull[s * p->ncols + cols[j]])
			{
				complete[s] = false;
				break;
			}
			sum += signs[j] * p->snum[s * p->ncols + cols[j]];
			scale += fabs(p->snum[s * p->ncols + cols[j]]);
		}
		if (!complete[s])
			continue;
		sums[s] = sum;
		scales[s] = scale;
		sc->checked++;
		if (fabs(sum) <= 1e-9 * scale)
		{
			holds[s] = true;
			sc->held++;
		}
		if (votes == 0)
		{
			vote = sum;
			votes = 1;
		}
		else if (fabs(sum - vote) <= 1e-9 * scale)
			votes++;
		else
			votes--;
	}
	if (votes == 0 || sc->held >= sc->checked / 2)
		return;
	for (int s = 0; s < p->nsampled; s++)
		if (complete[s] && fabs(sums[s] - vote) <= 1e-9 * scales[s])
		{
			holds_constant[s] = true;
			sc->held_constant++;
		}
	sc->has_constant = true;
	sc->constant = vote;
}

/*
 * The constant term as an SQL literal, without sign: the shortest decimal
 * that is the sampled sum up to rounding.  Exact types verify it exactly,
 * so a literal that is not the true constant is not proposed.
 */
static char *
constant_literal(double r)
{
	double		a = fabs(r);

	for (int d = 0; d <= 15; d++)
	{
		char	   *s = psprintf("%.*f", d, a);

		if (fabs(strtod(s, NULL) - a) <= 1e-9 * (1 + a))
			return s;
		pfree(s);
	}
	return psprintf("%.17g", a);
}

/*
 * Verify sum(signs[j] * col[j]) = r over the whole relation (only on the
 * rows where column cc is cv, when cc is given) and propose it, written as
 * "y = a + b - c [+ constant]" with y = cols[y].  constant is NULL for
 * r = 0, otherwise the literal of |r| with rsign the sign of r.  Returns
 * whether it held.
 */
static bool
propose_linear(Profile *p, List **props, int *cols, int *signs, int k, int y,
			   const char *constant, int rsign, ColumnProfile *cc, const char *cv)
{
	StringInfoData rhs;
	StringInfoData notnull;
	ColumnProfile *cy = &p->cols[cols[y]];
	bool		exact = true;
	bool		nullable = false;
	char	   *holds;
	int64		checked,
				holding;
	int			first = 1;

	initStringInfo(&rhs);
	initStringInfo(&notnull);
	for (int j = 0; j < k; j++)
	{
		ColumnProfile *c = &p->cols[cols[j]];

		exact &= !c->is_float;
		nullable |= c->nulls > 0;
		appendStringInfo(&notnull, "%s%s IS NOT NULL", j > 0 ? " AND " : "", c->qname);
		if (j == y)
			continue;
		/* y = signs[y] * r - signs[y] * sum(signs[j] * x_j) */
		if (-signs[y] * signs[j] > 0)
			appendStringInfo(&rhs, "%s%s", first ? "" : " + ", c->qname);
		else
			appendStringInfo(&rhs, "%s%s", first ? "-" : " - ", c->qname);
		first = 0;
	}
	if (constant != NULL)
		appendStringInfo(&rhs, " %c %s", signs[y] * rsign > 0 ? '+' : '-', constant);
	holds = exact ? psprintf("%s = %s", cy->qname, rhs.data) :
		psprintf("abs(%s - (%s)) <= 1e-6", cy->qname, rhs.data);

	if (!verify_allowed(p))
		return false;
	if (cc == NULL)
		checked = count_query(psprintf("SELECT pg_catalog.count(*) FILTER (WHERE %s),"
									   " pg_catalog.count(*) FILTER (WHERE %s AND %s) FROM %s",
									   notnull.data, notnull.data, holds, p->relsql),
							  0, NULL, NULL, &holding);
	else
	{
		Oid			type = TEXTOID;
		Datum		arg = CStringGetTextDatum(cv);
		char	   *cond = psprintf("%s::pg_catalog.text OPERATOR(pg_catalog.=) $1 AND %s",
									cc->qname, notnull.data);

		checked = count_query(psprintf("SELECT pg_catalog.count(*) FILTER (WHERE %s),"
									   " pg_catalog.count(*) FILTER (WHERE %s AND %s) FROM %s",
									   cond, cond, holds, p->relsql),
							  1, &type, &arg, &holding);
	}
	if (checked < 10 || holding < p->min_share * checked)
		return false;

	if (cc == NULL)
		propose(props, holding == checked ? "fail" : "warn", "linear",
				psprintf("%s_adds_up", name_part(cy->name)),
				nullable ? psprintf("NOT COALESCE(NOT (%s), FALSE)", holds) : holds,
				psprintf("%s = %s holds on %.2f%% of the rows where all are set.",
						 cy->name, rhs.data, 100.0 * holding / checked),
				checked, holding);
	else
	{
		char	   *lit = quote_literal_cstr(cv);

		/* The form teams write by hand: NOT COALESCE((condition AND broken), FALSE). */
		propose(props, holding == checked ? "fail" : "warn", "conditional_linear",
				psprintf("%s_adds_up_when_%s_%s", name_part(cy->name), name_part(cc->name),
						 name_part(cv)),
				exact ? psprintf("NOT COALESCE((%s = %s AND %s <> %s), FALSE)",
								 cc->qname, lit, cy->qname, rhs.data) :
				psprintf("NOT COALESCE((%s = %s AND abs(%s - (%s)) > 1e-6), FALSE)",
						 cc->qname, lit, cy->qname, rhs.data),
				psprintf("When %s is %s, %s = %s holds on %.2f%% of the rows where all are set.",
						 cc->name, lit, cy->name, rhs.data, 100.0 * holding / checked),
				checked, holding);
	}
	return true;
}

/*
 * The relations found overall, as rows of coefficients over the candidate
 * columns and the constant, in echelon form: a candidate that is a linear
 * combination of them (net_flat = net + fee - 1.5 after net = amount - fee
 * and net_flat = amount - 1.5) says nothing new and is not proposed.
 */
typedef struct LinearBasis
{
	int			width;			/* candidates + 1 (the constant) */
	int			rows;
	int			pivot[MAX_TERMS + 1];
	double		row[MAX_TERMS + 1][MAX_TERMS + 1];
} LinearBasis;

/* Reduce v by the basis; add it and return true if it is independent. */
static bool
basis_add(LinearBasis *b, double *v)
{
	int			best = -1;
	double		size = 1;

	for (int j = 0; j < b->width; j++)
		size = Max(size, fabs(v[j]));
	for (int i = 0; i < b->rows; i++)
	{
		double		f = v[b->pivot[i]];

		for (int j = 0; j < b->width; j++)
			v[j] -= f * b->row[i][j];
	}
	for (int j = 0; j < b->width; j++)
		if (fabs(v[j]) > 1e-9 * size && (best < 0 || fabs(v[j]) > fabs(v[best])))
			best = j;
	if (best < 0)
		return false;
	for (int j = 0; j < b->width; j++)
		b->row[b->rows][j] = v[j] / v[best];
	b->pivot[b->rows++] = best;
	return true;
}

/* A relation found within one category: the category and its coefficients. */
typedef struct ConditionalRelation
{
	int			column;
	uint32		hash;
	double		v[MAX_TERMS + 1];
} ConditionalRelation;

/*
 * Whether every low-cardinality term (low[j]) earns its place on the
 * sampled rows where the relation holds (and column ci has the value of
 * hash, when ci >= 0): a term that is 0 on all but 1 - min_share of them
 * adds nothing (a flag that is 0 on nearly every row fits any relation,
 * holding where it is 0).
 */
static bool
low_terms_needed(Profile *p, int *cols, bool *low, int k, bool *holds, int ci, uint32 hash)
{
	for (int j = 0; j < k; j++)
	{
		int64		rows = 0,
					nonzero = 0;

		if (!low[j])
			continue;
		for (int s = 0; s < p->nsampled; s++)
		{
			if (!holds[s] ||
				(ci >= 0 && (p->snull[s * p->ncols + ci] || p->shash[s * p->ncols + ci] != hash)))
				continue;
			rows++;
			nonzero += p->snum[s * p->ncols + cols[j]] != 0;
		}
		if (nonzero <= (1 - p->min_share) * rows)
			return false;
	}
	return true;
}

/*
 * A relation that fails overall may hold within one category (a balance
 * that adds up one way for credits and another for debits): try each value
 * of each categorical column on the sampled rows where it holds.
 */
static void
propose_conditional_linear(Profile *p, List **props, int *cols, int *signs, bool *low,
						   int *bits, int k, int y, bool *complete, bool *holds,
						   const LinearBasis *basis, List **conditional)
{
	for (int ci = 0; ci < p->ncols && list_length(*conditional) < MAX_CONDITIONAL; ci++)
	{
		ColumnProfile *cc = &p->cols[ci];
		bool		member = false;

		for (int j = 0; j < k; j++)
			member |= cols[j] == ci;
		if (member || !is_categorical(p, cc))
			continue;
		for (int v = 0; v < cc->ntop && list_length(*conditional) < MAX_CONDITIONAL; v++)
		{
			int64		support = 0,
						held = 0;
			LinearBasis within;
			double		coef[MAX_TERMS + 1] = {0};
			double		vec[MAX_TERMS + 1];
			ListCell   *lc;

			for (int s = 0; s < p->nsampled; s++)
			{
				if (!complete[s] || p->snull[s * p->ncols + ci] ||
					p->shash[s * p->ncols + ci] != cc->top[v].hash)
					continue;
				support++;
				held += holds[s];
			}
			if (support < MIN_IMPLICATION_SUPPORT || held < p->min_share * support ||
				!low_terms_needed(p, cols, low, k, holds, ci, cc->top[v].hash))
				continue;

			/*
			 * Not implied by the relations found overall and in this
			 * category (closing = opening + net when closing = opening +
			 * amount - fee is known, with net = amount - fee).
			 */
			within = *basis;
			foreach(lc, *conditional)
			{
				ConditionalRelation *o = lfirst(lc);
				double		ov[MAX_TERMS + 1];

				memcpy(ov, o->v, sizeof(ov));
				if (o->column == ci && o->hash == cc->top[v].hash)
					basis_add(&within, ov);
			}
			for (int j = 0; j < k; j++)
				coef[bits[j]] = signs[j];
			memcpy(vec, coef, sizeof(vec));
			if (!basis_add(&within, vec))
				continue;
			if (propose_linear(p, props, cols, signs, k, y, NULL, 0, cc, cc->top[v].value))
			{
				ConditionalRelation *cr = palloc(sizeof(ConditionalRelation));

				memcpy(cr->v, coef, sizeof(coef));
				cr->column = ci;
				cr->hash = cc->top[v].hash;
				*conditional = lappend(*conditional, cr);
			}
		}
	}
}

/*
 * Linear relations sum(±x_j) = r among two to four numeric columns, at
 * least two of them high-cardinality (so that columns of a few values
 * cannot make a relation on their own: 0 + 0 - 0 = 0 on most rows of three
 * flags), the others low-cardinality (a fee with a few values); r is 0 or
 * a constant the data shows on min_share of the sampled rows.  A constant
 * column is no term: it is the constant term, so a relation needs two
 * varying columns.
 */
static void
propose_linear_rules(Profile *p, List **props)
{
	int			cand[MAX_TERMS];
	int			n = 0,
				nhigh = 0,
				nlow = 0;
	uint32		highmask = 0;
	List	   *found = NIL;	/* bitmasks over cand of relations found */
	LinearBasis basis;
	bool	   *complete = palloc(sizeof(bool) * Max(p->nsampled, 1));
	bool	   *holds = palloc(sizeof(bool) * Max(p->nsampled, 1));
	bool	   *holds_constant = palloc(sizeof(bool) * Max(p->nsampled, 1));
	double	   *sums = palloc(sizeof(double) * Max(p->nsampled, 1));
	double	   *scales = palloc(sizeof(double) * Max(p->nsampled, 1));
	List	   *conditional = NIL;	/* ConditionalRelation */

	/* In table order: the last high-cardinality column is the left-hand side. */
	for (int i = 0; i < p->ncols; i++)
	{
		ColumnProfile *c = &p->cols[i];

		if (!is_linear_term(c))
			continue;
		if (is_high_cardinality(p, c) ? nhigh++ < MAX_LINEAR_COLUMNS : nlow++ < MAX_LOW_CARD_TERMS)
		{
			if (is_high_cardinality(p, c))
				highmask |= 1U << n;
			cand[n++] = i;
		}
	}
	memset(&basis, 0, sizeof(basis));
	basis.width = n + 1;

	for (int k = 2; k <= 4; k++)
	{
		/* every k-subset of the candidates, in column order */
		for (uint32 mask = 0; mask < (1U << n); mask++)
		{
			int			cols[4];
			int			bits[4];
			bool		low[4];
			int			m = 0;
			int			y = 0;
			bool		contains = false;
			ListCell   *lc;

			if (pg_popcount32(mask) != k || pg_popcount32(mask & highmask) < 2)
				continue;
			CHECK_FOR_INTERRUPTS();
			foreach(lc, found)
				if (((uint32) lfirst_int(lc) & mask) == (uint32) lfirst_int(lc))
					contains = true;
			if (contains)
				continue;
			for (int b = 0; b < n; b++)
				if (mask & (1U << b))
				{
					if (highmask & (1U << b))
						y = m;
					low[m] = !(highmask & (1U << b));
					bits[m] = b;
					cols[m++] = cand[b];
				}
			/* signs: the first +1, the others every combination */
			for (int sm = 0; sm < (1 << (k - 1)); sm++)
			{
				int			signs[4];
				LinearScreen sc;
				double		v[MAX_TERMS + 1];
				double		r;
				char	   *constant = NULL;
				bool	   *rows = holds;
				bool		split;

				signs[0] = 1;
				for (int j = 1; j < k; j++)
					signs[j] = (sm & (1 << (j - 1))) ? -1 : 1;
				sample_relation(p, cols, signs, k, complete, holds, holds_constant, sums, scales,
								&sc);
				if (sc.checked < 10)
					continue;

				/*
				 * Holding on a category's rows, it holds on their share at
				 * least; holding on nearly every row, it is a near-rule, not
				 * one per category.
				 */
				split = k >= 3 && sc.held >= 0.05 * sc.checked && sc.held < 0.9 * sc.checked;
				if (sc.held >= p->min_share * sc.checked)
					r = 0;
				else if (sc.has_constant && sc.held_constant >= p->min_share * sc.checked)
				{
					r = sc.constant;
					constant = constant_literal(r);
					rows = holds_constant;
					if (strtod(constant, NULL) == 0)
						continue;	/* 0 up to rounding: the first case */
				}
				else
				{
					if (split)
						propose_conditional_linear(p, props, cols, signs, low, bits, k, y,
												   complete, holds, &basis, &conditional);
					continue;
				}
				if (!low_terms_needed(p, cols, low, k, rows, -1, 0))
					continue;
				memset(v, 0, sizeof(v));
				for (int j = 0; j < k; j++)
					v[bits[j]] = signs[j];
				v[n] = -r;
				if (!basis_add(&basis, v))
				{
					/* Implied by the relations found: no proposal, no supersets. */
					found = lappend_int(found, (int) mask);
					break;
				}
				if (propose_linear(p, props, cols, signs, k, y, constant, r > 0 ? 1 : -1,
								   NULL, NULL))
				{
					found = lappend_int(found, (int) mask);
					break;
				}
				/* Not verified: forget it, and try it per category as before. */
				basis.rows--;
				if (split)
					propose_conditional_linear(p, props, cols, signs, low, bits, k, y,
											   complete, holds, &basis, &conditional);
			}
		}
	}
}

/* ---- implications between categorical columns ---- */

static int
top_index(ColumnProfile *c, uint32 hash)
{
	for (int i = 0; i < c->ntop; i++)
		if (c->top[i].hash == hash)
			return i;
	return -1;
}

static void
propose_implications(Profile *p, List **props)
{
	int			nfound = 0;

	for (int a = 0; a < p->ncols; a++)
	{
		ColumnProfile *ca = &p->cols[a];

		if (!is_categorical(p, ca))
			continue;
		for (int b = 0; b < p->ncols && nfound < MAX_IMPLICATIONS; b++)
		{
			ColumnProfile *cb = &p->cols[b];

			if (a == b || !is_categorical(p, cb))
				continue;
			CHECK_FOR_INTERRUPTS();
			for (int va = 0; va < ca->ntop && nfound < MAX_IMPLICATIONS; va++)
			{
				int64		counts[TOP_K + 1] = {0};
				int64		support = 0;
				int			best = 0;

				for (int s = 0; s < p->nsampled; s++)
				{
					int			vb;

					if (p->snull[s * p->ncols + a] ||
						p->shash[s * p->ncols + a] != ca->top[va].hash)
						continue;
					support++;
					vb = p->snull[s * p->ncols + b] ? TOP_K :
						top_index(cb, p->shash[s * p->ncols + b]);
					if (vb >= 0)
						counts[vb]++;
				}
				if (support < MIN_IMPLICATION_SUPPORT)
					continue;
				for (int vb = 1; vb < cb->ntop; vb++)
					if (counts[vb] > counts[best])
						best = vb;
				/* It must hold, and say more than B's overall majority does. */
				if (counts[best] < p->min_share * support ||
					cb->top[best].count >= 0.9 * p->rows ||
					ca->top[va].count >= 0.5 * p->rows)
					continue;
				{
					Oid			types[2] = {TEXTOID, TEXTOID};
					Datum		args[2];
					int64		checked,
								holding;
					char	   *lit_a = quote_literal_cstr(ca->top[va].value);
					char	   *lit_b = quote_literal_cstr(cb->top[best].value);

					if (!verify_allowed(p))
						continue;
					args[0] = CStringGetTextDatum(ca->top[va].value);
					args[1] = CStringGetTextDatum(cb->top[best].value);
					checked = count_query(psprintf("SELECT pg_catalog.count(*) FILTER (WHERE %s::pg_catalog.text OPERATOR(pg_catalog.=) $1),"
												   " pg_catalog.count(*) FILTER (WHERE %s::pg_catalog.text OPERATOR(pg_catalog.=) $1"
												   " AND %s::pg_catalog.text OPERATOR(pg_catalog.=) $2) FROM %s",
												   ca->qname, ca->qname, cb->qname, p->relsql),
										  2, types, args, &holding);
					if (checked == 0 || holding < p->min_share * checked)
						continue;
					propose(props, holding == checked ? "fail" : "warn", "implication",
							psprintf("%s_%s_implies_%s_%s", name_part(ca->name),
									 name_part(ca->top[va].value), name_part(cb->name),
									 name_part(cb->top[best].value)),
							psprintf("%s IS DISTINCT FROM %s OR %s IS NOT DISTINCT FROM %s",
									 ca->qname, lit_a, cb->qname, lit_b),
							psprintf("When %s is %s, %s is %s: on " INT64_FORMAT " of " INT64_FORMAT " such rows (%.2f%%); overall %s is %s on %.2f%% of the rows.",
									 ca->name, lit_a, cb->name, lit_b, holding, checked,
									 100.0 * holding / checked, cb->name, lit_b,
									 100.0 * cb->top[best].count / p->rows),
							checked, holding);
					nfound++;
				}
			}
		}
	}
}

/* ---- every proposal runs ---- */

typedef struct ProposalCheck
{
	Profile    *p;
	Proposal   *pr;
} ProposalCheck;

/*
 * Plan the proposal as reconcile_check would, and run a row rule on the
 * first rows (so that what only fails at run time, such as a regular
 * expression that does not compile, fails here).
 */
static void
try_proposal(void *arg)
{
	ProposalCheck *pc = arg;
	Proposal   *pr = pc->pr;
	Rule		r;

	memset(&r, 0, sizeof(r));
	r.name = pr->name;
	r.text = pr->text;
	if (strcmp(pr->section, "dataset_checks") == 0)
	{
		r.severity = RULE_DATASET;
		SPI_freeplan(rules_prepare_dataset(&r, rules_dataset_statement(&r, "", pc->p->relsql, "v"),
										   0, NULL));
		return;
	}
	r.severity = RULE_WARN;
	rules_plan_row_rule(&r, pc->p->relsql, "v", false, NULL);
	if (SPI_execute(psprintf("SELECT pg_catalog.count(*) FROM (SELECT * FROM %s LIMIT 1000) AS v"
							 " WHERE (%s\n) IS NOT TRUE", pc->p->relsql, pr->text),
					true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not run proposed rule \"%s\"", pr->name);
}

/* Leave out, with a notice, every proposal that does not plan and run. */
static List *
keep_running_proposals(Profile *p, List *props)
{
	List	   *kept = NIL;
	ListCell   *lc;

	foreach(lc, props)
	{
		Proposal   *pr = lfirst(lc);
		ProposalCheck pc = {p, pr};
		ErrorData  *edata;

		CHECK_FOR_INTERRUPTS();
		edata = run_in_subtransaction(try_proposal, &pc, false);
		if (edata == NULL)
			kept = lappend(kept, pr);
		else if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
			ReThrowError(edata);
		else
			ereport(NOTICE,
					(errmsg("proposed rule \"%s\" left out: %s", pr->name, edata->message)));
	}
	return kept;
}

/* ---- the document ---- */

static Jsonb *
document_jsonb(List *props)
{
	JsonbParseState *st = NULL;
	JsonbValue *res;
	static const char *const sections[] = {"fail", "warn", "drop"};
	ListCell   *lc;

	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	for (int s = 0; s < 3; s++)
	{
		jsonb_push_key(&st, sections[s]);
		pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
		foreach(lc, props)
		{
			Proposal   *pr = lfirst(lc);

			if (strcmp(pr->section, sections[s]) == 0)
				jsonb_push_string_field(&st, pr->name, pr->text);
		}
		pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	}
	jsonb_push_key(&st, "dataset_checks");
	pushJsonbValue(&st, WJB_BEGIN_ARRAY, NULL);
	foreach(lc, props)
	{
		Proposal   *pr = lfirst(lc);
		ListCell   *cc;

		if (strcmp(pr->section, "dataset_checks") != 0)
			continue;
		pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
		jsonb_push_string_field(&st, "name", pr->name);
		jsonb_push_string_field(&st, "description", pr->description);
		jsonb_push_key(&st, "columns");
		pushJsonbValue(&st, WJB_BEGIN_ARRAY, NULL);
		foreach(cc, pr->columns)
			jsonb_push_string(&st, WJB_ELEM, lfirst(cc));
		pushJsonbValue(&st, WJB_END_ARRAY, NULL);
		jsonb_push_string_field(&st, "sql", pr->text);
		pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	}
	pushJsonbValue(&st, WJB_END_ARRAY, NULL);
	jsonb_push_key(&st, "evidence");
	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	foreach(lc, props)
	{
		Proposal   *pr = lfirst(lc);
		char	   *share = psprintf("%.4f", pr->checked > 0 ? (double) pr->holding / pr->checked : 1.0);

		jsonb_push_key(&st, pr->name);
		pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
		jsonb_push_string_field(&st, "kind", pr->kind);
		jsonb_push_string_field(&st, "description", pr->description);
		jsonb_push_int64_field(&st, "rows_checked", pr->checked);
		jsonb_push_int64_field(&st, "rows_holding", pr->holding);
		jsonb_push_numeric_field(&st, "share",
								 DatumGetNumeric(DirectFunctionCall3(numeric_in, CStringGetDatum(share),
																	 ObjectIdGetDatum(InvalidOid),
																	 Int32GetDatum(-1))));
		pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	}
	pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	res = pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	return JsonbValueToJsonb(res);
}

static double
option_number(JsonbValue *v, const char *key, double lo, double hi)
{
	double		d = -1;

	if (v->type == jbvNumeric)
		d = DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(v->val.numeric)));
	if (v->type != jbvNumeric || d < lo || d > hi)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"%s\" must be a number between %g and %g", key, lo, hi)));
	return d;
}

static void
parse_discover_options(Profile *p, Jsonb *options)
{
	JsonbIterator *it;
	JsonbValue	v;
	char	   *key = NULL;

	p->max_values = 10;
	p->min_share = 0.99;
	p->sample_size = 5000;
	if (options == NULL)
		return;
	if (JB_ROOT_IS_SCALAR(options) || !JB_ROOT_IS_OBJECT(options))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("options must be a JSON object")));
	it = JsonbIteratorInit(&options->root);
	while (jsonb_object_next(&it, &key, &v))
	{
		if (strcmp(key, "max_values") == 0)
			p->max_values = (int) option_number(&v, key, 1, TOP_K);
		else if (strcmp(key, "min_share") == 0)
			p->min_share = option_number(&v, key, 0.5, 1);
		else if (strcmp(key, "sample_rows") == 0)
			p->sample_size = (int) option_number(&v, key, 100, 100000);
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown option \"%s\"", key),
					 errhint("The options are \"max_values\", \"min_share\" and \"sample_rows\".")));
	}
}

/*
 * reconcile_discover_rules(relation regclass, options jsonb DEFAULT '{}')
 *		Profiles a relation's columns; returns a rules document (jsonb) of the
 *		rules its data satisfies, ready for reconcile_check or reconcile_set_rules.
 */
Datum
reconcile_discover_rules(PG_FUNCTION_ARGS)
{
	MemoryContext cxt = CurrentMemoryContext;
	Profile    *p;
	Relation	rel;
	TupleDesc	desc;
	StringInfoData sql;
	SPIExecuteOptions opts;
	List	   *props = NIL;
	RulesEnv	env;
	Datum		result;

	check_arg_not_null(fcinfo, 0, "relation", "reconcile_discover_rules");
	p = palloc0(sizeof(Profile));
	p->relid = PG_GETARG_OID(0);
	p->relsql = relid_quoted_name(p->relid);
	parse_discover_options(p, PG_ARGISNULL(1) ? NULL : PG_GETARG_JSONB_P(1));
	p->cxt = AllocSetContextCreate(cxt, "reconcile profile", ALLOCSET_DEFAULT_SIZES);
	p->rowcxt = AllocSetContextCreate(cxt, "reconcile profile row", ALLOCSET_DEFAULT_SIZES);
	pg_prng_seed(&p->prng, 20261129);

	rel = relation_open(p->relid, AccessShareLock);
	desc = RelationGetDescr(rel);
	p->cols = palloc0(sizeof(ColumnProfile) * Max(desc->natts, 1));
	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		ColumnProfile *c;
		Oid			out;
		bool		varlena;

		if (att->attisdropped)
			continue;
		c = &p->cols[p->ncols];
		c->name = pstrdup(NameStr(att->attname));
		c->qname = quote_identifier(c->name);
		c->type = getBaseType(att->atttypid);
		c->numeric = c->type == INT2OID || c->type == INT4OID || c->type == INT8OID ||
			c->type == FLOAT4OID || c->type == FLOAT8OID || c->type == NUMERICOID;
		c->is_float = c->type == FLOAT4OID || c->type == FLOAT8OID;
		c->textual = c->type == TEXTOID || c->type == VARCHAROID || c->type == BPCHAROID;
		c->shape_ok = true;
		c->has_eq = OidIsValid(lookup_type_cache(att->atttypid, TYPECACHE_EQ_OPR)->eq_opr);
		getTypeOutputInfo(att->atttypid, &out, &varlena);
		fmgr_info(out, &c->out);
		appendStringInfo(&sql, "%s%s", p->ncols > 0 ? ", " : "", c->qname);
		p->ncols++;
	}
	appendStringInfo(&sql, " FROM %s", p->relsql);
	relation_close(rel, AccessShareLock);

	/* The sample stays within work_mem: 13 bytes per sampled value. */
	p->sample_size = Min(p->sample_size,
						 Max(100, (int) Min((double) work_mem * 1024.0 / (13.0 * Max(p->ncols, 1)),
											(double) INT_MAX)));
	p->snum = MemoryContextAllocZero(p->cxt, sizeof(double) * p->sample_size * Max(p->ncols, 1));
	p->shash = MemoryContextAllocZero(p->cxt, sizeof(uint32) * p->sample_size * Max(p->ncols, 1));
	p->snull = MemoryContextAllocZero(p->cxt, sizeof(bool) * p->sample_size * Max(p->ncols, 1));
	receiver_init(&p->pub, profile_receive);

	SPI_connect();
	MemoryContextSwitchTo(cxt);
	/*
	 * Profiling reads, never writes, with the caller's rights, under the
	 * rules' search_path: its own queries use the proposals' text.
	 */
	rules_env_enter(&env, InvalidOid);
	{
		memset(&opts, 0, sizeof(opts));
		opts.read_only = true;
		opts.dest = (DestReceiver *) p;
		if (p->ncols > 0 && SPI_execute_extended(sql.data, &opts) < 0)
			elog(ERROR, "could not scan relation %s", p->relsql);
		if (p->rows > 0)
		{
			propose_column_rules(p, &props);
			propose_linear_rules(p, &props);
			propose_implications(p, &props);
		}
		props = keep_running_proposals(p, props);
	}
	elog(DEBUG1, "reconcile_discover_rules: %d counting queries verified candidates over %s",
		 p->nverified, p->relsql);
	if (p->verify_capped)
		ereport(NOTICE,
				(errmsg("reconcile_discover_rules verified at most %d candidate rules of %s",
						MAX_VERIFICATIONS, p->relsql),
				 errdetail("The sample suggested more cross-column relations and implications than that; the rest were not checked against the whole relation and are not proposed."),
				 errhint("Profile fewer columns at a time, through a view, to look for the others.")));
	rules_env_leave(&env);
	/* SPI calls leave SPI's own context current; the result must outlive it. */
	MemoryContextSwitchTo(cxt);
	result = JsonbPGetDatum(document_jsonb(props));
	SPI_finish();
	PG_RETURN_DATUM(result);
}
