#!/usr/bin/env bash
# tests/fs/space.sh MEMWALFS BACKEND - statfs and fallocate agree (issues 16 and 36):
#  - a local store reports the filesystem that holds it (issue 36: it reported 1 PiB, and a
#    program filling the mount until ENOSPC filled the host's disk instead): on a 64 MiB tmpfs
#    the size is the tmpfs's, free and available follow it (within 1 MiB: the daemon writes
#    in the background), 40 MiB written show in it; on the host's disk ($WORK) the same within
#    256 MiB (other programs write there);
#  - S3 reports the capacity option, default 1 PiB, and --capacity / -o capacity= wins on a
#    local store too: used grows with the data written (the engine's estimate of its live
#    bytes);
#  - fallocate beyond the available space fails with ENOSPC (with and without KEEP_SIZE) while
#    one within it succeeds.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
mnt=$WORK/mnt
TMPFS=""
space_cleanup() {
	local rc=$?
	mw_unmount_all
	if [ -n "$TMPFS" ] && mountpoint -q "$TMPFS"; then umount "$TMPFS" || umount -l "$TMPFS"; fi
	mw_cleanup
	exit "$rc"
}
trap space_cleanup EXIT

# space MOUNT cap:BYTES WRITTEN | space MOUNT fs:DIR:TOLERANCE WRITTEN - check statfs of MOUNT
# against a capacity, or against statvfs of DIR (the store's filesystem, sampled before and
# after), then fallocate past and within the available space
space() {
	python3 - "$@" <<'PY'
import ctypes, errno, os, sys
d, want, written = sys.argv[1], sys.argv[2], int(sys.argv[3])
fails = []
def sizes(path):
    sv = os.statvfs(path)
    return sv.f_blocks * sv.f_frsize, sv.f_bfree * sv.f_frsize, sv.f_bavail * sv.f_frsize
if want.startswith("fs:"):
    _, host, tol = want.split(":")
    tol = int(tol)
    h0 = sizes(host)
    size, free, avail = sizes(d)
    h1 = sizes(host)
    print(f"  statfs: size {size}, free {free}, avail {avail}; {host}: {h0} .. {h1}")
    if abs(size - h0[0]) > 4096:
        fails.append(f"size {size}, not the size {h0[0]} of the store's filesystem")
    for i, name, got in ((1, "free", free), (2, "available", avail)):
        lo, hi = min(h0[i], h1[i]) - tol, max(h0[i], h1[i]) + tol
        if not lo <= got <= hi:
            fails.append(f"{name} {got}, not the store filesystem's {h0[i]}..{h1[i]} "
                         f"(within {tol})")
    margin = max(tol, 4096)
else:
    cap = int(want[4:])
    size, free, avail = sizes(d)
    used = size - free
    print(f"  statfs: size {size}, used {used}, free {free}")
    if size != cap:
        fails.append(f"size {size}, not the capacity {cap}")
    if used < written:
        fails.append(f"used {used} < the {written} bytes written")
    if avail != free:
        fails.append(f"f_bavail {avail} != f_bfree {free}")
    margin = 4096
def falloc(name, length, keep=False):
    fd = os.open(f"{d}/{name}", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        if keep:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
            if libc.fallocate(fd, 1, 0, length) != 0:  # FALLOC_FL_KEEP_SIZE
                return ctypes.get_errno()
            return 0
        os.posix_fallocate(fd, 0, length)
        return 0
    except OSError as e:
        return e.errno
    finally:
        os.close(fd)
for name, length, keep, want_err in (("twice", 2 * avail + margin, False, errno.ENOSPC),
                                     ("twice_keep", 2 * avail + margin, True, errno.ENOSPC),
                                     ("just_over", avail + margin, False, errno.ENOSPC),
                                     ("half", avail // 2, False, 0)):
    got = falloc(name, length, keep)
    print(f"  fallocate {name} ({length} bytes{', keep size' if keep else ''}): "
          f"{errno.errorcode.get(got, 'ok') if got else 'ok'}")
    if got != want_err:
        fails.append(f"fallocate {name}: {os.strerror(got) if got else 'success'}, "
                     f"wanted {os.strerror(want_err) if want_err else 'success'}")
for n in ("twice", "twice_keep", "just_over", "half"):
    os.unlink(f"{d}/{n}")
for f in fails:
    print("  " + f)
sys.exit(1 if fails else 0)
PY
}

if [ "$BACKEND" = local ]; then
	echo "-- a local store on a 64 MiB tmpfs: df of the mount is the tmpfs's"
	TMPFS=$WORK/tmpfs
	mkdir -p "$TMPFS"
	mount -t tmpfs -o size=64m tmpfs "$TMPFS" || { echo "SKIP: cannot mount a tmpfs"; TMPFS=""; exit 77; }
	saved=$STORE
	STORE=$TMPFS/store
	mw_mount "$mnt"
	space "$mnt" "fs:$TMPFS:$((1 << 20))" 0 || { echo "FAIL: local store on a tmpfs"; exit 1; }
	head -c $((40 << 20)) /dev/urandom >"$mnt/data"
	"$MW" sync "$mnt" >/dev/null
	used=$(python3 -c "import os,sys; s=os.statvfs(sys.argv[1]); print((s.f_blocks-s.f_bfree)*s.f_frsize)" "$mnt")
	[ "$used" -ge $((40 << 20)) ] || { echo "FAIL: used $used after 40 MiB written and synced"; exit 1; }
	space "$mnt" "fs:$TMPFS:$((1 << 20))" 0 || { echo "FAIL: local store on a tmpfs, 40 MiB written"; exit 1; }
	mw_umount "$mnt"
	STORE=$saved
	umount "$TMPFS"
	TMPFS=""

	echo "-- a local store on the host's disk: df of the mount is the disk's"
	mw_mount "$mnt"
	space "$mnt" "fs:$WORK:$((256 << 20))" 0 || { echo "FAIL: local store on $WORK"; exit 1; }
	mw_umount "$mnt"
else
	echo "-- the default capacity: 1 PiB"
	mw_mount "$mnt"
	space "$mnt" "cap:$((1 << 50))" 0 || { echo "FAIL: default capacity"; exit 1; }
	mw_umount "$mnt"
fi

echo "-- --capacity 256M, 40 MiB written"
mw_mount "$mnt" --capacity 256M
head -c $((40 << 20)) /dev/urandom > "$mnt/data"
sync "$mnt/data"
space "$mnt" "cap:$((256 << 20))" $((40 << 20)) || { echo "FAIL: --capacity 256M"; exit 1; }
mw_umount "$mnt"

echo "-- -o capacity=2G"
mw_mount "$mnt" -o capacity=2G
space "$mnt" "cap:$((2 << 30))" 0 || { echo "FAIL: -o capacity=2G"; exit 1; }
mw_umount "$mnt"

echo "-- a bad capacity is refused"
if "$MW" mount "${STORE_OPTS[@]}" --capacity 12x "$STORE" "$mnt" 2>/dev/null; then
	echo "FAIL: --capacity 12x accepted"; exit 1
fi
echo PASS
