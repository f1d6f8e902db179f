/*
 * citus_merge.c
 *		A batch into a hash-distributed Citus target merged on the workers,
 *		shard group by shard group, in parallel, inside the coordinator's
 *		two-phase commit.
 *
 * No function writes anything on a worker.  The merge is a handful of
 * ordinary co-located statements, issued through SPI on the coordinator,
 * that Citus plans as one task per shard group, runs in parallel and,
 * since each is DML on the placements, prepares on every worker
 * connection that wrote (PREPARE TRANSACTION, then COMMIT PREPARED once
 * the coordinator has committed the receipt).  The design, its
 * measurements and its pitfalls: docs/citus.md.
 *
 *	S2	INSERT INTO work SELECT ... FROM staged s LEFT JOIN target t: per
 *		row the casts (reconcile_citus_input, with the caller's DateStyle,
 *		IntervalStyle, TimeZone, extra_float_digits and bytea_output passed
 *		in and pinned, since Citus does not carry session settings to the
 *		workers), the reject flag, the payload hash (payload.c's, computed
 *		by reconcile_citus_hash) and the disposition, decided per key by a
 *		window exactly as merge.c's merge_group decides it.
 *	S3	per object and disposition: row count and the sums of the eight
 *		32-bit limbs of the written rows' hashes (the receipt's checksum),
 *		as partial aggregates on the workers.
 *	S4	the rejected rows' staged values (joined back to the staged row by
 *		its ctid), whose reasons are written on the coordinator by the same
 *		code as a plain batch's (stage.c), with the caller's settings.
 *	-	row counts, reject limits (batch.c), conflicts under 'abort'.
 *	S5	conflicting rows with the target row at their version: their
 *		payloads as jsonb, built on the coordinator by payload.c.
 *	S6	the apply: one MERGE from the work table's winners, whose row count
 *		must equal inserted + updated + deleted.
 *	S7	TRUNCATE of the work table (empty outside a batch in every outcome).
 *
 * Pitfalls that shape the order: DDL early in the transaction pins every
 * later statement on those placements to the few connections it used, so
 * the work table is created at registration, never in a batch, and is
 * emptied at the end; and the first access to the shards is the first
 * pushed-down write (S2).  Every statement on the shards is between
 * co-located tables joined on the distribution column, so none goes
 * through the coordinator (whose COPY into the shards would commit
 * without two-phase commit).
 *
 * The work table reconcile.citus_work_<target oid> is unlogged,
 * distributed by the key column the target is distributed by and
 * co-located with it; owned by the state tables' owner, every role may
 * use it: a batch's rows carry a random nonce every query filters on, and
 * no other session ever sees them (they are removed before the batch
 * commits, or rolled back with it).
 *
 * Casting functions pin the settings the caller's session passed in, as
 * values, through common/pinned.c: see "Pinned settings" below.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "access/xact.h"
#include "catalog/namespace.h"
#include "catalog/pg_collation.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "pgtime.h"
#include "port/pg_bswap.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/bytea.h"
#include "utils/datetime.h"
#include "utils/fmgroids.h"
#include "utils/float.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"
#include "utils/typcache.h"

#include "common/citus.h"
#include "common/jsonbuild.h"
#include "common/pinned.h"
#include "citus_merge.h"
#include "loader.h"
#include "ordering.h"
#include "payload.h"
#include "progress.h"
#include "rules/rules.h"
#include "common/sha256.h"
#include "common/sqlname.h"
#include "common/state_schema.h"

PG_FUNCTION_INFO_V1(reconcile_citus_input);
PG_FUNCTION_INFO_V1(reconcile_citus_text);
PG_FUNCTION_INFO_V1(reconcile_citus_hash);
PG_FUNCTION_INFO_V1(reconcile_citus_staged_hash);
PG_FUNCTION_INFO_V1(reconcile_citus_object);
PG_FUNCTION_INFO_V1(reconcile_citus_limb);

/* ====================================================================
 * Pinned settings
 *
 * The value of each setting a text form depends on, as the globals
 * PostgreSQL's input and output functions read.  A function computes them
 * once per query from its constant settings argument (through the GUC
 * machinery, rolled back at once), then assigns the globals directly
 * around each call and restores them in PG_FINALLY, as payload.c does for
 * the hash: the GUC machinery's cost per row would show.  The settings
 * array and its reading are common/pinned.c's (pinned_settings_sql,
 * pinned_settings_from_array).
 * ==================================================================== */

/* ====================================================================
 * The functions the workers call, per staged row
 * ==================================================================== */

typedef struct CastCache
{
	bool		ready;
	PinnedSettings pinned;
	Oid			intype;
	FmgrInfo	out;			/* of the staged value's type */
	Oid			typid;
	int32		typmod;
	Oid			ioparam;
	FmgrInfo	in;				/* of the target type */
} CastCache;

static CastCache *
cast_cache(FunctionCallInfo fcinfo, int settings_arg, bool with_input)
{
	CastCache  *c = (CastCache *) fcinfo->flinfo->fn_extra;

	if (c == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
		Oid			f;
		bool		varlena;

		c = palloc0(sizeof(CastCache));
		if (PG_ARGISNULL(settings_arg))
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("settings of a reconcile cast are null")));
		pinned_settings_from_array(PG_GETARG_ARRAYTYPE_P(settings_arg), &c->pinned);
		c->intype = get_fn_expr_argtype(fcinfo->flinfo, 0);
		if (!OidIsValid(c->intype))
			elog(ERROR, "could not determine the type of a reconcile cast's value");
		getTypeOutputInfo(c->intype, &f, &varlena);
		fmgr_info_cxt(f, &c->out, fcinfo->flinfo->fn_mcxt);
		if (with_input)
		{
			c->typid = get_fn_expr_argtype(fcinfo->flinfo, 1);
			c->typmod = PG_ARGISNULL(2) ? -1 : PG_GETARG_INT32(2);
			getTypeInputInfo(c->typid, &f, &c->ioparam);
			fmgr_info_cxt(f, &c->in, fcinfo->flinfo->fn_mcxt);
		}
		c->ready = true;
		fcinfo->flinfo->fn_extra = c;
		MemoryContextSwitchTo(old);
	}
	return c;
}

/*
 * reconcile_citus_input(value "any", like anyelement, typmod int4,
 *                       settings text[]) RETURNS anyelement
 *		The staged value in like's type, through its text form, both under
 *		the settings given; NULL when the value is NULL or does not read
 *		(the errors a plain batch rejects, stage.c: is_value_error).  Only
 *		for input functions a plain batch catches directly (built-in ones,
 *		which only parse and palloc): others are not pushed down.
 */
Datum
reconcile_citus_input(PG_FUNCTION_ARGS)
{
	CastCache  *c;
	PinnedSettings saved;
	MemoryContext cxt = CurrentMemoryContext;
	volatile bool ok = true;
	volatile Datum result = (Datum) 0;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	c = cast_cache(fcinfo, 3, true);
	pinned_settings_enter_values(&saved, &c->pinned);
	PG_TRY();
	{
		char	   *text = OutputFunctionCall(&c->out, PG_GETARG_DATUM(0));

		result = InputFunctionCall(&c->in, text, c->ioparam, c->typmod);
	}
	PG_CATCH();
	{
		ErrorData  *e;
		int			category;

		pinned_settings_leave(&saved);
		MemoryContextSwitchTo(cxt);
		e = CopyErrorData();
		category = ERRCODE_TO_CATEGORY(e->sqlerrcode);
		if (category != ERRCODE_DATA_EXCEPTION &&
			category != ERRCODE_INTEGRITY_CONSTRAINT_VIOLATION)
			PG_RE_THROW();
		FlushErrorState();
		FreeErrorData(e);
		ok = false;
	}
	PG_END_TRY();
	pinned_settings_leave(&saved);
	if (!ok)
		PG_RETURN_NULL();
	PG_RETURN_DATUM(result);
}

