/*
 * faultproxy.c - start and control tests/s3/faultproxy.py (see faultproxy.h).
 *
 * The proxy is a child process with pipes on stdin (kept open by us: when
 * this process dies the pipe closes and the proxy exits by itself) and
 * stdout (where it announces "PORT n").  Control requests are plain HTTP/1.0
 * GETs on a fresh socket, answered with one line of counters.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "faultproxy.h"

int faultproxy_start(struct faultproxy *p, const char *script, const char *upstream)
{
	int in[2], out[2];
	char line[64];
	size_t n = 0;
	pid_t pid;

	memset(p, 0, sizeof(*p));
	p->pid = -1;
	p->stdin_fd = -1;
	if (pipe(in) < 0)
		return -errno;
	if (pipe(out) < 0) {
		int e = errno;
		close(in[0]);
		close(in[1]);
		return -e;
	}
	pid = fork();
	if (pid < 0) {
		int e = errno;
		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		return -e;
	}
	if (pid == 0) {
		dup2(in[0], 0);
		dup2(out[1], 1);
		close(in[0]);
		close(in[1]);
		close(out[0]);
		close(out[1]);
		execlp("python3", "python3", script, "--upstream", upstream, (char *)NULL);
		fprintf(stderr, "faultproxy: exec python3 %s: %s\n", script, strerror(errno));
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	p->pid = pid;
	p->stdin_fd = in[1];
	/* Wait (10 s at most) for "PORT n\n". */
	while (n < sizeof(line) - 1 && !memchr(line, '\n', n)) {
		struct pollfd pf = {.fd = out[0], .events = POLLIN};
		if (poll(&pf, 1, 10000) <= 0)
			break;
		ssize_t r = read(out[0], line + n, sizeof(line) - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(out[0]);
	line[n] = '\0';
	if (sscanf(line, "PORT %u", &p->port) != 1 || !p->port) {
		fprintf(stderr, "faultproxy: %s did not start (said '%s')\n", script, line);
		faultproxy_stop(p);
		return -EIO;
	}
	snprintf(p->url, sizeof(p->url), "http://127.0.0.1:%u", p->port);
	return 0;
}

/* GET /__faultproxy/<cmd> and put the answer's body in buf. */
static int ctl(struct faultproxy *p, const char *cmd, char *buf, size_t bufsz)
{
	struct sockaddr_in a = {.sin_family = AF_INET,
	                        .sin_port = htons((uint16_t)p->port),
	                        .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	char req[512], resp[1024];
	size_t n = 0;
	int fd, rc = 0;

	snprintf(req, sizeof(req), "GET /__faultproxy/%s HTTP/1.0\r\nHost: x\r\n\r\n", cmd);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0 ||
	    write(fd, req, strlen(req)) != (ssize_t)strlen(req)) {
		rc = -errno;
		goto out;
	}
	for (;;) {
		ssize_t r = read(fd, resp + n, sizeof(resp) - 1 - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
		if (n == sizeof(resp) - 1)
			break;
	}
	resp[n] = '\0';
	const char *body = strstr(resp, "\r\n\r\n");
	if (strncmp(resp, "HTTP/1.1 200", 12) || !body) {
		fprintf(stderr, "faultproxy: %s: %s\n", cmd, resp);
		rc = -EIO;
		goto out;
	}
	if (buf)
		snprintf(buf, bufsz, "%s", body + 4);
out:
	close(fd);
	return rc;
}

int faultproxy_arm(struct faultproxy *p, const char *fault, unsigned count, const char *method,
                   const char *path, unsigned stall_sec)
{
	char cmd[300];
	int n = snprintf(cmd, sizeof(cmd), "arm?fault=%s&count=%u&stall=%u", fault, count,
	                 stall_sec ? stall_sec : 5);
	if (method)
		n += snprintf(cmd + n, sizeof(cmd) - (size_t)n, "&method=%s", method);
	if (path)
		snprintf(cmd + n, sizeof(cmd) - (size_t)n, "&path=%s", path);
	return ctl(p, cmd, NULL, 0);
}

int faultproxy_clear(struct faultproxy *p)
{
	return ctl(p, "clear", NULL, 0);
}

int faultproxy_stats(struct faultproxy *p, struct faultproxy_stats *st)
{
	char b[256];
	int rc = ctl(p, "stats", b, sizeof(b));
	if (rc)
		return rc;
	if (sscanf(b, "seen=%u faulted=%u forwarded=%u armed=%u", &st->seen, &st->faulted,
	           &st->forwarded, &st->armed) != 4)
		return -EIO;
	return 0;
}

void faultproxy_stop(struct faultproxy *p)
{
	if (p->stdin_fd >= 0)
		close(p->stdin_fd);
	if (p->pid > 0) {
		kill(p->pid, SIGTERM);
		while (waitpid(p->pid, NULL, 0) < 0 && errno == EINTR)
			;
	}
	p->stdin_fd = -1;
	p->pid = -1;
}
