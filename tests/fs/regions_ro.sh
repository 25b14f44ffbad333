#!/usr/bin/env bash
# tests/fs/regions_ro.sh MEMWALFS BACKEND - read-only mounts of a store with regions, the
# statistics and metrics per region, and the disk cache of a region (issue 39,
# docs/REGIONS.md). Daemons with run directories and host names of their own stand for
# machines (machines.sh); only the store is shared.
#  1. A (holds region 0) makes /ra and /rb and lets /rb go; B takes /rb at its first change.
#  2. R mounts -o ro: it finds both regions and follows them; files both write later, and a
#     removal, show at R.
#  3. Every change at R fails with EROFS (in /, /ra, /rb; create, mkdir, unlink, append,
#     rename, setxattr, region create) and changes nothing; region take fails.
#  4. R wrote nothing: no PUT, multipart or DELETE among its store requests (memwalfs stats
#     --raw, every region's and the mount's), no lease object of its own.
#  5. Per-region lines of `memwalfs stats --raw` at A, B and R (role, path, holder, WAL, puts,
#     store requests), the regions block of `memwalfs stats`, and the labelled metrics
#     (memwalfs_region_*{region="N"}) of A's --metrics-addr, parsed by the Prometheus client.
#  6. The disk cache of a region: a file of /rb read at a read-only mount with a disk cache,
#     unmounted, mounted again and read again: the second read sends no GET of region rb
#     (its blocks come from the shared disk cache; region rb's keys are its own).
#  7. --snapshot: region 0's state only; a region's root reads as missing (ENOENT).
#  8. Everything unmounts cleanly; fsck is clean.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
. "$here/machines.sh" # on MACHINE CMD..., put PATH CONTENT, expect_err, wait_file

# stat_of MNT NAME: the value of stats line NAME of the mount at MNT (empty: no such line)
stat_of() { "$MW" stats --raw "$1" | awk -v n="$2" '$1 == n && !d { print $2; d = 1 }'; }
# want MNT NAME OP VALUE: stats line NAME of MNT must compare (-eq, -gt...) to VALUE
want() {
	local v
	v=$(stat_of "$1" "$2")
	[ -n "$v" ] && [ "$v" "$3" "$4" ] || { echo "FAIL: $2 at $1 is '$v', not $3 $4"; exit 1; }
}
a=$WORK/a b=$WORK/b r=$WORK/r s=$WORK/s

echo "-- 1. A makes /ra and /rb; B writes /rb"
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
on A mw_mount_logged "$a" --lease 2 --metrics-addr "127.0.0.1:$port"
trap 'rc=$?; [ "$rc" = 0 ] || for m in "$a" "$b" "$r" "$s"; do mw_log_tail "$m"; done; mw_cleanup' EXIT
echo zero >"$a/top"
"$MW" region create "$a/ra"
"$MW" region create "$a/rb"
"$MW" region release "$a/rb"
put "$a/ra/a1" a1
on B mw_mount_logged "$b" --lease 2
put "$b/rb/b1" b1

echo "-- 2. R mounts -o ro and follows both regions"
on R mw_mount_logged "$r" -o ro,follow_interval=200
wait_file "$r/top" zero
wait_file "$r/ra/a1" a1
wait_file "$r/rb/b1" b1
put "$a/ra/a2" a2
put "$b/rb/b2" b2
echo more >>"$b/rb/b1" && "$MW" sync "$b" >/dev/null
mkdir "$a/ra/d" && put "$a/ra/d/a3" a3
rm "$a/ra/a1" && "$MW" sync "$a" >/dev/null
wait_file "$r/ra/a2" a2
wait_file "$r/rb/b2" b2
wait_file "$r/rb/b1" "$(printf 'b1more')"
wait_file "$r/ra/d/a3" a3
for _ in $(seq 300); do [ ! -e "$r/ra/a1" ] && break; sleep 0.1; done
[ ! -e "$r/ra/a1" ] || { echo "FAIL: A's removal of /ra/a1 does not show at R"; exit 1; }
[ "$(stat -c %i "$r/rb")" = "$(stat -c %i "$a/rb")" ] || { echo "FAIL: /rb has another inode at R"; exit 1; }

