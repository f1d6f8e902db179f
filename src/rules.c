/*
 * rules.c
 *		Data-quality rules: parse and check a rules document, run it over a
 *		relation, attach it to a target, and apply it to a batch.
 *
 * A rules document holds row rules (SQL boolean expressions, true when the
 * row is valid) under "fail", "warn" and "drop", and dataset checks (one
 * SELECT each, whose rows are the violations) under "dataset_checks".
 * Rules are code, so before anything runs PostgreSQL's own parser must
 * find a row rule to be exactly one expression and a dataset check to be
 * exactly one plain SELECT; everything then runs with the caller's rights
 * in a read-only transaction state.
 *
 * All row rules of a document are evaluated in one scan of the relation:
 *		SELECT <sample columns>, (r1) IS NOT TRUE, (r2) IS NOT TRUE, ...
 * whose rows are consumed by a DestReceiver that counts violations and
 * keeps a few samples, without materialising the result.  A rule that
 * cannot be planned is left out of the scan and reported as ERROR; when
 * the scan itself fails at run time (division by zero on some row) the
 * rules are split in halves and rescanned, each attempt in a
 * subtransaction, until the failing rules are isolated.
 */
#include "postgres.h"

#include <ctype.h>

#include "access/htup_details.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "optimizer/optimizer.h"
#include "parser/parser.h"
#include "storage/lmgr.h"
#include "tcop/dest.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgrprotos.h"
#include "utils/json.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/numeric.h"
#include "utils/plancache.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"
#include "utils/tuplestore.h"

#include "reconcile.h"
#include "rules.h"

PG_FUNCTION_INFO_V1(reconcile_check);
PG_FUNCTION_INFO_V1(reconcile_check_report);
PG_FUNCTION_INFO_V1(reconcile_set_rules);

const char *const rule_severity_names[] = {"fail", "warn", "drop", "dataset_check"};

#define DEFAULT_SAMPLE 10
#define MAX_RULES_PER_SCAN 1000

/* ---- the document ---- */

static void
refuse_document(const char *msg, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid rules document: %s", msg),
			 detail ? errdetail("%s", detail) : 0,
			 errhint("A rules document is an object with optional keys \"fail\", \"warn\" and \"drop\" (objects mapping rule names to SQL boolean expressions), \"dataset_checks\" (an array of objects with \"name\" and \"sql\") and \"evidence\".")));
}

static char *
jbv_string(JsonbValue *v)
{
	return pnstrdup(v->val.string.val, v->val.string.len);
}

static const char *
jbv_type_name(JsonbValue *v)
{
	switch (v->type)
	{
		case jbvNull:
			return "null";
		case jbvString:
			return "a string";
		case jbvNumeric:
			return "a number";
		case jbvBool:
			return "a boolean";
		case jbvBinary:
			return JsonContainerIsArray(v->val.binary.data) ? "an array" : "an object";
		default:
			return "a JSON value";
	}
}

static bool
jbv_is_object(JsonbValue *v)
{
	return v->type == jbvBinary && JsonContainerIsObject(v->val.binary.data);
}

static bool
jbv_is_array(JsonbValue *v)
{
	return v->type == jbvBinary && JsonContainerIsArray(v->val.binary.data);
}

static int
rule_cmp(const void *a, const void *b)
{
	const Rule *ra = a;
	const Rule *rb = b;

	if (ra->severity != rb->severity)
		return (int) ra->severity - (int) rb->severity;
	if (ra->severity == RULE_DATASET)
		return 0;
	return strcmp(ra->name, rb->name);
}

static const char *
section_name(RuleSeverity sev)
{
	return sev == RULE_DATASET ? "dataset_checks" : rule_severity_names[sev];
}

static void
add_rule(List **rules, const char *name, RuleSeverity sev, char *text,
		 char *description)
{
	ListCell   *lc;
	Rule	   *r;

	if (name[0] == '\0')
		refuse_document(psprintf("a rule under \"%s\" has an empty name", section_name(sev)),
						NULL);
	foreach(lc, *rules)
	{
		Rule	   *other = lfirst(lc);

		if (strcmp(other->name, name) == 0)
			refuse_document(psprintf("duplicate rule name \"%s\"", name),
							psprintf("Rule names are unique across \"fail\", \"warn\", \"drop\" and \"dataset_checks\"; \"%s\" appears under \"%s\" and \"%s\".",
									 name, section_name(other->severity), section_name(sev)));
	}
	r = palloc0(sizeof(Rule));
	r->name = pstrdup(name);
	r->severity = sev;
	r->text = text;
	r->description = description;
	*rules = lappend(*rules, r);
}

static void
parse_row_section(List **rules, RuleSeverity sev, JsonbValue *section)
{
	const char *key = rule_severity_names[sev];
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *name = NULL;

	if (!jbv_is_object(section))
		refuse_document(psprintf("\"%s\" must be an object mapping rule names to SQL boolean expressions, not %s",
								 key, jbv_type_name(section)), NULL);
	it = JsonbIteratorInit(section->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
			name = jbv_string(&v);
		else if (tok == WJB_VALUE)
		{
			if (v.type != jbvString)
				refuse_document(psprintf("rule \"%s\" under \"%s\" must be a string holding a SQL boolean expression, not %s",
										 name, key, jbv_type_name(&v)), NULL);
			add_rule(rules, name, sev, jbv_string(&v), NULL);
		}
	}
}

static void
parse_dataset_check(List **rules, int index, JsonbValue *check)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *key = NULL;
	char	   *name = NULL;
	char	   *sql = NULL;
	char	   *description = NULL;
	const char *where = psprintf("dataset_checks[%d]", index);

	if (!jbv_is_object(check))
		refuse_document(psprintf("%s must be an object with \"name\" and \"sql\", not %s",
								 where, jbv_type_name(check)), NULL);
	it = JsonbIteratorInit(check->val.binary.data);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
		{
			key = jbv_string(&v);
			continue;
		}
		if (tok != WJB_VALUE)
			continue;
		if (strcmp(key, "name") == 0 || strcmp(key, "sql") == 0 ||
			strcmp(key, "description") == 0)
		{
			if (v.type != jbvString)
				refuse_document(psprintf("\"%s\" of %s must be a string, not %s",
										 key, where, jbv_type_name(&v)), NULL);
			if (key[0] == 'n')
				name = jbv_string(&v);
			else if (key[0] == 's')
				sql = jbv_string(&v);
			else
				description = jbv_string(&v);
		}
		else if (strcmp(key, "columns") == 0)
		{
			JsonbIterator *ait;
			JsonbValue	av;

			if (!jbv_is_array(&v))
				refuse_document(psprintf("\"columns\" of %s must be an array of column names, not %s",
										 where, jbv_type_name(&v)), NULL);
			ait = JsonbIteratorInit(v.val.binary.data);
			while ((tok = JsonbIteratorNext(&ait, &av, true)) != WJB_DONE)
				if (tok == WJB_ELEM && av.type != jbvString)
					refuse_document(psprintf("\"columns\" of %s must hold column names as strings, not %s",
											 where, jbv_type_name(&av)), NULL);
		}
		else if (strcmp(key, "evidence") != 0)
			refuse_document(psprintf("unknown key \"%s\" in %s", key, where),
							"A dataset check has the keys \"name\", \"sql\", \"description\", \"columns\" and \"evidence\".");
	}
	if (name == NULL)
		refuse_document(psprintf("%s has no \"name\"", where), NULL);
	if (sql == NULL)
		refuse_document(psprintf("dataset check \"%s\" has no \"sql\"", name), NULL);
	add_rule(rules, name, RULE_DATASET, sql, description);
}

