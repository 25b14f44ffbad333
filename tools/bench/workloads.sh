# workloads.sh - the benchmark workloads (sourced by run.sh).
#
# Every workload runs on the mounted target TGT (MNT, FSPID, BKT set by
# target_mount) through step/step_end, which record in results.tsv:
#   wall_s       wall time of the command (the timed part)
#   cpu_s        CPU seconds of the filesystem process during the step
#   peak_mib     peak RSS of the filesystem process during the step (VmHWM
#                after clear_refs)
#   settle_s     s3fs and rclone only: seconds after the command returned until
#                a listing of the bucket showed all the data (they acknowledge
#                writes before uploading)
#   req_*        requests the server received for the target's bucket, from
#                RGW's access log (PUT GET LIST HEAD DELETE POST)
#   mw_*         memwalfs only: change of the counters of "memwalfs stats"
#   stored_mib   bytes held by the target afterwards (bucket or backing dir)
# plus the workload's own figures (MBps, iops, latency percentiles, files_s).
#
# Sizes come from run.sh (SEQ_MB, RAND_S, FSYNC_S, TREE_N, DC_S, DC_MAX,
# LIST_N, LIST_N_S3, STEP_TIMEOUT, SETTLE_TIMEOUT); the source trees from
# prepare_sources.

# -------------------------------------------------------------- step frame

# stats_snap: counters of "memwalfs stats MNT" as "name value" lines (memwalfs
# targets only; accepts "name value", "name: value", "name=value" and flat JSON).
stats_snap() {
	case "$TGT" in memwalfs-*) ;; *) return 0 ;; esac
	timeout 20 "$MEMWALFS" stats "$MNT" 2>/dev/null |
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
	STEP_OUT="$OUT/logs/$TGT.$STEP_W.r$RUN.out"
	STEP_MARK=$(rgw_mark)
	STEP_CPU0=$(proc_cpu "${FSPID:-0}")
	[ -n "$FSPID" ] && proc_hwm_reset "$FSPID"
	stats_snap >"$STEP_OUT.st0"
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
# then record cpu_s, peak_mib, req_*, mw_*, stored_mib.
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
	if [ -n "$FSPID" ]; then
		result "$TGT" "$STEP_W" cpu_s "$(awk -v a="$STEP_CPU0" -v b="$(proc_cpu "$FSPID")" \
			'BEGIN { printf "%.2f", b - a }')" s
		result "$TGT" "$STEP_W" peak_mib "$(proc_hwm "$FSPID")" MiB
	fi
	if [ -n "$BKT" ]; then
		local c i=0
		read -r -a c < <(rgw_count "$BKT" "$STEP_MARK")
		for s in PUT GET LIST HEAD DELETE POST; do
			result "$TGT" "$STEP_W" "req_$s" "${c[$i]}" requests
			i=$((i + 1))
		done
	fi
	case "$TGT" in memwalfs-*)
		stats_snap >"$STEP_OUT.st1"
		awk 'NR == FNR { a[$1] = $2; next }
			tolower($1) ~ /put|get|list|del|head|req|byte|commit|fsync/ {
				printf "%s %s\n", $1, $2 - a[$1] }' \
			"$STEP_OUT.st0" "$STEP_OUT.st1" |
			while read -r s c; do result "$TGT" "$STEP_W" "mw_$s" "$c" count; done
		;;
	esac
	result "$TGT" "$STEP_W" stored_mib "$(target_stored | awk '{ printf "%.1f", $1 / 1048576 }')" MiB
}

# ------------------------------------------------------------------- fio

FIO_COMMON="--ioengine=psync --fallocate=none --direct=0 --group_reporting --output-format=json"

# fio_rec WORKLOAD DIR(read|write|sync): record MBps, iops and latency
# percentiles of STEP_OUT.json for direction DIR.
fio_rec() {
	local w=$1 d=$2 j="$STEP_OUT.json" v
	[ -s "$j" ] || return 0
	# fio may print warnings before the JSON document.
	sed -n '/^{/,$p' "$j" >"$j.clean"
	if [ "$d" = sync ]; then
		for v in 50 99; do
			result "$TGT" "$w" "fsync_p${v}_ms" "$(jq ".jobs[0].sync.lat_ns.percentile[\"$v.000000\"] // 0 | . / 1e6" "$j.clean")" ms
		done
		d=write
	fi
	result "$TGT" "$w" MBps "$(jq ".jobs[0].$d.bw_bytes / 1e6 | . * 100 | round / 100" "$j.clean")" MB/s
	result "$TGT" "$w" iops "$(jq ".jobs[0].$d.iops | round" "$j.clean")" ops/s
	for v in 50 99; do
		result "$TGT" "$w" "p${v}_ms" "$(jq ".jobs[0].$d.clat_ns.percentile[\"$v.000000\"] // 0 | . / 1e6" "$j.clean")" ms
	done
}

