#!/bin/bash
# run.sh - benchmark memwalfs against its peers, in one run, on one S3 server.
#
# usage: tools/bench/run.sh [--quick] [--targets LIST] [--workloads LIST]
#                           [--runs N] [--out DIR] [--no-install] [--no-build]
#                           [--rtt LIST]
#
#   --quick      small sizes, one run: 5.6 min on 2 cores at load 10, 9 min at
#                load 13 (the full run, 3 runs: 46 min at load 10)
#   --targets    comma list among: memwalfs-s3 memwalfs-local s3fs rclone bindfs
#                local s3-raw (default: all)
#   --workloads  comma list among: seq jbsmall md gs dcreate rand cp statbp
#                (the default set), churn (space under churn, memwalfs
#                targets only: CHURN_S s, 600 full, 60 --quick; not run by
#                default), regions (issue 39: 1, 2 and 4 mounts each writing
#                its own region of one store, beside the raw server with as
#                many connections, and the follower lag between them;
#                memwalfs targets only; not run by default) and tree list
#                real (older ones, not run by default); s3-raw always runs
#                its own PUT/GET workload
#   --runs N     repeat everything N times (default 3, --quick 1); tables show
#                the median and min-max, the charts the spread
#   --out DIR    where BENCHMARKS.md and bench-*.png go (default: docs/ of the
#                repository); results go to DIR/bench-raw/, logs to
#                DIR/bench-raw/logs/ (not tracked)
#   --no-install do not apt-get install missing tools
#   --no-build   use MEMWALFS (default build/memwalfs) as it is
#   --set K=V    override one of the sizes below (e.g. --set GS_FILES_S3=800),
#                for checking that a figure stays stable when a size shrinks,
#                or the churn run's length (--set CHURN_S=300)
#   --rtt LIST   latency profiles, comma list of round trips in ms (default 0,
#                --quick 0,20): 0 is the local server as it is; MS > 0 puts a
#                tools/bench/rttproxy adding MS/2 each way (bandwidth not
#                limited; a new connection pays the handshake, MS more) in
#                front of it for the S3 targets (memwalfs-s3, s3fs, rclone)
#                and the raw probes (s3-raw, the probes between targets);
#                bucket administration stays direct, and the targets that do
#                not use the server are run in profile 0 only.  Each run does
#                every profile in turn; results of profile MS carry target
#                names with "@MSms" (memwalfs-s3@20ms), set against probes of
#                the same profile.  With a profile MS > 0, the probe is also
#                taken straight and through a proxy at 0 ms, twice each, for
#                the report's "proxy overhead at 0 ms" line.  --rtt 20 runs
#                the whole suite 20 ms away.
#
# When churn is the only workload, report.py rewrites only the churn section
# and chart of BENCHMARKS.md (the other tables stay as the last full run left
# them): tools/bench/run.sh --targets memwalfs-local,memwalfs-s3 --workloads churn
# The same for regions (its section "... (regions)", raw results in
# bench-raw/regions/): tools/bench/run.sh --quick --targets memwalfs-s3 --workloads regions
#
# Steps: installs missing Debian packages (s3fs rclone bindfs fio gnuplot-nox
# time jq git curl python3); builds memwalfs from the committed HEAD (git
# archive into BENCH_WORK, meson release build; the commit goes into the
# report) unless --no-build; uses the S3 server of S3_ENDPOINT, else starts
# its own with tools/s3-server.sh (CEPH_DIR, RGWPORT, MONPORT below) and stops
# it at the end; builds the C workloads; makes the source trees.  Then, for
# each run and each target: a raw PUT/GET probe of the server, create the
# target's bucket, mount, run the workloads, unmount, delete the bucket; a
# last probe closes the run.  Each target's figures are set against the
# probes right before and after it (report.py), so drift of the shared
# machine cancels in the "share of the raw server" columns.
# tools/bench/report.py writes BENCHMARKS.md and the charts.  A trap unmounts
# everything and removes the scratch directory on any exit.
#
# Environment: MEMWALFS (binary; with --no-build, default build/memwalfs),
# BENCH_WORK (scratch, default /var/tmp), CEPH_DIR / RGWPORT / MONPORT for a
# server this script starts (default /var/tmp/memwalfs-bench-rgw, 7680, 40300:
# not the test suites' server on 7480), RGW_LOG / RGW_CONF (RGW access log and
# ceph.conf used to count requests and bytes stored; default under CEPH_DIR).
set -uo pipefail

