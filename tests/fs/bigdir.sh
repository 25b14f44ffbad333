#!/usr/bin/env bash
# tests/fs/bigdir.sh MEMWALFS FSCONFORM BACKEND - a directory of BIGDIR_N (default 100,000)
# entries: after a remount, "ls -f" and "ls -l" list every name exactly once with the right
# attributes.  Times are printed (docs/SCHEMA.md records them), not asserted.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${3:-local}"
FSCONFORM=$2
N=${BIGDIR_N:-100000}
mnt=$WORK/mnt
now() { date +%s.%N; }
secs() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.2f", b - a }'; }

mw_mount "$mnt"
mkdir "$mnt/big"
t=$(now)
"$FSCONFORM" --mknod "$mnt/big" "$N"
echo "created $N entries in $(secs "$t") s"
mw_umount "$mnt"
mw_mount "$mnt"
seq -f 'entry-%06g' 0 $((N - 1)) > "$WORK/want"

t=$(now)
ls -f "$mnt/big" > "$WORK/f"
echo "ls -f (cold): $(secs "$t") s"
grep -v '^\.\.\?$' "$WORK/f" | sort | cmp - "$WORK/want" || { echo "FAIL: ls -f names"; exit 1; }
[ "$(wc -l < "$WORK/f")" = $((N + 2)) ] || { echo "FAIL: ls -f count"; exit 1; }
mw_umount "$mnt"
mw_mount "$mnt"
for pass in cold warm; do
	t=$(now)
	ls -l "$mnt/big" > "$WORK/l"
	echo "ls -l ($pass): $(secs "$t") s"
	[ "$(wc -l < "$WORK/l")" = $((N + 1)) ] || { echo "FAIL: ls -l count"; exit 1; }
	tail -n +2 "$WORK/l" | awk '{ print $NF }' | cmp - "$WORK/want" || { echo "FAIL: ls -l names"; exit 1; }
	# every entry: a regular file, mode 0644 (umask permitting), one link, size 0
	bad=$(tail -n +2 "$WORK/l" | awk '$1 !~ /^-rw-/ || $2 != 1 || $5 != 0' | head -3)
	[ -z "$bad" ] || { echo "FAIL: ls -l attributes: $bad"; exit 1; }
done
[ "$(find "$mnt/big" -type f | wc -l)" = "$N" ]
mw_umount "$mnt"
echo "bigdir ($BACKEND, $N entries): ok"
