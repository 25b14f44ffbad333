#!/usr/bin/env bash
# tests/fs/regions_kill.sh MEMWALFS BACKEND - a holder of several regions dies or stalls while
# others write theirs (issue 39, docs/REGIONS.md "Failure cases"); daemons stand for machines
# (machines.sh), every mount with --lease 2. A writes /r1 (and holds region 0), B /r2 and /r3,
# C /r4, D /r5 and /r6.
#  1. kill -9 of B in the middle of writes: fsync'd journals run in /r2 and /r3 at B (and in
#     /r1 at A, /r4 at C); once each has acknowledged lines, B dies. A takes /r2 and C takes
#     /r3, each within the lease and a few polls, and each has every line B acknowledged (and
#     B's files fsync'd before); A's and C's own journals go on unharmed.
#  2. SIGSTOP of D (holding /r5 and /r6) longer than its lease, in the middle of an fsync'd
#     journal in /r5: A takes /r5; D, woken, acknowledges nothing more there: the journal's
#     next fsync and every later one fail with EIO, and nothing it wrote in /r5 after waking
#     reaches the store (the journal has at most the line in flight at the stop beyond those
#     acknowledged). /r6, which nobody took, stays D's: the lease covers all of a mount's regions, so
#     D was "dead" for /r6 too while stopped, but nobody claimed it, and D's engine of /r6
#     was never fenced: D's later writes there succeed (its lease renewals resume).
#  3. Everybody unmounts: D's unmount fails, saying that region 5 was taken over (its final
#     commit there was fenced), as an unmount of a mount fenced in region 0 does; a new mount has every acknowledged write and none of the fenced
#     ones; fsck is clean.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"

. "$here/machines.sh" # on MACHINE CMD..., put PATH CONTENT
load() { python3 "$here/regions_load.py" "$@"; }
a=$WORK/a b=$WORK/b c=$WORK/c d=$WORK/d e=$WORK/e
fail() {
	echo "FAIL: $*"
	exit 1
}
stopped=
trap 'rc=$?; [ -z "$stopped" ] || kill -CONT "$stopped" 2>/dev/null; [ "$rc" = 0 ] || for m in "$a" "$b" "$c" "$d" "$e"; do [ -e "$m.log" ] && mw_log_tail "$m" 15; done; touch "$WORK/stop"; mw_cleanup' EXIT
# acked FILE: the lines a journal acknowledged so far
acked() { cat "$1" 2>/dev/null || echo 0; }
# wait_acked N ACKS...: up to 60 s until every journal acknowledged N lines
wait_acked() {
	local n=$1 ok
	shift
	for _ in $(seq 600); do
		ok=1
		for f in "$@"; do [ "$(acked "$f")" -ge "$n" ] || ok=; done
		[ -n "$ok" ] && return 0
		sleep 0.1
	done
	fail "the journals did not acknowledge $n lines within 60 s"
}
# take MNT/PATH: poll a fsync'd write of PATH until it succeeds (the mount takes the region
# once its holder's lease ran out), up to 30 s; prints the seconds since $t0
take() {
	for _ in $(seq 300); do
		if put "$1" taken 2>/dev/null; then
			awk -v s="$t0" -v n="$(date +%s.%N)" 'BEGIN { printf "%.1f", n - s }'
			return 0
		fi
		sleep 0.1
	done
	fail "$1: not taken within 30 s"
}
# journals MNT... start a journal writer in each DIR given as MNT/REGION (acks in $WORK/ack-REGION)
jpids=()
journals() {
	for p in "$@"; do
		load journal "$p/journal" "$WORK/ack-${p##*/}" "$WORK/stop" >"$WORK/j-${p##*/}.out" 2>&1 &
		jpids+=($!)
	done
}

echo "-- setup: A makes /r1../r6; A, B, C and D mount and take their regions"
on A mw_mount_logged "$a"
for r in r1 r2 r3 r4 r5 r6; do "$MW" region create "$a/$r"; done
mw_umount "$a"
on A mw_mount_logged "$a" --lease 2
for m in B C D; do on $m mw_mount_logged "$WORK/${m,,}" --lease 2; done
put "$a/r1/a" a
for r in r2 r3; do put "$b/$r/b" "b in $r" && mkdir "$b/$r/dir" && put "$b/$r/dir/f" "f in $r"; done
put "$c/r4/c" c
for r in r5 r6; do put "$d/$r/before" before; done

echo "-- 1. kill -9 of B (holds /r2 and /r3) in the middle of writes"
journals "$a/r1" "$b/r2" "$b/r3" "$c/r4"
wait_acked 30 "$WORK/ack-r2" "$WORK/ack-r3" "$WORK/ack-r1" "$WORK/ack-r4"
kill -9 "$(cat "$b.pid")"
t0=$(date +%s.%N)
echo "   B killed after $(acked "$WORK/ack-r2") lines in /r2, $(acked "$WORK/ack-r3") in /r3"
take "$a/r2/taken-by-a" >"$WORK/t-r2" &
ta=$!
take "$c/r3/taken-by-c" >"$WORK/t-r3" &
tc=$!
wait $ta || fail "A did not take /r2"
wait $tc || fail "C did not take /r3"
echo "   A took /r2 $(cat "$WORK/t-r2") s and C took /r3 $(cat "$WORK/t-r3") s after the kill (lease 2 s)"
# B's journal writers stopped with an error (the daemon died under them)
for i in 1 2; do
	if wait "${jpids[$i]}"; then fail "a journal of B stopped without an error"; fi
