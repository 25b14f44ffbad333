/*
 * log.c - the logging path shared by every layer (see log.h).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <syslog.h>

#include "log.h"

static _Atomic int level = -1; /* -1: not yet read from MEMWALFS_LOG */
static _Atomic bool use_syslog;

static const char *const names[] = {"error", "warn", "info", "debug"};

/* mw_log_capture_begin(): this thread's first error line since then. */
static _Thread_local bool capturing;
static _Thread_local char captured[1024];

static int current_level(void)
{
	int l = atomic_load_explicit(&level, memory_order_relaxed);
	if (l >= 0)
		return l;
	l = MW_LOG_WARN;
	const char *env = getenv("MEMWALFS_LOG");
	if (env) {
		for (int i = 0; i <= MW_LOG_DEBUG; i++)
			if (!strncmp(env, names[i], 3))
				l = i;
	}
	atomic_store(&level, l);
	return l;
}

void mw_log_set_level(enum mw_log_level l)
{
	atomic_store(&level, (int)l);
}

enum mw_log_level mw_log_get_level(void)
{
	return (enum mw_log_level)current_level();
}

void mw_log_to_syslog(bool on)
{
	if (on)
		openlog("memwalfs", LOG_PID, LOG_DAEMON);
	atomic_store(&use_syslog, on);
}

void mw_log(enum mw_log_level l, const char *file, int line, const char *fmt, ...)
{
	static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
	char msg[1024];
	va_list ap;

	if ((int)l > current_level())
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	bool debug = current_level() >= MW_LOG_DEBUG;
	if (l == MW_LOG_ERR && capturing) {
		if (!captured[0])
			snprintf(captured, sizeof(captured), "%s", msg);
		if (!debug)
			return;
	}
	const char *base = strrchr(file, '/');
	base = base ? base + 1 : file;
	if (atomic_load(&use_syslog)) {
		if (debug)
			syslog(prio[l], "%s %s:%d: %s", names[l], base, line, msg);
		else
			syslog(prio[l], "%s: %s", names[l], msg);
	} else if (debug) {
		fprintf(stderr, "memwalfs: %s %s:%d: %s\n", names[l], base, line, msg);
	} else {
		fprintf(stderr, "memwalfs: %s: %s\n", names[l], msg);
	}
}

void mw_log_capture_begin(void)
{
	capturing = true;
	captured[0] = 0;
}

const char *mw_log_capture_end(void)
{
	capturing = false;
	return captured;
}
