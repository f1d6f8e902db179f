/*
 * subxact.h
 *		Running a piece of work in a subtransaction and catching its error
 *		(subxact.c).
 */
#ifndef RECONCILE_SUBXACT_H
#define RECONCILE_SUBXACT_H

extern ErrorData *run_in_subtransaction(void (*fn) (void *), void *arg, bool keep);

#endif							/* RECONCILE_SUBXACT_H */
