#!/usr/bin/env bash
# tests/fs/regions.sh MEMWALFS BACKEND - regions end to end (issue 39, docs/REGIONS.md): two
# daemons with run directories, machine ids and host names of their own stand for two machines
# (as in holders.sh); only the store is shared.
#  1. A mounts (holds region 0) and makes the regions /ra and /rb (`memwalfs region create`;
#     /rb over an empty directory, whose mode it keeps), lets /rb go (`region release`),
#     mounts again (now without the writeback cache: the store has regions), then writes
#     into /ra (taking it again); a second create of /ra fails, so does one over a file, and
#     one by a user who may write the parent but does not own it (EPERM).
#     (local store) A map entry written by hand stands for a create that stopped after the
#     map add: the same create resumes that region (/rd).
#  2. B mounts: it follows region 0 (A holds it) and finds /ra and /rb when it meets them;
#     B's first change in /rb takes region rb (nobody holds it) and succeeds.
#     A makes /rc while B is mounted: B finds it (a file A writes in it shows at B).
#  3. Both write their own region (creates, appends, renames inside the region, fsync'd
#     journals); each sees the other's files within a deadline.
#  4. A change by B in /ra or in / fails with EROFS and changes nothing; rename and link
#     between /ra and /rb, and between / and /rb, fail with EXDEV; mv of a file and of a
#     directory across regions ends with the data at the destination; rmdir of a region's
#     root fails with EBUSY.
#  5. `memwalfs region list` at A and at B shows the regions and their holders.
#     `region take` of /rc (A holds it) by B fails naming the holder, and by another user
#     (as release) with EPERM; `region take --force` fences A: A's next fsync there fails.
#  6. kill -9 of B (lease 2 s): A's next change in /rb takes region rb once B's lease ran out,
#     and A has every file B fsynced.
#  7. A unmounts, a new mount has every acknowledged write; fsck is clean.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"

. "$here/machines.sh" # on MACHINE CMD..., put, expect_err, wait_file, put_within
# journal PATH N: append N fsync'd lines to PATH
journal() {
	python3 -c 'import os,sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
for i in range(int(sys.argv[2])):
    os.write(fd, ("line %d\n" % i).encode()); os.fsync(fd)
os.close(fd)' "$1" "$2"
}
a=$WORK/a b=$WORK/b c=$WORK/c

echo "-- 1. A makes the regions /ra and /rb"
on A mw_mount_logged "$a" --lease 2
trap 'rc=$?; [ "$rc" = 0 ] || { mw_log_tail "$a"; mw_log_tail "$b"; }; mw_cleanup' EXIT
echo zero >"$a/top"
"$MW" region create "$a/ra"
mkdir "$a/rb" && chmod 0750 "$a/rb"
"$MW" region create "$a/rb" # an empty directory: replaced, its mode kept
[ "$(stat -c %a "$a/rb")" = 750 ] || { echo "FAIL: /rb's mode $(stat -c %a "$a/rb"), not 750"; exit 1; }
expect_err "already a region" "a second region create of /ra" "$MW" region create "$a/ra"
expect_err "not a directory" "region create over a file" "$MW" region create "$a/top"
# only root or the owner of the parent may make a region (a user who may write it: EPERM)
mkdir "$a/pub" && chmod 0777 "$a/pub" # not sticky: the kernel lets others set user. xattrs
expect_err "only root or the owner" "region create by another user in a shared directory" \
	setpriv --reuid=65534 --regid=65534 --clear-groups "$MW_REAL" region create "$a/pub/x"
