#!/usr/bin/env bash
# tests/fs/remount_quiet.sh MEMWALFS BACKEND - a mount right after an unmount waits for the
# closing daemon without saying so when the wait is short (issue 16): "waiting up to N s for
# daemon ..." only once the wait has lasted about 1 s. Checked both ways: quick remounts after
# fusermount3 -u print no such line; a lock held for 2.5 s (flock(1) on the store's lock file)
# gets the line and the "has finished" that follows it.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
mnt=$WORK/mnt
rounds=${REMOUNT_ROUNDS:-5}

echo "-- $rounds quick remounts after fusermount3 -u"
mw_mount "$mnt"
for i in $(seq "$rounds"); do
	for j in $(seq 20); do echo "$i.$j" > "$mnt/f$i.$j"; done
	mw_fusermount_u "$mnt"
	start=$(date +%s%N)
	mw_mount "$mnt" 2>"$WORK/mount.err" || { cat "$WORK/mount.err"; exit 1; }
	ms=$(( ($(date +%s%N) - start) / 1000000 ))
	if grep -q "waiting up to" "$WORK/mount.err"; then
		cat "$WORK/mount.err"
		[ "$ms" -lt 1000 ] && { echo "FAIL: told of a wait in a mount that took $ms ms"; exit 1; }
		echo "   (round $i: the mount took $ms ms, so the line is right)"
	fi
	[ "$(cat "$mnt/f$i.20")" = "$i.20" ]
done

echo "-- a wait of 2.5 s is announced"
rdir=$(mw_rundir)
# the store's lock file, found while mounted (a daemon removes it when it exits)
lock=$(grep -l -- "$mnt" "$rdir"/store-*.lock | head -1)
[ -n "$lock" ] || { echo "FAIL: no lock file names $mnt"; exit 1; }
mw_umount "$mnt"
flock "$lock" sleep 2.5 & # creates it again, held
holder=$!
sleep 0.3
mw_mount "$mnt" 2>"$WORK/mount.err" || { cat "$WORK/mount.err"; exit 1; }
wait "$holder"
cat "$WORK/mount.err"
grep -q "waiting up to" "$WORK/mount.err" || { echo "FAIL: a long wait was not announced"; exit 1; }
grep -q "previous daemon has finished" "$WORK/mount.err"
mw_umount "$mnt"
echo PASS
