/*
 * memwalfs.c - entry point of the memwalfs binary: dispatches to the
 * subcommands listed below.  "memwalfs SUBCOMMAND --help" describes each.
 * mount(8) reaches "memwalfs mount" in one of two ways (docs/INSTALL.md):
 * through the shell helper tools/mount.fuse.memwalfs when it is installed
 * where mount(8) looks (/sbin), or else through libfuse's generic helper
 * mount.fuse3, which runs "memwalfs STORE MOUNTPOINT -o OPTIONS" found on
 * PATH: main() takes that form as "memwalfs mount STORE MOUNTPOINT -o ...".
 */
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "config.h"
#include "commands.h"

const struct command memwalfs_commands[] = {
    {"mount", cmd_mount, "mount a store (directory or s3://bucket/prefix) as a filesystem"},
    {"umount", cmd_umount, "unmount and wait until the daemon has committed everything"},
    {"sync", cmd_sync, "commit everything written to a mount now and wait until it is durable"},
    {"stats", cmd_stats, "print the statistics of a mounted filesystem"},
    {"objects", cmd_objects, "list, read and inspect the objects of a store (bucket or directory)"},
    {"inspect", cmd_inspect, "show the manifest, SSTables, WAL, packs and orphans of a store"},
    {"fsck", cmd_fsck,
     "check a store's engine objects and filesystem (read-only; safe when mounted)"},
    {"region", cmd_region, "who writes a store (its regions and their holders); hand it back"},
    {"snapshot", cmd_snapshot, "create, list and delete snapshots (pinned states) of a store"},
    {NULL, NULL, NULL},
};

static void usage(FILE *f)
{
	fprintf(f, "usage: memwalfs [--help] [--version] COMMAND [ARGS...]\n\n"
	           "memwalfs is a POSIX filesystem on object storage (an S3 bucket or a local\n"
	           "directory), built on a group-committed write-ahead log.\n\ncommands:\n");
	for (const struct command *c = memwalfs_commands; c->name; c++)
		fprintf(f, "  %-10s %s\n", c->name, c->summary);
	fprintf(f, "\nRun 'memwalfs COMMAND --help' for the options of a command.\n");
}

/* Print "a, b, c" of the command names (for the unknown command message). */
static void list_commands(FILE *f)
{
	for (const struct command *c = memwalfs_commands; c->name; c++)
		fprintf(f, "%s%s", c->name, c[1].name ? ", " : "");
}

/*
 * Is this mount.fuse3's form "memwalfs STORE MOUNTPOINT -o OPTS" (fstab and
 * mount -t fuse.memwalfs without our helper)?  STORE then names a store: an
 * s3:// URL or a path with a '/', or an existing directory; a mistyped command
 * word is neither, and gets the unknown command message instead.
 */
static bool mount_fuse_form(int argc, char **argv)
{
	struct stat sb;
	if (argc < 3 || argv[1][0] == '-' || argv[2][0] == '-')
		return false;
	return strchr(argv[1], '/') || (!stat(argv[1], &sb) && S_ISDIR(sb.st_mode));
}

int main(int argc, char **argv)
{
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
		usage(stdout);
		return 0;
	}
	if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") ||
	    !strcmp(argv[1], "version")) {
		printf("memwalfs %s\n", MEMWALFS_VERSION);
		return 0;
	}
	for (const struct command *c = memwalfs_commands; c->name; c++)
		if (!strcmp(argv[1], c->name))
			return c->run(argc - 1, argv + 1);
	if (mount_fuse_form(argc, argv)) {
		static char mount_word[] = "mount"; /* = memwalfs mount STORE MNT -o OPTS */
		argv[0] = mount_word;
		return cmd_mount(argc, argv);
	}
	if (argv[1][0] == '-') {
		fprintf(stderr,
		        "memwalfs: unknown option '%s': before a command only --help and --version "
		        "are valid; a command's options follow it (memwalfs COMMAND --help)\n",
		        argv[1]);
		return 2;
	}
	fprintf(stderr, "memwalfs: unknown command '%s'; the commands are ", argv[1]);
	list_commands(stderr);
	fprintf(stderr, " (memwalfs --help says what each does)\n");
	return 2;
}
