#!/usr/bin/env python3
"""killpriv.py REF MNT USER_UID USER_GID OUT|--check OUT - the set-id bits after a change by
an unprivileged user, against the kernel's own filesystem (killpriv.sh runs it).

Every case makes a file on both REF (a directory of a kernel filesystem, ext4 or tmpfs) and MNT
(the memwalfs mount) as root: 8 KiB, a mode with set-user-ID and/or set-group-ID, group root or
the user's group; then a child process with the user's uid and gid (no supplementary groups, no
capabilities) or root changes it (a write, an append, a truncate down and up, fallocate with and
without KEEP_SIZE, a punch hole, open(O_TRUNC), copy_file_range into it, a chmod or chown to the
same mode or owner; also as the file's owner), and the exit codes and modes of the two files
must be equal: what the kernel does on its own filesystem is the expected result,
nothing is written down here. The cases and the modes seen are written to OUT (one line each);
--check OUT compares MNT's files with them again (after a remount).
"""
import ctypes
import os
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE = 1, 2


def falloc(fd, mode, off, n):
    if libc.fallocate(fd, mode, off, n) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))


def op_append(p, src):
    fd = os.open(p, os.O_WRONLY | os.O_APPEND)
    os.write(fd, b"appended")
    os.close(fd)


def op_write(p, src):
    fd = os.open(p, os.O_WRONLY)
    os.pwrite(fd, b"x" * 100, 1000)
    os.close(fd)


def op_trunc_down(p, src):
    os.truncate(p, 1)


def op_trunc_up(p, src):
    fd = os.open(p, os.O_WRONLY)
    os.ftruncate(fd, 100000)
    os.close(fd)


def op_fallocate(p, src):
    fd = os.open(p, os.O_WRONLY)
    falloc(fd, 0, 0, 65536)
    os.close(fd)


def op_fallocate_keep(p, src):
    fd = os.open(p, os.O_WRONLY)
    falloc(fd, FALLOC_FL_KEEP_SIZE, 65536, 65536)
    os.close(fd)


def op_punch(p, src):
    fd = os.open(p, os.O_WRONLY)
    falloc(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096)
    os.close(fd)


def op_otrunc(p, src):
    os.close(os.open(p, os.O_WRONLY | os.O_TRUNC))


def op_copy_range(p, src):
    fi = os.open(src, os.O_RDONLY)
    fo = os.open(p, os.O_WRONLY)
    os.copy_file_range(fi, fo, 4096, 0, 0)
    os.close(fi)
    os.close(fo)


def op_chmod(p, src):
    os.chmod(p, os.stat(p).st_mode & 0o7777)  # set the same mode again


def op_chown(p, src):
    st = os.stat(p)
    os.chown(p, st.st_uid, st.st_gid)  # the same owner again (the set-id bits still go)


OPS = [op_append, op_write, op_trunc_down, op_trunc_up, op_fallocate, op_fallocate_keep,
       op_punch, op_otrunc, op_copy_range, op_chmod, op_chown]
MODES = [0o2666, 0o4666, 0o6666, 0o2676, 0o6676, 0o2646]


def as_user(uid, gid, fn, *args):
    """Run fn(*args) in a child with uid/gid (no groups, no capabilities); its errno or 0."""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            if uid != 0:
                os.setgroups([])
                os.setresgid(gid, gid, gid)
                os.setresuid(uid, uid, uid)
            fn(*args)
        except OSError as e:
            code = e.errno or 1
        except BaseException:
            code = 255
        os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


def make(path, mode, uid, gid):
    with open(path, "wb") as f:
        f.write(os.urandom(8192))
    os.chown(path, uid, gid)
    os.chmod(path, mode)


def main():
    if sys.argv[1] == "--check":
        mnt, out = sys.argv[2], sys.argv[3]
        bad = 0
        for line in open(out):
            name, want = line.split()
            got = os.stat(f"{mnt}/{name}").st_mode & 0o7777
            if got != int(want, 8):
                print(f"  {name}: mode {got:o} after the remount, {want} before")
                bad += 1
        print(f"  {sum(1 for _ in open(out))} files checked after the remount, {bad} differ")
        return 1 if bad else 0
    ref, mnt, uid, gid, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), \
        sys.argv[5]
    for d in (ref, mnt):
        make(f"{d}/src", 0o644, 0, 0)
    lines, bad, killed, n = [], 0, 0, 0
    for op in OPS:
        for mode in MODES:
            for who, fuid, fgid in (("user", 0, 0), ("member", 0, gid), ("owner", uid, 0),
                                    ("root", 0, 0)):
                n += 1
                name = f"{op.__name__[3:]}.{mode:o}.{who}"
                res = []
                for d in (ref, mnt):
                    make(f"{d}/{name}", mode, fuid, fgid)
                    rc = as_user(0 if who == "root" else uid, gid, op, f"{d}/{name}",
                                 f"{d}/src")
                    res.append((rc, os.stat(f"{d}/{name}").st_mode & 0o7777))
                if res[0] != res[1]:
                    bad += 1
                    print(f"  {name}: kernel filesystem (exit, mode) {res[0][0]}, "
                          f"{res[0][1]:o}; memwalfs {res[1][0]}, {res[1][1]:o}")
                killed += res[0][1] != mode
                lines.append(f"{name} {res[1][1]:o}\n")
    with open(out, "w") as f:
        f.writelines(lines)
    print(f"  {n} cases, {killed} of them drop a set-id bit on the kernel's filesystem, "
          f"{bad} differ on memwalfs")
    return 1 if bad else 0


sys.exit(main())
