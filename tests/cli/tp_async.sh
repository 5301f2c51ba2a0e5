#!/bin/sh
# CLI tests of communication overlapped with compute: async tensor
# parallelism (parallelism.enable_async_tensor_parallel, also spelt
# compile.enable_async_tensor_parallel): the sequence-parallel all-gathers
# and reduce-scatters run as collective matmuls over the shm
# communicator's shared windows. Against the blocking collectives in the
# same run: the same sums in the same rank order, the products cut by rows
# (OpenBLAS may round a shorter product differently), so the curves agree
# to tp_train.sh's bounds: fp32 loss 1e-5 relative, grad norm 1e-6 (seen:
# 4e-8 and 5e-9); bf16 1e-4 and 1e-3. Also tp 4, tp x FSDP, cp x tp,
# activation checkpointing (bit for bit the same as without, async both),
# checkpoints that resume across async and blocking both ways, the metrics
# (exposed <= total communication), the later spelling, and the refusals:
# without sequence parallelism, on cpu-guard (no host buffers). And context
# parallelism's ring (parallelism.context_parallel_rotate_method =
# "alltoall") against its all-gather, cp 2 and 4, fp32 and bf16, resumed
# across. The whole tp and cp suites run with them on under
# TITAN_TEST_ASYNC_TP=1 and TITAN_TEST_CP_RING=1 (tiny.sh). TAP output.
set -u
. "$(dirname "$0")/lib/tiny.sh"

shard_man_corpus

ON="--parallelism.enable_async_tensor_parallel=true"
OFF="--parallelism.enable_async_tensor_parallel=false"
TP="--parallelism.tensor_parallel_degree=2"
TP4="--parallelism.tensor_parallel_degree=4"
WIDE="--model.n_heads=8 --model.n_kv_heads=4"
CP2="--parallelism.context_parallel_degree=2"

for r in b2 a2 a2c af bbf abf bfs afs bcp acp half half2 bad; do
    "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY 2>"$tmp/err" || fail "init $r"
done
for r in b4 a4; do "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY $WIDE 2>"$tmp/err" || fail "init $r"; done

# --- the blocking curve, async on ------------------------------------------------------
expect 0 "" "train tp 2, blocking" -- "$bin/titan-train" -q "$tmp/b2" --nproc 2 $TP $OFF
expect 0 "" "train tp 2, async" -- "$bin/titan-train" -q "$tmp/a2" --nproc 2 $TP $ON
curve "tp 2: async = blocking" "$tmp/b2" "$tmp/a2"
expect 0 "" "train tp 2, async by compile.enable_async_tensor_parallel" -- "$bin/titan-train" -q "$tmp/a2c" --nproc 2 \
    $TP --compile.enable_async_tensor_parallel=true
same_bits "compile.enable_async_tensor_parallel = parallelism.enable_async_tensor_parallel" "$tmp/a2" "$tmp/a2c"
expect 0 "" "train tp 4 (8 heads), blocking" -- "$bin/titan-train" -q "$tmp/b4" --nproc 4 $TP4 $OFF
expect 0 "" "train tp 4 (8 heads), async" -- "$bin/titan-train" -q "$tmp/a4" --nproc 4 $TP4 $ON
curve "tp 4: async = blocking" "$tmp/b4" "$tmp/a4"
expect 0 "" "train bf16 tp 2, blocking" -- "$bin/titan-train" -q "$tmp/bbf" --nproc 2 $TP $OFF $BF16
expect 0 "" "train bf16 tp 2, async" -- "$bin/titan-train" -q "$tmp/abf" --nproc 2 $TP $ON $BF16
curve "bf16 tp 2: async = blocking" "$tmp/bbf" "$tmp/abf" 1 1e-4 1e-3
expect 0 "" "train tp 2 x FSDP 2, blocking" -- "$bin/titan-train" -q "$tmp/bfs" --nproc 4 $TP $OFF
expect 0 "" "train tp 2 x FSDP 2, async" -- "$bin/titan-train" -q "$tmp/afs" --nproc 4 $TP $ON
curve "tp 2 x FSDP 2: async = blocking" "$tmp/bfs" "$tmp/afs"
expect 0 "" "train cp 2 x tp 2, blocking" -- "$bin/titan-train" -q "$tmp/bcp" --nproc 4 $CP2 $TP $OFF
expect 0 "" "train cp 2 x tp 2, async" -- "$bin/titan-train" -q "$tmp/acp" --nproc 4 $CP2 $TP $ON
curve "cp 2 x tp 2: async = blocking" "$tmp/bcp" "$tmp/acp"
expect 0 "" "train tp 2, async, full activation checkpointing" -- "$bin/titan-train" -q "$tmp/af" --nproc 2 $TP $ON \
    --activation_checkpoint.mode=full
