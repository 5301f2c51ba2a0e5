#!/bin/sh
# tests/cli/layers.sh - the library's layers: a folder of lib/ includes
# headers of the folders below it only (README, "Layout"). LAYERS lists them
# bottom to top; a folder's own headers and system headers are always fine.
# Fails naming every include that reaches up (file:line, the header, both
# layers), and a folder of lib/ that LAYERS does not place. TAP output.
set -u
. "$(dirname "$0")/lib/tap.sh"
LAYERS="core tensor backend data job optim ckpt comm trace model parallel interchange train"

rank() { # folder -> its position in LAYERS, or nothing
    i=0
    for l in $LAYERS; do
        [ "$l" = "$1" ] && { echo $i; return; }
        i=$((i + 1))
    done
}

unplaced=""
for d in "$top"/lib/*/; do
    d=$(basename "$d")
    [ -n "$(rank "$d")" ] || unplaced="$unplaced $d"
done
[ -z "$unplaced" ] && ok "every folder of lib/ has a layer" || fail "lib/ folders not in LAYERS:$unplaced"

: >"$tmp/up"
for l in $LAYERS; do
    [ -d "$top/lib/$l" ] || continue
    mine=$(rank "$l")
    find "$top/lib/$l" -name '*.[ch]' | LC_ALL=C sort | while read -r f; do
        grep -n '^[[:space:]]*#[[:space:]]*include[[:space:]]*"[a-z_]*/' "$f" |
            sed 's/^\([0-9]*\):.*"\([a-z_]*\)\/\([^"]*\)".*/\1 \2 \3/' |
            while read -r line dir hdr; do
                theirs=$(rank "$dir")
                if [ -z "$theirs" ] || [ "$theirs" -gt "$mine" ]; then
                    echo "${f#"$top"/}:$line: includes $dir/$hdr ($dir is above $l)" >>"$tmp/up"
                fi
            done
    done
done
if [ -s "$tmp/up" ]; then
    fail "no lib/ folder includes a folder above it ($(wc -l <"$tmp/up") includes reach up)"
    sed 's/^/#   /' "$tmp/up"
else
    ok "no lib/ folder includes a folder above it (bottom to top: $LAYERS)"
fi
tap_end
