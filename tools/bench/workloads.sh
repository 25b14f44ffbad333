# workloads.sh - the benchmark workloads (sourced by run.sh).
#
# Every workload runs on the mounted target TGT (MNT, FSPID, BKT set by
# target_mount) through step/step_end, which record in results.tsv:
#   wall_s       wall time of the command (the timed part)
#   cpu_s        CPU seconds of the filesystem process during the step
#   peak_mib     peak RSS of the filesystem process during the step (VmHWM
#                after clear_refs)
#   settle_s     writing steps: seconds after the command returned until the
#                data was durable: s3fs and rclone until a listing of the
#                bucket showed all of it (they acknowledge writes before
#                uploading), memwalfs the time of `memwalfs sync`
#   growth_B     store growth during the step (STEP_GROWTH=1 steps)
#   wbytes, rbytes, ops  bytes the step wrote or read and its calls, for the
#                per-byte figures of report.py
#   get_B        bytes RGW sent in answer to the step's object GETs
#   req_*        requests the server received for the target's bucket, from
#                RGW's access log (PUT GET LIST HEAD DELETE POST), counted when
#                the target is done (rgw_flush_counts)
#   mw_*         memwalfs only: change of the counters of "memwalfs stats"
#   stored_mib   bytes held by the target after a writing step
# plus the workload's own figures (MBps, iops, latency percentiles, files_s).
#
# The default set (run.sh): seq (mountpoint-s3's fio jobs and juicefs bench's
# big files), jbsmall (juicefs bench's small files), md (mdtest_tree.c), gs
# (GeeseFS's small-file set), dcreate, rand (random 4 KiB I/O, fsync latency).
# Older ones kept for --workloads: tree, list, real.
# Sizes come from run.sh; the source trees from prepare_sources.

# -------------------------------------------------------------- step frame

# stats_snap: counters of "memwalfs stats --raw MNT" as "name value" lines (memwalfs
# targets only; accepts "name value", "name: value", "name=value" and flat JSON).
stats_snap() {
	case "$TGT" in memwalfs-*) ;; *) return 0 ;; esac
	timeout 20 "$MEMWALFS" stats --raw "$MNT" 2>/dev/null |
		tr ',{}' '\n\n\n' |
		sed -n 's/^[[:space:]]*"\{0,1\}\([A-Za-z0-9_./-]*\)"\{0,1\}[[:space:]]*[:=]\{0,1\}[[:space:]]*\(-\{0,1\}[0-9][0-9.]*\)[[:space:]]*$/\1 \2/p'
}

# step WORKLOAD CMD...: run CMD (an executable, not a function) under
# STEP_TIMEOUT on the current target with its output in STEP_OUT; records
# wall_s and, on failure, failed.  Returns CMD's status.
step() {
	STEP_W=$1
	shift
	say "  $TGT: $STEP_W"
	STEP_OUT="$LOGS/$TGT$SFX.$STEP_W.r$RUN.out"
	STEP_MARK=$(rgw_mark)
	STEP_CPU0=$(proc_cpu "${FSPID:-0}")
	[ -n "$FSPID" ] && proc_hwm_reset "$FSPID"
	stats_snap >"$STEP_OUT.st0"
	STEP_STORED0=
	[ "${STEP_GROWTH:-0}" = 1 ] && STEP_STORED0=$(target_stored)
	local t0
	t0=$(now)
	timeout -k 10 "$STEP_TIMEOUT" "$@" >"$STEP_OUT" 2>&1
	STEP_RC=$?
	STEP_WALL=$(elapsed "$t0")
	result "$TGT" "$STEP_W" wall_s "$STEP_WALL" s
	if [ "$STEP_RC" != 0 ]; then
		result "$TGT" "$STEP_W" failed "$STEP_RC" rc
		say "    failed (status $STEP_RC$([ "$STEP_RC" = 124 ] && echo ', timed out')); see $STEP_OUT"
		tail -n 2 "$STEP_OUT" | sed 's/^/      /' >&2
	fi
	return "$STEP_RC"
}

# step_end [PREFIX OBJECTS BYTES]: after a step: wait until the server holds
# the data (s3fs, rclone; when the listing of PREFIX must show OBJECTS/BYTES),
# then record cpu_s, peak_mib, mw_* and (writing steps, the ones given
# PREFIX..., or run with STEP_GROWTH=1) stored_mib; with STEP_GROWTH=1 also
# growth_B, the bytes the store grew by during the step; note the step's slice
# of the RGW log for req_*.
step_end() {
	local s
	if [ $# -eq 3 ] && [ -n "$BKT" ] && [ "$STEP_RC" = 0 ]; then
		case "$TGT" in s3fs|rclone)
			s=$(wait_settled "$BKT" "$1" "$2" "$3" "$SETTLE_TIMEOUT")
			result "$TGT" "$STEP_W" settle_s "$s" s
			[ "$s" = timeout ] || say "    server holds the data ${s}s after the command returned"
			;;
		esac
	fi
	# memwalfs commits what was not fsynced within its cadence: `memwalfs
	# sync` waits until all of it is durable, so that the step's rate counts
	# it (as for s3fs and rclone) and its store counters are complete.
	if [ $# -eq 3 ] && [ "$STEP_RC" = 0 ]; then
		case "$TGT" in memwalfs-*)
			s=$(now)
			timeout 120 "$MEMWALFS" sync "$MNT" >/dev/null 2>&1 ||
				say "    memwalfs sync failed"
			result "$TGT" "$STEP_W" settle_s "$(elapsed "$s")" s
			;;
		esac
	fi
	if [ -n "$FSPID" ]; then
		result "$TGT" "$STEP_W" cpu_s "$(awk -v a="$STEP_CPU0" -v b="$(proc_cpu "$FSPID")" \
			'BEGIN { printf "%.2f", b - a }')" s
		result "$TGT" "$STEP_W" peak_mib "$(proc_hwm "$FSPID")" MiB
	fi
	[ -n "$BKT" ] && printf '%s\t%s\t%s\t%s\t%s\n' "$TGT" "$STEP_W" "$RUN" "$STEP_MARK" \
		"$(rgw_mark)" >>"$RGW_PENDING"
	case "$TGT" in memwalfs-*)
		stats_snap >"$STEP_OUT.st1"
		awk 'NR == FNR { a[$1] = $2; next }
			tolower($1) ~ /put|get|list|del|head|req|byte|commit|fsync|backpressure|wait/ {
				printf "%s %s\n", $1, $2 - a[$1] }' \
			"$STEP_OUT.st0" "$STEP_OUT.st1" |
			while read -r s c; do result "$TGT" "$STEP_W" "mw_$s" "$c" count; done
		;;
	esac
	if [ $# -eq 3 ] || [ -n "$STEP_STORED0" ]; then
		s=$(target_stored)
		result "$TGT" "$STEP_W" stored_mib "$(awk -v b="$s" 'BEGIN { printf "%.1f", b / 1048576 }')" MiB
		# Store growth: what the step added to the bucket or backing directory
		# (before any garbage collection), in bytes.
		[ -n "$STEP_STORED0" ] && result "$TGT" "$STEP_W" growth_B $((s - STEP_STORED0)) B
	fi
	STEP_STORED0=
	return 0
}

# untimed_rm DIR: clean up after a workload (not measured).  On s3fs and
# rclone every file is a DELETE request (seconds for a few thousand files),
# and their bucket goes at the end of the target: the files stay there.
untimed_rm() {
	case "$TGT" in s3fs|rclone) return 0 ;; esac
	rm -rf "$1"
}

