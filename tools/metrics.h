/*
 * metrics.h - the daemon's Prometheus endpoint (memwalfs mount --metrics-addr
 * HOST:PORT, -o metrics_addr=HOST:PORT): a small HTTP server thread that
 * answers GET /metrics with the text exposition format (version 0.0.4).
 *
 * It reports every counter of `memwalfs stats` (engine, store and
 * filesystem: mwfs_stats_format()) with its Prometheus type, cache hit
 * ratios, latency histograms of group commits, store requests per class and
 * fsync, the progress of the WAL check and replay while a mount opens, and
 * the follower lag.  docs/METRICS.md lists the metrics.
 *
 * Life cycle, in the daemon (tools/mount.c):
 *
 *   metrics_listen(addr, &fd)      before the fork: a bind error is a startup error
 *   metrics_start(fd, store, &m)   in the daemon, once the store is open
 *   metrics_progress(m, ...)       while the engine opens (WAL check, replay)
 *   metrics_attach(m, e, fs)       once engine and filesystem are open
 *   metrics_attach(m, NULL, NULL)  before they are closed
 *   metrics_stop(m)                before the store is closed
 *
 * Threads: metrics_progress() and metrics_attach() from any thread; the
 * others from the daemon's main thread.  A scrape reads the engine under
 * m's lock, so metrics_attach(m, NULL, NULL) returns only after any scrape
 * in progress is done with them.
 */
#ifndef MEMWALFS_TOOLS_METRICS_H
#define MEMWALFS_TOOLS_METRICS_H

#include <stddef.h>
#include <stdint.h>

struct engine;
struct mwfs;
struct store;
struct metrics;

/*
 * Parse addr ("127.0.0.1:9108", "[::1]:9108", "localhost:9108", ":9108" for
 * every interface), bind and listen.  *fd gets the listening socket
 * (O_CLOEXEC).  0, -EINVAL for an address of the wrong form, or -1 when it
 * cannot listen there; both after printing one line saying why on stderr.
 */
int metrics_listen(const char *addr, int *fd);

/*
 * Start serving on listening socket fd (taken over: closed by
 * metrics_stop(), or here on failure).  st (borrowed, may be NULL) is the
 * store whose request latencies are reported; it must outlive m.  0 or
 * -errno (*out untouched).
 */
int metrics_start(int fd, struct store *st, struct metrics **out);

/* What the daemon is doing while it opens: phase "check" or "replay", WAL entries. */
void metrics_progress(struct metrics *m, const char *phase, uint64_t done, uint64_t total);

/* Report engine e and filesystem fs (borrowed until the next call), or nothing (NULL). */
void metrics_attach(struct metrics *m, struct engine *e, struct mwfs *fs);

/* Stop the thread, close the socket, free m.  Accepts NULL. */
void metrics_stop(struct metrics *m);

/*
 * The exposition text of m (as GET /metrics answers) into a malloc()ed
 * buffer *out of *len bytes, owned by the caller.  0 or -ENOMEM.
 */
int metrics_render(struct metrics *m, char **out, size_t *len);

/*
 * The Prometheus type of stats line name: "counter", "gauge", or NULL for a
 * name this code does not know (exported untyped).  For tests.
 */
const char *metrics_stat_type(const char *name);

/* What stats line name means, in a few words (its HELP text), or NULL if unknown. */
const char *metrics_stat_help(const char *name);

#endif /* MEMWALFS_TOOLS_METRICS_H */
