/*
 * mount.c - "memwalfs mount": mount a store (a local directory or
 * s3://bucket/prefix) as a FUSE filesystem.
 *
 *   memwalfs mount [options] STORE MOUNTPOINT
 *
 * Background by default: the process forks first (before any thread
 * exists), the child opens the store and the engine, mounts, and only then
 * tells the waiting parent that the mount succeeded; errors are printed on
 * the terminal and become the parent's exit status.  SIGTERM, SIGINT,
 * "umount" and "fusermount3 -u" end the session; the child then writes out
 * every buffer, commits (engine_close) and exits 0.  "memwalfs umount"
 * (tools/umount.c) waits for that and reports the final status; a writer
 * daemon holds a per-store lock until engine_close() has returned, so that
 * a new mount of the store waits for it instead of fencing it, and a second
 * writer mount of a live one is refused.  --takeover fences the live one on
 * purpose, in three steps that lose nothing it acknowledged: it hands over
 * (commits what it took and takes nothing more), the new mount claims the
 * store, the old one is told and stays fenced (takeover_sync(),
 * takeover_tell()).
 *
 * The mount helper (tools/mount.fuse.memwalfs, installed as
 * /sbin/mount.fuse.memwalfs) turns "mount -t fuse.memwalfs STORE DIR -o
 * opts" and fstab lines into this command; memwalfs' own settings may then
 * come as -o options (endpoint=, region=, cadence=, cache=, memtable=,
 * chunk=, single_writer, format, stack, takeover).
 *
 * Bad input changes nothing.  Everything that can be checked without the
 * store is checked before the fork: every option (the FUSE ones by a dry
 * parse in libfuse, mwfs_check_fuse_args()), the mount point (a directory,
 * not a dead FUSE mount, not already a live memwalfs mount unless --stack)
 * and a local store path (a directory if it exists).  Then the store is
 * opened and, before anything is written to it: a store that is neither
 * empty nor a memwalfs store is refused unless --format; and a writer mount
 * first opens the engine read-only and reads the superblock, so that a
 * store of a newer format version (manifest, WAL, SSTable or filesystem) or
 * a damaged one is refused before the writer open claims an epoch.
 *
 * This file: the replay progress and the report to the parent; the daemon
 * (fork, open, serve, close); the entry point cmd_mount (cmd_stats is in
 * stats.c).  The other parts of the command (tools/mount.h): usage and
 * option parsing (tools/mountopt.c), -o remount (tools/remount.c), the
 * checks before anything changes (tools/mountcheck.c), the takeover's
 * handover and fence (tools/takeover.c).  Elsewhere: the per-store lock,
 * the status files and the allocator policy (tools/daemon.c), the metrics
 * endpoint (tools/metrics.c), the store options shared with the other
 * commands (tools/storeopt.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include "commands.h"
#include "mount.h"
#include "engine.h"
#include "fs.h"
#include "log.h"
#include "store.h"
#include "storeopt.h"
#include "daemon.h"
#include "hold.h"
#include "snapmount.h"
#include "metrics.h"

/* How long a mount waits for a closing daemon of the same store (seconds). */
#define MOUNT_LOCK_WAIT_SEC 30

/* Tell the waiting parent how the mount went (status byte); closes the pipe. */
static void report(int *fd, unsigned char status)
{
	if (*fd < 0)
		return;
	ssize_t w;
	do
		w = write(*fd, &status, 1);
	while (w < 0 && errno == EINTR);
	close(*fd);
	*fd = -1;
}
/* ---- the daemon ----------------------------------------------------------- */

/*
 * The read tiers under the memory cache (docs/CACHE.md): S3 stores get a disk
 * cache (default directory: /var/cache/memwalfs/ (not root: ~/.cache/memwalfs/) and the
 * XXH3 of the store's name, endpoint included, so that two stores never share one) and coalesced
 * reads of 1 MiB regions, and a memory cache sized from the machine's memory
 * (a miss costs a GET; on a local store it costs a read the page cache may
 * serve); local stores neither, unless --cache-dir is given.
 */
