#!/bin/sh
# CLI tests of the zero-bubble pipeline schedule (InterleavedZeroBubble:
# the backward split into input and weight gradients, lib/model's
# titan_llama_backward_input / _weight) on the tiny model of pp_train.sh:
# pp 2 alone, with FSDP 2 (freed blocks poisoned) and with tp 2, each
# loss curve the one process's to pp_train.sh's bounds; on pp 2 the
# schedule changes no bit against Interleaved1F1B (every stage's weight
# gradients add in micro-batch order), nor does full or op activation
# checkpointing; bf16 to pp_train.sh's bf16 bounds; its checkpoint resumes
# as one process; 512 KiB stage messages (larger than a send ring) run
# without deadlock; each rank's timeline and bubble (RUN/pipeline_traces)
# in titan-trace summary and chrome. parallelism.pipeline_parallel_schedule_csv:
# a schedule of torch's CSV format (I and W, a SEND_F and an idle cell
# skipped) gives Interleaved1F1B's bits; CSVs that deadlock, leave a
# micro-batch undone, hold a cell that is not an action, or are missing
# stop before the first step with the row, the column and the cause (exit
# 2, 4, 3). TAP output.
set -u
. "$(dirname "$0")/lib/tiny.sh"

shard_man_corpus

PP2="--parallelism.pipeline_parallel_degree=2"
IL="--parallelism.pipeline_parallel_schedule=Interleaved1F1B"
ZB="--parallelism.pipeline_parallel_schedule=InterleavedZeroBubble"
for r in single il zb zbfsdp zbtp zbhalf csv zbfull zbop bf1 zbbf; do
    "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY 2>"$tmp/err" || fail "init $r"
done

expect 0 "" "train 20 steps, one process" -- "$bin/titan-train" -q "$tmp/single"
expect 0 "" "train pp 2, Interleaved1F1B" -- "$bin/titan-train" -q "$tmp/il" --nproc 2 $PP2 $IL
expect 0 "pipeline: stages 0, 2 of 4 (this rank's parameters: 20608), InterleavedZeroBubble schedule, 2 micro-batches of 1 x 32, 4 in flight, [0-9.]* MiB of activations (+ [0-9.]* MiB of weight-gradient stash)" \
    "train pp 2, InterleavedZeroBubble (2 stages a rank)" -- "$bin/titan-train" "$tmp/zb" --nproc 2 $PP2 $ZB
curve "pp 2 InterleavedZeroBubble loss curve = one process" "$tmp/single" "$tmp/zb"
same_bits "pp 2: InterleavedZeroBubble = Interleaved1F1B, bit for bit" "$tmp/il" "$tmp/zb"
# the ranks' timelines and bubbles (RUN/pipeline_traces)
expect 0 "" "titan-trace summary on a pipeline run" -- "$bin/titan-trace" summary "$tmp/zb"
grep -q "^pipeline: InterleavedZeroBubble, pp 2 x 2 stages a rank, 2 micro-batches" "$tmp/out" &&
    ok "titan-trace summary names the pipeline" || fail "titan-trace summary names the pipeline"
grep -Eq "^ +1 +1 +[0-9.]+% \( *[0-9]+\) +[0-9.]+% +[0-9.]+% +[0-9.]+%$" "$tmp/out" &&
    ok "rank 1's row: measured (steps), replay on wall and on CPU times, theory" ||
    fail "rank 1's row: measured (steps), replay on wall and on CPU times, theory"
# each stage's median F, I, W times (wall, then CPU), and the ranks' sums
grep -Eq "^ +3 +1( +[0-9.]+ \([0-9.]+\)){3} +-$" "$tmp/out" && grep -Eq "^  pp rank 1: [0-9.]+ ms computing in the last step \([0-9.]+ ms CPU\)$" "$tmp/out" &&
    ok "stage 3's median F, I, W times (rank 1), each rank's sum" || fail "stage 3's median F, I, W times (rank 1), each rank's sum"
grep -Eq "^  replay with each op's mean CPU time on every stage \(equal stages\), by pp rank: [0-9.]+% [0-9.]+%$" "$tmp/out" &&
    ok "the replay of equal stages, by pp rank" || fail "the replay of equal stages, by pp rank"
expect 0 "" "titan-trace chrome takes the pipeline traces" -- "$bin/titan-trace" chrome "$tmp/zb" -o "$tmp/zb.json"
/usr/bin/python3 - "$tmp/zb.json" <<'PY' && ok "the Chrome trace has each rank's F, I and W slices" ||
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
names = {(e.get("pid"), e["name"]) for e in ev if e.get("cat") == "pipeline"}
want = {(0, "F 0/0"), (0, "I 2/1"), (0, "W 0/1"), (1, "F 3/1"), (1, "W 1/0")}
sys.exit(0 if want <= names else 1)
PY
    fail "the Chrome trace has each rank's F, I and W slices"
expect 0 "" "train pp 2 x FSDP 2, InterleavedZeroBubble (poisoned)" -- env TITAN_FSDP_POISON=1 \
    "$bin/titan-train" -q "$tmp/zbfsdp" --nproc 4 $PP2 $ZB
curve "pp 2 x FSDP 2 InterleavedZeroBubble loss curve = one process" "$tmp/single" "$tmp/zbfsdp"
expect 0 "" "train pp 2 x tp 2, InterleavedZeroBubble" -- "$bin/titan-train" -q "$tmp/zbtp" --nproc 4 $PP2 $TP2 $ZB
curve "pp 2 x tp 2 InterleavedZeroBubble loss curve = one process" "$tmp/single" "$tmp/zbtp"
# recomputation and bf16 compute: the weight part reads the stash's copies
# of what the input part recomputed
expect 0 "" "train pp 2 InterleavedZeroBubble, full activation checkpointing" -- "$bin/titan-train" -q "$tmp/zbfull" \
    --nproc 2 $PP2 $ZB --activation_checkpoint.mode=full
