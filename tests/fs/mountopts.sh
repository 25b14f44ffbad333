#!/usr/bin/env bash
# tests/fs/mountopts.sh MEMWALFS BACKEND - mount(8) and its options (issue 16), through
# "mount -t fuse.memwalfs" and the helper tools/mount.fuse.memwalfs:
#  1. the standard options: dev, suid, exec reach the kernel mount (mount(8) passes none of
#     them to a helper: the helper adds dev,suid unless nodev/nosuid), nosuid, nodev, noexec,
#     noatime, nodiratime, strictatime, relatime are honoured, _netdev, noauto, x-systemd.*
#     accepted; checked with findmnt -o OPTIONS, and a device node works with dev;
#  2. mount -o remount,ro: writes fail with EROFS, what was written is there; remount,rw:
#     writes work again, flags changed on a remount (noexec) show; a memwalfs setting on a
#     remount is refused with a message saying what remount changes; everything written is
#     there after an unmount and a mount;
#  3. a read-only mount (ro) refuses remount,rw with a clear error;
#  4. the kernel's read-ahead of the mount (/sys/class/bdi/MAJ:MIN/read_ahead_kb): 1024 KiB by
#     default, kernel_readahead=256K gives 256, kernel_readahead=0 leaves the kernel's own;
#     a file written and read back cold through each is byte-exact;
#  5. no_default_permissions through mount(8) is refused with a message, nothing mounted
#     (safety.sh checks the other ways in).
# mount(8) finds helpers only in /sbin: the test runs in a private mount namespace where
# /usr/sbin/mount.fuse3 (mount(8)'s fallback for fuse.*) is a bind mount of a wrapper that
# runs a copy of the helper next to a link to the build's memwalfs.
here=$(cd "$(dirname "$0")" && pwd)
if [ -z "${MW_IN_NS:-}" ]; then
	command -v unshare >/dev/null && command -v findmnt >/dev/null || { echo "SKIP: no unshare/findmnt"; exit 77; }
	[ -e /usr/sbin/mount.fuse3 ] || { echo "SKIP: no /usr/sbin/mount.fuse3 to stand in for"; exit 77; }
	MW_IN_NS=1 exec unshare -m --propagation private "$0" "$@"
fi
. "$here/lib.sh" "$1" "${2:-local}"
mnt=$WORK/mnt
fail() { echo "FAIL: $*"; exit 1; }
hd=$WORK/helper
mkdir -p "$hd" "$mnt"
cp "$here/../../tools/mount.fuse.memwalfs" "$hd/mount.fuse.memwalfs"
ln -s "$(readlink -f "$MW")" "$hd/memwalfs"
printf '#!/bin/sh\nexec %s/mount.fuse.memwalfs "$@"\n' "$hd" > "$hd/wrap"
chmod +x "$hd/wrap" "$hd/mount.fuse.memwalfs"
mount --bind "$hd/wrap" /usr/sbin/mount.fuse3
MOUNTS+=("$mnt")
src=$STORE
[ "$BACKEND" = s3 ] && echo "SKIP: mount(8) test runs on the local store" && exit 77
opts_of() { findmnt -n -o OPTIONS "$mnt"; }
has() { case ,$(opts_of), in *,$1,*) return 0 ;; esac; return 1; }
umount_mw() { mw_umount_cmd "$mnt"; }
# these mounts have no pid file: wait for the daemon's final commit before lib.sh removes $WORK
trap 'mountpoint -q "$mnt" && "$MW" umount "$mnt" >/dev/null 2>&1; mw_cleanup' EXIT

echo "-- mount -t fuse.memwalfs with the standard options"
mount -t fuse.memwalfs -o dev,suid,exec,_netdev,noauto,x-systemd.automount,x-systemd.idle-timeout=60,allow_other "$src" "$mnt" ||
	fail "mount with dev,suid,exec,_netdev,noauto,x-systemd.*"
echo "   $(opts_of)"
has nosuid && fail "suid not honoured: $(opts_of)"
has nodev && fail "dev not honoured: $(opts_of)"
has noexec && fail "exec not honoured: $(opts_of)"
mknod "$mnt/null" c 1 3
echo hi > "$mnt/null" || fail "a device node on a dev mount does not work"
umount_mw
mount -t fuse.memwalfs -o nosuid,nodev,noexec,noatime,nodiratime "$src" "$mnt" || fail "mount with nosuid,nodev,noexec,noatime,nodiratime"
echo "   $(opts_of)"
for o in nosuid nodev noexec noatime nodiratime; do has $o || fail "$o missing: $(opts_of)"; done
(echo x > "$mnt/null") 2>/dev/null && fail "a device node works on a nodev mount"
umount_mw
mount -t fuse.memwalfs -o strictatime "$src" "$mnt" || fail "mount with strictatime"
echo "   $(opts_of)"
has relatime && fail "strictatime not honoured: $(opts_of)"
has noatime && fail "strictatime not honoured: $(opts_of)"
umount_mw
mount -t fuse.memwalfs -o relatime "$src" "$mnt" || fail "mount with relatime"
has relatime || fail "relatime missing: $(opts_of)"

