# targets.sh - mounting and unmounting the benchmark targets (sourced by run.sh).
#
# A target is one way of giving the workloads a directory:
#   memwalfs-s3     memwalfs mount -f --endpoint E --region R s3://BUCKET/fs MNT
#   memwalfs-local  memwalfs mount -f DIR MNT (the local-directory store)
#   s3fs            s3fs BUCKET MNT, path-style requests to the same server
#   rclone          rclone mount (VFS cache mode writes) of the same server
#   bindfs          bindfs over a local directory: the cost of FUSE alone
#   local           the local disk directly: the machine's ceiling
#
# The S3 targets talk to TGT_EP, the endpoint of the latency profile (run.sh:
# S3_ENDPOINT itself, or an rttproxy in front of it); bucket administration
# goes to S3_ENDPOINT straight.
#
# target_mount NAME sets MNT (directory the workloads use), FSPID (the
# filesystem process, empty for "local"), BKT (its bucket, empty when it has
# none) and BACKDIR (local directory holding its data, empty for buckets).
# It returns non-zero when the mount did not come up; the caller skips the
# target.  MW_OPTS (unset by default): extra options of a memwalfs mount (the
# churn workload's shorter GC grace and interval).  target_umount unmounts and waits for the process to exit.
# All mounts live under $WORK; run.sh's trap calls umount_all.

MOUNT_WAIT=${MOUNT_WAIT:-30}	# seconds a mount may take to appear
MW_OPTS=${MW_OPTS:-}

# wait_mounted DIR PID: wait until DIR is a mount point; fail if PID died first.
wait_mounted() {
	local dir=$1 pid=$2 i
	for ((i = 0; i < MOUNT_WAIT * 10; i++)); do
		mountpoint -q "$dir" && return 0
		if [ -n "$pid" ] && ! kill -0 "$pid" 2>/dev/null; then
			# A daemonizing mounter exits 0 once the mount is up.
			wait "$pid" 2>/dev/null && mountpoint -q "$dir" && return 0
			mountpoint -q "$dir" && return 0
			return 1
		fi
		sleep 0.1
	done
	return 1
}

# fs_pid DIR LAUNCHED: the pid serving DIR: LAUNCHED when it still runs,
# else the newest process whose command line names DIR (a daemonized mounter).
fs_pid() {
	if kill -0 "$2" 2>/dev/null; then
		echo "$2"
	else
		pgrep -n -f -- " $1( |\$)" || true
	fi
}

# target_bucket NAME: the bucket of a target in this run (RUN) and latency
# profile (BSFX: "-rtt20" for 20 ms, "" for the local server) of the harness.
target_bucket() {
	echo "bench-$RUNID-$1${BSFX:-}-r${RUN:-1}"
}

# target_prepare NAME: one-time setup before the first mount (bucket, dirs).
target_prepare() {
	local t=$1
	mkdir -p "$WORK/$t/mnt" "$WORK/$t/data" "$WORK/$t/cache"
	case "$t" in
	memwalfs-s3|s3fs|rclone)
		s3_mb "$(target_bucket "$t")" || return 1 ;;
	esac
	return 0
}

