#!/bin/sh
# CLI tests of the V-placed pipeline schedules (ZBVZeroBubble, DualPipeV:
# two stages a rank, rank r holding stages r and 2 pp - 1 - r, so rank 0
# holds the embedding and the loss) on the tiny model of pp_train.sh:
# ZBVZeroBubble on pp 2, pp 4 (6 layers: a block a stage), pp 2 x FSDP 2
# (freed blocks poisoned), pp 2 x tp 2, x cp 2 and x DDP 2 (and on
# cpu-guard: the CPU's bits), DualPipeV on pp 2 (alone, x FSDP 2, x tp 2) and pp 4 (it needs 2 pp
# micro-batches), each loss curve the one process's to pp_train.sh's
# bounds and Interleaved1F1B's bit for bit; 512 KiB stage messages (larger than a send ring) without
# deadlock on pp 2 and pp 4; checkpoints: a ZBV run stopped and resumed
# gives the straight run's bits and checkpoint, resumes as one process and
# from an Interleaved1F1B checkpoint, and titan-reshard takes it to the
# looped placement and back byte for byte; validation (the loss on rank 0)
# as one process's; titan-trace's timelines and bubbles with the V's stage
# numbers; the refusals (too few micro-batches for DualPipeV, 3 stages a
# rank, pp_vshape without pp_v=2). TAP output.
set -u
. "$(dirname "$0")/lib/tiny.sh"

shard_man_corpus

PP2="--parallelism.pipeline_parallel_degree=2"
PP4="--parallelism.pipeline_parallel_degree=4"
ZBV="--parallelism.pipeline_parallel_schedule=ZBVZeroBubble"
DPV="--parallelism.pipeline_parallel_schedule=DualPipeV"
IL="--parallelism.pipeline_parallel_schedule=Interleaved1F1B"
L6="--model.n_layers=6"
# 4 and 8 micro-batches a local batch: DualPipeV's 2 pp
B4="--training.local_batch_size=4 --training.global_batch_size=8"
B8="--training.local_batch_size=8 --training.global_batch_size=16"
for r in single zbv il zfsdp ztp zcp zddp zhalf zhalf1 ilhalf zguard; do
    "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY 2>"$tmp/err" || fail "init $r"
done
for r in s6 zbv4 il4; do "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY $L6 2>"$tmp/err" || fail "init $r"; done
for r in b4single dpv b4il dfsdp dtp; do "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY $B4 2>"$tmp/err" || fail "init $r"; done
for r in s6b8 dpv4; do "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY $L6 $B8 2>"$tmp/err" || fail "init $r"; done

# --- loss curves against one process ------------------------------------------------
expect 0 "" "train 20 steps, one process" -- "$bin/titan-train" -q "$tmp/single"
expect 0 "layout dp_replicate=1,dp_shard=1,cp=1,tp=1,pp=2,pp_v=2,pp_first_less=1,pp_last_less=1,pp_vshape=1" \
    "pp 2 ZBVZeroBubble: the layout names the V placement" -- "$bin/titan-train" "$tmp/zbv" --nproc 2 $PP2 $ZBV
grep -q "pipeline: stages 0, 3 of 4 (this rank's parameters: 16544), ZBVZeroBubble schedule, 2 micro-batches" \
    "$tmp/err" && ok "rank 0 holds stages 0 and 3 (the embedding and the head)" ||
    fail "rank 0 holds stages 0 and 3 (the embedding and the head)"
curve "pp 2 ZBVZeroBubble loss curve = one process" "$tmp/single" "$tmp/zbv"
expect 0 "" "train pp 2 x FSDP 2, ZBVZeroBubble (poisoned)" -- env TITAN_FSDP_POISON=1 \
    "$bin/titan-train" -q "$tmp/zfsdp" --nproc 4 $PP2 $ZBV
