#!/bin/sh
# titan-train --training.device=cuda on the CUDA backend's own code run on the
# CPU (build/emu/libtitan-cuda-emu.so, tests/emu/cuda_emu.h): every kernel,
# the cuBLASLt plans, the memory plan, mixed precision and checkpoints of the
# cuda path, on machines without a GPU. Not a speed test, and not a check of
# the hardware (tests/unit/test_cuda_ops and scripts/gpu-check.sh on a GPU):
# a check of the backend's logic against the CPU backend. TAP output; skipped
# (77) where the library was not built (no nvcc).
#
# Tolerances: fp32 loss and grad norm within 1e-5 relative of the CPU's every
# step (they agree to ~1e-8: only summation orders differ); bf16 within 5e-3
# relative of the CPU backend's bf16 (train.sh's bf16-vs-fp32 bound; both
# round the same tensors to bf16, the kernels sum in other orders).
set -u
. "$(dirname "$0")/lib/tap.sh"

EMU=$top/build/emu/libtitan-cuda-emu.so
if [ ! -f "$EMU" ]; then
    echo "no CUDA emulator library ($EMU: built where nvcc is)"
    exit 77
fi

shard_man_corpus

# head dim 64: bf16 attention runs the tensor-core kernels (attention_tc.cu)
SMALL="--model.dim=128 --model.n_layers=2 --model.n_heads=2 --model.n_kv_heads=1 --model.multiple_of=16
 --training.seq_len=64 --training.local_batch_size=2 --training.steps=6 --checkpoint.interval=3
 --checkpoint.keep_latest_k=0 --lr_scheduler.warmup_steps=2 --training.dataset_path=$tmp/data
 --metrics.peak_flops=1e11 --training.threads=2"
cfg=$top/configs/debugmodel.toml
CUDA="--training.device=cuda"
BF16="--training.mixed_precision_param=bfloat16"
# emu [VAR=VALUE...] COMMAND...: COMMAND on the emulated GPU
emu() { env TITAN_CUDA_LIB="$EMU" "$@"; }

# close RUN_A RUN_B TOL [NORM_TOL [STEPS]]: loss and grad_norm of every step
# of RUN_B (6, or its first STEPS) within TOL relative of RUN_A's (the grad
# norm within NORM_TOL when given)
close() {
    /usr/bin/python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" "$3" "${4:-$3}" "${5:-6}" <<'PY'
import json, sys
def load(p): return {d["step"]: (d["loss"], d["grad_norm"]) for d in map(json.loads, open(p))}
a, b, tols = load(sys.argv[1]), load(sys.argv[2]), (float(sys.argv[3]), float(sys.argv[4]))
if sorted(a) != list(range(1, 7)) or sorted(b) != list(range(1, int(sys.argv[5]) + 1)): sys.exit("steps differ")
rel = [[abs(x - y) / abs(x) for x, y in zip(a[s], b[s])] for s in b]
worst = [max(r[i] for r in rel) for i in range(2)]
print("max relative difference %.1e" % max(worst))
sys.exit(0 if all(w <= t for w, t in zip(worst, tols)) else 1)
PY
}

expect 0 "" "init runs" -- "$bin/titan-init" "$cfg" "$tmp/c" $SMALL
for r in g r p f hc hg ha hn ho hd hm hx hb c2 g2 g2r s2 o2 m1 m2 h2 b2 c4 g4 fc fg fs fr fe a8c a8g gc gg gr; do
    cp -r "$tmp/c" "$tmp/$r"
done

# --- fp32: the cpu's loss curve ---------------------------------------------------
expect 0 "" "train 6 steps on the cpu" -- "$bin/titan-train" "$tmp/c"
expect 0 "titan CPU emulator" "train 6 steps on cuda (emulated)" -- emu "$bin/titan-train" "$tmp/g" $CUDA
grep -q "dev mem [0-9]* MiB" "$tmp/err" && ok "step lines show device memory" || fail "step lines show device memory"
d=$(close "$tmp/c" "$tmp/g" 1e-5) && ok "fp32 loss and grad norm track the cpu's ($d)" \
    || fail "fp32 loss and grad norm track the cpu's ($d)"
# resume, under another interleaving of the emulated threads
expect 0 "" "cuda to step 3" -- emu "$bin/titan-train" "$tmp/r" $CUDA --stop-at 3
expect 0 "" "resume on cuda to step 6 (other thread interleaving)" -- emu TITAN_EMU_SEED=7 "$bin/titan-train" "$tmp/r" $CUDA
cmp -s "$tmp/g/checkpoint/step-00000006/rank-00000.bin" "$tmp/r/checkpoint/step-00000006/rank-00000.bin" \
    && ok "cuda resume is bitwise identical" || fail "cuda resume is bitwise identical"
