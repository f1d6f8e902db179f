/*
 * rules_eval.c
 *		Evaluate the row rules of a document on each scanned row, computing
 *		each subexpression the rules share once per row.
 *
 * Rule documents repeat themselves: ten thresholds on one balance formula,
 * one category test guarding several rules.  The executor evaluates each
 * occurrence on its own, so reconcile_check evaluates the rules itself,
 * with PostgreSQL's expression machinery, over rows its scan query
 * returns.  A subexpression that occurs more than once (not volatile, not
 * depending on a CASE's test value) becomes a parameter whose value is
 * computed the first time a rule asks for it on a row and reused for the
 * rest of that row.  Being computed on demand, it is evaluated only where
 * some rule would have evaluated it anyway: a shared division guarded by a
 * CASE raises no error the rules themselves would not raise.
 */
#include "postgres.h"

#include "access/detoast.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "common/hashfn.h"
#include "executor/execExpr.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/params.h"
#include "optimizer/optimizer.h"
#include "utils/expandeddatum.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "rules.h"

typedef struct SharedExpr SharedExpr;

struct SharedExpr
{
	Node	   *expr;			/* the subexpression, as it first occurs in the rules */
	Node	   *canon;			/* expr with each child replaced by its class's canon */
	uint32		hash;			/* of its shape */
	int			id;				/* class number, from 1 */
	bool		unsafe;			/* volatile or depending on a CASE's test value */
	int			count;			/* occurrences in all rules */
	int			paramid;		/* 0 until a rule or a shared value uses it */
	ExprState  *state;
	int16		typlen;
	uint64		row;			/* the row value and isnull belong to */
	Datum		value;
	bool		isnull;
	const uint64 *current;		/* the evaluator's row number */
};

struct RuleEval
{
	MemoryContext cxt;
	int			nrules;
	ProjectionInfo *projection;	/* the rules, one result column each */
	TupleTableSlot *result;
	HTAB	   *by_shape;		/* shape hash -> SharedExpr classes */
	HTAB	   *by_node;		/* node address -> its SharedExpr class */
	int			nclasses;
	MemoryContext scratch;		/* for shapes, reset for each node */
	List	   *used;			/* those given a parameter, by paramid */
	EState	   *estate;
	ExprContext *econtext;
	uint64		row;			/* rows evaluated so far */
	int			natts;			/* attributes of the rows evaluated */
	int			nexpand;
	AttrNumber *expand;			/* positions (1-based) of varlena columns to
								 * expand once per row */
	TupleTableSlot *row_slot;	/* the row with those columns expanded */
};

/* ---- which expressions a scan can evaluate ---- */

static bool
unsupported_walker(Node *node, void *context)
{
	if (node == NULL)
		return false;
	CHECK_FOR_INTERRUPTS();
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) node;

		/* only the scanned relation's own columns: no whole row, no ctid */
		return var->varno != 1 || var->varlevelsup != 0 || var->varattno <= 0;
	}
	if (IsA(node, SubLink) || IsA(node, SubPlan) || IsA(node, Param) ||
		IsA(node, Aggref) || IsA(node, WindowFunc) || IsA(node, GroupingFunc) ||
		IsA(node, PlaceHolderVar))
		return true;
	return expression_tree_walker(node, unsupported_walker, context);
}

/*
 * Can a rule (its parse-analysed expression over range table entry 1) be
 * evaluated here?  Rules with subqueries, whole-row references or system
 * columns are left to the scan query itself.
 */
bool
rule_eval_supported(Node *expr)
{
	return !unsupported_walker(expr, NULL);
}

/* ---- finding shared subexpressions ---- */

/*
 * Every node of the rules is put in a class of equal() nodes in one
 * bottom-up pass, each node visited once.  A class's canon is its first
 * node with each child replaced by its own class's canon, so that equal
 * classes have pointer-equal children and equal() compares canons in time
 * proportional to the node alone (it returns at once on equal pointers).
 * A node's shape is its text with each child written as its class number
 * and without locations; the classes are found through a hash table keyed
 * by the shape's hash, and the class of a node through one keyed by the
 * node's address.  Whether a class is worth and safe to share is decided
 * the same way, from the node alone and its children's classes.  A rule of
 * n nodes costs O(n), whatever its shape (the earlier search, which wrote
 * and walked each subtree for each of its nodes, cost O(n^2)).
 */

