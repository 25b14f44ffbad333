#!/usr/bin/env bash
# tools/run.sh [STORE [MOUNTPOINT]] - install what is missing, build, and mount a memwalfs
# filesystem on the embedded local store (default: ./.memwalfs-store mounted at ./mnt).
# Pass s3://bucket/prefix as STORE (with --endpoint in MEMWALFS_MOUNT_OPTS) for a bucket.
set -euo pipefail
cd "$(dirname "$0")/.."
store=${1:-$PWD/.memwalfs-store}
mnt=${2:-$PWD/mnt}

tools/setup.sh build
if [ -f build/build.ninja ]; then meson setup --reconfigure build >/dev/null; else meson setup build >/dev/null; fi
ninja -C build >/dev/null
echo "built $(build/memwalfs --version)"

mkdir -p "$mnt"
if mountpoint -q "$mnt"; then
	echo "$mnt is already a mount point; unmount it first: build/memwalfs umount $mnt (or umount $mnt if it is no memwalfs)" >&2
	exit 1
fi
# shellcheck disable=SC2086
build/memwalfs mount ${MEMWALFS_MOUNT_OPTS:-} "$store" "$mnt"
echo "memwalfs: $store is mounted at $mnt"
echo "  try:      cp -r /usr/include/linux $mnt/ && ls $mnt"
echo "  stats:    build/memwalfs stats $mnt"
echo "  unmount:  build/memwalfs umount $mnt   (commits everything, waits for the daemon)"
