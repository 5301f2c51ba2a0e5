#!/bin/sh
# titan-train(1)'s table of torchtitan's job schema, made from the tables in
# code (lib/job/schema.c, keys.c) by titan-train --print-keys, so the page
# and the code cannot disagree.
#
#   scripts/man-keys.sh          rewrite the table in man/titan-train.1
#                                (between its "keys:" markers)
#   scripts/man-keys.sh --check  exit 1 when the page's table is not the
#                                one the code gives
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bin=${TITAN_BIN:-$top/bin}
page=$top/man/titan-train.1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
begin='.\" keys: begin (scripts/man-keys.sh writes this table)'
end='.\" keys: end'
TITAN_NO_REEXEC=1 "$bin/titan-train" --print-keys > "$tmp/keys.txt"
# roff: \ and - escaped; each key a .TP entry; the older keys after a paragraph
awk -F '\t' '
    function esc(s) { gsub(/\\/, "\\e", s); gsub(/-/, "\\-", s); return s }
    /^# older/ { print ".PP"; print "Older torchtitan keys titan still reads:"; next }
    { print ".TP"; print ".B " esc($1); print esc($2) "." }' "$tmp/keys.txt" > "$tmp/table"
grep -qxF "$begin" "$page" && grep -qxF "$end" "$page" || { echo "$page: no key table markers" >&2; exit 1; }
# (the markers go through the environment: awk -v would read their backslash)
B=$begin E=$end T=$tmp/table awk '
    $0 == ENVIRON["B"] { print; while ((getline l < ENVIRON["T"]) > 0) print l; skip = 1; next }
    $0 == ENVIRON["E"] { skip = 0 }
    !skip' "$page" > "$tmp/page"
if [ "${1:-}" = --check ]; then
    if ! cmp -s "$tmp/page" "$page"; then
        diff "$page" "$tmp/page" | head -20 >&2
        echo "$page: the key table differs from titan-train --print-keys (run scripts/man-keys.sh)" >&2
        exit 1
    fi
    exit 0
fi
cp "$tmp/page" "$page"
