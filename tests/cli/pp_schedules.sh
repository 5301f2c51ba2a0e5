#!/bin/sh
# CLI tests of the zero-bubble pipeline schedule (InterleavedZeroBubble:
# the backward split into input and weight gradients, lib/model's
# titan_llama_backward_input / _weight) on the tiny model of pp_train.sh:
# pp 2 alone, with FSDP 2 (freed blocks poisoned) and with tp 2, each
# loss curve the one process's to pp_train.sh's bounds; on pp 2 the
# schedule changes no bit against Interleaved1F1B (every stage's weight
# gradients add in micro-batch order), its checkpoint resumes as one
# process, and 512 KiB stage messages (larger than a send ring) run
# without deadlock. TAP output.
set -u
. "$(dirname "$0")/lib/tiny.sh"

shard_man_corpus

PP2="--parallelism.pipeline_parallel_degree=2"
IL="--parallelism.pipeline_parallel_schedule=Interleaved1F1B"
ZB="--parallelism.pipeline_parallel_schedule=InterleavedZeroBubble"
for r in single il zb zbfsdp zbtp zbhalf; do
    "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY 2>"$tmp/err" || fail "init $r"
done

expect 0 "" "train 20 steps, one process" -- "$bin/titan-train" -q "$tmp/single"
expect 0 "" "train pp 2, Interleaved1F1B" -- "$bin/titan-train" -q "$tmp/il" --nproc 2 $PP2 $IL
expect 0 "pipeline: stages 0, 2 of 4 (this rank's parameters: 20608), InterleavedZeroBubble schedule" \
    "train pp 2, InterleavedZeroBubble (2 stages a rank)" -- "$bin/titan-train" "$tmp/zb" --nproc 2 $PP2 $ZB
curve "pp 2 InterleavedZeroBubble loss curve = one process" "$tmp/single" "$tmp/zb"
same_bits "pp 2: InterleavedZeroBubble = Interleaved1F1B, bit for bit" "$tmp/il" "$tmp/zb"
expect 0 "" "train pp 2 x FSDP 2, InterleavedZeroBubble (poisoned)" -- env TITAN_FSDP_POISON=1 \
    "$bin/titan-train" -q "$tmp/zbfsdp" --nproc 4 $PP2 $ZB
curve "pp 2 x FSDP 2 InterleavedZeroBubble loss curve = one process" "$tmp/single" "$tmp/zbfsdp"
expect 0 "" "train pp 2 x tp 2, InterleavedZeroBubble" -- "$bin/titan-train" -q "$tmp/zbtp" --nproc 4 $PP2 $TP2 $ZB
curve "pp 2 x tp 2 InterleavedZeroBubble loss curve = one process" "$tmp/single" "$tmp/zbtp"
expect 0 "" "InterleavedZeroBubble pp 2 to step 10" -- "$bin/titan-train" -q "$tmp/zbhalf" --nproc 2 $PP2 $ZB \
    --stop-at 10
expect 0 "" "resume the InterleavedZeroBubble checkpoint as one process" -- "$bin/titan-train" -q "$tmp/zbhalf"
curve "InterleavedZeroBubble -> one process resume continues the curve" "$tmp/single" "$tmp/zbhalf" 11

BIG="--model.dim=128 --model.multiple_of=16 --training.seq_len=512 --training.local_batch_size=4
 --training.global_batch_size=4 --training.steps=3 --parallelism.pipeline_parallel_microbatch_size=2"
"$bin/titan-init" -q "$cfg" "$tmp/bigzb" $TINY $BIG 2>"$tmp/err" || fail "init bigzb"
expect 0 "" "train pp 2, InterleavedZeroBubble, 512 KiB stage messages (no deadlock)" -- \
    "$bin/titan-train" -q "$tmp/bigzb" --nproc 2 $PP2 $ZB

tap_end