/* ---- safety: PostgreSQL's parser decides what a rule is ---- */

typedef struct SafetyContext
{
	const char *why;
} SafetyContext;

/* Anything but a plain read is refused, at any depth. */
static bool
unsafe_node_walker(Node *node, SafetyContext *cxt)
{
	if (node == NULL)
		return false;
	if (IsA(node, SelectStmt))
	{
		SelectStmt *s = (SelectStmt *) node;

		if (s->intoClause != NULL)
		{
			cxt->why = "SELECT INTO creates a table";
			return true;
		}
		if (s->lockingClause != NIL)
		{
			cxt->why = "a locking clause (FOR UPDATE, FOR SHARE) takes row locks";
			return true;
		}
	}
	else if (IsA(node, CommonTableExpr))
	{
		Node	   *q = ((CommonTableExpr *) node)->ctequery;

		if (q != NULL && !IsA(q, SelectStmt))
		{
			cxt->why = "a WITH query that is not a SELECT writes data";
			return true;
		}
	}
	else if (IsA(node, InsertStmt) || IsA(node, UpdateStmt) ||
			 IsA(node, DeleteStmt) || IsA(node, MergeStmt))
	{
		cxt->why = "it writes data";
		return true;
	}
	return raw_expression_tree_walker(node, unsafe_node_walker, (void *) cxt);
}

static List *
parse_rule_text(Rule *r, const char *sql)
{
	MemoryContext cxt = CurrentMemoryContext;
	List	   *volatile parsed = NIL;

	PG_TRY();
	{
		parsed = raw_parser(sql, RAW_PARSE_DEFAULT);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_SYNTAX_ERROR),
				 errmsg("%s \"%s\" does not parse",
						r->severity == RULE_DATASET ? "dataset check" : "rule", r->name),
				 errdetail("%s", edata->message),
				 errhint(r->severity == RULE_DATASET ?
						 "A dataset check is exactly one SELECT statement." :
						 "A row rule is exactly one SQL boolean expression over the relation's columns.")));
	}
	PG_END_TRY();
	return parsed;
}

static void
refuse_rule(Rule *r, const char *why)
{
	bool		dataset = r->severity == RULE_DATASET;

	ereport(ERROR,
			(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
			 errmsg("%s \"%s\" is refused: %s",
					dataset ? "dataset check" : "rule", r->name, why),
			 errdetail(dataset ?
					   "A dataset check must be exactly one SELECT statement that only reads." :
					   "A row rule must be exactly one SQL expression that only reads."),
			 errhint("Rules run with the caller's rights, read-only; rewrite the rule as a plain expression or query.")));
}

/*
 * A row rule is embedded as "(<text>\n)" in queries.  It is safe to do so
 * when "SELECT (<text>\n)" parses as one SELECT of one unnamed target and
 * nothing else: the text then cannot close the parenthesis early, open a
 * FROM or WHERE, start a second statement or comment out what follows.
 */
static void
check_row_rule(Rule *r)
{
	List	   *parsed = parse_rule_text(r, psprintf("SELECT (%s\n)", r->text));
	SelectStmt *s;
	ResTarget  *target;
	SafetyContext cxt = {NULL};

	if (list_length(parsed) != 1)
		refuse_rule(r, "it holds more than one statement");
	s = (SelectStmt *) ((RawStmt *) linitial(parsed))->stmt;
	if (!IsA(s, SelectStmt) || s->op != SETOP_NONE ||
		list_length(s->targetList) != 1 || s->distinctClause != NIL ||
		s->intoClause != NULL || s->fromClause != NIL || s->whereClause != NULL ||
		s->groupClause != NIL || s->havingClause != NULL || s->windowClause != NIL ||
		s->valuesLists != NIL || s->sortClause != NIL || s->limitOffset != NULL ||
		s->limitCount != NULL || s->lockingClause != NIL || s->withClause != NULL)
		refuse_rule(r, "it is not exactly one expression");
	target = linitial_node(ResTarget, s->targetList);
	if (target->name != NULL || target->indirection != NIL)
		refuse_rule(r, "it is not exactly one expression");
	if (unsafe_node_walker(target->val, &cxt))
		refuse_rule(r, cxt.why);
}

/* Replace {{TABLE}} and {{DATAFRAME}} by the given text. */
static char *
substitute_table(const char *sql, const char *table)
{
	StringInfoData buf;
	const char *p = sql;

	initStringInfo(&buf);
	while (*p)
	{
		if (strncmp(p, "{{TABLE}}", 9) == 0)
		{
			appendStringInfoString(&buf, table);
			p += 9;
		}
		else if (strncmp(p, "{{DATAFRAME}}", 13) == 0)
		{
			appendStringInfoString(&buf, table);
			p += 13;
		}
		else
			appendStringInfoChar(&buf, *p++);
	}
	return buf.data;
}

/* A dataset check is one SELECT; a final semicolon is tolerated. */
static void
check_dataset_check(Rule *r)
{
	char	   *sql = pstrdup(r->text);
	int			len = strlen(sql);
	List	   *parsed;
	Node	   *stmt;
	SafetyContext cxt = {NULL};

	while (len > 0 && (isspace((unsigned char) sql[len - 1]) || sql[len - 1] == ';'))
		sql[--len] = '\0';
	r->text = sql;
	parsed = parse_rule_text(r, substitute_table(sql, "reconcile_table"));
	if (list_length(parsed) != 1)
		refuse_rule(r, list_length(parsed) == 0 ? "it is empty" : "it holds more than one statement");
	stmt = ((RawStmt *) linitial(parsed))->stmt;
	if (!IsA(stmt, SelectStmt))
		refuse_rule(r, psprintf("it is %s, not a SELECT",
								IsA(stmt, InsertStmt) ? "an INSERT" :
								IsA(stmt, UpdateStmt) ? "an UPDATE" :
								IsA(stmt, DeleteStmt) ? "a DELETE" :
								IsA(stmt, MergeStmt) ? "a MERGE" : "a utility statement"));
	if (unsafe_node_walker(stmt, &cxt))
		refuse_rule(r, cxt.why);
}

