#!/bin/sh
# optimizer.overlap_with_forward on the CUDA backend's own code run on the
# CPU (build/emu/libtitan-cuda-emu.so): each block's AdamW update on the
# side stream while the next forward runs, each block's forward waiting for
# its own update (lib/train/overlap.h). The emulator runs the side stream on
# a thread of its own, each kernel after a pause drawn per TITAN_EMU_SEED,
# so the streams interleave differently per seed (tests/emu/cuda_emu.h).
# Checks: losses, gradient norms and checkpoints bitwise those of the
# in-order step (overlap off) under several interleavings, with clipping
# active and with gradient accumulation; the same on the CPU backend (no
# streams: the key changes nothing); and that the check fails when a
# block's forward does not wait for its update (TITAN_TEST_OVERLAP_NO_WAIT,
# a deliberate bug). TAP output; skipped (77) without the emulator.
set -u
. "$(dirname "$0")/lib/tap.sh"

EMU=$top/build/emu/libtitan-cuda-emu.so
if [ ! -f "$EMU" ]; then
    echo "no CUDA emulator library ($EMU: built where nvcc is)"
    exit 77
fi

shard_man_corpus

# max_norm 0.5: clipping scales every step's update (the factor is < 1)
SMALL="--model.dim=64 --model.n_layers=2 --model.n_heads=2 --model.n_kv_heads=1 --model.multiple_of=16
 --training.seq_len=32 --training.local_batch_size=2 --training.steps=4 --checkpoint.interval=4
 --checkpoint.keep_latest_k=0 --lr_scheduler.warmup_steps=1 --training.dataset_path=$tmp/data
 --training.max_norm=0.5 --training.threads=2 --optimizer.lr=3e-3"
cfg=$top/configs/debugmodel.toml
CUDA="--training.device=cuda"
OFF="--optimizer.overlap_with_forward=false"
emu() { env TITAN_CUDA_LIB="$EMU" "$@"; }
ck=checkpoint/step-00000004/rank-00000.bin

# same RUN_A RUN_B: every step's loss and grad_norm, as written, and the checkpoint's bytes
same() {
    [ -s "$1/metrics.jsonl" ] && [ -s "$2/metrics.jsonl" ] || return 1
    a=$(grep -o '"step":[0-9]*,"loss":[^,]*,"grad_norm":[^,]*' "$1/metrics.jsonl")
    b=$(grep -o '"step":[0-9]*,"loss":[^,]*,"grad_norm":[^,]*' "$2/metrics.jsonl")
    [ "$(echo "$a" | wc -l)" -eq 4 ] && [ "$a" = "$b" ] && cmp -s "$1/$ck" "$2/$ck"
}

expect 0 "" "init runs" -- "$bin/titan-init" "$cfg" "$tmp/c" $SMALL
for r in off s1 s2 s3 aoff aon m1 m2 m3 coff con; do cp -r "$tmp/c" "$tmp/$r"; done

# --- in order, then overlapped under three interleavings ------------------------------
expect 0 "" "cuda (emulated), AdamW in order" -- emu "$bin/titan-train" "$tmp/off" $CUDA $OFF
grep -q '"optimizer_s":' "$tmp/off/metrics.jsonl" && ok "in order: metrics carry optimizer_s" \
    || fail "in order: metrics carry optimizer_s"
clipped=$(/usr/bin/python3 -c 'import json,sys; print(sum(json.loads(l)["grad_norm"] > 0.5 for l in open(sys.argv[1])))' \
    "$tmp/off/metrics.jsonl")
[ "$clipped" -ge 3 ] && ok "clipping is active ($clipped of 4 steps)" || fail "clipping is active ($clipped of 4 steps)"
for seed in 1 2 3; do
    expect 0 "AdamW block by block on a side stream" "cuda, AdamW beside the forward (TITAN_EMU_SEED=$seed)" -- \
        emu TITAN_EMU_SEED=$seed "$bin/titan-train" "$tmp/s$seed" $CUDA
    same "$tmp/off" "$tmp/s$seed" && ok "overlapped = in order, bitwise (seed $seed)" \
        || fail "overlapped = in order, bitwise (seed $seed)"
done
! grep -q '"optimizer_s":' "$tmp/s1/metrics.jsonl" && ok "overlapped: no optimizer_s" || fail "overlapped: no optimizer_s"

# gradient accumulation: the partial sums of the last micro-batch only
ACC="--training.global_batch_size=4"
expect 0 "" "cuda, accumulation 2, in order" -- emu "$bin/titan-train" "$tmp/aoff" $CUDA $OFF $ACC
expect 0 "" "cuda, accumulation 2, overlapped" -- emu TITAN_EMU_SEED=5 "$bin/titan-train" "$tmp/aon" $CUDA $ACC
same "$tmp/aoff" "$tmp/aon" && ok "accumulation: overlapped = in order, bitwise" \
    || fail "accumulation: overlapped = in order, bitwise"

# --- the CPU: no streams, the same bits either way -------------------------------------
expect 0 "" "cpu, key off" -- "$bin/titan-train" "$tmp/coff" $OFF
expect 0 "" "cpu, key on" -- "$bin/titan-train" "$tmp/con"
same "$tmp/coff" "$tmp/con" && ok "cpu: the key changes no bit" || fail "cpu: the key changes no bit"

# --- the check catches a forward that does not wait for its block's update -----------
caught=0
for seed in 1 2 3; do
    expect 0 "" "cuda, the forward not waiting (TITAN_EMU_SEED=$seed)" -- \
        emu TITAN_TEST_OVERLAP_NO_WAIT=1 TITAN_EMU_SEED=$seed "$bin/titan-train" "$tmp/m$seed" $CUDA
    [ "$(grep -c '"step"' "$tmp/m$seed/metrics.jsonl" 2>/dev/null)" = 4 ] && ! same "$tmp/off" "$tmp/m$seed" &&
        caught=$((caught + 1))
done
[ "$caught" -ge 1 ] && ok "without the wait the runs differ ($caught of 3 seeds)" \
    || fail "without the wait the runs differ ($caught of 3 seeds)"

tap_end
