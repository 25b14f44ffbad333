#!/usr/bin/env bash
# tests/fs/scenarios.sh MEMWALFS BACKEND - user scenarios through a real mount, each checked
# while mounted AND again after a remount ("memwalfs umount" + mount), with and without the
# kernel writeback cache (--no-writeback-cache). Most are about open(O_TRUNC) (issue 9, part 0:
# the truncation was lost at remount, and old bytes showed where a gap should read zeros).
#
# The framework. A scenario is a function sc_NAME STAGE DIR REF, called with STAGE "prep"
# (create the files it starts from) and then "act" (do what a user or program does, write the
# expected bytes of every file to reference files under REF, in $WORK, and register checks).
# DIR is the scenario's own directory in the mount. Each cache mode runs every scenario twice:
#   hot   prep and act in one mount (old bytes still in the page cache or the write buffer),
#   cold  prep in one mount, act in the next (old bytes come from the store, dentries cold).
# The registered checks (expect_file: stat size, cmp of a buffered read, and an O_DIRECT read
# that bypasses the page cache, so the daemon's view is checked too; expect_zeros: a gap reads
# as zeros; expect_newer: mtime and ctime moved; expect_absent) run while mounted, after
# "memwalfs umount" and a new mount, after a kill -9 of the daemon (the crash round: O_TRUNC +
# fsync in processes that keep the files open; memwalfs fsck --deep before the remount and
# fsck after it) and once more at a last, read-only mount (where O_TRUNC must fail with EROFS).
# Each check set reports every scenario by name; a failure names the scenario (MODE/SET/NAME),
# when it failed and what differs; the run goes on, so one run shows every failing scenario,
# and the test fails at the end with each failing scenario listed once.
#
# Scenarios: O_TRUNC of a 3 MiB file with buffered writes, alone, with O_RDONLY, with O_DIRECT;
# while another process reads the file through mmap (new bytes within the new size, zeros to
# the page end, SIGBUS past it) or has dirtied it through mmap; shell redirection (echo >, >>,
# : >, cat >); O_TRUNC then writes past the new end, buffered and O_DIRECT, and then ftruncate
# back up (gaps read zeros); a reader holding an fd (pread sees the new bytes and the new end);
# a writer holding an fd with unflushed bytes (they never come back); logrotate copytruncate
# with an O_APPEND logger and with a logger writing at its offset; O_CREAT|O_TRUNC of an
# existing file; O_TRUNC of an empty and of a hole-only file; mtime/ctime; an editor's
# save-by-rename and vim-style backups (rename, copy) while the old file is held open; vim
# itself when installed (it rewrites in place with ftruncate, not O_TRUNC).
#
# Precise system calls come from a small python3 helper (py io PATH FLAGS OPS..., written
# below): O_TRUNC, O_DIRECT with page-aligned buffers (mmap), mmap of the file, and processes
# that hold a file open across another process's O_TRUNC ("holders", synchronised with
# CTL.ready / CTL.go files in $WORK).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
mnt=$WORK/mnt
MiB=1048576
OLD=$((3 * MiB + 777)) # the size of a file before it is truncated: 4 chunks, the last partial
A=$WORK/A              # old bytes
B=$WORK/B              # new bytes
head -c $((8 * MiB)) /dev/urandom >"$A"
head -c $((8 * MiB)) /dev/urandom >"$B"
head -c $((3 * MiB / 2)) "$B" | base64 -w 76 >"$WORK/T" # 2 MiB of text for vim
CHECKS=$WORK/checks     # scenario TAB kind TAB args (TAB separated)
FAILURES=$WORK/failures # one line per failure
HOLDERS=$WORK/holders   # pids of holder processes, killed if a scenario leaves one behind
: >"$CHECKS"
: >"$FAILURES"
: >"$HOLDERS"

cat >"$WORK/sc.py" <<'EOF'
# sc.py - precise system calls for scenarios.sh.
#   io PATH FLAGS OP...   open PATH with FLAGS (comma list of rdonly wronly rdwr trunc creat
#                         direct append), run the OPs in order, close. OPs:
#     w:OFF:SRC:SOFF:LEN  pwrite LEN bytes of file SRC (from SOFF) at OFF (aligned buffer)
#     a:SRC:SOFF:LEN      write at the file position (O_APPEND: at the end)
#     seekend             lseek to the end
#     ft:LEN              ftruncate
#     fsync
#     pr:OFF:LEN:OUT      pread up to LEN bytes at OFF (short at the end) into the file OUT
#     mm:LEN[:rw]         mmap LEN bytes of the file, MAP_SHARED, read-only or read-write
#     mtouch              read one byte of every page of the mapping (fault them all in)
#     mr:OFF:LEN:OUT      copy LEN bytes of the mapping at OFF into the file OUT
#     mw:OFF:SRC:SOFF:LEN store LEN bytes of SRC into the mapping at OFF (dirty, no msync)
#     mbus:OFF            touching the mapping at OFF (beyond the end) must raise SIGBUS
#     seek:OUT            write "SEEK_DATA-from-0 SEEK_HOLE-from-0 size" (or the error) to OUT
#     hold:CTL            create CTL.ready, wait (up to 120 s) for CTL.go
#   checks CHECKS SCOPE ROOT  run the registered checks of scenarios under SCOPE that need
#                         precise calls (O_DIRECT read of expected files, gaps, times)
#   times PATH            print mtime_ns ctime_ns
#   newer PATH NS         mtime and ctime are later than NS
import mmap, os, resource, signal, sys, time

