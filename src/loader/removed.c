/*
 * removed.c
 *		delete_mode 'remove': hard deletes that keep their guard.
 *
 * Under delete_mode 'remove' a winning DELETE removes the key's row from
 * the target and keeps (key, version, payload hash) in the target's
 * companion table of kept removals, reconcile.removed_<target oid>: the
 * key columns in the target's own types and collations under a primary
 * key, the version column in its own type, the hash, and removed_at.  Where
 * the target holds no row of a key, the merge (merge.c) and a resolution
 * (resolve.c) probe the companion through its primary key, one index
 * lookup, and decide the key against the kept entry exactly as against a
 * tombstone row (decide.c): a lower version is stale, an equal one
 * unchanged or a conflict, a higher DELETE moves the entry up, and a
 * higher live row re-creates the row (DISP_INSERTED) and drops the entry,
 * since the row's own version guards the key from then on.  A key is in
 * the target or in the companion, never in both.
 *
 * The companion is owned by the state tables' owner, written here through
 * the executor while the target is locked (a batch, a resolution, a
 * registration, a purge), and depends on the target (DEPENDENCY_AUTO):
 * DROP TABLE takes it along, reconcile_unregister drops it.
 * reconcile.targets.removed_table names it (a regclass, so that pg_dump
 * restores the link by name).
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/dependency.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "executor/executor.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "common/args.h"
#include "common/citus.h"
#include "common/sqlname.h"
#include "common/state.h"
#include "common/state_schema.h"
#include "ordering.h"
#include "probe.h"
#include "removed.h"

PG_FUNCTION_INFO_V1(reconcile_purge_tombstones);

#define REMOVED_AT "removed_at"

struct Removed
{
	TargetInfo *t;
	TargetInfo	ct;				/* the companion, described for probe.c */
	Relation	rel;
	EState	   *estate;
	ResultRelInfo *rri;
	TupleTableSlot *slot;
	Probe	   *probe;
	Probe	   *latest;			/* REPEATABLE READ: as the merge's */
	TupleTableSlot *found;		/* the entry the last removed_find found */
};

/* The companion of a target, or InvalidOid (none, or a schema before 1.2). */
Oid
removed_table(Oid target)
{
	bool		isnull;
	Datum		d;

	if (state_version() < STATE_1_2)
		return InvalidOid;
	state_read_latest("SELECT removed_table FROM reconcile.targets"
					  " WHERE target OPERATOR(pg_catalog.=) $1", target, 1);
	if (SPI_processed == 0)
		return InvalidOid;
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull);
	return isnull ? InvalidOid : DatumGetObjectId(d);
}

static char *
companion_qualname(Oid relid)
{
	return quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
									  get_rel_name(relid));
}

/* Run a statement on the companion as the state tables' owner. */
static uint64
companion_execute(const char *sql, int nargs, Oid *types, Datum *values,
				  const char *nulls, int expect)
{
	StateUser	su;
	int			rc;

	state_user_enter(&su);
	rc = SPI_execute_with_args(sql, nargs, types, values, nulls, false, 0);
	state_user_leave(&su);
	if (rc != expect)
		elog(ERROR, "could not run \"%s\": %s", sql, SPI_result_code_string(rc));
	return SPI_processed;
}

static int64
companion_count(Oid crelid)
{
	bool		isnull;

	companion_execute(psprintf("SELECT pg_catalog.count(*) FROM %s", companion_qualname(crelid)),
					  0, NULL, NULL, NULL, SPI_OK_SELECT);
	return DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1, &isnull));
}

/*
 * Whether the companion still has the target's key and version columns,
 * in order and in the same types and collations (a re-registration or an
 * ALTER TABLE may have changed them).
 */
static bool
companion_matches(TargetInfo *t, Oid crelid)
{
	Relation	rel = table_open(crelid, AccessShareLock);
	TupleDesc	desc = RelationGetDescr(rel);
	bool		ok = desc->natts == t->nkeys + 3;

	for (int i = 0; ok && i < t->nkeys + 2; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		TargetColumn *c = i < t->nkeys ? &t->keys[i] : i == t->nkeys ? &t->version : &t->hash;

		ok = !att->attisdropped && strcmp(NameStr(att->attname), c->name) == 0 &&
			att->atttypid == c->typid &&
			(i >= t->nkeys || att->attcollation == t->key_collations[i]);
	}
	table_close(rel, AccessShareLock);
	return ok;
}

