# lib.sh - helpers of the benchmark harness (sourced by tools/bench/run.sh).
#
# What is here: progress logging, the result file, S3 requests signed by curl
# (--aws-sigv4, with the x-amz-content-sha256 header RGW insists on), bucket
# create/sum/purge, counting of server requests from RGW's access log, and the
# CPU/peak-memory probes of a filesystem process.  Mounting is in targets.sh,
# the workloads in workloads.sh.
#
# Globals used (set by run.sh): OUT (result dir), RES (results.tsv), S3_ENDPOINT,
# S3_REGION, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, RGW_LOG, RGW_CONF.

# say MSG...: one progress line on stderr, with the elapsed time of the run.
say() {
	printf '[bench %4ds] %s\n' "$((SECONDS))" "$*" >&2
}

# result TARGET WORKLOAD METRIC VALUE UNIT: append one measurement to results.tsv.
# run.sh sets RUN (the repetition number) and SFX, the latency profile's
# suffix of target names ("" for the local server, "@20ms" through a 20 ms
# rttproxy): it is added here to every target but "probe" and "proxy0", whose
# workload names carry it (probe() adds it to before-T / after-T).
result() {
	local t=$1
	case "$t" in probe|proxy0) ;; *) t=$t${SFX:-} ;; esac
	printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$t" "$2" "$3" "$4" "$5" "${RUN:-1}" >>"$RES"
}

# now: wall clock in seconds with nanoseconds.
now() {
	date +%s.%N
}

# elapsed T0: seconds since T0 (from now), three decimals.
elapsed() {
	awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.3f", b - a }'
}

# ---------------------------------------------------------------- S3 by curl

# s3_curl ARGS...: curl with SigV4 signing for the bench credentials.
s3_curl() {
	curl -sS --aws-sigv4 "aws:amz:${S3_REGION}:s3" \
		--user "${AWS_ACCESS_KEY_ID}:${AWS_SECRET_ACCESS_KEY}" \
		-H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$@"
}

# s3_mb BUCKET: create a bucket; 0 when it exists afterwards.
s3_mb() {
	local code
	code=$(s3_curl -o /dev/null -w '%{http_code}' -X PUT "${S3_ENDPOINT}/$1") || return 1
	case "$code" in 200|409) return 0 ;; esac
	say "create bucket $1: HTTP $code"
	return 1
}

# urlenc STRING: percent-encode STRING for a query value (RFC 3986 unreserved kept).
urlenc() {
	local s=$1 out= c i
	for ((i = 0; i < ${#s}; i++)); do
		c=${s:i:1}
		case "$c" in
		[A-Za-z0-9.~_-]) out+=$c ;;
		*) out+=$(printf '%%%02X' "'$c") ;;
		esac
	done
	printf '%s' "$out"
}

# s3_sum BUCKET [PREFIX]: print "OBJECTS BYTES" of the keys not ending in '/'
# (directory markers of s3fs are left out), by paginated ListObjectsV2.
s3_sum() {
	local b=$1 prefix=${2:-} token= page q n=0 bytes=0 pn pb
	while :; do
		# curl 7.88 signs the query as given: keep the parameters sorted.
		q="list-type=2&max-keys=1000"
		[ -n "$token" ] && q="continuation-token=$(urlenc "$token")&$q"
		[ -n "$prefix" ] && q="$q&prefix=$(urlenc "$prefix")"
		page=$(s3_curl "${S3_ENDPOINT}/$b?$q") || return 1
		case "$page" in *'<ListBucketResult'*) ;; *) return 1 ;; esac
		read -r pn pb < <(printf '%s' "$page" | awk 'BEGIN { RS = "<Contents>" }
			NR > 1 {
				k = $0; sub(/<\/Key>.*/, "", k); sub(/.*<Key>/, "", k)
				z = $0; sub(/<\/Size>.*/, "", z); sub(/.*<Size>/, "", z)
				if (k !~ /\/$/) { n++; by += z }
			}
			END { printf "%d %.0f\n", n, by }')
		n=$((n + pn)); bytes=$((bytes + pb))
		if printf '%s' "$page" | grep -q '<IsTruncated>true</IsTruncated>'; then
			token=$(printf '%s' "$page" | sed -n 's/.*<NextContinuationToken>\([^<]*\)<\/NextContinuationToken>.*/\1/p')
			[ -n "$token" ] || break
		else
			break
		fi
	done
	echo "$n $bytes"
}

