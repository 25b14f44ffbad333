#!/usr/bin/env bash
# tests/fs/killpriv.sh MEMWALFS BACKEND - set-user-ID and set-group-ID bits after a write,
# truncate, fallocate, punch hole, open(O_TRUNC) or copy_file_range by an unprivileged user
# (nobody), by a member of the file's group and by root are what the kernel's own filesystem
# ($WORK: ext4 or tmpfs) leaves (issue 36, 6b: a set-group-ID without group-exec survived an
# unprivileged write, fallocate, truncate), with the writeback cache and without; the modes
# are the same after a remount. killpriv.py beside it runs the cases.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (files of root changed by another user)"; exit 77; }
uid=$(id -u nobody 2>/dev/null) || { echo "SKIP: no user nobody"; exit 77; }
gid=$(id -g nobody)
mnt=$WORK/mnt
fail() {
	echo "FAIL: $*"
	exit 1
}
for wb in writeback no_writeback; do
	opts=()
	[ $wb = no_writeback ] && opts=(--no-writeback-cache)
	echo "-- $wb"
	ref=$WORK/ref.$wb
	mkdir -p "$ref"
	chmod 755 "$ref"
	mw_mount "$mnt" "${opts[@]}"
	mkdir "$mnt/$wb"
	chmod 755 "$mnt/$wb"
	python3 "$here/killpriv.py" "$ref" "$mnt/$wb" "$uid" "$gid" "$WORK/modes.$wb" ||
		fail "set-id bits differ from the kernel's filesystem ($wb)"
	mw_umount "$mnt"
	mw_mount "$mnt" "${opts[@]}"
	python3 "$here/killpriv.py" --check "$mnt/$wb" "$WORK/modes.$wb" || fail "modes changed by a remount ($wb)"
	mw_umount "$mnt"
done
mw_fsck
echo PASS