static void
companion_drop(Oid target, Oid crelid)
{
	Oid			types[1] = {REGCLASSOID};
	Datum		values[1] = {ObjectIdGetDatum(target)};

	companion_execute(psprintf("DROP TABLE %s", companion_qualname(crelid)),
					  0, NULL, NULL, NULL, SPI_OK_UTILITY);
	companion_execute("UPDATE reconcile.targets SET removed_table = NULL"
					  " WHERE target OPERATOR(pg_catalog.=) $1",
					  1, types, values, NULL, SPI_OK_UPDATE);
}

/* Refuse delete_mode 'remove' where it is not supported (yet). */
static void
check_remove_supported(TargetInfo *t)
{
	Relation	index;

	if (t->citus_kind != CITUS_NONE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("delete_mode \"remove\" is not supported for table \"%s\", which Citus manages",
						t->relname),
				 errdetail("Kept removals are held in a local table of the coordinator, which the merge on the workers cannot consult."),
				 errhint("Register the target with delete_mode \"tombstone\".")));
	if (t->nextra > 0)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("delete_mode \"remove\" is not supported for table \"%s\", which orders by several version columns",
						t->relname),
				 errdetail("A kept removal carries one version column; a target registered with version_columns is not supported under delete_mode \"remove\" yet."),
				 errhint("Register the target with delete_mode \"tombstone\", or with one version_column.")));
	if (state_version() < STATE_1_2)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("delete_mode \"remove\" needs the reconcile 1.2 schema"),
				 errdetail("The installed schema has no place for kept removals."),
				 errhint("Run ALTER EXTENSION reconcile UPDATE first.")));
	index = index_open(t->key_index, AccessShareLock);
	for (int i = 0; i < t->nkeys; i++)
	{
		Oid			opclass = GetDefaultOpClass(t->keys[i].typid, BTREE_AM_OID);

		if (!OidIsValid(opclass) || get_opclass_family(opclass) != index->rd_opfamily[i])
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("delete_mode \"remove\" is not supported for table \"%s\": its key index \"%s\" uses a non-default operator class for column \"%s\"",
							t->relname, RelationGetRelationName(index), t->keys[i].name),
					 errhint("Key the target with a unique index of the columns' default btree operator classes.")));
	}
	index_close(index, AccessShareLock);
	for (int i = 0; i < t->nkeys + 2; i++)
	{
		TargetColumn *c = i < t->nkeys ? &t->keys[i] : i == t->nkeys ? &t->version : &t->hash;

		if (strcmp(c->name, REMOVED_AT) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("delete_mode \"remove\" is not supported for table \"%s\": its column \"%s\" is named as the companion's removal time",
							t->relname, c->name),
					 errhint("Rename the column.")));
	}
}