static void read_tiers(struct mount_args *a)
{
	char name[PATH_MAX + 64];

	if (!a->local)
		a->eo.read_region_bytes = 1u << 20;
	if (!a->local && !a->cache_set)
		a->eo.cache_bytes = mwd_cache_default();
	if (a->disk_cache == 0 || (a->local && !a->cache_dir))
		return;
	if (!a->cache_dir) {
		if (mwd_store_name(a->store, &a->s3, name, sizeof(name)))
			return;
		/* root: /var/cache/memwalfs; others: $XDG_CACHE_HOME (~/.cache)/memwalfs */
		const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
		char base[PATH_MAX];
		if (getuid() == 0 || (!(xdg && *xdg) && !(home && *home)))
			snprintf(base, sizeof(base), "/var/cache/memwalfs");
		else if (xdg && *xdg)
			snprintf(base, sizeof(base), "%s/memwalfs", xdg);
		else
			snprintf(base, sizeof(base), "%s/.cache/memwalfs", home);
		snprintf(a->cache_dir_buf, sizeof(a->cache_dir_buf), "%.*s/%016llx", PATH_MAX - 32,
		         base, (unsigned long long)XXH3_64bits(name, strlen(name)));
		a->cache_dir = a->cache_dir_buf;
	}
	a->eo.disk_cache_dir = a->cache_dir;
	a->eo.disk_cache_bytes = a->disk_cache == UINT64_MAX ? 0 : a->disk_cache;
}
/*
 * The mount's disk cache (read_tiers()), opened once and shared by the engines of every
 * region (docs/REGIONS.md, "The disk cache"): a->eo.disk_cache, or NULL (no cache, or one
 * that cannot be used: logged, the mount goes on without).
 */
static struct engine_disk_cache *shared_disk_cache(struct mount_args *a)
{
	struct engine_disk_cache *c = NULL;
	const char *dir = a->eo.disk_cache_dir;
	if (!dir)
		return NULL;
	a->eo.disk_cache_dir = NULL;
	int rc = engine_disk_cache_open(dir, a->eo.disk_cache_bytes, &c);
	if (rc == -EBUSY)
		log_warn("disk cache %s is in use by another mount: no disk cache for this one",
		         dir);
	else if (rc)
		log_warn("disk cache %s cannot be used (%s): no disk cache", dir, strerror(-rc));
	a->eo.disk_cache = rc ? NULL : c;
	return a->eo.disk_cache;
}

/*
 * Before the final commit: did the store lose objects this filesystem needs (engine/check/watch.c;
 * checked now, so that an unmount right after a deletion fails too)?  If so, the final status
 * "lost: WHAT" into final (umount.c reads it), and the log says what to do.
 */
static bool engine_lost(struct engine *e, char *final, size_t len)
{
	struct engine_stats es;

	engine_check_store(e);
	engine_get_stats(e, &es);
	if (!es.store_lost)
		return false;
	snprintf(final, len, "lost: %s", es.store_lost_what);
	return true;
}

/*
 * A read-write mount of a store that a live mount holds follows it (tools/hold.c): a
 * following engine, read-only inside, the kernel mount still read-write.
 */
static void follow_mode(struct mount_args *a)
{
	a->eo.read_only = a->fo.read_only = true;
	a->eo.follow = true;
	a->eo.follow_interval_ms = a->follow_ms > 0 ? (unsigned)a->follow_ms : 0;
	a->eo.claim_epoch = 0;
}