BENCH_DIR=$(cd "$(dirname "$0")" && pwd)
# BENCH_REPO: the repository to build and to take tools/s3-server.sh from, when
# this script runs from a copy (so that editing the harness cannot change a run
# under way: bash reads a script as it goes).
REPO=${BENCH_REPO:-$(cd "$BENCH_DIR/../.." && pwd)}
ALL_TARGETS="memwalfs-s3 memwalfs-local s3fs rclone bindfs local s3-raw"
ALL_WORKLOADS="seq jbsmall md gs dcreate rand cp statbp"
QUICK=0
TARGETS=$ALL_TARGETS
WORKLOADS=$ALL_WORKLOADS
RUNS=
DOCS="$REPO/docs"
INSTALL=1
BUILD=1
SETS=()
RTTS=
CMDLINE="tools/bench/run.sh $*"

while [ $# -gt 0 ]; do
	case "$1" in
	--quick) QUICK=1 ;;
	--targets) TARGETS=${2//,/ }; shift ;;
	--workloads) WORKLOADS=${2//,/ }; shift ;;
	--runs) RUNS=$2; shift ;;
	--out) DOCS=$2; shift ;;
	--no-install) INSTALL=0 ;;
	--no-build) BUILD=0 ;;
	--set) SETS+=("$2"); shift ;;
	--rtt) RTTS=${2//,/ }; shift ;;
	-h|--help) sed -n '2,70p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
	*) echo "run.sh: unknown argument $1 (see --help)" >&2; exit 2 ;;
	esac
	shift
