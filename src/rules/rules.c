/*
 * rules.c
 *		The rules document: parse it, check each rule's shape with
 *		PostgreSQL's parser, and plan a rule against a relation.
 *
 * A rules document holds row rules (SQL boolean expressions, true when the
 * row is valid) under "fail", "warn" and "drop", and dataset checks (one
 * SELECT each, whose rows are the violations) under "dataset_checks".
 * Rules are code, so before anything runs PostgreSQL's own parser must
 * find a row rule to be exactly one expression and a dataset check to be
 * exactly one plain SELECT, the latter again in the final text that runs.
 * Rules run read-only under search_path RULES_SEARCH_PATH, and attached
 * rules as their target's owner (rules_env_enter).  Running a document is
 * rules_check.c's job; attaching one to a target and applying it to
 * batches, rules_attach.c's.
 */
#include "postgres.h"

#include <ctype.h>

#include "access/xact.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "nodes/nodeFuncs.h"
#include "nodes/parsenodes.h"
#include "optimizer/optimizer.h"
#include "common/keywords.h"
#include "parser/parser.h"
#include "parser/scanner.h"
#include "parser/gram.h"		/* the scanner's token codes: IDENT, Op */
#include "parser/scansup.h"
#include "tcop/tcopprot.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/plancache.h"

#include "common/jsonread.h"
#include "rules.h"
#include "common/sqlname.h"
#include "common/subxact.h"

const char *const rule_severity_names[] = {"fail", "warn", "drop", "dataset_check"};

/* ---- where rules run ---- */

/*
 * Switch to the role a rule runs as: the target's owner, restricted, for
 * attached rules (owner valid), or stay the caller.  Cheap enough for
 * every row; rules_env_enter adds the search_path.
 */
void
rules_user_enter(RulesEnv *env, Oid owner)
{
	GetUserIdAndSecContext(&env->save_userid, &env->save_sec_context);
	if (OidIsValid(owner))
		SetUserIdAndSecContext(owner,
							   env->save_sec_context | SECURITY_RESTRICTED_OPERATION);
	env->save_read_only = XactReadOnly;
	XactReadOnly = true;
	env->save_nestlevel = 0;
}

/* Undo rules_user_enter: back to the saved user and read-only state. */
void
rules_user_leave(RulesEnv *env)
{
	XactReadOnly = env->save_read_only;
	SetUserIdAndSecContext(env->save_userid, env->save_sec_context);
}

/*
 * As rules_user_enter, and set search_path to RULES_SEARCH_PATH for
 * parsing, planning and running, the way maintenance commands run index
 * expressions.  An error leaves it to (sub)transaction abort to restore
 * the user, the read-only flag and the setting.
 */
