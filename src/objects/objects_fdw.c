/*
 * objects_fdw.c
 *		The foreign-data wrapper reconcile_objects: a validator only, as
 *		contrib's dblink_fdw, so that object stores and server directories
 *		are foreign servers (PostgreSQL's place for endpoints, with USAGE as
 *		the right to read) and their credentials user mappings (never in a
 *		state table, a log line or an error message).
 *
 *		Two kinds of server: an S3 API (endpoint, region, bucket, url_style,
 *		ca_file; user mapping access_key_id, secret_access_key,
 *		session_token) and a server directory (directory), which only roles
 *		with pg_read_server_files (or superusers) may create or read.
 */
#include "postgres.h"

#include "access/reloptions.h"
#include "catalog/pg_authid.h"
#include "catalog/pg_foreign_data_wrapper.h"
#include "catalog/pg_foreign_server.h"
#include "catalog/pg_user_mapping.h"
#include "commands/defrem.h"
#include "foreign/foreign.h"
#include "miscadmin.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/syscache.h"

#include "objects.h"

PG_FUNCTION_INFO_V1(reconcile_objects_validator);

typedef struct ObjOption
{
	const char *name;
	Oid			context;		/* catalog the option belongs in */
} ObjOption;

static const ObjOption obj_options[] = {
	{"endpoint", ForeignServerRelationId},
	{"region", ForeignServerRelationId},
	{"bucket", ForeignServerRelationId},
	{"url_style", ForeignServerRelationId},
	{"ca_file", ForeignServerRelationId},
	{"directory", ForeignServerRelationId},
	{"access_key_id", UserMappingRelationId},
	{"secret_access_key", UserMappingRelationId},
	{"session_token", UserMappingRelationId},
	{NULL, InvalidOid}
};

static bool
has_read_server_files(void)
{
	return superuser() || has_privs_of_role(GetUserId(), ROLE_PG_READ_SERVER_FILES);
}

/* The valid option names of one catalog, for a hint. */
static char *
valid_option_names(Oid context)
{
	StringInfoData buf;
	const ObjOption *o;

	initStringInfo(&buf);
	for (o = obj_options; o->name; o++)
		if (o->context == context)
			appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "", o->name);
	return buf.data;
}

/* scheme://host[:port] with nothing after it but an optional "/". */
static bool
endpoint_is_valid(const char *v)
{
	const char *p;

	if (strncmp(v, "http://", 7) == 0)
		p = v + 7;
	else if (strncmp(v, "https://", 8) == 0)
		p = v + 8;
	else
		return false;
	if (*p == '\0' || *p == '/' || *p == ':')
		return false;
	for (; *p && *p != '/'; p++)
		if (!(isalnum((unsigned char) *p) || *p == '.' || *p == '-' ||
			  *p == ':' || *p == '[' || *p == ']' || *p == '_'))
			return false;
	return *p == '\0' || strcmp(p, "/") == 0;
}

/* S3 bucket names: 3 to 63 of [a-z0-9.-], starting and ending alphanumeric. */
static bool
bucket_is_valid(const char *v)
{
	size_t		len = strlen(v);
	size_t		i;

	if (len < 3 || len > 63)
		return false;
	for (i = 0; i < len; i++)
		if (!((v[i] >= 'a' && v[i] <= 'z') || (v[i] >= '0' && v[i] <= '9') ||
			  v[i] == '.' || v[i] == '-'))
			return false;
	return isalnum((unsigned char) v[0]) && isalnum((unsigned char) v[len - 1]);
}

static bool
region_is_valid(const char *v)
{
	const char *p;

	if (*v == '\0' || strlen(v) > 64)
		return false;
	for (p = v; *p; p++)
		if (!(isalnum((unsigned char) *p) || *p == '-' || *p == '_'))
			return false;
	return true;
}

static void
invalid_value(const char *name, const char *detail)
{
	ereport(ERROR,
			(errcode(ERRCODE_FDW_INVALID_ATTRIBUTE_VALUE),
			 errmsg("invalid value for option \"%s\" of wrapper %s", name, OBJECTS_FDW_NAME),
			 errdetail("%s", detail)));
}

/*
 * Validator of the wrapper's, its servers' and its user mappings' options.
 * PostgreSQL passes the whole list the object will have, so the checks
 * across options (a directory server has no bucket) are made here too.
 */
