#!/usr/bin/env bash
# tests/fs/follow_states.sh MEMWALFS BACKEND - a follower presents each file as one of the
# writer's states (issue 36, 6c; docs/FOLLOWERS.md): a writer mount (20 ms cadence, 128 KiB
# MemTables: it flushes every second or so, and the follower installs the manifests while it
# reads removed files) and a follower mount (-o ro,follow_interval=20) of one store on this
# machine, follow_states.py beside it:
#  1. rename: the writer replaces names with write-temp, fsync, rename; the follower's stats
#     never show an empty file, its reads one whole version (the one fstat describes);
#  2. truncate: the writer truncates a file and rewrites it in place; the follower's single
#     read() calls return the empty file or one whole version, never a version padded with
#     zeros to an older length, cut short or mixed.
# FOLLOW_STATES_SECONDS (4) per step.  The seed is printed; MEMWALFS_SEED=N replays the
# writer's versions.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
secs=${FOLLOW_STATES_SECONDS:-4}
seed=${MEMWALFS_SEED:-$(( (RANDOM << 15) | RANDOM ))}
echo "seed $seed (MEMWALFS_SEED=$seed replays the writer's versions)"
w=$WORK/w
f=$WORK/f
mw_mount "$w" --cadence 20 --memtable-size 128K
echo init >"$w/init"
"$MW" sync "$w" >/dev/null
mw_mount_logged "$f" -o ro,follow_interval=20
rc=0
for mode in rename truncate; do
	echo "-- $mode"
	python3 "$here/follow_states.py" "$mode" "$w" "$f" "$seed" "$secs" || rc=1
done
if [ $rc != 0 ]; then
	mw_log_tail "$f" 20
	echo "FAIL: (MEMWALFS_SEED=$seed)"
	exit 1
fi
echo "   follower: $("$MW" stats "$f" | awk '$1 ~ /^follow_(entries|manifests|jumps|errors)$/ { printf "%s %s ", $1, $2 }')"
mw_umount "$f"
mw_umount "$w"
mw_fsck
echo "follow_states ($BACKEND): ok"
