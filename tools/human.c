/*
 * human.c - numbers and progress for people (human.h).
 */
#include <stdarg.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "human.h"

const char *human_bytes(uint64_t n, char *buf)
{
	static const char *const unit[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
	if (n < 1024) {
		snprintf(buf, HUMAN_LEN, "%u B", (unsigned)n);
		return buf;
	}
	double v = (double)n / 1024;
	int u = 0;
	while (v >= 1024 && u < 5) {
		v /= 1024;
		u++;
	}
	snprintf(buf, HUMAN_LEN, "%.1f %s", v, unit[u]);
	return buf;
}

const char *human_secs(uint64_t sec, char *buf)
{
	if (sec < 120)
		snprintf(buf, HUMAN_LEN, "%u s", (unsigned)sec);
	else if (sec < 2 * 3600)
		snprintf(buf, HUMAN_LEN, "%u min", (unsigned)(sec / 60));
	else if (sec < 2 * 86400)
		snprintf(buf, HUMAN_LEN, "%.1f h", (double)sec / 3600);
	else
		snprintf(buf, HUMAN_LEN, "%u d", (unsigned)(sec / 86400));
	return buf;
}

/* Monotonic milliseconds. */
static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Lines on a terminal: at most 5 a second; elsewhere (asked for): one every 5 s. */
#define PROGRESS_TTY_MS 200
#define PROGRESS_LOG_MS 5000

void prog_init(struct progress *p, const char *what, bool force)
{
	p->what = what;
	p->tty = isatty(2);
	p->always = force;
	p->shown = false;
	p->start_ms = now_ms();
	/* on a terminal nothing for a command that ends within a second; asked for elsewhere, a
	 * first line at once (a log then shows that it started, and how far it got) */
	p->next_ms = p->tty ? p->start_ms + 1000 : p->start_ms;
}

bool prog_due(const struct progress *p)
{
	return (p->tty || p->always) && now_ms() >= p->next_ms;
}

void prog_show(struct progress *p, const char *fmt, ...)
{
	if (!prog_due(p))
		return;
	char line[256];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	uint64_t t = now_ms();
	if (p->tty) {
		fprintf(stderr, "\r\033[K%s: %s (%u s)", p->what, line,
		        (unsigned)((t - p->start_ms) / 1000));
		p->shown = true;
		p->next_ms = t + PROGRESS_TTY_MS;
	} else {
		fprintf(stderr, "%s: %s (%u s)\n", p->what, line,
		        (unsigned)((t - p->start_ms) / 1000));
		p->next_ms = t + PROGRESS_LOG_MS;
	}
	fflush(stderr);
}

void prog_clear(struct progress *p)
{
	if (p->shown) {
		fputs("\r\033[K", stderr);
		fflush(stderr);
		p->shown = false;
	}
}
