/*
 * creds_fetch.c - the sources of the credential chain (see creds.h): STS
 * AssumeRole and AssumeRoleWithWebIdentity, credential_process, the
 * container credentials endpoint and EC2 instance metadata (IMDSv2), and
 * the parsers of their answers (creds_int.h).
 *
 * Every fetch makes up to FETCH_ATTEMPTS attempts for failures that
 * http_retryable() calls transient; the refresh thread (creds.c) retries
 * whole fetches on top.  Nothing here logs a secret: answers are parsed,
 * never echoed; error messages carry the source, the URL, the HTTP status
 * and the service's error code and message.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "creds_int.h"
#include "json.h"
#include "log.h"
#include "sigv4.h"
#include "xml.h"

extern char **environ;

#define FETCH_ATTEMPTS 3
#define MAX_TOKEN_FILE (64u << 10)     /* a web identity / container token file */
#define MAX_PROCESS_OUTPUT (64u << 10) /* credential_process stdout */
#define IMDS_TOKEN_TTL "21600"         /* seconds an IMDSv2 session token lives (6 h) */
#define STS_VERSION "2011-06-15"

/* ---- keys -------------------------------------------------------------- */

struct creds_keys *creds_keys_new(const char *ak, const char *sk, const char *token,
                                  int64_t expires)
{
	struct creds_keys *k = calloc(1, sizeof(*k));
	if (!k)
		return NULL;
	k->access_key = strdup(ak);
	k->secret_key = strdup(sk);
	k->session_token = token && *token ? strdup(token) : NULL;
	if (!k->access_key || !k->secret_key || (token && *token && !k->session_token)) {
		k->refs = 1;
		creds_keys_put(k);
		return NULL;
	}
	k->obtained = (int64_t)time(NULL);
	k->expires = expires;
	k->refs = 1;
	return k;
}

static void wipe_free(char *s)
{
	if (s) {
		memset(s, 0, strlen(s));
		free(s);
	}
}

void creds_keys_put(struct creds_keys *k)
{
	if (!k || __atomic_sub_fetch(&k->refs, 1, __ATOMIC_ACQ_REL) > 0)
		return;
	free(k->access_key);
	wipe_free(k->secret_key);
	wipe_free(k->session_token);
	free(k);
}

/* ---- parsers ----------------------------------------------------------- */

int creds_parse_time(const char *s, int64_t *out)
{
	struct tm tm;
	int n = 0, oh = 0, om = 0;
	long off = 0;

	memset(&tm, 0, sizeof(tm));
	if (!s ||
	    sscanf(s, "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
	           &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &n) != 6 ||
	    n != 19)
		return -EBADMSG;
	if (tm.tm_mon < 1 || tm.tm_mon > 12 || tm.tm_mday < 1 || tm.tm_mday > 31 ||
	    tm.tm_hour > 23 || tm.tm_min > 59 || tm.tm_sec > 60)
		return -EBADMSG;
	s += n;
	if (*s == '.') {
		s++;
		if (*s < '0' || *s > '9')
			return -EBADMSG;
		while (*s >= '0' && *s <= '9')
			s++;
	}
	if ((*s == 'Z' || *s == 'z') && !s[1]) {
		off = 0;
	} else if ((*s == '+' || *s == '-') && strlen(s) == 6 && s[3] == ':' &&
	           sscanf(s + 1, "%2d:%2d", &oh, &om) == 2 && oh <= 23 && om <= 59) {
		off = (oh * 60L + om) * 60L * (*s == '+' ? 1 : -1);
	} else {
		return -EBADMSG;
	}
	tm.tm_year -= 1900;
	tm.tm_mon -= 1;
	*out = (int64_t)timegm(&tm) - off;
	return 0;
}

/* Fields of a JSON credential document, collected by on_member. */
struct jcreds {
	enum creds_json_kind kind;
	char *ak, *sk, *token, *expiration, *code;
	bool version_seen, version_ok;
};

