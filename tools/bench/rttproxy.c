/*
 * rttproxy.c - a TCP proxy that delays each direction by a fixed time, so that
 * the benchmark can put its local S3 server as far away as a real one.
 *
 * usage: rttproxy --listen HOST:PORT --to HOST:PORT --delay-ms D
 *                 [--cap-mib N] [--no-handshake] [--stats FILE]
 *
 * What it models.  Real S3 answers a small request in tens of milliseconds:
 * the round trip, not the bandwidth, is what a client pays.  Every byte the
 * proxy reads from one side at time t it writes to the other side at t + D,
 * so a request/response round trip grows by 2D and the bandwidth stays what
 * the two ends can do: the proxy reads as fast as the sender sends and holds
 * what it read in a queue per direction, each chunk stamped with its due
 * time.  At 600 MB/s and D = 10 ms, 6 MB are in flight in one direction.
 * Above --cap-mib queued bytes (64 MiB by default) a direction stops reading
 * and TCP's flow control holds the sender, like a full pipe.
 *
 * A new connection also pays the TCP handshake, one round trip before the
 * client may send: the client's connect() to the proxy completes at once, so
 * the bytes it sends are held until 2D after the accept and then delayed by
 * D like all others (a connection per request costs 2 round trips, as it
 * would).  --no-handshake turns that off.
 *
 * The loop.  One thread, one epoll set, every socket edge-triggered and
 * nonblocking with TCP_NODELAY.  Each direction knows whether its source had
 * bytes last time (readable) and whether its destination refused more
 * (wr_blocked); an event only sets those flags and the direction is then
 * serviced: read, write what is due.  Directions whose first queued chunk is
 * not due yet sit in a min-heap keyed by that due time; one timerfd is armed
 * at the heap's top.  A direction that read its budget (READ_BUDGET) in one
 * turn goes on the runnable list, so that one fast sender cannot starve the
 * others' due writes.  With D = 0 (and so no handshake hold), what is read is
 * sent at once from the read buffer when nothing waits before it: no timer,
 * no copy, so that the proxy's own cost can be measured.
 *
 * Ends.  EOF from one side is queued like data and forwarded, when due, as
 * shutdown(SHUT_WR) of the other side; the connection closes when both
 * directions have forwarded their EOF.  An error or a reset on either side
 * closes both at once, with an RST (SO_LINGER 0): that one is not delayed.
 *
 * Output: one line at start on stdout ("rttproxy: A -> B, +D ms each way");
 * on SIGTERM or SIGINT a summary line on stdout and, with --stats FILE, the
 * same figures as KEY=VALUE lines in FILE.  The listening port may be 0: the
 * start line gives the port the kernel chose.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* accept4; meson defines it, run.sh's plain cc does not */
#endif
#include <errno.h>
#include <getopt.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

/* Bytes of one recv(): large enough that a loopback stream at 1 GB/s costs a
 * few thousand calls per second. */
#define READ_BUF (256 * 1024)
/* Bytes one direction may read in one turn before the others get theirs:
 * ~4 ms at 1 GB/s, small against the delays this proxy is for. */
#define READ_BUDGET (4u << 20)
#define NOT_IN_HEAP SIZE_MAX
#define MAX_EVENTS 256

enum side { CLIENT = 0, SERVER = 1 };

/* A run of bytes read at one time, written when due. */
struct chunk {
	struct chunk *next; /* the chunk read after it */
	uint64_t due;       /* CLOCK_MONOTONIC ns from which it may be written */
	size_t len;         /* bytes in data; 0 marks the direction's EOF */
	size_t off;         /* bytes of data already written */
	unsigned char data[];
};

struct conn;

/* One direction of a connection: bytes read from fd[side], written to
 * fd[1 - side] (side CLIENT: client to server). */
