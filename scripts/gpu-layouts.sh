#!/bin/sh
# gpu-layouts.sh - every parallel layout on cuda against one GPU's curve, on
# whatever GPUs the machine has: with fewer GPUs than ranks the ranks share
# them round-robin (shared-memory communicators; NCCL where each rank has
# its own GPU). One seed checkpoint of a small model (dim 256, 4 layers,
# head dim 64: the tensor-core attention), 8 sequences of 256 tokens per
# step (accumulation 4 as one process, 2 under dp 2, 1 under dp 4), STEPS
# steps (20):
#   fp32: one GPU, then FSDP 2, HSDP 2x2, tp 2, pp 2 (1F1B, and
#         Interleaved1F1B with 2 stages a rank), cp 2: each loss curve
#         within TOL (1e-5) of one GPU's, gradient norms within GN_TOL (1e-6)
#         (the CPU suite's bounds: layouts only regroup sums);
#   bf16 (training.deterministic: titan's attention kernels): the same
#         layouts against one bf16 GPU within BF16_TOL (2e-4) and BF16_GN_TOL
#         (1e-3). Not the CPU suite's 1e-4 (set on a 32-wide model): on this
#         model every layout's curve walks off one GPU's by bf16 roundings
#         alike, FSDP 2 (which changes only the order of the gradient sums)
#         by up to 6.9e-5, tp 2 by 1.1e-4 at one step of 20, while the fp32
#         curves agree to 7e-8 (H100, 2026-11-27: tests/gpu/);
#   async tp: tp 2 with sequence parallelism and
#         parallelism.enable_async_tensor_parallel over the shm
#         communicator (its windows in device memory, CUDA IPC), fp32,
#         against one GPU's curve to TOL;
#   cp ring: cp 2 with parallelism.context_parallel_rotate_method =
#         "alltoall" over the same windows, fp32, against one GPU's curve
#         to TOL;
#   resume across layouts: FSDP 2 stopped at step STEPS/2, resumed as tp 2
#         and as one process; each continues one GPU's curve to TOL.
# Each run has STEP_TIMEOUT_S (120) seconds; with CHECK_BUDGET_S (seconds
# from the start) nothing runs past it. GPU_DEVICE=cpu-guard runs the same
# plumbing without a GPU (tests/cli/gpu_scripts.sh). Prints a PASS/FAIL line
# per check with the measured differences; summary and logs land in
# build/gpu-layouts/, and with $OUT set $OUT/layouts.txt and
# $OUT/layouts.tar.gz. Exit status 0 when all passed. Assumes a build
# (scripts/gpu-check.sh or make). INIT_ARGS: more titan-init overrides (the
# suite shrinks the model).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
STEPS=${STEPS:-20}
TOL=${TOL:-1e-5}
GN_TOL=${GN_TOL:-1e-6}
BF16_TOL=${BF16_TOL:-2e-4}
BF16_GN_TOL=${BF16_GN_TOL:-1e-3}
DEV=${GPU_DEVICE:-cuda}
STEP_S=${STEP_TIMEOUT_S:-120}
BUDGET_S=${CHECK_BUDGET_S:-0}
for v in "STEPS=$STEPS" "STEP_TIMEOUT_S=$STEP_S" "CHECK_BUDGET_S=$BUDGET_S"; do
    case ${v#*=} in ''|*[!0-9]*) echo "gpu-layouts: error: $v: expected a whole number" >&2; exit 2 ;; esac
done
[ "$STEPS" -ge 4 ] || { echo "gpu-layouts: error: STEPS=$STEPS: at least 4" >&2; exit 2; }
out=$top/build/gpu-layouts
work=$top/build/gpu-layouts-runs
rm -rf "$out" "$work" && mkdir -p "$out" "$work" || exit 1
export TITAN_NO_REEXEC=1 TITAN_COMM_TIMEOUT=${TITAN_COMM_TIMEOUT:-60}
if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -q avx512f /proc/cpuinfo 2>/dev/null; then
    export OPENBLAS_CORETYPE=SkylakeX
fi
bad=0
summary=$out/layouts.txt
: >"$summary"
say() { echo "$*" | tee -a "$summary"; }
pass() { say "PASS  $*"; }
failed() { say "FAIL  $*"; bad=$((bad + 1)); }
finish() {
    if [ $bad -eq 0 ]; then say "all passed"; else say "$bad failed"; fi
    if [ -n "${OUT:-}" ]; then
        mkdir -p "$OUT" && cp "$summary" "$OUT/"
        tar -czf "$OUT/layouts.tar.gz" -C "$top/build" gpu-layouts
    fi
    [ $bad -eq 0 ]
    exit
}
trap 'trap - TERM INT; failed "interrupted (TERM or INT) after $(( $(date +%s) - t_start )) s"; finish' TERM INT
t_start=$(date +%s)
# tmo CMD...: CMD with STEP_TIMEOUT_S, fewer where CHECK_BUDGET_S has fewer left
tmo() {
    s=$STEP_S
    if [ "$BUDGET_S" -gt 0 ]; then
        left=$((BUDGET_S - ($(date +%s) - t_start)))
        [ "$left" -ge "$s" ] || s=$left
    fi
    [ "$s" -gt 5 ] || { echo "gpu-layouts: not run: CHECK_BUDGET_S=$BUDGET_S spent" >&2; return 124; }
    timeout -k 10 "$s" "$@"
}

gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
say "gpu-layouts $(date -u +%Y-%m-%dT%H:%M:%SZ): ${gpus:-0} GPU(s): $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)"
cat man/*.[157] README.md >"$work/corpus.txt"
bin/titan-shard -q -o "$work/data" "$work/corpus.txt" 2>"$out/shard.log" || { failed "titan-shard (see shard.log)"; finish; }
half=$((STEPS / 2))
bin/titan-init -q configs/debugmodel.toml "$work/seed" --training.dataset_path="$work/data" \
    --model.dim=256 --model.n_layers=4 --model.n_heads=4 --model.n_kv_heads=2 --model.multiple_of=64 \
    --training.seq_len=256 --training.local_batch_size=2 --training.global_batch_size=8 \
    --training.steps="$STEPS" --checkpoint.interval="$half" --checkpoint.keep_latest_k=0 \
    --lr_scheduler.warmup_steps=2 --training.threads=2 ${INIT_ARGS:-} 2>"$out/init.log" || { failed "titan-init (see init.log)"; finish; }

# run NAME ARGS...: the seed copied to NAME and trained with ARGS on $DEV
run() {
    n=$1; shift
    rm -rf "$work/$n" && cp -r "$work/seed" "$work/$n"
    t0=$(date +%s)
    tmo bin/titan-train "$work/$n" --training.device="$DEV" "$@" >"$out/$n.out" 2>"$out/$n.log"
    rc=$?
    secs=$(( $(date +%s) - t0 ))
    cp "$work/$n/metrics.jsonl" "$out/$n.metrics.jsonl" 2>/dev/null
    return $rc
}
# resume NAME ARGS...: NAME trained further (from its checkpoint) with ARGS
resume() {
    n=$1; shift
    tmo bin/titan-train "$work/$n" --training.device="$DEV" "$@" >>"$out/$n.out" 2>>"$out/$n.log"
    rc=$?
    cp "$work/$n/metrics.jsonl" "$out/$n.metrics.jsonl" 2>/dev/null
    return $rc
}
# curve LABEL REF RUN TOL GN_TOL [FIRST]: RUN's losses (and gradient norms)
# of steps >= FIRST within TOL (GN_TOL) relative of REF's
curve() {
    d=$(awk -v first="${6:-1}" -v steps="$STEPS" -F'[{},:]' '
        { s = l = g = ""; for (i = 1; i < NF; i++) { if ($i == "\"step\"") s = $(i + 1); if ($i == "\"loss\"") l = $(i + 1); if ($i == "\"grad_norm\"") g = $(i + 1) } }
        FNR == NR { L[s] = l; G[s] = g; next }
        s >= first && (s in L) { n++; d = l - L[s]; if (d < 0) d = -d; r = d / (L[s] < 0 ? -L[s] : L[s]); if (r > m) m = r
                                 d = g - G[s]; if (d < 0) d = -d; r = d / G[s]; if (r > gm) gm = r }
        END { printf "%.2e %.2e %d", m, gm, n }' "$work/$2/metrics.jsonl" "$work/$3/metrics.jsonl" 2>/dev/null)
    set -- "$1" "$4" "$5" "${6:-1}" $d
    want=$((STEPS - $4 + 1))
    if [ "${7:-0}" -eq "$want" ] && awk -v a="$5" -v b="$6" -v t="$2" -v u="$3" 'BEGIN { exit !(a + 0 <= t + 0 && b + 0 <= u + 0) }'; then
        pass "$1: loss within $5 (<= $2), grad norm $6 (<= $3) over $7 steps"
    else
        failed "$1: loss ${5:-?} (tolerance $2), grad norm ${6:-?} ($3) over ${7:-0} of $want steps"
    fi
}
BF16="--training.mixed_precision_param=bfloat16 --training.deterministic=true"
# name:ranks:flags (commas between flags)
LAYOUTS="fsdp2:2: hsdp:4:--parallelism.data_parallel_replicate_degree=2,--parallelism.data_parallel_shard_degree=2
 tp2:2:--parallelism.tensor_parallel_degree=2 pp2:2:--parallelism.pipeline_parallel_degree=2
 pp2i:2:--parallelism.pipeline_parallel_degree=2,--parallelism.pipeline_parallel_schedule=Interleaved1F1B
 cp2:2:--parallelism.context_parallel_degree=2"
for prec in fp32 bf16; do
    if [ $prec = fp32 ]; then P=""; t=$TOL; g=$GN_TOL; else P=$BF16; t=$BF16_TOL; g=$BF16_GN_TOL; fi
    # shellcheck disable=SC2086
    if run one_$prec $P; then pass "one $DEV, $prec: $STEPS steps (${secs}s)"
    else failed "one $DEV, $prec (exit $rc): $(tail -n 1 "$out/one_$prec.log")"; continue; fi
    for e in $LAYOUTS; do
        name=${e%%:*}; rest=${e#*:}; np=${rest%%:*}; flags=$(echo "${rest#*:}" | tr ',' ' ')
        # shellcheck disable=SC2086
        if run ${name}_$prec --nproc "$np" $flags $P; then
            layout=$(grep -o 'layout [^ ]*' "$out/${name}_$prec.log" | head -n 1)
            comms=$(grep -o '[a-z-]* communicators' "$out/${name}_$prec.log" | head -n 1)
            say "      $name $prec: $np ranks, $layout, $comms, ${secs}s"
            curve "$name $prec = one $DEV" one_$prec ${name}_$prec "$t" "$g"
        else
            failed "$name $prec (exit $rc): $(grep -m 1 'error' "$out/${name}_$prec.log")"
        fi
    done
done
# --- device windows: async tp's collective matmuls and the cp ring's block
# attention read the peers' buffers in place (CUDA IPC between the ranks'
# processes; the shm communicator, since NCCL has no windows here) ---
# window_row TAG WHAT FLAGS...: 2 ranks in fp32 against one GPU's curve
window_row() {
    tag=$1 what=$2
    shift 2
    if [ "$DEV" != cuda ]; then
        say "      $tag: skipped on $DEV ($what's windows are host memory or device memory, not cpu-guard's)"
    elif run "${tag}_fp32" --nproc 2 "$@"; then
        say "      $tag fp32: 2 ranks, $(grep -o 'layout [^ ]*' "$out/${tag}_fp32.log" | head -n 1), ${secs}s"
        curve "$what fp32 = one $DEV" one_fp32 "${tag}_fp32" "$TOL" "$GN_TOL"
    else
        failed "$what fp32 (exit $rc): $(grep -m 1 'error' "$out/${tag}_fp32.log")"
    fi
}
TITAN_COMM=shm
export TITAN_COMM
window_row tp2a "tp 2 async" --parallelism.tensor_parallel_degree=2 --parallelism.enable_sequence_parallel=true \
    --parallelism.enable_async_tensor_parallel=true
window_row cp2r "cp 2 ring" --parallelism.context_parallel_degree=2 \
    --parallelism.context_parallel_rotate_method=alltoall
unset TITAN_COMM
# --- resume across layouts: FSDP 2's half-way checkpoint as tp 2 and as one GPU ---
if run half --nproc 2 --stop-at "$half"; then
    cp -r "$work/half" "$work/half1"
    if resume half --nproc 2 --parallelism.tensor_parallel_degree=2; then
        curve "FSDP 2 to step $half, resumed as tp 2 = one $DEV" one_fp32 half "$TOL" "$GN_TOL" "$((half + 1))"
    else failed "FSDP 2 resumed as tp 2 (exit $rc): $(tail -n 1 "$out/half.log")"; fi
    if resume half1; then
        curve "FSDP 2 to step $half, resumed as one $DEV = one $DEV" one_fp32 half1 "$TOL" "$GN_TOL" "$((half + 1))"
    else failed "FSDP 2 resumed as one $DEV (exit $rc): $(tail -n 1 "$out/half1.log")"; fi
else
    failed "FSDP 2 to step $half (exit $rc): $(tail -n 1 "$out/half.log")"
fi
say "      $(grep -m 1 'round-robin' "$out"/fsdp2_fp32.log 2>/dev/null)"
say "      $(grep -m 1 'device memory:' "$out"/hsdp_fp32.log 2>/dev/null)"
say "      $(( $(date +%s) - t_start )) s"
finish
