# tests/fs/machines.sh - sourced after lib.sh by tests where daemons stand for mounts on other
# machines (holders.sh, regions.sh, regions_ro.sh): only the store is shared.
#
# on MACHINE CMD...: run CMD as on machine MACHINE: a run directory of its own, a machine id of
# its own (MEMWALFS_MACHINE_ID: a daemon of this machine whose pid is gone is dead at once; one of
# another machine only when its lease runs out), and memwalfs in a UTS namespace with the host
# name MACHINE ($MW becomes a wrapper that does that; $MW_REAL is memwalfs itself)
MW_REAL=$MW
MW=$WORK/mw-on
cat >"$MW" <<'SH'
#!/bin/sh
[ -n "${MW_HOST:-}" ] || exec "$MW_REAL" "$@"
exec unshare --uts sh -c 'hostname "$MW_HOST" && exec "$0" "$@"' "$MW_REAL" "$@"
SH
chmod +x "$MW"
export MW_REAL
on() {
	local m=$1
	shift
	mkdir -p "$WORK/run-$m" && chmod 700 "$WORK/run-$m"
	MEMWALFS_RUNDIR=$WORK/run-$m MW_HOST=machine-$m MEMWALFS_MACHINE_ID=machine-$m "$@"
}
# put PATH CONTENT: write PATH and fsync it (python: the status of fsync itself)
put() {
	python3 -c 'import os,sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, sys.argv[2].encode()); os.fsync(fd); os.close(fd)' "$1" "$2"
}
# expect_err ERRTEXT WHAT CMD...: CMD must fail with ERRTEXT in its message
expect_err() {
	local want=$1 what=$2 err
	shift 2
	if err=$("$@" 2>&1); then echo "FAIL: $what succeeded"; exit 1; fi
	case $err in
	*"$want"*) ;;
	*) echo "$err"; echo "FAIL: $what: not \"$want\""; exit 1 ;;
	esac
}
# wait_file PATH CONTENT [SEC]: up to SEC (30) s for PATH to show CONTENT
wait_file() {
	local n=$((${3:-30} * 10))
	for _ in $(seq $n); do [ "$(cat "$1" 2>/dev/null)" = "$2" ] && return 0; sleep 0.1; done
	echo "FAIL: $1 did not show \"$2\" within ${3:-30} s"; exit 1
}
# put_within SEC PATH CONTENT: put, tried every 0.1 s for up to SEC s (a change refused with
# EROFS until a take succeeds); 1 if it never succeeded
put_within() {
	for _ in $(seq $(($1 * 10))); do
		put "$2" "$3" 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}