static int keep(char **dst, const char *v)
{
	wipe_free(*dst);
	return (*dst = strdup(v)) ? 0 : -ENOMEM;
}

static int on_member(void *arg, const char *name, const char *value, size_t len,
                     enum json_kind kind)
{
	struct jcreds *j = arg;
	(void)len;
	if (!strcmp(name, "Version")) {
		j->version_seen = true;
		j->version_ok = kind == JSON_NUMBER && !strcmp(value, "1");
		return 0;
	}
	if (kind != JSON_STRING)
		return 0;
	if (!strcmp(name, "AccessKeyId"))
		return keep(&j->ak, value);
	if (!strcmp(name, "SecretAccessKey"))
		return keep(&j->sk, value);
	if (!strcmp(name, j->kind == CREDS_JSON_PROCESS ? "SessionToken" : "Token"))
		return keep(&j->token, value);
	if (!strcmp(name, "Expiration"))
		return keep(&j->expiration, value);
	if (!strcmp(name, "Code"))
		return keep(&j->code, value);
	return 0;
}

int creds_parse_json(const char *doc, size_t n, enum creds_json_kind kind, struct creds_keys **out,
                     char *why, size_t whysz)
{
	struct jcreds j = {.kind = kind};
	int64_t exp = 0;
	int w = json_walk_object(doc, n, on_member, &j), rc = -EBADMSG;

	if (w == -ENOMEM) {
		rc = w;
		goto out;
	}
	if (w) {
		snprintf(why, whysz, "not a JSON object");
	} else if (kind == CREDS_JSON_PROCESS && !j.version_ok) {
		snprintf(why, whysz, j.version_seen ? "Version is not 1" : "no Version");
	} else if (kind == CREDS_JSON_IMDS && j.code && strcmp(j.code, "Success")) {
		snprintf(why, whysz, "Code is %.60s", j.code);
		rc = -EACCES;
	} else if (!j.ak || !*j.ak || !j.sk || !*j.sk) {
		snprintf(why, whysz, "no AccessKeyId or SecretAccessKey");
	} else if (j.expiration && creds_parse_time(j.expiration, &exp)) {
		snprintf(why, whysz, "Expiration is not an ISO 8601 time");
	} else if (!(*out = creds_keys_new(j.ak, j.sk, j.token, exp))) {
		rc = -ENOMEM;
	} else {
		rc = 0;
	}
out:
	free(j.ak);
	wipe_free(j.sk);
	wipe_free(j.token);
	free(j.expiration);
	free(j.code);
	return rc;
}

/* Fields of an STS answer, collected by on_sts. */
struct scred {
	char *ak, *sk, *token, *expiration;
	char *code, *msg;
	bool error; /* an <Error> element was seen */
};

static bool ends_with(const char *s, const char *suffix)
{
	size_t a = strlen(s), b = strlen(suffix);
	return a >= b && !strcmp(s + a - b, suffix);
}

static int on_sts(void *arg, const char *path, const char *text, size_t len)
{
	struct scred *c = arg;
	(void)len;
	if (!text)
		return 0;
	if (!strncmp(path, "ErrorResponse/Error/", 20) || !strncmp(path, "Error/", 6)) {
		c->error = true;
		if (ends_with(path, "/Code"))
			return keep(&c->code, text);
		if (ends_with(path, "/Message"))
			return keep(&c->msg, text);
		return 0;
	}
	if (!strstr(path, "Result/Credentials/"))
		return 0;
	if (ends_with(path, "/AccessKeyId"))
		return keep(&c->ak, text);
	if (ends_with(path, "/SecretAccessKey"))
		return keep(&c->sk, text);
	if (ends_with(path, "/SessionToken"))
		return keep(&c->token, text);
	if (ends_with(path, "/Expiration"))
		return keep(&c->expiration, text);
	return 0;
}