struct dir {
	struct conn *c;            /* the connection it belongs to */
	enum side side;            /* the side it reads from */
	struct chunk *head, *tail; /* queued chunks, oldest first */
	size_t queued;             /* bytes read and not yet written */
	bool readable;             /* the source had bytes when last asked (edge-triggered) */
	bool rd_eof;               /* the source said EOF: nothing more to read */
	bool wr_blocked;           /* the destination said EAGAIN: wait for EPOLLOUT */
	bool done;                 /* the EOF was forwarded (shutdown of the destination) */
	size_t heap_idx;           /* position in px.heap, or NOT_IN_HEAP */
	uint64_t heap_due;         /* its key there: the head chunk's due time */
	struct dir *run_prev;      /* neighbours on the runnable list */
	struct dir *run_next;
	bool on_run; /* whether it is on the runnable list */
};

struct conn {
	int fd[2];          /* CLIENT: accepted socket; SERVER: our socket to the target */
	struct dir d[2];    /* d[s] reads fd[s] */
	bool connected;     /* the connect() to the target completed */
	bool dead;          /* closed; freed after the current batch of events */
	uint64_t t_accept;  /* when it was accepted (ns), for the handshake hold */
	struct conn *grave; /* next on px.graveyard once dead */
};

/* The proxy's state: one instance, used by the one thread. */
static struct {
	int epfd, lfd, tfd, sfd;         /* epoll, listener, timerfd, signalfd */
	struct sockaddr_storage to;      /* the target's address */
	socklen_t to_len;                /* its length */
	uint64_t delay_ns;               /* D */
	bool handshake;                  /* hold a new connection's first bytes for 2D */
	size_t cap;                      /* queued bytes above which a direction stops reading */
	struct dir **heap;               /* directions waiting for their head's due time */
	size_t heap_n, heap_cap;         /* entries used, allocated */
	uint64_t armed;                  /* due time the timerfd is armed at, 0 if none */
	struct dir *run_head, *run_tail; /* runnable list (read budget spent, more to read) */
	struct conn *graveyard;          /* dead connections to free after the batch */
	uint64_t conns, conns_now, conns_max; /* accepted, open now, most open at once */
	uint64_t resets, connect_fails;       /* connections reset, connects to the target failed */
	uint64_t bytes[2];                    /* bytes written, by direction (side read from) */
	size_t queued_max;                    /* most bytes queued in one direction */
} px;

static unsigned char rbuf[READ_BUF];
static char tag_listen, tag_timer, tag_signal; /* epoll data of the non-connection fds */

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ------------------------------------------------------------ timer heap */

static void heap_swap(size_t i, size_t j)
{
	struct dir *t = px.heap[i];

	px.heap[i] = px.heap[j];
	px.heap[j] = t;
	px.heap[i]->heap_idx = i;
	px.heap[j]->heap_idx = j;
}

static void heap_up(size_t i)
{
	while (i > 0 && px.heap[(i - 1) / 2]->heap_due > px.heap[i]->heap_due) {
		heap_swap(i, (i - 1) / 2);
		i = (i - 1) / 2;
	}
}

static void heap_down(size_t i)
{
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < px.heap_n && px.heap[l]->heap_due < px.heap[m]->heap_due)
			m = l;
		if (r < px.heap_n && px.heap[r]->heap_due < px.heap[m]->heap_due)
			m = r;
		if (m == i)
			return;
		heap_swap(i, m);
		i = m;
	}
}

/* heap_set: put D in the heap with key DUE, or move it there.  Returns 0 or
 * -ENOMEM. */
static int heap_set(struct dir *d, uint64_t due)
{
	if (d->heap_idx == NOT_IN_HEAP) {
		if (px.heap_n == px.heap_cap) {
			size_t n = px.heap_cap ? 2 * px.heap_cap : 256;
			struct dir **h = realloc(px.heap, n * sizeof(*h));

			if (!h)
				return -ENOMEM;
			px.heap = h;
			px.heap_cap = n;
		}
		d->heap_idx = px.heap_n++;
		px.heap[d->heap_idx] = d;
		d->heap_due = due;
		heap_up(d->heap_idx);
		return 0;
	}
	if (due == d->heap_due)
		return 0;
	d->heap_due = due;
	heap_up(d->heap_idx);
	heap_down(d->heap_idx);
	return 0;
}

static void heap_del(struct dir *d)
{
	size_t i = d->heap_idx;

	if (i == NOT_IN_HEAP)
		return;
	d->heap_idx = NOT_IN_HEAP;
	if (i == --px.heap_n)
		return;
	px.heap[i] = px.heap[px.heap_n];
	px.heap[i]->heap_idx = i;
	heap_up(i);
	heap_down(px.heap[i]->heap_idx);
}

