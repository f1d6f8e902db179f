/*
 * rules_anomaly.c
 *		Anomaly rules: a measure of the relation (row_count, null_share,
 *		distinct_count, freshness) held to absolute bounds or to the check
 *		job's own history.
 *
 * An anomaly rule is a rule object under "fail" or "warn" with "kind"
 * instead of "sql":
 *		{"rows_usual": {"kind": "row_count", "within_sigma": 3, "runs": 14}}
 * With "within_sigma" k and "runs" n it passes when the value measured now
 * is within k sample standard deviations of the mean of the values the
 * same rule of the same check job measured in its last n runs; fewer than
 * n such runs is SKIPPED, neither a pass nor a failure.  With "min" and/or
 * "max" it passes when the value lies within them, history or not.  Every
 * run records the value measured (check_results.observed), SKIPPED runs
 * included, so the history builds up by itself.  Batches do not run
 * anomaly rules: they measure a relation, not rows.
 */
#include "postgres.h"

#include <math.h>

#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/numeric.h"

#include "common/jsonread.h"
#include "rules.h"
#include "common/state_schema.h"

static const char *const anomaly_kind_names[] = {"row_count", "null_share", "distinct_count", "freshness"};

static void
refuse_anomaly(const char *where, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid rules document: %s %s", where, why),
			 errhint("An anomaly rule has \"kind\" (row_count, null_share, distinct_count or freshness), \"column\" for all but row_count, and \"within_sigma\" with \"runs\", or \"min\" and/or \"max\".")));
}

static RuleAnomaly *
anomaly_of(Rule *r)
{
	if (r->anomaly == NULL)
	{
		r->anomaly = palloc0(sizeof(RuleAnomaly));
		r->anomaly->kind = -1;
	}
	return r->anomaly;
}

static double
jbv_number(JsonbValue *v, const char *key, const char *where)
{
	if (v->type != jbvNumeric)
		refuse_anomaly(where, psprintf("has \"%s\" %s, not a number", key, jbv_type_name(v)));
	return DatumGetFloat8(DirectFunctionCall1(numeric_float8, NumericGetDatum(v->val.numeric)));
}

/* An anomaly rule's key (where names the rule); false when key is not one. */
bool
rules_parse_anomaly_key(Rule *r, const char *key, JsonbValue *v, const char *where)
{
	if (strcmp(key, "kind") == 0)
	{
		char	   *kind;

		if (v->type != jbvString)
			refuse_anomaly(where, psprintf("has \"kind\" %s, not a string", jbv_type_name(v)));
		kind = jbv_string(v);
		for (int k = 0; k < lengthof(anomaly_kind_names); k++)
			if (strcmp(kind, anomaly_kind_names[k]) == 0)
				anomaly_of(r)->kind = k;
		if (anomaly_of(r)->kind < 0)
			refuse_anomaly(where, psprintf("has unknown \"kind\" \"%s\"", kind));
		return true;
	}
	if (strcmp(key, "column") == 0)
	{
		if (v->type != jbvString)
			refuse_anomaly(where, psprintf("has \"column\" %s, not a column name", jbv_type_name(v)));
		anomaly_of(r)->column = jbv_string(v);
		return true;
	}
	if (strcmp(key, "within_sigma") == 0)
	{
		double		k = jbv_number(v, key, where);

		if (!(k > 0))
			refuse_anomaly(where, "has \"within_sigma\" 0 or less: it is a positive number of standard deviations");
		anomaly_of(r)->within_sigma = k;
		return true;
	}
	if (strcmp(key, "runs") == 0)
	{
		double		n = jbv_number(v, key, where);

		if (n != floor(n) || n < 2 || n > 10000)
			refuse_anomaly(where, "has \"runs\" that is not a whole number from 2 to 10000");
		anomaly_of(r)->runs = (int) n;
		return true;
	}
	if (strcmp(key, "min") == 0 || strcmp(key, "max") == 0)
	{
		double		b = jbv_number(v, key, where);

		if (key[1] == 'i')
		{
			anomaly_of(r)->has_min = true;
			anomaly_of(r)->min = b;
		}
		else
		{
			anomaly_of(r)->has_max = true;
			anomaly_of(r)->max = b;
		}
		return true;
	}
	return false;
}

