#!/bin/sh
# Runs each libFuzzer target for SECONDS, one after another (make fuzz
# builds them):
#     scripts/fuzz.sh SECONDS build/fuzz/fuzz_NAME...
# Each target starts from its seed corpus tests/fuzz/corpus/NAME plus what
# earlier runs found (build/fuzz/corpus/NAME, where new inputs go), with the
# dictionary tests/fuzz/NAME.dict when there is one, else tests/fuzz/json.dict,
# and the extra libFuzzer flags of tests/fuzz/NAME.options when there is one
# (a smaller -max_len for targets whose inputs are slow to read). A crash,
# leak, UBSan report or timeout stops the run; the input is saved as
# build/fuzz/crashes/NAME-crash-*: fix the bug and copy the input into
# tests/fuzz/corpus/NAME so `make check` replays it. The targets' own
# stderr (titan's warnings, a target's note on why it aborted) is closed
# while fuzzing; build/tests/test_fuzz_NAME FILE replays one input with it.
set -u
secs=${1:?usage: scripts/fuzz.sh SECONDS TARGET...}
shift
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
for bin in "$@"; do
    name=$(basename "$bin"); name=${name#fuzz_}
    mkdir -p "build/fuzz/corpus/$name" build/fuzz/crashes
    dict=tests/fuzz/json.dict
    [ -f "tests/fuzz/$name.dict" ] && dict=tests/fuzz/$name.dict
    opts=
    [ -f "tests/fuzz/$name.options" ] && opts=$(cat "tests/fuzz/$name.options")
    echo "fuzz $name: $secs s"
    # shellcheck disable=SC2086 # opts are separate flags
    "$bin" -max_total_time="$secs" -max_len=65536 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -close_fd_mask=2 -dict="$dict" -artifact_prefix="build/fuzz/crashes/$name-" $opts \
        "build/fuzz/corpus/$name" "tests/fuzz/corpus/$name" 2>&1 | grep -v '^#[0-9]*.*\(NEW\|REDUCE\|pulse\)' || true
    # libFuzzer exits non-zero on a finding; the pipe hides it, the artifact does not.
    if ls "build/fuzz/crashes/$name-"* >/dev/null 2>&1; then
        echo "fuzz $name: findings in build/fuzz/crashes/:"; ls "build/fuzz/crashes/$name-"*
        exit 1
    fi
done
