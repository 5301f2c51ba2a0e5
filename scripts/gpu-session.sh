#!/bin/sh
# gpu-session.sh - what one lent GPU call should run, by named parts, each
# with its own time cap, inside SESSION_S seconds (540: a device run with
# timeout_s 600 keeps a minute for copying results back):
#   check    scripts/gpu-check.sh: build, every op against the CPU backend,
#            loss curves on cpu and cuda, resume bit for bit, bf16, cuDNN
#            attention, memcheck for MEMCHECK_S (60) seconds; at most
#            CHECK_S (300) seconds, each run STEP_TIMEOUT_S (120);
#   layouts  scripts/gpu-layouts.sh: FSDP 2, HSDP 2x2, tp 2, pp 2 (1F1B and
#            Interleaved1F1B), cp 2 on
#            the machine's GPUs (shared round-robin where fewer than the
#            ranks) against one GPU's curve, fp32 and bf16, and resume
#            across layouts; at most LAYOUTS_S (240); needs a build (check
#            makes it, else this part runs make first);
#   bench    scripts/bench_gpu.sh: titan beside PyTorch eager and
#            torch.compile (BENCH_SHAPES, 1B here; its runs at most
#            BENCH_RUN_TIMEOUT, 100), with the time left; skipped when less
#            than BENCH_MIN_S (90) is left. Its "Optimizer overlap" table
#            sets titan's AdamW beside the next forward against in order
#            (titan-serial) in the same call: step time, AdamW's time and its
#            exposed part, MFU.
# Usage: scripts/gpu-session.sh [PART...]
#   no PART: the parts tests/gpu/records.tsv has no line for at the current
#   code (then all of them, in the order above); --code prints the current
#   code's id (a hash of the sources, scripts and tests the parts run:
#   tests/gpu's records and notes are not in it); --todo prints the parts
#   it would run.
# Results in $OUT (the device runner fetches at most 8 files): PART.txt (its
# summary) and PART.tar.gz (its logs and files) for each part run, and
# records.tsv: one line per part run, to append to tests/gpu/records.tsv
# with the notes in tests/gpu/ (the date and the GPU are in it). The last
# lines printed are each part's summary.
#
# From a machine where apt works, once: scripts/gpu-deps.sh fetch (the C
# libraries the device image lacks, into .gpu-deps/), then the device run
#     command: scripts/gpu-session.sh    carry: [".gpu-deps"]    timeout_s: 600
# Exit status: 0 when every part run passed, 1 when one failed, 2 on usage.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
ALL_PARTS="check layouts bench"
RECORDS=${GPU_RECORDS:-tests/gpu/records.tsv} # (another file: the suite's checks)

code_id() {
    find cmd lib kernels configs scripts tests/unit tests/cli tests/gpu tests/emu Makefile -type f \
        ! -name '*.md' ! -name records.tsv 2>/dev/null | LC_ALL=C sort | xargs sha256sum | sha256sum | cut -c1-16
}
# the parts with no line in the records at this code
todo() {
    c=$(code_id)
    for p in $ALL_PARTS; do
        awk -F'\t' -v p="$p" -v c="$c" '$1 == p && $2 == c { f = 1 } END { exit !f }' "$RECORDS" 2>/dev/null || printf '%s ' "$p"
    done
}
case ${1:-} in
--code) code_id; exit 0 ;;
--todo) echo "$(todo)"; exit 0 ;;
-*) echo "gpu-session: error: $1: unknown option (--code, --todo, or parts: $ALL_PARTS)" >&2; exit 2 ;;
esac
for p in "$@"; do
    case " $ALL_PARTS " in *" $p "*) ;; *) echo "gpu-session: error: '$p': no such part ($ALL_PARTS)" >&2; exit 2 ;; esac
