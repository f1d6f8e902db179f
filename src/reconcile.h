/*
 * reconcile.h
 *		Declarations shared by the reconcile extension's C files.
 */
#ifndef RECONCILE_H
#define RECONCILE_H

#endif