[ ! -e "$a/pub/x" ] || { echo "FAIL: a refused region create left $a/pub/x"; exit 1; }
rmdir "$a/pub"
[ "$(stat -c %i "$a/ra")" -ge $((1 << 40)) ] || { echo "FAIL: /ra's inode $(stat -c %i "$a/ra") is of region 0"; exit 1; }
"$MW" region release "$a/rb" # A follows /rb from now on: nobody holds it
# A mount made before the store had regions keeps the kernel's writeback cache, which keeps
# file sizes of its own: mounted again, A follows what it does not write without it
grep -q "writeback cache" "$a.log" && { echo "FAIL: A said no writeback cache before regions"; exit 1; }
mw_umount "$a"
on A mw_mount_logged "$a" --lease 2
grep -q "without the kernel's writeback cache" "$a.log" || { echo "FAIL: A remounted does not say that it has no writeback cache"; exit 1; }
put "$a/ra/a1" a1
mkdir "$a/ra/d" && put "$a/ra/d/a2" a2
nlink=$(stat -c %h "$a")
[ "$nlink" = 4 ] || { echo "FAIL: the root's nlink $nlink, not 4"; exit 1; }

if [ "$BACKEND" = local ]; then
	echo "-- 1b. a create that stopped after the map entry (a crash): the same create resumes it"
	ls "$STORE/regions" >"$WORK/versions"
	v=$(($(wc -l <"$WORK/versions") + 1))
	{
		printf 'memwalfs-regions 1\nversion %d\nmax_rid 3\n' "$v"
		grep '^region ' "$STORE/regions/$(tail -n 1 "$WORK/versions")"
		printf 'region 3 root %d parent 1 name rd since 1767225600 path /rd\n' $(((3 << 40) | 1))
	} >"$STORE/regions/$(printf %020d "$v")"
	[ ! -e "$a/rd" ] || { echo "FAIL: /rd exists before its create"; exit 1; }
	"$MW" region create "$a/rd"
	grep -q "resuming it" "$a.log" || { echo "FAIL: the create of /rd did not resume region 3"; exit 1; }
	[ "$(stat -c %i "$a/rd")" = $(((3 << 40) | 1)) ] || { echo "FAIL: /rd is not region 3's root"; exit 1; }
	put "$a/rd/d1" d1
else
	"$MW" region create "$a/rd" && put "$a/rd/d1" d1
fi

echo "-- 2. B mounts: follows region 0, takes region rb at its first change"
on B mw_mount_logged "$b" --lease 2
wait_file "$b/ra/a1" a1
wait_file "$b/ra/d/a2" a2
t0=$(date +%s.%N)
put "$b/rb/b1" b1
echo "   B's first change in /rb took region rb in $(echo "$(date +%s.%N) - $t0" | bc) s"

echo "-- 2b. a region A makes while B is mounted: B finds it when it meets it"
"$MW" region create "$a/rc"
put "$a/rc/c1" c1
wait_file "$b/rc/c1" c1
[ "$(stat -c %i "$b/rc")" = "$(stat -c %i "$a/rc")" ] || { echo "FAIL: /rc has another inode at B"; exit 1; }
expect_err "Read-only file system" "create by B in /rc (held by A)" touch "$b/rc/nope"

echo "-- 3. both write their own region; each sees the other's"
for i in 1 2 3; do
	put "$a/ra/fa$i" "a$i" && put "$b/rb/fb$i" "b$i"
	echo "more $i" >>"$a/ra/a1" && echo "more $i" >>"$b/rb/b1"
done
mv "$a/ra/fa1" "$a/ra/d/fa1-moved" && mv "$b/rb/fb1" "$b/rb/fb1-moved"
journal "$a/ra/journal" 50 & ja=$!
journal "$b/rb/journal" 50 & jb=$!
wait $ja $jb
sync "$a/ra/a1" "$b/rb/b1" 2>/dev/null || "$MW" sync "$a" "$b"
"$MW" sync "$a" >/dev/null && "$MW" sync "$b" >/dev/null
wait_file "$b/ra/d/fa1-moved" a1
wait_file "$a/rb/fb1-moved" b1
wait_file "$a/rb/b1" "$(printf 'b1more 1\nmore 2\nmore 3')"
wait_file "$b/ra/a1" "$(printf 'a1more 1\nmore 2\nmore 3')"
for _ in $(seq 300); do [ "$(wc -l <"$a/rb/journal" 2>/dev/null)" = 50 ] && [ "$(wc -l <"$b/ra/journal" 2>/dev/null)" = 50 ] && break; sleep 0.1; done
[ "$(wc -l <"$a/rb/journal")" = 50 ] && [ "$(wc -l <"$b/ra/journal")" = 50 ] ||
	{ echo "FAIL: the journals did not converge"; exit 1; }
