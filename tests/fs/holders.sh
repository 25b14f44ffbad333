#!/usr/bin/env bash
# tests/fs/holders.sh MEMWALFS BACKEND - read-write mounts of one store on two machines (issue
# 39, docs/REGIONS.md "Holders and leases"). Daemons with run directories of their own
# (MEMWALFS_RUNDIR) stand for mounts on other machines: none sees another's lock file, only
# the store. Before this, the second mount claimed the store and fenced the first: the files
# the first wrote just before and after (closed, never fsynced) were lost without an error.
#  1. A writes; B mounts read-write beside it: exit 0, and it says that it follows A (naming
#     A's mount point); B reads A's files, and a file A writes later; every change at B fails
#     with EROFS (create, mkdir, open for writing, truncate, setxattr, rename, unlink, symlink,
#     chmod) and changes nothing; A keeps writing, unharmed (sticky_error 0).
#  2. A unmounts: the next change at B takes the store over at once; B has every file A wrote
#     (closed, never fsynced, included) and A's last ones; B writes; after a remount all is there.
#  3. kill -9 of the holder (B, --lease 2) while C follows: C's changes fail with EROFS while
#     B's lease runs, then one succeeds within the lease and a few polls; every file B fsynced,
#     and every file it closed before its last fsync, is at C.
#  4. SIGSTOP of the holder (C, --lease 2) for longer than its lease: D takes the store over;
#     C, woken, acknowledges no fsync any more (EIO), and nothing it wrote after reaches the store.
#  5. --takeover beside a live holder (D) on another machine fences it on purpose: D's next
#     change fails with EIO; the new mount has everything D fsynced.
#  6. kill -9 of a mount and a new mount on the same machine: the dead daemon's pid is gone, so
#     its lease does not hold the store: the new mount writes at once.
#  7. fsck is clean.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"

. "$here/machines.sh" # on MACHINE CMD..., put PATH CONTENT, expect_err, wait_file
stat_of() { "$MW" stats --raw "$1" | awk -v n="$2" '$1 == n { print $2 }'; }
# expect_erofs WHAT CMD...: CMD must fail with "Read-only file system"
expect_erofs() {
	local what=$1 err
	shift
	if err=$("$@" 2>&1); then echo "FAIL: $what at a following mount succeeded"; exit 1; fi
	case $err in
	*"Read-only file system"*) ;;
	*) echo "$err"; echo "FAIL: $what at a following mount: not EROFS"; exit 1 ;;
	esac
}
a=$WORK/a b=$WORK/b c=$WORK/c d=$WORK/d e=$WORK/e f=$WORK/f

echo "-- 1. a second read-write mount on another machine follows the live one"
on A mw_mount "$a"
head -c 300000 /dev/urandom >"$WORK/w1"
cp "$WORK/w1" "$a/w1" # closed, never fsynced
mkdir "$a/dir" && echo one >"$a/dir/f"
on B mw_mount_logged "$b"
trap 'rc=$?; [ "$rc" = 0 ] || mw_log_tail "$b"; mw_cleanup' EXIT
grep "follows it" "$b.log"
grep -q "follows it" "$b.log" && grep -q "$a" "$b.log" ||
	{ echo "FAIL: B does not say that it follows the mount at $a"; exit 1; }
wait_file "$b/dir/f" one
cmp "$WORK/w1" "$b/w1"
echo later >"$a/later"
wait_file "$b/later" later
expect_erofs create touch "$b/new"
expect_erofs mkdir mkdir "$b/newdir"
expect_erofs "open for writing" sh -c "echo x >>'$b/later'"
expect_erofs truncate truncate -s 0 "$b/w1"
expect_erofs setxattr setfattr -n user.x -v 1 "$b/w1"
expect_erofs rename mv "$b/later" "$b/later2"
expect_erofs unlink rm "$b/later"
expect_erofs symlink ln -s x "$b/link"
expect_erofs chmod chmod 600 "$b/w1"
[ ! -e "$a/new" ] && [ ! -e "$a/newdir" ] && [ "$(cat "$a/later")" = later ] && cmp "$WORK/w1" "$a/w1"
head -c 200000 /dev/urandom >"$WORK/w2"
cp "$WORK/w2" "$a/w2" # after B's mount: closed, never fsynced
[ "$(stat_of "$a" sticky_error)" = 0 ] || { echo "FAIL: B harmed A"; exit 1; }
echo "   B follows A, refuses changes with EROFS; A keeps writing"

echo "-- 2. A unmounts: B's next change takes the store over"
echo last >"$a/last"
on A mw_umount "$a"
echo mine >"$b/mine" || { echo "FAIL: B could not take the store over after A's unmount"; exit 1; }
cmp "$WORK/w1" "$b/w1" && cmp "$WORK/w2" "$b/w2" && [ "$(cat "$b/last")" = last ] &&
	[ "$(cat "$b/dir/f")" = one ] && [ "$(cat "$b/mine")" = mine ]
mkdir "$b/bdir" && mv "$b/later" "$b/bdir/later"
sync "$b/mine"
echo "   B writes now and has all of A's files"

echo "-- 2b. memwalfs region list and region release"
on A mw_mount "$a"
wait_file "$a/mine" mine
"$MW" region list "$b" | tee "$WORK/list-b"
grep -q "holder: this mount" "$WORK/list-b" || { echo "FAIL: region list of the holder does not say so"; exit 1; }
"$MW" region list "$a" | tee "$WORK/list-a"
grep -q "holder: the mount at $b on machine-B " "$WORK/list-a" && grep -q "this mount follows it" "$WORK/list-a" ||
	{ echo "FAIL: region list of the follower does not name the holder"; exit 1; }