/* After a rule object's keys: is it a complete anomaly rule? */
void
rules_check_anomaly(Rule *r, const char *where)
{
	RuleAnomaly *a = r->anomaly;

	if (a == NULL)
		return;
	if (r->text != NULL)
		refuse_anomaly(where, "has both \"sql\" and anomaly keys: a rule is either a row expression or a measure");
	if (a->kind < 0)
		refuse_anomaly(where, "has anomaly keys but no \"kind\"");
	if (r->severity != RULE_FAIL && r->severity != RULE_WARN)
		refuse_anomaly(where, "is an anomaly rule: those go under \"fail\" or \"warn\" (they measure the relation, they reject no row)");
	if (r->threshold != NULL)
		refuse_anomaly(where, "has row thresholds: an anomaly rule's bounds are \"within_sigma\", \"min\" and \"max\"");
	if (a->kind == ANOMALY_ROW_COUNT && a->column != NULL)
		refuse_anomaly(where, "has \"column\": row_count measures the whole relation");
	if (a->kind != ANOMALY_ROW_COUNT && a->column == NULL)
		refuse_anomaly(where, psprintf("has no \"column\": %s measures one column", anomaly_kind_names[a->kind]));
	if ((a->within_sigma > 0) != (a->runs > 0))
		refuse_anomaly(where, "has one of \"within_sigma\" and \"runs\" without the other");
	if (a->within_sigma == 0 && !a->has_min && !a->has_max)
		refuse_anomaly(where, "has nothing to hold the measure to: give \"within_sigma\" and \"runs\", or \"min\" and/or \"max\"");
	if (a->has_min && a->has_max && a->min > a->max)
		refuse_anomaly(where, "has \"min\" above \"max\"");
}

/* Attached rules run in batches, which measure no relation: leave anomaly rules out. */
void
rules_drop_anomalies(RuleSet *rs)
{
	int			n = 0;

	for (int i = 0; i < rs->nrules; i++)
		if (rs->rules[i].anomaly == NULL)
			rs->rules[n++] = rs->rules[i];
	rs->nrules = n;
}

const char *
rules_anomaly_kind_name(const Rule *r)
{
	return anomaly_kind_names[r->anomaly->kind];
}

/*
 * Measure the relation (relsql, quoted) for rule r, with the caller's
 * rights, read-only (the caller set up the rules' environment).  Returns
 * false when there is no value (null_share of no rows, freshness of a
 * column without values).
 */
bool
rules_anomaly_measure(const Rule *r, Oid relid, const char *relsql, int64 total_rows,
					  double *value)
{
	RuleAnomaly *a = r->anomaly;
	AttrNumber	att;
	Oid			type;
	char	   *col;
	char	   *sql;
	bool		isnull;
	Datum		d;

	if (a->kind == ANOMALY_ROW_COUNT)
	{
		*value = (double) total_rows;
		return true;
	}
	att = get_attnum(relid, a->column);
	if (att == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("column \"%s\" of anomaly rule \"%s\" does not exist in relation %s",
						a->column, r->name, relsql)));
	type = get_atttype(relid, att);
	col = pstrdup(quote_identifier(a->column));
	switch (a->kind)
	{
		case ANOMALY_NULL_SHARE:
			sql = psprintf("SELECT (pg_catalog.count(*) FILTER (WHERE %s IS NULL))::pg_catalog.float8"
						   " OPERATOR(pg_catalog./) NULLIF(pg_catalog.count(*), 0)::pg_catalog.float8"
						   " FROM %s", col, relsql);
			break;
		case ANOMALY_DISTINCT_COUNT:
			sql = psprintf("SELECT pg_catalog.count(DISTINCT %s)::pg_catalog.float8 FROM %s", col, relsql);
			break;
		default:
			if (type != DATEOID && type != TIMESTAMPOID && type != TIMESTAMPTZOID)
				ereport(ERROR,
						(errcode(ERRCODE_DATATYPE_MISMATCH),
						 errmsg("column \"%s\" of anomaly rule \"%s\" is of type %s, not a date or timestamp",
								a->column, r->name, format_type_be(type)),
						 errhint("freshness measures the age of the newest value of a date, timestamp or timestamptz column.")));
			/* A date or timestamp is read in the session's time zone, as a cast reads it. */
			sql = psprintf("SELECT pg_catalog.date_part('epoch', pg_catalog.now() OPERATOR(pg_catalog.-)"
						   " pg_catalog.max(%s)::pg_catalog.timestamptz) FROM %s", col, relsql);
			break;
	}
	if (SPI_execute(sql, true, 1) != SPI_OK_SELECT || SPI_processed != 1)
		elog(ERROR, "could not measure anomaly rule \"%s\"", r->name);
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	if (isnull)
		return false;
	*value = DatumGetFloat8(d);
	return true;
}