void
rules_env_enter(RulesEnv *env, Oid owner)
{
	rules_user_enter(env, owner);
	env->save_nestlevel = NewGUCNestLevel();
	(void) set_config_option("search_path", RULES_SEARCH_PATH, PGC_USERSET,
							 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
}

/* Undo rules_env_enter: restore search_path, then the user. */
void
rules_env_leave(RulesEnv *env)
{
	AtEOXact_GUC(false, env->save_nestlevel);
	rules_user_leave(env);
}

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

/* Add a copy of *r, whose name must be new to the document. */
static void
add_rule(List **rules, Rule *r)
{
	ListCell   *lc;
	Rule	   *copy;

	if (r->name[0] == '\0')
		refuse_document(psprintf("a rule under \"%s\" has an empty name", section_name(r->severity)),
						NULL);
	foreach(lc, *rules)
	{
		Rule	   *other = lfirst(lc);

		if (strcmp(other->name, r->name) == 0)
			refuse_document(psprintf("duplicate rule name \"%s\"", r->name),
							psprintf("Rule names are unique across \"fail\", \"warn\", \"drop\" and \"dataset_checks\"; \"%s\" appears under \"%s\" and \"%s\".",
									 r->name, section_name(other->severity), section_name(r->severity)));
	}
	copy = palloc(sizeof(Rule));
	memcpy(copy, r, sizeof(Rule));
	*rules = lappend(*rules, copy);
}

/*
 * The keys a rule may carry besides its SQL, as the tools that write such
 * documents put them there: "description", "reference_context" (the text
 * the rule was derived from), "columns" (the columns it is about) and
 * "evidence" (anything).  They are kept and shown in reports; nothing runs
 * them.  Returns false for any other key.
 */
static bool
parse_descriptive_key(Rule *r, const char *key, JsonbValue *v, const char *where)
{
	if (strcmp(key, "description") == 0 || strcmp(key, "reference_context") == 0)
	{
		if (v->type != jbvString)
			refuse_document(psprintf("\"%s\" of %s must be a string, not %s",
									 key, where, jbv_type_name(v)), NULL);
		if (key[0] == 'd')
			r->description = jbv_string(v);
		else
			r->reference_context = jbv_string(v);
		return true;
	}
	if (strcmp(key, "columns") == 0)
	{
		JsonbIterator *ait;
		JsonbValue	av;
		JsonbIteratorToken tok;

		if (!jbv_is_array(v))
			refuse_document(psprintf("\"columns\" of %s must be an array of column names, not %s",
									 where, jbv_type_name(v)), NULL);
		ait = JsonbIteratorInit(v->val.binary.data);
		while ((tok = JsonbIteratorNext(&ait, &av, true)) != WJB_DONE)
		{
			if (tok != WJB_ELEM)
				continue;
			if (av.type != jbvString)
				refuse_document(psprintf("\"columns\" of %s must hold column names as strings, not %s",
										 where, jbv_type_name(&av)), NULL);
			r->columns = lappend(r->columns, jbv_string(&av));
		}
		r->has_columns = true;
		return true;
	}
	return strcmp(key, "evidence") == 0;
}

/*
 * A row rule is a string (its expression) or an object with "sql" (its
 * expression) and descriptive keys.
 */
static void
parse_row_section(List **rules, RuleSeverity sev, JsonbValue *section)
{
	const char *key = rule_severity_names[sev];
	JsonbIterator *it;
	JsonbValue	v;
	char	   *name = NULL;

	if (!jbv_is_object(section))
		refuse_document(psprintf("\"%s\" must be an object mapping rule names to SQL boolean expressions, not %s",
								 key, jbv_type_name(section)), NULL);
	it = JsonbIteratorInit(section->val.binary.data);
	while (jsonb_object_next(&it, &name, &v))
	{
		Rule		r;

		memset(&r, 0, sizeof(r));
		r.name = name;
		r.severity = sev;
		if (v.type == jbvString)
			r.text = jbv_string(&v);
		else if (jbv_is_object(&v))
		{
			const char *where = psprintf("rule \"%s\" under \"%s\"", name, key);
			JsonbIterator *rit = JsonbIteratorInit(v.val.binary.data);
			JsonbValue	rv;
			char	   *rkey = NULL;

			while (jsonb_object_next(&rit, &rkey, &rv))
			{
				if (strcmp(rkey, "sql") == 0)
				{
					if (rv.type != jbvString)
						refuse_document(psprintf("\"sql\" of %s must be a string holding a SQL boolean expression, not %s",
												 where, jbv_type_name(&rv)), NULL);
					r.text = jbv_string(&rv);
				}
				else if (!parse_descriptive_key(&r, rkey, &rv, where) &&
						 !rules_parse_threshold_key(&r, rkey, &rv, where) &&
						 !rules_parse_anomaly_key(&r, rkey, &rv, where))
					refuse_document(psprintf("unknown key \"%s\" in %s", rkey, where),
									"A row rule written as an object has the keys \"sql\", \"description\", \"reference_context\", \"columns\", \"evidence\" and the thresholds \"mostly\", \"max_invalid\" and \"max_invalid_share\"; an anomaly rule has \"kind\" instead of \"sql\".");
			}
			rules_check_anomaly(&r, where);
			if (r.text == NULL && r.anomaly == NULL)
				refuse_document(psprintf("%s has no \"sql\"", where), NULL);
		}
		else
			refuse_document(psprintf("rule \"%s\" under \"%s\" must be a string holding a SQL boolean expression, or an object with \"sql\", not %s",
									 name, key, jbv_type_name(&v)), NULL);
		add_rule(rules, &r);
	}
}

static void
parse_dataset_check(List **rules, int index, JsonbValue *check)
{
	JsonbIterator *it;
	JsonbValue	v;
	char	   *key = NULL;
	Rule		r;
	const char *where = psprintf("dataset_checks[%d]", index);

	memset(&r, 0, sizeof(r));
	r.severity = RULE_DATASET;
	if (!jbv_is_object(check))
		refuse_document(psprintf("%s must be an object with \"name\" and \"sql\", not %s",
								 where, jbv_type_name(check)), NULL);
	it = JsonbIteratorInit(check->val.binary.data);
	while (jsonb_object_next(&it, &key, &v))
	{
		if (strcmp(key, "name") == 0 || strcmp(key, "sql") == 0)
		{
			if (v.type != jbvString)
				refuse_document(psprintf("\"%s\" of %s must be a string, not %s",
										 key, where, jbv_type_name(&v)), NULL);
			if (key[0] == 'n')
				r.name = jbv_string(&v);
			else
				r.text = jbv_string(&v);
		}
		else if (!parse_descriptive_key(&r, key, &v, where) &&
				 !rules_parse_threshold_key(&r, key, &v, where))
			refuse_document(psprintf("unknown key \"%s\" in %s", key, where),
							"A dataset check has the keys \"name\", \"sql\", \"description\", \"reference_context\", \"columns\", \"evidence\" and the threshold \"max_rows\".");
	}
	if (r.name == NULL)
		refuse_document(psprintf("%s has no \"name\"", where), NULL);
	if (r.text == NULL)
		refuse_document(psprintf("dataset check \"%s\" has no \"sql\"", r.name), NULL);
	add_rule(rules, &r);
}

/* ---- bounded work: how deeply a rule may nest ---- */

/*
 * The deepest nesting of a rule's expression that the rest of its way
 * (PostgreSQL's parse analysis, planner and executor set-up, and
 * rules_eval.c) is given: as many levels as max_stack_depth holds at
 * RULES_STACK_PER_LEVEL bytes a level, 4,033 at the default 2MB.
 */
int
rules_max_depth(void)
{
	return (int) ((int64) max_stack_depth * 1024 / RULES_STACK_PER_LEVEL);
}

typedef struct DepthContext
{
	int			depth;
	int			limit;
} DepthContext;

/* True once the raw parse tree nests deeper than cxt->limit nodes (lists not counted). */
static bool
too_deep_walker(Node *node, DepthContext *cxt)
{
	bool		deep;

	if (node == NULL)
		return false;
	CHECK_FOR_INTERRUPTS();
	if (IsA(node, List))
		return raw_expression_tree_walker(node, too_deep_walker, (void *) cxt);
	if (++cxt->depth > cxt->limit)
		return true;
	deep = raw_expression_tree_walker(node, too_deep_walker, (void *) cxt);
	cxt->depth--;
	return deep;
}

/*
 * Refuse a rule whose raw parse tree nests deeper than rules_max_depth(),
 * before anything recursive of PostgreSQL's sees it: otherwise it would
 * run out of stack somewhere in parse analysis, with no word of the rule.
 * The walk itself stops at the limit, so it stays well within the stack.
 */
static void
refuse_too_deep(Rule *r, Node *raw)
{
	DepthContext cxt = {0, rules_max_depth()};

	if (!too_deep_walker(raw, &cxt))
		return;
	ereport(ERROR,
			(errcode(ERRCODE_STATEMENT_TOO_COMPLEX),
			 errmsg("%s \"%s\" nests too deeply",
					r->severity == RULE_DATASET ? "dataset check" : "rule", r->name),
			 errdetail("Its expression nests more than %d levels deep, the most that max_stack_depth (%dkB) allows a rule.",
					   cxt.limit, max_stack_depth),
			 errhint("Split the rule into several rules, or group a long chain of operators with parentheses, as (a + b) + (c + d); a superuser can raise max_stack_depth.")));
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

/* Turn the parser's or scanner's error into one that names the rule. */
static void
refuse_unparsable(Rule *r, MemoryContext cxt)
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
		refuse_unparsable(r, cxt);
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
			 errhint("Rules run read-only (reconcile_check's with the caller's rights, attached rules with their target owner's); rewrite the rule as a plain expression or query.")));
}

