/*
 * receiver.c
 *		A DestReceiver that hands each row of a query straight to a callback.
 *
 * The staged rows of a batch, the rows a rules document is checked on and
 * the rows a profile is built from are all read this way: the executor
 * passes every slot to the callback, with none of the copying SPI's own
 * receiver does.
 */
#include "postgres.h"

#include "receiver.h"

static void
receiver_startup(DestReceiver *self, int operation, TupleDesc typeinfo)
{
}

static void
receiver_noop(DestReceiver *self)
{
}

/* Set up dest as a receiver that hands each slot to receive. */
void
receiver_init(DestReceiver *dest, bool (*receive) (TupleTableSlot *, DestReceiver *))
{
	dest->receiveSlot = receive;
	dest->rStartup = receiver_startup;
	dest->rShutdown = receiver_noop;
	dest->rDestroy = receiver_noop;
	dest->mydest = DestNone;
}
