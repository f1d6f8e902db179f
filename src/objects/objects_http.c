/*
 * objects_http.c
 *		One HTTP GET through libcurl's multi interface, read by the caller
 *		as a stream: the caller pulls bytes (http_read) and the transfer
 *		advances only as far as needed, so a backend's memory stays bounded
 *		(a transfer is paused when a megabyte waits unread) whatever the
 *		object's size.  Between two polls of at most 100 ms the loop runs
 *		CHECK_FOR_INTERRUPTS, so a cancel or statement_timeout stops a
 *		download mid-body.  The libcurl callbacks only copy (no error is
 *		raised inside one, short of running out of memory), and the handles
 *		are freed by a callback of the stream's memory context, so an error
 *		anywhere cannot leak them.
 *
 *		Before the first body byte reaches the caller, a failed connection,
 *		a reset, a 5xx or a 429 is retried with exponential backoff (at most
 *		max_retries times); after it, a broken transfer is an error.
 */
#include "postgres.h"

#include <curl/curl.h>

#include "miscadmin.h"
#include "pgstat.h"
#include "storage/latch.h"
#include "utils/memutils.h"
#include "utils/timestamp.h"
#include "utils/wait_event.h"

#include "objects_http.h"

#define HTTP_PAUSE_AT		(1024 * 1024)	/* unread bytes that pause a transfer */
#define HTTP_ERROR_BODY_MAX	(64 * 1024)		/* an error response kept at most */
#define HTTP_POLL_MS		100

struct HttpStream
{
	MemoryContext cxt;
	MemoryContextCallback free_cb;
	CURLM	   *multi;
	CURL	   *easy;
	struct curl_slist *headers;
	char	   *url;
	const char *ca_file;
	HttpHeadersFn make_headers;
	void	   *arg;
	const char *what;
	int			max_retries;

	long		status;			/* of the final response; 0 until known */
	bool		headers_done;
	bool		done;			/* transfer finished */
	CURLcode	result;
	bool		paused;
	StringInfoData buf;			/* body bytes not yet read */
	size_t		bufpos;
	StringInfoData errbody;		/* body of an error status */
	List	   *resp_headers;	/* "name: value" strings of the final response */
	uint64		delivered;		/* body bytes handed to the caller */
	char		errbuf[CURL_ERROR_SIZE];
};

static bool curl_ready = false;

static void
http_free_handles(void *arg)
{
	HttpStream *s = (HttpStream *) arg;

	if (s->easy)
	{
		if (s->multi)
			curl_multi_remove_handle(s->multi, s->easy);
		curl_easy_cleanup(s->easy);
		s->easy = NULL;
	}
	if (s->multi)
	{
		curl_multi_cleanup(s->multi);
		s->multi = NULL;
	}
	if (s->headers)
	{
		curl_slist_free_all(s->headers);
		s->headers = NULL;
	}
}

/* libcurl callbacks: no palloc failure may longjmp out, so they only copy. */
static size_t
http_on_body(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	HttpStream *s = (HttpStream *) userdata;
	size_t		n = size * nmemb;

	if (s->status >= 300 || s->status == 0)
	{
		size_t		room = HTTP_ERROR_BODY_MAX - s->errbody.len;

		if (room > 0)
			appendBinaryStringInfoNT(&s->errbody, ptr, Min(n, room));
		return n;
	}
	if (s->buf.len - s->bufpos >= HTTP_PAUSE_AT)
	{
		s->paused = true;
		return CURL_WRITEFUNC_PAUSE;
	}
	appendBinaryStringInfoNT(&s->buf, ptr, n);
	return n;
}

