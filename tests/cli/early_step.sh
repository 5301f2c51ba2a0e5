#!/bin/sh
# CLI tests of optimizer.early_step_in_backward (lib/train/early_step.h): under
# FSDP 2 and FSDP 4 each unit's AdamW update runs right after its
# reduce-scatter, in the backward; with clipping off it trains the ordinary
# step's bits (losses, gradient norms, every checkpoint file at step 20),
# and resumes to them; the shard gradients take the largest unit's shard
# instead of the whole shard (fsdp.h), so rank 0's allocator peak drops by
# what the dry run estimates (a dim-512 model: 6.5 MiB of its 12.5 MiB shard
# gradient; its largest unit, the output, holds the rest).
# Refused by name where it cannot hold, as torchtitan refuses: global-norm
# clipping, gradient accumulation, pipeline parallelism; and here also
# tensor parallelism, replicas (HSDP, DDP), one process, Adam. GaLore steps
# in the backward too, refreshes and all, to its ordinary step's bits and
# checkpoints. TAP output.
set -u
. "$(dirname "$0")/lib/tiny.sh"

shard_man_corpus
EARLY="--optimizer.early_step_in_backward=true"
NOCLIP="--training.max_norm=0"
ONE="--training.local_batch_size=1" # 4 sequences a step over 4 ranks: no accumulation
# in the backward against the ordinary step: FSDP 2 and 4, and a resume.
# $1: a name for the runs; $2: what the backward run says; $3: optimizer flags
against_ordinary() {
    for r in o2 e2 o4 e4 half; do
        "$bin/titan-init" -q "$cfg" "$tmp/$1$r" $TINY $NOCLIP $3 2>"$tmp/err" || fail "init $1$r"
    done
    expect 0 "" "$1FSDP 2, ordinary step" -- "$bin/titan-train" -q "$tmp/$1o2" --nproc 2
    expect 0 "$2" "$1FSDP 2, step in the backward" -- "$bin/titan-train" "$tmp/$1e2" --nproc 2 $EARLY
    same_bits "$1FSDP 2: the step in the backward trains the ordinary step's bits" "$tmp/$1o2" "$tmp/$1e2"
    same_ckpt "$1FSDP 2: the same checkpoint at step 20" "$tmp/$1o2" "$tmp/$1e2"
    expect 0 "" "$1FSDP 4, ordinary step" -- "$bin/titan-train" -q "$tmp/$1o4" --nproc 4 $ONE
    expect 0 "" "$1FSDP 4, step in the backward" -- "$bin/titan-train" -q "$tmp/$1e4" --nproc 4 $EARLY $ONE
    same_bits "$1FSDP 4: the step in the backward trains the ordinary step's bits" "$tmp/$1o4" "$tmp/$1e4"
    expect 0 "" "$1FSDP 2 in the backward to step 12" -- "$bin/titan-train" -q "$tmp/$1half" --nproc 2 $EARLY --stop-at 12
    expect 0 "" "$1resume it" -- "$bin/titan-train" -q "$tmp/$1half" --nproc 2 $EARLY
    same_ckpt "$1resume: the same checkpoint at step 20" "$tmp/$1o2" "$tmp/$1half"
}
against_ordinary "" "AdamW steps each FSDP unit right after its reduce-scatter" ""
# GaLore: randomized SVD (the default), a refresh every 5 steps; the
# refreshes and row-sharded projections run inside FSDP's completions, their
# collectives on a group of their own (train_setup.c). The checkpoints hold
# the low-rank state too.
against_ordinary "GaLore " "GaLore steps each FSDP unit" \
    "--optimizer.name=GaLore --optimizer.rank=8 --optimizer.update_proj_gap=5"

# --- memory: rank 0's peak, 3 steps of a dim-512 model -----------------------
# The cpu allocator's count (memory_estimation.enable) beside the dry run's
# estimate of the same: stepping in the backward holds the largest unit's
# shard gradient instead of the whole shard's.
BIG="--model.dim=512 --model.n_heads=8 --model.n_kv_heads=8 --training.steps=3 --checkpoint.enable=false
 --memory_estimation.enable=true"
for r in mo me; do "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY $NOCLIP $BIG 2>"$tmp/err" || fail "init $r"; done
expect 0 "memory: rank 0: peak" "dim 512, FSDP 2, ordinary step" -- "$bin/titan-train" -q "$tmp/mo" --nproc 2
cp "$tmp/err" "$tmp/mo.err"
expect 0 "memory: rank 0: peak" "dim 512, FSDP 2, step in the backward" -- "$bin/titan-train" -q "$tmp/me" --nproc 2 $EARLY
/usr/bin/python3 - "$tmp/mo.err" "$tmp/err" "$tmp/mo/metrics.jsonl" "$tmp/me/metrics.jsonl" >"$tmp/mem" 2>&1 <<'PY' \
    && ok "the step in the backward holds less: $(cat "$tmp/mem")" || fail "memory drop: $(cat "$tmp/mem")"
import json, re, sys
def counts(p):
    m = re.search(r"memory: rank 0: .*bytes: (\d+) measured, (\d+) estimated", open(p).read())
    return int(m.group(1)), int(m.group(2))
(mo, eo), (me, ee) = counts(sys.argv[1]), counts(sys.argv[2])
rss = [max(d["peak_rss_bytes"] for d in map(json.loads, open(p))) for p in sys.argv[3:5]]
print("rank 0's allocator peak %.2f -> %.2f MiB (-%.2f MiB; the dry run: -%.2f MiB); peak RSS %.1f -> %.1f MB" % (
    mo / 2**20, me / 2**20, (mo - me) / 2**20, (eo - ee) / 2**20, rss[0] / 1e6, rss[1] / 1e6))
sys.exit(0 if ee < eo and mo - me >= 0.9 * (eo - ee) else 1)
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
expect 2 "AdamW and GaLore only" "Adam refused" -- "$bin/titan-train" -q "$tmp/o2" --nproc 2 $EARLY --optimizer.name=Adam
tap_end
