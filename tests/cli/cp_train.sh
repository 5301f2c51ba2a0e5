#!/bin/sh
# CLI tests of context parallelism (parallelism.context_parallel_degree): a
# tiny model trained 20 steps as one process and with each sequence split
# over cp ranks (2 x cp chunks, rank c holding chunks c and 2cp - 1 - c),
# alone and composed with FSDP, DDP, tp (with and without sequence
# parallelism) and pp. Each rank attends its queries to the whole
# sequence's keys and values (all-gathered) and the gradients are averaged
# over dp_shard x cp (FSDP's group), which regroups float sums only: the
# curves must agree to tp_train.sh's fp32 bounds (loss 1e-5 relative, grad
# norm 1e-6), bf16 compute to 1e-4 and 1e-3. Also: activation checkpointing
# under cp (bit for bit the same as without), the device path (cpu-guard:
# keys and values through host mirrors, the CPU's checkpoint byte for
# byte), checkpoints that resume across cp and one process, validation,
# --sample (one rank of the cp group samples: one process's text), mpirun,
# the cp collectives' time in the metrics, and the refusal of a sequence
# length that does not split into 2 x cp chunks. TAP output.
set -u
. "$(dirname "$0")/lib/tiny.sh"

shard_man_corpus

CP2="--parallelism.context_parallel_degree=2${CPR:+ $CPR}"
CP4="--parallelism.context_parallel_degree=4${CPR:+ $CPR}"
PP2="--parallelism.pipeline_parallel_degree=2"

for r in single cp2 cp4 cp2fsdp cp2ddp cp2tp2 cp2nosp cp2pp2 cp2full cp2op bf1 bf2 g2 half half1 half2 s1 s2; do
    "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY 2>"$tmp/err" || fail "init $r"
done

# --- the loss curve of every layout is the one process's --------------------------
expect 0 "" "train 20 steps, one process" -- "$bin/titan-train" -q "$tmp/single"
expect 0 "context parallel: rank 0 of 2 holds tokens .0, 8) and .24, 32) of each sequence" "train cp 2" -- \
    "$bin/titan-train" "$tmp/cp2" --nproc 2 $CP2
grep -q "layout dp_replicate=1,dp_shard=1,cp=2,tp=1,pp=1" "$tmp/err" && ok "cp 2: the layout is logged" \
    || fail "cp 2: the layout is logged"
curve "cp 2 loss curve = one process" "$tmp/single" "$tmp/cp2"
expect 0 "" "train cp 4 (chunks of 4 tokens)" -- "$bin/titan-train" -q "$tmp/cp4" --nproc 4 $CP4
curve "cp 4 loss curve = one process" "$tmp/single" "$tmp/cp4"
expect 0 "" "train cp 2 x FSDP 2 (freed blocks poisoned)" -- env TITAN_FSDP_POISON=1 "$bin/titan-train" -q \
    "$tmp/cp2fsdp" --nproc 4 $CP2
curve "cp 2 x FSDP 2 loss curve = one process" "$tmp/single" "$tmp/cp2fsdp"
expect 0 "" "train cp 2 x DDP 2" -- "$bin/titan-train" -q "$tmp/cp2ddp" --nproc 4 $CP2 $DDP
curve "cp 2 x DDP 2 loss curve = one process" "$tmp/single" "$tmp/cp2ddp"
expect 0 "" "train cp 2 x tp 2 (sequence parallel)" -- "$bin/titan-train" -q "$tmp/cp2tp2" --nproc 4 $CP2 $TP2
curve "cp 2 x tp 2 loss curve = one process" "$tmp/single" "$tmp/cp2tp2"
expect 0 "" "train cp 2 x tp 2 without sequence parallelism" -- "$bin/titan-train" -q "$tmp/cp2nosp" --nproc 4 \
    $CP2 $TP2 --parallelism.enable_sequence_parallel=false $NOATP
curve "cp 2 x tp 2 without sequence parallelism = one process" "$tmp/single" "$tmp/cp2nosp"
expect 0 "" "train cp 2 x pp 2" -- "$bin/titan-train" -q "$tmp/cp2pp2" --nproc 4 $CP2 $PP2
curve "cp 2 x pp 2 loss curve = one process" "$tmp/single" "$tmp/cp2pp2"
expect 0 "" "train bf16 compute, one process" -- "$bin/titan-train" -q "$tmp/bf1" $BF16
expect 0 "" "train bf16 compute, cp 2" -- "$bin/titan-train" -q "$tmp/bf2" --nproc 2 $CP2 $BF16
curve "bf16: cp 2 = one process" "$tmp/bf1" "$tmp/bf2" 1 1e-4 1e-3