# s3_rb BUCKET: delete a bucket and everything in it (server side, fast), and
# have RGW's garbage collector free the space at once.
s3_rb() {
	if [ -r "$RGW_CONF" ] && command -v radosgw-admin >/dev/null; then
		if timeout 600 radosgw-admin -c "$RGW_CONF" bucket rm --bucket="$1" \
			--purge-objects >/dev/null 2>&1; then
			# RGW keeps the tails of deleted objects for 2 h by default: free
			# them now, or a full run fills the OSD (--quick writes too little
			# to matter and saves the seconds: S3_RB_GC=0).
			[ "${S3_RB_GC:-1}" = 1 ] &&
				timeout 600 radosgw-admin -c "$RGW_CONF" gc process --include-all >/dev/null 2>&1
			return 0
		fi
	fi
	# Through the API: every object (1000 per listing page), then the bucket.
	local keys code
	for _ in $(seq 1 1000); do
		keys=$(s3_curl "${S3_ENDPOINT}/$1?list-type=2&max-keys=1000" 2>/dev/null |
			grep -o '<Key>[^<]*</Key>' | sed 's/<Key>\(.*\)<\/Key>/\1/') || break
		[ -n "$keys" ] || break
		printf '%s\n' "$keys" | while read -r k; do
			s3_curl -o /dev/null -X DELETE "${S3_ENDPOINT}/$1/$k" || true
		done
	done
	code=$(s3_curl -o /dev/null -w '%{http_code}' -X DELETE "${S3_ENDPOINT}/$1") || true
	case "$code" in 204|404) ;; *) say "delete bucket $1: HTTP $code (it stays on the server)" ;; esac
}

# bucket_bytes BUCKET: bytes the server stores for the bucket (RGW bucket stats,
# includes multipart metadata), or the listing sum when radosgw-admin is absent.
bucket_bytes() {
	local v=
	if [ -r "$RGW_CONF" ] && command -v radosgw-admin >/dev/null; then
		v=$(timeout 60 radosgw-admin -c "$RGW_CONF" bucket stats --bucket="$1" 2>/dev/null |
			jq '[.usage[]?.size // 0] | add // 0' 2>/dev/null)
	fi
	if [ -z "$v" ]; then
		v=$(s3_sum "$1" | awk '{ print $2 }')
	fi
	echo "${v:-0}"
}

# wait_settled BUCKET PREFIX OBJECTS BYTES TIMEOUT: wait until the listing of
# PREFIX shows exactly OBJECTS objects of BYTES bytes in total (the server holds
# the data; BYTES "-" checks the count only); print the seconds waited, or
# "timeout".
wait_settled() {
	local b=$1 p=$2 want_n=$3 want_b=$4 limit=$5 t0 got
	t0=$(now)
	while :; do
		got=$(s3_sum "$b" "$p" 2>/dev/null || echo "x x")
		if [ "$want_b" = - ]; then
			[ "${got% *}" = "$want_n" ] && { elapsed "$t0"; return 0; }
		else
			[ "$got" = "$want_n $want_b" ] && { elapsed "$t0"; return 0; }
		fi
		if awk -v e="$(elapsed "$t0")" -v l="$limit" 'BEGIN { exit !(e > l) }'; then
			say "  not settled after ${limit}s: server has $got, expected $want_n $want_b"
			echo timeout
			return 1
		fi
		sleep 0.5
	done
}