/* ---- back-quoted names, as Spark SQL writes them ---- */

static void
refuse_backquote(Rule *r, const char *msg, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_SYNTAX_ERROR),
			 errmsg("%s \"%s\" %s",
					r->severity == RULE_DATASET ? "dataset check" : "rule", r->name, msg),
			 errdetail("%s", detail),
			 errhint("A back-quoted name is written `name`, a back quote inside it doubled (``); it becomes the PostgreSQL identifier \"name\".")));
}

/*
 * Convert the back-quoted names of Spark SQL (`net amount`, a back quote
 * inside doubled) into PostgreSQL's quoted identifiers ("net amount", a
 * double quote inside doubled), where they stand as code.  The core
 * scanner decides where that is, as in substitute_table: PostgreSQL has no
 * back quotes but as operator characters, so a back quote is code exactly
 * when it is part of an operator token; inside a string literal (E'',
 * dollar-quoted too), a comment or a quoted identifier it is not a token
 * of its own and stays as written.  The text of the name itself is taken
 * up to its closing back quote, never scanned: it becomes one quoted
 * identifier whatever it holds.  After each conversion the text is scanned
 * again from the token before the name, and the name must come back as
 * that one identifier: where it would join the text it touches into
 * another token (U&`x`, `x`"y"), it is refused, as is a name that is
 * empty or not closed.  What results is checked like any rule text.
 */