Datum
reconcile_objects_validator(PG_FUNCTION_ARGS)
{
	List	   *options = untransformRelOptions(PG_GETARG_DATUM(0));
	Oid			catalog = PG_GETARG_OID(1);
	ListCell   *cell;
	bool		has_directory = false;
	bool		has_bucket = false;
	const char *s3_option = NULL;
	bool		has_key = false;
	bool		has_secret = false;

	foreach(cell, options)
	{
		DefElem    *def = (DefElem *) lfirst(cell);
		const ObjOption *o;
		char	   *v;

		for (o = obj_options; o->name; o++)
			if (o->context == catalog && strcmp(o->name, def->defname) == 0)
				break;
		if (o->name == NULL)
		{
			char	   *names = valid_option_names(catalog);

			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("invalid option \"%s\" for wrapper %s", def->defname, OBJECTS_FDW_NAME),
					 names[0] ? errhint("Valid options in this context are: %s.", names)
					 : errhint("There are no valid options in this context.")));
		}
		/* The value is never shown: it may be a secret. */
		v = defGetString(def);

		if (strcmp(def->defname, "directory") == 0)
		{
			if (!has_read_server_files())
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("permission denied to create a %s server on a server directory",
								OBJECTS_FDW_NAME),
						 errdetail("Only roles with privileges of the \"pg_read_server_files\" role may read server directories.")));
			if (!is_absolute_path(v))
				invalid_value(def->defname, "The directory must be an absolute path.");
			has_directory = true;
		}
		else if (strcmp(def->defname, "ca_file") == 0)
		{
			if (!has_read_server_files())
				ereport(ERROR,
						(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
						 errmsg("permission denied to set option \"ca_file\" of a %s server",
								OBJECTS_FDW_NAME),
						 errdetail("It names a server file; only roles with privileges of the \"pg_read_server_files\" role may set it.")));
			if (!is_absolute_path(v))
				invalid_value(def->defname, "The CA file must be an absolute path.");
			s3_option = def->defname;
		}
		else if (strcmp(def->defname, "endpoint") == 0)
		{
			if (!endpoint_is_valid(v))
				invalid_value(def->defname,
							  "An endpoint is http:// or https:// followed by a host and an optional port, such as https://s3.eu-west-1.amazonaws.com.");
			s3_option = def->defname;
		}
		else if (strcmp(def->defname, "region") == 0)
		{
			if (!region_is_valid(v))
				invalid_value(def->defname, "A region is a name of letters, digits, hyphens and underscores, such as us-east-1.");
			s3_option = def->defname;
		}
		else if (strcmp(def->defname, "bucket") == 0)
		{
			if (!bucket_is_valid(v))
				invalid_value(def->defname,
							  "A bucket name has 3 to 63 lowercase letters, digits, dots and hyphens, and starts and ends with a letter or digit.");
			has_bucket = true;
			s3_option = def->defname;
		}
		else if (strcmp(def->defname, "url_style") == 0)
		{
			if (strcmp(v, "path") != 0 && strcmp(v, "virtual") != 0)
				invalid_value(def->defname, "The URL style is \"path\" (endpoint/bucket/key) or \"virtual\" (bucket.endpoint/key).");
			s3_option = def->defname;
		}
		else if (strcmp(def->defname, "access_key_id") == 0)
		{
			if (*v == '\0')
				invalid_value(def->defname, "The access key id is empty.");
			has_key = true;
		}
		else if (strcmp(def->defname, "secret_access_key") == 0)
		{
			if (*v == '\0')
				invalid_value(def->defname, "The secret access key is empty.");
			has_secret = true;
		}
	}

	if (catalog == ForeignServerRelationId)
	{
		if (has_directory && s3_option)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_INVALID_OPTION_NAME),
					 errmsg("option \"%s\" is not valid for a server directory", s3_option),
					 errdetail("A %s server reads either a server directory (option \"directory\") or an S3 bucket (options endpoint, region, bucket, url_style, ca_file).",
							   OBJECTS_FDW_NAME)));
		if (!has_directory && !has_bucket)
			ereport(ERROR,
					(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
					 errmsg("a %s server needs option \"bucket\" or option \"directory\"", OBJECTS_FDW_NAME),
					 errhint("Add OPTIONS (bucket '...') with endpoint and region for an S3 API, or OPTIONS (directory '/path') for a server directory.")));
	}
	if (catalog == UserMappingRelationId && has_key != has_secret)
		ereport(ERROR,
				(errcode(ERRCODE_FDW_OPTION_NAME_NOT_FOUND),
				 errmsg("a %s user mapping needs both \"access_key_id\" and \"secret_access_key\", or neither",
						OBJECTS_FDW_NAME),
				 errhint("A user mapping without either makes unsigned (anonymous) requests.")));

	PG_RETURN_VOID();
}