/*
 * Parse a rules document and check every rule's shape.  Errors name the
 * offending entry.  Row rules come sorted by severity and name, dataset
 * checks in document order.
 */
RuleSet *
rules_parse(Jsonb *doc)
{
	List	   *rules = NIL;
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *key = NULL;
	RuleSet    *rs = palloc0(sizeof(RuleSet));
	ListCell   *lc;
	int			i = 0;

	if (JB_ROOT_IS_SCALAR(doc) || !JB_ROOT_IS_OBJECT(doc))
		refuse_document(JB_ROOT_IS_SCALAR(doc) ? "it is a scalar, not an object" :
						"it is an array, not an object", NULL);
	it = JsonbIteratorInit(&doc->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
		{
			key = jbv_string(&v);
			continue;
		}
		if (tok != WJB_VALUE)
			continue;
		if (strcmp(key, "fail") == 0)
			parse_row_section(&rules, RULE_FAIL, &v);
		else if (strcmp(key, "warn") == 0)
			parse_row_section(&rules, RULE_WARN, &v);
		else if (strcmp(key, "drop") == 0)
			parse_row_section(&rules, RULE_DROP, &v);
		else if (strcmp(key, "dataset_checks") == 0)
		{
			JsonbIterator *ait;
			JsonbValue	av;
			int			n = 0;

			if (!jbv_is_array(&v))
				refuse_document(psprintf("\"dataset_checks\" must be an array, not %s",
										 jbv_type_name(&v)), NULL);
			ait = JsonbIteratorInit(v.val.binary.data);
			while ((tok = JsonbIteratorNext(&ait, &av, true)) != WJB_DONE)
				if (tok == WJB_ELEM)
					parse_dataset_check(&rules, n++, &av);
		}
		else if (strcmp(key, "evidence") == 0)
		{
			if (!jbv_is_object(&v))
				refuse_document(psprintf("\"evidence\" must be an object, not %s",
										 jbv_type_name(&v)), NULL);
		}
		else
			refuse_document(psprintf("unknown top-level key \"%s\"", key),
							"The top-level keys are \"fail\", \"warn\", \"drop\", \"dataset_checks\" and \"evidence\".");
	}

	/* Row rules first, sorted by severity and name; checks in document order. */
	rs->nrules = list_length(rules);
	rs->rules = palloc0(sizeof(Rule) * Max(rs->nrules, 1));
	foreach(lc, rules)
		if (((Rule *) lfirst(lc))->severity != RULE_DATASET)
			rs->rules[i++] = *(Rule *) lfirst(lc);
	qsort(rs->rules, i, sizeof(Rule), rule_cmp);
	foreach(lc, rules)
		if (((Rule *) lfirst(lc))->severity == RULE_DATASET)
			rs->rules[i++] = *(Rule *) lfirst(lc);

	for (i = 0; i < rs->nrules; i++)
	{
		if (rs->rules[i].severity == RULE_DATASET)
			check_dataset_check(&rs->rules[i]);
		else
			check_row_rule(&rs->rules[i]);
	}
	return rs;
}

char *
rules_quote_relation(Oid relid)
{
	char	   *nsp = get_namespace_name(get_rel_namespace(relid));
	char	   *rel = get_rel_name(relid);

	if (nsp == NULL || rel == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	return quote_qualified_identifier(nsp, rel);
}

/* ---- planning a row rule against a relation ---- */

/*
 * The rule must plan as a boolean expression without aggregates, window
 * functions or set-returning functions (each of which would change the
 * shape of the one scan).  LIMIT 0 runs the executor's permission checks.
 */
static void
refuse_volatile(Rule *r, Node *query)
{
	if (contain_volatile_functions(query))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s \"%s\" calls a volatile function",
						r->severity == RULE_DATASET ? "dataset check" : "rule", r->name),
				 errdetail("Rules attached to a target run inside each batch, which cannot roll back what a volatile function does; only immutable and stable functions may be called."),
				 errhint("Run such rules with reconcile_check, or declare the function STABLE if it only reads.")));
}

static void
plan_row_rule(Rule *r, const char *relsql, const char *alias, bool attached)
{
	char	   *sql = psprintf("SELECT (%s\n) FROM %s AS %s LIMIT 0", r->text, relsql, alias);
	SPIPlanPtr	plan = SPI_prepare(sql, 0, NULL);
	CachedPlanSource *ps;
	Query	   *q;
	Oid			type;

	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for rule \"%s\": %s", r->name,
			 SPI_result_code_string(SPI_result));
	ps = linitial(SPI_plan_get_plan_sources(plan));
	q = linitial_node(Query, ps->query_list);
	if (q->hasAggs || q->hasWindowFuncs || q->hasTargetSRFs)
		ereport(ERROR,
				(errcode(ERRCODE_GROUPING_ERROR),
				 errmsg("rule \"%s\" uses %s", r->name,
						q->hasAggs ? "an aggregate function" :
						q->hasWindowFuncs ? "a window function" : "a set-returning function"),
				 errdetail("A row rule is evaluated on each row on its own."),
				 errhint("Write a check over several rows as a dataset check.")));
	if (attached)
		refuse_volatile(r, (Node *) q);
	type = TupleDescAttr(ps->resultDesc, 0)->atttypid;
	if (type != BOOLOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("rule \"%s\" is of type %s, not boolean", r->name, format_type_be(type)),
				 errhint("A row rule is true when the row is valid.")));
	if (SPI_execute_plan(plan, NULL, NULL, true, 0) < 0)
		elog(ERROR, "could not run rule \"%s\"", r->name);
	SPI_freeplan(plan);
}

/* ---- running a document over a relation ---- */

typedef enum RuleStatus
{
	RS_PENDING,
	RS_PASS,
	RS_FAIL,
	RS_ERROR
} RuleStatus;

typedef struct RuleResult
{
	Rule	   *rule;
	RuleStatus	status;
	int64		invalid;
	int			nsamples;
	StringInfoData samples;		/* JSON array elements, comma separated */
	char	   *error;
} RuleResult;

typedef struct CheckRun
{
	Oid			relid;
	char	   *relsql;			/* quoted schema.relation */
	char	   *alias;			/* quoted relation name, the scan's alias */
	RuleSet    *rules;
	RuleResult *results;
	int			sample;
	int			nkeys;
	char	  **keys;
	int64		total_rows;
	bool		counted;
	MemoryContext cxt;			/* outlives SPI and subtransactions */
} CheckRun;

/* One value of a sample row as JSON: numbers and booleans as such. */
static void
append_json_value(StringInfo buf, Datum value, bool isnull, Oid type)
{
	Oid			out;
	bool		varlena;
	char	   *text;

	if (isnull)
	{
		appendStringInfoString(buf, "null");
		return;
	}
	getTypeOutputInfo(type, &out, &varlena);
	text = OidOutputFunctionCall(out, value);
	if (type == INT2OID || type == INT4OID || type == INT8OID ||
		((type == NUMERICOID || type == FLOAT4OID || type == FLOAT8OID) &&
		 strspn(text, "-0123456789.e+") == strlen(text)))
		appendStringInfoString(buf, text);
	else if (type == BOOLOID)
		appendStringInfoString(buf, text[0] == 't' ? "true" : "false");
	else
		escape_json(buf, text);
}

