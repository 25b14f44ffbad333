#!/usr/bin/env bash
# tests/fs/extents.sh MEMWALFS DATAMODEL BACKEND - file data as extents (issue 13), through a
# real mount: random writes, reads, truncations, punched holes, copies and mmap against a
# byte-array model (tests/fs/datamodel.c), with and without the kernel writeback cache, then
# compared again after a remount; st_blocks counts what is stored; a copy shares blocks;
# unlinked files are reclaimed while mounted.
# DATAMODEL_OPS (default 20000, half in each mode) and DATAMODEL_SEED (default: random, printed) replay a run.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${3:-local}"
DATAMODEL=$2
mnt=$WORK/mnt
ops=$(( ${DATAMODEL_OPS:-20000} / 2 )) # per mode: with and without the writeback cache
seed=${DATAMODEL_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
echo "extents ($BACKEND): seed $seed (DATAMODEL_SEED=$seed replays it)"
# folding (first, on the empty store, so that fsck counts only this file's extents): 1,500
# one-byte writes at distinct offsets of one 1 MiB window (no writeback cache, so each reaches
# the daemon alone) are folded whenever the window holds more than 256 extents
mw_mount "$mnt" --no-writeback-cache
python3 - "$mnt/crowded" "$WORK/crowded" <<'PY'
import os, sys
fds = [os.open(p, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644) for p in sys.argv[1:]]
for fd in fds:
    os.ftruncate(fd, 1 << 20)
for i in range(1500):
    off = (i * 7919) % (1 << 20)
    for fd in fds:
        os.pwrite(fd, bytes([1 + i % 250]), off)
    if i % 100 == 99:
        os.fsync(fds[0])
for fd in fds:
    os.close(fd)
PY
for _ in $(seq 100); do
	folded=$(getfattr --only-values -n user.memwalfs.stats "$mnt" | awk '$1=="fs_folded_windows"{print $2}')
	[ "${folded:-0}" -ge 1 ] && break
	sleep 0.1
done
[ "${folded:-0}" -ge 1 ] || { echo "FAIL: no window was folded"; exit 1; }
cmp "$WORK/crowded" "$mnt/crowded" || { echo "FAIL: a folded window differs"; exit 1; }
mw_umount "$mnt"
"$MW" fsck "${STORE_OPTS[@]}" "$STORE" > "$WORK/fsck.out" 2>&1 || { cat "$WORK/fsck.out"; exit 1; }
extents=$(sed -n 's/.* directory entries, \([0-9]*\) extents.*/\1/p' "$WORK/fsck.out")
echo "folding: $folded window(s) folded; $extents extents in the store"
[ "$extents" -lt 300 ] || { echo "FAIL: $extents extents after folding (want < 300)"; exit 1; }

for wb in --no-writeback-cache ""; do
	mw_mount "$mnt" $wb
	dir=$mnt/model${wb:+-nowb}
	models=$WORK/models${wb:+-nowb}
	mkdir -p "$dir" "$models"
	"$DATAMODEL" "$dir" "$models" "$ops" "$seed" || exit 1
	mw_umount "$mnt"
	mw_mount "$mnt"
	"$DATAMODEL" "$dir" "$models" 0 "$seed" check || { echo "FAIL: differs after a remount"; exit 1; }
	mw_umount "$mnt"
	seed=$((seed + 1))
done

# honest sizes: a sparse file with 1 MiB written counts about 1 MiB
mw_mount "$mnt"
truncate -s 5G "$mnt/sparse"
dd if=/dev/urandom of="$mnt/sparse" bs=1M count=1 seek=2048 conv=notrunc,fsync status=none
blocks=$(stat -c %b "$mnt/sparse")
[ "$blocks" -ge 2048 ] && [ "$blocks" -le 2100 ] ||
	{ echo "FAIL: st_blocks of a 5 GiB file holding 1 MiB is $blocks (want ~2048)"; exit 1; }
# a copy inside the filesystem shares the source's bytes: it is exact, and costs no upload
head -c 33554432 /dev/urandom > "$WORK/src"
cp "$WORK/src" "$mnt/src" && "$MW" sync "$mnt"
before=$(getfattr --only-values -n user.memwalfs.stats "$mnt" | awk '$1=="pack_bytes"{print $2}')
cp "$mnt/src" "$mnt/copy" # coreutils uses copy_file_range (not with --reflink=never)
"$MW" sync "$mnt"
after=$(getfattr --only-values -n user.memwalfs.stats "$mnt" | awk '$1=="pack_bytes"{print $2}')
cmp "$WORK/src" "$mnt/copy" || { echo "FAIL: the copy differs"; exit 1; }
echo "copy of 32 MiB inside the mount wrote $((after - before)) pack bytes"
[ $((after - before)) -lt 1048576 ] ||
	{ echo "FAIL: copy_file_range uploaded $((after - before)) bytes (want < 1 MiB)"; exit 1; }
# overwrite the source: the copy keeps its bytes
dd if=/dev/zero of="$mnt/src" bs=1M count=8 seek=4 conv=notrunc status=none
mw_umount "$mnt"
mw_mount "$mnt"
cmp "$WORK/src" "$mnt/copy" || { echo "FAIL: the copy changed when its source was overwritten"; exit 1; }
rm "$mnt/src"
mw_umount "$mnt"
mw_mount "$mnt"
cmp "$WORK/src" "$mnt/copy" || { echo "FAIL: the copy changed when its source was deleted"; exit 1; }
# unlinked files are reclaimed while mounted (fs/inode.c "Reclaim": the records go without
# fs->mu, after the last close or forget): 40 files of 64 extents each, 10 of them open while
# they are removed; once closed, the store's extents and orphan records come back to before
fsck_count() { # fsck_count extents|orphan: the count in the fsck summary of the durable state
	"$MW" sync "$mnt" >/dev/null
	"$MW" fsck "${STORE_OPTS[@]}" "$STORE" > "$WORK/fsck.out" 2>&1 || { cat "$WORK/fsck.out"; exit 1; }
	sed -n "s/.* \([0-9]*\) $1.*/\1/p" "$WORK/fsck.out"
}
base=$(fsck_count extents)
mkdir "$mnt/gone"
python3 - "$mnt/gone" <<'PY'
import os, sys
d = sys.argv[1]
for i in range(40):
    fd = os.open(f"{d}/f{i}", os.O_WRONLY | os.O_CREAT, 0o644)
    for j in range(64): # one extent each: 4 KiB every 64 KiB
        os.pwrite(fd, os.urandom(4096), j * 65536)
    os.fsync(fd)
    os.close(fd)
PY
full=$(fsck_count extents)
[ "$full" -ge $((base + 40 * 64)) ] || { echo "FAIL: $full extents after the writes, base $base"; exit 1; }
python3 - "$mnt/gone" <<'PY'
import os, sys
d = sys.argv[1]
held = [os.open(f"{d}/f{i}", os.O_RDONLY) for i in range(10)]
for i in range(40):
    os.unlink(f"{d}/f{i}")
assert os.pread(held[3], 4096, 0) # still readable while open
for fd in held:
    os.close(fd)
PY
for _ in $(seq 60); do
	ext=$(fsck_count extents) orph=$(fsck_count orphan)
	[ "$ext" -le "$base" ] && [ "$orph" = 0 ] && break
	sleep 0.5
done
echo "reclaim while mounted: extents $base -> $full -> $ext, orphan records $orph"
[ "$ext" -le "$base" ] && [ "$orph" = 0 ] ||
	{ echo "FAIL: unlinked files not reclaimed while mounted"; exit 1; }
rmdir "$mnt/gone"
mw_umount "$mnt"
mw_fsck
echo "extents ($BACKEND): ok"
