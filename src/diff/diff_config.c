/*
 * diff_config.c
 *		Load a reconciliation config, one row per table pair as such files
 *		are written, into reconcile.diff_jobs.
 *
 * The view reconcile.diff_job_config (job, source, target, key_columns,
 * updated_column, window) takes a whole file in one COPY, or rows in an
 * INSERT; its INSTEAD OF trigger, reconcile_diff_job_config_load, turns
 * each row into a job: the key columns from a comma-separated list, the
 * relations resolved now with the loader's search_path and stored
 * schema-qualified (a scheduled run then reads the same tables whatever
 * its own search_path), every column name resolved the way the diff
 * resolves it (colname.c), and the whole job checked as a run would check
 * it, before it is written.  A job of the same name is replaced (the
 * file's fields; options set in diff_jobs by hand stay), so loading the
 * same file again changes nothing.
 *
 * The trigger runs with the loader's rights and writes with them: a role
 * that may not INSERT and UPDATE reconcile.diff_jobs cannot load through
 * the view either, and row-level security on diff_jobs applies.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/trigger.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "parser/scansup.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/varlena.h"

#include "diff.h"
#include "common/jsonbuild.h"
#include "common/sqlname.h"

PG_FUNCTION_INFO_V1(reconcile_diff_job_config_load);

/*
 * The view's columns, by name.  trim_keys and cutoff are columns of schema
 * 1.2 (the library also runs on a view of 1.1, without them).
 */
static const char *const config_columns[] = {
	"job", "source", "target", "key_columns", "updated_column", "window",
	"trim_keys", "cutoff"
};

#define CFG_JOB			0
#define CFG_SOURCE		1
#define CFG_TARGET		2
#define CFG_KEYS		3
#define CFG_UPDATED		4
#define CFG_WINDOW		5
#define CFG_TRIM_KEYS	6
#define CFG_CUTOFF		7
#define CFG_NCOLUMNS	8

/*
 * Options the file sets; others in a job's options are kept on a reload.
 * trim_keys and cutoff are set only by a field that is not empty (an empty
 * one keeps what the job has: files of 1.1 have no such fields, and their
 * jobs had them set by hand), so they are not listed here.
 */
static const char *const config_options[] = {"updated_column", "window", "lookback"};

static void
config_error_context(void *arg)
{
	errcontext("diff job \"%s\"", (const char *) arg);
}

/* The text without surrounding blanks (in place). */
static char *
trim_blanks(char *s)
{
	char	   *end;

	while (scanner_isspace(*s))
		s++;
	end = s + strlen(s);
	while (end > s && scanner_isspace(end[-1]))
		*--end = '\0';
	return s;
}

/* A field with surrounding blanks removed; NULL when absent or blank. */
static char *
config_field(HeapTuple tup, TupleDesc desc, int which)
{
	int			attno = SPI_fnumber(desc, config_columns[which]);
	bool		isnull;
	Datum		d;
	char	   *s;

	if (attno <= 0 && which >= CFG_TRIM_KEYS)
		return NULL;			/* the view of schema 1.1 */
	if (attno <= 0)
		elog(ERROR, "column \"%s\" of reconcile.diff_job_config not found",
			 config_columns[which]);
	d = heap_getattr(tup, attno, desc, &isnull);
	if (isnull)
		return NULL;
	s = trim_blanks(TextDatumGetCString(d));
	return *s ? s : NULL;
}

static char *
required_field(HeapTuple tup, TupleDesc desc, int which, const char *job)
{
	char	   *s = config_field(tup, desc, which);

	if (s == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_NOT_NULL_VIOLATION),
				 job ? errmsg("diff job \"%s\" has no %s", job, config_columns[which]) :
				 errmsg("a row of the config has no %s", config_columns[which]),
				 errdetail("Every row of a reconciliation config names its source, target and key columns; a row without a job name makes the job \"<source> -> <target>\".")));
	return s;
}