# ------------------------------------------------------------------- fio

FIO_COMMON="--ioengine=psync --fallocate=none --group_reporting --output-format=json"

# fio_rec WORKLOAD DIR(read|write|sync): record MBps, iops, latency percentiles
# and io_MiB of the fio JSON of the last step for direction DIR.
fio_rec() {
	local w=$1 d=$2 js v
	[ -s "$STEP_OUT.json" ] || return 0
	# fio may print warnings before the JSON document.
	js=$(sed -n '/^{/,$p' "$STEP_OUT.json")
	[ -n "$js" ] || return 0
	if [ "$d" = sync ]; then
		for v in 50 99; do
			result "$TGT" "$w" "fsync_p${v}_ms" "$(jq ".jobs[0].sync.lat_ns.percentile[\"$v.000000\"] // 0 | . / 1e6" <<<"$js")" ms
		done
		d=write
	fi
	result "$TGT" "$w" MBps "$(jq ".jobs[0].$d.bw_bytes / 1e6 | . * 100 | round / 100" <<<"$js")" MB/s
	result "$TGT" "$w" iops "$(jq ".jobs[0].$d.iops | round" <<<"$js")" ops/s
	result "$TGT" "$w" io_MiB "$(jq ".jobs[0].$d.io_bytes / 1048576 | round" <<<"$js")" MiB
	# Exact bytes and calls, for the per-byte store figures of report.py.
	result "$TGT" "$w" "$([ "$d" = read ] && echo rbytes || echo wbytes)" \
		"$(jq ".jobs[0].$d.io_bytes" <<<"$js")" B
	result "$TGT" "$w" ops "$(jq ".jobs[0].$d.total_ios" <<<"$js")" calls
	for v in 50 99; do
		result "$TGT" "$w" "p${v}_ms" "$(jq ".jobs[0].$d.clat_ns.percentile[\"$v.000000\"] // 0 | . / 1e6" <<<"$js")" ms
	done
}

# fio_step WORKLOAD DIR(read|write|sync) FIO-ARGS...: one fio job as a step,
# recorded by fio_rec.
fio_step() {
	local w=$1 d=$2
	shift 2
	step "$w" fio $FIO_COMMON --output="$LOGS/$TGT$SFX.$w.r$RUN.out.json" "$@"
	fio_rec "$w" "$d"
}

# wall_rate WORKLOAD BYTES: MBps_wall = BYTES / wall time of the last step.
wall_rate() {
	result "$TGT" "$1" MBps_wall "$(awk -v b="$2" -v t="$STEP_WALL" 'BEGIN { printf "%.2f", b / t / 1e6 }')" MB/s
}

# wl_seq: sequential I/O in the shapes peers publish.
#   jb-write-big / jb-read-big: juicefs bench -p 4's big files: 4 threads, each
#     writing (then, cold, reading) its own JB_BIG_MB file in 1 MiB I/O; the
#     writers fsync at close (juicefs' close uploads; here every target is asked
#     for the same durability).
#   mp-write: mountpoint-s3's seq_write.fio: 1 job, 256 KiB, fsync at close;
#     SEQ_MB bytes (capped at MP_S seconds) instead of 10 s time-based.
#   mp-read-1t / -4t / -direct / -4t-direct: mountpoint-s3's seq_read jobs:
#     256 KiB, after a remount and drop_caches; one pass over the file(s),
#     capped at MP_S seconds (their 30 s run over a 100 GiB object never
#     rereads; a time-based run over our smaller files would).
#   mp-read-warm: the 1-thread read again, page cache kept (invalidate=0): what
#     a user's second read sees.
#   mp-read-dcache: once more with the page cache dropped by fio (invalidate=1)
#     and the daemon as the previous reads left it: the filesystem's own cache.
wl_seq() {
	local d="$MNT/b$RUN/seq" big=$((JB_BIG_MB * 1048576)) one=$((SEQ_MB * 1048576))
	local rd="--rw=read --bs=256k --runtime=$MP_S"
	mkdir -p "$d/jb" "$d/mp"
	STEP_GROWTH=1 fio_step jb-write-big write --name=big --directory="$d/jb" --rw=write --bs=1M \
		--size="${JB_BIG_MB}M" --numjobs=4 --create_on_open=1 --fsync_on_close=1
	wall_rate jb-write-big $((4 * big))
	step_end "b$RUN/seq/jb/" 4 $((4 * big))
	STEP_GROWTH=1 fio_step mp-write write --name=seq --directory="$d/mp" --rw=write --bs=256k \
		--size="${SEQ_MB}M" --runtime="$MP_S" --create_on_open=1 --fsync_on_close=1
	wall_rate mp-write "$one"
	step_end "b$RUN/seq/mp/" 1 "$one"

	target_remount "$TGT" || return 1
	fio_step jb-read-big read --name=big --directory="$d/jb" --rw=read --bs=1M \
		--size="${JB_BIG_MB}M" --numjobs=4
	step_end
	target_remount "$TGT" || return 1
	fio_step mp-read-1t read --name=seq --directory="$d/mp" $rd --size="${SEQ_MB}M"
	step_end
	fio_step mp-read-warm read --name=seq --directory="$d/mp" $rd --size="${SEQ_MB}M" --invalidate=0
	step_end
	fio_step mp-read-dcache read --name=seq --directory="$d/mp" $rd --size="${SEQ_MB}M" --invalidate=1
	step_end
	target_remount "$TGT" || return 1
	fio_step mp-read-4t read --name=big --directory="$d/jb" $rd --size="${JB_BIG_MB}M" --numjobs=4
	step_end
	# --quick leaves out the O_DIRECT reads (two remounts per target).
	[ "$SEQ_DIRECT" = 1 ] || { untimed_rm "$d"; return 0; }
	target_remount "$TGT" || return 1
	fio_step mp-read-direct read --name=seq --directory="$d/mp" $rd --size="${SEQ_MB}M" --direct=1
	step_end
	target_remount "$TGT" || return 1
	fio_step mp-read-4t-direct read --name=big --directory="$d/jb" $rd --size="${JB_BIG_MB}M" \
		--numjobs=4 --direct=1
	step_end
	untimed_rm "$d"
}

# kv_rec WORKLOAD KEY=UNIT...: record the listed key=value figures of the
# last step's output line (durable_creates, smallfiles.py) with their units.
kv_rec() {
	local w=$1 f k spec
	shift
	for f in $(grep -m1 '^files=' "$STEP_OUT" || true); do
		k=${f%%=*}
		for spec in "$@"; do
			[ "${spec%%=*}" = "$k" ] && result "$TGT" "$w" "${k/files_per_s/files_s}" "${f#*=}" "${spec#*=}"
		done
	done
}

# wl_jbsmall: juicefs bench -p 4's small files (tools/bench/smallfiles.py):
# 4 threads x JB_SMALL_N files of 128 KiB, each written in one call and closed
# (no fsync, as juicefs bench), read back after a remount and drop_caches, then
# stat of all of them.
wl_jbsmall() {
	local d="$MNT/b$RUN/jbs" n=$((4 * JB_SMALL_N)) op
	for op in write read stat; do
		[ "$op" = read ] && { target_remount "$TGT" || return 1; }
		step "jb-$op-small" python3 "$BENCH_DIR/smallfiles.py" "$op" "$d" 4 "$JB_SMALL_N" 131072
		kv_rec "jb-$op-small" files_per_s=files/s MBps=MB/s p50_ms=ms p99_ms=ms
		case $op in
		write)
			result "$TGT" "jb-$op-small" wbytes $((n * 131072)) B
			step_end "b$RUN/jbs/" "$n" $((n * 131072))
			;;
		read)
			result "$TGT" "jb-$op-small" rbytes $((n * 131072)) B
			result "$TGT" "jb-$op-small" ops "$n" files
			step_end
			;;
		*) step_end ;;
		esac
	done
	untimed_rm "$d"
}

