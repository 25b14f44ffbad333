#!/usr/bin/env bash
# tests/fs/takeover.sh MEMWALFS BACKEND - a second writer mount of a live store (issue 36):
#  1. "memwalfs mount STORE B" while STORE is mounted read-write at A on this machine follows
#     A (issue 39; issue 36 refused it): exit status 0, a message that names A and its daemon
#     and --takeover; B serves A's files and refuses changes with EROFS; A is unharmed (still
#     writing, sticky_error 0) and after a remount nothing written at A is lost, the files
#     written just before and just after the second mount (closed, never fsynced) included.
#     (Before issue 36 the second mount returned 0 and fenced A: the file written at A just
#     before it and the next one written after it, both acknowledged by close(), were lost.)
#     fs_holders_* tests the same across machines (leases) and the take-over after A lets go.
#  2. "-o ro" beside A is allowed: a follower, which sees A's files.  The takeover's two
#     requests by hand: the hold (user.memwalfs.handover) refuses changes with EIO, and the
#     check (user.memwalfs.fence-check) that finds A still the writer ends it.
#  3. "--takeover" (and -o takeover) fences A on purpose: A first commits what it holds and
#     stops taking changes (the file written just before, never fsynced, is at B, and so is
#     every file a writer busy at A during the takeover closed without error; its first
#     refusal is EIO), then is told it was fenced: at A, at once, every
#     change fails with EIO (create, write to a new descriptor, append, truncate, mkdir,
#     rename, unlink, rmdir, link, symlink, chmod, utimes, setxattr, removexattr), and so do
#     fallocate, fsync and close of a descriptor opened before the takeover whose write the
#     kernel took into its page cache (writeback cache) - while reads keep working;
#     "memwalfs umount A" exits 1 and says A was taken over and what that cost; nothing made at
#     A after the takeover is in the store, and fsck is clean.
#  4. a fenced mount that was not told (the new writer --takeover from another machine: a
#     run directory of its own) acknowledges its next write, which is lost; it learns at that write's
#     commit, and from then on every change fails with EIO; umount says how many changes
#     were lost (batches_lost).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
a=$WORK/a
b=$WORK/b

# stat_of MOUNTPOINT NAME: a value of "memwalfs stats"
stat_of() { "$MW" stats --raw "$1" | awk -v n="$2" '$1 == n { print $2 }'; }

echo "-- 1. a second writer mount of a live store follows it; the first is unharmed"
mw_mount "$a"
apid=$(cat "$a.pid")
head -c 300000 /dev/urandom >"$WORK/w1"
cp "$WORK/w1" "$a/w1" # closed, never fsynced
mw_mount "$b" 2>"$WORK/follow.err" || { cat "$WORK/follow.err"; echo "FAIL: the second mount failed"; exit 1; }
cat "$WORK/follow.err"
grep -q "is mounted read-write at $a (daemon $apid) on this machine; this mount follows it" "$WORK/follow.err" ||
	{ echo "FAIL: the second mount does not name the live mount and its daemon"; exit 1; }
grep -q -- "--takeover" "$WORK/follow.err" || { echo "FAIL: the message does not give --takeover"; exit 1; }
for _ in $(seq 300); do cmp -s "$WORK/w1" "$b/w1" && break; sleep 0.1; done # A's commit, then B's poll
cmp "$WORK/w1" "$b/w1"
rc=0
(echo no >"$b/refused") 2>"$WORK/refused.err" || rc=$?
[ "$rc" != 0 ] && grep -q "Read-only file system" "$WORK/refused.err" ||
	{ cat "$WORK/refused.err"; echo "FAIL: a change at the following mount was not refused with EROFS"; exit 1; }