/* Create the target's companion and name it in reconcile.targets. */
static Oid
companion_create(TargetInfo *t)
{
	StringInfoData sql;
	char	   *name = psprintf("removed_%u", t->relid);
	char	   *qual = quote_qualified_identifier("reconcile", name);
	Oid			crelid;
	ObjectAddress dep,
				ref;
	Oid			types[2] = {REGCLASSOID, REGCLASSOID};
	Datum		values[2];

	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TABLE %s (", qual);
	for (int i = 0; i < t->nkeys; i++)
	{
		appendStringInfo(&sql, "%s %s", quote_identifier(t->keys[i].name),
						 format_type_extended(t->keys[i].typid, t->keys[i].typmod,
											  FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY));
		if (OidIsValid(t->key_collations[i]))
			appendStringInfo(&sql, " COLLATE %s", generate_collation_name(t->key_collations[i]));
		appendStringInfoString(&sql, " NOT NULL, ");
	}
	appendStringInfo(&sql, "%s %s NOT NULL, %s %s, " REMOVED_AT " pg_catalog.timestamptz NOT NULL, PRIMARY KEY (",
					 quote_identifier(t->version.name),
					 format_type_extended(t->version.typid, t->version.typmod,
										  FORMAT_TYPE_TYPEMOD_GIVEN | FORMAT_TYPE_FORCE_QUALIFY),
					 quote_identifier(t->hash.name), format_type_be_qualified(t->hash.typid));
	for (int i = 0; i < t->nkeys; i++)
		appendStringInfo(&sql, "%s%s", i ? ", " : "", quote_identifier(t->keys[i].name));
	appendStringInfoString(&sql, "))");
	companion_execute(sql.data, 0, NULL, NULL, NULL, SPI_OK_UTILITY);
	companion_execute(psprintf("COMMENT ON TABLE %s IS %s", qual,
							   quote_literal_cstr(psprintf("Kept removals of table %s (delete_mode remove): the key, version and payload hash of each row a winning DELETE removed; forgotten by reconcile_purge_tombstones.",
														   t->qualname))),
					  0, NULL, NULL, NULL, SPI_OK_UTILITY);
	CommandCounterIncrement();
	crelid = get_relname_relid(name, get_namespace_oid("reconcile", false));
	if (!OidIsValid(crelid))
		elog(ERROR, "could not find %s", qual);

	/* DROP TABLE of the target takes its kept removals along. */
	ObjectAddressSet(dep, RelationRelationId, crelid);
	ObjectAddressSet(ref, RelationRelationId, t->relid);
	recordDependencyOn(&dep, &ref, DEPENDENCY_AUTO);

	values[0] = ObjectIdGetDatum(t->relid);
	values[1] = ObjectIdGetDatum(crelid);
	companion_execute("UPDATE reconcile.targets SET removed_table = $2"
					  " WHERE target OPERATOR(pg_catalog.=) $1",
					  2, types, values, NULL, SPI_OK_UPDATE);
	CommandCounterIncrement();
	return crelid;
}

static void companion_insert(Removed *r, Datum *keys, Datum version, Datum hash);

/*
 * The target's tombstone rows move to the companion: deleted with the
 * caller's rights (triggers on the target fire as for any DELETE), kept
 * through the executor.
 */
static int64
convert_tombstones(TargetInfo *t)
{
	StringInfoData sql;
	Removed    *r;
	uint64		n;
	SPITupleTable *tt;
	Datum	   *keys = palloc(sizeof(Datum) * t->nkeys);

	initStringInfo(&sql);
	appendStringInfo(&sql, "DELETE FROM %s AS t WHERE t.%s RETURNING ", t->qualname,
					 quote_identifier(t->deleted.name));
	for (int i = 0; i < t->nkeys; i++)
		appendStringInfo(&sql, "t.%s, ", quote_identifier(t->keys[i].name));
	appendStringInfo(&sql, "t.%s, t.%s", quote_identifier(t->version.name),
					 quote_identifier(t->hash.name));
	if (SPI_execute(sql.data, false, 0) != SPI_OK_DELETE_RETURNING)
		elog(ERROR, "could not delete the tombstone rows of %s", t->relname);
	n = SPI_processed;
	tt = SPI_tuptable;
	if (n == 0)
		return 0;
	CommandCounterIncrement();
	r = removed_open(t, GetLatestSnapshot(), NULL);
	for (uint64 row = 0; row < n; row++)
	{
		bool		isnull;
		Datum		version;
		Datum		hash;

		CHECK_FOR_INTERRUPTS();
		for (int i = 0; i < t->nkeys; i++)
			keys[i] = SPI_getbinval(tt->vals[row], tt->tupdesc, i + 1, &isnull);
		version = SPI_getbinval(tt->vals[row], tt->tupdesc, t->nkeys + 1, &isnull);
		if (isnull)
			ereport(ERROR,
					(errcode(ERRCODE_NOT_NULL_VIOLATION),
					 errmsg("a tombstone row of table \"%s\" has no version", t->relname),
					 errhint("Set the version of every row of the target.")));
		hash = SPI_getbinval(tt->vals[row], tt->tupdesc, t->nkeys + 2, &isnull);
		companion_insert(r, keys, version, isnull ? PointerGetDatum(NULL) : hash);
	}
	removed_close(r);
	return (int64) n;
}

/*
 * A registration's delete_mode, applied after reconcile.targets is written
 * (register.c; the target is locked by its owner).  'remove' creates the
 * companion where there is none (or an empty one no longer matches the
 * key) and moves the target's tombstone rows into it; 'tombstone' drops an
 * empty companion and refuses one that still keeps removals: they cannot
 * become rows again (their payloads are gone), and forgetting them must be
 * asked for by name (reconcile_purge_tombstones).
 */
void
removed_register(TargetInfo *t, bool remove)
{
	Oid			crelid = state_version() >= STATE_1_2 ? removed_table(t->relid) : InvalidOid;

	if (!remove)
	{
		int64		kept;

		if (!OidIsValid(crelid))
			return;
		kept = companion_count(crelid);
		if (kept > 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("table \"%s\" keeps " INT64_FORMAT " removed keys under delete_mode \"remove\"",
							t->relname, kept),
					 errdetail("Under delete_mode \"tombstone\" a removed key would have neither a row nor a kept removal, and a lower version could bring it back."),
					 errhint("Keep delete_mode \"remove\", or forget the kept removals first with reconcile_purge_tombstones('%s', older_than => '0'), which reopens those keys to any version.",
							 t->qualname)));
		companion_drop(t->relid, crelid);
		return;
	}

	check_remove_supported(t);
	if (OidIsValid(crelid) && !companion_matches(t, crelid))
	{
		int64		kept = companion_count(crelid);

		if (kept > 0)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("table \"%s\" keeps " INT64_FORMAT " removed keys under other key or version columns",
							t->relname, kept),
					 errdetail("The kept removals are keyed by the columns of the earlier registration."),
					 errhint("Register with the earlier key and version columns, or forget the kept removals first with reconcile_purge_tombstones('%s', older_than => '0').",
							 t->qualname)));
		companion_drop(t->relid, crelid);
		crelid = InvalidOid;
	}
	if (!OidIsValid(crelid))
		crelid = companion_create(t);
	{
		int64		moved = convert_tombstones(t);

		if (moved > 0)
			ereport(NOTICE,
					(errmsg("moved " INT64_FORMAT " tombstone rows of table \"%s\" to its kept removals",
							moved, t->relname)));
	}
}

