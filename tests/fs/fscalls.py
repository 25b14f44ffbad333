#!/usr/bin/env python3
"""fscalls.py - system calls the shell cannot make, for the filesystem tests (through ctypes).

  fscalls.py rename SRC DST FLAGS...   renameat2(SRC, DST, flags); FLAGS: noreplace, exchange,
                                       whiteout; prints the errno name on failure (exit 1)
  fscalls.py handle-save PATH OUT      name_to_handle_at(PATH) into file OUT
  fscalls.py handle-open MNT IN        open_by_handle_at(MNT, handle in IN): prints "ino N"
                                       and then the file's bytes or a directory's sorted names;
                                       prints the errno name on failure (exit 1)
"""
import ctypes
import errno
import os
import sys

libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD = -100
MAX_HANDLE_SZ = 128
FLAGS = {"noreplace": 1, "exchange": 2, "whiteout": 4}


class FileHandle(ctypes.Structure):
    _fields_ = [("handle_bytes", ctypes.c_uint), ("handle_type", ctypes.c_int),
                ("f_handle", ctypes.c_ubyte * MAX_HANDLE_SZ)]


def fail():
    e = ctypes.get_errno()
    print(errno.errorcode.get(e, str(e)))
    sys.exit(1)


def main(argv):
    cmd = argv[1]
    if cmd == "rename":
        flags = 0
        for f in argv[4:]:
            flags |= FLAGS[f]
        if libc.renameat2(AT_FDCWD, argv[2].encode(), AT_FDCWD, argv[3].encode(), flags):
            fail()
    elif cmd == "handle-save":
        fh = FileHandle()
        fh.handle_bytes = MAX_HANDLE_SZ
        mount_id = ctypes.c_int()
        if libc.name_to_handle_at(AT_FDCWD, argv[2].encode(), ctypes.byref(fh),
                                  ctypes.byref(mount_id), 0):
            fail()
        with open(argv[3], "w") as f:
            f.write("%d %d %s\n" % (fh.handle_bytes, fh.handle_type,
                                    bytes(fh.f_handle[:fh.handle_bytes]).hex()))
    elif cmd == "handle-open":
        with open(argv[3]) as f:
            n, t, h = f.read().split()
        fh = FileHandle()
        fh.handle_bytes, fh.handle_type = int(n), int(t)
        for i, b in enumerate(bytes.fromhex(h)):
            fh.f_handle[i] = b
        mfd = os.open(argv[2], os.O_RDONLY | os.O_DIRECTORY)
        fd = libc.open_by_handle_at(mfd, ctypes.byref(fh), os.O_RDONLY)
        if fd < 0:
            fail()
        print("ino", os.fstat(fd).st_ino)
        if os.path.isdir("/proc/self/fd/%d" % fd):
            print(" ".join(sorted(os.listdir(fd))))
        else:
            sys.stdout.write(os.read(fd, 1 << 16).decode())
    else:
        sys.exit("unknown command " + cmd)


main(sys.argv)