mw_umount "$b"
rc=0
mw_mount "$b" -o noatime,takeover=no 2>/dev/null || rc=$?
[ "$rc" != 0 ] || { echo "FAIL: -o takeover=no was taken"; exit 1; }
! mountpoint -q "$b"
head -c 200000 /dev/urandom >"$WORK/w2"
cp "$WORK/w2" "$a/w2" # the write after the second mount: closed, never fsynced
mkdir "$a/d" && echo moved >"$a/d/f" && mv "$a/d/f" "$a/d/g"
cmp "$WORK/w2" "$a/w2"
[ ! -e "$a/refused" ]
[ "$(stat_of "$a" sticky_error)" = 0 ] || { echo "FAIL: the second mount harmed the live mount"; exit 1; }
echo "   followed it, changes there EROFS; $a keeps writing (sticky_error 0)"
mw_umount "$a" # exit 0: nothing was fenced
mw_mount "$a"
cmp "$WORK/w1" "$a/w1" && cmp "$WORK/w2" "$a/w2" && [ "$(cat "$a/d/g")" = moved ]
echo "   after a remount: w1 (before the second mount) and w2 (after it) are there"

echo "-- 2. -o ro beside the live writer: a follower"
mw_mount "$b" -o ro
cmp "$WORK/w1" "$b/w1"
echo late >"$a/late"
for _ in $(seq 300); do [ "$(cat "$b/late" 2>/dev/null)" = late ] && break; sleep 0.1; done
[ "$(cat "$b/late")" = late ] || { echo "FAIL: the follower did not see the writer's file"; exit 1; }
mw_umount "$b"
echo "   mounted read-only beside it and followed it"
# the two requests of a takeover, by hand: the hold (A commits and takes no more changes) ends
# when the check finds A still the writer (a takeover that failed before its claim)
getfattr --absolute-names --only-values -n user.memwalfs.handover "$a" | grep -qx durable
rc=0
(echo held >"$a/held-out") 2>"$WORK/held.err" || rc=$?
[ "$rc" != 0 ] && grep -q "Input/output error" "$WORK/held.err" ||
	{ cat "$WORK/held.err"; echo "FAIL: a change during the hold was not refused with EIO"; exit 1; }
getfattr --absolute-names --only-values -n user.memwalfs.fence-check "$a" | grep -qx current
echo back >"$a/back" && [ "$(cat "$a/back")" = back ] && [ ! -e "$a/held-out" ]
[ "$(stat_of "$a" sticky_error)" = 0 ]
echo "   a hold refuses changes with EIO; the check that finds A still the writer ends it"

echo "-- 3. --takeover fences the live mount on purpose"
head -c 250000 /dev/urandom >"$WORK/w3"
cp "$WORK/w3" "$a/w3" # just before the takeover: closed, never fsynced
echo keep >"$a/keep"
ln -s keep "$a/sym"
mkdir "$a/empty"
setfattr -n user.k -v v "$a/keep"
mode=$(stat -c %a "$a/keep")
MOUNTS+=("$b")
# a descriptor opened before the takeover, written after it (python3: errno of each call)
python3 - "$a" "$MW" "$b" "${STORE_OPTS[@]}" "$STORE" <<'EOF' >"$WORK/ops.out" 2>&1 || { cat "$WORK/ops.out"; exit 1; }
import errno, os, subprocess, sys, threading
a, mw, b, store_args = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
held = os.open(a + "/held", os.O_WRONLY | os.O_CREAT, 0o644)
os.write(held, b"before\n")
os.mkdir(a + "/busy")
# a writer that keeps creating files at A while the takeover runs: every file whose close()
# returned 0 must be at B (the old mount commits what it took, then takes nothing more)
acked, refused = [], []
def busy_writer():
    i = 0
    while not refused:
        try:
            fd = os.open("%s/busy/%06d" % (a, i), os.O_WRONLY | os.O_CREAT, 0o644)
            os.write(fd, b"%06d\n" % i)
            os.close(fd)
            acked.append(i)
        except OSError as e:
            refused.append((i, e.errno))
        i += 1
