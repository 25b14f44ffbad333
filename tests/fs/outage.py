#!/usr/bin/env python3
"""outage.py - the application side of tests/fs/outage.sh: writers that record exactly what
the filesystem acknowledged, and the checks of those records.

    outage.py loop DIR LOG STOPFILE MIN MAX
        create+fsync loop: file DIR/fNNNNNN gets MIN..MAX random bytes, is fsynced and closed;
        one line per file in LOG, flushed at once:
            OK name size sha256 t_start t_end      (t_*: the fsync call, unix time)
            ERR name stage errno t_start t_end     (stage: open, write, fsync or close)
        until STOPFILE exists.  A file is acknowledged only if its fsync and close returned 0.
    outage.py fsync1 PATH SIZE OUT REF
        write SIZE random bytes to PATH, fsync, close; OUT gets one line
            OK sha256 elapsed | ERR stage errno elapsed     (elapsed: the fsync call, seconds)
        and REF the bytes written.
    outage.py fill DIR LOG SIZE MAXFILES
        like loop, with SIZE-byte files, until the first error or MAXFILES files (appends to
        LOG, same format, numbering on from the files already in it); exit status 0.
    outage.py pace SRC RATE
        copy SRC to stdout at RATE bytes per second (1 MiB at a time).
    outage.py dropcache FILE
        drop FILE's clean pages from the kernel page cache (posix_fadvise DONTNEED).
    outage.py compare FILE REF
        how FILE differs from REF: sizes, the differing 4 KiB-aligned ranges (zeros or
        other bytes), whether FILE is a prefix of REF.
    outage.py check LOG T_DOWN T_UP
        the loop's records against an outage from T_DOWN (the store stopped answering) to
        T_UP (it answers again): prints a summary; fails (exit 1) if any fsync failed, if an
        fsync that started during the outage was acknowledged before it ended, if no fsync
        waited through the outage and completed after it, or if fewer than 3 fsyncs
        completed after it.
    outage.py verify LOG ROOT
        every OK file of LOG is byte-exact under ROOT (sha256); exit 1 otherwise.
"""
import errno
import hashlib
import os
import sys
import time


def write_one(path, data, log=None, name=None):
    """Create path with data, fsync, close.  Returns (ok, stage, errno, t_start, t_end)."""
    t0 = t1 = time.time()
    stage = "open"
    fd = -1
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        stage = "write"
        off = 0
        while off < len(data):
            off += os.write(fd, data[off:off + (1 << 20)])
        stage = "fsync"
        t0 = time.time()
        os.fsync(fd)
        t1 = time.time()
        stage = "close"
        fd2, fd = fd, -1
        os.close(fd2)
        return True, "", 0, t0, t1
    except OSError as e:
        t1 = time.time()
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass
        return False, stage, e.errno, t0, t1


def record(log, name, data, res):
    ok, stage, err, t0, t1 = res
    if ok:
        log.write("OK %s %d %s %.6f %.6f\n" % (name, len(data), hashlib.sha256(data).hexdigest(),
                                              t0, t1))
    else:
        log.write("ERR %s %s %s %.6f %.6f\n" % (name, stage, errno.errorcode.get(err, err), t0, t1))
    log.flush()


def loop(d, logname, stopfile, lo, hi):
    os.makedirs(d, exist_ok=True)
    i = 0
    with open(logname, "a") as log:
        while not os.path.exists(stopfile):
            i += 1
            name = "f%06d" % i
            data = os.urandom(lo + int.from_bytes(os.urandom(4), "little") % (hi - lo + 1))
            res = write_one(os.path.join(d, name), data)
            record(log, name, data, res)
            if not res[0]:
                time.sleep(0.2)


def fsync1(path, size, out, ref):
    data = os.urandom(size)
    with open(ref, "wb") as f:
        f.write(data)
    ok, stage, err, t0, t1 = write_one(path, data)
    with open(out, "w") as f:
        if ok:
            f.write("OK %s %.3f\n" % (hashlib.sha256(data).hexdigest(), t1 - t0))
        else:
            f.write("ERR %s %s %.3f\n" % (stage, errno.errorcode.get(err, err), t1 - t0))


def fill(d, logname, size, maxfiles):
    os.makedirs(d, exist_ok=True)
    with open(logname, "a") as log:
        n = sum(1 for _ in open(logname))
        for i in range(n + 1, n + 1 + maxfiles):
            name = "f%06d" % i
            data = os.urandom(size)
            res = write_one(os.path.join(d, name), data)
            record(log, name, data, res)
            if not res[0]:
                return


