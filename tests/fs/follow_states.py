#!/usr/bin/env python3
"""tests/fs/follow_states.py MODE WRITER_MNT FOLLOWER_MNT SEED SECONDS - a follower presents each
file as one of the writer's states (issue 36, 6c; docs/FOLLOWERS.md).

A writer thread works on the writer's mount, reader threads on a follower's mount of the same
store, for SECONDS.  Every version the writer writes checks itself: a 32-byte header (magic,
version number, length of the whole file, SHA-256 of the body cut to 12 bytes) and a seeded
random body, 2-300 KiB in all (under one chunk: a write and its fsync are one batch).

  rename    the writer loops write-temp, fsync, rename over one name per writer thread (the
            name never holds an empty or partial file).  Readers stat, open, fstat and read the
            name whole (one read() with room for any version), and read it again through the
            open descriptor: every stat must show a non-empty file; every read must return
            one whole version, the one fstat describes (the open file never changes: a
            renamed version is never written again).
  truncate  the writer truncates one file to 0 and writes the next version in place, then
            fsyncs, through one descriptor.  Readers read it whole with single read() calls
            (pread at 0 through a descriptor held open, or open-read-close): every read must
            return an empty file (the truncated state) or one whole version: never a version
            padded with zeros to an older length, cut short, or mixed with another.

  removed   (not timed; SECONDS is ignored) a file held open on the follower while the writer
            removes it: reads return its last state (not an empty file), also by a name the
            kernel still caches, until the follower installed more manifests than it keeps
            views of (the writer flushes: MEMWALFS is the memwalfs binary, for its stats),
            then reads fail with ESTALE.

Each bad read is reported (what it held: a prefix of which version, padded with zeros, ...).
Exit 0 when no read was bad and the readers saw at least 2 versions (a follower that never
changed proves nothing), 1 otherwise.  SEED makes the writer's versions (lengths, bodies)
reproducible; the interleaving with the follower is not.
"""
import errno
import hashlib
import os
import random
import struct
import subprocess
import sys
import threading
import time

MAGIC = b"MWFSVER1"
HDR = struct.Struct("<8sQQ")  # magic, version, total length; then 12 bytes of SHA-256(body)
HDR_LEN = HDR.size + 12  # 36
MIN_LEN, MAX_LEN = 2048, 300 * 1024
READ_ROOM = 1 << 20  # one read() gets any version whole, with room to spare
WRITERS = 2  # rename mode: names written at once
READERS = 3


def make_version(rnd, v):
    n = rnd.randint(MIN_LEN, MAX_LEN)
    body = rnd.randbytes(n - HDR_LEN)
    return HDR.pack(MAGIC, v, n) + hashlib.sha256(body).digest()[:12] + body


def judge(data, versions):
    """None if data is one whole version, else what it holds (versions: number -> bytes)."""
    if len(data) >= HDR_LEN:
        magic, v, n = HDR.unpack_from(data)
        if magic == MAGIC and n == len(data) and hashlib.sha256(data[HDR_LEN:]).digest()[:12] == data[HDR.size:HDR_LEN]:
            return None
        if magic == MAGIC and v in versions:
            good = versions[v]
            same = 0
            for i in range(min(len(good), len(data))):
                if good[i] != data[i]:
                    break
                same = i + 1
            rest = data[same:]
            tail = "zeros" if rest and rest.count(0) == len(rest) else "other bytes"
            return "%d bytes: the first %d of version %d (%d bytes), then %d bytes of %s" % (
                len(data), same, v, len(good), len(rest), tail)
    if data and data.count(0) == len(data):
        return "%d bytes of zeros" % len(data)
    return "%d bytes, not a version (starts %r)" % (len(data), data[:16])


