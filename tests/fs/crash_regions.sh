#!/usr/bin/env bash
# tests/fs/crash_regions.sh MEMWALFS BACKEND CRASHWRITE - the crash campaign with two writers
# (issue 39): two daemons (machines A and B, machines.sh, --lease 2) each write their own
# region, /ra and /rb, with crashwrite (random writes of 1 byte..256 KiB into one file, fsync
# now and then; tests/fs/crashwrite.c), and one or both are killed -9 at random moments.
# After each round:
#  * one killed: the survivor stops its writer, takes the dead one's region once its lease ran
#    out, and has every byte both writers fsynced (each file is the state after some prefix
#    of its writes at or past its last fsync, none torn);
#  * both killed: fsck --deep of what the crash left (nobody mounted); A mounts again on its machine (the dead daemon's pid is gone: it takes /ra at
#    once) and takes /rb once B's lease ran out, and checks both files the same way;
#  * fsck is clean beside the live mount; everybody unmounts.
# At the end a new mount checks the last round's files again and fsck --deep is clean.
# Seeded: MEMWALFS_SEED replays the campaign (the victims, the moments, the writes);
# CRASH_ROUNDS rounds (6 locally, 4 on S3 by default; more for a longer campaign).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
CRASHWRITE=$3

. "$here/machines.sh" # on MACHINE CMD..., put PATH CONTENT
seed=${MEMWALFS_SEED:-$(((RANDOM << 15) | RANDOM))}
rounds=${CRASH_ROUNDS:-$([ "$BACKEND" = s3 ] && echo 4 || echo 6)}
echo "seed $seed (MEMWALFS_SEED=$seed replays the campaign), $rounds rounds"
a=$WORK/a b=$WORK/b e=$WORK/e
fail() {
	echo "FAIL: $* (MEMWALFS_SEED=$seed)"
	exit 1
}
trap 'rc=$?; touch "$WORK/stop"; [ "$rc" = 0 ] || for m in "$a" "$b" "$e"; do [ -e "$m.log" ] && mw_log_tail "$m" 15; done; mw_cleanup' EXIT
# rnd N: R becomes the next number in 0..N-1 of the campaign's sequence (a 48-bit LCG)
state=$seed
rnd() {
	state=$(((state * 25214903917 + 11) & 0xffffffffffff))
	R=$(((state >> 16) % $1))
}
# take PATH: poll an fsync'd write of PATH until it succeeds (up to 30 s)
take() {
	for _ in $(seq 300); do put "$1" taken 2>/dev/null && return 0; sleep 0.1; done
	fail "$1: not taken within 30 s"
}
# dead MNT: kill -9 the daemon of MNT, wait for it, and let go of its mount point
dead() {
	kill -9 "$(cat "$1.pid")"
	mw_wait_exit "$1.pid"
}
# check MNT: both writers' files at MNT are states their fsync'd writes allow
check() {
	for r in ra rb; do "$CRASHWRITE" check "$1/$r/random" "$WORK/log-$r" | sed 's/^/   /' || fail "round $round: /$r at $1"; done
}

echo "-- A makes the regions /ra and /rb"
on A mw_mount_logged "$a"
"$MW" region create "$a/ra" && "$MW" region create "$a/rb"
mw_umount "$a"

for round in $(seq "$rounds"); do
	rnd 1000000000 && sa=$R
	rnd 1000000000 && sb=$R
	rnd 3 && victims=$(echo A B AB | cut -d' ' -f$((R + 1)))
	rnd 1000 && first=$(awk -v r="$R" 'BEGIN { printf "%.2f", 0.5 + r / 400 }') # 0.5..3 s
	rnd 1000 && second=$(awk -v r="$R" 'BEGIN { printf "%.2f", r / 1000 }')     # 0..1 s later
	echo "-- round $round: writers' seeds $sa $sb; kill -9 of $victims after $first s (then $second s)"
	on A mw_mount_logged "$a" --lease 2
	on B mw_mount_logged "$b" --lease 2
	rm -f "$WORK/stop"
	"$CRASHWRITE" write "$a/ra/random" "$WORK/log-ra" "$sa" "$WORK/stop" >"$WORK/w-ra" 2>&1 &
	wa=$!
	"$CRASHWRITE" write "$b/rb/random" "$WORK/log-rb" "$sb" "$WORK/stop" >"$WORK/w-rb" 2>&1 &
	wb=$!
	sleep "$first" # the random moment of the crash (not a wait for a condition)
	case $victims in
	A) dead "$a" ;;
	B) dead "$b" ;;
	AB) dead "$a" && sleep "$second" && dead "$b" ;;
	esac
	touch "$WORK/stop"
	wait $wa || { cat "$WORK/w-ra"; fail "round $round: A's writer failed"; }
	wait $wb || { cat "$WORK/w-rb"; fail "round $round: B's writer failed"; }
	sed 's/^/   ra: /' "$WORK/w-ra" && sed 's/^/   rb: /' "$WORK/w-rb"
	for m in A B; do
		case $victims in *$m*) mw_fusermount_u "$WORK/${m,,}" 2>/dev/null || fusermount3 -uz "$WORK/${m,,}" || true ;; esac
	done
	case $victims in
	A) s=$b t=ra ;;
	B) s=$a t=rb ;;
	AB)
		mw_fsck --deep || fail "round $round: fsck --deep of what the crash left"
		on A mw_mount_logged "$a" --lease 2
		take "$a/ra/taken-$round"
		s=$a t=rb
		;;
	esac
	t0=$(date +%s.%N)
	take "$s/$t/taken-$round"
	echo "   ${s##*/} took /$t $(awk -v s="$t0" -v n="$(date +%s.%N)" 'BEGIN { printf "%.1f", n - s }') s after it looked"
	check "$s"
	mw_fsck || fail "round $round: fsck beside the live mount"
	for m in "$a" "$b"; do if mountpoint -q "$m"; then mw_umount "$m" || fail "round $round: unmount of $m"; fi; done
done

echo "-- a new mount has the last round's fsynced bytes; fsck --deep"
on E mw_mount_logged "$e"
check "$e"
mw_umount "$e"
mw_fsck --deep || fail "fsck --deep"
echo "PASS"