/*
 * The key columns: a comma-separated list, blanks around the commas
 * ignored; a name in double quotes may hold commas and blanks ("" is a
 * quote).  Each name is then matched as every column name is.
 */
static ArrayType *
split_column_list(const char *list, const char *job)
{
	const char *p = list;
	Datum	   *names = palloc(sizeof(Datum) * (strlen(list) / 2 + 1));
	int			n = 0;

	for (;;)
	{
		StringInfoData name;

		initStringInfo(&name);
		while (scanner_isspace(*p))
			p++;
		if (*p == '"')
		{
			for (p++;; p++)
			{
				if (*p == '\0')
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
							 errmsg("key_columns of diff job \"%s\" has an unterminated quoted name", job),
							 errdetail("The list is: %s", list)));
				if (*p == '"' && p[1] == '"')
					appendStringInfoChar(&name, *p++);
				else if (*p == '"')
					break;
				else
					appendStringInfoChar(&name, *p);
			}
			p++;
			while (scanner_isspace(*p))
				p++;
			if (*p != ',' && *p != '\0')
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
						 errmsg("key_columns of diff job \"%s\" has text after a quoted name", job),
						 errdetail("The list is: %s", list),
						 errhint("Separate the names with commas.")));
		}
		else
		{
			const char *start = p;
			const char *end;

			while (*p != ',' && *p != '\0')
				p++;
			end = p;
			while (end > start && scanner_isspace(end[-1]))
				end--;
			appendBinaryStringInfo(&name, start, end - start);
		}
		if (name.len == 0)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("key_columns of diff job \"%s\" has an empty name", job),
					 errdetail("The list is: %s", list),
					 errhint("List the key columns separated by commas, such as: customer_id, order_id")));
		names[n++] = CStringGetTextDatum(name.data);
		if (*p == '\0')
			break;
		p++;					/* the comma */
	}
	return construct_array(names, n, TEXTOID, -1, false, TYPALIGN_INT);
}

/*
 * A relation of the job: the name as SQL reads it (unquoted parts fold to
 * lower case), looked up now with the loader's search_path and locked
 * before its columns are read; returned with its schema-qualified name.
 */
/*
 * The name as the loader probably meant it, when it has capitals and no
 * double quotes (COPY ... CSV removes the quotes of sales."Orders" as a
 * field's quoting): each part with a capital quoted.  NULL otherwise.
 */
static char *
case_kept_name(const char *name)
{
	StringInfoData buf;
	bool		upper = false;
	const char *p;

	for (p = name; *p; p++)
	{
		if (*p == '"')
			return NULL;
		if (*p >= 'A' && *p <= 'Z')
			upper = true;
	}
	if (!upper)
		return NULL;
	initStringInfo(&buf);
	for (p = name;;)
	{
		const char *dot = strchr(p, '.');
		int			len = dot ? dot - p : strlen(p);
		bool		part_upper = false;

		for (int i = 0; i < len; i++)
			if (p[i] >= 'A' && p[i] <= 'Z')
				part_upper = true;
		if (part_upper)
			appendStringInfo(&buf, "\"%.*s\"", len, p);
		else
			appendBinaryStringInfo(&buf, p, len);
		if (dot == NULL)
			break;
		appendStringInfoChar(&buf, '.');
		p = dot + 1;
	}
	return buf.data;
}

/* A value as a CSV field: in double quotes, each quote doubled. */
static char *
csv_field(const char *value)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '"');
	for (const char *p = value; *p; p++)
	{
		if (*p == '"')
			appendStringInfoChar(&buf, '"');
		appendStringInfoChar(&buf, *p);
	}
	appendStringInfoChar(&buf, '"');
	return buf.data;
}

