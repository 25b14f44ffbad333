/*
 * commands.h - the subcommands of the memwalfs binary.  Each takes the
 * arguments after its name (argv[0] is the subcommand name) and returns the
 * process exit status.  tools/memwalfs.c holds the table.
 */
#ifndef MEMWALFS_COMMANDS_H
#define MEMWALFS_COMMANDS_H

struct command {
	const char *name;                  /* word after "memwalfs" */
	int (*run)(int argc, char **argv); /* exit status */
	const char *summary;               /* one line for --help */
};

/* The subcommands (each in its own file under tools/). */
int cmd_mount(int argc, char **argv);    /* tools/mount.c */
int cmd_stats(int argc, char **argv);    /* tools/stats.c */
int cmd_umount(int argc, char **argv);   /* tools/umount.c */
int cmd_sync(int argc, char **argv);     /* tools/sync.c */
int cmd_objects(int argc, char **argv);  /* tools/objects.c */
int cmd_inspect(int argc, char **argv);  /* tools/inspect.c */
int cmd_fsck(int argc, char **argv);     /* tools/inspect.c */
int cmd_snapshot(int argc, char **argv); /* tools/snapshot.c */
int cmd_region(int argc, char **argv);   /* tools/region.c */

/* The table, terminated by a NULL name (tools/memwalfs.c). */
extern const struct command memwalfs_commands[];

#endif /* MEMWALFS_COMMANDS_H */
