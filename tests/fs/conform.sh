#!/usr/bin/env bash
# tests/fs/conform.sh MEMWALFS FSCONFORM BACKEND - the conformance program on a fresh mount,
# then a remount that must show the same tree.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${3:-local}"
FSCONFORM=$2
mnt=$WORK/mnt
# with the kernel writeback cache (the default) SEEK_DATA/SEEK_HOLE see the whole file as
# data (fs/file.c file_lseek); without it, holes are reported exactly
mw_mount "$mnt" --no-writeback-cache
mkdir "$mnt/c"
"$FSCONFORM" "$mnt/c"
mw_umount "$mnt"
mw_mount "$mnt"
FSCONFORM_NO_HOLES=1 "$FSCONFORM" "$mnt/c"
# leave something behind and check it survives a remount
mkdir -p "$mnt/keep/sub" && echo kept > "$mnt/keep/sub/file" && ln -s sub/file "$mnt/keep/link"
mw_umount "$mnt"
mw_mount "$mnt"
[ "$(cat "$mnt/keep/link")" = kept ] || { echo "FAIL: tree lost across remount"; exit 1; }
[ -z "$(ls -A "$mnt/c")" ] || { echo "FAIL: conformance leftovers: $(ls -A "$mnt/c")"; exit 1; }
mw_umount "$mnt"
echo "conform ($BACKEND): ok"
