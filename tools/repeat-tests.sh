#!/usr/bin/env bash
# tools/repeat-tests.sh [-n N] [--asan] TEST... - run meson tests again and again, each run
# with a fresh random seed, to show that a randomized test does not flake.
#
# Each TEST is a meson test name (`meson test -C build-test --list`; a "suite/" prefix such as
# unit/engine_model is accepted).  Every run gets its own MEMWALFS_SEED (which every randomized
# test reads: see tests/util/testutil.h tu_seed()), and the script prints one line per run with
# the test, the seed, the result and the time; for a failure also the command that replays it,
# the path of the full log and its last lines.  The last line is "N passed, N failed".  Exit 0
# when every run passed, 1 otherwise, 2 on bad usage or a failed build.
#
#   -n N     runs per test (default 30)
#   --asan   use the ASan+UBSan build (${BUILD}-asan) with ASAN_OPTIONS=detect_leaks=1:
#            abort_on_error=1 and UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 unless set
#
# Environment: BUILD (build dir, default build-test; configured and built first, as by
# tools/test.sh), REPEAT_LOGS (where run logs go, default $BUILD/meson-logs/repeat; the logs of
# passing runs are removed unless REPEAT_KEEP=1).  The tests
# run one at a time with meson's timeouts, so a run that is too slow on a loaded machine counts
# as a failure too.  To load the machine meanwhile: stress-ng --cpu 2 (or a parallel build).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2

usage() {
	echo "usage: tools/repeat-tests.sh [-n N] [--asan] TEST..." >&2
	exit 2
}

runs=30
asan=0
tests=()
while [ $# -gt 0 ]; do
	case $1 in
	-n)
		[ $# -ge 2 ] || usage
		runs=$2
		shift 2
		;;
	-n*)
		runs=${1#-n}
		shift
		;;
	--asan)
		asan=1
		shift
		;;
	-h | --help) usage ;;
	-*) usage ;;
	*)
		tests+=("${1##*/}")
		shift
		;;
	esac
done
[ ${#tests[@]} -gt 0 ] || usage
case $runs in '' | *[!0-9]*) usage ;; esac

dir=${BUILD:-build-test}
opts=(-Dwerror=true)
if [ $asan = 1 ]; then
	dir=$dir-asan
	opts+=('-Db_sanitize=address,undefined' -Db_lundef=false)
	export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
	export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
fi
if [ ! -f "$dir/build.ninja" ]; then
	meson setup "$dir" "${opts[@]}" >/dev/null || exit 2
fi
ninja -C "$dir" >/dev/null || {
	echo "build of $dir failed (run ninja -C $dir)" >&2
	exit 2
}
known=$(meson test -C "$dir" --list 2>/dev/null)
for t in "${tests[@]}"; do
	if ! grep -qE "(^|[ :/])$t\$" <<<"$known"; then
		echo "no test named $t in $dir (meson test -C $dir --list)" >&2
		exit 2
	fi
done

logs=${REPEAT_LOGS:-$dir/meson-logs/repeat}
mkdir -p "$logs" || exit 2

# A fresh seed: 48 random bits (decimal), so it is easy to copy and never wraps a range.
new_seed() {
	local s
	s=$(od -An -N6 -tu8 /dev/urandom 2>/dev/null | tr -d ' ')
	echo "${s:-$(($(date +%s%N) & 0xffffffffffff))}"
}

passed=0
failed=0
echo "== $runs runs each of ${tests[*]} in $dir$([ $asan = 1 ] && echo ' (ASan+UBSan)'); load: $(cut -d' ' -f1-3 /proc/loadavg)"
for t in "${tests[@]}"; do
	for ((i = 1; i <= runs; i++)); do
		seed=$(new_seed)
		log=$logs/$t-$seed.log
		t0=$(date +%s.%N)
		MEMWALFS_SEED=$seed meson test -C "$dir" --no-rebuild --num-processes 1 -v \
			--logbase "repeat-$$" "$t" >"$log" 2>&1
		rc=$?
		secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
		if [ $rc = 0 ] && grep -qE '^Ok: +1 *$' "$log"; then
			passed=$((passed + 1))
			echo "$t run $i/$runs: seed $seed: ok (${secs} s)"
			[ "${REPEAT_KEEP:-0}" = 1 ] || rm -f "$log"
		else
			failed=$((failed + 1))
			echo "$t run $i/$runs: seed $seed: FAIL (${secs} s, load $(cut -d' ' -f1 /proc/loadavg))"
			echo "   replay: MEMWALFS_SEED=$seed meson test -C $dir -v $t"
			echo "   log: $log"
			# the test's own verdicts, not the engine's log lines ("memwalfs: error ...")
			grep -vE '^memwalfs: ' "$log" |
				grep -iE 'FAIL|ERROR|Sanitizer|TIMEOUT|timed out|runtime error|assert|signal' |
				head -n 12 | sed 's/^/   | /'
		fi
	done
done
rm -f "$dir/meson-logs/repeat-$$".*
echo "$passed passed, $failed failed"
[ $failed = 0 ]