/* arm_timer: the timerfd at the heap's earliest due time, or off. */
static void arm_timer(void)
{
	uint64_t due = px.heap_n ? px.heap[0]->heap_due : 0;
	struct itimerspec its = {0};

	if (due == px.armed)
		return;
	its.it_value.tv_sec = (time_t)(due / 1000000000u);
	its.it_value.tv_nsec = (long)(due % 1000000000u);
	if (timerfd_settime(px.tfd, TFD_TIMER_ABSTIME, &its, NULL) < 0) {
		perror("rttproxy: timerfd_settime");
		exit(1);
	}
	px.armed = due;
}

/* --------------------------------------------------------- runnable list */

static void run_add(struct dir *d)
{
	if (d->on_run)
		return;
	d->on_run = true;
	d->run_next = NULL;
	d->run_prev = px.run_tail;
	if (px.run_tail)
		px.run_tail->run_next = d;
	else
		px.run_head = d;
	px.run_tail = d;
}

static void run_del(struct dir *d)
{
	if (!d->on_run)
		return;
	if (d->run_prev)
		d->run_prev->run_next = d->run_next;
	else
		px.run_head = d->run_next;
	if (d->run_next)
		d->run_next->run_prev = d->run_prev;
	else
		px.run_tail = d->run_prev;
	d->on_run = false;
}

/* ------------------------------------------------------------ connections */

static void set_nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int sock_error(int fd)
{
	int e = 0;
	socklen_t len = sizeof(e);

	if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &len) < 0)
		return errno;
	return e;
}

/* conn_close: close both sockets (RESET: with an RST, for errors), drop the
 * connection's timers and runnable entries; the memory goes after the batch
 * of events (a later event of the batch may still name it). */
static void conn_close(struct conn *c, bool reset)
{
	struct linger lg = {1, 0};

	if (c->dead)
		return;
	c->dead = true;
	for (int s = 0; s < 2; s++) {
		struct dir *d = &c->d[s];
		struct chunk *k = d->head;

		heap_del(d);
		run_del(d);
		while (k) {
			struct chunk *n = k->next;

			free(k);
			k = n;
		}
		d->head = d->tail = NULL;
		if (reset)
			setsockopt(c->fd[s], SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
		close(c->fd[s]);
	}
	if (reset)
		px.resets++;
	px.conns_now--;
	c->grave = px.graveyard;
	px.graveyard = c;
}

static void bury(void)
{
	while (px.graveyard) {
		struct conn *c = px.graveyard;

		px.graveyard = c->grave;
		free(c);
	}
}

/* due_time: when bytes of D read now may be written: now + D, and for the
 * client's bytes not before the handshake would have ended (accept + 2D).
 * NOW gets the time it was computed from. */
static uint64_t due_time(const struct dir *d, uint64_t *now)
{
	uint64_t t = now_ns(), from = t;

	*now = t;
	if (d->side == CLIENT && px.handshake && d->c->t_accept + 2 * px.delay_ns > t)
		from = d->c->t_accept + 2 * px.delay_ns;
	return from + px.delay_ns;
}

/* queue_chunk: append N bytes of P (N = 0: the EOF marker) due at DUE.
 * Returns 0 or -ENOMEM. */
static int queue_chunk(struct dir *d, const unsigned char *p, size_t n, uint64_t due)
{
	struct chunk *k = malloc(sizeof(*k) + n);

	if (!k)
		return -ENOMEM;
	k->next = NULL;
	k->due = due;
	k->len = n;
	k->off = 0;
	if (n)
		memcpy(k->data, p, n);
	if (d->tail)
		d->tail->next = k;
	else
		d->head = k;
	d->tail = k;
	d->queued += n;
	if (d->queued > px.queued_max)
		px.queued_max = d->queued;
	return 0;
}

/* send_now: send what D=0 lets go at once (nothing queued before it);
 * returns the bytes sent (0 when the destination is full) or -1 on error. */
static ssize_t send_now(struct dir *d, const unsigned char *p, size_t n)
{
	ssize_t w;

	if (d->head || d->wr_blocked || !d->c->connected)
		return 0;
	do
		w = send(d->c->fd[1 - d->side], p, n, MSG_NOSIGNAL);
	while (w < 0 && errno == EINTR);
	if (w < 0) {
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -1;
		d->wr_blocked = true;
		return 0;
	}
	px.bytes[d->side] += (uint64_t)w;
	return w;
}

/* dir_read: read what the source has (until EAGAIN, EOF, the cap or *BUDGET
 * bytes) into the queue; bytes due at once go straight out (send_now).
 * Returns 0, or -1 when the connection must be reset. */
static int dir_read(struct dir *d, size_t *budget)
{
	while (d->readable && !d->rd_eof && d->queued<px.cap && * budget> 0) {
		uint64_t now, due;
		ssize_t n, w = 0;

		if (!d->c->connected && d->side == SERVER)
			return 0;
		n = recv(d->c->fd[d->side], rbuf, sizeof(rbuf), 0);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				d->readable = false;
				return 0;
			}
			return -1;
		}
		due = due_time(d, &now);
		if (n == 0) {
			d->rd_eof = true;
			return queue_chunk(d, NULL, 0, due) < 0 ? -1 : 0;
		}
		*budget -= (size_t)n < *budget ? (size_t)n : *budget;
		if (due <= now && (w = send_now(d, rbuf, (size_t)n)) < 0)
			return -1;
		if (w < n && queue_chunk(d, rbuf + w, (size_t)(n - w), due) < 0)
			return -1;
	}
	return 0;
}

