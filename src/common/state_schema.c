/*
 * state_schema.c
 *		The state tables described once, and the schema version installed.
 *
 * The library of one version also runs against a database whose schema is
 * still an older one until ALTER EXTENSION reconcile UPDATE (the upgrade
 * tests load batches so), and writes a column only where the installed
 * schema has it.  Each state table written set-based is described here
 * once, every column with the schema version that added it; a buffer for
 * it (state_rows_create) inserts exactly the columns of the installed
 * version, and its writers set values by column name, a column the
 * installed schema lacks being left out.
 *
 * The installed version is decided once per backend, as pg_stat_statements
 * decides its own once, from the column each version added to
 * reconcile.conflicts; every update script adds one there.  It is decided
 * again after an invalidation of that table's relcache entry, which every
 * ALTER TABLE of it sends (an update, in this session or another, or its
 * rollback), and after a general invalidation (DROP and CREATE EXTENSION
 * included).
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "lib/stringinfo.h"
#include "utils/builtins.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"

#include "state_schema.h"

#define COLUMNS(c) (sizeof(c) / sizeof((c)[0])), (c)

static const StateColumn conflicts_columns[] = {
	{"batch_id", TEXTOID, NULL, STATE_1_0},
	{"target", REGCLASSOID, NULL, STATE_1_0},
	{"key", JSONBOID, NULL, STATE_1_0},
	{"version", INT8OID, NULL, STATE_1_0},
	{"object_key", TEXTOID, NULL, STATE_1_0},
	{"source_row", INT8OID, NULL, STATE_1_0},
	{"staged_hash", BYTEAOID, NULL, STATE_1_0},
	{"existing_hash", BYTEAOID, NULL, STATE_1_0},
	{"version_id", TEXTOID, NULL, STATE_1_1},
	{"deleted", BOOLOID, NULL, STATE_1_1},
	{"staged_payload", JSONBOID, NULL, STATE_1_1},
	{"existing_payload", JSONBOID, NULL, STATE_1_1},
	{"ordering", TEXTOID, NULL, STATE_1_2},	/* the version's pinned text form, any type */
	/* key_pinned (1.2) is left to its default: true for a row written now */
	{"present_columns", TEXTOID, "pg_catalog.text[]", STATE_1_2},	/* text form */
	{"merged_over", BYTEAOID, NULL, STATE_1_2},
};
const StateTable state_conflicts = {"conflicts", COLUMNS(conflicts_columns)};

static const StateColumn rejects_columns[] = {
	{"batch_id", TEXTOID, NULL, STATE_1_0},
	{"target", REGCLASSOID, NULL, STATE_1_0},
	{"object_key", TEXTOID, NULL, STATE_1_0},
	{"source_row", INT8OID, NULL, STATE_1_0},
	{"column_name", TEXTOID, NULL, STATE_1_0},
	{"raw_value", TEXTOID, NULL, STATE_1_0},
	{"reason", TEXTOID, NULL, STATE_1_0},
	{"version_id", TEXTOID, NULL, STATE_1_1},
};
const StateTable state_rejects = {"rejects", COLUMNS(rejects_columns)};

/* columns (text[]) travels as its text form: arrays of arrays are 2-D. */
static const StateColumn diff_results_columns[] = {
	{"run_id", INT8OID, NULL, STATE_1_0},
	{"source", REGCLASSOID, NULL, STATE_1_0},
	{"target", REGCLASSOID, NULL, STATE_1_0},
	{"issue", TEXTOID, NULL, STATE_1_0},
	{"key", JSONBOID, NULL, STATE_1_0},
	{"columns", TEXTOID, "pg_catalog.text[]", STATE_1_0},
	{"source_values", JSONBOID, NULL, STATE_1_0},
	{"target_values", JSONBOID, NULL, STATE_1_0},
	{"rechecks", INT4OID, NULL, STATE_1_2},
};
const StateTable state_diff_results = {"diff_results", COLUMNS(diff_results_columns)};