typedef struct ScanReceiver
{
	DestReceiver pub;
	CheckRun   *run;
	int			nactive;
	int		   *active;			/* indexes into run->results */
	int			idcols;			/* sample columns before the rule columns */
	int64		rows;
}			ScanReceiver;

static bool
scan_receive(TupleTableSlot *slot, DestReceiver *self)
{
	ScanReceiver *sr = (ScanReceiver *) self;
	CheckRun   *run = sr->run;
	int			idcols = sr->idcols;

	CHECK_FOR_INTERRUPTS();
	slot_getallattrs(slot);
	sr->rows++;
	for (int j = 0; j < sr->nactive; j++)
	{
		RuleResult *res = &run->results[sr->active[j]];
		int			col = idcols + j;

		if (slot->tts_isnull[col] || !DatumGetBool(slot->tts_values[col]))
			continue;
		res->invalid++;
		if (res->nsamples < run->sample)
		{
			MemoryContext old = MemoryContextSwitchTo(run->cxt);
			TupleDesc	desc = slot->tts_tupleDescriptor;

			if (res->nsamples++ > 0)
				appendStringInfoChar(&res->samples, ',');
			if (run->nkeys == 0)
			{
				if (slot->tts_isnull[0])
					appendStringInfoString(&res->samples, "null");
				else
					appendStringInfoString(&res->samples,
										   TextDatumGetCString(DirectFunctionCall1(row_to_json,
																				   slot->tts_values[0])));
			}
			else
			{
				appendStringInfoChar(&res->samples, '{');
				for (int k = 0; k < run->nkeys; k++)
				{
					if (k > 0)
						appendStringInfoChar(&res->samples, ',');
					escape_json(&res->samples, run->keys[k]);
					appendStringInfoChar(&res->samples, ':');
					append_json_value(&res->samples, slot->tts_values[k], slot->tts_isnull[k],
									  TupleDescAttr(desc, k)->atttypid);
				}
				appendStringInfoChar(&res->samples, '}');
			}
			MemoryContextSwitchTo(old);
		}
	}
	return true;
}

static void
scan_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
}

static void
scan_shutdown(DestReceiver *self)
{
}

static void
scan_destroy(DestReceiver *self)
{
}

/*
 * Run fn(arg) in a subtransaction that is always rolled back, so that
 * whatever a rule did besides computing (set_config, a temporary table)
 * is undone; results are kept in memory outside the subtransaction.  On
 * error return it.
 */
static ErrorData *
run_in_subtransaction(void (*fn) (void *), void *arg)
{
	MemoryContext cxt = CurrentMemoryContext;
	ResourceOwner owner = CurrentResourceOwner;
	ErrorData  *volatile error = NULL;

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(cxt);
	PG_TRY();
	{
		fn(arg);
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(cxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED ||
			edata->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN ||
			edata->sqlerrcode == ERRCODE_OUT_OF_MEMORY)
			PG_RE_THROW();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(cxt);
		CurrentResourceOwner = owner;
		error = edata;
	}
	PG_END_TRY();
	return error;
}

typedef struct ScanArgs
{
	CheckRun   *run;
	int		   *idx;
	int			n;
} ScanArgs;

static void
scan_rules(void *arg)
{
	ScanArgs   *a = arg;
	CheckRun   *run = a->run;
	StringInfoData sql;
	ScanReceiver sr;
	SPIExecuteOptions opts;
	bool		samples = run->sample > 0 && a->n > 0;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	/* COALESCE(r.*) is the whole row even when a column is named like the relation. */
	if (samples && run->nkeys == 0)
		appendStringInfo(&sql, "COALESCE(%s.*)", run->alias);
	for (int k = 0; samples && k < run->nkeys; k++)
		appendStringInfo(&sql, "%s%s.%s", k > 0 ? ", " : "", run->alias,
						 quote_identifier(run->keys[k]));
	for (int j = 0; j < a->n; j++)
		appendStringInfo(&sql, "%s(%s\n) IS NOT TRUE",
						 (j > 0 || samples) ? ", " : "",
						 run->results[a->idx[j]].rule->text);
	appendStringInfo(&sql, " FROM %s AS %s", run->relsql, run->alias);

	memset(&sr, 0, sizeof(sr));
	sr.pub.receiveSlot = scan_receive;
	sr.pub.rStartup = scan_startup;
	sr.pub.rShutdown = scan_shutdown;
	sr.pub.rDestroy = scan_destroy;
	sr.pub.mydest = DestTuplestore;
	sr.run = run;
	sr.nactive = a->n;
	sr.active = a->idx;
	sr.idcols = samples ? Max(run->nkeys, 1) : 0;
	for (int j = 0; j < a->n; j++)
	{
		RuleResult *res = &run->results[a->idx[j]];

		res->invalid = 0;
		res->nsamples = 0;
		resetStringInfo(&res->samples);
	}

	memset(&opts, 0, sizeof(opts));
	opts.read_only = true;
	opts.dest = (DestReceiver *) &sr;
	if (SPI_execute_extended(sql.data, &opts) < 0)
		elog(ERROR, "could not scan relation %s", run->relsql);
	run->total_rows = sr.rows;
	run->counted = true;
	for (int j = 0; j < a->n; j++)
	{
		RuleResult *res = &run->results[a->idx[j]];

		res->status = res->invalid > 0 ? RS_FAIL : RS_PASS;
	}
}

/* Scan with the given rules; on a run-time error, halve and retry. */
static void
scan_subset(CheckRun *run, int *idx, int n)
{
	ScanArgs	a = {run, idx, n};
	ErrorData  *error;

	if (n == 0 && run->counted)
		return;
	error = run_in_subtransaction(scan_rules, &a);
	if (error == NULL)
		return;
	if (n <= 1)
	{
		if (n == 1)
		{
			run->results[idx[0]].status = RS_ERROR;
			run->results[idx[0]].error = MemoryContextStrdup(run->cxt, error->message);
		}
		else
			ereport(ERROR,
					(errcode(error->sqlerrcode),
					 errmsg("could not read relation %s", run->relsql),
					 errdetail("%s", error->message)));
		return;
	}
	scan_subset(run, idx, n / 2);
	scan_subset(run, idx + n / 2, n - n / 2);
}

typedef struct DatasetReceiver
{
	DestReceiver pub;
	CheckRun   *run;
	RuleResult *res;
}			DatasetReceiver;

