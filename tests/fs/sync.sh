#!/usr/bin/env bash
# tests/fs/sync.sh MEMWALFS BACKEND - "memwalfs sync" makes what was written durable, where
# sync(1) does not (libfuse 3.14 has no syncfs operation: the pages reach the daemon, which is
# not asked to commit them).
#
# With a 60 s group-commit cadence nothing is committed by itself during the test:
#  1. files written without fsync, then "memwalfs sync MNT", then kill -9 of the daemon: after a
#     remount every file is byte-exact (buffered writes, a partial last chunk, a rename, a
#     directory, a file written through the page cache with mmap);
#  2. the control: files written, sync(1) only, kill -9: they are absent or a prefix (what the
#     README says sync(1) does here); reported, since an early commit is allowed;
#  3. "memwalfs sync" with no argument syncs every memwalfs mount; on something that is not a
#     memwalfs mount it fails with a message.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
m=$WORK/m
fail() { echo "FAIL: $*"; exit 1; }

echo "-- 1. memwalfs sync, then kill -9"
mw_mount "$m" --cadence 60000
mkdir -p "$m/dir/sub" "$WORK/ref"
head -c 3000000 /dev/urandom >"$WORK/ref/big"     # whole chunks and a partial last one
head -c 777 /dev/urandom >"$WORK/ref/small"
cp "$WORK/ref/big" "$m/dir/big"
cp "$WORK/ref/small" "$m/dir/sub/small"
echo renamed >"$m/before"
mv "$m/before" "$m/after"
python3 -c 'import mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT, 0o644)
os.ftruncate(fd, 65536)
mm = mmap.mmap(fd, 65536)
mm[:] = bytes(range(256)) * 256
mm.close(); os.close(fd)' "$m/mapped"
python3 -c 'import sys; sys.stdout.buffer.write(bytes(range(256)) * 256)' >"$WORK/ref/mapped"
"$MW" sync "$m" || fail "memwalfs sync exited $?"
kill -9 "$(cat "$m.pid")"
mw_wait_exit "$m.pid"
fusermount3 -uz "$m" 2>/dev/null || true
mw_mount "$m"
cmp "$m/dir/big" "$WORK/ref/big" || fail "dir/big differs after sync + kill -9"
cmp "$m/dir/sub/small" "$WORK/ref/small" || fail "dir/sub/small differs after sync + kill -9"
[ "$(cat "$m/after")" = renamed ] && [ ! -e "$m/before" ] || fail "the rename was lost"
cmp "$m/mapped" "$WORK/ref/mapped" || fail "the mmap-written file differs after sync + kill -9"
echo "   every file written before memwalfs sync is byte-exact after kill -9 and a remount"
mw_umount "$m"

echo "-- 2. control: sync(1) only, then kill -9"
mw_mount "$m" --cadence 60000
cp "$WORK/ref/big" "$m/control"
sync
kill -9 "$(cat "$m.pid")"
mw_wait_exit "$m.pid"
fusermount3 -uz "$m" 2>/dev/null || true
mw_mount "$m"
if [ -e "$m/control" ]; then
	sz=$(stat -c %s "$m/control")
	cmp -n "$sz" "$m/control" "$WORK/ref/big" || fail "control: not a prefix of what was written"
	echo "   control: $sz of 3000000 bytes survived sync(1) + kill -9 (a prefix)"
else
	echo "   control: the file written before sync(1) is gone after kill -9, as documented"
fi

echo "-- 3. no argument, and not a memwalfs mount"
# other tests' mounts may be on this machine (and one may be dying): only ours is checked
out=$("$MW" sync 2>&1) || true
grep -q "^$(readlink -f "$m"): durable$" <<<"$out" || fail "memwalfs sync did not list $m: $out"
if "$MW" sync "$WORK" 2>"$WORK/err"; then fail "memwalfs sync of a plain directory succeeded"; fi
grep -q "not a memwalfs mount point" "$WORK/err" || fail "no clear message: $(cat "$WORK/err")"
mw_umount "$m"
echo "sync ($BACKEND): ok"
