#!/usr/bin/env bash
# tests/fs/metrics.sh MEMWALFS BACKEND - the Prometheus endpoint (--metrics-addr, -o
# metrics_addr=; issue 18), scraped with curl and checked by the Prometheus client's parser
# (metrics_check.py):
#  1. a mount with --metrics-addr serves GET /metrics; a second mount asking for the same port
#     fails at startup with a clear message and mounts nothing; a bad address is exit status 2;
#  2. a workload (files written with fsync, a directory fsync, memwalfs sync) makes the
#     counters and the commit, fsync and store PUT histograms grow, consistently;
#  3. after a remount with -o metrics_addr=, cold reads show in the store GET histogram;
#     other paths answer 404; after the unmount the port is closed.
# SKIP (77) without curl or python3-prometheus-client (tools/setup.sh test installs it).
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
fail() { echo "FAIL: $*"; exit 1; }
command -v curl >/dev/null || { echo "SKIP: no curl"; exit 77; }
/usr/bin/python3 -c 'import prometheus_client.parser' 2>/dev/null ||
	{ echo "SKIP: no python3-prometheus-client (apt-get install python3-prometheus-client)"; exit 77; }
port=$(/usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
url=http://127.0.0.1:$port/metrics
mnt=$WORK/mnt
scrape() { curl -sf --max-time 20 "$url" >"$1" || fail "scrape of $url"; }

echo "-- 1. --metrics-addr 127.0.0.1:$port"
mw_mount "$mnt" --metrics-addr "127.0.0.1:$port"
scrape "$WORK/m0"
grep -q '^memwalfs_serving 1$' "$WORK/m0" || fail "memwalfs_serving is not 1: $(grep serving "$WORK/m0")"
mkdir -p "$WORK/mnt2"
rc=0
"$MW" mount "${STORE_OPTS[@]}" --metrics-addr "127.0.0.1:$port" "$WORK/store2" "$WORK/mnt2" 2>"$WORK/err" || rc=$?
[ "$rc" = 1 ] || fail "a second mount on the same metrics port: exit status $rc, expected 1"
grep -q "cannot listen there: Address already in use" "$WORK/err" || { cat "$WORK/err"; fail "no clear bind error"; }
mountpoint -q "$WORK/mnt2" && fail "the refused mount mounted"
[ -e "$WORK/store2" ] && fail "the refused mount created its store"
echo "   ok: $(cat "$WORK/err")"
rc=0
"$MW" mount "${STORE_OPTS[@]}" -o metrics_addr=nocolon "$WORK/store2" "$WORK/mnt2" 2>"$WORK/err" || rc=$?
[ "$rc" = 2 ] || fail "metrics_addr=nocolon: exit status $rc, expected 2"
echo "   ok: $(cat "$WORK/err")"

echo "-- 2. counters and histograms grow with a workload"
for i in $(seq 20); do
	head -c $((i * 10000)) /dev/urandom >"$mnt/f$i"
	/usr/bin/python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' "$mnt/f$i"
done
mkdir "$mnt/d"
/usr/bin/python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' "$mnt/d"
"$MW" sync "$mnt"
cksum "$mnt"/f* >"$WORK/sums"
"$MW" stats --raw "$mnt" >"$WORK/stats"
scrape "$WORK/m1"
/usr/bin/python3 "$here/metrics_check.py" "$WORK/stats" "$WORK/m0" "$WORK/m1" || fail "scrape after the workload"
[ "$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/nothing")" = 404 ] || fail "not 404"
mw_umount "$mnt"
curl -s --max-time 5 "$url" >/dev/null && fail "the endpoint still answers after the unmount"

echo "-- 3. -o metrics_addr=, a remount and cold reads"
mw_mount "$mnt" -o "metrics_addr=127.0.0.1:$port"
scrape "$WORK/m2"
cksum "$mnt"/f* | cmp -s - "$WORK/sums" || fail "contents after the remount"
"$MW" stats --raw "$mnt" >"$WORK/stats"
echo x >"$mnt/g"
/usr/bin/python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' "$mnt/g"
scrape "$WORK/m3"
/usr/bin/python3 "$here/metrics_check.py" "$WORK/stats" "$WORK/m2" "$WORK/m3" get || fail "scrape after the remount"
grep '^memwalfs_open_progress_entries{phase="check"' "$WORK/m3" | sed 's/^/   /'
mw_umount "$mnt"
mw_fsck
echo PASS
