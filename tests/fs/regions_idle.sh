#!/usr/bin/env bash
# tests/fs/regions_idle.sh MEMWALFS BACKEND - the idle cost of a mount with many regions (issue
# 39: "an idle mount must not send more than a few requests a minute however many regions it
# holds or follows"; docs/REGIONS.md "The bell"). Three daemons with run directories, machine
# ids and host names of their own stand for three machines (machines.sh); defaults everywhere
# (lease 30 s, follow interval 1 s, bell interval 10 s, deep idle after 60 s).
#  1. A makes the regions /r1../r9 and unmounts; A mounts again (holds region 0) and writes
#     into /r1 (holds it: 2 regions); B writes into /r2../r5, C into /r6../r9 (4 each); A
#     meets /r2../r9 (reads a file of each: it follows 8 regions).
#  2. Everybody idle: after 75 s (the followers' deep idle starts 60 s after their last
#     find), A's store requests are counted over 60 s (store_requests_* of `memwalfs stats
#     --raw`) and must be at most IDLE_MAX (20; the bound's reasons below); the breakdown is
#     printed.
#  3. After the idle minute B writes a file in /r3 (its first commit after a quiet: it rings
#     the bell); A shows it within 30 s (bell interval 10 s + a poll; a generous bound: a
#     correctness check, not a timed performance test); the lag is printed.
#  4. A's change in /r4 (held by B) fails with EROFS; B unmounts; A's next change there takes
#     it. All unmount; fsck clean.
#
# The bound: A renews its lease every 10 s (6 PUTs a minute) and reads the bell every 10 s (6
# GETs); its 8 deep-idle followers poll once every 5 minutes (8 x 60/300 = 1.6 a minute, up
# to 8 in one minute when their safety polls fall into it); its idle writers send nothing.
# 6 + 6 + 8 = 20.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
. "$here/machines.sh" # on MACHINE CMD..., put, wait_file, put_within
IDLE_MAX=${IDLE_MAX:-20}
a=$WORK/a b=$WORK/b c=$WORK/c
trap 'rc=$?; [ "$rc" = 0 ] || { mw_log_tail "$a"; mw_log_tail "$b"; mw_log_tail "$c" 20; }; mw_cleanup' EXIT

# counters MNT: the store_requests_* lines of MNT as "name value" pairs
counters() { "$MW" stats --raw "$1" | grep '^store_requests_'; }
total() { awk '{ s += $2 } END { print s + 0 }'; }

echo "-- 1. nine regions; A holds region 0 and /r1, B /r2../r5, C /r6../r9"
on A mw_mount_logged "$a"
for i in $(seq 9); do "$MW" region create "$a/r$i"; done
mw_umount "$a"
on A mw_mount_logged "$a" ${A_OPTS:-}
put "$a/r1/f" a1
on B mw_mount_logged "$b"
for i in 2 3 4 5; do put "$b/r$i/f" "b$i"; done
on C mw_mount_logged "$c"
for i in 6 7 8 9; do put "$c/r$i/f" "c$i"; done
wait_file "$b/r1/f" a1
for i in 2 3 4 5; do wait_file "$a/r$i/f" "b$i"; done
for i in 6 7 8 9; do wait_file "$a/r$i/f" "c$i"; done
written=$("$MW" stats --raw "$a" | awk '$1 == "regions_written" { print $2 }')
known=$("$MW" stats --raw "$a" | awk '$1 == "regions_known" { print $2 }')
[ "$written" = 2 ] && [ "$known" = 10 ] ||
	{ echo "FAIL: A writes $written regions and knows $known, not 2 and 10"; exit 1; }
echo "   A writes 2 regions and follows 8"

echo "-- 2. idle: A's requests over 60 s (after 75 s of quiet)"
sleep 75
deep=$("$MW" stats --raw "$a" | awk '$1 ~ /^region\.[0-9]+\.follow_deep_idle$/ { n += $2 } END { print n + 0 }')
echo "   A's followers deep idle: $deep of 8"
[ "$deep" = 8 ] || { echo "FAIL: $deep of A's 8 followers are deep idle after 75 s of quiet"; exit 1; }
counters "$a" >"$WORK/c0"
sleep 60
counters "$a" >"$WORK/c1"
join "$WORK/c0" "$WORK/c1" | awk '{ d = $3 - $2; if (d) printf "   %s %d\n", $1, d }'
n=$(($(total <"$WORK/c1") - $(total <"$WORK/c0")))
"$MW" stats --raw "$a" | grep -E '^(bell_|lease_renewals)' | tr '\n' ' '
echo
echo "   A (holds 2 regions, follows 8) sent $n requests in 60 s idle (bound $IDLE_MAX)"
[ "$n" -le "$IDLE_MAX" ] || { echo "FAIL: an idle mount sent $n requests a minute"; exit 1; }
[ "$n" -gt 0 ] || { echo "FAIL: no request at all in 60 s: the lease renewals are missing"; exit 1; }

echo "-- 3. after the idle minute, a write at B shows at A within 30 s"
t0=$(date +%s.%N)
put "$b/r3/late" late
wait_file "$a/r3/late" late 30
echo "   B's write after the idle minute showed at A in $(echo "$(date +%s.%N) - $t0" | bc) s"
# and a region of C, not rung since: the bell is store-wide
t0=$(date +%s.%N)
put "$c/r7/late" late7
wait_file "$a/r7/late" late7 30
echo "   C's write showed at A in $(echo "$(date +%s.%N) - $t0" | bc) s"

echo "-- 4. a held region refuses A's change; after B's unmount A takes it"
if touch "$a/r4/nope" 2>/dev/null; then echo "FAIL: A's change in /r4 (held by B) succeeded"; exit 1; fi
mw_umount "$b"
put_within 10 "$a/r4/after" after || { echo "FAIL: A did not take /r4 after B's unmount"; exit 1; }
[ "$(cat "$a/r4/f")" = b4 ] || { echo "FAIL: /r4/f is not B's"; exit 1; }
mw_umount "$c"
mw_umount "$a"
mw_fsck
echo "PASS"