writer = threading.Thread(target=busy_writer)
writer.start()
while len(acked) < 20 and not refused:
    os.sched_yield()
cache = ["--cache-dir", b + ".diskcache"] if store_args[-1].startswith("s3://") else []
r = subprocess.run([mw, "mount", *store_args[:-1], *cache, "-o", "allow_other,takeover",
                    "--pidfile", b + ".pid", store_args[-1], b], stderr=subprocess.PIPE, text=True)
writer.join()
sys.stdout.write(r.stderr)
with open(b + ".acked", "w") as f:
    f.write("".join("%06d\n" % i for i in acked))
print("   the busy writer: %d files closed before the takeover stopped it, then %s" %
      (len(acked), os.strerror(refused[0][1]) if refused else "-"))
if not refused or refused[0][1] != errno.EIO:
    sys.exit("FAIL: the busy writer at A was not refused with EIO: %s" % refused)
if r.returncode != 0:
    sys.exit("FAIL: mount --takeover exited %d" % r.returncode)
if "fences it" not in r.stderr or "knows it was fenced" not in r.stderr:
    sys.exit("FAIL: mount --takeover did not say that it fenced the mount and told it")
fails = []

def expect_eio(what, f):
    try:
        f()
    except OSError as e:
        if e.errno != errno.EIO:
            fails.append("%s: %s, not EIO" % (what, e))
        else:
            print("   %-28s EIO" % what)
        return
    fails.append("%s: succeeded at the fenced mount" % what)

def create():
    os.close(os.open(a + "/new", os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644))

def open_for_write():
    os.close(os.open(a + "/keep", os.O_WRONLY))

# the very first change after the takeover already fails: nothing waits for a commit
expect_eio("create", create)
expect_eio("open for writing", open_for_write)
expect_eio("append (open O_APPEND)", lambda: os.open(a + "/keep", os.O_WRONLY | os.O_APPEND))
expect_eio("truncate", lambda: os.truncate(a + "/keep", 0))
expect_eio("mkdir", lambda: os.mkdir(a + "/newdir"))
expect_eio("rename", lambda: os.rename(a + "/keep", a + "/renamed"))
expect_eio("unlink", lambda: os.unlink(a + "/w1"))
expect_eio("rmdir", lambda: os.rmdir(a + "/empty"))
expect_eio("link", lambda: os.link(a + "/keep", a + "/hard"))
expect_eio("symlink", lambda: os.symlink("keep", a + "/sym2"))
expect_eio("chmod", lambda: os.chmod(a + "/keep", 0o600))
expect_eio("utime", lambda: os.utime(a + "/keep", (1, 1)))
expect_eio("setxattr", lambda: os.setxattr(a + "/keep", "user.x", b"1"))
expect_eio("removexattr", lambda: os.removexattr(a + "/keep", "user.k"))
expect_eio("fallocate (earlier fd)", lambda: os.posix_fallocate(held, 0, 1 << 20))
# the kernel's writeback cache takes this write into its page cache: fsync and close fail
os.write(held, b"after\n")
expect_eio("fsync of an earlier fd", lambda: os.fsync(held))
expect_eio("close of an earlier fd", lambda: os.close(held))
# reads keep working
with open(a + "/keep") as f:
    if f.read() != "keep\n":
        fails.append("read at the fenced mount")
if os.readlink(a + "/sym") != "keep" or os.getxattr(a + "/keep", "user.k") != b"v":
    fails.append("readlink/getxattr at the fenced mount")
if fails:
    sys.exit("FAIL: " + "; ".join(fails))
print("   reads keep working at the fenced mount")
EOF
cat "$WORK/ops.out"
mountpoint -q "$b"
[ "$(stat_of "$a" sticky_error)" = -116 ] || { echo "FAIL: the fenced mount's sticky_error is not -ESTALE"; exit 1; }
# at B: everything A had written before the takeover, the never-fsynced w3 included
cmp "$WORK/w1" "$b/w1" && cmp "$WORK/w2" "$b/w2" && cmp "$WORK/w3" "$b/w3"
[ "$(cat "$b/keep")" = keep ] && [ "$(cat "$b/held")" = before ]
lost=0
while read -r i; do
	[ "$(cat "$b/busy/$i" 2>/dev/null)" = "$i" ] || lost=$((lost + 1))
