/*
 * pinned.h
 *		Text forms that do not depend on the session (pinned.c): the
 *		settings every value reconcile hashes or stores as text is written
 *		and read under.
 */
#ifndef RECONCILE_PINNED_H
#define RECONCILE_PINNED_H

#include "fmgr.h"
#include "pgtime.h"
#include "utils/array.h"

typedef struct PinnedSettings
{
	int			date_style;
	int			date_order;
	int			interval_style;
	int			float_digits;
	int			bytea;
	pg_tz	   *tz;
	bool		search_path;	/* an override search path was pushed */
} PinnedSettings;

extern void pinned_settings_enter(PinnedSettings *saved, bool names_objects);
extern void pinned_settings_enter_values(PinnedSettings *saved,
										 const PinnedSettings *values);
extern void pinned_settings_leave(PinnedSettings *saved);
extern void pinned_settings_from_array(ArrayType *settings, PinnedSettings *out);
extern char *pinned_settings_sql(void);
extern char *pinned_output(FmgrInfo *out, Datum value, bool names_objects);
extern bool type_names_objects(Oid typid);

#endif							/* RECONCILE_PINNED_H */