# wl_rand: random 4 KiB reads (after a remount: cold start, then whatever each
# target caches; then again after a remount that keeps local disk caches),
# random 4 KiB writes with a final fsync, and the latency of
# 4 KiB write + fsync.
wl_rand() {
	local d="$MNT/b$RUN/rand"
	mkdir -p "$d/f"
	step rand-prepare fio $FIO_COMMON --output=/dev/null --name=rr --filename="$d/r.dat" \
		--rw=write --bs=1M --size="${RAND_MB}M" --end_fsync=1
	step_end "b$RUN/rand/" 1 $((RAND_MB * 1048576))
	target_remount "$TGT" || return 1
	fio_step randread-4k read --name=rr --filename="$d/r.dat" --rw=randread --bs=4k \
		--size="${RAND_MB}M" --time_based --runtime="$RAND_S" --randrepeat=0
	step_end
	# the same after a remount that keeps local disk caches (memwalfs' disk cache, rclone's VFS
	# cache): what the previous pass brought in is read from local disk
	target_remount_warm "$TGT" || return 1
	fio_step randread-4k-dwarm read --name=rr --filename="$d/r.dat" --rw=randread --bs=4k \
		--size="${RAND_MB}M" --time_based --runtime="$RAND_S" --randrepeat=0
	step_end
	STEP_GROWTH=1 fio_step randwrite-4k write --name=rw --filename="$d/r.dat" --rw=randwrite --bs=4k \
		--size="${RAND_MB}M" --time_based --runtime="$RAND_S" --end_fsync=1 --randrepeat=0
	step_end
	STEP_GROWTH=1 fio_step fsync-4k sync --name=fs --filename="$d/f/fsync.dat" --rw=write --bs=4k --size=64M \
		--fsync=1 --runtime="$FSYNC_S"
	step_end
	untimed_rm "$d"
}

# ------------------------------------------------------------ metadata

# wl_md: mdtest -b 6 -z MD_Z -I 8 -W MD_W with 1 and 8 processes on one tree
# (tools/bench/mdtest_tree.c); s3fs and rclone get depth MD_Z_S3 (a tree
# node is a PUT on them) and stonewall MD_W_S3.  Records rate, items and seconds per phase as
# workloads md-PHASE-PROCS.
wl_md() {
	local d="$MNT/b$RUN/md" z=$MD_Z w=$MD_W ph procs items secs rate errs
	case "$TGT" in s3fs|rclone) z=$MD_Z_S3 w=$MD_W_S3 ;; esac
	mkdir -p "$d"
	result "$TGT" md depth "$z" levels
	result "$TGT" md stonewall "$w" s
	step md "$BIN/mdtest_tree" -b 6 -z "$z" -I 8 -W "$w" -n 1,8 "$d"
	while read -r ph procs items secs rate errs; do
		result "$TGT" "md-${ph#phase=}-${procs#procs=}" rate "${rate#rate=}" ops/s
		result "$TGT" "md-${ph#phase=}-${procs#procs=}" items "${items#items=}" items
		result "$TGT" "md-${ph#phase=}-${procs#procs=}" seconds "${secs#seconds=}" s
		[ "${errs#errors=}" = 0 ] || result "$TGT" "md-${ph#phase=}-${procs#procs=}" failed "${errs#errors=}" calls
	done < <(grep '^phase=' "$STEP_OUT")
	step_end
	untimed_rm "$d"
}

# --------------------------------------------------- GeeseFS small files

# wl_gs: GeeseFS's small-file set (GS_FILES files of 0.5-300 KB, 30 KB on
# average, in GS_DIRS directories, made by prepare_sources; s3fs and rclone:
# the first GS_FILES_S3 of them in GS_DIRS_S3 directories): cp -r in, ls -lR,
# rm -r.  Rates are files (entries for ls) per second, so that the two sizes
# compare.
wl_gs() {
	local d="$MNT/b$RUN/gs" src="$SRC/gs" n=$GS_FILES bytes=$GS_BYTES dirs=$GS_DIRS
	case "$TGT" in s3fs|rclone) src="$SRC/gs-s3" n=$GS_FILES_S3 bytes=$GS_BYTES_S3 dirs=$GS_DIRS_S3 ;; esac
	result "$TGT" gs-cp entries "$n" files
	step gs-cp cp -r "$src" "$d"
	result "$TGT" gs-cp wbytes "$bytes" B
	result "$TGT" gs-cp files_s "$(awk -v n="$n" -v t="$STEP_WALL" 'BEGIN { printf "%.1f", n / t }')" files/s
	step_end "b$RUN/gs/" "$n" "$bytes"
	step gs-ls-lR bash -c 'ls -lR "$1" >/dev/null' _ "$d"
	result "$TGT" gs-ls-lR entries_s "$(awk -v n=$((n + dirs)) -v t="$STEP_WALL" 'BEGIN { printf "%.1f", n / t }')" entries/s
	step_end
	step gs-rm rm -r "$d"
	result "$TGT" gs-rm files_s "$(awk -v n="$n" -v t="$STEP_WALL" 'BEGIN { printf "%.1f", n / t }')" files/s
	step_end "b$RUN/gs/" 0 0
}

# wl_tree: cp -r of the source tree, cat of all files (cold), ls -lR, rm -r.
wl_tree() {
	local d="$MNT/b$RUN/tree"
	step tree-cp cp -r "$SRC/tree" "$d"
	result "$TGT" tree-cp files_s "$(awk -v n="$TREE_FILES" -v t="$STEP_WALL" 'BEGIN { printf "%.1f", n / t }')" files/s
	step_end b$RUN/tree/ "$TREE_FILES" "$TREE_BYTES"
	target_remount "$TGT" || return 1
	step tree-cat-cold bash -c 'find "$1" -type f -exec cat {} + >/dev/null' _ "$d"
	step_end
	step tree-ls-lR bash -c 'ls -lR "$1" >/dev/null' _ "$d"
	step_end
	step tree-rm rm -r "$d"
	step_end b$RUN/tree/ 0 0
}

# ------------------------------------------------------ durable creates

# wl_dcreate: create + write 4 KiB + fsync + close, 1 and 32 writers.
wl_dcreate() {
	local w n d
	for w in 1 32; do
		d="$MNT/b$RUN/dc$w"
		mkdir -p "$d"
		STEP_GROWTH=1 step "dcreate-$w" "$BIN/durable_creates" "$d" "$w" "$DC_S" "$DC_MAX"
		kv_rec "dcreate-$w" files_per_s=files/s p50_ms=ms p99_ms=ms max_ms=ms
		n=$(grep -o '^files=[0-9]*' "$STEP_OUT" | cut -d= -f2)
		result "$TGT" "dcreate-$w" wbytes $((${n:-0} * 4096)) B
		step_end "b$RUN/dc$w/" "${n:-0}" "$((${n:-0} * 4096))"
		untimed_rm "$d"
	done
}

# ------------------------------------------------------- cp of a big file