done
[ "$(id -u)" = 0 ] || { echo "run.sh: run as root (mounts, drop_caches, apt)" >&2; exit 2; }
: "${RTTS:=$([ "$QUICK" = 1 ] && echo "0 20" || echo 0)}"
for ms in $RTTS; do
	[[ "$ms" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "run.sh: bad --rtt value $ms" >&2; exit 2; }
done

# Sizes.  Quick: aimed at 5 minutes on 2 cores; a smoke test of every
# workload, not a report: no O_DIRECT reads (SEQ_DIRECT=0), rclone's write-back
# delay 1 s instead of its default 5 s (RCLONE_WB; it would wait 5 s on each of
# ~12 write steps), tiny trees.  Full: aimed at 45 minutes with 3 runs on 2
# cores.  Shrunk from the peers' own sizes (BENCHMARKS.md says where and which
# were checked for stability): juicefs bench's big files 4 x 1 GiB -> 4 x
# JB_BIG_MB; mountpoint-s3's 100 GiB objects -> one SEQ_MB file; mdtest's tree
# on s3fs/rclone -> depth MD_Z_S3 (depth 2 was tried in 2026-12-01's check and
# moved rclone's rates by 15-58%: kept at 3); creates stop after MD_W s
# (mdtest's stonewall, -W), MD_W_S3 s on s3fs and rclone (3 -> 2 s on 2026-12-02
# for the 45-minute budget: their mdtest took 298 of the full run's 3,042 s,
# mostly removing what was created; BENCHMARKS.md compares the rates); GeeseFS's set on s3fs/rclone -> its first
# GS_FILES_S3 files in GS_DIRS_S3 directories (each file is a PUT there; 1600
# -> 800 moved s3fs's and rclone's files/s by 10-14%, within the run-to-run
# spread: checked 2026-12-01, 3 runs each).
if [ "$QUICK" = 1 ]; then
	SEQ_MB=64 JB_BIG_MB=16 MP_S=30 JB_SMALL_N=10 RAND_MB=32 RAND_S=2 FSYNC_S=2 SEQ_DIRECT=0
	MD_Z=3 MD_Z_S3=1 MD_W=1 MD_W_S3=1 GS_FILES=400 GS_DIRS=64 GS_FILES_S3=100 GS_DIRS_S3=16
	RCLONE_WB=1s S3_RB_GC=0
	CP_MB=64 SBP_FILES=16 SBP_FILES_S3=2 SBP_IDLE_S=1 SBP_S=2 SBP_MB=256
	DC_S=2 DC_MAX=1000 TREE_N=500 LIST_N=5000 LIST_N_S3=500 TAR_N=200 GIT_N=100
	STEP_TIMEOUT=120 SETTLE_TIMEOUT=90
	CHURN_S=60 CHURN_LIVE_MB=64 CHURN_MBPS=8 CHURN_GRACE=20 CHURN_GC_MS=5000 CHURN_SAMPLE_S=2
	REG_RAW_4K=400 REG_RAW_BIG=32 REG_LAG_S=4
	RAW_SPECS="4096:200:16 4096:100:1 1048576:48:16 8388608:16:8"
	PROBE_SPECS="4096:50:1 8388608:8:8"
	: "${RUNS:=1}"
else
	SEQ_MB=512 JB_BIG_MB=128 MP_S=30 JB_SMALL_N=100 RAND_MB=128 RAND_S=6 FSYNC_S=6 SEQ_DIRECT=1
	RCLONE_WB=
	MD_Z=4 MD_Z_S3=3 MD_W=3 MD_W_S3=2 GS_FILES=6400 GS_DIRS=1024 GS_FILES_S3=800 GS_DIRS_S3=128
	CP_MB=1024 SBP_FILES=64 SBP_FILES_S3=8 SBP_IDLE_S=2 SBP_S=4 SBP_MB=512
	DC_S=3 DC_MAX=20000 TREE_N=10000 LIST_N=100000 LIST_N_S3=3000 TAR_N=1500 GIT_N=1000
	STEP_TIMEOUT=300 SETTLE_TIMEOUT=300
	CHURN_S=600 CHURN_LIVE_MB=256 CHURN_MBPS=8 CHURN_GRACE=60 CHURN_GC_MS=15000 CHURN_SAMPLE_S=5
	REG_RAW_4K=1000 REG_RAW_BIG=64 REG_LAG_S=10
	RAW_SPECS="4096:1000:16 4096:300:1 1048576:256:16 8388608:64:8"
	PROBE_SPECS="4096:100:1 1048576:48:16 8388608:16:8"
	: "${RUNS:=3}"
fi
# The cp workload runs on these targets only (a 1 GiB copy with its preparation
# and upload costs 30-50 s on each S3 peer per run; bindfs and memwalfs-local
# add little to what local and memwalfs-s3 show; rclone, like s3fs, copies
# through the daemon and uploads the whole file again: s3fs stays as the S3
# peer, rclone went on 2026-12-02 for 142 s of the full run).
CP_TARGETS="memwalfs-s3 s3fs local"
# Regions (wl_regions): the numbers of mounts, one round each; raw PUTs of
# REG_RAW_4K 4 KiB and REG_RAW_BIG 4 MiB objects; follower lag over REG_LAG_S
# s while each mount runs REG_LAG_WRITERS durable-create writers (0: none): a
# marker every REG_LAG_MS ms per mount, polled for every REG_POLL_MS ms by the
# others;
# REG_CONTROL=1: for N >= 2 also the control round, the N mounts on a store
# each (what the machine and server give N filesystems that share nothing).
REG_NS="1 2 4" REG_LAG_MS=200 REG_POLL_MS=20 REG_CONTROL=1 REG_LAG_WRITERS=32
# Churn (wl_churn): the store is near zero at CHURN_ZERO_KB KiB; the drain is
# watched for at most three times the target (grace + two GC intervals).
CHURN_ZERO_KB=1024
# --set NAME=VALUE: override one size above (stability checks of a shrink).
for kv in "${SETS[@]}"; do
	case "${kv%%=*}" in
	[A-Z_]*[A-Z0-9_]) printf -v "${kv%%=*}" "%s" "${kv#*=}"; echo "run.sh: size override $kv" >&2 ;;
	*) echo "run.sh: bad --set $kv" >&2; exit 2 ;;
	esac
done
: "${CHURN_DRAIN_S:=$((3 * (CHURN_GRACE + 2 * CHURN_GC_MS / 1000)))}"