typedef struct BackquoteScan
{
	const char *text;			/* the text so far, converted up to found */
	int			resume;			/* a token's start: nothing before it changes */
	int			verify_at;		/* where the last converted name must stand, or -1 */
	const char *verify_name;	/* as the scanner returns it */
	bool		verified;
	int			found;			/* the next back quote in code, or -1 */
	int			before;			/* the start of the token before it */
	const char *verify_quoted;	/* the last converted name, for messages */
	int			shift;			/* bytes added so far, for positions in text */
} BackquoteScan;

/* Scan bs->text from bs->resume to the next back quote that is code. */
static void
scan_to_backquote(BackquoteScan *bs)
{
	core_yy_extra_type yyextra;
	core_yyscan_t yyscanner = scanner_init(bs->text + bs->resume, &yyextra, &ScanKeywords,
										   ScanKeywordTokens);
	core_YYSTYPE yylval;
	YYLTYPE		yylloc;
	int			token;
	int			last = bs->resume;

	bs->verified = bs->verify_at < 0;
	bs->found = -1;
	bs->before = bs->resume;
	while ((token = core_yylex(&yylval, &yylloc, yyscanner)) != 0)
	{
		int			at = bs->resume + yylloc;
		char	   *bq;

		if (!bs->verified)
		{
			if (at == bs->verify_at && token == IDENT &&
				strcmp(yylval.str, bs->verify_name) == 0)
				bs->verified = true;
			else if (at >= bs->verify_at)
				break;
		}
		if (token == Op && (bq = strchr(yylval.str, '`')) != NULL)
		{
			bs->found = at + (bq - yylval.str);
			bs->before = last;
			break;
		}
		last = at;
	}
	scanner_finish(yyscanner);
}

