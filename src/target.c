/*
 * target.c
 *		Registration of target tables, and the privilege rules a batch obeys.
 *
 * A registered target names its key, version, tombstone and hash columns;
 * its key must be backed by a unique index, which both the merge's probes
 * and the version-monotonic upsert rely on.  Functions run with the
 * caller's rights.  The state tables in schema reconcile are written on
 * the caller's behalf by switching to their owner, only after the caller's
 * own rights on the target have been checked.
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/transam.h"
#include "catalog/indexing.h"
#include "catalog/pg_am.h"
#include "catalog/namespace.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/syscache.h"

#include "reconcile.h"

PG_FUNCTION_INFO_V1(reconcile_register);
PG_FUNCTION_INFO_V1(reconcile_unregister);

/* The state tables are owned by whoever owns schema reconcile. */
static Oid
state_owner(void)
{
	Oid			nsp = get_namespace_oid("reconcile", false);
	HeapTuple	tup = SearchSysCache1(NAMESPACEOID, ObjectIdGetDatum(nsp));
	Oid			owner;

	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for schema %u", nsp);
	owner = ((Form_pg_namespace) GETSTRUCT(tup))->nspowner;
	ReleaseSysCache(tup);
	return owner;
}

void
state_user_enter(StateUser *saved)
{
	GetUserIdAndSecContext(&saved->save_userid, &saved->save_sec_context);
	SetUserIdAndSecContext(state_owner(),
						   saved->save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
}

void
state_user_leave(StateUser *saved)
{
	SetUserIdAndSecContext(saved->save_userid, saved->save_sec_context);
}

char *
relation_display_name(Oid relid)
{
	char	   *name = get_rel_name(relid);

	return name ? name : psprintf("%u", relid);
}

static void
check_not_null_arg(FunctionCallInfo fcinfo, int argno, const char *name)
{
	if (PG_ARGISNULL(argno))
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("argument %s must not be null", name)));
}

/*
 * Whether reading a text form into the type runs built-in code only, which
 * parses, pallocs and raises plain errors (stage.c: input_value catches
 * them without a subtransaction): a base type with a built-in input
 * function, or an array of such.  array_in, record_in and range_in are
 * built-in too, but call their element's input function, which may be a
 * domain's CHECK calling any function, and record_in holds a TupleDesc
 * reference: they count only as their elements do, and composites, ranges,
 * multiranges, domains and enums never.
 */
static bool
input_is_builtin(Oid typid)
{
	HeapTuple	tup;
	Form_pg_type typ;
	bool		result;

	check_stack_depth();
	tup = SearchSysCache1(TYPEOID, ObjectIdGetDatum(typid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for type %u", typid);
	typ = (Form_pg_type) GETSTRUCT(tup);
	if (typ->typtype != TYPTYPE_BASE || typ->typinput >= FirstGenbkiObjectId)
		result = false;
	else if (IsTrueArrayType(typ))
		result = input_is_builtin(typ->typelem);
	else
		result = true;
	ReleaseSysCache(tup);
	return result;
}

/* Look a column of the target up by name; it must be a plain column. */
static void
resolve_column(Relation rel, const char *name, const char *role,
			   TargetColumn *col)
{
	AttrNumber	attnum = get_attnum(RelationGetRelid(rel), name);
	Form_pg_attribute att;

	if (attnum == InvalidAttrNumber || attnum < 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_COLUMN),
				 errmsg("%s column \"%s\" does not exist in table \"%s\"",
						role, name, RelationGetRelationName(rel))));
	att = TupleDescAttr(RelationGetDescr(rel), attnum - 1);
	if (att->attgenerated)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
				 errmsg("%s column \"%s\" of table \"%s\" is a generated column",
						role, name, RelationGetRelationName(rel))));
	col->name = pstrdup(name);
	col->attnum = attnum;
	col->typid = att->atttypid;
	col->typmod = att->atttypmod;
	col->collation = att->attcollation;
	col->typlen = att->attlen;
	col->typbyval = att->attbyval;
	{
		Oid			infunc,
					outfunc;
		bool		varlena;

		getTypeInputInfo(col->typid, &infunc, &col->ioparam);
		fmgr_info(infunc, &col->in);
		getTypeOutputInfo(col->typid, &outfunc, &varlena);
		fmgr_info(outfunc, &col->out);
		col->catch_directly = input_is_builtin(col->typid);
	}
}