/* dir_flush: write the queued chunks that are due, forward a due EOF; a
 * direction whose head is not due yet goes into the timer heap.  Returns 0,
 * or -1 when the connection must be reset. */
static int dir_flush(struct dir *d)
{
	int dst = d->c->fd[1 - d->side];
	uint64_t now = now_ns();

	while (d->head) {
		struct chunk *k = d->head;
		ssize_t w;

		if (k->due > now)
			return heap_set(d, k->due) < 0 ? -1 : 0;
		if (d->wr_blocked || !d->c->connected)
			break;
		if (k->len > 0) {
			w = send(dst, k->data + k->off, k->len - k->off, MSG_NOSIGNAL);
			if (w < 0 && errno == EINTR)
				continue;
			if (w < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
				d->wr_blocked = true;
				break;
			}
			if (w < 0)
				return -1;
			k->off += (size_t)w;
			d->queued -= (size_t)w;
			px.bytes[d->side] += (uint64_t)w;
			if (k->off < k->len)
				continue;
		} else {
			if (shutdown(dst, SHUT_WR) < 0 && errno != ENOTCONN)
				return -1;
			d->done = true;
		}
		d->head = k->next;
		if (!d->head)
			d->tail = NULL;
		free(k);
	}
	heap_del(d);
	return 0;
}

/* dir_service: read and write until neither can go on; a direction that
 * spent its read budget with more to read goes on the runnable list.
 * Returns 0, or -1 when the connection must be reset. */
static int dir_service(struct dir *d)
{
	size_t budget = READ_BUDGET;

	for (;;) {
		if (dir_read(d, &budget) < 0 || dir_flush(d) < 0)
			return -1;
		if (!d->readable || d->rd_eof || d->queued >= px.cap || !d->c->connected)
			return 0;
		if (budget == 0) {
			run_add(d);
			return 0;
		}
	}
}

/* conn_service: service both directions; close the connection when both
 * forwarded their EOF, reset it on an error. */
static void conn_service(struct conn *c)
{
	if (dir_service(&c->d[CLIENT]) < 0 || dir_service(&c->d[SERVER]) < 0)
		conn_close(c, true);
	else if (c->d[CLIENT].done && c->d[SERVER].done)
		conn_close(c, false);
}

static int epoll_add(int fd, void *ptr, uint32_t events)
{
	struct epoll_event ev = {.events = events, .data.ptr = ptr};

	return epoll_ctl(px.epfd, EPOLL_CTL_ADD, fd, &ev);
}

