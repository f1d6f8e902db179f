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
#include "catalog/pg_inherits.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/rls.h"
#include "utils/snapmgr.h"
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

/* The input and output functions of a column's type. */
static void
column_type_io(TargetColumn *col)
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

	/*
	 * A batch writes the staged value into every column it resolves, which
	 * PostgreSQL refuses for an identity column GENERATED ALWAYS: refuse it
	 * here, so that both write paths (direct.c, apply.c) behave alike.
	 */
	if (att->attidentity == ATTRIBUTE_IDENTITY_ALWAYS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
				 errmsg("%s column \"%s\" of table \"%s\" is an identity column GENERATED ALWAYS",
						role, name, RelationGetRelationName(rel)),
				 errdetail("reconcile writes the staged value of every key, version, deleted, hash and payload column, and PostgreSQL generates the value of such a column itself."),
				 errhint("Leave the column out of payload_columns, or make it GENERATED BY DEFAULT: ALTER TABLE %s ALTER COLUMN %s SET GENERATED BY DEFAULT;",
						 quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
													RelationGetRelationName(rel)),
						 quote_identifier(name))));
	col->name = pstrdup(name);
	col->attnum = attnum;
	col->typid = att->atttypid;
	col->typmod = att->atttypmod;
	col->collation = att->attcollation;
	col->typlen = att->attlen;
	col->typbyval = att->attbyval;
	column_type_io(col);
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

/*
 * The elements of a text[] argument, at most max of them: counted before
 * anything is done with them, so that no later array overflows.
 */
static char **
text_array_elems(ArrayType *arr, const char *argname, int max, const char *why,
				 int *n)
{
	Datum	   *elems;
	bool	   *nulls;
	char	  **out;
	int			count;

	if (ARR_NDIM(arr) > 1)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("%s must be a one-dimensional array", argname)));
	count = ArrayGetNItems(ARR_NDIM(arr), ARR_DIMS(arr));
	if (count > max)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("%s names %d columns, more than the %d allowed", argname, count, max),
				 errdetail("%s", why)));
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
	Relation	rel;
	TupleDesc	desc;
	char		kind;

	/* The caller locked the target (target_lock) before reading anything. */
	Assert(CheckRelationOidLockedByMe(relid, ShareRowExclusiveLock, true));
	rel = relation_open(relid, NoLock);
	desc = RelationGetDescr(rel);
	kind = rel->rd_rel->relkind;

	if (kind != RELKIND_RELATION && kind != RELKIND_PARTITIONED_TABLE)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("\"%s\" is not a table", RelationGetRelationName(rel)),
				 errdetail("A reconcile target must be a table or a partitioned table.")));

	/*
	 * The unique index of a table that takes part in (non-partition)
	 * inheritance does not cover its parent's or its children's rows: a key
	 * could live twice.  Checked at every batch too, since a child can be
	 * added after registration; under the batch's lock none can be added.
	 */
	if (kind == RELKIND_RELATION && !rel->rd_rel->relispartition &&
		has_superclass(relid))
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("table \"%s\" inherits from another table", RelationGetRelationName(rel)),
				 errdetail("A unique index does not span an inheritance tree, so reconcile could not keep one row per key."),
				 errhint("Load a table that takes no part in inheritance, or use a partitioned table.")));
	if (kind == RELKIND_RELATION && find_inheritance_children(relid, NoLock) != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("table \"%s\" has inheritance children", RelationGetRelationName(rel)),
				 errdetail("A unique index does not span an inheritance tree, so reconcile could not keep one row per key."),
				 errhint("Load a table that takes no part in inheritance, or use a partitioned table.")));

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
	/* Bounds for the arrays below; registration checked them already. */
	if (nkeys > INDEX_MAX_KEYS || npayload > desc->natts)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("the registration of table \"%s\" names too many columns", t->relname),
				 errhint("Register the table again.")));

	t->nkeys = nkeys;
	t->keys = palloc0(sizeof(TargetColumn) * nkeys);
	for (int i = 0; i < nkeys; i++)
		resolve_column(rel, keys[i], "key", &t->keys[i]);
	resolve_column(rel, version, "version", &t->version);
	resolve_column(rel, deleted, "deleted", &t->deleted);
	resolve_column(rel, hash, "hash", &t->hash);

	/* No column may play two parts. */
	{
		AttrNumber	used[INDEX_MAX_KEYS + 3];
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
				wanted = !special && !att->attgenerated &&
					att->attidentity != ATTRIBUTE_IDENTITY_ALWAYS;
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

			for (int j = 0; j < i; j++)
				if (strcmp(payload[i], payload[j]) == 0)
					ereport(ERROR,
							(errcode(ERRCODE_INVALID_COLUMN_REFERENCE),
							 errmsg("payload column \"%s\" of table \"%s\" is listed more than once",
									payload[i], t->relname)));

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
	relation_close(rel, NoLock);
	return t;
}

