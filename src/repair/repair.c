/*
 * repair.c
 *		reconcile_repair and reconcile_repair_run: run a diff (diff.c's
 *		diff_compare, the same one reconcile_diff runs) and fix the target
 *		from its findings, never over a row that changed since the diff.
 *
 * The findings are read back, with the source's and the target's rows of
 * their keys, under the diff's own snapshot: that is "what the diff saw".
 * Then the target is locked against other writers (SHARE ROW EXCLUSIVE, as
 * a batch locks it) and fixed:
 *  - a registered target by a batch through reconcile_batch itself, whose
 *    staged rows are the source's rows of the differing keys (or
 *    tombstones), with a manifest of their own, so the repair gets a
 *    receipt and replays like any batch;
 *  - a plain target by one INSERT, UPDATE or DELETE per key, each guarded
 *    by the target row still holding every compared column as the diff
 *    saw it.
 * A key whose target row changed since the diff is reported
 * changed_since_diff and left as it is.  Every statement is built with
 * quoted names and schema-qualified operators; values travel as
 * parameters.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/relation.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/regproc.h"
#include "utils/snapmgr.h"
#include "utils/typcache.h"

#include "common/args.h"
#include "common/citus.h"
#include "common/colname.h"
#include "common/jsonbuild.h"
#include "common/jobs.h"
#include "common/jsonread.h"
#include "common/pinned.h"
#include "common/sqlname.h"
#include "diff/diff.h"
#include "loader/target.h"
#include "repair_version.h"

PG_FUNCTION_INFO_V1(reconcile_repair);
PG_FUNCTION_INFO_V1(reconcile_repair_run);

/* The plan's action column compared, with pg_catalog's "=" whatever the search_path. */
#define ACTION_WRITES "action OPERATOR(pg_catalog.=) ANY ('{insert,update,delete}'::pg_catalog.text[])"
#define ACTION_IS(a) "action OPERATOR(pg_catalog.=) '" a "'::pg_catalog.text"

/* Columns of reconcile_repair's result. */
#define REPAIR_NATTS 7

typedef struct RepairOptions
{
	bool		dry_run;
	bool		extra_keep;
	char	   *version_column; /* the source's, or NULL: compare-and-set */
	char	   *run;			/* the repair's name, or NULL: its content */
	Jsonb	   *diff_options;	/* everything else, for diff_prepare */
} RepairOptions;

/* One compared column as the repair writes it. */
typedef struct RepairColumn
{
	DiffColumn *dc;
	Oid			ttype;			/* the target column's own type */
	int32		ttypmod;
	FmgrInfo	sout;			/* output of the common type */
	FmgrInfo	tout;			/* output of the target's type */
	bool		payload;		/* registered: a payload column */
} RepairColumn;

typedef struct Repair
{
	Oid			source;
	Oid			target;
	const char *funcname;
	RepairOptions opts;
	DiffSpec   *spec;
	TargetInfo *reg;			/* registered target, or NULL */
	char	   *tqual;			/* the target table itself */
	RepairColumn *cols;
	Oid		   *ktype;			/* the target key columns' own types */
	int32	   *ktypmod;
	FmgrInfo   *kout;
	int		   *reg_key;		/* registered key i is diff key reg_key[i] */
	Oid			src_ver_type;
	char	   *fname;			/* temporary relations */
	char	   *pname;
	char	   *sname;
	char	   *vname;
	char	   *cname;			/* the target's rows under the lock */
	char	   *aname;			/* ... and after the batch */
	Snapshot	snap;			/* the diff's */
	Oid			extschema;
	Tuplestorestate *out;
	TupleDesc	outdesc;
} Repair;

/* ---------------------------------------------------------------------
 * Options
 * ---------------------------------------------------------------------
 */

static void
bad_option(const char *name, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
			 errmsg("invalid value for repair option \"%s\"", name),
			 errdetail("%s", detail)));
}

/*
 * The repair's own options out of the object; the rest are the diff's,
 * which diff_prepare checks as reconcile_diff does.
 */
static void
parse_options(Jsonb *options, RepairOptions *o)
{
	JsonbParseState *st = NULL;
	JsonbIterator *it;
	JsonbValue	v;
	char	   *key;

	memset(o, 0, sizeof(*o));
	if (options == NULL)
		return;
	if (!JB_ROOT_IS_OBJECT(options) || JB_ROOT_IS_SCALAR(options))
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("options must be a JSON object"),
				 errhint("Pass the diff's options and the repair's (dry_run, extra, version_column, run) in one object.")));
	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	it = JsonbIteratorInit(&options->root);
	while (jsonb_object_next(&it, &key, &v))
	{
		if (strcmp(key, "dry_run") == 0)
		{
			if (v.type != jbvBool)
				bad_option(key, "It must be true or false.");
			o->dry_run = v.val.boolean;
		}
		else if (strcmp(key, "extra") == 0)
		{
			char	   *s = v.type == jbvString ? jbv_string(&v) : NULL;

			if (s == NULL || (strcmp(s, "delete") != 0 && strcmp(s, "keep") != 0))
				bad_option(key, "It must be \"delete\" (the default: rows only the target has are deleted, or tombstoned on a registered target) or \"keep\" (they are left and reported).");
			o->extra_keep = strcmp(s, "keep") == 0;
		}
		else if (strcmp(key, "version_column") == 0 || strcmp(key, "run") == 0)
		{
			char	   *s = v.type == jbvString ? jbv_string(&v) : NULL;

			if (s == NULL || s[0] == '\0')
				bad_option(key, "It must be a non-empty string.");
			if (key[0] == 'v')
				o->version_column = s;
			else
				o->run = s;
		}
		else
		{
			jsonb_push_key(&st, key);
			pushJsonbValue(&st, WJB_VALUE, &v);
		}
	}
	o->diff_options = JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, NULL));
}

/* ---------------------------------------------------------------------
 * Checks before anything is read
 * ---------------------------------------------------------------------
 */

static void
require_right(Repair *r, AclMode mode, const char *right, const char *why)
{
	if (pg_class_aclcheck(r->target, GetUserId(), mode) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for target \"%s\": %s needs %s on it",
						get_rel_name(r->target), r->funcname, right),
				 errdetail("%s", why),
				 errhint("GRANT %s ON %s to role \"%s\", or run it with \"dry_run\": true to see the plan.",
						 right, relation_display_name(r->target),
						 GetUserNameFromId(GetUserId(), false))));
}

static void
check_rights(Repair *r)
{
	if (r->opts.dry_run)
		return;
	if (r->reg)
	{
		const char *why = "A registered target is repaired by a batch, which reads, inserts and updates it.";

		require_right(r, ACL_INSERT, "INSERT", why);
		require_right(r, ACL_UPDATE, "UPDATE", why);
	}
	else
	{
		const char *why = "A plain target is repaired with INSERT, UPDATE and DELETE statements run with the caller's rights.";

		require_right(r, ACL_INSERT, "INSERT", why);
		require_right(r, ACL_UPDATE, "UPDATE", why);
		if (!r->opts.extra_keep)
			require_right(r, ACL_DELETE, "DELETE", why);
	}
}

/*
 * A registered target managed by Citus is refused: its batch needs the
 * staged rows in a table distributed with it, and the repair stages them
 * in a temporary table of its session, which Citus cannot distribute.
 * Plain Citus targets and Citus sources are repaired by plain SQL, which
 * Citus routes (test/t/052_citus_repair.pl).
 */
