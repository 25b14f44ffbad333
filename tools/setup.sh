#!/usr/bin/env bash
# tools/setup.sh [build|test|bench|all]... - install the Debian packages memwalfs needs.
#
#   build  compiler, meson, and the libraries (fuse3, curl, OpenSSL, zstd, xxhash, cmocka)
#   test   build + what the test suites use (Ceph RGW as the S3 server, fio, git, rsync, ...)
#   bench  test + the peers and tools of the benchmarks (s3fs, rclone, bindfs, gnuplot, time)
#   all    everything (the default)
#
# Idempotent and quick when everything is present: it asks dpkg what is missing and runs
# apt-get update and install only when something is.
set -euo pipefail

build_pkgs=(gcc pkg-config meson ninja-build libfuse3-dev fuse3 libcurl4-openssl-dev libssl-dev
	libzstd-dev libxxhash-dev libcmocka-dev python3)
test_pkgs=(radosgw ceph-mon ceph-osd openssl curl fio git rsync tar diffutils attr procps psmisc
	clang-format python3-prometheus-client)
bench_pkgs=(s3fs rclone bindfs gnuplot-nox time)

want=()
groups=("$@")
[ ${#groups[@]} -eq 0 ] && groups=(all)
for g in "${groups[@]}"; do
	case "$g" in
	build) want+=("${build_pkgs[@]}") ;;
	test) want+=("${build_pkgs[@]}" "${test_pkgs[@]}") ;;
	bench | all) want+=("${build_pkgs[@]}" "${test_pkgs[@]}" "${bench_pkgs[@]}") ;;
	-h | --help)
		sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
		exit 0
		;;
	*)
		echo "setup.sh: unknown group '$g' (build, test, bench, all)" >&2
		exit 2
		;;
	esac
done

missing=()
for p in $(printf '%s\n' "${want[@]}" | sort -u); do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done
if [ ${#missing[@]} -eq 0 ]; then
	echo "setup: all ${#want[@]} packages present" >&2
	exit 0
fi
SUDO=
[ "$(id -u)" -ne 0 ] && SUDO=sudo
echo "setup: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq >&2
# Ceph's packages try to start and enable their system services: where policy-rc.d forbids
# starting services (containers) every one prints "invoke-rc.d: policy-rc.d denied execution
# of start", and systemd prints a "Created symlink" line per unit. The tests run Ceph from
# tools/s3-server.sh, never as a system service: those lines are left out (the rest of apt's
# output and its exit status are kept), and the units are disabled below.
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" 2>&1 |
	{ grep -Ev 'policy-rc\.d denied execution|^invoke-rc\.d: |^Created symlink .*ceph' || true; } >&2
if printf '%s\n' "${missing[@]}" | grep -Eq '^(ceph-mon|ceph-osd|radosgw)$' && [ -d /run/systemd/system ]; then
	# installed here by this script: their services would start at the next boot, unconfigured
	$SUDO systemctl disable --now --quiet ceph.target ceph-mon.target ceph-osd.target \
		ceph-radosgw.target ceph-crash.service 2>/dev/null || true
	echo "setup: Ceph's system services disabled (tools/s3-server.sh runs its own daemons)" >&2
fi
echo "setup: done" >&2
