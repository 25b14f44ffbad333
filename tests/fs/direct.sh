#!/usr/bin/env bash
# tests/fs/direct.sh MEMWALFS BACKEND - O_DIRECT writes next to buffered readers (issue 16):
# while processes read a file through the page cache, another rewrites it with O_DIRECT
# (aligned buffers); afterwards buffered reads must return the new bytes everywhere (the
# daemon drops the pages a racing reader cached: fs/notify.c), also through a file descriptor
# that stayed open, and after a remount. With and without the kernel writeback cache.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
mnt=$WORK/mnt
for wb in "" --no-writeback-cache; do
	mw_mount "$mnt" $wb
	python3 - "$mnt/f" <<'PY' || exit 1
import mmap, os, sys, time, multiprocessing as mp
path = sys.argv[1]
SIZE, BLK, ROUNDS = 8 << 20, 64 << 10, 12

def pattern(r, i):
    return bytes([(r * 37 + i * 11 + j) & 0xff for j in range(256)]) * (BLK // 256)

def reader(stop, cur, seed):
    # read where the writer writes (the race: a read in flight while the block is rewritten)
    fd = os.open(path, os.O_RDONLY)
    while not stop.is_set():
        i = (cur.value + seed % 2) % (SIZE // BLK)
        os.pread(fd, BLK, i * BLK)
    os.close(fd)

with open(path, "wb") as f:
    f.write(b"\0" * SIZE)
keep = os.open(path, os.O_RDONLY)          # a descriptor held open across everything
stop = mp.Event()
cur = mp.Value("l", 0, lock=False)
procs = [mp.Process(target=reader, args=(stop, cur, s)) for s in (1, 2, 3)]
for p in procs:
    p.start()
buf = mmap.mmap(-1, BLK)                   # page-aligned, as O_DIRECT wants
dfd = os.open(path, os.O_WRONLY | os.O_DIRECT)
for r in range(1, ROUNDS + 1):
    for i in range(SIZE // BLK):
        buf[:] = pattern(r, i)
        cur.value = i
        os.pwrite(dfd, buf, i * BLK)
os.close(dfd)
stop.set()
for p in procs:
    p.join()

def stale(fd):
    return [i for i in range(SIZE // BLK) if os.pread(fd, BLK, i * BLK) != pattern(ROUNDS, i)]

deadline = time.time() + 5
while True:
    fd = os.open(path, os.O_RDONLY)
    bad = stale(fd) + stale(keep)
    os.close(fd)
    if not bad or time.time() > deadline:
        break
    time.sleep(0.2)
if bad:
    print(f"FAIL: {len(bad)} blocks still read stale through the page cache, e.g. {bad[:5]}")
    sys.exit(1)
print(f"   direct writes ({ROUNDS} rounds of {SIZE >> 20} MiB) next to 3 buffered readers: "
      "buffered reads see the new bytes")
PY
	# asynchronous direct writes (libaio, 32 in flight) racing buffered readers of the same
	# 64 MiB: afterwards a buffered read of the whole file equals a direct one
	command -v fio >/dev/null || { echo "FAIL: fio is missing (tools/setup.sh test installs it)"; exit 1; }
	fio --name=p --filename="$mnt/g" --rw=write --bs=1M --size=64M --output=/dev/null
	fio --output=/dev/null --filename="$mnt/g" --size=64M --time_based --runtime=6 \
		--name=dw --ioengine=libaio --direct=1 --rw=randwrite --bs=4k --iodepth=32 \
		--name=br --ioengine=psync --direct=0 --rw=randread --bs=4k --numjobs=3
	for _ in $(seq 25); do
		b=$(md5sum <"$mnt/g") d=$(dd if="$mnt/g" iflag=direct bs=1M status=none | md5sum)
		[ "$b" = "$d" ] && break
		sleep 0.2
	done
	[ "$b" = "$d" ] || { echo "FAIL: after libaio direct writes, buffered reads are stale"; exit 1; }
	echo "   libaio direct writes next to buffered readers: the page cache agrees with the file"
	rm "$mnt/g"
	mw_umount "$mnt"
	mw_mount "$mnt"
	python3 -c "
import sys
d = open('$mnt/f', 'rb').read()
want = b''.join(bytes([(12 * 37 + i * 11 + j) & 0xff for j in range(256)]) * 256 for i in range(128))
sys.exit(0 if d == want else 'FAIL: after a remount the file differs')"
	rm "$mnt/f"
	mw_umount "$mnt"
done
echo "direct ($BACKEND): ok"