static size_t
http_on_header(char *ptr, size_t size, size_t nmemb, void *userdata)
{
	HttpStream *s = (HttpStream *) userdata;
	size_t		n = size * nmemb;

	if (n >= 5 && strncmp(ptr, "HTTP/", 5) == 0)
	{
		/* A new response (after a 100 Continue or a redirect) starts. */
		list_free_deep(s->resp_headers);
		s->resp_headers = NIL;
		s->headers_done = false;
		return n;
	}
	if (n <= 2 && (ptr[0] == '\r' || ptr[0] == '\n'))
	{
		long		code = 0;

		curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &code);
		if (code >= 200)
		{
			s->status = code;
			s->headers_done = true;
		}
		return n;
	}
	if (list_length(s->resp_headers) < 200)
	{
		size_t		len = n;

		while (len > 0 && (ptr[len - 1] == '\r' || ptr[len - 1] == '\n'))
			len--;
		s->resp_headers = lappend(s->resp_headers, pnstrdup(ptr, len));
	}
	return n;
}

/*
 * Waits before retry attempt+1: 100 ms doubling, at most 5 s.  The latch
 * may be set by anything, so the wait goes on until the time is up; an
 * interrupt raises its error at once.
 */
void
http_backoff(int attempt)
{
	long		ms = 100L << Min(attempt, 6);
	TimestampTz end;

	if (ms > 5000)
		ms = 5000;
	end = TimestampTzPlusMilliseconds(GetCurrentTimestamp(), ms);
	for (;;)
	{
		long		left = TimestampDifferenceMilliseconds(GetCurrentTimestamp(), end);

		if (left <= 0)
			break;
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 left, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
		CHECK_FOR_INTERRUPTS();
	}
}

struct curl_slist *
http_header_append(struct curl_slist *list, const char *fmt,...)
{
	StringInfoData line;
	struct curl_slist *l;

	initStringInfo(&line);
	for (;;)
	{
		va_list		args;
		int			needed;

		va_start(args, fmt);
		needed = appendStringInfoVA(&line, fmt, args);
		va_end(args);
		if (needed == 0)
			break;
		enlargeStringInfo(&line, needed);
	}
	l = curl_slist_append(list, line.data);
	pfree(line.data);
	if (l == NULL)
	{
		curl_slist_free_all(list);
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory")));
	}
	return l;
}

