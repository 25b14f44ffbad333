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
#     zeros to an older length, cut short or mixed;
#  3. removed: a file open on the follower when the writer removes it reads as its last state
#     (not empty), then, once the follower installed 5 manifests (it keeps 4 views), fails
#     with ESTALE;
#  4. shared mmap of a follower's file: ENODEV (direct I/O), works with -o follow_page_cache.
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
export MEMWALFS=$MW
for mode in rename truncate removed; do
	echo "-- $mode"
	python3 "$here/follow_states.py" "$mode" "$w" "$f" "$seed" "$secs" || rc=1
done
if [ $rc != 0 ]; then
	mw_log_tail "$f" 20
	echo "FAIL: (MEMWALFS_SEED=$seed)"
	exit 1
fi
echo "   follower: $("$MW" stats --raw "$f" | awk '$1 ~ /^follow_(entries|manifests|jumps|errors)$/ { printf "%s %s ", $1, $2 }')"

echo "-- 4. shared mmap: refused with direct I/O (ENODEV), works with -o follow_page_cache"
# mmapcat FILE: print the first 16 bytes of FILE through a shared mapping, or the errno name
mmapcat() {
	python3 -c 'import errno, mmap, os, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
try:
    m = mmap.mmap(fd, 0, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    print(m[:16].hex())
except OSError as e:
    print(errno.errorcode[e.errno])' "$1"
}
want=$(head -c 16 "$w/t" | od -An -tx1 | tr -d ' \n')
got=$(mmapcat "$f/t")
[ "$got" = ENODEV ] || { echo "FAIL: shared mmap on a direct I/O follower gave $got, not ENODEV"; exit 1; }
pc=$WORK/pc
mw_mount "$pc" -o ro,follow_interval=20,follow_page_cache
got=$(mmapcat "$pc/t")
[ "$got" = "$want" ] || { echo "FAIL: shared mmap with follow_page_cache gave $got, the file starts $want"; exit 1; }
echo "   ENODEV without it; with it the mapping reads the writer's bytes"
mw_umount "$pc"
mw_umount "$f"
mw_umount "$w"
mw_fsck
echo "follow_states ($BACKEND): ok"