PAGE = mmap.PAGESIZE
FLAGS = dict(rdonly=os.O_RDONLY, wronly=os.O_WRONLY, rdwr=os.O_RDWR, trunc=os.O_TRUNC,
             creat=os.O_CREAT, direct=os.O_DIRECT, append=os.O_APPEND)


def die(msg):
    sys.stderr.write(msg + "\n")
    sys.exit(1)


def src_bytes(src, soff, n):
    with open(src, "rb") as f:
        f.seek(soff)
        b = f.read(n)
    if len(b) != n:
        die(f"{src}: short source")
    return b


def aligned(n):
    return mmap.mmap(-1, max(PAGE, (n + PAGE - 1) // PAGE * PAGE))


def put_all(fn, data, direct):
    n = len(data)
    if direct:
        buf = aligned(n)
        buf[:n] = data
        data = memoryview(buf)[:n]
    else:
        data = memoryview(data)
    done = 0
    while done < n:
        done += fn(data[done:], done)


def io(path, flags, ops):
    names = flags.split(",")
    fl = 0
    for f in names:
        fl |= FLAGS[f]
    direct = "direct" in names
    fd = os.open(path, fl, 0o644)
    m = None
    for op in ops:
        a = op.split(":")
        k = a[0]
        if k == "w":
            off = int(a[1])
            put_all(lambda d, done: os.pwrite(fd, d, off + done),
                    src_bytes(a[2], int(a[3]), int(a[4])), direct)
        elif k == "a":
            put_all(lambda d, done: os.write(fd, d), src_bytes(a[1], int(a[2]), int(a[3])), direct)
        elif k == "seekend":
            os.lseek(fd, 0, os.SEEK_END)
        elif k == "ft":
            os.ftruncate(fd, int(a[1]))
        elif k == "fsync":
            os.fsync(fd)
        elif k == "pr":
            off, n, out = int(a[1]), int(a[2]), a[3]
            parts, got = [], 0
            while got < n:
                b = os.pread(fd, min(n - got, 1 << 20), off + got)
                if not b:
                    break
                parts.append(b)
                got += len(b)
            with open(out, "wb") as f:
                f.write(b"".join(parts))
        elif k == "mm":
            prot = mmap.PROT_READ | (mmap.PROT_WRITE if len(a) > 2 and a[2] == "rw" else 0)
            m = mmap.mmap(fd, int(a[1]), mmap.MAP_SHARED, prot)
        elif k == "mtouch":
            s = 0
            for o in range(0, len(m), PAGE):
                s += m[o]
        elif k == "mr":
            off, n = int(a[1]), int(a[2])
            with open(a[3], "wb") as f:
                f.write(m[off:off + n])
        elif k == "mw":
            off, n = int(a[1]), int(a[4])
            m[off:off + n] = src_bytes(a[2], int(a[3]), n)
        elif k == "mbus":
            off = int(a[1])
            pid = os.fork()
            if pid == 0:
                resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
                signal.signal(signal.SIGBUS, signal.SIG_DFL)
                m[off]
                os._exit(0)
            _, st = os.waitpid(pid, 0)
            if not (os.WIFSIGNALED(st) and os.WTERMSIG(st) == signal.SIGBUS):
                die(f"touching the mapping at {off}, past the end of the file, gave status "
                    f"{st}, not SIGBUS")
        elif k == "seek":
            try:
                r = f"{os.lseek(fd, 0, os.SEEK_DATA)} {os.lseek(fd, 0, os.SEEK_HOLE)}"
            except OSError as e:
                r = e.strerror
            with open(a[1], "w") as f:
                f.write(f"{r} {os.fstat(fd).st_size}\n")
        elif k == "hold":
            open(a[1] + ".ready", "w").close()
            end = time.time() + 120
            while not os.path.exists(a[1] + ".go"):
                if time.time() > end:
                    die(f"{a[1]}: no go within 120 s")
                time.sleep(0.01)
        else:
            die("unknown op " + op)
    if m is not None:
        m.close()
    os.close(fd)


class Mismatch(Exception):
    pass


def cmpdirect(path, ref):
    want = open(ref, "rb").read()
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    buf, off, got = aligned(1 << 20), 0, []
    try:
        while True:
            n = os.preadv(fd, [buf], off)
            if n <= 0:
                break
            got.append(buf[:n])
            off += n
    finally:
        os.close(fd)
    got = b"".join(got)
    if got != want:
        i = next((i for i in range(min(len(got), len(want))) if got[i] != want[i]),
                 min(len(got), len(want)))
        raise Mismatch(f"O_DIRECT read ({len(got)} bytes) differs from the reference "
                       f"({len(want)} bytes) at offset {i}")


def zeros(path, off, n):
    with open(path, "rb") as f:
        f.seek(off)
        b = f.read(n)
    if len(b) != n:
        raise Mismatch(f"gap [{off}, {off + n}): read {len(b)} bytes, expected {n}")
    if b.count(0) != n:
        i = next(i for i in range(n) if b[i])
        raise Mismatch(f"gap [{off}, {off + n}) does not read as zeros: byte {off + i} is "
                       f"{b[i]:#04x}")


def newer(path, ns):
    st = os.stat(path)
    if not (st.st_mtime_ns > ns and st.st_ctime_ns > ns):
        raise Mismatch(f"mtime {st.st_mtime_ns} / ctime {st.st_ctime_ns} not later than {ns} "
                       "(the times before the truncation)")


def checks(path, scope, root):
    """The checks of the scenarios under scope that need precise calls: the O_DIRECT read of
    every expected file, gaps, times. One line per failure: scenario TAB message."""
    for line in open(path):
        sc, kind, *a = line.rstrip("\n").split("\t")
        if not sc.startswith(scope):
            continue
        try:
            if kind == "file" and os.path.isfile(a[0]):
                cmpdirect(a[0], a[1])
            elif kind == "zeros":
                zeros(a[0], int(a[1]), int(a[2]))
            elif kind == "newer":
                newer(a[0], int(a[1]))
        except (Mismatch, OSError) as e:
            print(f"{sc}\t{os.path.relpath(a[0], root)}: {e}")


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    try:
        if cmd == "io":
            io(args[0], args[1], args[2:])
        elif cmd == "checks":
            checks(args[0], args[1], args[2])
        elif cmd == "times":
            st = os.stat(args[0])
            print(st.st_mtime_ns, st.st_ctime_ns)
        elif cmd == "newer":
            newer(args[0], int(args[1]))
        else:
            die("unknown command " + cmd)
    except Mismatch as e:
        die(str(e))


main()
EOF
py() { python3 "$WORK/sc.py" "$@"; }

# ---- references and checks -----------------------------------------------------------------

# put LEN bytes of SRC at SOFF into the reference file REF at OFF (created if missing)
ref_put() {
	[ -e "$1" ] || : >"$1"
	dd if="$3" of="$1" bs=1M iflag=skip_bytes,count_bytes skip="$4" count="$5" \
		oflag=seek_bytes seek="$2" conv=notrunc status=none
}
ref_size() { truncate -s "$2" "$1"; } # REF SIZE: extend (with zeros) or cut
ref_text() { printf '%b' "$2" >"$1"; } # REF TEXT

check_add() { # KIND ARGS...
	local IFS=$'\t'
	printf '%s\t%s\n' "$SC" "$*" >>"$CHECKS"
}
expect_file() { check_add file "$1" "$2"; }   # PATH REF: same size and bytes
expect_zeros() { check_add zeros "$@"; }      # PATH OFF LEN: reads zeros
expect_newer() { check_add newer "$@"; }      # PATH NS: mtime and ctime later than NS
expect_absent() { check_add absent "$1"; }    # PATH does not exist

fail() { # SCENARIO WHEN WHAT
	echo "   FAIL $1 ($2): $3"
	printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$FAILURES"
}

# check_file PATH REF: 0, or 1 with what is wrong on stdout (the O_DIRECT read is in sc.py)
check_file() {
	local got want at
	[ -f "$1" ] || { echo "${1#"$mnt"/}: missing"; return 1; }
	got=$(stat -c %s "$1") want=$(stat -c %s "$2")
	[ "$got" = "$want" ] || { echo "${1#"$mnt"/}: size $got, expected $want"; return 1; }
	if ! cmp -s "$2" "$1"; then
		at=$(cmp "$2" "$1" 2>&1 | awk '{print $5}')
		at=${at%,}
		echo "${1#"$mnt"/}: buffered read (cmp) differs from the reference at offset $((at - 1))"
		return 1
	fi
}

# check_all LABEL SCOPE: run the registered checks of the scenarios whose names start with
# SCOPE ("" for all), report each scenario by name
check_all() {
	local label=$1 scope=$2 s kind a b m nok=0 nbad=0 set
	local -A oks=() msg=()
	local order=()
	echo "-- [${SECONDS}s] checks: $label"
	while IFS=$'\t' read -r s kind a b _; do
		[[ $s == "$scope"* ]] || continue
		[ -n "${msg[$s]+x}" ] || { msg[$s]=""; order+=("$s"); }
		case $kind in
		file) m=$(check_file "$a" "$b") || msg[$s]+="${msg[$s]:+; }$m" ;;
		absent) [ ! -e "$a" ] || msg[$s]+="${msg[$s]:+; }${a#"$mnt"/}: exists, expected none" ;;
		esac
	done <"$CHECKS"
	py checks "$CHECKS" "$scope" "$mnt" >"$WORK/checks.out" 2>&1 || {
		echo "   sc.py checks failed: $(cat "$WORK/checks.out")"
		exit 1
	}
	while IFS=$'\t' read -r s m; do msg[$s]+="${msg[$s]:+; }$m"; done <"$WORK/checks.out"
	for s in "${order[@]}"; do
		if [ -z "${msg[$s]}" ]; then
			nok=$((nok + 1))
			oks[${s%/*}]+=" ${s##*/}"
		else
			nbad=$((nbad + 1))
			fail "$s" "$label" "${msg[$s]}"
		fi
	done
	for set in $(printf '%s\n' "${!oks[@]}" | sort); do echo "   ok   $set:${oks[$set]}"; done
	echo "   $label: $nok scenarios ok, $nbad failed"
}

# ---- holders: processes that keep a file open across another process's O_TRUNC -------------

# holder CTL FILE FLAGS OPS...: start "py io FILE FLAGS OPS..." in the background (OPS include
# hold:CTL) and wait until it is at its hold point
holder() {
	local ctl=$1
	shift
	rm -f "$ctl.ready" "$ctl.go"
	python3 "$WORK/sc.py" io "$@" >"$ctl.log" 2>&1 & # not the function py: $! is python
	HPID=$!
	echo "$HPID" >>"$HOLDERS"
	for _ in $(seq 600); do
		[ -e "$ctl.ready" ] && return 0
		kill -0 "$HPID" 2>/dev/null || break
		sleep 0.05
	done
	echo "holder $* did not get ready: $(cat "$ctl.log")" >&2
	return 1
}
# release CTL: let the holder go on, wait for it; fails if it failed
release() {
	touch "$1.go"
	wait "$HPID" || { echo "holder failed: $(cat "$1.log")" >&2; return 1; }
}
kill_holders() {
	local p
	for p in $(cat "$HOLDERS"); do
		if grep -qs "$WORK/sc.py" "/proc/$p/cmdline"; then
			kill -9 "$p" 2>/dev/null || true
			wait "$p" 2>/dev/null || true
		fi
	done
	: >"$HOLDERS"
}
# same FILE REF WHO: an act-time comparison (what a holder saw)
same() {
	cmp "$2" "$1" >/dev/null 2>&1 || {
		echo "$3: $(cmp "$2" "$1" 2>&1) (${2##*/} is the reference)" >&2
		return 1
	}
}

old() { head -c "${2:-$OLD}" "$A" >"$1"; } # PATH [SIZE]: a file of old bytes
pageup() { echo $((($1 + 4095) / 4096 * 4096)); }

# ---- the scenarios ---------------------------------------------------------------------------
SCENARIOS=(trunc_buffered trunc_only trunc_rdonly trunc_direct trunc_mmap_reader
	trunc_mmap_writer redirect_echo redirect_append redirect_colon redirect_cat
	trunc_gap_buffered trunc_gap_direct trunc_extend trunc_held_reader trunc_held_writer
	copytruncate_append copytruncate_offset creat_trunc_existing trunc_empty trunc_hole
	trunc_times save_by_rename vim_backup_rename vim_backupcopy vim_real)

# O_TRUNC of a 3 MiB file, then buffered writes: a whole chunk and a partial one
sc_trunc_buffered() {
	local d=$2 r=$3
	case $1 in
	prep) old "$d/f" ;;
	act)
		py io "$d/f" wronly,trunc w:0:"$B":0:$((MiB + 5000))
		ref_put "$r/f" 0 "$B" 0 $((MiB + 5000))
		expect_file "$d/f" "$r/f"
		;;
	esac
}

