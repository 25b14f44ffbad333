#!/usr/bin/env bash
# tests/fs/nsrace.sh MEMWALFS BACKEND - namespace operations from many threads at once (issue
# 13's removal work: fs->mu taken once per lookup, unlink and create, op_warm() in fs/dir.c).
# nsrace.py runs NSRACE_THREADS threads (16) x NSRACE_OPS operations (1500) of
# create, fsync, unlink, rename, link (NSRACE_LINKS=1), mkdir, rmdir, unlink of an open file, lookups and
# listings of what the others change, in six shared directories; the tree must equal the
# union of the threads' models (names and bytes) while mounted, after a remount, and fsck
# must find the store clean.  The seed is printed; MEMWALFS_SEED=N replays every thread's
# sequence.  NSRACE_ROUNDS (1) repeats the whole test on fresh stores.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
threads=${NSRACE_THREADS:-16}
ops=${NSRACE_OPS:-1500}
rounds=${NSRACE_ROUNDS:-1}
base=$STORE
for r in $(seq "$rounds"); do
	seed=${MEMWALFS_SEED:-$(( (RANDOM << 15) | RANDOM ))}
	STORE=$base-$r
	m=$WORK/m$r
	mw_mount "$m"
	python3 "$here/nsrace.py" "$m" "$seed" "$threads" "$ops" || { echo "FAIL: round $r (MEMWALFS_SEED=$seed)"; exit 1; }
	mw_umount "$m"
	mw_mount "$m"
	python3 "$here/nsrace.py" check "$m" "$seed" "$threads" "$ops" || { echo "FAIL: round $r after the remount (MEMWALFS_SEED=$seed)"; exit 1; }
	mw_umount "$m"
	mw_fsck || { echo "FAIL: round $r (MEMWALFS_SEED=$seed)"; exit 1; }
done
echo "nsrace ($BACKEND): ok"
