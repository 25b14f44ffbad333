#!/usr/bin/env bash
# tests/fs/wiped.sh MEMWALFS BACKEND - a store that loses its objects under a live mount
# (issue 36, part 2; engine/check/watch.c): the mount notices within a bound, stops acknowledging,
# says so, and what remains is salvaged.
#
# A writer (wiped_writer.py) creates files and fsyncs each one every 0.2 s, logging which
# fsyncs were acknowledged; meanwhile another process deletes objects of the store the way
# `aws s3 rm --recursive` does (list, then delete what was listed) with memwalfs objects:
#  1. every object: the first failed fsync comes at most BOUND s after the deletion ended,
#     no fsync after it is acknowledged, `memwalfs stats` says store_lost 1 with a line in
#     words, the Prometheus endpoint memwalfs_store_lost 1, the log names the missing object,
#     `memwalfs sync` and `memwalfs umount` exit non-zero with a message; then
#     `memwalfs fsck --salvage` makes a store that mounts, and every file whose write started
#     after the deletion's listing and whose fsync was acknowledged is byte-exact;
#  2. only pack/ (of a mount that wrote files with packs): the same detection, refusals and
#     salvage, which names the files whose data went with the packs;
#  3. only sst/ (of a store whose first mount flushed at unmount): the same; the salvage says
#     the table is lost;
#  4. every object, then kill -9 of the daemon before it noticed (3 fsyncs acknowledged after
#     the deletion): a plain mount is refused with a pointer to the salvage (it would fence
#     over what remains), and the salvage recovers the files as in 1.
# BOUND (20 s) is the watch's interval (5 s, opts.store_check_ms) plus its listings, with
# room for a loaded machine.  The seed of the writer's file contents is printed;
# MEMWALFS_SEED=N replays them.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
BOUND=20
seed=${MEMWALFS_SEED:-$RANDOM}
echo "seed $seed (MEMWALFS_SEED=$seed replays the file contents)"
BASE=$STORE
m=$WORK/m
fail() {
	echo "FAIL: $*"
	mw_log_tail "$m" 30
	exit 1
}
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')

# wipe [PREFIX]: list the objects (under PREFIX), then delete what was listed; prints the
# time the listing ended
wipe() {
	"$MW" objects ls "${STORE_OPTS[@]}" "$STORE" ${1:+"$1"} | awk '{print $2}' >"$WORK/keys"
	date +%s.%N
	[ -s "$WORK/keys" ] || { echo "FAIL: nothing to delete under '${1:-}'" >&2; return 1; }
	xargs -n 200 "$MW" objects rm "${STORE_OPTS[@]}" "$STORE" <"$WORK/keys" >/dev/null
}

# wait_acks LOG N: wait (up to 60 s) until the writer's log holds N acknowledged fsyncs
wait_acks() {
	local n
	for _ in $(seq 600); do
		n=$(grep -c '^ack ' "$1" 2>/dev/null) || n=0
		[ "$n" -ge "$2" ] && return 0
		sleep 0.1
	done
	fail "the writer did not get $2 fsyncs acknowledged within 60 s"
}

# detect CASE PREFIX: run the writer, delete (PREFIX), check the detection and the refusals
detect() {
	local name=$1 prefix=$2 log=$WORK/log-$1 listed ended first pid
	rm -f "$log" "$m.log"
	mw_mount_logged "$m" --metrics-addr "127.0.0.1:$port"
	python3 "$here/wiped_writer.py" "$m" "$log" "$seed" 0.2 &
	pid=$!
	wait_acks "$log" 8
	listed=$(wipe "$prefix") || fail "$name: deleting failed"
	ended=$(date +%s.%N)
	echo "$listed" >"$WORK/listed-$name"
	for _ in $(seq $((BOUND * 10 + 100))); do
		grep -q '^fail ' "$log" && break
		sleep 0.1
	done
	first=$(awk '$1 == "fail" {print $3; exit}' "$log")
	[ -n "$first" ] || fail "$name: no fsync failed within $((BOUND + 10)) s of the deletion"
	wait "$pid" || fail "$name: the writer failed"
	local delay
	delay=$(echo "$first - $ended" | bc)
	local late
	late=$(awk -v t="$ended" '$1 == "ack" && $3 > t' "$log" | wc -l)
	echo "   $name: deleted $(wc -l <"$WORK/keys") objects; the first fsync failed $delay s after" \
		"(bound $BOUND s); $(grep -c '^ack ' "$log") acknowledged before it, $late of them" \
		"after the deletion ended"
	(($(echo "$delay <= $BOUND" | bc))) || fail "$name: the loss was noticed after $delay s"
	# nothing acknowledged after the first failure
	awk '$1 == "fail" {f = 1} $1 == "ack" && f {print; bad = 1} END {exit bad}' "$log" ||
		fail "$name: an fsync after the first failure was acknowledged"
	"$MW" stats --raw "$m" >"$WORK/stats" || fail "$name: memwalfs stats --raw failed"
	grep -q '^store_lost 1$' "$WORK/stats" || fail "$name: stats do not say store_lost 1"
	grep '^# store lost: ' "$WORK/stats" >"$WORK/words" || fail "$name: stats do not say it in words"
	echo "   stats: $(cat "$WORK/words")"
	"$MW" stats "$m" >"$WORK/summary" || fail "$name: memwalfs stats failed"
	grep -q '^health:  STOPPED: the store lost objects (' "$WORK/summary" ||
		{ cat "$WORK/summary"; fail "$name: the summary does not say the store lost objects"; }
	curl -sf "http://127.0.0.1:$port/metrics" >"$WORK/metrics" || fail "$name: no metrics"
	grep -q '^memwalfs_store_lost 1$' "$WORK/metrics" || fail "$name: metrics lack memwalfs_store_lost 1"
	grep -q 'THE STORE LOST OBJECTS' "$m.log" || fail "$name: the log does not say it"
	if "$MW" sync "$m" 2>"$WORK/err"; then fail "$name: memwalfs sync succeeded"; fi
	grep -q 'lost objects' "$WORK/err" || fail "$name: memwalfs sync said: $(cat "$WORK/err")"
	if "$MW" umount "$m" 2>"$WORK/err"; then fail "$name: memwalfs umount succeeded"; fi
	grep -q 'lost objects' "$WORK/err" || fail "$name: memwalfs umount said: $(cat "$WORK/err")"
	echo "   umount: $(head -c 200 "$WORK/err")..."
	mw_wait_exit "$m.pid"
}

