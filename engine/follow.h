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

#endif /* MEMWALFS_FOLLOW_H */
