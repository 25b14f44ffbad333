#!/usr/bin/env bash
# hostile.sh MEMWALFS BACKEND - another local user against a root mount (issue 36, "nobody gets
# in, the host is never harmed"), with a real unprivileged user (nobody, through setpriv):
#   1. a disk cache directory the other user made first under /tmp, with links planted in it
#      (format to a root file, lock to a new root file, 00 to a root directory, temporary
#      entry names to the root file): the mount refuses the directory (a line names it and its
#      owner) and runs without a disk cache; the files the links point at are untouched;
#   2. a cache directory of root's that everybody may write into: refused the same way;
#   3. the links of 1 left in a directory root took over (chown, chmod 700): the cache is used,
#      no link is followed (00 removed by the listing, format replaced), the targets untouched;
#      a link named lock refuses the cache without creating the file it names;
#   3b. the control attributes of the mount (handover, fence check, region release and take)
#      answer EPERM to the other user: it cannot stall, fence or hand away the mount;
#   local store only:
#   4. a store made by this mount is private: directories 0700, objects 0600, and the other
#      user cannot read a byte of a 0600 file out of it; an existing store that lets others in
#      gets a warning at mount;
#   5. a link planted where the store keeps wal/, then pack/: fsync fails with EIO within 30 s
#      (the old code retried it as an outage: a 10-minute hang) and the log names the link.
# SKIP when not root or without setpriv (nobody must be a real other user).
. "$(dirname "$0")/lib.sh" "$1" "${2:-local}"
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (a root mount attacked by another user)"; exit 77; }
command -v setpriv >/dev/null || { echo "SKIP: no setpriv"; exit 77; }
id nobody >/dev/null 2>&1 || { echo "SKIP: no user nobody"; exit 77; }
NOBODY=$(id -u nobody)
NOGROUP=$(id -g nobody)
# as_nobody CMD...: run CMD as the other user
as_nobody() { setpriv --reuid="$NOBODY" --regid="$NOGROUP" --clear-groups -- "$@"; }
M="$WORK/m"
stat_of() { "$MW" stats --raw "$M" | awk -v n="$1" '$1 == n { print $2 }'; }

# what root owns and the links point at
VICTIM="$WORK/victim"
VDIR="$WORK/victimdir"
CREATED="$WORK/created-by-root"
echo precious >"$VICTIM"
mkdir "$VDIR"
echo "precious too" >"$VDIR/0123456789abcdef0123456789abcdef"
echo "and this" >"$VDIR/other"
# victims_intact: the files the links point at are as they were, nothing created
victims_intact() {
	[ "$(cat "$VICTIM")" = precious ] || { echo "FAIL: $1: $VICTIM was overwritten"; exit 1; }
	[ "$(cat "$VDIR/0123456789abcdef0123456789abcdef" 2>/dev/null)" = "precious too" ] &&
		[ "$(cat "$VDIR/other" 2>/dev/null)" = "and this" ] ||
		{ echo "FAIL: $1: files of $VDIR were deleted"; ls -la "$VDIR"; exit 1; }
	[ ! -e "$CREATED" ] || { echo "FAIL: $1: $CREATED was created"; exit 1; }
}
# plant DIR (as the user given): the links of the attack
plant() {
	local who=$1 d=$2
	$who ln -s "$VICTIM" "$d/format"
	$who ln -s "$CREATED" "$d/lock"
	$who ln -s "$VDIR" "$d/00"
	$who mkdir -p "$d/ab"
	for k in 0 1 2 3; do $who ln -s "$VICTIM" "$d/ab/.ab00000000000000000000000000000$k.$k.tmp"; done
}
# use_mount DIR: mount with the cache in DIR, write and read back a file, unmount
use_mount() {
	mw_mount_logged "$M" --cache-dir "$1"
	head -c $((2 << 20)) /dev/urandom >"$M/f"
	sync "$M/f"
	sum=$(sha256sum <"$M/f")
	echo 3 >/proc/sys/vm/drop_caches
	[ "$(sha256sum <"$M/f")" = "$sum" ] || { echo "FAIL: $M/f read back wrong"; exit 1; }
	CACHE_ON=$(stat_of disk_cache_enabled)
	mw_umount "$M"
}
# refused DIR WHAT: the log has the refusal of DIR saying WHAT, the mount ran without the cache
refused() {
	grep -F "disk cache $1: " "$M.log" | grep -qF "$2" ||
		{ mw_log_tail "$M"; echo "FAIL: no line refusing $1 ($2)"; exit 1; }
	[ "$CACHE_ON" = 0 ] || { echo "FAIL: the disk cache in $1 was used"; exit 1; }
	echo "   refused: $(grep -F "disk cache $1: " "$M.log" | grep -F "$2" | head -n 1)"
}

echo "1. a cache directory another user made first, with links planted"
C1=$(as_nobody mktemp -d /tmp/memwalfs-hostile.XXXXXX)
trap 'rm -rf "$C1"; mw_cleanup' EXIT
as_nobody chmod 755 "$C1"
plant as_nobody "$C1"
use_mount "$C1"
victims_intact "another user's cache directory"
refused "$C1" "belongs to nobody (uid $NOBODY)"

echo "2. a cache directory of root's that everybody may write into"
C2="$WORK/c2"
mkdir -m 1777 "$C2"
as_nobody ln -s "$VICTIM" "$C2/format"
use_mount "$C2"
victims_intact "a world-writable cache directory"
refused "$C2" "(mode 1777) is writable by other users"

