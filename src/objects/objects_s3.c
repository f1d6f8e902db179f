/*
 * objects_s3.c
 *		The S3 API: requests signed with AWS Signature Version 4 (HMAC-SHA256
 *		through PostgreSQL's pg_hmac, which is OpenSSL's HMAC in a server
 *		built with OpenSSL), listings (ListObjectVersions for a versioned
 *		bucket, ListObjectsV2 otherwise, every page followed) parsed with
 *		libxml2, and GETs of one pinned object version, streamed.
 *
 *		The request format is S3's as AWS, MinIO and Ceph RGW serve it; it
 *		is tested against moto's S3 server (test/t/070_objects.pl).  Secrets
 *		never reach a message: errors carry the store's Code and Message
 *		elements, never the request, its headers or its signature.
 */
#include "postgres.h"

#include <time.h>
#include <curl/curl.h>
#include <libxml/parser.h>
#include <libxml/tree.h>

#include "common/cryptohash.h"
#include "common/hmac.h"
#include "miscadmin.h"
#include "nodes/pg_list.h"
#include "utils/memutils.h"
#include "utils/builtins.h"
#include "utils/timestamp.h"

#include "objects.h"
#include "objects_http.h"
#include "common/sha256.h"

#define EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

/* One request to sign: method GET, a canonical URI and query. */
typedef struct S3Request
{
	ObjServer  *srv;
	char	   *host;			/* host[:port] as sent in Host */
	char	   *uri;			/* canonical (already encoded) path */
	char	   *query;			/* canonical query, sorted and encoded */
	char	   *if_match;		/* ETag to require, or NULL */
} S3Request;