# O_TRUNC alone: the file is empty
sc_trunc_only() {
	local d=$2 r=$3
	case $1 in
	prep) old "$d/f" ;;
	act)
		py io "$d/f" wronly,trunc
		: >"$r/f"
		expect_file "$d/f" "$r/f"
		;;
	esac
}

# O_RDONLY|O_TRUNC truncates on Linux too
sc_trunc_rdonly() {
	local d=$2 r=$3
	case $1 in
	prep) old "$d/f" ;;
	act)
		py io "$d/f" rdonly,trunc
		: >"$r/f"
		expect_file "$d/f" "$r/f"
		;;
	esac
}

# O_TRUNC|O_DIRECT, then an aligned direct write
sc_trunc_direct() {
	local d=$2 r=$3
	case $1 in
	prep) old "$d/f" ;;
	act)
		py io "$d/f" wronly,trunc,direct w:0:"$B":0:65536
		ref_put "$r/f" 0 "$B" 0 65536
		expect_file "$d/f" "$r/f"
		;;
	esac
}

# another process has the whole old file mmapped (all pages faulted in) and reads it: after
# O_TRUNC and new writes it sees the new bytes within the new size, zeros to the end of the
# last page, and SIGBUS past it
sc_trunc_mmap_reader() {
	local d=$2 r=$3 n=150000
	local p
	p=$(pageup $n)
	case $1 in
	prep) old "$d/f" ;;
	act)
		holder "$r/ctl" "$d/f" rdonly mm:$OLD mtouch mr:0:$OLD:"$r/before" hold:"$r/ctl" \
			mr:0:"$p":"$r/seen" mbus:"$p" mbus:$((2 * MiB))
		py io "$d/f" wronly,trunc w:0:"$B":0:$n
		release "$r/ctl"
		ref_put "$r/f" 0 "$B" 0 $n
		cp "$r/f" "$r/page" && ref_size "$r/page" "$p"
		head -c $OLD "$A" >"$r/old"
		same "$r/before" "$r/old" "the mmap reader before the truncation"
		same "$r/seen" "$r/page" "the mmap reader after the truncation"
		expect_file "$d/f" "$r/f"
		;;
	esac
}