static Oid
resolve_config_relation(const char *name, const char *side, const char *job,
						char **qualified)
{
	RangeVar   *rv = makeRangeVarFromNameList(stringToQualifiedNameList(name));
	Oid			relid = RangeVarGetRelid(rv, AccessShareLock, true);

	if (!OidIsValid(relid))
	{
		char	   *meant = case_kept_name(name);

		/*
		 * A name with capitals reached us unquoted, and so was folded to
		 * lower case: show its quoted form, and that form as a CSV field,
		 * which is what a config file needs.
		 */
		if (meant)
			ereport(ERROR,
					(errcode(ERRCODE_UNDEFINED_TABLE),
					 errmsg("%s \"%s\" of diff job \"%s\" does not exist", side, name, job),
					 errdetail("Unquoted, the name is read in lower case, as SQL reads it: %s.",
							   quote_qualified_identifier(rv->schemaname, rv->relname)),
					 errhint("For the mixed-case name %s, write the field %s in a CSV file (COPY removes one level of double quotes), or '%s' in an INSERT.",
							 meant, csv_field(meant), meant)));
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("%s \"%s\" of diff job \"%s\" does not exist", side, name, job),
				 rv->schemaname ? 0 :
				 errdetail("An unqualified name is looked up in the search_path of the role loading the config: %s.",
						   GetConfigOption("search_path", false, false)),
				 errhint("Schema-qualify the name, such as public.orders; a mixed-case name needs double quotes, such as public.\"Orders\", written \"public.\"\"Orders\"\"\" as a CSV field.")));
	}
	if (get_rel_persistence(relid) == RELPERSISTENCE_TEMP)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("%s \"%s\" of diff job \"%s\" is temporary", side, name, job),
				 errdetail("A job outlives the session, and a temporary relation does not.")));
	*qualified = relid_quoted_name(relid);
	return relid;
}