/*
 * reconcile_citus_text(value "any", settings text[]) RETURNS text
 *		The value's text form under the settings given: the raw value a
 *		reject records, as the caller's session writes it.
 */
Datum
reconcile_citus_text(PG_FUNCTION_ARGS)
{
	CastCache  *c;
	PinnedSettings saved;
	char	   *volatile text = NULL;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	c = cast_cache(fcinfo, 1, false);
	pinned_settings_enter_values(&saved, &c->pinned);
	PG_TRY();
	{
		text = OutputFunctionCall(&c->out, PG_GETARG_DATUM(0));
	}
	PG_FINALLY();
	{
		pinned_settings_leave(&saved);
	}
	PG_END_TRY();
	PG_RETURN_TEXT_P(cstring_to_text(text));
}

typedef struct HashCache
{
	int			nargs;
	FmgrInfo   *out;
	bool		names_objects;
	Sha256Ctx  *sha;
} HashCache;

/*
 * reconcile_citus_hash(is_delete bool, VARIADIC "any") RETURNS bytea
 *		payload.c's payload hash of the values given, in the target's types
 *		and order: SHA-256 of [v1,...,vn,deleted], each value a JSON string
 *		of its text form under DateStyle ISO, TimeZone UTC, IntervalStyle
 *		postgres, extra_float_digits 1 and bytea_output hex (object names
 *		with search_path pg_catalog), or null.
 */
Datum
reconcile_citus_hash(PG_FUNCTION_ARGS)
{
	HashCache  *volatile c = (HashCache *) fcinfo->flinfo->fn_extra;
	int			nargs = PG_NARGS();
	StringInfoData buf;
	PinnedSettings saved;
	bytea	   *res;

	if (get_fn_expr_variadic(fcinfo->flinfo))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("reconcile_citus_hash takes its values as separate arguments")));
	if (c == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);

		c = palloc0(sizeof(HashCache));
		c->nargs = nargs;
		c->out = palloc0(sizeof(FmgrInfo) * nargs);
		for (int i = 1; i < nargs; i++)
		{
			Oid			typid = get_fn_expr_argtype(fcinfo->flinfo, i);
			Oid			f;
			bool		varlena;

			getTypeOutputInfo(typid, &f, &varlena);
			fmgr_info_cxt(f, &c->out[i], fcinfo->flinfo->fn_mcxt);
			if (type_names_objects(typid))
				c->names_objects = true;
		}
		c->sha = reconcile_sha256_begin();
		fcinfo->flinfo->fn_extra = c;
		MemoryContextSwitchTo(old);
	}
	initStringInfo(&buf);
	appendStringInfoChar(&buf, '[');
	pinned_settings_enter(&saved, c->names_objects);
	PG_TRY();
	{
		for (int i = 1; i < nargs; i++)
		{
			if (PG_ARGISNULL(i))
				appendStringInfoString(&buf, "null");
			else
				json_append_string(&buf, OutputFunctionCall(&c->out[i], PG_GETARG_DATUM(i)));
			appendStringInfoChar(&buf, ',');
		}
	}
	PG_FINALLY();
	{
		pinned_settings_leave(&saved);
	}
	PG_END_TRY();
	appendStringInfoString(&buf, (!PG_ARGISNULL(0) && PG_GETARG_BOOL(0)) ? "true]" : "false]");
	res = palloc(VARHDRSZ + RECONCILE_SHA256_LEN);
	SET_VARSIZE(res, VARHDRSZ + RECONCILE_SHA256_LEN);
	reconcile_sha256_with(c->sha, buf.data, buf.len, (uint8 *) VARDATA(res));
	pfree(buf.data);
	PG_RETURN_BYTEA_P(res);
}

/*
 * A staged payload_hash as 32 bytes, or false: bytea of 32 bytes, or the
 * text form of 64 hex digits, bare or after "sha256:" or "\x" (stage.c).
 */
static bool
parse_hash(Oid type, Datum value, FmgrInfo *out, uint8 *digest, char **raw)
{
	if (type == BYTEAOID)
	{
		bytea	   *b = DatumGetByteaPP(value);

		if (VARSIZE_ANY_EXHDR(b) != RECONCILE_SHA256_LEN)
		{
			if (raw)
				*raw = OutputFunctionCall(out, value);
			return false;
		}
		memcpy(digest, VARDATA_ANY(b), RECONCILE_SHA256_LEN);
		return true;
	}
	else
	{
		char	   *s = OutputFunctionCall(out, value);
		char	   *p = s;

		if (raw)
			*raw = s;
		if (strncmp(p, "sha256:", 7) == 0)
			p += 7;
		else if (strncmp(p, "\\x", 2) == 0)
			p += 2;
		if (strlen(p) != RECONCILE_HEX_LEN ||
			strspn(p, "0123456789abcdefABCDEF") != RECONCILE_HEX_LEN)
			return false;
		hex_decode(p, RECONCILE_HEX_LEN, (char *) digest);
		return true;
	}
}

/*
 * reconcile_citus_staged_hash(value "any") RETURNS bytea
 *		A staged payload_hash as 32 bytes, or NULL when it is NULL or no
 *		SHA-256 digest (the batch rejects the row).
 */
Datum
reconcile_citus_staged_hash(PG_FUNCTION_ARGS)
{
	FmgrInfo   *out = (FmgrInfo *) fcinfo->flinfo->fn_extra;
	Oid			type = get_fn_expr_argtype(fcinfo->flinfo, 0);
	bytea	   *res;

	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	if (out == NULL)
	{
		Oid			f;
		bool		varlena;

		out = MemoryContextAllocZero(fcinfo->flinfo->fn_mcxt, sizeof(FmgrInfo));
		getTypeOutputInfo(type, &f, &varlena);
		fmgr_info_cxt(f, out, fcinfo->flinfo->fn_mcxt);
		fcinfo->flinfo->fn_extra = out;
	}
	res = palloc(VARHDRSZ + RECONCILE_SHA256_LEN);
	SET_VARSIZE(res, VARHDRSZ + RECONCILE_SHA256_LEN);
	if (!parse_hash(type, PG_GETARG_DATUM(0), out, (uint8 *) VARDATA(res), NULL))
		PG_RETURN_NULL();
	PG_RETURN_BYTEA_P(res);
}

typedef struct ObjectCache
{
	int			n;
	char	  **keys;
	char	  **vids;
} ObjectCache;

/*
 * reconcile_citus_object(object_key text, version_id text, keys text[],
 *                        version_ids text[]) RETURNS int4
 *		The index (from 0) of the manifest entry a staged row belongs to, in
 *		the manifest's arrays sorted bytewise (manifest.c), or NULL: by
 *		object_key and version_id, or by object_key alone when version_id is
 *		NULL and the function is called with a NULL version_id constant.
 */
