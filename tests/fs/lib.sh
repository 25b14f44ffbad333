#!/usr/bin/env bash
# tests/fs/lib.sh - shared by the filesystem tests: mount a memwalfs on the local store or on
# the S3 server, unmount it and wait for the daemon to commit and exit.
#
# Usage in a test:  . lib.sh MEMWALFS_BINARY BACKEND   (BACKEND: local or s3)
# Exits 77 (SKIP) when FUSE is unavailable, or BACKEND is s3 and S3_ENDPOINT is unset.
set -euo pipefail
MW=$1
BACKEND=${2:-local}
[ -c /dev/fuse ] && command -v fusermount3 >/dev/null || { echo "SKIP: no FUSE"; exit 77; }
if [ "$BACKEND" = s3 ] && [ -z "${S3_ENDPOINT:-}" ]; then echo "SKIP: S3_ENDPOINT unset"; exit 77; fi

# A test that runs in its own mount namespace (MW_IN_NS: mountopts.sh, install.sh) got a copy of
# every mount of the machine, the FUSE mounts of the tests running beside it too; a copy keeps
# its daemon alive after that test unmounts (the daemon learns of the unmount only when the last
# copy goes), so that test's "memwalfs umount" waited, and a mount right after a fusermount3 -u
# waited for the closing daemon, until this namespace ended. Detach the copies here (the
# namespace is private: the mounts outside are not touched).
if [ -n "${MW_IN_NS:-}" ]; then
	awk '$0 ~ / - fuse(\.[^ ]*)? / { print $5 }' /proc/self/mountinfo | sort -r |
		while read -r m; do umount -l "$(printf '%b' "$m")" 2>/dev/null || true; done
fi

WORK=$(mktemp -d /tmp/memwalfs-fstest.XXXXXX)
chmod 755 "$WORK" # let the unprivileged checks of fsconform reach the mount
MOUNTS=()
if [ "$BACKEND" = s3 ]; then
	STORE="s3://${S3_BUCKET:-memwalfs-test}/fstest-$$-$RANDOM"
	STORE_OPTS=(--endpoint "$S3_ENDPOINT" --region "${S3_REGION:-us-east-1}")
else
	STORE="$WORK/store"
	STORE_OPTS=()
fi

# mw_cache_opts MOUNTPOINT: the caller's local array dc gets the disk cache options of a mount
# there. S3 mounts have a disk cache by default: keep it in $WORK (one per mount point), not
# under /var/cache/memwalfs (a --cache-dir among the options wins: the last one counts)
mw_cache_opts() {
	dc=()
	if [ "$BACKEND" = s3 ]; then dc=(--cache-dir "$1.diskcache"); fi
}

# mw_mount MOUNTPOINT [extra options...]: mount $STORE there (allow_other for permission checks);
# returns the exit status of memwalfs mount (also where the caller tests it: "if mw_mount ...")
mw_mount() {
	local mnt=$1
	shift
	mkdir -p "$mnt"
	local dc=()
	mw_cache_opts "$mnt"
	"$MW" mount "${STORE_OPTS[@]}" "${dc[@]}" -o allow_other --pidfile "$mnt.pid" "$@" "$STORE" "$mnt" || return
	MOUNTS+=("$mnt")
}

# mw_mount_logged MOUNTPOINT [extra options...]: as mw_mount, but the daemon runs in the
# foreground (a background job of the test) with what it logs in MOUNTPOINT.log, for a test to
# show when it fails (mw_log_tail); a daemon in the background logs to syslog, which a CI
# machine may not keep
mw_mount_logged() {
	local mnt=$1 pid
	shift
	mkdir -p "$mnt"
	rm -f "$mnt.pid"
	local dc=()
	mw_cache_opts "$mnt"
	echo "=== mount $* ($(date +%T.%N))" >>"$mnt.log"
	"$MW" mount -f "${STORE_OPTS[@]}" "${dc[@]}" -o allow_other --pidfile "$mnt.pid" "$@" \
		"$STORE" "$mnt" </dev/null >>"$mnt.log" 2>&1 &
	pid=$!
	MOUNTS+=("$mnt")
	for _ in $(seq 600); do
		mountpoint -q "$mnt" && [ -s "$mnt.pid" ] && return 0
		kill -0 "$pid" 2>/dev/null || { tail -n 20 "$mnt.log"; echo "FAIL: mounting $STORE failed"; exit 1; }
		sleep 0.1
	done
	echo "FAIL: the mount of $STORE at $mnt did not appear within 60 s"
	exit 1
}

# mw_log_tail MOUNTPOINT [LINES]: the last lines the daemon of mw_mount_logged logged
mw_log_tail() {
	echo "--- the last ${2:-40} lines of $1.log"
	tail -n "${2:-40}" "$1.log" 2>/dev/null || true
}