/*
 * The values rule r of check job job measured in its last runs (at most
 * the rule's "runs"), newest first; read as the state tables' owner (the
 * caller may run the job, so may read its relation).  Returns how many.
 */
int
rules_anomaly_history(const Rule *r, const char *job, double *values)
{
	Oid			types[3] = {TEXTOID, TEXTOID, INT4OID};
	Datum		args[3];
	int			n;

	if (job == NULL || state_version() < STATE_1_2)
		return 0;
	args[0] = CStringGetTextDatum(job);
	args[1] = CStringGetTextDatum(r->name);
	args[2] = Int32GetDatum(r->anomaly->runs);
	state_query_latest("SELECT x.observed FROM reconcile.check_results x"
					   " JOIN reconcile.check_runs c ON c.run_id OPERATOR(pg_catalog.=) x.run_id"
					   " WHERE c.job OPERATOR(pg_catalog.=) $1 AND x.rule OPERATOR(pg_catalog.=) $2"
					   " AND x.observed IS NOT NULL"
					   " ORDER BY c.started_at DESC, c.run_id DESC LIMIT $3",
					   3, types, args, 0);
	n = (int) SPI_processed;
	for (int i = 0; i < n; i++)
	{
		bool		isnull;

		values[i] = DatumGetFloat8(SPI_getbinval(SPI_tuptable->vals[i], SPI_tuptable->tupdesc,
												 1, &isnull));
	}
	return n;
}

/*
 * Hold a measured value to the rule: its bounds, then its history (n
 * values).  Sets *mean and *stddev (sample) when n >= 2.  The one home of
 * an anomaly rule's verdict.
 */
AnomalyVerdict
rules_anomaly_judge(const Rule *r, bool has_value, double value, const double *history,
					int n, double *mean, double *stddev, char **why)
{
	RuleAnomaly *a = r->anomaly;
	AnomalyVerdict verdict = ANOMALY_PASS;

	*why = NULL;
	if (n >= 2)
	{
		double		sum = 0,
					ss = 0;

		for (int i = 0; i < n; i++)
			sum += history[i];
		*mean = sum / n;
		for (int i = 0; i < n; i++)
			ss += (history[i] - *mean) * (history[i] - *mean);
		*stddev = sqrt(ss / (n - 1));
	}
	if (!has_value)
	{
		/* No newest value: as stale as can be.  No share of no rows: nothing to say. */
		if (a->kind == ANOMALY_FRESHNESS)
		{
			*why = "the column has no value";
			return ANOMALY_FAIL;
		}
		*why = "the relation has no rows to measure";
		return ANOMALY_SKIPPED;
	}
	if (a->has_min && value < a->min)
	{
		*why = psprintf("%g is below min %g", value, a->min);
		return ANOMALY_FAIL;
	}
	if (a->has_max && value > a->max)
	{
		*why = psprintf("%g is above max %g", value, a->max);
		return ANOMALY_FAIL;
	}
	if (a->within_sigma > 0)
	{
		if (n < a->runs)
		{
			*why = psprintf("%d of the %d runs of history needed", n, a->runs);
			return ANOMALY_SKIPPED;
		}
		if (fabs(value - *mean) > a->within_sigma * *stddev)
		{
			*why = psprintf("%g is %s %g sigma of mean %g (sigma %g, %d runs)", value,
							"beyond", a->within_sigma, *mean, *stddev, n);
			verdict = ANOMALY_FAIL;
		}
		else
			*why = psprintf("%g is within %g sigma of mean %g (sigma %g, %d runs)", value,
							a->within_sigma, *mean, *stddev, n);
	}
	else if (a->has_min && a->has_max)
		*why = psprintf("%g is within min %g and max %g", value, a->min, a->max);
	else
		*why = psprintf("%g is within %s %g", value, a->has_min ? "min" : "max",
						a->has_min ? a->min : a->max);
	return verdict;
}