# ------------------------------------------------ server requests (RGW log)
#
# RGW's beast frontend writes one access line per request at debug_rgw >= 1
# (the default):  ... beast: 0x..: 127.0.0.1 - user [date] "PUT /bucket/key HTTP/1.1" 200 4096 ...
# Each target has its own bucket, so counting the lines that name it between
# two byte offsets of the log gives that target's requests, unaffected by the
# other users of the shared server.

# rgw_mark: print the current size of the RGW log (an offset).
rgw_mark() {
	if [ -r "$RGW_LOG" ]; then stat -c %s "$RGW_LOG"; else echo 0; fi
}

# rgw_count BUCKET FROM TO: print "PUT GET LIST HEAD DELETE POST" counts of the
# requests naming BUCKET logged between offsets FROM and TO, then the bytes the
# server sent in answer to its GETs of objects (the access line's byte count:
# what the client fetched).
rgw_count() {
	local b=$1 from=$2 to=$3
	if [ ! -r "$RGW_LOG" ]; then
		echo "- - - - - - -"
		return
	fi
	tail -c +"$((from + 1))" "$RGW_LOG" | head -c "$((to - from))" | awk -v b="$b" '
		/ beast: / {
			if (!match($0, /"[A-Z]+ \/[^ ]* HTTP/)) next
			r = substr($0, RSTART + 1, RLENGTH - 6)
			split(r, f, " ")
			m = f[1]; path = f[2]
			p = path; q = ""
			i = index(p, "?"); if (i) { q = substr(p, i + 1); p = substr(p, 1, i - 1) }
			if (p != "/" b && index(p, "/" b "/") != 1) next
			key = substr(p, length(b) + 3)
			if (m == "GET" && key == "") c["LIST"]++
			else c[m]++
			if (m == "GET" && key != "") {
				split(substr($0, RSTART + RLENGTH), g, " ")
				gb += g[3]
			}
		}
		END {
			printf "%d %d %d %d %d %d %.0f\n", c["PUT"], c["GET"], c["LIST"], c["HEAD"], c["DELETE"], c["POST"], gb
		}'
}

# rgw_flush_counts BUCKET: record req_* of every step noted in RGW_PENDING
# (target, workload, run, from, to; written by step_end), then empty it.
# Waits 1.5 s first, once: the daemon writes its log asynchronously, and a
# step's last requests may land after the step's end mark (they are then
# counted with the next step).
rgw_flush_counts() {
	local t w r from to c i m
	[ -s "$RGW_PENDING" ] || return 0
	sleep 1.5
	while IFS=$'\t' read -r t w r from to; do
		read -r -a c < <(rgw_count "$1" "$from" "$to")
		i=0
		for m in PUT GET LIST HEAD DELETE POST; do
			RUN=$r result "$t" "$w" "req_$m" "${c[$i]}" requests
			i=$((i + 1))
		done
		RUN=$r result "$t" "$w" get_B "${c[6]}" B
	done <"$RGW_PENDING"
	: >"$RGW_PENDING"
}

# ------------------------------------------------------ process CPU / memory

# proc_cpu PID: CPU seconds (user + system) used so far by PID and its threads.
proc_cpu() {
	local tck
	tck=$(getconf CLK_TCK)
	[ -r "/proc/$1/stat" ] || { echo 0; return; }
	awk -v t="$tck" '{ sub(/.*\) /, ""); printf "%.2f\n", ($12 + $13) / t }' "/proc/$1/stat"
}

# proc_hwm_reset PID: reset the peak resident set size of PID (clear_refs 5).
proc_hwm_reset() {
	[ -w "/proc/$1/clear_refs" ] && echo 5 >"/proc/$1/clear_refs" 2>/dev/null
	return 0
}

# proc_hwm PID: peak resident set size of PID in MiB since the last reset.
proc_hwm() {
	awk '/^VmHWM:/ { printf "%.1f\n", $2 / 1024 }' "/proc/$1/status" 2>/dev/null || echo 0
}

# drop_caches: write back and drop the page cache, dentries and inodes.
drop_caches() {
	sync
	echo 3 >/proc/sys/vm/drop_caches 2>/dev/null || say "  (cannot drop caches: not root?)"
}