echo "-- mount -o remount,ro and remount,rw"
echo before > "$mnt/f"
mount -o remount,ro "$mnt" || fail "remount,ro"
echo "   $(opts_of)"
has ro || fail "ro missing after remount,ro: $(opts_of)"
[ "$(cat "$mnt/f")" = before ] || fail "content after remount,ro"
err=$(echo no 2>&1 > "$mnt/g") && fail "a write succeeded on a read-only remount"
case $err in *"Read-only file system"*) ;; *) fail "write after remount,ro: $err" ;; esac
mount -o remount,rw,noexec "$mnt" || fail "remount,rw"
echo "   $(opts_of)"
has rw && has noexec || fail "rw,noexec missing after remount: $(opts_of)"
echo after > "$mnt/g" || fail "write after remount,rw"
err=$(mount -o remount,cadence=50 "$mnt" 2>&1) && fail "remount with a memwalfs setting succeeded"
case $err in *"remount cannot change cadence"*) ;; *) fail "remount,cadence=50: $err" ;; esac
err=$(mount -o remount,allow_root "$mnt" 2>&1) && fail "remount adding allow_root succeeded"
echo "   refused: $(echo "$err" | head -1)"
umount_mw
mount -t fuse.memwalfs "$src" "$mnt" || fail "mount after the remounts"
[ "$(cat "$mnt/f")" = before ] && [ "$(cat "$mnt/g")" = after ] || fail "contents after a remount cycle"
umount_mw

echo "-- a read-only mount cannot be remounted rw"
mount -t fuse.memwalfs -o ro "$src" "$mnt" || fail "mount ro"
has ro || fail "ro missing: $(opts_of)"
err=$(mount -o remount,rw "$mnt" 2>&1) && fail "remount,rw of a read-only daemon succeeded"
case $err in *"read-only daemon"*) echo "   refused: $(echo "$err" | head -1)" ;; *) fail "remount,rw of ro: $err" ;; esac
has ro || fail "the read-only mount became rw: $(opts_of)"
mount -o remount,ro,noexec "$mnt" || fail "remount,ro,noexec of a read-only mount"
has noexec || fail "noexec missing: $(opts_of)"
umount_mw

echo "-- the kernel's read-ahead of the mount"
head -c $((3 << 20)) /dev/urandom > "$WORK/ra.src"
ra_kb() { cat "/sys/class/bdi/$(mountpoint -d "$mnt")/read_ahead_kb"; }
for c in default:1024 256K:256 0:128; do # 128: the kernel's own (VM_READAHEAD_PAGES)
	o=${c%%:*} want=${c#*:}
	if [ "$o" = default ]; then mount -t fuse.memwalfs "$src" "$mnt"; else
		mount -t fuse.memwalfs -o kernel_readahead="$o" "$src" "$mnt"; fi || fail "mount with kernel_readahead=$o"
	got=$(ra_kb)
	[ "$got" = "$want" ] || fail "kernel_readahead=$o: read_ahead_kb $got, want $want"
	cp "$WORK/ra.src" "$mnt/ra.$o"
	echo 3 > /proc/sys/vm/drop_caches
	cmp "$WORK/ra.src" "$mnt/ra.$o" || fail "read back with kernel_readahead=$o"
	echo "   kernel_readahead=$o: read_ahead_kb $got"
	umount_mw
done
mount -t fuse.memwalfs -o kernel_readahead=100 "$src" "$mnt" 2>/dev/null &&
	fail "kernel_readahead=100 (under 4K, i.e. read-ahead off) was taken"
mountpoint -q "$mnt" && fail "a refused mount left $mnt mounted"

echo "-- no_default_permissions through mount(8)"
err=$(mount -t fuse.memwalfs -o allow_other,no_default_permissions "$src" "$mnt" 2>&1) &&
	fail "mount -o allow_other,no_default_permissions was taken"
case $err in *"no_default_permissions is refused"*) ;; *) fail "no clear message: $err" ;; esac
mountpoint -q "$mnt" && fail "a refused mount left $mnt mounted"
echo "   refused: $err"
mw_fsck
echo PASS
