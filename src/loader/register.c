/*
 * register.c
 *		reconcile_register and reconcile_unregister: the SQL entry points that
 *		write a target's registration (target.c resolves and checks it) and,
 *		for a hash-distributed target, create its work table for merging on
 *		the Citus workers (citus_merge.c).
 */
#include "postgres.h"

#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/jsonb.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"

#include "citus_merge.h"
#include "common/args.h"
#include "common/sqlname.h"
#include "common/state_schema.h"
#include "removed.h"
#include "target.h"

PG_FUNCTION_INFO_V1(reconcile_register);
PG_FUNCTION_INFO_V1(reconcile_unregister);

/*
 * reconcile_register(target regclass, key_columns text[], version_column text,
 *                    deleted_column text, hash_column text,
 *                    conflict_policy text DEFAULT 'quarantine',
 *                    payload_columns text[] DEFAULT NULL,
 *                    options jsonb DEFAULT NULL,
 *                    version_columns text[] DEFAULT NULL) RETURNS void
 *		Registers target for reconcile_batch: its key, version, tombstone and
 *		hash columns, its conflict policy and its load options (options.c).
 *		Called through 1.0's definition it has no options argument, through
 *		1.1's no version_columns.
 */
/*
 * The ordering columns: version_column, or the elements of version_columns
 * (1.2), compared in order.  Exactly one of the two is given.  Returns the
 * names, *n of them.
 */