static void
http_start_attempt(HttpStream *s)
{
	MemoryContext old = MemoryContextSwitchTo(s->cxt);

	http_free_handles(s);
	s->status = 0;
	s->headers_done = false;
	s->done = false;
	s->result = CURLE_OK;
	s->paused = false;
	resetStringInfo(&s->buf);
	s->bufpos = 0;
	resetStringInfo(&s->errbody);
	s->resp_headers = NIL;
	s->errbuf[0] = '\0';

	s->headers = s->make_headers(s->arg);
	s->multi = curl_multi_init();
	s->easy = curl_easy_init();
	if (s->multi == NULL || s->easy == NULL)
		ereport(ERROR, (errcode(ERRCODE_OUT_OF_MEMORY), errmsg("out of memory"),
						errdetail("libcurl could not create a transfer.")));
	curl_easy_setopt(s->easy, CURLOPT_URL, s->url);
	curl_easy_setopt(s->easy, CURLOPT_HTTPHEADER, s->headers);
	/* PostgreSQL owns SIGALRM (statement_timeout): libcurl must not use it. */
	curl_easy_setopt(s->easy, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(s->easy, CURLOPT_WRITEFUNCTION, http_on_body);
	curl_easy_setopt(s->easy, CURLOPT_WRITEDATA, s);
	curl_easy_setopt(s->easy, CURLOPT_HEADERFUNCTION, http_on_header);
	curl_easy_setopt(s->easy, CURLOPT_HEADERDATA, s);
	curl_easy_setopt(s->easy, CURLOPT_ERRORBUFFER, s->errbuf);
	curl_easy_setopt(s->easy, CURLOPT_CONNECTTIMEOUT, 30L);
	/* Give up on a connection that moves less than 1 byte/s for 60 s. */
	curl_easy_setopt(s->easy, CURLOPT_LOW_SPEED_LIMIT, 1L);
	curl_easy_setopt(s->easy, CURLOPT_LOW_SPEED_TIME, 60L);
	curl_easy_setopt(s->easy, CURLOPT_PROTOCOLS_STR, "http,https");
	curl_easy_setopt(s->easy, CURLOPT_FOLLOWLOCATION, 0L);
	/* A key may hold "/../": it is a name, not a path to normalise. */
	curl_easy_setopt(s->easy, CURLOPT_PATH_AS_IS, 1L);
	curl_easy_setopt(s->easy, CURLOPT_SSL_VERIFYPEER, 1L);
	curl_easy_setopt(s->easy, CURLOPT_SSL_VERIFYHOST, 2L);
	if (s->ca_file)
		curl_easy_setopt(s->easy, CURLOPT_CAINFO, s->ca_file);
	curl_multi_add_handle(s->multi, s->easy);
	MemoryContextSwitchTo(old);
}

/* Advances the transfer once: performs, reads completion, polls if idle. */
static void
http_step(HttpStream *s, bool wait)
{
	int			running = 0;
	int			msgs;
	CURLMsg    *msg;
	CURLMcode	mc;
	MemoryContext old = MemoryContextSwitchTo(s->cxt);

	CHECK_FOR_INTERRUPTS();
	mc = curl_multi_perform(s->multi, &running);
	if (mc != CURLM_OK)
		ereport(ERROR,
				(errcode(ERRCODE_CONNECTION_FAILURE),
				 errmsg("could not read %s: %s", s->what, curl_multi_strerror(mc))));
	while ((msg = curl_multi_info_read(s->multi, &msgs)) != NULL)
	{
		if (msg->msg == CURLMSG_DONE)
		{
			s->done = true;
			s->result = msg->data.result;
			if (!s->headers_done)
			{
				long		code = 0;

				curl_easy_getinfo(s->easy, CURLINFO_RESPONSE_CODE, &code);
				s->status = code;
			}
		}
	}
	MemoryContextSwitchTo(old);
	if (!s->done && wait)
	{
		int			numfds;

		mc = curl_multi_poll(s->multi, NULL, 0, HTTP_POLL_MS, &numfds);
		if (mc != CURLM_OK)
			ereport(ERROR,
					(errcode(ERRCODE_CONNECTION_FAILURE),
					 errmsg("could not read %s: %s", s->what, curl_multi_strerror(mc))));
	}
}

static bool
http_retryable_result(CURLcode rc)
{
	switch (rc)
	{
		case CURLE_COULDNT_CONNECT:
		case CURLE_COULDNT_RESOLVE_HOST:
		case CURLE_SEND_ERROR:
		case CURLE_RECV_ERROR:
		case CURLE_PARTIAL_FILE:
		case CURLE_GOT_NOTHING:
		case CURLE_OPERATION_TIMEDOUT:
			return true;
		default:
			return false;
	}
}

/*
 * libcurl's message for a failed transfer, without the timings it puts in
 * (" after 12 ms"), which would make equal faults read differently.
 */
static char *
http_curl_message(HttpStream *s)
{
	StringInfoData out;
	const char *p;

	if (s->errbuf[0] == '\0')
		return pstrdup(curl_easy_strerror(s->result));
	initStringInfo(&out);
	for (p = s->errbuf; *p; p++)
	{
		if (strncmp(p, " after ", 7) == 0 && isdigit((unsigned char) p[7]))
		{
			const char *q = p + 7;

			while (isdigit((unsigned char) *q))
				q++;
			if (strncmp(q, " ms", 3) == 0)
			{
				p = q + 2;
				continue;
			}
		}
		appendStringInfoChar(&out, *p);
	}
	return out.data;
}

static void
http_transfer_error(HttpStream *s, int attempts)
{
	ereport(ERROR,
			(errcode(ERRCODE_CONNECTION_FAILURE),
			 errmsg("could not read %s: %s", s->what, http_curl_message(s)),
			 s->delivered > 0
			 ? errdetail("The transfer broke after %llu bytes of the body had been read.",
						 (unsigned long long) s->delivered)
			 : errdetail("%d attempt(s) failed.", attempts),
			 errhint("Check that the endpoint is reachable; the call can be repeated, nothing of it was kept.")));
}

/*
 * Starts the GET and waits for the final status, retrying transient
 * faults.  An error status is returned with its body (http_error_body);
 * the caller decides what it means.
 */
HttpStream *
http_open(const char *url, const char *ca_file, HttpHeadersFn make_headers,
		  void *arg, const char *what, int max_retries)
{
	MemoryContext cxt = AllocSetContextCreate(CurrentMemoryContext,
											  "reconcile http stream",
											  ALLOCSET_DEFAULT_SIZES);
	HttpStream *s = MemoryContextAllocZero(cxt, sizeof(HttpStream));
	int			attempt;

	if (!curl_ready)
	{
		if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK)
			ereport(ERROR,
					(errcode(ERRCODE_SYSTEM_ERROR),
					 errmsg("could not initialise libcurl")));
		curl_ready = true;
	}
	s->cxt = cxt;
	s->url = MemoryContextStrdup(cxt, url);
	s->ca_file = ca_file ? MemoryContextStrdup(cxt, ca_file) : NULL;
	s->make_headers = make_headers;
	s->arg = arg;
	s->what = MemoryContextStrdup(cxt, what);
	s->max_retries = max_retries;
	{
		MemoryContext old = MemoryContextSwitchTo(cxt);

		initStringInfo(&s->buf);
		initStringInfo(&s->errbody);
		MemoryContextSwitchTo(old);
	}
	s->free_cb.func = http_free_handles;
	s->free_cb.arg = s;
	MemoryContextRegisterResetCallback(cxt, &s->free_cb);

	for (attempt = 0;; attempt++)
	{
		bool		retry;

		http_start_attempt(s);
		/* Until the final status is known, or the transfer ends. */
		while (!s->done && !s->headers_done)
			http_step(s, true);
		/* An error status: read its (bounded) body to the end. */
		while (!s->done && s->status >= 300)
			http_step(s, true);

		if (s->done && s->result != CURLE_OK && s->status < 300)
			retry = http_retryable_result(s->result);
		else
			retry = s->status >= 500 || s->status == 429;
		if (!retry)
			break;
		if (attempt >= max_retries)
		{
			if (s->status >= 300)
				break;			/* the caller reports the status */
			http_transfer_error(s, attempt + 1);
		}
		http_backoff(attempt);
	}
	if (s->done && s->result != CURLE_OK && s->status < 300)
		http_transfer_error(s, attempt + 1);
	return s;
}