/* S3's URI encoding: unreserved characters kept, '/' kept in paths. */
static void
uri_encode(StringInfo out, const char *s, bool keep_slash)
{
	const unsigned char *p;

	for (p = (const unsigned char *) s; *p; p++)
	{
		if ((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') ||
			(*p >= '0' && *p <= '9') || *p == '-' || *p == '_' ||
			*p == '.' || *p == '~' || (keep_slash && *p == '/'))
			appendStringInfoChar(out, (char) *p);
		else
			appendStringInfo(out, "%%%02X", *p);
	}
}

static void
hmac_sha256(const uint8 *key, size_t keylen, const char *data, uint8 *out)
{
	pg_hmac_ctx *ctx = pg_hmac_create(PG_SHA256);

	if (ctx == NULL ||
		pg_hmac_init(ctx, key, keylen) < 0 ||
		pg_hmac_update(ctx, (const uint8 *) data, strlen(data)) < 0 ||
		pg_hmac_final(ctx, out, RECONCILE_SHA256_LEN) < 0)
	{
		pg_hmac_free(ctx);
		elog(ERROR, "could not compute an HMAC-SHA256");
	}
	pg_hmac_free(ctx);
}

static char *
sha256_hex(const char *data)
{
	uint8		d[RECONCILE_SHA256_LEN];
	char	   *hex = palloc(RECONCILE_HEX_LEN + 1);

	reconcile_sha256(data, strlen(data), d);
	reconcile_hex(d, RECONCILE_SHA256_LEN, hex);
	hex[RECONCILE_HEX_LEN] = '\0';
	return hex;
}

/*
 * The headers of one attempt: Host, x-amz-date, x-amz-content-sha256, the
 * session token and the Authorization of Signature Version 4 (over the
 * empty payload of a GET); unsigned when the user mapping has no keys.
 */
static struct curl_slist *
s3_headers(void *arg)
{
	S3Request  *r = (S3Request *) arg;
	ObjServer  *srv = r->srv;
	struct curl_slist *h = NULL;
	char		amzdate[32];
	char		day[16];
	time_t		now = time(NULL);
	struct tm	tm;

	gmtime_r(&now, &tm);
	strftime(amzdate, sizeof(amzdate), "%Y%m%dT%H%M%SZ", &tm);
	strftime(day, sizeof(day), "%Y%m%d", &tm);

	h = http_header_append(h, "Host: %s", r->host);
	if (r->if_match)
		h = http_header_append(h, "If-Match: \"%s\"", r->if_match);
	/* No "Expect: 100-continue", no Accept-Encoding: the bytes as stored. */
	h = http_header_append(h, "Accept:");
	if (srv->access_key_id == NULL)
		return h;

	h = http_header_append(h, "x-amz-content-sha256: %s", EMPTY_SHA256);
	h = http_header_append(h, "x-amz-date: %s", amzdate);
	if (srv->session_token)
		h = http_header_append(h, "x-amz-security-token: %s", srv->session_token);
	{
		StringInfoData creq;
		StringInfoData sts;
		StringInfoData key;
		const char *signed_headers = srv->session_token
			? "host;x-amz-content-sha256;x-amz-date;x-amz-security-token"
			: "host;x-amz-content-sha256;x-amz-date";
		uint8		k1[RECONCILE_SHA256_LEN],
					k2[RECONCILE_SHA256_LEN],
					k3[RECONCILE_SHA256_LEN],
					k4[RECONCILE_SHA256_LEN],
					sig[RECONCILE_SHA256_LEN];
		char		sighex[RECONCILE_HEX_LEN + 1];
		char	   *creq_hash;

		initStringInfo(&creq);
		appendStringInfo(&creq, "GET\n%s\n%s\nhost:%s\nx-amz-content-sha256:%s\nx-amz-date:%s\n",
						 r->uri, r->query, r->host, EMPTY_SHA256, amzdate);
		if (srv->session_token)
			appendStringInfo(&creq, "x-amz-security-token:%s\n", srv->session_token);
		appendStringInfo(&creq, "\n%s\n%s", signed_headers, EMPTY_SHA256);
		creq_hash = sha256_hex(creq.data);

		initStringInfo(&sts);
		appendStringInfo(&sts, "AWS4-HMAC-SHA256\n%s\n%s/%s/s3/aws4_request\n%s",
						 amzdate, day, srv->region, creq_hash);

		initStringInfo(&key);
		appendStringInfo(&key, "AWS4%s", srv->secret_access_key);
		hmac_sha256((uint8 *) key.data, key.len, day, k1);
		explicit_bzero(key.data, key.len);
		pfree(key.data);
		hmac_sha256(k1, sizeof(k1), srv->region, k2);
		hmac_sha256(k2, sizeof(k2), "s3", k3);
		hmac_sha256(k3, sizeof(k3), "aws4_request", k4);
		hmac_sha256(k4, sizeof(k4), sts.data, sig);
		reconcile_hex(sig, RECONCILE_SHA256_LEN, sighex);
		sighex[RECONCILE_HEX_LEN] = '\0';
		explicit_bzero(k1, sizeof(k1));
		explicit_bzero(k4, sizeof(k4));

		h = http_header_append(h,
							   "Authorization: AWS4-HMAC-SHA256 Credential=%s/%s/%s/s3/aws4_request, SignedHeaders=%s, Signature=%s",
							   srv->access_key_id, day, srv->region, signed_headers, sighex);
		pfree(creq.data);
		pfree(sts.data);
	}
	return h;
}

/*
 * A request on the bucket (key NULL) or an object, with a canonical query
 * (pairs already sorted by name and encoded); returns its URL.
 */
static char *
s3_prepare(S3Request *r, ObjServer *srv, const char *key, const char *query)
{
	const char *rest;
	const char *scheme;
	StringInfoData uri;
	StringInfoData url;

	memset(r, 0, sizeof(*r));
	r->srv = srv;
	rest = strstr(srv->endpoint, "://") + 3;
	scheme = pnstrdup(srv->endpoint, rest - srv->endpoint);

	initStringInfo(&uri);
	if (srv->path_style)
	{
		r->host = pstrdup(rest);
		appendStringInfo(&uri, "/%s", srv->bucket);
		if (key)
			appendStringInfoChar(&uri, '/');
	}
	else
	{
		r->host = psprintf("%s.%s", srv->bucket, rest);
		appendStringInfoChar(&uri, '/');
	}
	if (key)
		uri_encode(&uri, key, true);
	r->uri = uri.data;
	r->query = pstrdup(query ? query : "");

	initStringInfo(&url);
	appendStringInfo(&url, "%s%s%s", scheme, r->host, r->uri);
	if (r->query[0])
		appendStringInfo(&url, "?%s", r->query);
	return url.data;
}

/* Adds name=value to a query being built in name order. */
static void
query_add(StringInfo q, const char *name, const char *value)
{
	if (q->len > 0)
		appendStringInfoChar(q, '&');
	uri_encode(q, name, false);
	appendStringInfoChar(q, '=');
	uri_encode(q, value ? value : "", false);
}

/* The text of the first child element named name, or NULL. */
static char *
xml_child_text(xmlNodePtr node, const char *name)
{
	xmlNodePtr	c;

	for (c = node->children; c; c = c->next)
		if (c->type == XML_ELEMENT_NODE && strcmp((const char *) c->name, name) == 0)
		{
			xmlChar    *t = xmlNodeGetContent(c);
			char	   *s = pstrdup(t ? (const char *) t : "");

			xmlFree(t);
			return s;
		}
	return NULL;
}

static xmlDocPtr
xml_parse(const char *body, size_t len, const char *what)
{
	xmlDocPtr	doc;

	if (len > INT_MAX)
		len = INT_MAX;
	doc = xmlReadMemory(body, (int) len, NULL, NULL,
						XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);
	if (doc == NULL || xmlDocGetRootElement(doc) == NULL)
	{
		if (doc)
			xmlFreeDoc(doc);
		ereport(ERROR,
				(errcode(ERRCODE_PROTOCOL_VIOLATION),
				 errmsg("could not parse the answer to %s", what),
				 errdetail("The store's answer is not well-formed XML.")));
	}
	return doc;
}

/*
 * Raises the error for a status of 300 or more: the store's Code and
 * Message (never the request), with a SQLSTATE a caller can act on.
 */
static void
s3_raise_status(HttpStream *st, ObjServer *srv, const char *what)
{
	long		status = http_status(st);
	const char *body = http_error_body(st);
	char	   *code = NULL;
	char	   *message = NULL;
	int			sqlstate;

	if (body[0] == '<')
	{
		xmlDocPtr	doc = xmlReadMemory(body, strlen(body), NULL, NULL,
										XML_PARSE_NONET | XML_PARSE_NOERROR | XML_PARSE_NOWARNING);

		if (doc && xmlDocGetRootElement(doc))
		{
			code = xml_child_text(xmlDocGetRootElement(doc), "Code");
			message = xml_child_text(xmlDocGetRootElement(doc), "Message");
		}
		if (doc)
			xmlFreeDoc(doc);
	}
	if (code == NULL)
		code = status == 404 ? "NoSuchKey" : status == 403 ? "AccessDenied"
			: status == 412 ? "PreconditionFailed" : "";

	if (status == 401 || status == 403)
		sqlstate = ERRCODE_INSUFFICIENT_PRIVILEGE;
	else if (status == 404)
		sqlstate = ERRCODE_UNDEFINED_OBJECT;
	else if (status == 412)
		sqlstate = ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE;
	else if (status >= 500 || status == 429)
		sqlstate = ERRCODE_CONNECTION_FAILURE;
	else
		sqlstate = ERRCODE_PROTOCOL_VIOLATION;

	ereport(ERROR,
			(errcode(sqlstate),
			 errmsg("could not read %s: HTTP status %ld %s", what, status, code),
			 message ? errdetail("The store says: %s", message) : 0,
			 status == 403 || status == 401
			 ? errhint("Check the access key of the user mapping of server \"%s\" for the current user (or PUBLIC) and its rights on bucket \"%s\".",
					   srv->name, srv->bucket)
			 : status == 412
			 ? errhint("The object was overwritten after it was listed; list it again.")
			 : (status >= 500 || status == 429)
			 ? errhint("The store kept failing after the retries; try again later.")
			 : 0));
}

/* GETs a whole (listing) answer into memory. */
static char *
s3_get_small(ObjServer *srv, const char *query, const char *what, int max_retries, size_t *len)
{
	S3Request	r;
	char	   *url = s3_prepare(&r, srv, NULL, query);
	HttpStream *st = http_open(url, srv->ca_file, s3_headers, &r, what, max_retries);
	StringInfoData body;
	char		chunk[65536];
	size_t		n;

	if (http_status(st) >= 300)
		s3_raise_status(st, srv, what);
	initStringInfo(&body);
	while ((n = http_read(st, chunk, sizeof(chunk))) > 0)
	{
		appendBinaryStringInfo(&body, chunk, n);
		if (body.len > 64 * 1024 * 1024)
			ereport(ERROR,
					(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
					 errmsg("the answer to %s is larger than 64 MB", what)));
	}
	http_close(st);
	*len = body.len;
	return body.data;
}

bool
s3_bucket_versioned(ObjServer *srv, int max_retries)
{
	char	   *what = psprintf("the versioning of bucket \"%s\" of server \"%s\"",
								srv->bucket, srv->name);
	size_t		len;
	char	   *body = s3_get_small(srv, "versioning=", what, max_retries, &len);
	xmlDocPtr	doc = xml_parse(body, len, what);
	char	   *status = xml_child_text(xmlDocGetRootElement(doc), "Status");

	xmlFreeDoc(doc);
	/* "Suspended" buckets keep their versions: list them. */
	return status != NULL && (strcmp(status, "Enabled") == 0 || strcmp(status, "Suspended") == 0);
}

static TimestampTz
parse_time(const char *s)
{
	if (s == NULL || *s == '\0')
		return 0;
	return DatumGetTimestampTz(DirectFunctionCall3(timestamptz_in, CStringGetDatum(s),
												   ObjectIdGetDatum(InvalidOid),
												   Int32GetDatum(-1)));
}

/* S3 puts ETags in double quotes; the listing shows them without. */
static char *
unquote_etag(char *e)
{
	size_t		len;

	if (e == NULL)
		return NULL;
	len = strlen(e);
	if (len >= 2 && e[0] == '"' && e[len - 1] == '"')
		return pnstrdup(e + 1, len - 2);
	return e;
}

static int64
parse_size(const char *s)
{
	if (s == NULL || *s == '\0')
		return 0;
	return DatumGetInt64(DirectFunctionCall1(int8in, CStringGetDatum(s)));
}

/*
 * Lists the bucket under opts->prefix after opts->start_after, page by
 * page, calling cb for every object version in the store's order (keys in
 * ascending order, the versions of a key newest first).
 */
void
s3_list(ObjServer *srv, ObjListOptions *opts, ObjEntryCallback cb, void *arg)
{
	bool		versions = opts->versions < 0 ? s3_bucket_versioned(srv, opts->max_retries)
		: opts->versions > 0;
	char	   *marker = opts->start_after ? pstrdup(opts->start_after) : NULL;
	char	   *version_marker = NULL;
	char	   *token = NULL;
	char	   *what = psprintf("the listing of bucket \"%s\" of server \"%s\"",
								srv->bucket, srv->name);
	MemoryContext page_cxt = AllocSetContextCreate(CurrentMemoryContext,
												   "reconcile listing page",
												   ALLOCSET_DEFAULT_SIZES);
	int			pages = 0;

	for (;;)
	{
		StringInfoData q;
		char		maxkeys[16];
		size_t		len;
		char	   *body;
		xmlDocPtr	doc;
		xmlNodePtr	root,
					n;
		List	   *entries = NIL;
		ListCell   *lc;
		char	   *truncated;
		char	   *next_marker = NULL;
		char	   *next_version = NULL;
		char	   *next_token = NULL;
		MemoryContext old;

		CHECK_FOR_INTERRUPTS();
		old = MemoryContextSwitchTo(page_cxt);
		snprintf(maxkeys, sizeof(maxkeys), "%d", opts->max_keys);
		initStringInfo(&q);
		/* Query pairs in byte order of their names (canonical form). */
		if (versions)
		{
			if (marker)
				query_add(&q, "key-marker", marker);
			query_add(&q, "max-keys", maxkeys);
			query_add(&q, "prefix", opts->prefix);
			if (version_marker)
				query_add(&q, "version-id-marker", version_marker);
			appendStringInfoString(&q, "&versions=");
		}
		else
		{
			if (token)
				query_add(&q, "continuation-token", token);
			query_add(&q, "list-type", "2");
			query_add(&q, "max-keys", maxkeys);
			query_add(&q, "prefix", opts->prefix);
			if (marker && token == NULL)
				query_add(&q, "start-after", marker);
		}
		body = s3_get_small(srv, q.data, what, opts->max_retries, &len);
		doc = xml_parse(body, len, what);
		root = xmlDocGetRootElement(doc);
		for (n = root->children; n; n = n->next)
		{
			ObjEntry   *e;
			bool		marker_entry;
			char	   *latest;

			if (n->type != XML_ELEMENT_NODE)
				continue;
			marker_entry = strcmp((const char *) n->name, "DeleteMarker") == 0;
			if (!marker_entry && strcmp((const char *) n->name, "Version") != 0 &&
				strcmp((const char *) n->name, "Contents") != 0)
				continue;
			e = palloc0(sizeof(ObjEntry));
			e->key = xml_child_text(n, "Key");
			if (e->key == NULL)
				continue;
			e->is_delete_marker = marker_entry;
			e->version_id = versions ? xml_child_text(n, "VersionId") : NULL;
			e->etag = marker_entry ? NULL : unquote_etag(xml_child_text(n, "ETag"));
			e->size = parse_size(xml_child_text(n, "Size"));
			e->last_modified = parse_time(xml_child_text(n, "LastModified"));
			latest = xml_child_text(n, "IsLatest");
			e->is_latest = versions ? (latest && strcmp(latest, "true") == 0) : true;
			entries = lappend(entries, e);
		}
		truncated = xml_child_text(root, "IsTruncated");
		next_marker = xml_child_text(root, "NextKeyMarker");
		next_version = xml_child_text(root, "NextVersionIdMarker");
		next_token = xml_child_text(root, "NextContinuationToken");
		xmlFreeDoc(doc);
		MemoryContextSwitchTo(old);

		foreach(lc, entries)
			cb((ObjEntry *) lfirst(lc), arg);
		pages++;

		if (truncated == NULL || strcmp(truncated, "true") != 0)
			break;
		/* Carry the markers over the reset of the page's memory. */
		if (versions)
		{
			if (next_marker == NULL || *next_marker == '\0')
				ereport(ERROR,
						(errcode(ERRCODE_PROTOCOL_VIOLATION),
						 errmsg("could not follow %s", what),
						 errdetail("Page %d is truncated but names no next key marker.", pages)));
			marker = pstrdup(next_marker);
			version_marker = next_version && *next_version ? pstrdup(next_version) : NULL;
		}
		else
		{
			if (next_token == NULL || *next_token == '\0')
				ereport(ERROR,
						(errcode(ERRCODE_PROTOCOL_VIOLATION),
						 errmsg("could not follow %s", what),
						 errdetail("Page %d is truncated but has no continuation token.", pages)));
			token = pstrdup(next_token);
		}
		MemoryContextReset(page_cxt);
	}
	MemoryContextDelete(page_cxt);
}

/*
 * Opens the body of one object version: versionId pinned when the listing
 * gave one (not S3's "null"), and If-Match on the listed ETag, so an object
 * overwritten since it was listed is refused (412) rather than read.
 */
HttpStream *
s3_open_object(ObjServer *srv, const char *key, const char *version_id,
			   const char *etag, const char *what, int max_retries)
{
	S3Request  *r = palloc(sizeof(S3Request));
	StringInfoData q;
	char	   *url;
	HttpStream *st;

	initStringInfo(&q);
	if (version_id && strcmp(version_id, "null") != 0)
		query_add(&q, "versionId", version_id);
	url = s3_prepare(r, srv, key, q.data);
	r->if_match = etag ? pstrdup(etag) : NULL;
	st = http_open(url, srv->ca_file, s3_headers, r, what, max_retries);
	if (http_status(st) >= 300)
		s3_raise_status(st, srv, what);
	return st;
}
