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
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/bytea.h"
#include "utils/datetime.h"
#include "utils/float.h"
#include "utils/fmgroids.h"
#include "utils/guc.h"

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
	static PinnedSettings canonical;
	static bool ready = false;

	if (!ready)
	{
		canonical.date_style = USE_ISO_DATES;
		canonical.date_order = DATEORDER_YMD;
		canonical.interval_style = INTSTYLE_POSTGRES;
		canonical.float_digits = 1;
		canonical.bytea = BYTEA_OUTPUT_HEX;
		canonical.tz = pg_tzset("UTC");
		ready = true;
	}
	pinned_settings_enter_values(saved, &canonical);
	saved->search_path = names_objects;
	if (names_objects)
	{
		OverrideSearchPath path = {NIL, true, false, 0};

		PushOverrideSearchPath(&path);
	}
}

/* The globals the settings stand at now (search_path is not pushed). */
static void
pinned_settings_read(PinnedSettings *out)
{
	out->date_style = DateStyle;
	out->date_order = DateOrder;
	out->interval_style = IntervalStyle;
	out->float_digits = extra_float_digits;
	out->bytea = bytea_output;
	out->tz = session_timezone;
	out->search_path = false;
}

/* Assign the globals the settings stand for (search_path aside). */
static void
pinned_settings_assign(const PinnedSettings *values)
{
	DateStyle = values->date_style;
	DateOrder = values->date_order;
	IntervalStyle = values->interval_style;
	extra_float_digits = values->float_digits;
	bytea_output = values->bytea;
	session_timezone = values->tz;
}

/*
 * Save the settings into saved and assign the ones values holds (from
 * pinned_settings_from_array, say), the same way and for the same reason
 * as pinned_settings_enter; search_path is left as it is.  Put back with
 * pinned_settings_leave.
 */
void
pinned_settings_enter_values(PinnedSettings *saved, const PinnedSettings *values)
{
	pinned_settings_read(saved);
	pinned_settings_assign(values);
}

/*
 * The settings a text form depends on, by name, in the order of the text[]
 * pinned_settings_sql writes and pinned_settings_from_array reads: how the
 * Citus casts (loader/citus_merge.c) carry the caller's session settings
 * to the workers.
 */
#define NSETTINGS 5
static const char *const setting_names[NSETTINGS] = {
	"DateStyle", "IntervalStyle", "TimeZone", "extra_float_digits", "bytea_output"
};

/*
 * The globals a settings array (as pinned_settings_sql wrote it) stands
 * for: computed once per query through the GUC machinery, rolled back at
 * once, so that each row then only assigns them.
 */
void
pinned_settings_from_array(ArrayType *settings, PinnedSettings *out)
{
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int			nest;
	PinnedSettings saved;

	deconstruct_array(settings, TEXTOID, -1, false, TYPALIGN_INT, &elems, &nulls, &n);
	if (n != NSETTINGS)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("settings of a reconcile cast must have %d elements, not %d", NSETTINGS, n)));
	pinned_settings_read(&saved);
	nest = NewGUCNestLevel();
	for (int i = 0; i < NSETTINGS; i++)
	{
		if (nulls[i])
			ereport(ERROR,
					(errcode(ERRCODE_NULL_VALUE_NOT_ALLOWED),
					 errmsg("setting %s of a reconcile cast is null", setting_names[i])));
		(void) set_config_option(setting_names[i], TextDatumGetCString(elems[i]),
								 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE, true, 0, false);
	}
	pinned_settings_read(out);
	AtEOXact_GUC(false, nest);
	pinned_settings_leave(&saved);
}

/* The caller's settings as a constant text[] of SQL. */
char *
pinned_settings_sql(void)
{
	Datum		elems[NSETTINGS];
	ArrayType  *a;

	for (int i = 0; i < NSETTINGS; i++)
		elems[i] = CStringGetTextDatum(GetConfigOption(setting_names[i], false, false));
	a = construct_array(elems, NSETTINGS, TEXTOID, -1, false, TYPALIGN_INT);
	return psprintf("%s::pg_catalog.text[]",
					quote_literal_cstr(OidOutputFunctionCall(F_ARRAY_OUT, PointerGetDatum(a))));
}

/* Put back the settings pinned_settings_enter saved. */
void
pinned_settings_leave(PinnedSettings *saved)
{
	pinned_settings_assign(saved);
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
