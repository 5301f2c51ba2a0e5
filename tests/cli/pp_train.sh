#!/bin/sh
# CLI tests of pipeline parallelism (parallelism.pipeline_parallel_degree,
# _schedule, _microbatch_size): a tiny model trained 20 steps as one
# process and cut into stages, alone and composed with tp, DDP and FSDP.
# A pipeline adds each local batch's micro-batch gradients one at a time
# instead of in one matmul, and sums the clipping norm over the stages,
# which regroups float sums only: the curves must agree to tp_train.sh's
# fp32 bounds (loss 1e-5 relative, grad norm 1e-6; seen: 8e-8 and 3e-8),
# bf16 compute to 1e-4 and 1e-3. The schedule changes no bit (backwards
# run in micro-batch order on every stage: 1F1B and GPipe write the same
# checkpoint), nor does full activation checkpointing. Also: pp 4 over 2
# layers (a stage each for the embedding, the layers and the head), 4
# micro-batches over 2 stages (1F1B's steady state), one micro-batch a
# local batch, Interleaved1F1B and LoopedBFS (2 stages a rank: the
# embedding, the layers and the head a stage each over pp 2) alone and with
# FSDP and tp, an Interleaved1F1B checkpoint resumed as one process, the
# stage-split keys, the device path (cpu-guard: the CPU's checkpoint byte for
# byte), checkpoints that resume across pp and one process, validation
# (forward-only micro-batches), mpirun, the pipeline's waits in the
# metrics as exposed communication, and the refusals: tied embeddings,
# more stages than layers + 2, a micro-batch size that does not divide the
# local batch, an unknown schedule, --sample. TAP output.
set -u
. "$(dirname "$0")/lib/tiny.sh"

shard_man_corpus

# 4 sequences a rank, 8 a step: 4 micro-batches of 1 over 2 stages
BATCH4="--training.local_batch_size=4 --training.global_batch_size=8"
PP2="--parallelism.pipeline_parallel_degree=2"
PP4="--parallelism.pipeline_parallel_degree=4"
GPIPE="--parallelism.pipeline_parallel_schedule=GPipe"

for r in il bfs ilfsdp iltp ilhalf ilhalf1 lps; do
    "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY 2>"$tmp/err" || fail "init $r"
done
for r in single pp2 gpipe pp4 pp2tp2 pp2ddp pp2fsdp pp2fsdpa pp8 mb2 pp2full bf1 bf2 g2 half half1 half2; do
    "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY 2>"$tmp/err" || fail "init $r"
done
for r in b4single b4pp2 b4gpipe; do "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY $BATCH4 2>"$tmp/err" || fail "init $r"; done
"$bin/titan-init" -q "$cfg" "$tmp/tied" $TINY --model.tie_embeddings=true 2>"$tmp/err" || fail "init tied"

# --- the loss curve of every layout is the one process's --------------------------
expect 0 "" "train 20 steps, one process" -- "$bin/titan-train" -q "$tmp/single"
expect 0 "pipeline: stage 0 of 2 (this rank's parameters: 20608), 1F1B schedule, 2 micro-batches of 1 x 32" \
    "train pp 2 (1F1B)" -- "$bin/titan-train" "$tmp/pp2" --nproc 2 $PP2
curve "pp 2 loss curve = one process" "$tmp/single" "$tmp/pp2"
expect 0 "GPipe schedule" "train pp 2, GPipe" -- "$bin/titan-train" "$tmp/gpipe" --nproc 2 $PP2 $GPIPE
curve "pp 2 GPipe loss curve = one process" "$tmp/single" "$tmp/gpipe"
# stage 0 holds the embedding alone (258 x 32 parameters), stage 3 the head
expect 0 "pipeline: stage 0 of 4 (this rank's parameters: 8256)" "train pp 4 over 2 layers (one block a stage)" -- \
    "$bin/titan-train" "$tmp/pp4" --nproc 4 $PP4
curve "pp 4 loss curve = one process" "$tmp/single" "$tmp/pp4"
expect 0 "" "train pp 2 x tp 2" -- "$bin/titan-train" -q "$tmp/pp2tp2" --nproc 4 $PP2 $TP2
curve "pp 2 x tp 2 loss curve = one process" "$tmp/single" "$tmp/pp2tp2"
expect 0 "" "train pp 2 x DDP 2" -- "$bin/titan-train" -q "$tmp/pp2ddp" --nproc 4 $PP2 $DDP
curve "pp 2 x DDP 2 loss curve = one process" "$tmp/single" "$tmp/pp2ddp"
expect 0 "" "train pp 2 x FSDP 2 (freed blocks poisoned)" -- env TITAN_FSDP_POISON=1 "$bin/titan-train" -q \
    "$tmp/pp2fsdp" --nproc 4 $PP2