/* conn_open: a connection for the accepted socket CFD: connect to the target
 * (nonblocking) and watch both sockets.  CFD is closed on failure. */
static void conn_open(int cfd)
{
	struct conn *c = calloc(1, sizeof(*c));
	const uint32_t ev = EPOLLIN | EPOLLOUT | EPOLLRDHUP | EPOLLET;
	int sfd = -1;

	if (!c)
		goto fail;
	sfd = socket(px.to.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (sfd < 0)
		goto fail;
	set_nodelay(cfd);
	set_nodelay(sfd);
	if (connect(sfd, (struct sockaddr *)&px.to, px.to_len) == 0)
		c->connected = true;
	else if (errno != EINPROGRESS)
		goto fail;
	c->fd[CLIENT] = cfd;
	c->fd[SERVER] = sfd;
	c->t_accept = now_ns();
	for (int s = 0; s < 2; s++) {
		c->d[s].c = c;
		c->d[s].side = (enum side)s;
		c->d[s].heap_idx = NOT_IN_HEAP;
		c->d[s].readable = true; /* edge-triggered: bytes may be there already */
	}
	if (epoll_add(cfd, &c->d[CLIENT], ev) < 0 || epoll_add(sfd, &c->d[SERVER], ev) < 0)
		goto fail;
	px.conns++;
	if (++px.conns_now > px.conns_max)
		px.conns_max = px.conns_now;
	return;
fail:
	fprintf(stderr, "rttproxy: new connection: %s\n", strerror(errno));
	px.connect_fails++;
	if (sfd >= 0)
		close(sfd);
	close(cfd);
	free(c);
}

static void accept_all(void)
{
	for (;;) {
		int fd = accept4(px.lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd >= 0) {
			conn_open(fd);
			continue;
		}
		if (errno == EINTR || errno == ECONNABORTED)
			continue;
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			perror("rttproxy: accept");
		return;
	}
}

/* conn_event: EV on the socket D reads from: set the flags, then service. */
static void conn_event(struct dir *d, uint32_t ev)
{
	struct conn *c = d->c;
	int fd = c->fd[d->side], e;

	if (c->dead)
		return;
	if (ev & EPOLLERR) {
		e = sock_error(fd);
		if (e) {
			if (!c->connected)
				px.connect_fails++;
			conn_close(c, true);
			return;
		}
	}
	if (d->side == SERVER && !c->connected && (ev & (EPOLLOUT | EPOLLHUP))) {
		e = sock_error(fd);
		if (e) {
			fprintf(stderr, "rttproxy: connect to the target: %s\n", strerror(e));
			px.connect_fails++;
			conn_close(c, true);
			return;
		}
		c->connected = true;
	}
	if (ev & (EPOLLIN | EPOLLRDHUP | EPOLLHUP | EPOLLERR))
		d->readable = true;
	if (ev & (EPOLLOUT | EPOLLHUP | EPOLLERR))
		c->d[1 - d->side].wr_blocked = false;
	conn_service(c);
}

/* on_timer: service every direction whose head chunk is due. */
static void on_timer(void)
{
	uint64_t n, now;

	if (read(px.tfd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		perror("rttproxy: timerfd");
	px.armed = 0;
	now = now_ns();
	while (px.heap_n && px.heap[0]->heap_due <= now) {
		struct dir *d = px.heap[0];

		heap_del(d);
		conn_service(d->c);
	}
}

/* on_runnable: give the directions that spent their budget another turn,
 * each once: one that wants more goes to the tail, for the next loop. */
static void on_runnable(void)
{
	size_t n = 0;

	for (struct dir *d = px.run_head; d; d = d->run_next)
		n++;
	while (n-- > 0 && px.run_head) {
		struct dir *d = px.run_head;

		run_del(d);
		if (dir_service(d) < 0)
			conn_close(d->c, true);
		else if (d->c->d[CLIENT].done && d->c->d[SERVER].done)
			conn_close(d->c, false);
	}
}

/* --------------------------------------------------------------- set-up */

/* parse_addr: HOST:PORT ([V6]:PORT) into SS; returns 0 or -1 (message printed). */
static int parse_addr(const char *arg, bool passive, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[256];
	const char *colon = strrchr(arg, ':');
	struct addrinfo hints = {0}, *ai = NULL;
	size_t hl;
	int rc;

	if (!colon || colon == arg || (size_t)(colon - arg) >= sizeof(host)) {
		fprintf(stderr, "rttproxy: %s: expected HOST:PORT\n", arg);
		return -1;
	}
	hl = (size_t)(colon - arg);
	memcpy(host, arg, hl);
	host[hl] = 0;
	if (host[0] == '[' && hl > 2 && host[hl - 1] == ']') {
		memmove(host, host + 1, hl - 2);
		host[hl - 2] = 0;
	}
	hints.ai_socktype = SOCK_STREAM;
	hints.ai_flags = AI_NUMERICSERV | (passive ? AI_PASSIVE : 0);
	rc = getaddrinfo(host, colon + 1, &hints, &ai);
	if (rc != 0) {
		fprintf(stderr, "rttproxy: %s: %s\n", arg, gai_strerror(rc));
		return -1;
	}
	memcpy(ss, ai->ai_addr, ai->ai_addrlen);
	*len = ai->ai_addrlen;
	freeaddrinfo(ai);
	return 0;
}

static void addr_str(const struct sockaddr_storage *ss, socklen_t len, char *out, size_t n)
{
	char h[NI_MAXHOST], p[NI_MAXSERV];

	if (getnameinfo((const struct sockaddr *)ss, len, h, sizeof(h), p, sizeof(p),
	                NI_NUMERICHOST | NI_NUMERICSERV) != 0) {
		snprintf(out, n, "?");
		return;
	}
	snprintf(out, n, ss->ss_family == AF_INET6 ? "[%s]:%s" : "%s:%s", h, p);
}

/* listen_on: the listening socket on ADDR; prints its address into OUT. */
static int listen_on(const char *addr, char *out, size_t n)
{
	struct sockaddr_storage ss;
	socklen_t len;
	int one = 1, fd;

	if (parse_addr(addr, true, &ss, &len) < 0)
		return -1;
	fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&ss, len) < 0 || listen(fd, 4096) < 0) {
		fprintf(stderr, "rttproxy: listen on %s: %s\n", addr, strerror(errno));
		return -1;
	}
	len = sizeof(ss);
	getsockname(fd, (struct sockaddr *)&ss, &len);
	addr_str(&ss, len, out, n);
	return fd;
}

/* raise_nofile: hundreds of connections are two sockets each. */
static void raise_nofile(void)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		setrlimit(RLIMIT_NOFILE, &rl);
	}
}