diff <(cd "$a" && find . | sort) <(cd "$b" && find . | sort) ||
	{ echo "FAIL: the two mounts show different trees"; exit 1; }

echo "-- 4. the rules between regions"
expect_err "Read-only file system" "create by B in /ra" touch "$b/ra/nope"
expect_err "Read-only file system" "create by B in /" touch "$b/nope"
expect_err "Read-only file system" "unlink by B in /ra" rm "$b/ra/a1"
expect_err "Read-only file system" "mkdir by B in /" mkdir "$b/nope"
[ ! -e "$a/ra/nope" ] && [ ! -e "$a/nope" ] && [ -e "$a/ra/a1" ] || { echo "FAIL: a refused change changed something"; exit 1; }
python3 - "$a" <<'PY' || { echo "FAIL: rename/link across regions"; exit 1; }
import errno, os, sys
a = sys.argv[1]
open(a + "/ra/x", "w").write("x")
for f, t in (("/ra/x", "/rb/x"), ("/top", "/rb/top"), ("/ra/x", "/x")):
    for op in (os.rename, os.link):
        try:
            op(a + f, a + t)
        except OSError as e:
            if e.errno != errno.EXDEV and not (op is os.rename and f == "/ra/x" and t == "/x" and e.errno == errno.EXDEV):
                raise SystemExit("%s %s -> %s: %s" % (op.__name__, f, t, e))
        else:
            raise SystemExit("%s %s -> %s succeeded" % (op.__name__, f, t))
PY
mv "$a/ra/x" "$a/x-from-ra"
[ "$(cat "$a/x-from-ra")" = x ] && [ ! -e "$a/ra/x" ] || { echo "FAIL: mv of a file across regions"; exit 1; }
mkdir -p "$a/ra/tree/sub" && echo deep >"$a/ra/tree/sub/f"
mv "$a/ra/tree" "$a/tree-from-ra"
[ "$(cat "$a/tree-from-ra/sub/f")" = deep ] && [ ! -e "$a/ra/tree" ] || { echo "FAIL: mv of a directory across regions"; exit 1; }
expect_err "busy" "rmdir of a region's root" rmdir "$a/ra"
expect_err "busy" "rename of a region's root" mv -T "$a/rb" "$a/rb2"

echo "-- 5. region list"
"$MW" region list "$a" | tee "$WORK/list-a"
"$MW" region list "$b" | tee "$WORK/list-b"
grep -q "^region 1 /ra" "$WORK/list-a" && grep -q "^region 2 /rb" "$WORK/list-a" ||
	{ echo "FAIL: region list at A does not show /ra and /rb"; exit 1; }
grep -A1 "^region 2 /rb" "$WORK/list-b" | grep -q "this mount" ||
	{ echo "FAIL: region list at B does not say that B holds /rb"; exit 1; }
"$MW" region list "${STORE_OPTS[@]}" "$STORE" | tee "$WORK/list-store"
grep -A1 "^region 2 /rb" "$WORK/list-store" | grep -q "machine-B" &&
	grep -A1 "^region 1 /ra" "$WORK/list-store" | grep -q "machine-A" ||
	{ echo "FAIL: region list STORE does not name the holders of /ra and /rb"; exit 1; }

echo "-- 5b. region take: refused beside a live holder, --force fences it"
expect_err "another live mount holds it" "region take by B of /rc (A holds it)" "$MW" region take "$b/rc"
expect_err "only root and the user who mounted" "region take by another user" \
	setpriv --reuid=65534 --regid=65534 --clear-groups "$MW_REAL" region take "$b/rc"