under_mpirun "cp 2" "$CP2"

# --- recomputation changes no bit; the device path computes the CPU's bits ---------
expect 0 "" "train cp 2, full activation checkpointing" -- "$bin/titan-train" -q "$tmp/cp2full" --nproc 2 $CP2 \
    --activation_checkpoint.mode=full
same_bits "cp 2: full checkpointing = none, bit for bit" "$tmp/cp2" "$tmp/cp2full"
expect 0 "" "train cp 2, selective op checkpointing" -- "$bin/titan-train" -q "$tmp/cp2op" --nproc 2 $CP2 \
    --activation_checkpoint.mode=selective --activation_checkpoint.selective_ac_option=op
same_bits "cp 2: op checkpointing = none, bit for bit" "$tmp/cp2" "$tmp/cp2op"
expect 0 "" "cpu-guard cp 2" -- "$bin/titan-train" -q "$tmp/g2" --nproc 2 $CP2 $GUARD $NORING
# (under TITAN_TEST_CP_RING the cpu run merged blocks by online softmax: the curve then)
if [ -z "$CPR" ]; then same_ckpt "cpu-guard cp 2 checkpoint = cpu cp 2, byte for byte" "$tmp/cp2" "$tmp/g2"
else curve "cpu-guard cp 2 (all-gather) = cpu cp 2 (ring)" "$tmp/cp2" "$tmp/g2"; fi

# --- checkpoints, metrics, sampling --------------------------------------------------
grep -q '"dp_replicate=1,dp_shard=1,cp=2,tp=1,pp=1"' "$tmp/cp2/checkpoint/step-00000020/metadata.json" \
    && ok "the checkpoint records the cp layout" || fail "the checkpoint records the cp layout"
expect 0 "" "titan-ckpt verify passes on the cp 2 x FSDP 2 checkpoint" -- "$bin/titan-ckpt" verify "$tmp/cp2fsdp/checkpoint"
resumes "cp 2" "--nproc 2 $CP2" "cp 2 x tp 2" "--nproc 4 $CP2 $TP2" "cp 4" "--nproc 4 $CP4"
# The keys' and values' collectives block (test_model_cp checks the model
# counts their time; here FSDP's share over the cp group adds to it).
exposed_comm "cp 2 metrics report its blocking collectives as exposed communication" "$tmp/cp2"
# --sample after training: one rank of the cp group samples, the same text as one process
expect 0 "" "one process trains 2 steps and samples" -- "$bin/titan-train" -q "$tmp/s1" --training.steps=2 \
    --sample 24 --prompt "The "
cp "$tmp/out" "$tmp/sample1"
expect 0 "" "cp 2 trains 2 steps and samples" -- "$bin/titan-train" -q "$tmp/s2" --nproc 2 $CP2 --training.steps=2 \
    --sample 24 --prompt "The "
cmp -s "$tmp/out" "$tmp/sample1" && ok "cp 2's sample is one process's text, printed once" \
    || fail "cp 2's sample is one process's text, printed once"

# --- validation ------------------------------------------------------------------------
same_validation "cp 2" "$CP2"

# --- refusals ------------------------------------------------------------------------
expect 2 "context_parallel_degree = 3: training.seq_len = 32 does not split into 2 x 3 equal chunks" \
    "cp 3 over 32 tokens is a usage error" -- "$bin/titan-train" "$tmp/single" --nproc 3 \
    --parallelism.context_parallel_degree=3
[ "$(grep -c "does not split" "$tmp/err")" -eq 1 ] && ok "--nproc refuses it once, before starting ranks" \
    || fail "--nproc refuses it once, before starting ranks"
expect 2 "does not split into 2 x 3 equal chunks" "titan-init refuses cp 3 over 32 tokens" -- \
    "$bin/titan-init" -q "$cfg" "$tmp/bad" $TINY --parallelism.context_parallel_degree=3
[ -e "$tmp/bad" ] && fail "the refused titan-init leaves no run directory" || ok "the refused titan-init leaves no run directory"

tap_end