static void
refuse_citus(Repair *r)
{
	if (r->reg && r->reg->citus_kind != CITUS_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("reconcile_repair does not support a registered target managed by Citus yet: \"%s\"",
						get_rel_name(r->target)),
				 errdetail("The repair's batch stages its rows in a temporary table, and a batch into %s needs them in a table distributed with it.",
						   citus_kind_name(r->reg->citus_kind)),
				 errhint("Run reconcile_diff, stage the source's rows of its findings in a table co-located with the target, and load them with reconcile_batch.")));
}

/* The registered target's key must be the diff's target key, in any order. */
static void
map_registered_keys(Repair *r)
{
	TargetInfo *t = r->reg;

	if (t->nkeys != r->spec->nkeys)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("the repair's key has %d columns, the key of registered target \"%s\" has %d",
						r->spec->nkeys, t->relname, t->nkeys),
				 errhint("Name the source columns of the target's registered key in key_columns (with target_key_columns or column_map where names differ).")));
	r->reg_key = palloc(sizeof(int) * t->nkeys);
	for (int i = 0; i < t->nkeys; i++)
	{
		r->reg_key[i] = -1;
		for (int j = 0; j < r->spec->nkeys; j++)
			if (strcmp(r->spec->keys[j].tname, t->keys[i].name) == 0)
				r->reg_key[i] = j;
		if (r->reg_key[i] < 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("key column \"%s\" of registered target \"%s\" is not a key column of the repair",
							t->keys[i].name, t->relname),
					 errhint("Name the source columns of the target's registered key in key_columns (with target_key_columns or column_map where names differ).")));
	}
}

static void
resolve_columns(Repair *r)
{
	Relation	rel = relation_open(r->target, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	DiffSpec   *spec = r->spec;
	Oid			fn;
	bool		varlena;

	r->cols = palloc0(sizeof(RepairColumn) * Max(spec->ncols, 1));
	for (int i = 0; i < spec->ncols; i++)
	{
		RepairColumn *c = &r->cols[i];
		Form_pg_attribute att = colname_find(desc, spec->cols[i].tname);

		c->dc = &spec->cols[i];
		c->ttype = att->atttypid;
		c->ttypmod = att->atttypmod;
		getTypeOutputInfo(c->dc->typid, &fn, &varlena);
		fmgr_info(fn, &c->sout);
		getTypeOutputInfo(c->ttype, &fn, &varlena);
		fmgr_info(fn, &c->tout);
		if (r->reg)
			for (int p = 0; p < r->reg->npayload; p++)
				if (strcmp(r->reg->payload[p].name, c->dc->tname) == 0)
					c->payload = true;
	}
	if (r->opts.run && r->reg == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("option \"run\" needs a registered target, and \"%s\" is not registered",
						get_rel_name(r->target)),
				 errdetail("A named run is the object of the repair's batch; a plain target is repaired without a batch."),
				 errhint("Leave the option out, or register the target with reconcile_register.")));
	r->ktype = palloc(sizeof(Oid) * spec->nkeys);
	r->ktypmod = palloc(sizeof(int32) * spec->nkeys);
	r->kout = palloc(sizeof(FmgrInfo) * spec->nkeys);
	for (int i = 0; i < spec->nkeys; i++)
	{
		Form_pg_attribute att = colname_find(desc, spec->keys[i].tname);

		r->ktype[i] = att->atttypid;
		r->ktypmod[i] = att->atttypmod;
		getTypeOutputInfo(att->atttypid, &fn, &varlena);
		fmgr_info(fn, &r->kout[i]);
	}
	relation_close(rel, AccessShareLock);

	if (r->opts.version_column)
	{
		Relation	srel = relation_open(r->source, AccessShareLock);
		Form_pg_attribute att = colname_find(RelationGetDescr(srel), r->opts.version_column);

		if (att == NULL)
		{
			char	   *hint = colname_hint(RelationGetDescr(srel), r->opts.version_column);

			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_COLUMN),
					 errmsg("version column \"%s\" does not exist in source \"%s\"",
							r->opts.version_column, RelationGetRelationName(srel)),
					 hint ? errhint("%s", hint) : 0));
		}
		r->opts.version_column = pstrdup(NameStr(att->attname));
		r->src_ver_type = att->atttypid;
		relation_close(srel, AccessShareLock);
		if (r->reg == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("option \"version_column\" needs a registered target, and \"%s\" is not registered",
							get_rel_name(r->target)),
					 errdetail("A plain target has no version; its rows are guarded by their compared columns."),
					 errhint("Leave the option out, or register the target with reconcile_register.")));
	}
	/* "One more" than the target's version exists for integer versions only. */
	if (r->reg)
		repair_version_check(r->reg, r->opts.version_column != NULL, !r->opts.extra_keep);
}

/* ---------------------------------------------------------------------
 * SQL pieces
 * ---------------------------------------------------------------------
 */

static char *
qi(const char *name)
{
	return (char *) quote_identifier(name);
}

/* a = b for a type, NULL-safe, with its own "=" (or the text forms). */
static void
append_same(StringInfo sql, const char *a, const char *b, Oid type)
{
	TypeCacheEntry *tc = lookup_type_cache(type, TYPECACHE_EQ_OPR);

	if (OidIsValid(tc->eq_opr))
		appendStringInfo(sql, "(%s %s %s OR (%s IS NULL AND %s IS NULL))",
						 a, operator_sql(tc->eq_opr), b, a, b);
	else
		appendStringInfo(sql, "(CAST(%s AS pg_catalog.text) OPERATOR(pg_catalog.=) CAST(%s AS pg_catalog.text) OR (%s IS NULL AND %s IS NULL))",
						 a, b, a, b);
}

static void
append_eq(StringInfo sql, const char *a, const char *b, Oid type)
{
	TypeCacheEntry *tc = lookup_type_cache(type, TYPECACHE_EQ_OPR);

	if (!OidIsValid(tc->eq_opr))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("key type %s has no equality operator", format_type_be(type))));
	appendStringInfo(sql, "%s %s %s", a, operator_sql(tc->eq_opr), b);
}

/* key expression k COLLATE the diff's collation where the sides' differ */
static char *
collated(DiffColumn *k, const char *expr, Oid own)
{
	if (OidIsValid(k->collation) && own != k->collation)
		return psprintf("(%s COLLATE %s)", expr, collation_quoted_name(k->collation));
	return (char *) expr;
}

/*
 * The value written into a target column of type ttype from an expression
 * of the diff's common type: a naive time compared in the diff's zone goes
 * back into a timestamptz in that zone, not the session's.
 */
static char *
write_expr(Repair *r, DiffColumn *c, Oid ttype, int32 ttypmod, const char *expr)
{
	if (c->in_zone && ttype == TIMESTAMPTZOID)
		return psprintf("pg_catalog.timezone(%s::pg_catalog.text, %s)",
						quote_literal_cstr(r->spec->time_zone), expr);
	return psprintf("CAST(%s AS %s)", expr,
					format_type_extended(ttype, ttypmod,
										 FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY));
}

static void
run_sql(const char *sql, int expect)
{
	int			rc = SPI_execute(sql, false, 0);

	if (rc != expect)
		elog(ERROR, "repair statement failed (%d): %s", rc, sql);
}

/* ---------------------------------------------------------------------
 * The findings, and what the diff saw of their keys
 * ---------------------------------------------------------------------
 */

