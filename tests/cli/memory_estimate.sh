#!/bin/sh
# CLI tests of the memory dry run (titan-train --dry-run, memory_estimation.enable):
# the estimate of every rank against the peak the backend's own allocator
# counted in a real run (backend.h's memory(): the buffers the estimate
# covers, nothing else; peak RSS would add the process's code, BLAS
# buffers, the tokenizer and the mapped shards, which do not scale with the
# model), within 10%, for one process (fp32, bf16, activation
# checkpointing full and op), FSDP 2 (fp32; bf16 with selective layer
# checkpointing) and cp 2 on cpu-guard (the CPU under a GPU's memory rules:
# FSDP's full buffers counted as committed pages), tp 2, pp 2 (1F1B, and
# GPipe with full checkpointing: the micro-batches in flight differ by
# stage; ZBVZeroBubble: two stages a rank in a V, its stash and hand-over), pp 2 x FSDP 2 and DDP 2 with bf16 reductions; and on the CUDA
# emulator's allocator (one process, fp32 and bf16 with op checkpointing;
# skipped where the emulator is not built). The dry run prints, for any
# world size, the figures each rank's run prints at start (the same code);
# it allocates nothing (405B over 512 ranks under a 1 GiB address-space
# limit); async tp on a GPU counts its shared window (8B, tp 8), the cp
# ring its window and buffers, no staging, and a ring the run refuses is
# refused alike (message, exit status). TAP output.
set -u
EXPECT_TIMEOUT=120
. "$(dirname "$0")/lib/tap.sh"
export TITAN_COMM_TIMEOUT=30

shard_man_corpus
cfg=$top/configs/debugmodel.toml
SMALL="--model.dim=128 --model.n_layers=2 --model.n_heads=4 --model.n_kv_heads=2 --model.multiple_of=16
 --training.seq_len=128 --training.local_batch_size=8 --training.steps=1 --checkpoint.interval=10
 --checkpoint.keep_latest_k=0 --lr_scheduler.warmup_steps=1 --training.dataset_path=$tmp/data
 --metrics.peak_flops=1e11 --training.threads=1"
"$bin/titan-init" -q "$cfg" "$tmp/run" $SMALL 2>"$tmp/err" && ok "init" || fail "init"
GUARD="--training.device=cpu-guard"
BF16="--training.mixed_precision_param=bfloat16"
PP2="--parallelism.pipeline_parallel_degree=2 --parallelism.pipeline_parallel_microbatch_size=1"

# within NAME RANKS: every one of RANKS ranks printed its measured peak beside
# its estimate, and each is within 10%; the figures go into the description.
within() {
    if /usr/bin/python3 - "$tmp/err" "$2" >"$tmp/within" 2>&1 <<'PY'
import re, sys
lines = open(sys.argv[1]).read()
got = re.findall(r"memory: rank (\d+): peak ([0-9.]+) MiB measured .*?, ([0-9.]+) MiB estimated \(([-+0-9.]+)%\)", lines)
ranks = sorted(int(r) for r, _, _, _ in got)
print(", ".join("rank %s %s/%s MiB %s%%" % g for g in sorted(got)))
sys.exit(0 if ranks == list(range(int(sys.argv[2]))) and all(abs(float(g[3])) <= 10 for g in got) else 1)
PY
    then ok "$1: estimate within 10% of the measured peak ($(cat "$tmp/within"))"
    else fail "$1: estimate within 10% of the measured peak ($(cat "$tmp/within"))"; fi
}

# layout NAME RANKS FLAGS...: a fresh copy of the run $base (default
# $tmp/run) trained one step with the estimate on, then checked with `within`.
layout() {
    name=$1 ranks=$2; shift 2
    rm -rf "$tmp/$name"; cp -r "${base:-$tmp/run}" "$tmp/$name"
    if [ "$ranks" = 1 ]; then
        expect 0 "memory estimate: rank 0: peak" "train $name with memory_estimation.enable" -- \
            "$bin/titan-train" "$tmp/$name" --memory_estimation.enable=true "$@"
    else
        expect 0 "memory estimate: rank 0: peak" "train $name with memory_estimation.enable" -- \
            "$bin/titan-train" "$tmp/$name" --nproc "$ranks" --memory_estimation.enable=true "$@"
    fi
    cp "$tmp/err" "$tmp/$name-err"
    within "$name" "$ranks"
}

