#!/usr/bin/env bash
# tests/fs/overlay.sh MEMWALFS BACKEND FSCALLS_PY - memwalfs as an overlayfs upper layer (issue 16):
#  1. renameat2(RENAME_WHITEOUT) leaves a whiteout (a character device 0/0, mode 0) at the
#     source name in the same batch as the rename, for files, directories and over an existing
#     target; with EXCHANGE it is EINVAL, with NOREPLACE onto an existing name EEXIST; all of
#     it checked mounted and after a remount;
#  2. an overlay mount (lowerdir on local disk, upperdir and workdir on memwalfs): files
#     created, changed, deleted and renamed, directories made and removed, checked through the
#     overlay while mounted and after unmounting both and mounting both again, and the upper
#     layer holds whiteouts for what was deleted from the lower one.
# SKIP (77) only if the kernel refuses overlay with a memwalfs upper layer (dmesg says why).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
calls=${3:-$here/fscalls.py}
mnt=$WORK/mnt
fail() { echo "FAIL: $*"; exit 1; }
# is_whiteout PATH: a character device 0/0 with no permission bits
is_whiteout() { [ "$(stat -c '%F %t:%T %a' "$1")" = "character special file 0:0 0" ]; }

echo "-- renameat2(RENAME_WHITEOUT)"
mw_mount "$mnt"
echo one > "$mnt/a"
mkdir -p "$mnt/d/sub" && echo two > "$mnt/d/sub/f"
echo three > "$mnt/c" && echo old > "$mnt/t"
mkdir "$mnt/e"
out=$(python3 "$calls" rename "$mnt/a" "$mnt/b" whiteout) || fail "rename a b whiteout: $out"
out=$(python3 "$calls" rename "$mnt/d" "$mnt/e/d" whiteout) || fail "rename d e/d whiteout: $out"
out=$(python3 "$calls" rename "$mnt/c" "$mnt/t" whiteout) || fail "rename c over t whiteout: $out"
out=$(python3 "$calls" rename "$mnt/b" "$mnt/t" whiteout noreplace) && fail "NOREPLACE onto t succeeded"
[ "$out" = EEXIST ] || fail "whiteout|noreplace onto an existing name: $out, not EEXIST"
out=$(python3 "$calls" rename "$mnt/b" "$mnt/t" whiteout exchange) && fail "WHITEOUT|EXCHANGE succeeded"
[ "$out" = EINVAL ] || fail "whiteout|exchange: $out, not EINVAL"
check_whiteouts() {
	for w in a d c; do is_whiteout "$mnt/$w" || fail "$w is not a whiteout: $(stat -c '%F %t:%T %a' "$mnt/$w")"; done
	[ "$(cat "$mnt/b")" = one ] && [ "$(cat "$mnt/e/d/sub/f")" = two ] && [ "$(cat "$mnt/t")" = three ] ||
		fail "renamed contents"
	[ "$(stat -c %h "$mnt")" = 3 ] && [ "$(stat -c %h "$mnt/e")" = 3 ] || fail "directory link counts"
	[ "$(ls "$mnt" | tr '\n' ' ')" = "a b c d e t " ] || fail "listing: $(ls "$mnt")"
}
check_whiteouts
mw_umount "$mnt"
mw_mount "$mnt"
check_whiteouts
echo "   whiteouts mounted and after a remount: ok"

echo "-- overlay: lowerdir on local disk, upperdir and workdir on memwalfs"
lower=$WORK/lower ov=$WORK/ov
mkdir -p "$lower/ld" "$lower/keep" "$ov" "$mnt/up" "$mnt/work"
echo l1 > "$lower/l1" && echo l2 > "$lower/l2" && echo l3 > "$lower/l3" && echo f > "$lower/ld/f"
echo k > "$lower/keep/k"
ovmount() {
	mount -t overlay overlay -o "lowerdir=$lower,upperdir=$mnt/up,workdir=$mnt/work" "$ov"
}
if ! ovmount 2>"$WORK/ov.err"; then
	cat "$WORK/ov.err"
	dmesg 2>/dev/null | grep -i overlay | tail -3
	echo "SKIP: the kernel refuses overlay with a memwalfs (FUSE) upper layer (see above)"
	exit 77
fi
OVMOUNTED=1
ovcleanup() { [ -n "${OVMOUNTED:-}" ] && umount "$ov" 2>/dev/null; mw_cleanup; }
trap ovcleanup EXIT
echo new > "$ov/n1"                        # created
echo more >> "$ov/l1"                      # changed (copy-up)
rm "$ov/l2"                                # deleted from the lower layer: whiteout
mv "$ov/l3" "$ov/l3moved"                  # renamed (copy-up, whiteout at l3)
mv "$ov/n1" "$ov/n1moved"                  # renamed within the upper layer
rm -r "$ov/ld"                             # a lower directory removed
mkdir "$ov/ld" && echo again > "$ov/ld/g"  # and made again: opaque
mkdir "$ov/nd" && echo z > "$ov/nd/z" && rm -r "$ov/nd"
echo k2 > "$ov/keep/k2"
check_overlay() {
	[ "$(cd "$ov" && ls | tr '\n' ' ')" = "keep l1 l3moved ld n1moved " ] || fail "overlay listing: $(ls "$ov")"
	[ "$(cat "$ov/l1")" = "$(printf 'l1\nmore')" ] || fail "changed file"
	[ "$(cat "$ov/l3moved")" = l3 ] && [ "$(cat "$ov/n1moved")" = new ] || fail "renamed files"
	[ "$(ls "$ov/ld")" = g ] && [ "$(cat "$ov/ld/g")" = again ] || fail "opaque directory: $(ls "$ov/ld")"
	[ "$(cd "$ov/keep" && ls | tr '\n' ' ')" = "k k2 " ] || fail "merged directory"
	[ ! -e "$ov/l2" ] && [ ! -e "$ov/l3" ] && [ ! -e "$ov/nd" ] || fail "deleted names are back"
	is_whiteout "$mnt/up/l2" && is_whiteout "$mnt/up/l3" || fail "no whiteouts in the upper layer"
	[ "$(cat "$lower/l1")" = l1 ] && [ -e "$lower/l2" ] || fail "the lower layer changed"
}
check_overlay
echo "   overlay mounted: ok"
umount "$ov"
OVMOUNTED=
mw_umount "$mnt"
mw_mount "$mnt"
ovmount
OVMOUNTED=1
check_overlay
echo "   overlay after unmounting and mounting both: ok"
umount "$ov"
OVMOUNTED=
mw_fsck
echo PASS
