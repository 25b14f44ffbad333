#!/usr/bin/env bash
# tests/fs/idle.sh MEMWALFS BACKEND - an idle mount sends no requests to its store (issue 16:
# on S3 every request is billed; a local-store mount with nothing to do used to send a GC pass
# of LISTs and GETs every minute). The mount runs with a short GC interval and no grace, so
# that the GC wakes many times during the test:
#  1. files written, some fsynced, half of them removed, "memwalfs sync": once the GC has
#     collected what there was to collect, the store's request counters stand still for 40 GC
#     intervals, while the GC's skipped wake-ups go on counting (it is awake and finds nothing);
#  2. a write after the idle spell is committed, and the GC runs a pass again;
#  3. after a remount (replay, orphan reclaim) the mount goes quiet the same way;
# each time the files read back byte-exact.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
# on failure: every counter of the mount and what its daemon logged (-v: each GC pass)
fail() {
	echo "FAIL: $*"
	if mountpoint -q "$mnt"; then
		"$MW" stats --raw "$mnt" | grep -E '^(store_requests_|gc_|flush|compact|memtable|man|wal)' | tr '\n' ' '
		echo
	fi
	mw_log_tail "$mnt" 60
	exit 1
}
mnt=$WORK/mnt
gc_ms=100
opts=(--gc-interval "$gc_ms" --gc-grace 0 -v)

# stat NAME: one line of "memwalfs stats"
stat() { "$MW" stats --raw "$mnt" | awk -v k="$1" '$1 == k { print $2; f = 1 } END { if (!f) print 0 }'; }
# requests: the sum of store_requests_* (every class: put, get, head, list, delete, mpu)
requests() { "$MW" stats --raw "$mnt" | awk '$1 ~ /^store_requests_/ { s += $2 } END { print s + 0 }'; }

# quiet: wait (up to 60 s) until the request count has not moved for 2 s, then check it stays
# put for 40 GC intervals while the GC keeps waking up
quiet() {
	local last now same=0 k0 k1 r0 r1
	last=$(requests)
	for _ in $(seq 120); do
		sleep 0.5
		now=$(requests)
		if [ "$now" = "$last" ]; then same=$((same + 1)); else same=0; last=$now; fi
		[ "$same" -ge 4 ] && break
	done
	[ "$same" -ge 4 ] || fail "the mount never went quiet: $(requests) requests and counting"
	r0=$(requests)
	k0=$(stat gc_skipped)
	sleep "$(awk -v ms="$gc_ms" 'BEGIN { print ms * 40 / 1000 }')"
	r1=$(requests)
	k1=$(stat gc_skipped)
	"$MW" stats --raw "$mnt" | grep '^store_requests_' | tr '\n' ' '
	echo
	[ "$r1" = "$r0" ] || fail "an idle mount sent $((r1 - r0)) requests in 40 GC intervals"
	[ "$k1" -gt "$k0" ] || fail "the GC did not wake while idle (gc_skipped $k0 -> $k1): the check proves nothing"
	echo "   ok: $r0 requests before and after 40 GC intervals; the GC woke $((k1 - k0)) times and sent nothing"
}

echo "-- 1. a workload, then an idle spell (GC every $gc_ms ms, no grace)"
mw_mount_logged "$mnt" "${opts[@]}"
mkdir "$mnt/d"
for i in $(seq 40); do
	head -c $((i * 3000 + 1)) /dev/urandom >"$mnt/d/f$i"
done
/usr/bin/python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' "$mnt/d/f7"
rm "$mnt"/d/f1? "$mnt/d/f3"
"$MW" sync "$mnt"
(cd "$mnt/d" && cksum f*) >"$WORK/sums"
quiet

echo "-- 2. a write after the idle spell commits, and the GC runs again"
p0=$(stat gc_passes)
r0=$(requests)
echo late >"$mnt/d/late"
rm "$mnt/d/f2"
"$MW" sync "$mnt"
for _ in $(seq 100); do [ "$(stat gc_passes)" -gt "$p0" ] && break; sleep 0.1; done
[ "$(stat gc_passes)" -gt "$p0" ] || fail "no GC pass after new writes and a removal"
[ "$(requests)" -gt "$r0" ] || fail "the write after the idle spell sent no request"
echo "   ok: $(( $(requests) - r0 )) requests for the write, GC passes $p0 -> $(stat gc_passes)"
sed -i '/ f2$/d' "$WORK/sums"
(cd "$mnt/d" && cksum f*) | cmp -s - "$WORK/sums" || fail "contents after the write"
quiet

echo "-- 3. after a remount"
mw_umount "$mnt"
mw_mount_logged "$mnt" "${opts[@]}"
(cd "$mnt/d" && cksum f*) | cmp -s - "$WORK/sums" || fail "contents after the remount"
[ "$(cat "$mnt/d/late")" = late ] || fail "the late file after the remount"
quiet
mw_umount "$mnt"
mw_fsck
echo "PASS"