layout single 1
layout ac-full 1 --activation_checkpoint.mode=full
layout bf16-op 1 $BF16 --activation_checkpoint.mode=selective --activation_checkpoint.selective_ac_option=op
layout fsdp2 2 $GUARD
layout fsdp2-bf16-ac2 2 $GUARD $BF16 --activation_checkpoint.mode=selective
layout tp2 2 --parallelism.tensor_parallel_degree=2
layout pp2 2 $PP2
layout pp2-gpipe-full 2 $PP2 --parallelism.pipeline_parallel_schedule=GPipe --activation_checkpoint.mode=full
layout pp2-zbv 2 $PP2 --parallelism.pipeline_parallel_schedule=ZBVZeroBubble
layout cp2 2 $GUARD --parallelism.context_parallel_degree=2 --parallelism.data_parallel_shard_degree=1
layout pp2-fsdp2 4 $GUARD --parallelism.pipeline_parallel_degree=2 --parallelism.pipeline_parallel_microbatch_size=2
layout ddp2-bf16-reduce 2 $GUARD --parallelism.data_parallel_replicate_degree=2 \
    --parallelism.data_parallel_shard_degree=1 --training.mixed_precision_reduce=bfloat16

# The dry run's per-rank peaks are the run's own estimate lines (pp 2: the
# stages differ), without starting a rank.
expect 0 "" "dry run of pp 2 (--world-size 2)" -- "$bin/titan-train" --dry-run "$tmp/run" --world-size 2 $PP2
cp "$tmp/out" "$tmp/dry"
for r in 0 1; do
    want=$(sed -n "s/.*memory estimate: rank $r: peak \([0-9.]*\) MiB.*/\1/p" "$tmp/pp2-err" 2>/dev/null)
    have=$(awk -v r="$r" '$NF == r {print $12}' "$tmp/dry")
    [ -n "$have" ] && [ "$have" = "$want" ] && ok "dry run rank $r's peak = the run's estimate ($have MiB)" \
        || fail "dry run rank $r's peak = the run's estimate (dry run '$have', run '$want')"
done
grep -q "^ *1 .* 1$" "$tmp/dry" && grep -q "1F1B" "$tmp/dry" && ok "dry run: one line per stage, the schedule named" \
    || fail "dry run: one line per stage, the schedule named"
expect 0 "" "dry run with --nproc 4 names 4 ranks" -- "$bin/titan-train" --dry-run "$tmp/run" --nproc 4
grep -q "^memory estimate: 4 ranks (dp_replicate=1,dp_shard=4" "$tmp/out" && ok "--nproc gives the dry run's world" \
    || fail "--nproc gives the dry run's world"
[ ! -e "$tmp/run/metrics.jsonl" ] && ok "the dry runs trained nothing" || fail "the dry runs trained nothing"

# Nothing is allocated: Llama 3 405B (pp 8 x tp 8 x FSDP 8) under a 1 GiB
# address-space limit, in well under a second of CPU.
BIG="--model.flavor=405B --model.dim=0 --model.n_layers=0 --model.n_heads=0 --model.n_kv_heads=0
 --model.multiple_of=0 --training.seq_len=8192 --training.local_batch_size=32 $BF16 --training.device=cuda
 --parallelism.tensor_parallel_degree=8 --activation_checkpoint.mode=full $PP2"
expect 0 "" "dry run of 405B on 512 ranks under ulimit -v 1 GiB" -- \
    sh -c 'ulimit -v 1048576 && exec "$@"' sh "$bin/titan-train" --dry-run "$tmp/run" --world-size 512 $BIG \
    --parallelism.pipeline_parallel_degree=8
grep -q "^memory estimate: 512 ranks (dp_replicate=1,dp_shard=8,cp=1,tp=8,pp=8), device cuda" "$tmp/out" &&
    [ "$(awk '$NF ~ /^[0-9,-]+$/ {print $1}' "$tmp/out" | sort -u | tr '\n' ' ')" = "0 1 2 3 4 5 6 7 " ] &&
    grep -q " 64-127$" "$tmp/out" && ok "405B: every pipeline stage's ranks estimated" \
    || fail "405B: every pipeline stage's ranks estimated"

# Async tp on a GPU holds a shared window of device memory: 2 x N x C x
# bf16 = 128 MiB a rank for 8B at seq_len 8192 (comm.bufs, and held).
EIGHT="--model.flavor=8B --model.dim=0 --model.n_layers=0 --model.n_heads=0 --model.n_kv_heads=0
 --model.multiple_of=0 --training.seq_len=8192 --training.local_batch_size=1 $BF16 --training.device=cuda
 --parallelism.tensor_parallel_degree=8"
# (over shm: the windows are shm's; over nccl, auto's choice on cuda, the
# run refuses async tp, and so does the dry run)
expect 0 "" "dry run of 8B with tp 8" -- "$bin/titan-train" --dry-run "$tmp/run" --world-size 8 $EIGHT \
    --comm.backend=shm