# the fallback GEMM kernel instead of cuBLASLt
expect 0 "" "train on cuda, fallback GEMM" -- emu TITAN_CUDA_GEMM_FALLBACK=1 "$bin/titan-train" "$tmp/f" $CUDA
d=$(close "$tmp/c" "$tmp/f" 1e-5) && ok "fallback GEMM tracks the cpu ($d)" || fail "fallback GEMM tracks the cpu ($d)"
# the profiler's synchronisation changes nothing
expect 0 "costliest" "train profiled on cuda" -- emu "$bin/titan-train" "$tmp/p" $CUDA \
    --profiling.enable_profiling=true --profiling.profile_freq=3
cmp -s "$tmp/g/checkpoint/step-00000006/rank-00000.bin" "$tmp/p/checkpoint/step-00000006/rank-00000.bin" \
    && ok "profiled cuda run trains the same bits" || fail "profiled cuda run trains the same bits"
[ -f "$tmp/p/profile_traces/iteration_6/rank0_trace.json" ] && ok "cuda profile trace written" \
    || fail "cuda profile trace written"

# --- GaLore: its step and refresh as device ops (kernels/galore.cu, linalg.cu) --------
# A refresh every 2 steps (1, 3, 5), randomized: the CPU's Gaussian sketch,
# cuSOLVER's QR and Dgesvd of the small matrix (the CPU's: LAPACK's sgeqrf
# and dgesdd), within close's fp32 bound of the cpu's curve; a stop and
# resume across a refresh lands on the same bytes (its state saved and
# loaded through host copies). The exact SVD on the device: test_cuda_ops.
GALORE="--optimizer.name=GaLore --optimizer.rank=8 --optimizer.update_proj_gap=2 --optimizer.oversampling=4
 --optimizer.power_iters=1"
expect 0 "" "GaLore (randomized SVD) on the cpu" -- "$bin/titan-train" -q "$tmp/gc" $GALORE
expect 0 "optimizer: GaLore" "GaLore (randomized SVD) on cuda (emulated)" -- emu "$bin/titan-train" "$tmp/gg" $CUDA $GALORE \
    --memory_estimation.enable=true