# wl_cp: cp of a CP_MB file inside the mount (issue 13's target: a 1 GiB copy
# in an S3 mount under 1 s and under 1 MiB uploaded, which needs copies that
# share data).  The source is written first (cp-prepare, fsync at the end),
# the mount is remounted (the source is cold, as a file written earlier), then
# cp-1g: `cp SRC DST && sync DST` (coreutils cp uses copy_file_range where
# the filesystem has it; sync DST fsyncs the copy), timed until the copy is
# durable (for rclone: until the server holds it).  Records the store's growth
# (growth_B) and, for memwalfs, the bytes it sent to its store.  Runs on the
# targets in CP_TARGETS only (the S3 ones and the local disk by default).
wl_cp() {
	local d="$MNT/b$RUN/cp" n=$((CP_MB * 1048576))
	case " $CP_TARGETS " in *" $TGT "*) ;; *) return 0 ;; esac
	mkdir -p "$d"
	fio_step cp-prepare write --name=cp --filename="$d/src.dat" --rw=write --bs=1M \
		--size="${CP_MB}M" --end_fsync=1
	step_end "b$RUN/cp/" 1 "$n"
	target_remount "$TGT" || return 1
	STEP_GROWTH=1 step cp-1g bash -c 'cp "$1" "$2" && sync "$2"' _ "$d/src.dat" "$d/dst.dat"
	result "$TGT" cp-1g wbytes "$n" B
	wall_rate cp-1g "$n"
	[ "$(stat -c %s "$d/dst.dat" 2>/dev/null)" = "$n" ] || { result "$TGT" cp-1g failed 1 size; say "    copy has the wrong size"; }
	step_end "b$RUN/cp/" 2 $((2 * n))
	untimed_rm "$d"
}

# ---------------------------------------------- stat under a busy writer

# wl_statbp: issue 13's "32 threads stat-ing files of a cold S3 mount while
# another thread writes under backpressure: stat p99"
# (tools/bench/stat_backpressure.c).  32 directories of SBP_FILES files each
# (SBP_FILES_S3 on s3fs and rclone, where each is a PUT), then, each on a fresh
# mount: statbp-idle (32 threads stat each file once, the cold pass, then
# force getattrs for SBP_IDLE_S s; no writer) and statbp-write (the same while
# one thread writes up to SBP_MB MiB in 1 MiB writes for SBP_S s, no fsync).
wl_statbp() {
	local d="$MNT/b$RUN/sbp" f=$SBP_FILES w
	case "$TGT" in s3fs|rclone) f=$SBP_FILES_S3 ;; esac
	mkdir -p "$d"
	step statbp-prepare "$BIN/stat_backpressure" prepare "$d" 32 "$f"
	step_end "b$RUN/sbp/" $((32 * f)) 0
	for w in idle write; do
		target_remount "$TGT" || return 1
		if [ $w = idle ]; then
			step statbp-idle "$BIN/stat_backpressure" run "$d" 32 "$f" "$SBP_IDLE_S" 0
		else
			# memwalfs: the stats start once the engine holds the writer back
			case "$TGT" in memwalfs-*) export SBP_STATS=$MNT ;; *) unset SBP_STATS ;; esac
			step statbp-write "$BIN/stat_backpressure" run "$d" 32 "$f" "$SBP_S" "$SBP_MB"
			unset SBP_STATS
		fi
		kv_rec "statbp-$w" files=files cold_p50_ms=ms cold_p99_ms=ms cold_max_ms=ms \
			hot_n=calls hot_p50_ms=ms hot_p99_ms=ms hot_max_ms=ms write_MBps=MB/s \
			write_max_ms=ms write_MiB=MiB bp_waits=waits bp_held_pct=%
		step_end
	done
	untimed_rm "$d"
}

# ---------------------------------------------------------------- listing

# wl_list: create N empty files in one directory, then ls -l (cold, after a
# remount) and find (warm) of it.
wl_list() {
	local n=$LIST_N d="$MNT/b$RUN/list"
	case "$TGT" in s3fs|rclone) n=$LIST_N_S3 ;; esac
	mkdir -p "$d"
	result "$TGT" list-create entries "$n" entries
	step list-create bash -c 'cd "$1" && for ((i = 0; i < $2; i++)); do : >"f$i"; done' _ "$d" "$n"
	result "$TGT" list-create files_s "$(awk -v n="$n" -v t="$STEP_WALL" 'BEGIN { printf "%.1f", n / t }')" files/s
	step_end b$RUN/list/ "$n" 0
	target_remount "$TGT" || return 1
	step list-ls-l bash -c 'ls -l "$1" >/dev/null' _ "$d"
	result "$TGT" list-ls-l entries_s "$(awk -v n="$n" -v t="$STEP_WALL" 'BEGIN { printf "%.1f", n / t }')" entries/s
	step_end
	step list-find bash -c 'find "$1" >/dev/null' _ "$d"
	result "$TGT" list-find entries_s "$(awk -v n="$n" -v t="$STEP_WALL" 'BEGIN { printf "%.1f", n / t }')" entries/s
	step_end
}

# ------------------------------------------------------------- real tasks

# wl_real: tar -x of a source tarball, git clone of a local repository.
wl_real() {
	mkdir -p "$MNT/b$RUN/tar"
	step tar-x tar -xzf "$SRC/src.tar.gz" --no-same-owner -C "$MNT/b$RUN/tar"
	step_end b$RUN/tar/ "$TAR_FILES" "$TAR_BYTES"
	step git-clone git clone -q --no-hardlinks "$SRC/repo" "$MNT/b$RUN/git"
	step_end b$RUN/git/ "$GIT_FILES" -
}

# --------------------------------------------------------- the raw server

# raw_kv WORKLOAD: record the key=value figures of s3raw.sh's line in STEP_OUT.
raw_kv() {
	local f
	for f in $(grep '^put_s=' "$STEP_OUT" || true); do
		case "$f" in
		*MBps=*|*req_s=*|*p50_ms=*) result "$TGT" "$1" "${f%%=*}" "${f#*=}" "-" ;;
		esac
	done
}

# wl_raw: PUT and GET throughput of the object sizes used above, many
# connections (s3raw.sh), straight to the server (the s3-raw target), or
# through the profile's rttproxy (TGT_EP).
wl_raw() {
	local spec size count conns w
	for spec in $RAW_SPECS; do
		IFS=: read -r size count conns <<<"$spec"
		w="raw-$((size / 1024))k-c$conns"
		step "$w" env S3_ENDPOINT="$TGT_EP" "$BENCH_DIR/s3raw.sh" "$BKT" "$size" "$count" "$conns"
		raw_kv "$w"
		step_end
	done
}

# probe_measure ENDPOINT: one short raw PUT/GET probe (PROBE_SPECS) of the
# server at ENDPOINT into PROBE_BKT; sets P_PUT / P_GET (MB/s, the best of the
# sizes) and P_PRT / P_GRT (median 4 KiB request on one connection, ms).
probe_measure() {
	local spec size count conns kv f v
	P_PUT=0 P_GET=0 P_PRT=0 P_GRT=0
	for spec in $PROBE_SPECS; do
		IFS=: read -r size count conns <<<"$spec"
		kv=$(S3_ENDPOINT=$1 timeout 120 "$BENCH_DIR/s3raw.sh" "$PROBE_BKT" "$size" "$count" \
			"$conns" 2>>"$LOGS/probe.err" | grep '^put_s=') || continue
		for f in $kv; do
			v=${f#*=}
			case "$f" in
			put_MBps=*) P_PUT=$(awk -v a="$P_PUT" -v b="$v" 'BEGIN { print (b > a) ? b : a }') ;;
			get_MBps=*) P_GET=$(awk -v a="$P_GET" -v b="$v" 'BEGIN { print (b > a) ? b : a }') ;;
			put_p50_ms=*) [ "$size" = 4096 ] && [ "$conns" = 1 ] && P_PRT=$v ;;
			get_p50_ms=*) [ "$size" = 4096 ] && [ "$conns" = 1 ] && P_GRT=$v ;;
			esac
		done
	done
}

