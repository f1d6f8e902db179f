/*
 * pinned.c
 *		The one way reconcile writes a value as text that it hashes, stores
 *		in a state table or reads back: under pinned settings, whatever the
 *		session says.
 *
 * Text forms are produced and read with DateStyle ISO (DateOrder YMD),
 * TimeZone UTC, IntervalStyle postgres, extra_float_digits 1 (the shortest
 * text that reads back as the same float) and bytea_output hex, and object
 * names (regclass and the other reg* types) with search_path pg_catalog, so
 * schema-qualified.  The payload hash, the held payloads and keys of
 * reconcile.conflicts (and so of reconcile.resolutions), the raw values of
 * reconcile.rejects and the keys and values of a diff's findings (and so of
 * reconcile.diff_results) all go through here: a value written in one
 * session reads back as the same value in any other.
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "utils/bytea.h"
#include "utils/datetime.h"
#include "utils/float.h"

#include "pinned.h"

/*
 * The settings are assigned directly and put back by the caller (in a
 * PG_FINALLY) rather than through set_config_option and a GUC nest level,
 * as postgres_fdw's set_transmission_modes does: this runs for every
 * staged row, and the GUC machinery's cost per call would show in a
 * batch's time.  Only output and input functions run in between, which
 * neither read the settings by name nor change them.
 */
void
pinned_settings_enter(PinnedSettings *saved, bool names_objects)
{
	static pg_tz *utc = NULL;

	if (utc == NULL)
		utc = pg_tzset("UTC");
	saved->date_style = DateStyle;
	saved->date_order = DateOrder;
	saved->interval_style = IntervalStyle;
	saved->float_digits = extra_float_digits;
	saved->bytea = bytea_output;
	saved->tz = session_timezone;
	saved->search_path = names_objects;
	DateStyle = USE_ISO_DATES;
	DateOrder = DATEORDER_YMD;
	IntervalStyle = INTSTYLE_POSTGRES;
	extra_float_digits = 1;
	bytea_output = BYTEA_OUTPUT_HEX;
	session_timezone = utc;
	if (names_objects)
	{
		OverrideSearchPath path = {NIL, true, false, 0};

		PushOverrideSearchPath(&path);
	}
}

/* Put back the settings pinned_settings_enter saved. */
void
pinned_settings_leave(PinnedSettings *saved)
{
	DateStyle = saved->date_style;
	DateOrder = saved->date_order;
	IntervalStyle = saved->interval_style;
	extra_float_digits = saved->float_digits;
	bytea_output = saved->bytea;
	session_timezone = saved->tz;
	if (saved->search_path)
		PopOverrideSearchPath();
}

/* One value's text form under the pinned settings. */
char *
pinned_output(FmgrInfo *out, Datum value, bool names_objects)
{
	PinnedSettings saved;
	char	   *volatile text = NULL;

	pinned_settings_enter(&saved, names_objects);
	PG_TRY();
	{
		text = OutputFunctionCall(out, value);
	}
	PG_FINALLY();
	{
		pinned_settings_leave(&saved);
	}
	PG_END_TRY();
	return text;
}

/* Whether a type's text form names an object, and so depends on search_path. */
bool
type_names_objects(Oid typid)
{
	switch (typid)
	{
		case REGCLASSOID:
		case REGTYPEOID:
		case REGPROCOID:
		case REGPROCEDUREOID:
		case REGOPEROID:
		case REGOPERATOROID:
		case REGCONFIGOID:
		case REGDICTIONARYOID:
		case REGNAMESPACEOID:
		case REGROLEOID:
		case REGCOLLATIONOID:
			return true;
		default:
			return false;
	}
}
