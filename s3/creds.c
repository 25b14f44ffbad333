/*
 * creds.c - the AWS credential chain and the provider that keeps its keys
 * fresh (see creds.h for the chain and the refresh rules).
 *
 * Open resolves the chain once into a struct creds_src (a small tree: an
 * AssumeRole source holds the source it signs with) and fetches the first
 * keys.  Sources are fetched again by the refresh thread, never resolved
 * again: a profile file edited while mounted changes nothing until the
 * next mount, but a rotated web identity or container token file is read
 * at every refresh.
 *
 * Concurrency: c->mu protects the current keys, the attempt counter and
 * the stop and urgent flags.  Keys are published by swapping c->cur; a
 * reader takes a reference under the mutex and signs without it, so a
 * refresh never waits for requests and requests never see half a swap.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "creds_int.h"
#include "log.h"
#include "profile.h"

#define REFRESH_MARGIN_SEC 300   /* refresh this long before expiry ... */
#define SHORT_LIFETIME_SEC 600   /* ... or half way through a lifetime shorter than this */
#define RETRY_MIN_MS 1000        /* a failed refresh is retried after 1 s, doubling ... */
#define RETRY_MAX_MS 60000       /* ... up to 60 s */
#define MIN_GAP_MS 1000          /* never two fetches closer than this */
#define MAX_WAIT_MS 60000        /* the refresher re-reads the clocks at least this often */
#define MAX_PROFILE_DEPTH 8      /* source_profile chains longer than this are loops */
#define DEFAULT_TIMEOUT_MS 10000 /* STS and container requests */
#define PROCESS_TIMEOUT_MS 60000 /* credential_process */
#define IMDS_DEFAULT_URL "http://169.254.169.254"
#define IMDS_DEFAULT_URL6 "http://[fd00:ec2::254]"

struct creds {
	pthread_mutex_t mu;        /* protects cur, attempts, stop, urgent */
	pthread_cond_t cv;         /* CLOCK_MONOTONIC; refresher wake-ups, attempt finished */
	struct creds_keys *cur;    /* the keys new requests sign with (one reference) */
	uint64_t attempts;         /* refresh attempts finished */
	bool stop;                 /* creds_close() asks the refresher to end */
	bool urgent;               /* a request found the keys expired: refresh now */
	bool thread;               /* a refresh thread runs (constant after open) */
	pthread_t thr;             /* it */
	struct creds_src *src;     /* the chosen source (constant) */
	struct creds_fetch_ctx fx; /* endpoints and pools (constant) */
	unsigned wait_ms;          /* creds_get() waits this long for a refresh of expired keys */
	uint64_t ok, failed;       /* refreshes (atomic) */
};

/* ---- sources ----------------------------------------------------------- */

void creds_src_free(struct creds_src *s)
{
	if (!s)
		return;
	free(s->desc);
	creds_keys_put(s->keys);
	free(s->role_arn);
	free(s->session_name);
	free(s->external_id);
	free(s->token_file);
	creds_src_free(s->inner);
	if (s->command)
		memset(s->command, 0, strlen(s->command));
	free(s->command);
	free(s->url);
	if (s->auth_token)
		memset(s->auth_token, 0, strlen(s->auth_token));
	free(s->auth_token);
	free(s->auth_token_file);
	free(s);
}

static struct creds_src *src_new(enum creds_kind kind, const char *fmt, const char *a,
                                 const char *b)
{
	struct creds_src *s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->kind = kind;
	if (asprintf(&s->desc, fmt, a ? a : "", b ? b : "") < 0) {
		free(s);
		return NULL;
	}
	return s;
}

static int dup_opt(char **dst, const char *v)
{
	if (!v || !*v)
		return 0;
	return (*dst = strdup(v)) ? 0 : -ENOMEM;
}

static int static_src(const char *ak, const char *sk, const char *tok, const char *fmt,
                      const char *a, struct creds_src **out)
{
	struct creds_src *s = src_new(CREDS_STATIC, fmt, a, NULL);
	if (!s || !(s->keys = creds_keys_new(ak, sk, tok, 0))) {
		creds_src_free(s);
		return -ENOMEM;
	}
	*out = s;
	return 0;
}

