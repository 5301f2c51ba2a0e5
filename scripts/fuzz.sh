#!/bin/sh
# Runs each libFuzzer target for SECONDS (make fuzz builds them):
#     scripts/fuzz.sh SECONDS build/fuzz/fuzz_NAME...
# Each target starts from its seed corpus tests/fuzz/corpus/NAME plus what
# earlier runs found (build/fuzz/corpus/NAME, where new inputs go), with the
# dictionary tests/fuzz/json.dict. A crash, leak or UBSan report stops the
# run; the input is saved as build/fuzz/crashes/NAME-crash-*: fix the bug and
# copy the input into tests/fuzz/corpus/NAME so `make check` replays it.
set -u
secs=${1:?usage: scripts/fuzz.sh SECONDS TARGET...}
shift
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
for bin in "$@"; do
    name=$(basename "$bin"); name=${name#fuzz_}
    mkdir -p "build/fuzz/corpus/$name" build/fuzz/crashes
    echo "fuzz $name: $secs s"
    "$bin" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -dict=tests/fuzz/json.dict -artifact_prefix="build/fuzz/crashes/$name-" \
        "build/fuzz/corpus/$name" "tests/fuzz/corpus/$name" 2>&1 | grep -v '^#[0-9]*.*\(NEW\|REDUCE\|pulse\)' || true
    # libFuzzer exits non-zero on a finding; the pipe hides it, the artifact does not.
    if ls "build/fuzz/crashes/$name-"* >/dev/null 2>&1; then
        echo "fuzz $name: findings in build/fuzz/crashes/:"; ls "build/fuzz/crashes/$name-"*
        exit 1
    fi
done
