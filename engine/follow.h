/*
 * follow.h - followers on demand (engine/follow.c, docs/FOLLOWERS.md): for
 * tests and tools, like maint.h for the writer.  Private to engine/ and its tests.
 */
#ifndef MEMWALFS_FOLLOW_H
#define MEMWALFS_FOLLOW_H

struct engine;

/*
 * Make the follower poll now (whatever its interval) and wait until that poll is
 * done.  Returns 0, -EINVAL on an engine that does not follow.  Any thread but the
 * follower's (not from the follow callback).
 */
int follow_poll_now(struct engine *e);

/*
 * follow_poll_now(), but the poll probes the manifest only, as an idle follower's poll
 * does every FOLLOW_MANIFEST_EVERY polls (it still applies the WAL a newer manifest
 * covers first).  Same returns and threads.
 */
int follow_poll_manifest_now(struct engine *e);

#endif /* MEMWALFS_FOLLOW_H */