static char **
text_array_from_datum(Datum d, const char *what, int max, int *n)
{
	return text_array_elems(DatumGetArrayTypeP(d), what, max,
							"The registration names more columns than its table can have.", n);
}

/*
 * Lock a target, or the staged relation of a batch, before anything about
 * it is read, as PostgreSQL's own commands do with RangeVarGetRelidExtended:
 * the caller's right to take the lock is checked first (so that no role can
 * block a table it may not use), the lock is taken, and then the relation
 * must still exist.  The caller then reads its description and checks its
 * rights again, against the relation as it is once the lock is held:
 * LockRelationOid has processed the invalidations of whatever DDL committed
 * while it waited.
 */
static void check_batch_acl(Oid relid, TargetLockFor purpose);

void
target_lock(Oid relid, int mode, TargetLockFor purpose)
{
	Oid			user = GetUserId();

	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid)));
	if (purpose == TARGET_LOCK_OWNER)
	{
		if (!pg_class_ownercheck(relid, user))
			aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, relation_display_name(relid));
	}
	else
		check_batch_acl(relid, purpose);

	LockRelationOid(relid, mode);
	if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(relid)))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_TABLE),
				 errmsg("relation with OID %u does not exist", relid),
				 errdetail("It was dropped while waiting for its lock.")));
	if (purpose == TARGET_LOCK_OWNER && !pg_class_ownercheck(relid, user))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE, relation_display_name(relid));
}

/*
 * Run a read-only query on the state tables as their owner, with a
 * snapshot taken now: after the caller's lock was granted, so that a
 * registration committed while it waited is seen, in READ COMMITTED as in
 * REPEATABLE READ (the statement's and the transaction's snapshots may
 * predate the wait).  The registration is thus read as current as the
 * system catalogs it is resolved against.
 */
void
state_read_latest(const char *sql, Oid relid, long tcount)
{
	StateUser	su;
	Oid			argtype = REGCLASSOID;
	Datum		arg = ObjectIdGetDatum(relid);
	SPIPlanPtr	plan;

	state_user_enter(&su);
	plan = SPI_prepare(sql, 1, &argtype);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	if (SPI_execute_snapshot(plan, &arg, NULL, GetLatestSnapshot(), InvalidSnapshot,
							 true, false, tcount) != SPI_OK_SELECT)
		elog(ERROR, "could not read the reconcile state tables");
	SPI_freeplan(plan);
	state_user_leave(&su);
}

/* Whether a target is registered; the caller holds its lock (target_lock). */
bool
target_is_registered(Oid relid)
{
	state_read_latest("SELECT 1 FROM reconcile.targets WHERE target OPERATOR(pg_catalog.=) $1",
					  relid, 1);
	return SPI_processed > 0;
}

/*
 * Load a target's registration from reconcile.targets and resolve it
 * against the table.  The caller holds the target's lock (target_lock).
 */
TargetInfo *
target_load(Oid relid)
{
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

	state_read_latest("SELECT key_columns, version_column, deleted_column,"
					  " hash_column, payload_columns, conflict_policy"
					  " FROM reconcile.targets WHERE target OPERATOR(pg_catalog.=) $1",
					  relid, 1);

	if (SPI_processed == 0)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("table \"%s\" is not registered with reconcile",
						relation_display_name(relid)),
				 errhint("Register it first with reconcile_register(target => ..., key_columns => ..., version_column => ..., deleted_column => ..., hash_column => ...).")));

	tup = SPI_tuptable->vals[0];
	desc = SPI_tuptable->tupdesc;
	keys = text_array_from_datum(SPI_getbinval(tup, desc, 1, &isnull), "key_columns",
								 INDEX_MAX_KEYS, &nkeys);
	version = SPI_getvalue(tup, desc, 2);
	deleted = SPI_getvalue(tup, desc, 3);
	hash = SPI_getvalue(tup, desc, 4);
	payload = text_array_from_datum(SPI_getbinval(tup, desc, 5, &isnull), "payload_columns",
									MaxHeapAttributeNumber, &npayload);
	policy = SPI_getvalue(tup, desc, 6);

	t = resolve_target(relid, keys, nkeys, version, deleted, hash,
					   payload, npayload, policy);
	return t;
}

