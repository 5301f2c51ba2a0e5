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
# curve; tensor parallelism is refused by name (GaLore on device backends:
# galore_device.sh, cuda_emu.sh), Adam with weight decay off the CPU too; Adam
# without weight decay is AdamW without it, bit for bit. Memory: GaLore's
# flat moments hold only the parameters left on AdamW (less state than
# AdamW's), the dry run's optimizer state equals the run's metrics to the
# byte (one process, FSDP 4, HSDP), and one process's estimate is the CPU
# allocator's measured peak (within 1 KiB). TAP output.
set -u
# local batch 2, global 8: accumulation 4 alone, 2 under dp 2, 1 under dp 4.
TINY_GLOBAL_BATCH=8
. "$(dirname "$0")/lib/tiny.sh"

shard_man_corpus

GALORE="--optimizer.name=GaLore --optimizer.rank=8 --optimizer.update_proj_gap=5 --optimizer.galore_svd=exact"
for r in single half ahalf thr2 ddp2 fsdp2 fasync fsdp4 hsdp fhalf rsvd adam adamw; do
    "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY 2>"$tmp/err" || fail "init $r"
done
expect 0 "" "GaLore (exact SVD) 20 steps, one process" -- "$bin/titan-train" "$tmp/single" $GALORE
grep -q "optimizer: GaLore; state .* MiB a rank (.* MiB of AdamW moments, .* MiB of low-rank GaLore state), step buffers .* MiB" "$tmp/err" \
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

# async saves snapshot the packed moments (one process; FSDP 2 below)
ASYNC="--checkpoint.async_mode=async"
expect 0 "" "GaLore, async saves, to step 12" -- "$bin/titan-train" -q "$tmp/ahalf" $GALORE $ASYNC --stop-at 12
expect 0 "" "resume it, async saves" -- "$bin/titan-train" -q "$tmp/ahalf" $GALORE $ASYNC
same_ckpt "GaLore async saves: the same checkpoint at step 20" "$tmp/single" "$tmp/ahalf"

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
expect 0 "" "GaLore FSDP 2, async saves, to step 12" -- "$bin/titan-train" -q "$tmp/fasync" $GALORE $ASYNC --nproc 2 --stop-at 12
expect 0 "" "resume it under FSDP 2, async saves" -- "$bin/titan-train" -q "$tmp/fasync" $GALORE $ASYNC --nproc 2
same_ckpt "GaLore FSDP 2 async resume: the same checkpoint as FSDP 2 straight" "$tmp/fsdp2" "$tmp/fasync"
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
expect 2 "CPU backend only" "Adam with weight decay refused on cpu-guard" -- "$bin/titan-train" -q "$tmp/rsvd" \
    --optimizer.name=Adam --optimizer.weight_decay=0.1 $GUARD
expect 2 "reverse_std" "a bad proj_type lists the valid ones" -- "$bin/titan-train" -q "$tmp/rsvd" $GALORE --optimizer.proj_type=up
expect 2 "rank" "rank 0 refused" -- "$bin/titan-train" -q "$tmp/rsvd" $GALORE --optimizer.rank=0

# --- Adam: without weight decay, AdamW's arithmetic -----------------------
expect 0 "" "Adam, weight_decay 0" -- "$bin/titan-train" -q "$tmp/adam" --optimizer.name=Adam --optimizer.weight_decay=0
expect 0 "" "AdamW, weight_decay 0" -- "$bin/titan-train" -q "$tmp/adamw" --optimizer.weight_decay=0
same_bits "Adam and AdamW without weight decay train the same bits" "$tmp/adam" "$tmp/adamw"

# --- memory: packed moments; the plan, the metrics and the allocator agree --
# state_bytes RUN: the last optim_state_bytes of RUN's metrics.jsonl
state_bytes() { /usr/bin/python3 -c 'import json, sys; print([json.loads(l) for l in open(sys.argv[1])][-1]["optim_state_bytes"])' "$1/metrics.jsonl"; }
# AdamW holds 8 bytes a parameter; GaLore the embedding's, norms' and output's
# moments plus its low-rank state, less than AdamW's for the same model
g=$(state_bytes "$tmp/single") a=$(state_bytes "$tmp/adamw")
[ -n "$g" ] && [ -n "$a" ] && [ "$g" -lt "$a" ] && ok "GaLore holds less optimizer state than AdamW ($g < $a bytes)" \
    || fail "GaLore holds less optimizer state than AdamW ('$g' < '$a' bytes)"
# plan_bytes NAME RUN FLAGS...: the dry run's GaLore state (rank 0) = RUN's metrics
plan_bytes() {
    name=$1 run=$2; shift 2
    expect 0 "" "dry run: $name" -- "$bin/titan-train" --dry-run "$run" $GALORE "$@"
    have=$(sed -n 's/.*optim (GaLore, rank 0): state \([0-9]*\) bytes.*/\1/p' "$tmp/out")
    want=$(state_bytes "$run")
    [ -n "$have" ] && [ "$have" = "$want" ] && ok "dry run's optimizer state = the run's metrics, $name ($have bytes)" \
        || fail "dry run's optimizer state = the run's metrics, $name (dry run '$have', metrics '$want')"
}
plan_bytes "one process" "$tmp/single"
plan_bytes "FSDP 4" "$tmp/fsdp4" --nproc 4
plan_bytes "HSDP 2x2" "$tmp/hsdp" --nproc 4 --parallelism.data_parallel_replicate_degree=2 \
    --parallelism.data_parallel_shard_degree=2
# the estimate against the CPU allocator's own count (GaLore's state and step
# buffers are backend memory), one process: the same bytes, within 1 KiB (the
# low-rank state alone is ~80 KiB here; seen: equal). Under FSDP the CPU
# allocator counts the full buffers whole, the estimate what is resident
# (memory_estimate.sh uses cpu-guard there).
"$bin/titan-init" -q "$cfg" "$tmp/mem" $TINY --training.steps=2 2>"$tmp/err" || fail "init mem"
expect 0 "memory estimate: rank 0" "GaLore with memory_estimation.enable, one process" -- \
    "$bin/titan-train" "$tmp/mem" $GALORE --memory_estimation.enable=true
m=$(sed -n 's/.*memory: rank 0: .*; bytes: \([0-9]*\) measured, \([0-9]*\) estimated.*/\1 \2/p' "$tmp/err")
set -- $m
[ $# = 2 ] && [ $(( $1 > $2 ? $1 - $2 : $2 - $1 )) -le 1024 ] \
    && ok "GaLore: the estimate is the CPU allocator's measured peak ($1 measured, $2 estimated bytes)" \
    || fail "GaLore: the estimate is the CPU allocator's measured peak (measured, estimated: '$m')"
tap_end
