#!/bin/sh
# CLI tests of optimizer.early_step_in_backward (lib/train/early_step.h): under
# FSDP 2 and FSDP 4 each unit's AdamW update runs right after its
# reduce-scatter, in the backward; with clipping off it trains the ordinary
# step's bits (losses, gradient norms, every checkpoint file at step 20),
# and resumes to them; each unit's shard gradient is given back after its
# update, so rank 0's peak RSS drops (a dim-512 model: its 13.6 MB shard
# gradient is never all resident; seen on an idle machine: 25.9 MB lower,
# 124.6 vs 150.5 MB, and 13 MB; in one CI run 0.6 MB: the peak depends on
# what else is resident at the step's highest point, so the test prints
# the two peaks and asserts nothing on them).
# Refused by name where it cannot hold, as torchtitan refuses: global-norm
# clipping, gradient accumulation, pipeline parallelism; and here also
# tensor parallelism, replicas (HSDP, DDP), one process, GaLore. TAP output.
set -u
. "$(dirname "$0")/lib/tiny.sh"

shard_man_corpus
EARLY="--optimizer.early_step_in_backward=true"
NOCLIP="--training.max_norm=0"
for r in o2 e2 o4 e4 half; do "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY $NOCLIP 2>"$tmp/err" || fail "init $r"; done
expect 0 "" "FSDP 2, ordinary step" -- "$bin/titan-train" -q "$tmp/o2" --nproc 2
expect 0 "right after its reduce-scatter" "FSDP 2, step in the backward" -- "$bin/titan-train" "$tmp/e2" --nproc 2 $EARLY
same_bits "FSDP 2: the step in the backward trains the ordinary step's bits" "$tmp/o2" "$tmp/e2"
same_ckpt "FSDP 2: the same checkpoint at step 20" "$tmp/o2" "$tmp/e2"
ONE="--training.local_batch_size=1" # 4 sequences a step over 4 ranks: no accumulation
expect 0 "" "FSDP 4, ordinary step" -- "$bin/titan-train" -q "$tmp/o4" --nproc 4 $ONE
expect 0 "" "FSDP 4, step in the backward" -- "$bin/titan-train" -q "$tmp/e4" --nproc 4 $EARLY $ONE
same_bits "FSDP 4: the step in the backward trains the ordinary step's bits" "$tmp/o4" "$tmp/e4"
expect 0 "" "FSDP 2 in the backward to step 12" -- "$bin/titan-train" -q "$tmp/half" --nproc 2 $EARLY --stop-at 12
expect 0 "" "resume it" -- "$bin/titan-train" -q "$tmp/half" --nproc 2 $EARLY
same_ckpt "resume: the same checkpoint at step 20" "$tmp/o2" "$tmp/half"

# --- memory: rank 0's peak RSS, 3 steps of a dim-512 model ------------------
BIG="--model.dim=512 --model.n_heads=8 --model.n_kv_heads=8 --training.steps=3 --checkpoint.enable=false"
for r in mo me; do "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY $NOCLIP $BIG 2>"$tmp/err" || fail "init $r"; done
expect 0 "" "dim 512, FSDP 2, ordinary step" -- "$bin/titan-train" -q "$tmp/mo" --nproc 2
expect 0 "" "dim 512, FSDP 2, step in the backward" -- "$bin/titan-train" -q "$tmp/me" --nproc 2 $EARLY
/usr/bin/python3 - "$tmp/mo/metrics.jsonl" "$tmp/me/metrics.jsonl" >"$tmp/rss" 2>&1 <<'PY' \
    && echo "# rank 0's peak RSS: $(cat "$tmp/rss") (a measurement, not a check)" \
    || fail "peak RSS read from metrics.jsonl ($(cat "$tmp/rss"))"
import json, sys
o, e = (max(d["peak_rss_bytes"] for d in map(json.loads, open(p))) for p in sys.argv[1:3])
print("%.1f MB ordinary, %.1f MB in the backward (the shard gradient: 13.6 MB)" % (o / 1e6, e / 1e6))
PY

# --- refusals -----------------------------------------------------------------
expect 2 "global-norm clipping" "clipping on refused" -- "$bin/titan-train" -q "$tmp/o2" --nproc 2 $EARLY --training.max_norm=1
expect 2 "gradient accumulation" "gradient accumulation refused" -- "$bin/titan-train" -q "$tmp/o2" --nproc 2 $EARLY \
    --training.global_batch_size=8
expect 2 "pipeline parallelism" "pipeline parallelism refused" -- "$bin/titan-train" -q "$tmp/o2" --nproc 2 $EARLY \
    --parallelism.pipeline_parallel_degree=2 --parallelism.data_parallel_shard_degree=1
expect 2 "replicas" "HSDP refused" -- "$bin/titan-train" -q "$tmp/o2" --nproc 4 $EARLY $ONE \
    --parallelism.data_parallel_replicate_degree=2 --parallelism.data_parallel_shard_degree=2
expect 2 "needs FSDP" "one process refused" -- "$bin/titan-train" -q "$tmp/o2" $EARLY
expect 2 "AdamW only" "GaLore refused" -- "$bin/titan-train" -q "$tmp/o2" --nproc 2 $EARLY --optimizer.name=GaLore
tap_end
