#!/usr/bin/env bash
# tests/fs/outage.sh MEMWALFS BACKEND - a store that stops answering, throttles or fills up,
# seen through real mounts the way a user hits it (issue 10). The mounts ride it out: fsync
# waits (or gives up after --fsync-timeout without fencing anything), cached data keeps being
# served, and the same mount carries on by itself once the store is back.
#
# s3 (suite s3, alone: it stops the shared S3 server, tools/s3-server.sh, and always starts it
# again, even when the test fails; about 2.5 minutes):
#  1. RGW stopped for OUTAGE_SEC (45) under a create+fsync loop (mount A): a file the daemon
#     has read (its kernel pages dropped), a stat and an ls -l of a directory seen before
#     answer within LIVE_SEC during the outage, and so does a file this mount wrote and read before
#     it (its kernel pages dropped: the kernel may drop them at any time); the stats show
#     outage_since while it lasts and 0 after, outages >= 1; the fsync that waited returns 0
#     after the server is back, none that started during the outage returns 0 before its end,
#     the loop goes on on the same mount; after a remount every acknowledged file is
#     byte-exact. In the same outage, mount F: 20 MiB appended (dd conv=fsync) to a file whose
#     first 500,000 bytes (a partial chunk) were fsynced before it by an earlier mount (so the
#     chunk is not in the daemon's cache: the append waits to read it), and a read of a file
#     that daemon has not cached waits for the server and is right, and a lookup of a name in
#     SSTable blocks nobody has read (3,000 names written by the earlier mount) does not hold
#     up the reads and listings of F meanwhile: the fsync returns 0 after
#     the server is back, reads on F answer meanwhile, and the file is byte-exact after a
#     remount. Then a 200 MiB sequential write (dd conv=fsync, paced at 20 MiB/s so that
#     it is written during the outage) across a DD_OUTAGE_SEC (20) outage completes and is
#     byte-exact after a remount.
#  3. --fsync-timeout 3 (mount B, in the same outage): fsync fails with EIO after 3 s (2.8-5),
#     twice, the writer is not stopped, and the data commits once the server is back (nothing
#     pending, then a remount).
#  4. kill -9 during that outage (mount C) with writes pending (files fsynced before it, files
#     written during it without fsync, an fsync waiting): after the server is back, a lazy
#     unmount, fsck --deep and a remount, what was fsynced is there and the rest is a prefix,
#     in creation order; fsck is clean.
#  2. a fault proxy (tests/s3/faultproxy.py, seconds= mode) answering 503 SlowDown to every
#     request for STORM_SEC (30) in front of RGW (mount E, through the proxy): the checks of
#     case 1. 30 s as in issue 10: the S3 layer retries each request 8 times (full-jitter
#     backoff, up to ~23 s in all) before the engine sees a failure, so a much shorter storm
#     may never show in outage_since.
#  OUTAGE_LONG=1: 300 s outages (main and dd; by hand, ~13 minutes). OUTAGE_PARTS picks the
#  parts ("main dd storm"). A read that does not answer in time is collected and fails the
#  test at the end, with what that read returned once it did.
# local (suite fs):
#  5. a local store on a 64 MiB tmpfs filled through the mount: ENOSPC (not EIO) reaches the
#     application (where is printed), at once while it is full, for a create, an append and a
#     mkdir too; reads answer; after deleting a file on the tmpfs, and again after growing it,
#     the same mount writes and fsyncs again; after a remount everything acknowledged is
#     byte-exact, what was refused is absent or a prefix, and fsck is clean.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
MW=$(readlink -f "$MW")
cd "$WORK" || exit 1 # nothing lands in the caller's directory
PY="$here/outage.py"
SRV="$here/../../tools/s3-server.sh"
PROXY_PY="$here/../s3/faultproxy.py"
OUTAGE_SEC=${OUTAGE_SEC:-45}
DD_OUTAGE_SEC=${DD_OUTAGE_SEC:-20}
if [ "${OUTAGE_LONG:-0}" = 1 ]; then OUTAGE_SEC=300 DD_OUTAGE_SEC=300; fi
STORM_SEC=${STORM_SEC:-30}
# A request that should be answered from memory during an outage must answer within LIVE_SEC
# (5): a stall (a request waiting for the store under a lock, a pool with no free worker)
# lasts the S3 layer's retries (10-25 s) or the whole outage, while a loaded 2-core CI machine
# can take over a second just to schedule dd. The times measured are printed (0.01-0.2 s).
LIVE_SEC=${LIVE_SEC:-5}
T_START=$(date +%s.%N)

now() { date +%s.%N; }
# since T: seconds from unix time T to now, 2 decimals
since() { awk -v t="$1" -v n="$(now)" 'BEGIN{printf "%.2f", n - t}'; }
sleep_until() { sleep "$(awk -v t="$1" -v n="$(now)" 'BEGIN{d = t - n; printf "%.2f", (d > 0 ? d : 0)}')"; }
fail() {
	echo "FAIL: $*"
	exit 1
}
# stat_of MNT KEY: one value of "memwalfs stats MNT" (empty if the stats did not answer)
stat_of() { timeout 5 "$MW" stats --raw "$1" 2>/dev/null | awk -v k="$2" '$1 == k {print $2}'; }

LATE_FAILS=() # failures collected on the way (the test goes on), reported at the end
BGPIDS=()     # background jobs of this test (writers, samplers), stopped at exit
SRV_DOWN=0    # 1 while this test has the S3 server stopped
PXFD=""       # stdin of the fault proxy (closing it stops the proxy)
TMPFS=""      # the tmpfs of case 5, unmounted at exit