# probe BEFORE AFTER: a short raw PUT/GET probe (probe_measure) between two
# targets, through the profile's endpoint (TGT_EP).  Records, as target
# "probe", workloads after-BEFORE and before-AFTER (either may be empty; with
# the profile's suffix SFX): put_MBps / get_MBps, put_rtt_ms / get_rtt_ms and
# the 1-minute load average.
probe() {
	local w
	probe_measure "$TGT_EP"
	for w in ${1:+after-$1$SFX} ${2:+before-$2$SFX}; do
		result probe "$w" put_MBps "$P_PUT" MB/s
		result probe "$w" get_MBps "$P_GET" MB/s
		result probe "$w" put_rtt_ms "$P_PRT" ms
		result probe "$w" get_rtt_ms "$P_GRT" ms
		result probe "$w" load1 "$(cut -d' ' -f1 /proc/loadavg)" load
	done
	say "  probe${SFX:+ ($SFX)}: PUT ${P_PUT} MB/s, GET ${P_GET} MB/s, 4 KiB PUT ${P_PRT} ms, load $(cut -d' ' -f1 /proc/loadavg)"
}

# proxy_overhead PROXY_ENDPOINT ROUNDS: the rttproxy's own cost at 0 ms: the
# probe straight to the server and through PROXY_ENDPOINT (a proxy at 0 ms),
# alternately, ROUNDS times each; recorded as target "proxy0", workloads
# direct and proxied (run = the round), for report.py's overhead line.
proxy_overhead() {
	local i ep w
	for ((i = 1; i <= $2; i++)); do
		for w in direct proxied; do
			ep=$S3_ENDPOINT
			[ "$w" = proxied ] && ep=$1
			probe_measure "$ep"
			RUN=$i result proxy0 "$w" put_MBps "$P_PUT" MB/s
			RUN=$i result proxy0 "$w" get_MBps "$P_GET" MB/s
			RUN=$i result proxy0 "$w" put_rtt_ms "$P_PRT" ms
			RUN=$i result proxy0 "$w" get_rtt_ms "$P_GRT" ms
			say "  proxy at 0 ms, $w: PUT ${P_PUT} MB/s, GET ${P_GET} MB/s, 4 KiB PUT ${P_PRT} ms, GET ${P_GRT} ms"
		done
	done
}

# ------------------------------------------------------- space under churn

# store_sum: "OBJECTS BYTES" the current target's store holds now: the
# bucket's listing (memwalfs-s3) or the regular files of its local store
# directory (memwalfs-local).
store_sum() {
	if [ -n "$BKT" ]; then
		s3_sum "$BKT" 2>/dev/null || echo "- -"
	else
		find "$BACKDIR" -type f -printf '%s\n' 2>/dev/null |
			awk '{ n++; s += $1 } END { printf "%d %.0f\n", n, s }'
	fi
}

# churn_sampler FILE PHASEFILE STATUS DIR: every CHURN_SAMPLE_S s append
# "t phase store_objects store_bytes live_bytes written_bytes" to FILE (t in
# seconds since the sampler started; phase from PHASEFILE: churn, empty; live
# and written bytes from churn.py's STATUS line while it runs, then the sizes
# of the files under DIR).  Runs until killed.
churn_sampler() {
	local f=$1 pf=$2 st=$3 d=$4 t0=$SECONDS ph live wr line
	while :; do
		ph=$(cat "$pf" 2>/dev/null)
		line=$(cat "$st" 2>/dev/null)
		wr=$(printf '%s' "$line" | sed -n 's/.*written_bytes=\([0-9]*\).*/\1/p')
		if [ "$ph" = churn ]; then
			live=$(printf '%s' "$line" | sed -n 's/.*live_bytes=\([0-9]*\).*/\1/p')
		else
			live=$(python3 "$BENCH_DIR/churn.py" live "$d" 2>/dev/null)
		fi
		printf '%s\t%s\t%s\t%s\t%s\n' "$(awk -v a="$CHURN_T0" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')" \
			"$ph" "$(store_sum | tr ' ' '\t')" "${live:-0}" "${wr:-0}" >>"$f"
		sleep "$CHURN_SAMPLE_S"
	done
}

# wl_churn: space under churn (issue 16), memwalfs targets only.  The mount
# is remounted with --gc-grace CHURN_GRACE --gc-interval CHURN_GC_MS (shorter
# than the defaults, 600 s and 60 s, so that a run of minutes shows several
# grace periods), then tools/bench/churn.py creates, overwrites, patches and
# deletes files of mixed sizes for CHURN_S s at CHURN_MBPS MB/s under a live
# set of at most CHURN_LIVE_MB MiB (churn-run); then everything is removed
# (churn-empty) and the store is sampled until it holds at most CHURN_ZERO_KB
# KiB or CHURN_DRAIN_S s passed.  The samples (every CHURN_SAMPLE_S s: store
# objects and bytes, live bytes, bytes written so far) go to
# OUT/churn.TARGET.rRUN.tsv for report.py's chart and table; results:
# written_bytes, ops, churn_s, drain_s (seconds from the end of the rm until
# the store was near zero; "timeout" recorded as failed), zero_B (store bytes
# at the end).
wl_churn() {
	local d="$MNT/b$RUN/churn" f="$OUT/churn.$TGT$SFX.r$RUN.tsv" pf="$WORK/churn.phase"
	local st="$WORK/churn.status" spid t0 got seed=$((1600 + RUN))
	case "$TGT" in memwalfs-*) ;; *) return 0 ;; esac
	target_umount "$TGT"
	MW_OPTS="--gc-grace $CHURN_GRACE --gc-interval $CHURN_GC_MS" target_mount "$TGT" || return 1
	mkdir -p "$d"
	: >"$f"
	echo churn >"$pf"
	rm -f "$st"
	CHURN_T0=$(now)
	churn_sampler "$f" "$pf" "$st" "$d" &
	spid=$!
	result "$TGT" churn-run grace_s "$CHURN_GRACE" s
	result "$TGT" churn-run gc_interval_s "$((CHURN_GC_MS / 1000))" s
	result "$TGT" churn-run live_limit_B "$((CHURN_LIVE_MB * 1048576))" B
	STEP_TIMEOUT=$((${CHURN_S%.*} + 600)) step churn-run python3 "$BENCH_DIR/churn.py" run "$d" \
		"$CHURN_S" "$CHURN_LIVE_MB" "$CHURN_MBPS" "$seed" "$st"
	kv_churn churn-run
	step_end
	echo empty >"$pf"
	step churn-empty bash -c 'rm -rf "$1" && "$2" sync "$3"' _ "$d" "$MEMWALFS" "$MNT"
	step_end
	t0=$(now)
	got=
	while :; do
		read -r _ got < <(store_sum)
		[ "${got:-x}" != - ] && [ "${got:-0}" -le $((CHURN_ZERO_KB * 1024)) ] && break
		if awk -v e="$(elapsed "$t0")" -v l="$CHURN_DRAIN_S" 'BEGIN { exit !(e > l) }'; then
			result "$TGT" churn-drain failed 1 timeout
			say "    store still holds $got B after ${CHURN_DRAIN_S}s"
			break
		fi
		sleep 2
	done
	result "$TGT" churn-drain drain_s "$(elapsed "$t0")" s
	result "$TGT" churn-drain zero_B "${got:-0}" B
	say "    store at $got B $(elapsed "$t0") s after the rm"
	sleep "$CHURN_SAMPLE_S"
	kill "$spid" 2>/dev/null
	wait "$spid" 2>/dev/null
	# the daemon's log (GC passes, flushes, compactions) for reading the chart
	grep -E 'gc:|compact:|flush' "$WORK/$TGT/fs.log" >"$LOGS/$TGT$SFX.churn.r$RUN.fs.log" 2>/dev/null
	target_remount "$TGT"
}