static char *
convert_backquotes(Rule *r, const char *text)
{
	MemoryContext cxt = CurrentMemoryContext;
	BackquoteScan bs;

	if (strchr(text, '`') == NULL)
		return (char *) text;
	memset(&bs, 0, sizeof(bs));
	bs.text = text;
	bs.verify_at = -1;
	for (;;)
	{
		const char *cur;
		StringInfoData name;
		StringInfoData out;
		char	   *expect;
		int			found;
		int			i;

		PG_TRY();
		{
			scan_to_backquote(&bs);
		}
		PG_CATCH();
		{
			refuse_unparsable(r, cxt);
		}
		PG_END_TRY();

		if (!bs.verified)
			refuse_backquote(r, "has a back-quoted name that cannot be converted unambiguously",
							 psprintf("Written as the PostgreSQL identifier %s, the name joins the text next to it into another token.",
									  bs.verify_quoted));
		if (bs.found < 0)
			return (char *) bs.text;

		cur = bs.text;
		found = bs.found;
		initStringInfo(&name);
		for (i = found + 1;; i++)
		{
			if (cur[i] == '\0')
				refuse_backquote(r, "has an unterminated back-quoted name",
								 psprintf("The back quote at character %d has no closing back quote.",
										  found - bs.shift + 1));
			if (cur[i] == '`')
			{
				if (cur[i + 1] != '`')
					break;
				i++;
			}
			appendStringInfoChar(&name, cur[i]);
		}
		if (name.len == 0)
			refuse_backquote(r, "has an empty back-quoted name",
							 psprintf("The back quotes at character %d enclose nothing.",
									  found - bs.shift + 1));

		/* cur[found .. i] is the back-quoted name: "name", quotes doubled */
		initStringInfo(&out);
		appendBinaryStringInfo(&out, cur, found);
		appendStringInfoChar(&out, '"');
		for (const char *c = name.data; *c; c++)
		{
			if (*c == '"')
				appendStringInfoChar(&out, '"');
			appendStringInfoChar(&out, *c);
		}
		appendStringInfoChar(&out, '"');
		bs.verify_quoted = pnstrdup(out.data + found, out.len - found);
		bs.shift += out.len - (i + 1);
		appendStringInfoString(&out, cur + i + 1);

		/* The scanner truncates a long identifier; compare what it returns. */
		expect = pstrdup(name.data);
		truncate_identifier(expect, strlen(expect), false);
		bs.verify_name = expect;
		bs.verify_at = found;
		bs.resume = bs.before;
		bs.text = out.data;
	}
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
	List	   *parsed;
	SelectStmt *s;
	ResTarget  *target;
	SafetyContext cxt = {NULL};

	r->text = convert_backquotes(r, r->text);
	parsed = parse_rule_text(r, psprintf("SELECT (%s\n)", r->text));

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
	refuse_too_deep(r, target->val);
	if (unsafe_node_walker(target->val, &cxt))
		refuse_rule(r, cxt.why);
}

/*
 * Replace {{TABLE}} and {{DATAFRAME}} by the given (quoted) name where they
 * stand as code.  The core scanner finds them, the way pg_stat_statements
 * finds constants: an occurrence inside a comment, a string literal or a
 * quoted identifier is not a token of its own and stays as written.  A name
 * may hold anything, a newline or a comment's end included, so substituted
 * into a comment or a literal it could end it and change the one statement
 * that runs; substituted where the scanner sees code, it is one quoted name.
 */
static char *
substitute_table(Rule *r, const char *sql, const char *table)
{
	MemoryContext cxt = CurrentMemoryContext;
	StringInfoData buf;
	volatile int copied = 0;	/* bytes of sql already in buf */

	initStringInfo(&buf);
	PG_TRY();
	{
		core_yy_extra_type yyextra;
		core_yyscan_t yyscanner = scanner_init(sql, &yyextra, &ScanKeywords,
											   ScanKeywordTokens);
		core_YYSTYPE yylval;
		YYLTYPE		yylloc;
		int			token;

		while ((token = core_yylex(&yylval, &yylloc, yyscanner)) != 0)
		{
			int			len;

			if (token != '{' || yylloc < copied)
				continue;
			if (strncmp(sql + yylloc, "{{TABLE}}", 9) == 0)
				len = 9;
			else if (strncmp(sql + yylloc, "{{DATAFRAME}}", 13) == 0)
				len = 13;
			else
				continue;
			appendBinaryStringInfo(&buf, sql + copied, yylloc - copied);
			appendStringInfoString(&buf, table);
			copied = yylloc + len;
		}
		scanner_finish(yyscanner);
	}
	PG_CATCH();
	{
		refuse_unparsable(r, cxt);
	}
	PG_END_TRY();
	appendStringInfoString(&buf, sql + copied);
	return buf.data;
}