Datum
reconcile_citus_object(PG_FUNCTION_ARGS)
{
	ObjectCache *c = (ObjectCache *) fcinfo->flinfo->fn_extra;
	char	   *key;
	char	   *vid = NULL;
	int			lo,
				hi;

	if (PG_ARGISNULL(2) || PG_ARGISNULL(3))
		PG_RETURN_NULL();
	if (c == NULL)
	{
		MemoryContext old = MemoryContextSwitchTo(fcinfo->flinfo->fn_mcxt);
		Datum	   *k,
				   *v;
		bool	   *kn,
				   *vn;
		int			nk,
					nv;

		c = palloc0(sizeof(ObjectCache));
		deconstruct_array(PG_GETARG_ARRAYTYPE_P(2), TEXTOID, -1, false, TYPALIGN_INT, &k, &kn, &nk);
		deconstruct_array(PG_GETARG_ARRAYTYPE_P(3), TEXTOID, -1, false, TYPALIGN_INT, &v, &vn, &nv);
		if (nk != nv)
			elog(ERROR, "reconcile_citus_object: arrays of different lengths");
		c->n = nk;
		c->keys = palloc(sizeof(char *) * Max(nk, 1));
		c->vids = palloc(sizeof(char *) * Max(nk, 1));
		for (int i = 0; i < nk; i++)
		{
			c->keys[i] = TextDatumGetCString(k[i]);
			c->vids[i] = TextDatumGetCString(v[i]);
		}
		fcinfo->flinfo->fn_extra = c;
		MemoryContextSwitchTo(old);
	}
	if (PG_ARGISNULL(0))
		PG_RETURN_NULL();
	key = TextDatumGetCString(PG_GETARG_DATUM(0));
	if (!PG_ARGISNULL(1))
		vid = TextDatumGetCString(PG_GETARG_DATUM(1));
	lo = 0;
	hi = c->n - 1;
	while (lo <= hi)
	{
		int			mid = (lo + hi) / 2;
		int			cmp = strcmp(key, c->keys[mid]);

		if (cmp == 0 && vid != NULL)
			cmp = strcmp(vid, c->vids[mid]);
		if (cmp == 0)
			PG_RETURN_INT32(mid);
		if (cmp < 0)
			hi = mid - 1;
		else
			lo = mid + 1;
	}
	PG_RETURN_NULL();
}

/*
 * reconcile_citus_limb(h bytea, i int4) RETURNS int8
 *		The i-th (from 0) big-endian 32-bit limb of a 32-byte hash; NULL for
 *		anything else.  The receipt's checksum is the sum of the written
 *		rows' hashes mod 2^256, added up limb by limb.
 */
Datum
reconcile_citus_limb(PG_FUNCTION_ARGS)
{
	bytea	   *h;
	int32		i;
	const uint8 *p;

	if (PG_ARGISNULL(0) || PG_ARGISNULL(1))
		PG_RETURN_NULL();
	h = PG_GETARG_BYTEA_PP(0);
	i = PG_GETARG_INT32(1);
	if (VARSIZE_ANY_EXHDR(h) != RECONCILE_SHA256_LEN || i < 0 || i > 7)
		PG_RETURN_NULL();
	p = (const uint8 *) VARDATA_ANY(h) + 4 * i;
	PG_RETURN_INT64(((int64) p[0] << 24) | ((int64) p[1] << 16) | ((int64) p[2] << 8) | p[3]);
}

/* ====================================================================
 * The coordinator: the work table
 * ==================================================================== */

/* The schema of extension reconcile, where its functions are. */
static Oid
reconcile_schema_oid(void)
{
	Oid			ext = get_extension_oid("reconcile", false);
	Oid			schema = InvalidOid;
	Relation	rel;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;

	/* PostgreSQL 15 does not export get_extension_schema(). */
	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(ext));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tup = systable_getnext(scan);
	if (HeapTupleIsValid(tup))
		schema = ((Form_pg_extension) GETSTRUCT(tup))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	if (!OidIsValid(schema))
		elog(ERROR, "could not find the schema of extension reconcile");
	return schema;
}

/* A function of reconcile's, qualified, as SQL text. */
static char *
fn(const char *name)
{
	return psprintf("%s.%s", quote_identifier(get_namespace_name(reconcile_schema_oid())), name);
}

static char *
work_name(Oid target)
{
	return psprintf("citus_work_%u", target);
}

static char *
work_qualname(Oid target)
{
	return psprintf("reconcile.%s", work_name(target));
}

/* The index of the key column the target is distributed by, or -1. */
static int
dist_key_index(TargetInfo *t)
{
	char	   *distcol = NULL;

	(void) citus_table_kind(t->relid, &distcol, NULL);
	for (int k = 0; distcol && k < t->nkeys; k++)
		if (strcmp(t->keys[k].name, distcol) == 0)
			return k;
	return -1;
}

static char *
column_type_sql(TargetColumn *c)
{
	char	   *s = format_type_extended(c->typid, c->typmod,
										 FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY);

	if (OidIsValid(c->collation))
		s = psprintf("%s COLLATE %s", s, collation_quoted_name(c->collation));
	return s;
}

/*
 * The work table's columns, in order, as name and type: what the
 * registration creates and what a batch checks it still finds.
 */
static int
work_columns(TargetInfo *t, char ***names, TargetColumn ***cols)
{
	int			n = 6 + t->nkeys + 2 + t->npayload;
	int			a = 0;

	*names = palloc(sizeof(char *) * n);
	*cols = palloc0(sizeof(TargetColumn *) * n);
	(*names)[a++] = "nonce";
	(*names)[a++] = "obj";
	(*names)[a++] = "source_row";
	(*names)[a++] = "is_delete";
	(*names)[a++] = "disp";
	(*names)[a++] = "sctid";
	for (int i = 0; i < t->nkeys; i++)
	{
		(*cols)[a] = &t->keys[i];
		(*names)[a++] = psprintf("k%d", i + 1);
	}
	(*cols)[a] = &t->version;
	(*names)[a++] = "v";
	(*names)[a++] = "h";
	for (int i = 0; i < t->npayload; i++)
	{
		(*cols)[a] = &t->payload[i];
		(*names)[a++] = psprintf("p%d", i + 1);
	}
	return n;
}

static const Oid fixed_types[6] = {INT8OID, INT4OID, INT8OID, BOOLOID, INT2OID, TIDOID};

/*
 * Create (again) the work table of a hash-distributed target, as the
 * state tables' owner: at registration, never in a batch (DDL in a
 * batch's transaction would pin its statements to a few connections).
 * Without Citus's functions of 1.2 nothing is created: batches merge on
 * the coordinator.
 */
void
citus_merge_create_work(TargetInfo *t)
{
	StateUser	su;
	StringInfoData sql;
	char	  **names;
	TargetColumn **cols;
	int			n;
	int			dk;
	char	   *qual = work_qualname(t->relid);

	if (citus_table_kind(t->relid, NULL, NULL) != CITUS_DISTRIBUTED)
		return;
	dk = dist_key_index(t);
	if (dk < 0)
		return;					/* the batch refuses it (citus_load.c) */
	n = work_columns(t, &names, &cols);
	initStringInfo(&sql);
	if (OidIsValid(get_relname_relid(work_name(t->relid), get_namespace_oid("reconcile", false))))
		appendStringInfo(&sql, "DROP TABLE %s; ", qual);
	appendStringInfo(&sql, "CREATE UNLOGGED TABLE %s (", qual);
	for (int i = 0; i < n; i++)
	{
		if (i > 0)
			appendStringInfoString(&sql, ", ");
		if (i < 6)
			appendStringInfo(&sql, "%s %s", names[i], format_type_be_qualified(fixed_types[i]));
		else if (strcmp(names[i], "h") == 0)
			appendStringInfoString(&sql, "h pg_catalog.bytea");
		else
			appendStringInfo(&sql, "%s %s", names[i], column_type_sql(cols[i]));
	}
	appendStringInfo(&sql, "); SELECT %s; GRANT SELECT, INSERT, DELETE, TRUNCATE ON %s TO PUBLIC;",
					 citus_function_call("create_distributed_table",
										 psprintf("%s, %s, colocate_with => %s",
												  quote_literal_cstr(qual),
												  quote_literal_cstr(psprintf("k%d", dk + 1)),
												  quote_literal_cstr(t->qualname))),
					 qual);
	state_user_enter(&su);
	if (SPI_execute(sql.data, false, 0) < 0)
		elog(ERROR, "could not create the Citus work table %s", qual);
	state_user_leave(&su);
}

/* ====================================================================
 * The coordinator: which path a batch takes
 * ==================================================================== */

/*
 * Why a batch into t cannot merge on the workers, or NULL when it can.
 * shape: the staged relation as stage_describe found it.
 */
