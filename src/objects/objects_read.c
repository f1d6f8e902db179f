/*
 * objects_read.c
 *		Reading one object version's bytes, from an S3 store or a server
 *		directory, as a stream: the SHA-256 of the stored bytes is computed
 *		as they arrive, their count kept, and a gzip'd object inflated
 *		(zlib) on the way to the parser.  Memory stays bounded: a fixed
 *		buffer for the compressed side and the HTTP stream's own bound.
 */
#include "postgres.h"

#include <unistd.h>
#include <zlib.h>

#include "miscadmin.h"
#include "utils/memutils.h"

#include "objects.h"
#include "objects_http.h"
#include "common/sha256.h"

#define READ_CHUNK 65536

struct ObjReader
{
	MemoryContext cxt;
	MemoryContextCallback free_cb;
	ObjServer  *srv;
	const char *what;
	HttpStream *http;
	int			fd;
	Sha256Ctx  *sha;
	uint64		bytes;			/* stored bytes read */
	bool		raw_eof;
	bool		gzip;
	bool		zinit;
	bool		member_done;	/* a gzip member ended; another may follow */
	z_stream	zs;
	char	   *zbuf;			/* compressed bytes not yet inflated */
	char	   *etag;			/* the response's ETag, unquoted */
	char	   *version;		/* the response's x-amz-version-id */
};

static void
reader_free(void *arg)
{
	ObjReader  *r = (ObjReader *) arg;

	if (r->fd >= 0)
	{
		close(r->fd);
		r->fd = -1;
	}
	if (r->zinit)
	{
		inflateEnd(&r->zs);
		r->zinit = false;
	}
}

static char *
unquote(const char *e)
{
	size_t		len;

	if (e == NULL)
		return NULL;
	len = strlen(e);
	if (len >= 2 && e[0] == '"' && e[len - 1] == '"')
		return pnstrdup(e + 1, len - 2);
	return pstrdup(e);
}

/*
 * Opens one object version: S3 with the version pinned (or If-Match on the
 * ETag when the object is unversioned), a directory file by key.
 */
ObjReader *
objects_open_reader(ObjServer *srv, const char *key, const char *version_id,
					const char *etag, bool gzip, const char *what, int max_retries)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "reconcile object reader",
											  ALLOCSET_DEFAULT_SIZES);
	MemoryContext old = MemoryContextSwitchTo(cxt);
	ObjReader  *r = palloc0(sizeof(ObjReader));

	r->cxt = cxt;
	r->srv = srv;
	r->what = pstrdup(what);
	r->fd = -1;
	r->free_cb.func = reader_free;
	r->free_cb.arg = r;
	MemoryContextRegisterResetCallback(cxt, &r->free_cb);
	r->sha = reconcile_sha256_begin();
	reconcile_sha256_init(r->sha);
	if (srv->kind == OBJSERVER_DIRECTORY)
		r->fd = dir_open_object(srv, key);
	else
	{
		r->http = s3_open_object(srv, key, version_id, etag, what, max_retries);
		r->etag = unquote(http_header(r->http, "ETag"));
		r->version = unquote(http_header(r->http, "x-amz-version-id"));
	}
	r->gzip = gzip;
	if (gzip)
	{
		r->zbuf = palloc(READ_CHUNK);
		memset(&r->zs, 0, sizeof(r->zs));
		/* 15 + 32: a zlib or gzip header, detected */
		if (inflateInit2(&r->zs, 15 + 32) != Z_OK)
			ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory"),
							errdetail("zlib could not start inflating %s.", what)));
		r->zinit = true;
	}
	MemoryContextSwitchTo(old);
	return r;
}

const char *
objects_reader_etag(ObjReader *r)
{
	return r->etag;
}

const char *
objects_reader_version(ObjReader *r)
{
	return r->version;
}

/* Stored bytes, hashed and counted; 0 at the end. */
static size_t
read_raw(ObjReader *r, char *buf, size_t len)
{
	size_t		n;

	if (r->raw_eof)
		return 0;
	CHECK_FOR_INTERRUPTS();
	if (r->http)
		n = http_read(r->http, buf, len);
	else
	{
		ssize_t		got = read(r->fd, buf, len);

		if (got < 0)
			ereport(ERROR,
					(errcode_for_file_access(),
					 errmsg("could not read %s: %m", r->what)));
		n = (size_t) got;
	}
	if (n == 0)
		r->raw_eof = true;
	else
	{
		reconcile_sha256_update(r->sha, buf, n);
		r->bytes += n;
	}
	return n;
}

/*
 * Up to len bytes of the object's content (inflated); 0 at the end.  A
 * gzip file of several members (concatenated files) inflates as gzip -d
 * does, one member after the other.
 */
size_t
objects_read(ObjReader *r, char *buf, size_t len)
{
	if (!r->gzip)
		return read_raw(r, buf, len);

	for (;;)
	{
		int			rc;
		size_t		out;

		if (r->zs.avail_in == 0)
		{
			size_t		n = read_raw(r, r->zbuf, READ_CHUNK);

			if (n == 0)
			{
				/* An empty object is empty, compressed or not. */
				if (r->bytes == 0 || r->member_done)
					return 0;
				ereport(ERROR,
						(errcode(ERRCODE_DATA_CORRUPTED),
						 errmsg("could not inflate %s: the gzip stream is truncated", r->what),
						 errdetail("%llu bytes were read.", (unsigned long long) r->bytes)));
			}
			r->zs.next_in = (Bytef *) r->zbuf;
			r->zs.avail_in = (uInt) n;
		}
		if (r->member_done)
		{
			inflateReset(&r->zs);
			r->member_done = false;
		}
		r->zs.next_out = (Bytef *) buf;
		r->zs.avail_out = (uInt) len;
		rc = inflate(&r->zs, Z_NO_FLUSH);
		if (rc == Z_STREAM_END)
			r->member_done = true;
		else if (rc != Z_OK && rc != Z_BUF_ERROR)
			ereport(ERROR,
					(errcode(ERRCODE_DATA_CORRUPTED),
					 errmsg("could not inflate %s: %s", r->what, r->zs.msg ? r->zs.msg : "invalid gzip data"),
					 errhint("Check the object's compression, or stage it with \"compression\": \"none\".")));
		out = len - r->zs.avail_out;
		if (out > 0)
			return out;
	}
}

/* After the last read: the digest of the stored bytes and their count. */
void
objects_reader_finish(ObjReader *r, uint8 *digest, uint64 *bytes)
{
	char		rest[1024];

	/* Drain what the parser did not ask for, so every byte is hashed. */
	while (read_raw(r, rest, sizeof(rest)) > 0)
		;
	reconcile_sha256_final(r->sha, digest);
	*bytes = r->bytes;
}

void
objects_close_reader(ObjReader *r)
{
	reconcile_sha256_end(r->sha);
	if (r->http)
		http_close(r->http);
	MemoryContextDelete(r->cxt);
}