expect_err "only root and the user who mounted" "region release by another user" \
	setpriv --reuid=65534 --regid=65534 --clear-groups "$MW_REAL" region release "$a/rc"
"$MW" region take "$b/rb" | grep -q "writes it already" || { echo "FAIL: region take of a region B writes"; exit 1; }
put "$a/rc/before-force" x
"$MW" region take --force "$b/rc"
grep -q "region take --force: fencing" "$b.log" || { echo "FAIL: B's log does not say that it fenced A"; exit 1; }
put "$b/rc/by-b" by-b
# A learns of the fence at its next commit in /rc: EIO, and nothing of it reaches the store
if python3 -c 'import os,sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o644)
os.write(fd, b"late"); os.fsync(fd)' "$a/rc/late-a" 2>/dev/null; then
	echo "FAIL: A's fsync in /rc succeeded after B took it by force"; exit 1
fi
expect_err "Input/output error" "region take by A of /rc (fenced there)" "$MW" region take "$a/rc"
[ "$(cat "$b/rc/before-force")" = x ] || { echo "FAIL: A's fsynced file is missing at B after the forced take"; exit 1; }
[ ! -e "$b/rc/late-a" ] || { echo "FAIL: A's write after the fence shows at B"; exit 1; }
"$MW" region list "$a" | grep -A1 "^region [0-9]* /rc" | grep -q "FENCED" ||
	{ "$MW" region list "$a"; echo "FAIL: region list at A does not say that A was fenced in /rc"; exit 1; }

echo "-- 6. kill -9 of B: A takes region rb after B's lease"
put "$b/rb/last" last
kill -9 "$(cat "$b.pid")"
t0=$(date +%s.%N)
put_within 20 "$a/rb/after-b" after ||
	{ echo "FAIL: A did not take region rb within 20 s of B's death"; exit 1; }
echo "   A took region rb $(echo "$(date +%s.%N) - $t0" | bc) s after kill -9 of B (lease 2 s)"
[ "$(cat "$a/rb/last")" = last ] && [ "$(wc -l <"$a/rb/journal")" = 50 ] ||
	{ echo "FAIL: a write B fsynced is missing at A"; exit 1; }
fusermount3 -uz "$b" 2>/dev/null || true

echo "-- 7. after unmount, a new mount has every acknowledged write"
"$MW" region list "$a"
# A was fenced in /rc (step 5b) with changes there never committed: its umount says so
if "$MW" umount "$a" >"$WORK/umount-a" 2>&1; then
	cat "$WORK/umount-a"; echo "FAIL: A's umount succeeded though A was fenced in /rc"; exit 1
fi
grep -qi "fenced\|took" "$WORK/umount-a" || { cat "$WORK/umount-a"; echo "FAIL: A's umount does not say that it was fenced"; exit 1; }
sed 's/^/   umount of A: /' "$WORK/umount-a" | head -3
mw_wait_exit "$a.pid"
on C mw_mount_logged "$c"
for f in rd/d1 rc/c1 rc/before-force rc/by-b ra/a1 ra/d/a2 ra/d/fa1-moved rb/b1 rb/fb1-moved rb/last rb/after-b x-from-ra tree-from-ra/sub/f top; do
	[ -e "$c/$f" ] || { echo "FAIL: $f is missing after the remount"; exit 1; }
done
[ "$(wc -l <"$c/ra/journal")" = 50 ] && [ "$(wc -l <"$c/rb/journal")" = 50 ] || { echo "FAIL: a journal is short after the remount"; exit 1; }
[ "$(stat -c %h "$c")" = 7 ] || { echo "FAIL: the root's nlink $(stat -c %h "$c") after the remount"; exit 1; }
mw_umount "$c"
mw_fsck
echo "PASS"