/* signals: SIGTERM and SIGINT through a signalfd, SIGPIPE ignored. */
static int signals(void)
{
	sigset_t set;

	signal(SIGPIPE, SIG_IGN);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	if (sigprocmask(SIG_BLOCK, &set, NULL) < 0)
		return -1;
	return signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
}

static void summary(const char *stats)
{
	FILE *f;

	printf("rttproxy: %llu connections (%llu at most at once, %llu reset, %llu failed to "
	       "connect), client->server %llu bytes, server->client %llu bytes, at most %zu bytes "
	       "queued in one direction\n",
	       (unsigned long long)px.conns, (unsigned long long)px.conns_max,
	       (unsigned long long)px.resets, (unsigned long long)px.connect_fails,
	       (unsigned long long)px.bytes[CLIENT], (unsigned long long)px.bytes[SERVER],
	       px.queued_max);
	fflush(stdout);
	if (!stats)
		return;
	f = fopen(stats, "w");
	if (!f) {
		fprintf(stderr, "rttproxy: %s: %s\n", stats, strerror(errno));
		return;
	}
	fprintf(f,
	        "connections=%llu\nconnections_max=%llu\nresets=%llu\nconnect_fails=%llu\n"
	        "bytes_up=%llu\nbytes_down=%llu\nqueued_max=%zu\n",
	        (unsigned long long)px.conns, (unsigned long long)px.conns_max,
	        (unsigned long long)px.resets, (unsigned long long)px.connect_fails,
	        (unsigned long long)px.bytes[CLIENT], (unsigned long long)px.bytes[SERVER],
	        px.queued_max);
	fclose(f);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: rttproxy --listen HOST:PORT --to HOST:PORT --delay-ms D\n"
	           "                [--cap-mib N] [--no-handshake] [--stats FILE]\n"
	           "Forwards every TCP connection to the target, each direction delayed by D ms\n"
	           "(fractions allowed): round trips grow by 2D, bandwidth is not limited.\n"
	           "  --cap-mib N     stop reading a direction above N MiB queued (default 64)\n"
	           "  --no-handshake  do not hold a new connection's first bytes for 2D\n"
	           "  --stats FILE    write the summary as KEY=VALUE lines at exit\n");
}

