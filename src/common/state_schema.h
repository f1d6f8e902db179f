/*
 * state_schema.h
 *		The state tables described once: their columns, the schema version
 *		each came with, and the schema version installed (state_schema.c).
 */
#ifndef RECONCILE_STATE_SCHEMA_H
#define RECONCILE_STATE_SCHEMA_H

#include "common/state.h"

/*
 * The schema versions the library runs against, oldest first.  A column
 * added by an update script is added to its table's descriptor with the
 * version it came with (state_schema.c); a new version also names, in
 * version_markers, the column it adds to reconcile.conflicts.
 */
typedef enum StateVersion
{
	STATE_1_0,
	STATE_1_1,
	STATE_1_2
} StateVersion;

typedef struct StateColumn
{
	const char *name;
	Oid			type;			/* of the value set; the array's element type */
	const char *cast;			/* SQL type the value is cast to, or NULL */
	StateVersion since;			/* the schema version that added it */
} StateColumn;

typedef struct StateTable
{
	const char *name;			/* in schema reconcile */
	int			ncolumns;
	const StateColumn *columns;
} StateTable;

extern const StateTable state_conflicts;
extern const StateTable state_rejects;
extern const StateTable state_diff_results;
extern const StateTable state_check_results;
extern const StateTable state_receipts;

extern StateVersion state_version(void);

/* Rows buffered for one state table, their values set by column name. */
typedef struct StateRows StateRows;

extern StateRows *state_rows_create(const StateTable *table);
extern StateRows *state_row_create(const StateTable *table);
extern void state_row_insert(StateRows *rows);
extern bool state_rows_has(StateRows *rows, const char *column);
extern void state_row_set(StateRows *rows, const char *column, Datum value);
extern void state_row_set_text(StateRows *rows, const char *column,
							   const char *value);
extern void state_row_set_null(StateRows *rows, const char *column);
extern void state_row_add(StateRows *rows);
extern void state_rows_flush(StateRows *rows);

#endif							/* RECONCILE_STATE_SCHEMA_H */