static void
emit(Repair *r, Datum key, bool keynull, const char *issue, const char *action,
	 const char *outcome, Jsonb *oldv, Jsonb *newv, const char *batch_id)
{
	Datum		values[REPAIR_NATTS];
	bool		nulls[REPAIR_NATTS] = {0};

	values[0] = key;
	nulls[0] = keynull;
	values[1] = issue ? CStringGetTextDatum(issue) : (Datum) 0;
	nulls[1] = issue == NULL;
	values[2] = CStringGetTextDatum(action);
	values[3] = CStringGetTextDatum(outcome);
	values[4] = oldv ? JsonbPGetDatum(oldv) : (Datum) 0;
	nulls[4] = oldv == NULL;
	values[5] = newv ? JsonbPGetDatum(newv) : (Datum) 0;
	nulls[5] = newv == NULL;
	values[6] = batch_id ? CStringGetTextDatum(batch_id) : (Datum) 0;
	nulls[6] = batch_id == NULL;
	tuplestore_putvalues(r->out, r->outdesc, values, nulls);
}

static char *
type_sql(Oid type)
{
	return format_type_be_qualified(type);
}

/*
 * Findings of missing, extra and mismatched keys go into a temporary
 * table with their keys in the diff's types (read back from the finding's
 * key with the types' input functions); duplicate and NULL keys are
 * reported as skipped.  Returns how many went in.
 */
static int64
store_findings(Repair *r, Tuplestorestate *ts, TupleDesc desc)
{
	DiffSpec   *spec = r->spec;
	StringInfoData sql;
	TupleTableSlot *slot = MakeSingleTupleTableSlot(desc, &TTSOpsMinimalTuple);
	SPIPlanPtr	ins;
	Oid			types[3] = {INT4OID, TEXTOID, JSONBOID};
	int32		ord = 0;
	MemoryContext rowcxt = AllocSetContextCreate(CurrentMemoryContext, "repair row",
												 ALLOCSET_DEFAULT_SIZES);

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TEMPORARY TABLE %s (ord pg_catalog.int4, issue pg_catalog.text, key pg_catalog.jsonb",
					 qi(r->fname));
	for (int i = 0; i < spec->nkeys; i++)
	{
		DiffColumn *k = &spec->keys[i];

		appendStringInfo(&sql, ", k%d %s", i + 1, type_sql(k->typid));
		if (OidIsValid(k->scollation))
			appendStringInfo(&sql, " COLLATE %s", collation_quoted_name(k->scollation));
	}
	appendStringInfoString(&sql, ")");
	run_sql(sql.data, SPI_OK_UTILITY);

	resetStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO pg_temp.%s SELECT $1, $2, $3", qi(r->fname));
	for (int i = 0; i < spec->nkeys; i++)
		appendStringInfo(&sql, ", x.%s", qi(spec->keys[i].name));
	appendStringInfoString(&sql, " FROM pg_catalog.jsonb_to_record($3) AS x(");
	for (int i = 0; i < spec->nkeys; i++)
		appendStringInfo(&sql, "%s%s %s", i ? ", " : "", qi(spec->keys[i].name),
						 type_sql(spec->keys[i].typid));
	appendStringInfoString(&sql, ")");
	ins = SPI_prepare(sql.data, 3, types);
	if (ins == NULL)
		elog(ERROR, "could not prepare the findings' insert: %s", sql.data);

	while (tuplestore_gettupleslot(ts, true, false, slot))
	{
		bool		isnull;
		char	   *issue;
		Datum		key;
		MemoryContext old;

		CHECK_FOR_INTERRUPTS();
		old = MemoryContextSwitchTo(rowcxt);
		issue = TextDatumGetCString(slot_getattr(slot, 1, &isnull));
		key = slot_getattr(slot, 2, &isnull);
		if (strcmp(issue, "MISSING_IN_TARGET") == 0 || strcmp(issue, "EXTRA_IN_TARGET") == 0 ||
			strcmp(issue, "MISMATCH") == 0)
		{
			Datum		args[3] = {Int32GetDatum(++ord), CStringGetTextDatum(issue), key};

			if (SPI_execute_plan(ins, args, NULL, false, 0) != SPI_OK_INSERT)
				elog(ERROR, "could not store a finding");
		}
		else
		{
			MemoryContextSwitchTo(old);
			/* A key that is not unique, or NULL in part, has no row to fix. */
			emit(r, key, isnull, issue, "none",
				 strncmp(issue, "DUPLICATE", 9) == 0 ? "skipped_duplicate_key" : "skipped_null_key",
				 NULL, NULL, NULL);
		}
		MemoryContextSwitchTo(old);
		MemoryContextReset(rowcxt);
	}
	ExecDropSingleTupleTableSlot(slot);
	MemoryContextDelete(rowcxt);
	return ord;
}

/*
 * " LEFT JOIN (the target's rows of the keys of relation keys, alias
 * alias, raw: t_present, tn<i> the key as the diff reads it, tk<i>, t<i>,
 * p<i>, t_ver, t_del) t ON the key": filtered by key, pushed down to a
 * foreign or a Citus side.
 */
static void
append_target_rows(Repair *r, StringInfo sql, const char *keys, const char *alias)
{
	DiffSpec   *spec = r->spec;

	appendStringInfoString(sql, " LEFT JOIN (SELECT true AS t_present");
	for (int i = 0; i < spec->nkeys; i++)
		appendStringInfo(sql, ", %s AS tn%d, %s AS tk%d",
						 collated(&spec->keys[i], spec->keys[i].texpr, spec->keys[i].tcollation),
						 i + 1, qi(spec->keys[i].tname), i + 1);
	for (int i = 0; i < spec->ncols; i++)
		appendStringInfo(sql, ", %s AS t%d", qi(spec->cols[i].tname), i + 1);
	if (r->reg)
	{
		for (int p = 0; p < r->reg->npayload; p++)
			appendStringInfo(sql, ", %s AS p%d", qi(r->reg->payload[p].name), p + 1);
		appendStringInfo(sql, ", %s AS t_ver, %s AS t_del", qi(r->reg->version.name),
						 qi(r->reg->deleted.name));
	}
	appendStringInfo(sql, " FROM %s WHERE ", r->tqual);
	for (int i = 0; i < spec->nkeys; i++)
	{
		DiffColumn *k = &spec->keys[i];

		appendStringInfo(sql, "%s%s %s ANY (ARRAY(SELECT %s FROM pg_temp.%s))",
						 i ? " AND " : "", collated(k, k->texpr, k->tcollation),
						 operator_sql(lookup_type_cache(k->typid, TYPECACHE_EQ_OPR)->eq_opr),
						 collated(k, psprintf("k%d", i + 1), k->scollation), qi(keys));
	}
	appendStringInfoString(sql, ") t ON ");
	for (int i = 0; i < spec->nkeys; i++)
	{
		DiffColumn *k = &spec->keys[i];

		if (i)
			appendStringInfoString(sql, " AND ");
		append_eq(sql, psprintf("t.tn%d", i + 1),
				  collated(k, psprintf("%s.k%d", alias, i + 1), k->scollation), k->typid);
	}
}

/*
 * The target's rows of the plan's keys as they are now, into a temporary
 * relation: one plain query on the target, then compared locally, so that
 * a Citus or foreign target is read as any other.
 */
static void
read_target_rows(Repair *r, const char *name)
{
	StringInfoData sql;

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TEMPORARY TABLE %s AS SELECT f.ord, t.* FROM pg_temp.%s f",
					 qi(name), qi(r->pname));
	append_target_rows(r, &sql, r->pname, "f");
	appendStringInfoString(&sql, " WHERE t.t_present");
	run_sql(sql.data, SPI_OK_UTILITY);
}