/* RoleSessionName: the configured one, else "memwalfs-<unix time>". */
static int session_name(struct creds_src *s, const char *configured)
{
	if (configured && *configured)
		return dup_opt(&s->session_name, configured);
	return asprintf(&s->session_name, "memwalfs-%lld", (long long)time(NULL)) < 0 ? -ENOMEM : 0;
}

static int container_src(struct creds_src **out)
{
	const char *rel = getenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI");
	const char *full = getenv("AWS_CONTAINER_CREDENTIALS_FULL_URI");
	char why[200];
	struct creds_src *s;
	int rc;

	if ((!rel || !*rel) && (!full || !*full))
		return -ENOENT;
	if (!(s = src_new(CREDS_CONTAINER, "container credentials", NULL, NULL)))
		return -ENOMEM;
	if ((rc = creds_container_url(rel, full, &s->url, why, sizeof(why))) < 0) {
		if (rc == -EINVAL)
			log_err("s3: credentials: %s", why);
		creds_src_free(s);
		return rc;
	}
	if ((rc = dup_opt(&s->auth_token_file, getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE"))) ||
	    (!s->auth_token_file &&
	     (rc = dup_opt(&s->auth_token, getenv("AWS_CONTAINER_AUTHORIZATION_TOKEN"))))) {
		creds_src_free(s);
		return rc;
	}
	*out = s;
	return 0;
}

static bool env_true(const char *name)
{
	const char *v = getenv(name);
	return v && !strcasecmp(v, "true");
}

static int imds_src(bool fallback, struct creds_src **out)
{
	const char *ep = getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	const char *mode = getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE");
	struct creds_src *s;
	size_t l;

	if (env_true("AWS_EC2_METADATA_DISABLED"))
		return -ENOENT;
	if (!ep || !*ep)
		ep = mode && !strcasecmp(mode, "IPv6") ? IMDS_DEFAULT_URL6 : IMDS_DEFAULT_URL;
	if (strncmp(ep, "http://", 7) && strncmp(ep, "https://", 8)) {
		log_err(
		    "s3: credentials: AWS_EC2_METADATA_SERVICE_ENDPOINT %s is not an http(s) URL",
		    ep);
		return -EINVAL;
	}
	if (!(s = src_new(CREDS_IMDS, "instance metadata", NULL, NULL)) || !(s->url = strdup(ep))) {
		creds_src_free(s);
		return -ENOMEM;
	}
	l = strlen(s->url);
	while (l && s->url[l - 1] == '/')
		s->url[--l] = '\0';
	s->quiet = fallback && !getenv("AWS_EC2_METADATA_SERVICE_ENDPOINT");
	*out = s;
	return 0;
}

static int env_static(struct creds_src **out, const char *what)
{
	const char *ak = getenv("AWS_ACCESS_KEY_ID"), *sk = getenv("AWS_SECRET_ACCESS_KEY");
	if ((!ak || !*ak) && (!sk || !*sk))
		return -ENOENT;
	if (!ak || !*ak || !sk || !*sk) {
		log_err(
		    "s3: credentials%s: only one of AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY is "
		    "set",
		    what);
		return -EINVAL;
	}
	return static_src(ak, sk, getenv("AWS_SESSION_TOKEN"), "environment%s", what, out);
}

/* Files the profiles come from (for messages too). */
struct files {
	char config[4096];
	char cred[4096];
};

static int from_profile(const struct files *f, const char *name, int depth, bool must_exist,
                        struct creds_src **out);

/* role_arn in profile name: AssumeRole or AssumeRoleWithWebIdentity. */
static int role_src(const struct files *f, const char *name, const struct profile *p, int depth,
                    struct creds_src **out)
{
	const char *arn = profile_get(p, "role_arn"), *sp = profile_get(p, "source_profile");
	const char *cs = profile_get(p, "credential_source");
	const char *wif = profile_get(p, "web_identity_token_file");
	const char *dur = profile_get(p, "duration_seconds");
	struct creds_src *s;
	int rc;

	s = src_new(wif ? CREDS_WEB_IDENTITY : CREDS_ASSUME_ROLE, "profile %s: role %s", name, arn);
	if (!s)
		return -ENOMEM;
	if ((rc = dup_opt(&s->role_arn, arn)) ||
	    (rc = session_name(s, profile_get(p, "role_session_name"))) ||
	    (rc = dup_opt(&s->external_id, profile_get(p, "external_id"))) ||
	    (rc = dup_opt(&s->token_file, wif)))
		goto fail;
	if (dur) {
		char *end;
		long d = strtol(dur, &end, 10);
		if (*end || d < 900 || d > 43200) {
			log_err(
			    "s3: credentials: profile %s: duration_seconds %s is not 900..43200",
			    name, dur);
			rc = -EINVAL;
			goto fail;
		}
		s->duration = (unsigned)d;
	}
	if (wif) {
		;
	} else if (sp && *sp) {
		if (!strcmp(sp, name)) {
			/* a profile that is its own source: its static keys sign */
			const char *ak = profile_get(p, "aws_access_key_id");
			const char *sk = profile_get(p, "aws_secret_access_key");
			if (!ak || !sk) {
				log_err(
				    "s3: credentials: profile %s is its own source_profile but has "
				    "no aws_access_key_id / aws_secret_access_key",
				    name);
				rc = -EINVAL;
				goto fail;
			}
			rc = static_src(ak, sk, profile_get(p, "aws_session_token"), "profile %s",
			                name, &s->inner);
		} else {
			rc = from_profile(f, sp, depth + 1, true, &s->inner);
		}
		if (rc)
			goto fail;
	} else if (cs && !strcmp(cs, "Environment")) {
		if ((rc = env_static(&s->inner, " (credential_source)")) == -ENOENT) {
			log_err("s3: credentials: profile %s: credential_source Environment, but "
			        "AWS_ACCESS_KEY_ID is not set",
			        name);
			rc = -EINVAL;
		}
		if (rc)
			goto fail;
	} else if (cs && !strcmp(cs, "Ec2InstanceMetadata")) {
		if ((rc = imds_src(false, &s->inner)))
			goto fail;
	} else if (cs && !strcmp(cs, "EcsContainer")) {
		if ((rc = container_src(&s->inner)) == -ENOENT) {
			log_err(
			    "s3: credentials: profile %s: credential_source EcsContainer, but no "
			    "AWS_CONTAINER_CREDENTIALS_*_URI is set",
			    name);
			rc = -EINVAL;
		}
		if (rc)
			goto fail;
	} else {
		log_err("s3: credentials: profile %s: role_arn needs source_profile, "
		        "credential_source (Environment, Ec2InstanceMetadata, EcsContainer) or "
		        "web_identity_token_file",
		        name);
		rc = -EINVAL;
		goto fail;
	}
	*out = s;
	return 0;
fail:
	creds_src_free(s);
	return rc;
}

static int from_profile(const struct files *f, const char *name, int depth, bool must_exist,
                        struct creds_src **out)
{
	struct profile *p = NULL;
	const char *ak, *sk, *proc;
	int rc;

	if (depth > MAX_PROFILE_DEPTH) {
		log_err(
		    "s3: credentials: source_profile chain longer than %d at profile %s (a loop?)",
		    MAX_PROFILE_DEPTH, name);
		return -EINVAL;
	}
	rc = profile_load(f->config, f->cred, name, &p);
	if (rc == -ENOENT) {
		if (must_exist)
			log_err("s3: credentials: profile %s is in neither %s nor %s", name,
			        f->config, f->cred);
		return must_exist ? -EINVAL : -ENOENT;
	}
	if (rc)
		return rc;
	ak = profile_get(p, "aws_access_key_id");
	sk = profile_get(p, "aws_secret_access_key");
	proc = profile_get(p, "credential_process");
	if (profile_get(p, "role_arn")) {
		rc = role_src(f, name, p, depth, out);
	} else if (profile_get(p, "web_identity_token_file")) {
		log_err("s3: credentials: profile %s: web_identity_token_file needs role_arn",
		        name);
		rc = -EINVAL;
	} else if (ak && *ak && sk && *sk) {
		rc = static_src(ak, sk, profile_get(p, "aws_session_token"), "profile %s", name,
		                out);
	} else if (ak || sk) {
		log_err("s3: credentials: profile %s has only one of aws_access_key_id and "
		        "aws_secret_access_key",
		        name);
		rc = -EINVAL;
	} else if (proc && *proc) {
		struct creds_src *s =
		    src_new(CREDS_PROCESS, "profile %s: credential_process", name, NULL);
		if (!s || !(s->command = strdup(proc))) {
			creds_src_free(s);
			rc = -ENOMEM;
		} else {
			*out = s;
			rc = 0;
		}
	} else {
		if (must_exist)
			log_err(
			    "s3: credentials: profile %s has no credentials (no keys, role_arn or "
			    "credential_process)",
			    name);
		rc = must_exist ? -EINVAL : -ENOENT;
	}
	profile_free(p);
	return rc;
}

/* Walk the chain (creds.h) to the first configured source. */
static int resolve(const struct creds_opts *o, struct creds_src **out)
{
	const char *wif = getenv("AWS_WEB_IDENTITY_TOKEN_FILE"), *arn = getenv("AWS_ROLE_ARN");
	const char *prof = o->profile;
	struct files f;
	bool explicit_profile = prof && *prof;
	int rc;

	/* 1. the options */
	if (o->access_key || o->secret_key) {
		if (!o->access_key || !*o->access_key || !o->secret_key || !*o->secret_key) {
			log_err(
			    "s3: credentials: the options give only one of access key and secret "
			    "key");
			return -EINVAL;
		}
		return static_src(o->access_key, o->secret_key, o->session_token, "options", NULL,
		                  out);
	}
	/* 2. the environment (an explicit profile overrides it, as in the AWS CLI) */
	if (!explicit_profile && (rc = env_static(out, "")) != -ENOENT)
		return rc;
	/* 3. web identity */
	if (wif && *wif) {
		struct creds_src *s;
		if (!arn || !*arn) {
			log_err(
			    "s3: credentials: AWS_WEB_IDENTITY_TOKEN_FILE is set but AWS_ROLE_ARN "
			    "is not");
			return -EINVAL;
		}
		if (!(s = src_new(CREDS_WEB_IDENTITY, "web identity: role %s", arn, NULL)))
			return -ENOMEM;
		if ((rc = dup_opt(&s->role_arn, arn)) || (rc = dup_opt(&s->token_file, wif)) ||
		    (rc = session_name(s, getenv("AWS_ROLE_SESSION_NAME")))) {
			creds_src_free(s);
			return rc;
		}
		*out = s;
		return 0;
	}
	/* 4. the shared config and credentials files */
	if (!explicit_profile) {
		prof = getenv("AWS_PROFILE");
		explicit_profile = prof && *prof;
	}
	if (!explicit_profile)
		prof = "default";
	profile_default_paths(f.config, f.cred, sizeof(f.config));
	if ((rc = from_profile(&f, prof, 0, explicit_profile, out)) != -ENOENT)
		return rc;
	/* 5. container credentials */
	if ((rc = container_src(out)) != -ENOENT)
		return rc;
	/* 6. instance metadata */
	if ((rc = imds_src(true, out)) != -ENOENT)
		return rc;
	log_err("s3: no credentials: none in the environment (AWS_ACCESS_KEY_ID), no web "
	        "identity, no profile %s in %s or %s, no container credentials, and the instance "
	        "metadata service is disabled",
	        prof, f.config, f.cred);
	return -EACCES;
}

/* ---- the provider ------------------------------------------------------ */

int64_t creds_refresh_at(int64_t obtained, int64_t expires)
{
	int64_t life;
	if (!expires)
		return INT64_MAX;
	life = expires - obtained;
	if (life < SHORT_LIFETIME_SEC)
		return expires - (life > 0 ? life / 2 : 0);
	return expires - REFRESH_MARGIN_SEC;
}

static int64_t wall_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Wait on c->cv (c->mu held) for up to ms milliseconds. */
static void wait_for(struct creds *c, int64_t ms)
{
	struct timespec ts;
	if (ms > MAX_WAIT_MS)
		ms = MAX_WAIT_MS;
	if (ms < 1)
		ms = 1;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	ts.tv_sec += (time_t)(ms / 1000);
	ts.tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ts.tv_nsec >= 1000000000L) {
		ts.tv_sec++;
		ts.tv_nsec -= 1000000000L;
	}
	pthread_cond_timedwait(&c->cv, &c->mu, &ts);
}

static void *refresher(void *arg)
{
	struct creds *c = arg;
	unsigned fails = 0;
	int64_t retry_at = 0, last = wall_ms();

	pthread_mutex_lock(&c->mu);
	while (!c->stop) {
		int64_t now = wall_ms(), due;
		int64_t at = creds_refresh_at(c->cur->obtained, c->cur->expires);
		due = fails ? retry_at : at == INT64_MAX ? INT64_MAX : at * 1000;
		if (c->urgent && due > now)
			due = now;
		if (due < last + MIN_GAP_MS)
			due = last + MIN_GAP_MS;
		if (now < due) {
			wait_for(c, due == INT64_MAX ? MAX_WAIT_MS : due - now);
			continue;
		}
		c->urgent = false;
		pthread_mutex_unlock(&c->mu);

		struct creds_keys *nk = NULL, *old = NULL;
		int rc = creds_fetch(&c->fx, c->src, &nk);
		last = wall_ms();

		pthread_mutex_lock(&c->mu);
		c->attempts++;
		if (rc == 0) {
			old = c->cur;
			c->cur = nk;
			fails = 0;
			__atomic_add_fetch(&c->ok, 1, __ATOMIC_RELAXED);
			log_info("s3: credentials (%s) refreshed: access key %s, %s%lld s",
			         c->src->desc, nk->access_key,
			         nk->expires ? "expire in " : "no expiry",
			         nk->expires ? (long long)(nk->expires - nk->obtained) : 0LL);
		} else {
			unsigned d = fails < 6 ? RETRY_MIN_MS << fails : RETRY_MAX_MS;
			bool expired = c->cur->expires && last / 1000 >= c->cur->expires;
			fails++;
			retry_at = last + (d < RETRY_MAX_MS ? d : RETRY_MAX_MS);
			__atomic_add_fetch(&c->failed, 1, __ATOMIC_RELAXED);
			mw_log(expired ? MW_LOG_ERR : MW_LOG_WARN, __FILE__, __LINE__,
			       "s3: credentials (%s): refresh failed (%s), retrying in %u s; %s",
			       c->src->desc, strerror(-rc), (unsigned)((retry_at - last) / 1000),
			       expired
			           ? "the current keys have expired: requests fail until it works"
			           : "the current keys stay in use until they expire");
		}
		pthread_cond_broadcast(&c->cv);
		pthread_mutex_unlock(&c->mu);
		creds_keys_put(old);
		pthread_mutex_lock(&c->mu);
	}
	pthread_mutex_unlock(&c->mu);
	return NULL;
}

struct creds_keys *creds_get(struct creds *c)
{
	struct creds_keys *k;

	pthread_mutex_lock(&c->mu);
	if (c->thread && c->cur->expires && wall_ms() / 1000 >= c->cur->expires) {
		uint64_t a = c->attempts;
		struct timespec t0, t;
		clock_gettime(CLOCK_MONOTONIC, &t0);
		c->urgent = true;
		pthread_cond_broadcast(&c->cv);
		while (!c->stop && c->attempts == a) {
			clock_gettime(CLOCK_MONOTONIC, &t);
			int64_t spent = (int64_t)(t.tv_sec - t0.tv_sec) * 1000 +
			                (t.tv_nsec - t0.tv_nsec) / 1000000;
			if (spent >= c->wait_ms)
				break;
			wait_for(c, c->wait_ms - spent);
		}
	}
	k = c->cur;
	__atomic_add_fetch(&k->refs, 1, __ATOMIC_RELAXED);
	pthread_mutex_unlock(&c->mu);
	return k;
}

const char *creds_source(const struct creds *c)
{
	return c->src->desc;
}

void creds_refresh_counts(struct creds *c, uint64_t *ok, uint64_t *failed)
{
	*ok = __atomic_load_n(&c->ok, __ATOMIC_RELAXED);
	*failed = __atomic_load_n(&c->failed, __ATOMIC_RELAXED);
}

void creds_close(struct creds *c)
{
	if (!c)
		return;
	if (c->thread) {
		pthread_mutex_lock(&c->mu);
		c->stop = true;
		pthread_cond_broadcast(&c->cv);
		pthread_mutex_unlock(&c->mu);
		pthread_join(c->thr, NULL);
	}
	creds_keys_put(c->cur);
	creds_src_free(c->src);
	http_pool_free(c->fx.pool);
	http_pool_free(c->fx.imds_pool);
	free(c->fx.sts_url);
	free(c->fx.sts_host);
	free(c->fx.sts_path);
	free(c->fx.region);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	free(c);
}

/* The STS endpoint (creds.h): option, AWS_ENDPOINT_URL_STS, the S3 endpoint, AWS. */
static int sts_endpoint(struct creds *c, const struct creds_opts *o)
{
	const char *ep = o->sts_endpoint, *env = getenv("AWS_ENDPOINT_URL_STS");
	char *def = NULL;
	int rc;

	if (!ep || !*ep)
		ep = env && *env ? env : o->s3_endpoint;
	if (!ep || !*ep) {
		if (asprintf(&def, "https://sts.%s.amazonaws.com", o->region) < 0)
			return -ENOMEM;
		ep = def;
	}
	rc = creds_split_url(ep, &c->fx.sts_host, &c->fx.sts_path);
	if (rc == -EINVAL)
		log_err("s3: credentials: STS endpoint %s is not an http(s) URL", ep);
	else if (rc == 0 && asprintf(&c->fx.sts_url, "%s://%s%s",
	                             strncmp(ep, "https://", 8) ? "http" : "https", c->fx.sts_host,
	                             c->fx.sts_path) < 0)
		rc = -ENOMEM;
	free(def);
	return rc;
}

int creds_open(const struct creds_opts *o, struct creds **out)
{
	struct creds *c = calloc(1, sizeof(*c));
	pthread_condattr_t ca;
	const char *mt = getenv("AWS_METADATA_SERVICE_TIMEOUT");
	unsigned timeout = o->timeout_ms ? o->timeout_ms : DEFAULT_TIMEOUT_MS;
	int rc;

	if (!c)
		return -ENOMEM;
	pthread_mutex_init(&c->mu, NULL);
	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&c->cv, &ca);
	pthread_condattr_destroy(&ca);
	c->wait_ms = timeout;
	c->fx.process_timeout_ms = PROCESS_TIMEOUT_MS;
	if (!(c->fx.region = strdup(o->region ? o->region : "us-east-1"))) {
		rc = -ENOMEM;
		goto fail;
	}
	if ((rc = resolve(o, &c->src)) < 0)
		goto fail;
	if (c->src->kind != CREDS_STATIC) {
		struct http_pool_opts po = {
		    .connections = 2, .timeout_ms = timeout, .ca_file = o->ca_file};
		struct http_pool_opts mo = {.connections = 1, .timeout_ms = 1000};
		if (mt && *mt) {
			long s = strtol(mt, NULL, 10);
			if (s > 0 && s < 3600)
				mo.timeout_ms = (unsigned)s * 1000u;
		}
		if ((rc = sts_endpoint(c, o)) < 0 || (rc = http_pool_new(&po, &c->fx.pool)) < 0 ||
		    (rc = http_pool_new(&mo, &c->fx.imds_pool)) < 0)
			goto fail;
	}
	if ((rc = creds_fetch(&c->fx, c->src, &c->cur)) < 0) {
		if (c->src->quiet && (rc == -EIO || rc == -ETIMEDOUT)) {
			char cfg[4096], cred[4096];
			profile_default_paths(cfg, cred, sizeof(cfg));
			log_err(
			    "s3: no credentials: none in the environment (AWS_ACCESS_KEY_ID), no "
			    "web "
			    "identity, no profile in %s or %s, no container credentials, and no "
			    "instance metadata service answers at %s",
			    cfg, cred, c->src->url);
			rc = -EACCES;
		}
		goto fail;
	}
	if (c->cur->expires) {
		if ((rc = pthread_create(&c->thr, NULL, refresher, c))) {
			rc = -rc;
			goto fail;
		}
		c->thread = true;
	}
	if (c->cur->expires)
		log_info(
		    "s3: credentials from %s (access key %s, expire in %lld s, refreshed ahead)",
		    c->src->desc, c->cur->access_key,
		    (long long)(c->cur->expires - (int64_t)time(NULL)));
	else
		log_info("s3: credentials from %s (access key %s)", c->src->desc,
		         c->cur->access_key);
	*out = c;
	return 0;
fail:
	creds_close(c);
	return rc;
}