static int serve(struct mount_args *a, int report_fd)
{
	struct store *st = NULL;
	struct engine *e = NULL;
	struct mwfs *fs = NULL;
	char spath[PATH_MAX] = "", info[PATH_MAX + 32], final[512] = "ok";
	int rc, status = 1, lock_fd = -1;
	bool serving = false, fenced = false, following = false;
	struct mwd_holder old = {0};
	struct hold *hold = NULL;
	struct bell *bell = NULL;
	struct engine_disk_cache *dcache = NULL;
	const bool ro = a->eo.read_only;       /* -o ro or --snapshot: writes nothing */
	struct snapmount *snap_regions = NULL; /* --snapshot: its regions besides region 0 */

	/*
	 * a read-only mount writes nothing: no local store directory, no probe of conditional
	 * create on S3, every write refused by the store itself (docs/REGIONS.md)
	 */
	rc = storeopt_open(a->store, &a->s3, a->eo.read_only ? STORE_OPEN_READ_ONLY : 0, "mount",
	                   &st);
	if (rc)
		goto out;
	if (mount_check_store_kind(a, st))
		goto out;
	if (a->metrics_fd >= 0) {
		rc = metrics_start(a->metrics_fd, st, &a->metrics);
		a->metrics_fd = -1; /* taken over */
		if (rc) {
			fprintf(stderr, "memwalfs: cannot start the metrics server: %s\n",
			        strerror(-rc));
			goto out;
		}
		a->eo.progress_arg = a->metrics;
	}
	if (!a->eo.read_only) {
		/* wait for a closing daemon of this store instead of fencing it (daemon.h) */
		char name[PATH_MAX + 64];
		rc = mwd_store_name(a->store, &a->s3, name, sizeof(name));
		if (!rc)
			rc = mwd_lock(name, a->mnt, a->store, MOUNT_LOCK_WAIT_SEC, a->takeover,
			              &old, &lock_fd);
		if (rc == -EBUSY)
			goto out; /* a daemon that does not finish its final commit (printed) */
		if (rc == -EALREADY) {
			/* a live writer mount on this machine: follow it (tools/hold.c) */
			fprintf(stderr,
			        "memwalfs: %s is mounted read-write at %s (daemon %ld) on this "
			        "machine; this mount follows it: reads are served, changes fail "
			        "with EROFS until that mount is unmounted, then the first change "
			        "here takes the store over. --takeover (-o takeover) fences it on "
			        "purpose.\n",
			        a->store, old.mnt, (long)old.pid);
			old.pid = 0;
			following = true;
		} else if (rc) {
			log_warn("no per-store lock (%s): a closing daemon of this store is not "
			         "waited for",
			         strerror(-rc));
		}
		if (mount_check_formats(a, st))
			goto out;
		if (hold_open(a, st, &hold))
			goto out;
		if (!following) {
			rc = hold_acquire(hold, a->takeover);
			if (rc < 0)
				goto out;
			following = rc == 1;
		}
		if (following)
			follow_mode(a);
		else if (old.pid)
			mount_takeover_sync(&old);
	} else if (!a->snapshot && hold_open_ro(a, st, &hold)) {
		/*
		 * -o ro: the region map only, no lease (docs/REGIONS.md): every region is
		 * followed.  A snapshot opens its regions at the snapshot (snapmount.c).
		 */
		goto out;
	}
	/*
	 * The bell (docs/REGIONS.md "The bell"): a read-write mount rings it after a quiet;
	 * its followers (a following mount's, a read-only mount's) stop polling while it is
	 * silent.  A following engine is registered once open (hold.c, below).
	 */
	if (!a->snapshot) {
		struct bell_opts bo = {.mount = hold ? hold_id(hold) : NULL,
		                       .interval_ms = a->bell_ms > 0 ? (unsigned)a->bell_ms : 0};
		rc = bell_open(st, &bo, &bell);
		if (rc) {
			fprintf(stderr, "memwalfs: cannot start the bell: %s\n", strerror(-rc));
			goto out;
		}
		if (hold) {
			hold_set_bell(hold, bell);
			a->eo.commit_fn = bell_commit_hook;
			a->eo.commit_arg = bell;
		}
		a->eo.follow_bell = a->bell_ms != 0;
	}
	mwd_status_gc();
	if (!mwd_status_path(getpid(), spath, sizeof(spath))) {
		snprintf(info, sizeof(info), "%ld %s", (long)getpid(), spath);
		a->fo.daemon_info = info;
	} else {
		spath[0] = 0;
	}
	a->eo.progress = mount_progress;
	a->eo.progress_arg = a->metrics;
	read_tiers(a);
	dcache = shared_disk_cache(a);
	rc = engine_open(st, &a->eo, &e);
	if (old.pid)
		mount_takeover_tell(&old, rc == 0);
	if (rc && hold && !following && !ro)
		hold_failed(hold);
	if (rc == -EAGAIN && hold && !following && !ro) {
		/* another mount claimed the store between our holder record and our claim */
		fprintf(stderr,
		        "memwalfs: another mount took %s over at the same moment; this "
		        "mount follows it\n",
		        a->store);
		following = true;
		follow_mode(a);
		rc = engine_open(st, &a->eo, &e);
	}
	struct engine_snapshot snap;
	if (rc == -ENOENT && a->snapshot &&
	    engine_snapshot_get(st, a->snapshot, &snap) == -ENOENT) {
		fprintf(
		    stderr,
		    "memwalfs: %s has no snapshot named %s (deleted?); memwalfs snapshot list %s "
		    "lists those it has\n",
		    a->store, a->snapshot, a->store);
		goto out;
	}
	if (rc) {
		fprintf(stderr, "memwalfs: cannot open the engine on %s: %s\n", a->store,
		        strerror(-rc));
		goto out;
	}
	if (hold && (rc = hold_held(hold, e)) != 0)
		log_warn("%s: %s", following ? "watching the holder" : "writing the lease",
		         strerror(-rc));
	if (hold)
		hold_hooks(hold, &a->fo);
	if (a->snapshot) {
		if ((rc = snapmount_open(a, st, &snap_regions)) != 0)
			goto out;
		snapmount_hooks(snap_regions, &a->fo);
	}
	if (!hold && bell && a->eo.follow && a->eo.follow_bell && bell_follow(bell, e))
		log_warn("bell: cannot register the follower (no memory): it polls as before");
	rc = mwfs_open(e, &a->fo, &fs);
	if (rc) {
		fprintf(stderr, "memwalfs: cannot open the filesystem on %s: %s\n", a->store,
		        rc == -EPROTONOSUPPORT ? "unknown format version" : strerror(-rc));
		goto out;
	}
	char prog[] = "memwalfs", dash_o[] = "-o", dash_d[] = "-d";
	char *fargv[] = {prog, dash_o, a->fuse_opts, a->debug ? dash_d : NULL, NULL};
	int fargc = a->debug ? 4 : 3;
	if (hold)
		hold_set_fs(hold, fs);
	rc = mwfs_mount(fs, fargc, fargv, a->mnt);
	if (rc) {
		fprintf(stderr, "memwalfs: cannot mount %s at %s\n", a->store, a->mnt);
		goto out;
	}
	if (a->fo.kernel_readahead) { /* before the loop answers INIT: see
		                         mwd_set_kernel_readahead() */
		int rr = mwd_set_kernel_readahead(a->mnt, a->fo.kernel_readahead);
		if (rr)
			log_info("kernel read-ahead of %s left as it was (128K by default): %s",
			         a->mnt,
			         rr == -ENOENT ? "its device was not found" : strerror(-rr));
		else
			log_info("kernel read-ahead of %s: %lluK", a->mnt,
			         (unsigned long long)(a->fo.kernel_readahead >> 10));
	}
	metrics_attach(a->metrics, e, fs);
	/* mounted: let the parent go, detach from the terminal */
	if (a->pidfile) {
		FILE *pf = fopen(a->pidfile, "w");
		if (!pf || fprintf(pf, "%ld\n", (long)getpid()) < 0 || fclose(pf))
			fprintf(stderr, "memwalfs: writing %s: %s\n", a->pidfile, strerror(errno));
	}
	if (spath[0]) {
		rc = mwd_status_write(spath, "serving");
		if (rc)
			fprintf(stderr, "memwalfs: writing %s: %s\n", spath, strerror(-rc));
		serving = !rc;
	}
	report(&report_fd, 0);
	if (!a->foreground) {
		int nfd = open("/dev/null", O_RDWR);
		if (nfd >= 0) {
			dup2(nfd, 0);
			dup2(nfd, 1);
			dup2(nfd, 2);
			if (nfd > 2)
				close(nfd);
		}
		mw_log_to_syslog(true);
		if (chdir("/"))
			log_warn("chdir /: %s", strerror(errno));
	}
	rc = mwfs_loop(fs);
	if (rc)
		log_err("the FUSE session ended with %s", strerror(-rc));
	status = 0;
out:
	metrics_attach(a->metrics, NULL, NULL); /* a scrape in progress finishes first */
	if (hold && hold_engine(hold))
		e = hold_engine(hold); /* the writer, if this mount took the store over */
	rc = mwfs_close(fs);
	if (rc == -ESTALE) {
		fenced = true;
	} else if (rc) {
		log_err("writing out buffered data at unmount: %s", strerror(-rc));
		snprintf(final, sizeof(final), "error: writing out buffered data: %s",
		         strerror(-rc));
		status = 1;
	}
	uint64_t changes_lost = 0;
	char over[32] = "the filesystem"; /* what another mount took over, when fenced */
	if (e) {
		struct engine_stats es;
		engine_get_stats(e, &es);
		/* final once the writer stopped: nothing is applied after */
		changes_lost = es.batches_lost;
	}
	bool store_lost = e && engine_lost(e, final, sizeof(final));
	bell_unfollow(bell, e); /* before its close: the bell no longer wakes it */
	rc = engine_close(e);
	if (store_lost) {
		status = 1; /* final says it; the close's error is its consequence */
	} else if (rc == -ESTALE) {
		fenced = true;
	} else if (rc) {
		log_err("final commit: %s", strerror(-rc));
		if (!strcmp(final, "ok"))
			snprintf(final, sizeof(final), "error: final commit: %s", strerror(-rc));
		status = 1;
	}
	/* the other regions' final commits: a region another mount took over while this one
	 * wrote it fenced this mount there, as a takeover of region 0 fences it everywhere */
	struct hold_region_err rerr = {0};
	int rrc = hold_close_regions(hold, &rerr);
	if (rrc == -ESTALE && !fenced && !store_lost) {
		fenced = true;
		changes_lost = rerr.changes_lost;
		snprintf(over, sizeof(over), "region %u", rerr.rid);
	} else if (rrc && !store_lost && !fenced && !status) {
		snprintf(final, sizeof(final), "error: final commit of region %u: %s", rerr.rid,
		         strerror(-rrc));
		status = 1;
	}
	if (fenced && !store_lost) {
		/* a newer writer claimed the store (engine.c: fencing); umount.c reads this */
		char what[256];
		if (changes_lost)
			snprintf(
			    what, sizeof(what),
			    "%llu change%s made here (each a write, create, rename... that was "
			    "readable here and that close() may have acknowledged) %s never "
			    "committed and %s lost; every change after this mount learned it was "
			    "fenced failed with EIO",
			    (unsigned long long)changes_lost, changes_lost == 1 ? "" : "s",
			    changes_lost == 1 ? "was" : "were", changes_lost == 1 ? "is" : "are");
		else
			snprintf(
			    what, sizeof(what),
			    "every change made here after this mount learned it was fenced failed "
			    "with EIO; no change it had taken was lost");
		log_err("another mount of %s took %s over: this mount was fenced: %s", a->store,
		        over, what);
		if (strcmp(over, "the filesystem"))
			snprintf(final, sizeof(final),
			         "fenced: %s was taken over by another mount: %s", over, what);
		else
			snprintf(final, sizeof(final), "fenced: %s", what);
		status = 1;
	}
	hold_close(hold); /* after the final commit: the store is free now */
	snapmount_close(snap_regions);
	engine_disk_cache_close(dcache); /* after every engine that used it */
	bell_close(bell); /* after every engine's close: their final commits' ring goes out */
	metrics_stop(a->metrics);
	store_close(st);
	/* everything is committed (or reported): tell "memwalfs umount", then unlock */
	if (serving) {
		rc = mwd_status_write(spath, final);
		if (rc)
			log_err("writing %s: %s", spath, strerror(-rc));
	}
	mwd_unlock(lock_fd);
	report(&report_fd, (unsigned char)status);
	return status;
}