/*
 * A target's resolved description as bytes, for parallel workers: they use
 * the leader's, resolved under the leader's lock, and never read the
 * registration or the table's columns themselves.
 */
static void
serialize_column(StringInfo buf, TargetColumn *c)
{
	appendBinaryStringInfo(buf, c->name, strlen(c->name) + 1);
	appendBinaryStringInfo(buf, (char *) &c->attnum, sizeof(c->attnum));
	appendBinaryStringInfo(buf, (char *) &c->typid, sizeof(c->typid));
	appendBinaryStringInfo(buf, (char *) &c->typmod, sizeof(c->typmod));
	appendBinaryStringInfo(buf, (char *) &c->collation, sizeof(c->collation));
	appendBinaryStringInfo(buf, (char *) &c->typlen, sizeof(c->typlen));
	appendBinaryStringInfo(buf, (char *) &c->typbyval, sizeof(c->typbyval));
}

#define SERIALIZE(buf, field) appendBinaryStringInfo((buf), (char *) &(field), sizeof(field))

void
target_serialize(TargetInfo *t, StringInfo buf)
{
	SERIALIZE(buf, t->relid);
	appendBinaryStringInfo(buf, t->relname, strlen(t->relname) + 1);
	appendBinaryStringInfo(buf, t->qualname, strlen(t->qualname) + 1);
	SERIALIZE(buf, t->partitioned);
	SERIALIZE(buf, t->abort_on_conflict);
	SERIALIZE(buf, t->payload_names_objects);
	SERIALIZE(buf, t->key_index);
	SERIALIZE(buf, t->nkeys);
	SERIALIZE(buf, t->npayload);
	for (int i = 0; i < t->nkeys; i++)
	{
		serialize_column(buf, &t->keys[i]);
		SERIALIZE(buf, t->key_eq_ops[i]);
		SERIALIZE(buf, t->key_eq_procs[i]);
		SERIALIZE(buf, t->key_lt_ops[i]);
		SERIALIZE(buf, t->key_collations[i]);
	}
	serialize_column(buf, &t->version);
	serialize_column(buf, &t->deleted);
	serialize_column(buf, &t->hash);
	for (int i = 0; i < t->npayload; i++)
		serialize_column(buf, &t->payload[i]);
}

static const char *
read_string(const char **p)
{
	const char *s = *p;

	*p += strlen(s) + 1;
	return s;
}

#define DESERIALIZE(p, field) (memcpy(&(field), (p), sizeof(field)), (p) += sizeof(field))

static void
deserialize_column(const char **p, TargetColumn *c)
{
	c->name = pstrdup(read_string(p));
	DESERIALIZE(*p, c->attnum);
	DESERIALIZE(*p, c->typid);
	DESERIALIZE(*p, c->typmod);
	DESERIALIZE(*p, c->collation);
	DESERIALIZE(*p, c->typlen);
	DESERIALIZE(*p, c->typbyval);
	column_type_io(c);
}

TargetInfo *
target_deserialize(const char *p)
{
	TargetInfo *t = palloc0(sizeof(TargetInfo));

	DESERIALIZE(p, t->relid);
	t->relname = pstrdup(read_string(&p));
	t->qualname = pstrdup(read_string(&p));
	DESERIALIZE(p, t->partitioned);
	DESERIALIZE(p, t->abort_on_conflict);
	DESERIALIZE(p, t->payload_names_objects);
	DESERIALIZE(p, t->key_index);
	DESERIALIZE(p, t->nkeys);
	DESERIALIZE(p, t->npayload);
	t->keys = palloc0(sizeof(TargetColumn) * Max(t->nkeys, 1));
	t->key_eq_ops = palloc(sizeof(Oid) * Max(t->nkeys, 1));
	t->key_eq_procs = palloc(sizeof(Oid) * Max(t->nkeys, 1));
	t->key_lt_ops = palloc(sizeof(Oid) * Max(t->nkeys, 1));
	t->key_collations = palloc(sizeof(Oid) * Max(t->nkeys, 1));
	for (int i = 0; i < t->nkeys; i++)
	{
		deserialize_column(&p, &t->keys[i]);
		DESERIALIZE(p, t->key_eq_ops[i]);
		DESERIALIZE(p, t->key_eq_procs[i]);
		DESERIALIZE(p, t->key_lt_ops[i]);
		DESERIALIZE(p, t->key_collations[i]);
	}
	deserialize_column(&p, &t->version);
	deserialize_column(&p, &t->deleted);
	deserialize_column(&p, &t->hash);
	t->payload = palloc0(sizeof(TargetColumn) * Max(t->npayload, 1));
	for (int i = 0; i < t->npayload; i++)
		deserialize_column(&p, &t->payload[i]);
	return t;
}