# kv_churn WORKLOAD: record churn.py's summary line of the last step.
kv_churn() {
	local f
	for f in $(grep -m1 '^seed=' "$STEP_OUT" || true); do
		case "${f%%=*}" in
		seed|ops|creates|overwrites|patches|deletes|errors) result "$TGT" "$1" "${f%%=*}" "${f#*=}" count ;;
		written_bytes|live_bytes) result "$TGT" "$1" "${f%%=*}" "${f#*=}" B ;;
		seconds) result "$TGT" "$1" churn_s "${f#*=}" s ;;
		MBps) result "$TGT" "$1" MBps "${f#*=}" MB/s ;;
		esac
	done
}

# --------------------------------------------------- regions (issue 39)

# reg_store K: the store of mount K: REG_STORE, or REG_STORE-K when the
# round's mounts have a store each (REG_INDEP=1).
reg_store() {
	if [ "$REG_INDEP" = 1 ]; then echo "$REG_STORE-$1"; else echo "$REG_STORE"; fi
}

# reg_mount K: mount the store reg_store K at REG_DIR/mK as machine K: a run
# directory, machine id and host name of its own (a UTS namespace, as
# tests/fs/machines.sh does), so that N daemons on this machine stand for N
# machines; only the store is shared.  Appends the daemon to REG_PIDS.
reg_mount() {
	local k=$1 m="$REG_DIR/m$1" opts=() launched
	mkdir -p "$m" "$REG_DIR/run$k" && chmod 700 "$REG_DIR/run$k"
	if [ -n "$BKT" ]; then
		opts=(--endpoint "$TGT_EP" --region "$S3_REGION" --cache-dir "$REG_DIR/dc$k")
	fi
	MEMWALFS_RUNDIR="$REG_DIR/run$k" MEMWALFS_MACHINE_ID="bench-machine-$k" MW_HOST="bench-machine-$k" \
		unshare --uts sh -c 'hostname "$MW_HOST" && exec "$0" "$@"' "$MEMWALFS" mount -f \
		"${opts[@]}" $MW_OPTS "$(reg_store "$k")" "$m" </dev/null >>"$REG_DIR/m$k.log" 2>&1 &
	launched=$!
	if ! wait_mounted "$m" "$launched"; then
		say "  regions: mount $k failed; last lines of $REG_DIR/m$k.log:"
		tail -n 3 "$REG_DIR/m$k.log" | sed 's/^/    /' >&2
		kill "$launched" 2>/dev/null
		return 1
	fi
	REG_PIDS[$k]=$(fs_pid "$m" "$launched")
}

# reg_umount K: unmount mount K and wait (up to 60 s) for its daemon's final commit.
reg_umount() {
	local m="$REG_DIR/m$1" pid=${REG_PIDS[$1]:-} i
	if mountpoint -q "$m"; then
		for i in 1 2 3 4 5; do fusermount3 -u "$m" 2>/dev/null && break; sleep 1; done
		mountpoint -q "$m" && fusermount3 -uz "$m" 2>/dev/null
	fi
	if [ -n "$pid" ]; then
		for ((i = 0; i < 600; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
		kill "$pid" 2>/dev/null
	fi
	unset "REG_PIDS[$1]"
}

# reg_server_pids: the pids of the S3 server's daemons (every process whose
# command line names RGW_CONF: radosgw, ceph-osd, ceph-mon), for their CPU.
reg_server_pids() {
	[ -n "$BKT" ] && [ -r "${RGW_CONF:-}" ] && pgrep -f -- "$RGW_CONF" || true
}

# reg_cpu PIDS...: "memwalfs radosgw ceph-osd ceph-mon" CPU seconds so far of
# the daemons REG_PIDS and of PIDS (grouped by command name), then the
# machine's busy CPU seconds (all cores, /proc/stat: every mode but idle and
# iowait).
reg_cpu() {
	local mw=0 p c
	declare -A by=([radosgw]=0 [ceph-osd]=0 [ceph-mon]=0)
	for p in "${REG_PIDS[@]}"; do mw=$(awk -v a="$mw" -v b="$(proc_cpu "$p")" 'BEGIN { print a + b }'); done
	for p in "$@"; do
		c=$(cat "/proc/$p/comm" 2>/dev/null) || continue
		[ -n "${by[$c]+x}" ] || continue
		by[$c]=$(awk -v a="${by[$c]}" -v b="$(proc_cpu "$p")" 'BEGIN { print a + b }')
	done
	printf '%s %s %s %s %s\n' "$mw" "${by[radosgw]}" "${by[ceph-osd]}" "${by[ceph-mon]}" \
		"$(awk -v t="$(getconf CLK_TCK)" '/^cpu / { printf "%.2f", ($2 + $3 + $4 + $7 + $8 + $9) / t }' /proc/stat)"
}

# reg_phase_begin / reg_phase_end W: the frame of one timed phase of N mounts
# working at once: wall time (REG_WALL), the CPU seconds of the memwalfs
# daemons, RGW, the OSD and the whole machine over the phase (cpu_mw_s,
# cpu_rgw_s, cpu_osd_s, cpu_mon_s, cpu_all_s: busy seconds of all cores; the machine has
# $(nproc)), the server's requests for the bucket (RGW's log), the 1-minute
# load at the start.
reg_phase_begin() {
	REG_LOAD=$(cut -d' ' -f1 /proc/loadavg)
	REG_MARK=$(rgw_mark)
	REG_SRV=$(reg_server_pids)
	REG_CPU0=$(reg_cpu $REG_SRV)
	REG_T0=$(now)
}
reg_phase_end() {
	local w=$1 cpu1 c
	REG_WALL=$(elapsed "$REG_T0")
	cpu1=$(reg_cpu $REG_SRV)
	result "$TGT" "$w" wall_s "$REG_WALL" s
	result "$TGT" "$w" load1 "$REG_LOAD" load
	result "$TGT" "$w" cores "$(nproc)" cores
	set -- $REG_CPU0 $cpu1
	for c in mw rgw osd mon all; do
		result "$TGT" "$w" "cpu_${c}_s" "$(awk -v a="$1" -v b="$6" 'BEGIN { printf "%.2f", b - a }')" s
		shift
	done
	if [ -n "$BKT" ]; then
		sleep 1.5 # RGW writes its log asynchronously (rgw_flush_counts)
		read -r -a c < <(rgw_count "$BKT" "$REG_MARK" "$(rgw_mark)")
		result "$TGT" "$w" req_PUT "${c[0]}" requests
		result "$TGT" "$w" req_GET "${c[1]}" requests
		result "$TGT" "$w" req_LIST "${c[2]}" requests
		result "$TGT" "$w" req_HEAD "${c[3]}" requests
		result "$TGT" "$w" req_DELETE "${c[4]}" requests
		result "$TGT" "$w" get_B "${c[6]}" B
	fi
}

# reg_sync_all: `memwalfs sync` of every mount at once (what was not fsynced
# becomes durable); 0 when all succeeded.
reg_sync_all() {
	local k pids=() rc=0
	for k in "${!REG_PIDS[@]}"; do
		timeout 120 "$MEMWALFS" sync "$REG_DIR/m$k" >/dev/null 2>&1 &
		pids+=($!)
	done
	for k in "${pids[@]}"; do wait "$k" || rc=1; done
	return $rc
}

# reg_wait_all PIDS...: wait for the workload processes PIDS; 0 when all succeeded.
reg_wait_all() {
	local p rc=0
	for p in "$@"; do wait "$p" || rc=1; done
	return $rc
}

# wl_regions: issue 39's benchmark rows, memwalfs targets only (not in the
# default set).  For N in REG_NS (1 2 4), on a fresh store of its own
# (s3://BUCKET/regN, or a directory for memwalfs-local):
#   setup: one mount makes the regions /d1../dN (`memwalfs region create`) and
#     lets them go (`region release`), is unmounted; then N mounts, each a
#     "machine" of its own (reg_mount), mount K takes region dK at its first
#     write (an fsync'd file; the take is not timed), and every mount is
#     waited for until it shows every other mount's first file (each follows
#     the others' regions: lazy discovery).  The target's own mount is not used.
#   regions-raw-4k-cN, regions-raw-4096k-cN (S3 targets): the raw server's PUT
#     and GET rate with N connections (s3raw.sh), 4 KiB objects (REG_RAW_4K
#     of them) and 4 MiB objects (REG_RAW_BIG; memwalfs' sequential writes
#     went to the store in PUTs of ~4 MiB in the runs of 2026-12-04: 512 MiB
#     in 127 PUTs), right before the mounts' phases.
#   regions-dcreate-nN: each mount runs durable_creates with 32 writers (the
#     dcreate-32 row's program and DC_S / DC_MAX) in its region, all at once;
#     then `memwalfs sync` of every mount.  files_s = all files / the slowest
#     mount's seconds; files_s_durable = all files / the phase's wall time
#     with the sync.
#   regions-seq-nN: each mount writes one SEQ_MB MiB file in its region at once
#     (fio rw=write bs=256k fsync_on_close, the mp-write row's job without its
#     time cap); MBps = all bytes / the phase's wall time until the last
#     mount's `memwalfs sync` returned.
#   regions-lag-nN (N >= 2): then, while every mount runs durable_creates
#     (REG_LAG_WRITERS writers, 32; 0: nothing but the markers) for REG_LAG_S
#     s, tools/bench/regionlag.py has every mount
#     write an fsync'd marker into its region every REG_LAG_MS ms and every
#     other mount poll for it (stat every REG_POLL_MS ms): lag = first seen at
#     the other mount - the writer's fsync returned; p50/p99 over every pair,
#     and per pair.  A phase of its own, so that the two above carry no
#     markers and pollers (as in the control round).
#   Control (REG_CONTROL=1, N >= 2): the same setup and the two timed phases
#     with every mount on a store of its own (s3://BUCKET/regions-indepN-K,
#     region /dK in each): workloads regions-indep-dcreate-nN,
#     regions-indep-seq-nN.  What this machine and server give N filesystems
#     that share nothing; one store / N stores near 1 means the regions'
#     sharing costs nothing of its own.
# Each phase also records the CPU seconds of the daemons, RGW, the OSD and the
# machine (reg_phase_end), so that the report can say which one ran out.
wl_regions() {
	local n
	case "$TGT" in memwalfs-*) ;; *) return 0 ;; esac
	target_umount "$TGT"
	for n in $REG_NS; do
		REG_INDEP=0 regions_round "$n" || say "  $TGT: regions with $n mounts ended early"
		[ "$n" -ge 2 ] && [ "$REG_CONTROL" = 1 ] &&
			{ REG_INDEP=1 regions_round "$n" || say "  $TGT: $n stores ended early"; }
	done
	return 0
}

