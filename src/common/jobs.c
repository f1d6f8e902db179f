/*
 * jobs.c
 *		What a configured job asks of the relations it names.  Diff jobs
 *		(diff_run.c) and check jobs (check_history.c) are run by whoever
 *		calls them and keep their runs for ever, so before a job's relation
 *		is locked the caller must have some SELECT right on it (on the table
 *		or on columns, as the diff and the check themselves check), and the
 *		relation must outlive the session: a temporary one disappears at
 *		session end without notice, and its runs would name its OID.
 */
#include "postgres.h"

#include "catalog/pg_class.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/lsyscache.h"

#include "jobs.h"

void
job_relation_check(const RangeVar *rv, Oid relid, Oid oldrelid, void *arg)
{
	JobRelationCheck *chk = (JobRelationCheck *) arg;
	Oid			user = GetUserId();

	if (!OidIsValid(relid))
		return;
	if (pg_class_aclcheck(relid, user, ACL_SELECT) != ACLCHECK_OK &&
		pg_attribute_aclcheck_all(relid, user, ACL_SELECT, ACLMASK_ANY) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for relation \"%s\" of %s \"%s\"",
						rv->relname, chk->kind, chk->job),
				 errdetail("A job runs with the caller's rights, and role \"%s\" may not SELECT from it; nothing was recorded.",
						   GetUserNameFromId(user, false)),
				 errhint("%s", chk->hint)));
	if (get_rel_persistence(relid) == RELPERSISTENCE_TEMP)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("relation \"%s\" of %s \"%s\" is temporary", rv->relname, chk->kind, chk->job),
				 errdetail("Runs are kept after the session ends, and a temporary relation is not.")));
}