curve "pp 2 x FSDP 2 loss curve = one process" "$tmp/single" "$tmp/pp2fsdp"
# the default keeps gathered blocks from forward to backward under pp;
# always gathers them again for every micro-batch
expect 0 "" "train pp 2 x FSDP 2, reshard after every forward (poisoned)" -- env TITAN_FSDP_POISON=1 \
    "$bin/titan-train" -q "$tmp/pp2fsdpa" --nproc 4 $PP2 --parallelism.fsdp_reshard_after_forward=always
curve "pp 2 x FSDP 2 resharding after forward = one process" "$tmp/single" "$tmp/pp2fsdpa"
expect 0 "layout dp_replicate=2,dp_shard=1,cp=1,tp=2,pp=2" "train pp 2 x tp 2 x DDP 2 (8 ranks)" -- \
    "$bin/titan-train" "$tmp/pp8" --nproc 8 $PP2 $TP2 $DDP
curve "pp 2 x tp 2 x DDP 2 loss curve = one process" "$tmp/single" "$tmp/pp8"
expect 0 "1 micro-batches of 2 x 32" "train pp 2, micro-batch size 2 (one a local batch)" -- \
    "$bin/titan-train" "$tmp/mb2" --nproc 2 $PP2 --parallelism.pipeline_parallel_microbatch_size=2
curve "pp 2 with one micro-batch = one process" "$tmp/single" "$tmp/mb2"
expect 0 "" "train local batch 4, global 8, one process" -- "$bin/titan-train" -q "$tmp/b4single"
expect 0 "4 micro-batches of 1 x 32, 2 in flight" "train pp 2, 4 micro-batches (1F1B steady state)" -- \
    "$bin/titan-train" "$tmp/b4pp2" --nproc 2 $PP2
curve "pp 2 with 4 micro-batches = one process" "$tmp/b4single" "$tmp/b4pp2"
expect 0 "4 micro-batches of 1 x 32, 4 in flight" "train pp 2, 4 micro-batches, GPipe" -- \
    "$bin/titan-train" "$tmp/b4gpipe" --nproc 2 $PP2 $GPIPE
expect 0 "" "train bf16 compute, one process" -- "$bin/titan-train" -q "$tmp/bf1" $BF16
expect 0 "" "train bf16 compute, pp 2" -- "$bin/titan-train" -q "$tmp/bf2" --nproc 2 $PP2 $BF16
curve "bf16: pp 2 = one process" "$tmp/bf1" "$tmp/bf2" 1 1e-4 1e-3

under_mpirun "pp 2" "$PP2"

# --- several stages a rank: stage s on pp rank s % 2 (torch's looped placement) ---------
IL="--parallelism.pipeline_parallel_schedule=Interleaved1F1B"
BFS="--parallelism.pipeline_parallel_schedule=LoopedBFS"
expect 0 "pipeline: stages 0, 2 of 4 (this rank's parameters: 20608), Interleaved1F1B schedule" \
    "train pp 2, Interleaved1F1B (2 stages a rank)" -- "$bin/titan-train" "$tmp/il" --nproc 2 $PP2 $IL
curve "pp 2 Interleaved1F1B loss curve = one process" "$tmp/single" "$tmp/il"
expect 0 "LoopedBFS schedule" "train pp 2, LoopedBFS" -- "$bin/titan-train" "$tmp/bfs" --nproc 2 $PP2 $BFS
curve "pp 2 LoopedBFS loss curve = one process" "$tmp/single" "$tmp/bfs"
expect 0 "" "train pp 2 x FSDP 2, Interleaved1F1B (poisoned)" -- env TITAN_FSDP_POISON=1 "$bin/titan-train" -q \
    "$tmp/ilfsdp" --nproc 4 $PP2 $IL
curve "pp 2 x FSDP 2 Interleaved1F1B loss curve = one process" "$tmp/single" "$tmp/ilfsdp"
expect 0 "" "train pp 2 x tp 2, Interleaved1F1B" -- "$bin/titan-train" -q "$tmp/iltp" --nproc 4 $PP2 $TP2 $IL
curve "pp 2 x tp 2 Interleaved1F1B loss curve = one process" "$tmp/single" "$tmp/iltp"
# Stage messages larger than a send ring (256 KiB): a send then waits for
# its receiver, and a rank's gradient send must not wait for the next
# backward (each slot's outgoing gradient has its own buffer). 512 KiB
# messages (dim 128 x 512 tokens x 2 sequences, fp32), 3 steps: the
# interleaved schedule finishes, on 1F1B's losses (the same sums).
BIG="--model.dim=128 --model.multiple_of=16 --training.seq_len=512 --training.local_batch_size=4
 --training.global_batch_size=4 --training.steps=3 --parallelism.pipeline_parallel_microbatch_size=2"