echo "3. the planted links in a directory root took over"
rm -f "$C1/lock"
chown -R root:root "$C1"
chmod 700 "$C1"
use_mount "$C1"
[ "$CACHE_ON" = 1 ] || { mw_log_tail "$M"; echo "FAIL: the cache in $C1 was not used"; exit 1; }
victims_intact "links in root's cache directory"
[ ! -L "$C1/00" ] || { echo "FAIL: the link $C1/00 is still there"; exit 1; }
[ -f "$C1/format" ] && [ ! -L "$C1/format" ] || { echo "FAIL: $C1/format is not a file"; exit 1; }
rm "$C1/lock"
ln -s "$CREATED" "$C1/lock"
use_mount "$C1"
victims_intact "a link named lock"
refused "$C1" "lock is a symbolic link"

echo "3b. the control attributes of the mount are root's (and the mounting user's)"
mw_mount_logged "$M"
for x in handover fence-check release take take-force; do
	if out=$(as_nobody getfattr --only-values -n "user.memwalfs.$x" "$M" 2>&1); then
		echo "FAIL: user nobody got user.memwalfs.$x: $out"; exit 1
	fi
	case $out in *"Operation not permitted"*) ;; *) echo "$out"; echo "FAIL: user.memwalfs.$x for nobody: not EPERM"; exit 1 ;; esac
done
# the mount was neither stalled nor handed away: root writes at once
timeout 5 sh -c 'echo still >"$1/after-control" && sync "$1/after-control"' sh "$M" ||
	{ echo "FAIL: a write after the refused control attributes"; exit 1; }
mw_umount "$M"
echo "   handover, fence-check, release, take: EPERM for user nobody"

if [ "$BACKEND" != local ]; then
	echo "PASS (the local store's checks run on the local store)"
	exit 0
fi

echo "4. the local store is private"
mw_mount_logged "$M"
python3 -c 'import os, sys; sys.stdout.buffer.write(os.urandom(1 << 20))' >"$M/secret"
chmod 600 "$M/secret"
sync "$M/secret"
mw_umount "$M"
bad=$(find "$STORE" \( -type d ! -perm 700 \) -o \( -type f ! -perm 600 \))
[ -z "$bad" ] || { echo "FAIL: not private:"; ls -ld $bad; exit 1; }
# a 4 KiB piece of the secret; readable [USER]: the bytes of every file of the store that
# USER (root without it) can read, concatenated; holds: does stdin hold the piece
mw_mount "$M"
head -c 8192 "$M/secret" | tail -c 4096 >"$WORK/piece"
mw_umount "$M"
readable() { ${1:-} find "$STORE" -type f -print0 2>/dev/null | ${1:-} xargs -0 cat 2>/dev/null || true; }
holds() { python3 -c 'import sys; print("yes" if open(sys.argv[1], "rb").read() in sys.stdin.buffer.read() else "no")' "$WORK/piece"; }
# the bytes are in the store as they are (so that the next check means something) ...
[ "$(readable | holds)" = yes ] ||
	{ echo "FAIL: the secret's bytes are not in the store as they are: nothing to check"; exit 1; }
# ... and the other user reads none of them
[ "$(readable as_nobody | holds)" = no ] ||
	{ echo "FAIL: user nobody read the bytes of a 0600 file out of the store"; exit 1; }
echo "   the store is 0700/0600; user nobody reads no byte of a 0600 file"
chmod 755 "$STORE"
mw_mount_logged "$M"
mw_umount "$M"
grep -q "local store $STORE (mode 0755): other users can enter it" "$M.log" ||
	{ mw_log_tail "$M"; echo "FAIL: no warning for a store others can enter"; exit 1; }
chmod 700 "$STORE"

echo "5. a link planted where the store keeps wal/, then pack/"
AWAY="$WORK/away"
mkdir "$AWAY"
for d in wal pack; do
	mw_mount_logged "$M"
	mv "$STORE/$d" "$STORE/$d.real"
	ln -s "$AWAY" "$STORE/$d"
	# 2 MiB: more than a WAL entry carries (256 KiB), so the group has a pack
	python3 - "$M/after-$d" >"$WORK/fsync.out" 2>&1 <<'EOF' &
import os, sys, time
fd = os.open(sys.argv[1], os.O_CREAT | os.O_WRONLY, 0o644)
os.write(fd, os.urandom(2 << 20))
t = time.monotonic()
try:
	os.fsync(fd)
	print('fsync ok')
except OSError as e:
	print('fsync %s after %.1f s' % (os.strerror(e.errno), time.monotonic() - t))
EOF
	pid=$!
	for _ in $(seq 300); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
	if kill -0 "$pid" 2>/dev/null; then
		echo "FAIL: fsync still waits after 30 s with a link as $d/"
		rm "$STORE/$d"
		mv "$STORE/$d.real" "$STORE/$d" # let it finish
		wait "$pid" || true
		exit 1
	fi
	wait "$pid" || true
	grep -q "^fsync Input/output error" "$WORK/fsync.out" ||
		{ cat "$WORK/fsync.out"; mw_log_tail "$M"; echo "FAIL: fsync with a link as $d/"; exit 1; }
	grep -qF "local store $STORE: $STORE/$d is a symbolic link" "$M.log" ||
		{ mw_log_tail "$M"; echo "FAIL: no line names the link $STORE/$d"; exit 1; }
	echo "   $d/: $(cat "$WORK/fsync.out")"
	[ -z "$(ls -A "$AWAY")" ] || { echo "FAIL: written through the link: $(ls "$AWAY")"; exit 1; }
	"$MW" umount "$M" >/dev/null 2>&1 || true # its final commit fails: the writer stopped
	mw_wait_exit "$M.pid"
	rm "$STORE/$d"
	mv "$STORE/$d.real" "$STORE/$d"
done
mw_mount "$M"
cmp -s <(head -c 8192 "$M/secret" | tail -c 4096) "$WORK/piece" || { echo "FAIL: the secret changed"; exit 1; }
mw_umount "$M"
mw_fsck
echo PASS
