#!/usr/bin/env bash
# tests/fs/space.sh MEMWALFS BACKEND - statfs and fallocate agree (issue 16): the size statfs
# reports is the capacity option (--capacity / -o capacity=, default 1 PiB), used grows with the
# data written (the engine's estimate of its live bytes), and fallocate beyond the free space
# fails with ENOSPC (with and without KEEP_SIZE) while one within it succeeds.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
mnt=$WORK/mnt

space() {
	python3 - "$@" <<'PY'
import os, sys
d, cap, written = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
fails = []
sv = os.statvfs(d)
size, free, avail = sv.f_blocks * sv.f_frsize, sv.f_bfree * sv.f_frsize, sv.f_bavail * sv.f_frsize
used = size - free
print(f"  statfs: size {size}, used {used}, free {free}")
if size != cap:
    fails.append(f"size {size}, not the capacity {cap}")
if used < written:
    fails.append(f"used {used} < the {written} bytes written")
if avail != free:
    fails.append(f"f_bavail {avail} != f_bfree {free}")
def falloc(name, length, keep=False):
    fd = os.open(f"{d}/{name}", os.O_CREAT | os.O_RDWR, 0o644)
    try:
        if keep:
            import ctypes
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
import errno
for name, length, keep, want in (("twice", 2 * free, False, errno.ENOSPC),
                                 ("twice_keep", 2 * free, True, errno.ENOSPC),
                                 ("just_over", free + 4096, False, errno.ENOSPC),
                                 ("half", free // 2, False, 0)):
    got = falloc(name, length, keep)
    print(f"  fallocate {name} ({length} bytes{', keep size' if keep else ''}): "
          f"{errno.errorcode.get(got, 'ok') if got else 'ok'}")
    if got != want:
        fails.append(f"fallocate {name}: {os.strerror(got) if got else 'success'}, "
                     f"wanted {os.strerror(want) if want else 'success'}")
for n in ("twice", "twice_keep", "just_over", "half"):
    os.unlink(f"{d}/{n}")
for f in fails:
    print("  " + f)
sys.exit(1 if fails else 0)
PY
}

echo "-- the default capacity: 1 PiB"
mw_mount "$mnt"
space "$mnt" $((1 << 50)) 0 || { echo "FAIL: default capacity"; exit 1; }
mw_umount "$mnt"

echo "-- --capacity 256M, 40 MiB written"
mw_mount "$mnt" --capacity 256M
head -c $((40 << 20)) /dev/urandom > "$mnt/data"
sync "$mnt/data"
space "$mnt" $((256 << 20)) $((40 << 20)) || { echo "FAIL: --capacity 256M"; exit 1; }
mw_umount "$mnt"

echo "-- -o capacity=2G"
mw_mount "$mnt" -o capacity=2G
space "$mnt" $((2 << 30)) 0 || { echo "FAIL: -o capacity=2G"; exit 1; }
mw_umount "$mnt"

echo "-- a bad capacity is refused"
if "$MW" mount "${STORE_OPTS[@]}" --capacity 12x "$STORE" "$mnt" 2>/dev/null; then
	echo "FAIL: --capacity 12x accepted"; exit 1
fi
echo PASS