struct SharedExprEntry
{
	uint32		hash;			/* hash key: the shape's hash */
	List	   *classes;		/* SharedExpr of that hash */
};

typedef struct NodeClassEntry
{
	Node	   *node;			/* hash key: a node of the rules, or a canon */
	SharedExpr *s;
} NodeClassEntry;

typedef struct ClassifyContext
{
	RuleEval   *ev;
	bool		unsafe;			/* a child is volatile or context dependent */
} ClassifyContext;

static SharedExpr *classify_node(RuleEval *ev, Node *node);

static SharedExpr *
class_of(RuleEval *ev, Node *node)
{
	NodeClassEntry *e = hash_search(ev->by_node, &node, HASH_FIND, NULL);

	if (e == NULL)
		elog(ERROR, "rule subexpression of type %d was not classified", (int) nodeTag(node));
	return e->s;
}

/* Children of a node being classified: each replaced by its class's canon. */
static Node *
canon_mutator(Node *node, RuleEval *ev)
{
	if (node == NULL)
		return NULL;
	if (IsA(node, List))
		return expression_tree_mutator(node, canon_mutator, (void *) ev);
	return classify_node(ev, node)->canon;
}

/* Children of a canon, for its shape: each a placeholder holding its class number. */
static Node *
shape_mutator(Node *node, ClassifyContext *cxt)
{
	SharedExpr *child;
	Param	   *p;

	if (node == NULL)
		return NULL;
	if (IsA(node, List))
		return expression_tree_mutator(node, shape_mutator, (void *) cxt);
	child = class_of(cxt->ev, node);
	cxt->unsafe |= child->unsafe;
	p = makeNode(Param);
	p->paramkind = PARAM_EXEC;
	p->paramid = child->id;
	p->paramtype = InvalidOid;
	p->location = -1;
	return (Node *) p;
}

static bool
volatile_checker(Oid func_id, void *context)
{
	return func_volatile(func_id) == PROVOLATILE_VOLATILE;
}

/*
 * The node itself, not its children, is volatile: what
 * contain_volatile_functions looks for in each node it walks.
 */
static bool
volatile_node(Node *node)
{
	return check_functions_in_node(node, volatile_checker, NULL) ||
		IsA(node, NextValueExpr);
}

/* The hash of a shape's text, without locations. */
static uint32
shape_hash(char *s)
{
	char	   *w = s;

	for (char *r = s; *r;)
	{
		if (strncmp(r, ":location ", 10) == 0)
		{
			r += 10;
			if (*r == '-')
				r++;
			while (*r >= '0' && *r <= '9')
				r++;
			continue;
		}
		*w++ = *r++;
	}
	*w = '\0';
	return DatumGetUInt32(hash_any((unsigned char *) s, w - s));
}

static void
remember_node(RuleEval *ev, Node *node, SharedExpr *s)
{
	bool		found;
	NodeClassEntry *e = hash_search(ev->by_node, &node, HASH_ENTER, &found);

	e->s = s;
}