/*
 * A batch reads the target and writes it: the caller needs SELECT, INSERT
 * and UPDATE on it, and SELECT on the staged relation.  The extension never
 * lends its own rights.
 */
static void
check_batch_acl(Oid relid, TargetLockFor purpose)
{
	static const struct
	{
		AclMode		mode;
		const char *name;
	}			needed[] = {
		{ACL_SELECT, "SELECT"}, {ACL_INSERT, "INSERT"}, {ACL_UPDATE, "UPDATE"}
	};
	Oid			user = GetUserId();

	if (purpose == TARGET_LOCK_STAGED)
	{
		if (pg_class_aclcheck(relid, user, ACL_SELECT) != ACLCHECK_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied for relation %s", relation_display_name(relid)),
					 errdetail("reconcile_batch needs SELECT on the staged relation.")));
		return;
	}
	for (int i = 0; i < lengthof(needed); i++)
		if (pg_class_aclcheck(relid, user, needed[i].mode) != ACLCHECK_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied for table %s", relation_display_name(relid)),
					 errdetail("reconcile_batch needs SELECT, INSERT and UPDATE on the target; role \"%s\" lacks %s.",
							   GetUserNameFromId(user, false), needed[i].name)));
}

/*
 * The rights a batch needs, checked again once the target and the staged
 * relation are locked (target_lock checked them before it waited).
 */
void
target_check_batch_privileges(Oid target, Oid staged)
{
	check_batch_acl(target, TARGET_LOCK_BATCH);
	check_batch_acl(staged, TARGET_LOCK_STAGED);

	/* The merge probes the key index directly, which would bypass policies. */
	if (check_enable_rls(target, InvalidOid, true) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"%s\" has row-level security enabled for role \"%s\"",
						relation_display_name(target), GetUserNameFromId(GetUserId(), false)),
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
	keys = text_array_elems(PG_GETARG_ARRAYTYPE_P(1), "key_columns", INDEX_MAX_KEYS,
							psprintf("The key columns must be those of a unique index, which has at most %d.",
									 INDEX_MAX_KEYS), &nkeys);

	/* As a batch does: no registration changes while one runs. */
	target_lock(relid, ShareRowExclusiveLock, TARGET_LOCK_OWNER);
	/* Its state would outlive it: drop.c sees no drop at session end. */
	if (get_rel_persistence(relid) == RELPERSISTENCE_TEMP)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("table \"%s\" is temporary", get_rel_name(relid)),
				 errdetail("A target's receipts, rejects and cursors are kept beyond the session, and a temporary table is dropped at its end without notice."),
				 errhint("Register a permanent or unlogged table.")));
	if (!PG_ARGISNULL(6))
	{
		HeapTuple	reltup = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
		int			natts;

		if (!HeapTupleIsValid(reltup))
			elog(ERROR, "cache lookup failed for relation %u", relid);
		natts = ((Form_pg_class) GETSTRUCT(reltup))->relnatts;
		ReleaseSysCache(reltup);

		payload = text_array_elems(PG_GETARG_ARRAYTYPE_P(6), "payload_columns", natts,
								   psprintf("Table \"%s\" has %d columns.",
											relation_display_name(relid), natts),
								   &npayload);
	}

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
	target_lock(relid, ShareRowExclusiveLock, TARGET_LOCK_OWNER);

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

/* A version, as the batch carries it (int8), in the version column's type. */
Datum
version_datum(TargetInfo *t, int64 v)
{
	return t->version.typid == INT8OID ? Int64GetDatum(v) :
		t->version.typid == INT4OID ? Int32GetDatum((int32) v) : Int16GetDatum((int16) v);
}
