#!/usr/bin/env python3
"""tests/fs/noio.py - the workload of noio.sh: many directories of small files with xattrs,
then stat, ls -l, open and read, getxattr, setxattr, removexattr, unlink, rmdir and a rename
over an empty directory from several processes at once, against a model of what must remain.

  noio.py create MNT NDIRS NFILES          make d000.. with f000.. (bytes and xattrs)
  noio.py work MNT NDIRS NFILES GROUP NPROC SEED
                                           GROUP (a or b: the even or the odd directories)
                                           worked on by NPROC processes, plus one that lists
                                           and stats everything meanwhile
  noio.py check MNT NDIRS NFILES GROUPS    the tree equals the model after GROUPS (a, ab)

Directory i: i % 5 == 0 is emptied and removed (an rmdir of it while it has entries first
fails with ENOTEMPTY); i % 5 == 1 loses its even files and is renamed over the empty
directory e<i>; the others lose their even files and the odd ones their xattr user.a.  Every
kept file gets user.b.  The order of the directories is shuffled by SEED."""
import errno
import multiprocessing
import os
import random
import sys


def content(i, j):
    return ("%d/%d\n" % (i, j)).encode() * (1 + j % 3)


def dname(i):
    return "d%03d" % i


def fname(j):
    return "f%03d" % j


def create(mnt, nd, nf):
    for i in range(nd):
        d = os.path.join(mnt, dname(i))
        os.mkdir(d)
        if i % 5 == 1:
            os.mkdir(os.path.join(mnt, "e%03d" % i))
        for j in range(nf):
            p = os.path.join(d, fname(j))
            with open(p, "wb") as f:
                f.write(content(i, j))
            os.setxattr(p, "user.a", b"%d/%d" % (i, j))
        os.setxattr(d, "user.dir", b"%d" % i)


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def read_dir(mnt, i, nf):
    """stat, ls -l, read and getxattr of every file of directory i, as created."""
    d = os.path.join(mnt, dname(i))
    names = sorted(os.listdir(d))
    if names != [fname(j) for j in range(nf)]:
        fail("%s lists %d names, not the %d created" % (d, len(names), nf))
    for n in names:
        os.lstat(os.path.join(d, n))  # ls -l
    for j in range(nf):
        p = os.path.join(d, fname(j))
        if os.stat(p).st_size != len(content(i, j)):
            fail("%s: size %d" % (p, os.stat(p).st_size))
        with open(p, "rb") as f:
            if f.read() != content(i, j):
                fail("%s: wrong bytes" % p)
        if os.getxattr(p, "user.a") != b"%d/%d" % (i, j):
            fail("%s: wrong user.a" % p)


def change_dir(mnt, i, nf):
    d = os.path.join(mnt, dname(i))
    for j in range(nf):
        p = os.path.join(d, fname(j))
        if j % 2 == 0:
            os.unlink(p)
            continue
        os.setxattr(p, "user.b", b"b%d" % j)
        if i % 5 not in (0, 1):
            os.removexattr(p, "user.a")
    if i % 5 == 0:
        try:
            os.rmdir(d)
            fail("rmdir of %s with entries succeeded" % d)
        except OSError as e:
            if e.errno != errno.ENOTEMPTY:
                raise
        for j in range(1, nf, 2):
            os.unlink(os.path.join(d, fname(j)))
        os.rmdir(d)
    elif i % 5 == 1:
        os.rename(d, os.path.join(mnt, "e%03d" % i))


def worker(mnt, dirs, nf):
    try:
        for i in dirs:
            read_dir(mnt, i, nf)
            change_dir(mnt, i, nf)
    except OSError as e:
        fail("%s" % e)


def lister(mnt, stop):
    """ls -lR of everything while the workers run; names vanish under it."""
    while not stop.is_set():
        for root, dirs, files in os.walk(mnt):
            for n in dirs + files:
                try:
                    os.lstat(os.path.join(root, n))
                    os.listxattr(os.path.join(root, n))
                except FileNotFoundError:
                    pass


def work(mnt, nd, nf, group, nproc, seed):
    mine = [i for i in range(nd) if i % 2 == (0 if group == "a" else 1)]
    random.Random(seed).shuffle(mine)
    stop = multiprocessing.Event()
    ls = multiprocessing.Process(target=lister, args=(mnt, stop))
    ls.start()
    ps = [multiprocessing.Process(target=worker, args=(mnt, mine[w::nproc], nf))
          for w in range(nproc)]
    for p in ps:
        p.start()
    for p in ps:
        p.join()
    stop.set()
    ls.join()
    if any(p.exitcode for p in ps) or ls.exitcode:
        fail("a process failed")


def model(nd, nf, groups):
    """{path: (bytes or None for a directory, {xattr: value})} of the tree after groups."""
    m = {}
    for i in range(nd):
        done = ("a" if i % 2 == 0 else "b") in groups
        if i % 5 == 1:
            m["e%03d" % i] = (None, {"user.dir": b"%d" % i} if done else {})
            if done:
                d = "e%03d" % i
            else:
                d = dname(i)
                m[d] = (None, {"user.dir": b"%d" % i})
        else:
            if done and i % 5 == 0:
                continue
            d = dname(i)
            m[d] = (None, {"user.dir": b"%d" % i})
        for j in range(nf):
            if done and j % 2 == 0:
                continue
            x = {}
            if not done or i % 5 in (0, 1):
                x["user.a"] = b"%d/%d" % (i, j)
            if done:
                x["user.b"] = b"b%d" % j
            m[d + "/" + fname(j)] = (content(i, j), x)
    return m


def check(mnt, nd, nf, groups):
    got = {}
    for root, dirs, files in os.walk(mnt):
        for n in dirs + files:
            p = os.path.join(root, n)
            rel = os.path.relpath(p, mnt)
            x = {a: os.getxattr(p, a) for a in os.listxattr(p)}
            if n in files:
                with open(p, "rb") as f:
                    got[rel] = (f.read(), x)
            else:
                got[rel] = (None, x)
    want = model(nd, nf, groups)
    if got != want:
        extra = sorted(set(got) - set(want))[:5]
        missing = sorted(set(want) - set(got))[:5]
        wrong = sorted(k for k in set(got) & set(want) if got[k] != want[k])[:5]
        fail("the tree differs from the model: extra %s, missing %s, different %s" %
             (extra, missing, wrong))
    print("   %d names as the model says" % len(got))


def main():
    cmd, mnt = sys.argv[1], sys.argv[2]
    nd, nf = int(sys.argv[3]), int(sys.argv[4])
    if cmd == "create":
        create(mnt, nd, nf)
    elif cmd == "work":
        work(mnt, nd, nf, sys.argv[5], int(sys.argv[6]), int(sys.argv[7]))
    else:
        check(mnt, nd, nf, sys.argv[5])


if __name__ == "__main__":
    main()
