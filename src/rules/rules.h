/*
 * rules.h
 *		Data-quality rules: the rules document, its safety checks, and the
 *		hooks the loader calls to apply a target's attached rules.
 *
 * rules.c parses and checks documents; rules_check.c runs them
 * (reconcile_check, reconcile_check_report); rules_attach.c attaches them to
 * targets (reconcile_set_rules) and applies them to batches; profile.c
 * proposes a document from the data (reconcile_discover_rules).
 */
#ifndef RECONCILE_RULES_H
#define RECONCILE_RULES_H

#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "utils/jsonb.h"
#include "utils/numeric.h"

typedef enum RuleSeverity
{
	RULE_FAIL,
	RULE_WARN,
	RULE_DROP,
	RULE_DATASET
} RuleSeverity;

extern const char *const rule_severity_names[];

typedef struct Rule
{
	char	   *name;
	RuleSeverity severity;
	char	   *text;			/* boolean expression, or the check's SELECT,
								 * back-quoted names converted */
	/* Descriptive keys, shown in reports; each may be NULL. */
	char	   *description;
	char	   *reference_context;
	List	   *columns;		/* of char *; NIL when the key is absent */
	bool		has_columns;
	/* rules_parse_for_report: why the rule does not pass its checks */
	char	   *error;
	int			sqlerrcode;
	/* Thresholds (rules_threshold.c); all absent: any violation fails. */
	struct RuleThreshold *threshold;	/* NULL when the rule has none */
	/* Anomaly rules (rules_anomaly.c): a measure instead of text (NULL). */
	struct RuleAnomaly *anomaly;	/* NULL for row rules and dataset checks */
} Rule;

typedef struct RuleSet
{
	int			nrules;
	Rule	   *rules;			/* fail, warn, drop (each by name), then checks */
} RuleSet;

/* A scan, and an attached document, holds at most this many row rules. */
#define RULES_MAX_PER_SCAN 1000

/*
 * Rules are parsed, planned and run under this search_path, whoever calls:
 * an unqualified name in a rule resolves to pg_catalog (or, for relations
 * only, to the session's temporary tables), never to a schema another role
 * can write.  Anything else is written schema-qualified.
 */
#define RULES_SEARCH_PATH "pg_catalog, pg_temp"

/*
 * Where a rule runs: as the role that owns the target (attached rules,
 * under SECURITY_RESTRICTED_OPERATION, as VACUUM runs index expressions)
 * or as the caller (rules passed to reconcile_check), in both cases
 * read-only and under RULES_SEARCH_PATH.
 */
typedef struct RulesEnv
{
	Oid			save_userid;
	int			save_sec_context;
	int			save_nestlevel;
	bool		save_read_only;
} RulesEnv;

/*
 * Stack a level of a rule's expression is given, in bytes: PostgreSQL's
 * parse analysis of a chain a + a + ... + a needs about 514 a level (2,038
 * terms fit in max_stack_depth 1MB, 4,079 in 2MB, 8,180 in 4MB on x86-64).
 */
#define RULES_STACK_PER_LEVEL 520

/* ---- rules.c ---- */

extern int	rules_max_depth(void);

extern void rules_env_enter(RulesEnv *env, Oid owner);
extern void rules_env_leave(RulesEnv *env);
extern void rules_user_enter(RulesEnv *env, Oid owner);
extern void rules_user_leave(RulesEnv *env);
extern RuleSet *rules_parse(Jsonb *doc);
extern RuleSet *rules_parse_for_report(Jsonb *doc);
extern ErrorData *rules_try(void (*fn) (void *), void *arg);
extern char *rules_dataset_statement(Rule *r, const char *prefix, const char *table,
									 const char *select);
extern SPIPlanPtr rules_prepare_dataset(Rule *r, const char *sql, int nargs, Oid *types);
extern void rules_plan_row_rule(Rule *r, const char *relsql, const char *alias,
								bool attached, Node **expr);
extern void rules_refuse_volatile(Rule *r, Node *query);

/* ---- rules_threshold.c: how many violations a rule tolerates ---- */