awk '$NF == "0-6" {print $9, $11}' "$tmp/out" >"$tmp/sync8b"
expect 0 "" "dry run of 8B with async tp 8" -- "$bin/titan-train" --dry-run "$tmp/run" --world-size 8 $EIGHT \
    --parallelism.enable_async_tensor_parallel=true --comm.backend=shm
awk '$NF == "0-6" {print $9, $11}' "$tmp/out" >"$tmp/async8b"
read -r bufs0 held0 <"$tmp/sync8b"; read -r bufs1 held1 <"$tmp/async8b"
[ "$bufs0" = 0.0 ] && [ "$bufs1" = 128.0 ] &&
    [ "$(awk -v a="$held0" -v b="$held1" 'BEGIN {printf "%.1f", b - a}')" = 128.0 ] &&
    ok "async tp's device window: 128 MiB more comm.bufs and held ($held0 -> $held1 MiB)" ||
    fail "async tp's device window: 128 MiB more comm.bufs and held (comm.bufs $bufs0 -> $bufs1, held $held0 -> $held1)"
expect 2 "async tensor parallelism needs a tp group whose ranks address each other's buffers" \
    "dry run of async tp 8 over nccl (cuda's auto): refused, as the run refuses it" -- \
    "$bin/titan-train" --dry-run "$tmp/run" --world-size 8 $EIGHT --parallelism.enable_async_tensor_parallel=true

# The cp ring on a GPU (over shm: auto is nccl there, which the ring
# refuses) adds its device window, 2 x cp x [k | v] of a rank's rows: L =
# 8192 / (2 x 2) = 2048 tokens a chunk, [k | v] = 2 x (1 x 2 x 2048 x 8 kv
# heads x 128 x 2 bytes) = 16 MiB, the window 2 x 2 x 16 = 64 MiB; its
# merge's scratch, the rank's out in fp32 (1 x 2 x 2048 x 4096 x 4 = 64
# MiB), a block's out (2048 x 4096 x 2 = 16 MiB) and lse (2048 x 32 x 4 =
# 0.25 MiB); and its [k | v] pack and the reduce-scatter's [dk | dv] (16
# MiB each), where the all-gather holds five whole-sequence buffers (8192 x
# 8 x 128 x 2 = 16 MiB each): 64 + 64 + 16 + 0.25 + 32 - 80 = 96.25 MiB
# more comm.bufs and held. The ring reserves no staging on the cp group:
# the all-gather's host mirror of one whole-sequence buffer (16 MiB) is
# not made, 16 MiB less of collective mirrors.
SHM="--comm.backend=shm"
expect 0 "" "dry run of 8B with cp 2 over shm" -- "$bin/titan-train" --dry-run "$tmp/run" --world-size 2 $EIGHT $SHM \
    --parallelism.tensor_parallel_degree=1 --parallelism.context_parallel_degree=2
awk '$NF == "0-1" {print $9, $11}' "$tmp/out" >"$tmp/cpag"
mirrors_ag=$(sed -n 's/.*adds at most: \([0-9.]*\) MiB of collective mirrors.*/\1/p' "$tmp/out")
expect 0 "" "dry run of 8B with the cp 2 ring over shm" -- "$bin/titan-train" --dry-run "$tmp/run" --world-size 2 \
    $EIGHT $SHM --parallelism.tensor_parallel_degree=1 --parallelism.context_parallel_degree=2 \
    --parallelism.context_parallel_rotate_method=alltoall
awk '$NF == "0-1" {print $9, $11}' "$tmp/out" >"$tmp/cpring"
mirrors_ring=$(sed -n 's/.*adds at most: \([0-9.]*\) MiB of collective mirrors.*/\1/p' "$tmp/out")
read -r bufs0 held0 <"$tmp/cpag"; read -r bufs1 held1 <"$tmp/cpring"
d_bufs=$(awk -v a="$bufs0" -v b="$bufs1" 'BEGIN {printf "%.1f", b - a}')
d_held=$(awk -v a="$held0" -v b="$held1" 'BEGIN {printf "%.1f", b - a}')
case "$d_bufs $d_held" in
"96.2 96.2"|"96.2 96.3"|"96.3 96.2"|"96.3 96.3") ok "the cp ring's device window and buffers: 96.25 MiB more comm.bufs and held" ;;
*) fail "the cp ring's device window and buffers: 96.25 MiB more (comm.bufs $bufs0 -> $bufs1, held $held0 -> $held1)" ;;
esac
[ -n "$mirrors_ag" ] && [ "$(awk -v a="$mirrors_ag" -v b="$mirrors_ring" 'BEGIN {printf "%.1f", a - b}')" = 16.0 ] &&
    ok "the cp ring reserves no staging: 16 MiB less of host mirrors ($mirrors_ag -> $mirrors_ring MiB)" ||
    fail "the cp ring reserves no staging: 16 MiB less of host mirrors ('$mirrors_ag' -> '$mirrors_ring' MiB)"
