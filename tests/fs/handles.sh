#!/usr/bin/env bash
# tests/fs/handles.sh MEMWALFS BACKEND FSCALLS_PY - file handles (issue 16): name_to_handle_at
# and open_by_handle_at on files and directories (the root, nested ones), also after dropping
# the kernel's caches (it must look the inode up again: LOOKUP "." and, to reconnect a
# directory, ".."), and after a remount (generations are stable); a removed file's handle is
# ESTALE.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
calls=${3:-$here/fscalls.py}
mnt=$WORK/mnt
fail() { echo "FAIL: $*"; exit 1; }
drop_caches() { sync; echo 3 > /proc/sys/vm/drop_caches; }

mw_mount "$mnt"
mkdir -p "$mnt/d/sub/deep"
echo "file one" > "$mnt/f"
echo "file two" > "$mnt/d/sub/g"
echo x > "$mnt/d/sub/deep/x"
echo gone > "$mnt/doomed"
for p in f d d/sub d/sub/deep d/sub/g doomed .; do
	out=$(python3 "$calls" handle-save "$mnt/$p" "$WORK/h.${p//\//_}") || fail "name_to_handle_at $p: $out"
done
# check WHEN: every handle opens to the right inode and content
check() {
	for p in f d d/sub d/sub/deep d/sub/g .; do
		want="ino $(stat -c %i "$mnt/$p")"
		if [ -d "$mnt/$p" ]; then want+=$'\n'"$(cd "$mnt/$p" && ls -A | sort | tr '\n' ' ' | sed 's/ $//')"
		else want+=$'\n'"$(cat "$mnt/$p")"; fi
		out=$(python3 "$calls" handle-open "$mnt" "$WORK/h.${p//\//_}") || fail "open_by_handle_at $p $1: $out"
		[ "$out" = "$want" ] || fail "open_by_handle_at $p $1: got '$out', want '$want'"
	done
	echo "   handles $1: ok"
}
check "with the caches warm"
drop_caches
# open the deepest ones first, so that the kernel has nothing of their path cached
out=$(python3 "$calls" handle-open "$mnt" "$WORK/h.d_sub_deep") || fail "open_by_handle_at d/sub/deep, caches dropped: $out"
drop_caches
out=$(python3 "$calls" handle-open "$mnt" "$WORK/h.d_sub_g") || fail "open_by_handle_at d/sub/g, caches dropped: $out"
[ "$out" = "ino $(stat -c %i "$mnt/d/sub/g")"$'\n'"file two" ] || fail "d/sub/g after drop_caches: $out"
drop_caches
check "after dropping the caches"
rm "$mnt/doomed"
drop_caches
out=$(python3 "$calls" handle-open "$mnt" "$WORK/h.doomed") && fail "a removed file's handle opened: $out"
[ "$out" = ESTALE ] || fail "a removed file's handle: $out, not ESTALE"
mw_umount "$mnt"
mw_mount "$mnt"
check "after a remount"
mw_umount "$mnt"
echo PASS
