#!/usr/bin/env bash
# tests/fs/regions4.sh MEMWALFS BACKEND - four machines write one store, each its own region,
# and follow the others (issue 39, docs/REGIONS.md "Regions end to end"); four daemons with
# run directories, machine ids and host names of their own stand for four machines
# (machines.sh).
#  1. A makes the regions /r1../r4 and /r5 (a second region of A's), releases them, unmounts.
#  2. A, B, C and D mount; each writes its own region at the same time (A /r1 and /r5, B /r2,
#     C /r3, D /r4): random creates, appends, overwrites, renames inside the region, mkdir,
#     unlink and fsync'd journal lines (regions_load.py work; seeded: MEMWALFS_SEED replays).
#     A reader at every mount lists and reads the whole tree meanwhile.
#     Every mount converges to the same tree, the union of what the writers did: a listing
#     with sizes and SHA-256 of every file, compared with a bounded wait.
#  3. Across regions: rename and link between two regions of one mount (/r1 and /r5), between
#     a region and region 0, and between regions of two mounts fail with EXDEV; mv of a file
#     and of a directory from /r1 to /r5 ends with the data at the destination, and every
#     mount shows it; an mv by B into A's region fails (EROFS at the copy) and loses nothing.
#  4. All unmount (each final commit succeeds); a new mount shows exactly the tree of step 3
#     (every acknowledged write); fsck is clean.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"

. "$here/machines.sh" # on MACHINE CMD..., put PATH CONTENT
seed=${MEMWALFS_SEED:-$(((RANDOM << 15) | RANDOM))}
ops=${REGIONS4_OPS:-$([ "$BACKEND" = s3 ] && echo 60 || echo 120)}
wait_s=$([ "$BACKEND" = s3 ] && echo 120 || echo 60)
echo "seed $seed (MEMWALFS_SEED=$seed replays the writers' operations), $ops operations a region"
load() { python3 "$here/regions_load.py" "$@"; }
a=$WORK/a b=$WORK/b c=$WORK/c d=$WORK/d e=$WORK/e
fail() {
	echo "FAIL: $* (MEMWALFS_SEED=$seed)"
	exit 1
}
pids=() scans=()
trap 'rc=$?; touch "$WORK/stop"; kill "${pids[@]}" "${scans[@]}" 2>/dev/null || true; [ "$rc" = 0 ] || for m in "$a" "$b" "$c" "$d" "$e"; do [ -e "$m.log" ] && mw_log_tail "$m" 15; done; mw_cleanup' EXIT

echo "-- 1. A makes the regions /r1../r5"
on A mw_mount_logged "$a"
for r in r1 r2 r3 r4 r5; do "$MW" region create "$a/$r"; done
mw_umount "$a"

echo "-- 2. four mounts each write their own region, and follow the others"
on A mw_mount_logged "$a" --lease 2
for m in B C D; do on $m mw_mount_logged "$WORK/${m,,}" --lease 2; done
load work "$a/r1" "$seed" "$ops" "$WORK/man-r1" & pids+=($!)
load work "$a/r5" $((seed + 5)) $((ops / 3)) "$WORK/man-r5" & pids+=($!)
load work "$b/r2" $((seed + 2)) "$ops" "$WORK/man-r2" & pids+=($!)
load work "$c/r3" $((seed + 3)) "$ops" "$WORK/man-r3" & pids+=($!)
load work "$d/r4" $((seed + 4)) "$ops" "$WORK/man-r4" & pids+=($!)
for m in a b c d; do load scan "$WORK/$m" "$WORK/stop" & scans+=($!); done
for p in "${pids[@]}"; do wait "$p" || fail "a writer failed"; done
touch "$WORK/stop"
for p in "${scans[@]}"; do wait "$p" || fail "a reader failed"; done
man=$WORK/man-r1,$WORK/man-r2,$WORK/man-r3,$WORK/man-r4,$WORK/man-r5
load same "$wait_s" "$man" "$a" "$b" "$c" "$d" || fail "the mounts did not converge"

