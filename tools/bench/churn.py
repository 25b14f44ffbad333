#!/usr/bin/env python3
"""churn.py - random create / overwrite / delete under a bounded live set.

usage: churn.py run DIR SECONDS LIVE_MIB MBPS SEED STATUS
       churn.py live DIR

run: for SECONDS seconds, one thread picks an operation at random and does it
in DIR (made if missing):
  create     a new file of a random size, written in 1 MiB calls, closed
  overwrite  an existing file rewritten from the start with O_TRUNC and a new
             random size
  patch      an existing file: a random range of 4 KiB - 1 MiB overwritten in
             place (the file keeps its size)
  delete     an existing file unlinked
with weights create 4, overwrite 2, patch 2, delete 2 (the live set grows to
the bound and stays near it), except that a create or
an overwrite that would take the live bytes past LIVE_MIB becomes a delete.
Sizes are mixed: 60 % 1-64 KiB, 30 % 64 KiB - 1 MiB, 10 % 1-8 MiB (uniform
inside each class).  Writes are paced to MBPS MB/s (10^6 bytes; 0: as fast as
the filesystem goes).  The data is incompressible (slices of a random buffer).
The random choices come from SEED; the seed is printed, and the same seed gives
the same sequence of operations.

Every 0.5 s STATUS is replaced (write + rename) by one line:
  t=SECONDS live_bytes=B live_files=N written_bytes=W ops=K
where live_bytes is the sum of the sizes of the files the workload keeps (its
own model, checked against stat at the end) and written_bytes the bytes written
so far.  At the end one line on stdout:
  seed=S seconds=T ops=K creates=.. overwrites=.. patches=.. deletes=.. \
  written_bytes=W live_bytes=B live_files=N MBps=R errors=E
Exit status 0 when no call failed and the model matches stat.

live: print the sum of the sizes of the regular files under DIR (the
"du --apparent-size" of the mount, by stat).
"""
import os
import random
import sys
import time

MIB = 1 << 20
BUF = os.urandom(16 * MIB)


def pick_size(rnd):
    c = rnd.random()
    if c < 0.6:
        return rnd.randint(1024, 64 * 1024)
    if c < 0.9:
        return rnd.randint(64 * 1024, MIB)
    return rnd.randint(MIB, 8 * MIB)


def write_range(fd, rnd, off, n):
    """Write n bytes at off in calls of at most 1 MiB; returns bytes written."""
    done = 0
    while done < n:
        k = min(MIB, n - done)
        src = rnd.randrange(0, len(BUF) - k)
        w = os.pwrite(fd, memoryview(BUF)[src:src + k], off + done)
        if w != k:
            raise OSError("short write")
        done += k
    return done


def status(path, t, live, files, written, ops):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write("t=%.1f live_bytes=%d live_files=%d written_bytes=%d ops=%d\n"
                % (t, live, files, written, ops))
    os.replace(tmp, path)


def run(d, seconds, live_mib, mbps, seed, stpath):
    rnd = random.Random(seed)
    print("churn: seed %d" % seed, file=sys.stderr)
    os.makedirs(d, exist_ok=True)
    limit = live_mib * MIB
    files = {}  # name -> size
    nxt = 0
    live = written = ops = errors = 0
    count = {"create": 0, "overwrite": 0, "patch": 0, "delete": 0}
    t0 = time.monotonic()
    last_status = -1.0
    while True:
        el = time.monotonic() - t0
        if el >= seconds:
            break
        if el - last_status >= 0.5:
            status(stpath, el, live, len(files), written, ops)
            last_status = el
        if mbps > 0 and written > mbps * 1e6 * el:
            time.sleep(min(0.05, written / (mbps * 1e6) - el))
            continue
        op = rnd.choices(["create", "overwrite", "patch", "delete"], [4, 2, 2, 2])[0]
        if op != "create" and not files:
            op = "create"
        name = None
        if op != "create":
            name = list(files)[rnd.randrange(len(files))]  # insertion order: replayable
        size = pick_size(rnd) if op in ("create", "overwrite") else 0
        if op in ("create", "overwrite"):
            grow = size - (files[name] if name else 0)
            if live + grow > limit:
                if not files:
                    continue
                op = "delete"
                if name is None:
                    name = list(files)[rnd.randrange(len(files))]
        try:
            if op == "create":
                name = "f%07d" % nxt
                nxt += 1
                fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
                try:
                    written += write_range(fd, rnd, 0, size)
                finally:
                    os.close(fd)
                files[name] = size
                live += size
            elif op == "overwrite":
                fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_TRUNC)
                try:
                    written += write_range(fd, rnd, 0, size)
                finally:
                    os.close(fd)
                live += size - files[name]
                files[name] = size
            elif op == "patch":
                cur = files[name]
                n = min(cur, rnd.randint(4096, MIB))
                off = rnd.randint(0, cur - n) if cur > n else 0
                fd = os.open(os.path.join(d, name), os.O_WRONLY)
                try:
                    written += write_range(fd, rnd, off, n)
                finally:
                    os.close(fd)
            else:
                os.unlink(os.path.join(d, name))
                live -= files.pop(name)
            count[op] += 1
            ops += 1
        except OSError as ex:
            errors += 1
            print("churn: %s %s: %s" % (op, name, ex), file=sys.stderr)
            if errors > 100:
                break
    el = time.monotonic() - t0
    status(stpath, el, live, len(files), written, ops)
    seen = sum_sizes(d)
    if seen != live:
        print("churn: model says %d live bytes, stat says %d" % (live, seen), file=sys.stderr)
        errors += 1
    print("seed=%d seconds=%.1f ops=%d creates=%d overwrites=%d patches=%d deletes=%d "
          "written_bytes=%d live_bytes=%d live_files=%d MBps=%.2f errors=%d"
          % (seed, el, ops, count["create"], count["overwrite"], count["patch"],
             count["delete"], written, live, len(files), written / el / 1e6, errors))
    return 0 if errors == 0 else 1


def sum_sizes(d):
    total = 0
    for root, _, names in os.walk(d):
        for n in names:
            try:
                st = os.lstat(os.path.join(root, n))
            except FileNotFoundError:
                continue
            if os.path.isfile(os.path.join(root, n)):
                total += st.st_size
    return total


def main():
    if len(sys.argv) == 8 and sys.argv[1] == "run":
        _, _, d, secs, live_mib, mbps, seed, stpath = sys.argv
        return run(d, float(secs), int(live_mib), float(mbps), int(seed), stpath)
    if len(sys.argv) == 3 and sys.argv[1] == "live":
        print(sum_sizes(sys.argv[2]) if os.path.isdir(sys.argv[2]) else 0)
        return 0
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
