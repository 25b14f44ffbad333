#!/usr/bin/env bash
# tests/fs/timestamps.sh MEMWALFS BACKEND - every timestamp comes from one clock (issue 16):
# sequences of create, link, rename, chmod, truncate and write, repeated (TS_TRIES times, 300
# by default), never see a ctime or mtime earlier than one set by an earlier operation. The
# kernel stamps some times itself (link's ctime, writes under the writeback cache) from its
# coarse clock; the daemon's own must come from the same clock. With and without the writeback
# cache.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
mnt=$WORK/mnt
tries=${TS_TRIES:-300}

check() {
	python3 - "$1" "$tries" <<'PY'
import os, sys
d, tries = sys.argv[1], int(sys.argv[2])
bad = 0
last = (0, "start")
def seen(path, op):
    global last, bad
    st = os.lstat(path)
    for what, t in (("ctime", st.st_ctime_ns), ("mtime", st.st_mtime_ns)):
        if what == "mtime" and op not in ("create", "write", "truncate", "mkdir"):
            continue  # the operation leaves mtime as it was
        if t < last[0]:
            bad += 1
            if bad <= 5:
                print(f"  backwards: {what} of {path} after {op} = {t}, "
                      f"earlier than {last[0]} after {last[1]} (by {last[0] - t} ns)")
    if st.st_ctime_ns > last[0]:
        last = (st.st_ctime_ns, op)
for i in range(tries):
    a, b, c = f"{d}/a{i}", f"{d}/b{i}", f"{d}/c{i}"
    with open(a, "w") as f:
        pass
    seen(a, "create")
    os.link(a, b)
    seen(b, "link")
    os.rename(b, c)
    seen(c, "rename")
    os.chmod(c, 0o600)
    seen(c, "chmod")
    with open(c, "r+") as f:
        f.write("x" * (i + 1))
        f.flush()
        os.fsync(f.fileno())
    seen(c, "write")
    os.truncate(a, 1)
    seen(a, "truncate")
    os.mkdir(f"{d}/m{i}")
    seen(f"{d}/m{i}", "mkdir")
    os.unlink(c)
    seen(a, "unlink of a link")
print(f"  {tries} tries, {bad} backwards")
sys.exit(1 if bad else 0)
PY
}

for wb in writeback no_writeback_cache; do
	echo "-- $wb"
	if [ "$wb" = writeback ]; then mw_mount "$mnt"; else mw_mount "$mnt" -o "$wb"; fi
	mkdir "$mnt/$wb"
	check "$mnt/$wb" || { echo "FAIL: a timestamp went backwards ($wb)"; exit 1; }
	mw_umount "$mnt"
done
echo "PASS"