class Run:
    def __init__(self, mode, wmnt, fmnt, seed, seconds):
        self.mode, self.wmnt, self.fmnt, self.seconds = mode, wmnt, fmnt, seconds
        self.seed = seed
        self.versions = {}  # version number -> bytes (written before they can be read)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.bad = []
        self.seen = set()
        self.reads = self.stats = self.empty = 0
        self.written = 0
        self.errors = []

    def fail(self, what):
        with self.lock:
            self.bad.append(what)
            if len(self.bad) <= 10:
                print("BAD: %s" % what, flush=True)

    def new_version(self, rnd):
        with self.lock:
            v = len(self.versions) + 1
            data = make_version(rnd, v)
            self.versions[v] = data
            self.written += 1
        return data

    def replace(self, t, data):
        """Write-temp, fsync, rename over r<t>."""
        tmp = os.path.join(self.wmnt, ".r%d.tmp" % t)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, os.path.join(self.wmnt, "r%d" % t))

    def writer_rename(self, t):
        rnd = random.Random(self.seed * 100 + t)
        while not self.stop.is_set():
            self.replace(t, self.new_version(rnd))

    def writer_truncate(self):
        rnd = random.Random(self.seed * 100)
        fd = os.open(os.path.join(self.wmnt, "t"), os.O_RDWR)
        try:
            while not self.stop.is_set():
                data = self.new_version(rnd)
                os.ftruncate(fd, 0)
                if rnd.random() < 0.5:
                    os.fsync(fd)  # the empty state alone in a group, now and then
                os.pwrite(fd, data, 0)
                os.fsync(fd)
        finally:
            os.close(fd)

    def check(self, data, how, allow_empty):
        with self.lock:
            self.reads += 1
            versions = dict(self.versions)
        if not data:
            with self.lock:
                self.empty += 1
            if not allow_empty:
                self.fail("%s: an empty file" % how)
            return None
        what = judge(data, versions)
        if what:
            self.fail("%s: %s" % (how, what))
            return None
        v = HDR.unpack_from(data)[1]
        with self.lock:
            self.seen.add(v)
        return v

    def reader_rename(self, r):
        rnd = random.Random(self.seed * 100 + 50 + r)
        while not self.stop.is_set():
            t = rnd.randrange(WRITERS)
            name = os.path.join(self.fmnt, "r%d" % t)
            try:
                st = os.stat(name)
            except FileNotFoundError:
                continue  # before the first rename
            with self.lock:
                self.stats += 1
            if st.st_size == 0:
                self.fail("stat r%d: size 0 (ino %d, nlink %d)" % (t, st.st_ino, st.st_nlink))
            try:
                fd = os.open(name, os.O_RDONLY)
            except FileNotFoundError:
                self.fail("open r%d: ENOENT after stat found it" % t)
                continue
            try:
                fst = os.fstat(fd)
                data = os.read(fd, READ_ROOM)
                how = "read r%d (ino %d)" % (t, fst.st_ino)
                v = self.check(data, how, False)
                if v is not None and fst.st_size != len(data):
                    self.fail("%s: fstat said %d bytes, read gave version %d of %d" % (
                        how, fst.st_size, v, len(data)))
                # the open file is one version: later reads and fstat say the same
                again = os.pread(fd, READ_ROOM, 0)
                if again != data:
                    w = judge(again, dict(self.versions))
                    self.fail("%s again: %s" % (how, w or "another version (%d bytes)" % len(again)))
                fst2 = os.fstat(fd)
                if fst2.st_size != fst.st_size:
                    self.fail("%s: fstat said %d bytes, later %d" % (how, fst.st_size, fst2.st_size))
            finally:
                os.close(fd)

    def reader_truncate(self, r):
        rnd = random.Random(self.seed * 100 + 50 + r)
        name = os.path.join(self.fmnt, "t")
        held = os.open(name, os.O_RDONLY)
        try:
            while not self.stop.is_set():
                if rnd.random() < 0.5:
                    self.check(os.pread(held, READ_ROOM, 0), "pread t", True)
                else:
                    fd = os.open(name, os.O_RDONLY)
                    try:
                        self.check(os.read(fd, READ_ROOM), "open+read t", True)
                    finally:
                        os.close(fd)
        finally:
            os.close(held)

    def guard(self, fn, *args):
        def run():
            try:
                fn(*args)
            except OSError as e:
                with self.lock:
                    self.errors.append("%s%r: %s" % (fn.__name__, args, e))
                self.stop.set()
        return threading.Thread(target=run)

    def wait_follower(self, names, deadline):
        """Until the follower shows every name (the writer made them first)."""
        while not all(os.path.exists(os.path.join(self.fmnt, n)) for n in names):
            if time.monotonic() > deadline:
                raise SystemExit("FAIL: the follower did not show %s within 60 s" % names)
            time.sleep(0.05)

    def main(self):
        deadline = time.monotonic() + 60
        if self.mode == "rename":
            for t in range(WRITERS):  # the name never holds an empty file, from the start
                self.replace(t, self.new_version(random.Random(self.seed * 100 + 90 + t)))
            self.wait_follower(["r%d" % t for t in range(WRITERS)], deadline)
            threads = [self.guard(self.writer_rename, t) for t in range(WRITERS)]
            threads += [self.guard(self.reader_rename, r) for r in range(READERS)]
        else:
            with open(os.path.join(self.wmnt, "t"), "wb") as f:
                f.write(self.new_version(random.Random(self.seed * 100 + 90)))
                os.fsync(f.fileno())
            self.wait_follower(["t"], deadline)
            threads = [self.guard(self.writer_truncate)]
            threads += [self.guard(self.reader_truncate, r) for r in range(READERS)]
        for th in threads:
            th.start()
        self.stop.wait(self.seconds)
        self.stop.set()
        for th in threads:
            th.join()
        print("   %s: %d versions written, %d reads (%d empty), %d stats, %d versions seen, %d bad"
              % (self.mode, self.written, self.reads, self.empty, self.stats, len(self.seen),
                 len(self.bad)), flush=True)
        ok = True
        if self.errors:
            print("FAIL: a call failed: %s" % "; ".join(self.errors))
            ok = False
        if self.bad:
            print("FAIL: %d reads were not one of the writer's states (SEED %d)" % (len(self.bad), self.seed))
            ok = False
        if len(self.seen) < 2:
            print("FAIL: the follower showed %d version(s): it did not follow" % len(self.seen))
            ok = False
        return 0 if ok else 1


