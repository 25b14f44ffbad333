#!/usr/bin/env bash
# tools/check-format.sh [--fix] - every tracked C file is formatted by .clang-format (Debian 12's
# clang-format 14: another version may format some lines differently).  Lists the files that
# are not and exits 1; --fix formats them in place.  Exit 77 (meson's SKIP) when clang-format
# is not installed (tools/setup.sh test installs it).  Run by the unit suite (test "format").
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
command -v clang-format >/dev/null || { echo "SKIP: clang-format is not installed"; exit 77; }
if [ ! -d .git ] && [ ! -f .git ]; then echo "SKIP: not a git checkout"; exit 77; fi
mapfile -t files < <(git ls-files '*.c' '*.h')
if [ "${1:-}" = --fix ]; then
	clang-format -i "${files[@]}"
	exit 0
fi
bad=()
for f in "${files[@]}"; do
	clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
	echo "not formatted (tools/check-format.sh --fix, or clang-format -i FILE):"
	printf '   %s\n' "${bad[@]}"
	exit 1
fi
echo "format: ${#files[@]} files formatted"