long
http_status(HttpStream *s)
{
	return s->status;
}

const char *
http_error_body(HttpStream *s)
{
	return s->errbody.data;
}

/* A header of the final response (case-insensitive name), or NULL. */
const char *
http_header(HttpStream *s, const char *name)
{
	ListCell   *lc;
	size_t		nlen = strlen(name);

	foreach(lc, s->resp_headers)
	{
		const char *h = lfirst(lc);

		if (pg_strncasecmp(h, name, nlen) == 0 && h[nlen] == ':')
		{
			h += nlen + 1;
			while (*h == ' ' || *h == '\t')
				h++;
			return h;
		}
	}
	return NULL;
}

/*
 * Up to len body bytes; 0 at the end of the body.  A transfer that breaks
 * is an error: the bytes already read cannot be taken back.
 */
size_t
http_read(HttpStream *s, char *dst, size_t len)
{
	size_t		avail;

	while (s->buf.len - s->bufpos == 0 && !s->done)
	{
		if (s->paused)
		{
			s->paused = false;
			curl_easy_pause(s->easy, CURLPAUSE_CONT);
		}
		http_step(s, s->buf.len - s->bufpos == 0);
	}
	avail = s->buf.len - s->bufpos;
	if (avail == 0)
	{
		if (s->result != CURLE_OK)
			http_transfer_error(s, 1);
		return 0;
	}
	if (avail > len)
		avail = len;
	memcpy(dst, s->buf.data + s->bufpos, avail);
	s->bufpos += avail;
	s->delivered += avail;
	if (s->bufpos == s->buf.len)
	{
		resetStringInfo(&s->buf);
		s->bufpos = 0;
	}
	return avail;
}

void
http_close(HttpStream *s)
{
	MemoryContextDelete(s->cxt);
}
