#!/bin/sh
# CLI tests of optimizer.name = "GaLore" and "Adam" (lib/optim/optim.h) on the
# tiny model of lib/tiny.sh, 20 steps: GaLore's low-rank state is in the
# checkpoint catalog (NAME:galore_proj, :galore_exp_avg, :galore_exp_avg_sq;
# no flat moments for the projected matrices); a resume repeats the run
# bit for bit, as does a run on 2 threads; titan-reshard moves that state and a resharded checkpoint
# resumes to the same bytes; DDP 2, FSDP 2, FSDP 4 and HSDP 2x2 follow the
# one-process curve to 1e-6 (loss and gradient norm; seen: 4e-8): FSDP
# projects each rank's rows, a refresh all-gathers the matrix's gradient,
# left projections all-reduce P^T G (metrics optim_comm_bytes says which);
# an FSDP 2 checkpoint resumes under FSDP 4 and as one process on the
# curve; tensor parallelism and non-CPU devices are refused by name; Adam
# without weight decay is AdamW without it, bit for bit. TAP output.
set -u
# local batch 2, global 8: accumulation 4 alone, 2 under dp 2, 1 under dp 4.
TINY_GLOBAL_BATCH=8
. "$(dirname "$0")/lib/tiny.sh"

shard_man_corpus

GALORE="--optimizer.name=GaLore --optimizer.rank=8 --optimizer.update_proj_gap=5 --optimizer.galore_svd=exact"
for r in single half thr2 ddp2 fsdp2 fsdp4 hsdp fhalf rsvd adam adamw; do
    "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY 2>"$tmp/err" || fail "init $r"
done
expect 0 "" "GaLore (exact SVD) 20 steps, one process" -- "$bin/titan-train" "$tmp/single" $GALORE
grep -q "optimizer: GaLore; state .* MiB a rank (.* MiB of it low-rank GaLore state; the moments are not packed yet: .* MiB would do)" "$tmp/err" \
    && ok "the run reports its optimizer-state bytes" || fail "the run reports its optimizer-state bytes"
meta=$tmp/single/checkpoint/step-00000020/metadata.json
grep -q '"layers.1.feed_forward.w2.weight:galore_exp_avg_sq"' "$meta" && grep -q '"layers.0.attention.wq.weight:galore_proj"' "$meta" \
    && ok "the catalog names GaLore's state tensors" || fail "the catalog names GaLore's state tensors"
grep -q '"layers.0.attention.wq.weight:exp_avg"' "$meta" && fail "projected weights keep no flat moments" \
    || ok "projected weights keep no flat moments"
grep -q '"tok_embeddings.weight:exp_avg"' "$meta" && grep -q '"output.weight:exp_avg_sq"' "$meta" \
    && ok "embedding and output stay on AdamW" || fail "embedding and output stay on AdamW"
expect 0 "" "titan-ckpt verify" -- "$bin/titan-ckpt" verify "$tmp/single/checkpoint"

# --- resume: stop at 12, go on to 20 == 20 straight ------------------------
expect 0 "" "GaLore to step 12" -- "$bin/titan-train" -q "$tmp/half" $GALORE --stop-at 12
expect 0 "" "resume to step 20" -- "$bin/titan-train" -q "$tmp/half" $GALORE
same_bits "GaLore resume: the same losses and gradient norms" "$tmp/single" "$tmp/half"
same_ckpt "GaLore resume: the same checkpoint at step 20" "$tmp/single" "$tmp/half"

expect 0 "" "GaLore on 2 threads" -- "$bin/titan-train" -q "$tmp/thr2" $GALORE --training.threads=2
same_bits "GaLore: 1 thread and 2 threads give the same bits" "$tmp/single" "$tmp/thr2"

# --- titan-reshard moves the GaLore state: FSDP-2 files, resumed as one ----
"$bin/titan-init" -q "$cfg" "$tmp/rs" $TINY 2>"$tmp/err" && rm -rf "$tmp/rs/checkpoint"
expect 0 "" "reshard step 10 to dp_shard=2" -- "$bin/titan-reshard" "$tmp/single/checkpoint/step-00000010" --to dp_shard=2 "$tmp/rs"
expect 0 "resumed from" "resume the resharded checkpoint as one process" -- "$bin/titan-train" "$tmp/rs" $GALORE
same_ckpt "resharded resume: the same checkpoint at step 20" "$tmp/single" "$tmp/rs" layout

