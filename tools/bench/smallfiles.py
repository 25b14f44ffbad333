#!/usr/bin/env python3
"""smallfiles.py - the small-file stages of `juicefs bench`.

usage: smallfiles.py write|read|stat DIR THREADS FILES SIZE

Each of THREADS threads handles FILES files of SIZE bytes in DIR/tN/:
  write  create, write SIZE bytes in one call (juicefs bench's block size of
         1 MiB is larger than the file), close; no fsync (juicefs bench does none)
  read   open, read to the end, close
  stat   stat of each file
Prints one line: files=N seconds=S files_per_s=R MBps=M p50_ms=A p99_ms=B errors=E
(MBps is 10^6 bytes per second of file data; 0 for stat).  Exit status 0 when
no call failed.  Threads release the GIL in every system call, so the
interpreter costs ~10 us per file, small against a filesystem round trip.
"""
import os
import sys
import threading
import time


def worker(op, d, files, size, lat, errors):
    buf = os.urandom(size) if op == "write" else None
    os.makedirs(d, exist_ok=True)
    for i in range(files):
        path = os.path.join(d, "f%05d" % i)
        t0 = time.monotonic()
        try:
            if op == "write":
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
                try:
                    if os.write(fd, buf) != size:
                        raise OSError("short write")
                finally:
                    os.close(fd)
            elif op == "read":
                fd = os.open(path, os.O_RDONLY)
                try:
                    while os.read(fd, 1 << 20):
                        pass
                finally:
                    os.close(fd)
            else:
                os.stat(path)
        except OSError as e:
            if not errors:
                sys.stderr.write("smallfiles: %s %s: %s\n" % (op, path, e))
            errors.append(path)
            continue
        lat.append((time.monotonic() - t0) * 1000.0)


def main():
    if len(sys.argv) != 6 or sys.argv[1] not in ("write", "read", "stat"):
        sys.stderr.write("usage: smallfiles.py write|read|stat DIR THREADS FILES SIZE\n")
        return 2
    op, top = sys.argv[1], sys.argv[2]
    threads, files, size = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    lat, errors = [], []
    ts = [threading.Thread(target=worker, args=(op, os.path.join(top, "t%d" % t), files,
                                                size, lat, errors)) for t in range(threads)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    secs = time.monotonic() - t0
    lat.sort()
    n = len(lat)

    def pct(p):
        return lat[min(n - 1, int(p / 100.0 * (n - 1) + 0.5))] if n else 0.0

    print("files=%d seconds=%.3f files_per_s=%.1f MBps=%.2f p50_ms=%.3f p99_ms=%.3f errors=%d" % (
        n, secs, n / secs if secs > 0 else 0.0,
        n * size / secs / 1e6 if secs > 0 and op != "stat" else 0.0, pct(50), pct(99),
        len(errors)))
    return 0 if not errors and n else 1


if __name__ == "__main__":
    sys.exit(main())
