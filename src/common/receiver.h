/*
 * receiver.h
 *		A DestReceiver shell for rows a query hands to a callback
 *		(receiver.c).
 */
#ifndef RECONCILE_RECEIVER_H
#define RECONCILE_RECEIVER_H

#include "tcop/dest.h"

extern void receiver_init(DestReceiver *dest,
						  bool (*receive) (TupleTableSlot *, DestReceiver *));

#endif							/* RECONCILE_RECEIVER_H */
