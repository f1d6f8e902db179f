/*
 * state.c
 *		Who reads and writes the extension's own tables (schema reconcile),
 *		and how.
 *
 * Functions run with the caller's rights; the state tables are written on
 * the caller's behalf by switching to their owner (the owner of schema
 * reconcile) for as short a stretch as possible, and only after the
 * caller's own rights on the target have been checked (target.c), as
 * pg_cron does with SetUserIdAndSecContext.  Rows for a state table are
 * buffered in arrays and inserted set-based with one
 * INSERT ... SELECT FROM unnest(...) per buffer-full.
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "catalog/namespace.h"
#include "catalog/pg_namespace.h"
#include "catalog/pg_type.h"
#include "executor/spi.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/builtins.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "state.h"

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

/* Become the state tables' owner; state_user_leave switches back. */
void
state_user_enter(StateUser *saved)
{
	GetUserIdAndSecContext(&saved->save_userid, &saved->save_sec_context);
	SetUserIdAndSecContext(state_owner(),
						   saved->save_sec_context | SECURITY_LOCAL_USERID_CHANGE);
}

/* Switch back to the user saved by state_user_enter. */
void
state_user_leave(StateUser *saved)
{
	SetUserIdAndSecContext(saved->save_userid, saved->save_sec_context);
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
	Oid			argtype = REGCLASSOID;
	Datum		arg = ObjectIdGetDatum(relid);

	state_query_latest(sql, 1, &argtype, &arg, tcount);
}

/* The same, with nargs parameters ($1 ...) of the given types, none NULL. */
void
state_query_latest(const char *sql, int nargs, Oid *argtypes, Datum *args, long tcount)
{
	StateUser	su;
	SPIPlanPtr	plan;

	state_user_enter(&su);
	plan = SPI_prepare(sql, nargs, argtypes);
	if (plan == NULL)
		elog(ERROR, "SPI_prepare failed: %s", SPI_result_code_string(SPI_result));
	if (SPI_execute_snapshot(plan, args, NULL, GetLatestSnapshot(), InvalidSnapshot,
							 true, false, tcount) != SPI_OK_SELECT)
		elog(ERROR, "could not read the reconcile state tables");
	SPI_freeplan(plan);
	state_user_leave(&su);
}

/*
 * Insert with a generic plan: its parameters stay parameters, passed by
 * reference, where a custom plan would copy each into a constant, and
 * detoast it (makeConst): a large manifest's arrays and compressed
 * documents would be copied whole, and decompressed.
 */
void
state_execute_generic(const char *sql, int nargs, Oid *types, Datum *args,
					  const char *nulls, const char *relname)
{
	SPIPlanPtr	plan = SPI_prepare_cursor(sql, nargs, types, CURSOR_OPT_GENERIC_PLAN);

	if (plan == NULL)
		elog(ERROR, "could not prepare an insert into %s: %s", relname,
			 SPI_result_code_string(SPI_result));
	if (SPI_execute_plan(plan, args, nulls, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not write %s", relname);
	SPI_freeplan(plan);
}

/*
 * A buffer is written out at this many rows or this many bytes of values,
 * whichever comes first: its memory stays bounded however wide the rows
 * (a conflict keeps both payloads) and however many the batch has.
 */
#define STATE_BUFFER_ROWS 10000
#define STATE_BUFFER_BYTES (256 * 1024)

struct StateBuffer
{
	const char *sql;
	int			ncolumns;
	Oid		   *types;
	Oid		   *array_types;
	int16	   *typlens;
	bool	   *typbyvals;
	MemoryContext cxt;
	ArrayBuildState **columns;
	int			nrows;
	Size		bytes;			/* of the values held */
};

static void
state_buffer_reset(StateBuffer *buf)
{
	MemoryContextReset(buf->cxt);
	buf->columns = MemoryContextAlloc(buf->cxt, sizeof(ArrayBuildState *) * buf->ncolumns);
	for (int i = 0; i < buf->ncolumns; i++)
		buf->columns[i] = initArrayResult(buf->types[i], buf->cxt, false);
	buf->nrows = 0;
	buf->bytes = 0;
}

/*
 * A buffer for one state table.  insert_sql takes one array parameter per
 * column, in order.
 */
StateBuffer *
state_buffer_create(const char *insert_sql, int ncolumns, const Oid *types)
{
	StateBuffer *buf = palloc0(sizeof(StateBuffer));

	buf->sql = insert_sql;
	buf->ncolumns = ncolumns;
	buf->types = palloc(sizeof(Oid) * ncolumns);
	buf->array_types = palloc(sizeof(Oid) * ncolumns);
	buf->typlens = palloc(sizeof(int16) * ncolumns);
	buf->typbyvals = palloc(sizeof(bool) * ncolumns);
	for (int i = 0; i < ncolumns; i++)
	{
		buf->types[i] = types[i];
		buf->array_types[i] = get_array_type(types[i]);
		get_typlenbyval(types[i], &buf->typlens[i], &buf->typbyvals[i]);
	}
	buf->cxt = AllocSetContextCreate(CurrentMemoryContext, "reconcile state buffer",
									 ALLOCSET_DEFAULT_SIZES);
	state_buffer_reset(buf);
	return buf;
}

/* Buffer one row for the state table; the caller flushes when it chooses. */
void
state_buffer_add(StateBuffer *buf, const Datum *values, const bool *isnull)
{
	for (int i = 0; i < buf->ncolumns; i++)
	{
		accumArrayResult(buf->columns[i], values[i], isnull[i], buf->types[i], buf->cxt);
		if (!isnull[i])
			buf->bytes += datumGetSize(values[i], buf->typbyvals[i], buf->typlens[i]);
	}
	if (++buf->nrows >= STATE_BUFFER_ROWS || buf->bytes >= STATE_BUFFER_BYTES)
		state_buffer_flush(buf);
}

/* Insert the buffered rows as the state tables' owner, then empty the buffer. */
void
state_buffer_flush(StateBuffer *buf)
{
	Datum	   *args;
	StateUser	su;

	if (buf->nrows == 0)
		return;
	/* The arrays live in the buffer's context, reset below: no leak per flush. */
	args = MemoryContextAlloc(buf->cxt, sizeof(Datum) * buf->ncolumns);
	for (int i = 0; i < buf->ncolumns; i++)
		args[i] = makeArrayResult(buf->columns[i], buf->cxt);
	state_user_enter(&su);
	if (SPI_execute_with_args(buf->sql, buf->ncolumns, buf->array_types, args,
							  NULL, false, 0) != SPI_OK_INSERT)
		elog(ERROR, "could not write reconcile state: %s", buf->sql);
	state_user_leave(&su);
	state_buffer_reset(buf);
}
