#!/usr/bin/env python3
"""alloc.py DIR run SEED | DIR check - fallocated ranges are allocation (issue 36, 6a).

run: the cases the issue names (fallocate 1 MiB; 5 GiB then a truncate to 1 MiB; with
KEEP_SIZE past the end), then a seeded random sequence of fallocate (with and without
KEEP_SIZE), writes, punch holes and truncates on one file of up to 64 MiB against a model: the
union of the bytes allocated and written, less those punched and truncated away. After every
operation (the file fsynced) st_blocks must be that union in 512-byte blocks, and at the end
the file's bytes must be the model's (allocated bytes read as zeros). The expected values, the
model's block counts and a hash of the bytes, go to DIR/../alloc.expect; check compares the
files with them again (after a remount).
"""
import ctypes
import hashlib
import os
import random
import sys

libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
KEEP, PUNCH = 1, 2
MiB = 1 << 20


def falloc(fd, mode, off, n):
    if libc.fallocate(fd, mode, off, n) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"fallocate({mode}, {off}, {n}): {os.strerror(e)}")


class Ranges:
    """A set of byte ranges, kept as sorted disjoint [a, b) pairs."""

    def __init__(self):
        self.r = []

    def add(self, a, b):
        out = []
        for x, y in self.r:
            if y < a or x > b:
                out.append((x, y))
            else:
                a, b = min(a, x), max(b, y)
        out.append((a, b))
        self.r = sorted(out)

    def remove(self, a, b):
        out = []
        for x, y in self.r:
            if y <= a or x >= b:
                out.append((x, y))
                continue
            if x < a:
                out.append((x, a))
            if y > b:
                out.append((b, y))
        self.r = out

    def total(self):
        return sum(y - x for x, y in self.r)


def blocks(n):
    return (n + 511) // 512


libc.statx.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_uint,
                       ctypes.c_char_p]
AT_EMPTY_PATH, AT_STATX_FORCE_SYNC, STATX_BLOCKS = 0x1000, 0x2000, 0x400


def stat_blocks(fd, fresh=False):
    """st_blocks after an fsync; fresh: asked of the daemon (AT_STATX_FORCE_SYNC), not taken
    from the kernel's attribute cache, which a write through the writeback cache leaves as
    it was for up to the attribute timeout."""
    os.fsync(fd)
    if not fresh:
        return os.fstat(fd).st_blocks
    buf = ctypes.create_string_buffer(256)
    if libc.statx(fd, b"", AT_EMPTY_PATH | AT_STATX_FORCE_SYNC, STATX_BLOCKS, buf) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    return int.from_bytes(buf.raw[48:56], "little")  # struct statx: stx_blocks at 48


def named_cases(d, expect):
    fails = []
    path = f"{d}/one_mib"
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    falloc(fd, 0, 0, MiB)
    got = stat_blocks(fd)
    os.close(fd)
    print(f"  fallocate 1 MiB: st_blocks {got} (want {blocks(MiB)})")
    if got != blocks(MiB):
        fails.append(f"fallocate 1 MiB: st_blocks {got}, want {blocks(MiB)}")
    expect.append(("one_mib", blocks(MiB), None))
    sv = os.statvfs(d)
    big = min(5 << 30, sv.f_bavail * sv.f_frsize // 2 // MiB * MiB)  # 5 GiB unless short
    path = f"{d}/five_gib"
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    falloc(fd, 0, 0, big)
    got5 = stat_blocks(fd)
    os.ftruncate(fd, MiB)
    got = stat_blocks(fd)
    os.close(fd)
    print(f"  fallocate {big} bytes: st_blocks {got5}; truncated to 1 MiB: {got}")
    if got5 != blocks(big) or got != blocks(MiB):
        fails.append(f"fallocate {big} then truncate to 1 MiB: st_blocks {got5} then {got}, "
                     f"want {blocks(big)} then {blocks(MiB)}")
    expect.append(("five_gib", blocks(MiB), None))
    path = f"{d}/keep_size"
    fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o644)
    os.write(fd, b"x" * 1000)
    falloc(fd, KEEP, 4 * MiB, MiB)
    got, size = stat_blocks(fd), os.fstat(fd).st_size
    os.close(fd)
    want = blocks(1000) + blocks(MiB)
    print(f"  1000 bytes and 1 MiB allocated past the end (KEEP_SIZE): size {size}, "
          f"st_blocks {got} (want {want})")
    if got != want or size != 1000:
        fails.append(f"KEEP_SIZE past the end: size {size}, st_blocks {got}, want 1000, {want}")
    expect.append(("keep_size", want, None))
    return fails


