/*
 * takeover.c - "memwalfs mount --takeover": the old mount of the store hands
 * over (commits what it took, takes nothing more) before the new mount
 * claims the store, and is told afterwards that it is fenced (the design
 * is in tools/mount.c, the interface in tools/mount.h).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "mount.h"

/* How long a takeover waits for the old mount's commit, and for it to learn its fence (ms). */
#define TAKEOVER_SYNC_MS 30000u
#define TAKEOVER_TELL_MS 10000u

/*
 * --takeover, before the claim: the old mount (on this machine, where this
 * process sees it) gets the kernel's dirty pages (syncfs), stops taking
 * changes (EIO) and commits everything it took (MWFS_HANDOVER_XATTR), so
 * that nothing it acknowledged is lost.
 */
void mount_takeover_sync(const struct mwd_holder *old)
{
	char val[64];
	if (!old->mnt[0]) {
		fprintf(stderr,
		        "memwalfs: --takeover: daemon %ld's mount is not visible here: what it has "
		        "not committed yet is lost\n",
		        (long)old->pid);
		return;
	}
	int rc =
	    mwd_ask_mount(old->mnt, true, MWFS_HANDOVER_XATTR, val, sizeof(val), TAKEOVER_SYNC_MS);
	if (rc)
		fprintf(stderr,
		        "memwalfs: --takeover: the mount at %s did not commit what it holds (%s): "
		        "what it has not committed yet is lost\n",
		        old->mnt, rc == -ETIMEDOUT ? "no answer within 30 s" : strerror(-rc));
	else
		fprintf(stderr,
		        "memwalfs: --takeover: the mount at %s committed what it held and takes no "
		        "more changes\n",
		        old->mnt);
}

/*
 * --takeover, once the engine claimed the store (claimed), or failed to:
 * tell the old mount, which then checks the epoch and fails every change
 * with EIO for good (fs/xattr.c, MWFS_FENCE_XATTR), or, not fenced, takes
 * changes again.  Untold, it learns only at its next commit, after
 * acknowledging a write that is then lost (README.md, "One writer").
 */
void mount_takeover_tell(const struct mwd_holder *old, bool claimed)
{
	char val[64] = "";
	int rc = old->mnt[0] ? mwd_ask_mount(old->mnt, false, MWFS_FENCE_XATTR, val, sizeof(val),
	                                     TAKEOVER_TELL_MS)
	                     : -ENOENT;
	if (!claimed) {
		if (!rc && !strncmp(val, "current", 7))
			fprintf(
			    stderr,
			    "memwalfs: --takeover failed: the mount at %s takes changes again\n",
			    old->mnt);
		return;
	}
	if (!rc && !strncmp(val, "fenced", 6))
		fprintf(stderr,
		        "memwalfs: --takeover: the mount at %s knows it was fenced: every change "
		        "there fails with EIO from now on\n",
		        old->mnt);
	else
		fprintf(stderr,
		        "memwalfs: --takeover: the old mount%s%s was not told (%s): it learns that "
		        "it was fenced at its next commit, and the first writes made there until "
		        "then are lost\n",
		        old->mnt[0] ? " at " : "", old->mnt,
		        rc ? strerror(-rc) : "it answered that the store is still its own");
}
