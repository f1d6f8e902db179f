/*
 * rules_threshold.c
 *		Thresholds: how many violations a rule tolerates before it fails.
 *
 * A row rule written as an object may carry "mostly" (the share of rows
 * that must be valid, as Great Expectations writes it), "max_invalid" (a
 * count of violating rows) and "max_invalid_share" (a share of rows); a
 * dataset check may carry "max_rows" (the rows it may return).  A rule
 * passes when every threshold it carries holds; without any, one violation
 * fails it, as before thresholds existed.  Shares are compared exactly, in
 * numeric: "mostly": 0.99 on 100 rows tolerates exactly 1 violating row.
 *
 * rule_within_threshold is the one home of that decision: reconcile_check,
 * its report, the check history and the batch gate all call it.
 */
#include "postgres.h"

#include <ctype.h>

#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

#include "common/jsonbuild.h"
#include "common/jsonread.h"
#include "rules.h"

static void
refuse_threshold(const char *key, const char *where, const char *why)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid rules document: \"%s\" of %s %s", key, where, why),
			 errhint("\"mostly\" and \"max_invalid_share\" are numbers from 0 to 1, \"max_invalid\" and \"max_rows\" whole numbers of rows, 0 or more.")));
}

static RuleThreshold *
threshold_of(Rule *r)
{
	if (r->threshold == NULL)
	{
		r->threshold = palloc0(sizeof(RuleThreshold));
		r->threshold->max_invalid = -1;
		r->threshold->max_rows = -1;
	}
	return r->threshold;
}

static int
cmp_numeric(Numeric a, Numeric b)
{
	return DatumGetInt32(DirectFunctionCall2(numeric_cmp, NumericGetDatum(a),
											 NumericGetDatum(b)));
}

/* A share: a JSON number from 0 to 1. */
static Numeric
parse_share(const char *key, JsonbValue *v, const char *where)
{
	if (v->type != jbvNumeric)
		refuse_threshold(key, where, psprintf("must be a number from 0 to 1, not %s",
											  jbv_type_name(v)));
	if (cmp_numeric(v->val.numeric, int64_to_numeric(0)) < 0 ||
		cmp_numeric(v->val.numeric, int64_to_numeric(1)) > 0)
		refuse_threshold(key, where, psprintf("must be from 0 to 1, not %s",
											  numeric_normalize(v->val.numeric)));
	return v->val.numeric;
}

/* A count of rows: a whole JSON number, 0 or more. */
static int64
parse_count(const char *key, JsonbValue *v, const char *where)
{
	char	   *text;
	const char *p;

	if (v->type != jbvNumeric)
		refuse_threshold(key, where, psprintf("must be a whole number of rows, not %s",
											  jbv_type_name(v)));
	text = numeric_normalize(v->val.numeric);
	for (p = text; *p != '\0'; p++)
		if (!isdigit((unsigned char) *p))
			break;
	if (*p != '\0' || p == text)
		refuse_threshold(key, where, psprintf("must be a whole number of rows, 0 or more, not %s",
											  text));
	if (strlen(text) > 18)
		refuse_threshold(key, where, psprintf("must be less than 10^18, not %s", text));
	return strtoi64(text, NULL, 10);
}

/*
 * A threshold key of a row rule or dataset check (where names it for
 * errors); false when key is not one.  A key meant for the other kind of
 * rule is refused here, with the reason.
 */
bool
rules_parse_threshold_key(Rule *r, const char *key, JsonbValue *v, const char *where)
{
	bool		dataset = r->severity == RULE_DATASET;

	if (strcmp(key, "mostly") == 0 || strcmp(key, "max_invalid_share") == 0 ||
		strcmp(key, "max_invalid") == 0)
	{
		if (dataset)
			refuse_threshold(key, where, "is a threshold of row rules; a dataset check's threshold is \"max_rows\"");
		if (key[0] == 'm' && key[1] == 'o')
			threshold_of(r)->mostly = parse_share(key, v, where);
		else if (strcmp(key, "max_invalid_share") == 0)
			threshold_of(r)->max_invalid_share = parse_share(key, v, where);
		else
			threshold_of(r)->max_invalid = parse_count(key, v, where);
		return true;
	}
	if (strcmp(key, "max_rows") == 0)
	{
		if (!dataset)
			refuse_threshold(key, where, "is a threshold of dataset checks; a row rule's thresholds are \"mostly\", \"max_invalid\" and \"max_invalid_share\"");
		threshold_of(r)->max_rows = parse_count(key, v, where);
		return true;
	}
	return false;
}