int creds_parse_sts(const char *doc, size_t n, struct creds_keys **out, char *code, size_t codesz,
                    char *msg, size_t msgsz)
{
	struct scred c = {0};
	int64_t exp = 0;
	int rc = xml_walk(doc, n, on_sts, &c);

	code[0] = msg[0] = '\0';
	if (rc) {
		rc = rc == -ENOMEM ? rc : -EBADMSG;
		goto out;
	}
	rc = -EBADMSG;
	if (c.error) {
		snprintf(code, codesz, "%s", c.code ? c.code : "");
		snprintf(msg, msgsz, "%s", c.msg ? c.msg : "");
		rc = -EACCES;
	} else if (c.ak && *c.ak && c.sk && *c.sk && c.token && *c.token && c.expiration &&
	           !creds_parse_time(c.expiration, &exp)) {
		rc = (*out = creds_keys_new(c.ak, c.sk, c.token, exp)) ? 0 : -ENOMEM;
	}
out:
	free(c.ak);
	wipe_free(c.sk);
	wipe_free(c.token);
	free(c.expiration);
	free(c.code);
	free(c.msg);
	return rc;
}

int creds_split_url(const char *url, char **host, char **path)
{
	const char *h;
	size_t hl;

	if (!strncmp(url, "https://", 8))
		h = url + 8;
	else if (!strncmp(url, "http://", 7))
		h = url + 7;
	else
		return -EINVAL;
	hl = strcspn(h, "/?#");
	if (!hl || strcspn(h, "@") < hl || h[hl] == '?' || h[hl] == '#')
		return -EINVAL;
	*host = strndup(h, hl);
	*path = strdup(h[hl] ? h + hl : "/");
	if (!*host || !*path) {
		free(*host);
		free(*path);
		return -ENOMEM;
	}
	return 0;
}

int creds_container_url(const char *relative, const char *full, char **out, char *why, size_t whysz)
{
	static const char *const ok_http[] = {"localhost", "169.254.170.2", "169.254.170.23",
	                                      "[fd00:ec2::23]", "[::1]"};
	char *host = NULL, *path = NULL;
	int rc = -EINVAL;

	if (relative && *relative) {
		if (relative[0] != '/') {
			snprintf(why, whysz,
			         "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI must start with /");
			return -EINVAL;
		}
		return asprintf(out, "http://169.254.170.2%s", relative) < 0 ? -ENOMEM : 0;
	}
	if (!full || !*full) {
		snprintf(why, whysz, "no container credentials URI");
		return -EINVAL;
	}
	if ((rc = creds_split_url(full, &host, &path)) < 0) {
		if (rc == -EINVAL)
			snprintf(why, whysz,
			         "AWS_CONTAINER_CREDENTIALS_FULL_URI is not an http(s) URL");
		return rc;
	}
	rc = -EINVAL;
	if (!strncmp(full, "https://", 8)) {
		rc = 0;
	} else {
		/* plain http only to the machine itself or to the ECS/EKS agent */
		char *colon = host[0] == '[' ? strchr(host, ']') : host;
		colon = colon ? strchr(colon, ':') : NULL;
		if (colon)
			*colon = '\0';
		for (size_t i = 0; i < sizeof(ok_http) / sizeof(ok_http[0]); i++)
			if (!strcasecmp(host, ok_http[i]))
				rc = 0;
		if (!strncmp(host, "127.", 4) && strspn(host, "0123456789.") == strlen(host))
			rc = 0;
		if (rc)
			snprintf(
			    why, whysz,
			    "AWS_CONTAINER_CREDENTIALS_FULL_URI over http must name a loopback "
			    "address or the container agent (169.254.170.2, 169.254.170.23)");
	}
	if (!rc && !(*out = strdup(full)))
		rc = -ENOMEM;
	free(host);
	free(path);
	return rc;
}

