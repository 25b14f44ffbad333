#!/usr/bin/env python3
"""regions_load.py - the writers and checks of the region tests (regions4.sh, regions_kill.sh).

  work DIR SEED OPS MANIFEST   OPS random operations inside DIR (one region): creates, appends,
                               overwrites, renames inside DIR (also into subdirectories),
                               mkdir, unlink, lines appended to DIR/journal; every change is
                               fsynced (a file, or the directory of a rename or unlink) before
                               the next one. MANIFEST gets the files as the operations left
                               them (the format of `listing`, paths relative to DIR's parent).
                               The operations are a function of SEED.
  journal FILE ACKS [STOP]     append "line N" to FILE, fsync after each, until a write or
                               fsync fails or the file STOP exists; ACKS (outside the mount)
                               gets the number of lines acknowledged, rewritten after every
                               fsync that returned 0. Exit 0 when stopped by STOP, 3 when by
                               an error (its errno name on stderr).
  check-journal FILE ACKS      FILE holds "line 0".."line N-1" for an N >= the number in ACKS
                               (every acknowledged line; later ones a prefix in order)
  scan ROOT STOP               list and read everything under ROOT again and again until the file
                               STOP exists (a reader beside the writers; entries that vanish
                               under it are skipped); prints the number of scans
  listing ROOT [SUB...]        one line per entry under ROOT (or only under ROOT/SUB...),
                               sorted: "d PATH" for a directory, "f PATH SIZE SHA256" for a
                               file, "l PATH TARGET" for a symlink
  same SEC MANIFEST ROOT...    wait up to SEC s until the listing of every ROOT is the union
                               of the MANIFEST files (a comma-separated list), printing how
                               long it took; else the differences and exit 1
"""
import errno
import hashlib
import os
import random
import sys
import time


def fsync_path(path, flags=os.O_RDONLY):
    fd = os.open(path, flags)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_file(path, data, append=False, offset=None):
    flags = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if append else 0)
    if offset is None and not append:
        flags |= os.O_TRUNC
    fd = os.open(path, flags, 0o644)
    try:
        if offset is not None:
            os.pwrite(fd, data, offset)
        else:
            os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def listing(root, subs=()):
    out = []
    tops = [os.path.join(root, s) for s in subs] if subs else [root]
    for top in tops:
        if subs:
            out.append("d " + os.path.relpath(top, root))
        for d, dirs, files in os.walk(top):
            dirs.sort()
            for n in sorted(dirs + files):
                p = os.path.join(d, n)
                rel = os.path.relpath(p, root)
                if os.path.islink(p):
                    out.append("l %s %s" % (rel, os.readlink(p)))
                elif os.path.isdir(p):
                    out.append("d " + rel)
                else:
                    with open(p, "rb") as f:
                        b = f.read()
                    out.append("f %s %d %s" % (rel, len(b), hashlib.sha256(b).hexdigest()))
    return sorted(out)