static void
require_type(Relation rel, TargetColumn *col, const char *role,
			 bool ok, const char *wanted)
{
	if (!ok)
		ereport(ERROR,
				(errcode(ERRCODE_DATATYPE_MISMATCH),
				 errmsg("%s column \"%s\" of table \"%s\" must be of type %s, not %s",
						role, col->name, RelationGetRelationName(rel), wanted,
						format_type_be(col->typid))));
}

static bool
is_integer_type(Oid typid)
{
	return typid == INT2OID || typid == INT4OID || typid == INT8OID;
}

/* Types whose text form depends on search_path. */
static bool
is_object_name_type(Oid typid)
{
	switch (typid)
	{
		case REGCLASSOID:
		case REGTYPEOID:
		case REGPROCOID:
		case REGPROCEDUREOID:
		case REGOPEROID:
		case REGOPERATOROID:
		case REGCONFIGOID:
		case REGDICTIONARYOID:
		case REGNAMESPACEOID:
		case REGROLEOID:
		case REGCOLLATIONOID:
			return true;
		default:
			return false;
	}
}

static char **
text_array_elems(ArrayType *arr, const char *argname, int *n)
{
	Datum	   *elems;
	bool	   *nulls;
	char	  **out;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a one-dimensional array", argname)));
	deconstruct_array(arr, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, n);
	out = palloc(sizeof(char *) * Max(*n, 1));
	for (int i = 0; i < *n; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("%s must not contain nulls", argname)));
		out[i] = TextDatumGetCString(elems[i]);
	}
	return out;
}

/*
 * Find a valid unique index whose key columns are exactly the given
 * attributes (in any order), without expressions or a predicate.
 */
static Oid
find_key_index(Relation rel, int nkeys, TargetColumn *keys)
{
	List	   *indexes = RelationGetIndexList(rel);
	ListCell   *lc;
	Oid			found = InvalidOid;

	foreach(lc, indexes)
	{
		Oid			indexoid = lfirst_oid(lc);
		HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(indexoid));
		Form_pg_index idx;
		bool		match;

		if (!HeapTupleIsValid(tup))
			elog(ERROR, "cache lookup failed for index %u", indexoid);
		idx = (Form_pg_index) GETSTRUCT(tup);
		match = idx->indisunique && idx->indisvalid && idx->indimmediate &&
			idx->indnkeyatts == nkeys &&
			heap_attisnull(tup, Anum_pg_index_indexprs, NULL) &&
			heap_attisnull(tup, Anum_pg_index_indpred, NULL);
		for (int i = 0; match && i < nkeys; i++)
		{
			bool		in_key = false;

			for (int j = 0; j < nkeys; j++)
				if (idx->indkey.values[i] == keys[j].attnum)
					in_key = true;
			match = in_key;
		}
		ReleaseSysCache(tup);
		if (match)
		{
			/* Prefer the primary key when there are several. */
			if (!OidIsValid(found) || indexoid == RelationGetPrimaryKeyIndex(rel))
				found = indexoid;
		}
	}
	list_free(indexes);

	if (!OidIsValid(found))
	{
		StringInfoData cols;

		initStringInfo(&cols);
		for (int i = 0; i < nkeys; i++)
			appendStringInfo(&cols, "%s%s", i ? ", " : "",
							 quote_identifier(keys[i].name));
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
				 errmsg("table \"%s\" has no unique index on its key columns (%s)",
						RelationGetRelationName(rel), cols.data),
				 errdetail("reconcile keeps one row per key and finds it through a unique, immediate, non-partial index on exactly the key columns."),
				 errhint("Create one, for example: CREATE UNIQUE INDEX ON %s (%s);",
						 quote_identifier(RelationGetRelationName(rel)), cols.data)));
	}
	return found;
}

/* Fill in the key semantics (equality, ordering, collation) of the index. */
static void
load_key_semantics(TargetInfo *t)
{
	Relation	index = index_open(t->key_index, AccessShareLock);

	t->key_eq_ops = palloc(sizeof(Oid) * t->nkeys);
	t->key_eq_procs = palloc(sizeof(Oid) * t->nkeys);
	t->key_lt_ops = palloc(sizeof(Oid) * t->nkeys);
	t->key_collations = palloc(sizeof(Oid) * t->nkeys);

	/* Order the key columns as the index does, so probes can use it. */
	for (int i = 0; i < t->nkeys; i++)
	{
		AttrNumber	attnum = index->rd_index->indkey.values[i];
		Oid			opfamily = index->rd_opfamily[i];
		Oid			opcintype = index->rd_opcintype[i];

		for (int j = i; j < t->nkeys; j++)
			if (t->keys[j].attnum == attnum)
			{
				TargetColumn tmp = t->keys[i];

				t->keys[i] = t->keys[j];
				t->keys[j] = tmp;
			}
		if (index->rd_rel->relam != BTREE_AM_OID)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("the unique index on the key of table \"%s\" is not a btree index",
							t->relname)));
		t->key_eq_ops[i] = get_opfamily_member(opfamily, opcintype, opcintype,
											   BTEqualStrategyNumber);
		t->key_lt_ops[i] = get_opfamily_member(opfamily, opcintype, opcintype,
											   BTLessStrategyNumber);
		if (!OidIsValid(t->key_eq_ops[i]) || !OidIsValid(t->key_lt_ops[i]))
			elog(ERROR, "missing btree operators for key column \"%s\"",
				 t->keys[i].name);
		t->key_eq_procs[i] = get_opcode(t->key_eq_ops[i]);
		t->key_collations[i] = index->rd_indcollation[i];
	}
	index_close(index, AccessShareLock);
}