static char *
ineligible_reason(BatchState *b, StagedShape *shape)
{
	TargetInfo *t = b->target;
	Oid			work;
	Relation	rel;
	char	  **names;
	TargetColumn **cols;
	int			n;
	int			dk;
	int32		tcoloc,
				wcoloc;
	char	   *wdist;
	List	   *fname;

	if (t->citus_kind != CITUS_DISTRIBUTED)
		return psprintf("table \"%s\" is %s; only a hash-distributed target merges on the workers",
						t->relname, citus_kind_name(t->citus_kind));
	if (t->nextra > 0)
		return psprintf("table \"%s\" orders by %d version columns; the merge on the workers compares one",
						t->relname, t->nextra + 1);
	fname = list_make2(makeString(get_namespace_name(reconcile_schema_oid())),
					   makeString("reconcile_citus_limb"));
	if (!OidIsValid(LookupFuncName(fname, -1, NULL, true)))
		return pstrdup("the schema of extension reconcile predates 1.2 (ALTER EXTENSION reconcile UPDATE)");
	if (b->rules != NULL)
		return psprintf("table \"%s\" has attached data-quality rules, which are evaluated on the coordinator",
						t->relname);
	dk = dist_key_index(t);
	if (dk < 0)
		return psprintf("the distribution column of table \"%s\" is not one of its key columns", t->relname);
	for (int i = 0; i < t->nkeys; i++)
	{
		TypeCacheEntry *tc = lookup_type_cache(t->keys[i].typid, TYPECACHE_EQ_OPR | TYPECACHE_LT_OPR);

		if (tc->eq_opr != t->key_eq_ops[i] || tc->lt_opr != t->key_lt_ops[i])
			return psprintf("key column \"%s\" of table \"%s\" is compared by its key index with operators other than its type's default ones",
							t->keys[i].name, t->relname);
		if (OidIsValid(t->key_collations[i]) &&
			(!get_collation_isdeterministic(t->key_collations[i]) ||
			 t->key_collations[i] != t->keys[i].collation))
			return psprintf("key column \"%s\" of table \"%s\" is compared with a collation that is nondeterministic or not the column's own",
							t->keys[i].name, t->relname);
	}
	/*
	 * The work table's distribution column must be the staged relation's,
	 * not a cast of it: else Citus would not push the INSERT down but route
	 * its rows through the coordinator (and COPY them into the shards).
	 */
	if (shape->convert[dk])
		return psprintf("distribution column \"%s\" of the staged relation has another type or type modifier than the target's",
						t->keys[dk].name);
	for (int i = 0; i < shape->ncols; i++)
	{
		TargetColumn *c = i < t->nkeys ? &t->keys[i] :
			i == t->nkeys ? &t->version : &t->payload[i - t->nkeys - 1];

		if (shape->convert[i] && !c->catch_directly)
			return psprintf("column \"%s\" is cast to type %s, whose input function a batch runs in a subtransaction",
							c->name, format_type_be(c->typid));
	}
	work = get_relname_relid(work_name(t->relid), get_namespace_oid("reconcile", false));
	if (!OidIsValid(work))
		return psprintf("table \"%s\" has no work table on the workers (it is created by reconcile_register on a distributed table)",
						t->relname);
	if (citus_table_kind(work, &wdist, &wcoloc) != CITUS_DISTRIBUTED ||
		(citus_table_kind(t->relid, NULL, &tcoloc), tcoloc != wcoloc) ||
		wdist == NULL || strcmp(wdist, psprintf("k%d", dk + 1)) != 0)
		return psprintf("the work table of table \"%s\" is not co-located with it by its distribution column",
						t->relname);
	n = work_columns(t, &names, &cols);
	rel = relation_open(work, AccessShareLock);
	{
		TupleDesc	desc = RelationGetDescr(rel);
		int			a = 0;
		bool		ok = true;

		for (int i = 0; i < desc->natts && ok; i++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, i);
			Oid			typid;
			int32		typmod = -1;
			Oid			coll = InvalidOid;

			if (att->attisdropped)
				continue;
			if (a >= n || strcmp(NameStr(att->attname), names[a]) != 0)
			{
				ok = false;
				break;
			}
			if (a < 6)
				typid = fixed_types[a];
			else if (cols[a] == NULL)
				typid = BYTEAOID;
			else
			{
				typid = cols[a]->typid;
				typmod = cols[a]->typmod;
				coll = cols[a]->collation;
			}
			if (att->atttypid != typid || (cols[a] != NULL && (att->atttypmod != typmod ||
															   att->attcollation != coll)))
				ok = false;
			a++;
		}
		relation_close(rel, AccessShareLock);
		if (!ok || a != n)
			return psprintf("the work table of table \"%s\" does not match its registration (call reconcile_register again)",
							t->relname);
	}
	return NULL;
}

/*
 * Whether the batch merges on the workers: the option citus_merge, then
 * eligibility.  With "workers", an ineligible batch fails saying why; by
 * default it merges on the coordinator.
 */
bool
citus_merge_choose(BatchState *b, StagedShape *shape)
{
	char	   *why;

	if (b->target->citus_kind != CITUS_DISTRIBUTED && b->options.citus_merge != CITUS_MERGE_WORKERS)
		return false;
	if (b->options.citus_merge == CITUS_MERGE_COORDINATOR)
		return false;
	why = ineligible_reason(b, shape);
	if (why == NULL)
		return true;
	if (b->options.citus_merge == CITUS_MERGE_WORKERS)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("batch %s cannot merge on the Citus workers", b->batch_id),
				 errdetail("%s.", why),
				 errhint("Load it with options => '{\"citus_merge\": \"coordinator\"}' or without the option, which merges such a batch on the coordinator.")));
	ereport(DEBUG1,
			(errmsg_internal("batch %s merges on the coordinator: %s", b->batch_id, why)));
	return false;
}

/* ====================================================================
 * The coordinator: the batch's statements
 * ==================================================================== */

/* What the statements of one batch share (BatchState.citus_run). */
typedef struct CitusRun
{
	char	   *work;			/* qualified work table */
	char	   *nonce;			/* the batch's rows in it, as SQL */
	char	   *settings;		/* the caller's, as a text[] constant */
	int			dk;				/* the distribution key's index */
	StagedShape *shape;
} CitusRun;

static TargetColumn *
shape_column(TargetInfo *t, int i)
{
	return i < t->nkeys ? &t->keys[i] :
		i == t->nkeys ? &t->version : &t->payload[i - t->nkeys - 1];
}

/* A text[] of the manifest's as a SQL constant. */
static char *
array_sql(Manifest *m, ManifestField field)
{
	Datum		a = manifest_array(m, field);

	return psprintf("%s::pg_catalog.text[]",
					quote_literal_cstr(OidOutputFunctionCall(F_ARRAY_OUT, a)));
}

static char *
bytea_sql(const uint8 *digest)
{
	char		hex[RECONCILE_HEX_LEN + 1];

	reconcile_hex(digest, RECONCILE_SHA256_LEN, hex);
	return psprintf("'\\x%s'::pg_catalog.bytea", hex);
}

static void
run_sql(const char *sql, int expected, const char *what)
{
	int			rc = SPI_execute(sql, false, 0);

	if (rc != expected)
		elog(ERROR, "could not run the %s of a batch on the Citus workers: %s",
			 what, SPI_result_code_string(rc));
}

/*
 * S2: the work table's rows of this batch, one task per shard group: each
 * staged row of the manifest's objects, cast, flagged when rejected,
 * hashed and given its disposition.
 */
