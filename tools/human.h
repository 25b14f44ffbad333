/*
 * human.h - numbers and progress for people, shared by the memwalfs commands:
 * byte counts in B/KiB/MiB/GiB/TiB, durations and ages in s/min/h/d, and a
 * progress line on stderr for long commands.
 */
#ifndef MEMWALFS_HUMAN_H
#define MEMWALFS_HUMAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Room for any human_bytes() / human_secs() text, NUL included. */
#define HUMAN_LEN 32

/*
 * n bytes as "512 B", "1.5 KiB", "849.9 MiB", "1.6 GiB" (binary units, one
 * decimal from KiB on) into buf (HUMAN_LEN bytes).  Returns buf.
 */
const char *human_bytes(uint64_t n, char *buf);

/* sec seconds as "45 s", "3 min", "2.5 h", "3 d" into buf (HUMAN_LEN bytes).  Returns buf. */
const char *human_secs(uint64_t sec, char *buf);

/*
 * A progress line on stderr for a long command.  On a terminal it is redrawn
 * in place at most 5 times a second from the first second on (prog_clear()
 * clears it); otherwise it prints nothing unless asked (always: a line at the
 * first prog_show() and then one every 5 s, for scripts and logs).
 * Single-threaded: one command's main loop.
 */
struct progress {
	const char *what;  /* "memwalfs fsck" and the like: the start of every line */
	bool tty;          /* stderr is a terminal: redraw one line */
	bool always;       /* not a terminal but asked for (--progress): a line every 5 s */
	bool shown;        /* a line is on the terminal (to clear) */
	uint64_t next_ms;  /* monotonic ms when the next line may be drawn */
	uint64_t start_ms; /* monotonic ms of prog_init() */
};

/* Start: what prefixes the lines; force: print lines on a non-terminal too. */
void prog_init(struct progress *p, const char *what, bool force);

/*
 * Show the state (a printf format and its arguments, without the prefix or a
 * newline) if a line is due; the text is formatted only then.
 */
void prog_show(struct progress *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Is a line due now (so that a caller can skip computing its figures)? */
bool prog_due(const struct progress *p);

/* Clear the line from the terminal (before other output, and at the end).  No-op otherwise. */
void prog_clear(struct progress *p);

#endif /* MEMWALFS_HUMAN_H */
