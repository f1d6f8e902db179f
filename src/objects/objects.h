/*
 * objects.h
 *		Object stores and server directories as foreign servers of the
 *		wrapper reconcile_objects (objects_fdw.c), their listings
 *		(objects_list.c) and reading one object version's bytes
 *		(objects_s3.c, objects_dir.c).
 */
#ifndef RECONCILE_OBJECTS_H
#define RECONCILE_OBJECTS_H

#include "datatype/timestamp.h"
#include "lib/stringinfo.h"
#include "nodes/pg_list.h"
#include "utils/jsonb.h"

#define OBJECTS_FDW_NAME "reconcile_objects"

typedef enum ObjServerKind
{
	OBJSERVER_S3,
	OBJSERVER_DIRECTORY
} ObjServerKind;

/* A server's options and the caller's credentials, read at the call. */
typedef struct ObjServer
{
	Oid			serverid;
	char	   *name;
	ObjServerKind kind;
	/* S3 */
	char	   *endpoint;		/* scheme://host[:port], no trailing slash */
	char	   *region;
	char	   *bucket;
	bool		path_style;
	char	   *ca_file;
	char	   *access_key_id;	/* NULL: unsigned (anonymous) requests */
	char	   *secret_access_key;
	char	   *session_token;
	/* directory */
	char	   *directory;
} ObjServer;

/* One listed object version. */
typedef struct ObjEntry
{
	char	   *key;
	char	   *version_id;		/* NULL: unversioned */
	int64		size;
	char	   *etag;			/* NULL for a directory or a delete marker */
	TimestampTz last_modified;
	bool		is_latest;
	bool		is_delete_marker;
} ObjEntry;

/* Listing options (the jsonb options of reconcile_list_objects). */
typedef struct ObjListOptions
{
	char	   *prefix;
	char	   *start_after;	/* list only keys after this one */
	int			max_keys;		/* page size asked of the store */
	int			versions;		/* -1 auto, 0 ListObjectsV2, 1 versions */
	int			max_retries;
} ObjListOptions;

typedef void (*ObjEntryCallback) (ObjEntry *e, void *arg);

/*
 * Bytes of one object version, fed as they arrive.  The callback returns
 * nothing; it may ereport, and the reader cleans up through its memory
 * context.
 */
typedef void (*ObjBytesCallback) (const char *data, size_t len, void *arg);

/* objects_read.c: one object version's bytes, hashed as they arrive */
typedef struct ObjReader ObjReader;
extern ObjReader *objects_open_reader(ObjServer *srv, const char *key, const char *version_id,
									  const char *etag, bool gzip, const char *what, int max_retries);
extern size_t objects_read(ObjReader *r, char *buf, size_t len);
extern const char *objects_reader_etag(ObjReader *r);
extern const char *objects_reader_version(ObjReader *r);
extern void objects_reader_finish(ObjReader *r, uint8 *digest, uint64 *bytes);
extern void objects_close_reader(ObjReader *r);

/* objects_stage.c: staging object versions, the manifest of what was read */
typedef struct StageOptions StageOptions;
typedef struct ObjectRead
{
	char	   *object_key;
	char	   *version_id;		/* as staged and in the manifest */
	char	   *etag;			/* the store's, or NULL */
	char		content_hash[7 + 64 + 1];	/* "sha256:" and 64 hex digits */
	int64		rows;
	uint64		bytes;
} ObjectRead;
extern StageOptions *objects_stage_options(Jsonb *doc);
extern void objects_stage_set_target(StageOptions *opts, Oid target);
extern List *objects_stage_parse_objects(Jsonb *doc);
extern Jsonb *objects_stage(Oid stagedid, ObjServer *srv, List *objects, StageOptions *opts,
							ObjectRead **reads);

/* objects_fdw.c */
extern ObjServer *objects_open_server(const char *name);
extern void objects_check_key(const char *key);

/* objects_list.c */
extern void objects_list_options(ObjListOptions *opts, const char *prefix, Jsonb *doc);
extern void objects_list(ObjServer *srv, ObjListOptions *opts, ObjEntryCallback cb, void *arg);

/* objects_s3.c */
extern void s3_list(ObjServer *srv, ObjListOptions *opts, ObjEntryCallback cb, void *arg);
extern bool s3_bucket_versioned(ObjServer *srv, int max_retries);
struct HttpStream;
extern struct HttpStream *s3_open_object(ObjServer *srv, const char *key, const char *version_id,
										 const char *etag, const char *what, int max_retries);

/* objects_dir.c */
extern void dir_list(ObjServer *srv, ObjListOptions *opts, ObjEntryCallback cb, void *arg);
extern int	dir_open_object(ObjServer *srv, const char *key);
extern char *dir_content_hash(ObjServer *srv, const char *key, int64 *size);

#endif							/* RECONCILE_OBJECTS_H */