static char **
register_version_columns(FunctionCallInfo fcinfo, int *n)
{
	bool		has_column = !PG_ARGISNULL(2);
	bool		has_columns = PG_NARGS() > 8 && !PG_ARGISNULL(8);
	char	  **names;

	if (has_column && has_columns)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("reconcile_register takes version_column or version_columns, not both"),
				 errhint("Pass version_column => 'name' for one ordering column, version_columns => '{a,b}' for several.")));
	if (has_column)
	{
		names = palloc(sizeof(char *));
		names[0] = text_to_cstring(PG_GETARG_TEXT_PP(2));
		*n = 1;
		return names;
	}
	if (!has_columns)
		ereport(ERROR,
				(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
				 errmsg("reconcile_register needs version_column or version_columns"),
				 errdetail("A target orders the rows of a key by its version column, or by several compared in order."),
				 errhint("Pass version_column => 'name', or version_columns => '{a,b}'.")));
	names = target_text_array(PG_GETARG_ARRAYTYPE_P(8), "version_columns", INDEX_MAX_KEYS,
							  psprintf("An ordering has at most %d columns.", INDEX_MAX_KEYS), n);
	if (*n == 0)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("version_columns must name at least one column")));
	return names;
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
	Datum		values[8];
	char		nulls[8] = "       n";
	Oid			types[8] = {REGCLASSOID, TEXTARRAYOID, TEXTOID, TEXTOID, TEXTOID,
	TEXTARRAYOID, TEXTOID, JSONBOID};
	ArrayBuildState *astate;
	bool		has_options = PG_NARGS() > 7 && !PG_ARGISNULL(7);
	LoadOptions scratch;
	char	   *version;
	char	  **versions;
	int			nversions;

	check_arg_not_null(fcinfo, 0, "target", "reconcile_register");
	check_arg_not_null(fcinfo, 1, "key_columns", "reconcile_register");
	check_arg_not_null(fcinfo, 3, "deleted_column", "reconcile_register");
	check_arg_not_null(fcinfo, 4, "hash_column", "reconcile_register");
	check_arg_not_null(fcinfo, 5, "conflict_policy", "reconcile_register");

	relid = PG_GETARG_OID(0);
	versions = register_version_columns(fcinfo, &nversions);
	version = versions[0];
	keys = target_text_array(PG_GETARG_ARRAYTYPE_P(1), "key_columns", INDEX_MAX_KEYS,
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

		payload = target_text_array(PG_GETARG_ARRAYTYPE_P(6), "payload_columns", natts,
								   psprintf("Table \"%s\" has %d columns.",
											relation_display_name(relid), natts),
								   &npayload);
	}

	t = target_resolve(relid, keys, nkeys, version, versions + 1, nversions - 1,
					   text_to_cstring(PG_GETARG_TEXT_PP(3)),
					   text_to_cstring(PG_GETARG_TEXT_PP(4)),
					   payload, npayload,
					   text_to_cstring(PG_GETARG_TEXT_PP(5)));
	if (!t->version_integer && state_version() < STATE_1_2)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 nversions > 1 ?
				 errmsg("table \"%s\" orders by %d version columns, which needs the reconcile 1.2 schema",
						t->relname, nversions) :
				 errmsg("version column \"%s\" of table \"%s\" is of type %s, which needs the reconcile 1.2 schema",
						version, t->relname, format_type_be(t->version.typid)),
				 errdetail("The installed schema holds the versions of conflicting rows as bigint."),
				 errhint("Run ALTER EXTENSION reconcile UPDATE, or use a smallint, integer or bigint version column.")));
	load_options_init(&scratch);
	if (has_options)
	{
		/* Checked now, so that no batch finds a bad registration. */
		load_options_apply(&scratch, PG_GETARG_JSONB_P(7), "reconcile_register");
		values[7] = PG_GETARG_DATUM(7);
		nulls[7] = ' ';
	}

	values[0] = ObjectIdGetDatum(relid);
	values[1] = PG_GETARG_DATUM(1);
	values[2] = CStringGetTextDatum(version);
	values[3] = PG_GETARG_DATUM(3);
	values[4] = PG_GETARG_DATUM(4);
	astate = initArrayResult(TEXTOID, CurrentMemoryContext, false);
	for (int i = 0; i < t->npayload; i++)
		astate = accumArrayResult(astate, CStringGetTextDatum(t->payload[i].name),
								  false, TEXTOID, CurrentMemoryContext);
	values[5] = makeArrayResult(astate, CurrentMemoryContext);
	values[6] = PG_GETARG_DATUM(5);

	SPI_connect();
	if (state_version() >= STATE_1_1)
	{
		state_user_enter(&su);
		if (SPI_execute_with_args("INSERT INTO reconcile.targets AS t (target, key_columns,"
								  " version_column, deleted_column, hash_column,"
								  " payload_columns, conflict_policy, options, registered_by)"
								  " VALUES ($1, $2, $3, $4, $5, $6, $7, $8, SESSION_USER)"
								  " ON CONFLICT (target) DO UPDATE SET"
								  " key_columns = excluded.key_columns,"
								  " version_column = excluded.version_column,"
								  " deleted_column = excluded.deleted_column,"
								  " hash_column = excluded.hash_column,"
								  " payload_columns = excluded.payload_columns,"
								  " conflict_policy = excluded.conflict_policy,"
								  " options = excluded.options,"
								  " registered_by = excluded.registered_by,"
								  " registered_at = pg_catalog.now()",
								  8, types, values, nulls, false, 0) != SPI_OK_INSERT)
			elog(ERROR, "could not write reconcile.targets");
	}
	else
	{
		/*
		 * The schema of 1.0 (state_schema.c: state_version), whose definition of
		 * reconcile_register has no options argument.
		 */
		Assert(!has_options);
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
	}
	if (state_version() >= STATE_1_2)
	{
		/* Several ordering columns: all of them, version_column being the first. */
		Oid			vtypes[2] = {REGCLASSOID, TEXTARRAYOID};
		Datum		vvalues[2];
		char		vnulls[2] = "  ";

		vvalues[0] = ObjectIdGetDatum(relid);
		if (nversions > 1)
			vvalues[1] = PG_GETARG_DATUM(8);
		else
			vnulls[1] = 'n';
		if (SPI_execute_with_args("UPDATE reconcile.targets SET version_columns = $2"
								  " WHERE target OPERATOR(pg_catalog.=) $1",
								  2, vtypes, vvalues, vnulls, false, 0) != SPI_OK_UPDATE)
			elog(ERROR, "could not write reconcile.targets");
	}
	state_user_leave(&su);
	/* delete_mode: the kept removals created, converted or dropped (removed.c). */
	removed_register(t, scratch.delete_remove);
	/* A hash-distributed target's work table for merging on the workers. */
	citus_merge_create_work(t);
	SPI_finish();
	PG_RETURN_VOID();
}

/*
 * reconcile_unregister(target regclass) RETURNS void
 *		Removes target's registration.
 */
Datum
reconcile_unregister(PG_FUNCTION_ARGS)
{
	Oid			relid;
	StateUser	su;
	Oid			type = REGCLASSOID;
	Datum		value;

	check_arg_not_null(fcinfo, 0, "target", "reconcile_unregister");
	relid = PG_GETARG_OID(0);
	target_lock(relid, ShareRowExclusiveLock, TARGET_LOCK_OWNER);

	value = ObjectIdGetDatum(relid);
	SPI_connect();
	removed_unregister(relid);	/* the kept removals go with the registration */
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

