/*
 * sha256.h
 *		SHA-256 digests and their lowercase hex form (sha256.c).
 */
#ifndef RECONCILE_SHA256_H
#define RECONCILE_SHA256_H

#define RECONCILE_SHA256_LEN 32
#define RECONCILE_HEX_LEN (RECONCILE_SHA256_LEN * 2)

typedef struct Sha256Ctx Sha256Ctx;

extern Sha256Ctx *reconcile_sha256_begin(void);
extern void reconcile_sha256_with(Sha256Ctx *ctx, const void *data,
								  size_t len, uint8 *digest);
extern void reconcile_sha256_end(Sha256Ctx *ctx);
/* A digest fed in pieces: init, update as often as needed, final. */
extern void reconcile_sha256_init(Sha256Ctx *ctx);
extern void reconcile_sha256_update(Sha256Ctx *ctx, const void *data, size_t len);
extern void reconcile_sha256_final(Sha256Ctx *ctx, uint8 *digest);
extern void reconcile_sha256(const void *data, size_t len, uint8 *digest);
extern void reconcile_hex(const uint8 *bytes, int len, char *out);

#endif							/* RECONCILE_SHA256_H */
