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
#            exposed part, MFU;
#   float8   float8 training's speed (issue 27): tests/gpu/fp8_speed_check.cu
#            (each cast in GB/s beside a copy, the float8 product beside
#            bf16's, the tiled casts against the element-wise ones), then
#            bench_gpu.sh's titan bf16, titan float8 tensorwise and rowwise,
#            torch.compile bf16 and torchao's float8 under compile
#            (FLOAT8_IMPLS; torchao from a carried wheel) on the deepest 8B
#            that fits (BENCH_8B_LAYERS=auto) and the 1B (FLOAT8_SHAPES) at
#            seq_len 8192 (FLOAT8_SEQS), with the time left; skipped when
#            less than BENCH_MIN_S is left.
# Usage: scripts/gpu-session.sh [PART...]
#   no PART: the parts tests/gpu/records.tsv has no line for at the current
#   code (then all of them, in the order above); --code prints the current
#   code's id (a hash of the sources, scripts and tests the parts run:
#   tests/gpu's records and notes are not in it); --todo prints the parts
#   it would run.
# Results in $OUT (the device runner fetches at most 8 files): PART.txt (its
# summary) for each part run, logs.tar.gz (every part's logs and files,
# out-PART/), and records.tsv: one line per part run, to append to
# tests/gpu/records.tsv with the notes in tests/gpu/ (the date and the GPU
# are in it). The last lines printed are each part's summary.
#
# From a machine where apt works, once: scripts/gpu-deps.sh fetch (the C
# libraries the device image lacks, into .gpu-deps/), then the device run
#     command: scripts/gpu-session.sh    carry: [".gpu-deps"]    timeout_s: 600
# Exit status: 0 when every part run passed, 1 when one failed, 2 on usage.
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
ALL_PARTS="check layouts bench float8"
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
# collect PART RC SUMMARY_FILE: the part's summary for $OUT, its record line
collect() {
    p=$1; rc=$2
    [ -f "$3" ] && cp "$3" "$res/$p.txt" || echo "no summary (exit $rc)" >"$res/$p.txt"
    if [ "$rc" -eq 0 ]; then r=pass; else r="fail (exit $rc): $(grep -c '^FAIL' "$res/$p.txt") checks"; worst=1; fi
    printf '%s\t%s\t%s\t%s\t%s\n' "$p" "$code" "$(date -u +%Y-%m-%d)" "$gpu" "$r" >>"$res/records.tsv"
}
built=0 checked=0
# build PART: make, unless an earlier part built (check does) or GPU_CHECK_BUILD=0
build() {
    if [ $built = 0 ] && [ "${GPU_CHECK_BUILD:-1}" != 0 ]; then
        make -j"${JOBS:-16}" >"$res/make.log" 2>&1 || echo "gpu-session: make failed (build/gpu-session/make.log)"
        built=1
    fi
}
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
        built=1 checked=1
        collect check $rc build/gpu-check/summary.txt ;;
    layouts)
        build
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
    float8)
        l=$(left)
        if [ "$l" -lt "$BENCH_MIN_S" ]; then
            echo "gpu-session: float8 skipped: $l s left, BENCH_MIN_S=$BENCH_MIN_S"
            continue
        fi
        build
        o=$res/out-float8
        mkdir -p "$o"
        sum=$res/float8-summary.txt
        : >"$sum"
        rc=0
        # the casts and the float8 products apart, beside the rows: the check
        # part's run of it when that part ran in this session (once a call)
        if [ "$checked" = 1 ] && [ -s build/gpu-check/fp8_speed_check.log ]; then
            cp build/gpu-check/fp8_speed_check.log "$o/"
            if [ "$(tail -n 1 "$o/fp8_speed_check.log")" = "all ok" ]; then st=PASS; else st=FAIL rc=1; fi
            echo "$st  tests/gpu/fp8_speed_check.cu (the check part's run): $(tail -n 1 "$o/fp8_speed_check.log")" >>"$sum"
            grep -E '^(encode|cudaMemcpy|cast|gemm_fp8|bf16|float8)' "$o/fp8_speed_check.log" | sed 's/^/      /' >>"$sum"
        elif [ "${GPU_DEVICE:-cuda}" = cuda ]; then
            if "${NVCC:-/usr/local/cuda/bin/nvcc}" -std=c++17 -O3 -arch=native -Ilib -Ikernels \
                    tests/gpu/fp8_speed_check.cu kernels/fp8.cu kernels/fp8_matmul.cu kernels/matmul.cu \
                    kernels/elementwise.cu -lcublasLt -o build/fp8_speed_check >"$o/fp8_speed_check.log" 2>&1 &&
                timeout -k 10 120 build/fp8_speed_check >>"$o/fp8_speed_check.log" 2>&1; then
                echo "PASS  tests/gpu/fp8_speed_check.cu: $(tail -n 1 "$o/fp8_speed_check.log")" >>"$sum"
            else
                echo "FAIL  tests/gpu/fp8_speed_check.cu: $(tail -n 1 "$o/fp8_speed_check.log")" >>"$sum"
                rc=1
            fi
            grep -E '^(encode|cudaMemcpy|cast|gemm_fp8|bf16|float8)' "$o/fp8_speed_check.log" | sed 's/^/      /' >>"$sum"
        else
            echo "SKIP  tests/gpu/fp8_speed_check.cu: GPU_DEVICE=$GPU_DEVICE" >>"$sum"
        fi
        l=$(left)
        OUT=$o BENCH_BUDGET=$((l - 15)) BENCH_RUN_TIMEOUT=${BENCH_RUN_TIMEOUT:-100} \
            BENCH_SHAPES=${FLOAT8_SHAPES:-8B 1B} BENCH_SEQS=${FLOAT8_SEQS:-8192} \
            BENCH_8B_LAYERS=${BENCH_8B_LAYERS:-auto} \
            BENCH_IMPLS=${FLOAT8_IMPLS:-titan titan-fp8 titan-fp8r compile compile-fp8} \
            timeout -k 10 "$l" scripts/bench_gpu.sh
        brc=$?
        [ $brc -eq 0 ] || rc=$brc
        echo >>"$sum"
        cat build/bench_gpu/bench_gpu.md >>"$sum" 2>/dev/null || echo "no bench table (exit $brc)" >>"$sum"
        collect float8 $rc "$sum" ;;
    esac
done
[ -z "$(find "$res" -maxdepth 1 -name 'out-*' -print -quit)" ] ||
    (cd "$res" && tar -czf logs.tar.gz out-*)

echo
echo "gpu-session: $(( $(date +%s) - t0 )) s of SESSION_S=$SESSION_S"
for p in $parts; do [ ! -f "$res/$p.txt" ] || { echo "--- $p"; cat "$res/$p.txt"; }; done
echo "--- records (append to $RECORDS)"
cat "$res/records.tsv" 2>/dev/null
if [ -n "$FINAL_OUT" ]; then
    mkdir -p "$FINAL_OUT"
    for p in $parts; do [ ! -f "$res/$p.txt" ] || cp "$res/$p.txt" "$FINAL_OUT/"; done
    for f in "$res/logs.tar.gz" "$res/records.tsv"; do [ ! -f "$f" ] || cp "$f" "$FINAL_OUT/"; done
fi
exit $worst