# wl_fio: sequential write (1 and 4 jobs), cold and warm sequential read,
# random 4 KiB read and write, 4 KiB write + fsync latency.
wl_fio() {
	local d="$MNT/b$RUN/fio" bytes=$((SEQ_MB * 1048576))
	mkdir -p "$d/s1" "$d/s4" "$d/f"
	step seqwrite-1j fio $FIO_COMMON --output="$OUT/logs/$TGT.seqwrite-1j.r$RUN.out.json" \
		--name=seq --directory="$d/s1" --rw=write --bs=1M --size="${SEQ_MB}M" \
		--numjobs=1 --end_fsync=1
	fio_rec seqwrite-1j write
	result "$TGT" seqwrite-1j MBps_wall "$(awk -v b=$bytes -v t="$STEP_WALL" 'BEGIN { printf "%.2f", b / t / 1e6 }')" MB/s
	step_end b$RUN/fio/s1/ 1 "$bytes"

	step seqwrite-4j fio $FIO_COMMON --output="$OUT/logs/$TGT.seqwrite-4j.r$RUN.out.json" \
		--name=seq --directory="$d/s4" --rw=write --bs=1M --size="$((SEQ_MB / 4))M" \
		--numjobs=4 --end_fsync=1
	fio_rec seqwrite-4j write
	result "$TGT" seqwrite-4j MBps_wall "$(awk -v b=$bytes -v t="$STEP_WALL" 'BEGIN { printf "%.2f", b / t / 1e6 }')" MB/s
	step_end b$RUN/fio/s4/ 4 "$bytes"
	rm -rf "$d/s4"

	target_remount "$TGT" || return 1
	step seqread-cold fio $FIO_COMMON --output="$OUT/logs/$TGT.seqread-cold.r$RUN.out.json" \
		--name=rd --filename="$d/s1/seq.0.0" --rw=read --bs=1M --size="${SEQ_MB}M"
	fio_rec seqread-cold read
	step_end
	step seqread-warm fio $FIO_COMMON --output="$OUT/logs/$TGT.seqread-warm.r$RUN.out.json" \
		--name=rd --filename="$d/s1/seq.0.0" --rw=read --bs=1M --size="${SEQ_MB}M"
	fio_rec seqread-warm read
	step_end

	step randread-4k fio $FIO_COMMON --output="$OUT/logs/$TGT.randread-4k.r$RUN.out.json" \
		--name=rr --filename="$d/s1/seq.0.0" --rw=randread --bs=4k --size="${SEQ_MB}M" \
		--time_based --runtime="$RAND_S" --randrepeat=0
	fio_rec randread-4k read
	step_end
	step randwrite-4k fio $FIO_COMMON --output="$OUT/logs/$TGT.randwrite-4k.r$RUN.out.json" \
		--name=rw --filename="$d/s1/seq.0.0" --rw=randwrite --bs=4k --size="${SEQ_MB}M" \
		--time_based --runtime="$RAND_S" --end_fsync=1 --randrepeat=0
	fio_rec randwrite-4k write
	step_end

	step fsync-4k fio $FIO_COMMON --output="$OUT/logs/$TGT.fsync-4k.r$RUN.out.json" \
		--name=fs --filename="$d/f/fsync.dat" --rw=write --bs=4k --size=64M --fsync=1 \
		--runtime="$FSYNC_S"
	fio_rec fsync-4k sync
	step_end
	rm -rf "$d"
}

# ----------------------------------------------------------- small files

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
	local w n d kv
	for w in 1 32; do
		d="$MNT/b$RUN/dc$w"
		mkdir -p "$d"
		step "dcreate-$w" "$BIN/durable_creates" "$d" "$w" "$DC_S" "$DC_MAX"
		kv=$(grep '^files=' "$STEP_OUT" || true)
		n=0
		for f in $kv; do
			case "$f" in
			files=*) n=${f#files=} ;;
			files_per_s=*) result "$TGT" "dcreate-$w" files_s "${f#*=}" files/s ;;
			p50_ms=*|p99_ms=*|max_ms=*) result "$TGT" "dcreate-$w" "${f%%=*}" "${f#*=}" ms ;;
			esac
		done
		step_end "b$RUN/dc$w/" "$n" "$((n * 4096))"
	done
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

# wl_raw: PUT and GET throughput of the object sizes used above, many
# connections (s3raw.sh), straight to the server.
wl_raw() {
	local spec size count conns kv f w
	for spec in $RAW_SPECS; do
		IFS=: read -r size count conns <<<"$spec"
		w="raw-$((size / 1024))k-c$conns"
		step "$w" "$BENCH_DIR/s3raw.sh" "$BKT" "$size" "$count" "$conns"
		kv=$(grep '^put_s=' "$STEP_OUT" || true)
		for f in $kv; do
			case "$f" in
			*MBps=*|*req_s=*) result "$TGT" "$w" "${f%%=*}" "${f#*=}" "-" ;;
			esac
		done
		step_end
	done
}