# salvaged CASE: fsck --salvage, then a mount where every file whose write started after the
# deletion's listing and whose fsync was acknowledged is byte-exact; prints what salvage said
salvaged() {
	local name=$1
	local rc=0
	"$MW" fsck --salvage "${STORE_OPTS[@]}" "$STORE" >"$WORK/salvage" 2>&1 || rc=$?
	[ "$rc" = 0 ] || { cat "$WORK/salvage"; fail "$name: fsck --salvage exited $rc"; }
	grep -E '^(salvage|LOST engine|memwalfs fsck|filesystem|engine)' "$WORK/salvage" | sed 's/^/   /'
	echo "   ($(grep -c '^LOST fs' "$WORK/salvage") LOST lines about the tree)"
	mw_mount_logged "$m"
	python3 - "$here" "$WORK/log-$name" "$(cat "$WORK/listed-$name")" "$seed" "$m" <<'PY' ||
import os, sys
sys.path.insert(0, sys.argv[1])
from wiped_writer import content
log, listed, seed, mnt = sys.argv[2], float(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
start, acked = {}, set()
for line in open(log):
    w = line.split()
    if w[0] == "start":
        start[int(w[1])] = float(w[2])
    elif w[0] == "ack":
        acked.add(int(w[1]))
want = sorted(n for n in acked if start[n] > listed)
if not want:
    sys.exit("no fsync acknowledged after the deletion's listing: the check proves nothing")
bad = []
for n in want:
    p = os.path.join(mnt, "f.%d" % n)
    try:
        ok = open(p, "rb").read() == content(seed, n)
    except OSError as e:
        ok = False
    if not ok:
        bad.append(n)
if bad:
    sys.exit("acknowledged after the listing, not recovered byte-exact: %s" % bad)
older = sorted(n for n in acked if start[n] <= listed)
print("   salvaged: all %d files acknowledged after the deletion's listing are byte-exact "
      "(%d acknowledged before it: with the deleted objects)" % (len(want), len(older)))
PY
		fail "$name: after the salvage"
	mw_umount "$m" || fail "$name: the unmount after the salvage failed"
	mw_fsck || fail "$name: fsck after the salvaged mount"
}

echo "-- 1. every object deleted under a writer"
STORE=$BASE-all
detect all ""
salvaged all

echo "-- 2. only pack/ deleted"
STORE=$BASE-pack
detect pack pack/
salvaged pack
grep -q '^LOST fs inode .*bytes of its data lost' "$WORK/salvage" ||
	fail "pack: the salvage did not name the files whose data went with pack/"

echo "-- 3. only sst/ deleted (the first mount flushed at unmount)"
STORE=$BASE-sst
mw_mount "$m"
head -c 100000 /dev/urandom >"$m/before"
mw_umount "$m"
detect sst sst/
salvaged sst
grep -q '^LOST engine: 1 SSTables' "$WORK/salvage" || fail "sst: the salvage did not say a table was lost"

echo "-- 4. every object deleted, then kill -9 of the daemon before it noticed"
STORE=$BASE-kill
rm -f "$WORK/log-kill" "$m.log"
mw_mount_logged "$m"
python3 "$here/wiped_writer.py" "$m" "$WORK/log-kill" "$seed" 0.2 &
pid=$!
wait_acks "$WORK/log-kill" 8
wipe "" >"$WORK/listed-kill" || fail "kill: deleting failed"
n0=$(grep -c '^ack ' "$WORK/log-kill")
wait_acks "$WORK/log-kill" $((n0 + 3)) # acknowledged after the deletion, before any check
kill -9 "$(cat "$m.pid")"
mw_wait_exit "$m.pid"
wait "$pid" || true
fusermount3 -uz "$m" 2>/dev/null || true
# a plain mount would fence over what remains (and GC delete it): refused, pointing at salvage
if "$MW" mount "${STORE_OPTS[@]}" "$STORE" "$m" 2>"$WORK/err"; then
	fail "kill: a plain mount of the damaged store succeeded"
fi
grep -q 'fsck --salvage' "$WORK/err" || fail "kill: the refusal said: $(cat "$WORK/err")"
echo "   mount refused: $(head -c 200 "$WORK/err")..."
salvaged kill

echo "wiped ($BACKEND): ok"