int creds_form_add(char **body, size_t *len, const char *name, const char *value)
{
	size_t vl = strlen(value), nl = strlen(name);
	char *enc = malloc(3 * vl + 1), *nb;
	if (!enc)
		return -ENOMEM;
	size_t el = sigv4_uri_encode(value, vl, true, enc);
	nb = realloc(*body, *len + nl + el + 3);
	if (!nb) {
		memset(enc, 0, el);
		free(enc);
		return -ENOMEM;
	}
	*body = nb;
	if (*len)
		nb[(*len)++] = '&';
	memcpy(nb + *len, name, nl);
	*len += nl;
	nb[(*len)++] = '=';
	memcpy(nb + *len, enc, el);
	*len += el;
	nb[*len] = '\0';
	memset(enc, 0, el);
	free(enc);
	return 0;
}

/* ---- helpers ----------------------------------------------------------- */

static void sleep_ms(unsigned ms)
{
	struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

/* Read a small file (a token) into a malloc()ed string, trimmed of white space. */
static int read_token_file(const char *path, char **out)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	char *buf;
	size_t n = 0;
	int rc = 0;

	if (fd < 0)
		return -errno;
	if (!(buf = malloc(MAX_TOKEN_FILE + 1))) {
		close(fd);
		return -ENOMEM;
	}
	for (;;) {
		ssize_t r = read(fd, buf + n, MAX_TOKEN_FILE - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0) {
			rc = -errno;
			break;
		}
		if (r == 0)
			break;
		n += (size_t)r;
		if (n == MAX_TOKEN_FILE) {
			rc = -EFBIG;
			break;
		}
	}
	close(fd);
	while (n && (buf[n - 1] == '\n' || buf[n - 1] == '\r' || buf[n - 1] == ' ' ||
	             buf[n - 1] == '\t'))
		n--;
	buf[n] = '\0';
	if (!rc && (!n || strchr(buf, '\n') || strchr(buf, '\r') || strlen(buf) != n))
		rc = -EBADMSG; /* empty, several lines, or a NUL: not one token */
	if (rc) {
		memset(buf, 0, n);
		free(buf);
		return rc;
	}
	*out = buf;
	return 0;
}

/*
 * One HTTP request with up to FETCH_ATTEMPTS attempts for transient
 * failures.  rs must be freed by the caller whatever the result.
 */
static int http_try(struct http_pool *pool, const struct http_req *rq, struct http_resp *rs)
{
	int rc = 0;
	for (unsigned a = 0; a < FETCH_ATTEMPTS; a++) {
		if (a) {
			http_resp_free(rs);
			sleep_ms(200u << a);
		}
		rc = http_do(pool, rq, rs);
		if (rc == -ENOMEM)
			return rc;
		if (rc < 0
		        ? !http_retryable(rs->curl_code, 0, NULL) || http_unreachable(rs->curl_code)
		        : !http_retryable(0, rs->status, NULL))
			break;
	}
	return rc;
}

/* Map an HTTP failure of a credential endpoint to an errno (logged by the caller). */
static int http_errno(int rc, long status)
{
	if (rc < 0)
		return rc == -ENOMEM ? rc : rc == -ETIMEDOUT ? -ETIMEDOUT : -EIO;
	return status == 401 || status == 403 || status == 404 || (status >= 400 && status < 500)
	           ? -EACCES
	           : -EIO;
}

/* ---- STS --------------------------------------------------------------- */

/*
 * POST an STS form to the STS endpoint, signed with sign (NULL: unsigned,
 * as AssumeRoleWithWebIdentity is), and parse the credentials.
 */
