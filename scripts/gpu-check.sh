#!/bin/sh
# gpu-check.sh - the first things to run on a machine with an NVIDIA GPU
# (none of it can run without one):
#   1. make -j$JOBS (builds libtitan-cuda.so where nvcc is);
#   2. build/tests/test_cuda_ops (every op against the CPU backend) and
#      build/tests/test_comm_nccl (the nccl communicator; skipped without NCCL);
#      tests/gpu/attention_tc_check.cu and gemm_inplace_check.cu (cuBLASLt's
#      residual product in place and out of place); adamw_bw_check.cu (the
#      AdamW kernel's GB/s beside a device-to-device copy's); fp8_speed_check.cu
#      (each float8 cast's GB/s, the float8 product's TFLOP/s beside bf16's,
#      the whole float8 linear beside the bf16 one);
#   3. tests/cli/train.sh (its device lines then see a GPU);
#   4. configs/debugmodel.toml trained $STEPS steps on cpu and on cuda from
#      one seed checkpoint: the loss curves must agree to $TOL relative at
#      every step (fp32 on both sides, no TF32: the two differ only in the
#      order of sums, ~1e-6 per op, which training amplifies slowly);
#   5. on cuda: a run stopped at half way and resumed, and a run with async
#      checkpoints, must end in the uninterrupted run's checkpoint bit for
#      bit (deterministic kernels; the host staging of loads and saves);
#      and a text sample (parameters copied back to the host);
#   6. on cuda in bf16 (mixed_precision_param), as titan-train runs by
#      default (attention through cuDNN where libcudnn.so.9 opens:
#      scripts/find-cudnn.sh finds it; test_cuda_ops ran that way in step 2,
#      cuDNN's own warnings and errors in cudnn_api.log) and with
#      training.deterministic (titan's attention kernels): each loss curve
#      within $BF16_TOL of the cpu's fp32 one; the deterministic run again,
#      and with selective activation checkpointing (op), in the same bits;
#   6b. GaLore (randomized and exact refresh) on cuda against the cpu, to
#      $TOL, with the refresh steps' optimizer time printed beside the others';
#   7. with two GPUs or more: FSDP 2 (--nproc 2, a GPU per rank) over NCCL and
#      over shared memory (TITAN_COMM=shm) against FSDP 2 on the cpu, to $TOL;
#   8. last (slow): test_cuda_ops under compute-sanitizer memcheck, at most
#      $MEMCHECK_S seconds (240; 0 skips it).
# Every test program and training run has STEP_TIMEOUT_S seconds (150; the
# CLI test twice that): a hung kernel or collective fails its check and the
# script goes on, so a lent machine's minutes are not lost to it. With
# CHECK_BUDGET_S (seconds from the start, build included) no command runs
# past it: what has no time left fails as "not run". Killed from outside
# (TERM, INT), it still writes what it has to $OUT once its child is gone.
# Prints one PASS/FAIL line per check, then tokens/s and MFU of both runs.
# Logs, metrics and summary.txt land in build/gpu-check/; with $OUT set (the
# device runner fetches it, 8 files at most) also $OUT/summary.txt,
# $OUT/loss_cpu_cuda.txt and everything as $OUT/gpu-check.tar.gz.
# Exit status 0 when all passed.
#   STEPS=50 TOL=1e-4 JOBS=16 scripts/gpu-check.sh
# A GPU machine without the C libraries and without a package registry: run
# `scripts/gpu-deps.sh fetch` where apt works and bring .gpu-deps along (the
# device runner: carry [".gpu-deps"]); this script unpacks it when needed.
# GPU_DEVICE=cpu-guard runs the same plumbing without a GPU (a check of this
# script: the CUDA programs are skipped, the curves are identical);
# tests/cli/gpu_scripts.sh does so in the suite, with GPU_CHECK_BUILD=0 (the
# build is there already: no make) and INIT_ARGS (more titan-init overrides,
# there a short seq_len).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
STEPS=${STEPS:-50}
TOL=${TOL:-1e-4}
JOBS=${JOBS:-16}
DEV=${GPU_DEVICE:-cuda}
out=$top/build/gpu-check
work=$top/build/gpu-check-runs
rm -rf "$out" && mkdir -p "$out" || exit 1
rm -rf "$work" && mkdir -p "$work" || exit 1
if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -q avx512f /proc/cpuinfo 2>/dev/null; then
    export OPENBLAS_CORETYPE=SkylakeX