static const StateColumn check_results_columns[] = {
	{"run_id", INT8OID, NULL, STATE_1_2},
	{"relation", REGCLASSOID, NULL, STATE_1_2},
	{"rule", TEXTOID, NULL, STATE_1_2},
	{"severity", TEXTOID, NULL, STATE_1_2},
	{"status", TEXTOID, NULL, STATE_1_2},
	{"invalid_rows", INT8OID, NULL, STATE_1_2},
	{"total_rows", INT8OID, NULL, STATE_1_2},
	{"invalid_share", FLOAT8OID, NULL, STATE_1_2},
	{"threshold", JSONBOID, NULL, STATE_1_2},
	{"gate_breach", BOOLOID, NULL, STATE_1_2},
	{"sample", JSONBOID, NULL, STATE_1_2},
	{"detail", TEXTOID, NULL, STATE_1_2},
	{"error", TEXTOID, NULL, STATE_1_2},
	{"sqlstate", TEXTOID, NULL, STATE_1_2},
	{"observed", FLOAT8OID, NULL, STATE_1_2},
	{"history_mean", FLOAT8OID, NULL, STATE_1_2},
	{"history_stddev", FLOAT8OID, NULL, STATE_1_2},
	{"history_runs", INT4OID, NULL, STATE_1_2},
};
const StateTable state_check_results = {"check_results", COLUMNS(check_results_columns)};

/* committed_by (name) is set as text. */
static const StateColumn receipts_columns[] = {
	{"batch_id", TEXTOID, NULL, STATE_1_0},
	{"target", REGCLASSOID, NULL, STATE_1_0},
	{"source", TEXTOID, NULL, STATE_1_0},
	{"cursor", TEXTOID, NULL, STATE_1_0},
	{"manifest", JSONBOID, NULL, STATE_1_0},
	{"staged_rows", INT8OID, NULL, STATE_1_0},
	{"inserted", INT8OID, NULL, STATE_1_0},
	{"updated", INT8OID, NULL, STATE_1_0},
	{"deleted", INT8OID, NULL, STATE_1_0},
	{"unchanged", INT8OID, NULL, STATE_1_0},
	{"stale", INT8OID, NULL, STATE_1_0},
	{"duplicates", INT8OID, NULL, STATE_1_0},
	{"conflicts", INT8OID, NULL, STATE_1_0},
	{"rejected", INT8OID, NULL, STATE_1_0},
	{"checksum", TEXTOID, NULL, STATE_1_0},
	{"objects", JSONBOID, NULL, STATE_1_0},
	{"committed_at", TIMESTAMPTZOID, NULL, STATE_1_0},
	{"committed_by", TEXTOID, NULL, STATE_1_0},
	{"warnings", JSONBOID, NULL, STATE_1_0},
	{"deleted_absent", INT8OID, NULL, STATE_1_2},
};
const StateTable state_receipts = {"receipts", COLUMNS(receipts_columns)};

/* The column of reconcile.conflicts each version after 1.0 added. */
static const char *const version_markers[] = {
	[STATE_1_1] = "staged_payload",
	[STATE_1_2] = "key_pinned",
};

static bool version_known = false;
static StateVersion installed_version;
static Oid	marker_relid = InvalidOid;

static void
state_version_invalidate(Datum arg, Oid relid)
{
	if (!OidIsValid(relid) || relid == marker_relid)
		version_known = false;
}

/* The schema version installed in this database. */
StateVersion
state_version(void)
{
	static bool registered = false;

	if (!registered)
	{
		CacheRegisterRelcacheCallback(state_version_invalidate, (Datum) 0);
		registered = true;
	}
	if (!version_known)
	{
		Oid			relid = get_relname_relid("conflicts",
											  get_namespace_oid("reconcile", false));

		if (!OidIsValid(relid))
			elog(ERROR, "reconcile.conflicts is missing");
		installed_version = STATE_1_0;
		for (int v = STATE_1_1; v <= STATE_1_2; v++)
			if (get_attnum(relid, version_markers[v]) > 0)
				installed_version = v;
		marker_relid = relid;
		version_known = true;
	}
	return installed_version;
}

struct StateRows
{
	const StateTable *table;
	int		   *slot;			/* per column: its place in the insert, or -1 */
	int			nslots;
	Datum	   *values;
	bool	   *isnull;
	StateBuffer *buf;			/* buffered rows; NULL for one row */
	Oid		   *types;			/* one row: its parameters' */
	const char *sql;			/* one row: its INSERT ... VALUES */
};

/*
 * Rows for one state table, inserting the columns the installed schema
 * has, one parameter each ($1 ...), with the column list into sql; every
 * value starts NULL.
 */
static StateRows *
state_rows_begin(const StateTable *table, StringInfo sql)
{
	StateRows  *rows = palloc0(sizeof(StateRows));
	StateVersion version = state_version();

	rows->table = table;
	rows->slot = palloc(sizeof(int) * table->ncolumns);
	rows->types = palloc(sizeof(Oid) * table->ncolumns);
	initStringInfo(sql);
	appendStringInfo(sql, "INSERT INTO reconcile.%s (", table->name);
	for (int i = 0; i < table->ncolumns; i++)
	{
		const StateColumn *c = &table->columns[i];

		if (c->since > version)
		{
			rows->slot[i] = -1;
			continue;
		}
		rows->slot[i] = rows->nslots;
		rows->types[rows->nslots] = c->type;
		appendStringInfo(sql, "%s%s", rows->nslots ? ", " : "", quote_identifier(c->name));
		rows->nslots++;
	}
	appendStringInfoChar(sql, ')');
	rows->values = palloc0(sizeof(Datum) * rows->nslots);
	rows->isnull = palloc(sizeof(bool) * rows->nslots);
	memset(rows->isnull, true, sizeof(bool) * rows->nslots);
	return rows;
}