for r in big1 bigil; do "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY $BIG 2>"$tmp/err" || fail "init $r"; done
expect 0 "" "train pp 2, 1F1B, 512 KiB stage messages" -- "$bin/titan-train" -q "$tmp/big1" --nproc 2 $PP2
expect 0 "" "train pp 2, Interleaved1F1B, 512 KiB stage messages (no deadlock)" -- \
    "$bin/titan-train" -q "$tmp/bigil" --nproc 2 $PP2 $IL
same_bits_3() {
    /usr/bin/python3 - "$1/metrics.jsonl" "$2/metrics.jsonl" <<'PY'
import json, sys
a, b = ([(d["step"], d["loss"], d["grad_norm"]) for d in map(json.loads, open(p))] for p in sys.argv[1:3])
sys.exit(0 if len(a) == 3 and a == b else 1)
PY
}
same_bits_3 "$tmp/big1" "$tmp/bigil" && ok "512 KiB messages: Interleaved1F1B's losses are 1F1B's" ||
    fail "512 KiB messages: Interleaved1F1B's losses are 1F1B's"
same_bits "pp 2: Interleaved1F1B = 1F1B, bit for bit (backwards in micro-batch order)" "$tmp/pp2" "$tmp/il"
grep -q '"dp_replicate=1,dp_shard=2,cp=1,tp=1,pp=2,pp_v=2,pp_first_less=1,pp_last_less=1"' \
    "$tmp/ilfsdp/checkpoint/step-00000020/metadata.json" \
    && ok "the checkpoint records the stage split" || fail "the checkpoint records the stage split"
expect 0 "" "Interleaved1F1B pp 2 to step 10" -- "$bin/titan-train" -q "$tmp/ilhalf" --nproc 2 $PP2 $IL --stop-at 10
expect 0 "" "resume the Interleaved1F1B checkpoint as one process" -- "$bin/titan-train" -q "$tmp/ilhalf"
curve "Interleaved1F1B -> one process resume continues the curve" "$tmp/single" "$tmp/ilhalf" 11
expect 0 "" "one process to step 10" -- "$bin/titan-train" -q "$tmp/ilhalf1" --stop-at 10
expect 0 "resuming as pp=2,.* (Interleaved1F1B) / global batch" \
    "resume the one-process checkpoint under Interleaved1F1B (the resume line names it)" -- "$bin/titan-train" "$tmp/ilhalf1" \
    --nproc 2 $PP2 $IL
curve "one process -> Interleaved1F1B resume continues the curve" "$tmp/single" "$tmp/ilhalf1" 11
# layers_per_stage 1: (2 layers + 1 + 1) / 1 = 4 stages, 2 a rank
expect 0 "stages 0, 2 of 4" "pipeline_parallel_layers_per_stage = 1 gives 2 stages a rank" -- \
    "$bin/titan-train" "$tmp/lps" --nproc 2 $PP2 $IL --parallelism.pipeline_parallel_layers_per_stage=1
curve "layers_per_stage 1 loss curve = one process" "$tmp/single" "$tmp/lps"

# --- the schedule and recomputation change no bit -----------------------------------
same_bits "pp 2: GPipe = 1F1B, bit for bit" "$tmp/pp2" "$tmp/gpipe"
same_ckpt "pp 2: GPipe checkpoint = 1F1B's, byte for byte (but the schedule's name)" "$tmp/pp2" "$tmp/gpipe" \
    parallelism.pipeline_parallel_schedule
same_bits "pp 2, 4 micro-batches: GPipe = 1F1B, bit for bit" "$tmp/b4pp2" "$tmp/b4gpipe"
same_ckpt "pp 2, 4 micro-batches: GPipe checkpoint = 1F1B's" "$tmp/b4pp2" "$tmp/b4gpipe" \
    parallelism.pipeline_parallel_schedule
expect 0 "" "train pp 2, full activation checkpointing" -- "$bin/titan-train" -q "$tmp/pp2full" --nproc 2 $PP2 \
    --activation_checkpoint.mode=full
same_bits "pp 2: full checkpointing = none, bit for bit" "$tmp/pp2" "$tmp/pp2full"

# --- the device path: cpu-guard computes the CPU's bits --------------------------------
expect 0 "" "cpu-guard pp 2" -- "$bin/titan-train" -q "$tmp/g2" --nproc 2 $PP2 $GUARD
same_ckpt "cpu-guard pp 2 checkpoint = cpu pp 2, byte for byte" "$tmp/pp2" "$tmp/g2"

# --- checkpoints, metrics ---------------------------------------------------------
grep -q '"dp_replicate=1,dp_shard=2,cp=1,tp=1,pp=2"' "$tmp/pp2fsdp/checkpoint/step-00000020/metadata.json" \
    && ok "the checkpoint records the pp layout" || fail "the checkpoint records the pp layout"
