#!/usr/bin/env bash
# tests/fs/removed_dir.sh MEMWALFS BACKEND - an open directory that was removed (rmdir, or a
# rename over it) still answers fstat, with st_nlink 0, and fchmod, as on ext4 and as an
# unlinked open file does (issue 16); nothing of it comes back: after a remount it is gone and
# fsck finds the store clean.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
mnt=$WORK/mnt
mw_mount "$mnt"
python3 - "$mnt" <<'PY'
import os, stat, sys
d = sys.argv[1]
fails = []
def check(what, fd, mode=None):
    try:
        st = os.fstat(fd)
    except OSError as e:
        fails.append(f"{what}: fstat: {e}")
        return
    if st.st_nlink != 0:
        fails.append(f"{what}: st_nlink {st.st_nlink}, not 0")
    if mode is not None and stat.S_IMODE(st.st_mode) != mode:
        fails.append(f"{what}: mode {oct(st.st_mode)}, not {oct(mode)}")
    try:
        os.fchmod(fd, 0o711)
        if stat.S_IMODE(os.fstat(fd).st_mode) != 0o711:
            fails.append(f"{what}: fchmod did not take")
    except OSError as e:
        fails.append(f"{what}: fchmod: {e}")
    try:
        os.utime(fd, ns=(10**18, 10**18))
        if os.fstat(fd).st_mtime_ns != 10**18:
            fails.append(f"{what}: futimens did not take")
    except OSError as e:
        fails.append(f"{what}: futimens: {e}")

# an unlinked open file, for comparison
fd = os.open(f"{d}/f", os.O_CREAT | os.O_RDWR, 0o644)
os.unlink(f"{d}/f")
check("unlinked file", fd, 0o644)
os.close(fd)

os.mkdir(f"{d}/r", 0o755)
fd = os.open(f"{d}/r", os.O_RDONLY | os.O_DIRECTORY)
os.rmdir(f"{d}/r")
check("rmdir'ed directory", fd, 0o755)
try:
    if os.listdir(fd) != []:
        fails.append("rmdir'ed directory lists entries")
except OSError as e:
    fails.append(f"rmdir'ed directory: readdir: {e}")
os.close(fd)

os.mkdir(f"{d}/a", 0o750)
os.mkdir(f"{d}/b", 0o700)
fd = os.open(f"{d}/b", os.O_RDONLY | os.O_DIRECTORY)
os.rename(f"{d}/a", f"{d}/b")
check("directory renamed over", fd, 0o700)
if stat.S_IMODE(os.stat(f"{d}/b").st_mode) != 0o750:
    fails.append("the renamed directory took the old one's mode")
os.close(fd)

for f in fails:
    print("  " + f)
sys.exit(1 if fails else 0)
PY
echo "-- remount: nothing of them came back"
mw_umount "$mnt"
mw_mount "$mnt"
[ "$(ls "$mnt")" = b ] || { ls -la "$mnt"; echo "FAIL: unexpected entries"; exit 1; }
[ "$(stat -c %a "$mnt/b")" = 750 ]
mw_umount "$mnt"
mw_fsck
echo PASS