static bool
dataset_receive(TupleTableSlot *slot, DestReceiver *self)
{
	DatasetReceiver *dr = (DatasetReceiver *) self;
	RuleResult *res = dr->res;

	CHECK_FOR_INTERRUPTS();
	slot_getallattrs(slot);
	res->invalid++;
	if (res->nsamples < dr->run->sample && !slot->tts_isnull[0])
	{
		MemoryContext old = MemoryContextSwitchTo(dr->run->cxt);

		if (res->nsamples++ > 0)
			appendStringInfoChar(&res->samples, ',');
		appendStringInfoString(&res->samples,
							   TextDatumGetCString(DirectFunctionCall1(row_to_json,
																	   slot->tts_values[0])));
		MemoryContextSwitchTo(old);
	}
	return true;
}

typedef struct DatasetArgs
{
	CheckRun   *run;
	RuleResult *res;
	const char *prefix;			/* a WITH clause, or "" */
	const char *table;			/* what {{TABLE}} stands for */
	ParamListInfo params;
} DatasetArgs;

static void
run_dataset_check(void *arg)
{
	DatasetArgs *a = arg;
	DatasetReceiver dr;
	SPIExecuteOptions opts;
	char	   *sql = psprintf("%sSELECT v FROM (%s\n) AS v", a->prefix,
							   substitute_table(a->res->rule->text, a->table));

	memset(&dr, 0, sizeof(dr));
	dr.pub.receiveSlot = dataset_receive;
	dr.pub.rStartup = scan_startup;
	dr.pub.rShutdown = scan_shutdown;
	dr.pub.rDestroy = scan_destroy;
	dr.pub.mydest = DestTuplestore;
	dr.run = a->run;
	dr.res = a->res;
	a->res->invalid = 0;
	a->res->nsamples = 0;
	resetStringInfo(&a->res->samples);
	memset(&opts, 0, sizeof(opts));
	opts.read_only = true;
	opts.dest = (DestReceiver *) &dr;
	opts.params = a->params;
	if (SPI_execute_extended(sql, &opts) < 0)
		elog(ERROR, "could not run dataset check \"%s\"", a->res->rule->name);
	a->res->status = a->res->invalid > 0 ? RS_FAIL : RS_PASS;
}

typedef struct PlanArgs
{
	Rule	   *rule;
	const char *relsql;
	const char *alias;
} PlanArgs;

static void
plan_row_rule_cb(void *arg)
{
	PlanArgs   *a = arg;

	plan_row_rule(a->rule, a->relsql, a->alias, false);
}

static void
parse_options(CheckRun *run, Jsonb *options)
{
	JsonbIterator *it;
	JsonbValue	v;
	JsonbIteratorToken tok;
	char	   *key = NULL;
	List	   *keys = NIL;

	run->sample = DEFAULT_SAMPLE;
	if (options == NULL)
		return;
	if (JB_ROOT_IS_SCALAR(options) || !JB_ROOT_IS_OBJECT(options))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("options must be a JSON object"),
				 errhint("Pass for example '{\"sample\": 5, \"key_columns\": [\"id\"]}'.")));
	it = JsonbIteratorInit(&options->root);
	while ((tok = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
	{
		if (tok == WJB_KEY)
		{
			key = jbv_string(&v);
			continue;
		}
		if (tok != WJB_VALUE)
			continue;
		if (strcmp(key, "sample") == 0)
		{
			int64		n = -1;

			if (v.type == jbvNumeric)
				n = DatumGetInt64(DirectFunctionCall1(numeric_int8,
													  NumericGetDatum(v.val.numeric)));
			if (n < 0 || n > 10000)
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("option \"sample\" must be an integer between 0 and 10000")));
			run->sample = (int) n;
		}
		else if (strcmp(key, "key_columns") == 0)
		{
			JsonbIterator *ait;
			JsonbValue	av;

			if (!jbv_is_array(&v))
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("option \"key_columns\" must be an array of column names")));
			ait = JsonbIteratorInit(v.val.binary.data);
			while ((tok = JsonbIteratorNext(&ait, &av, true)) != WJB_DONE)
			{
				char	   *col;

				if (tok != WJB_ELEM)
					continue;
				if (av.type != jbvString)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("option \"key_columns\" must be an array of column names")));
				col = jbv_string(&av);
				if (get_attnum(run->relid, col) == InvalidAttrNumber)
					ereport(ERROR,
							(errcode(ERRCODE_UNDEFINED_COLUMN),
							 errmsg("key column \"%s\" does not exist in relation %s",
									col, run->relsql)));
				keys = lappend(keys, col);
			}
		}
		else
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("unknown option \"%s\"", key),
					 errhint("The options are \"sample\" and \"key_columns\".")));
	}
	run->nkeys = list_length(keys);
	run->keys = palloc(sizeof(char *) * Max(run->nkeys, 1));
	for (int i = 0; i < run->nkeys; i++)
		run->keys[i] = list_nth(keys, i);
}

/*
 * Run a rules document over a relation.  The caller has connected to SPI;
 * results live in run->cxt.
 */