done
if [ $# -gt 0 ]; then parts="$*"; else parts=$(todo); fi
if [ -z "$parts" ]; then
    echo "gpu-session: every part is recorded at code $(code_id) in $RECORDS: name the parts to run them again" >&2
    exit 0
fi

t0=$(date +%s)
SESSION_S=${SESSION_S:-540}
CHECK_S=${CHECK_S:-300}
LAYOUTS_S=${LAYOUTS_S:-240}
BENCH_MIN_S=${BENCH_MIN_S:-90}
for v in "SESSION_S=$SESSION_S" "CHECK_S=$CHECK_S" "LAYOUTS_S=$LAYOUTS_S" "BENCH_MIN_S=$BENCH_MIN_S"; do
    case ${v#*=} in ''|*[!0-9]*) echo "gpu-session: error: $v: expected seconds" >&2; exit 2 ;; esac
done
code=$(code_id)
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
gpu=${gpu:-${GPU_DEVICE:-no GPU}}
echo "gpu-session: parts: $parts; code $code; $gpu"

# The carried C libraries (when here) for every part: bench_gpu once failed
# to find them after gpu-check (2026-11-26), which unpacks them in its own
# environment only.
if [ -d .gpu-deps ]; then
    set -- use # dash's "." passes no arguments: the sourced script sees ours
    # shellcheck disable=SC1091
    . scripts/gpu-deps.sh use || echo "gpu-session: .gpu-deps would not unpack; the parts try again"
fi

res=$top/build/gpu-session
rm -rf "$res" && mkdir -p "$res" || exit 1
FINAL_OUT=${OUT:-}
worst=0
left() { echo $((SESSION_S - ($(date +%s) - t0))); }
# cap S: S, or the session's time left when less
cap() { l=$(left); if [ "$l" -lt "$1" ]; then echo "$l"; else echo "$1"; fi; }
# collect PART RC SUMMARY_FILE: the part's summary and files for $OUT, its record line
collect() {
    p=$1; rc=$2
    [ -f "$3" ] && cp "$3" "$res/$p.txt" || echo "no summary (exit $rc)" >"$res/$p.txt"
    [ -d "$res/out-$p" ] && tar -czf "$res/$p.tar.gz" -C "$res" "out-$p"
    if [ "$rc" -eq 0 ]; then r=pass; else r="fail (exit $rc): $(grep -c '^FAIL' "$res/$p.txt") checks"; worst=1; fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$p" "$code" "$(date -u +%Y-%m-%d)" "$gpu" "$r" >>"$res/records.tsv"
}
built=0
for p in $parts; do
    case $p in
    check)
        s=$(cap "$CHECK_S")
        # gpu-check keeps to its budget itself; the outer timeout is for a hang it
        # cannot see (the build). It traps TERM and still writes what it has,
        # once its child is gone: hence -k 60.
        OUT=$res/out-check MEMCHECK_S=${MEMCHECK_S:-60} STEP_TIMEOUT_S=${STEP_TIMEOUT_S:-120} CHECK_BUDGET_S=$s \
            timeout -k 60 $((s + 60)) scripts/gpu-check.sh
        rc=$?
        [ $rc -ne 124 ] || echo "gpu-session: gpu-check stopped from outside after $((s + 60)) s"
        built=1
        collect check $rc build/gpu-check/summary.txt ;;
    layouts)
        if [ $built = 0 ] && [ "${GPU_CHECK_BUILD:-1}" != 0 ]; then
            make -j"${JOBS:-16}" >"$res/make.log" 2>&1 || echo "gpu-session: make failed (build/gpu-session/make.log)"
            built=1
        fi
        s=$(cap "$LAYOUTS_S")
        OUT=$res/out-layouts STEP_TIMEOUT_S=${STEP_TIMEOUT_S:-120} CHECK_BUDGET_S=$s \
            timeout -k 30 $((s + 30)) scripts/gpu-layouts.sh
        collect layouts $? build/gpu-layouts/layouts.txt ;;
    bench)
        l=$(left)
        if [ "$l" -lt "$BENCH_MIN_S" ]; then
            echo "gpu-session: bench skipped: $l s left, BENCH_MIN_S=$BENCH_MIN_S"
            continue
        fi
        # bench_gpu's budget counts from its own start; 15 s for its table and archive
        OUT=$res/out-bench BENCH_BUDGET=$((l - 15)) BENCH_RUN_TIMEOUT=${BENCH_RUN_TIMEOUT:-100} \
            BENCH_SHAPES=${BENCH_SHAPES:-1B} timeout -k 10 "$l" scripts/bench_gpu.sh
        collect bench $? build/bench_gpu/bench_gpu.md ;;
    esac
done

echo
echo "gpu-session: $(( $(date +%s) - t0 )) s of SESSION_S=$SESSION_S"
for p in $parts; do [ ! -f "$res/$p.txt" ] || { echo "--- $p"; cat "$res/$p.txt"; }; done
echo "--- records (append to $RECORDS)"
cat "$res/records.tsv" 2>/dev/null
if [ -n "$FINAL_OUT" ]; then
    mkdir -p "$FINAL_OUT"
    for f in "$res"/*.txt "$res"/*.tar.gz "$res/records.tsv"; do [ ! -f "$f" ] || cp "$f" "$FINAL_OUT/"; done
fi
exit $worst
