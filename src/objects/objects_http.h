/*
 * objects_http.h
 *		One HTTP GET read as a stream through libcurl (objects_http.c), with
 *		bounded retries, interrupts honoured and bounded memory; the caller
 *		signs each attempt.
 */
#ifndef RECONCILE_OBJECTS_HTTP_H
#define RECONCILE_OBJECTS_HTTP_H

#include "lib/stringinfo.h"

struct curl_slist;

/* Builds the request headers of one attempt (a signature is per attempt). */
typedef struct curl_slist *(*HttpHeadersFn) (void *arg);

typedef struct HttpStream HttpStream;

extern HttpStream *http_open(const char *url, const char *ca_file,
							 HttpHeadersFn headers, void *arg,
							 const char *what, int max_retries);
extern long http_status(HttpStream *s);
extern const char *http_error_body(HttpStream *s);
extern const char *http_header(HttpStream *s, const char *name);
extern size_t http_read(HttpStream *s, char *buf, size_t len);
extern void http_close(HttpStream *s);
extern struct curl_slist *http_header_append(struct curl_slist *list, const char *fmt,...) pg_attribute_printf(2, 3);
extern void http_backoff(int attempt);

#endif							/* RECONCILE_OBJECTS_HTTP_H */
