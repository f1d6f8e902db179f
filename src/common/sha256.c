/*
 * sha256.c
 *		SHA-256 digests (payload hashes, batch ids) and their hex form.
 *
 * Where the server was built with OpenSSL, this calls OpenSSL's EVP
 * interface directly rather than PostgreSQL's pg_cryptohash: the digest
 * is fetched once per context, where pg_cryptohash_init looks it up again
 * in OpenSSL's provider store, under a lock, for every text, which is some
 * 4% of a batch's time when every staged row's payload is hashed.  Without
 * OpenSSL it falls back on pg_cryptohash, which gives the same digests.
 */
#include "postgres.h"

#include "common/cryptohash.h"
#ifdef USE_OPENSSL
#include <openssl/evp.h>
#endif
#include "utils/builtins.h"
#include "utils/memutils.h"

#include "sha256.h"

/*
 * A SHA-256 context to digest many short texts with, one after another:
 * every staged row's payload is one.  With OpenSSL, the digest is fetched
 * once; pg_cryptohash_init would look it up again in OpenSSL's provider
 * store, under a lock, for every row (some 4% of a batch).  The OpenSSL
 * objects are freed with the memory context the context lives in, so an
 * error cannot leak them.
 */
struct Sha256Ctx
{
#ifdef USE_OPENSSL
	EVP_MD	   *md;
	EVP_MD_CTX *evp;
#else
	pg_cryptohash_ctx *ctx;
#endif
	MemoryContextCallback free_cb;
};

static void
sha256_free(void *arg)
{
	Sha256Ctx  *ctx = arg;

#ifdef USE_OPENSSL
	EVP_MD_CTX_free(ctx->evp);
	EVP_MD_free(ctx->md);
	ctx->evp = NULL;
	ctx->md = NULL;
#else
	pg_cryptohash_free(ctx->ctx);
	ctx->ctx = NULL;
#endif
}

/* A context for many digests, freed with the current memory context. */
Sha256Ctx *
reconcile_sha256_begin(void)
{
	Sha256Ctx  *ctx = palloc0(sizeof(Sha256Ctx));

	ctx->free_cb.func = sha256_free;
	ctx->free_cb.arg = ctx;
	MemoryContextRegisterResetCallback(CurrentMemoryContext, &ctx->free_cb);
#ifdef USE_OPENSSL
	ctx->md = EVP_MD_fetch(NULL, "SHA256", NULL);
	ctx->evp = EVP_MD_CTX_new();
	if (ctx->md == NULL || ctx->evp == NULL)
		elog(ERROR, "could not create SHA-256 context");
#else
	ctx->ctx = pg_cryptohash_create(PG_SHA256);
	if (ctx->ctx == NULL)
		elog(ERROR, "could not create SHA-256 context");
#endif
	return ctx;
}

/* Start a digest in ctx; feed it with reconcile_sha256_update. */
void
reconcile_sha256_init(Sha256Ctx *ctx)
{
#ifdef USE_OPENSSL
	if (EVP_DigestInit_ex2(ctx->evp, ctx->md, NULL) != 1)
		elog(ERROR, "could not compute SHA-256 digest");
#else
	if (pg_cryptohash_init(ctx->ctx) < 0)
		elog(ERROR, "could not compute SHA-256 digest: %s",
			 pg_cryptohash_error(ctx->ctx));
#endif
}

/* Feed len bytes of data into the digest. */
void
reconcile_sha256_update(Sha256Ctx *ctx, const void *data, size_t len)
{
#ifdef USE_OPENSSL
	if (EVP_DigestUpdate(ctx->evp, data, len) != 1)
		elog(ERROR, "could not compute SHA-256 digest");
#else
	if (pg_cryptohash_update(ctx->ctx, (const uint8 *) data, len) < 0)
		elog(ERROR, "could not compute SHA-256 digest: %s",
			 pg_cryptohash_error(ctx->ctx));
#endif
}

/* Finish the digest begun with reconcile_sha256_init. */
void
reconcile_sha256_final(Sha256Ctx *ctx, uint8 *digest)
{
#ifdef USE_OPENSSL
	unsigned int dlen;

	if (EVP_DigestFinal_ex(ctx->evp, digest, &dlen) != 1 ||
		dlen != RECONCILE_SHA256_LEN)
		elog(ERROR, "could not compute SHA-256 digest");
#else
	if (pg_cryptohash_final(ctx->ctx, digest, RECONCILE_SHA256_LEN) < 0)
		elog(ERROR, "could not compute SHA-256 digest: %s",
			 pg_cryptohash_error(ctx->ctx));
#endif
}

/* The digest of one text, reusing ctx's OpenSSL objects. */
void
reconcile_sha256_with(Sha256Ctx *ctx, const void *data, size_t len, uint8 *digest)
{
	reconcile_sha256_init(ctx);
	reconcile_sha256_update(ctx, data, len);
	reconcile_sha256_final(ctx, digest);
}

/* Free the OpenSSL objects now rather than with the memory context. */
void
reconcile_sha256_end(Sha256Ctx *ctx)
{
	sha256_free(ctx);
}

/* The digest of one text, for a single use. */
void
reconcile_sha256(const void *data, size_t len, uint8 *digest)
{
	Sha256Ctx  *ctx = reconcile_sha256_begin();

	reconcile_sha256_with(ctx, data, len, digest);
	reconcile_sha256_end(ctx);
}

/* Lowercase hex of len bytes into out, which holds 2 * len + 1 bytes. */
void
reconcile_hex(const uint8 *bytes, int len, char *out)
{
	uint64		n = hex_encode((const char *) bytes, len, out);

	out[n] = '\0';
}
