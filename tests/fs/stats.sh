#!/usr/bin/env bash
# tests/fs/stats.sh MEMWALFS BACKEND - "memwalfs stats" for people and for scripts (issue 37):
#  1. --raw prints every counter as "name value", the minute's store window and the GC times
#     among them;
#  2. the summary of a writer that wrote, overwrote and read a file: what is mounted (mount
#     point, store, writer, daemon), "health: ok", the store's requests and bytes per second
#     over the window (not 0 right after the writes), the cache's use and hit rate, the live
#     data in MiB (the same figure as live_bytes_est), and once a GC pass ran, the packs and
#     the garbage at that pass, the grace and the next pass;
#  3. a mount fenced by a second writer: the summary says STOPPED, the error in words, and
#     that another mount took the filesystem over;
#  4. inspect says the orphans' size in MiB as well as bytes, why nothing references them and
#     when GC takes them; fsck --deep, objects du and snapshot create print progress lines on
#     stderr with --progress when stderr is no terminal, and nothing without it.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
mnt=$WORK/mnt
fail() { echo "FAIL: $*"; [ -f "$WORK/sum" ] && cat "$WORK/sum"; exit 1; }
raw() { "$MW" stats --raw "$mnt" | awk -v k="$1" '$1 == k { print $2 }'; }
fsync() { /usr/bin/python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' "$1"; }

echo "-- 1. --raw"
mw_mount "$mnt" --gc-interval 300 --gc-grace 1
"$MW" stats --raw "$mnt" >"$WORK/raw"
# "name value", a region's "region.<rid>.name value" and its root's path (docs/METRICS.md)
line_re='^((region\.[0-9]+\.)?[a-z_0-9]+ -?[0-9]+|region\.[0-9]+\.path /.*)$'
bad=$(grep -cvE "$line_re" "$WORK/raw" || true)
[ "$bad" = 0 ] || { grep -vE "$line_re" "$WORK/raw"; fail "--raw: $bad lines are not \"name value\""; }
# one region (region 0): its lines say so, and its requests are the mount's
for l in "region.0.path /" "region.0.writer 1" "region.0.holder_state 4"; do
	grep -qx "$l" "$WORK/raw" || fail "--raw: no line \"$l\""
done
awk '$1 == "store_requests_get" { t = $2 } $1 == "region.0.store_requests_get" { r = $2 }
	END { exit !(t == r && t > 0) }' "$WORK/raw" || fail "--raw: region 0's GETs are not the mount's"
for k in store_window_sec store_window_requests store_window_bytes_sent \
	store_window_bytes_received gc_last_pass gc_next_pass gc_grace_sec live_bytes_est sticky_error; do
	grep -q "^$k " "$WORK/raw" || fail "--raw has no $k"
done
[ "$(raw gc_grace_sec)" = 1 ] || fail "gc_grace_sec $(raw gc_grace_sec), expected 1"
echo "   ok: $(wc -l <"$WORK/raw") counters"

echo "-- 2. the summary of a writer"
head -c 3000000 /dev/urandom >"$mnt/f" && fsync "$mnt/f"
head -c 3000000 /dev/urandom >"$mnt/f" && fsync "$mnt/f" # the first one's packs are garbage
dd if="$mnt/f" of=/dev/null bs=1M iflag=direct status=none # through the daemon, not the page cache
# the first GC pass after the overwrite (it runs every 300 ms)
p0=$(raw gc_passes)
for _ in $(seq 600); do [ "$(raw gc_passes)" -gt "$p0" ] && break; sleep 0.1; done
[ "$(raw gc_passes)" -gt "$p0" ] || fail "no GC pass within 60 s"
"$MW" stats "$mnt" >"$WORK/sum"
"$MW" stats --raw "$mnt" >"$WORK/raw"
sed 's/^/   | /' "$WORK/sum"
[ "$(wc -l <"$WORK/sum")" -le 12 ] || fail "the summary has $(wc -l <"$WORK/sum") lines"
head -n 1 "$WORK/sum" | grep -qF "$mnt: $STORE, writer (epoch " || fail "line 1 does not say what is mounted"
head -n 1 "$WORK/sum" | grep -q ", daemon $(cat "$mnt.pid")$" || fail "line 1 does not name the daemon"
grep -qx "health:  ok" "$WORK/sum" || fail "health is not ok"
# requests and bytes per second over the window: about 2 x 3 MB were sent within it
line=$(grep "^store:   last [0-9]* s: " "$WORK/sum") || fail "no store window line"
rps=$(echo "$line" | sed -n 's/.* s: \([0-9.]*\) requests\/s, .*/\1/p')
awk -v r="$rps" 'BEGIN { exit !(r > 0) }' || fail "requests/s is '$rps'"
echo "$line" | grep -Eq ', [0-9.]+ (KiB|MiB)/s sent, ' || fail "no bytes/s sent in '$line'"
grep -Eq "^cache:   memory [0-9.]+ [KMG]?i?B of [0-9.]+ [KMG]iB; " "$WORK/sum" || fail "no memory cache line"
grep -Eq "^         hit rate [0-9.]+% of [0-9]+ block reads" "$WORK/sum" || fail "no hit rate"
# live data: the figure of live_bytes_est, in MiB with one decimal
live=$(awk '$1 == "live_bytes_est" { printf "%.1f MiB", $2 / 1048576 }' "$WORK/raw")
grep -qF "space:   live data about $live " "$WORK/sum" || fail "live data is not $live"
packs=$(awk '$1 == "store_pack_bytes" { printf "%.1f MiB", $2 / 1048576 }' "$WORK/raw")
garbage=$(awk '$1 == "store_pack_bytes" { p = $2 } $1 == "store_live_pack_bytes" { l = $2 }
	$1 == "store_unflushed_pack_bytes" { l += $2 }
	END { g = p - l; if (g < 0) g = 0; if (g < 1024) printf "%d B", g; else if (g < 1048576) printf "%.1f KiB", g / 1024; else printf "%.1f MiB", g / 1048576 }' "$WORK/raw")
grep -Eq "^         at the last GC pass \([0-9]+ s ago\): packs $packs, of which $garbage garbage: GC deletes what has been unreferenced for 1 s \(next pass in [0-9]+ s\)$" "$WORK/sum" ||
	fail "the GC line does not say packs $packs, $garbage garbage, grace 1 s and the next pass"
echo "   ok: mounted, health, window, cache, live $live, GC: packs $packs, garbage $garbage"

echo "-- 3. a fenced mount says STOPPED"
mnt2=$WORK/mnt2
mw_mount "$mnt2" --takeover 2>/dev/null
if echo after >"$mnt/after" 2>/dev/null && fsync "$mnt/after" 2>/dev/null; then
	fail "the fenced mount acknowledged an fsync"
fi
"$MW" stats "$mnt" >"$WORK/sum"
grep -q "^health:  STOPPED: Stale file handle (sticky_error -116): another mount took the filesystem over" "$WORK/sum" ||
	fail "the fenced mount's summary does not say STOPPED"
grep -x "health:  ok" "$WORK/sum" && fail "a fenced mount is ok"
echo "   ok: $(grep STOPPED "$WORK/sum" | cut -c1-110)..."
rm -f "$WORK/sum"
mw_umount_cmd "$mnt" 2>/dev/null || true # fenced: its final commit fails
mw_wait_exit "$mnt.pid"
mw_umount "$mnt2"
mw_fsck

echo "-- 4. inspect's orphans; progress of fsck --deep, inspect and objects du"
"$MW" inspect "${STORE_OPTS[@]}" "$STORE" >"$WORK/insp" 2>"$WORK/insp.err"
[ -s "$WORK/insp.err" ] && { cat "$WORK/insp.err"; fail "inspect printed progress on a non-terminal without --progress"; }
line=$(grep '^orphans: ' "$WORK/insp") || fail "inspect prints no orphans line"
n=$(echo "$line" | sed -n 's/^orphans: \([0-9]*\) objects, .*/\1/p')
bytes=$(echo "$line" | sed -n 's/.* (\([0-9]*\) bytes) that the manifest in use does not reference$/\1/p')
[ -n "$n" ] && [ -n "$bytes" ] || fail "orphans line: '$line'"
human=$(awk -v b="$bytes" 'BEGIN { if (b < 1024) printf "%d B", b; else if (b < 1048576) printf "%.1f KiB", b / 1024; else if (b < 1073741824) printf "%.1f MiB", b / 1048576; else printf "%.1f GiB", b / 1073741824 }')
echo "$line" | grep -qF "orphans: $n objects, $human ($bytes bytes)" || fail "orphans line does not say $human: '$line'"
if [ "$n" -gt 0 ]; then
	grep -q "GC deletes each once no kept manifest references it and it is older than the grace" "$WORK/insp" ||
		fail "inspect does not say when GC takes the orphans"
	sum=$(awk '/^orphans: /{ o = 1; next } o && /^ +[0-9]+ objects .*: / { s += $1; next } { o = 0 } END { print s + 0 }' "$WORK/insp")
	[ "$sum" = "$n" ] || fail "the orphans by reason add up to $sum, not $n"
fi
echo "   ok: $line"
"$MW" fsck --deep --progress "${STORE_OPTS[@]}" "$STORE" >/dev/null 2>"$WORK/fsck.err" || { cat "$WORK/fsck.err"; fail "fsck --deep"; }
grep -Eq '^memwalfs fsck: [0-9]+ objects checked \([0-9]+ packs\), [0-9.]+ [KMG]?i?B \([0-9]+ s\)$' "$WORK/fsck.err" ||
	{ cat "$WORK/fsck.err"; fail "fsck --deep --progress printed no progress line"; }
"$MW" fsck --deep "${STORE_OPTS[@]}" "$STORE" >/dev/null 2>"$WORK/fsck.err"
[ -s "$WORK/fsck.err" ] && { cat "$WORK/fsck.err"; fail "fsck printed progress on a non-terminal without --progress"; }
"$MW" objects du --progress "${STORE_OPTS[@]}" "$STORE" >"$WORK/du" 2>"$WORK/du.err"
grep -Eq '^memwalfs objects du: [0-9]+ objects listed, ' "$WORK/du.err" || { cat "$WORK/du.err"; fail "objects du --progress printed no progress line"; }
total=$(awk '$1 == "total" { print $4 }' "$WORK/du")
human=$(awk -v b="$total" 'BEGIN { if (b < 1024) printf "%d B", b; else if (b < 1048576) printf "%.1f KiB", b / 1024; else if (b < 1073741824) printf "%.1f MiB", b / 1048576; else printf "%.1f GiB", b / 1073741824 }')
grep -Eq "^total +[0-9]+ objects +$total bytes +$human$" "$WORK/du" || { cat "$WORK/du"; fail "objects du: no $human beside $total bytes"; }
echo "   ok: $(head -n 1 "$WORK/du.err") / $(grep total "$WORK/du")"
"$MW" snapshot create --progress "${STORE_OPTS[@]}" "$STORE" s1 >/dev/null 2>"$WORK/snap.err" || { cat "$WORK/snap.err"; fail "snapshot create"; }
grep -q "^memwalfs snapshot create: pinning the state of $STORE (its manifest, a listing of the WAL)... ([0-9]* s)$" "$WORK/snap.err" ||
	{ cat "$WORK/snap.err"; fail "snapshot create --progress printed no progress line"; }
"$MW" snapshot create "${STORE_OPTS[@]}" "$STORE" s2 >/dev/null 2>"$WORK/snap.err"
[ -s "$WORK/snap.err" ] && { cat "$WORK/snap.err"; fail "snapshot create printed progress without --progress"; }
echo "   ok: snapshot create --progress printed its line; without --progress nothing"
echo "stats ($BACKEND): ok"
