/*
 * manifest.h
 *		A batch's manifest (manifest.c): parsed, canonical, with its batch id.
 */
#ifndef RECONCILE_MANIFEST_H
#define RECONCILE_MANIFEST_H

#include "utils/jsonb.h"

#include "common/sha256.h"

#define MANIFEST_ABBREV_LEN 16

typedef struct ManifestEntry
{
	char		abbrev[MANIFEST_ABBREV_LEN];	/* for the sort: manifest.c */
	char	   *object_key;
	char	   *version_id;
	char	   *content_hash;
	int64		rows;
} ManifestEntry;

typedef enum ManifestField
{
	MANIFEST_OBJECT_KEY,
	MANIFEST_VERSION_ID,
	MANIFEST_CONTENT_HASH,
	MANIFEST_ROWS,
	MANIFEST_NFIELDS
} ManifestField;

typedef struct Manifest
{
	int			nentries;
	ManifestEntry *entries;		/* sorted by object_key, version_id, bytewise */
	int			repeated_object;	/* first entry of an object listed in two
									 * versions, or -1 */
	size_t		common_prefix;	/* of every object key: manifest.c */
	char		batch_id[RECONCILE_HEX_LEN + 1];
	Datum		arrays[MANIFEST_NFIELDS];	/* manifest_array(), made once */
} Manifest;

extern Manifest *manifest_parse(Jsonb *manifest);
extern Manifest *manifest_read_relation(Oid relid);
extern int	manifest_find(const Manifest *manifest, const char *object_key,
						  const char *version_id);
extern Datum manifest_array(Manifest *manifest, ManifestField field);
extern void manifest_array_release(Manifest *manifest, ManifestField field);

#endif							/* RECONCILE_MANIFEST_H */