/* A buffer for one state table: its rows inserted set-based, unnest(array) per column. */
StateRows *
state_rows_create(const StateTable *table)
{
	StringInfoData sql;
	StateRows  *rows = state_rows_begin(table, &sql);

	appendStringInfoString(&sql, " SELECT ");
	for (int n = 0; n < rows->nslots; n++)
	{
		const char *cast = NULL;

		for (int i = 0; i < table->ncolumns; i++)
			if (rows->slot[i] == n)
				cast = table->columns[i].cast;
		appendStringInfo(&sql, "%sx.c%d%s%s", n ? ", " : "", n + 1,
						 cast ? "::" : "", cast ? cast : "");
	}
	appendStringInfoString(&sql, " FROM ROWS FROM (");
	for (int n = 0; n < rows->nslots; n++)
		appendStringInfo(&sql, "%spg_catalog.unnest($%d)", n ? ", " : "", n + 1);
	appendStringInfoString(&sql, ") AS x(");
	for (int n = 0; n < rows->nslots; n++)
		appendStringInfo(&sql, "%sc%d", n ? ", " : "", n + 1);
	appendStringInfoChar(&sql, ')');
	rows->buf = state_buffer_create(sql.data, rows->nslots, rows->types);
	return rows;
}

/*
 * One row for a state table, inserted by state_row_insert with a generic
 * plan (state.c: state_execute_generic).
 */
StateRows *
state_row_create(const StateTable *table)
{
	StringInfoData sql;
	StateRows  *rows = state_rows_begin(table, &sql);

	appendStringInfoString(&sql, " VALUES (");
	for (int n = 0; n < rows->nslots; n++)
		appendStringInfo(&sql, "%s$%d", n ? ", " : "", n + 1);
	appendStringInfoChar(&sql, ')');
	rows->sql = sql.data;
	return rows;
}

/* Insert the one row built; the caller is the state tables' owner (state.c). */
void
state_row_insert(StateRows *rows)
{
	char	   *nulls = palloc(rows->nslots + 1);

	Assert(rows->buf == NULL);
	for (int n = 0; n < rows->nslots; n++)
		nulls[n] = rows->isnull[n] ? 'n' : ' ';
	nulls[rows->nslots] = '\0';
	state_execute_generic(rows->sql, rows->nslots, rows->types, rows->values, nulls,
						  psprintf("reconcile.%s", rows->table->name));
}

/* The column's place in the insert, -1 where the installed schema lacks it. */
static int
state_rows_slot(StateRows *rows, const char *column)
{
	for (int i = 0; i < rows->table->ncolumns; i++)
		if (strcmp(rows->table->columns[i].name, column) == 0)
			return rows->slot[i];
	elog(ERROR, "reconcile.%s has no column \"%s\"", rows->table->name, column);
	return -1;					/* keep compiler quiet */
}

/* Whether the installed schema's table has the column. */
bool
state_rows_has(StateRows *rows, const char *column)
{
	return state_rows_slot(rows, column) >= 0;
}

/* Set a column of the row being built; ignored where the schema lacks it. */
void
state_row_set(StateRows *rows, const char *column, Datum value)
{
	int			n = state_rows_slot(rows, column);

	if (n < 0)
		return;
	rows->values[n] = value;
	rows->isnull[n] = false;
}

/* Set a text column from a C string, NULL for NULL. */
void
state_row_set_text(StateRows *rows, const char *column, const char *value)
{
	if (value != NULL)
		state_row_set(rows, column, CStringGetTextDatum(value));
	else
		state_row_set_null(rows, column);
}

void
state_row_set_null(StateRows *rows, const char *column)
{
	int			n = state_rows_slot(rows, column);

	if (n >= 0)
		rows->isnull[n] = true;
}

/* Buffer the row built and start the next, every value NULL again. */
void
state_row_add(StateRows *rows)
{
	state_buffer_add(rows->buf, rows->values, rows->isnull);
	memset(rows->isnull, true, sizeof(bool) * rows->nslots);
}

void
state_rows_flush(StateRows *rows)
{
	state_buffer_flush(rows->buf);
}