static int sts_post(struct creds_fetch_ctx *x, const struct creds_src *s, const char *body,
                    size_t len, const struct creds_keys *sign, struct creds_keys **out)
{
	char phash[65], date[17], auth[640], code[64], msg[256];
	char *lines[8] = {0};
	struct sigv4_header h[6];
	struct http_resp rs;
	size_t nh = 0, nl = 0;
	int rc;

	sigv4_sha256_hex(body, len, phash);
	sigv4_amz_date(time(NULL), date);
	h[nh++] = (struct sigv4_header){"content-type",
	                                "application/x-www-form-urlencoded; charset=utf-8"};
	h[nh++] = (struct sigv4_header){"host", x->sts_host};
	h[nh++] = (struct sigv4_header){"x-amz-content-sha256", phash};
	h[nh++] = (struct sigv4_header){"x-amz-date", date};
	if (sign && sign->session_token)
		h[nh++] = (struct sigv4_header){"x-amz-security-token", sign->session_token};
	if (sign) {
		struct sigv4_creds cr = {sign->access_key, sign->secret_key, sign->session_token};
		struct sigv4_request sr = {"POST", x->sts_path, "", h, nh, phash};
		if ((rc = sigv4_sign_service(&cr, x->region, "sts", date, &sr, auth, sizeof(auth),
		                             NULL, 0)) < 0)
			return rc;
	}
	rc = -ENOMEM;
	for (size_t i = 0; i < nh; i++) {
		if (!strcmp(h[i].name, "host"))
			continue; /* curl sends Host from the URL */
		if (asprintf(&lines[nl], "%s: %s", h[i].name, h[i].value) < 0) {
			lines[nl] = NULL;
			goto out;
		}
		nl++;
	}
	if (sign) {
		if (asprintf(&lines[nl], "Authorization: %s", auth) < 0) {
			lines[nl] = NULL;
			goto out;
		}
		nl++;
	}
	struct http_req rq = {.method = "POST",
	                      .url = x->sts_url,
	                      .headers = (const char *const *)lines,
	                      .nheaders = nl,
	                      .body = body,
	                      .body_len = len,
	                      .log_key = "(sts)"};
	rc = http_try(x->pool, &rq, &rs);
	if (rc < 0) {
		log_err("s3: credentials (%s): STS at %s: no answer: %s", s->desc, x->sts_url,
		        rs.error[0] ? rs.error : strerror(-rc));
		rc = http_errno(rc, 0);
	} else {
		rc = creds_parse_sts(rs.body, rs.len, out, code, sizeof(code), msg, sizeof(msg));
		if (rc == 0 && rs.status != 200) {
			creds_keys_put(*out);
			rc = -EBADMSG;
		}
		if (rc == -EACCES || (rc == -EBADMSG && rs.status != 200)) {
			log_err("s3: credentials (%s): STS at %s answered HTTP %ld %s%s%s", s->desc,
			        x->sts_url, rs.status, code[0] ? code : "(no code)",
			        msg[0] ? ": " : "", msg);
			rc = http_errno(0, rs.status);
		} else if (rc == -EBADMSG) {
			log_err("s3: credentials (%s): STS at %s: malformed answer (HTTP %ld)",
			        s->desc, x->sts_url, rs.status);
			rc = -EIO;
		}
	}
	http_resp_free(&rs);
out:
	for (size_t i = 0; i < nl; i++)
		wipe_free(lines[i]);
	memset(auth, 0, sizeof(auth));
	return rc;
}

static int role_form(const struct creds_src *s, const char *action, char **body, size_t *len)
{
	char dur[16];
	int rc;
	snprintf(dur, sizeof(dur), "%u", s->duration);
	if ((rc = creds_form_add(body, len, "Action", action)) ||
	    (rc = creds_form_add(body, len, "Version", STS_VERSION)) ||
	    (rc = creds_form_add(body, len, "RoleArn", s->role_arn)) ||
	    (rc = creds_form_add(body, len, "RoleSessionName", s->session_name)) ||
	    (s->duration && (rc = creds_form_add(body, len, "DurationSeconds", dur))) ||
	    (s->external_id && (rc = creds_form_add(body, len, "ExternalId", s->external_id))))
		return rc;
	return 0;
}