/*
 * The plan: per finding, the source's row of its key and the target's (the
 * table itself, tombstones included), both read by key only, whatever the
 * diff's window, and the action that makes them agree.  It is read under
 * the diff's snapshot (copied, with this command's id, so that the
 * findings written since are seen): the target's values are what the
 * diff saw.
 */
static void
build_plan(Repair *r)
{
	DiffSpec   *spec = r->spec;
	StringInfoData sql;
	SPIPlanPtr	plan;
	const char *live;

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TEMPORARY TABLE %s AS SELECT f.ord, f.issue, f.key", qi(r->pname));
	for (int i = 0; i < spec->nkeys; i++)
		appendStringInfo(&sql, ", f.k%d, t.tk%d", i + 1, i + 1);
	for (int i = 0; i < spec->ncols; i++)
		appendStringInfo(&sql, ", s.s%d, t.t%d", i + 1, i + 1);
	if (r->reg)
	{
		for (int p = 0; p < r->reg->npayload; p++)
			appendStringInfo(&sql, ", t.p%d", p + 1);
		appendStringInfoString(&sql, ", t.t_ver, t.t_del");
		if (r->opts.version_column)
			appendStringInfoString(&sql, ", s.s_ver");
	}
	live = r->reg ? "(t.t_present AND t.t_del IS NOT TRUE)" : "t.t_present";
	appendStringInfo(&sql, ", s.s_present IS TRUE AS s_present, t.t_present IS TRUE AS t_present,"
					 " CASE WHEN s.s_present AND %s THEN 'update'"
					 " WHEN s.s_present THEN 'insert'"
					 " WHEN %s THEN '%s' ELSE 'none' END AS action,"
					 " false AS changed",
					 live, live, r->opts.extra_keep ? "keep" : "delete");

	/* The source's rows of the keys: filtered by key, pushed down to a foreign side. */
	appendStringInfoString(&sql, " FROM pg_temp.");
	appendStringInfoString(&sql, qi(r->fname));
	appendStringInfoString(&sql, " f LEFT JOIN (SELECT true AS s_present");
	for (int i = 0; i < spec->nkeys; i++)
		appendStringInfo(&sql, ", %s AS sk%d", spec->keys[i].sexpr, i + 1);
	for (int i = 0; i < spec->ncols; i++)
		appendStringInfo(&sql, ", %s AS s%d", spec->cols[i].sexpr, i + 1);
	if (r->opts.version_column)
		appendStringInfo(&sql, ", %s AS s_ver", qi(r->opts.version_column));
	appendStringInfo(&sql, " FROM %s WHERE ", spec->squal);
	for (int i = 0; i < spec->nkeys; i++)
		appendStringInfo(&sql, "%s%s %s ANY (ARRAY(SELECT k%d FROM pg_temp.%s))",
						 i ? " AND " : "", spec->keys[i].sexpr,
						 operator_sql(lookup_type_cache(spec->keys[i].typid, TYPECACHE_EQ_OPR)->eq_opr),
						 i + 1, qi(r->fname));
	appendStringInfoString(&sql, ") s ON ");
	for (int i = 0; i < spec->nkeys; i++)
	{
		if (i)
			appendStringInfoString(&sql, " AND ");
		append_eq(&sql, psprintf("s.sk%d", i + 1), psprintf("f.k%d", i + 1), spec->keys[i].typid);
	}

	/* The target's rows of the keys, raw. */
	append_target_rows(r, &sql, r->fname, "f");

	plan = SPI_prepare(sql.data, 0, NULL);
	if (plan == NULL)
		elog(ERROR, "could not prepare the repair's plan: %s", sql.data);
	if (SPI_execute_snapshot(plan, NULL, NULL, r->snap, InvalidSnapshot, false, false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "could not read the rows of the differing keys");
}

/* Keys read twice on a side (a duplicate outside the diff's window) are skipped. */
static void
skip_ambiguous(Repair *r)
{
	StringInfoData sql;

	initStringInfo(&sql);
	appendStringInfo(&sql, "WITH d AS (DELETE FROM pg_temp.%s WHERE ord OPERATOR(pg_catalog.=) ANY (ARRAY(SELECT ord FROM pg_temp.%s"
					 " GROUP BY ord HAVING pg_catalog.count(*) OPERATOR(pg_catalog.>) 1))"
					 " RETURNING ord, key, issue) SELECT DISTINCT ON (ord) key, issue FROM d ORDER BY ord",
					 qi(r->pname), qi(r->pname));
	if (SPI_execute(sql.data, false, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not check the plan's keys");
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		bool		n1,
					n2;
		HeapTuple	tup = SPI_tuptable->vals[i];
		Datum		key = SPI_getbinval(tup, SPI_tuptable->tupdesc, 1, &n1);
		Datum		issue = SPI_getbinval(tup, SPI_tuptable->tupdesc, 2, &n2);

		emit(r, key, false, TextDatumGetCString(issue), "none",
			 "skipped_duplicate_key", NULL, NULL, NULL);
	}
}

/* ---------------------------------------------------------------------
 * Reporting a planned row
 * ---------------------------------------------------------------------
 */

static Jsonb *
values_jsonb(Repair *r, HeapTuple tup, TupleDesc desc, bool source)
{
	JsonbParseState *st = NULL;

	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	for (int i = 0; i < r->spec->ncols; i++)
	{
		RepairColumn *c = &r->cols[i];
		bool		isnull;
		Datum		d = SPI_getbinval(tup, desc,
									  SPI_fnumber(desc, psprintf("%s%d", source ? "s" : "t", i + 1)),
									  &isnull);

		jsonb_push_key(&st, c->dc->name);
		jsonb_push_datum(&st, WJB_VALUE, d, isnull, source ? c->dc->typid : c->ttype,
						 source ? &c->sout : &c->tout,
						 JSONB_DATUM_ISO_DATETIME | JSONB_DATUM_EMBED_JSON);
	}
	return JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_OBJECT, NULL));
}

static bool
attr_bool(HeapTuple tup, TupleDesc desc, const char *name)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tup, desc, SPI_fnumber(desc, name), &isnull);

	return !isnull && DatumGetBool(d);
}

static char *
attr_text(HeapTuple tup, TupleDesc desc, const char *name)
{
	bool		isnull;
	Datum		d = SPI_getbinval(tup, desc, SPI_fnumber(desc, name), &isnull);

	return isnull ? NULL : TextDatumGetCString(d);
}