done
sed 's/^/   /' "$WORK/j-r2.out" "$WORK/j-r3.out"
load check-journal "$a/r2/journal" "$WORK/ack-r2" || fail "A lacks lines B acknowledged in /r2"
load check-journal "$c/r3/journal" "$WORK/ack-r3" || fail "C lacks lines B acknowledged in /r3"
[ "$(cat "$a/r2/dir/f")" = "f in r2" ] && [ "$(cat "$c/r3/b")" = "b in r3" ] || fail "a file B fsynced is missing"
n1=$(acked "$WORK/ack-r1") n4=$(acked "$WORK/ack-r4")
wait_acked $((n1 + 20)) "$WORK/ack-r1"
wait_acked $((n4 + 20)) "$WORK/ack-r4"
touch "$WORK/stop"
wait "${jpids[0]}" || { cat "$WORK/j-r1.out"; fail "A's journal failed"; }
wait "${jpids[3]}" || { cat "$WORK/j-r4.out"; fail "C's journal failed"; }
rm "$WORK/stop"
fusermount3 -uz "$b" 2>/dev/null || true
echo "   every line and file B acknowledged is at its region's new holder"

echo "-- 2. SIGSTOP of D (holds /r5 and /r6) longer than its lease"
journals "$d/r5"
wait_acked 20 "$WORK/ack-r5"
dpid=$(cat "$d.pid")
kill -STOP "$dpid"
stopped=$dpid
t0=$(date +%s.%N)
echo "   A took /r5 $(take "$a/r5/taken-by-a") s after D stopped"
kill -CONT "$dpid"
stopped=
# the journal D wrote in /r5 when it stopped fails once D wakes (its fsync, or the next)
if wait "${jpids[4]}"; then fail "D's journal in /r5 went on after A took /r5"; fi
sed 's/^/   /' "$WORK/j-r5.out"
grep -q "EIO" "$WORK/j-r5.out" || fail "D's journal in /r5 did not fail with EIO"
# D, woken: a change in /r5 may be taken in memory, but no fsync is acknowledged
rc=0
put "$d/r5/zombie" zombie 2>"$WORK/zombie.err" || rc=$?
[ "$rc" != 0 ] || fail "D acknowledged an fsync in /r5 after A took it"
grep -q "Input/output error" "$WORK/zombie.err" || { cat "$WORK/zombie.err"; fail "D's fsync in /r5: not EIO"; }
(echo more >>"$d/r5/before") 2>/dev/null || true
put "$d/r5/zombie2" zombie2 2>/dev/null && fail "D acknowledged a second fsync in /r5"
echo "   D, woken: fsync in /r5 fails: $(tail -n 1 "$WORK/zombie.err")"
# D's other region: nobody took it, D still writes it
if put "$d/r6/after-wake" after 2>"$WORK/r6.err"; then r6=ok; else r6=failed; fi
echo "   D, woken: an fsync'd write in /r6 (held by nobody else) $r6 $(head -c 200 "$WORK/r6.err")"
[ $r6 = ok ] || fail "D's write in /r6, which nobody took, failed"
grep -i "fenced" "$d.log" | tail -n 5 | sed 's/^/   D logged: /'

echo "-- 3. all unmount; a new mount has every acknowledged write, none of the fenced ones"
on A mw_umount "$a" || fail "A's unmount failed"
on C mw_umount "$c" || fail "C's unmount failed"
if on D mw_umount_cmd "$d" 2>"$WORK/d-umount.err"; then drc=0; else drc=$?; fi
mw_wait_exit "$d.pid"
echo "   D's unmount: exit $drc: $(head -c 400 "$WORK/d-umount.err")"
# its final commit of /r5 failed (fenced): memwalfs umount says so, as for region 0
[ "$drc" != 0 ] && grep -q "region 5 was taken over by another mount" "$WORK/d-umount.err" ||
	fail "D's unmount does not report that /r5 was taken over"
on E mw_mount_logged "$e"
for r in r1 r2 r3 r4; do load check-journal "$e/$r/journal" "$WORK/ack-$r" || fail "/$r/journal after the remount"; done
[ "$(cat "$e/r2/dir/f")" = "f in r2" ] && [ "$(cat "$e/r3/dir/f")" = "f in r3" ] || fail "B's files after the remount"
[ "$(cat "$e/r2/taken-by-a")" = taken ] && [ "$(cat "$e/r3/taken-by-c")" = taken ] && [ "$(cat "$e/r5/taken-by-a")" = taken ] ||
	fail "a new holder's write is missing after the remount"
[ ! -e "$e/r5/zombie" ] && [ ! -e "$e/r5/zombie2" ] || fail "a write of the fenced D reached /r5"
load check-journal "$e/r5/journal" "$WORK/ack-r5" || fail "/r5/journal after the remount"
# at most the line in flight when D stopped (written before the take) beyond those acknowledged
[ "$(wc -l <"$e/r5/journal")" -le $(($(acked "$WORK/ack-r5") + 1)) ] ||
	fail "/r5/journal has more than one line beyond those D acknowledged"
[ "$(cat "$e/r5/before")" = before ] || fail "/r5/before changed after D was fenced: $(cat "$e/r5/before")"
[ "$(cat "$e/r6/before")" = before ] && [ "$(cat "$e/r6/after-wake")" = after ] || fail "D's writes in /r6 are missing"
mw_umount "$e"
mw_fsck || fail "fsck"
echo "PASS"