# another process has the file mmapped read-write and has dirtied pages (no msync) when the file
# is truncated: those bytes must not come back
sc_trunc_mmap_writer() {
	local d=$2 r=$3
	case $1 in
	prep) old "$d/f" ;;
	act)
		holder "$r/ctl" "$d/f" rdwr mm:$OLD:rw mw:0:"$B":$((7 * MiB)):100000 \
			mw:$((2 * MiB)):"$B":$((7 * MiB)):50000 hold:"$r/ctl"
		py io "$d/f" wronly,trunc w:0:"$B":0:5000
		release "$r/ctl"
		ref_put "$r/f" 0 "$B" 0 5000
		expect_file "$d/f" "$r/f"
		;;
	esac
}

# echo hi > f over 8 KiB (the reproduction in issue 9)
sc_redirect_echo() {
	local d=$2 r=$3
	case $1 in
	prep) old "$d/f" 8192 ;;
	act)
		echo hi >"$d/f"
		ref_text "$r/f" 'hi\n'
		expect_file "$d/f" "$r/f"
		;;
	esac
}

# echo hi > f over 3 MiB, then >> appends
sc_redirect_append() {
	local d=$2 r=$3
	case $1 in
	prep) old "$d/f" ;;
	act)
		echo hi >"$d/f"
		echo there >>"$d/f"
		head -c 3000 "$B" >>"$d/f"
		ref_text "$r/f" 'hi\nthere\n'
		ref_put "$r/f" 9 "$B" 0 3000
		expect_file "$d/f" "$r/f"
		;;
	esac
}