static void
statement_classify(BatchState *b, CitusRun *run)
{
	TargetInfo *t = b->target;
	StagedShape *sh = run->shape;
	StringInfoData sql,
				c,
				keys,
				keyjoin,
				rejected,
				payload,
				hash;
	char	   *objexpr;
	char	   *q = "OPERATOR(pg_catalog.=)";
	StringInfoData ypart;

	/* Versions compare by their type's btree ordering, in the column's collation (ordering.c). */
	const char *vgt = operator_sql(t->version_gt_op);
	const char *veq = operator_sql(t->version_eq_op);
	const char *vcoll = ordering_collate_sql(t);

	initStringInfo(&ypart);
	for (int i = 0; i < t->nkeys; i++)
		appendStringInfo(&ypart, "y.k%d, ", i + 1);
	initStringInfo(&sql);
	initStringInfo(&c);
	initStringInfo(&keys);
	initStringInfo(&keyjoin);
	initStringInfo(&rejected);
	initStringInfo(&payload);
	initStringInfo(&hash);

	objexpr = psprintf("%s(s.object_key::pg_catalog.text, %s, %s, %s)",
					   fn("reconcile_citus_object"),
					   sh->has_version_id ? "s.version_id::pg_catalog.text" : "NULL::pg_catalog.text",
					   array_sql(b->manifest, MANIFEST_OBJECT_KEY),
					   array_sql(b->manifest, MANIFEST_VERSION_ID));

	/* Level c: the staged row's values in the target's types. */
	appendStringInfo(&c, "SELECT s.ctid AS sctid, %s AS obj, s.source_row::pg_catalog.int8 AS source_row,"
					 " s.operation::pg_catalog.text AS op", objexpr);
	appendStringInfoString(&rejected, "c.source_row IS NULL OR c.op IS NULL OR NOT (c.op OPERATOR(pg_catalog.=) 'UPSERT' OR c.op OPERATOR(pg_catalog.=) 'DELETE')");
	for (int i = 0; i < sh->ncols; i++)
	{
		TargetColumn *col = shape_column(t, i);
		const char *name = i < t->nkeys ? psprintf("k%d", i + 1) :
			i == t->nkeys ? "v" : psprintf("p%d", i - t->nkeys);
		const char *staged = psprintf("s.%s", quote_identifier(col->name));

		if (sh->convert[i])
			appendStringInfo(&c, ", %s(%s, NULL::%s, %d, %s) AS %s", fn("reconcile_citus_input"),
							 staged, format_type_be_qualified(col->typid), col->typmod,
							 run->settings, name);
		else
			appendStringInfo(&c, ", %s AS %s", staged, name);
		if (i < t->nkeys)
		{
			appendStringInfo(&rejected, " OR c.%s IS NULL", name);
			appendStringInfo(&keys, "%s%s", i ? ", " : "", name);
			appendStringInfo(&keyjoin, "%st.%s %s c.%s", i ? " AND " : "",
							 quote_identifier(col->name), operator_sql(t->key_eq_ops[i]), name);
		}
		else if (i == t->nkeys)
			appendStringInfo(&rejected, " OR c.v IS NULL%s",
							 t->version_integer ? " OR c.v OPERATOR(pg_catalog.<) 0" : "");
		else
		{
			appendStringInfo(&payload, ", c.%s", name);
			if (sh->convert[i])
			{
				appendStringInfo(&c, ", %s AS s%s", staged, name);
				appendStringInfo(&rejected, " OR (c.%s IS NULL AND c.s%s IS NOT NULL)", name, name);
			}
		}
	}
	if (sh->has_hash)
	{
		appendStringInfo(&c, ", %s(s.payload_hash) AS sh, s.payload_hash IS NOT NULL AS has_sh",
						 fn("reconcile_citus_staged_hash"));
		appendStringInfoString(&rejected, " OR (c.has_sh AND c.sh IS NULL)");
	}
	appendStringInfo(&c, " FROM %s AS s WHERE %s IS NOT NULL", relid_quoted_name(b->staged), objexpr);
	if (sh->has_version_id)
		appendStringInfoString(&c, " AND s.version_id IS NOT NULL");

	/* The payload hash: payload.c's, unless staged. */
	if (t->npayload == 0)
	{
		uint8		live[RECONCILE_SHA256_LEN],
					dead[RECONCILE_SHA256_LEN];
		Sha256Ctx  *sha = reconcile_sha256_begin();

		payload_hash_compute(t, NULL, NULL, false, sha, live);
		payload_hash_compute(t, NULL, NULL, true, sha, dead);
		reconcile_sha256_end(sha);
		appendStringInfo(&hash, "CASE WHEN c.op OPERATOR(pg_catalog.=) 'DELETE' THEN %s ELSE %s END",
						 bytea_sql(dead), bytea_sql(live));
	}
	else
		appendStringInfo(&hash, "%s(c.op IS NOT DISTINCT FROM 'DELETE'%s)",
						 fn("reconcile_citus_hash"), payload.data);
	if (sh->has_hash)
		hash.data = psprintf("COALESCE(c.sh, %s)", hash.data);

	/*
	 * disp: decide_key's rule (decide.c) in SQL, its numbers loader.h's
	 * Disposition; the two are checked against one table of cases
	 * (test/t/decide_matrix.sql, by sql/decide_matrix.sql and
	 * test/t/051_citus_pushdown.pl).
	 */
	appendStringInfo(&sql, "INSERT INTO %s (nonce, obj, source_row, is_delete, disp, sctid, %s, v, h",
					 run->work, keys.data);
	for (int i = 0; i < t->npayload; i++)
		appendStringInfo(&sql, ", p%d", i + 1);
	appendStringInfo(&sql, ") SELECT %s, z.obj, z.source_row, z.is_delete,"
					 " (CASE WHEN z.rejected THEN 7 WHEN z.key_conflict THEN 6"
					 " WHEN z.rn OPERATOR(pg_catalog.=) 1 THEN"
					 " CASE WHEN NOT z.found THEN CASE WHEN z.is_delete THEN 2 ELSE 0 END"
					 " WHEN z.v%s %s z.tv THEN CASE WHEN z.is_delete THEN 2 ELSE 1 END"
					 " WHEN z.v%s %s z.tv THEN 3 ELSE 4 END"
					 " WHEN z.v%s %s z.prev_v THEN 5 ELSE 4 END)::pg_catalog.int2,"
					 " CASE WHEN z.rejected THEN z.sctid END",
					 run->nonce, vcoll, vgt, vcoll, veq, vcoll, veq);
	for (int i = 0; i < t->nkeys; i++)
		appendStringInfo(&sql, ", z.k%d", i + 1);
	appendStringInfoString(&sql, ", z.v, z.h");
	for (int i = 0; i < t->npayload; i++)
		appendStringInfo(&sql, ", z.p%d", i + 1);
	/* Level z: a key conflicts when two rows of one version differ, or one differs from the target at its version. */
	appendStringInfo(&sql, " FROM (SELECT y.*, pg_catalog.bool_or(COALESCE(y.prev_v%s %s y.v"
					 " AND y.prev_h OPERATOR(pg_catalog.<>) y.h, false)"
					 " OR (y.found AND y.v%s %s y.tv AND y.h IS DISTINCT FROM y.th))"
					 " OVER (PARTITION BY %sy.rejected) AS key_conflict",
					 vcoll, veq, vcoll, veq, ypart.data);
	/* Level y: each key's rows highest version first, ties in object and row order (merge.c). */
	appendStringInfo(&sql, " FROM (SELECT x.*, pg_catalog.row_number() OVER w AS rn,"
					 " pg_catalog.lag(x.v) OVER w AS prev_v, pg_catalog.lag(x.h) OVER w AS prev_h");
	appendStringInfo(&sql, " FROM (SELECT c.*, (%s) AS rejected, c.op IS NOT DISTINCT FROM 'DELETE' AS is_delete,"
					 " %s AS h, t.%s IS NOT NULL AS found, t.%s AS tv, t.%s AS th"
					 " FROM (%s) AS c LEFT JOIN %s AS t ON %s) AS x",
					 rejected.data, hash.data, quote_identifier(t->keys[0].name),
					 quote_identifier(t->version.name), quote_identifier(t->hash.name),
					 c.data, t->qualname, keyjoin.data);
	{
		StringInfoData part;

		initStringInfo(&part);
		for (int i = 0; i < t->nkeys; i++)
			appendStringInfo(&part, "x.k%d, ", i + 1);
		appendStringInfo(&sql, " WINDOW w AS (PARTITION BY %sx.rejected ORDER BY x.v%s USING %s, x.obj, x.source_row)) AS y) AS z",
						 part.data, vcoll, vgt);
	}
	(void) q;
	ereport(DEBUG1, (errmsg_internal("batch %s S2: %s", b->batch_id, sql.data)));
	run_sql(sql.data, SPI_OK_INSERT, "classification");
}

