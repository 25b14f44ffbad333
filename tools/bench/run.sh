#!/bin/bash
# run.sh - benchmark memwalfs against its peers, in one run, on one S3 server.
#
# usage: tools/bench/run.sh [--quick] [--targets LIST] [--workloads LIST]
#                           [--runs N] [--out DIR] [--no-install]
#
#   --quick      small sizes: a few minutes in all (the full run: <= 25 min)
#   --targets    comma list among: memwalfs-s3 memwalfs-local s3fs rclone bindfs
#                local s3-raw (default: all)
#   --workloads  comma list among: fio tree dcreate list real (default: all;
#                s3-raw always runs its own PUT/GET workload)
#   --runs N     repeat every workload N times (tables show median and range)
#   --out DIR    where BENCHMARKS.md and bench-*.png go (default: docs/ of the
#                repository); raw results and logs go to DIR/bench-raw/
#   --no-install do not apt-get install missing tools
#
# Steps: installs missing Debian packages (s3fs rclone bindfs fio gnuplot-nox
# time jq git curl python3), uses the S3 server of S3_ENDPOINT or the one at
# 127.0.0.1:7480 when it answers, else starts one with tools/s3-server.sh
# (and stops it at the end), builds durable_creates, makes the source trees,
# then per target: creates its bucket, mounts it, runs the workloads, unmounts,
# deletes the bucket.  tools/bench/report.py writes BENCHMARKS.md and the charts.
# A trap unmounts everything and removes the scratch directory on any exit.
#
# Environment: MEMWALFS (binary, default build/memwalfs), BENCH_WORK (scratch,
# default /var/tmp), RGW_LOG / RGW_CONF (RGW access log and ceph.conf used to
# count requests and bytes stored; default under CEPH_DIR=/tmp/memwalfs-rgw).
set -uo pipefail

BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$BENCH_DIR/../.." && pwd)
ALL_TARGETS="memwalfs-s3 memwalfs-local s3fs rclone bindfs local s3-raw"
ALL_WORKLOADS="fio tree dcreate list real"
QUICK=0
TARGETS=$ALL_TARGETS
WORKLOADS=$ALL_WORKLOADS
RUNS=1
DOCS="$REPO/docs"
INSTALL=1

while [ $# -gt 0 ]; do
	case "$1" in
	--quick) QUICK=1 ;;
	--targets) TARGETS=${2//,/ }; shift ;;
	--workloads) WORKLOADS=${2//,/ }; shift ;;
	--runs) RUNS=$2; shift ;;
	--out) DOCS=$2; shift ;;
	--no-install) INSTALL=0 ;;
	-h|--help) sed -n '2,30p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
[ "$(id -u)" = 0 ] || { echo "run.sh: run as root (mounts, drop_caches, apt)" >&2; exit 2; }

# Sizes.  Quick: a few minutes.  Full: at most ~25 minutes on 2 cores; the S3
# peers get a smaller listing directory (each create there is a server PUT).
if [ "$QUICK" = 1 ]; then
	SEQ_MB=128 RAND_S=4 FSYNC_S=4 TREE_N=500 DC_S=4 DC_MAX=1000
	LIST_N=5000 LIST_N_S3=500 TAR_N=200 GIT_N=100
	STEP_TIMEOUT=120 SETTLE_TIMEOUT=90
	RAW_SPECS="4096:400:16 4096:100:1 1048576:64:16 8388608:16:8"
else
	SEQ_MB=1024 RAND_S=15 FSYNC_S=15 TREE_N=10000 DC_S=10 DC_MAX=20000
	LIST_N=100000 LIST_N_S3=3000 TAR_N=1500 GIT_N=1000
	STEP_TIMEOUT=300 SETTLE_TIMEOUT=300
	RAW_SPECS="4096:3000:16 4096:300:1 1048576:512:16 8388608:128:8"
fi