/*
 * Resolve a registration against the table as it is now.  With
 * registering set, the columns come from the arguments and errors say so;
 * otherwise from reconcile.targets.
 */
static TargetInfo *
resolve_target(Oid relid, char **keys, int nkeys, const char *version,
			   const char *deleted, const char *hash, char **payload,
			   int npayload, const char *policy)
{
	TargetInfo *t = palloc0(sizeof(TargetInfo));
	Relation	rel = relation_open(relid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	char		kind = rel->rd_rel->relkind;

	if (kind != RELKIND_RELATION && kind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", RelationGetRelationName(rel)),
				 errdetail("A reconcile target must be a table or a partitioned table.")));

	t->relid = relid;
	t->relname = pstrdup(RelationGetRelationName(rel));
	t->qualname = quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
											 t->relname);
	t->partitioned = (kind == RELKIND_PARTITIONED_TABLE);
	t->abort_on_conflict = (strcmp(policy, "abort") == 0);

	if (strcmp(policy, "abort") != 0 && strcmp(policy, "quarantine") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid conflict_policy \"%s\"", policy),
				 errhint("Use 'quarantine' (hold conflicting keys back) or 'abort' (fail the batch).")));
	if (nkeys == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("key_columns must name at least one column")));

	t->nkeys = nkeys;
	t->keys = palloc0(sizeof(TargetColumn) * nkeys);
	for (int i = 0; i < nkeys; i++)
		resolve_column(rel, keys[i], "key", &t->keys[i]);
	resolve_column(rel, version, "version", &t->version);
	resolve_column(rel, deleted, "deleted", &t->deleted);
	resolve_column(rel, hash, "hash", &t->hash);

	/* No column may play two parts. */
	{
		AttrNumber	used[MaxHeapAttributeNumber];
		int			nused = 0;

		for (int i = 0; i < nkeys; i++)
			used[nused++] = t->keys[i].attnum;
		used[nused++] = t->version.attnum;
		used[nused++] = t->deleted.attnum;
		used[nused++] = t->hash.attnum;
		for (int i = 0; i < nused; i++)
			for (int j = i + 1; j < nused; j++)
				if (used[i] == used[j])
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
							 errmsg("column \"%s\" of table \"%s\" is named more than once",
									NameStr(TupleDescAttr(desc, used[i] - 1)->attname),
									t->relname),
							 errdetail("The key, version, deleted and hash columns must be distinct.")));

		require_type(rel, &t->version, "version", is_integer_type(t->version.typid),
					 "smallint, integer or bigint");
		require_type(rel, &t->deleted, "deleted", t->deleted.typid == BOOLOID, "boolean");
		require_type(rel, &t->hash, "hash", t->hash.typid == BYTEAOID, "bytea");
		if (!TupleDescAttr(desc, t->version.attnum - 1)->attnotnull)
			ereport(ERROR,
					(errcode(ERRCODE_INVALID_TABLE_DEFINITION),
					 errmsg("version column \"%s\" of table \"%s\" must be NOT NULL",
							version, t->relname),
					 errhint("ALTER TABLE %s ALTER COLUMN %s SET NOT NULL;",
							 t->qualname, quote_identifier(version))));

		/* Payload: the given columns, or every other plain column. */
		t->payload = palloc0(sizeof(TargetColumn) * (desc->natts + 1));
		for (int a = 1; a <= desc->natts; a++)
		{
			Form_pg_attribute att = TupleDescAttr(desc, a - 1);
			bool		special = false;
			bool		wanted;

			if (att->attisdropped)
				continue;
			for (int i = 0; i < nused; i++)
				if (used[i] == a)
					special = true;
			if (payload == NULL)
				wanted = !special && !att->attgenerated;
			else
			{
				wanted = false;
				for (int i = 0; i < npayload; i++)
					if (strcmp(payload[i], NameStr(att->attname)) == 0)
						wanted = true;
				if (wanted && special)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
							 errmsg("payload column \"%s\" of table \"%s\" is also a key, version, deleted or hash column",
									NameStr(att->attname), t->relname)));
			}
			if (wanted)
				resolve_column(rel, NameStr(att->attname), "payload",
							   &t->payload[t->npayload++]);
		}
		for (int i = 0; payload != NULL && i < npayload; i++)
		{
			bool		seen = false;

			for (int j = 0; j < t->npayload; j++)
				if (strcmp(payload[i], t->payload[j].name) == 0)
					seen = true;
			if (!seen)
			{
				TargetColumn unused;

				/* Raises the error that says what is wrong with it. */
				resolve_column(rel, payload[i], "payload", &unused);
				ereport(ERROR,
						(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
						 errmsg("payload column \"%s\" of table \"%s\" is listed more than once or cannot be a payload column",
								payload[i], t->relname)));
			}
		}
	}

	for (int i = 0; i < t->npayload; i++)
		if (is_object_name_type(t->payload[i].typid))
			t->payload_names_objects = true;

	t->key_index = find_key_index(rel, nkeys, t->keys);
	load_key_semantics(t);
	relation_close(rel, AccessShareLock);
	return t;
}