def pace(src, rate):
    out = sys.stdout.buffer
    t0 = time.monotonic()
    sent = 0
    with open(src, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            out.write(b)
            out.flush()
            sent += len(b)
            ahead = sent / rate - (time.monotonic() - t0)
            if ahead > 0:
                time.sleep(ahead)


def records(logname):
    for line in open(logname):
        f = line.split()
        if f[0] == "OK":
            yield "OK", f[1], int(f[2]), f[3], float(f[4]), float(f[5])
        else:
            yield "ERR", f[1], f[2], f[3], float(f[4]), float(f[5])


def check(logname, down, up):
    recs = list(records(logname))
    ok = [r for r in recs if r[0] == "OK"]
    errs = [r for r in recs if r[0] == "ERR"]
    before = [r for r in ok if r[5] <= down]
    after = [r for r in ok if r[4] >= up]
    lied = [r for r in ok if r[4] >= down and r[5] <= up]
    waited = [r for r in ok if r[4] < up - 5 and r[5] >= up]
    print("   loop: %d files acknowledged (%d before the outage, %d started after it), %d errors"
          % (len(ok), len(before), len(after), len(errs)))
    for r in waited:
        print("   loop: %s: fsync waited %.1f s, called %.1f s into the outage, returned 0 "
              "%.1f s after the store was back" % (r[1], r[5] - r[4], r[4] - down, r[5] - up))
    bad = False
    for r in errs:
        print("FAIL: %s: %s failed with %s (%.1f s into the outage)" % (r[1], r[2], r[3],
                                                                    r[5] - down))
        bad = True
    for r in lied:
        print("FAIL: %s: fsync returned 0 during the outage (called %.1f s in, returned %.1f s "
              "in)" % (r[1], r[4] - down, r[5] - down))
        bad = True
    if not before:
        print("FAIL: no fsync returned 0 before the outage")
        bad = True
    if not waited:
        print("FAIL: no fsync waited through the outage and returned 0 after it")
        bad = True
    if len(after) < 3:
        print("FAIL: only %d fsyncs started after the outage and returned 0" % len(after))
        bad = True
    sys.exit(1 if bad else 0)


def verify(logname, root):
    bad = n = 0
    for r in records(logname):
        if r[0] != "OK":
            continue
        n += 1
        p = os.path.join(root, r[1])
        try:
            data = open(p, "rb").read()
        except OSError as e:
            print("FAIL: %s (acknowledged): %s" % (p, e.strerror))
            bad += 1
            continue
        if len(data) != r[2] or hashlib.sha256(data).hexdigest() != r[3]:
            print("FAIL: %s (acknowledged, %d bytes) has %d bytes that differ" % (p, r[2],
                                                                                len(data)))
            bad += 1
    print("   verify: %d acknowledged files in %s, %d bad" % (n, root, bad))
    sys.exit(1 if bad else 0)


def compare(path, refpath):
    a = open(path, "rb").read()
    r = open(refpath, "rb").read()
    rngs, start = [], None
    for i in range(0, max(len(a), len(r)), 4096):
        same = a[i:i + 4096] == r[i:i + 4096]
        if not same and start is None:
            start = i
        if same and start is not None:
            rngs.append((start, i))
            start = None
    if start is not None:
        rngs.append((start, max(len(a), len(r))))
    for s, e in rngs[:10]:
        part = a[s:min(e, len(a))]
        kind = "zeros" if part and part.count(0) == len(part) else "other bytes"
        print("   %s: bytes %d-%d differ (%s)" % (path, s, e, kind if part else "missing"))
    prefix = len(a) <= len(r) and r[:len(a)] == a
    print("   %s: %d bytes, %d written; %d differing ranges; %s" % (
        path, len(a), len(r), len(rngs), "a prefix of what was written" if prefix else
        "NOT a prefix of what was written"))


def main():
    a = sys.argv[1:]
    if a[0] == "loop":
        loop(a[1], a[2], a[3], int(a[4]), int(a[5]))
    elif a[0] == "fsync1":
        fsync1(a[1], int(a[2]), a[3], a[4])
    elif a[0] == "fill":
        fill(a[1], a[2], int(a[3]), int(a[4]))
    elif a[0] == "pace":
        pace(a[1], float(a[2]))
    elif a[0] == "dropcache":
        fd = os.open(a[1], os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    elif a[0] == "compare":
        compare(a[1], a[2])
    elif a[0] == "check":
        check(a[1], float(a[2]), float(a[3]))
    elif a[0] == "verify":
        verify(a[1], a[2])
    else:
        sys.exit("outage.py: unknown command " + a[0])


if __name__ == "__main__":
    main()