/* One result row per planned key, in the findings' order. */
static void
report_plan(Repair *r, const char *outcome_col, const char *batch_id)
{
	StringInfoData sql;
	Portal		portal;
	PinnedSettings saved;
	MemoryContext rowcxt = AllocSetContextCreate(CurrentMemoryContext, "repair row",
												 ALLOCSET_DEFAULT_SIZES);
	MemoryContext caller = CurrentMemoryContext;

	initStringInfo(&sql);
	appendStringInfo(&sql, "SELECT p.*, %s AS outcome FROM pg_temp.%s p ORDER BY p.ord",
					 outcome_col, qi(r->pname));
	portal = SPI_cursor_open_with_args(NULL, sql.data, 0, NULL, NULL, NULL, false, 0);
	pinned_settings_enter(&saved, false);
	for (;;)
	{
		MemoryContextSwitchTo(caller);
		SPI_cursor_fetch(portal, true, 100);
		MemoryContextSwitchTo(caller);
		if (SPI_processed == 0)
			break;
		for (uint64 i = 0; i < SPI_processed; i++)
		{
			HeapTuple	tup = SPI_tuptable->vals[i];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			bool		isnull;
			Datum		key;
			MemoryContext old;

			CHECK_FOR_INTERRUPTS();
			old = MemoryContextSwitchTo(rowcxt);
			key = SPI_getbinval(tup, desc, SPI_fnumber(desc, "key"), &isnull);
			emit(r, key, isnull, attr_text(tup, desc, "issue"), attr_text(tup, desc, "action"),
				 attr_text(tup, desc, "outcome"),
				 attr_bool(tup, desc, "t_present") ? values_jsonb(r, tup, desc, false) : NULL,
				 attr_bool(tup, desc, "s_present") ? values_jsonb(r, tup, desc, true) : NULL,
				 batch_id);
			MemoryContextSwitchTo(old);
			MemoryContextReset(rowcxt);
		}
		SPI_freetuptable(SPI_tuptable);
	}
	pinned_settings_leave(&saved);
	SPI_cursor_close(portal);
	MemoryContextDelete(rowcxt);
}

/* ---------------------------------------------------------------------
 * A plain target: one guarded statement per key
 * ---------------------------------------------------------------------
 */

/* The target row still has the key and every compared column the diff saw. */
static void
append_guard(Repair *r, StringInfo sql, int firstparam)
{
	int			n = firstparam;

	for (int i = 0; i < r->spec->nkeys; i++)
	{
		appendStringInfoString(sql, i ? " AND " : "");
		append_eq(sql, qi(r->spec->keys[i].tname), psprintf("$%d", n++), r->ktype[i]);
	}
	for (int i = 0; i < r->spec->ncols; i++)
	{
		appendStringInfoString(sql, " AND ");
		append_same(sql, qi(r->cols[i].dc->tname), psprintf("$%d", n++), r->cols[i].ttype);
	}
}

static void
repair_plain(Repair *r)
{
	DiffSpec   *spec = r->spec;
	int			nk = spec->nkeys,
				nc = spec->ncols;
	int			nguard = nk + nc;
	Oid		   *types = palloc(sizeof(Oid) * (nguard + nk + nc));
	Datum	   *vals = palloc(sizeof(Datum) * (nguard + nk + nc));
	char	   *nulls = palloc(nguard + nk + nc + 1);
	StringInfoData sql;
	SPIPlanPtr	upd,
				del,
				ins;
	Portal		portal;
	SPIPlanPtr	mark;
	Oid			ordtype = INT4OID;
	MemoryContext caller = CurrentMemoryContext;

	/* guard parameters: the target's keys and compared columns as seen */
	for (int i = 0; i < nk; i++)
		types[i] = r->ktype[i];
	for (int i = 0; i < nc; i++)
		types[nk + i] = r->cols[i].ttype;
	/* then the source's values */
	for (int i = 0; i < nc; i++)
		types[nguard + i] = spec->cols[i].typid;

	initStringInfo(&sql);
	appendStringInfo(&sql, "UPDATE %s SET ", r->tqual);
	for (int i = 0; i < nc; i++)
		appendStringInfo(&sql, "%s%s = %s", i ? ", " : "", qi(spec->cols[i].tname),
						 write_expr(r, &spec->cols[i], r->cols[i].ttype, r->cols[i].ttypmod,
									psprintf("$%d", nguard + i + 1)));
	appendStringInfoString(&sql, " WHERE ");
	append_guard(r, &sql, 1);
	upd = nc > 0 ? SPI_prepare(sql.data, nguard + nc, types) : NULL;
	if (nc > 0 && upd == NULL)
		elog(ERROR, "could not prepare: %s", sql.data);

	resetStringInfo(&sql);
	appendStringInfo(&sql, "DELETE FROM %s WHERE ", r->tqual);
	append_guard(r, &sql, 1);
	del = SPI_prepare(sql.data, nguard, types);
	if (del == NULL)
		elog(ERROR, "could not prepare: %s", sql.data);

	/* insert: $1.. the keys (diff types), then the source's values */
	{
		Oid		   *itypes = palloc(sizeof(Oid) * (nk + nc));

		for (int i = 0; i < nk; i++)
			itypes[i] = spec->keys[i].typid;
		for (int i = 0; i < nc; i++)
			itypes[nk + i] = spec->cols[i].typid;
		resetStringInfo(&sql);
		appendStringInfo(&sql, "INSERT INTO %s (", r->tqual);
		for (int i = 0; i < nk; i++)
			appendStringInfo(&sql, "%s%s", i ? ", " : "", qi(spec->keys[i].tname));
		for (int i = 0; i < nc; i++)
			appendStringInfo(&sql, ", %s", qi(spec->cols[i].tname));
		appendStringInfoString(&sql, ") SELECT ");
		for (int i = 0; i < nk; i++)
			appendStringInfo(&sql, "%s%s", i ? ", " : "",
							 write_expr(r, &spec->keys[i], r->ktype[i], r->ktypmod[i],
										psprintf("$%d", i + 1)));
		for (int i = 0; i < nc; i++)
			appendStringInfo(&sql, ", %s",
							 write_expr(r, &spec->cols[i], r->cols[i].ttype, r->cols[i].ttypmod,
										psprintf("$%d", nk + i + 1)));
		appendStringInfo(&sql, " WHERE NOT EXISTS (SELECT FROM %s WHERE ", r->tqual);
		for (int i = 0; i < nk; i++)
		{
			DiffColumn *k = &spec->keys[i];

			appendStringInfoString(&sql, i ? " AND " : "");
			append_eq(&sql, collated(k, k->texpr, k->tcollation),
					  collated(k, psprintf("$%d", i + 1), k->scollation), k->typid);
		}
		appendStringInfoString(&sql, ")");
		ins = SPI_prepare(sql.data, nk + nc, itypes);
		if (ins == NULL)
			elog(ERROR, "could not prepare: %s", sql.data);
	}

	resetStringInfo(&sql);
	appendStringInfo(&sql, "UPDATE pg_temp.%s SET changed = true WHERE ord OPERATOR(pg_catalog.=) $1",
					 qi(r->pname));
	mark = SPI_prepare(sql.data, 1, &ordtype);

	resetStringInfo(&sql);
	appendStringInfo(&sql, "SELECT * FROM pg_temp.%s WHERE " ACTION_WRITES " ORDER BY ord",
					 qi(r->pname));
	portal = SPI_cursor_open_with_args(NULL, sql.data, 0, NULL, NULL, NULL, false, 0);
	for (;;)
	{
		SPITupleTable *tt;

		SPI_cursor_fetch(portal, true, 100);
		MemoryContextSwitchTo(caller);
		if (SPI_processed == 0)
			break;
		tt = SPI_tuptable;
		for (uint64 row = 0; row < tt->numvals; row++)
		{
			HeapTuple	tup = tt->vals[row];
			TupleDesc	desc = tt->tupdesc;
			char	   *action = attr_text(tup, desc, "action");
			bool		isnull;
			int			rc;

			CHECK_FOR_INTERRUPTS();
#define FETCH(idx, name) \
	do { vals[idx] = SPI_getbinval(tup, desc, SPI_fnumber(desc, name), &isnull); \
		 nulls[idx] = isnull ? 'n' : ' '; } while (0)
			if (strcmp(action, "insert") == 0)
			{
				for (int i = 0; i < nk; i++)
					FETCH(i, psprintf("k%d", i + 1));
				for (int i = 0; i < nc; i++)
					FETCH(nk + i, psprintf("s%d", i + 1));
				rc = SPI_execute_plan(ins, vals, nulls, false, 0);
			}
			else
			{
				for (int i = 0; i < nk; i++)
					FETCH(i, psprintf("tk%d", i + 1));
				for (int i = 0; i < nc; i++)
					FETCH(nk + i, psprintf("t%d", i + 1));
				if (strcmp(action, "update") == 0)
				{
					for (int i = 0; i < nc; i++)
						FETCH(nguard + i, psprintf("s%d", i + 1));
					rc = upd ? SPI_execute_plan(upd, vals, nulls, false, 0) : SPI_OK_UPDATE;
				}
				else
					rc = SPI_execute_plan(del, vals, nulls, false, 0);
			}
#undef FETCH
			if (rc < 0)
				elog(ERROR, "repair statement failed (%d)", rc);
			if (SPI_processed == 0 && (upd != NULL || strcmp(action, "update") != 0))
			{
				Datum		ord = SPI_getbinval(tup, desc, SPI_fnumber(desc, "ord"), &isnull);

				if (SPI_execute_plan(mark, &ord, NULL, false, 0) != SPI_OK_UPDATE)
					elog(ERROR, "could not record a changed row");
			}
		}
		SPI_freetuptable(tt);
	}
	SPI_cursor_close(portal);
	report_plan(r, "CASE WHEN " ACTION_WRITES " THEN"
				" CASE WHEN changed THEN 'changed_since_diff' ELSE 'applied' END"
				" WHEN " ACTION_IS("keep") " THEN 'kept' ELSE 'nothing_to_do' END", NULL);
}