/* The text must parse as exactly one SELECT that only reads. */
static void
check_one_select(Rule *r, const char *sql)
{
	List	   *parsed = parse_rule_text(r, sql);
	Node	   *stmt;
	SafetyContext cxt = {NULL};

	if (list_length(parsed) != 1)
		refuse_rule(r, list_length(parsed) == 0 ? "it is empty" : "it holds more than one statement");
	stmt = ((RawStmt *) linitial(parsed))->stmt;
	if (!IsA(stmt, SelectStmt))
		refuse_rule(r, psprintf("it is %s, not a SELECT",
								IsA(stmt, InsertStmt) ? "an INSERT" :
								IsA(stmt, UpdateStmt) ? "an UPDATE" :
								IsA(stmt, DeleteStmt) ? "a DELETE" :
								IsA(stmt, MergeStmt) ? "a MERGE" : "a utility statement"));
	refuse_too_deep(r, stmt);
	if (unsafe_node_walker(stmt, &cxt))
		refuse_rule(r, cxt.why);
}

/*
 * A dataset check is one SELECT; a final semicolon is tolerated.  This
 * early look uses a plain name for {{TABLE}}; what runs is checked again
 * in its final form by rules_dataset_statement.
 */
static void
check_dataset_check(Rule *r)
{
	char	   *sql = pstrdup(convert_backquotes(r, r->text));
	int			len = strlen(sql);

	while (len > 0 && (isspace((unsigned char) sql[len - 1]) || sql[len - 1] == ';'))
		sql[--len] = '\0';
	r->text = sql;
	check_one_select(r, substitute_table(r, sql, "reconcile_table"));
}

/*
 * The statement a dataset check runs: "<prefix>SELECT <select> FROM
 * (<check>) AS v", with {{TABLE}} replaced by table (a quoted name).  A
 * table's name may hold anything, a newline ending a comment included, so
 * the check is validated after the substitution, and then the whole
 * statement as it will run: each must be exactly one SELECT that only
 * reads.  rules_prepare_dataset then runs exactly that one statement.
 */
char *
rules_dataset_statement(Rule *r, const char *prefix, const char *table,
						const char *select)
{
	char	   *check = substitute_table(r, r->text, table);
	char	   *sql = psprintf("%sSELECT %s FROM (%s\n) AS v", prefix, select, check);

	check_one_select(r, check);
	check_one_select(r, sql);
	return sql;
}

/* Prepare a statement from rules_dataset_statement: one plan, a SELECT. */
SPIPlanPtr
rules_prepare_dataset(Rule *r, const char *sql, int nargs, Oid *types)
{
	SPIPlanPtr	plan = SPI_prepare(sql, nargs, types);
	List	   *sources;
	CachedPlanSource *ps;

	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed for dataset check \"%s\": %s", r->name,
			 SPI_result_code_string(SPI_result));
	sources = SPI_plan_get_plan_sources(plan);
	ps = list_length(sources) == 1 ? linitial(sources) : NULL;
	if (ps == NULL || ps->commandTag != CMDTAG_SELECT ||
		list_length(ps->query_list) != 1 ||
		linitial_node(Query, ps->query_list)->commandType != CMD_SELECT ||
		linitial_node(Query, ps->query_list)->hasModifyingCTE ||
		linitial_node(Query, ps->query_list)->rowMarks != NIL)
		refuse_rule(r, "it is not exactly one SELECT that only reads");
	return plan;
}

/*
 * Run fn(arg) in a subtransaction that is always rolled back, so that
 * whatever a rule did besides computing (set_config, a temporary table)
 * is undone; results are kept in memory outside the subtransaction.  On
 * error return it; a cancel, a shutdown or running out of memory is no
 * finding of the rule and goes on up.
 */
ErrorData *
rules_try(void (*fn) (void *), void *arg)
{
	ErrorData  *error = run_in_subtransaction(fn, arg, false);

	if (error != NULL &&
		(error->sqlerrcode == ERRCODE_QUERY_CANCELED ||
		 error->sqlerrcode == ERRCODE_ADMIN_SHUTDOWN ||
		 error->sqlerrcode == ERRCODE_OUT_OF_MEMORY))
		ReThrowError(error);
	return error;
}

