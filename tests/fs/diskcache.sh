#!/usr/bin/env bash
# diskcache.sh MEMWALFS BACKEND - the disk cache under real mounts (docs/CACHE.md).
#   1. a remount reads from the disk cache: the second cold read of the files GETs no pack
#      bytes from the store (counted by memwalfs stats);
#   2. cache files corrupted, truncated and deleted under a mounted filesystem: every read
#      stays byte-exact, the damaged entries are counted and fetched again;
#   3. a cache directory on a tiny, full tmpfs: the mount works, reads are right, and one
#      warning says why nothing is cached;
#   4. a cache directory on ramfs, which refuses direct I/O: entries go through the page cache
#      (one line says so) and a remount reads them warm.
# And (0.) the memory cache's budget by default and with --cache-size.
# On the local store the disk cache is only there because the test asks for it (--cache-dir).
# Randomized: prints its seed; SEED=N replays.
. "$(dirname "$0")/lib.sh" "$1" "${2:-local}"
SEED=${SEED:-$RANDOM}
echo "diskcache.sh: seed $SEED (SEED=$SEED replays)"
RANDOM=$SEED
DC="$WORK/dc"
M="$WORK/m"

# stat_of NAME: a counter of memwalfs stats $M
stat_of() { "$MW" stats --raw "$M" | awk -v n="$1" '$1 == n { print $2 }'; }

# write the data set: a 3 MiB file and 120 small files (5-40 KiB: blobs, not inline values)
mw_mount "$M" --cache-dir "$DC"
mkdir -p "$M/small"
head -c $((3 << 20)) /dev/urandom >"$M/big.dat"
for i in $(seq 120); do
	head -c $((5000 + RANDOM % 35000)) /dev/urandom >"$M/small/f$i"
done
(cd "$M" && find . -type f | sort | xargs sha256sum) >"$WORK/sums"
mw_umount "$M"