/*
 * S3: per object and disposition, the row count and the sums of the
 * written rows' hash limbs, combined on the coordinator: the receipt's
 * counts and checksum.
 */
static void
statement_counts(BatchState *b, CitusRun *run)
{
	StringInfoData sql;
	uint64		limbs[8] = {0};

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT w.obj, w.disp, pg_catalog.count(*)");
	for (int i = 0; i < 8; i++)
		appendStringInfo(&sql, ", pg_catalog.sum(CASE WHEN w.disp OPERATOR(pg_catalog.<=) 2 THEN %s(w.h, %d) END)::pg_catalog.int8",
						 fn("reconcile_citus_limb"), i);
	appendStringInfo(&sql, " FROM %s AS w WHERE w.nonce OPERATOR(pg_catalog.=) %s GROUP BY w.obj, w.disp",
					 run->work, run->nonce);
	if (SPI_execute(sql.data, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not count the work table of a batch on the Citus workers");
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		int32		obj = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
		int16		d = DatumGetInt16(SPI_getbinval(tup, desc, 2, &isnull));
		int64		n = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));

		if (obj < 0 || obj >= b->manifest->nentries || d < 0 || d >= DISP_COUNT)
			elog(ERROR, "the work table of a batch holds object %d, disposition %d", obj, d);
		b->counts[obj][d] += n;
		b->totals[d] += n;
		b->staged_rows[obj] += n;
		if (d <= DISP_DELETED)
			for (int i = 0; i < 8; i++)
			{
				Datum		v = SPI_getbinval(tup, desc, 4 + i, &isnull);

				if (!isnull)
					limbs[i] += (uint64) DatumGetInt64(v);
			}
	}
	/* Sum modulo 2^256, least significant limb first. */
	{
		uint64		carry = 0;

		for (int i = 7; i >= 0; i--)
		{
			uint64		sum = limbs[i] + carry;

			b->checksum[4 * i] = (sum >> 24) & 0xff;
			b->checksum[4 * i + 1] = (sum >> 16) & 0xff;
			b->checksum[4 * i + 2] = (sum >> 8) & 0xff;
			b->checksum[4 * i + 3] = sum & 0xff;
			carry = sum >> 32;
		}
	}
	SPI_freetuptable(SPI_tuptable);
}

#define FETCH_ROWS 10000

/*
 * S4: the rejected rows' staged values, read back from the staged
 * relation by the ctid the work table kept, and their reasons written as
 * a plain batch writes them (stage.c: stage_row), on the coordinator with
 * the caller's settings: the workers cast under the same settings, so
 * they rejected exactly these rows.
 */
static void
statement_rejects(BatchState *b, CitusRun *run)
{
	TargetInfo *t = b->target;
	StagedShape *sh = run->shape;
	StringInfoData sql;
	Portal		portal;
	StateRows  *rejects = stage_rejects_buffer();
	int64		nread = 0;
	FmgrInfo	hash_out;
	MemoryContext rowcxt = AllocSetContextCreate(CurrentMemoryContext, "reconcile reject row",
												 ALLOCSET_DEFAULT_SIZES);

	if (b->totals[DISP_REJECTED] == 0)
		return;
	if (sh->has_hash)
	{
		Oid			f;
		bool		varlena;

		getTypeOutputInfo(sh->hash_type, &f, &varlena);
		fmgr_info(f, &hash_out);
	}
	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT w.obj, w.source_row, s.operation::pg_catalog.text");
	for (int i = 0; i < sh->ncols; i++)
	{
		TargetColumn *col = shape_column(t, i);

		if (sh->convert[i])
			appendStringInfo(&sql, ", %s(s.%s, %s)", fn("reconcile_citus_text"),
							 quote_identifier(col->name), run->settings);
		else
			appendStringInfo(&sql, ", s.%s", quote_identifier(col->name));
	}
	if (sh->has_hash)
		appendStringInfoString(&sql, ", s.payload_hash");
	appendStringInfo(&sql, " FROM %s AS w JOIN %s AS s ON s.%s %s w.k%d AND s.ctid OPERATOR(pg_catalog.=) w.sctid"
					 " WHERE w.nonce OPERATOR(pg_catalog.=) %s AND w.disp OPERATOR(pg_catalog.=) 7",
					 run->work, relid_quoted_name(b->staged),
					 quote_identifier(t->keys[run->dk].name), operator_sql(t->key_eq_ops[run->dk]),
					 run->dk + 1, run->nonce);
	portal = SPI_cursor_open_with_args(NULL, sql.data, 0, NULL, NULL, NULL, true, CURSOR_OPT_NO_SCROLL);
	for (;;)
	{
		SPI_cursor_fetch(portal, true, FETCH_ROWS);
		if (SPI_processed == 0)
			break;
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	tup = SPI_tuptable->vals[r];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			MemoryContext old = MemoryContextSwitchTo(rowcxt);
			bool		isnull;
			int32		obj = DatumGetInt32(SPI_getbinval(tup, desc, 1, &isnull));
			ManifestEntry *e = &b->manifest->entries[obj];
			bool		source_row_null;
			int64		source_row = DatumGetInt64(SPI_getbinval(tup, desc, 2, &source_row_null));
			int			problems = 0;
			Datum		d;

#define REJECT(column, raw, ...) \
	do { \
		const char *col_ = (column); \
		const char *raw_ = (raw); \
		state_row_set(rejects, "batch_id", CStringGetTextDatum(b->batch_id)); \
		state_row_set(rejects, "target", ObjectIdGetDatum(t->relid)); \
		state_row_set(rejects, "object_key", CStringGetTextDatum(e->object_key)); \
		if (!source_row_null) \
			state_row_set(rejects, "source_row", Int64GetDatum(source_row)); \
		if (col_) \
			state_row_set(rejects, "column_name", CStringGetTextDatum(col_)); \
		if (raw_) \
			state_row_set(rejects, "raw_value", CStringGetTextDatum(raw_)); \
		state_row_set(rejects, "reason", CStringGetTextDatum(psprintf(__VA_ARGS__))); \
		state_row_set(rejects, "version_id", CStringGetTextDatum(e->version_id)); \
		state_row_add(rejects); \
		problems++; \
	} while (0)

			if (source_row_null)
				REJECT("source_row", NULL, "source_row is null");
			d = SPI_getbinval(tup, desc, 3, &isnull);
			if (isnull)
				REJECT("operation", NULL, "operation is null");
			else
			{
				char	   *op = TextDatumGetCString(d);

				if (strcmp(op, "UPSERT") != 0 && strcmp(op, "DELETE") != 0)
					REJECT("operation", op, "unknown operation, expected UPSERT or DELETE");
			}
			for (int i = 0; i < sh->ncols; i++)
			{
				TargetColumn *col = shape_column(t, i);
				bool		is_key = i < t->nkeys;
				bool		is_version = i == t->nkeys;
				char	   *raw = NULL;
				char	   *error = NULL;
				Datum		value;

				d = SPI_getbinval(tup, desc, 4 + i, &isnull);
				if (isnull)
				{
					if (is_key)
						REJECT(col->name, NULL, "key column is null");
					else if (is_version)
						REJECT(col->name, NULL, "version is null");
					continue;
				}
				if (!sh->convert[i])
					value = d;
				else
				{
					raw = TextDatumGetCString(d);
					if (!stage_input_value(col, raw, &value, &error))
					{
						if (is_version)
							REJECT(col->name, raw, "version is not a valid %s: %s",
								   format_type_be(col->typid), error);
						else
							REJECT(col->name, raw, "%s", error);
						continue;
					}
				}
				if (is_version && t->version_integer)
				{
					int64		version = ordering_int64(t, value);

					if (version < 0)
						REJECT(col->name, raw ? raw : psprintf(INT64_FORMAT, version),
							   "version is negative");
				}
			}
			if (sh->has_hash)
			{
				d = SPI_getbinval(tup, desc, 4 + sh->ncols, &isnull);
				if (!isnull)
				{
					uint8		digest[RECONCILE_SHA256_LEN];
					char	   *raw = NULL;

					if (!parse_hash(sh->hash_type, d, &hash_out, digest, &raw))
						REJECT("payload_hash", raw,
							   "payload_hash is not a SHA-256 digest (32 bytes, or 64 hex digits)");
				}
			}
#undef REJECT
			if (problems == 0)
				elog(ERROR, "a staged row of object \"%s\" that the Citus workers rejected has no reason to be",
					 e->object_key);
			nread++;
			MemoryContextSwitchTo(old);
			MemoryContextReset(rowcxt);
		}
		SPI_freetuptable(SPI_tuptable);
		state_rows_flush(rejects);
	}
	SPI_cursor_close(portal);
	state_rows_flush(rejects);
	MemoryContextDelete(rowcxt);
	if (nread != b->totals[DISP_REJECTED])
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("batch %s found " INT64_FORMAT " rejected rows of staged relation \"%s\" again, not " INT64_FORMAT,
						b->batch_id, nread, relation_display_name(b->staged), b->totals[DISP_REJECTED]),
				 errdetail("The staged relation was written while the batch read it."),
				 errhint("Stage the batch's rows before the batch, and call reconcile_batch again; nothing was applied.")));
}