same_bits "async tp 2: full checkpointing = none, bit for bit" "$tmp/a2" "$tmp/af"
exposed_comm "async tp 2 metrics: 0 < exposed <= total communication" "$tmp/a2"

# --- checkpoints interchange -------------------------------------------------------------
expect 0 "" "blocking tp 2 to step 10" -- "$bin/titan-train" -q "$tmp/half" --nproc 2 $TP $OFF --stop-at 10
expect 0 "" "resume it async" -- "$bin/titan-train" -q "$tmp/half" --nproc 2 $TP $ON
curve "blocking -> async resume continues the blocking curve" "$tmp/b2" "$tmp/half" 11
expect 0 "" "async tp 2 to step 10" -- "$bin/titan-train" -q "$tmp/half2" --nproc 2 $TP $ON --stop-at 10
expect 0 "" "resume it blocking" -- "$bin/titan-train" -q "$tmp/half2" --nproc 2 $TP $OFF
curve "async -> blocking resume continues the blocking curve" "$tmp/b2" "$tmp/half2" 11

# --- context parallelism's ring (rotate method "alltoall") against the all-gather ------------
# The blocks' outputs merged by online softmax (fp32, then rounded): the
# same bounds (seen: losses 1.9e-8, norms 8.6e-9 at cp 2 and 4; bf16 2.3e-5
# and 2.9e-5 under 1e-4 and 1e-3).
RING="--parallelism.context_parallel_rotate_method=alltoall"
GATHER="--parallelism.context_parallel_rotate_method=allgather"
CP4="--parallelism.context_parallel_degree=4"
for r in cg2 cr2 cg4 cr4 cgbf crbf chalf; do "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY 2>"$tmp/err" || fail "init $r"; done
expect 0 "" "train cp 2, all-gather" -- "$bin/titan-train" -q "$tmp/cg2" --nproc 2 $CP2 $GATHER
expect 0 "" "train cp 2, ring" -- "$bin/titan-train" -q "$tmp/cr2" --nproc 2 $CP2 $RING
curve "cp 2: ring = all-gather" "$tmp/cg2" "$tmp/cr2"
expect 0 "" "train cp 4, all-gather" -- "$bin/titan-train" -q "$tmp/cg4" --nproc 4 $CP4 $GATHER
expect 0 "" "train cp 4, ring" -- "$bin/titan-train" -q "$tmp/cr4" --nproc 4 $CP4 $RING
curve "cp 4: ring = all-gather" "$tmp/cg4" "$tmp/cr4"
expect 0 "" "train bf16 cp 2, all-gather" -- "$bin/titan-train" -q "$tmp/cgbf" --nproc 2 $CP2 $GATHER $BF16
expect 0 "" "train bf16 cp 2, ring" -- "$bin/titan-train" -q "$tmp/crbf" --nproc 2 $CP2 $RING $BF16
curve "bf16 cp 2: ring = all-gather" "$tmp/cgbf" "$tmp/crbf" 1 1e-4 1e-3
exposed_comm "cp 2 ring metrics: 0 < exposed <= total communication" "$tmp/cr2"
expect 0 "" "all-gather cp 2 to step 10" -- "$bin/titan-train" -q "$tmp/chalf" --nproc 2 $CP2 $GATHER --stop-at 10
expect 0 "" "resume it with the ring" -- "$bin/titan-train" -q "$tmp/chalf" --nproc 2 $CP2 $RING
curve "all-gather -> ring resume continues the all-gather curve" "$tmp/cg2" "$tmp/chalf" 11

# --- refusals ------------------------------------------------------------------------------
expect 2 "needs a cp group whose ranks address each other's buffers" \
    "the ring on cpu-guard is refused" -- "$bin/titan-train" "$tmp/bad" --nproc 2 $CP2 $RING $GUARD
expect 2 "context_parallel_rotate_method" "an unknown rotate method is refused" -- \
    "$bin/titan-train" "$tmp/bad" --nproc 2 $CP2 --parallelism.context_parallel_rotate_method=ring
expect 2 "async tensor parallelism runs the sequence-parallel collectives as collective matmuls: it needs sequence parallelism" \
    "async without sequence parallelism is refused" -- "$bin/titan-train" "$tmp/bad" --nproc 2 $TP $ON \
    --parallelism.enable_sequence_parallel=false
expect 2 "has no shared windows" "async on cpu-guard (device buffers) is refused" -- \
    "$bin/titan-train" "$tmp/bad" --nproc 2 $TP $ON $GUARD
[ ! -e "$tmp/bad/metrics.jsonl" ] && ok "the refused runs trained nothing" || fail "the refused runs trained nothing"

tap_end