/* Say, in one line, why /dev/fuse cannot be opened (access() failed with err) and what to do. */
static void dev_fuse_error(int err)
{
	struct stat sb;
	if (err == ENOENT || err == ENODEV || stat("/dev/fuse", &sb)) {
		fprintf(stderr,
		        "memwalfs: /dev/fuse: %s: load the fuse module (modprobe fuse), or "
		        "in a container pass the device in (docker run --device /dev/fuse)\n",
		        strerror(err));
		return;
	}
	if (err != EACCES && err != EPERM) {
		fprintf(stderr, "memwalfs: /dev/fuse: %s\n", strerror(err));
		return;
	}
	/* libfuse opens /dev/fuse itself, and mounts through the setuid fusermount3 only when
	 * the mount(2) is refused: a user who cannot open the device cannot mount at all */
	struct group *g = getgrgid(sb.st_gid);
	fprintf(stderr,
	        "memwalfs: /dev/fuse: permission denied: user %u may not open it (mode %04o, "
	        "group %s); ask root to make it usable (chmod 0666 /dev/fuse, the usual mode, with "
	        "which libfuse mounts through fusermount3; or chmod 0660 and add the user to group "
	        "%s), or mount as root\n",
	        (unsigned)geteuid(), (unsigned)(sb.st_mode & 07777), g ? g->gr_name : "?",
	        g ? g->gr_name : "?");
}