static int fetch_assume_role(struct creds_fetch_ctx *x, const struct creds_src *s,
                             struct creds_keys **out)
{
	struct creds_keys *src = NULL;
	char *body = NULL;
	size_t len = 0;
	int rc;

	if ((rc = creds_fetch(x, s->inner, &src)) < 0)
		return rc;
	if (!(rc = role_form(s, "AssumeRole", &body, &len)))
		rc = sts_post(x, s, body, len, src, out);
	free(body);
	creds_keys_put(src);
	return rc;
}

static int fetch_web_identity(struct creds_fetch_ctx *x, const struct creds_src *s,
                              struct creds_keys **out)
{
	char *token = NULL, *body = NULL;
	size_t len = 0;
	int rc;

	if ((rc = read_token_file(s->token_file, &token)) < 0) {
		log_err("s3: credentials (%s): web identity token file %s: %s", s->desc,
		        s->token_file, rc == -EBADMSG ? "not one token" : strerror(-rc));
		return rc == -ENOMEM ? rc : -EACCES;
	}
	if (!(rc = role_form(s, "AssumeRoleWithWebIdentity", &body, &len)) &&
	    !(rc = creds_form_add(&body, &len, "WebIdentityToken", token)))
		rc = sts_post(x, s, body, len, NULL, out);
	if (body)
		memset(body, 0, len);
	free(body);
	wipe_free(token);
	return rc;
}

/* ---- credential_process ------------------------------------------------ */

static int fetch_process(struct creds_fetch_ctx *x, const struct creds_src *s,
                         struct creds_keys **out)
{
	posix_spawn_file_actions_t fa;
	char *argv[] = {(char *)"sh", (char *)"-c", s->command, NULL};
	char *buf = NULL, why[128];
	size_t n = 0;
	int pfd[2], rc, status = 0;
	bool timed_out = false;
	pid_t pid;

	if (pipe2(pfd, O_CLOEXEC) < 0)
		return -errno;
	if (!(buf = malloc(MAX_PROCESS_OUTPUT + 1))) {
		close(pfd[0]);
		close(pfd[1]);
		return -ENOMEM;
	}
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, pfd[1], 1);
	rc = posix_spawn(&pid, "/bin/sh", &fa, NULL, argv, environ);
	posix_spawn_file_actions_destroy(&fa);
	close(pfd[1]);
	if (rc) {
		close(pfd[0]);
		free(buf);
		log_err("s3: credentials (%s): cannot start the credential_process: %s", s->desc,
		        strerror(rc));
		return -EIO;
	}
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (;;) {
		clock_gettime(CLOCK_MONOTONIC, &t);
		long left = (long)x->process_timeout_ms -
		            ((t.tv_sec - t0.tv_sec) * 1000L + (t.tv_nsec - t0.tv_nsec) / 1000000L);
		struct pollfd p = {.fd = pfd[0], .events = POLLIN};
		if (left <= 0) {
			timed_out = true;
			break;
		}
		int pr = poll(&p, 1, (int)left);
		if (pr < 0 && errno == EINTR)
			continue;
		if (pr <= 0) {
			timed_out = pr == 0;
			break;
		}
		ssize_t r = read(pfd[0], buf + n, MAX_PROCESS_OUTPUT - n);
		if (r < 0 && errno == EINTR)
			continue;
		if (r <= 0)
			break;
		n += (size_t)r;
		if (n == MAX_PROCESS_OUTPUT)
			break;
	}
	close(pfd[0]);
	if (timed_out)
		kill(pid, SIGKILL);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	buf[n] = '\0';
	if (timed_out) {
		log_err("s3: credentials (%s): the credential_process ran longer than %u s; killed",
		        s->desc, x->process_timeout_ms / 1000);
		rc = -ETIMEDOUT;
	} else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
		if (WIFEXITED(status))
			log_err(
			    "s3: credentials (%s): the credential_process exited with status %d",
			    s->desc, WEXITSTATUS(status));
		else
			log_err(
			    "s3: credentials (%s): the credential_process was killed by signal %d",
			    s->desc, WIFSIGNALED(status) ? WTERMSIG(status) : 0);
		rc = -EACCES;
	} else if ((rc = creds_parse_json(buf, n, CREDS_JSON_PROCESS, out, why, sizeof(why))) < 0) {
		if (rc != -ENOMEM)
			log_err(
			    "s3: credentials (%s): the credential_process output is unusable: %s",
			    s->desc, why);
		rc = rc == -ENOMEM ? rc : -EACCES;
	}
	memset(buf, 0, n);
	free(buf);
	return rc;
}