/* The key of a fetched row (columns from first) in the target's key order. */
static Datum *
fetched_key(TargetInfo *t, HeapTuple tup, TupleDesc desc, int first)
{
	Datum	   *keys = palloc(sizeof(Datum) * t->nkeys);

	for (int i = 0; i < t->nkeys; i++)
	{
		bool		isnull;

		keys[i] = SPI_getbinval(tup, desc, first + i, &isnull);
	}
	return keys;
}

/*
 * Under 'abort', a batch with conflicts fails as a plain batch fails
 * (merge.c), naming the first five in key order, then version (highest
 * first), object and row.
 */
static void
check_abort(BatchState *b, CitusRun *run)
{
	TargetInfo *t = b->target;
	StringInfoData sql,
				named;
	int64		n = b->totals[DISP_CONFLICT];

	if (!t->abort_on_conflict || n == 0)
		return;
	initStringInfo(&sql);
	initStringInfo(&named);
	appendStringInfoString(&sql, "SELECT w.v, w.obj, w.source_row");
	for (int i = 0; i < t->nkeys; i++)
		appendStringInfo(&sql, ", w.k%d", i + 1);
	appendStringInfo(&sql, " FROM %s AS w WHERE w.nonce OPERATOR(pg_catalog.=) %s AND w.disp OPERATOR(pg_catalog.=) 6 ORDER BY ",
					 run->work, run->nonce);
	for (int i = 0; i < t->nkeys; i++)
	{
		appendStringInfo(&sql, "w.k%d", i + 1);
		if (OidIsValid(t->key_collations[i]))
			appendStringInfo(&sql, " COLLATE %s", collation_quoted_name(t->key_collations[i]));
		appendStringInfoString(&sql, ", ");
	}
	appendStringInfo(&sql, "w.v%s USING %s, w.obj, w.source_row LIMIT 5",
					 ordering_collate_sql(t), operator_sql(t->version_gt_op));
	if (SPI_execute(sql.data, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "could not read the conflicts of a batch on the Citus workers");
	for (uint64 r = 0; r < SPI_processed; r++)
	{
		HeapTuple	tup = SPI_tuptable->vals[r];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		bool		isnull;
		char	   *v = ordering_text(t, SPI_getbinval(tup, desc, 1, &isnull));
		int32		obj = DatumGetInt32(SPI_getbinval(tup, desc, 2, &isnull));
		int64		row = DatumGetInt64(SPI_getbinval(tup, desc, 3, &isnull));

		appendStringInfo(&named, "%skey %s version %s in object \"%s\"%s row " INT64_FORMAT,
						 r > 0 ? "; " : "", key_to_json(t, fetched_key(t, tup, desc, 4)), v,
						 b->manifest->entries[obj].object_key,
						 b->staged_versions ?
						 psprintf(" version \"%s\"", b->manifest->entries[obj].version_id) : "",
						 row);
	}
	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("batch %s has " INT64_FORMAT " conflicting rows for table \"%s\"",
					b->batch_id, n, t->relname),
			 errdetail("Rows of keys where two payloads claim one version, in the batch or against the target's row: %s%s.",
					   named.data, n > 5 ? "; ..." : ""),
			 errhint("Nothing was applied. Correct the source, or register the target with conflict_policy => 'quarantine' to hold conflicting keys back and load the rest.")));
}

/*
 * S5: every row of a conflicting key held back in reconcile.conflicts, as
 * merge.c's record_conflicts holds it: with its payload, and the target's
 * hash and payload when the target row is at the row's version.
 */
