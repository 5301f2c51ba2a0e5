#!/bin/sh
# CLI tests of GaLore on a device backend (its step and refresh as backend
# ops: lib/optim/galore.c, svd.c) through cpu-guard, which runs the CPU
# backend's ops on memory the host cannot touch: the run crosses between
# host and backend memory only as a GPU needs, and gives the CPU run's bits
# (exact and randomized SVD); a stop and resume (checkpoint staged through
# host copies, GaLore's state with it) and async saves land on the same
# checkpoint bytes; FSDP 2 on cpu-guard follows the CPU's FSDP 2 to 1e-6
# (the refresh's all-gather and P^T G's all-reduce through host copies of
# backend buffers, as the shm communicator needs), and its step inside the
# backward (optimizer.early_step_in_backward) the ordinary step's bits. The CUDA
# backend itself (cuSOLVER) runs in tests/cli/cuda_emu.sh. TAP output.
set -u
. "$(dirname "$0")/lib/tiny.sh"

shard_man_corpus

GALORE="--optimizer.name=GaLore --optimizer.rank=8 --optimizer.update_proj_gap=5 --optimizer.galore_svd=exact"
RSVD="--optimizer.name=GaLore --optimizer.rank=8 --optimizer.update_proj_gap=5 --optimizer.oversampling=4 --optimizer.power_iters=1"
for r in cpu guard ghalf gasync rcpu rguard fcpu fguard fplain fearly; do
    "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY 2>"$tmp/err" || fail "init $r"
done
expect 0 "" "GaLore (exact) 20 steps on cpu" -- "$bin/titan-train" -q "$tmp/cpu" $GALORE
expect 0 "" "GaLore (exact) 20 steps on cpu-guard" -- "$bin/titan-train" -q "$tmp/guard" $GALORE $GUARD
same_bits "GaLore on cpu-guard: the CPU's losses and gradient norms" "$tmp/cpu" "$tmp/guard"
same_ckpt "GaLore on cpu-guard: the CPU's checkpoint at step 20 (its state downloaded)" "$tmp/cpu" "$tmp/guard"
expect 0 "" "cpu-guard to step 12" -- "$bin/titan-train" -q "$tmp/ghalf" $GALORE $GUARD --stop-at 12
expect 0 "" "cpu-guard resumed to 20 (the state uploaded)" -- "$bin/titan-train" -q "$tmp/ghalf" $GALORE $GUARD
same_ckpt "GaLore cpu-guard resume: the same checkpoint at step 20" "$tmp/cpu" "$tmp/ghalf"
expect 0 "" "cpu-guard, async saves" -- "$bin/titan-train" -q "$tmp/gasync" $GALORE $GUARD --checkpoint.async_mode=async
same_ckpt "GaLore cpu-guard async saves: the same checkpoint at step 20" "$tmp/cpu" "$tmp/gasync"
expect 0 "" "GaLore (randomized) on cpu" -- "$bin/titan-train" -q "$tmp/rcpu" $RSVD
expect 0 "" "GaLore (randomized) on cpu-guard" -- "$bin/titan-train" -q "$tmp/rguard" $RSVD $GUARD
same_bits "GaLore randomized on cpu-guard: the CPU's bits" "$tmp/rcpu" "$tmp/rguard"
expect 0 "" "GaLore FSDP 2 on cpu" -- "$bin/titan-train" -q "$tmp/fcpu" $GALORE --nproc 2 --training.steps=12
expect 0 "" "GaLore FSDP 2 on cpu-guard" -- "$bin/titan-train" -q "$tmp/fguard" $GALORE $GUARD --nproc 2 --training.steps=12
# (AdamW's FSDP 2 on cpu-guard too differs from the CPU's in the last bits)
curve "GaLore FSDP 2 on cpu-guard follows the CPU's FSDP 2" "$tmp/fcpu" "$tmp/fguard" 1 1e-6 1e-6
# its step inside the backward (early_step.sh: the CPU's), on the transient
# unit gradient in backend memory: the ordinary cpu-guard step's bits
NOCLIP="--nproc 2 --training.max_norm=0"
expect 0 "" "GaLore FSDP 2 on cpu-guard, no clipping" -- "$bin/titan-train" -q "$tmp/fplain" $GALORE $GUARD $NOCLIP
expect 0 "" "GaLore FSDP 2 on cpu-guard, step in the backward" -- "$bin/titan-train" -q "$tmp/fearly" $GALORE $GUARD \
    $NOCLIP --optimizer.early_step_in_backward=true
same_bits "GaLore FSDP 2 on cpu-guard: the step in the backward trains the ordinary step's bits" "$tmp/fplain" "$tmp/fearly"
tap_end