typedef struct RuleThreshold
{
	Numeric		mostly;			/* share of rows that must be valid, or NULL */
	Numeric		max_invalid_share;	/* share of rows that may violate, or NULL */
	int64		max_invalid;	/* row rules: violating rows tolerated, or -1 */
	int64		max_rows;		/* dataset checks: rows tolerated, or -1 */
} RuleThreshold;

extern bool rules_parse_threshold_key(Rule *r, const char *key, JsonbValue *v,
									  const char *where);
extern bool rule_within_threshold(const Rule *r, int64 invalid, int64 total);
extern char *rule_threshold_text(const Rule *r);
extern void rules_push_threshold(JsonbParseState **st, const Rule *r);
extern Jsonb *rule_threshold_jsonb(const Rule *r);

/* ---- rules_anomaly.c: measures held to bounds or to a job's history ---- */

typedef enum AnomalyKind
{
	ANOMALY_ROW_COUNT,
	ANOMALY_NULL_SHARE,
	ANOMALY_DISTINCT_COUNT,
	ANOMALY_FRESHNESS
} AnomalyKind;

typedef struct RuleAnomaly
{
	int			kind;			/* AnomalyKind; -1 until parsed */
	char	   *column;			/* NULL for row_count */
	double		within_sigma;	/* 0: no history test */
	int			runs;			/* history runs needed (with within_sigma) */
	bool		has_min;
	double		min;
	bool		has_max;
	double		max;
} RuleAnomaly;

typedef enum AnomalyVerdict
{
	ANOMALY_PASS,
	ANOMALY_FAIL,
	ANOMALY_SKIPPED
} AnomalyVerdict;

extern bool rules_parse_anomaly_key(Rule *r, const char *key, JsonbValue *v,
									const char *where);
extern void rules_check_anomaly(Rule *r, const char *where);
extern void rules_drop_anomalies(RuleSet *rs);
extern const char *rules_anomaly_kind_name(const Rule *r);
extern bool rules_anomaly_measure(const Rule *r, Oid relid, const char *relsql,
								  int64 total_rows, double *value);
extern int	rules_anomaly_history(const Rule *r, const char *job, double *values);
extern AnomalyVerdict rules_anomaly_judge(const Rule *r, bool has_value, double value,
										  const double *history, int n, double *mean,
										  double *stddev, char **why);

/* ---- rules_eval.c: evaluating row rules on scanned rows ---- */

typedef struct RuleEval RuleEval;

extern bool rule_eval_supported(Node *expr);
extern RuleEval *rule_eval_begin(Node **exprs, int n, TupleDesc rowdesc,
								  const int *positions);
extern int	rule_eval_shared(RuleEval *ev);
extern void rule_eval_row(RuleEval *ev, TupleTableSlot *slot, bool *violated);
extern void rule_eval_end(RuleEval *ev);

/* ---- rules_attach.c: loader hooks (called from stage.c, merge.c, batch.c, receipt.c) ---- */

typedef struct BatchRules BatchRules;
struct BatchState;				/* loader.h: the hooks take the batch whole */
struct TargetInfo;				/* target.h */

extern BatchRules *batch_rules_load(struct TargetInfo *t, Oid staged);
extern bool batch_rules_has_row_rules(BatchRules *br);
extern bool batch_rules_has_dataset_checks(BatchRules *br);
extern Oid	batch_rules_owner(BatchRules *br);
extern void batch_rules_context_push(struct BatchState *b);
extern void batch_rules_context_pop(struct BatchState *b);
extern TupleTableSlot *batch_rules_slot(BatchRules *br);
extern int	batch_rules_row(BatchRules *br, TupleTableSlot *row, const char ***reasons);
extern void batch_rules_gate(struct BatchState *b);
extern void batch_rules_check_winners(struct BatchState *b, const char *rows_sql);
extern Datum batch_rules_warnings(BatchRules *br, bool *isnull);
extern void batch_rules_record(struct BatchState *b);

#endif							/* RECONCILE_RULES_H */