static void
statement_conflicts(BatchState *b, CitusRun *run)
{
	TargetInfo *t = b->target;
	StringInfoData sql;
	Portal		portal;
	bool		hold_payloads;
	StateRows  *conflicts;
	int			first_payload = 9 + t->nkeys;
	int			first_target = first_payload + t->npayload + 2;
	MemoryContext rowcxt;

	if (b->totals[DISP_CONFLICT] == 0)
		return;
	conflicts = state_rows_create(&state_conflicts);
	hold_payloads = state_rows_has(conflicts, "staged_payload");
	initStringInfo(&sql);
	/* 1 v, 2 obj, 3 source_row, 4 h, 5 is_delete, 6 at the target's version, 7 th, 8 unused, then keys, payload, target payload */
	appendStringInfo(&sql, "SELECT w.v, w.obj, w.source_row, w.h, w.is_delete,"
					 " t.%s IS NOT NULL AND t.%s %s w.v%s, t.%s, NULL::pg_catalog.int4",
					 quote_identifier(t->keys[0].name), quote_identifier(t->version.name),
					 operator_sql(t->version_eq_op), ordering_collate_sql(t),
					 quote_identifier(t->hash.name));
	for (int i = 0; i < t->nkeys; i++)
		appendStringInfo(&sql, ", w.k%d", i + 1);
	for (int i = 0; i < t->npayload; i++)
		appendStringInfo(&sql, ", w.p%d", i + 1);
	appendStringInfoString(&sql, ", NULL::pg_catalog.int4, NULL::pg_catalog.int4");
	for (int i = 0; i < t->npayload; i++)
		appendStringInfo(&sql, ", t.%s", quote_identifier(t->payload[i].name));
	appendStringInfo(&sql, " FROM %s AS w LEFT JOIN %s AS t ON ", run->work, t->qualname);
	for (int i = 0; i < t->nkeys; i++)
		appendStringInfo(&sql, "%st.%s %s w.k%d", i ? " AND " : "", quote_identifier(t->keys[i].name),
						 operator_sql(t->key_eq_ops[i]), i + 1);
	appendStringInfo(&sql, " WHERE w.nonce OPERATOR(pg_catalog.=) %s AND w.disp OPERATOR(pg_catalog.=) 6",
					 run->nonce);
	rowcxt = AllocSetContextCreate(CurrentMemoryContext, "reconcile conflict row", ALLOCSET_DEFAULT_SIZES);
	portal = SPI_cursor_open_with_args(NULL, sql.data, 0, NULL, NULL, NULL, true, CURSOR_OPT_NO_SCROLL);
	for (;;)
	{
		SPI_cursor_fetch(portal, true, FETCH_ROWS);
		if (SPI_processed == 0)
			break;
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			HeapTuple	tup = SPI_tuptable->vals[r];
			TupleDesc	desc = SPI_tuptable->tupdesc;
			MemoryContext old = MemoryContextSwitchTo(rowcxt);
			bool		n;
			int32		obj = DatumGetInt32(SPI_getbinval(tup, desc, 2, &n));
			bool		at_version = DatumGetBool(SPI_getbinval(tup, desc, 6, &n));
			Datum		th = SPI_getbinval(tup, desc, 7, &n);
			bool		th_null = n;
			Datum	   *pv = palloc(sizeof(Datum) * Max(t->npayload, 1));
			bool	   *pn = palloc(sizeof(bool) * Max(t->npayload, 1));

			state_row_set(conflicts, "batch_id", CStringGetTextDatum(b->batch_id));
			state_row_set(conflicts, "target", ObjectIdGetDatum(t->relid));
			state_row_set(conflicts, "key", JsonbPGetDatum(key_to_jsonb(t, fetched_key(t, tup, desc, 9))));
			/* As merge.c holds them: bigint for an integer version, the pinned text always. */
			if (t->version_integer)
				state_row_set(conflicts, "version", Int64GetDatum(ordering_int64(t, SPI_getbinval(tup, desc, 1, &n))));
			state_row_set(conflicts, "ordering",
						  CStringGetTextDatum(ordering_text(t, SPI_getbinval(tup, desc, 1, &n))));
			state_row_set(conflicts, "object_key", CStringGetTextDatum(b->manifest->entries[obj].object_key));
			state_row_set(conflicts, "source_row", SPI_getbinval(tup, desc, 3, &n));
			state_row_set(conflicts, "staged_hash", SPI_getbinval(tup, desc, 4, &n));
			if (at_version && !th_null)
				state_row_set(conflicts, "existing_hash", th);
			if (hold_payloads)
			{
				state_row_set(conflicts, "version_id", CStringGetTextDatum(b->manifest->entries[obj].version_id));
				state_row_set(conflicts, "deleted", SPI_getbinval(tup, desc, 5, &n));
				for (int i = 0; i < t->npayload; i++)
					pv[i] = SPI_getbinval(tup, desc, first_payload + i, &pn[i]);
				state_row_set(conflicts, "staged_payload", JsonbPGetDatum(payload_to_jsonb(t, pv, pn)));
				if (at_version)
				{
					for (int i = 0; i < t->npayload; i++)
						pv[i] = SPI_getbinval(tup, desc, first_target + i, &pn[i]);
					state_row_set(conflicts, "existing_payload", JsonbPGetDatum(payload_to_jsonb(t, pv, pn)));
				}
			}
			state_row_add(conflicts);
			MemoryContextSwitchTo(old);
			MemoryContextReset(rowcxt);
		}
		SPI_freetuptable(SPI_tuptable);
		state_rows_flush(conflicts);
	}
	SPI_cursor_close(portal);
	state_rows_flush(conflicts);
	MemoryContextDelete(rowcxt);
}

/*
 * S6: the version-monotonic write of each key's winner, one MERGE task per
 * shard group: a live row or a tombstone, which keeps the row's last
 * payload (apply.c).  Its row count must be the receipt's.
 */
static void
statement_apply(BatchState *b, CitusRun *run)
{
	TargetInfo *t = b->target;
	StringInfoData sql,
				cols,
				vals;
	int64		expected = b->totals[DISP_INSERTED] + b->totals[DISP_UPDATED] + b->totals[DISP_DELETED];
	const char *vname = quote_identifier(t->version.name);

	if (expected == 0)
		return;
	initStringInfo(&sql);
	initStringInfo(&cols);
	initStringInfo(&vals);
	appendStringInfo(&sql, "MERGE INTO %s AS t USING (SELECT * FROM %s AS w WHERE w.nonce OPERATOR(pg_catalog.=) %s"
					 " AND w.disp OPERATOR(pg_catalog.<=) 2) AS w ON ",
					 t->qualname, run->work, run->nonce);
	for (int i = 0; i < t->nkeys; i++)
	{
		appendStringInfo(&sql, "%st.%s %s w.k%d", i ? " AND " : "", quote_identifier(t->keys[i].name),
						 operator_sql(t->key_eq_ops[i]), i + 1);
		appendStringInfo(&cols, "%s, ", quote_identifier(t->keys[i].name));
		appendStringInfo(&vals, "w.k%d, ", i + 1);
	}
	appendStringInfo(&cols, "%s, %s, %s", vname, quote_identifier(t->deleted.name),
					 quote_identifier(t->hash.name));
	appendStringInfoString(&vals, "w.v, w.is_delete, w.h");
	appendStringInfo(&sql, " WHEN MATCHED AND t.%s %s w.v%s THEN UPDATE SET %s = w.v, %s = w.is_delete, %s = w.h",
					 vname, operator_sql(t->version_lt_op), ordering_collate_sql(t),
					 vname, quote_identifier(t->deleted.name), quote_identifier(t->hash.name));
	for (int i = 0; i < t->npayload; i++)
	{
		const char *p = quote_identifier(t->payload[i].name);

		appendStringInfo(&sql, ", %s = CASE WHEN w.is_delete THEN t.%s ELSE w.p%d END", p, p, i + 1);
		appendStringInfo(&cols, ", %s", p);
		appendStringInfo(&vals, ", w.p%d", i + 1);
	}
	appendStringInfo(&sql, " WHEN NOT MATCHED THEN INSERT (%s) VALUES (%s)", cols.data, vals.data);
	ereport(DEBUG1, (errmsg_internal("batch %s S6: %s", b->batch_id, sql.data)));
	run_sql(sql.data, SPI_OK_MERGE, "apply");
	if ((int64) SPI_processed != expected)
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("batch %s wrote " UINT64_FORMAT " rows of table \"%s\", not " INT64_FORMAT,
						b->batch_id, SPI_processed, t->relname, expected),
				 errdetail("The target's shards were written by another session during the batch, not through its coordinator's table."),
				 errhint("Retry the batch; nothing was applied.")));
}

/*
 * S2 to S4: the staged rows classified on the workers, the receipt's counts
 * and checksum, the rejects written.  Then batch.c checks the row counts
 * and the reject limits, as after a plain batch's read.
 */
void
citus_merge_stage(BatchState *b, StagedShape *shape)
{
	CitusRun   *run = palloc0(sizeof(CitusRun));
	uint64		nonce;

	if (!pg_strong_random(&nonce, sizeof(nonce)))
		ereport(ERROR,
				(errcode(ERRCODE_INTERNAL_ERROR),
				 errmsg("could not generate a random nonce for batch %s", b->batch_id)));
	run->work = work_qualname(b->target->relid);
	run->nonce = psprintf(INT64_FORMAT "::pg_catalog.int8", (int64) (nonce & PG_INT64_MAX));
	run->settings = pinned_settings_sql();
	run->dk = dist_key_index(b->target);
	run->shape = shape;
	b->citus_run = run;

	progress_phase(PHASE_READING);
	statement_classify(b, run);
	progress_phase(PHASE_MERGING);
	statement_counts(b, run);
	{
		int64		total = 0;

		for (int i = 0; i < b->manifest->nentries; i++)
			total += b->staged_rows[i];
		progress_rows(total);
	}
	statement_rejects(b, run);
}

/* The conflicts, the apply, the work table emptied. */
void
citus_merge_apply(BatchState *b)
{
	CitusRun   *run = b->citus_run;

	check_abort(b, run);
	statement_conflicts(b, run);
	progress_phase(PHASE_APPLYING);
	statement_apply(b, run);
	run_sql(psprintf("TRUNCATE %s", run->work), SPI_OK_UTILITY, "emptying of the work table");
}