expect 0 "" "titan-ckpt verify passes on the pp 2 x tp 2 x DDP 2 checkpoint" -- "$bin/titan-ckpt" verify "$tmp/pp8/checkpoint"
resumes "pp 2" "--nproc 2 $PP2" "pp 2 x tp 2" "--nproc 4 $PP2 $TP2" "pp 2" "--nproc 2 $PP2"
# The stages' receives (the bubble included) are exposed communication.
exposed_comm "pp 2 metrics count the pipeline's waits as exposed communication" "$tmp/pp2"
# --sample's hint: a pp checkpoint samples as one process
expect 0 "" "one-process sample from pp 2's checkpoint" -- "$bin/titan-train" -q "$tmp/pp2" --sample 24 --prompt "The "
[ -s "$tmp/out" ] && ok "the sample has text ($(wc -c < "$tmp/out") bytes)" || fail "the sample has text"

# --- validation: forward-only micro-batches through the stages ------------------------
same_validation "pp 2" "$PP2"

# --- refusals ------------------------------------------------------------------------
expect 2 "tied embeddings" "pp 2 with tied embeddings is a usage error" -- \
    "$bin/titan-train" "$tmp/tied" --nproc 2 $PP2
[ "$(grep -c "tied embeddings" "$tmp/err")" -eq 1 ] && ok "--nproc refuses it once, before starting ranks" \
    || fail "--nproc refuses it once, before starting ranks"
expect 2 "parallelism.pipeline_parallel_degree = 2: pipeline parallelism: tied embeddings" \
    "titan-init refuses pp 2 with tied embeddings" -- "$bin/titan-init" -q "$cfg" "$tmp/bad" $TINY $PP2 \
    --model.tie_embeddings=true
[ -e "$tmp/bad" ] && fail "the refused titan-init leaves no run directory" || ok "the refused titan-init leaves no run directory"
expect 2 "5 stages for a model of 2 layers (1 to 4" "pp 5 over 2 layers is a usage error" -- \
    "$bin/titan-train" "$tmp/single" --nproc 5 --parallelism.pipeline_parallel_degree=5
expect 2 "parallelism.pipeline_parallel_degree = 5: pipeline parallelism: 5 stages for a model of 2 layers" \
    "titan-init refuses pp 5 over 2 layers" -- "$bin/titan-init" -q "$cfg" "$tmp/bad" $TINY \
    --parallelism.pipeline_parallel_degree=5
[ -e "$tmp/bad" ] && fail "the refused titan-init leaves no run directory" || ok "the refused titan-init leaves no run directory"
expect 2 "pipeline_parallel_microbatch_size = 3 does not divide training.local_batch_size = 2" \
    "a micro-batch size that does not divide the local batch is a usage error" -- \
    "$bin/titan-train" "$tmp/single" --nproc 2 $PP2 --parallelism.pipeline_parallel_microbatch_size=3
expect 2 "'ZeroBubbleH2' is not one of 1F1B, GPipe, Interleaved1F1B, LoopedBFS" "an unknown schedule is a usage error" -- \
    "$bin/titan-train" "$tmp/single" --nproc 2 $PP2 --parallelism.pipeline_parallel_schedule=ZeroBubbleH2
expect 2 "pipeline_parallel_layers_per_stage = 1: 2 layers + 0 + 1 (pipeline_parallel_first/last_stage_less_layers) make 3 stages, not a multiple of pipeline_parallel_degree 2" \
    "stages that do not divide over the pp ranks are a usage error" -- "$bin/titan-train" "$tmp/single" --nproc 2 \
    $PP2 $IL --parallelism.pipeline_parallel_layers_per_stage=1 --parallelism.pipeline_parallel_first_stage_less_layers=0
expect 2 "\"Interleaved1F1B\" runs at least 2 stages a rank, pipeline_parallel_layers_per_stage gives 1" \
    "Interleaved1F1B with one stage a rank is a usage error" -- "$bin/titan-train" "$tmp/single" --nproc 2 $PP2 $IL \
    --parallelism.pipeline_parallel_layers_per_stage=2
expect 2 "get 3 each, fewer than the embedding's weight 4" \
    "a weight above the layers a stage gets is a usage error" -- "$bin/titan-train" "$tmp/single" --nproc 2 $PP2 \
    --parallelism.pipeline_parallel_first_stage_less_layers=4
expect 2 "--sample with pipeline_parallel_degree 2" "--sample under pp 2 is a usage error" -- \
    "$bin/titan-train" "$tmp/pp2" --nproc 2 $PP2 --sample 24 --prompt "The "

tap_end