/* ---- container credentials --------------------------------------------- */

static int fetch_container(struct creds_fetch_ctx *x, const struct creds_src *s,
                           struct creds_keys **out)
{
	char *token = NULL, *line = NULL, why[128];
	struct http_resp rs;
	int rc;

	if (s->auth_token_file) {
		if ((rc = read_token_file(s->auth_token_file, &token)) < 0) {
			log_err(
			    "s3: credentials (%s): AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE %s: %s",
			    s->desc, s->auth_token_file,
			    rc == -EBADMSG ? "not one token" : strerror(-rc));
			return rc == -ENOMEM ? rc : -EACCES;
		}
	} else if (s->auth_token && !(token = strdup(s->auth_token))) {
		return -ENOMEM;
	}
	if (token && (strchr(token, '\r') || strchr(token, '\n'))) {
		log_err("s3: credentials (%s): the authorization token holds a line break",
		        s->desc);
		wipe_free(token);
		return -EINVAL;
	}
	if (token && asprintf(&line, "Authorization: %s", token) < 0) {
		wipe_free(token);
		return -ENOMEM;
	}
	struct http_req rq = {.method = "GET",
	                      .url = s->url,
	                      .headers = (const char *const *)&line,
	                      .nheaders = line ? 1 : 0,
	                      .log_key = "(container credentials)"};
	rc = http_try(x->pool, &rq, &rs);
	if (rc < 0 || rs.status != 200) {
		if (rc < 0)
			log_err("s3: credentials (%s): %s: no answer: %s", s->desc, s->url,
			        rs.error[0] ? rs.error : strerror(-rc));
		else
			log_err("s3: credentials (%s): %s answered HTTP %ld", s->desc, s->url,
			        rs.status);
		rc = http_errno(rc, rs.status);
	} else if ((rc = creds_parse_json(rs.body, rs.len, CREDS_JSON_CONTAINER, out, why,
	                                  sizeof(why))) < 0 &&
	           rc != -ENOMEM) {
		log_err("s3: credentials (%s): %s: unusable answer: %s", s->desc, s->url, why);
		rc = -EIO;
	}
	if (rs.body)
		memset(rs.body, 0, rs.len);
	http_resp_free(&rs);
	wipe_free(line);
	wipe_free(token);
	return rc;
}

/* ---- EC2 instance metadata (IMDSv2) ------------------------------------ */

/* One IMDS request; *body (malloc()ed) on HTTP 200. */
static int imds_do(struct creds_fetch_ctx *x, const struct creds_src *s, const char *method,
                   const char *path, const char *header, char **body, size_t *len)
{
	char *url = NULL;
	struct http_resp rs;
	int rc;

	if (asprintf(&url, "%s%s", s->url, path) < 0)
		return -ENOMEM;
	struct http_req rq = {.method = method,
	                      .url = url,
	                      .headers = (const char *const *)&header,
	                      .nheaders = 1,
	                      .log_key = "(instance metadata)"};
	rc = http_try(x->imds_pool, &rq, &rs);
	if (rc < 0) {
		mw_log(s->quiet ? MW_LOG_DEBUG : MW_LOG_ERR, __FILE__, __LINE__,
		       "s3: credentials (%s): %s %s: no answer: %s", s->desc, method, url,
		       rs.error[0] ? rs.error : strerror(-rc));
		rc = http_errno(rc, 0);
	} else if (rs.status != 200) {
		log_err("s3: credentials (%s): %s %s answered HTTP %ld%s", s->desc, method, url,
		        rs.status,
		        rs.status == 404 && strstr(path, "security-credentials")
		            ? " (no IAM role attached to the instance?)"
		            : "");
		rc = http_errno(0, rs.status);
	} else {
		*body = rs.body ? rs.body : strdup("");
		*len = rs.body ? rs.len : 0;
		rs.body = NULL;
		rc = *body ? 0 : -ENOMEM;
	}
	http_resp_free(&rs);
	free(url);
	return rc;
}

