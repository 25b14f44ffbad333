/*
 * mdtest_tree.c - a metadata benchmark in the shape of mdtest -b B -z Z -I I.
 *
 * mdtest (part of IOR, not packaged in Debian) builds a directory tree of
 * branching factor B and depth Z, then has every process create, stat and
 * remove I directories and I files in each directory of the tree.  This
 * program does the same with fork()ed processes instead of MPI ranks, and
 * keeps mdtest's phases and their order:
 *
 *   tree-create   mkdir of every tree node, by one process (mdtest's "Tree creation")
 *   dir-create    each process: mkdir dir.mdtest.<rank>.<i> in every node
 *   dir-stat      stat of each of them
 *   dir-remove    rmdir of each of them
 *   file-create   each process: creat + close of file.mdtest.<rank>.<i> (0 bytes, like
 *                 mdtest without -w) in every node
 *   file-stat     stat of each file
 *   file-read     open + read (0 bytes, mdtest without -e) + close of each file
 *   file-remove   unlink of each file
 *   tree-remove   rmdir of every node, deepest first
 *
 * Processes share the tree (mdtest without -u) and meet at a barrier between
 * phases; a phase's time runs from the barrier that starts it until the last
 * process finishes it, and its rate is items / time, as mdtest reports.
 * Nodes are numbered breadth first like mdtest's (mdtest_tree.0 the top,
 * node k's children k*B+1 .. k*B+B); a tree of B=6, Z=4 has 1 + 6 + 36 + 216 +
 * 1296 = 1555 nodes, so -I 8 gives 12,440 items per process and phase.
 *
 * -W SECONDS is mdtest's stonewall: a create phase stops after SECONDS (each
 * process keeps the items it made, in tree order), and the stat, read and
 * remove phases work on what was created.  -n takes a list: "-n 1,8" runs all
 * the item phases with 1 process, then again with 8, on one tree.
 *
 * usage: mdtest_tree [-b B] [-z Z] [-I I] [-W SECONDS] [-n P[,P...]] DIR
 * output: one line per phase, key=value:
 *   phase=NAME procs=P items=N seconds=S rate=R errors=E
 * Exit status 0 when no call failed, 1 otherwise, 2 on bad usage.
 *
 * Built by tools/bench/run.sh with: cc -O2 -pthread -o mdtest_tree mdtest_tree.c
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_PROCS 64     /* sanity bound on -n */
#define MAX_NODES 200000 /* sanity bound on the tree size */
#define MAX_RUNS 8       /* entries in the -n list */

enum phase {
	DIR_CREATE,
	DIR_STAT,
	DIR_REMOVE,
	FILE_CREATE,
	FILE_STAT,
	FILE_READ,
	FILE_REMOVE,
	NPHASES
};

static const char *const phase_name[NPHASES] = {
    "dir-create", "dir-stat", "dir-remove", "file-create", "file-stat", "file-read", "file-remove",
};

/* Shared between the processes of one -n entry (MAP_SHARED | MAP_ANONYMOUS). */
struct shared {
	pthread_barrier_t barrier;      /* all workers meet here between phases */
	double start[NPHASES];          /* CLOCK_MONOTONIC at the phase's barrier (rank 0) */
	double end[NPHASES][MAX_PROCS]; /* when each rank finished the phase */
	long done[NPHASES][MAX_PROCS];  /* items each rank completed */
	int errors[NPHASES][MAX_PROCS]; /* failed calls per rank */
};

static char **g_node;      /* path of every tree node, breadth first, owned */
static long g_nodes;       /* entries in g_node */
static int g_items;        /* -I: items per node and process */
static double g_stonewall; /* -W: seconds a create phase may run, 0 = no limit */

