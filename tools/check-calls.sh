#!/usr/bin/env bash
# tools/check-calls.sh [-v] - no two C files call each other.  For every tracked .c file of
# fs/, engine/, s3/, tools/ and util/ it lists the functions the file defines (not static;
# a header's static inline functions count as its .c file's, wbuf.h's as wbuf.c's), then
# which other files name them (a call or a function pointer, comments stripped), and fails
# on a two-file cycle: A uses B and B uses A.  Such a pair is one module in two files, or
# two modules with no direction (docs/DESIGN.md, "Modules"); give it one.
#
# tools/check-calls.allow lists pairs known and temporary ("a.c b.c  # why"): they are
# reported, not failed; a listed pair that is no cycle any more is reported to be removed.
# -v: every edge too.  Run by the unit suite (test "calls").
set -uo pipefail
export LC_ALL=C # sort, comm and join must agree on the order
cd "$(dirname "$0")/.." || exit 2
command -v gcc >/dev/null || { echo "SKIP: gcc is not installed"; exit 77; }
if [ ! -d .git ] && [ ! -f .git ]; then echo "SKIP: not a git checkout"; exit 77; fi
verbose=${1:-}
tmp=$(mktemp -d) || exit 2
trap 'rm -rf "$tmp"' EXIT
mapfile -t files < <(git ls-files 'fs/*.[ch]' 'engine/*.[ch]' 's3/*.[ch]' 'tools/*.[ch]' \
	'util/*.[ch]')

# Comments out (gcc's preprocessor alone, no include expanded), then the definitions: a line
# at column 0 that names a function, whose signature ends in "{" rather than ";".  all=1:
# static ones too (a file's own names are never another file's); hdr=1: a header, whose
# static inline functions count.
strip() { gcc -fpreprocessed -dD -E -P -x c "$1" 2>/dev/null; }
defs() {
	strip "$1" | awk -v all="$2" -v hdr="$3" '
		/^(typedef|extern|#)/ { next }
		cand == "" && /^[A-Za-z_][A-Za-z0-9_ \t\*]*[ \t\*]([A-Za-z_][A-Za-z0-9_]*)\(/ {
			if (!all && /^static/ && !(hdr && /^static inline/)) next
			s = $0; sub(/\(.*/, "", s); n = split(s, w, /[ \t\*]+/); cand = w[n]
		}
		cand != "" && /;[ \t]*$/ { cand = ""; next }
		cand != "" && /\{[ \t]*$|^\{/ { if (cand != "main") print cand; cand = "" }
	'
}
: >"$tmp/defs"
for f in "${files[@]}"; do
	case $f in
	*.h) owner=${f%.h}.c; [ -f "$owner" ] && defs "$f" 0 1 | sed "s|\$| $owner|" ;;
	*) defs "$f" 0 0 | sed "s|\$| $f|" ;;
	esac >>"$tmp/defs"
done
sort -u "$tmp/defs" >"$tmp/defs.s"

# Edges: file -> the file that defines a name it uses.
for f in "${files[@]}"; do
	case $f in *.c) ;; *) continue ;; esac
	defs "$f" 1 0 | sort -u >"$tmp/own"
	# identifiers, but not struct members (after -> or .): an ops table's field is no call
	strip "$f" | grep -oE '(->|\.)?[A-Za-z_][A-Za-z0-9_]*' | grep -vE '^(->|\.)' | sort -u |
		comm -23 - "$tmp/own" >"$tmp/ids"
	join "$tmp/ids" "$tmp/defs.s" | awk -v f="$f" '$2 != f { print f, $2, $1 }'
done | sort -u >"$tmp/uses"
awk '{ print $1, $2 }' "$tmp/uses" | sort -u >"$tmp/edges"
[ "$verbose" = -v ] && cat "$tmp/uses"

# Two-file cycles, each pair once (a < b), with the names each side uses.
awk '{ e[$1 " " $2] = 1 } END { for (k in e) { split(k, p, " ");
	if (p[1] < p[2] && ((p[2] " " p[1]) in e)) print p[1], p[2] } }' "$tmp/edges" |
	sort >"$tmp/cycles"
allow=tools/check-calls.allow
grep -vE '^[[:space:]]*(#|$)' "$allow" 2>/dev/null | awk '{ a = $1; b = $2;
	if (b < a) { t = a; a = b; b = t } print a, b }' | sort -u >"$tmp/allowed"
names() { awk -v a="$1" -v b="$2" '$1 == a && $2 == b { printf " %s", $3 }' "$tmp/uses"; }
bad=0
while read -r a b; do
	if grep -qxF "$a $b" "$tmp/allowed"; then
		echo "known (tools/check-calls.allow): $a <-> $b"
	else
		echo "cycle: $a <-> $b"
		bad=1
	fi
	echo "   $a uses$(names "$a" "$b")"
	echo "   $b uses$(names "$b" "$a")"
done <"$tmp/cycles"
while read -r a b; do
	grep -qxF "$a $b" "$tmp/cycles" ||
		echo "note: $a <-> $b is no cycle any more: remove it from $allow"
done <"$tmp/allowed"
[ $bad = 0 ] || { echo "two files call each other: give the pair one direction"; exit 1; }
echo "calls: $(wc -l <"$tmp/edges") file dependencies among ${#files[@]} files, no new cycle"
