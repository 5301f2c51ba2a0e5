#!/bin/sh
# CLI test of the manual against the tools: each page has EXAMPLES, each
# tool's --help options are in its page, and titan-checkpoint(5)'s
# metadata.json example has the keys of a real checkpoint
# (scripts/checkpoint-example.sh --check). TAP output.
set -u
. "$(dirname "$0")/lib/tap.sh"
for p in "$top"/man/*.[157]; do
    grep -q '^\.SH EXAMPLES' "$p" && ok "$(basename "$p") has EXAMPLES" || fail "$(basename "$p") has EXAMPLES"
done
for t in titan-shard titan-init titan-train titan-reshard titan-ckpt titan-trace; do
    missing=""
    for o in $("$bin/$t" --help 2>&1 | grep -o -- '--[a-z][a-z0-9_.-]*[a-z0-9]' | sort -u); do
        grep -q -- "$(printf '%s' "$o" | sed 's/-/\\\\-/g')" "$top/man/$t.1" || missing="$missing $o"
    done
    [ -z "$missing" ] && ok "$t(1) names every option of --help" || fail "$t(1) names every option of --help (lacks$missing)"
done
if "$top/scripts/checkpoint-example.sh" --check > "$tmp/err" 2>&1; then
    ok "titan-checkpoint(5)'s example has a real checkpoint's keys"
else
    fail "titan-checkpoint(5)'s example has a real checkpoint's keys"
fi
tap_end