# The dry run refuses the ring where the run does (titan_llama_create_ex:
# exit 2, the same message): no shared windows over nccl (cuda's auto) or
# mpi, none on cpu-guard; TITAN_COMM=shm, the hint's way, is taken.
RING8="$EIGHT --parallelism.tensor_parallel_degree=1 --parallelism.context_parallel_degree=2
 --parallelism.context_parallel_rotate_method=alltoall"
NOWIN="this run has cuda without shared windows (a nccl or mpi communicator, or more ranks)"
for c in auto nccl mpi; do
    expect 2 "$NOWIN" "dry run of the cp ring over comm.backend = $c on cuda: refused" -- \
        "$bin/titan-train" --dry-run "$tmp/run" --world-size 2 $RING8 --comm.backend=$c
done
grep -q "^hint: with the cuda backend and ranks on one host, TITAN_COMM=shm gives the cp group shared windows" \
    "$tmp/err" && ok "the dry run's refusal has the run's hint" || fail "the dry run's refusal has the run's hint"
expect 0 "" "dry run of the cp ring on cuda with TITAN_COMM=shm" -- \
    env TITAN_COMM=shm "$bin/titan-train" --dry-run "$tmp/run" --world-size 2 $RING8
expect 2 "this run has cpu-guard, whose buffers the peers cannot map" "dry run of the cp ring on cpu-guard: refused" -- \
    "$bin/titan-train" --dry-run "$tmp/run" --world-size 2 --parallelism.context_parallel_degree=2 \
    --parallelism.data_parallel_shard_degree=1 --parallelism.context_parallel_rotate_method=alltoall $GUARD
cp "$tmp/err" "$tmp/guard-dry-err"
rm -rf "$tmp/guardring"; cp -r "$tmp/run" "$tmp/guardring"
expect 2 "whose buffers the peers cannot map" "the run of the cp ring on cpu-guard: refused" -- \
    "$bin/titan-train" --nproc 2 "$tmp/guardring" --parallelism.context_parallel_degree=2 \
    --parallelism.data_parallel_shard_degree=1 --parallelism.context_parallel_rotate_method=alltoall $GUARD
grep "^titan-train: error: " "$tmp/guard-dry-err" >"$tmp/guard-dry-msg"
grep -q -F -f "$tmp/guard-dry-msg" "$tmp/err" && ok "cpu-guard: the dry run's refusal is the run's message" ||
    fail "cpu-guard: the dry run's refusal is the run's message ($(cat "$tmp/guard-dry-msg"))"
expect 0 "" "dry run of the cp ring on the cpu (auto: shm on one host)" -- \
    "$bin/titan-train" --dry-run "$tmp/run" --world-size 2 --parallelism.context_parallel_degree=2 \
    --parallelism.data_parallel_shard_degree=1 --parallelism.context_parallel_rotate_method=alltoall

expect 2 "world-size: only with --dry-run" "--world-size without --dry-run is a usage error" -- \
    "$bin/titan-train" "$tmp/run" --world-size 2
expect 2 "cannot be split" "a world the degrees do not fit is refused" -- \
    "$bin/titan-train" --dry-run "$tmp/run" --world-size 3 --parallelism.tensor_parallel_degree=2
"$bin/titan-train" --print-config "$tmp/run" --memory_estimation.enable=true 2>"$tmp/err" | grep -A2 "^\[memory_estimation\]" |
    grep -q "^enable = true" && ok "memory_estimation.enable is a key of the job" || fail "memory_estimation.enable is a key of the job"