/* reconcile_unregister: the kept removals go with the registration. */
void
removed_unregister(Oid target)
{
	Oid			crelid = removed_table(target);

	if (OidIsValid(crelid))
		companion_drop(target, crelid);
}

/*
 * Open the target's companion for probing under snapshot (and latest,
 * under REPEATABLE READ, as the merge's probes) and for writing.  The
 * caller holds the target's lock.
 */
Removed *
removed_open(TargetInfo *t, Snapshot snapshot, Snapshot latest)
{
	Removed    *r = palloc0(sizeof(Removed));
	Oid			crelid = removed_table(t->relid);
	RangeTblEntry *rte = makeNode(RangeTblEntry);
	List	   *indexes;

	if (!OidIsValid(crelid) || !companion_matches(t, crelid))
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("table \"%s\" has no kept removals that match its registration", t->relname),
				 errdetail("Under delete_mode \"remove\" its kept removals are in a table of schema reconcile named by reconcile.targets.removed_table, with the target's key and version columns."),
				 errhint("Register the target again (reconcile_register) to recreate or check them.")));
	r->t = t;
	r->rel = table_open(crelid, RowExclusiveLock);
	indexes = RelationGetIndexList(r->rel);
	if (list_length(indexes) != 1)
		elog(ERROR, "kept removals of \"%s\" have %d indexes", t->relname, list_length(indexes));
	/* The target's comparator, made in the target's context: ct is no chunk of its own. */
	(void) ordering_sortsupport(t);
	r->ct = *t;
	r->ct.relid = crelid;
	r->ct.relname = t->relname; /* messages name the target */
	r->ct.qualname = companion_qualname(crelid);
	r->ct.partitioned = false;
	r->ct.key_index = linitial_oid(indexes);

	r->estate = CreateExecutorState();
	rte->rtekind = RTE_RELATION;
	rte->relid = crelid;
	rte->relkind = RELKIND_RELATION;
	rte->rellockmode = RowExclusiveLock;
	ExecInitRangeTable(r->estate, list_make1(rte));
	r->rri = makeNode(ResultRelInfo);
	InitResultRelInfo(r->rri, r->rel, 1, NULL, 0);
	r->estate->es_output_cid = GetCurrentCommandId(true);
	r->estate->es_snapshot = GetActiveSnapshot();
	ExecOpenIndices(r->rri, false);
	r->slot = MakeSingleTupleTableSlot(CreateTupleDescCopy(RelationGetDescr(r->rel)),
									   &TTSOpsVirtual);
	r->probe = probe_open(&r->ct, snapshot, true);
	if (latest != NULL)
		r->latest = probe_open(&r->ct, latest, false);
	return r;
}