# : > f empties a 3 MiB file
sc_redirect_colon() {
	local d=$2 r=$3
	case $1 in
	prep) old "$d/f" ;;
	act)
		: >"$d/f"
		: >"$r/f"
		expect_file "$d/f" "$r/f"
		;;
	esac
}

# cat small > big
sc_redirect_cat() {
	local d=$2 r=$3
	case $1 in
	prep) old "$d/f" && head -c 100000 "$B" >"$d/small" ;;
	act)
		cat "$d/small" >"$d/f"
		ref_put "$r/f" 0 "$B" 0 100000
		expect_file "$d/f" "$r/f"
		;;
	esac
}

# O_TRUNC, then buffered writes at 0 and past the new end (inside the old size): the gap
# reads zeros, not the old bytes
sc_trunc_gap_buffered() {
	local d=$2 r=$3 o=$((5 * MiB / 2 + 3))
	case $1 in
	prep) old "$d/f" ;;
	act)
		py io "$d/f" wronly,trunc w:0:"$B":0:10 w:$o:"$B":10:1000
		ref_put "$r/f" 0 "$B" 0 10
		ref_put "$r/f" $o "$B" 10 1000
		expect_file "$d/f" "$r/f"
		expect_zeros "$d/f" 10 $((o - 10))
		;;
	esac
}

# the same with O_DIRECT and aligned writes
sc_trunc_gap_direct() {
	local d=$2 r=$3 o=$((2 * MiB + 4096))
	case $1 in
	prep) old "$d/f" ;;
	act)
		py io "$d/f" wronly,trunc,direct w:0:"$B":0:4096 w:$o:"$B":4096:8192
		ref_put "$r/f" 0 "$B" 0 4096
		ref_put "$r/f" $o "$B" 4096 8192
		expect_file "$d/f" "$r/f"
		expect_zeros "$d/f" 4096 $((o - 4096))
		;;
	esac
}

# O_TRUNC, then ftruncate back to the old size: all zeros
sc_trunc_extend() {
	local d=$2 r=$3
	case $1 in
	prep) old "$d/f" ;;
	act)
		py io "$d/f" wronly,trunc ft:$OLD
		: >"$r/f" && ref_size "$r/f" $OLD
		expect_file "$d/f" "$r/f"
		expect_zeros "$d/f" 0 $OLD
		;;
	esac
}

# a reader holding an fd (having read the whole old file) sees the new contents via pread,
# and the end of the file where the new size says
sc_trunc_held_reader() {
	local d=$2 r=$3 n=200000
	case $1 in
	prep) old "$d/f" ;;
	act)
		holder "$r/ctl" "$d/f" rdonly pr:0:$OLD:"$r/before" hold:"$r/ctl" \
			pr:0:$((2 * MiB)):"$r/seen" pr:$((2 * MiB)):4096:"$r/eof"
		py io "$d/f" wronly,trunc w:0:"$B":0:$n
		release "$r/ctl"
		ref_put "$r/f" 0 "$B" 0 $n
		head -c $OLD "$A" >"$r/old"
		same "$r/before" "$r/old" "the reader before the truncation"
		same "$r/seen" "$r/f" "the reader's pread after the truncation"
		[ ! -s "$r/eof" ] || { echo "the reader's pread past the new end got $(stat -c %s "$r/eof") bytes" >&2; return 1; }
		expect_file "$d/f" "$r/f"
		;;
	esac
}

# a writer holding an fd has written bytes it has not flushed (chunk 0 and chunk 2) when
# another process opens the file with O_TRUNC and writes: the writer's bytes must not come back
# when it closes
sc_trunc_held_writer() {
	local d=$2 r=$3
	case $1 in
	prep) old "$d/f" ;;
	act)
		holder "$r/ctl" "$d/f" wronly w:0:"$A":$((5 * MiB)):100000 \
			w:$((2 * MiB)):"$A":$((6 * MiB)):50000 hold:"$r/ctl"
		py io "$d/f" wronly,trunc w:0:"$B":0:5000
		release "$r/ctl"
		ref_put "$r/f" 0 "$B" 0 5000
		expect_file "$d/f" "$r/f"
		;;
	esac
}

