/*
 * state.h
 *		Reading and writing the extension's own tables as their owner
 *		(state.c).
 */
#ifndef RECONCILE_STATE_H
#define RECONCILE_STATE_H

#include "utils/relcache.h"

typedef struct StateUser
{
	Oid			save_userid;
	int			save_sec_context;
} StateUser;

extern void state_user_enter(StateUser *saved);
extern void state_user_leave(StateUser *saved);
extern void state_read_latest(const char *sql, Oid relid, long tcount);
extern void state_execute_generic(const char *sql, int nargs, Oid *types,
								  Datum *args, const char *nulls,
								  const char *relname);
extern void state_query_latest(const char *sql, int nargs, Oid *argtypes,
							   Datum *args, long tcount);

/* Buffers rows for one of the state tables and inserts them set-based. */
typedef struct StateBuffer StateBuffer;

extern StateBuffer *state_buffer_create(const char *insert_sql, int ncolumns,
										const Oid *types);
extern void state_buffer_add(StateBuffer *buf, const Datum *values,
							 const bool *isnull);
extern void state_buffer_flush(StateBuffer *buf);

#endif							/* RECONCILE_STATE_H */