done <"$b.acked"
[ "$lost" = 0 ] || { echo "FAIL: $lost of the $(wc -l <"$b.acked") files closed at A are not at B"; exit 1; }
echo "   all $(wc -l <"$b.acked") files the busy writer closed at A are at B"
rc=0
"$MW" umount "$a" 2>"$WORK/umount.err" || rc=$?
cat "$WORK/umount.err"
[ "$rc" = 1 ] || { echo "FAIL: memwalfs umount of the fenced mount exited $rc"; exit 1; }
grep -q "another mount of this filesystem took it over" "$WORK/umount.err" &&
	grep -q "failed with EIO" "$WORK/umount.err" ||
	{ echo "FAIL: umount does not say that the mount was taken over, and what that cost"; exit 1; }
mw_wait_exit "$a.pid"
mw_umount "$b"
mw_mount "$a"
for f in new renamed hard sym2 newdir; do
	[ ! -e "$a/$f" ] && [ ! -L "$a/$f" ] || { echo "FAIL: $f made at the fenced mount is in the store"; exit 1; }
done
[ "$(cat "$a/keep")" = keep ] && [ -d "$a/empty" ] && [ -e "$a/w1" ] && [ "$(cat "$a/held")" = before ]
[ "$(stat -c %a "$a/keep")" = "$mode" ] && [ "$(getfattr --absolute-names --only-values -n user.k "$a/keep")" = v ]
cmp "$WORK/w3" "$a/w3"

echo "-- 4. a fenced mount that nobody told (a writer elsewhere): learns at its next commit"
# the lock file is what this machine knows of the live mount; a daemon with a run directory of
# its own (MEMWALFS_RUNDIR) stands for one on another machine: with --takeover it fences A
# without asking (without it, it would follow A: fs_holders_*)
mkdir -p "$WORK/elsewhere" && chmod 700 "$WORK/elsewhere"
MEMWALFS_RUNDIR=$WORK/elsewhere mw_mount "$b" --takeover 2>"$WORK/elsewhere.err" ||
	{ cat "$WORK/elsewhere.err"; exit 1; }
echo lost >"$a/lost" # acknowledged by close() (A is not told); its commit meets B's fence
for _ in $(seq 600); do [ "$(stat_of "$a" sticky_error)" = -116 ] && break; sleep 0.1; done
[ "$(stat_of "$a" sticky_error)" = -116 ] || { echo "FAIL: A did not learn it was fenced"; exit 1; }
rc=0
(echo next >"$a/next") 2>"$WORK/next.err" || rc=$?
[ "$rc" != 0 ] && grep -q "Input/output error" "$WORK/next.err" ||
	{ cat "$WORK/next.err"; echo "FAIL: a change after A learned did not fail with EIO"; exit 1; }
[ "$(stat_of "$a" batches_lost)" -ge 1 ] || { echo "FAIL: batches_lost does not count the lost write"; exit 1; }
rc=0
"$MW" umount "$a" 2>"$WORK/umount.err" || rc=$?
cat "$WORK/umount.err"
[ "$rc" = 1 ] && grep -Eq "[0-9]+ changes? made here .* never committed" "$WORK/umount.err" ||
	{ echo "FAIL: umount does not say what was lost"; exit 1; }
mw_wait_exit "$a.pid"
[ ! -e "$b/lost" ] && [ ! -e "$b/next" ] && cmp "$WORK/w3" "$b/w3"
MEMWALFS_RUNDIR=$WORK/elsewhere mw_umount "$b"
mw_fsck --deep
echo "takeover ($BACKEND): ok"
