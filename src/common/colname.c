/*
 * colname.c
 *		Find a relation's column by the name a user wrote.
 *
 * Configuration files and JSON options carry column names as plain text,
 * often in the case of the tool they came from (PrimaryKEY1,
 * Updated_date).  A name matches the column of exactly that spelling when
 * there is one (so a quoted mixed-case column is found, and the exact name
 * wins when both "PrimaryKEY1" and primarykey1 exist); otherwise the name
 * folded to lower case as an unquoted SQL identifier folds.  Every place
 * that resolves a user's column name goes through colname_find, so that a
 * name means the same column everywhere.
 */
#include "postgres.h"

#include "lib/stringinfo.h"
#include "parser/scansup.h"

#include "colname.h"

static Form_pg_attribute
find_exact(TupleDesc desc, const char *name)
{
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		if (!att->attisdropped && strcmp(NameStr(att->attname), name) == 0)
			return att;
	}
	return NULL;
}

/*
 * The column a name means: exact spelling first, then the folded name;
 * NULL when neither exists.
 */
Form_pg_attribute
colname_find(TupleDesc desc, const char *name)
{
	Form_pg_attribute att = find_exact(desc, name);
	char	   *folded;

	if (att != NULL)
		return att;
	folded = downcase_identifier(name, strlen(name), false, false);
	if (strcmp(folded, name) != 0)
		att = find_exact(desc, folded);
	pfree(folded);
	return att;
}

/*
 * A hint for a name that matches no column: how names are matched, and
 * the columns that differ from it only in case (NULL when there are none:
 * the name is simply wrong, and the caller's own hint applies).
 */
char *
colname_hint(TupleDesc desc, const char *name)
{
	char	   *folded = downcase_identifier(name, strlen(name), false, false);
	StringInfoData candidates;
	int			n = 0;

	initStringInfo(&candidates);
	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		char	   *attfolded;

		if (att->attisdropped)
			continue;
		attfolded = downcase_identifier(NameStr(att->attname),
										strlen(NameStr(att->attname)), false, false);
		if (strcmp(attfolded, folded) == 0)
			appendStringInfo(&candidates, "%s\"%s\"", n++ ? ", " : "",
							 NameStr(att->attname));
		pfree(attfolded);
	}
	if (n == 0)
		return NULL;
	return psprintf("A name matches the column of its exact spelling, or else it is folded to lower case as unquoted names are (\"%s\" to \"%s\"); columns that differ from it only in case: %s.",
					name, folded, candidates.data);
}