static double mono(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Build the paths of the B-ary tree of depth Z under DIR; 0 or -ENOMEM. */
static int build_tree(const char *dir, int b, int z)
{
	long n = 1, level = 1;

	for (int d = 1; d <= z; d++) {
		level *= b;
		n += level;
		if (n > MAX_NODES)
			return -E2BIG;
	}
	g_node = calloc((size_t)n, sizeof(*g_node));
	if (!g_node)
		return -ENOMEM;
	for (long k = 0; k < n; k++) {
		const char *parent = k == 0 ? dir : g_node[(k - 1) / b];

		if (asprintf(&g_node[k], "%s/mdtest_tree.%ld", parent, k) < 0)
			return -ENOMEM;
	}
	g_nodes = n;
	return 0;
}

/* Path of item i of rank r in node k, kind "dir" or "file", into buf. */
static void item_path(char *buf, size_t cap, long k, const char *kind, int r, int i)
{
	snprintf(buf, cap, "%s/%s.mdtest.%d.%d", g_node[k], kind, r, i);
}

/* One operation of phase p on path; 0 or -errno. */
static int op(enum phase p, const char *path)
{
	struct stat st;
	char c;
	int fd;

	switch (p) {
	case DIR_CREATE:
		return mkdir(path, 0755) < 0 ? -errno : 0;
	case DIR_STAT:
	case FILE_STAT:
		return stat(path, &st) < 0 ? -errno : 0;
	case DIR_REMOVE:
		return rmdir(path) < 0 ? -errno : 0;
	case FILE_CREATE:
		fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0644);
		if (fd < 0)
			return -errno;
		return close(fd) < 0 ? -errno : 0;
	case FILE_READ:
		fd = open(path, O_RDONLY);
		if (fd < 0)
			return -errno;
		if (read(fd, &c, 0) < 0) {
			int e = -errno;

			close(fd);
			return e;
		}
		return close(fd) < 0 ? -errno : 0;
	case FILE_REMOVE:
		return unlink(path) < 0 ? -errno : 0;
	default:
		return -EINVAL;
	}
}

/*
 * Worker rank r: every phase over the items of this rank, in tree order.
 * A create phase stops at the stonewall; the phases after it (up to the next
 * create) handle the items it made.  Never returns.
 */
static void worker(struct shared *sh, int r)
{
	char path[4096];
	long made = 0;

	for (int p = 0; p < NPHASES; p++) {
		int create = p == DIR_CREATE || p == FILE_CREATE;
		const char *kind = p < FILE_CREATE ? "dir" : "file";
		long limit = create ? g_nodes * g_items : made, n = 0;
		double deadline;
		int errs = 0;

		pthread_barrier_wait(&sh->barrier);
		if (r == 0)
			sh->start[p] = mono();
		deadline = mono() + (g_stonewall > 0 ? g_stonewall : 1e9);
		for (long x = 0; x < limit; x++) {
			int rc;

			if (create && (x & 15) == 0 && mono() > deadline)
				break;
			item_path(path, sizeof(path), x / g_items, kind, r, (int)(x % g_items));
			rc = op((enum phase)p, path);
			if (rc < 0 && errs++ == 0)
				fprintf(stderr, "mdtest_tree: %s %s: %s\n", phase_name[p], path,
				        strerror(-rc));
			n++;
		}
		if (create)
			made = n;
		sh->end[p][r] = mono();
		sh->done[p][r] = n;
		sh->errors[p][r] = errs;
	}
	_exit(0);
}