RUNID="$(date +%m%d%H%M%S)-$$"
WORK=$(mktemp -d "${BENCH_WORK:-/var/tmp}/memwalfs-bench.XXXXXX")
OUT="$DOCS/bench-raw"
RES="$OUT/results.tsv"
BIN="$WORK/bin"
SRC="$WORK/src"
MEMWALFS=${MEMWALFS:-$REPO/build/memwalfs}
STARTED_SERVER=0
mkdir -p "$OUT/logs" "$BIN" "$SRC"
rm -f "$OUT"/logs/* 2>/dev/null
printf 'target\tworkload\tmetric\tvalue\tunit\trun\n' >"$RES"
: >"$OUT/status.tsv"

. "$BENCH_DIR/lib.sh"
. "$BENCH_DIR/targets.sh"
. "$BENCH_DIR/workloads.sh"

# status TARGET STATE TEXT: one line per target for the report (ran/skipped).
status() {
	printf '%s\t%s\t%s\n' "$1" "$2" "$3" >>"$OUT/status.tsv"
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	say "cleaning up"
	[ -n "${TGT:-}" ] && target_umount "$TGT" 2>/dev/null
	umount_all
	if [ -n "${CUR_BKT:-}" ]; then s3_rb "$CUR_BKT"; fi
	if [ "$STARTED_SERVER" = 1 ]; then
		"$REPO/tools/s3-server.sh" stop >/dev/null 2>&1 || true
	fi
	# Never delete through a mount that is still there.
	if ! awk -v w="$WORK/" 'index($2, w) == 1 { f = 1 } END { exit !f }' /proc/mounts; then
		rm -rf "$WORK"
	else
		say "something is still mounted under $WORK; left in place"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'say "interrupted"; exit 130' INT TERM

# ---------------------------------------------------------------- install

install_tools() {
	local need=() p cmd
	for p in s3fs:s3fs rclone:rclone bindfs:bindfs fio:fio gnuplot-nox:gnuplot \
		time:/usr/bin/time jq:jq git:git curl:curl python3:python3; do
		cmd=${p#*:}
		command -v "$cmd" >/dev/null 2>&1 || need+=("${p%%:*}")
	done
	[ ${#need[@]} -eq 0 ] && return 0
	if [ "$INSTALL" = 0 ]; then
		say "missing tools (not installing): ${need[*]}"
		return 0
	fi
	for p in "${need[@]}"; do
		apt-cache policy "$p" | grep -q 'Candidate: (none)' && say "no Debian candidate for $p"
	done
	say "installing ${need[*]}"
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" \
		>"$OUT/logs/apt.log" 2>&1 || {
		apt-get update >>"$OUT/logs/apt.log" 2>&1
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" \
			>>"$OUT/logs/apt.log" 2>&1 || say "apt-get install failed; see $OUT/logs/apt.log"
	}
}

# ----------------------------------------------------------------- server

server_up() {
	curl -s -o /dev/null --max-time 3 "$1/" 2>/dev/null
}

start_server() {
	: "${S3_REGION:=us-east-1}"
	if [ -n "${S3_ENDPOINT:-}" ] && server_up "$S3_ENDPOINT"; then
		say "using the S3 server at $S3_ENDPOINT"
	elif server_up http://127.0.0.1:7480; then
		S3_ENDPOINT=http://127.0.0.1:7480
		: "${AWS_ACCESS_KEY_ID:=AKIATESTKEY0000}" "${AWS_SECRET_ACCESS_KEY:=testsecret0123456789}"
		say "using the running S3 server at $S3_ENDPOINT"
	elif [ -x "$REPO/tools/s3-server.sh" ]; then
		say "starting the S3 server (tools/s3-server.sh start)"
		local env
		env=$("$REPO/tools/s3-server.sh" start) || { say "s3-server.sh start failed"; return 1; }
		eval "$(printf '%s\n' "$env" | grep '^export ')"
		STARTED_SERVER=1
	else
		say "no S3 server: set S3_ENDPOINT or provide tools/s3-server.sh"
		return 1
	fi
	export S3_ENDPOINT S3_REGION AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
	local cdir=${CEPH_DIR:-/tmp/memwalfs-rgw}
	: "${RGW_LOG:=$cdir/log/client.rgw.a.log}" "${RGW_CONF:=$cdir/ceph.conf}"
	[ -r "$RGW_LOG" ] || say "RGW log $RGW_LOG not readable: request counts of peers unavailable"
}

# ---------------------------------------------------------------- sources

# copy_include head|tail N DEST: copy the first or last N regular files of
# /usr/include (sorted by path) into DEST, keeping their paths.
copy_include() {
	(cd /usr/include && find . -type f | sort | "$1" -n "$2" | tar -cf - -T -) | tar -xf - -C "$3"
}

# prepare_sources: SRC/tree (TREE_N files: 80% regular files of /usr/include,
# 20% padding files of 1-64 KiB), SRC/src.tar.gz (TAR_N files), SRC/repo (git, GIT_N
# files, two commits); sets TREE_FILES/BYTES, TAR_FILES/BYTES, GIT_FILES.
prepare_sources() {
	local n i sz
	say "making the source trees"
	mkdir -p "$SRC/tree" "$SRC/tarsrc" "$SRC/repo"
	copy_include head "$((TREE_N * 8 / 10))" "$SRC/tree"
	n=$(find "$SRC/tree" -type f | wc -l)
	mkdir -p "$SRC/tree/pad"
	for ((i = n; i < TREE_N; i++)); do
		sz=$(( (RANDOM % 64 + 1) * 1024 ))
		head -c "$sz" /dev/urandom >"$SRC/tree/pad/p$i"
	done
	TREE_FILES=$(find "$SRC/tree" -type f | wc -l)
	TREE_BYTES=$(find "$SRC/tree" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
	copy_include head "$TAR_N" "$SRC/tarsrc"
	tar -czf "$SRC/src.tar.gz" -C "$SRC/tarsrc" .
	TAR_FILES=$(find "$SRC/tarsrc" -type f | wc -l)
	TAR_BYTES=$(find "$SRC/tarsrc" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }')
	copy_include tail "$GIT_N" "$SRC/repo"
	(cd "$SRC/repo" && git init -q && git add -A && git -c user.name=bench -c user.email=b@b \
		commit -qm one && find . -path ./.git -prune -o -type f -name '*.h' -print | head -n 50 |
		xargs sed -i '1i /* bench edit */' && git add -A &&
		git -c user.name=bench -c user.email=b@b commit -qm two && git gc -q)
	rm -rf "$WORK/gitprobe"
	git clone -q --no-hardlinks "$SRC/repo" "$WORK/gitprobe"
	GIT_FILES=$(find "$WORK/gitprobe" -type f | wc -l)
	rm -rf "$WORK/gitprobe"
	say "tree: $TREE_FILES files $((TREE_BYTES / 1048576)) MiB; tarball: $TAR_FILES files; git: $GIT_FILES files in a clone"
}