# The CUDA backend's allocator, on the emulator (one process).
EMU=$top/build/emu/libtitan-cuda-emu.so
if [ -f "$EMU" ]; then
    export TITAN_CUDA_LIB="$EMU"
    "$bin/titan-init" -q "$cfg" "$tmp/emu" $SMALL --model.dim=64 --training.seq_len=64 --training.local_batch_size=2 \
        2>"$tmp/err" && ok "init a smaller run for the emulator" || fail "init a smaller run for the emulator"
    base=$tmp/emu
    layout cuda-emu 1 --training.device=cuda
    layout cuda-emu-bf16-op 1 --training.device=cuda $BF16 --activation_checkpoint.mode=selective \
        --activation_checkpoint.selective_ac_option=op
    # The cp ring over NCCL (the emulator's): the run's refusal is the dry run's.
    if nm -D "$EMU" 2>/dev/null | grep -q titan_cuda_nccl_api; then
        RINGE="--training.device=cuda --parallelism.context_parallel_degree=2
         --parallelism.context_parallel_rotate_method=alltoall"
        expect 2 "$NOWIN" "dry run of the cp ring on cuda (auto: nccl): refused" -- \
            "$bin/titan-train" --dry-run "$tmp/emu" --world-size 2 $RINGE
        grep "^titan-train: error: " "$tmp/err" >"$tmp/nccl-dry-msg"
        cp -r "$tmp/emu" "$tmp/emu-ring"
        expect 2 "$NOWIN" "the run of the cp ring over the emulator's NCCL: refused" -- \
            env TITAN_EMU_DEVICES=2 "$bin/titan-train" --nproc 2 "$tmp/emu-ring" $RINGE
        [ -s "$tmp/nccl-dry-msg" ] && grep -q -F -f "$tmp/nccl-dry-msg" "$tmp/err" &&
            ok "nccl: the dry run's refusal is the run's message" ||
            fail "nccl: the dry run's refusal is the run's message ($(cat "$tmp/nccl-dry-msg"))"
    else
        skip "the cp ring over NCCL: the run's refusal is the dry run's" "the emulator has no NCCL"
    fi
else
    skip "estimate on the CUDA emulator" "no emulator library ($EMU: built where nvcc is)"
fi

# scripts/deepest-8b.sh (bench_gpu.sh's BENCH_8B_LAYERS=auto): the most of
# the 8B's layers whose dry run fits 0.85 of an H100's 81559 MiB at seq_len
# 8192, checked against the dry run one layer deeper
/usr/bin/python3 "$top/scripts/torch_gpu_bench.py" --write-tiktoken "$tmp/l3.tiktoken" 2>"$tmp/err"
D8="--gpu-mib 81559 --tokenizer tiktoken:$tmp/l3.tiktoken"
if d=$(sh "$top/scripts/deepest-8b.sh" $D8 2>"$tmp/err"); then
    deep=${d%% *} p=${d#* }
    more=$(TITAN_NO_REEXEC=1 "$bin/titan-train" --dry-run --job.config_file "$top/configs/debugmodel.toml" \
        --model.flavor=8B --model.tokenizer="tiktoken:$tmp/l3.tiktoken" --model.dim=4096 \
        --model.n_layers=$((deep + 1)) --model.n_heads=32 --model.n_kv_heads=8 --training.seq_len=8192 \
        --training.local_batch_size=1 --training.device=cuda --training.mixed_precision_param=bfloat16 2>/dev/null |
        sed -n 's/^  peak of the job.s ranks: \([0-9.]*\) MiB.*/\1/p')
    awk -v n="$deep" -v p="$p" -v q="$more" 'BEGIN { m = 81559 * 0.85; exit !(n >= 1 && n < 32 && p <= m && q > m) }' &&
        ok "deepest-8b: $deep layers fit an 80 GB H100 at seq_len 8192 ($p MiB planned; $((deep + 1)): ${more:-?} MiB)" ||
        fail "deepest-8b: '$d', one layer deeper '$more' MiB (limit 0.85 x 81559)"
else
    fail "deepest-8b runs ($(tail -n 1 "$tmp/err"))"
fi
d2=$(sh "$top/scripts/deepest-8b.sh" $D8 --float8 rowwise 2>"$tmp/err") && [ "${d2%% *}" -le "${d%% *}" ] &&
    ok "deepest-8b with float8 rowwise's scratch: no deeper (${d2%% *} layers)" ||
    fail "deepest-8b with float8 rowwise's scratch: '$d2' against '$d'"
[ "$(sh "$top/scripts/deepest-8b.sh" --gpu-mib 100 --tokenizer "tiktoken:$tmp/l3.tiktoken" 2>&1)" = "0 -" ] &&
    ok "deepest-8b: a GPU too small for one layer: 0" || fail "deepest-8b: a GPU too small for one layer: 0"
expect 2 "expected a number in (0, 1]" "deepest-8b: a fraction above 1 refused" -- \
    sh "$top/scripts/deepest-8b.sh" $D8 --fraction 1.5
expect 2 "--tokenizer is required" "deepest-8b: no tokenizer refused" -- sh "$top/scripts/deepest-8b.sh" --gpu-mib 81559
tap_end