fi
export TITAN_NO_REEXEC=1
STEP_S=${STEP_TIMEOUT_S:-150}
BUDGET_S=${CHECK_BUDGET_S:-0}
for v in "STEP_TIMEOUT_S=$STEP_S" "CHECK_BUDGET_S=$BUDGET_S"; do
    case ${v#*=} in ''|*[!0-9]*) echo "gpu-check: error: $v: expected seconds" >&2; exit 2 ;; esac
done
bad=0
summary=$out/summary.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
pass() { say "PASS  $*"; }
failed() { say "FAIL  $*"; bad=$((bad + 1)); }
# Copies the results to $OUT (when set) and exits: 0 when nothing failed.
finish() {
    echo
    if [ $bad -eq 0 ]; then say "all passed"; else say "$bad failed"; fi
    if [ -n "${OUT:-}" ]; then
        mkdir -p "$OUT" && cp "$summary" "$OUT/"
        [ ! -f "$out/loss_cpu_cuda.txt" ] || cp "$out/loss_cpu_cuda.txt" "$OUT/"
        [ ! -f "$out/loss_cpu_bf16.txt" ] || cp "$out/loss_cpu_bf16.txt" "$OUT/"
        tar -czf "$OUT/gpu-check.tar.gz" -C "$top/build" gpu-check
    fi
    [ $bad -eq 0 ]
    exit
}
trap 'trap - TERM INT; failed "interrupted (TERM or INT) after $(( $(date +%s) - t_start )) s"; finish' TERM INT
t_start=$(date +%s)
# limit S: S seconds, or less where CHECK_BUDGET_S has less left (0: none)
limit() {
    lim=$1
    if [ "$BUDGET_S" -gt 0 ]; then
        left=$((BUDGET_S - ($(date +%s) - t_start)))
        [ "$left" -ge "$lim" ] || lim=$left
    fi
    echo "$lim"
}
# tmo_for S CMD...: CMD with S seconds (then TERM, 5 s later KILL), fewer
# when the budget has fewer; 124 when it ran out of time or had none, with
# a last line on stderr saying which (the callers' logs end with it, so
# their "last line of the log" failure messages give the reason).
# tmo CMD...: the same with STEP_S.
tmo_for() {
    s=$(limit "$1")
    shift
    [ "$s" -gt 5 ] || { echo "gpu-check: not run: CHECK_BUDGET_S=$BUDGET_S spent" >&2; return 124; }
    timeout -k 5 "$s" "$@"
    rc=$?
    [ $rc -ne 124 ] || echo "gpu-check: timed out after $s s (STEP_TIMEOUT_S=$STEP_S, CHECK_BUDGET_S=$BUDGET_S)" >&2
    return $rc
}
tmo() { tmo_for "$STEP_S" "$@"; }

# --- the machine ----------------------------------------------------------------
{ nvidia-smi 2>&1; echo; "${NVCC:-/usr/local/cuda/bin/nvcc}" --version 2>&1; echo; uname -a; nproc; } >"$out/machine.txt"
say "gpu-check $(date -u +%Y-%m-%dT%H:%M:%SZ): $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null | head -n 1)"

# --- build ----------------------------------------------------------------------
# The GPU image may lack the C libraries' headers: say so at once rather than
# after minutes of compiling.
# Carried Debian packages (scripts/gpu-deps.sh fetch, here) fill the gap.
missing_headers() {
    missing=""
    for h in zstd.h archive.h jansson.h xxhash.h pcre2.h cblas.h; do
        printf '#define PCRE2_CODE_UNIT_WIDTH 8\n#include <%s>\n' "$h" | ${CC:-cc} -E -x c \
            -I/usr/include/x86_64-linux-gnu/openblas-openmp $(pkg-config --cflags openblas 2>/dev/null) - \
            >/dev/null 2>&1 || missing="$missing $h"
    done
}
missing_headers
# any one missing, not only zstd.h (an image with zstd and without the rest
# was seen: 2026-11-26)
if [ -n "$missing" ] && [ -d .gpu-deps ]; then
    set -- use # dash's "." passes no arguments: the sourced script sees ours
    . scripts/gpu-deps.sh use && say "build dependencies: unpacked from .gpu-deps into build/gpu-deps (lacked:$missing)"
    missing_headers
fi
if [ -n "$missing" ]; then
    failed "build dependencies: no$missing (Debian/Ubuntu: libzstd-dev libarchive-dev libjansson-dev" \
        "libxxhash-dev libpcre2-dev libopenblas-openmp-dev; scripts/install-deps.sh; or carry .gpu-deps" \
        "from scripts/gpu-deps.sh fetch)"
    finish
fi
# shellcheck disable=SC2086
if [ "${GPU_CHECK_BUILD:-1}" = 0 ]; then say "SKIP  make: GPU_CHECK_BUILD=0"
elif make -j"$JOBS" ${TITAN_MAKE_VARS:-} >"$out/make.log" 2>&1; then pass "make -j$JOBS"; else failed "make -j$JOBS (see make.log)"; fi
if [ -f bin/libtitan-cuda.so ]; then
    pass "libtitan-cuda.so built"
else
    failed "no bin/libtitan-cuda.so: nvcc not found (make NVCC=/path/to/nvcc)"
    finish
fi

# --- unit tests -----------------------------------------------------------------
unit() { # name: 0 passes, 77 is a skip (a failure for test_cuda_ops: the GPU did not open)
    tmo build/tests/$1 >"$out/$1.log" 2>&1
    rc=$?
    if [ $rc -eq 0 ]; then pass "$1"
    elif [ $rc -eq 77 ] && [ "$1" != test_cuda_ops ]; then say "SKIP  $1: $(tail -n 1 "$out/$1.log")"
    else failed "$1 (exit $rc): $(tail -n 1 "$out/$1.log")"; fi
}
# The CUDA programs; a cpu-guard run (this script checked without a GPU)
# has none to run.
if [ "$DEV" = cuda ]; then
    unit test_cuda_ops
    # the same with every matmul on the fallback kernel (what runs when cuBLASLt offers no algorithm)
    if tmo env TITAN_CUDA_GEMM_FALLBACK=1 build/tests/test_cuda_ops >"$out/test_cuda_ops_fallback.log" 2>&1; then
        pass "test_cuda_ops with TITAN_CUDA_GEMM_FALLBACK=1"
    else failed "test_cuda_ops with TITAN_CUDA_GEMM_FALLBACK=1: $(tail -n 1 "$out/test_cuda_ops_fallback.log")"; fi
    # and with bf16 attention on the CUDA-core kernels instead of the tensor-core ones
    if tmo env TITAN_CUDA_ATTENTION=simple build/tests/test_cuda_ops >"$out/test_cuda_ops_simple_attention.log" 2>&1; then
        pass "test_cuda_ops with TITAN_CUDA_ATTENTION=simple"
    else failed "test_cuda_ops with TITAN_CUDA_ATTENTION=simple: $(tail -n 1 "$out/test_cuda_ops_simple_attention.log")"; fi
    # and with bf16 attention through cuDNN's fused flash attention (attention_cudnn.cu)
    . scripts/find-cudnn.sh
    say "      cuDNN: ${TITAN_CUDNN_LIB:-libcudnn.so.9 from the linker's search path}"
    # (and cuDNN ran: a call it did not apply to falls back to titan's kernels silently)
    # cuDNN's own log of warnings and errors says why an engine refuses a graph
    if tmo env TITAN_CUDA_ATTENTION=cudnn CUDNN_LOGLEVEL_DBG=2 CUDNN_LOGDEST_DBG="$out/cudnn_api.log" \
       build/tests/test_cuda_ops >"$out/test_cuda_ops_cudnn_attention.log" 2>&1 &&
       grep -q 'through cuDNN' "$out/test_cuda_ops_cudnn_attention.log"; then
        pass "test_cuda_ops with TITAN_CUDA_ATTENTION=cudnn ($(grep -o 'through cuDNN [0-9.]*' "$out/test_cuda_ops_cudnn_attention.log" | head -n 1))"
    else failed "test_cuda_ops with TITAN_CUDA_ATTENTION=cudnn: $(grep -h 'error' "$out/test_cuda_ops_cudnn_attention.log" | head -n 1)$(tail -n 1 "$out/test_cuda_ops_cudnn_attention.log")"; fi
    # the tensor-core attention alone against a double-precision reference (whole
    # sequences and context-parallel chunks: queries the last Tq of Tk positions),
    # with its timing
    if "${NVCC:-/usr/local/cuda/bin/nvcc}" -std=c++17 -O3 -arch=native -Ilib -Ikernels tests/gpu/attention_tc_check.cu \
            kernels/attention_tc.cu kernels/attention_tc_bwd.cu -o build/attention_tc_check >"$out/attention_tc_check.log" 2>&1 &&
       tmo build/attention_tc_check >>"$out/attention_tc_check.log" 2>&1; then
        pass "tests/gpu/attention_tc_check.cu: $(tail -n 1 "$out/attention_tc_check.log")"
    else failed "tests/gpu/attention_tc_check.cu: $(tail -n 1 "$out/attention_tc_check.log")"; fi
    grep '^bench' "$out/attention_tc_check.log" | while IFS= read -r l; do say "      $l"; done
    # cuBLASLt's residual product in place and out of place, per heuristic
    # preference: which algorithm, whether each repeats, how they differ
    if "${NVCC:-/usr/local/cuda/bin/nvcc}" -std=c++17 -O3 -arch=native -Ilib -Ikernels tests/gpu/gemm_inplace_check.cu \
            -lcublasLt -o build/gemm_inplace_check >"$out/gemm_inplace_check.log" 2>&1 &&
       tmo build/gemm_inplace_check >>"$out/gemm_inplace_check.log" 2>&1; then
        pass "tests/gpu/gemm_inplace_check.cu: $(tail -n 1 "$out/gemm_inplace_check.log")"
    else failed "tests/gpu/gemm_inplace_check.cu: $(tail -n 1 "$out/gemm_inplace_check.log")"; fi
    grep '^N=' "$out/gemm_inplace_check.log" | sed 's/ | rel err.*ms in place/ |/; s/algo .*oop repeats/oop repeats/' |
        while IFS= read -r l; do say "      $l"; done
    # the AdamW kernel's bandwidth beside a device-to-device copy's, same run
    if "${NVCC:-/usr/local/cuda/bin/nvcc}" -std=c++17 -O3 -arch=native -Ilib -Ikernels tests/gpu/adamw_bw_check.cu \
            kernels/adamw.cu -o build/adamw_bw_check >"$out/adamw_bw_check.log" 2>&1 &&
       tmo build/adamw_bw_check >>"$out/adamw_bw_check.log" 2>&1; then
        pass "tests/gpu/adamw_bw_check.cu: $(tail -n 1 "$out/adamw_bw_check.log")"
    else failed "tests/gpu/adamw_bw_check.cu: $(tail -n 1 "$out/adamw_bw_check.log")"; fi
    grep -E '^(cudaMemcpy|AdamW)' "$out/adamw_bw_check.log" | while IFS= read -r l; do say "      $l"; done
    if "${NVCC:-/usr/local/cuda/bin/nvcc}" -std=c++17 -O3 -arch=native -Ilib -Ikernels tests/gpu/fp8_speed_check.cu \
            kernels/fp8.cu kernels/fp8_matmul.cu kernels/matmul.cu kernels/elementwise.cu -lcublasLt \
            -o build/fp8_speed_check >"$out/fp8_speed_check.log" 2>&1 &&
       tmo build/fp8_speed_check >>"$out/fp8_speed_check.log" 2>&1; then
        pass "tests/gpu/fp8_speed_check.cu: $(tail -n 1 "$out/fp8_speed_check.log")"
    else failed "tests/gpu/fp8_speed_check.cu: $(tail -n 1 "$out/fp8_speed_check.log")"; fi
    grep -E '^(encode|cast|gemm_fp8|bf16|float8)' "$out/fp8_speed_check.log" | while IFS= read -r l; do say "      $l"; done
    unit test_comm_nccl
else
    say "SKIP  test_cuda_ops (4 ways), attention_tc_check, gemm_inplace_check, adamw_bw_check, fp8_speed_check, test_comm_nccl: GPU_DEVICE=$DEV"
fi
if tmo_for $((2 * STEP_S)) sh tests/cli/train.sh >"$out/cli_train.log" 2>&1; then pass "tests/cli/train.sh"
else failed "tests/cli/train.sh: $(grep '^not ok' "$out/cli_train.log" | head -n 3 | tr '\n' ' ')$(tail -n 1 "$out/cli_train.log")"; fi

# --- the same training on cpu and on cuda ------------------------------------------
# A byte-tokenizer corpus from the repository's own text (the machine may
# have no network).
cat man/*.[157] README.md lib/*/*.c lib/*/*.h kernels/*.cu >"$work/corpus.txt"
bin/titan-shard -q -o "$work/data" "$work/corpus.txt" 2>"$out/shard.log" || failed "titan-shard (see shard.log)"
half=$((STEPS / 2))
bin/titan-init -q configs/debugmodel.toml "$work/seed" --training.dataset_path="$work/data" \
    --training.steps="$STEPS" --checkpoint.interval="$half" --checkpoint.keep_latest_k=0 \
    --metrics.log_freq=10 ${INIT_ARGS:-} 2>"$out/init.log" || failed "titan-init (see init.log)"
for r in cpu cuda resume async; do cp -r "$work/seed" "$work/$r"; done

train() { # run-dir log args...: exit status, wall seconds into $secs
    d=$1; log=$2; shift 2
    t0=$(date +%s)
    tmo bin/titan-train "$work/$d" "$@" >"$out/$log.out" 2>"$out/$log.log"
    rc=$?
    secs=$(( $(date +%s) - t0 ))
    cp "$work/$d/metrics.jsonl" "$out/$log.metrics.jsonl" 2>/dev/null
    return $rc
}
if train cpu train_cpu --training.device=cpu; then pass "train $STEPS steps on cpu (${secs}s)"
else failed "train on cpu (exit $rc): $(tail -n 2 "$out/train_cpu.log" | tr '\n' ' ')"; fi
if train cuda train_cuda --training.device="$DEV" --sample 64 --prompt "The "; then
    pass "train $STEPS steps on $DEV (${secs}s), then sample"
else
    failed "train on $DEV (exit $rc): $(tail -n 2 "$out/train_cuda.log" | tr '\n' ' ')"
fi
say "      $(grep 'device:' "$out/train_cuda.log" | head -n 1)"

# field NAME FILE: the values of one key of metrics.jsonl, one per line
field() { awk -F'[{},:]' -v k="\"$1\"" '{ for (i = 1; i < NF; i++) if ($i == k) { print $(i + 1); break } }' "$2"; }
# maxrel NAME [RUN]: max over steps of |RUN - cpu| / |cpu| for that key (RUN: cuda)
maxrel() {
    field "$1" "$work/cpu/metrics.jsonl" >"$work/$1.cpu"
    field "$1" "$work/${2:-cuda}/metrics.jsonl" >"$work/$1.${2:-cuda}"
    paste "$work/$1.cpu" "$work/$1.${2:-cuda}" | awk '
        { n++ }
        $1 !~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/ || $2 !~ /^-?[0-9.]+([eE][-+]?[0-9]+)?$/ { if (!bad) at = n; bad = 1; next }
        { d = $2 - $1; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1; r = a > 0 ? d / a : d; if (r > m) { m = r; at = n } }
        END { if (bad) printf "inf %d %d\n", at, n; else printf "%.3g %d %d\n", m, at, n }'
}
set -- $(maxrel loss)
lmax=${1:-nan}; lat=${2:-0}; nsteps=${3:-0}
set -- $(maxrel grad_norm)
gmax=${1:-nan}; gat=${2:-0}
if [ "$nsteps" -eq "$STEPS" ] && awk -v m="$lmax" -v t="$TOL" 'BEGIN { exit !(m != "inf" && m + 0 <= t + 0) }'; then
    pass "loss curves agree: max relative difference $lmax (step $lat) <= $TOL over $nsteps steps"
else
    failed "loss curves: max relative difference $lmax (step $lat) over $nsteps of $STEPS steps, tolerance $TOL"
fi
say "      grad_norm: max relative difference $gmax (step $gat) (not a criterion)"
paste "$work/loss.cpu" "$work/loss.cuda" >"$out/loss_cpu_cuda.txt"

# --- cuda: resume and async saves give the uninterrupted run's bits ---------------------
final=$(printf 'step-%08d' "$STEPS")
same() { cmp -s "$work/cuda/checkpoint/$final/rank-00000.bin" "$work/$1/checkpoint/$final/rank-00000.bin"; }
if train resume train_cuda_stop --training.device="$DEV" --stop-at "$half" &&
   train resume train_cuda_resume --training.device="$DEV" && same resume; then
    pass "$DEV: stopped at step $half and resumed, bitwise identical at step $STEPS"
else
    failed "$DEV: resume at step $half (see train_cuda_stop.log, train_cuda_resume.log)"
fi
if train async train_cuda_async --training.device="$DEV" --checkpoint.async_mode=async && same async; then
    pass "$DEV: async checkpoints, bitwise identical state"
else
    failed "$DEV: async checkpoints (see train_cuda_async.log)"
fi

# --- cuda in bf16 (fp32 master weights): near the fp32 curve, repeatable -------------
# As titan-train runs by default (attention through cuDNN where it opens),
# then with training.deterministic (titan's own attention kernels): each
# near the cpu's fp32 curve; the deterministic one also ends in the same
# bits when run again, and with selective activation checkpointing.
BF16_TOL=${BF16_TOL:-2e-2}
BF16="--training.mixed_precision_param=bfloat16"
DET="--training.deterministic=true"
for r in bf16 bf16d bf16b bf16o; do cp -r "$work/seed" "$work/$r"; done
# bf16_curve RUN LABEL: the loss curve of RUN within BF16_TOL of the cpu's
bf16_curve() {
    set -- "$1" "$2" $(maxrel loss "$1")
    if [ "${5:-0}" -eq "$STEPS" ] && awk -v m="${3:-inf}" -v t="$BF16_TOL" 'BEGIN { exit !(m != "inf" && m + 0 <= t + 0) }'; then
        pass "$2 loss curve near cpu fp32: max relative difference $3 (step $4) <= $BF16_TOL"
    else
        failed "$2 loss curve: max relative difference ${3:-nan} (step ${4:-0}) over ${5:-0} of $STEPS steps, tolerance $BF16_TOL"
    fi
}
# shellcheck disable=SC2086
if train bf16 train_cuda_bf16 --training.device="$DEV" $BF16; then pass "train $STEPS steps on $DEV in bf16 (${secs}s)"
else failed "train on $DEV in bf16 (exit $rc): $(tail -n 2 "$out/train_cuda_bf16.log" | tr '\n' ' ')"; fi
attn=$(grep -o "attention through [^:]*" "$out/train_cuda_bf16.log" | head -n 1)
attn=${attn:-"attention through titan's kernels"}
bf16_curve bf16 "bf16 ($attn)"
paste "$work/loss.cpu" "$work/loss.bf16" >"$out/loss_cpu_bf16.txt"
# shellcheck disable=SC2086
if train bf16d train_cuda_bf16_det --training.device="$DEV" $BF16 $DET; then
    pass "train $STEPS steps on $DEV in bf16, training.deterministic (${secs}s)"
else failed "train on $DEV in bf16, training.deterministic (exit $rc): $(tail -n 2 "$out/train_cuda_bf16_det.log" | tr '\n' ' ')"; fi
if grep -q 'through cuDNN' "$out/train_cuda_bf16_det.log"; then failed "training.deterministic still used cuDNN's attention"; fi
bf16_curve bf16d "bf16 deterministic"
paste "$work/loss.cpu" "$work/loss.bf16d" >"$out/loss_cpu_bf16_det.txt"
# shellcheck disable=SC2086
if train bf16b train_cuda_bf16_again --training.device="$DEV" $BF16 $DET &&
   cmp -s "$work/bf16d/checkpoint/$final/rank-00000.bin" "$work/bf16b/checkpoint/$final/rank-00000.bin"; then
    pass "$DEV bf16 deterministic: a second run ends in the same bits"
else
    failed "$DEV bf16 deterministic: a second run differs (see train_cuda_bf16_again.log)"
fi
# selective activation checkpointing (op policy) recomputes the same bits
# shellcheck disable=SC2086
if train bf16o train_cuda_bf16_ac_op --training.device="$DEV" $BF16 $DET --activation_checkpoint.mode=selective \
       --activation_checkpoint.selective_ac_option=op &&
   cmp -s "$work/bf16d/checkpoint/$final/rank-00000.bin" "$work/bf16o/checkpoint/$final/rank-00000.bin"; then
    pass "$DEV bf16 deterministic with selective op activation checkpointing: the same bits"
else
    failed "$DEV bf16 deterministic with selective op activation checkpointing differs (see train_cuda_bf16_ac_op.log)"
fi

# --- float8: torchao's tensorwise recipe on the float8 tensor cores ---------------------
# bf16 with every linear but the output in float8 (kernels/fp8.cu's casts,
# cuBLASLt's float8 products; emulated where the device has none, as under
# cpu-guard): near the cpu's fp32 curve as bf16 is, a float8 GEMM count on
# every step, and no product left to the emulated fallback.
f8emu=true; [ "$DEV" = cuda ] && f8emu=false
F8="--model.converters=float8 --quantize.linear.float8.filter_fqns=output --quantize.linear.float8.emulate=$f8emu"
cp -r "$work/seed" "$work/f8"
if train f8 train_cuda_fp8 --training.device="$DEV" $BF16 $DET $F8; then
    pass "train $STEPS steps on $DEV in bf16 with float8 tensorwise (emulate=$f8emu, ${secs}s)"
else failed "train on $DEV in bf16 with float8 (exit $rc): $(tail -n 2 "$out/train_cuda_fp8.log" | tr '\n' ' ')"; fi
if grep -q "no algorithm" "$out/train_cuda_fp8.log"; then
    failed "float8: a product fell back to the emulated path: $(grep -m 1 'no algorithm' "$out/train_cuda_fp8.log")"
fi
f8g=$(field fp8_gemms "$work/f8/metrics.jsonl" | sort -u | tr '\n' ' ')
case $f8g in ''|'0 ') failed "float8: no float8 GEMMs counted ('$f8g')" ;;
*' '?*) failed "float8: the float8 GEMM count changes between steps ($f8g)" ;;
*) pass "float8: ${f8g% } float8 GEMMs every step" ;; esac
bf16_curve f8 "bf16 float8 tensorwise"
paste "$work/loss.cpu" "$work/loss.f8" >"$out/loss_cpu_fp8.txt"

# --- GaLore: its step and refresh on the device (kernels/galore.cu, linalg.cu) ----------
# optimizer.name = GaLore (rank 32, a refresh every 10 steps: 1, 11, ...) with
# the randomized SVD (the default) and the exact one, each loss curve within
# $TOL of the same run on the cpu; then the refresh steps' optimizer_s beside
# the other steps' (the randomized and the exact refresh's cost on this
# device: printed, not a criterion).
GAP=10
GALORE="--optimizer.name=GaLore --optimizer.rank=32 --optimizer.update_proj_gap=$GAP"
# curve_to A B LABEL [REF]: B's loss curve within TOL of A's (REF names A:
# "the same on cpu" unless given)
curve_to() {
    field loss "$work/$1/metrics.jsonl" >"$work/l.a"; field loss "$work/$2/metrics.jsonl" >"$work/l.b"
    m=$(paste "$work/l.a" "$work/l.b" | awk '{ n++; d = $2 - $1; if (d < 0) d = -d; r = d / ($1 < 0 ? -$1 : $1); if (r > m) m = r }
        END { printf "%s", n == '"$STEPS"' ? sprintf("%.3g", m) : "inf" }')
    if awk -v m="$m" -v t="$TOL" 'BEGIN { exit !(m != "inf" && m + 0 <= t + 0) }'; then
        pass "$3 = ${4:-the same on cpu}: max relative difference $m <= $TOL"
    else
        failed "$3: max relative difference $m from ${4:-the same on cpu}, tolerance $TOL"
    fi
}
# refresh_cost RUN: mean optimizer_s of the refresh steps and of the others
refresh_cost() {
    awk -v gap=$GAP -F'[{},:]' '{ for (i = 1; i < NF; i++) v[$i] = $(i + 1); s = v["\"step\""] + 0; o = v["\"optimizer_s\""] + 0 }
        s > 1 && (s - 1) % gap == 0 { nr++; r += o; next } s > 1 { n++; t += o }
        END { printf "refresh steps %.4f s (%d), other steps %.4f s (%d)", nr ? r / nr : 0, nr, n ? t / n : 0, n }' \
        "$work/$1/metrics.jsonl"
}
for r in gl_cpu gl_rand gl_cpu_exact gl_exact; do cp -r "$work/seed" "$work/$r"; done
for svd in randomized exact; do
    c=gl_cpu; d=gl_rand; [ $svd = exact ] && c=gl_cpu_exact d=gl_exact
    # shellcheck disable=SC2086
    if train $c train_galore_${svd}_cpu --training.device=cpu $GALORE --optimizer.galore_svd=$svd &&
       train $d train_galore_${svd}_cuda --training.device="$DEV" $GALORE --optimizer.galore_svd=$svd; then
        pass "GaLore ($svd SVD) $STEPS steps on cpu and on $DEV (${secs}s)"
        curve_to $c $d "GaLore ($svd SVD) on $DEV"
        say "      GaLore $svd on $DEV: optimizer_s $(refresh_cost $d)"
    else
        failed "GaLore ($svd SVD) on cpu or $DEV (exit $rc; see train_galore_${svd}_*.log)"
    fi
done

# --- several ranks (two GPUs or more): FSDP 2 over NCCL, and over shared memory -------
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "$DEV" = cpu-guard ] || [ "${ngpu:-0}" -ge 2 ]; then
    for r in dp_cpu dp_nccl dp_shm; do cp -r "$work/seed" "$work/$r"; done
    train dp_cpu train_fsdp2_cpu --training.device=cpu --nproc 2 || failed "FSDP 2 on cpu (see train_fsdp2_cpu.log)"
    for c in nccl shm; do
        export TITAN_COMM=$c
        train dp_$c train_fsdp2_$c --training.device="$DEV" --nproc 2; rc=$?
        unset TITAN_COMM
        if [ "$c" = nccl ] && [ "$DEV" = cpu-guard ]; then
            # cpu-guard runs no NCCL: asked for by name, it is refused, never quietly shm
            if [ $rc -eq 2 ] && grep -q "runs no NCCL" "$out/train_fsdp2_nccl.log"; then
                pass "FSDP 2 on $DEV over nccl refused (exit 2): the device runs no NCCL"
            else
                failed "FSDP 2 on $DEV over nccl: exit $rc, not the refusal (see train_fsdp2_nccl.log)"
            fi
            continue
        fi
        if [ $rc -eq 0 ]; then
            curve_to dp_cpu dp_$c "FSDP 2 on $DEV ($c communicators)" "FSDP 2 on cpu"
            say "      $(grep 'device memory:' "$out/train_fsdp2_$c.log" | head -n 1)"
        else
            failed "FSDP 2 on $DEV ($c communicators, exit $rc): $(tail -n 1 "$out/train_fsdp2_$c.log")"
        fi
    done
else
    say "SKIP several ranks on cuda here: ${ngpu:-0} GPU(s) visible, two needed (one per rank); scripts/gpu-layouts.sh runs every layout on shared GPUs"
fi

# --- speed (steps after the first 5) ----------------------------------------------
speed() { # metrics file: mean tokens/s, mfu, step_time_s
    awk -F'[{},:]' '{ for (i = 1; i < NF; i++) v[$i] = $(i + 1) }
        v["\"step\""] > 5 { n++; tok += v["\"tokens_per_s\""]; mfu += v["\"mfu\""]; st += v["\"step_time_s\""] }
        END { if (n) printf "%.0f tokens/s, MFU %.2f%%, %.4f s/step (mean of %d steps)", tok / n, 100 * mfu / n, st / n, n }' "$1"
}
say "speed cpu:  $(speed "$work/cpu/metrics.jsonl"); $(grep -o 'peak [^;]*' "$out/train_cpu.log" | head -n 1)"
say "speed $DEV: $(speed "$work/cuda/metrics.jsonl"); $(grep -o 'peak [^;]*' "$out/train_cuda.log" | head -n 1)"
say "speed $DEV bf16: $(speed "$work/bf16/metrics.jsonl"); $(grep -o 'peak [^;]*' "$out/train_cuda_bf16.log" | head -n 1)"
say "speed $DEV bf16 deterministic: $(speed "$work/bf16d/metrics.jsonl")"
say "speed $DEV bf16 float8 tensorwise, deterministic: $(speed "$work/f8/metrics.jsonl")"
say "      $(grep 'device memory:' "$out/train_cuda_bf16.log" | head -n 1)"

# --- last, as it is slow: every op under compute-sanitizer memcheck -------------------
# Out-of-bounds and misaligned accesses, and uninitialised reads of device
# memory, in test_cuda_ops. Kernels run 10-100 times slower under it, so it
# has a deadline (MEMCHECK_S, 240 s; 0 skips it); a sanitizer that refuses the
# machine (it does under gVisor) is a SKIP.
cs=$(command -v compute-sanitizer || echo "$(dirname "${NVCC:-/usr/local/cuda/bin/nvcc}")/compute-sanitizer")
if [ "${MEMCHECK_S:-240}" -gt 0 ] && [ -x "$cs" ] && [ "$DEV" = cuda ]; then
    tmo_for "${MEMCHECK_S:-240}" "$cs" --tool memcheck --error-exitcode 99 build/tests/test_cuda_ops \
        >"$out/memcheck.log" 2>&1; rc=$?
    if [ $rc -eq 0 ]; then pass "compute-sanitizer memcheck: test_cuda_ops clean"
    elif [ $rc -eq 99 ]; then
        failed "compute-sanitizer memcheck: $(grep -m 1 -E 'Invalid|Misaligned|Uninitialized|Error' "$out/memcheck.log")"
    elif [ $rc -eq 124 ]; then say "SKIP  compute-sanitizer memcheck: not done in ${MEMCHECK_S:-240} s"
    else say "SKIP  compute-sanitizer memcheck (exit $rc): $(tail -n 1 "$out/memcheck.log")"; fi
else
    say "SKIP  compute-sanitizer memcheck: MEMCHECK_S=0, no compute-sanitizer or not a cuda run"
fi

finish