/* The class of one occurrence of node (its children classified first), counted. */
static SharedExpr *
classify_node(RuleEval *ev, Node *node)
{
	NodeClassEntry *e;
	Node	   *canon;
	Node	   *shape;
	ClassifyContext cxt = {ev, false};
	MemoryContext old;
	struct SharedExprEntry *se;
	uint32		hash;
	bool		found;
	SharedExpr *s = NULL;
	ListCell   *lc;

	CHECK_FOR_INTERRUPTS();
	check_stack_depth();
	e = hash_search(ev->by_node, &node, HASH_FIND, NULL);
	if (e != NULL)
	{
		/* the same node twice (an inlined function's argument): one more use */
		e->s->count++;
		return e->s;
	}

	canon = expression_tree_mutator(node, canon_mutator, (void *) ev);
	old = MemoryContextSwitchTo(ev->scratch);
	shape = expression_tree_mutator(canon, shape_mutator, (void *) &cxt);
	cxt.unsafe |= IsA(node, CaseTestExpr) || IsA(node, CoerceToDomainValue) ||
		volatile_node(node);
	hash = shape_hash(nodeToString(shape));
	MemoryContextSwitchTo(old);
	MemoryContextReset(ev->scratch);

	se = hash_search(ev->by_shape, &hash, HASH_ENTER, &found);
	if (!found)
		se->classes = NIL;
	foreach(lc, se->classes)
	{
		SharedExpr *c = lfirst(lc);

		if (equal(c->canon, canon))
		{
			s = c;
			break;
		}
	}
	if (s == NULL)
	{
		s = palloc0(sizeof(SharedExpr));
		s->expr = node;
		s->canon = canon;
		s->hash = hash;
		s->id = ++ev->nclasses;
		s->unsafe = cxt.unsafe;
		se->classes = lappend(se->classes, s);
		remember_node(ev, canon, s);
	}
	remember_node(ev, node, s);
	s->count++;
	return s;
}

/* Worth computing once and safe to compute apart from where it occurs. */
static bool
shareable(RuleEval *ev, Node *node)
{
	switch (nodeTag(node))
	{
		case T_OpExpr:
		case T_FuncExpr:
		case T_DistinctExpr:
		case T_NullIfExpr:
		case T_ScalarArrayOpExpr:
		case T_BoolExpr:
		case T_CaseExpr:
		case T_CoalesceExpr:
		case T_MinMaxExpr:
		case T_CoerceViaIO:
		case T_ArrayCoerceExpr:
		case T_RowCompareExpr:
		case T_FieldSelect:
		case T_SubscriptingRef:
			break;
		case T_NullTest:
			if (IsA(((NullTest *) node)->arg, Var))
				return false;	/* as cheap as reading a parameter */
			break;
		case T_BooleanTest:
			if (IsA(((BooleanTest *) node)->arg, Var))
				return false;
			break;
		default:
			return false;
	}
	return !class_of(ev, node)->unsafe;
}

typedef struct ReplaceContext
{
	RuleEval   *ev;
	Node	   *root;			/* not replaced by itself */
	int			above;			/* replace what occurs more often than this */
} ReplaceContext;

/*
 * Replace, top down, each subexpression that occurs more often than its
 * surroundings by a parameter.  Within a shared expression, a part that
 * occurs nowhere else stays inline: it is computed once with its whole.
 */
static Node *
replace_mutator(Node *node, ReplaceContext *cxt)
{
	if (node == NULL)
		return NULL;
	CHECK_FOR_INTERRUPTS();
	if (node != cxt->root && shareable(cxt->ev, node))
	{
		SharedExpr *s = class_of(cxt->ev, node);

		if (s->count >= 2 && s->count > cxt->above)
		{
			Param	   *p = makeNode(Param);

			if (s->paramid == 0)
			{
				cxt->ev->used = lappend(cxt->ev->used, s);
				s->paramid = list_length(cxt->ev->used);
			}
			p->paramkind = PARAM_EXTERN;
			p->paramid = s->paramid;
			p->paramtype = exprType(node);
			p->paramtypmod = exprTypmod(node);
			p->paramcollid = exprCollation(node);
			p->location = -1;
			return (Node *) p;
		}
	}
	return expression_tree_mutator(node, replace_mutator, (void *) cxt);
}

/* ---- evaluation ---- */

/*
 * The value of a shared subexpression, asked for by a rule: computed on
 * the first request of a row, remembered for the rest of it.
 */
static void
shared_param_eval(ExprState *state, ExprEvalStep *op, ExprContext *econtext)
{
	SharedExpr *s = op->d.cparam.paramarg;

	if (s->row != *s->current)
	{
		s->value = ExecEvalExpr(s->state, econtext, &s->isnull);
		/* Every rule reads it: none may take it over to change it in place. */
		s->value = MakeExpandedObjectReadOnly(s->value, s->isnull, s->typlen);
		s->row = *s->current;
	}
	*op->resvalue = s->value;
	*op->resnull = s->isnull;
}