/* The job's current options, or NULL; read as the loader. */
static Jsonb *
current_options(const char *job)
{
	Oid			type = TEXTOID;
	Datum		arg = CStringGetTextDatum(job);
	bool		isnull;
	Datum		d;

	if (SPI_execute_with_args("SELECT options FROM reconcile.diff_jobs"
							  " WHERE name OPERATOR(pg_catalog.=) $1",
							  1, &type, &arg, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read reconcile.diff_jobs");
	if (SPI_processed == 0)
		return NULL;
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? NULL : DatumGetJsonbPCopy(d);
}

/*
 * The window: empty for none; "from/to" (ISO 8601's interval notation,
 * either end empty for an open one) for the option "window"; anything
 * else is a look-back interval ("7 days", "P7D") for "lookback".
 */
static void
push_window(JsonbParseState **st, const char *window, const char *job)
{
	const char *slash = strchr(window, '/');
	char	   *lo,
			   *hi;

	if (slash == NULL)
	{
		jsonb_push_string_field(st, "lookback", window);
		return;
	}
	if (strchr(slash + 1, '/') != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("window \"%s\" of diff job \"%s\" has more than one \"/\"", window, job),
				 errhint("Write the window as from/to with ISO dates, such as 2026-11-01/2026-11-29, or as a look-back interval, such as 7 days.")));
	lo = trim_blanks(pnstrdup(window, slash - window));
	hi = trim_blanks(pstrdup(slash + 1));
	jsonb_push_key(st, "window");
	pushJsonbValue(st, WJB_BEGIN_ARRAY, NULL);
	for (int i = 0; i < 2; i++)
	{
		char	   *b = i ? hi : lo;

		if (*b)
			jsonb_push_string(st, WJB_ELEM, b);
		else
		{
			JsonbValue	null;

			null.type = jbvNull;
			pushJsonbValue(st, WJB_ELEM, &null);
		}
	}
	pushJsonbValue(st, WJB_END_ARRAY, NULL);
}

/*
 * The job's options: what it had, less the options the file sets, then
 * the file's updated column and window.  NULL when there are none.
 */
static Jsonb *
config_options_jsonb(Jsonb *old, const char *updated, const char *window,
					 const char *trim_keys, const char *cutoff, const char *job)
{
	JsonbParseState *st = NULL;
	JsonbValue *res;
	bool		any = false;
	bool		trim = false;

	pushJsonbValue(&st, WJB_BEGIN_OBJECT, NULL);
	if (old != NULL && JB_ROOT_IS_OBJECT(old))
	{
		JsonbIterator *it = JsonbIteratorInit(&old->root);
		JsonbValue	v;
		JsonbIteratorToken r;
		bool		keep = false;

		while ((r = JsonbIteratorNext(&it, &v, true)) != WJB_DONE)
		{
			if (r == WJB_KEY)
			{
				keep = true;
				for (int i = 0; i < lengthof(config_options); i++)
					if (strlen(config_options[i]) == v.val.string.len &&
						memcmp(config_options[i], v.val.string.val, v.val.string.len) == 0)
						keep = false;
				if ((trim_keys && v.val.string.len == 9 &&
					 memcmp(v.val.string.val, "trim_keys", 9) == 0) ||
					(cutoff && v.val.string.len == 6 &&
					 memcmp(v.val.string.val, "cutoff", 6) == 0))
					keep = false;
				if (keep)
				{
					pushJsonbValue(&st, WJB_KEY, &v);
					any = true;
				}
			}
			else if (r == WJB_VALUE && keep)
				pushJsonbValue(&st, WJB_VALUE, &v);
		}
	}
	if (updated)
	{
		jsonb_push_string_field(&st, "updated_column", updated);
		any = true;
	}
	if (window)
	{
		if (updated == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("window of diff job \"%s\" needs an updated_column", job),
					 errdetail("The window bounds the column of last update.")));
		push_window(&st, window, job);
	}
	if (trim_keys)
	{
		JsonbValue	b;

		if (!parse_bool(trim_keys, &trim))
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
					 errmsg("trim_keys \"%s\" of diff job \"%s\" is not a boolean", trim_keys, job),
					 errhint("Write true or false, or leave the field empty to keep the job's setting.")));
		jsonb_push_key(&st, "trim_keys");
		b.type = jbvBool;
		b.val.boolean = trim;
		pushJsonbValue(&st, WJB_VALUE, &b);
		any = true;
	}
	/* "none" removes a cutoff; anything else is checked as the option. */
	if (cutoff && pg_strcasecmp(cutoff, "none") != 0)
	{
		jsonb_push_string_field(&st, "cutoff", cutoff);
		any = true;
	}
	res = pushJsonbValue(&st, WJB_END_OBJECT, NULL);
	return any ? JsonbValueToJsonb(res) : NULL;
}

/*
 * reconcile.diff_job_config_load()
 *		INSTEAD OF INSERT trigger of reconcile.diff_job_config: checks the
 *		row as a job and inserts or replaces it in reconcile.diff_jobs, as
 *		the loading role.  As INSTEAD OF UPDATE, it refuses.
 */