# logrotate copytruncate: a logger appends (O_APPEND, kept open), cp log log.1, : > log, the
# logger appends more: log.1 has the lines before, log only the lines after. cp asks
# lseek(SEEK_DATA/SEEK_HOLE) where the data is and copies holes as holes, so the logger also
# asks, on its own descriptor (a close elsewhere would flush its pages): the log has no hole.
sc_copytruncate_append() {
	local d=$2 r=$3 seek
	case $1 in
	prep) old "$d/log" ;;
	act)
		holder "$r/ctl" "$d/log" wronly,append a:"$A":$OLD:100000 seek:"$r/seek" hold:"$r/ctl" \
			a:"$B":0:7000
		cp "$d/log" "$d/log.1"
		: >"$d/log"
		release "$r/ctl"
		head -c $((OLD + 100000)) "$A" >"$r/log.1"
		ref_put "$r/log" 0 "$B" 0 7000
		expect_file "$d/log.1" "$r/log.1"
		expect_file "$d/log" "$r/log"
		seek=$(cat "$r/seek")
		[ "$seek" = "0 $((OLD + 100000)) $((OLD + 100000))" ] || {
			echo "log of $((OLD + 100000)) bytes without holes, its last 100000 not yet flushed:" \
				"lseek SEEK_DATA, SEEK_HOLE from 0 and size: $seek (expected 0, the size)" >&2
			return 1
		}
		;;
	esac
}

# the same with a logger that does not use O_APPEND: its next write lands at its old offset,
# and everything before it reads zeros
sc_copytruncate_offset() {
	local d=$2 r=$3 e=$((OLD + 100000))
	case $1 in
	prep) old "$d/log" ;;
	act)
		holder "$r/ctl" "$d/log" wronly seekend a:"$A":$OLD:100000 hold:"$r/ctl" a:"$B":0:7000
		: >"$d/log"
		release "$r/ctl"
		ref_put "$r/log" $e "$B" 0 7000
		expect_file "$d/log" "$r/log"
		expect_zeros "$d/log" 0 $e
		;;
	esac
}

# O_CREAT|O_TRUNC of an existing file: python open(..., 'w') and os.open
sc_creat_trunc_existing() {
	local d=$2 r=$3
	case $1 in
	prep) old "$d/f" && old "$d/g" ;;
	act)
		python3 -c 'import sys; open(sys.argv[1], "w").write("replaced\n")' "$d/f"
		py io "$d/g" wronly,creat,trunc w:0:"$B":0:3000
		ref_text "$r/f" 'replaced\n'
		ref_put "$r/g" 0 "$B" 0 3000
		expect_file "$d/f" "$r/f"
		expect_file "$d/g" "$r/g"
		;;
	esac
}

# O_TRUNC of an empty file (alone, and followed by a write)
sc_trunc_empty() {
	local d=$2 r=$3
	case $1 in
	prep) : >"$d/e" && : >"$d/e2" ;;
	act)
		py io "$d/e" wronly,trunc
		py io "$d/e2" wronly,trunc w:0:"$B":0:100
		: >"$r/e"
		ref_put "$r/e2" 0 "$B" 0 100
		expect_file "$d/e" "$r/e"
		expect_file "$d/e2" "$r/e2"
		;;
	esac
}

# O_TRUNC of a file that is only a hole (truncate -s 3M): alone, and followed by a write
# past the end
sc_trunc_hole() {
	local d=$2 r=$3
	case $1 in
	prep) truncate -s 3M "$d/h" && truncate -s 3M "$d/h2" ;;
	act)
		py io "$d/h" wronly,trunc
		py io "$d/h2" wronly,trunc w:$((2 * MiB)):"$B":0:10
		: >"$r/h"
		ref_put "$r/h2" $((2 * MiB)) "$B" 0 10
		expect_file "$d/h" "$r/h"
		expect_file "$d/h2" "$r/h2"
		expect_zeros "$d/h2" 0 $((2 * MiB))
		;;
	esac
}

# O_TRUNC moves mtime and ctime, of a file with data, an empty one and a hole-only one
# (POSIX: "if the file did previously exist")
sc_trunc_times() {
	local d=$2 r=$3 f t
	case $1 in
	prep) old "$d/f" && : >"$d/e" && truncate -s 3M "$d/h" ;;
	act)
		for f in f e h; do
			t=$(py times "$d/$f")
			t=$(( ${t% *} > ${t#* } ? ${t% *} : ${t#* } ))
			echo "$t" >"$r/$f.t"
		done
		sleep 0.1
		for f in f e h; do
			py io "$d/$f" wronly,trunc
			: >"$r/$f"
			expect_file "$d/$f" "$r/$f"
			expect_newer "$d/$f" "$(cat "$r/$f.t")"
			py newer "$d/$f" "$(cat "$r/$f.t")"
		done
		;;
	esac
}

# an editor saves by writing a temporary file, fsync, rename over the target, while another
# process holds the old file open: the holder still reads the old bytes, the path the new
sc_save_by_rename() {
	local d=$2 r=$3 n=$((2 * MiB + 100))
	case $1 in
	prep) old "$d/f" ;;
	act)
		holder "$r/ctl" "$d/f" rdonly pr:0:4096:"$r/x" hold:"$r/ctl" pr:0:$((OLD + 10)):"$r/seen"
		py io "$d/f.tmp" wronly,creat,trunc w:0:"$B":0:$n fsync
		mv -f "$d/f.tmp" "$d/f"
		release "$r/ctl"
		head -c $OLD "$A" >"$r/old"
		same "$r/seen" "$r/old" "the process holding the replaced file"
		ref_put "$r/f" 0 "$B" 0 $n
		expect_file "$d/f" "$r/f"
		expect_absent "$d/f.tmp"
		;;
	esac
}