/*
 * Parse a rules document's shape (errors name the offending entry).  Row
 * rules come sorted by severity and name, dataset checks in document order.
 */
static RuleSet *
parse_document(Jsonb *doc)
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
	while (jsonb_object_next(&it, &key, &v))
	{
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
	return rs;
}

/* Check each rule's text: back quotes converted, then its shape. */
static void
check_rules(void *arg)
{
	RuleSet    *rs = arg;

	for (int i = 0; i < rs->nrules; i++)
	{
		if (rs->rules[i].error != NULL || rs->rules[i].anomaly != NULL)
			continue;
		if (rs->rules[i].severity == RULE_DATASET)
			check_dataset_check(&rs->rules[i]);
		else
			check_row_rule(&rs->rules[i]);
	}
}

/*
 * Parse a rules document and check every rule's shape: any error refuses
 * the document whole.  For documents attached to targets, whose batches
 * must never run half a rule set.
 */
RuleSet *
rules_parse(Jsonb *doc)
{
	RuleSet    *rs = parse_document(doc);

	check_rules(rs);
	return rs;
}

/*
 * As rules_parse, but a rule whose text does not pass its checks (does not
 * parse, a back-quoted name that cannot be converted, a construct refused)
 * is kept with its error in r->error and r->sqlerrcode, for a report to
 * show as ERROR beside the others.  The document's shape must still be
 * right.  All rules are checked in one subtransaction; only when that
 * fails, each in its own, to find the ones at fault (checking a rule again
 * is harmless: its conversion and trimming are done once).
 */
RuleSet *
rules_parse_for_report(Jsonb *doc)
{
	RuleSet    *rs = parse_document(doc);
	RuleSet		one;

	if (rules_try(check_rules, rs) == NULL)
		return rs;
	one.nrules = 1;
	for (int i = 0; i < rs->nrules; i++)
	{
		Rule	   *r = &rs->rules[i];
		ErrorData  *error;

		CHECK_FOR_INTERRUPTS();
		one.rules = r;
		error = rules_try(check_rules, &one);
		if (error == NULL)
			continue;
		/* A syntax error says what and where in its detail: keep both. */
		if (error->sqlerrcode == ERRCODE_SYNTAX_ERROR && error->detail != NULL)
			r->error = psprintf(islower((unsigned char) error->detail[0]) ? "%s: %s" : "%s. %s",
								error->message, error->detail);
		else
			r->error = error->message;
		r->sqlerrcode = error->sqlerrcode;
	}
	return rs;
}

/* ---- planning a row rule against a relation ---- */

/*
 * The rule must plan as a boolean expression without aggregates, window
 * functions or set-returning functions (each of which would change the
 * shape of the one scan).  LIMIT 0 runs the executor's permission checks.
 */
void
rules_refuse_volatile(Rule *r, Node *query)
{
	if (contain_volatile_functions(query))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s \"%s\" calls a volatile function",
						r->severity == RULE_DATASET ? "dataset check" : "rule", r->name),
				 errdetail("Rules attached to a target run inside each batch, which cannot roll back what a volatile function does; only immutable and stable functions may be called."),
				 errhint("Run such rules with reconcile_check, or declare the function STABLE if it only reads.")));
}

/* Plan a row rule's expression against relsql AS alias and return its checked expression. */
void
rules_plan_row_rule(Rule *r, const char *relsql, const char *alias, bool attached,
					Node **expr)
{
	MemoryContext cxt = CurrentMemoryContext;
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
		rules_refuse_volatile(r, (Node *) q);
	type = TupleDescAttr(ps->resultDesc, 0)->atttypid;
	if (type != BOOLOID)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("rule \"%s\" is of type %s, not boolean", r->name, format_type_be(type)),
				 errhint("A row rule is true when the row is valid.")));
	if (SPI_execute_plan(plan, NULL, NULL, true, 0) < 0)
		elog(ERROR, "could not run rule \"%s\"", r->name);
	if (expr != NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(cxt);

		*expr = copyObject((Node *) linitial_node(TargetEntry, q->targetList)->expr);
		MemoryContextSwitchTo(old);
	}
	SPI_freeplan(plan);
}

