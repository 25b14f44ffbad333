#!/usr/bin/env bash
# tests/fs/alloc.sh MEMWALFS BACKEND - fallocated ranges are allocation (issue 36, 6a: st_blocks
# stayed 0 after fallocate and grew only when written): fallocate of 1 MiB counts 2048 blocks,
# 5 GiB then a truncate to 1 MiB counts 2048, a KEEP_SIZE allocation past the end counts; a
# seeded random sequence of fallocate, writes, punch holes and truncates keeps st_blocks equal
# to the model's union of allocated and written bytes, and the bytes equal to the model's
# (allocated ones read as zeros); everything is the same after a remount, with and without the
# writeback cache, and fsck is clean. alloc.py beside it runs the cases; MEMWALFS_SEED replays.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
mnt=$WORK/mnt
seed=${MEMWALFS_SEED:-$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}
echo "seed $seed (MEMWALFS_SEED=$seed replays)"
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
