#!/usr/bin/env bash
# tests/fs/stale_listing.sh MEMWALFS BACKEND - a listing that goes on after a rename over one
# of its names must not bind that name to the inode it replaced.  The daemon snapshots a
# listing at offset 0 (fs/dir.c); readdirplus used to hand the kernel each entry's inode from
# that snapshot, and the kernel then bound the name to the replaced inode (kept in the table
# by an open descriptor): stat, open and link(2) of the name reached the old file (link failed
# with ENOENT on its nlink of 0).  Here: 3000 names so the listing takes many readdirplus
# calls, each name stat-ed as it comes (as ls -l does: the kernel stays on readdirplus);
# after 100 names "zz-a" (held open) is replaced by a rename of "zz-b", the listing is read
# to its end, then stat, a read and a link of "zz-a" must see the new file; also after a
# remount.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
m=$WORK/m
fail() {
	echo "FAIL: $*"
	exit 1
}
mw_mount "$m"
python3 - "$m" <<'PY' || fail "stale listing"
import os, sys
m = sys.argv[1]
d = os.path.join(m, "d")
os.mkdir(d)
for i in range(3000):
    with open(os.path.join(d, "f%05d" % i), "w"):
        pass
a, b = os.path.join(d, "zz-a"), os.path.join(d, "zz-b")
for p, data in ((a, b"old"), (b, b"new")):
    with open(p, "wb") as f:
        f.write(data)
want = os.stat(b).st_ino
fd = os.open(a, os.O_RDONLY)          # keeps the replaced inode in the daemon's table
it = os.scandir(d)
names = []
for e in it:                          # as ls -l does: a stat of each name while listing,
    names.append(e.name)              # which keeps the kernel on readdirplus
    try:
        os.lstat(os.path.join(d, e.name))
    except FileNotFoundError:         # zz-b: renamed away after the snapshot
        assert e.name == "zz-b", e.name
    if len(names) == 100:             # the snapshot exists: replace zz-a
        os.rename(b, a)
it.close()
assert "zz-a" in names, "zz-a missing from the listing"
st = os.stat(a)
assert st.st_ino == want, "stat(zz-a) gives inode %d, the replaced one; want %d" % (st.st_ino, want)
with open(a, "rb") as f:
    got = f.read()
assert got == b"new", "zz-a reads %r" % got
os.link(a, os.path.join(d, "zz-c"))   # failed with ENOENT
assert os.stat(os.path.join(d, "zz-c")).st_ino == want
os.close(fd)
print("stale listing: zz-a is inode %d after the rename, read %r, linked" % (want, got))
PY
mw_umount "$m"
mw_mount "$m"
[ "$(cat "$m/d/zz-a")" = new ] || fail "after the remount zz-a reads $(cat "$m/d/zz-a")"
[ "$(stat -c %i "$m/d/zz-a")" = "$(stat -c %i "$m/d/zz-c")" ] || fail "zz-c is not a link of zz-a"
mw_umount "$m"
mw_fsck || fail "fsck"
echo "stale_listing ($BACKEND): ok"