/* Run the item phases with procs processes and print them; errors counted. */
static int run_procs(int procs)
{
	struct shared *sh;
	pthread_barrierattr_t ba;
	int errors = 0;
	pid_t pid[MAX_PROCS];

	sh = mmap(NULL, sizeof(*sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (sh == MAP_FAILED) {
		perror("mdtest_tree: mmap");
		return 1;
	}
	memset(sh, 0, sizeof(*sh));
	pthread_barrierattr_init(&ba);
	pthread_barrierattr_setpshared(&ba, PTHREAD_PROCESS_SHARED);
	pthread_barrier_init(&sh->barrier, &ba, (unsigned)procs);
	for (int r = 0; r < procs; r++) {
		pid[r] = fork();
		if (pid[r] < 0) {
			perror("mdtest_tree: fork");
			/* The barrier cannot be met: stop the ones started. */
			for (int j = 0; j < r; j++)
				kill(pid[j], SIGKILL);
			procs = r;
			errors++;
			break;
		}
		if (pid[r] == 0)
			worker(sh, r);
	}
	for (int r = 0; r < procs; r++) {
		int st;

		if (waitpid(pid[r], &st, 0) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
			errors++;
	}
	for (int p = 0; p < NPHASES && errors == 0; p++) {
		double end = sh->start[p];
		long items = 0;
		int errs = 0;

		for (int r = 0; r < procs; r++) {
			if (sh->end[p][r] > end)
				end = sh->end[p][r];
			items += sh->done[p][r];
			errs += sh->errors[p][r];
		}
		printf("phase=%s procs=%d items=%ld seconds=%.3f rate=%.1f errors=%d\n",
		       phase_name[p], procs, items, end - sh->start[p],
		       end > sh->start[p] ? items / (end - sh->start[p]) : 0.0, errs);
		errors += errs;
	}
	fflush(stdout);
	pthread_barrier_destroy(&sh->barrier);
	munmap(sh, sizeof(*sh));
	return errors;
}

/* Tree creation (top down) or removal (deepest first), timed and printed. */
static int tree_phase(int create)
{
	double t0 = mono(), dt;
	int errs = 0;

	for (long x = 0; x < g_nodes; x++) {
		long k = create ? x : g_nodes - 1 - x;
		int rc = create ? mkdir(g_node[k], 0755) : rmdir(g_node[k]);

		if (rc < 0 && errs++ == 0)
			fprintf(stderr, "mdtest_tree: %s %s: %s\n", create ? "mkdir" : "rmdir",
			        g_node[k], strerror(errno));
	}
	dt = mono() - t0;
	printf("phase=%s procs=1 items=%ld seconds=%.3f rate=%.1f errors=%d\n",
	       create ? "tree-create" : "tree-remove", g_nodes, dt, dt > 0 ? g_nodes / dt : 0.0,
	       errs);
	fflush(stdout);
	return errs;
}

int main(int argc, char **argv)
{
	int b = 6, z = 4, runs[MAX_RUNS] = {1}, nruns = 1, opt, errors = 0;
	char *list, *tok, *save;

	g_items = 8;
	while ((opt = getopt(argc, argv, "b:z:I:W:n:")) != -1) {
		switch (opt) {
		case 'b':
			b = atoi(optarg);
			break;
		case 'z':
			z = atoi(optarg);
			break;
		case 'I':
			g_items = atoi(optarg);
			break;
		case 'W':
			g_stonewall = atof(optarg);
			break;
		case 'n':
			nruns = 0;
			list = optarg;
			for (tok = strtok_r(list, ",", &save); tok && nruns < MAX_RUNS;
			     tok = strtok_r(NULL, ",", &save))
				runs[nruns++] = atoi(tok);
			break;
		default:
			goto usage;
		}
	}
	if (optind != argc - 1 || b < 1 || z < 0 || g_items < 1 || nruns < 1)
		goto usage;
	for (int i = 0; i < nruns; i++)
		if (runs[i] < 1 || runs[i] > MAX_PROCS)
			goto usage;
	if (build_tree(argv[optind], b, z) < 0) {
		fprintf(stderr, "mdtest_tree: tree too large or out of memory\n");
		return 2;
	}
	errors += tree_phase(1);
	for (int i = 0; i < nruns && errors == 0; i++)
		errors += run_procs(runs[i]);
	errors += tree_phase(0);
	for (long k = 0; k < g_nodes; k++)
		free(g_node[k]);
	free(g_node);
	return errors ? 1 : 0;
usage:
	fprintf(stderr, "usage: mdtest_tree [-b B] [-z Z] [-I I] [-W SECONDS] [-n P[,P...]] DIR\n");
	return 2;
}