static char **
text_array_from_datum(Datum d, const char *what, int *n)
{
	return text_array_elems(DatumGetArrayTypeP(d), what, n);
}

/* Load a target's registration from reconcile.targets. */
TargetInfo *
target_load(Oid relid)
{
	StateUser	su;
	Datum		arg = ObjectIdGetDatum(relid);
	Oid			argtype = REGCLASSOID;
	TargetInfo *t;
	char	  **keys,
			  **payload;
	int			nkeys,
				npayload;
	char	   *version,
			   *deleted,
			   *hash,
			   *policy;
	HeapTuple	tup;
	TupleDesc	desc;
	bool		isnull;

	state_user_enter(&su);
	if (SPI_execute_with_args("SELECT key_columns, version_column, deleted_column,"
							  " hash_column, payload_columns, conflict_policy"
							  " FROM reconcile.targets WHERE target OPERATOR(pg_catalog.=) $1",
							  1, &argtype, &arg, NULL, true, 1) != SPI_OK_SELECT)
		elog(ERROR, "could not read reconcile.targets");
	state_user_leave(&su);

	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("table \"%s\" is not registered with reconcile",
						relation_display_name(relid)),
				 errhint("Register it first with reconcile_register(target => ..., key_columns => ..., version_column => ..., deleted_column => ..., hash_column => ...).")));

	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	keys = text_array_from_datum(SPI_getbinval(tup, desc, 1, &isnull), "key_columns", &nkeys);
	version = SPI_getvalue(tup, desc, 2);
	deleted = SPI_getvalue(tup, desc, 3);
	hash = SPI_getvalue(tup, desc, 4);
	payload = text_array_from_datum(SPI_getbinval(tup, desc, 5, &isnull), "payload_columns", &npayload);
	policy = SPI_getvalue(tup, desc, 6);

	t = resolve_target(relid, keys, nkeys, version, deleted, hash,
					   payload, npayload, policy);
	return t;
}

/*
 * A batch reads the target and writes it: the caller needs SELECT, INSERT
 * and UPDATE on it, and SELECT on the staged relation.  The extension never
 * lends its own rights.
 */
void
target_check_batch_privileges(TargetInfo *t, Oid staged)
{
	static const struct
	{
		AclMode		mode;
		const char *name;
	}			needed[] = {
		{ACL_SELECT, "SELECT"}, {ACL_INSERT, "INSERT"}, {ACL_UPDATE, "UPDATE"}
	};
	Oid			user = GetUserId();

	for (int i = 0; i < lengthof(needed); i++)
		if (pg_class_aclcheck(t->relid, user, needed[i].mode) != ACLCHECK_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied for table %s", t->relname),
					 errdetail("reconcile_batch needs SELECT, INSERT and UPDATE on the target; role \"%s\" lacks %s.",
							   GetUserNameFromId(user, false), needed[i].name)));
	if (pg_class_aclcheck(staged, user, ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for relation %s", relation_display_name(staged)),
				 errdetail("reconcile_batch needs SELECT on the staged relation.")));

	/* The merge probes the key index directly, which would bypass policies. */
	if (check_enable_rls(t->relid, InvalidOid, true) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"%s\" has row-level security enabled for role \"%s\"",
						t->relname, GetUserNameFromId(user, false)),
				 errdetail("reconcile_batch reads every row of the target by key and cannot apply row-level security policies."),
				 errhint("Run batches as a role that bypasses row-level security on this table, such as its owner.")));
}