/* setup: listener, target, timer, signals, epoll set from the command line.
 * Returns 0, 1 on a usage error (printed), 2 on a failure (printed). */
static int setup(int argc, char **argv, const char **stats)
{
	static const struct option opts[] = {
	    {"listen", required_argument, NULL, 'l'},   {"to", required_argument, NULL, 't'},
	    {"delay-ms", required_argument, NULL, 'd'}, {"cap-mib", required_argument, NULL, 'c'},
	    {"no-handshake", no_argument, NULL, 'n'},   {"stats", required_argument, NULL, 's'},
	    {"help", no_argument, NULL, 'h'},           {NULL, 0, NULL, 0}};
	const char *listen_addr = NULL, *to = NULL;
	char la[128], ta[128];
	double delay = -1, cap = 64;
	char *end;
	int o;

	px.handshake = true;
	while ((o = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (o) {
		case 'l':
			listen_addr = optarg;
			break;
		case 't':
			to = optarg;
			break;
		case 'd':
			delay = strtod(optarg, &end);
			if (*end || delay < 0 || delay > 600000)
				delay = -2;
			break;
		case 'c':
			cap = strtod(optarg, &end);
			if (*end || cap < 1)
				cap = 0;
			break;
		case 'n':
			px.handshake = false;
			break;
		case 's':
			*stats = optarg;
			break;
		case 'h':
			usage(stdout);
			exit(0);
		default:
			usage(stderr);
			return 1;
		}
	}
	if (!listen_addr || !to || delay < 0 || cap < 1 || optind != argc) {
		usage(stderr);
		return 1;
	}
	px.delay_ns = (uint64_t)(delay * 1e6 + 0.5);
	px.cap = (size_t)(cap * 1048576);
	if (parse_addr(to, false, &px.to, &px.to_len) < 0)
		return 1;
	addr_str(&px.to, px.to_len, ta, sizeof(ta));
	raise_nofile();
	px.lfd = listen_on(listen_addr, la, sizeof(la));
	px.epfd = epoll_create1(EPOLL_CLOEXEC);
	px.tfd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
	px.sfd = signals();
	if (px.lfd < 0 || px.epfd < 0 || px.tfd < 0 || px.sfd < 0 ||
	    epoll_add(px.lfd, &tag_listen, EPOLLIN | EPOLLET) < 0 ||
	    epoll_add(px.tfd, &tag_timer, EPOLLIN) < 0 ||
	    epoll_add(px.sfd, &tag_signal, EPOLLIN) < 0) {
		perror("rttproxy: setup");
		return 2;
	}
	printf("rttproxy: %s -> %s, +%g ms each way%s\n", la, ta, delay,
	       px.handshake && delay > 0 ? ", new connections +2x that for the handshake" : "");
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	const char *stats = NULL;
	struct epoll_event evs[MAX_EVENTS];
	int rc = setup(argc, argv, &stats);

	if (rc)
		return rc;
	for (;;) {
		int n = epoll_wait(px.epfd, evs, MAX_EVENTS, px.run_head ? 0 : -1);

		if (n < 0 && errno != EINTR) {
			perror("rttproxy: epoll_wait");
			return 2;
		}
		for (int i = 0; i < n; i++) {
			void *p = evs[i].data.ptr;

			if (p == &tag_listen)
				accept_all();
			else if (p == &tag_timer)
				on_timer();
			else if (p == &tag_signal) {
				summary(stats);
				return 0;
			} else
				conn_event(p, evs[i].events);
		}
		on_runnable();
		bury();
		arm_timer();
	}
}