"$MW" region list "${STORE_OPTS[@]}" "$STORE" | tee "$WORK/list-s"
grep -q "holder: the mount at $b " "$WORK/list-s" && grep -q "state: live" "$WORK/list-s" ||
	{ echo "FAIL: region list of the store does not name the live holder"; exit 1; }
if "$MW" region release "$a" 2>"$WORK/rel.err"; then echo "FAIL: a follower released"; exit 1; fi
echo unsynced >"$b/unsynced" # closed, never fsynced: the release commits it
"$MW" region release "$b"
echo again >"$a/again" || { echo "FAIL: A could not take the store after B released it"; exit 1; }
[ "$(cat "$a/unsynced")" = unsynced ]
expect_erofs "create after the release" touch "$b/after"
wait_file "$b/again" again
on A mw_umount "$a"
echo "   region list names the holder; after region release the other mount writes"

echo "-- 3. kill -9 of the holder: another mount takes over after its lease"
on B mw_umount "$b"
on B mw_mount "$b" --lease 2
on C mw_mount "$c" 2>"$WORK/c.err" || { cat "$WORK/c.err"; exit 1; }
grep -q "follows it" "$WORK/c.err" || { cat "$WORK/c.err"; echo "FAIL: C did not follow B"; exit 1; }
for i in $(seq 20); do
	head -c $((i * 9000)) /dev/urandom >"$WORK/k$i"
	cp "$WORK/k$i" "$b/k$i"
done
put "$b/k21" synced
wait_file "$c/bdir/later" later
expect_erofs "create while B lives" touch "$c/early"
kill -9 "$(cat "$b.pid")"
start=$(date +%s.%N)
until touch "$c/taken" 2>/dev/null; do
	sleep 0.2
	if awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN { exit !(n - s > 30) }'; then
		echo "FAIL: C did not take the store over within 30 s of B's death (lease 2 s)"; exit 1
	fi
done
took=$(awk -v s="$start" -v n="$(date +%s.%N)" 'BEGIN { printf "%.1f", n - s }')
for i in $(seq 20); do cmp "$WORK/k$i" "$c/k$i"; done
[ "$(cat "$c/k21")" = synced ]
fusermount3 -u "$b" 2>/dev/null || fusermount3 -uz "$b" || true
echo "   C wrote ${took} s after B died; every file B wrote before its fsync is there"

echo "-- 4. a holder stopped longer than its lease is replaced, and fenced when it wakes"
on C mw_umount "$c"
on C mw_mount "$c" --lease 2
put "$c/before" before
on D mw_mount "$d" 2>/dev/null
wait_file "$d/before" before
cpid=$(cat "$c.pid")
kill -STOP "$cpid"
start=$(date +%s)
until touch "$d/dtook" 2>/dev/null; do
	sleep 0.2
	[ $(( $(date +%s) - start )) -lt 40 ] || { kill -CONT "$cpid"; echo "FAIL: D did not take over from the stopped C"; exit 1; }
done
kill -CONT "$cpid"
rc=0
put "$c/zombie" zombie 2>/dev/null || rc=$?
[ "$rc" != 0 ] || { echo "FAIL: the woken holder acknowledged an fsync after it was replaced"; exit 1; }
sleep 1
[ ! -e "$d/zombie" ] || { echo "FAIL: the fenced holder's file reached the store"; exit 1; }
on C mw_umount_cmd "$c" 2>/dev/null || true # fenced: exit 1 expected
mw_wait_exit "$c.pid"
echo "   D took over; C, woken, got EIO and changed nothing"

echo "-- 5. --takeover fences a live holder on another machine"
put "$d/dsync" dsync
on E mw_mount "$e" --takeover 2>"$WORK/e.err" || { cat "$WORK/e.err"; exit 1; }
[ "$(cat "$e/dsync")" = dsync ] && [ "$(cat "$e/dtook")" = "" ]
echo enew >"$e/enew"
rc=0
put "$d/dlate" late 2>/dev/null || rc=$?
[ "$rc" != 0 ] || { echo "FAIL: the fenced holder acknowledged an fsync"; exit 1; }
rc=0
(echo later >"$d/dlate2") 2>/dev/null || rc=$?
[ "$rc" != 0 ] || { echo "FAIL: the fenced holder took a change after it learned"; exit 1; }
[ ! -e "$e/dlate" ] && [ ! -e "$e/dlate2" ]
on D mw_umount_cmd "$d" 2>/dev/null || true
mw_wait_exit "$d.pid"
on E mw_umount "$e"
echo "   the old holder fails changes with EIO"

echo "-- 6. kill -9 of a mount, then a mount on the same machine: it writes at once"
on F mw_mount "$f"
put "$f/fsync" fsynced
kill -9 "$(cat "$f.pid")"
fusermount3 -u "$f" 2>/dev/null || fusermount3 -uz "$f" || true
on F mw_mount "$f" 2>"$WORK/f.err" || { cat "$WORK/f.err"; exit 1; }
! grep -q "follows it" "$WORK/f.err" || { cat "$WORK/f.err"; echo "FAIL: the remount after a crash followed the dead daemon"; exit 1; }
echo after >"$f/after" && [ "$(cat "$f/fsync")" = fsynced ]
on F mw_umount "$f"
echo "   the dead daemon's pid is gone: its lease does not hold the store"

echo "-- 7. fsck"
mw_fsck
echo "PASS"