def follow_manifests(fmnt):
    out = subprocess.run([os.environ["MEMWALFS"], "stats", "--raw", fmnt], check=True,
                         capture_output=True, text=True).stdout
    for line in out.splitlines():
        k, _, v = line.partition(" ")
        if k == "follow_manifests":
            return int(v.split()[0])
    raise SystemExit("FAIL: memwalfs stats %s shows no follow_manifests" % fmnt)


def removed(wmnt, fmnt, seed):
    """The removed mode (see the top): 0 or 1."""
    rnd = random.Random(seed)
    data = make_version(rnd, 1)
    tmp = os.path.join(wmnt, ".gone.tmp")
    with open(tmp, "wb") as f:  # the name shows only with its bytes
        f.write(data)
        os.fsync(f.fileno())
    os.rename(tmp, os.path.join(wmnt, "gone"))
    name = os.path.join(fmnt, "gone")
    deadline = time.monotonic() + 60
    while not os.path.exists(name):
        if time.monotonic() > deadline:
            raise SystemExit("FAIL: the follower did not show gone within 60 s")
        time.sleep(0.05)
    fd = os.open(name, os.O_RDONLY)
    try:
        if os.pread(fd, READ_ROOM, 0) != data:
            print("FAIL: gone does not read as written before its removal")
            return 1
        os.unlink(os.path.join(wmnt, "gone"))
        d = os.open(wmnt, os.O_RDONLY)
        os.fsync(d)
        os.close(d)
        while os.fstat(fd).st_nlink != 0:  # the follower applied the removal
            if time.monotonic() > deadline:
                raise SystemExit("FAIL: the follower did not apply the removal within 60 s")
            time.sleep(0.02)
        st = os.fstat(fd)
        got = os.pread(fd, READ_ROOM, 0)
        if st.st_size != len(data) or got != data:
            print("FAIL: the removed file, open on the follower: fstat %d bytes, read %s"
                  % (st.st_size, judge(got, {1: data}) or "a whole version"))
            return 1
        print("   removed: the open file keeps its last state (%d bytes, nlink 0)" % len(data))
        # the writer flushes (128 KiB MemTables, files written 10 at a time): the last state
        # stays readable across the follower's next installs (each keeps the view it
        # replaced), and reads fail with ESTALE once more installs than it keeps views of
        # came (an install with no entry before it keeps none and drops none: at most 30)
        m0 = follow_manifests(fmnt)
        i = 0
        kept = None  # installs after which the last state still read whole
        while True:
            n = follow_manifests(fmnt) - m0
            try:
                got = os.pread(fd, READ_ROOM, 0)
            except OSError as e:
                if e.errno != errno.ESTALE:
                    print("FAIL: after %d installs, a read of the removed file: %s (not ESTALE)"
                          % (n, e))
                    return 1
                break
            if got != data:
                print("FAIL: after %d installs the removed file reads %s" % (
                    n, judge(got, {1: data}) or "another version"))
                return 1
            if 1 <= n <= 3:
                kept = n
            if n > 30 or time.monotonic() > deadline + 120:
                print("FAIL: the removed file still reads after %d installs (docs/FOLLOWERS.md: "
                      "the follower keeps 4 views)" % n)
                return 1
            for _ in range(10):
                with open(os.path.join(wmnt, "fill%d" % i), "wb") as f:
                    f.write(b"x" * 100)
                i += 1
            dfd = os.open(wmnt, os.O_RDONLY)
            os.fsync(dfd)
            os.close(dfd)
            time.sleep(0.05)  # pace the writer: the follower polls every 20 ms
        if kept is None:
            print("FAIL: no read of the removed file came 1-3 installs after its removal")
            return 1
        print("   removed: its last state read whole after %d installs; ESTALE after %d "
              "(%d files written)" % (kept, n, i))
        return 0
    finally:
        os.close(fd)


if __name__ == "__main__":
    if len(sys.argv) != 6 or sys.argv[1] not in ("rename", "truncate", "removed"):
        sys.exit(__doc__)
    if sys.argv[1] == "removed":
        sys.exit(removed(sys.argv[2], sys.argv[3], int(sys.argv[4])))
    mode, wmnt, fmnt, seed, secs = sys.argv[1:]
    print("   %s: seed %s" % (mode, seed), flush=True)
    sys.exit(Run(mode, wmnt, fmnt, int(seed), float(secs)).main())
