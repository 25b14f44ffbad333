#!/usr/bin/env bash
# tools/test.sh [SUITE...] - install, build, start the S3 test server, run the test suites.
#
# With no argument runs every suite (unit, fault, crash, fs, s3) on a normal build with warnings
# as errors, then the unit, fault and crash suites again under ASan+UBSan.  Naming suites runs
# only those (e.g. tools/test.sh unit fault), without the sanitizer pass unless "asan" is named.
#
# Environment: BUILD (build dir, default build-test), NO_S3=1 (do not start the S3 server:
# the s3 suite then reports SKIP), MESON_TEST_ARGS (extra arguments for meson test),
# KEEP_S3_STATE=1 (keep the S3 server's state directory even when this run created it: by
# default a server this run started is stopped, and its state removed if this run made it).
set -uo pipefail
cd "$(dirname "$0")/.."
top=$PWD

tools/setup.sh test || exit 1

suites=("$@")
asan=0
if [ ${#suites[@]} -eq 0 ]; then
	suites=(unit fault crash fs s3)
	asan=1
fi
for i in "${!suites[@]}"; do
	if [ "${suites[$i]}" = asan ]; then
		asan=1
		unset 'suites[i]'
	fi
done

BUILD=${BUILD:-build-test}
ASAN_BUILD=${BUILD}-asan

configure() { # dir, extra options...
	local dir=$1
	shift
	if [ -f "$dir/build.ninja" ]; then
		meson setup --reconfigure "$dir" -Dwerror=true "$@" >/dev/null
	else
		meson setup "$dir" -Dwerror=true "$@" >/dev/null
	fi
}

echo "== build ($BUILD, warnings as errors)"
configure "$BUILD" || exit 1
ninja -C "$BUILD" || exit 1

started_s3=0
made_state=0 # the state directory did not exist before this run started the server
cleanup() {
	if [ $started_s3 = 1 ]; then
		echo "== stopping the S3 test server"
		if [ $made_state = 1 ] && [ "${KEEP_S3_STATE:-0}" != 1 ]; then
			tools/s3-server.sh stop --remove-state >&2 || true
		else
			tools/s3-server.sh stop >&2 || true
		fi
	fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

need_s3=0
for s in "${suites[@]}"; do [ "$s" = s3 ] && need_s3=1; done
if [ $need_s3 = 1 ] && [ "${NO_S3:-0}" != 1 ]; then
	echo "== starting the S3 test server (tools/s3-server.sh start)"
	# a server that already answers (a developer's) is reused and left running
	already=0
	tools/s3-server.sh status >/dev/null 2>&1 && already=1
	[ -e "${CEPH_DIR:-/tmp/memwalfs-rgw}" ] || made_state=1
	if out=$(tools/s3-server.sh start); then
		eval "$out"
		[ $already = 0 ] && started_s3=1
		echo "   S3_ENDPOINT=$S3_ENDPOINT S3_BUCKET=$S3_BUCKET"
	else
		echo "!! the S3 test server did not start: the s3 suite will report SKIP" >&2
		if [ "${CI:-}" = true ]; then
			echo "!! in CI the S3 server must start" >&2
			exit 1
		fi
	fi
fi

status=0
logs=()
run_suites() { # build dir, suites...
	local dir=$1
	shift
	local args=()
	for s in "$@"; do args+=(--suite "$s"); done
	echo "== meson test -C $dir ${args[*]}"
	# shellcheck disable=SC2086
	meson test -C "$dir" --print-errorlogs --num-processes 2 "${args[@]}" ${MESON_TEST_ARGS:-} ||
		status=1
	logs+=("$dir/meson-logs/testlog.json")
}

run_suites "$BUILD" "${suites[@]}"

if [ $asan = 1 ]; then
	echo "== build ($ASAN_BUILD, ASan+UBSan)"
	export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
	export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
	if configure "$ASAN_BUILD" -Db_sanitize=address,undefined -Db_lundef=false &&
		ninja -C "$ASAN_BUILD"; then
		run_suites "$ASAN_BUILD" unit fault crash
	else
		status=1
	fi
fi

# The release build users install (README: meson setup build --buildtype=release) compiles
# with other optimisations, hence other warnings (an -O3 maybe-uninitialized once broke it
# while every debugoptimized build passed): built with warnings as errors, not tested again.
if [ $asan = 1 ]; then
	echo "== build (${BUILD}-release, the release build as installed, warnings as errors)"
	if ! configure "${BUILD}-release" --buildtype=release -Dtests=false ||
		! ninja -C "${BUILD}-release"; then
		echo "FAIL: the release build (${BUILD}-release) does not build"
		status=1
	fi
fi

# One closing line over every run: "tests: N passed, N failed, N skipped".
python3 - "${logs[@]}" <<'PY'
import json, sys
p = f = s = 0
for path in sys.argv[1:]:
    try:
        for line in open(path):
            r = json.loads(line).get("result")
            if r in ("OK", "EXPECTEDFAIL"): p += 1
            elif r == "SKIP": s += 1
            else: f += 1
    except FileNotFoundError:
        pass
print(f"tests: {p} passed, {f} failed, {s} skipped")
PY
exit $status