Datum
reconcile_register(PG_FUNCTION_ARGS)
{
	Oid			relid;
	char	  **keys,
			  **payload = NULL;
	int			nkeys,
				npayload = 0;
	TargetInfo *t;
	StateUser	su;
	Datum		values[7];
	Oid			types[7] = {REGCLASSOID, TEXTARRAYOID, TEXTOID, TEXTOID, TEXTOID,
	TEXTARRAYOID, TEXTOID};
	ArrayBuildState *astate;

	check_not_null_arg(fcinfo, 0, "target");
	check_not_null_arg(fcinfo, 1, "key_columns");
	check_not_null_arg(fcinfo, 2, "version_column");
	check_not_null_arg(fcinfo, 3, "deleted_column");
	check_not_null_arg(fcinfo, 4, "hash_column");
	check_not_null_arg(fcinfo, 5, "conflict_policy");

	relid = PG_GETARG_OID(0);
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	if (!pg_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, get_rel_name(relid));

	keys = text_array_elems(PG_GETARG_ARRAYTYPE_P(1), "key_columns", &nkeys);
	if (!PG_ARGISNULL(6))
		payload = text_array_elems(PG_GETARG_ARRAYTYPE_P(6), "payload_columns", &npayload);

	t = resolve_target(relid, keys, nkeys,
					   text_to_cstring(PG_GETARG_TEXT_PP(2)),
					   text_to_cstring(PG_GETARG_TEXT_PP(3)),
					   text_to_cstring(PG_GETARG_TEXT_PP(4)),
					   payload, npayload,
					   text_to_cstring(PG_GETARG_TEXT_PP(5)));

	values[0] = ObjectIdGetDatum(relid);
	values[1] = PG_GETARG_DATUM(1);
	values[2] = PG_GETARG_DATUM(2);
	values[3] = PG_GETARG_DATUM(3);
	values[4] = PG_GETARG_DATUM(4);
	astate = initArrayResult(TEXTOID, CurrentMemoryContext, false);
	for (int i = 0; i < t->npayload; i++)
		astate = accumArrayResult(astate, CStringGetTextDatum(t->payload[i].name),
								  false, TEXTOID, CurrentMemoryContext);
	values[5] = makeArrayResult(astate, CurrentMemoryContext);
	values[6] = PG_GETARG_DATUM(5);

	SPI_connect();
	state_user_enter(&su);
	if (SPI_execute_with_args("INSERT INTO reconcile.targets AS t (target, key_columns,"
							  " version_column, deleted_column, hash_column,"
							  " payload_columns, conflict_policy, registered_by)"
							  " VALUES ($1, $2, $3, $4, $5, $6, $7, SESSION_USER)"
							  " ON CONFLICT (target) DO UPDATE SET"
							  " key_columns = excluded.key_columns,"
							  " version_column = excluded.version_column,"
							  " deleted_column = excluded.deleted_column,"
							  " hash_column = excluded.hash_column,"
							  " payload_columns = excluded.payload_columns,"
							  " conflict_policy = excluded.conflict_policy,"
							  " registered_by = excluded.registered_by,"
							  " registered_at = pg_catalog.now()",
							  7, types, values, NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not write reconcile.targets");
	state_user_leave(&su);
	SPI_finish();
	PG_RETURN_VOID();
}

Datum
reconcile_unregister(PG_FUNCTION_ARGS)
{
	Oid			relid;
	StateUser	su;
	Oid			type = REGCLASSOID;
	Datum		value;

	check_not_null_arg(fcinfo, 0, "target");
	relid = PG_GETARG_OID(0);
	if (!pg_class_ownercheck(relid, GetUserId()))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, relation_display_name(relid));

	value = ObjectIdGetDatum(relid);
	SPI_connect();
	state_user_enter(&su);
	if (SPI_execute_with_args("DELETE FROM reconcile.targets WHERE target OPERATOR(pg_catalog.=) $1",
							  1, &type, &value, NULL, false, 0) != SPI_OK_DELETE)
		elog(ERROR, "could not write reconcile.targets");
	state_user_leave(&su);
	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("table \"%s\" is not registered with reconcile",
						relation_display_name(relid))));
	SPI_finish();
	PG_RETURN_VOID();
}