# regions_round N: one round of wl_regions with N mounts: on one store
# (REG_INDEP=0: workloads regions-*-nN), or the control, on a store each
# (REG_INDEP=1: regions-indep-*-nN).
regions_round() {
	local n=$1 k j rc=0 pids=() margs=() lagpid= f spec size count w p=regions
	[ "$REG_INDEP" = 1 ] && p=regions-indep
	REG_DIR="$WORK/$TGT/$p$n"
	REG_PIDS=()
	rm -rf "$REG_DIR"
	mkdir -p "$REG_DIR"
	if [ -n "$BKT" ]; then REG_STORE="s3://$BKT/$p$n"; else REG_STORE="$REG_DIR/store"; fi
	say "  $TGT: $p, $n mount(s) on $REG_STORE$([ "$REG_INDEP" = 1 ] && echo "-1..$n")"
	# Shared: mount 1 makes /d1../dN and lets them go; a store each: mount K
	# makes its /dK.  Mounted again, the maker is like the others: without the
	# kernel's writeback cache, which a mount made before the store had regions
	# keeps (docs/REGIONS.md).
	for ((k = 1; k <= n; k++)); do
		[ "$REG_INDEP" = 1 ] || [ "$k" = 1 ] && { reg_mount "$k" || return 1; }
		j=1
		[ "$REG_INDEP" = 1 ] && j=$k
		"$MEMWALFS" region create "$REG_DIR/m$j/d$k" >>"$REG_DIR/setup.log" 2>&1 &&
			"$MEMWALFS" region release "$REG_DIR/m$j/d$k" >>"$REG_DIR/setup.log" 2>&1 ||
			{ say "    region create/release of /d$k failed; see $REG_DIR/setup.log"; rc=1; }
		[ "$REG_INDEP" = 1 ] || [ "$k" = "$n" ] && reg_umount "$j"
	done
	[ "$rc" = 0 ] || return 1
	for ((k = 1; k <= n; k++)); do reg_mount "$k" || { regions_end "$n"; return 1; }; done
	for ((k = 1; k <= n; k++)); do
		mkdir -p "$REG_DIR/m$k/d$k/w" && python3 -c 'import os,sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"ok"); os.fsync(fd); os.close(fd)' "$REG_DIR/m$k/d$k/w/first" ||
			{ say "    mount $k could not take region d$k"; rc=1; }
	done
	for ((k = 1; k <= n; k++)); do
		for ((j = 1; j <= n; j++)); do
			[ "$REG_INDEP" = 1 ] && [ "$j" != "$k" ] && continue
			for ((f = 0; f < 600; f++)); do [ -e "$REG_DIR/m$k/d$j/w/first" ] && break; sleep 0.1; done
			[ -e "$REG_DIR/m$k/d$j/w/first" ] || { say "    mount $k does not show d$j's file after 60 s"; rc=1; }
		done
	done
	[ "$rc" = 0 ] || { regions_end "$n"; return 1; }
	for ((k = 1; k <= n; k++)); do
		timeout 60 "$MEMWALFS" region list "$REG_DIR/m$k" >"$LOGS/$TGT$SFX.$p-n$n.m$k.list.r$RUN.out" 2>&1
	done
	if [ -n "$BKT" ] && [ "$REG_INDEP" = 0 ]; then
		for spec in "4096:$REG_RAW_4K" "4194304:$REG_RAW_BIG"; do
			IFS=: read -r size count <<<"$spec"
			w="regions-raw-$((size / 1024))k-c$n"
			say "  $TGT: $w"
			STEP_OUT="$LOGS/$TGT$SFX.$w.r$RUN.out"
			S3_ENDPOINT="$TGT_EP" timeout -k 10 "$STEP_TIMEOUT" "$BENCH_DIR/s3raw.sh" "$BKT" \
				"$size" "$count" "$n" >"$STEP_OUT" 2>&1 || result "$TGT" "$w" failed 1 rc
			raw_kv "$w"
			result "$TGT" "$w" load1 "$(cut -d' ' -f1 /proc/loadavg)" load
		done
	fi
	reg_dcreate "$n" "$p-dcreate-n$n" "$DC_S" "$DC_MAX"

	w="$p-seq-n$n"
	say "  $TGT: $w"
	reg_phase_begin
	pids=()
	for ((k = 1; k <= n; k++)); do
		mkdir -p "$REG_DIR/m$k/d$k/seq"
		timeout -k 10 "$STEP_TIMEOUT" fio $FIO_COMMON --output="$LOGS/$TGT$SFX.$w.m$k.r$RUN.json" \
			--name=seq --directory="$REG_DIR/m$k/d$k/seq" --rw=write --bs=256k --size="${SEQ_MB}M" \
			--create_on_open=1 --fsync_on_close=1 >"$LOGS/$TGT$SFX.$w.m$k.r$RUN.out" 2>&1 &
		pids+=($!)
	done
	reg_wait_all "${pids[@]}" || { result "$TGT" "$w" failed 1 rc; say "    a fio failed"; }
	reg_sync_all || say "    memwalfs sync failed"
	reg_phase_end "$w"
	result "$TGT" "$w" wbytes $((n * SEQ_MB * 1048576)) B
	result "$TGT" "$w" MBps "$(awk -v b=$((n * SEQ_MB * 1048576)) -v t="$REG_WALL" 'BEGIN { printf "%.2f", b / t / 1e6 }')" MB/s
	say "    $((n * SEQ_MB)) MiB in ${REG_WALL}s"

	# The follower lag in a phase of its own, so that the phases above run as
	# in the control round (without markers and pollers).
	if [ "$n" -ge 2 ] && [ "$REG_INDEP" = 0 ]; then
		w="regions-lag-n$n"
		f="$LOGS/$TGT$SFX.$w.r$RUN.out"
		rm -f "$REG_DIR/lag.stop"
		margs=()
		for ((k = 1; k <= n; k++)); do margs+=("$REG_DIR/m$k:d$k"); done
		python3 "$BENCH_DIR/regionlag.py" "$REG_DIR/lag.tsv" "$REG_LAG_MS" "$REG_POLL_MS" \
			"$REG_DIR/lag.stop" 30 "${margs[@]}" >"$f" 2>&1 &
		lagpid=$!
		if [ "$REG_LAG_WRITERS" -gt 0 ]; then
			reg_dcreate "$n" "$w" "$REG_LAG_S" 100000000 "$REG_LAG_WRITERS"
		else
			say "  $TGT: $w (markers only)"
			sleep "$REG_LAG_S"
		fi
		: >"$REG_DIR/lag.stop"
		wait "$lagpid" || result "$TGT" "$w" failed 1 rc
		cp "$REG_DIR/lag.tsv" "$LOGS/$TGT$SFX.$w.r$RUN.tsv" 2>/dev/null
		for spec in $(grep -m1 '^samples=' "$f"); do
			result "$TGT" "$w" "lag_${spec%%=*}" "${spec#*=}" "-"
		done
		grep '^pair=' "$f" | while read -r spec rest; do
			for kv in $rest; do
				case "$kv" in p50_ms=*|p99_ms=*|samples=*) result "$TGT" "$w" "${spec#pair=}:${kv%%=*}" "${kv#*=}" "-" ;; esac
			done
		done
		say "    follower lag: $(grep -m1 '^samples=' "$f")"
	fi
	regions_end "$n"
	return 0
}