# 0. the memory cache's budget: on S3 stores by default a sixteenth of the memory (RAM, or the
#    cgroup's limit when lower), 256M-2G; local stores 256M; --cache-size when given
mem=$(($(awk '$1 == "MemTotal:" { print $2 }' /proc/meminfo) * 1024))
while IFS= read -r line; do
	f=
	case $line in
	0::/*) f=/sys/fs/cgroup${line#0::}/memory.max ;;
	*:memory:/*) f=/sys/fs/cgroup/memory${line#*:memory:}/memory.limit_in_bytes ;;
	esac
	lim=$(cat "$f" 2>/dev/null || true)
	case $lim in '' | *[!0-9]*) ;; *) [ "$lim" -lt "$mem" ] && mem=$lim ;; esac
done </proc/self/cgroup
want=$((256 << 20))
if [ "$BACKEND" = s3 ]; then
	want=$((mem / 16))
	[ "$want" -lt $((256 << 20)) ] && want=$((256 << 20))
	[ "$want" -gt $((2 << 30)) ] && want=$((2 << 30))
fi
for opt in "" 100M; do
	mw_mount "$M" --cache-dir "$DC" ${opt:+--cache-size $opt}
	got=$(stat_of mem_cache_capacity)
	[ -n "$opt" ] && want=$((100 << 20))
	[ "$got" = "$want" ] || { echo "FAIL: memory cache ${opt:-default} $got, expected $want"; exit 1; }
	echo "   memory cache ${opt:-by default}: $got bytes"
	mw_umount "$M"
done

check_all() {
	(cd "$M" && sha256sum --quiet -c "$WORK/sums") || { echo "FAIL: $1: contents differ"; exit 1; }
}

# 1. cold, then a remount that reads warm from the disk cache
mw_mount "$M" --cache-dir "$DC"
[ "$(stat_of disk_cache_enabled)" = 1 ] || { echo "FAIL: no disk cache"; "$MW" stats --raw "$M"; exit 1; }
check_all "cold read"
cold_gets=$(stat_of blob_fetches)
echo "   cold read: $cold_gets pack GETs, $(stat_of read_store_bytes) bytes from the store"
[ "$cold_gets" -gt 0 ] || { echo "FAIL: the cold read fetched nothing"; exit 1; }
mw_umount "$M" # writes what is queued for the disk cache
# (and read-ahead with 3 threads: any number of them reads the same bytes; 0 is refused)
mkdir -p "$WORK/x"
"$MW" mount -f "${STORE_OPTS[@]}" --readahead-threads 0 "$STORE" "$WORK/x" 2>/dev/null &&
	{ echo "FAIL: --readahead-threads 0 was accepted"; exit 1; }
mw_mount "$M" --cache-dir "$DC" -o readahead_threads=3
check_all "warm read"
warm_gets=$(stat_of blob_fetches)
hits=$(stat_of read_disk_hits)
echo "   remount: $warm_gets pack GETs, $hits disk cache hits, $(stat_of disk_cache_entries) entries"
[ "$warm_gets" = 0 ] || { echo "FAIL: the read after a remount fetched $warm_gets times"; exit 1; }
[ "$hits" -gt 0 ] || { echo "FAIL: no disk cache hits"; exit 1; }
mw_umount "$M"

# 2. damage the cache under a mounted filesystem, then read everything
mw_mount "$M" --cache-dir "$DC"
read -r n bad < <(python3 - "$DC" "$SEED" <<'PY'
import os, random, sys
d, seed = sys.argv[1], int(sys.argv[2])
rng = random.Random(seed)
files = sorted(os.path.join(r, f) for r, _, fs in os.walk(d) for f in fs
               if len(f) == 32 and r != d)
bad = 0
for f in files:
    size = os.path.getsize(f)
    k = rng.randrange(4)
    if k == 0:  # flip one byte anywhere: header, key, data or check
        off = rng.randrange(size)
        with open(f, "r+b") as fh:
            fh.seek(off)
            b = fh.read(1)[0]
            fh.seek(off)
            fh.write(bytes([b ^ (1 + rng.randrange(255))]))
        bad += 1
    elif k == 1:
        os.truncate(f, rng.randrange(size))
        bad += 1
    elif k == 2:
        os.unlink(f)
print(len(files), bad)
PY
)
[ "$n" -gt 10 ] || { echo "FAIL: only $n cache files"; exit 1; }
echo "   damaged $bad of $n cache files, deleted some more"
check_all "read of a damaged cache"
corrupt=$(stat_of disk_cache_corrupt)
echo "   $corrupt damaged entries found, $(stat_of blob_fetches) pack GETs, $(stat_of read_disk_hits) hits"
[ "$bad" = 0 ] || [ "$corrupt" -gt 0 ] || { echo "FAIL: no damaged entry detected"; exit 1; }
mw_umount "$M"
# and the cache mended itself: what was damaged was written again
mw_mount "$M" --cache-dir "$DC"
check_all "read after the damage"
echo "   after the damage: $(stat_of blob_fetches) pack GETs, $(stat_of disk_cache_corrupt) damaged"
mw_umount "$M"

# 3. a cache directory on a tiny, full tmpfs
T="$WORK/tiny"
mkdir -p "$T"
if mount -t tmpfs -o size=64k tmpfs "$T" 2>/dev/null; then
	mkdir -p "$T/dc"
	dd if=/dev/zero of="$T/fill" bs=4k status=none 2>/dev/null || true
	mkdir -p "$M"
	"$MW" mount -f "${STORE_OPTS[@]}" --cache-dir "$T/dc" "$STORE" "$M" 2>"$WORK/tiny.log" &
	pid=$!
	for _ in $(seq 300); do mountpoint -q "$M" && break; sleep 0.1; done
	mountpoint -q "$M" || { cat "$WORK/tiny.log"; echo "FAIL: no mount with a full cache dir"; exit 1; }
	check_all "read with a full cache directory"
	mw_umount_cmd "$M"
	wait "$pid" || { cat "$WORK/tiny.log"; echo "FAIL: the daemon failed"; exit 1; }
	umount "$T"
	grep -i "disk cache" "$WORK/tiny.log" | grep -qi "no space" ||
		{ cat "$WORK/tiny.log"; echo "FAIL: no warning about the full cache directory"; exit 1; }
	w=$(grep -ci "disk cache" "$WORK/tiny.log")
	echo "   full tmpfs: mounted, reads right; $w warning(s): $(grep -i 'disk cache' "$WORK/tiny.log" | head -1)"
	[ "$w" = 1 ] || { echo "FAIL: $w warnings instead of one"; exit 1; }
else
	echo "   (no tmpfs mount here: the full-directory case is not run)"
fi
# 4. a cache directory where direct I/O is refused (ramfs): entries are written through the
#    page cache instead, with one line saying so, and a remount reads them without a GET
R="$WORK/ramfs"
mkdir -p "$R"
if mount -t ramfs ramfs "$R" 2>/dev/null; then
	# (ramfs reports no free space: the default bound would be nothing)
	mw_mount_logged "$M" -v --cache-dir "$R/dc" --disk-cache-size 64M
	check_all "cold read, cache on ramfs"
	mw_umount "$M"
	grep -q "no direct I/O here" "$M.log" || {
		mw_log_tail "$M"
		umount "$R"
		echo "FAIL: no line about the fallback to the page cache"
		exit 1
	}
	mw_mount "$M" --cache-dir "$R/dc" --disk-cache-size 64M
	check_all "warm read, cache on ramfs"
	gets=$(stat_of blob_fetches)
	echo "   ramfs: $(find "$R/dc" -type f -name '????????????????????????????????' | wc -l) entries written through the page cache; remount: $gets pack GETs"
	mw_umount "$M"
	umount "$R"
	[ "$gets" = 0 ] || { echo "FAIL: the read after a remount on ramfs fetched $gets times"; exit 1; }
else
	echo "   (no ramfs mount here: the fallback from direct I/O is not run)"
fi
mw_fsck
echo "PASS"