# vim-style save with a backup by rename (backupcopy=no, backup on): f -> f~, new f written and
# fsynced; a holder of the old file still reads the old bytes
sc_vim_backup_rename() {
	local d=$2 r=$3 n=$((MiB + 3))
	case $1 in
	prep) old "$d/f" ;;
	act)
		holder "$r/ctl" "$d/f" rdonly hold:"$r/ctl" pr:0:$((OLD + 10)):"$r/seen"
		mv "$d/f" "$d/f~"
		py io "$d/f" wronly,creat,trunc w:0:"$B":0:$n fsync
		release "$r/ctl"
		head -c $OLD "$A" >"$r/old"
		same "$r/seen" "$r/old" "the process holding the old file"
		ref_put "$r/f" 0 "$B" 0 $n
		expect_file "$d/f" "$r/f"
		expect_file "$d/f~" "$r/old"
		;;
	esac
}

# vim-style save with backupcopy=yes: cp f f~, then f is rewritten in place (O_TRUNC), fsynced
sc_vim_backupcopy() {
	local d=$2 r=$3 n=$((MiB + 3))
	case $1 in
	prep) old "$d/f" ;;
	act)
		cp "$d/f" "$d/f~"
		py io "$d/f" wronly,trunc w:0:"$B":0:$n fsync
		head -c $OLD "$A" >"$r/old"
		ref_put "$r/f" 0 "$B" 0 $n
		expect_file "$d/f" "$r/f"
		expect_file "$d/f~" "$r/old"
		;;
	esac
}

# vim itself (when installed) replaces a 2 MiB text file with backupcopy=yes (in place,
# O_TRUNC) and with backupcopy=no (rename)
sc_vim_real() {
	local d=$2 r=$3 bc f
	command -v vim >/dev/null || { [ "$1" = prep ] && echo "   skip $SC: no vim"; return 0; }
	case $1 in
	prep) for bc in yes no; do head -c $((3 * MiB)) "$A" | base64 -w 60 >"$d/t.$bc"; done ;;
	act)
		# the reference: the same edit by the same vim on the local disk
		for bc in yes no; do
			for f in "$r/t.$bc" "$d/t.$bc"; do
				[ "$f" = "$d/t.$bc" ] || head -c $((3 * MiB)) "$A" | base64 -w 60 >"$f"
				vim -Nu NONE -i NONE -es -c "set backupcopy=$bc" -c '%d' -c "0r $WORK/T" \
					-c 'wq' "$f" </dev/null
			done
			same "$r/t.$bc" "$WORK/T" "vim on the local disk"
			expect_file "$d/t.$bc" "$r/t.$bc"
			expect_absent "$d/t.$bc~"
		done
		;;
	esac
}

# run_sc STAGE SET NAME: one stage of one scenario, in a subshell; a failure is reported with
# the scenario's name and the failing command
run_sc() {
	local stage=$1 set=$2 name=$3 rc
	local d=$mnt/$set/$name r=$WORK/ref/$set/$name
	SC=$set/$name
	mkdir -p "$d" "$r"
	set +e
	(
		set -eE
		trap 'echo "      line $LINENO: $BASH_COMMAND (status $?)" >&2' ERR
		"sc_$name" "$stage" "$d" "$r"
	) 2>"$r/$stage.err"
	rc=$?
	set -e
	kill_holders
	if [ $rc != 0 ]; then
		fail "$SC" "$stage" "$(tr '\n' ' ' <"$r/$stage.err")"
	fi
}
run_all() { # STAGE SET
	local name
	for name in "${SCENARIOS[@]}"; do run_sc "$1" "$2" "$name"; done
}

# mode_probe MODE: does the mount use the kernel writeback cache as asked? Without it, a write
# from a process that keeps the file open reaches the daemon at once (put by the write-buffer
# flusher within a cadence); with it, the bytes stay in the page cache.
stat_puts() { "$MW" stats --raw "$mnt" | awk '$1 == "puts" {print $2}'; }
mode_probe() {
	local ctl=$WORK/probe p0 p1
	: >"$mnt/probe"
	p0=$(stat_puts)
	holder "$ctl" "$mnt/probe" wronly a:"$A":0:5000 hold:"$ctl"
	sleep 1
	p1=$(stat_puts)
	release "$ctl"
	rm -f "$mnt/probe" "$ctl".*
	if [ "$1" = nowb ]; then
		[ "$p1" -gt "$p0" ] || { fail "$1/probe" mounted "--no-writeback-cache: a write did not reach the daemon (puts $p0 -> $p1)"; return 0; }
		echo "   kernel writeback cache: off (a write reached the daemon: puts $p0 -> $p1)"
	elif [ "$p1" -gt "$p0" ]; then
		echo "   WARNING: kernel writeback cache seems off (a write reached the daemon: puts $p0 -> $p1)"
	else
		echo "   kernel writeback cache: on (a write stayed in the page cache: puts $p0 -> $p1)"
	fi
}