def work(top, seed, ops, manifest):
    rng = random.Random(seed)
    name = os.path.basename(top)
    files = {}  # path relative to top -> bytes
    dirs = [""]
    n = 0

    def new_name(prefix):
        nonlocal n
        n += 1
        d = rng.choice(dirs)
        return os.path.join(d, "%s%d" % (prefix, n))

    def data():
        size = rng.choice((0, 1, rng.randint(1, 4096), rng.randint(4096, 70000)))
        if rng.random() < 0.05:
            size = rng.randint(70000, 400000)
        return rng.randbytes(size)

    jlines = 0
    for _ in range(ops):
        r = rng.random()
        if r < 0.25 or not [f for f in files if f != "journal"]:
            p, b = new_name("f"), data()
            write_file(os.path.join(top, p), b)
            files[p] = b
        elif r < 0.40:
            p = rng.choice(sorted(f for f in files if f != "journal"))
            b = rng.randbytes(rng.randint(1, 9000))
            write_file(os.path.join(top, p), b, append=True)
            files[p] += b
        elif r < 0.50:
            p = rng.choice(sorted(f for f in files if f != "journal"))
            b = rng.randbytes(rng.randint(1, 9000))
            off = rng.randint(0, len(files[p]))
            write_file(os.path.join(top, p), b, offset=off)
            old = files[p]
            files[p] = old[:off] + b + old[off + len(b):]
        elif r < 0.65:
            p = rng.choice(sorted(f for f in files if f != "journal"))
            q = new_name("m")
            os.rename(os.path.join(top, p), os.path.join(top, q))
            fsync_path(os.path.dirname(os.path.join(top, q)))
            files[q] = files.pop(p)
        elif r < 0.72:
            d = new_name("d")
            os.mkdir(os.path.join(top, d))
            fsync_path(os.path.dirname(os.path.join(top, d)))
            dirs.append(d)
        elif r < 0.77:
            p = rng.choice(sorted(f for f in files if f != "journal"))
            os.unlink(os.path.join(top, p))
            fsync_path(os.path.dirname(os.path.join(top, p)))
            del files[p]
        else:
            k = rng.randint(1, 5)
            fd = os.open(os.path.join(top, "journal"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            for _ in range(k):
                os.write(fd, ("%s line %d\n" % (name, jlines)).encode())
                os.fsync(fd)
                jlines += 1
            os.close(fd)
            files["journal"] = "".join("%s line %d\n" % (name, i) for i in range(jlines)).encode()
    out = ["d " + name] + ["d " + os.path.join(name, d) for d in dirs if d]
    for p, b in files.items():
        out.append("f %s %d %s" % (os.path.join(name, p), len(b), hashlib.sha256(b).hexdigest()))
    with open(manifest, "w") as f:
        f.write("\n".join(sorted(out)) + "\n")
    print("   %s: %d operations, %d files, %d directories, %d journal lines (seed %d)"
          % (name, ops, len(files), len(dirs) - 1, jlines, seed))


def journal(path, acks, stop):
    i = 0
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        while not (stop and os.path.exists(stop)):
            os.write(fd, ("line %d\n" % i).encode())
            os.fsync(fd)
            i += 1
            with open(acks + ".tmp", "w") as f:
                f.write("%d\n" % i)
            os.rename(acks + ".tmp", acks)
    except OSError as e:
        print("journal %s: %d lines acknowledged, then %s" % (path, i, errno.errorcode.get(e.errno, e.errno)),
              file=sys.stderr)
        return 3
    finally:
        try:
            os.close(fd)
        except OSError:
            pass
    print("journal %s: %d lines acknowledged, stopped" % (path, i))
    return 0


def check_journal(path, acks):
    want = int(open(acks).read()) if os.path.exists(acks) else 0
    lines = open(path, "rb").read().decode().split("\n")
    tail = lines.pop()
    if tail:
        print("FAIL: %s ends in a torn line %r" % (path, tail))
        return 1
    for i, l in enumerate(lines):
        if l != "line %d" % i:
            print("FAIL: %s line %d is %r" % (path, i, l))
            return 1
    if len(lines) < want:
        print("FAIL: %s has %d lines, %d were acknowledged" % (path, len(lines), want))
        return 1
    print("   %s: %d lines, %d acknowledged: ok" % (path, len(lines), want))
    return 0


def same(sec, manifests, roots):
    want = set()
    for m in manifests.split(","):
        want |= set(l for l in open(m).read().split("\n") if l)
    want = sorted(want)
    t0 = time.monotonic()
    while True:
        got = {}
        for r in roots:
            try:
                got[r] = listing(r)
            except OSError as e:  # a file renamed or grown under the walk: look again
                got[r] = ["(error %s)" % e]
        if all(g == want for g in got.values()):
            print("   %d mounts show the same %d entries after %.1f s"
                  % (len(roots), len(want), time.monotonic() - t0))
            return 0
        if time.monotonic() - t0 > sec:
            break
        time.sleep(0.2)
    for r, g in got.items():
        if g != want:
            missing = sorted(set(want) - set(g))
            extra = sorted(set(g) - set(want))
            print("FAIL: %s differs after %d s: missing %s; unexpected %s"
                  % (r, sec, missing[:8], extra[:8]))
    return 1


def scan(root, stop):
    n = 0
    while not os.path.exists(stop) and os.path.ismount(root):
        try:
            listing(root)
        except OSError as e:
            if e.errno not in (errno.ENOENT, errno.ESTALE):
                raise
        n += 1
        time.sleep(0.05)  # a reader, not a CPU burner: the writers share 2 cores with it
    print("   %s: %d scans beside the writers" % (root, n))
    return 0


def main(a):
    if len(a) == 5 and a[0] == "work":
        return work(a[1], int(a[2]), int(a[3]), a[4])
    if len(a) in (3, 4) and a[0] == "journal":
        return journal(a[1], a[2], a[3] if len(a) == 4 else None)
    if len(a) == 3 and a[0] == "check-journal":
        return check_journal(a[1], a[2])
    if len(a) == 3 and a[0] == "scan":
        return scan(a[1], a[2])
    if len(a) >= 2 and a[0] == "listing":
        print("\n".join(listing(a[1], a[2:])))
        return 0
    if len(a) >= 4 and a[0] == "same":
        return same(float(a[1]), a[2], a[3:])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]) or 0)