# target_mount NAME: mount it (see the file comment).
target_mount() {
	local t=$1 launched=
	MNT="$WORK/$t/mnt"
	BKT=
	BACKDIR=
	FSPID=
	case "$t" in
	local)
		MNT="$WORK/$t/data"
		BACKDIR=$MNT
		return 0
		;;
	bindfs)
		BACKDIR="$WORK/$t/data"
		bindfs -f "$BACKDIR" "$MNT" >>"$WORK/$t/fs.log" 2>&1 &
		launched=$!
		;;
	s3fs)
		BKT=$(target_bucket "$t")
		printf '%s:%s\n' "$AWS_ACCESS_KEY_ID" "$AWS_SECRET_ACCESS_KEY" >"$WORK/$t/passwd"
		chmod 600 "$WORK/$t/passwd"
		s3fs "$BKT" "$MNT" -f -o url="$TGT_EP" -o use_path_request_style \
			-o endpoint="$S3_REGION" -o passwd_file="$WORK/$t/passwd" \
			-o dbglevel=warn >>"$WORK/$t/fs.log" 2>&1 &
		launched=$!
		;;
	rclone)
		BKT=$(target_bucket "$t")
		env -u AWS_CA_BUNDLE \
			RCLONE_CONFIG_BENCH_TYPE=s3 RCLONE_CONFIG_BENCH_PROVIDER=Ceph \
			RCLONE_CONFIG_BENCH_ACCESS_KEY_ID="$AWS_ACCESS_KEY_ID" \
			RCLONE_CONFIG_BENCH_SECRET_ACCESS_KEY="$AWS_SECRET_ACCESS_KEY" \
			RCLONE_CONFIG_BENCH_ENDPOINT="$TGT_EP" \
			RCLONE_CONFIG_BENCH_REGION="$S3_REGION" \
			RCLONE_CONFIG_BENCH_FORCE_PATH_STYLE=true \
			rclone mount "bench:$BKT" "$MNT" --config /dev/null \
			--vfs-cache-mode writes --cache-dir "$WORK/$t/cache" \
			${RCLONE_WB:+--vfs-write-back "$RCLONE_WB"} \
			--log-level ERROR >>"$WORK/$t/fs.log" 2>&1 &
		launched=$!
		;;
	memwalfs-s3)
		BKT=$(target_bucket "$t")
		[ -x "$MEMWALFS" ] || { say "  $MEMWALFS not built"; return 1; }
		# A build older than the disk cache (an A/B of an old commit) has no
		# --cache-dir: it runs with its memory cache only.
		local cd_opt=(--cache-dir "$WORK/$t/diskcache")
		"$MEMWALFS" mount --help 2>&1 | grep -q -- --cache-dir || cd_opt=()
		"$MEMWALFS" mount -f --endpoint "$TGT_EP" --region "$S3_REGION" $MW_OPTS \
			"${cd_opt[@]}" "s3://$BKT/fs" "$MNT" >>"$WORK/$t/fs.log" 2>&1 &
		launched=$!
		;;
	memwalfs-local)
		BACKDIR="$WORK/$t/data"
		[ -x "$MEMWALFS" ] || { say "  $MEMWALFS not built"; return 1; }
		"$MEMWALFS" mount -f $MW_OPTS "$BACKDIR" "$MNT" >>"$WORK/$t/fs.log" 2>&1 &
		launched=$!
		;;
	*)
		say "unknown target $t"
		return 1
		;;
	esac
	if ! wait_mounted "$MNT" "$launched"; then
		say "  $t: mount failed; last lines of $WORK/$t/fs.log:"
		tail -n 3 "$WORK/$t/fs.log" 2>/dev/null | sed 's/^/    /' >&2
		kill "$launched" 2>/dev/null
		fusermount3 -uz "$MNT" 2>/dev/null
		return 1
	fi
	FSPID=$(fs_pid "$MNT" "$launched")
	return 0
}

# target_umount NAME: unmount the target's mount and wait for its process.
target_umount() {
	local t=$1 mnt="$WORK/$1/mnt" pid=$FSPID i
	[ "$t" = local ] && return 0
	sync
	if mountpoint -q "$mnt"; then
		for i in 1 2 3 4 5; do
			fusermount3 -u "$mnt" 2>/dev/null && break
			sleep 1
		done
		mountpoint -q "$mnt" && fusermount3 -uz "$mnt" 2>/dev/null
	fi
	if [ -n "$pid" ]; then
		for ((i = 0; i < 600; i++)); do
			kill -0 "$pid" 2>/dev/null || break
			sleep 0.1
		done
		kill "$pid" 2>/dev/null
	fi
	FSPID=
	return 0
}

# target_remount NAME: unmount and mount again (cold caches in the filesystem
# process), then drop the kernel's caches.  rclone's VFS cache and memwalfs'
# disk cache live on disk and outlive a remount (rclone's served every "cold"
# read of the 2026-12-01 run with no GET): they are emptied too.
target_remount() {
	target_umount "$1"
	[ "$1" = rclone ] && rm -rf "${WORK:?}/rclone/cache" && mkdir -p "$WORK/rclone/cache"
	[ "$1" = memwalfs-s3 ] && rm -rf "${WORK:?}/memwalfs-s3/diskcache"
	drop_caches
	target_mount "$1"
}

# target_remount_warm NAME: the same, but what a target keeps on local disk
# (rclone's VFS cache, memwalfs' disk cache) stays: a remount as a user sees it.
target_remount_warm() {
	target_umount "$1"
	drop_caches
	target_mount "$1"
}

# umount_all: lazily unmount everything under $WORK (the trap's last word).
umount_all() {
	local m
	[ -n "${WORK:-}" ] || return 0
	for m in $(awk -v w="$WORK/" 'index($2, w) == 1 { print $2 }' /proc/mounts); do
		fusermount3 -u "$m" 2>/dev/null || fusermount3 -uz "$m" 2>/dev/null || umount -l "$m" 2>/dev/null
	done
}

# target_stored NAME: bytes the target holds now (bucket or backing dir).
target_stored() {
	if [ -n "$BKT" ]; then
		bucket_bytes "$BKT"
	elif [ -n "$BACKDIR" ]; then
		du -sb "$BACKDIR" 2>/dev/null | awk '{ print $1 }'
	else
		echo 0
	fi
}