void
removed_close(Removed *r)
{
	probe_close(r->probe);
	if (r->latest)
		probe_close(r->latest);
	ExecDropSingleTupleTableSlot(r->slot);
	ExecCloseIndices(r->rri);
	ExecResetTupleTable(r->estate->es_tupleTable, false);
	FreeExecutorState(r->estate);
	table_close(r->rel, NoLock);
}

/*
 * The kept removal of a key, if any: its version and hash, as probe_find
 * gives a target row's.  A removal written after this transaction's
 * snapshot under REPEATABLE READ is a serialization failure.
 */
bool
removed_find(Removed *r, Datum *keys, Datum *version, bytea **hash)
{
	r->found = probe_find_current(r->probe, r->latest, &r->ct, keys, version, hash, true);
	return r->found != NULL;
}

static void
companion_fill(Removed *r, Datum *keys, Datum version, Datum hash)
{
	TupleTableSlot *slot = r->slot;
	int			n = r->t->nkeys;

	ExecClearTuple(slot);
	for (int i = 0; i < n; i++)
	{
		slot->tts_values[i] = keys[i];
		slot->tts_isnull[i] = false;
	}
	slot->tts_values[n] = version;
	slot->tts_isnull[n] = false;
	slot->tts_values[n + 1] = hash;
	slot->tts_isnull[n + 1] = DatumGetPointer(hash) == NULL;
	slot->tts_values[n + 2] = TimestampTzGetDatum(GetCurrentTransactionStartTimestamp());
	slot->tts_isnull[n + 2] = false;
	ExecStoreVirtualTuple(slot);
}

static void
companion_insert(Removed *r, Datum *keys, Datum version, Datum hash)
{
	ResetPerTupleExprContext(r->estate);
	companion_fill(r, keys, version, hash);
	simple_table_tuple_insert(r->rel, r->slot);
	list_free(ExecInsertIndexTuples(r->rri, r->slot, r->estate, false, false, NULL, NIL));
}

/* Move the entry removed_find found to a new version and hash. */
static void
companion_update(Removed *r, Datum *keys, Datum version, Datum hash)
{
	bool		update_indexes;

	ResetPerTupleExprContext(r->estate);
	companion_fill(r, keys, version, hash);
	simple_table_tuple_update(r->rel, &r->found->tts_tid, r->slot,
							  r->estate->es_snapshot, &update_indexes);
	if (update_indexes)
		list_free(ExecInsertIndexTuples(r->rri, r->slot, r->estate, true, false, NULL, NIL));
}

/*
 * Write a winner of a target under delete_mode 'remove', where the key's
 * row was found in the target (found, not found_removed), in the
 * companion (found_removed, by removed_find just before) or nowhere:
 *
 * - a DELETE removes the target's row and keeps the key, or moves its
 *   kept removal up;
 * - a live row over a kept removal re-creates the row and forgets the
 *   removal; over a row or nothing it is written as under 'tombstone'.
 */
void
removed_write(Removed *r, Writer *w, TupleTableSlot *found, bool found_removed,
			  Datum found_version, const Winner *winner)
{
	if (winner->tombstone)
	{
		if (found_removed)
			companion_update(r, winner->keys, winner->version, winner->hash);
		else
		{
			if (found != NULL)
				writer_remove(w, found, winner);
			companion_insert(r, winner->keys, winner->version, winner->hash);
		}
	}
	else if (found_removed)
	{
		simple_table_tuple_delete(r->rel, &r->found->tts_tid, r->estate->es_snapshot);
		writer_put(w, NULL, (Datum) 0, winner);
	}
	else
		writer_put(w, found, found_version, winner);
}

static void
purge_bound_context(void *arg)
{
	TargetInfo *t = arg;

	errcontext("before_version of reconcile_purge_tombstones, read as column \"%s\" of table \"%s\"",
			   t->version.name, t->relname);
}

