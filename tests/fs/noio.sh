#!/usr/bin/env bash
# tests/fs/noio.sh MEMWALFS BACKEND - the no-I/O rule under fs->mu (docs/DESIGN.md "Locking")
# through a real mount with the smallest memory cache: what a handler reads under the lock
# comes from memory or sends it back to read without the lock and try again (fs_retry()).
# noio.py makes NOIO_DIRS directories of NOIO_FILES files with xattrs (memtable 128K: many
# tables); then, each time after a remount (cold: no disk cache), half the directories are
# worked on by 4 processes at once (stat, ls -l, read, getxattr, setxattr, removexattr,
# unlink, rmdir, a rename over an empty directory) while a fifth lists and stats everything:
#  1. with no memory cache (--cache-size 0): nothing a table holds is in memory under the
#     lock, so every such read is retried (fs_noio_retries in stats --raw must grow) until
#     it is read under the lock with the mark lifted (8 rounds);
#  2. with a 64K cache: the warmed blocks mostly stay until the retry.
# The test (debug build) has the no-I/O mark compiled in: a store request under fs->mu
# aborts the daemon and fails it.  After each pass and a remount the tree must equal
# noio.py's model, and fsck must find the store clean.  The directories' order is shuffled
# by a seed, printed; MEMWALFS_SEED=N replays it.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
nd=${NOIO_DIRS:-$([ "$BACKEND" = s3 ] && echo 20 || echo 40)}
nf=${NOIO_FILES:-$([ "$BACKEND" = s3 ] && echo 50 || echo 100)}
seed=${MEMWALFS_SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "seed $seed (MEMWALFS_SEED=$seed replays), $nd directories of $nf files"
m=$WORK/m
fail() { mw_log_tail "$m"; echo "FAIL: $* (MEMWALFS_SEED=$seed)"; exit 1; }
retries() { "$MW" stats --raw "$m" | awk '$1 == "fs_noio_retries" { print $2 }'; }
cold=(--disk-cache-size 0)

echo "-- create"
mw_mount_logged "$m" --memtable-size 128K
python3 "$here/noio.py" create "$m" "$nd" "$nf" || fail "create"
mw_umount "$m"

pass=0
for c in 0 64K; do
	pass=$((pass + 1))
	group=$([ $pass = 1 ] && echo a || echo b)
	echo "-- $pass. cache $c: directories $group"
	mw_mount_logged "$m" --cache-size "$c" "${cold[@]}"
	r0=$(retries)
	python3 "$here/noio.py" work "$m" "$nd" "$nf" "$group" 4 "$seed" || fail "pass $pass"
	r1=$(retries)
	echo "   fs_noio_retries $r0 -> $r1"
	[ -n "$r1" ] || fail "stats --raw has no fs_noio_retries"
	if [ "$c" = 0 ] && [ "$r1" -le "$r0" ]; then fail "no read under fs->mu was retried"; fi
	groups=$([ $pass = 1 ] && echo a || echo ab)
	python3 "$here/noio.py" check "$m" "$nd" "$nf" "$groups" || fail "pass $pass: mounted"
	mw_umount "$m" || fail "pass $pass: unmount"
	mw_mount_logged "$m" --cache-size "$c" "${cold[@]}"
	python3 "$here/noio.py" check "$m" "$nd" "$nf" "$groups" || fail "pass $pass: remounted"
	mw_umount "$m" || fail "pass $pass: unmount after the check"
done
mw_fsck || fail "fsck"
grep -q "no-I/O lock" "$m.log" && fail "the no-I/O mark fired"
echo "noio ($BACKEND): ok"