/* ---------------------------------------------------------------------
 * A registered target: a batch of the source's rows
 * ---------------------------------------------------------------------
 */

/*
 * Under the batch's lock, mark each planned key whose target row is no
 * longer what the diff saw (version, tombstone, compared columns), or that
 * has gained a row since.
 */
static void
mark_changed(Repair *r)
{
	DiffSpec   *spec = r->spec;
	StringInfoData sql;

	read_target_rows(r, r->cname);
	initStringInfo(&sql);
	appendStringInfo(&sql, "UPDATE pg_temp.%s p SET changed = true WHERE " ACTION_WRITES " AND"
					 " CASE WHEN p.t_present THEN NOT EXISTS (SELECT FROM pg_temp.%s c WHERE c.ord OPERATOR(pg_catalog.=) p.ord",
					 qi(r->pname), qi(r->cname));
	for (int i = 0; i < spec->nkeys; i++)
	{
		appendStringInfoString(&sql, " AND ");
		append_same(&sql, psprintf("c.tk%d", i + 1), psprintf("p.tk%d", i + 1), r->ktype[i]);
	}
	appendStringInfoString(&sql, " AND ");
	repair_version_same_sql(&sql, "c.t_ver", "p.t_ver", r->reg->version.typid);
	appendStringInfoString(&sql, " AND ");
	append_same(&sql, "c.t_del", "p.t_del", BOOLOID);
	for (int i = 0; i < spec->ncols; i++)
	{
		appendStringInfoString(&sql, " AND ");
		append_same(&sql, psprintf("c.t%d", i + 1), psprintf("p.t%d", i + 1), r->cols[i].ttype);
	}
	appendStringInfo(&sql, ") ELSE EXISTS (SELECT FROM pg_temp.%s c WHERE c.ord OPERATOR(pg_catalog.=) p.ord) END",
					 qi(r->cname));
	run_sql(sql.data, SPI_OK_UPDATE);
}

/* The staged relation of the repair's batch; returns its row count and content hash. */
static int64
stage_rows(Repair *r, char **hash)
{
	DiffSpec   *spec = r->spec;
	TargetInfo *t = r->reg;
	StringInfoData sql;
	bool		isnull;
	int64		rows;

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TEMPORARY TABLE %s AS SELECT ''::pg_catalog.text AS object_key,"
					 " ord::pg_catalog.int8 AS source_row,"
					 " CASE WHEN " ACTION_IS("delete") " THEN 'DELETE' ELSE 'UPSERT' END::pg_catalog.text AS operation",
					 qi(r->sname));
	for (int i = 0; i < t->nkeys; i++)
	{
		int			j = r->reg_key[i];

		appendStringInfo(&sql, ", CASE WHEN t_present THEN tk%d ELSE %s END AS %s", j + 1,
						 write_expr(r, &spec->keys[j], r->ktype[j], r->ktypmod[j],
									psprintf("k%d", j + 1)),
						 qi(t->keys[i].name));
	}
	/* The version: the source's, or one more than the target's (a tombstone's too). */
	if (!repair_version_has_next(t))
	{
		/* no "one more" (repair_version_check): the source's, and no deletes */
		Assert(r->opts.version_column && r->opts.extra_keep);
		appendStringInfo(&sql, ", CAST(s_ver AS %s) AS %s",
						 format_type_be_qualified(t->version.typid), qi(t->version.name));
	}
	else
	{
		appendStringInfoString(&sql, ", CASE WHEN ");
		if (r->opts.version_column)
			appendStringInfo(&sql, "action OPERATOR(pg_catalog.<>) 'delete' THEN CAST(s_ver AS %s) WHEN ",
							 format_type_be_qualified(t->version.typid));
		appendStringInfoString(&sql, "t_present THEN ");
		repair_version_next_sql(&sql, "t_ver", t->version.typid);
		appendStringInfoString(&sql, " ELSE ");
		repair_version_first_sql(&sql, t->version.typid);
		appendStringInfo(&sql, " END AS %s", qi(t->version.name));
	}
	for (int p = 0; p < t->npayload; p++)
	{
		int			c = -1;

		for (int i = 0; i < spec->ncols; i++)
			if (strcmp(spec->cols[i].tname, t->payload[p].name) == 0)
				c = i;
		if (c < 0)
			/* not compared: the target's own value stays */
			appendStringInfo(&sql, ", p%d AS %s", p + 1, qi(t->payload[p].name));
		else
			appendStringInfo(&sql, ", CASE WHEN " ACTION_IS("delete") " THEN p%d ELSE %s END AS %s",
							 p + 1,
							 write_expr(r, &spec->cols[c], t->payload[p].typid, t->payload[p].typmod,
										psprintf("s%d", c + 1)),
							 qi(t->payload[p].name));
	}
	appendStringInfo(&sql, " FROM pg_temp.%s WHERE " ACTION_WRITES " AND NOT changed",
					 qi(r->pname));
	run_sql(sql.data, SPI_OK_UTILITY);

	/* The content: every staged row's text, in order, under pinned settings. */
	resetStringInfo(&sql);
	appendStringInfo(&sql, "SELECT pg_catalog.count(*), pg_catalog.encode(pg_catalog.sha256(pg_catalog.convert_to("
					 "COALESCE(pg_catalog.string_agg(CAST(s AS pg_catalog.text), E'\\n' ORDER BY s.source_row), ''),"
					 " 'UTF8')), 'hex') FROM pg_temp.%s s", qi(r->sname));
	{
		PinnedSettings saved;

		pinned_settings_enter(&saved, false);
		if (SPI_execute(sql.data, false, 1) != SPI_OK_SELECT)
			elog(ERROR, "could not hash the repair's rows");
		pinned_settings_leave(&saved);
	}
	rows = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
	*hash = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	return rows;
}