curve "pp 2 x FSDP 2 ZBVZeroBubble loss curve = one process" "$tmp/single" "$tmp/zfsdp"
expect 0 "" "train pp 2 x tp 2, ZBVZeroBubble" -- "$bin/titan-train" -q "$tmp/ztp" --nproc 4 $PP2 $TP2 $ZBV
curve "pp 2 x tp 2 ZBVZeroBubble loss curve = one process" "$tmp/single" "$tmp/ztp"
expect 0 "" "train pp 2 x cp 2, ZBVZeroBubble" -- "$bin/titan-train" -q "$tmp/zcp" --nproc 4 $PP2 $ZBV \
    --parallelism.context_parallel_degree=2 $CPR
curve "pp 2 x cp 2 ZBVZeroBubble loss curve = one process" "$tmp/single" "$tmp/zcp"
expect 0 "" "train pp 2 x DDP 2, ZBVZeroBubble" -- "$bin/titan-train" -q "$tmp/zddp" --nproc 4 $PP2 $ZBV $DDP
curve "pp 2 x DDP 2 ZBVZeroBubble loss curve = one process" "$tmp/single" "$tmp/zddp"
# the device path (cpu-guard: backend memory the host cannot read; the
# hand-over copies and the transfers go through the backend)
expect 0 "" "train pp 2 ZBVZeroBubble on cpu-guard" -- "$bin/titan-train" -q "$tmp/zguard" --nproc 2 $PP2 $ZBV $GUARD
same_bits "pp 2 ZBVZeroBubble: cpu-guard = cpu, bit for bit" "$tmp/zbv" "$tmp/zguard"
expect 0 "" "train 6 layers, one process" -- "$bin/titan-train" -q "$tmp/s6"
expect 0 "" "train pp 4 ZBVZeroBubble over 6 layers (a block a stage)" -- \
    "$bin/titan-train" -q "$tmp/zbv4" --nproc 4 $PP4 $ZBV
curve "pp 4 ZBVZeroBubble loss curve = one process" "$tmp/s6" "$tmp/zbv4"
expect 0 "" "train 4 sequences a rank, one process" -- "$bin/titan-train" -q "$tmp/b4single"
expect 0 "DualPipeV schedule, 4 micro-batches" "train pp 2 DualPipeV" -- "$bin/titan-train" "$tmp/dpv" --nproc 2 $PP2 $DPV
curve "pp 2 DualPipeV loss curve = one process" "$tmp/b4single" "$tmp/dpv"
expect 0 "" "train pp 2 x FSDP 2, DualPipeV (poisoned)" -- env TITAN_FSDP_POISON=1 \
    "$bin/titan-train" -q "$tmp/dfsdp" --nproc 4 $PP2 $DPV
curve "pp 2 x FSDP 2 DualPipeV loss curve = one process" "$tmp/b4single" "$tmp/dfsdp"
expect 0 "" "train pp 2 x tp 2, DualPipeV" -- "$bin/titan-train" -q "$tmp/dtp" --nproc 4 $PP2 $TP2 $DPV
curve "pp 2 x tp 2 DualPipeV loss curve = one process" "$tmp/b4single" "$tmp/dtp"
expect 0 "" "train 6 layers, 8 sequences a rank, one process" -- "$bin/titan-train" -q "$tmp/s6b8"
expect 0 "" "train pp 4 DualPipeV, 8 micro-batches" -- "$bin/titan-train" -q "$tmp/dpv4" --nproc 4 $PP4 $DPV
curve "pp 4 DualPipeV loss curve = one process" "$tmp/s6b8" "$tmp/dpv4"

# Stage messages larger than a send ring (256 KiB): sends wait for their
# receivers; the V's streams (one a communicator and a direction) and its
# hand-over on rank pp - 1 must not deadlock.
BIG="--model.dim=128 --model.multiple_of=16 --training.seq_len=512 --training.local_batch_size=8
 --training.global_batch_size=8 --training.steps=2 --parallelism.pipeline_parallel_microbatch_size=2"