static char *
option_value(List *options, const char *name)
{
	ListCell   *lc;

	foreach(lc, options)
	{
		DefElem    *def = (DefElem *) lfirst(lc);

		if (strcmp(def->defname, name) == 0)
			return defGetString(def);
	}
	return NULL;
}

/*
 * The user mapping of the current user on the server, else PUBLIC's, else
 * NULL (GetUserMapping would raise an error).
 */
static List *
user_mapping_options(Oid serverid)
{
	Oid			users[2] = {GetUserId(), InvalidOid};
	int			i;

	for (i = 0; i < 2; i++)
	{
		HeapTuple	tp = SearchSysCache2(USERMAPPINGUSERSERVER,
										 ObjectIdGetDatum(users[i]),
										 ObjectIdGetDatum(serverid));

		if (HeapTupleIsValid(tp))
		{
			bool		isnull;
			Datum		d = SysCacheGetAttr(USERMAPPINGUSERSERVER, tp,
											Anum_pg_user_mapping_umoptions, &isnull);
			List	   *opts = isnull ? NIL : untransformRelOptions(d);

			ReleaseSysCache(tp);
			return opts;
		}
	}
	return NIL;
}

/*
 * Looks up a server of the wrapper by name and checks the caller may read
 * it: USAGE on the server, and for a server directory the privileges of
 * pg_read_server_files.  The credentials come from the caller's user
 * mapping (or PUBLIC's); without one, requests are unsigned.
 */
ObjServer *
objects_open_server(const char *name)
{
	ForeignServer *fs = GetForeignServerByName(name, true);
	ForeignDataWrapper *fdw;
	ObjServer  *srv;
	AclResult	aclresult;
	List	   *um;
	char	   *style;

	if (fs == NULL)
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("server \"%s\" does not exist", name)));
	fdw = GetForeignDataWrapper(fs->fdwid);
	if (strcmp(fdw->fdwname, OBJECTS_FDW_NAME) != 0)
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("server \"%s\" is not a %s server", name, OBJECTS_FDW_NAME),
				 errdetail("It uses the foreign-data wrapper \"%s\".", fdw->fdwname),
				 errhint("Create the server with FOREIGN DATA WRAPPER %s.", OBJECTS_FDW_NAME)));
	aclresult = pg_foreign_server_aclcheck(fs->serverid, GetUserId(), ACL_USAGE);
	if (aclresult != ACLCHECK_OK)
		aclcheck_error(aclresult, OBJECT_FOREIGN_SERVER, fs->servername);

	srv = palloc0(sizeof(ObjServer));
	srv->serverid = fs->serverid;
	srv->name = pstrdup(fs->servername);
	srv->directory = option_value(fs->options, "directory");
	if (srv->directory)
	{
		srv->kind = OBJSERVER_DIRECTORY;
		if (!has_read_server_files())
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied to read server \"%s\"", name),
					 errdetail("Server \"%s\" reads a server directory; only roles with privileges of the \"pg_read_server_files\" role may read it.",
							   name)));
		return srv;
	}

	srv->kind = OBJSERVER_S3;
	srv->bucket = option_value(fs->options, "bucket");
	srv->region = option_value(fs->options, "region");
	if (srv->region == NULL)
		srv->region = "us-east-1";
	srv->endpoint = option_value(fs->options, "endpoint");
	if (srv->endpoint == NULL)
		srv->endpoint = psprintf("https://s3.%s.amazonaws.com", srv->region);
	else
	{
		size_t		len = strlen(srv->endpoint);

		srv->endpoint = pstrdup(srv->endpoint);
		if (len > 0 && srv->endpoint[len - 1] == '/')
			srv->endpoint[len - 1] = '\0';
	}
	style = option_value(fs->options, "url_style");
	srv->path_style = style == NULL || strcmp(style, "path") == 0;
	srv->ca_file = option_value(fs->options, "ca_file");

	um = user_mapping_options(fs->serverid);
	srv->access_key_id = option_value(um, "access_key_id");
	srv->secret_access_key = option_value(um, "secret_access_key");
	srv->session_token = option_value(um, "session_token");
	return srv;
}

/*
 * An object key a caller passed: not empty, no NUL (text has none), at
 * most S3's 1024 bytes.
 */
void
objects_check_key(const char *key)
{
	if (key[0] == '\0' || strlen(key) > 1024)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("invalid object key \"%s\"", key),
				 errdetail("An object key has 1 to 1024 bytes.")));
}
