#!/usr/bin/env bash
# tests/fs/programs.sh MEMWALFS BACKEND - ordinary programs on a mount: cp -r + diff -r, cat,
# ls -lR, mv, rm -r, ln, ln -s, chmod, chown, touch -d, truncate, tar, rsync -a, git, fio
# --verify; then memwalfs fsck (live and unmounted) and persistence: unmount, mount at a second
# mount point, compare.
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh" "$1" "${2:-local}"
mnt=$WORK/mnt
src=/usr/include/linux
[ "$BACKEND" = local ] && src=${FS_TEST_TREE:-/usr/include}
mw_mount "$mnt"
step() { echo "-- $*"; }

step "cp -r $src, diff -r, ls -lR"
cp -r "$src" "$mnt/tree"
diff -r --no-dereference "$src" "$mnt/tree"
[ "$(ls -lR "$mnt/tree" | wc -l)" = "$(ls -lR "$src" | wc -l)" ]
cat "$mnt/tree/$(cd "$src" && find . -type f -name '*.h' | head -1)" >/dev/null

step "mv, ln, ln -s, chmod, chown, touch -d, truncate"
mkdir "$mnt/ops"
echo content > "$mnt/ops/a"
mv "$mnt/ops/a" "$mnt/ops/b"
[ ! -e "$mnt/ops/a" ] && [ "$(cat "$mnt/ops/b")" = content ]
ln "$mnt/ops/b" "$mnt/ops/hard"
[ "$(stat -c %h "$mnt/ops/b")" = 2 ]
ln -s b "$mnt/ops/soft"
[ "$(readlink "$mnt/ops/soft")" = b ] && [ "$(cat "$mnt/ops/soft")" = content ]
chmod 640 "$mnt/ops/b" && [ "$(stat -c %a "$mnt/ops/b")" = 640 ]
chown 123:456 "$mnt/ops/b" && [ "$(stat -c %u:%g "$mnt/ops/b")" = 123:456 ]
touch -d '2001-02-03 04:05:06 UTC' "$mnt/ops/b"
[ "$(stat -c %Y "$mnt/ops/b")" = "$(date -d '2001-02-03 04:05:06 UTC' +%s)" ]
truncate -s 3 "$mnt/ops/b" && [ "$(cat "$mnt/ops/b")" = con ]
truncate -s 10M "$mnt/ops/b" && [ "$(stat -c %s "$mnt/ops/b")" = 10485760 ]
mv "$mnt/tree" "$mnt/ops/moved-tree"
diff -r --no-dereference "$src" "$mnt/ops/moved-tree"

step "tar c/x"
tar -C "$mnt/ops" -cf "$WORK/t.tar" moved-tree
mkdir "$mnt/untar" && tar -C "$mnt/untar" -xf "$WORK/t.tar"
diff -r --no-dereference "$src" "$mnt/untar/moved-tree"
tar -C "$mnt/ops" -cf "$mnt/t2.tar" moved-tree && cmp "$WORK/t.tar" "$mnt/t2.tar"

step "rm -r"
rm -r "$mnt/untar" "$mnt/t2.tar"
[ ! -e "$mnt/untar" ]

if command -v rsync >/dev/null; then
	step "rsync -a"
	rsync -a "$src/" "$mnt/rsynced/"
	rsync -a "$src/" "$mnt/rsynced/" # a second pass finds nothing to do
	diff -r --no-dereference "$src" "$mnt/rsynced"
fi

if command -v git >/dev/null; then
	step "git init/add/commit/log/clone"
	(cd "$mnt" && mkdir repo && cd repo && git init -q &&
		git config user.email t@example.com && git config user.name t &&
		cp -r "$here" ./files && git add -A && git commit -qm first &&
		echo more >> files/lib.sh && git commit -qam second &&
		[ "$(git log --oneline | wc -l)" = 2 ] && git fsck --no-progress 2>&1 | (! grep -i error))
	git clone -q "$mnt/repo" "$mnt/clone"
	diff -r "$mnt/repo/files" "$mnt/clone/files"
fi

if command -v fio >/dev/null; then
	step "fio with verify"
	fio --name=v --directory="$mnt" --size=32M --bs=64k --rw=randwrite --ioengine=psync \
		--verify=crc32c --do_verify=1 --verify_state_save=0 --fallocate=none --output="$WORK/fio.out" ||
		{ cat "$WORK/fio.out"; exit 1; }
	fio --name=s --directory="$mnt" --size=16M --bs=4k --rw=write --ioengine=psync \
		--verify=md5 --verify_state_save=0 --fallocate=none --output="$WORK/fio2.out" ||
		{ cat "$WORK/fio2.out"; exit 1; }
	rm -f "$mnt"/v.* "$mnt"/s.*
fi

step "persistence: unmount, mount at a second mount point, compare"
(cd "$mnt" && find . -printf '%p %y %m %U %G %s %T@\n' | sort) > "$WORK/before"
(cd "$mnt" && find . -type f -exec md5sum {} + | sort) > "$WORK/sums-before"
step "memwalfs fsck: live (read-only beside the daemon), then unmounted with --deep"
mw_fsck
mw_umount "$mnt"
mw_fsck --deep
mnt2=$WORK/mnt2
mw_mount "$mnt2"
(cd "$mnt2" && find . -printf '%p %y %m %U %G %s %T@\n' | sort) > "$WORK/after"
(cd "$mnt2" && find . -type f -exec md5sum {} + | sort) > "$WORK/sums-after"
diff "$WORK/before" "$WORK/after"
diff "$WORK/sums-before" "$WORK/sums-after"
diff -r --no-dereference "$src" "$mnt2/ops/moved-tree"
mw_umount "$mnt2"
echo "programs ($BACKEND): ok"