# ------------------------------------------------------------------- main

run_target() {
	local t=$1 w
	TGT=$t
	if [ "$t" = s3-raw ]; then
		BKT=$(target_bucket s3raw) FSPID= BACKDIR= MNT=
		s3_mb "$BKT" || { status "$t" skipped "cannot create bucket"; return; }
		CUR_BKT=$BKT
		for ((RUN = 1; RUN <= RUNS; RUN++)); do wl_raw; done
		s3_rb "$BKT"
		CUR_BKT=
		status "$t" ran "PUT/GET straight to the server with curl --parallel"
		return
	fi
	if ! target_prepare "$t"; then
		status "$t" skipped "could not prepare (bucket)"
		return
	fi
	case "$t" in memwalfs-s3|s3fs|rclone) CUR_BKT=$(target_bucket "$t") ;; esac
	if ! target_mount "$t"; then
		status "$t" skipped "mount failed: $(tail -n 1 "$WORK/$t/fs.log" 2>/dev/null | tr '\t' ' ')"
		say "SKIP $t: mount failed"
	else
		status "$t" ran "$(case $t in
			s3fs) s3fs --version 2>/dev/null | head -n 1 | cut -c1-60 ;;
			rclone) rclone version 2>/dev/null | head -n 1 ;;
			bindfs) bindfs --version 2>/dev/null | head -n 1 ;;
			memwalfs-*) "$MEMWALFS" --version 2>/dev/null ;;
			local) df -T "$WORK" | awk 'NR == 2 { print $2 " on " $1 }' ;;
			esac)"
		for ((RUN = 1; RUN <= RUNS; RUN++)); do
			for w in $WORKLOADS; do
				# A workload that lost its mount (failed remount) ends the target.
				if [ "$t" != local ] && ! mountpoint -q "$MNT"; then
					target_mount "$t" || { say "SKIP rest of $t: remount failed"; break 2; }
				fi
				mkdir -p "$MNT/b$RUN"
				"wl_$w" || say "  $t: $w ended early"
			done
		done
		target_umount "$t"
	fi
	if [ -n "${CUR_BKT:-}" ]; then
		s3_rb "$CUR_BKT"
		CUR_BKT=
	fi
	rm -rf "$WORK/$t"
	TGT=
}

T_START=$SECONDS
say "memwalfs benchmark: $([ $QUICK = 1 ] && echo quick || echo full) run, targets: $TARGETS; workloads: $WORKLOADS; runs: $RUNS"
install_tools
start_server || exit 1
cc -O2 -pthread -o "$BIN/durable_creates" "$BENCH_DIR/durable_creates.c" || exit 1
prepare_sources
cat >"$OUT/meta.env" <<EOF
MODE=$([ $QUICK = 1 ] && echo quick || echo full)
DATE=$(date -u +%Y-%m-%dT%H:%MZ)
HOST=$(uname -sr), $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) RAM
SERVER=$S3_ENDPOINT ($(radosgw --version 2>/dev/null | awk '{ print "Ceph RGW " $3 }'))
RUNS=$RUNS
SEQ_MB=$SEQ_MB RAND_S=$RAND_S FSYNC_S=$FSYNC_S TREE_N=$TREE_FILES TREE_MB=$((TREE_BYTES / 1048576))
DC_S=$DC_S DC_MAX=$DC_MAX LIST_N=$LIST_N LIST_N_S3=$LIST_N_S3 TAR_N=$TAR_FILES GIT_N=$GIT_FILES
RAW_SPECS="$RAW_SPECS"
EOF
for t in $TARGETS; do
	say "== target $t"
	run_target "$t"
done
say "all targets done in $((SECONDS - T_START))s; writing the report"
echo "ELAPSED_S=$((SECONDS - T_START))" >>"$OUT/meta.env"
python3 "$BENCH_DIR/report.py" "$OUT" "$DOCS" || say "report.py failed"
say "done: $DOCS/BENCHMARKS.md"