d=$(close "$tmp/gc" "$tmp/gg" 1e-5) && ok "GaLore on cuda tracks the cpu's ($d)" || fail "GaLore on cuda tracks the cpu's ($d)"
# its state and step buffers (the SVD workspace too) are what the plan counts
m=$(sed -n 's/.*memory: rank 0: .*; bytes: \([0-9]*\) measured, \([0-9]*\) estimated.*/\1 \2/p' "$tmp/err")
set -- $m
[ $# = 2 ] && [ $(( $1 > $2 ? $1 - $2 : $2 - $1 )) -le 1024 ] \
    && ok "GaLore on cuda: the estimate is the allocator's measured peak ($1 measured, $2 estimated bytes)" \
    || fail "GaLore on cuda: the estimate is the allocator's measured peak (measured, estimated: '$m')"
expect 0 "" "GaLore on cuda to step 3" -- emu "$bin/titan-train" -q "$tmp/gr" $CUDA $GALORE --stop-at 3
expect 0 "" "GaLore resumed on cuda to step 6" -- emu TITAN_EMU_SEED=7 "$bin/titan-train" -q "$tmp/gr" $CUDA $GALORE
cmp -s "$tmp/gg/checkpoint/step-00000006/rank-00000.bin" "$tmp/gr/checkpoint/step-00000006/rank-00000.bin" \
    && ok "GaLore cuda resume is bitwise identical" || fail "GaLore cuda resume is bitwise identical"

# out of GPU memory at start: a clear error and exit status 6, no crash
expect 6 "cannot allocate .* bytes of cuda memory" "a model too big for the GPU is refused" -- \
    emu TITAN_EMU_MEMORY_MIB=36 "$bin/titan-train" "$tmp/g" $CUDA --training.steps=7
expect 6 "out of GPU memory: .* needs [0-9]* bytes of scratch" "out of memory inside an op: exit status 6, no abort" -- \
    emu TITAN_EMU_FAIL_POOL=1 "$bin/titan-train" "$tmp/g" $CUDA --training.steps=7

# --- bf16 mixed precision ------------------------------------------------------------
expect 0 "" "train bf16 on the cpu" -- "$bin/titan-train" "$tmp/hc" $BF16
# training.deterministic: titan's own attention kernels, whatever cuDNN there is
DET="--training.deterministic=true"
expect 0 "bf16 compute copy" "train bf16 on cuda (tensor-core attention)" -- emu "$bin/titan-train" "$tmp/hg" $CUDA $BF16 $DET
cp "$tmp/err" "$tmp/hg.err"
d=$(close "$tmp/hc" "$tmp/hg" 5e-3) && ok "bf16 tracks the cpu's bf16 ($d)" || fail "bf16 tracks the cpu's bf16 ($d)"
expect 0 "" "train bf16 on cuda (CUDA-core attention)" -- emu TITAN_CUDA_ATTENTION=simple "$bin/titan-train" "$tmp/ha" $CUDA $BF16
d=$(close "$tmp/hc" "$tmp/ha" 5e-3) && ok "bf16, CUDA-core attention, tracks the cpu ($d)" \
    || fail "bf16, CUDA-core attention, tracks the cpu ($d)"
# selective activation checkpointing recomputes the same bits on the GPU
expect 0 "" "train bf16 on cuda, selective op activation checkpointing" -- emu "$bin/titan-train" "$tmp/ho" $CUDA $BF16 $DET \
    --activation_checkpoint.mode=selective --activation_checkpoint.selective_ac_option=op
cmp -s "$tmp/hg/checkpoint/step-00000006/rank-00000.bin" "$tmp/ho/checkpoint/step-00000006/rank-00000.bin" \
    && ok "bf16 on cuda with selective op checkpointing: the same bits" \
    || fail "bf16 on cuda with selective op checkpointing: the same bits"
# cuDNN's attention graphs (attention_cudnn.cu), run by the emulator's
# interpreter of cuDNN's graph API (tests/emu/cudnn_emu.cpp)
if nm -D "$EMU" 2>/dev/null | grep -q ' T cudnnBackendExecute$'; then
    expect 0 "through cuDNN 9.19.0" "train bf16 on cuda (cuDNN attention graphs)" -- \
        emu TITAN_CUDA_ATTENTION=cudnn TITAN_CUDNN_LIB="$EMU" "$bin/titan-train" "$tmp/hn" $CUDA $BF16
    d=$(close "$tmp/hc" "$tmp/hn" 5e-3) && ok "bf16, cuDNN attention, tracks the cpu ($d)" \
        || fail "bf16, cuDNN attention, tracks the cpu ($d)"
    # titan-train's default: cuDNN where it opens, titan's kernels with a
    # note where it does not, never under training.deterministic
    expect 0 "attention through cuDNN 9.19.0" "train bf16 on cuda by default: cuDNN's attention" -- \
        emu TITAN_CUDNN_LIB="$EMU" "$bin/titan-train" "$tmp/hd" $CUDA $BF16
    expect 0 "attention through titan's kernels: cannot open $tmp/none.so" \
        "train bf16 on cuda by default without cuDNN: titan's attention, with a note" -- \
        emu TITAN_CUDNN_LIB="$tmp/none.so" "$bin/titan-train" "$tmp/hm" $CUDA $BF16
    cmp -s "$tmp/hg/checkpoint/step-00000006/rank-00000.bin" "$tmp/hm/checkpoint/step-00000006/rank-00000.bin" \
        && ok "without cuDNN: the deterministic run's bits" || fail "without cuDNN: the deterministic run's bits"
    expect 0 "" "train bf16 on cuda, training.deterministic, cuDNN there" -- \
        emu TITAN_CUDNN_LIB="$EMU" "$bin/titan-train" "$tmp/hx" $CUDA $BF16 $DET
    ! grep -q "through cuDNN" "$tmp/err" && cmp -s "$tmp/hg/checkpoint/step-00000006/rank-00000.bin" \
        "$tmp/hx/checkpoint/step-00000006/rank-00000.bin" && ok "training.deterministic keeps cuDNN out" \
        || fail "training.deterministic keeps cuDNN out"
else
    skip "train bf16 on cuda (cuDNN attention graphs)" "the emulator has no cuDNN (no cudnn.h)"
fi

# --- float8 (torchao's recipes): kernels/fp8.cu's casts, cuBLASLt's float8 products --
# SMALL's linears are multiples of 16 and its 128 tokens a step too, so every
# product has a float8 algorithm (the emulated cuBLASLt's, tests/emu); 2
# layers x 7 linears: 42 float8 GEMMs a step (rowwise_with_gw_hp: 28).
F8="--model.converters=float8 --quantize.linear.float8.filter_fqns=output"
gemms() { sed -n 's/.*"fp8_gemms":\([0-9]*\).*/\1/p' "$1/metrics.jsonl" | sort -u | tr '\n' ' '; }
expect 0 "" "train float8 tensorwise bf16 on the cpu (emulated)" -- "$bin/titan-train" "$tmp/fc" $BF16 $F8 \
    --quantize.linear.float8.emulate=true
expect 0 "float8 tensor cores through cuBLASLt" "train float8 tensorwise bf16 on cuda (float8 products)" -- \
    emu "$bin/titan-train" "$tmp/fg" $CUDA $BF16 $DET $F8
! grep -q "no algorithm" "$tmp/err" && ok "float8 on cuda: cuBLASLt had a float8 algorithm for every product" ||
    fail "float8 on cuda: cuBLASLt had a float8 algorithm for every product"
[ "$(gemms "$tmp/fg")" = "42 " ] && ok "float8 on cuda: 42 float8 GEMMs every step" || fail "float8 on cuda: $(gemms "$tmp/fg")"
# what setup holds beyond the plan: the bf16 run's, float8's additions (the
# amaxes kept for the backward) planned to the byte
unplanned() { sed -n 's/.*device memory: .*; bytes: \([0-9]*\) held, \([0-9]*\) planned.*/\1 - \2/p' "$1" | head -n 1; }
u8=$(unplanned "$tmp/err") u16=$(unplanned "$tmp/hg.err")
[ -n "$u8" ] && [ -n "$u16" ] && [ $(($u8)) = $(($u16)) ] &&
    ok "float8 on cuda: its setup memory is planned to the byte, as bf16's (held - planned: $(($u8)))" ||
    fail "float8 on cuda: its setup memory is planned to the byte, as bf16's ('$u8' against '$u16')"
d=$(close "$tmp/fc" "$tmp/fg" 5e-3) && ok "float8 bf16 on cuda tracks the cpu's emulation ($d)" ||
    fail "float8 bf16 on cuda tracks the cpu's emulation ($d)"
# the element-wise transposed casts, a cast per layout of dy: the same bytes
expect 0 "" "train it with TITAN_CUDA_FP8_CAST=simple" -- emu TITAN_CUDA_FP8_CAST=simple "$bin/titan-train" "$tmp/fs" \
    $CUDA $BF16 $DET $F8
cmp -s "$tmp/fg/checkpoint/step-00000006/rank-00000.bin" "$tmp/fs/checkpoint/step-00000006/rank-00000.bin" &&
    ok "float8 on cuda: the tiled casts train the simple casts' bits" ||
    fail "float8 on cuda: the tiled casts train the simple casts' bits"
expect 2 "TITAN_CUDA_FP8_CAST=bogus: expected tiled or simple" "TITAN_CUDA_FP8_CAST: an unknown value refused" -- \
    emu TITAN_CUDA_FP8_CAST=bogus "$bin/titan-train" "$tmp/hb" $CUDA $BF16 $F8
R8="$F8 --quantize.linear.float8.recipe_name=rowwise_with_gw_hp"
expect 0 "" "train float8 rowwise_with_gw_hp fp32 on the cpu" -- "$bin/titan-train" "$tmp/fr" $R8 \
    --quantize.linear.float8.emulate=true
expect 0 "emulated: float8 operands" "train it on cuda, emulated (dequantized operands)" -- \
    emu "$bin/titan-train" "$tmp/fe" $CUDA $R8 --quantize.linear.float8.emulate=true
[ "$(gemms "$tmp/fe")" = "28 " ] && ok "rowwise_with_gw_hp on cuda: 28 float8 GEMMs a step" || fail "rowwise_with_gw_hp on cuda: $(gemms "$tmp/fe")"
# the same casts, fp32 products summed in another order: within fp32
# rounding (measured 1.7e-7) but where a value lands within that of a float8
# rounding boundary and takes the other code (a CI run: 1.5e-5); a wrong
# cast or scale misses by the float8 effect, ~1e-2
d=$(close "$tmp/fr" "$tmp/fe" 1e-4) && ok "float8 emulated on cuda tracks the cpu's ($d)" ||
    fail "float8 emulated on cuda tracks the cpu's ($d)"

expect 2 "TITAN_CUDA_ATTENTION=bogus: expected cudnn, titan or simple" "TITAN_CUDA_ATTENTION: an unknown value refused" -- \
    emu TITAN_CUDA_ATTENTION=bogus "$bin/titan-train" "$tmp/hb" $CUDA $BF16

# planned NAME ERR PER: after setup the cuda allocator holds, to the byte,
# the plan's held bytes (the run's "device memory" line in ERR, rank 0's)
# and FSDP's full parameters and gradients, PER bytes a parameter of the
# rank's (fp32: 8; bf16 adds its compute copy: 10), which the plan counts
# a unit at a time (a GPU's VMM maps them on use) and the emulator, without
# VMM (vmm.cu's fallback), holds whole. FSDP's staging buffers are in
# both: allocated at setup, all of the largest unit's size (fsdp.c).
planned() {
    hp=$(sed -n 's/.*device memory: .*; bytes: \([0-9]*\) held, \([0-9]*\) planned.*/\1 \2/p' "$2" | head -n 1)
    np=$(sed -n 's/.*model: [0-9]* parameters (this rank: \([0-9]*\)).*/\1/p' "$2" | head -n 1)
    set -- "$1" "$3" $hp $np
    if [ $# = 5 ] && [ $(($3 - $4)) = $(($2 * $5)) ]; then
        ok "$1: held after setup = the plan + FSDP's full buffers ($3 = $4 + $2 x $5 bytes)"
    else
        fail "$1: held after setup = the plan + FSDP's full buffers (held, planned, parameters: '$3 $4 $5')"
    fi
}
# steady NAME ERR: nothing grows in training on the emulator (its full
# buffers held whole): rank 0's measured step peak (memory_estimation.enable)
# is what it held after setup, FSDP's staging buffers included; they grew
# with the collectives' timing once, by up to a unit's buffer.
steady() {
    hp=$(sed -n 's/.*device memory: .*; bytes: \([0-9]*\) held.*/\1/p' "$2" | head -n 1)
    pk=$(sed -n 's/.*memory: rank 0: peak .*bytes: \([0-9]*\) measured.*/\1/p' "$2")
    [ -n "$hp" ] && [ "$hp" = "$pk" ] && ok "$1: the step's peak is what setup held ($pk bytes)" ||
        fail "$1: the step's peak is what setup held (held '$hp', peak '$pk')"
}
# peaks ERR: every rank's measured peak, in rank order
peaks() { sed -n 's/.*memory: rank \([0-9]*\): peak .*bytes: \([0-9]*\) measured.*/\1 \2/p' "$1" | sort -n | tr '\n' ' '; }

# --- data parallelism (each rank its own emulated GPU) --------------------------------
# NCCL communicators (tests/emu/nccl_emu.cpp) where the library has them,
# else shared-memory ones with device staging. FSDP over 2 ranks, and HSDP
# 2 x 2 (communicator splits).
if nm -D "$EMU" | grep -q titan_cuda_nccl_api; then COMMS=nccl; else COMMS=shared-memory; fi
expect 0 "" "train 2 ranks on the cpu" -- "$bin/titan-train" --nproc 2 "$tmp/c2"
MEM="--memory_estimation.enable=true"
expect 0 "$COMMS communicators), layout dp_replicate=1,dp_shard=2" "train 2 ranks on cuda (emulated, $COMMS)" -- \
    emu TITAN_EMU_DEVICES=2 "$bin/titan-train" --nproc 2 "$tmp/g2" $CUDA $MEM
planned "FSDP 2 on cuda" "$tmp/err" 8
steady "FSDP 2 on cuda" "$tmp/err"
p1=$(peaks "$tmp/err")
# the same job again, other thread interleavings: the same peaks, rank by rank
expect 0 "" "train 2 ranks on cuda again (other thread interleaving)" -- \
    emu TITAN_EMU_DEVICES=2 TITAN_EMU_SEED=7 "$bin/titan-train" --nproc 2 "$tmp/g2r" $CUDA $MEM
p2=$(peaks "$tmp/err")
[ -n "$p1" ] && [ "$p1" = "$p2" ] && ok "FSDP 2 on cuda: the same peaks run to run ($p1)" ||
    fail "FSDP 2 on cuda: the same peaks run to run ('$p1', '$p2')"
d=$(close "$tmp/c2" "$tmp/g2" 1e-5) && ok "2-rank fp32 tracks the cpu's 2 ranks ($d)" \
    || fail "2-rank fp32 tracks the cpu's 2 ranks ($d)"
expect 0 "shared-memory communicators" "train 2 ranks on cuda, TITAN_COMM=shm (device staging)" -- \
    emu TITAN_EMU_DEVICES=2 TITAN_COMM=shm "$bin/titan-train" --nproc 2 "$tmp/s2" $CUDA $MEM
planned "FSDP 2 on cuda, TITAN_COMM=shm" "$tmp/err" 8
steady "FSDP 2 on cuda, TITAN_COMM=shm" "$tmp/err"
d=$(close "$tmp/c2" "$tmp/s2" 1e-5) && ok "shared-memory communicators on cuda track the cpu ($d)" \
    || fail "shared-memory communicators on cuda track the cpu ($d)"
expect 0 "" "train 2 ranks bf16 on the cpu" -- "$bin/titan-train" --nproc 2 "$tmp/h2" $BF16
expect 0 "" "train 2 ranks bf16 on cuda" -- emu TITAN_EMU_DEVICES=2 "$bin/titan-train" --nproc 2 "$tmp/b2" $CUDA $BF16 $MEM
planned "FSDP 2 bf16 on cuda" "$tmp/err" 10
steady "FSDP 2 bf16 on cuda" "$tmp/err"
d=$(close "$tmp/h2" "$tmp/b2" 5e-3) && ok "2-rank bf16 tracks the cpu's ($d)" || fail "2-rank bf16 tracks the cpu's ($d)"
HSDP="--parallelism.data_parallel_replicate_degree=2 --parallelism.data_parallel_shard_degree=2"
expect 0 "" "train HSDP 2x2 on the cpu" -- "$bin/titan-train" --nproc 4 "$tmp/c4" $HSDP
expect 0 "layout dp_replicate=2,dp_shard=2" "train HSDP 2x2 on cuda" -- emu TITAN_EMU_DEVICES=4 "$bin/titan-train" \
    --nproc 4 "$tmp/g4" $CUDA $HSDP $MEM
planned "HSDP 2x2 on cuda" "$tmp/err" 8
steady "HSDP 2x2 on cuda" "$tmp/err"
d=$(close "$tmp/c4" "$tmp/g4" 1e-5) && ok "HSDP on cuda tracks the cpu's ($d)" || fail "HSDP on cuda tracks the cpu's ($d)"
# FSDP's float8 all-gather on cuda: float8 weights gathered as bytes
# (NCCL's uint8), their amaxes reduced through device memory, the codes
# dequantized on the device; in fp32 (emulated products) the run is the
# fp32 gather's bit for bit, as on the cpu (float8_train.sh)
E8="$F8 --quantize.linear.float8.emulate=true"
AG="--quantize.linear.float8.enable_fsdp_float8_all_gather=true"
expect 0 "" "train float8, 2 ranks on cuda, gathers in fp32" -- \
    emu TITAN_EMU_DEVICES=2 "$bin/titan-train" --nproc 2 "$tmp/a8c" $CUDA $E8 --training.steps=3
expect 0 "gathers the float8 linears' weights in float8" "the same with the float8 all-gather" -- \
    emu TITAN_EMU_DEVICES=2 "$bin/titan-train" --nproc 2 "$tmp/a8g" $CUDA $E8 $AG --training.steps=3
cmp -s "$tmp/a8c/checkpoint/step-00000003/rank-00001.bin" "$tmp/a8g/checkpoint/step-00000003/rank-00001.bin" &&
    ok "float8 all-gather on cuda: the fp32 gather's checkpoint bit for bit" ||
    fail "float8 all-gather on cuda: the fp32 gather's checkpoint bit for bit"
# Fewer GPUs than ranks: round-robin, shared-memory communicators, each
# rank held to its share of the GPU's memory (each emulating process has
# its own TITAN_EMU_MEMORY_MIB, so the cap alone refuses: batch 16 fits one
# rank in 64 MiB, not two ranks' halves of it).
expect 0 "2 ranks on 1 GPU of this host, round-robin" "2 ranks share 1 GPU" -- emu "$bin/titan-train" --nproc 2 "$tmp/o2" $CUDA
d=$(close "$tmp/c2" "$tmp/o2" 1e-5) && ok "2 ranks on 1 GPU track the cpu's 2 ranks ($d)" \
    || fail "2 ranks on 1 GPU track the cpu's 2 ranks ($d)"
expect 0 "" "batch 16 fits 64 MiB with the GPU to itself" -- emu TITAN_EMU_MEMORY_MIB=64 "$bin/titan-train" "$tmp/m1" \
    $CUDA --training.local_batch_size=16 --training.steps=1
expect 6 "GPU 0 is shared by 2 ranks: .* past its share of 30.00 MiB" "2 ranks that do not fit one GPU's halves: refused" \
    -- emu TITAN_EMU_MEMORY_MIB=64 "$bin/titan-train" --nproc 2 "$tmp/m2" $CUDA --training.local_batch_size=16 --training.steps=1


# --- tensor and pipeline parallelism over 2 ranks: 2 kv heads, one per tp rank --------
# cpu_vs_cuda NAME FLAGS LAYOUT MOVES: NAME ("tp 2") from $tmp/t, trained on
# the cpu, on cuda over $COMMS, on one GPU both ranks share (shared-memory
# communicators, as TITAN_COMM=shm), and in bf16 on both;
# every cuda curve within close's bound of the cpu's (fp32 1e-5, bf16 5e-3).
# LAYOUT: the layout line's pattern; MOVES: what shm moves (the check's text).
cpu_vs_cuda() {
    pr=$tmp/${1%% *}
    for r in c g s bc bg; do cp -r "$tmp/t" "$pr$r"; done
    expect 0 "" "train $1 on the cpu" -- "$bin/titan-train" --nproc 2 "${pr}c" $2
    expect 0 "$3" "train $1 on cuda (emulated, $COMMS)" -- \
        emu TITAN_EMU_DEVICES=2 "$bin/titan-train" --nproc 2 "${pr}g" $CUDA $2
    cp "$tmp/err" "${pr}g.err"
    d=$(close "${pr}c" "${pr}g" 1e-5) && ok "$1 fp32 on cuda tracks the cpu's ($d)" || fail "$1 fp32 on cuda tracks the cpu's ($d)"
    expect 0 "shared-memory communicators" "train $1 on one GPU both ranks share ($4)" -- \
        emu "$bin/titan-train" --nproc 2 "${pr}s" $CUDA $2
    d=$(close "${pr}c" "${pr}s" 1e-5) && ok "$1 on one shared GPU tracks the cpu's ($d)" \
        || fail "$1 on one shared GPU tracks the cpu's ($d)"
    expect 0 "" "train $1 bf16 on the cpu" -- "$bin/titan-train" --nproc 2 "${pr}bc" $2 $BF16
    expect 0 "" "train $1 bf16 on cuda" -- emu TITAN_EMU_DEVICES=2 "$bin/titan-train" --nproc 2 "${pr}bg" $CUDA $2 $BF16
    d=$(close "${pr}bc" "${pr}bg" 5e-3) && ok "$1 bf16 on cuda tracks the cpu's ($d)" || fail "$1 bf16 on cuda tracks the cpu's ($d)"
}
expect 0 "" "init a run with 2 kv heads" -- "$bin/titan-init" "$cfg" "$tmp/t" $SMALL --model.n_kv_heads=2
# The sums over the tp group move device buffers through NCCL (or host
# mirrors of them with TITAN_COMM=shm); the vocabulary-parallel loss runs
# the logsumexp kernel and the cross-entropy kernel with a given lse.
cpu_vs_cuda "tp 2" "--parallelism.tensor_parallel_degree=2" "layout dp_replicate=1,dp_shard=1,cp=1,tp=2" "host mirrors"
# Async tensor parallelism on cuda: the tp group's shared windows are device
# memory the ranks map from each other (CUDA IPC; here the emulator's
# memfds), the collective matmuls' copies and sums device work; on the GPU
# both ranks share (to step 3), and on two GPUs over TITAN_COMM=shm (to
# step 2: the emulator takes ~4 s a step here), against the blocking tp 2
# runs above to tp_async.sh's bounds (loss 1e-5, grad norm 1e-6 relative;
# seen: the same bits, the emulated GEMMs round alike whatever the rows),
# and over NCCL (no windows) refused. Every step's
# exposed time below its total shows the windows ran (blocking
# collectives count whole in both).
ASYNC="--parallelism.tensor_parallel_degree=2 --parallelism.enable_async_tensor_parallel=true"
cp -r "$tmp/t" "$tmp/tpa" && cp -r "$tmp/t" "$tmp/tpa2"
expect 0 "" "train tp 2 async on one GPU both ranks share (device windows)" -- \
    emu "$bin/titan-train" --nproc 2 "$tmp/tpa" $CUDA $ASYNC --stop-at 3
d=$(close "$tmp/tps" "$tmp/tpa" 1e-5 1e-6 3) && ok "tp 2 async on one GPU = blocking ($d)" \
    || fail "tp 2 async on one GPU = blocking ($d)"
/usr/bin/python3 - "$tmp/tpa/metrics.jsonl" <<'PY' && ok "tp 2 async on cuda: exposed < total communication every step" \
    || fail "tp 2 async on cuda: exposed < total communication every step"
import json, sys
d = [json.loads(l) for l in open(sys.argv[1])]
sys.exit(0 if len(d) == 3 and all(0 <= x["comm_exposed_s"] < x["comm_total_s"] for x in d) else 1)
PY
expect 0 "" "train tp 2 async on two GPUs, TITAN_COMM=shm (device windows across GPUs)" -- \
    emu TITAN_EMU_DEVICES=2 TITAN_COMM=shm "$bin/titan-train" --nproc 2 "$tmp/tpa2" $CUDA $ASYNC --stop-at 2
d=$(close "$tmp/tpg" "$tmp/tpa2" 1e-5 1e-6 2) && ok "tp 2 async on two GPUs = blocking ($d)" \
    || fail "tp 2 async on two GPUs = blocking ($d)"
if [ "$COMMS" = nccl ]; then
    cp -r "$tmp/t" "$tmp/tpn"
    expect 2 "has no shared windows" "tp 2 async over NCCL (no windows) is refused" -- \
        emu TITAN_EMU_DEVICES=2 "$bin/titan-train" --nproc 2 "$tmp/tpn" $CUDA $ASYNC
fi
# Stage outputs and their gradients move as device buffers through NCCL's
# send/recv (or host copies of them with TITAN_COMM=shm), on two
# communicators, one a direction.
cpu_vs_cuda "pp 2" "--parallelism.pipeline_parallel_degree=2" "layout dp_replicate=1,dp_shard=1,cp=1,tp=1,pp=2" \
    "host copies"
# The whole sequence's keys and values are all-gathered, and their
# gradients reduce-scattered, as device buffers through NCCL (or host
# mirrors with TITAN_COMM=shm); the attention kernels take each rank's
# chunks of queries (Tq < Tk, at offsets 0 and 48, 16 and 32: the
# tensor-core kernel's diagonal off its 64-key tiles); FSDP shards over cp.
cpu_vs_cuda "cp 2" "--parallelism.context_parallel_degree=2" "layout dp_replicate=1,dp_shard=1,cp=2,tp=1,pp=1" \
    "host mirrors"
planned "cp 2 all-gather on cuda" "$tmp/cpg.err" 8
# The cp ring (rotate method "alltoall") on cuda: each rank's keys and
# values in the cp group's shared window of device memory (CUDA IPC, as
# async tp's), read in place by the peers' block attention
# (attention_forward_at: offset 0 on the diagonal block, every key on one
# before it), the blocks merged on the device (attention_merge); on the
# GPU both ranks share (to step 3) and on two GPUs over TITAN_COMM=shm (to
# step 2), against the all-gather on the same backend (RING_TOL: seen
# 5.5e-9 on the grad norm, the losses the same bits, on one GPU; the same
# bits on two) and the cpu's ring (close's fp32 bound; seen 4.5e-9); bf16
# (the tensor-core kernels at an offset) against the cuda all-gather's bf16
# (seen 6.4e-6 loss, 2.3e-6 grad norm); over NCCL (no windows) refused.
RING="--parallelism.context_parallel_degree=2 --parallelism.context_parallel_rotate_method=alltoall"
RING_TOL=2e-8
for r in cprc cprs cpr2 cprb; do cp -r "$tmp/t" "$tmp/$r"; done
expect 0 "" "train cp 2 ring on the cpu" -- "$bin/titan-train" -q --nproc 2 "$tmp/cprc" $RING
expect 0 "" "train cp 2 ring on one GPU both ranks share (device windows)" -- \
    emu "$bin/titan-train" --nproc 2 "$tmp/cprs" $CUDA $RING --stop-at 3
d=$(close "$tmp/cps" "$tmp/cprs" $RING_TOL $RING_TOL 3) && ok "cp 2 ring on one GPU = its all-gather ($d)" \
    || fail "cp 2 ring on one GPU = its all-gather ($d)"
d=$(close "$tmp/cprc" "$tmp/cprs" 1e-5 1e-5 3) && ok "cp 2 ring on cuda tracks the cpu's ring ($d)" \
    || fail "cp 2 ring on cuda tracks the cpu's ring ($d)"
expect 0 "" "train cp 2 ring on two GPUs, TITAN_COMM=shm (device windows across GPUs)" -- \
    emu TITAN_EMU_DEVICES=2 TITAN_COMM=shm "$bin/titan-train" --nproc 2 "$tmp/cpr2" $CUDA $RING --stop-at 2
# its buffers and window only, none of the all-gather's (the plan's)
planned "cp 2 ring on two GPUs" "$tmp/err" 8
d=$(close "$tmp/cpg" "$tmp/cpr2" $RING_TOL $RING_TOL 2) && ok "cp 2 ring on two GPUs = the all-gather ($d)" \
    || fail "cp 2 ring on two GPUs = the all-gather ($d)"
expect 0 "" "train cp 2 ring bf16 on two GPUs, TITAN_COMM=shm" -- \
    emu TITAN_EMU_DEVICES=2 TITAN_COMM=shm "$bin/titan-train" --nproc 2 "$tmp/cprb" $CUDA $RING $BF16 --stop-at 2
planned "cp 2 ring bf16 on two GPUs" "$tmp/err" 10
d=$(close "$tmp/cpbg" "$tmp/cprb" 2e-5 1e-5 2) && ok "cp 2 ring bf16 on cuda = the all-gather's bf16 ($d)" \
    || fail "cp 2 ring bf16 on cuda = the all-gather's bf16 ($d)"
if [ "$COMMS" = nccl ]; then
    cp -r "$tmp/t" "$tmp/cprn"
    expect 2 "without shared windows" "cp 2 ring over NCCL (no windows) is refused" -- \
        emu TITAN_EMU_DEVICES=2 "$bin/titan-train" --nproc 2 "$tmp/cprn" $CUDA $RING
fi

tap_end
