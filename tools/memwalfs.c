/*
 * memwalfs.c - entry point of the memwalfs binary: dispatches to the
 * subcommands listed below.  "memwalfs SUBCOMMAND --help" describes each.
 * mount(8) reaches "memwalfs mount" through the shell helper
 * tools/mount.fuse.memwalfs, which reorders mount(8)'s arguments.
 */
#include <stdio.h>
#include <string.h>

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
	fprintf(stderr, "memwalfs: unknown command '%s' (try 'memwalfs --help')\n", argv[1]);
	return 2;
}