/* A parameter standing for a shared subexpression compiles to a call of it. */
static void
shared_param_compile(ParamListInfo params, Param *param, ExprState *state,
					 Datum *resv, bool *resnull)
{
	RuleEval   *ev = params->paramCompileArg;
	ExprEvalStep step;

	memset(&step, 0, sizeof(step));
	step.opcode = EEOP_PARAM_CALLBACK;
	step.resvalue = resv;
	step.resnull = resnull;
	step.d.cparam.paramfunc = shared_param_eval;
	step.d.cparam.paramarg = list_nth(ev->used, param->paramid - 1);
	step.d.cparam.paramid = param->paramid;
	step.d.cparam.paramtype = param->paramtype;
	ExprEvalPushStep(state, &step);
}

static bool
count_vars_walker(Node *node, int *uses)
{
	if (node == NULL)
		return false;
	CHECK_FOR_INTERRUPTS();
	if (IsA(node, Var))
	{
		uses[((Var *) node)->varattno]++;
		return false;
	}
	return expression_tree_walker(node, count_vars_walker, (void *) uses);
}

/* Point each column reference at the column's position in the rows evaluated. */
static Node *
remap_vars_mutator(Node *node, const int *positions)
{
	if (node == NULL)
		return NULL;
	CHECK_FOR_INTERRUPTS();
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) copyObject(node);

		var->varattno = positions[var->varattno - 1] + 1;
		var->varattnosyn = var->varattno;
		return (Node *) var;
	}
	return expression_tree_mutator(node, remap_vars_mutator, (void *) positions);
}

/*
 * Prepare the rules (parse-analysed boolean expressions over a relation of
 * row type rowdesc, each supported) for evaluation on rows that hold the
 * relation's column a at position positions[a - 1] (0-based), or at a - 1
 * when positions is NULL.  The rules are compiled as one projection, as
 * the executor compiles a query's target list; a shared value is a
 * parameter whose step calls back here.
 */
