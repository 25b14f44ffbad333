#!/usr/bin/env python3
"""tests/fs/wiped_writer.py DIR LOG SEED [PERIOD] - wiped.sh's writer.

Creates DIR/f.N for N = 0, 1, ... (content: content(SEED, N), sizes from a few
bytes to 400 KiB, so that some groups carry a pack), fsyncs each one, and
appends a line to LOG after each attempt (flushed at once):

    start N T     before the open of f.N (T: time.time())
    ack N T       fsync of f.N returned 0
    fail N T ERR  the open, write or fsync of f.N failed with ERR

then sleeps PERIOD seconds (0.2).  After the first failure it goes on for 20
more attempts, so that wiped.sh can check that none of them is acknowledged,
and exits 0.  content() is also imported by wiped.sh's checker.
"""
import os
import random
import sys
import time


def content(seed, n):
    rng = random.Random(seed * 1000003 + n)
    # every fourth file is past the WAL's blob budget (256 KiB): its group puts a pack
    size = 300000 if n % 4 == 0 else rng.choice([17, 3000, 40000, 400000])
    return rng.randbytes(size)


def main():
    d, log, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
    period = float(sys.argv[4]) if len(sys.argv) > 4 else 0.2
    failures = 0
    with open(log, "a", buffering=1) as lg:
        n = 0
        while failures == 0 or failures <= 20:
            lg.write("start %d %.3f\n" % (n, time.time()))
            try:
                fd = os.open(os.path.join(d, "f.%d" % n), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    data = content(seed, n)
                    off = 0
                    while off < len(data):
                        off += os.write(fd, data[off:])
                    os.fsync(fd)
                finally:
                    os.close(fd)
                lg.write("ack %d %.3f\n" % (n, time.time()))
            except OSError as e:
                failures += 1
                lg.write("fail %d %.3f %s\n" % (n, time.time(), e.strerror))
            n += 1
            time.sleep(period)


if __name__ == "__main__":
    main()
