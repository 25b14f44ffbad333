#!/usr/bin/env bash
# tests/fs/workers.sh MEMWALFS BACKEND - the daemon answers requests on a pool of threads
# (-o threads=N, 64), and keeps them: one request that waits (an fsync during an outage, a read
# waiting for the store) must not hold up the others.
#
# Until this test, fs/ asked for FUSE_USE_VERSION 34 and passed the 3.12 loop configuration to
# the old entry point, which read it as max_idle_threads=0: libfuse then let every worker
# but one exit after each request, and in a long outage the mount stopped answering even
# cached reads once its one worker waited in an fsync (tests/fs/outage.sh, OUTAGE_LONG=1).
# The check: after 16 parallel readers (O_DIRECT, one process), the daemon holds at least 2 more
# threads than right after the mount (fs/pool.c starts a worker whenever none is left reading,
# up to N, and parks the idle ones instead of ending them), and it still does a little later.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
m=$WORK/m
mw_mount "$m"
pid=$(cat "$m.pid")
tasks() { ls "/proc/$pid/task" | wc -l; }
idle=$(tasks)
for i in $(seq -w 1 16); do head -c 2000000 /dev/urandom >"$m/f$i"; done
sync -f "$m/f01"
# 16 threads of one process read their files with O_DIRECT (every read is a request to the
# daemon, none from the page cache) for 2 s: requests overlap whatever the machine's load
# (16 separate python processes, each reading once after the page cache was dropped, could
# run one after the other on a loaded machine and need a single worker: the test flaked)
python3 - "$m" <<'PY' || { echo "FAIL: the O_DIRECT readers"; exit 1; }
import mmap, os, sys, threading, time
m = sys.argv[1]
start = threading.Barrier(16)
def reader(i):
    fd = os.open(os.path.join(m, "f%02d" % i), os.O_RDONLY | os.O_DIRECT)
    buf = mmap.mmap(-1, 1 << 20)
    start.wait()
    end = time.monotonic() + 2
    while time.monotonic() < end:
        off = 0
        while os.preadv(fd, [buf], off) > 0:
            off += 1 << 20
    os.close(fd)
ts = [threading.Thread(target=reader, args=(i,)) for i in range(1, 17)]
for t in ts: t.start()
for t in ts: t.join()
PY
busy=$(tasks)
sleep 1
later=$(tasks)
echo "   threads: $idle right after the mount, $busy after writes and 2 s of 16 parallel O_DIRECT readers, $later a second later"
if [ $((busy - idle)) -lt 2 ] || [ $((later - idle)) -lt 2 ]; then
	echo "FAIL: the daemon does not keep a pool of request threads"
	exit 1
fi
mw_umount "$m"
echo "workers ($BACKEND): ok"
