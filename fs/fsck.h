/*
 * fsck.h - the filesystem-level check (fs/fsck.c): the tree stored in the
 * engine (fs/schema.h) obeys its invariants.
 *
 * Checked, through engine.h only (nothing of the store's objects):
 *   - the superblock decodes and every inode number is below its next_ino;
 *   - every inode record decodes; symlinks carry their target inline;
 *   - every dentry decodes, its parent is an existing directory, its child
 *     exists and has the type the dentry says; a directory has one name and
 *     its record's parent field names the directory holding it;
 *   - every inode except the root is reachable from the root, or carries
 *     an orphan record (unlinked while open; reclaimed at next mount);
 *     every orphan record names an existing inode;
 *   - nlink: files have as many as dentries point at them, directories
 *     2 + their subdirectories;
 *   - extents belong to existing regular files, end within the size
 *     (others are leaked space), do not overlap, and add up to the stored
 *     bytes the inode records;
 *   - xattrs belong to existing inodes.
 * Read-only: a check on a live store sees one engine snapshot.
 */
#ifndef MEMWALFS_FS_FSCK_H
#define MEMWALFS_FS_FSCK_H

#include <stdbool.h>
#include <stdint.h>

struct engine;
struct store;

/*
 * Called once per problem: what names the record ("inode 12",
 * "dentry 1/'a'", "chunk 7/3", "superblock"), msg says what is wrong.
 * Both strings are valid only during the call.
 */
typedef void (*mwfs_fsck_fn)(void *arg, const char *what, const char *msg);

/* Totals of one check. */
struct mwfs_fsck_report {
	uint64_t inodes;   /* inode records */
	uint64_t dentries; /* directory entries */
	uint64_t extents;  /* data extents */
	uint64_t allocs;   /* allocated ranges (fallocate) */
	uint64_t xattrs;   /* extended attributes */
	uint64_t orphans;  /* orphan records */
	uint64_t problems; /* problems reported */
};

/*
 * Check the filesystem held by engine e (borrowed; any mode).  fn may be
 * NULL; *r (may be NULL) receives the totals.  Returns 0 when clean,
 * -EUCLEAN when problems were found, or the engine's error when the scan
 * could not complete (-EIO, -ENOMEM...).  Any thread.
 */
int mwfs_fsck(struct engine *e, mwfs_fsck_fn fn, void *arg, struct mwfs_fsck_report *r);

/*
 * mwfs_fsck() of a store with regions: es[i] (borrowed) is the engine of region rids[i]
 * (rids ascending, rids[0] == 0: region 0's), n of them; the tree is checked across them
 * (a region's root is reached through its entry in its parent's region).  Returns as
 * mwfs_fsck().
 */
int mwfs_fsck_regions(struct engine *const *es, const uint32_t *rids, size_t n, mwfs_fsck_fn fn,
                      void *arg, struct mwfs_fsck_report *r);
/*
 * Open an engine read-only on st (borrowed; no epoch is claimed, nobody is
 * fenced), run mwfs_fsck() and close it.  Returns as mwfs_fsck(), or the
 * error of engine_open().
 */
int mwfs_fsck_store(struct store *st, mwfs_fsck_fn fn, void *arg, struct mwfs_fsck_report *r);

/* What mwfs_salvage() kept and what it could not. */
struct mwfs_salvage_report {
	uint64_t files;           /* regular files reachable afterwards */
	uint64_t extents;         /* extents kept (their bytes read back) */
	uint64_t extents_lost;    /* extents dropped: their bytes could not be read */
	uint64_t bytes_lost;      /* their bytes (now holes) */
	uint64_t files_damaged;   /* files that lost bytes that way */
	uint64_t names_lost;      /* dentries dropped (their inode was gone, or damaged) */
	uint64_t inodes_made;     /* gone inodes made again (their data or names remained) */
	uint64_t relinked;        /* inodes linked into /lost+found */
	uint64_t records_fixed;   /* inode records rewritten (counts, sizes, parents) */
	uint64_t records_dropped; /* inode records that did not decode */
	bool superblock_written;  /* the superblock was written again */
};

/*
 * Make the tree held by e (a writer engine, normally opened with
 * engine_opts.salvage over a store that lost objects) consistent again over
 * what remains: unreadable extents become holes, names of gone inodes go,
 * gone inodes that still have data or names are made again, unreachable
 * ones are linked into /lost+found as "#<ino>", counts and sizes are set
 * from what remains, a gone superblock is written again (fs/salvage.c has
 * the rules).  Every loss is reported through fn (may be NULL) in words;
 * *r (may be NULL) gets the totals.  Writes through the engine and waits
 * until durable.  Returns 0 or the engine's error.  mwfs_fsck() of the
 * result is clean.  One thread; nothing else may write the engine meanwhile.
 */
int mwfs_salvage(struct engine *e, mwfs_fsck_fn fn, void *arg, struct mwfs_salvage_report *r);

#endif /* MEMWALFS_FS_FSCK_H */
