/*
 * regmap.h - the region map's objects, regions/<version:20> (engine/region/regmap.c,
 * engine/region/regmapfmt.c, docs/REGIONS.md "The region map"): their text format, for
 * regmap.c, GC, the checker, inspect and tests.  The API is in engine.h, "Regions: the
 * map".
 *
 * Text, one field a line, "name value"; the first line "memwalfs-regions 1":
 *
 *   memwalfs-regions 1
 *   version 3
 *   max_rid 3
 *   region 1 root 1099511627777 parent 1 name home since 1767225600 path /home
 *   region 3 root 3298534883329 parent 1 name my%20data since 1767225612 path /my%20data
 *
 * A region line is the rid, then pairs "key value" separated by single spaces.  name
 * and path are percent-encoded: every byte that is not printable ASCII or is a space or
 * '%' is written "%XX" (two uppercase hex digits), so a value holds no space and no
 * newline.  Readers skip lines and region keys they do not know, refuse a newer format
 * version with -EPROTONOSUPPORT and anything malformed (a missing or repeated field, a
 * bad number, a rid out of range or seen twice, a root not in its rid's range, a name
 * with '/', a bad escape, version not the name's) with -EUCLEAN, logging either with
 * the object's name.
 */
#ifndef MEMWALFS_REGMAP_H
#define MEMWALFS_REGMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "engine.h"

#define REGMAP_MAGIC "memwalfs-regions"
#define REGMAP_FORMAT_VERSION 1
/* Map objects larger than this are refused as corrupt (a region line is < 4 KiB). */
#define REGMAP_OBJECT_MAX (64u << 20)
/* GC keeps the newest this many versions (older ones go once older than the grace). */
#define REGMAP_KEEP 4
/* region_map_add() tries this many versions before -EAGAIN. */
#define REGMAP_ADD_TRIES 16
/* The longest encoding of a string of n bytes (each byte "%XX"), plus the NUL. */
#define REGMAP_ENC_MAX(n) (3 * (n) + 1)

/*
 * Percent-encode the NUL-terminated s into dst (cap bytes, at least
 * REGMAP_ENC_MAX(strlen(s))): bytes below 0x21, above 0x7e and '%' become "%XX".
 * Returns dst.
 */
char *regmap_encode(char *dst, size_t cap, const char *s);

/* Is e a valid entry (rid in range, root in its range, name, path, parent)? */
bool regmap_entry_valid(const struct region_entry *e);

/* Encode m into *out (malloc()ed, NUL-terminated; *len without the NUL).  -ENOMEM. */
int regmap_format(const struct region_map *m, char **out, size_t *len);

/*
 * Decode the object name (regions/<version>; for log lines, and its version must be the
 * object's) into *m (free with region_map_free()).  0, -EUCLEAN, -EPROTONOSUPPORT,
 * -ENOMEM.
 */
int regmap_parse(const char *name, const void *buf, size_t len, struct region_map *m);

#endif /* MEMWALFS_REGMAP_H */