RuleEval *
rule_eval_begin(Node **exprs, int n, TupleDesc rowdesc, const int *positions)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "reconcile rule evaluation",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	RuleEval   *ev = palloc0(sizeof(RuleEval));
	Node	  **planned = palloc(sizeof(Node *) * Max(n, 1));
	List	   *targets = NIL;
	TupleDesc	desc = CreateTemplateTupleDesc(n);
	int		   *uses = palloc0(sizeof(int) * (rowdesc->natts + 1));
	ParamListInfo params;
	PlanState  *parent;
	HASHCTL		hctl;

	ev->cxt = cxt;
	ev->nrules = n;
	memset(&hctl, 0, sizeof(hctl));
	hctl.keysize = sizeof(uint32);
	hctl.entrysize = sizeof(struct SharedExprEntry);
	hctl.hcxt = cxt;
	ev->by_shape = hash_create("reconcile rule shapes", 256, &hctl,
							   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	hctl.keysize = sizeof(Node *);
	hctl.entrysize = sizeof(NodeClassEntry);
	ev->by_node = hash_create("reconcile rule nodes", 256, &hctl,
							  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	ev->scratch = AllocSetContextCreate(cxt, "reconcile rule shape",
										ALLOCSET_SMALL_SIZES);
	for (int i = 0; i < n; i++)
	{
		planned[i] = (Node *) expression_planner((Expr *) copyObject(exprs[i]));
		(void) classify_node(ev, planned[i]);
	}
	for (int i = 0; i < n; i++)
	{
		ReplaceContext rc = {ev, NULL, 1};
		Node	   *rule = replace_mutator(planned[i], &rc);

		count_vars_walker(rule, uses);
		if (positions != NULL)
			rule = remap_vars_mutator(rule, positions);
		targets = lappend(targets, makeTargetEntry((Expr *) rule, i + 1, NULL, false));
		TupleDescInitEntry(desc, i + 1, NULL, BOOLOID, -1, 0);
	}

	params = makeParamList(0);
	params->paramCompile = shared_param_compile;
	params->paramCompileArg = ev;
	/* Definitions may use further shared values, appended as found. */
	for (int k = 0; k < list_length(ev->used); k++)
	{
		SharedExpr *s = list_nth(ev->used, k);
		ReplaceContext rc = {ev, s->expr, s->count};
		Node	   *def = replace_mutator(s->expr, &rc);

		count_vars_walker(def, uses);
		if (positions != NULL)
			def = remap_vars_mutator(def, positions);
		s->current = &ev->row;
		s->typlen = get_typlen(exprType(s->expr));
		s->state = ExecInitExprWithParams((Expr *) def, params);
	}

	/*
	 * A projection takes its parameter hooks from its parent's EState; this
	 * parent has nothing else (no scan type: its rows come from a query).
	 */
	ev->estate = CreateExecutorState();
	ev->estate->es_param_list_info = params;
	parent = palloc0(sizeof(PlanState));
	parent->state = ev->estate;
	ev->econtext = CreateExprContext(ev->estate);
	ev->result = MakeSingleTupleTableSlot(desc, &TTSOpsVirtual);
	ev->projection = ExecBuildProjectionInfo(targets, ev->econtext, ev->result, parent, NULL);

	/*
	 * A varlena column read more than once per row is expanded once:
	 * functions that take their arguments unpacked (numeric's) would copy a
	 * short-header value, and decompress a compressed one, on every use.
	 */
	ev->expand = palloc(sizeof(AttrNumber) * Max(rowdesc->natts, 1));
	for (int a = 1; a <= rowdesc->natts; a++)
		if (uses[a] > 1 && TupleDescAttr(rowdesc, a - 1)->attlen == -1)
			ev->expand[ev->nexpand++] = (positions != NULL ? positions[a - 1] + 1 : a);
	MemoryContextSwitchTo(old);
	return ev;
}

/* How many shared subexpressions the rules compute once per row. */
int
rule_eval_shared(RuleEval *ev)
{
	return list_length(ev->used);
}

/* Evaluate every rule on one row: violated[i] when rule i is false or null. */
void
rule_eval_row(RuleEval *ev, TupleTableSlot *slot, bool *violated)
{
	ExprContext *econtext = ev->econtext;
	TupleTableSlot *result;

	ResetExprContext(econtext);
	ev->row++;
	if (ev->nexpand > 0)
	{
		TupleTableSlot *row;
		MemoryContext old;

		if (ev->row_slot == NULL)
		{
			/* The rows' descriptor is known at the first row. */
			old = MemoryContextSwitchTo(ev->cxt);
			ev->row_slot = MakeSingleTupleTableSlot(CreateTupleDescCopy(slot->tts_tupleDescriptor),
													&TTSOpsVirtual);
			ev->natts = slot->tts_tupleDescriptor->natts;
			MemoryContextSwitchTo(old);
		}
		row = ev->row_slot;
		old = MemoryContextSwitchTo(econtext->ecxt_per_tuple_memory);
		slot_getsomeattrs(slot, ev->natts);
		ExecClearTuple(row);
		memcpy(row->tts_values, slot->tts_values, sizeof(Datum) * ev->natts);
		memcpy(row->tts_isnull, slot->tts_isnull, sizeof(bool) * ev->natts);
		for (int k = 0; k < ev->nexpand; k++)
		{
			int			a = ev->expand[k] - 1;

			if (!row->tts_isnull[a] && VARATT_IS_EXTENDED(DatumGetPointer(row->tts_values[a])))
				row->tts_values[a] = PointerGetDatum(PG_DETOAST_DATUM(row->tts_values[a]));
		}
		ExecStoreVirtualTuple(row);
		MemoryContextSwitchTo(old);
		slot = row;
	}
	econtext->ecxt_scantuple = slot;
	result = ExecProject(ev->projection);
	for (int i = 0; i < ev->nrules; i++)
		violated[i] = result->tts_isnull[i] || !DatumGetBool(result->tts_values[i]);
}

/* Release the slots, executor state and memory of a rule evaluator. */
void
rule_eval_end(RuleEval *ev)
{
	ExecDropSingleTupleTableSlot(ev->result);
	if (ev->row_slot != NULL)
		ExecDropSingleTupleTableSlot(ev->row_slot);
	FreeExecutorState(ev->estate);
	MemoryContextDelete(ev->cxt);
}
