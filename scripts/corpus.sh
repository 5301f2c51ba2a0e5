#!/bin/sh
# The demo corpus: the Linux man-pages project's English manual (Debian 12's
# manpages and manpages-dev 6.03-2, GPL-2+), 1,100 pages of technical prose
# rendered to plain text, one file a page, in .deps/man-pages-6.03/.
#
# Both packages are fetched with apt-get download at their pinned version and
# checked against their sha256 before anything is unpacked. Each page is
# rendered by groff (man macros, UTF-8, no bold or underline, lines of up to
# 2000 characters so a paragraph is one line), its 7-space indent and the
# header and footer lines taken off; .so redirections (one page naming
# another) are skipped. The folder holds the pages only (titan-shard reads
# every file in it); the license is .deps/man-pages-6.03.copyright. Safe to
# run again: nothing is redone once .deps/man-pages-6.03.done exists.
set -eu
# one locale for groff and every sed, whatever the caller's: the same bytes
export LC_ALL=C.UTF-8
top=$(cd "$(dirname "$0")/.." && pwd)
deps=$top/.deps
out=$deps/man-pages-6.03
[ -f "$out.done" ] && [ -d "$out" ] && exit 0
mkdir -p "$deps"

# name version sha256 of the .deb
pkgs="manpages 6.03-2 efa1ba4cd19ad7baeae959c9209a7eb74be2ebb858bcabb412597bfc9f588c91
manpages-dev 6.03-2 96f55cb5e26231d5567c89b692bced63825a14a2d5bd18fdf16ea2ed44eb9838"

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
echo "$pkgs" | while read -r name ver sum; do
    deb=$deps/${name}_${ver}_all.deb
    if [ ! -s "$deb" ]; then
        # apt-get download writes into the current directory, as _apt where it can
        # a machine whose package lists are missing or stale gets them once
        (cd "$tmp" && apt-get download -q "$name=$ver" >/dev/null 2>"$tmp/apt.err") ||
            { SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo -n"; $SUDO apt-get update -qq >&2 &&
              (cd "$tmp" && apt-get download -q "$name=$ver" >/dev/null 2>"$tmp/apt.err"); } || {
            echo "corpus: apt-get download $name=$ver failed: $(tail -n 1 "$tmp/apt.err")" >&2
            echo "corpus: (run 'apt-get update' first; the demo corpus is Debian 12's $name $ver)" >&2
            exit 1; }
        mv "$tmp/${name}_${ver}_all.deb" "$deb"
    fi
    echo "$sum  $deb" | sha256sum -c --quiet - >&2 || {
        echo "corpus: $deb does not match its pinned sha256 $sum" >&2; rm -f "$deb"; exit 1; }
    dpkg-deb -x "$deb" "$tmp/root"
done

command -v groff >/dev/null 2>&1 || { echo "corpus: groff missing (apt-get install groff-base)" >&2; exit 1; }
rm -rf "$out.tmp" && mkdir -p "$out.tmp"
# Pages in byte order of their paths, so the corpus is the same everywhere;
# two groff processes at a time.
(cd "$tmp/root/usr/share/man" && find . -type f -name '*.gz' | LC_ALL=C sort) >"$tmp/pages"
render() { # man/manN/page.N.gz, worker number, into $out.tmp/manN/page.N.txt
    src=$tmp/root/usr/share/man/$1
    dst=$out.tmp/${1%.gz}.txt
    page=$tmp/page.$2
    zcat "$src" >"$page" || return 1
    grep -q '^\.so ' "$page" && [ "$(grep -vc '^\.\\"' "$page")" -le 1 ] && return 0
    mkdir -p "$(dirname "$dst")"
    # -rLL: a long line; -rHY=0: no hyphenation; -P-cbou: plain characters.
    # sed: the indent off, trailing blanks off, runs of blanks inside a line
    # (a table's columns spread over the long line) cut to two, a table's
    # rules dropped; cat -s: one blank line at most; the first and last lines
    # (title and footer) dropped.
    LC_ALL=C.UTF-8 groff -man -Tutf8 -P-cbou -rLL=2000n -rHY=0 -t "$page" 2>/dev/null |
        sed -e 's/^       //' -e 's/[[:space:]]*$//' -e 's/\([^ ]\)   *\([^ ]\)/\1  \2/g' |
        LC_ALL=C.UTF-8 sed -e '/^[─┌┐└┘├┤┬┴┼│ ]*$/d' | cat -s | sed -e '1d' -e '$d' >"$dst"
}
n=$(wc -l <"$tmp/pages")
echo "corpus: rendering $n man pages into $out" >&2
# Two lists, one per core.
awk 'NR % 2 == 1' "$tmp/pages" >"$tmp/pages.1"
awk 'NR % 2 == 0' "$tmp/pages" >"$tmp/pages.2"
pids=""
for part in 1 2; do
    (while read -r p; do render "$p" $part || { echo "corpus: rendering $p failed" >&2; touch "$tmp/failed"; exit 1; }
     done <"$tmp/pages.$part") &
    pids="$pids $!"
done
# each worker's own status: one killed by a signal leaves no $tmp/failed
for p in $pids; do wait "$p" || touch "$tmp/failed"; done
[ ! -e "$tmp/failed" ] || exit 1
find "$out.tmp" -name '*.txt' -size 0 -delete
# The text itself, pages in byte order: Debian 12's groff 1.22.4 renders
# these bytes. Another groff renders slightly other text: said, not refused.
text_sha=0d071c9c5f1e11fd8361611296bea7d6c6d4af2af5b0ee7a373aad7614d51230
got=$(cd "$out.tmp" && find . -type f | LC_ALL=C sort | xargs cat | sha256sum | cut -d' ' -f1)
[ "$got" = "$text_sha" ] || echo "corpus: warning: the rendered text's sha256 is $got, not $text_sha" \
    "(groff $(groff --version | head -n 1 | awk '{print $NF}') rather than Debian 12's 1.22.4?):" \
    "README's demo numbers were measured on the latter" >&2
rm -rf "$out" && mv "$out.tmp" "$out"
cp "$tmp/root/usr/share/doc/manpages/copyright" "$out.copyright"
echo "man-pages 6.03 (Debian 12 manpages, manpages-dev 6.03-2)" >"$out.done"
echo "corpus: $(find "$out" -name '*.txt' | wc -l) pages, $(du -sb "$out" | cut -f1) bytes in $out" >&2
