#!/usr/bin/env bash
# tests/fs/regsnap.sh MEMWALFS BACKEND - a snapshot of a store with regions is one consistent
# cut of every region (issue 39; docs/SNAPSHOTS.md "Regions").  Two daemons with run
# directories and machine ids of their own stand for two machines (machines.sh); short GC
# grace and interval, small MemTables, so that flushes and GC run in every region's writer.
#  1. A makes the regions /ra and /rb and lets /rb go; B takes /rb at its first change.  A
#     writes / and /ra, B writes /rb; both sync.
#  2. `snapshot create`: one part per region (list shows region 0's line and one per region);
#     the tree is recorded once both mounts see all of it.
#  3. Both keep writing and deleting in all three regions (every file of the snapshot is
#     deleted or rewritten), A makes a region /rc; each region's writer GC deletes objects
#     of its region that existed at the snapshot (waited for, per region).
#  4. The snapshot mounted (`mount --snapshot`) is exactly the tree of step 2, regions
#     included (/rc is not there), and refuses changes.  Mounted with -o ro too.
#  5. `snapshot delete` removes every region's part; fsck is clean.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
. "$here/machines.sh" # on MACHINE CMD..., put PATH CONTENT
fail() { echo "FAIL: $*"; exit 1; }
# keys PREFIX: the store's object names under PREFIX, one a line
keys() { "$MW" objects ls "${STORE_OPTS[@]}" "$STORE" "$1" | awk '{ print $2 }'; }
# many DIR TAG N: N small files DIR/TAG<i>
many() { for i in $(seq "$3"); do echo "$2 $i" >"$1/$2$i"; done; }
a=$WORK/a b=$WORK/b s=$WORK/s
GC=(--cadence 50 --memtable-size 128K --gc-grace 3 --gc-interval 500 --lease 2)

echo "-- 1. A makes /ra and /rb, B writes /rb"
on A mw_mount_logged "$a" "${GC[@]}"
trap 'rc=$?; [ "$rc" = 0 ] || { mw_log_tail "$a"; mw_log_tail "$b"; mw_log_tail "$s"; }; mw_cleanup' EXIT
"$MW" region create "$a/ra"
"$MW" region create "$a/rb"
"$MW" region release "$a/rb"
mw_umount "$a" # mounted again without the writeback cache (the store has regions)
on A mw_mount_logged "$a" "${GC[@]}"
on B mw_mount_logged "$b" "${GC[@]}"
mkdir "$a/top" "$a/ra/d"
many "$a/top" t 200
many "$a/ra/d" a 300
put "$b/rb/first" first # B's first change in /rb takes it
mkdir "$b/rb/d"
many "$b/rb/d" b 300
echo "   written: / and /ra by A, /rb by B"

echo "-- 2. snapshot create"
"$MW" sync "$a" >/dev/null
"$MW" sync "$b" >/dev/null
"$MW" snapshot create "${STORE_OPTS[@]}" "$STORE" cut1 >"$WORK/create.out" || fail "snapshot create"
cat "$WORK/create.out"
grep -q "and 2 regions besides region 0" "$WORK/create.out" || fail "create does not name the two regions"
same_within 30 "$a" "$b" || fail "A and B do not show one tree"
sig "$a" >"$WORK/cut1.sig"
grep -q '^rb/d/b300 f' "$WORK/cut1.sig" && grep -q '^ra/d/a300 f' "$WORK/cut1.sig" ||
	fail "the recorded tree lacks the regions' files"
"$MW" snapshot list "${STORE_OPTS[@]}" "$STORE" >"$WORK/list.out"
cat "$WORK/list.out"
grep -q '^cut1 manifest ' "$WORK/list.out" || fail "list: no line of cut1"
[ "$(grep -c '^  region [12] manifest ' "$WORK/list.out")" = 2 ] || fail "list: not one line per region"
for r in 1 2; do
	keys "r/$r/snap/" | grep -qx "r/$r/snap/cut1" || fail "region $r has no part of cut1"
done

echo "-- 3. both keep writing and deleting in every region; GC runs in each"
rm -rf "$a/top" "$a/ra/d" "$b/rb/d" "$b/rb/first"
mkdir "$a/new" "$a/ra/new" "$b/rb/new"
many "$a/new" n 400 & p1=$!
many "$a/ra/new" n 400 & p2=$!
many "$b/rb/new" n 400
wait $p1 $p2
echo changed >"$a/ra/changed"
"$MW" region create "$a/rc"
echo rc >"$a/rc/f"
"$MW" sync "$a" >/dev/null
"$MW" sync "$b" >/dev/null
# what each region holds now: the snapshot's objects and those written since (the WAL of the
# creates above, covered by the flushes of the next ones, is GC's to delete whatever the
# snapshot pinned; which objects of the snapshot's own time are free depends on when the
# region flushed before it, so those alone are no sure sign: 1 run in 6 at load 20)
for p in "" r/1/ r/2/; do keys "$p" | grep -E "^${p}(wal|sst|manifest)/" >"$WORK/mid.${p//\//_}" || true; done
sleep 4 # past the grace
many "$a/new" x 600 & p1=$!
many "$a/ra/new" x 600 & p2=$!
many "$b/rb/new" x 600
wait $p1 $p2
"$MW" sync "$a" >/dev/null
"$MW" sync "$b" >/dev/null
for p in "" r/1/ r/2/; do
	f=$WORK/mid.${p//\//_}
	deadline=$((SECONDS + 60))
	while :; do
		gone=$(comm -23 <(sort "$f") <(keys "$p" | sort) | grep -c . || true)
		[ "$gone" -gt 0 ] && break
		[ $SECONDS -lt $deadline ] || fail "GC deleted nothing of region '${p:-0}' in 60 s"
		sleep 0.5
	done
	echo "   region ${p:-0}: GC deleted $gone of its $(grep -c . "$f") engine objects before the last writes"
done

echo "-- 4. the snapshot mounted is the tree of step 2"
mw_mount_logged "$s" --snapshot cut1
[ "$(sig "$s")" = "$(cat "$WORK/cut1.sig")" ] || {
	diff "$WORK/cut1.sig" <(sig "$s") | head -20
	fail "the snapshot differs from the tree at its creation"
}
[ ! -e "$s/rc" ] || fail "/rc, made after the snapshot, shows in it"
if touch "$s/ra/x" 2>/dev/null; then fail "a region of a snapshot mount is writable"; fi
if touch "$s/x" 2>/dev/null; then fail "a snapshot mount is writable"; fi
mw_umount "$s"
mw_mount "$s" -o ro --snapshot cut1
[ "$(sig "$s")" = "$(cat "$WORK/cut1.sig")" ] || fail "the snapshot mounted -o ro differs"
mw_umount "$s"
echo "   the snapshot is exactly the tree at its creation, in every region"

echo "-- 5. snapshot delete"
"$MW" snapshot delete "${STORE_OPTS[@]}" "$STORE" cut1 || fail "snapshot delete"
[ -z "$("$MW" snapshot list "${STORE_OPTS[@]}" "$STORE")" ] || fail "cut1 still listed"
for r in 1 2; do
	[ -z "$(keys "r/$r/snap/")" ] || fail "region $r keeps its part of cut1"
done
mw_umount "$b"
mw_umount "$a"
mw_fsck
echo "regsnap ($BACKEND): ok"