echo "-- 3. every change at R fails with EROFS"
for d in "" /ra /rb; do
	expect_err "Read-only file system" "create at R in $d/" touch "$r$d/nope"
	expect_err "Read-only file system" "mkdir at R in $d/" mkdir "$r$d/nope"
	expect_err "Read-only file system" "setxattr at R on $d/" setfattr -n user.x -v 1 "$r$d/"
done
expect_err "Read-only file system" "unlink at R in /ra" rm "$r/ra/a2"
expect_err "Read-only file system" "append at R in /rb" sh -c "echo x >>'$r/rb/b2'"
expect_err "Read-only file system" "rename at R in /rb" mv "$r/rb/b2" "$r/rb/b3"
expect_err "Read-only file system" "region create at R" "$MW" region create "$r/rc"
if "$MW" region take "$r/ra" 2>"$WORK/take-r"; then echo "FAIL: region take at R succeeded"; exit 1; fi
echo "   region take at R: $(cat "$WORK/take-r")"
[ ! -e "$a/nope" ] && [ ! -e "$a/ra/nope" ] && [ ! -e "$b/rb/nope" ] && [ ! -e "$b/rb/b3" ] &&
	[ "$(cat "$a/rb/b2" 2>/dev/null || cat "$b/rb/b2")" = b2 ] ||
	{ echo "FAIL: a refused change at R changed something"; exit 1; }

echo "-- 4. R sent no PUT, multipart or DELETE"
"$MW" stats --raw "$r" >"$WORK/stats-r"
for l in store_requests_put store_requests_mpu store_requests_delete \
	region.0.store_requests_put region.1.store_requests_put region.2.store_requests_put \
	region.1.store_requests_delete region.2.store_requests_delete; do
	v=$(awk -v n="$l" '$1 == n { print $2 }' "$WORK/stats-r")
	[ "$v" = 0 ] || { echo "FAIL: $l at R is '$v', not 0"; exit 1; }
