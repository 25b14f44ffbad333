#!/usr/bin/env bash
# tests/fs/install.sh MEMWALFS BACKEND BUILDDIR - memwalfs as installed by "meson install" works
# with mount(8), fstab and umount(8) with no hand linking (issue 18):
#  1. meson install --destdir of BUILDDIR puts the binary into $prefix/bin and the helper
#     mount.fuse.memwalfs into $prefix/sbin;
#  2. the helper run from $prefix/sbin with no memwalfs on PATH (mount(8) runs it when the
#     prefix is /usr) finds $prefix/bin/memwalfs;
#  3. in a private mount namespace the installed tree is bind-mounted over the real prefix
#     (the default /usr/local: what "meson install" writes on a fresh machine, without touching
#     this machine's /usr/local), and a temporary fstab over /etc/fstab; then
#       mount -t fuse.memwalfs STORE MNT     (mount(8) -> mount.fuse3 -> memwalfs from PATH)
#       mount MNT of fstab lines with _netdev, and noauto,x-systemd.automount
#       mount -a -t fuse.memwalfs            (mounts the auto line, not the noauto one)
#       umount MNT                           (the daemon commits and exits; data is there after
#                                             the next mount).
# SKIP (77) without meson, unshare, findmnt, getfattr or libfuse's mount.fuse3.
here=$(cd "$(dirname "$0")" && pwd)
build=$3
if [ -z "${MW_IN_NS:-}" ]; then
	for c in meson unshare findmnt getfattr; do
		command -v $c >/dev/null || { echo "SKIP: no $c"; exit 77; }
	done
	[ -e /sbin/mount.fuse3 ] || [ -e /usr/sbin/mount.fuse3 ] || { echo "SKIP: no mount.fuse3 (fuse3 package)"; exit 77; }
	[ -f "$build/meson-private/install.dat" ] || { echo "SKIP: $build is not a configured meson build"; exit 77; }
	MW_IN_NS=1 exec unshare -m --propagation private "$0" "$@"
fi
. "$here/lib.sh" "$1" "${2:-local}"
[ "$BACKEND" = local ] || { echo "SKIP: the install test runs on the local store"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }

echo "-- 1. meson install --destdir"
dest=$WORK/dest
meson install -C "$build" --no-rebuild --quiet --destdir "$dest" >"$WORK/install.log" 2>&1 ||
	{ cat "$WORK/install.log"; fail "meson install"; }
prefix=$(meson introspect "$build" --buildoptions |
	/usr/bin/python3 -c 'import json,sys; print([o["value"] for o in json.load(sys.stdin) if o["name"] == "prefix"][0])')
bindir=$prefix/bin
sbindir=$prefix/sbin
[ -x "$dest$bindir/memwalfs" ] || fail "no $bindir/memwalfs in the install: $(cd "$dest" && find . -type f)"
[ -x "$dest$sbindir/mount.fuse.memwalfs" ] || fail "no executable $sbindir/mount.fuse.memwalfs"
echo "   prefix $prefix: $(cd "$dest" && find . -type f -o -type l | sort | tr '\n' ' ')"

echo "-- 2. the helper finds the binary of its prefix"
mkdir -p "$WORK/s0" "$WORK/m0"
MOUNTS+=("$WORK/m0")
env PATH=/usr/bin:/bin "$dest$sbindir/mount.fuse.memwalfs" "$WORK/s0" "$WORK/m0" -o noatime ||
	fail "mount.fuse.memwalfs from $sbindir with no memwalfs on PATH"
findmnt -n -o FSTYPE "$WORK/m0" | grep -qx fuse.memwalfs || fail "helper: not mounted"
echo "   ok: $(findmnt -n -o SOURCE,FSTYPE,OPTIONS "$WORK/m0")"
"$dest$bindir/memwalfs" umount "$WORK/m0" || fail "umount of the helper's mount"

echo "-- 3. mount(8), fstab and umount(8) with the installed tree at $prefix"
[ -d "$prefix" ] || { echo "SKIP: $prefix does not exist here (a prefix other than the default)"; exit 77; }
mount --bind "$dest$prefix" "$prefix"
export PATH="$bindir:$sbindir:/usr/sbin:/usr/bin:/sbin:/bin"
[ "$(command -v memwalfs)" = "$bindir/memwalfs" ] || fail "memwalfs on PATH is $(command -v memwalfs)"

# daemon_of MNT: the pid of the daemon serving MNT (root xattr user.memwalfs.daemon)
daemon_of() { getfattr --only-values -n user.memwalfs.daemon "$1" 2>/dev/null | cut -d' ' -f1; }
# umount8 MNT: umount(8), then wait for the daemon's final commit and exit
umount8() {
	local pid
	pid=$(daemon_of "$1")
	[ -n "$pid" ] || fail "$1: no daemon pid"
	umount "$1" || fail "umount $1"
	echo "$pid" >"$WORK/daemon.pid"
	mw_wait_exit "$WORK/daemon.pid" || fail "daemon $pid of $1 did not exit"
}
s1=$WORK/s1 m1=$WORK/m1 s2=$WORK/s2 m2=$WORK/m2
mkdir -p "$m1" "$m2"
MOUNTS+=("$m1" "$m2")
mount -t fuse.memwalfs "$s1" "$m1" || fail "mount -t fuse.memwalfs"
findmnt -n -o FSTYPE "$m1" | grep -qx fuse.memwalfs || fail "mount -t: not a fuse.memwalfs mount"
echo "   ok: mount -t fuse.memwalfs: $(findmnt -n -o SOURCE,OPTIONS "$m1")"
echo one >"$m1/f"
umount8 "$m1"
mountpoint -q "$m1" && fail "still mounted after umount"

cat >"$WORK/fstab" <<EOF
$s1  $m1  fuse.memwalfs  defaults,_netdev,allow_other  0 0
$s2  $m2  fuse.memwalfs  noauto,x-systemd.automount,x-systemd.idle-timeout=60,_netdev  0 0
EOF
mount --bind "$WORK/fstab" /etc/fstab
mount "$m1" || fail "mount $m1 (fstab, _netdev)"
[ "$(cat "$m1/f")" = one ] || fail "the file written before umount(8) is not there"
echo two >>"$m1/f"
mount "$m2" || fail "mount $m2 (fstab, noauto,x-systemd.automount)"
echo "   ok: fstab: $(findmnt -n -o TARGET,FSTYPE,OPTIONS "$m1"); $(findmnt -n -o TARGET,FSTYPE "$m2")"
echo three >"$m2/g"
umount8 "$m1"
umount8 "$m2"
mount -a -t fuse.memwalfs || fail "mount -a -t fuse.memwalfs"
mountpoint -q "$m1" || fail "mount -a did not mount the auto line"
mountpoint -q "$m2" && fail "mount -a mounted the noauto line"
[ "$(cat "$m1/f")" = "one
two" ] || fail "content after mount -a: $(cat "$m1/f")"
umount8 "$m1"
mount "$m2" || fail "mount $m2 again"
[ "$(cat "$m2/g")" = three ] || fail "content of $m2 after a remount"
umount8 "$m2"
echo "   ok: mount -a skipped noauto; every file there after umount(8) and a new mount"
STORE=$s1 mw_fsck
STORE=$s2 mw_fsck
echo PASS