outage_cleanup() {
	local rc=$?
	set +e
	for p in "${BGPIDS[@]}"; do kill "$p" 2>/dev/null; done
	if [ "$SRV_DOWN" = 1 ]; then
		echo "-- starting the S3 server again (cleanup)"
		"$SRV" start >/dev/null 2>>"$WORK/server.log" || echo "WARNING: tools/s3-server.sh start failed"
		SRV_DOWN=0
	fi
	[ -n "$PXFD" ] && exec {PXFD}>&-
	if [ "$rc" != 0 ]; then
		for f in "${LATE_FAILS[@]}"; do echo "FAIL (collected earlier): ${f%; MNT.late=*}"; done
		for l in "$WORK"/*.log; do
			[ -s "$l" ] || continue
			echo "--- tail of $l"
			tail -n 25 "$l"
		done
	fi
	for m in "${MOUNTS[@]}"; do
		# a live mount, or a dead one (its daemon killed: mountpoint fails with ENOTCONN)
		if grep -q " $m fuse" /proc/mounts; then fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m"; fi
		[ -f "$m.pid" ] && mw_wait_exit "$m.pid"
	done
	if [ -n "$TMPFS" ] && mountpoint -q "$TMPFS"; then umount "$TMPFS" || umount -l "$TMPFS"; fi
	mw_cleanup
	exit "$rc"
}
trap outage_cleanup EXIT
trap 'exit 143' TERM INT HUP

# tslog FILE: append stdin to FILE, each line after its unix time
tslog() { while IFS= read -r l; do printf '%s %s\n' "$EPOCHREALTIME" "$l"; done >>"$1"; }
# om MNT STORE [options...]: mount STORE at MNT with the daemon in the foreground, in the
# background of this script, so that its log (MNT.log) is kept (a daemon logs to syslog)
om() {
	local mnt=$1 store=$2 pid
	shift 2
	mkdir -p "$mnt"
	rm -f "$mnt.pid"
	[[ " ${MOUNTS[*]} " == *" $mnt "* ]] || MOUNTS+=("$mnt")
	echo "=== mount $* $store ($(date +%T.%N))" >>"$mnt.log"
	"$MW" mount -f -o allow_other --pidfile "$mnt.pid" "$@" "$store" "$mnt" > >(tslog "$mnt.log") 2>&1 &
	pid=$!
	for _ in $(seq 600); do
		mountpoint -q "$mnt" && [ -s "$mnt.pid" ] && return 0
		kill -0 "$pid" 2>/dev/null || fail "mounting $store at $mnt failed (see $mnt.log above)"
		sleep 0.1
	done
	fail "the mount of $store at $mnt did not appear within 60 s"
}
# ou MNT: memwalfs umount (fails unless the final commit succeeded), wait for the daemon;
# first, a reader written_read left behind must have finished (60 s at most)
ou() {
	if [ -f "$1.readerpid" ]; then
		mw_wait_exit "$1.readerpid" || fail "a read of $1/seen/cached still hangs with the store answering"
		rm -f "$1.readerpid"
	fi
	mw_umount_cmd "$1" || fail "memwalfs umount $1 failed"
	mw_wait_exit "$1.pid"
	rm -f "$1.pid" # its number may soon belong to another process
}
# ofsck STORE [options...]: memwalfs fsck of STORE must be clean
ofsck() {
	local store=$1
	shift
	if ! "$MW" fsck "$@" "$store" >"$WORK/fsck.out" 2>&1; then
		cat "$WORK/fsck.out"
		fail "memwalfs fsck $* $store found problems"
	fi
	echo "   fsck $*: clean ($(grep -c . "$WORK/fsck.out") lines)"
}
# sampler MNT OUT: every 0.5 s, a line "time outage_since outages commit_retries
# writers_waiting pending_bytes sync_timeouts sticky_error" of MNT's stats into OUT, in the
# background (its pid in SAMP)
sampler() {
	(
		while :; do
			timeout 5 "$MW" stats --raw "$1" 2>/dev/null | awk -v t="$(now)" '
				{v[$1] = $2}
				END {print t, v["outage_since"]+0, v["outages"]+0, v["commit_retries"]+0,
				     v["writers_waiting"]+0, v["pending_bytes"]+0, v["sync_timeouts"]+0,
				     v["sticky_error"]+0}' >>"$2"
			sleep 0.5
		done
	) </dev/null >/dev/null 2>&1 &
	SAMP=$!
	BGPIDS+=("$SAMP")
}
# samples_summary OUT T_DOWN T_UP: what the sampler saw during and after the outage;
# fails unless outage_since was set during it
samples_summary() {
	awk -v d="$2" -v u="$3" '
		$1 >= d && $1 <= u { n++; if ($2 != 0) { o++; if (!first) first = $1 } if ($5 > ww) ww = $5
		                     if ($6 > pb) pb = $6 }
		END { printf "   stats during the outage: %d samples, outage_since set in %d (from %.1f s in), " \
		             "writers_waiting max %d, pending_bytes max %d\n", n, o, first ? first - d : -1, ww, pb
		      exit o ? 0 : 1 }' "$1" || fail "the stats never showed outage_since during the outage"
}
# wait_recovered MNT: the stats show outage_since 0 and nothing pending (60 s at most)
wait_recovered() {
	local t0 os pb
	t0=$(now)
	for _ in $(seq 600); do
		os=$(stat_of "$1" outage_since)
		pb=$(stat_of "$1" pending_bytes)
		if [ "$os" = 0 ] && [ "$pb" = 0 ]; then
			echo "   $1: outage_since 0, nothing pending, $(since "$t0") s after the check began"
			return 0
		fi
		sleep 0.1
	done
	fail "$1: still outage_since=$os pending_bytes=$pb 60 s after the store was back"
}
# dropcache FILE: drop FILE's clean pages from the kernel page cache (posix_fadvise
# DONTNEED). The kernel may do that by itself at any time (memory pressure; on some VMs a
# proactive reclaimer such as DAMON pages out page cache idle for a minute), so a read that is
# to be served by the daemon's own caches during an outage starts with this. dd (count=0,
# iflag=nocache: DONTNEED over the whole file) rather than python: an interpreter's start-up
# alone can take a second on a loaded 2-core machine.
dropcache() { timeout -k 1 "$LIVE_SEC" dd if="$1" iflag=nocache count=0 status=none; }
# stuck MNT MESSAGE: a request that did not answer in time: collected in LATE_FAILS (the test
# goes on: the outage has a fixed length, and what follows shows whether the mount recovers);
# the first time per mount, the stacks of its daemon's threads (gdb) are printed
stuck() {
	local pid
	echo "   FAIL (collected): $2"
	LATE_FAILS+=("$2")
	pid=$(cat "$1.pid" 2>/dev/null) || return 0
	if command -v gdb >/dev/null && [ ! -e "$1.stacks" ]; then
		timeout 60 gdb -p "$pid" -batch -ex "thread apply all bt" >"$1.stacks" 2>&1
		echo "   stacks of the daemon's threads (top 10 frames):"
		awk '/^Thread / {n = 0; print; next} /^#/ && n++ < 10 {print "      " $0}' "$1.stacks" |
			sed -E 's/ \(.{200,}\)/ (...)/' | head -n 300
	fi
}
# timed_reads MNT TAG: during an outage, a file the daemon has read before (seen/warm, its
# kernel pages dropped first), a lookup and a listing of MNT/seen answer within LIVE_SEC
timed_reads() {
	local t0 a b c
	dropcache "$1/seen/warm" || { stuck "$1" "$2: open of seen/warm did not answer within $LIVE_SEC s"; return 0; }
	t0=$(now)
	timeout -k 1 "$LIVE_SEC" cat "$1/seen/warm" >"$WORK/got" ||
		{ stuck "$1" "$2: reading a file the daemon has cached did not answer within $LIVE_SEC s"; return 0; }
	a=$(since "$t0")
	cmp -s "$WORK/got" "$WORK/warm.ref" || fail "$2: seen/warm read back wrong"
	t0=$(now)
	timeout -k 1 "$LIVE_SEC" stat "$1/seen/cached" >/dev/null ||
		{ stuck "$1" "$2: stat of a file seen before did not answer within $LIVE_SEC s"; return 0; }
	b=$(since "$t0")
	t0=$(now)
	timeout -k 1 "$LIVE_SEC" ls -l "$1/seen" >"$WORK/ls.out" ||
		{ stuck "$1" "$2: ls -l of a directory seen before did not answer within $LIVE_SEC s"; return 0; }
	c=$(since "$t0")
	[ "$(grep -c ' small' "$WORK/ls.out")" = 20 ] || fail "$2: ls lists $(grep -c ' small' "$WORK/ls.out") of 20 files"
	echo "   $2: cat of a file in the daemon's cache ${a} s, stat ${b} s, ls -l ${c} s"
}
# written_read MNT TAG: during an outage, the file this mount wrote and read before the
# outage (seen/cached), once the kernel dropped its pages, is read within LIVE_SEC. A failure is
# collected in LATE_FAILS (the test goes on and fails at the end); the read goes on without a
# time limit, and MNT.late says what it returned in the end and after how long.
written_read() {
	dropcache "$1/seen/cached" || { stuck "$1" "$2: open of seen/cached did not answer within $LIVE_SEC s"; return 0; }
	rm -f "$1.late"
	python3 -c 'import hashlib, sys, time
t0 = time.time()
try:
    d = open(sys.argv[1], "rb").read()
    ok = hashlib.sha256(d).hexdigest() == hashlib.sha256(open(sys.argv[2], "rb").read()).hexdigest()
    r = "returned %d bytes (%s)" % (len(d), "right" if ok else "WRONG")
except OSError as e:
    r = "failed with %s" % e.strerror
open(sys.argv[3], "w").write("that read, without a time limit, ended after %.2f s: %s\n" % (time.time() - t0, r))' \
		"$1/seen/cached" "$WORK/cached.ref" "$1.late" </dev/null &
	BGPIDS+=($!)
	echo $! >"$1.readerpid"
	# the limit is the read's own time, measured by the reader once started (the interpreter's
	# start-up on a loaded machine is not the filesystem's)
	for _ in $(seq $((LIVE_SEC * 10 + 50))); do
		sleep 0.1
		[ -s "$1.late" ] && break
	done
	if [ -s "$1.late" ] && grep -q "returned 1000000 bytes (right)" "$1.late" &&
		awk -v lim="$LIVE_SEC" '{for (i = 1; i < NF; i++) if ($i == "after") exit !($(i + 1) <= lim)}' "$1.late"; then
		echo "   $2: a file written and read before, its kernel pages dropped: $(cat "$1.late")"
		return 0
	fi
	LATE_FAILS+=("$2: a read of a file written and read before the outage (its kernel pages dropped) did not answer within $LIVE_SEC s; MNT.late=$1.late")
	echo "   $2: FAIL (collected): reading seen/cached with its kernel pages dropped did not answer within $LIVE_SEC s"
}
# prepare_seen MNT: a directory seen/ with 20 small files listed once, a file written and read
# once (cached: its pages in the kernel), and one read once through the daemon (warm: the
# kernel's pages dropped before the read, so the daemon fetched it from the store and keeps it
# in its blob cache)
prepare_seen() {
	mkdir -p "$1/seen"
	for i in $(seq -w 1 20); do echo "$i" >"$1/seen/small$i"; done
	dd if="$WORK/cached.ref" of="$1/seen/cached" bs=64k conv=fsync status=none
	cmp "$1/seen/cached" "$WORK/cached.ref"
	dd if="$WORK/warm.ref" of="$1/seen/warm" bs=64k conv=fsync status=none
	dropcache "$1/seen/warm"
	cmp "$1/seen/warm" "$WORK/warm.ref"
	ls -l "$1/seen" >/dev/null
	sync -f "$1/seen/small01"
}
# rewarm MNT: after a remount, have the daemon read seen/warm again (into its blob cache)
rewarm() {
	dropcache "$1/seen/warm"
	cmp "$1/seen/warm" "$WORK/warm.ref"
}
late_fails() {
	[ "${#LATE_FAILS[@]}" = 0 ] && return 0
	local f l
	sleep 1
	for f in "${LATE_FAILS[@]}"; do
		echo "FAIL: ${f%; MNT.late=*}"
		[[ $f == *"MNT.late="* ]] || continue
		l=${f##*MNT.late=}
		echo "   $(cat "$l" 2>/dev/null || echo "(still waiting)")"
	done
	LATE_FAILS=() # reported
	exit 1
}

# ---------------------------------------------------------------------------------------
# S3
# ---------------------------------------------------------------------------------------
srv_stop() {
	local t0
	t0=$(now)
	SRV_DOWN=1
	"$SRV" stop 2>>"$WORK/server.log" || fail "tools/s3-server.sh stop failed"
	if "$SRV" status 2>>"$WORK/server.log"; then fail "the S3 server still answers after tools/s3-server.sh stop"; fi
	echo "   S3 server stopped in $(since "$t0") s (down from $(now))"
}
srv_start() {
	local t0
	t0=$(now)
	"$SRV" start >"$WORK/server.env" 2>>"$WORK/server.log" || fail "tools/s3-server.sh start failed"
	SRV_DOWN=0
	grep -q "S3_ENDPOINT=$S3_ENDPOINT " "$WORK/server.env" || fail "the restarted server prints $(cat "$WORK/server.env")"
	"$SRV" status 2>"$WORK/status.out" || fail "tools/s3-server.sh status after the start: $(cat "$WORK/status.out")"
	grep -q "answering on $S3_ENDPOINT" "$WORK/status.out" || fail "status says: $(cat "$WORK/status.out")"
	echo "   S3 server started again in $(since "$t0") s: $(cat "$WORK/status.out")"
}
# loop_start MNT: the create+fsync loop into MNT/loop, records in MNT.loop
loop_start() {
	rm -f "$1.loopstop"
	python3 "$PY" loop "$1/loop" "$1.loop" "$1.loopstop" 1000 65536 &
	LOOP_PID=$!
	BGPIDS+=("$LOOP_PID")
}
loop_stop() {
	touch "$1.loopstop"
	wait "$LOOP_PID" || fail "the create+fsync loop exited with $?"
}
loop_wait_acks() { # loop_wait_acks MNT N: until the loop acknowledged N files (30 s at most)
	local n
	for _ in $(seq 300); do
		n=$(grep -c "^OK" "$1.loop" 2>/dev/null) || true
		[ "${n:-0}" -ge "$2" ] && return 0
		sleep 0.1
	done
	fail "the create+fsync loop acknowledged only $(grep -c '^OK' "$1.loop") files in 30 s"
}

S3O=(--endpoint "${S3_ENDPOINT:-}" --region "${S3_REGION:-us-east-1}")
PFX=$STORE

# 1, 3, 4: RGW stopped for OUTAGE_SEC under three mounts: A (create+fsync loop, reads), B
# (--fsync-timeout 3), C (kill -9 with writes pending)
s3_main() {
	local mA=$WORK/a mB=$WORK/b mC=$WORK/c mF=$WORK/f pfx=$PFX t_down t_up t0 t_part
	t_part=$(now)
	echo "-- 1, 3, 4: RGW stopped for $OUTAGE_SEC s"
	om "$mA" "$pfx-a" "${S3O[@]}"
	prepare_seen "$mA"
	om "$mB" "$pfx-b" "${S3O[@]}" --fsync-timeout 3
	python3 "$PY" fsync1 "$mB/pre" 300000 "$WORK/b.pre" "$WORK/b.pre.ref" && grep -q ^OK "$WORK/b.pre"
	om "$mC" "$pfx-c" "${S3O[@]}"
	mkdir -p "$WORK/cref"
	for i in 1 2 3 4; do
		head -c $((i * 400000)) /dev/urandom >"$WORK/cref/s$i"
		dd if="$WORK/cref/s$i" of="$mC/s$i" bs=64k conv=fsync status=none
	done
	for i in $(seq -w 1 8); do head -c 300000 /dev/urandom >"$WORK/cref/u$i"; done
	head -c 500000 /dev/urandom >"$WORK/cref/p1"
	cp "$WORK/cref/p1" "$mC/p1" # written before the outage, never fsynced
	# 1: a log file on mount F: its first 500,000 bytes (a partial chunk) fsynced before the
	# outage, 20 MiB appended and fsynced during it.  The 500,000 bytes were written before the
	# outage, by an earlier mount, so that the append must read that chunk from the store (the
	# daemon's cache is cold): it waits for the server instead of failing
	om "$mF" "$pfx-f" "${S3O[@]}"
	head -c 500000 /dev/urandom >"$WORK/log.ref"
	head -c $((20 << 20)) /dev/urandom >"$WORK/log.more"
	dd if="$WORK/log.ref" of="$mF/log" bs=500000 conv=fsync status=none
	cat "$WORK/log.more" >>"$WORK/log.ref"
	head -c 100000 /dev/urandom >"$WORK/cold.ref" # read during the outage, not in the cache
	dd if="$WORK/cold.ref" of="$mF/cold" bs=100000 conv=fsync status=none
	# 3,000 names, so that after the remount most of their metadata is in SSTable blocks
	# nobody has read: a lookup of one during the outage reads the store
	python3 -c 'import os, sys
os.mkdir(sys.argv[1])
for i in range(3000): open("%s/f%05d" % (sys.argv[1], i), "w").close()' "$mF/big"
	ou "$mF"
	om "$mF" "$pfx-f" "${S3O[@]}"
	prepare_seen "$mF"
	loop_start "$mA"
	sampler "$mA" "$WORK/a.samples"
	loop_wait_acks "$mA" 10
	echo "   setup $(since "$t_s3") s"
	srv_stop
	t_down=$(now)
	sleep 1
	timed_reads "$mA" "outage +1 s"
	(
		t0=$(now)
		rc=0
		dd if="$WORK/log.more" of="$mF/log" bs=1M oflag=append conv=notrunc,fsync status=none 2>"$WORK/append.err" || rc=$?
		echo "$rc $t0 $(now)" >"$WORK/append.rc"
	) &
	local app=$!
	BGPIDS+=("$app")
	# 1: a lookup of a name F's daemon has not seen must not hold up F's other requests
	# while it waits for the store (its answer is an error or, once the store is back, right)
	(
		rc=0
		stat -c %s "$mF/big/f02500" >"$WORK/bigstat.out" 2>&1 || rc=$?
		echo "$rc $(now)" >"$WORK/bigstat.rc"
	) &
	BGPIDS+=("$!")
	# 1: a read of a file F's daemon has not cached waits for the server, then is right
	(
		rc=0
		cat "$mF/cold" >"$WORK/cold.got" 2>"$WORK/cold.err" || rc=$?
		echo "$rc $(now)" >"$WORK/cold.rc"
	) &
	BGPIDS+=("$!")
	# 3: fsync with --fsync-timeout 3, right at the start of the outage
	python3 "$PY" fsync1 "$mB/t1" 200000 "$WORK/b.t1" "$WORK/b.t1.ref" &
	local bt1=$!
	# 4: writes without fsync during the outage, a fsync that waits, then kill -9
	t0=$(now)
	for i in $(seq -w 1 8); do timeout 30 cp "$WORK/cref/u$i" "$mC/u$i" || fail "cp to $mC/u$i during the outage: $?"; done
	echo "   4: 8 files written (no fsync) on the mount to be killed, $(since "$t0") s"
	python3 "$PY" fsync1 "$mC/w" 100000 "$WORK/c.w" "$WORK/c.w.ref" &
	local cw=$!
	wait "$bt1"
	echo "   3: fsync at the start of the outage: $(cat "$WORK/b.t1")"
	sleep_until "$(awk -v t="$t_down" 'BEGIN{printf "%.6f", t + 8}')"
	kill -9 "$(cat "$mC.pid")"
	mw_wait_exit "$mC.pid"
	rm -f "$mC.pid"
	wait "$cw" || true
	echo "   4: daemon killed $(since "$t_down") s into the outage; the waiting fsync got: $(cat "$WORK/c.w")"
	timed_reads "$mA" "outage +$(since "$t_down" | cut -d. -f1) s"
	timed_reads "$mF" "F (appending to a file) outage +$(since "$t_down" | cut -d. -f1) s"
	sleep_until "$(awk -v t="$t_down" 'BEGIN{printf "%.6f", t + 18}')"
	# 3: once more, well into the outage (the engine of B has been failing for a while)
	echo "   3: B during the outage: outage_since=$(stat_of "$mB" outage_since) commit_retries=$(stat_of "$mB" commit_retries)"
	python3 "$PY" fsync1 "$mB/t2" 200000 "$WORK/b.t2" "$WORK/b.t2.ref"
	echo "   3: fsync $(since "$t_down" | cut -d. -f1) s into the outage: $(cat "$WORK/b.t2")"
	for t in b.t1 b.t2; do
		read -r res what _ <"$WORK/$t" || true
		[ "$res $what" = "ERR fsync" ] || fail "3: $t: expected fsync to fail with EIO, got: $(cat "$WORK/$t")"
		[ "$(awk '{print $3}' "$WORK/$t")" = EIO ] || fail "3: $t: expected EIO, got: $(cat "$WORK/$t")"
		awk -v e="$(awk '{print $4}' "$WORK/$t")" 'BEGIN{exit !(e >= 2.8 && e <= 5)}' ||
			fail "3: $t: fsync gave up after $(awk '{print $4}' "$WORK/$t") s, not about 3 s"
	done
	[ "$(stat_of "$mB" sticky_error)" = 0 ] || fail "3: B's writer stopped: sticky_error $(stat_of "$mB" sticky_error)"
	[ "$(stat_of "$mB" sync_timeouts)" -ge 2 ] || fail "3: sync_timeouts $(stat_of "$mB" sync_timeouts)"
	echo "x" >"$mB/written-during" || fail "3: a write on B after the timeouts failed"
	while [ "$(awk -v t="$t_down" -v n="$(now)" -v o="$OUTAGE_SEC" 'BEGIN{print (n + 10 < t + o)}')" = 1 ]; do
		sleep 10
		timed_reads "$mA" "outage +$(since "$t_down" | cut -d. -f1) s"
	done
	written_read "$mA" "outage +$(since "$t_down" | cut -d. -f1) s"
	echo "   daemon A during the outage: $(grep VmRSS "/proc/$(cat "$mA.pid")/status")"
	sleep_until "$(awk -v t="$t_down" -v o="$OUTAGE_SEC" 'BEGIN{printf "%.6f", t + o}')"
	t_up=$(now)
	srv_start
	loop_wait_acks "$mA" "$(($(grep -c '^OK' "$mA.loop") + 5))"
	wait_recovered "$mA"
	sleep 1
	loop_stop "$mA"
	kill "$SAMP"
	samples_summary "$WORK/a.samples" "$t_down" "$t_up"
	python3 "$PY" check "$mA.loop" "$t_down" "$t_up" || fail "1: the create+fsync loop (records above)"
	[ "$(stat_of "$mA" outages)" -ge 1 ] || fail "1: outages is $(stat_of "$mA" outages)"
	echo "   1: A after: outages=$(stat_of "$mA" outages) commit_retries=$(stat_of "$mA" commit_retries) outage_since=$(stat_of "$mA" outage_since)"
	grep -E "engine: (group .* could not be committed|the store takes commits again)" "$mA.log" | sed 's/^/   log: /'
	ou "$mA"
	om "$mA" "$pfx-a" "${S3O[@]}"
	python3 "$PY" verify "$mA.loop" "$mA/loop" || fail "1: acknowledged files lost or damaged"
	cmp "$mA/seen/cached" "$WORK/cached.ref"
	echo "   1: done $(since "$t_part") s"

	# 3: B's pending data commits by itself once the server is back; B is not fenced
	wait_recovered "$mB"
	python3 "$PY" fsync1 "$mB/after" 100000 "$WORK/b.after" "$WORK/b.after.ref"
	grep -q ^OK "$WORK/b.after" || fail "3: fsync on B after the outage: $(cat "$WORK/b.after")"
	ou "$mB"
	om "$mB" "$pfx-b" "${S3O[@]}"
	for f in pre t1 t2 after; do cmp "$mB/$f" "$WORK/b.$f.ref" || fail "3: $f differs after the remount"; done
	[ "$(cat "$mB/written-during")" = x ] || fail "3: written-during lost"
	ou "$mB"
	echo "   3: the fsyncs that gave up committed later, B was not fenced; done $(since "$t_part") s"

	# 1: the append that rode the outage: its fsync returns 0 after the server is back (no
	# --fsync-timeout: it waits), and the file is byte-exact after a remount
	for _ in $(seq 1200); do [ -s "$WORK/append.rc" ] && break; sleep 0.1; done
	if [ ! -s "$WORK/append.rc" ]; then
		rm -f "$mF.stacks"
		for p in $(pgrep -f "of=$mF/log"); do
			echo "   dd $p: state $(awk '{print $3}' "/proc/$p/stat"), kernel stack:"
			sed 's/^/      /' "/proc/$p/stack" 2>/dev/null | head -n 15
		done
		stuck "$mF" "1: the append+fsync still hangs 120 s after the server was back"
		fail "1: the append+fsync still hangs 120 s after the server was back"
	fi
	wait "$app" || true
	local arc at0 at1
	for _ in $(seq 600); do [ -s "$WORK/bigstat.rc" ] && break; sleep 0.1; done
	if [ -s "$WORK/bigstat.rc" ]; then
		echo "   1: a lookup of an unseen name during the outage: exit $(cut -d' ' -f1 "$WORK/bigstat.rc"), $(head -c 200 "$WORK/bigstat.out")"
	else
		LATE_FAILS+=("1: a lookup of an unseen name started during the outage still hangs 60 s after the server was back")
	fi
	for _ in $(seq 600); do [ -s "$WORK/cold.rc" ] && break; sleep 0.1; done
	if [ ! -s "$WORK/cold.rc" ]; then
		LATE_FAILS+=("1: a read of an uncached file started during the outage still hangs 60 s after the server was back")
	else
		read -r crc ct1 <"$WORK/cold.rc"
		if [ "$crc" = 0 ] && cmp -s "$WORK/cold.got" "$WORK/cold.ref"; then
			echo "   1: a read of an uncached file waited for the server: right, $(awk -v a="$ct1" -v u="$t_up" 'BEGIN{printf "%.1f", a - u}') s after it was back"
		else
			LATE_FAILS+=("1: a read of an uncached file during the outage: exit $crc, $(cat "$WORK/cold.err"), $(stat -c %s "$WORK/cold.got") bytes")
		fi
	fi
	read -r arc at0 at1 <"$WORK/append.rc"
	if [ "$arc" = 0 ]; then
		echo "   1: appending 20 MiB + fsync during the outage returned 0 $(awk -v a="$at1" -v u="$t_up" 'BEGIN{printf "%.1f", a - u}') s after the server was back"
	else
		echo "   1: FAIL (collected): appending 20 MiB + fsync during the outage: exit $arc after $(awk -v a="$at0" -v b="$at1" 'BEGIN{printf "%.1f", b - a}') s: $(cat "$WORK/append.err")"
		LATE_FAILS+=("1: appending to a file (its partial last chunk committed before the outage) + fsync during the outage failed: $(cat "$WORK/append.err")")
	fi
	ou "$mF"
	om "$mF" "$pfx-f" "${S3O[@]}"
	if ! cmp -s "$mF/log" "$WORK/log.ref"; then
		python3 "$PY" compare "$mF/log" "$WORK/log.ref" | tee "$WORK/compare.out"
		LATE_FAILS+=("1: after a remount, the log file appended during the outage is not what was written: $(tail -n 1 "$WORK/compare.out")")
	else
		echo "   1: the log file appended during the outage is byte-exact after a remount"
	fi
	ou "$mF"

	# 4: the killed mount: lazy unmount, fsck, remount
	fusermount3 -uz "$mC"
	ofsck "$pfx-c" "${S3O[@]}" --deep
	om "$mC" "$pfx-c" "${S3O[@]}"
	ofsck "$pfx-c" "${S3O[@]}"
	for i in 1 2 3 4; do cmp "$mC/s$i" "$WORK/cref/s$i" || fail "4: fsynced s$i lost or damaged"; done
	local present=0 gap=0 sz
	for f in p1 u1 u2 u3 u4 u5 u6 u7 u8; do
		if [ -e "$mC/$f" ]; then
			[ "$gap" = 0 ] || fail "4: $f survived but a file created before it did not"
			sz=$(stat -c %s "$mC/$f")
			cmp -s -n "$sz" "$mC/$f" "$WORK/cref/$f" || fail "4: unsynced $f is not a prefix of what was written"
			present=$((present + 1))
			echo "   4: unsynced $f: $sz of $(stat -c %s "$WORK/cref/$f") bytes"
		else
			gap=1
		fi
	done
	if grep -q ^OK "$WORK/c.w"; then cmp "$mC/w" "$WORK/c.w.ref" || fail "4: acknowledged w lost"; fi
	if [ -e "$mC/w" ]; then cmp -s -n "$(stat -c %s "$mC/w")" "$mC/w" "$WORK/c.w.ref" || fail "4: w is not a prefix"; fi
	echo "   4: fsynced files intact, $present of 9 unsynced files survived (a prefix); done $(since "$t_part") s"
	ou "$mC"
	echo "   RGW outage (cases 1, 3, 4): $(since "$t_part") s"
}

# 1: a 200 MiB sequential write (mount D), paced at 20 MiB/s so that part of it is written
# during the outage, across a DD_OUTAGE_SEC outage
s3_dd() {
	local mD=$WORK/d pfx=$PFX t_down t_up t0 t_part
	t_part=$(now)

	echo "-- 1: a 200 MiB sequential write across a $DD_OUTAGE_SEC s outage"
	head -c $((200 << 20)) /dev/urandom >"$WORK/big.ref"
	om "$mD" "$pfx-d" "${S3O[@]}"
	prepare_seen "$mD"
	sampler "$mD" "$WORK/dd.samples"
	t0=$(now)
	(
		set -o pipefail
		rc=0
		python3 "$PY" pace "$WORK/big.ref" $((20 << 20)) |
			dd of="$mD/big" bs=1M iflag=fullblock conv=fsync status=none 2>"$WORK/dd.err" || rc=$?
		echo "$rc" >"$WORK/dd.rc"
		now >"$WORK/dd.end"
	) &
	local ddp=$!
	BGPIDS+=("$ddp")
	sleep 3
	srv_stop
	t_down=$(now)
	sleep 2
	timed_reads "$mD" "outage +2 s"
	sleep_until "$(awk -v t="$t_down" -v o="$DD_OUTAGE_SEC" 'BEGIN{printf "%.6f", t + o}')"
	[ ! -e "$WORK/dd.end" ] || fail "dd finished during the outage (rc $(cat "$WORK/dd.rc"))"
	echo "   dd has written $(($(timeout 5 stat -c %s "$mD/big" || echo -1) >> 20)) MiB by the end of the outage; daemon $(grep VmRSS "/proc/$(cat "$mD.pid")/status")"
	t_up=$(now)
	srv_start
	wait "$ddp" || true
	if [ "$(cat "$WORK/dd.rc")" != 0 ]; then
		echo "   FAIL (collected): dd across the outage exited with $(cat "$WORK/dd.rc"): $(cat "$WORK/dd.err")"
		LATE_FAILS+=("1: dd (200 MiB, conv=fsync) across the outage exited with $(cat "$WORK/dd.rc"): $(cat "$WORK/dd.err")")
	fi
	echo "   dd (200 MiB, conv=fsync) took $(awk -v a="$t0" -v b="$(cat "$WORK/dd.end")" 'BEGIN{printf "%.1f", b - a}') s, returned $(awk -v a="$t_up" -v b="$(cat "$WORK/dd.end")" 'BEGIN{printf "%.1f", b - a}') s after the server was back"
	kill "$SAMP"
	awk -v d="$t_down" -v u="$t_up" '$1 >= d && $1 <= u && $2 != 0 {o++} END {print "   stats: outage_since set in " o+0 " samples during the outage"}' "$WORK/dd.samples"
	wait_recovered "$mD"
	ou "$mD"
	om "$mD" "$pfx-d" "${S3O[@]}"
	if [ "$(sha256sum <"$mD/big")" != "$(sha256sum <"$WORK/big.ref")" ]; then
		python3 "$PY" compare "$mD/big" "$WORK/big.ref"
		fail "the 200 MiB file differs after the remount"
	fi
	ou "$mD"
	rm -f "$WORK/big.ref"
	echo "   1: the 200 MiB file is byte-exact after the remount; done $(since "$t_part") s"
}

# 2: the fault proxy in front of RGW answers 503 SlowDown to every request for STORM_SEC
# (mount E, through the proxy): the checks of case 1
s3_storm() {
	local mE=$WORK/e pfx=$PFX t_down t_up t_part px
	t_part=$(now)

	echo "-- 2: 503 SlowDown to every request for $STORM_SEC s (fault proxy)"
	exec {PXFD}> >(exec python3 "$PROXY_PY" --upstream "$S3_ENDPOINT" >"$WORK/proxy.out" 2>"$WORK/proxy.log")
	for _ in $(seq 100); do grep -q '^PORT' "$WORK/proxy.out" 2>/dev/null && break; sleep 0.1; done
	px=http://127.0.0.1:$(awk '/^PORT/ {print $2}' "$WORK/proxy.out")
	[ "$px" != http://127.0.0.1: ] || fail "the fault proxy did not start: $(cat "$WORK/proxy.log")"
	om "$mE" "$pfx-e" --endpoint "$px" --region "${S3_REGION:-us-east-1}"
	prepare_seen "$mE"
	loop_start "$mE"
	sampler "$mE" "$WORK/e.samples"
	loop_wait_acks "$mE" 10
	t_up=$(awk -v n="$(now)" -v s="$STORM_SEC" 'BEGIN{printf "%.6f", n + s}')
	curl -sf "$px/__faultproxy/arm?fault=503&seconds=$STORM_SEC" >/dev/null || fail "arming the proxy"
	t_down=$(now)
	echo "   storm from $t_down to $t_up"
	sleep 1
	timed_reads "$mE" "storm +1 s"
	while [ "$(awk -v u="$t_up" -v n="$(now)" 'BEGIN{print (n + 6 < u)}')" = 1 ]; do
		sleep 5
		timed_reads "$mE" "storm +$(since "$t_down" | cut -d. -f1) s"
	done
	written_read "$mE" "storm +$(since "$t_down" | cut -d. -f1) s"
	sleep_until "$t_up"
	echo "   proxy during the storm: $(curl -s "$px/__faultproxy/stats")"
	loop_wait_acks "$mE" "$(($(grep -c '^OK' "$mE.loop") + 5))"
	wait_recovered "$mE"
	sleep 1
	loop_stop "$mE"
	kill "$SAMP"
	echo "   proxy after: $(curl -s "$px/__faultproxy/stats")"
	samples_summary "$WORK/e.samples" "$t_down" "$t_up"
	python3 "$PY" check "$mE.loop" "$t_down" "$t_up" || fail "2: the create+fsync loop (records above)"
	[ "$(stat_of "$mE" outages)" -ge 1 ] || fail "2: outages is $(stat_of "$mE" outages)"
	grep -E "engine: (group .* could not be committed|the store takes commits again)" "$mE.log" | sed 's/^/   log: /'
	ou "$mE"
	om "$mE" "$pfx-e" "${S3O[@]}"
	python3 "$PY" verify "$mE.loop" "$mE/loop" || fail "2: acknowledged files lost or damaged"
	ou "$mE"
	ofsck "$pfx-e" "${S3O[@]}"
	echo "   503 storm (case 2): $(since "$t_part") s"
}

s3_part() {
	local t_s3
	t_s3=$(now)
	if [[ ! $S3_ENDPOINT =~ ^http://127\.0\.0\.1:([0-9]+)/?$ ]]; then
		echo "SKIP: S3_ENDPOINT $S3_ENDPOINT is not a tools/s3-server.sh server on 127.0.0.1"
		exit 77
	fi
	export RGWPORT=${BASH_REMATCH[1]}
	"$SRV" status 2>/dev/null || fail "the S3 server does not answer before the test"
	[ -f "${CEPH_DIR:-/tmp/memwalfs-rgw}/started-by-memwalfs" ] || {
		echo "SKIP: the S3 server was not started by tools/s3-server.sh, which cannot stop it"
		exit 77
	}
	head -c 1000000 /dev/urandom >"$WORK/cached.ref"
	head -c 700000 /dev/urandom >"$WORK/warm.ref"
	for part in ${OUTAGE_PARTS:-main dd storm}; do "s3_$part"; done
	late_fails
	echo "outage (s3): ok, $(since "$t_s3") s"
}

# ---------------------------------------------------------------------------------------
# local: a full disk
# ---------------------------------------------------------------------------------------
# first_write_after_free MNT NAME OUT WHAT: right after space was freed, a create+write+fsync
# of MNT/NAME succeeds (docs/WAL.md: a write while the store is full asks the committer for one
# more attempt at once). If it gets ENOSPC, that is collected (LATE_FAILS) and the write is
# tried again every 0.5 s for 10 s (the committer's backoff is at most 5 s): the mount must
# take writes again by itself.
first_write_after_free() {
	local t0
	t0=$(now)
	python3 "$PY" fsync1 "$1/$2" 100000 "$WORK/$3" "$WORK/$3.ref" || true
	if grep -q ^OK "$WORK/$3"; then
		echo "   5: write+fsync right after $4: $(cat "$WORK/$3") ($(since "$t0") s)"
		return 0
	fi
	echo "   5: FAIL (collected): write+fsync right after $4: $(cat "$WORK/$3")"
	LATE_FAILS+=("5: the first write+fsync right after $4 got $(cat "$WORK/$3"); MNT.late=$1.late-$3")
	for _ in $(seq 20); do
		sleep 0.5
		python3 "$PY" fsync1 "$1/$2" 100000 "$WORK/$3" "$WORK/$3.ref" || true
		if grep -q ^OK "$WORK/$3"; then
			echo "a write+fsync succeeded $(since "$t0") s after $4" >"$1.late-$3"
			echo "   5: write+fsync after $4 succeeded $(since "$t0") s later"
			return 0
		fi
	done
	fail "5: no write+fsync succeeded within 10 s after $4: $(cat "$WORK/$3")"
}

local_part() {
	local m=$WORK/l t0 st
	TMPFS=$WORK/tmpfs
	mkdir -p "$TMPFS"
	mount -t tmpfs -o size=64m tmpfs "$TMPFS" || { echo "SKIP: cannot mount a tmpfs"; TMPFS=""; exit 77; }
	head -c $((6 << 20)) /dev/urandom >"$TMPFS/filler" # deleted later to free space
	local store=$TMPFS/store
	om "$m" "$store"
	mkdir -p "$m/seen"
	head -c 1000000 /dev/urandom >"$WORK/cached.ref"
	head -c 700000 /dev/urandom >"$WORK/warm.ref"
	prepare_seen "$m"
	echo "-- 5: fill the 64 MiB tmpfs through the mount"
	t0=$(now)
	python3 "$PY" fill "$m/fill" "$m.fill" $((1 << 20)) 200
	st=$(tail -n 1 "$m.fill")
	echo "   $(grep -c '^OK' "$m.fill") files of 1 MiB acknowledged in $(since "$t0") s; then: $st"
	echo "   tmpfs: $(df -h --output=used,avail "$TMPFS" | tail -n 1)"
	case "$st" in
	"ERR "*" ENOSPC "*) echo "   5: ENOSPC from $(echo "$st" | awk '{print $3}')" ;;
	*) fail "5: filling the store did not end with ENOSPC: $st" ;;
	esac
	# while it is full: at once ENOSPC, reads still work
	t0=$(now)
	python3 "$PY" fsync1 "$m/while-full" 100000 "$WORK/full1" "$WORK/full1.ref" || true
	echo "   5: a write+fsync while full: $(cat "$WORK/full1") (in $(since "$t0") s)"
	grep -q "^ERR .* ENOSPC" "$WORK/full1" || fail "5: a write+fsync while full: $(cat "$WORK/full1")"
	awk -v e="$(since "$t0")" 'BEGIN{exit !(e < 2)}' || fail "5: ENOSPC while full took $(since "$t0") s"
	timed_reads "$m" "while full"
	written_read "$m" "while full"
	[ "$(stat_of "$m" outage_error)" = -28 ] || fail "5: outage_error $(stat_of "$m" outage_error), not -ENOSPC"
	echo "   5: stats while full: outage_since=$(stat_of "$m" outage_since) outage_error=$(stat_of "$m" outage_error) sticky_error=$(stat_of "$m" sticky_error)"
	# appending to an existing file while full: the error comes with the write or the close
	t0=$(now)
	if timeout 10 dd if="$WORK/cached.ref" of="$m/seen/small01" bs=64k oflag=append conv=notrunc \
		status=none 2>"$WORK/append.err"; then
		fail "5: appending 1 MB while full succeeded"
	fi
	grep -q "No space left" "$WORK/append.err" || fail "5: appending while full: $(cat "$WORK/append.err")"
	echo "   5: appending while full: $(cat "$WORK/append.err") ($(since "$t0") s)"
	if t0=$(now) && timeout 10 mkdir "$m/newdir" 2>"$WORK/mkdir.err"; then
		echo "   5: mkdir while full succeeded ($(since "$t0") s)"
	else
		echo "   5: mkdir while full: $(cat "$WORK/mkdir.err") ($(since "$t0") s)"
		grep -q "No space left" "$WORK/mkdir.err" || fail "5: mkdir while full: $(cat "$WORK/mkdir.err")"
	fi

	echo "-- 5: a file on the tmpfs deleted: the same mount writes again"
	rm "$TMPFS/filler"
	first_write_after_free "$m" after-rm rm1 "the delete"
	python3 "$PY" fill "$m/fill" "$m.fill" $((1 << 20)) 200
	st=$(tail -n 1 "$m.fill")
	echo "   5: filled again: $(grep -c '^OK' "$m.fill") files acknowledged in all; then: $st"
	case "$st" in "ERR "*" ENOSPC "*) ;; *) fail "5: the second fill did not end with ENOSPC: $st" ;; esac

	echo "-- 5: the tmpfs grown to 256 MiB: the same mount writes again"
	mount -o remount,size=256m "$TMPFS"
	first_write_after_free "$m" after-grow grow1 "growing the tmpfs"
	local n0
	n0=$(grep -c '^OK' "$m.fill")
	python3 "$PY" fill "$m/fill" "$m.fill" $((1 << 20)) 30
	[ "$(grep -c '^OK' "$m.fill")" = $((n0 + 30)) ] || fail "5: writing after growing: $(tail -n 1 "$m.fill")"
	[ "$(stat_of "$m" sticky_error)" = 0 ] || fail "5: sticky_error $(stat_of "$m" sticky_error)"
	[ "$(stat_of "$m" outage_since)" = 0 ] || fail "5: outage_since $(stat_of "$m" outage_since) after the store took commits again"
	echo "   5: stats: outages=$(stat_of "$m" outages) commit_retries=$(stat_of "$m" commit_retries)"
	grep -E "engine: (group .* could not be committed|the store takes commits again)" "$m.log" | sed 's/^/   log: /'
	ou "$m"
	om "$m" "$store"
	python3 "$PY" verify "$m.fill" "$m/fill" || fail "5: acknowledged files lost or damaged"
	for f in after-rm:rm1 after-grow:grow1; do cmp "$m/${f%:*}" "$WORK/${f#*:}.ref" || fail "5: ${f%:*} differs after the remount"; done
	cmp "$m/seen/cached" "$WORK/cached.ref"
	# the append refused while full: the old content, and perhaps a prefix of what was appended
	head -c 3 "$m/seen/small01" | cmp -s - <(printf '01\n') || fail "5: small01 lost its content"
	local sz
	sz=$(stat -c %s "$m/seen/small01")
	tail -c +4 "$m/seen/small01" | cmp -s -n $((sz - 3)) - "$WORK/cached.ref" ||
		fail "5: small01 holds something else than its content and a prefix of the append"
	echo "   5: small01 after the remount: $sz bytes (3 before the refused append)"
	# the files whose fsync failed: absent, or a prefix of what was written
	local name
	for name in $(awk '$1 == "ERR" {print $2}' "$m.fill"); do
		if [ -e "$m/fill/$name" ]; then
			echo "   5: $name (not acknowledged) has $(stat -c %s "$m/fill/$name") bytes after the remount"
		fi
	done
	ou "$m"
	ofsck "$store"
	late_fails
	echo "outage (local): ok, $(since "$T_START") s"
}

if [ "$BACKEND" = s3 ]; then s3_part; else local_part; fi