for r in bigz bigd bigz4; do "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY $BIG 2>"$tmp/err" || fail "init $r"; done
expect 0 "" "pp 2 ZBVZeroBubble, 512 KiB stage messages (no deadlock)" -- "$bin/titan-train" -q "$tmp/bigz" --nproc 2 $PP2 $ZBV
expect 0 "" "pp 2 DualPipeV, 512 KiB stage messages (no deadlock)" -- "$bin/titan-train" -q "$tmp/bigd" --nproc 2 $PP2 $DPV
rm -rf "$tmp/bigz4"
"$bin/titan-init" -q "$cfg" "$tmp/bigz4" $TINY $BIG $L6 2>"$tmp/err" || fail "init bigz4"
expect 0 "" "pp 4 ZBVZeroBubble, 512 KiB stage messages (no deadlock)" -- "$bin/titan-train" -q "$tmp/bigz4" --nproc 4 $PP4 $ZBV

# Each stage's weight gradients add in micro-batch order and the clipping
# norm adds per block: the V changes no bit against the looped placement.
expect 0 "" "train pp 2, Interleaved1F1B" -- "$bin/titan-train" -q "$tmp/il" --nproc 2 $PP2 $IL
same_bits "pp 2: ZBVZeroBubble = Interleaved1F1B, bit for bit" "$tmp/il" "$tmp/zbv"
expect 0 "" "train pp 4, Interleaved1F1B, 6 layers" -- "$bin/titan-train" -q "$tmp/il4" --nproc 4 $PP4 $IL
same_bits "pp 4: ZBVZeroBubble = Interleaved1F1B, bit for bit" "$tmp/il4" "$tmp/zbv4"
expect 0 "" "train pp 2, Interleaved1F1B, 4 micro-batches" -- "$bin/titan-train" -q "$tmp/b4il" --nproc 2 $PP2 $IL
same_bits "pp 2: DualPipeV = Interleaved1F1B, bit for bit" "$tmp/b4il" "$tmp/dpv"

# --- checkpoints ---------------------------------------------------------------------
grep -q '"dp_replicate=1,dp_shard=1,cp=1,tp=1,pp=2,pp_v=2,pp_first_less=1,pp_last_less=1,pp_vshape=1"' \
    "$tmp/zbv/checkpoint/step-00000020/metadata.json" && ok "the checkpoint records the V placement" ||
    fail "the checkpoint records the V placement"
expect 0 "" "ZBVZeroBubble pp 2 to step 10" -- "$bin/titan-train" -q "$tmp/zhalf" --nproc 2 $PP2 $ZBV --stop-at 10
expect 0 "" "resume it as ZBVZeroBubble pp 2" -- "$bin/titan-train" -q "$tmp/zhalf" --nproc 2 $PP2 $ZBV
same_bits "ZBVZeroBubble stopped and resumed = the straight run, bit for bit" "$tmp/zbv" "$tmp/zhalf"
EXPECT_OUTPUT=1 expect 0 "63 identical, 0 differ" "and the same step-20 checkpoint" -- \
    "$bin/titan-ckpt" diff "$tmp/zbv/checkpoint/step-00000020" "$tmp/zhalf/checkpoint/step-00000020"
expect 0 "" "ZBVZeroBubble pp 2 to step 10 (again)" -- "$bin/titan-train" -q "$tmp/zhalf1" --nproc 2 $PP2 $ZBV --stop-at 10
expect 0 "saved as pp=2,pp_v=2,pp_first_less=1,pp_last_less=1,pp_vshape=1 (ZBVZeroBubble)" \
    "resume the ZBVZeroBubble checkpoint as one process" -- "$bin/titan-train" "$tmp/zhalf1"
curve "ZBVZeroBubble -> one process resume continues the curve" "$tmp/single" "$tmp/zhalf1" 11
expect 0 "" "Interleaved1F1B pp 2 to step 10" -- "$bin/titan-train" -q "$tmp/ilhalf" --nproc 2 $PP2 $IL --stop-at 10
expect 0 "resuming as pp=2,pp_v=2,pp_first_less=1,pp_last_less=1,pp_vshape=1 (ZBVZeroBubble)" \
    "resume the Interleaved1F1B checkpoint as ZBVZeroBubble" -- "$bin/titan-train" "$tmp/ilhalf" --nproc 2 $PP2 $ZBV
curve "Interleaved1F1B -> ZBVZeroBubble resume continues the curve" "$tmp/single" "$tmp/ilhalf" 11
expect 0 "" "reshard the ZBV checkpoint to the looped placement" -- \
    "$bin/titan-reshard" -q "$tmp/zbv" --to "pp=2,pp_v=2" "$tmp/loop"