# mw_wait_exit PIDFILE: wait (up to 60 s) for the daemon to finish its final commit
mw_wait_exit() {
	local pid
	pid=$(cat "$1" 2>/dev/null) || return 0
	for _ in $(seq 600); do
		kill -0 "$pid" 2>/dev/null || return 0
		# an exited daemon whose parent is gone may stay a zombie here
		[ "$(awk '{print $3}' "/proc/$pid/stat" 2>/dev/null)" = Z ] && return 0
		sleep 0.1
	done
	echo "daemon $pid did not exit" >&2
	return 1
}

# mw_umount_cmd [options] MOUNTPOINT: "memwalfs umount" that waits up to 60 s (not 3) while
# the mount point is busy: on a loaded machine a process that touched the mount (a reader that
# was just killed, a short-lived command of a neighbouring test) may let go of it late
mw_umount_cmd() {
	"$MW" umount --busy-wait 60 "$@"
}

# mw_umount MOUNTPOINT: unmount with "memwalfs umount", which waits for the daemon's final
# commit and fails if it failed
mw_umount() {
	mw_umount_cmd "$1"
	mw_wait_exit "$1.pid"
}

# mw_fusermount_u MOUNTPOINT: fusermount3 -u, tried again for up to 60 s while the mount point
# is busy (as mw_umount_cmd); the daemon's final commit is not waited for
mw_fusermount_u() {
	local err
	for _ in $(seq 600); do
		err=$(fusermount3 -u "$1" 2>&1) && return 0
		case $err in *busy*) sleep 0.1 ;; *) echo "$err" >&2; return 1 ;; esac
	done
	echo "$err" >&2
	return 1
}

# mw_fsck [--deep]: "memwalfs fsck" of $STORE (h15); read-only, so also fine while mounted.
# Fails the test (printing every problem) unless the store is clean.
mw_fsck() {
	if ! "$MW" fsck "${STORE_OPTS[@]}" "$@" "$STORE" >"$WORK/fsck.out" 2>&1; then
		cat "$WORK/fsck.out"
		echo "FAIL: memwalfs fsck $* found problems"
		return 1
	fi
	echo "   fsck: $(grep -c . "$WORK/fsck.out") lines, clean"
}

# sig DIR: one line per entry under DIR (path, type, size), sorted, then the md5 of every file
sig() {
	(cd "$1" && find . -mindepth 1 -printf '%P %y %s\n' 2>/dev/null | sort &&
		find . -type f -print0 2>/dev/null | sort -z | xargs -0 -r md5sum 2>/dev/null)
}
# same_within SECONDS A B: poll until sig A = sig B (printing the difference when it never is)
same_within() {
	local deadline=$((SECONDS + $1))
	while :; do
		if [ "$(sig "$2")" = "$(sig "$3")" ]; then return 0; fi
		if [ $SECONDS -ge $deadline ]; then
			diff <(sig "$2") <(sig "$3") | head -20
			return 1
		fi
		sleep 0.05
	done
}

# mw_rundir: the daemons' run directory (tools/daemon.c rundir(): lock and status files)
mw_rundir() {
	if [ "$(id -u)" = 0 ]; then echo /run/memwalfs
	elif [ -n "${XDG_RUNTIME_DIR:-}" ]; then echo "$XDG_RUNTIME_DIR/memwalfs"
	else echo "/tmp/memwalfs-$(id -u)"; fi
}

# mw_s3_remove: delete what this test stored on the S3 server: every key of $STORE and of the
# stores named after it ($STORE-NAME). Without it every run of the suite left its stores in the
# shared bucket (6,600 objects after a few runs; the server's state grew to 4.3 GB).
# MW_KEEP_S3=1 keeps them (to look at a failed test's store).
mw_s3_remove() {
	[ "$BACKEND" = s3 ] || return 0
	local rest=${STORE#s3://} bucket p
	bucket=${rest%%/*}
	p=${rest#*/}
	for q in "$p/" "$p-"; do
		"$MW" objects ls "${STORE_OPTS[@]}" "s3://$bucket" "$q" 2>/dev/null | awk '{ print $2 }' |
			xargs -r -n 500 "$MW" objects rm "${STORE_OPTS[@]}" "s3://$bucket" >/dev/null 2>&1 || true
	done
}

# mw_unmount_all: unmount every mount of the test and wait for its daemon (for a test that must
# unmount something of its own under them before mw_cleanup)
mw_unmount_all() {
	for m in "${MOUNTS[@]}"; do
		if mountpoint -q "$m" 2>/dev/null; then fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m" || true; fi
		[ -f "$m.pid" ] && mw_wait_exit "$m.pid" || true
	done
}

mw_cleanup() {
	mw_unmount_all
	[ -n "${MW_KEEP_S3:-}" ] || mw_s3_remove
	rm -rf "$WORK"
}
trap mw_cleanup EXIT