# reg_dcreate N W SECONDS MAX [WRITERS]: phase W: durable_creates with WRITERS
# (32) writers in every mount's region at once (SECONDS, MAX files per mount), then `memwalfs
# sync` of all; records reg_phase_end's figures and reg_dc_sum's; the files
# are removed afterwards (not timed).
reg_dcreate() {
	local n=$1 w=$2 k pids=()
	say "  $TGT: $w"
	reg_phase_begin
	for ((k = 1; k <= n; k++)); do
		mkdir -p "$REG_DIR/m$k/d$k/dc"
		timeout -k 10 "$STEP_TIMEOUT" "$BIN/durable_creates" "$REG_DIR/m$k/d$k/dc" "${5:-32}" "$3" "$4" \
			>"$LOGS/$TGT$SFX.$w.m$k.r$RUN.out" 2>&1 &
		pids+=($!)
	done
	reg_wait_all "${pids[@]}" || { result "$TGT" "$w" failed 1 rc; say "    a durable_creates failed"; }
	reg_sync_all || say "    memwalfs sync failed"
	reg_phase_end "$w"
	reg_dc_sum "$n" "$LOGS/$TGT$SFX.$w".m*.r"$RUN".out |
		while read -r k f u; do result "$TGT" "$w" "$k" "$f" "$u"; done
	say "    $(grep -h '^files=' "$LOGS/$TGT$SFX.$w".m*.r"$RUN".out | awk '{ print $1, $3 }' | tr '\n' ' ')in ${REG_WALL}s"
	pids=()
	for ((k = 1; k <= n; k++)); do rm -rf "$REG_DIR/m$k/d$k/dc" & pids+=($!); done
	reg_wait_all "${pids[@]}"
	reg_sync_all >/dev/null
}

# reg_dc_sum N FILES...: the aggregate of N durable_creates lines (one per
# FILE) as "metric value unit" lines: files, files_s (all files / the slowest
# mount's seconds), files_s_durable (all files / REG_WALL, the phase with its
# sync), the slowest and fastest mount's files/s, the median of the mounts'
# p50 and the worst p99.  Nothing when a line is missing.
reg_dc_sum() {
	local n=$1
	shift
	grep -h '^files=' "$@" | tr ' ' '\n' | awk -v n="$n" -v wall="$REG_WALL" '
		{ split($0, kv, "=") }
		kv[1] == "files" { m++; files += kv[2] }
		kv[1] == "seconds" && kv[2] > s { s = kv[2] }
		kv[1] == "files_per_s" { r = kv[2] + 0; if (m == 1 || r < lo) lo = r; if (r > hi) hi = r }
		kv[1] == "p50_ms" { p50[m] = kv[2] + 0 }
		kv[1] == "p99_ms" && kv[2] + 0 > p99 { p99 = kv[2] + 0 }
		END {
			if (m != n || s == 0) exit 1
			for (i = 1; i <= m; i++) for (j = i + 1; j <= m; j++)
				if (p50[j] < p50[i]) { t = p50[i]; p50[i] = p50[j]; p50[j] = t }
			printf "files %d files\nfiles_s %.1f files/s\nfiles_s_durable %.1f files/s\n", files, files / s, files / wall
			printf "mount_min_files_s %s files/s\nmount_max_files_s %s files/s\n", lo, hi
			printf "p50_ms %s ms\np99_ms %s ms\n", p50[int((m + 1) / 2)], p99 }'
}

# regions_end N: unmount the N mounts of the round; the store stays in the
# bucket (deleted with it) or is removed (memwalfs-local).
regions_end() {
	local k
	local pids=()
	for ((k = 1; k <= $1; k++)); do reg_umount "$k" & pids+=($!); done
	reg_wait_all "${pids[@]}"
	REG_PIDS=()
	[ -z "$BKT" ] && rm -rf "${REG_DIR:?}"/store*
	return 0
}