expect 0 "" "and back to the V" -- "$bin/titan-reshard" -q "$tmp/loop" --to "pp=2,pp_v=2,pp_vshape=1" "$tmp/vback"
for f in rank-00000.bin rank-00001.bin; do
    cmp -s "$tmp/zbv/checkpoint/step-00000020/$f" "$tmp/vback/step-00000020/$f" && ok "V -> looped -> V: $f byte for byte" ||
        fail "V -> looped -> V: $f byte for byte"
done
expect 0 "" "reshard the ZBV checkpoint to one rank" -- "$bin/titan-reshard" -q "$tmp/zbv" --to single "$tmp/one"
EXPECT_OUTPUT=1 expect 0 "63 identical, 0 differ" "the one-rank checkpoint holds the same tensors" -- \
    "$bin/titan-ckpt" diff "$tmp/zbv/checkpoint/step-00000020" "$tmp/one/step-00000020"

# validation: forward-only micro-batches, the loss on rank 0
same_validation "pp 2 ZBVZeroBubble" "$PP2 $ZBV"

# --- timelines -----------------------------------------------------------------------
expect 0 "" "titan-trace summary on a ZBV run" -- "$bin/titan-trace" summary "$tmp/zbv"
grep -q "^pipeline: ZBVZeroBubble, pp 2 x 2 stages a rank, 2 micro-batches" "$tmp/out" &&
    ok "titan-trace summary names the pipeline" || fail "titan-trace summary names the pipeline"
grep -Eq "^ +1 +1 +[0-9.]+% \( *[0-9]+\) +[0-9.]+% +[0-9.]+% +14\.3%$" "$tmp/out" &&
    ok "rank 1's row: measured, replays (wall, CPU), theory 14.3% (pp 2, 2 micro-batches)" ||
    fail "rank 1's row: measured, replays (wall, CPU), theory 14.3% (pp 2, 2 micro-batches)"
expect 0 "" "titan-trace chrome takes the V's traces" -- "$bin/titan-trace" chrome "$tmp/zbv" -o "$tmp/zbv.json"
/usr/bin/python3 - "$tmp/zbv.json" <<'PY' && ok "the Chrome trace has the V's stages: 0 and 3 on rank 0, 1 and 2 on rank 1" ||
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
names = {(e.get("pid"), e["name"]) for e in ev if e.get("cat") == "pipeline"}
want = {(0, "F 0/0"), (0, "F 3/0"), (0, "I 3/1"), (0, "W 0/1"), (1, "F 1/1"), (1, "I 2/0"), (1, "W 1/0")}
sys.exit(0 if want <= names and not any(n.split()[1].split("/")[0] in ("1", "2") for p, n in names if p == 0) else 1)
PY
    fail "the Chrome trace has the V's stages: 0 and 3 on rank 0, 1 and 2 on rank 1"

# --- refusals ------------------------------------------------------------------------
expect 2 "\"DualPipeV\": 2 micro-batches (local_batch_size / pipeline_parallel_microbatch_size), fewer than its 4 stages" \
    "DualPipeV with fewer micro-batches than stages is a usage error" -- \
    "$bin/titan-train" "$tmp/single" --nproc 2 $PP2 $DPV
expect 2 "\"ZBVZeroBubble\" runs 2 stages a rank (a V), pipeline_parallel_layers_per_stage gives 3" \
    "ZBVZeroBubble with 3 stages a rank is a usage error" -- "$bin/titan-train" "$tmp/s6" --nproc 2 $PP2 $ZBV \
    --parallelism.pipeline_parallel_layers_per_stage=1 --parallelism.pipeline_parallel_first_stage_less_layers=0 \
    --parallelism.pipeline_parallel_last_stage_less_layers=0
expect 2 "the V placement holds two stages a rank (pp_v=2)" "pp_vshape without pp_v=2 is a usage error" -- \
    "$bin/titan-reshard" "$tmp/zbv" --to "pp=2,pp_vshape=1" "$tmp/x"

tap_end
