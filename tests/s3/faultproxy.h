/*
 * faultproxy.h - drive tests/s3/faultproxy.py from a C test: start it in
 * front of a real S3 server, arm faults, read its counters, stop it.
 *
 * The proxy answers or breaks the first N matching requests (HTTP 5xx/429/
 * 403/400, a reset mid-request, a stall past the client's timeout, or a
 * request forwarded to the server whose answer is then lost) and passes
 * everything else through unchanged; see the script's header.  One proxy
 * per test program; single-threaded use.
 */
#ifndef MEMWALFS_FAULTPROXY_H
#define MEMWALFS_FAULTPROXY_H

#include <stdbool.h>

/* A running proxy. */
struct faultproxy {
	int pid;       /* the python3 process */
	int stdin_fd;  /* its stdin: closing it makes the proxy exit */
	unsigned port; /* it listens on 127.0.0.1:port */
	char url[64];  /* "http://127.0.0.1:port" */
};

/* Counters of the proxy since the last clear. */
struct faultproxy_stats {
	unsigned seen;      /* requests received */
	unsigned faulted;   /* requests that got the armed fault */
	unsigned forwarded; /* requests sent to the real server */
	unsigned armed;     /* faults still to inject */
};

/*
 * Start script (faultproxy.py) in front of upstream ("http://host:port").
 * Waits until it listens.  0, or a negative errno (logged on stderr).
 */
int faultproxy_start(struct faultproxy *p, const char *script, const char *upstream);

/*
 * Arm fault (e.g. "503", "reset", "stall", "land_reset", see the script) for
 * the next count requests with this method (NULL: any) whose request target
 * contains path (NULL: any); stall_sec for the stalling faults (0: 5 s).
 * Replaces what was armed; counters are kept.  0 or a negative errno.
 */
int faultproxy_arm(struct faultproxy *p, const char *fault, unsigned count, const char *method,
                   const char *path, unsigned stall_sec);

/* Disarm and zero the counters.  0 or a negative errno. */
int faultproxy_clear(struct faultproxy *p);

/* Read the counters.  0 or a negative errno. */
int faultproxy_stats(struct faultproxy *p, struct faultproxy_stats *st);

/* Stop the proxy and wait for it.  Accepts a proxy that never started. */
void faultproxy_stop(struct faultproxy *p);

#endif /* MEMWALFS_FAULTPROXY_H */
