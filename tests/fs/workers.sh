#!/usr/bin/env bash
# tests/fs/workers.sh MEMWALFS BACKEND - the daemon answers requests on a pool of threads
# (-o threads=N, 64), and keeps them: one request that waits (an fsync during an outage, a read
# waiting for the store) must not hold up the others.
#
# Until this test, fs/ asked for FUSE_USE_VERSION 34 and passed the 3.12 loop configuration to
# the old entry point, which read it as max_idle_threads=0: libfuse then let every worker
# but one exit after each request, and in a long outage the mount stopped answering even
# cached reads once its one worker waited in an fsync (tests/fs/outage.sh, OUTAGE_LONG=1).
# The check: after 16 parallel readers, the daemon holds at least 2 more threads than right
# after the mount (libfuse starts a worker whenever none is free, up to N, and with its default idle
# policy never stops one), and it still does a little later.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
m=$WORK/m
mw_mount "$m"
pid=$(cat "$m.pid")
tasks() { ls "/proc/$pid/task" | wc -l; }
idle=$(tasks)
for i in $(seq -w 1 16); do head -c 2000000 /dev/urandom >"$m/f$i"; done
sync -f "$m/f01"
for round in 1 2 3; do
	for i in $(seq -w 1 16); do
		python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
while os.read(fd, 1 << 20): pass
os.fsync(fd)' "$m/f$i" &
	done
	wait
done
busy=$(tasks)
sleep 1
later=$(tasks)
echo "   threads: $idle right after the mount, $busy after writes and 3 rounds of 16 parallel readers, $later a second later"
if [ $((busy - idle)) -lt 2 ] || [ $((later - idle)) -lt 2 ]; then
	echo "FAIL: the daemon does not keep a pool of request threads"
	exit 1
fi
mw_umount "$m"
echo "workers ($BACKEND): ok"
