#!/bin/bash
# s3raw.sh - raw PUT and GET throughput of the S3 server, no filesystem between.
#
# usage: s3raw.sh BUCKET SIZE_BYTES COUNT CONNECTIONS
#
# PUTs COUNT objects of SIZE_BYTES under BUCKET/raw-SIZE/ with CONNECTIONS
# parallel connections (one curl process, --parallel, SigV4 signed by curl with
# an UNSIGNED-PAYLOAD content hash), then GETs them back the same way, then
# prints one line:
#   put_s=... put_MBps=... put_req_s=... get_s=... get_MBps=... get_req_s=... errors=N
# MBps is 10^6 bytes per second.  Needs S3_ENDPOINT, S3_REGION,
# AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY in the environment.
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

# run CFG: all transfers of CFG; prints "SECONDS ERRORS".
run() {
	local t0 t1 codes bad
	t0=$(date +%s.%N)
	codes=$(curl -sS --no-progress-meter --parallel --parallel-immediate --parallel-max "$conns" \
		--aws-sigv4 "aws:amz:${S3_REGION:-us-east-1}:s3" \
		--user "${AWS_ACCESS_KEY_ID}:${AWS_SECRET_ACCESS_KEY}" \
		-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" \
		-w '%{http_code}\n' -K "$1" || true)
	t1=$(date +%s.%N)
	bad=$((count - $(printf '%s\n' "$codes" | grep -c '^200$' || true)))
	echo "$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }') $bad"
}

read -r ps pe < <(run "$tmp/put.cfg")
read -r gs ge < <(run "$tmp/get.cfg")
awk -v ps="$ps" -v gs="$gs" -v n="$count" -v sz="$size" -v e="$((pe + ge))" 'BEGIN {
	printf "put_s=%.3f put_MBps=%.2f put_req_s=%.1f get_s=%.3f get_MBps=%.2f get_req_s=%.1f errors=%d\n",
		ps, n * sz / ps / 1e6, n / ps, gs, n * sz / gs / 1e6, n / gs, e }'