done
echo "   R: $(awk '$1 ~ /^store_requests_/ { s += $2 } END { print s }' "$WORK/stats-r") requests, none that writes"
if [ "$BACKEND" = local ]; then
	! grep -l "^host machine-R" "$STORE"/mounts/* || { echo "FAIL: R wrote a lease"; exit 1; }
fi
"$MW" region list "$r" | tee "$WORK/list-r"
grep -q "^region 2 /rb" "$WORK/list-r" && grep -q "no lease" "$WORK/list-r" ||
	{ echo "FAIL: region list at R"; exit 1; }

echo "-- 5. the statistics per region"
want "$r" regions_known -eq 3
want "$r" region.1.writer -eq 0
want "$r" region.2.following -eq 1
want "$r" region.1.follow_entries -gt 0
want "$a" regions_known -eq 3
want "$a" region.0.writer -eq 1
want "$a" region.1.writer -eq 1
want "$a" region.2.writer -eq 0
want "$a" region.1.puts -gt 0
want "$a" region.1.groups_committed -gt 0
want "$a" region.1.store_requests_put -gt 0
want "$a" region.1.store_bytes_sent -gt 0
for _ in $(seq 100); do [ "$(stat_of "$a" region.2.holder_state)" = 1 ] && break; sleep 0.1; done
want "$a" region.2.holder_state -eq 1 # live: B (once A's watch looked again)
want "$a" region.1.holder_state -eq 4 # this mount
want "$b" region.2.writer -eq 1
want "$b" region.2.wal_next -gt 1
[ "$(stat_of "$a" region.1.path)" = /ra ] && [ "$(stat_of "$b" region.2.path)" = /rb ] ||
	{ echo "FAIL: the paths of the regions"; exit 1; }
# region 0's requests are the mount's less the other regions': they add up to the total
"$MW" stats --raw "$a" | awk '$1 == "store_requests_get" { t = $2 }
	$1 ~ /^region\.[0-9]+\.store_requests_get$/ { s += $2 }
	END { if (t != s || t == 0) { print "FAIL: GETs: total " t ", sum of the regions " s; exit 1 } }'
"$MW" stats "$a" | tee "$WORK/human-a"
"$MW" stats "$r" >"$WORK/human-r"
grep -q "read-only, following the writer" "$WORK/human-r" &&
	grep -q "region 2 /rb: followed" "$WORK/human-r" && grep -q "0 written by this mount" "$WORK/human-r" ||
	{ cat "$WORK/human-r"; echo "FAIL: memwalfs stats at R"; exit 1; }
grep -q "region 1 /ra: written here" "$WORK/human-a" &&
	grep -q "region 2 /rb: followed (written by a live mount)" "$WORK/human-a" ||
	{ echo "FAIL: memwalfs stats at A has no block per region"; exit 1; }
if command -v curl >/dev/null && /usr/bin/python3 -c 'import prometheus_client.parser' 2>/dev/null; then
	curl -sf --max-time 20 "http://127.0.0.1:$port/metrics" >"$WORK/metrics-a" || { echo "FAIL: scrape"; exit 1; }
	/usr/bin/python3 - "$WORK/metrics-a" <<'PY' || { echo "FAIL: the metrics per region"; exit 1; }
import sys
from prometheus_client.parser import text_string_to_metric_families
fams = {f.name: f for f in text_string_to_metric_families(open(sys.argv[1]).read())}
def one(fam, **labels):
    for s in fams[fam].samples:
        if all(s.labels.get(k) == v for k, v in labels.items()):
            return s.value
    raise SystemExit("no sample %s%s" % (fam, labels))
assert fams["memwalfs_region_writer"].type == "gauge"
assert one("memwalfs_region_writer", region="1") == 1 and one("memwalfs_region_writer", region="2") == 0
assert one("memwalfs_region_info", region="2", path="/rb") == 1
assert fams["memwalfs_region_puts"].type == "counter" and one("memwalfs_region_puts", region="1") > 0
assert one("memwalfs_region_store_requests", region="1", op="put") > 0
assert one("memwalfs_region_follow_behind", region="2") >= 0
# the mount's families keep their names: region 0's engine, the mount's store requests
assert one("memwalfs_puts") >= 0 and one("memwalfs_store_requests", op="get") > 0
print("   metrics: %d region families" % len([n for n in fams if n.startswith("memwalfs_region_")]))
PY
else
	echo "   (no curl or python3-prometheus-client: the metrics per region are not checked)"
fi

echo "-- 6. the disk cache of a region: a second cold read sends no GET of it"
head -c 3000000 /dev/urandom >"$WORK/big"
cp "$WORK/big" "$b/rb/big" && "$MW" sync "$b" >/dev/null
mw_umount "$r"
# a read-only mount with a disk cache of its own (local stores have one only when asked)
dcopt=(--cache-dir "$WORK/dc-s")
on S mw_mount_logged "$s" -o ro,follow_interval=200 "${dcopt[@]}"
for _ in $(seq 300); do cmp -s "$WORK/big" "$s/rb/big" && break; sleep 0.1; done
cmp "$WORK/big" "$s/rb/big" || { echo "FAIL: /rb/big differs at S"; exit 1; }
want "$s" region.2.read_store_gets -gt 0
want "$s" disk_cache_enabled -eq 1
mw_umount "$s" # the disk cache writes what it queued before it closes
on S mw_mount_logged "$s" -o ro,follow_interval=200 "${dcopt[@]}"
stat -c %s "$s/rb/big" >/dev/null # discovers region rb before the count
g0=$(stat_of "$s" region.2.store_requests_get)
cmp "$WORK/big" "$s/rb/big" || { echo "FAIL: /rb/big differs at S after the remount"; exit 1; }
g1=$(stat_of "$s" region.2.store_requests_get)
want "$s" region.2.read_store_gets -eq 0
want "$s" read_disk_hits -gt 0
[ "$g1" = "$g0" ] || { echo "FAIL: the second cold read sent $((g1 - g0)) GETs of region rb"; exit 1; }
echo "   second cold read of 3 MB in region rb: $((g1 - g0)) GETs, $(stat_of "$s" read_disk_hits) disk cache hits"
want "$s" store_requests_put -eq 0
mw_umount "$s"

echo "-- 7. --snapshot: region 0 only"
"$MW" snapshot create "${STORE_OPTS[@]}" "$STORE" snap1 >/dev/null
on S mw_mount_logged "$s" --snapshot snap1
[ "$(cat "$s/top")" = zero ] || { echo "FAIL: /top at the snapshot"; exit 1; }
expect_err "No such file" "a region's root at a snapshot mount" ls "$s/ra/"
mw_umount "$s"

echo "-- 8. unmount; fsck"
mw_umount "$b"
mw_umount "$a"
mw_fsck
echo PASS