# --- DDP, FSDP, HSDP: the one-process curve ------------------------------
expect 0 "" "GaLore under DDP 2" -- "$bin/titan-train" -q "$tmp/ddp2" $GALORE --nproc 2 $DDP
curve "GaLore DDP 2 follows the one-process curve" "$tmp/single" "$tmp/ddp2" 1 1e-6 1e-6
expect 0 "" "GaLore under FSDP 2" -- "$bin/titan-train" -q "$tmp/fsdp2" $GALORE --nproc 2
curve "GaLore FSDP 2 follows the one-process curve" "$tmp/single" "$tmp/fsdp2" 1 1e-6 1e-6
expect 0 "" "GaLore under FSDP 4" -- "$bin/titan-train" -q "$tmp/fsdp4" $GALORE --nproc 4
curve "GaLore FSDP 4 follows the one-process curve" "$tmp/single" "$tmp/fsdp4" 1 1e-6 1e-6
expect 0 "" "GaLore under HSDP 2x2" -- "$bin/titan-train" -q "$tmp/hsdp" $GALORE --nproc 4 \
    --parallelism.data_parallel_replicate_degree=2 --parallelism.data_parallel_shard_degree=2
curve "GaLore HSDP 2x2 follows the one-process curve" "$tmp/single" "$tmp/hsdp" 1 1e-6 1e-6
expect 0 "" "titan-ckpt verify (FSDP 4: each tensor covered once)" -- "$bin/titan-ckpt" verify "$tmp/fsdp4/checkpoint"
/usr/bin/python3 - "$tmp/fsdp4/metrics.jsonl" <<'PY' && ok "FSDP 4: refresh steps (1, 6, 11, 16) all-gather, the others only all-reduce" \
    || fail "FSDP 4: refresh steps (1, 6, 11, 16) all-gather, the others only all-reduce"
import json, sys
b = {d["step"]: d["optim_comm_bytes"] for d in map(json.loads, open(sys.argv[1]))}
refresh = {1, 6, 11, 16}
sys.exit(0 if min(b[s] for s in refresh) > max(b[s] for s in b if s not in refresh) > 0 else 1)
PY
expect 0 "" "GaLore FSDP 2 to step 10" -- "$bin/titan-train" -q "$tmp/fhalf" $GALORE --nproc 2 --stop-at 10
cp -r "$tmp/fhalf" "$tmp/fhalf1"
expect 0 "" "resume it under FSDP 4" -- "$bin/titan-train" -q "$tmp/fhalf" $GALORE --nproc 4
curve "FSDP 2 -> FSDP 4 resume continues the curve" "$tmp/single" "$tmp/fhalf" 11 1e-6 1e-6
expect 0 "" "resume it as one process" -- "$bin/titan-train" -q "$tmp/fhalf1" $GALORE
curve "FSDP 2 -> one process resume continues the curve" "$tmp/single" "$tmp/fhalf1" 11 1e-6 1e-6

# --- randomized SVD trains; refusals --------------------------------------
expect 0 "" "GaLore, randomized SVD (oversampling 4, 2 power iterations)" -- "$bin/titan-train" -q "$tmp/rsvd" \
    --optimizer.name=GaLore --optimizer.rank=8 --optimizer.update_proj_gap=5 --optimizer.oversampling=4 --optimizer.power_iters=2
expect 2 "GaLore trains under data parallelism only" "tensor parallelism refused by name" -- "$bin/titan-train" -q "$tmp/rsvd" $GALORE --nproc 2 $TP2
expect 2 "CPU backend only" "cpu-guard refused" -- "$bin/titan-train" -q "$tmp/rsvd" $GALORE $GUARD
expect 2 "reverse_std" "a bad proj_type lists the valid ones" -- "$bin/titan-train" -q "$tmp/rsvd" $GALORE --optimizer.proj_type=up
expect 2 "rank" "rank 0 refused" -- "$bin/titan-train" -q "$tmp/rsvd" $GALORE --optimizer.rank=0

# --- Adam: without weight decay, AdamW's arithmetic -----------------------
expect 0 "" "Adam, weight_decay 0" -- "$bin/titan-train" -q "$tmp/adam" --optimizer.name=Adam --optimizer.weight_decay=0
expect 0 "" "AdamW, weight_decay 0" -- "$bin/titan-train" -q "$tmp/adamw" --optimizer.weight_decay=0
same_bits "Adam and AdamW without weight decay train the same bits" "$tmp/adam" "$tmp/adamw"
tap_end