/* Parse and check, then serve in the foreground or fork and wait for the child's verdict. */
static int run_mount(struct mount_args *a, int argc, char **argv)
{
	if (mount_parse_args(a, argc, argv))
		return 2;
	if (a->remount)
		return mount_remount(a);
	/* before any credential is read; the daemon (forked, not exec'd) inherits it */
	if (mwd_set_dumpable(a->dumpable))
		return 1;
	if (a->late[0] && a->foreground)
		fprintf(stderr,
		        "memwalfs: %s not applied with -f (set them with memwalfs mount -o "
		        "remount,%s MOUNTPOINT)\n",
		        a->late, a->late);
	if (access("/dev/fuse", R_OK | W_OK)) {
		dev_fuse_error(errno);
		return 1;
	}
	a->local = strncmp(a->store, "s3://", 5) != 0;
	if (mount_check_mountpoint(a) || (a->local && mount_check_local_store(a)))
		return 1;
	if (mount_check_fuse_opts(a) || mount_check_pidfile(a))
		return 2;
	/* bound before anything is opened: a port in use is a startup error */
	if (a->metrics_addr) {
		int r = metrics_listen(a->metrics_addr, &a->metrics_fd);
		if (r)
			return r == -EINVAL ? 2 : 1;
	}
	if (a->foreground)
		return serve(a, -1);

	/* fork before any thread exists; the child reports success through a pipe */
	int p[2];
	if (pipe(p)) {
		perror("memwalfs: pipe");
		return 1;
	}
	pid_t pid = fork();
	if (pid < 0) {
		perror("memwalfs: fork");
		return 1;
	}
	if (pid == 0) {
		close(p[0]);
		setsid();
		signal(SIGHUP, SIG_IGN);
		return serve(a, p[1]);
	}
	close(p[1]);
	if (a->metrics_fd >= 0) /* the daemon serves it */
		close(a->metrics_fd);
	unsigned char status = 1;
	ssize_t r;
	do
		r = read(p[0], &status, 1);
	while (r < 0 && errno == EINTR);
	close(p[0]);
	if (r != 1) {
		int ws;
		waitpid(pid, &ws, 0);
		return 1;
	}
	if (status != 0) {
		waitpid(pid, NULL, 0);
		return status;
	}
	if (a->late[0]) { /* mounted: the flags libfuse cannot pass (parse_o()) */
		a->raw_o[0] = a->late;
		a->n_raw = 1;
		a->setting = NULL; /* the memwalfs settings were for the mount */
		status = (unsigned char)mount_remount(a);
	}
	return status;
}

/* ---- entry point: memwalfs mount -------------------------------------------- */

/* Entry point for the command table in tools/memwalfs.c. */
int cmd_mount(int argc, char **argv);
/* memwalfs mount: see the file comment.  Returns the exit status. */
int cmd_mount(int argc, char **argv)
{
	struct mount_args a;
	mwd_memory_policy();
	memset(&a, 0, sizeof(a));
	a.metrics_fd = -1;
	s3_opts_default(&a.s3);
	engine_opts_default(&a.eo);
	mwfs_opts_default(&a.fo);
	a.follow_ms = -1;
	a.bell_ms = -1;
	a.disk_cache = UINT64_MAX;
	int status = run_mount(&a, argc, argv);
	for (int i = 0; i < a.n_copies; i++)
		free(a.o_copies[i]);
	return status;
}