# each mount holds the regions it wrote, and names the others' holders (it met them all;
# its watch reads a region's holder object every 4th tick: up to 30 s to see it)
# holder_is MNT RID PATH PATTERN: region list at MNT shows PATTERN in the holder line of RID
holder_is() {
	for _ in $(seq 300); do
		"$MW" region list "$1" >"$WORK/list" && grep -A1 "^region $2 $3\$" "$WORK/list" | grep -q "$4" && return 0
		sleep 0.1
	done
	cat "$WORK/list"
	return 1
}
holder_is "$b" 2 /r2 "this mount" || fail "B does not hold /r2"
holder_is "$a" 2 /r2 machine-B || fail "A does not name B as /r2's holder"
holder_is "$c" 4 /r4 machine-D || fail "C does not name D as /r4's holder"
holder_is "$d" 1 /r1 machine-A || fail "D does not name A as /r1's holder"
"$MW" region list "$a"
echo "-- 3. rename, link and mv across regions"
python3 - "$a" "$b" <<'PY' || fail "rename/link across regions"
import errno, os, sys
a, b = sys.argv[1], sys.argv[2]
for p in (a + "/r1/x", a + "/r5/y", b + "/r2/y"):
    open(p, "w").write("x")
os.mkdir(a + "/r1/xd")
cases = [(a, "/r1/x", "/r5/x"), (a, "/r1/xd", "/r5/xd"), (a, "/r5/y", "/r1/y"),
         (a, "/r1/x", "/x"), (b, "/r2/y", "/r3/y"), (b, "/r2/y", "/r1/y")]
for root, f, t in cases:
    for op in (os.rename, os.link):
        if op is os.link and f.endswith("xd"):
            continue
        try:
            op(root + f, root + t)
        except OSError as e:
            if e.errno != errno.EXDEV:
                raise SystemExit("%s %s%s -> %s: %s, not EXDEV" % (op.__name__, root, f, t, e))
        else:
            raise SystemExit("%s %s%s -> %s succeeded" % (op.__name__, root, f, t))
for p in (a + "/r1/x", a + "/r5/y", b + "/r2/y"):
    os.unlink(p)
os.rmdir(a + "/r1/xd")
PY
# pick a file and a directory of A's first region (the listing is sorted: the choice is the
# seed's) and move them to A's second region
f=$(awk '$1 == "f" && $2 ~ /^r1\/[^\/]+$/ && $2 != "r1/journal" { print $2; exit }' "$WORK/man-r1")
dir=$(awk '$1 == "d" && $2 ~ /^r1\/[^\/]+$/ { print $2; exit }' "$WORK/man-r1")
[ -n "$f" ] || { put "$a/r1/extra" extra; f=r1/extra; }
[ -n "$dir" ] || { mkdir "$a/r1/dx" && put "$a/r1/dx/inner" inner; dir=r1/dx; }
load listing "$a" "$dir" | sed "s#^\([dfl]\) r1/#\1 r5/moved-#" >"$WORK/dir-before"
sum=$(sha256sum <"$a/$f")
mv "$a/$f" "$a/r5/moved-file" || fail "mv of a file across regions"
mv "$a/$dir" "$a/r5/moved-${dir#r1/}" || fail "mv of a directory across regions"
[ ! -e "$a/$f" ] && [ ! -e "$a/$dir" ] || fail "mv across regions left the source"
[ "$(sha256sum <"$a/r5/moved-file")" = "$sum" ] || fail "the file moved across regions differs"
load listing "$a" "r5/moved-${dir#r1/}" >"$WORK/dir-after"
diff "$WORK/dir-before" "$WORK/dir-after" || fail "the directory moved across regions differs"
# B moves a file of its region into A's: the copy is refused, and B's file stays
g=$(awk '$1 == "f" { print $2; exit }' "$WORK/man-r2")
[ -n "$g" ] || fail "B's region has no file"
if mv "$b/$g" "$b/r1/from-b" 2>"$WORK/mv.err"; then fail "mv by B into A's region succeeded"; fi
grep -q "Read-only file system" "$WORK/mv.err" || { cat "$WORK/mv.err"; fail "mv by B into A's region: not EROFS"; }
[ -e "$b/$g" ] && [ ! -e "$a/r1/from-b" ] || fail "a refused mv across regions changed something"
echo "   EXDEV for rename and link; mv of $f and of $dir to /r5; B's mv into /r1 refused (EROFS)"
"$MW" sync "$a" >/dev/null
load listing "$a" >"$WORK/final"
load same "$wait_s" "$WORK/final" "$b" "$c" "$d" || fail "the mounts did not converge after the mv"

echo "-- 4. all unmount; a new mount has every acknowledged write; fsck"
for m in a b c d; do on "${m^^}" mw_umount "$WORK/$m" || fail "the unmount of $m failed"; done
on E mw_mount_logged "$e"
load same 5 "$WORK/final" "$e" || fail "the remount does not show the tree"
mw_umount "$e"
mw_fsck || fail "fsck"
echo "PASS"