static CheckRun *
check_run(Oid relid, Jsonb *doc, Jsonb *options)
{
	CheckRun   *run = palloc0(sizeof(CheckRun));
	RuleSet    *rs;
	int		   *idx;
	int			n = 0;
	bool		save_read_only = XactReadOnly;
	char		relkind = get_rel_relkind(relid);

	run->relid = relid;
	run->relsql = rules_quote_relation(relid);
	run->alias = pstrdup(quote_identifier(get_rel_name(relid)));
	if (relkind != RELKIND_RELATION && relkind != RELKIND_VIEW &&
		relkind != RELKIND_MATVIEW && relkind != RELKIND_FOREIGN_TABLE &&
		relkind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table, view or materialized view", get_rel_name(relid))));
	run->cxt = CurrentMemoryContext;
	parse_options(run, options);
	rs = rules_parse(doc);
	run->rules = rs;
	run->results = palloc0(sizeof(RuleResult) * Max(rs->nrules, 1));
	idx = palloc(sizeof(int) * Max(rs->nrules, 1));
	for (int i = 0; i < rs->nrules; i++)
	{
		run->results[i].rule = &rs->rules[i];
		initStringInfo(&run->results[i].samples);
	}

	/* Rules read, never write, whatever functions they call. */
	XactReadOnly = true;
	PG_TRY();
	{
		for (int i = 0; i < rs->nrules; i++)
		{
			RuleResult *res = &run->results[i];
			PlanArgs	pa = {res->rule, run->relsql, run->alias};
			ErrorData  *error;

			if (res->rule->severity == RULE_DATASET)
				continue;
			CHECK_FOR_INTERRUPTS();
			error = run_in_subtransaction(plan_row_rule_cb, &pa);
			if (error != NULL)
			{
				res->status = RS_ERROR;
				res->error = error->message;
			}
			else
				idx[n++] = i;
		}
		/* A query has at most 1664 columns: beyond 1000 rules, scan in chunks. */
		for (int done = 0; done < n; done += MAX_RULES_PER_SCAN)
			scan_subset(run, idx + done, Min(n - done, MAX_RULES_PER_SCAN));
		if (!run->counted)
			scan_subset(run, idx, 0);

		for (int i = 0; i < rs->nrules; i++)
		{
			RuleResult *res = &run->results[i];
			DatasetArgs da = {run, res, "", run->relsql, NULL};
			ErrorData  *error;

			if (res->rule->severity != RULE_DATASET)
				continue;
			CHECK_FOR_INTERRUPTS();
			error = run_in_subtransaction(run_dataset_check, &da);
			if (error != NULL)
			{
				res->status = RS_ERROR;
				res->error = error->message;
			}
		}
	}
	PG_FINALLY();
	{
		XactReadOnly = save_read_only;
	}
	PG_END_TRY();
	return run;
}

static bool
result_breaches(RuleResult *res)
{
	switch (res->rule->severity)
	{
		case RULE_FAIL:
		case RULE_DATASET:
			return res->status == RS_FAIL || res->status == RS_ERROR;
		default:
			return false;
	}
}

static const char *
status_name(RuleStatus s)
{
	return s == RS_PASS ? "PASS" : s == RS_FAIL ? "FAIL" : "ERROR";
}

static Datum
invalid_pct(CheckRun *run, int64 invalid)
{
	Datum		num;

	if (run->total_rows == 0)
		return DirectFunctionCall2(numeric_round,
								   NumericGetDatum(int64_to_numeric(0)), Int32GetDatum(2));
	num = DirectFunctionCall2(numeric_div,
							  NumericGetDatum(int64_to_numeric(invalid * 100)),
							  NumericGetDatum(int64_to_numeric(run->total_rows)));
	return DirectFunctionCall2(numeric_round, num, Int32GetDatum(2));
}

static char *
result_detail(CheckRun *run, RuleResult *res)
{
	if (res->status == RS_ERROR)
		return res->error;
	if (res->rule->severity == RULE_DATASET)
	{
		if (res->status == RS_FAIL)
			return psprintf("the check returned " INT64_FORMAT " %s%s%s", res->invalid,
							res->invalid == 1 ? "row" : "rows",
							res->rule->description ? ": " : "",
							res->rule->description ? res->rule->description : "");
		return res->rule->description;
	}
	if (res->status == RS_FAIL)
		return psprintf("false or null on " INT64_FORMAT " of " INT64_FORMAT " rows",
						res->invalid, run->total_rows);
	return NULL;
}

static void
check_args(FunctionCallInfo fcinfo, const char *fn)
{
	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument relation of %s must not be null", fn)));
	if (PG_ARGISNULL(1))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument rules of %s must not be null", fn)));
}

Datum
reconcile_check(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	MemoryContext cxt;
	CheckRun   *run;

	check_args(fcinfo, "reconcile_check");
	InitMaterializedSRF(fcinfo, 0);
	cxt = CurrentMemoryContext;
	SPI_connect();
	MemoryContextSwitchTo(cxt);
	run = check_run(PG_GETARG_OID(0), PG_GETARG_JSONB_P(1),
					PG_ARGISNULL(2) ? NULL : PG_GETARG_JSONB_P(2));
	MemoryContextSwitchTo(cxt);
	for (int i = 0; i < run->rules->nrules; i++)
	{
		RuleResult *res = &run->results[i];
		Datum		values[8];
		bool		isnull[8] = {false};
		char	   *detail = result_detail(run, res);

		values[0] = CStringGetTextDatum(res->rule->name);
		values[1] = CStringGetTextDatum(rule_severity_names[res->rule->severity]);
		values[2] = CStringGetTextDatum(status_name(res->status));
		if (res->status == RS_ERROR)
		{
			isnull[3] = isnull[4] = isnull[6] = true;
		}
		else
		{
			values[3] = Int64GetDatum(res->invalid);
			values[4] = invalid_pct(run, res->invalid);
			values[6] = DirectFunctionCall1(jsonb_in,
											CStringGetDatum(psprintf("[%s]", res->samples.data)));
		}
		values[5] = BoolGetDatum(result_breaches(res));
		values[7] = detail ? CStringGetTextDatum(detail) : (Datum) 0;
		isnull[7] = detail == NULL;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, isnull);
	}
	SPI_finish();
	return (Datum) 0;
}

Datum
reconcile_check_report(PG_FUNCTION_ARGS)
{
	MemoryContext cxt;
	CheckRun   *run;
	StringInfoData buf;
	int			passed = 0,
				failed = 0,
				errored = 0;
	bool		blocked = false;
	Datum		result;

	check_args(fcinfo, "reconcile_check_report");
	cxt = CurrentMemoryContext;
	SPI_connect();
	MemoryContextSwitchTo(cxt);
	run = check_run(PG_GETARG_OID(0), PG_GETARG_JSONB_P(1),
					PG_ARGISNULL(2) ? NULL : PG_GETARG_JSONB_P(2));
	/* SPI calls leave SPI's own context current; the result must outlive it. */
	MemoryContextSwitchTo(cxt);

	initStringInfo(&buf);
	appendStringInfoString(&buf, "[");
	for (int i = 0; i < run->rules->nrules; i++)
	{
		RuleResult *res = &run->results[i];
		char	   *detail = result_detail(run, res);

		passed += res->status == RS_PASS;
		failed += res->status == RS_FAIL;
		errored += res->status == RS_ERROR;
		blocked |= result_breaches(res);
		if (i > 0)
			appendStringInfoChar(&buf, ',');
		appendStringInfoString(&buf, "{\"rule\":");
		escape_json(&buf, res->rule->name);
		appendStringInfo(&buf, ",\"severity\":\"%s\",\"status\":\"%s\"",
						 rule_severity_names[res->rule->severity], status_name(res->status));
		if (res->status == RS_ERROR)
			appendStringInfoString(&buf, ",\"invalid_rows\":null,\"invalid_pct\":null");
		else
			appendStringInfo(&buf, ",\"invalid_rows\":" INT64_FORMAT ",\"invalid_pct\":%s",
							 res->invalid,
							 DatumGetCString(DirectFunctionCall1(numeric_out,
																 invalid_pct(run, res->invalid))));
		appendStringInfo(&buf, ",\"gate_breach\":%s,\"sample\":",
						 result_breaches(res) ? "true" : "false");
		if (res->status == RS_ERROR)
			appendStringInfoString(&buf, "null");
		else
			appendStringInfo(&buf, "[%s]", res->samples.data);
		appendStringInfoString(&buf, ",\"detail\":");
		if (detail)
			escape_json(&buf, detail);
		else
			appendStringInfoString(&buf, "null");
		appendStringInfoChar(&buf, '}');
	}
	appendStringInfoChar(&buf, ']');
	result = DirectFunctionCall1(jsonb_in, CStringGetDatum(
		psprintf("{\"summary\":{\"rules\":%d,\"passed\":%d,\"failed\":%d,\"errored\":%d,\"gate\":\"%s\"},\"rules\":%s}",
				 run->rules->nrules, passed, failed, errored,
				 blocked ? "blocked" : "pass", buf.data)));
	SPI_finish();
	PG_RETURN_DATUM(result);
}