RUNID="$(date +%m%d%H%M%S)-$$"
# (BENCH_WORK is made if missing: a failed mktemp once left WORK empty and a run wrote its
# mounts and stores under / instead)
mkdir -p "${BENCH_WORK:-/var/tmp}" &&
	WORK=$(mktemp -d "${BENCH_WORK:-/var/tmp}/memwalfs-bench.XXXXXX") && [ -n "$WORK" ] || {
	echo "bench: cannot make a scratch directory under ${BENCH_WORK:-/var/tmp}" >&2
	exit 1
}
OUT="$DOCS/bench-raw"
# A churn-only run keeps its raw results apart (bench-raw/churn/): the full
# run's results.tsv and meta.env stay as they are.
CHURN_ONLY=0
[ "$(echo $WORKLOADS)" = churn ] && CHURN_ONLY=1 OUT="$DOCS/bench-raw/churn"
# So does a regions-only run (bench-raw/regions/).
REGIONS_ONLY=0
[ "$(echo $WORKLOADS)" = regions ] && REGIONS_ONLY=1 OUT="$DOCS/bench-raw/regions"
RES="$OUT/results.tsv"
LOGS="$OUT/logs"
BIN="$WORK/bin"
SRC="$WORK/src"
RGW_PENDING="$WORK/rgw-pending.tsv"
MEMWALFS=${MEMWALFS:-$REPO/build/memwalfs}
STARTED_SERVER=0
LOADPID=
PROXY_PIDS=()	# rttproxy processes this script started (latency profiles)
declare -A PROXY_EP	# round trip in ms -> endpoint of its rttproxy
SFX= BSFX=	# the current profile's suffix of target and bucket names
mkdir -p "$LOGS" "$BIN" "$SRC"
rm -f "$LOGS"/* 2>/dev/null
# Leftovers of the harness before logs/ was split off (fio JSON copies, stats
# snapshots): only results.tsv, status.tsv, meta.env and *.dat belong in OUT.
rm -f "$OUT"/*.json "$OUT"/*.clean "$OUT"/*.st0 "$OUT"/*.st1 "$OUT"/*.out 2>/dev/null
rm -f "$OUT"/churn.*.tsv 2>/dev/null
printf 'target\tworkload\tmetric\tvalue\tunit\trun\n' >"$RES"
: >"$OUT/status.tsv"
: >"$RGW_PENDING"

. "$BENCH_DIR/lib.sh"
. "$BENCH_DIR/targets.sh"
. "$BENCH_DIR/workloads.sh"

# status TARGET STATE TEXT: one line per target and run for the report.
status() {
	printf '%s\t%s\t%s\t%s\n' "$1$SFX" "$2" "$3" "${RUN:-1}" >>"$OUT/status.tsv"
}

cleanup() {
	local rc=$?
	trap - EXIT INT TERM
	say "cleaning up"
	[ -n "${TGT:-}" ] && target_umount "$TGT" 2>/dev/null
	umount_all
	[ -n "$LOADPID" ] && kill "$LOADPID" 2>/dev/null
	if [ -n "${CUR_BKT:-}" ]; then s3_rb "$CUR_BKT"; fi
	if [ -n "${PROBE_BKT:-}" ]; then s3_rb "$PROBE_BKT"; fi
	stop_proxies
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
		time:/usr/bin/time jq:jq git:git curl:curl python3:python3 meson:meson ninja-build:ninja; do
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
		>"$LOGS/apt.log" 2>&1 || {
		apt-get update >>"$LOGS/apt.log" 2>&1
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends "${need[@]}" \
			>>"$LOGS/apt.log" 2>&1 || say "apt-get install failed; see $LOGS/apt.log"
	}
}

# ----------------------------------------------------------------- server

server_up() {
	curl -s -o /dev/null --max-time 3 "$1/" 2>/dev/null
}

start_server() {
	: "${S3_REGION:=us-east-1}"
	: "${CEPH_DIR:=/var/tmp/memwalfs-bench-rgw}" "${RGWPORT:=7680}" "${MONPORT:=40300}"
	export CEPH_DIR RGWPORT MONPORT
	if [ -n "${S3_ENDPOINT:-}" ] && server_up "$S3_ENDPOINT"; then
		say "using the S3 server at $S3_ENDPOINT"
		# A server of tools/s3-server.sh (the test suites' own, say): its ceph.conf
		# and log, so that requests are counted and s3_rb deletes each bucket
		# (without radosgw-admin a bucket that is not empty would stay, and the
		# runs of a session filled the test server's OSD).
		if [ -z "${RGW_CONF:-}" ]; then
			local hp=${S3_ENDPOINT#*://} d
			hp=${hp%%/*}
			for d in "$CEPH_DIR" /tmp/memwalfs-rgw; do
				if grep -qs "endpoint=$hp " "$d/ceph.conf"; then
					CEPH_DIR=$d
					break
				fi
			done
		fi
	elif [ -x "$REPO/tools/s3-server.sh" ]; then
		say "starting the S3 server (tools/s3-server.sh start, $CEPH_DIR, port $RGWPORT)"
		local env
		env=$("$REPO/tools/s3-server.sh" start) || { say "s3-server.sh start failed"; return 1; }
		eval "$(printf '%s\n' "$env" | grep '^export ')"
		STARTED_SERVER=1
	else
		say "no S3 server: set S3_ENDPOINT or provide tools/s3-server.sh"
		return 1
	fi
	export S3_ENDPOINT S3_REGION AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY
	: "${RGW_LOG:=$CEPH_DIR/log/client.rgw.a.log}" "${RGW_CONF:=$CEPH_DIR/ceph.conf}"
	[ -r "$RGW_LOG" ] || say "RGW log $RGW_LOG not readable: request counts of peers unavailable"
}

# ---------------------------------------------------------- latency profiles

# start_proxy MS NAME: an rttproxy adding MS/2 ms each way in front of the
# server of S3_ENDPOINT, on a port the kernel picks; sets PROXY_URL to its
# endpoint (same scheme: a TLS server would see its name change, and is not
# supported).  Its log (start line, summary) and --stats go to
# LOGS/rttproxy-NAME.*.  Not in a subshell: PROXY_PIDS must keep the pid.
start_proxy() {
	local hp scheme port i line half
	scheme=${S3_ENDPOINT%%://*}
	hp=${S3_ENDPOINT#*://}
	hp=${hp%%/*}
	case "$hp" in *:*) ;; *) hp="$hp:$([ "$scheme" = https ] && echo 443 || echo 80)" ;; esac
	half=$(awk -v m="$1" 'BEGIN { printf "%g", m / 2 }')
	"$BIN/rttproxy" --listen 127.0.0.1:0 --to "$hp" --delay-ms "$half" \
		--stats "$LOGS/rttproxy-$2.stats" >"$LOGS/rttproxy-$2.log" 2>&1 &
	PROXY_PIDS+=($!)
	for ((i = 0; i < 50; i++)); do
		line=$(head -n 1 "$LOGS/rttproxy-$2.log")
		case "$line" in "rttproxy: "*" -> "*) break ;; esac
		sleep 0.1
	done
	port=${line#rttproxy: }
	port=${port%% *}
	port=${port##*:}
	[[ "$port" =~ ^[0-9]+$ ]] || { say "rttproxy did not start: $line"; return 1; }
	say "$line"
	PROXY_URL="$scheme://127.0.0.1:$port"
}

# start_proxies: one rttproxy per profile of RTTS above 0 (PROXY_EP); with
# one, the proxy's own overhead at 0 ms (proxy_overhead, 2 rounds).
start_proxies() {
	local ms any=0
	for ms in $RTTS; do
		[ "$ms" = 0 ] && continue
		start_proxy "$ms" "$ms" || return 1
		PROXY_EP[$ms]=$PROXY_URL
		any=1
	done
	[ "$any" = 1 ] || return 0
	say "the proxy's own cost: probes straight and through an rttproxy at 0 ms"
	start_proxy 0 0 || return 1
	proxy_overhead "$PROXY_URL" 2
}

# stop_proxies: SIGTERM to the proxies (each writes its summary to its log),
# waited for; their summaries go to the progress log.
stop_proxies() {
	local p f
	for p in "${PROXY_PIDS[@]}"; do
		kill "$p" 2>/dev/null && wait "$p" 2>/dev/null
	done
	[ ${#PROXY_PIDS[@]} -gt 0 ] && for f in "$LOGS"/rttproxy-*.log; do
		say "$(basename "$f" .log): $(tail -n 1 "$f" | sed 's/^rttproxy: //')"
	done
	PROXY_PIDS=()
}

# use_profile MS: TGT_EP, SFX and BSFX of latency profile MS.
use_profile() {
	if [ "$1" = 0 ]; then
		TGT_EP=$S3_ENDPOINT SFX= BSFX=
	else
		TGT_EP=${PROXY_EP[$1]} SFX="@${1}ms" BSFX="-rtt${1//./-}"
	fi
}

# profile_targets MS: the targets of TARGETS that profile MS runs: all for 0,
# the ones that use the S3 server otherwise.
profile_targets() {
	local t
	for t in $TARGETS; do
		case "$1:$t" in 0:*|*:memwalfs-s3|*:s3fs|*:rclone|*:s3-raw) printf '%s ' "$t" ;; esac
	done
}

# ------------------------------------------------------------------ build

# build_memwalfs: a release build of the committed HEAD (not the working tree,
# which may hold others' uncommitted changes) under BENCH_WORK; sets MEMWALFS
# and COMMIT.  Reuses an earlier build of the same commit.
build_memwalfs() {
	local b="${BENCH_WORK:-/var/tmp}/memwalfs-bench-build" sha
	sha=$(git -C "$REPO" rev-parse HEAD) || return 1
	COMMIT="$sha ($(git -C "$REPO" log -1 --format='%cI: %s' "$sha" | cut -c1-90 | tr -d '"')...)"
	MEMWALFS="$b/$sha/build/memwalfs"
	[ -x "$MEMWALFS" ] && { say "memwalfs of ${sha:0:12} already built"; return 0; }
	say "building memwalfs at ${sha:0:12} (release, $b/$sha)"
	rm -rf "${b:?}/$sha"
	mkdir -p "$b/$sha/src"
	git -C "$REPO" archive "$sha" | tar -x -C "$b/$sha/src" &&
		meson setup "$b/$sha/build" "$b/$sha/src" -Dbuildtype=release -Dwerror=true \
			-Dtests=false >"$LOGS/build.log" 2>&1 &&
		ninja -C "$b/$sha/build" memwalfs >>"$LOGS/build.log" 2>&1 ||
		{ say "build failed; see $LOGS/build.log"; return 1; }
}

# load_sampler: the 1-minute load average and the busiest processes every 30 s
# into LOGS/load.tsv and LOGS/top.log (how loaded the shared machine was).
load_sampler() {
	while :; do
		printf '%s\t%s\n' "$(date +%s)" "$(cut -d' ' -f1 /proc/loadavg)" >>"$LOGS/load.tsv"
		{ date -u +%H:%M:%S; ps -eo pcpu,comm --sort=-pcpu | sed -n '2,6p'; } >>"$LOGS/top.log"
		sleep 30
	done
}

# ---------------------------------------------------------------- sources

# copy_include head|tail N DEST: copy the first or last N regular files of
# /usr/include (sorted by path) into DEST, keeping their paths.
copy_include() {
	(cd /usr/include && find . -type f | sort | "$1" -n "$2" | tar -cf - -T -) | tar -xf - -C "$3"
}

# make_gs DIR FILES DIRS: FILES files of 0.5-300 KB (lognormal sizes, median
# ~16 KiB, clamped: ~30 KB on average; fixed seed, so the first N files of a
# larger set have the same sizes) spread evenly over DIRS directories of DIR;
# prints their total bytes.
make_gs() {
	python3 - "$@" <<'PY' || return 1
import os, random, sys
top, n, dirs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rnd = random.Random(12)
blob = os.urandom(300 * 1024)
for d in range(dirs):
    os.makedirs(os.path.join(top, "d%04d" % d), exist_ok=True)
for i in range(n):
    size = min(300 * 1024, max(512, int(rnd.lognormvariate(9.7, 1.05))))
    with open(os.path.join(top, "d%04d" % (i % dirs), "f%05d" % i), "wb") as f:
        f.write(blob[:size])
PY
	find "$1" -type f -printf '%s\n' | awk '{ s += $1 } END { print s + 0 }'
}

# prepare_gs: SRC/gs, GeeseFS's small-file set (GS_FILES files in GS_DIRS
# directories), and SRC/gs-s3, its first GS_FILES_S3 files in GS_DIRS_S3
# directories for s3fs and rclone; sets GS_BYTES, GS_BYTES_S3.
prepare_gs() {
	GS_BYTES=$(make_gs "$SRC/gs" "$GS_FILES" "$GS_DIRS") || return 1
	GS_BYTES_S3=$(make_gs "$SRC/gs-s3" "$GS_FILES_S3" "$GS_DIRS_S3") || return 1
	say "GeeseFS set: $GS_FILES files in $GS_DIRS directories, $((GS_BYTES / 1048576)) MiB, $((GS_BYTES / GS_FILES)) B on average (s3fs, rclone: $GS_FILES_S3 files)"
}

# prepare_sources: SRC/gs (prepare_gs) and, for the older workloads, SRC/tree
# (TREE_N files: 80% regular files of /usr/include, 20% padding files of 1-64
# KiB), SRC/src.tar.gz (TAR_N files), SRC/repo (git, GIT_N files, two commits);
# sets GS_BYTES, TREE_FILES/BYTES, TAR_FILES/BYTES, GIT_FILES.
prepare_sources() {
	local n i sz
	say "making the source trees"
	GS_BYTES=0 GS_BYTES_S3=0 TREE_FILES=0 TREE_BYTES=0 TAR_FILES=0 TAR_BYTES=0 GIT_FILES=0
	case " $WORKLOADS " in *" gs "*) prepare_gs || return 1 ;; esac
	case " $WORKLOADS " in *" tree "*|*" real "*) ;; *) return 0 ;; esac
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

# version_of T: the version line of target T for the report.
version_of() {
	case $1 in
	s3fs) s3fs --version 2>/dev/null | head -n 1 | cut -c1-60 ;;
	rclone) rclone version 2>/dev/null | head -n 1 ;;
	bindfs) bindfs --version 2>/dev/null | head -n 1 ;;
	memwalfs-*) echo "$("$MEMWALFS" --version 2>/dev/null), commit ${COMMIT:0:12}" ;;
	local) df -T "$WORK" | awk 'NR == 2 { print $2 " on " $1 }' ;;
	esac
}

# run_target T: run RUN of target T: bucket, mount, workloads, unmount, bucket
# deleted.
run_target() {
	local t=$1 w
	TGT=$t
	if [ "$t" = s3-raw ]; then
		BKT=$(target_bucket s3raw) FSPID= BACKDIR= MNT=
		s3_mb "$BKT" || { status "$t" skipped "cannot create bucket"; return; }
		CUR_BKT=$BKT
		wl_raw
		s3_rb "$BKT"
		CUR_BKT=
		: >"$RGW_PENDING"
		status "$t" ran "PUT/GET straight to the server with curl --parallel"
		TGT=
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
		status "$t" ran "$(version_of "$t")"
		for w in $WORKLOADS; do
			# A workload that lost its mount (failed remount) ends the target.
			if [ "$t" != local ] && ! mountpoint -q "$MNT"; then
				target_mount "$t" || { say "SKIP rest of $t: remount failed"; break; }
			fi
			mkdir -p "$MNT/b$RUN"
			"wl_$w" || say "  $t: $w ended early"
		done
		local t0=$SECONDS
		target_umount "$t"
		say "  $t: unmounted in $((SECONDS - t0)) s"
	fi
	if [ -n "${CUR_BKT:-}" ]; then
		local t0=$SECONDS
		rgw_flush_counts "$CUR_BKT"
		s3_rb "$CUR_BKT"
		say "  $t: requests counted, bucket deleted in $((SECONDS - t0)) s"
		CUR_BKT=
	fi
	: >"$RGW_PENDING"
	rm -rf "${WORK:?}/$t"
	TGT=
}

T_START=$SECONDS
UPTIME_BEFORE=$(uptime)
MODE=$([ $QUICK = 1 ] && echo quick || echo full)
say "memwalfs benchmark: $MODE run, targets: $TARGETS; workloads: $WORKLOADS; runs: $RUNS; round trips added (ms): $RTTS"
install_tools
COMMIT="not built by run.sh (--no-build): $MEMWALFS"
if [ "$BUILD" = 1 ]; then build_memwalfs || exit 1; fi
start_server || exit 1
for p in durable_creates mdtest_tree stat_backpressure rttproxy; do
	cc -O2 -pthread -o "$BIN/$p" "$BENCH_DIR/$p.c" || exit 1
done
prepare_sources || exit 1
load_sampler &
LOADPID=$!
PROBE_BKT="bench-$RUNID-probe"
s3_mb "$PROBE_BKT" || exit 1
use_profile 0
start_proxies || exit 1
T_RUNS=$SECONDS
for ((RUN = 1; RUN <= RUNS; RUN++)); do
	for ms in $RTTS; do
		use_profile "$ms"
		prev=
		for t in $(profile_targets "$ms"); do
			probe "$prev" "$t"
			say "== run $RUN/$RUNS${SFX:+, ${ms} ms away}: target $t"
			T0=$SECONDS
			run_target "$t"
			result "$t" target elapsed_s $((SECONDS - T0)) s
			prev=$t
		done
		[ -n "$prev" ] && probe "$prev" ""
	done
done
use_profile 0
RUNS_S=$((SECONDS - T_RUNS))
stop_proxies
say "all runs done in ${RUNS_S}s; writing the report"
kill "$LOADPID" 2>/dev/null
LOADPID=
LOAD=$(awk -F'\t' '{ s += $2; n++; if (n == 1 || $2 < lo) lo = $2; if ($2 > hi) hi = $2 }
	END { if (n) printf "%d samples, mean %.1f, min %.1f, max %.1f", n, s / n, lo, hi }' "$LOGS/load.tsv")
BUSY=$(awk '/^[0-9][0-9]:/ { n++; next } $2 != "ps" { c[$2] += $1 }
	END { for (k in c) printf "%s %.0f\n", k, c[k] / (n ? n : 1) }' "$LOGS/top.log" |
	sort -k2 -nr | head -n 8 | awk '{ printf "%s%s %s%%", (NR > 1 ? ", " : ""), $1, $2 }')
cat >"$OUT/meta.env" <<EOF
MODE=$MODE
CMDLINE="$CMDLINE"
DATE=$(date -u +%Y-%m-%dT%H:%MZ)
COMMIT="$COMMIT"
HOST="$(uname -sr), $(nproc) cores, $(awk '/MemTotal/ { printf "%.0f GiB", $2 / 1048576 }' /proc/meminfo) RAM"
SERVER="$S3_ENDPOINT ($(radosgw --version 2>/dev/null | awk '{ print "Ceph RGW " $3 }'))"
LOAD="$LOAD"
BUSY="$BUSY"
RUNS=$RUNS
RTTS="$RTTS"
RAW_SPECS="$RAW_SPECS"
PROBE_SPECS="$PROBE_SPECS"
ELAPSED_S=$((SECONDS - T_START))
UPTIME_BEFORE="$UPTIME_BEFORE"
UPTIME_AFTER="$(uptime)"
RUNS_S=$RUNS_S
EOF
GS_MB=$((GS_BYTES / 1048576)) GS_AVG=$((GS_BYTES / GS_FILES)) GS_AVG_S3=$((GS_BYTES_S3 / GS_FILES_S3))
TREE_N=$TREE_FILES TREE_MB=$((TREE_BYTES / 1048576)) TAR_N=$TAR_FILES GIT_N=$GIT_FILES
for k in SEQ_MB JB_BIG_MB MP_S JB_SMALL_N RAND_MB RAND_S FSYNC_S MD_Z MD_Z_S3 MD_W MD_W_S3 GS_FILES \
	GS_DIRS GS_MB GS_AVG GS_FILES_S3 GS_DIRS_S3 GS_AVG_S3 DC_S DC_MAX TREE_N TREE_MB LIST_N \
	LIST_N_S3 TAR_N GIT_N CP_MB CP_TARGETS SBP_FILES SBP_FILES_S3 SBP_IDLE_S SBP_S SBP_MB \
	CHURN_S CHURN_LIVE_MB CHURN_MBPS CHURN_GRACE CHURN_GC_MS CHURN_SAMPLE_S CHURN_ZERO_KB \
	CHURN_DRAIN_S REG_NS REG_LAG_MS REG_POLL_MS REG_CONTROL REG_RAW_4K REG_RAW_BIG REG_LAG_S REG_LAG_WRITERS; do
	echo "$k=${!k}"
done >>"$OUT/meta.env"
if [ "$CHURN_ONLY" = 1 ]; then
	python3 "$BENCH_DIR/report.py" --churn-only "$OUT" "$DOCS" || say "report.py failed"
elif [ "$REGIONS_ONLY" = 1 ]; then
	python3 "$BENCH_DIR/report.py" --regions-only "$OUT" "$DOCS" || say "report.py failed"
else
	python3 "$BENCH_DIR/report.py" "$OUT" "$DOCS" || say "report.py failed"
fi
say "done: $DOCS/BENCHMARKS.md"
