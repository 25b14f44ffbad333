#!/bin/bash
# s3raw.sh - raw PUT and GET throughput of the S3 server, no filesystem between.
#
# usage: s3raw.sh BUCKET SIZE_BYTES COUNT CONNECTIONS
#
# PUTs COUNT objects of SIZE_BYTES under BUCKET/raw-SIZE/ with CONNECTIONS
# parallel connections (one curl process, --parallel, SigV4 signed by curl with
# an UNSIGNED-PAYLOAD content hash), then GETs them back the same way, then
# prints one line:
#   put_s=... put_MBps=... put_req_s=... put_p50_ms=... get_s=... get_MBps=... get_req_s=...
#   get_p50_ms=... errors=N
# MBps is 10^6 bytes per second; p50_ms is the median time of one request as curl
# reports it (%{time_total}: the round trip with CONNECTIONS requests in flight).  Needs S3_ENDPOINT, S3_REGION,
# AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY in the environment.  curl 7.88 sends "Expect:
# 100-continue" with every --upload-file and waits up to 1 s for the server's 100 before the
# body: a second round trip per PUT (2 x 20 ms through run.sh --rtt 20; memwalfs sends no
# Expect).  --expect100-timeout 0.001 sends the body at once (measured through rttproxy at 50 ms
# each way: a PUT on a kept connection 214 ms without it, 125 ms with it); "-H Expect:" would
# break curl's SigV4 signature (it signs the header it leaves out: 403).
set -euo pipefail

[ $# -eq 4 ] || { echo "usage: s3raw.sh BUCKET SIZE_BYTES COUNT CONNECTIONS" >&2; exit 2; }
b=$1 size=$2 count=$3 conns=$4
tmp=$(mktemp -d /tmp/s3raw.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

head -c "$size" /dev/urandom >"$tmp/obj"
: >"$tmp/put.cfg"
: >"$tmp/get.cfg"
for ((i = 0; i < count; i++)); do
	u="${S3_ENDPOINT}/$b/raw-$size/o$i"
	printf 'url = "%s"\nupload-file = "%s"\noutput = "/dev/null"\n' "$u" "$tmp/obj" >>"$tmp/put.cfg"
	printf 'url = "%s"\noutput = "/dev/null"\n' "$u" >>"$tmp/get.cfg"
done

# run CFG: all transfers of CFG; prints "SECONDS ERRORS P50_MS".
run() {
	local t0 t1 out bad
	t0=$(date +%s.%N)
	out=$(curl -sS --no-progress-meter --parallel --parallel-immediate --parallel-max "$conns" \
		--expect100-timeout 0.001 \
		--aws-sigv4 "aws:amz:${S3_REGION:-us-east-1}:s3" \
		--user "${AWS_ACCESS_KEY_ID}:${AWS_SECRET_ACCESS_KEY}" \
		-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
		-w '%{http_code} %{time_total}\n' -K "$1" || true)
	t1=$(date +%s.%N)
	bad=$((count - $(printf '%s\n' "$out" | grep -c '^200 ' || true)))
	printf '%s\n' "$out" | awk '$1 == 200 { print $2 * 1000 }' | sort -g |
		awk -v a="$t0" -v b="$t1" -v e="$bad" '{ v[NR] = $1 }
			END { printf "%.3f %d %.3f\n", b - a, e, NR ? v[int((NR + 1) / 2)] : 0 }'
}

read -r ps pe pl < <(run "$tmp/put.cfg")
read -r gs ge gl < <(run "$tmp/get.cfg")
awk -v ps="$ps" -v gs="$gs" -v pl="$pl" -v gl="$gl" -v n="$count" -v sz="$size" \
	-v e="$((pe + ge))" 'BEGIN {
	printf "put_s=%.3f put_MBps=%.2f put_req_s=%.1f put_p50_ms=%.3f get_s=%.3f get_MBps=%.2f get_req_s=%.1f get_p50_ms=%.3f errors=%d\n",
		ps, n * sz / ps / 1e6, n / ps, pl, gs, n * sz / gs / 1e6, n / gs, gl, e }'