/*
 * reconcile_purge_tombstones(target regclass, before_version text DEFAULT NULL,
 *                            older_than interval DEFAULT NULL) RETURNS bigint
 *		Forgets kept deletes of target: those below before_version (in the
 *		version column's type) and/or removed at least older_than ago ('0':
 *		all, this transaction's too).
 *		Under delete_mode 'remove' the kept removals; under 'tombstone' the
 *		tombstone rows of the target themselves (by version only: they
 *		carry no removal time), deleted with the caller's rights.  A key
 *		forgotten takes any version again, a lower one included.  The
 *		caller must own the target; it is locked as by a batch.
 */
Datum
reconcile_purge_tombstones(PG_FUNCTION_ARGS)
{
	Oid			relid;
	TargetInfo *t;
	bool		by_version = !PG_ARGISNULL(1);
	bool		by_age = !PG_ARGISNULL(2);
	StringInfoData sql;
	Oid			types[2] = {TEXTOID, INTERVALOID};
	Datum		values[2];
	char		nulls[2] = {by_version ? ' ' : 'n', by_age ? ' ' : 'n'};
	uint64		n;

	check_arg_not_null(fcinfo, 0, "target", "reconcile_purge_tombstones");
	relid = PG_GETARG_OID(0);
	if (!by_version && !by_age)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("reconcile_purge_tombstones needs before_version or older_than"),
				 errhint("Pass before_version => '100' to forget the deletes below version 100, or older_than => '30 days'; older_than => '0' forgets them all.")));
	PreventCommandIfReadOnly("reconcile_purge_tombstones()");

	/* As a batch locks: a purge and a batch of the target run one after the other. */
	target_lock(relid, ShareRowExclusiveLock, TARGET_LOCK_OWNER);
	SPI_connect();
	PushActiveSnapshot(GetTransactionSnapshot());
	t = target_load(relid);
	/* The bound in the version column's own type, compared with its own operator. */
	types[0] = t->version.typid;
	if (by_version)
	{
		ErrorContextCallback context;

		context.callback = purge_bound_context;
		context.arg = t;
		context.previous = error_context_stack;
		error_context_stack = &context;
		values[0] = InputFunctionCall(&t->version.in, text_to_cstring(PG_GETARG_TEXT_PP(1)),
									  t->version.ioparam, t->version.typmod);
		error_context_stack = context.previous;
	}
	values[1] = by_age ? PG_GETARG_DATUM(2) : (Datum) 0;
	initStringInfo(&sql);
	if (t->options.delete_remove)
	{
		Oid			crelid = removed_table(relid);

		if (!OidIsValid(crelid))
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("table \"%s\" has no kept removals", t->relname),
					 errhint("Register the target again (reconcile_register) to recreate them.")));
		appendStringInfo(&sql, "DELETE FROM %s AS r WHERE true", companion_qualname(crelid));
		if (by_version)
			appendStringInfo(&sql, " AND r.%s OPERATOR(pg_catalog.<) $1%s",
							 quote_identifier(t->version.name), ordering_collate_sql(t));
		if (by_age)
			appendStringInfoString(&sql, " AND r." REMOVED_AT " OPERATOR(pg_catalog.<=)"
								   " (pg_catalog.now() OPERATOR(pg_catalog.-) $2)");
		n = companion_execute(sql.data, 2, types, values, nulls, SPI_OK_DELETE);
	}
	else
	{
		if (by_age)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("table \"%s\" keeps its deletes as tombstone rows, which have no removal time",
							t->relname),
					 errdetail("older_than is for kept removals, under delete_mode \"remove\"."),
					 errhint("Purge the tombstone rows by version with before_version.")));
		appendStringInfo(&sql, "DELETE FROM %s AS t WHERE t.%s AND t.%s OPERATOR(pg_catalog.<) $1",
						 t->qualname, quote_identifier(t->deleted.name),
						 quote_identifier(t->version.name));
		if (SPI_execute_with_args(sql.data, 2, types, values, nulls, false, 0) != SPI_OK_DELETE)
			elog(ERROR, "could not delete the tombstone rows of %s", t->relname);
		n = SPI_processed;
	}
	PopActiveSnapshot();
	SPI_finish();
	PG_RETURN_INT64((int64) n);
}