/* ---- attaching rules to a target ---- */

typedef struct RuleContext
{
	Rule	   *rule;
	const char *target;			/* attached to this target, or NULL */
} RuleContext;

static void
rule_error_context(void *arg)
{
	RuleContext *rc = arg;
	Rule	   *r = rc->rule;

	if (rc->target)
		errcontext("%s \"%s\" of the rules attached to table \"%s\"",
				   r->severity == RULE_DATASET ? "dataset check" : "rule", r->name, rc->target);
	else
		errcontext("%s \"%s\"", r->severity == RULE_DATASET ? "dataset check" : "rule", r->name);
}

/* Plan every rule against a relation; errors name the rule. */
static void
plan_rules_strict(RuleSet *rs, const char *relsql, const char *alias,
				  const char *prefix, const char *table, int nparams, Oid *types,
				  const char *target)
{
	for (int i = 0; i < rs->nrules; i++)
	{
		Rule	   *r = &rs->rules[i];
		ErrorContextCallback cb;
		RuleContext rc = {r, target};

		cb.callback = rule_error_context;
		cb.arg = &rc;
		cb.previous = error_context_stack;
		error_context_stack = &cb;
		if (r->severity != RULE_DATASET)
			plan_row_rule(r, relsql, alias, true);
		else
		{
			SPIPlanPtr	plan = SPI_prepare(psprintf("%sSELECT v FROM (%s\n) AS v", prefix,
													substitute_table(r->text, table)),
										   nparams, types);
			CachedPlanSource *ps;

			if (plan == NULL)
				elog(ERROR, "SPI_prepare failed for dataset check \"%s\"", r->name);
			ps = linitial(SPI_plan_get_plan_sources(plan));
			refuse_volatile(r, (Node *) linitial(ps->query_list));
			SPI_freeplan(plan);
		}
		error_context_stack = cb.previous;
	}
}