static int fetch_imds(struct creds_fetch_ctx *x, const struct creds_src *s, struct creds_keys **out)
{
	char *token = NULL, *hdr = NULL, *role = NULL, *path = NULL, *doc = NULL, why[128];
	size_t tl = 0, rl = 0, dl = 0;
	int rc;

	rc = imds_do(x, s, "PUT", "/latest/api/token",
	             "X-aws-ec2-metadata-token-ttl-seconds: " IMDS_TOKEN_TTL, &token, &tl);
	if (rc < 0)
		goto out;
	while (tl && (token[tl - 1] == '\n' || token[tl - 1] == '\r' || token[tl - 1] == ' '))
		token[--tl] = '\0';
	if (!tl || strchr(token, '\n') || strchr(token, '\r')) {
		log_err("s3: credentials (%s): the metadata service gave no usable token", s->desc);
		rc = -EIO;
		goto out;
	}
	if (asprintf(&hdr, "X-aws-ec2-metadata-token: %s", token) < 0) {
		hdr = NULL;
		rc = -ENOMEM;
		goto out;
	}
	rc = imds_do(x, s, "GET", "/latest/meta-data/iam/security-credentials/", hdr, &role, &rl);
	if (rc < 0)
		goto out;
	role[strcspn(role, "\r\n")] = '\0';
	if (!*role || strchr(role, '/')) {
		log_err("s3: credentials (%s): no IAM role attached to the instance", s->desc);
		rc = -EACCES;
		goto out;
	}
	if (asprintf(&path, "/latest/meta-data/iam/security-credentials/%s", role) < 0) {
		path = NULL;
		rc = -ENOMEM;
		goto out;
	}
	if ((rc = imds_do(x, s, "GET", path, hdr, &doc, &dl)) < 0)
		goto out;
	rc = creds_parse_json(doc, dl, CREDS_JSON_IMDS, out, why, sizeof(why));
	if (rc < 0 && rc != -ENOMEM) {
		log_err("s3: credentials (%s): role %s: unusable answer: %s", s->desc, role, why);
		rc = rc == -EACCES ? rc : -EIO;
	} else if (rc == 0) {
		log_debug("s3: credentials (%s): role %s", s->desc, role);
	}
out:
	wipe_free(token);
	wipe_free(hdr);
	free(role);
	free(path);
	if (doc)
		memset(doc, 0, dl);
	free(doc);
	return rc;
}

/* ---- dispatch ---------------------------------------------------------- */

int creds_fetch(struct creds_fetch_ctx *x, const struct creds_src *s, struct creds_keys **out)
{
	switch (s->kind) {
	case CREDS_STATIC:
		__atomic_add_fetch(&s->keys->refs, 1, __ATOMIC_RELAXED);
		*out = s->keys;
		return 0;
	case CREDS_WEB_IDENTITY:
		return fetch_web_identity(x, s, out);
	case CREDS_ASSUME_ROLE:
		return fetch_assume_role(x, s, out);
	case CREDS_PROCESS:
		return fetch_process(x, s, out);
	case CREDS_CONTAINER:
		return fetch_container(x, s, out);
	case CREDS_IMDS:
		return fetch_imds(x, s, out);
	}
	return -EINVAL;
}