same_bits "pp 2 InterleavedZeroBubble: full checkpointing = none, bit for bit" "$tmp/zb" "$tmp/zbfull"
expect 0 "" "train pp 2 InterleavedZeroBubble, selective op checkpointing" -- "$bin/titan-train" -q "$tmp/zbop" \
    --nproc 2 $PP2 $ZB --activation_checkpoint.mode=selective --activation_checkpoint.selective_ac_option=op
same_bits "pp 2 InterleavedZeroBubble: op checkpointing = none, bit for bit" "$tmp/zb" "$tmp/zbop"
expect 0 "" "train bf16 compute, one process" -- "$bin/titan-train" -q "$tmp/bf1" $BF16
expect 0 "" "train bf16 compute, pp 2 InterleavedZeroBubble" -- "$bin/titan-train" -q "$tmp/zbbf" --nproc 2 $PP2 $ZB $BF16
curve "bf16: pp 2 InterleavedZeroBubble = one process" "$tmp/bf1" "$tmp/zbbf" 1 1e-4 1e-3
expect 0 "" "InterleavedZeroBubble pp 2 to step 10" -- "$bin/titan-train" -q "$tmp/zbhalf" --nproc 2 $PP2 $ZB \
    --stop-at 10
expect 0 "" "resume the InterleavedZeroBubble checkpoint as one process" -- "$bin/titan-train" -q "$tmp/zbhalf"
curve "InterleavedZeroBubble -> one process resume continues the curve" "$tmp/single" "$tmp/zbhalf" 11

BIG="--model.dim=128 --model.multiple_of=16 --training.seq_len=512 --training.local_batch_size=4
 --training.global_batch_size=4 --training.steps=3 --parallelism.pipeline_parallel_microbatch_size=2"
"$bin/titan-init" -q "$cfg" "$tmp/bigzb" $TINY $BIG 2>"$tmp/err" || fail "init bigzb"
expect 0 "" "train pp 2, InterleavedZeroBubble, 512 KiB stage messages (no deadlock)" -- \
    "$bin/titan-train" -q "$tmp/bigzb" --nproc 2 $PP2 $ZB

# --- a schedule from a CSV file (torch.distributed.pipelining's format) -------------
CSV="--parallelism.pipeline_parallel_schedule=PipelineScheduleMulti --parallelism.pipeline_parallel_schedule_csv"
# pp 2, 2 stages a rank, 2 micro-batches: all forwards, then I and W
# deferred, each stage's Ws in micro-batch order
printf '%s\n' '0F0,0F1,2F0,2F1,2I0,2I1,0I0,,0W0,2W0,0I1,0W1,2W1' \
    '1F0,1F1,3F0,3I0,3W0,3F1,1SEND_F0,3I1,3W1,1I0,1I1,1W0,1W1' >"$tmp/good.csv"
expect 0 "PipelineScheduleMulti schedule from $tmp/good.csv" "train pp 2 on a CSV schedule" -- \
    "$bin/titan-train" "$tmp/csv" --nproc 2 $PP2 $CSV="$tmp/good.csv"
curve "pp 2 CSV schedule loss curve = one process" "$tmp/single" "$tmp/csv"
same_bits "pp 2: the CSV schedule = Interleaved1F1B, bit for bit" "$tmp/il" "$tmp/csv"
# rank 0 runs 0B0 before 0F1; rank 1 waits for 1F1 before 1B0
printf '%s\n' '0F0,0B0,0F1,0B1,2F0,2F1,2B0,2B1' '1F1,1F0,3F0,3B0,3F1,3B1,1B0,1B1' >"$tmp/dead.csv"
expect 2 "deadlock: row 1 (rank 0), column 2 (0B0) waits for stage 1's backward; row 2 (rank 1), column 1 (1F1)" \
    "a CSV that deadlocks is refused, naming the rows and columns" -- \
    "$bin/titan-train" "$tmp/csv" --nproc 2 $PP2 $CSV="$tmp/dead.csv"
printf '%s\n' '0F0,0F1,2F0,2F1,2B0,2B1,0B0,0B1' '1F0,1F1,3F0,3F1,3B0,3B1,1B0' >"$tmp/undone.csv"
expect 2 "row 2 (rank 1): micro-batch 1 of stage 1 left undone: no backward (B or I)" \
    "a CSV that leaves a micro-batch undone is refused" -- \
    "$bin/titan-train" "$tmp/csv" --nproc 2 $PP2 $CSV="$tmp/undone.csv"
printf '%s\n' '0F0,0F1,2F0,2F1,2B0,2B1,0B0,0B1' '1X0,1F1,3F0,3F1,3B0,3B1,1B0,1B1' >"$tmp/bad.csv"
expect 4 "row 2, column 1: \"1X0\" is not an action" "a cell that is not an action is malformed input" -- \
    "$bin/titan-train" "$tmp/csv" --nproc 2 $PP2 $CSV="$tmp/bad.csv"
expect 3 "pipeline_parallel_schedule_csv = \"$tmp/none.csv\": No such file" "a missing CSV is exit 3" -- \
    "$bin/titan-train" "$tmp/csv" --nproc 2 $PP2 $CSV="$tmp/none.csv"
expect 2 "\"PipelineScheduleMulti\" takes its order from parallelism.pipeline_parallel_schedule_csv, which is not set" \
    "PipelineScheduleMulti without a CSV is a usage error" -- \
    "$bin/titan-train" "$tmp/csv" --nproc 2 $PP2 --parallelism.pipeline_parallel_schedule=PipelineScheduleMulti

tap_end