# crash_round MODE: O_TRUNC (+ writes) + fsync in processes that keep the files open, kill -9
# of the daemon, fsck, mount: each file holds exactly its post-truncation synced bytes
crash_round() {
	local mode=$1 d r
	SC=$mode/crash/trunc_fsync_kill9
	d=$mnt/$SC r=$WORK/ref/$SC
	mkdir -p "$d" "$r"
	echo "-- [${SECONDS}s] $mode: O_TRUNC + fsync, then kill -9 of the daemon"
	for f in c1 c2 c3; do old "$d/$f" && sync "$d/$f"; done
	old "$d/c4" 8192 && sync "$d/c4"
	holder "$r/c1" "$d/c1" wronly,trunc w:0:"$B":0:70000 fsync hold:"$r/c1"
	holder "$r/c2" "$d/c2" wronly,trunc fsync hold:"$r/c2"
	holder "$r/c3" "$d/c3" wronly,trunc,direct w:$((3 * MiB / 2)):"$B":0:4096 fsync hold:"$r/c3"
	echo hi >"$d/c4" && sync "$d/c4"
	ref_put "$r/c1" 0 "$B" 0 70000
	: >"$r/c2"
	ref_put "$r/c3" $((3 * MiB / 2)) "$B" 0 4096
	ref_text "$r/c4" 'hi\n'
	for f in c1 c2 c3 c4; do expect_file "$d/$f" "$r/$f"; done
	expect_zeros "$d/c3" 0 $((3 * MiB / 2))
	kill -9 "$(cat "$mnt.pid")"
	mw_wait_exit "$mnt.pid"
	kill_holders
	wait 2>/dev/null || true
	fusermount3 -u "$mnt" 2>/dev/null || fusermount3 -uz "$mnt"
	mw_fsck --deep || fail "$SC" "after kill -9" "memwalfs fsck --deep found problems"
	mw_mount "$mnt" "${OPTS[@]}"
	mw_fsck || fail "$SC" "after kill -9 and mount" "memwalfs fsck found problems"
}

remount() {
	mw_umount "$mnt"
	mw_mount "$mnt" "${OPTS[@]}"
}

for mode in wb nowb; do
	OPTS=()
	[ "$mode" = nowb ] && OPTS=(--no-writeback-cache)
	echo "== $BACKEND, $mode (mount ${OPTS[*]:-with the writeback cache})"
	mw_mount "$mnt" "${OPTS[@]}"
	mode_probe "$mode"
	echo "-- [${SECONDS}s] $mode/hot: prep and act in one mount; $mode/cold: prep"
	for name in "${SCENARIOS[@]}"; do
		run_sc prep "$mode/hot" "$name"
		run_sc act "$mode/hot" "$name"
	done
	run_all prep "$mode/cold"
	check_all "$mode/hot mounted" "$mode/hot/"
	remount
	echo "-- [${SECONDS}s] $mode/cold: act after a remount"
	run_all act "$mode/cold"
	check_all "$mode/hot after umount and mount, $mode/cold mounted" "$mode/"
	remount
	check_all "$mode/cold after umount and mount" "$mode/cold/"
	crash_round "$mode"
	check_all "$mode after kill -9 and mount" "$mode/"
	mw_umount "$mnt"
done

OPTS=()
mw_mount "$mnt" -o ro
check_all "all at a last, read-only mount (default cache mode)" ""
# O_TRUNC on a read-only mount fails with EROFS and changes nothing
SC=ro/trunc_refused
f=$mnt/wb/hot/trunc_buffered/f
if python3 -c 'import os, sys; os.open(sys.argv[1], os.O_WRONLY | os.O_TRUNC)' "$f" 2>"$WORK/ro.err"; then
	fail "$SC" "read-only mount" "open(O_WRONLY|O_TRUNC) succeeded"
elif ! grep -q "Read-only file system" "$WORK/ro.err"; then
	fail "$SC" "read-only mount" "open(O_WRONLY|O_TRUNC) failed, but not with EROFS: $(tail -1 "$WORK/ro.err")"
fi
if python3 -c 'import os, sys; os.open(sys.argv[1], os.O_RDONLY | os.O_TRUNC)' "$f" 2>"$WORK/ro.err"; then
	fail "$SC" "read-only mount" "open(O_RDONLY|O_TRUNC) succeeded"
fi
check_file "$f" "$WORK/ref/wb/hot/trunc_buffered/f" >"$WORK/ro.out" ||
	fail "$SC" "read-only mount" "the file changed: $(cat "$WORK/ro.out")"
grep -q "^$SC" "$FAILURES" || echo "   ok   $SC: O_TRUNC on a read-only mount fails with EROFS, the file is unchanged"
mw_umount "$mnt"
mw_fsck --deep || fail fsck end "memwalfs fsck --deep found problems"

if [ -s "$FAILURES" ]; then
	echo "FAIL: $(cut -f1 "$FAILURES" | sort -u | wc -l) scenario(s) failed ($BACKEND):"
	# each failing scenario once: where it failed, and the first message
	awk -F'\t' '!($1 in first) { first[$1] = $3; order[n++] = $1 }
		{ when[$1] = when[$1] (when[$1] == "" ? "" : ", ") $2 }
		END { for (i = 0; i < n; i++) printf "   %s\n      failed: %s\n      first: %s\n", order[i], when[order[i]], first[order[i]] }' "$FAILURES"
	exit 1
fi
echo "scenarios ($BACKEND): ${#SCENARIOS[@]} scenarios + kill -9 round, both cache modes: ok"
