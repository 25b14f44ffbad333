#!/usr/bin/env bash
# tests/fs/alloc.sh MEMWALFS BACKEND - fallocated ranges are allocation (issue 36, 6a: st_blocks
# stayed 0 after fallocate and grew only when written): fallocate of 1 MiB counts 2048 blocks,
# 5 GiB then a truncate to 1 MiB counts 2048, a KEEP_SIZE allocation past the end counts; a
# file extended by fallocate 4 KiB at a time keeps one allocated range (fsck's count); a
# seeded random sequence of fallocate, writes, punch holes and truncates keeps st_blocks equal
# to the model's union of allocated and written bytes, and the bytes equal to the model's
# (allocated ones read as zeros); everything is the same after a remount, with and without the
# writeback cache, and fsck is clean. alloc.py beside it runs the cases; MEMWALFS_SEED replays.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
mnt=$WORK/mnt
seed=${MEMWALFS_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
echo "seed $seed (MEMWALFS_SEED=$seed replays)"
echo "-- a file extended by fallocate 4 KiB at a time keeps one allocated range"
mw_mount "$mnt"
python3 - "$mnt/grow" <<'PY' || { echo "FAIL: sequential fallocate"; exit 1; }
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR, 0o644)
for i in range(256):
    if libc.fallocate(fd, 0, i * 4096, 4096) != 0:
        sys.exit(f"fallocate {i}: {os.strerror(ctypes.get_errno())}")
os.fsync(fd)
b = os.fstat(fd).st_blocks
print(f"  256 x 4 KiB: st_blocks {b}")
sys.exit(0 if b == 2048 else 1)
PY
"$MW" sync "$mnt" >/dev/null
"$MW" fsck "${STORE_OPTS[@]}" "$STORE" >"$WORK/fsck.out" 2>&1 || { cat "$WORK/fsck.out"; exit 1; }
n=$(sed -n 's/.* \([0-9]*\) allocated ranges.*/\1/p' "$WORK/fsck.out")
echo "  fsck: $n allocated range(s)"
[ "$n" = 1 ] || { echo "FAIL: 256 adjacent fallocates left $n allocated ranges, not 1"; exit 1; }
mw_umount "$mnt"

for wb in writeback no_writeback; do
	opts=()
	[ $wb = no_writeback ] && opts=(--no-writeback-cache)
	echo "-- $wb"
	mw_mount "$mnt" "${opts[@]}"
	mkdir "$mnt/$wb"
	python3 "$here/alloc.py" "$mnt/$wb" run "$seed" || { echo "FAIL: st_blocks after fallocate ($wb)"; exit 1; }
	mw_umount "$mnt"
	mw_mount "$mnt" "${opts[@]}"
	python3 "$here/alloc.py" "$mnt/$wb" check || { echo "FAIL: after a remount ($wb)"; exit 1; }
	mw_umount "$mnt"
	mw_fsck || exit 1
done
echo PASS