static bool
target_registered(Oid relid)
{
	StateUser	su;
	Oid			type = REGCLASSOID;
	Datum		arg = ObjectIdGetDatum(relid);
	bool		found;

	state_user_enter(&su);
	if (SPI_execute_with_args("SELECT 1 FROM reconcile.targets WHERE target OPERATOR(pg_catalog.=) $1",
							  1, &type, &arg, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read reconcile.targets");
	found = SPI_processed > 0;
	state_user_leave(&su);
	return found;
}

Datum
reconcile_set_rules(PG_FUNCTION_ARGS)
{
	Oid			relid;
	StateUser	su;
	Oid			types[3] = {REGCLASSOID, JSONBOID, TEXTOID};
	Datum		args[3];
	char		nulls[3] = {' ', ' ', ' '};
	bool		isnull;
	int32		version;
	bool		save_read_only = XactReadOnly;

	if (PG_ARGISNULL(0))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument target of reconcile_set_rules must not be null")));
	relid = PG_GETARG_OID(0);
	SPI_connect();
	if (!target_registered(relid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("table \"%s\" is not a registered reconcile target",
						relation_display_name(relid)),
				 errhint("Register it with reconcile_register first.")));
	if (!pg_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, relation_display_name(relid));
	/* Rules change between batches, not during one. */
	LockRelationOid(relid, ShareRowExclusiveLock);

	if (!PG_ARGISNULL(1))
	{
		RuleSet    *rs = rules_parse(PG_GETARG_JSONB_P(1));
		char	   *relsql = rules_quote_relation(relid);
		int			nrow = 0;

		/* Each row rule is one more column of the loader's staged read. */
		for (int i = 0; i < rs->nrules; i++)
			nrow += rs->rules[i].severity != RULE_DATASET;
		if (nrow > MAX_RULES_PER_SCAN)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("a rules document attached to a target holds at most %d row rules, not %d",
							MAX_RULES_PER_SCAN, nrow),
					 errhint("Combine rules, or run the larger document with reconcile_check.")));

		XactReadOnly = true;
		PG_TRY();
		{
			plan_rules_strict(rs, relsql, quote_identifier(get_rel_name(relid)), "",
							  relsql, 0, NULL, NULL);
		}
		PG_FINALLY();
		{
			XactReadOnly = save_read_only;
		}
		PG_END_TRY();
		args[1] = PointerGetDatum(PG_GETARG_JSONB_P(1));
	}
	else
	{
		args[1] = (Datum) 0;
		nulls[1] = 'n';
	}
	args[0] = ObjectIdGetDatum(relid);
	args[2] = CStringGetTextDatum(GetUserNameFromId(GetUserId(), false));

	state_user_enter(&su);
	if (SPI_execute_with_args("INSERT INTO reconcile.target_rules"
							  " (target, version, rules, set_by, set_at, previous_version)"
							  " SELECT $1, COALESCE(pg_catalog.max(version), 0) OPERATOR(pg_catalog.+) 1,"
							  " $2, $3, pg_catalog.now(), pg_catalog.max(version)"
							  " FROM reconcile.target_rules WHERE target OPERATOR(pg_catalog.=) $1"
							  " RETURNING version",
							  3, types, args, nulls, false, 0) != SPI_OK_INSERT_RETURNING)
		elog(ERROR, "could not write reconcile.target_rules");
	version = DatumGetInt32(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	state_user_leave(&su);
	SPI_finish();
	PG_RETURN_INT32(version);
}

/* ---- applying a target's rules to a batch ---- */

struct BatchRules
{
	Oid			target;
	Oid			staged;
	RuleSet    *rules;
	int			nrow;			/* row rules: rules[0 .. nrow-1] */
	int			firstpos;		/* their first column in the staged query */
	int64	   *violations;		/* per row rule: fail and warn counts */
	const char **dropped;
};

/* A WITH clause naming the batch's staged rows for dataset checks ($1: object keys). */
static char *
batch_rows_prefix(Oid staged)
{
	return psprintf("WITH reconcile_batch_rows AS (SELECT s.* FROM %s AS s"
					" WHERE s.object_key::pg_catalog.text OPERATOR(pg_catalog.=) ANY ($1)) ",
					rules_quote_relation(staged));
}

/* The target's current rules, checked against the staged relation. */
BatchRules *
batch_rules_load(Oid target, Oid staged)
{
	StateUser	su;
	Oid			type = REGCLASSOID;
	Datum		arg = ObjectIdGetDatum(target);
	bool		isnull = true;
	Datum		d = (Datum) 0;
	BatchRules *br;
	RuleSet    *rs;
	char	   *relsql;
	bool		save_read_only = XactReadOnly;
	Oid			argtype = TEXTARRAYOID;

	state_user_enter(&su);
	if (SPI_execute_with_args("SELECT rules FROM reconcile.target_rules"
							  " WHERE target OPERATOR(pg_catalog.=) $1"
							  " ORDER BY version DESC LIMIT 1",
							  1, &type, &arg, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read reconcile.target_rules");
	if (SPI_processed > 0)
		d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	state_user_leave(&su);
	if (isnull)
		return NULL;

	rs = rules_parse(DatumGetJsonbP(d));
	br = palloc0(sizeof(BatchRules));
	br->target = target;
	br->staged = staged;
	br->rules = rs;
	while (br->nrow < rs->nrules && rs->rules[br->nrow].severity != RULE_DATASET)
		br->nrow++;
	br->violations = palloc0(sizeof(int64) * Max(rs->nrules, 1));
	br->dropped = palloc0(sizeof(char *) * Max(rs->nrules, 1));

	relsql = rules_quote_relation(staged);
	XactReadOnly = true;
	PG_TRY();
	{
		plan_rules_strict(rs, relsql, "s", batch_rows_prefix(staged),
						  "reconcile_batch_rows", 1, &argtype, relation_display_name(target));
	}
	PG_FINALLY();
	{
		XactReadOnly = save_read_only;
	}
	PG_END_TRY();
	return br;
}

/* Append "(rule) IS NOT TRUE" for each row rule to the staged query. */
void
batch_rules_append_columns(BatchRules *br, StringInfo sql, int firstpos)
{
	br->firstpos = firstpos;
	for (int i = 0; i < br->nrow; i++)
		appendStringInfo(sql, ", (%s\n) IS NOT TRUE", br->rules->rules[i].text);
}

/*
 * Look at one staged row's rule columns.  Returns how many drop rules it
 * violates (their names in *dropped); fail and warn violations are counted
 * for rows that are loaded, that is neither rejected nor dropped.
 */
int
batch_rules_row(BatchRules *br, const Datum *values, const bool *isnull,
				bool rejected, const char ***dropped)
{
	int			ndropped = 0;
	const Datum *v = values + br->firstpos - 1;
	const bool *n = isnull + br->firstpos - 1;

	/* "(rule) IS NOT TRUE" is never null: true means violated. */
	for (int i = 0; i < br->nrow; i++)
		if (br->rules->rules[i].severity == RULE_DROP && !n[i] && DatumGetBool(v[i]))
			br->dropped[ndropped++] = br->rules->rules[i].name;
	*dropped = br->dropped;
	if (rejected || ndropped > 0)
		return ndropped;
	for (int i = 0; i < br->nrow; i++)
		if (br->rules->rules[i].severity != RULE_DROP && !n[i] && DatumGetBool(v[i]))
			br->violations[i]++;
	return 0;
}

/*
 * Before the merge: a fail rule violated by a loaded row, or a dataset
 * check with rows over the batch's staged rows, refuses the whole batch.
 */
void
batch_rules_gate(BatchState *b)
{
	BatchRules *br = b->rules;
	StringInfoData breaches;
	int			nbreaches = 0;
	ArrayBuildState *keys;
	ParamListInfo params;
	char	   *prefix;
	bool		save_read_only = XactReadOnly;

	if (br == NULL)
		return;
	initStringInfo(&breaches);
	for (int i = 0; i < br->nrow; i++)
	{
		Rule	   *r = &br->rules->rules[i];

		if (r->severity == RULE_FAIL && br->violations[i] > 0)
			appendStringInfo(&breaches, "%sfail rule \"%s\": " INT64_FORMAT " %s",
							 nbreaches++ > 0 ? "; " : "", r->name, br->violations[i],
							 br->violations[i] == 1 ? "row" : "rows");
	}

	keys = initArrayResult(TEXTOID, CurrentMemoryContext, false);
	for (int i = 0; i < b->manifest->nentries; i++)
		keys = accumArrayResult(keys, CStringGetTextDatum(b->manifest->entries[i].object_key),
								false, TEXTOID, CurrentMemoryContext);
	params = makeParamList(1);
	params->params[0].value = makeArrayResult(keys, CurrentMemoryContext);
	params->params[0].isnull = false;
	params->params[0].pflags = PARAM_FLAG_CONST;
	params->params[0].ptype = TEXTARRAYOID;
	prefix = batch_rows_prefix(br->staged);

	XactReadOnly = true;
	PG_TRY();
	{
		for (int i = br->nrow; i < br->rules->nrules; i++)
		{
			CheckRun	run;
			RuleResult	res;
			DatasetArgs da = {&run, &res, prefix, "reconcile_batch_rows", params};
			ErrorContextCallback cb;
			RuleContext rc = {&br->rules->rules[i], b->target->relname};

			memset(&run, 0, sizeof(run));
			run.cxt = CurrentMemoryContext;
			memset(&res, 0, sizeof(res));
			res.rule = &br->rules->rules[i];
			initStringInfo(&res.samples);
			cb.callback = rule_error_context;
			cb.arg = &rc;
			cb.previous = error_context_stack;
			error_context_stack = &cb;
			run_dataset_check(&da);
			error_context_stack = cb.previous;
			if (res.invalid > 0)
				appendStringInfo(&breaches, "%sdataset check \"%s\": " INT64_FORMAT " %s",
								 nbreaches++ > 0 ? "; " : "", res.rule->name, res.invalid,
								 res.invalid == 1 ? "row" : "rows");
		}
	}
	PG_FINALLY();
	{
		XactReadOnly = save_read_only;
	}
	PG_END_TRY();

	if (nbreaches > 0)
		ereport(ERROR,
				(errcode(ERRCODE_CHECK_VIOLATION),
				 errmsg("batch %s breaches the data-quality rules of table \"%s\"",
						b->batch_id, b->target->relname),
				 errdetail("Breached: %s.", breaches.data),
				 errhint("Correct the staged rows, or review the rules with reconcile_set_rules, and call reconcile_batch again; nothing was applied.")));
}

/* The receipt's warnings: violations per warn rule, as a jsonb object. */
Datum
batch_rules_warnings(BatchRules *br, bool *isnull)
{
	StringInfoData buf;
	int			n = 0;

	*isnull = (br == NULL);
	if (br == NULL)
		return (Datum) 0;
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '{');
	for (int i = 0; i < br->nrow; i++)
	{
		Rule	   *r = &br->rules->rules[i];

		if (r->severity != RULE_WARN)
			continue;
		if (n++ > 0)
			appendStringInfoChar(&buf, ',');
		escape_json(&buf, r->name);
		appendStringInfo(&buf, ":" INT64_FORMAT, br->violations[i]);
	}
	appendStringInfoChar(&buf, '}');
	return DirectFunctionCall1(jsonb_in, CStringGetDatum(buf.data));
}
