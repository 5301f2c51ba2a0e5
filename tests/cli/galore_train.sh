#!/bin/sh
# CLI tests of optimizer.name = "GaLore" and "Adam" (lib/optim/optim.h) on the
# tiny model of lib/tiny.sh, 20 steps: GaLore's low-rank state is in the
# checkpoint catalog (NAME:galore_proj, :galore_exp_avg, :galore_exp_avg_sq;
# no flat moments for the projected matrices); a resume repeats the run
# bit for bit; titan-reshard moves that state and a resharded checkpoint
# resumes to the same bytes; DDP 2 follows the one-process curve (every
# rank refreshes the same projector from the same averaged gradient);
# layouts that split the matrices and non-CPU devices are refused by name;
# Adam without weight decay is AdamW without it, bit for bit. TAP output.
set -u
. "$(dirname "$0")/lib/tiny.sh"

shard_man_corpus

GALORE="--optimizer.name=GaLore --optimizer.rank=8 --optimizer.update_proj_gap=5 --optimizer.galore_svd=exact"
for r in single half ddp2 rsvd adam adamw; do
    "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY 2>"$tmp/err" || fail "init $r"
done
expect 0 "" "GaLore (exact SVD) 20 steps, one process" -- "$bin/titan-train" "$tmp/single" $GALORE
grep -q "optimizer: GaLore; state .* MiB a rank (.* MiB of it low-rank GaLore state)" "$tmp/err" \
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

# --- titan-reshard moves the GaLore state: FSDP-2 files, resumed as one ----
"$bin/titan-init" -q "$cfg" "$tmp/rs" $TINY 2>"$tmp/err" && rm -rf "$tmp/rs/checkpoint"
expect 0 "" "reshard step 10 to dp_shard=2" -- "$bin/titan-reshard" "$tmp/single/checkpoint/step-00000010" --to dp_shard=2 "$tmp/rs"
expect 0 "resumed from" "resume the resharded checkpoint as one process" -- "$bin/titan-train" "$tmp/rs" $GALORE
same_ckpt "resharded resume: the same checkpoint at step 20" "$tmp/single" "$tmp/rs" layout

# --- DDP 2: the one-process curve ----------------------------------------
expect 0 "" "GaLore under DDP 2" -- "$bin/titan-train" -q "$tmp/ddp2" $GALORE --nproc 2 $DDP
curve "GaLore DDP 2 follows the one-process curve" "$tmp/single" "$tmp/ddp2"

# --- randomized SVD trains; refusals --------------------------------------
expect 0 "" "GaLore, randomized SVD (oversampling 4, 2 power iterations)" -- "$bin/titan-train" -q "$tmp/rsvd" \
    --optimizer.name=GaLore --optimizer.rank=8 --optimizer.update_proj_gap=5 --optimizer.oversampling=4 --optimizer.power_iters=2
expect 2 "GaLore projects whole matrices only" "FSDP 2 refused by name" -- "$bin/titan-train" -q "$tmp/rsvd" $GALORE --nproc 2
expect 2 "CPU backend only" "cpu-guard refused" -- "$bin/titan-train" -q "$tmp/rsvd" $GALORE $GUARD
expect 2 "reverse_std" "a bad proj_type lists the valid ones" -- "$bin/titan-train" -q "$tmp/rsvd" $GALORE --optimizer.proj_type=up
expect 2 "rank" "rank 0 refused" -- "$bin/titan-train" -q "$tmp/rsvd" $GALORE --optimizer.rank=0

# --- Adam: without weight decay, AdamW's arithmetic -----------------------
expect 0 "" "Adam, weight_decay 0" -- "$bin/titan-train" -q "$tmp/adam" --optimizer.name=Adam --optimizer.weight_decay=0
expect 0 "" "AdamW, weight_decay 0" -- "$bin/titan-train" -q "$tmp/adamw" --optimizer.weight_decay=0
same_bits "Adam and AdamW without weight decay train the same bits" "$tmp/adam" "$tmp/adamw"
tap_end