def random_case(d, seed, expect):
    rng = random.Random(seed)
    limit = 64 * MiB
    path = f"{d}/random"
    fd = os.open(path, os.O_CREAT | os.O_RDWR | os.O_TRUNC, 0o644)
    model = bytearray()
    held = Ranges()
    fails = []
    for step in range(200):
        kind = rng.choice(["falloc", "falloc_keep", "write", "write", "punch", "truncate"])
        # whole pages: the writeback cache writes whole pages back, and the zeros of a
        # partly written page are then stored bytes (not a question of allocation)
        unit = rng.choice([4096, 65536, MiB])
        off = rng.randrange(0, limit // unit) * unit
        n = rng.randrange(1, (4 * MiB) // unit + 1) * unit
        n = min(n, limit - off) or unit
        if kind in ("falloc", "falloc_keep"):
            falloc(fd, KEEP if kind == "falloc_keep" else 0, off, n)
            held.add(off, off + n)
            if kind == "falloc" and off + n > len(model):
                model.extend(bytes(off + n - len(model)))
        elif kind == "write":
            data = bytes(rng.randrange(1, 256) for _ in range(min(n, 256))) * (n // 256 + 1)
            data = data[:n]
            os.pwrite(fd, data, off)
            if off + n > len(model):
                model.extend(bytes(off + n - len(model)))
            model[off:off + n] = data
            held.add(off, off + n)
        elif kind == "punch":
            falloc(fd, PUNCH | KEEP, off, n)
            end = min(off + n, len(model))
            if off < end:
                model[off:end] = bytes(end - off)
            held.remove(off, off + n)
        else:
            size = off
            os.ftruncate(fd, size)
            if size < len(model):
                del model[size:]
                held.remove(size, 1 << 62)
            else:
                model.extend(bytes(size - len(model)))
        got = stat_blocks(fd, True)
        if got != blocks(held.total()):
            fails.append(f"step {step} ({kind} {off} {n}): st_blocks {got}, want "
                         f"{blocks(held.total())} (allocated {held.total()} bytes)")
            break
    os.fsync(fd)
    data = os.pread(fd, len(model) + 1, 0)
    os.close(fd)
    if data != bytes(model):
        fails.append(f"the file's {len(data)} bytes differ from the model's {len(model)}")
    print(f"  seed {seed}: 200 operations, {held.total()} bytes allocated at the end, "
          f"st_blocks {got}, size {len(model)}")
    expect.append(("random", got, hashlib.sha256(model).hexdigest()))
    return fails


def main():
    d = sys.argv[1]
    expect_path = f"{os.path.dirname(os.path.abspath(d))}/alloc.expect"
    if sys.argv[2] == "check":
        bad = 0
        for line in open(expect_path):
            name, want, digest = line.split()
            st = os.stat(f"{d}/{name}")
            if st.st_blocks != int(want):
                print(f"  {name}: st_blocks {st.st_blocks} after the remount, {want} before")
                bad += 1
            if digest != "-":
                with open(f"{d}/{name}", "rb") as f:
                    if hashlib.sha256(f.read()).hexdigest() != digest:
                        print(f"  {name}: its bytes changed across the remount")
                        bad += 1
        print(f"  after the remount: {bad} differences")
        return 1 if bad else 0
    seed = int(sys.argv[3])
    expect = []
    fails = named_cases(d, expect) + random_case(d, seed, expect)
    with open(expect_path, "w") as f:
        for name, want, digest in expect:
            f.write(f"{name} {want} {digest or '-'}\n")
    for m in fails:
        print("  " + m)
    return 1 if fails else 0


sys.exit(main())