/*
 * Does a rule with invalid violating rows out of total pass its
 * thresholds?  Without thresholds, only when nothing violates it.  On zero
 * rows every share holds.
 */
bool
rule_within_threshold(const Rule *r, int64 invalid, int64 total)
{
	const RuleThreshold *t = r->threshold;

	if (invalid <= 0)
		return true;
	if (t == NULL)
		return false;
	if (t->max_rows >= 0 && invalid > t->max_rows)
		return false;
	if (t->max_invalid >= 0 && invalid > t->max_invalid)
		return false;
	if (t->mostly != NULL)
	{
		/* valid >= mostly * total */
		Numeric		need = numeric_mul_opt_error(t->mostly, int64_to_numeric(total), NULL);

		if (cmp_numeric(int64_to_numeric(total - invalid), need) < 0)
			return false;
	}
	if (t->max_invalid_share != NULL)
	{
		/* invalid <= share * total */
		Numeric		may = numeric_mul_opt_error(t->max_invalid_share, int64_to_numeric(total), NULL);

		if (cmp_numeric(int64_to_numeric(invalid), may) > 0)
			return false;
	}
	return true;
}

/* The thresholds as text for messages ("mostly 0.99, max_invalid 5"); NULL without. */
char *
rule_threshold_text(const Rule *r)
{
	const RuleThreshold *t = r->threshold;
	StringInfoData buf;

	if (t == NULL)
		return NULL;
	initStringInfo(&buf);
	if (t->mostly != NULL)
		appendStringInfo(&buf, "mostly %s", numeric_normalize(t->mostly));
	if (t->max_invalid >= 0)
		appendStringInfo(&buf, "%smax_invalid " INT64_FORMAT, buf.len ? ", " : "", t->max_invalid);
	if (t->max_invalid_share != NULL)
		appendStringInfo(&buf, "%smax_invalid_share %s", buf.len ? ", " : "",
						 numeric_normalize(t->max_invalid_share));
	if (t->max_rows >= 0)
		appendStringInfo(&buf, "%smax_rows " INT64_FORMAT, buf.len ? ", " : "", t->max_rows);
	return buf.data;
}

/* Push the thresholds as a JSON object; returns what closing it returns. */
static JsonbValue *
push_threshold_object(JsonbParseState **st, const Rule *r)
{
	const RuleThreshold *t = r->threshold;

	pushJsonbValue(st, WJB_BEGIN_OBJECT, NULL);
	if (t->mostly != NULL)
		jsonb_push_numeric_field(st, "mostly", t->mostly);
	if (t->max_invalid >= 0)
		jsonb_push_int64_field(st, "max_invalid", t->max_invalid);
	if (t->max_invalid_share != NULL)
		jsonb_push_numeric_field(st, "max_invalid_share", t->max_invalid_share);
	if (t->max_rows >= 0)
		jsonb_push_int64_field(st, "max_rows", t->max_rows);
	return pushJsonbValue(st, WJB_END_OBJECT, NULL);
}

/* The thresholds as a JSON object value (the caller pushed its key). */
void
rules_push_threshold(JsonbParseState **st, const Rule *r)
{
	push_threshold_object(st, r);
}

/* The thresholds as a jsonb object; NULL when the rule has none. */
Jsonb *
rule_threshold_jsonb(const Rule *r)
{
	JsonbParseState *st = NULL;

	if (r->threshold == NULL)
		return NULL;
	return JsonbValueToJsonb(push_threshold_object(&st, r));
}