static char *
object_key(Repair *r, const char *hash)
{
	return psprintf("repair:%s:%s", relation_display_name(r->source),
					r->opts.run ? r->opts.run : psprintf("%.16s", hash));
}

/* A named repair run already applied: its batch id, else NULL. */
static char *
applied_run(Repair *r)
{
	Datum		args[2];
	Oid			types[2] = {OIDOID, TEXTOID};

	if (r->opts.run == NULL)
		return NULL;
	args[0] = ObjectIdGetDatum(r->target);
	args[1] = CStringGetTextDatum(object_key(r, ""));
	if (SPI_execute_with_args("SELECT batch_id FROM reconcile.batch_objects"
							  " WHERE target OPERATOR(pg_catalog.=) $1 AND object_key OPERATOR(pg_catalog.=) $2",
							  2, types, args, NULL, false, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read reconcile.batch_objects");
	return SPI_processed ? SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1) : NULL;
}

static void
repair_registered(Repair *r)
{
	char	   *hash;
	int64		rows;
	char	   *batch_id = NULL;
	char	   *status = NULL;
	char	   *okey;

	mark_changed(r);
	rows = stage_rows(r, &hash);
	okey = object_key(r, hash);
	if (rows > 0)
	{
		StringInfoData sql;
		JsonbParseState *st = NULL;
		Jsonb	   *manifest;
		Datum		args[5];
		Oid			types[5] = {OIDOID, OIDOID, JSONBOID, TEXTOID, TEXTOID};

		initStringInfo(&sql);
		appendStringInfo(&sql, "UPDATE pg_temp.%s SET object_key = $1", qi(r->sname));
		args[0] = CStringGetTextDatum(okey);
		if (SPI_execute_with_args(sql.data, 1, types + 3, args, NULL, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not name the repair's object");

		pushJsonbValue(&st, WJB_BEGIN_ARRAY, NULL);
		pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
		jsonb_push_string_field(&st, "object_key", okey);
		jsonb_push_string_field(&st, "version_id", "1");
		jsonb_push_string_field(&st, "content_hash", psprintf("sha256:%s", hash));
		jsonb_push_int64_field(&st, "rows", rows);
		pushJsonbValue(&st, WJB_END_OBJECT, NULL);
		manifest = JsonbValueToJsonb(pushJsonbValue(&st, WJB_END_ARRAY, NULL));

		resetStringInfo(&sql);
		/*
		 * The staged rows are a temporary table of this session, which Citus
		 * cannot distribute: a Citus target's batch merges on the coordinator.
		 */
		appendStringInfo(&sql, "SELECT batch_id, status FROM %s.reconcile_batch($1::pg_catalog.regclass,"
						 " $2::pg_catalog.regclass, $3, $4, $5%s)",
						 qi(get_namespace_name(r->extschema)),
						 r->reg->citus_kind != CITUS_NONE ? ", options => '{\"citus_merge\": \"coordinator\"}'" : "");
		args[0] = ObjectIdGetDatum(r->target);
		args[1] = ObjectIdGetDatum(RangeVarGetRelid(makeRangeVar("pg_temp", r->sname, -1), NoLock, false));
		args[2] = JsonbPGetDatum(manifest);
		args[3] = CStringGetTextDatum(psprintf("repair:%s", relation_display_name(r->source)));
		args[4] = CStringGetTextDatum(okey);
		if (SPI_execute_with_args(sql.data, 5, types, args, NULL, false, 0) != SPI_OK_SELECT ||
			SPI_processed != 1)
			elog(ERROR, "the repair's batch returned no receipt");
		batch_id = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);
		status = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 2);
	}

	/*
	 * The outcome of each key: written when the target now holds the staged
	 * version (a key the batch left, as stale or held, is not_applied).
	 */
	{
		StringInfoData oc;
		TargetInfo *t = r->reg;

		read_target_rows(r, r->aname);
		initStringInfo(&oc);
		appendStringInfo(&oc, "CASE WHEN " ACTION_WRITES " THEN"
						 " CASE WHEN changed THEN 'changed_since_diff' WHEN %s THEN 'replayed'"
						 " WHEN EXISTS (SELECT FROM pg_temp.%s g JOIN pg_temp.%s x ON x.ord OPERATOR(pg_catalog.=) g.source_row"
						 " WHERE g.source_row OPERATOR(pg_catalog.=) p.ord AND ",
						 status && strcmp(status, "replayed") == 0 ? "true" : "false",
						 qi(r->sname), qi(r->aname));
		repair_version_same_sql(&oc, "x.t_ver", psprintf("g.%s", qi(t->version.name)), t->version.typid);
		appendStringInfoString(&oc, ") THEN 'applied'");

		/*
		 * delete_mode 'remove': a DELETE that won leaves no row (its key and
		 * version are kept apart, removed.c); the target is locked, so a key
		 * gone now was removed by this batch.
		 */
		if (t->options.delete_remove)
			appendStringInfo(&oc, " WHEN " ACTION_IS("delete") " AND NOT EXISTS (SELECT FROM pg_temp.%s x"
							 " WHERE x.ord OPERATOR(pg_catalog.=) p.ord) THEN 'applied'",
							 qi(r->aname));
		appendStringInfoString(&oc, " ELSE 'not_applied' END"
							   " WHEN " ACTION_IS("keep") " THEN 'kept' ELSE 'nothing_to_do' END");
		report_plan(r, oc.data, batch_id);
	}
}

/* ---------------------------------------------------------------------
 * The driver
 * ---------------------------------------------------------------------
 */

static void
drop_temp(const char *name, const char *kind)
{
	Oid			nsp = LookupExplicitNamespace("pg_temp", true);

	if (name && OidIsValid(nsp) && OidIsValid(get_relname_relid(name, nsp)))
		run_sql(psprintf("DROP %s pg_temp.%s", kind, qi(name)), SPI_OK_UTILITY);
}

/*
 * DDL of this session's own temporary view, which Citus (where it is
 * loaded) would try to propagate to its workers and warn about: with its
 * DDL propagation off for the statement.
 */
static void
run_local_ddl(const char *sql)
{
	int			nest = NewGUCNestLevel();

	if (GetConfigOption("citus.enable_ddl_propagation", true, false) != NULL)
		(void) set_config_option("citus.enable_ddl_propagation", "off", PGC_USERSET,
								 PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	run_sql(sql, SPI_OK_UTILITY);
	AtEOXact_GUC(true, nest);
}

static void
repair_execute(Repair *r, ArrayType *key_columns, Jsonb *options)
{
	Tuplestorestate *ts;
	TupleDesc	fdesc = diff_findings_desc(DIFF_FINDING_NATTS);
	DiffCounts	counts;
	Oid			compared;
	char	   *replayed;

	parse_options(options, &r->opts);

	/* The registration, as it is now (a batch re-reads it under its own lock). */
	LockRelationOid(r->target, AccessShareLock);
	if (get_rel_relkind(r->target) == RELKIND_RELATION ||
		get_rel_relkind(r->target) == RELKIND_PARTITIONED_TABLE)
		r->reg = target_is_registered(r->target) ? target_load(r->target) : NULL;
	r->tqual = relid_quoted_name(r->target);
	refuse_citus(r);

	/* Mistakes are named against the target itself, before anything is read. */
	r->spec = diff_validate(r->source, r->target, key_columns, r->opts.diff_options);
	if (r->reg)
		map_registered_keys(r);
	resolve_columns(r);
	check_rights(r);

	r->fname = temp_relation_name("reconcile_repair", "findings", NULL);
	r->pname = temp_relation_name("reconcile_repair", "plan", NULL);
	r->sname = temp_relation_name("reconcile_repair", "staged", NULL);
	r->cname = temp_relation_name("reconcile_repair", "current", NULL);
	r->aname = temp_relation_name("reconcile_repair", "after", NULL);

	/* A named run already applied replays: its receipt, nothing done. */
	if (!r->opts.dry_run && r->reg && (replayed = applied_run(r)) != NULL)
	{
		emit(r, (Datum) 0, true, NULL, "none", "replayed", NULL, NULL, replayed);
		return;
	}

	/*
	 * A registered target's rows are compared without its tombstones: a
	 * tombstone is a deleted row, as reconcile_batch wrote it.
	 */
	compared = r->target;
	if (r->reg)
	{
		r->vname = temp_relation_name("reconcile_repair", "live", NULL);
		run_local_ddl(psprintf("CREATE TEMPORARY VIEW %s AS SELECT * FROM %s WHERE %s IS NOT TRUE",
							   qi(r->vname), r->tqual, qi(r->reg->deleted.name)));
		compared = RangeVarGetRelid(makeRangeVar("pg_temp", r->vname, -1), NoLock, false);
	}
	{
		DiffSpec   *checked = r->spec;

		r->spec = diff_prepare(r->source, compared, key_columns, r->opts.diff_options);
		r->spec->tname = checked->tname;
		r->cols = NULL;
		resolve_columns(r);
	}

	/* The diff, exactly as reconcile_diff runs it, and the snapshot it read. */
	r->snap = RegisterSnapshot(GetActiveSnapshot());
	ts = tuplestore_begin_heap(false, false, work_mem);
	diff_compare(r->spec, ts, fdesc, &counts);
	if (counts.stopped != NULL)
		ereport(NOTICE,
				(errmsg("the diff of \"%s\" and \"%s\" stopped at its option \"%s\"; this repair fixes only what it found",
						r->spec->sname, r->spec->tname, counts.stopped),
				 counts.stopped_at_key != NULL ?
				 errdetail("The first key not compared is %s.",
						   JsonbToCString(NULL, &counts.stopped_at_key->root,
										  VARSIZE(counts.stopped_at_key))) : 0,
				 errhint("Run the repair again to go on: keys repaired no longer differ.")));

	if (store_findings(r, ts, fdesc) > 0)
	{
		build_plan(r);
		skip_ambiguous(r);
		if (r->opts.dry_run)
			report_plan(r, "CASE WHEN " ACTION_IS("none") " THEN 'nothing_to_do' ELSE 'planned' END", NULL);
		else
		{
			/* Writers wait from here on; what changed before is found below. */
			LockRelationOid(r->target, ShareRowExclusiveLock);
			if (r->reg)
				repair_registered(r);
			else
				repair_plain(r);
		}
	}
	tuplestore_end(ts);
	UnregisterSnapshot(r->snap);
	drop_temp(r->sname, "TABLE");
	drop_temp(r->cname, "TABLE");
	drop_temp(r->aname, "TABLE");
	drop_temp(r->pname, "TABLE");
	drop_temp(r->fname, "TABLE");
	if (r->vname)
		run_local_ddl(psprintf("DROP VIEW pg_temp.%s", qi(r->vname)));
}

static void
repair_begin(Repair *r, FunctionCallInfo fcinfo, const char *funcname)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;

	InitMaterializedSRF(fcinfo, 0);
	memset(r, 0, sizeof(*r));
	r->funcname = funcname;
	r->out = rsinfo->setResult;
	r->outdesc = rsinfo->setDesc;
	r->extschema = get_func_namespace(fcinfo->flinfo->fn_oid);
}

/*
 * reconcile_repair(source regclass, target regclass, key_columns text[],
 *                  options jsonb DEFAULT '{}')
 *		Diffs the two as reconcile_diff does and fixes the target: one row
 *		per finding with its action and outcome.
 */
Datum
reconcile_repair(PG_FUNCTION_ARGS)
{
	static const char *const names[] = {"source", "target", "key_columns"};
	Repair		r;

	for (int i = 0; i < lengthof(names); i++)
		check_arg_not_null(fcinfo, i, names[i], "reconcile_repair");
	repair_begin(&r, fcinfo, "reconcile_repair");
	r.source = PG_GETARG_OID(0);
	r.target = PG_GETARG_OID(1);
	SPI_connect();
	repair_execute(&r, PG_GETARG_ARRAYTYPE_P(2), PG_ARGISNULL(3) ? NULL : PG_GETARG_JSONB_P(3));
	SPI_finish();
	return (Datum) 0;
}

/*
 * reconcile_repair_run(job text, options jsonb DEFAULT '{}')
 *		The repair of a configured diff job (reconcile.diff_jobs): its
 *		relations, key and options, with options' keys over the job's.
 */
Datum
reconcile_repair_run(PG_FUNCTION_ARGS)
{
	Repair		r;
	Datum		arg;
	Oid			argtype = TEXTOID;
	bool		isnull;
	char	   *job;
	Datum		keys;
	Jsonb	   *options;
	HeapTuple	tup;
	TupleDesc	desc;

	check_arg_not_null(fcinfo, 0, "job", "reconcile_repair_run");
	repair_begin(&r, fcinfo, "reconcile_repair_run");
	job = text_to_cstring(PG_GETARG_TEXT_PP(0));
	SPI_connect();
	arg = CStringGetTextDatum(job);
	if (SPI_execute_with_args("SELECT source, target, key_columns,"
							  " COALESCE(options, '{}') OPERATOR(pg_catalog.||) COALESCE($2, '{}')"
							  " FROM reconcile.diff_jobs WHERE name OPERATOR(pg_catalog.=) $1",
							  2, (Oid[]) {argtype, JSONBOID},
							  (Datum[]) {arg, PG_ARGISNULL(1) ? (Datum) 0 : PG_GETARG_DATUM(1)},
							  PG_ARGISNULL(1) ? " n" : "  ", true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read reconcile.diff_jobs");
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("diff job \"%s\" does not exist", job),
				 errhint("The jobs are the rows of reconcile.diff_jobs.")));
	tup = SPI_copytuple(SPI_tuptable->vals[0]);
	desc = SPI_tuptable->tupdesc;
	for (int side = 0; side < 2; side++)
	{
		/* As reconcile_diff_run resolves a job's relations. */
		JobRelationCheck chk = {"diff job", job, "Run the job as a role that may read both of its relations."};
		char	   *name = SPI_getvalue(tup, desc, side + 1);
		Oid			relid = RangeVarGetRelidExtended(makeRangeVarFromNameList(stringToQualifiedNameList(name)),
													 AccessShareLock, RVR_MISSING_OK,
													 job_relation_check, &chk);

		if (!OidIsValid(relid))
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("%s \"%s\" of diff job \"%s\" does not exist", side ? "target" : "source",
							name, job),
					 errhint("Correct the job with UPDATE reconcile.diff_jobs SET %s = ... WHERE name = '%s'.",
							 side ? "target" : "source", job)));
		if (side)
			r.target = relid;
		else
			r.source = relid;
	}
	keys = SPI_getbinval(tup, desc, 3, &isnull);
	options = DatumGetJsonbP(SPI_getbinval(tup, desc, 4, &isnull));
	repair_execute(&r, DatumGetArrayTypeP(keys), options);
	SPI_finish();
	return (Datum) 0;
}
