#!/usr/bin/env bash
# tests/fs/safety.sh MEMWALFS BACKEND - nobody gets in, no secret leaks (issue 36, 4b and 4c):
#  1. no_default_permissions is refused (exit status 2, a message that says why and what to do,
#     nothing mounted) in every form it can come in: memwalfs mount -o, the form libfuse's
#     mount.fuse3 runs (memwalfs STORE DIR -o OPTS), the mount(8) helper mount.fuse.memwalfs
#     (mountopts.sh runs it through mount(8) itself) and MEMWALFS_MOUNT_OPTS as tools/run.sh
#     expands it; and on an allow_other mount an unprivileged user (nobody) cannot read root's
#     0600 file, create in root's 0755 directory, or chmod/chown root's file;
#  2. the daemon is not dumpable (its memory holds the S3 secret): the files of /proc/PID of a
#     dumpable process belong to its effective uid and gid, those of a non-dumpable one to root
#     (the directory /proc/PID itself keeps the effective ids: environ is checked),
#     so the daemon runs with gid nogroup (setpriv --regid) and /proc/PID must have gid 0;
#     with --dumpable (and -o dumpable) it has the daemon's gid. /proc/PID/stat and cmdline,
#     which memwalfs umount and remount read, stay readable to other users, and memwalfs umount
#     works.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
MW=$(readlink -f "$MW")
mnt=$WORK/mnt
mkdir -p "$mnt"
MOUNTS+=("$mnt") # a mount the refusal let through is unmounted at exit
fail() {
	echo "FAIL: $*"
	exit 1
}
command -v setpriv >/dev/null || { echo "SKIP: no setpriv"; exit 77; }
[ "$(id -u)" = 0 ] || { echo "SKIP: needs root (an unprivileged user and setpriv --regid)"; exit 77; }
nobody=$(id -u nobody 2>/dev/null) || { echo "SKIP: no user nobody"; exit 77; }
ngid=$(id -g nobody)
as_nobody() { setpriv --reuid="$nobody" --regid="$ngid" --clear-groups "$@"; }

# refused CMD...: the command must exit 2, say no_default_permissions is refused, mount nothing
refused() {
	local out rc=0
	out=$("$@" 2>&1) || rc=$?
	[ "$rc" = 2 ] || fail "$* exited $rc (wanted 2): $out"
	case $out in *"no_default_permissions is refused"*"Remove the option"*) ;;
	*) fail "$*: no clear message: $out" ;; esac
	mountpoint -q "$mnt" && fail "$* mounted $mnt"
	return 0
}

echo "-- 1. no_default_permissions is refused"
refused "$MW" mount "${STORE_OPTS[@]}" -o allow_other,no_default_permissions "$STORE" "$mnt"
refused "$MW" mount "${STORE_OPTS[@]}" -o no_default_permissions "$STORE" "$mnt"
refused "$MW" mount "${STORE_OPTS[@]}" -o allow_other -o ro,no_default_permissions "$STORE" "$mnt"
if [ "$BACKEND" = local ]; then
	mkdir -p "$STORE"
	refused "$MW" "$STORE" "$mnt" -o allow_other,no_default_permissions # mount.fuse3's form
	hd=$WORK/helper
	mkdir -p "$hd"
	cp "$here/../../tools/mount.fuse.memwalfs" "$hd/"
	ln -s "$MW" "$hd/memwalfs"
	refused sh "$hd/mount.fuse.memwalfs" "$STORE" "$mnt" -o rw,allow_other,no_default_permissions
fi
MEMWALFS_MOUNT_OPTS="${STORE_OPTS[*]} -o allow_other,no_default_permissions"
# shellcheck disable=SC2086 # split as tools/run.sh splits it
refused "$MW" mount ${MEMWALFS_MOUNT_OPTS} "$STORE" "$mnt"
echo "   refused in each form, exit status 2"

mw_mount "$mnt"
mkdir "$mnt/rootdir"
chmod 755 "$mnt/rootdir"
echo secret >"$mnt/rootdir/private"
chmod 600 "$mnt/rootdir/private"
as_nobody cat "$mnt/rootdir/private" 2>/dev/null && fail "nobody read root's 0600 file"
as_nobody sh -c "echo x > '$mnt/rootdir/new'" 2>/dev/null && fail "nobody created a file in root's 0755 directory"
as_nobody chmod 666 "$mnt/rootdir/private" 2>/dev/null && fail "nobody chmod'ed root's file"
as_nobody chown "$nobody" "$mnt/rootdir/private" 2>/dev/null && fail "nobody chown'ed root's file"
[ -e "$mnt/rootdir/new" ] && fail "rootdir/new exists"
[ "$(stat -c %a:%u "$mnt/rootdir/private")" = 600:0 ] || fail "root's file changed: $(stat -c %a:%u "$mnt/rootdir/private")"
echo "   an unprivileged user is refused: read, create, chmod, chown"
mw_umount "$mnt"

echo "-- 2. the daemon is not dumpable"
# dumpable_mount WANT_GID [options...]: mount with gid nogroup, /proc/PID must have WANT_GID
dumpable_mount() {
	local want=$1 dc=() pid g
	shift
	mw_cache_opts "$mnt"
	setpriv --regid="$ngid" --clear-groups "$MW" mount "${STORE_OPTS[@]}" "${dc[@]}" -o allow_other \
		--pidfile "$mnt.pid" "$@" "$STORE" "$mnt" || fail "mount $*"
	MOUNTS+=("$mnt")
	pid=$(cat "$mnt.pid")
	g=$(stat -c %g "/proc/$pid/environ")
	[ "$g" = "$want" ] || fail "mount $*: /proc/$pid/environ has gid $g, wanted $want ($([ "$want" = 0 ] && echo 'not dumpable' || echo dumpable))"
	for f in stat cmdline status; do
		as_nobody cat "/proc/$pid/$f" >/dev/null || fail "another user cannot read /proc/$pid/$f"
	done
	echo x >"$mnt/f" || fail "write through the mount $*"
	mw_umount "$mnt" || fail "memwalfs umount after mount $*"
	echo "   mount ${*:-(default)}: /proc/PID/environ gid $g"
}
dumpable_mount 0
dumpable_mount "$ngid" --dumpable
dumpable_mount "$ngid" -o dumpable
echo PASS