Datum
reconcile_diff_job_config_load(PG_FUNCTION_ARGS)
{
	TriggerData *trigdata = (TriggerData *) fcinfo->context;
	HeapTuple	tup;
	TupleDesc	desc;
	char	   *job;
	char	   *sname,
			   *tname,
			   *squal,
			   *tqual,
			   *updated,
			   *window,
			   *trim_keys,
			   *cutoff;
	Oid			source,
				target;
	ArrayType  *keys;
	Jsonb	   *options;
	DiffSpec   *spec;
	Datum	   *resolved;
	ErrorContextCallback cb;
	Oid			jobs;
	static const Oid types[5] = {TEXTOID, TEXTOID, TEXTOID, TEXTARRAYOID, JSONBOID};
	Datum		values[5];
	char		nulls[5] = {' ', ' ', ' ', ' ', ' '};

	if (!CALLED_AS_TRIGGER(fcinfo) || !TRIGGER_FIRED_INSTEAD(trigdata->tg_event) ||
		!TRIGGER_FIRED_FOR_ROW(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("reconcile.diff_job_config_load() must run as an INSTEAD OF row trigger")));
	/* An UPDATE would change a job without the file; a DELETE removes it. */
	if (!TRIGGER_FIRED_BY_INSERT(trigdata->tg_event))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot update reconcile.diff_job_config"),
				 errhint("Load the job's row again, with INSERT or COPY: a job of the same name is replaced.")));
	tup = trigdata->tg_trigtuple;
	desc = RelationGetDescr(trigdata->tg_relation);

	/* The loader must be able to write jobs at all; SPI checks the rest. */
	jobs = get_relname_relid("diff_jobs", get_namespace_oid("reconcile", false));
	if (pg_class_aclcheck(jobs, GetUserId(), ACL_INSERT) != ACLCHECK_OK ||
		pg_class_aclcheck(jobs, GetUserId(), ACL_UPDATE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table diff_jobs"),
				 errdetail("Loading a config inserts and replaces rows of reconcile.diff_jobs with the rights of role \"%s\".",
						   GetUserNameFromId(GetUserId(), false)),
				 errhint("The extension's owner may GRANT INSERT, UPDATE ON reconcile.diff_jobs to a role that configures jobs.")));

	/* A row without a job name makes the job "<source> -> <target>". */
	job = config_field(tup, desc, CFG_JOB);
	cb.callback = config_error_context;
	cb.previous = error_context_stack;
	if (job)
	{
		cb.arg = job;
		error_context_stack = &cb;
	}
	sname = required_field(tup, desc, CFG_SOURCE, job);
	tname = required_field(tup, desc, CFG_TARGET, job);
	if (job == NULL)
	{
		job = psprintf("%s -> %s", sname, tname);
		cb.arg = job;
		error_context_stack = &cb;
	}
	keys = split_column_list(required_field(tup, desc, CFG_KEYS, job), job);
	updated = config_field(tup, desc, CFG_UPDATED);
	window = config_field(tup, desc, CFG_WINDOW);
	trim_keys = config_field(tup, desc, CFG_TRIM_KEYS);
	cutoff = config_field(tup, desc, CFG_CUTOFF);

	source = resolve_config_relation(sname, "source", job, &squal);
	target = resolve_config_relation(tname, "target", job, &tqual);

	SPI_connect();
	options = config_options_jsonb(current_options(job), updated, window,
								   trim_keys, cutoff, job);

	/* Checked as a run checks it; the names come back as the diff resolved them. */
	spec = diff_validate(source, target, keys, options);
	resolved = palloc(sizeof(Datum) * spec->nkeys);
	for (int i = 0; i < spec->nkeys; i++)
		resolved[i] = CStringGetTextDatum(spec->keys[i].name);
	keys = construct_array(resolved, spec->nkeys, TEXTOID, -1, false, TYPALIGN_INT);
	if (updated)
		options = config_options_jsonb(options, spec->upd_name, window,
									   trim_keys, cutoff, job);

	values[0] = CStringGetTextDatum(job);
	values[1] = CStringGetTextDatum(squal);
	values[2] = CStringGetTextDatum(tqual);
	values[3] = PointerGetDatum(keys);
	values[4] = options ? JsonbPGetDatum(options) : (Datum) 0;
	nulls[4] = options ? ' ' : 'n';
	if (SPI_execute_with_args("INSERT INTO reconcile.diff_jobs AS j"
							  " (name, source, target, key_columns, options)"
							  " VALUES ($1, $2, $3, $4, $5)"
							  " ON CONFLICT (name) DO UPDATE SET source = EXCLUDED.source,"
							  " target = EXCLUDED.target, key_columns = EXCLUDED.key_columns,"
							  " options = EXCLUDED.options",
							  5, (Oid *) types, values, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not write reconcile.diff_jobs");
	SPI_finish();

	error_context_stack = cb.previous;
	return PointerGetDatum(tup);
}
