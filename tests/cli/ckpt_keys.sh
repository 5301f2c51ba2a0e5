#!/bin/sh
# CLI tests of the checkpoint keys of torchtitan's last TOML schema (titan-train(1),
# "Checkpoint keys"): load_step, exclude_from_loading (each part checked by loss
# values against a run that must match it exactly), last_save_model_only with
# export_dtype (bytes against titan-ckpt's own conversion), last_save_in_hf
# (logits against transformers), async_with_pinned_mem (the same bytes as async),
# enable_first_step_checkpoint, load_only, and the keys refused. TAP output.
set -u
. "$(dirname "$0")/lib/tap.sh"
ck=$bin/titan-ckpt
PY=/usr/bin/python3
shard_man_corpus 1
TINY="--model.dim=32 --model.n_layers=2 --model.n_heads=4 --model.n_kv_heads=2 --model.multiple_of=16
 --training.seq_len=32 --training.local_batch_size=2 --training.steps=6 --checkpoint.interval=2
 --checkpoint.keep_latest_k=0 --lr_scheduler.warmup_steps=3 --training.dataset_path=$tmp/data
 --metrics.peak_flops=1e11 --training.threads=2"
cfg=$top/configs/debugmodel.toml
# col RUN FIELD [FROM TO]: FIELD of metrics.jsonl's steps FROM..TO (all by default), one a line,
# exactly as written (repr of the float read back)
col() {
    $PY - "$1/metrics.jsonl" "$2" "${3:-1}" "${4:-999999}" <<'PY'
import json, sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if int(sys.argv[3]) <= d["step"] <= int(sys.argv[4]): print(repr(float(d[sys.argv[2]])))
PY
}
# same DESC FILE_A FILE_B: the files are equal and not empty
same() { [ -s "$2" ] && cmp -s "$2" "$3" && ok "$1" || fail "$1"; }
differ() { [ -s "$2" ] && ! cmp -s "$2" "$3" && ok "$1" || fail "$1"; }

# --- the keys: parsed, written back, refused ----------------------------------------------
expect 2 "'optimiser' is not one of model, optimizer, lr_scheduler, dataloader, train_state" \
    "exclude_from_loading: an unknown part is refused" -- \
    "$bin/titan-init" -q "$cfg" "$tmp/x" $TINY --checkpoint.exclude_from_loading=optimiser
expect 2 "'optimizer' is listed twice" "exclude_from_loading: a part twice is refused" -- \
    "$bin/titan-init" -q "$cfg" "$tmp/x" $TINY '--checkpoint.exclude_from_loading=["optimizer", "optimizer"]'
expect 2 "is not one of model, optimizer" "exclude_from_loading: a number is refused" -- \
    "$bin/titan-init" -q "$cfg" "$tmp/x" $TINY --checkpoint.exclude_from_loading=3
expect 0 "" "print-config with both spellings of the list" -- "$bin/titan-init" --print-config "$cfg" $TINY \
    --checkpoint.exclude_from_loading=dataloader,lr_scheduler --checkpoint.model_weights_only=true
grep -q '^exclude_from_loading = \["dataloader", "lr_scheduler"\]$' "$tmp/out" && ok "the list is written as TOML" \
    || fail "the list is written as TOML"
grep -q '^last_save_model_only = true$' "$tmp/out" && ok "model_weights_only is last_save_model_only" \
    || fail "model_weights_only is last_save_model_only"
printf '[checkpoint]\nexclude_from_loading = ["train_state", "model"]\nexport_dtype = "float16"\n' > "$tmp/j.toml"
expect 0 "" "a job file's list" -- "$bin/titan-init" --print-config "$tmp/j.toml"
grep -q '^exclude_from_loading = \["train_state", "model"\]$' "$tmp/out" && grep -q '^export_dtype = "float16"$' "$tmp/out" \
    && ok "a job file's list and export_dtype read back" || fail "a job file's list and export_dtype read back"
expect 2 "titan-init CONFIG RUN writes" "create_seed_checkpoint = true is refused, naming titan-init" -- \
    "$bin/titan-init" -q "$cfg" "$tmp/x" $TINY --checkpoint.create_seed_checkpoint=true
expect 2 "needs checkpoint.last_save_model_only = true" "last_save_in_hf without last_save_model_only is refused" -- \
    "$bin/titan-init" -q "$cfg" "$tmp/x" $TINY --checkpoint.last_save_in_hf=true
expect 2 "initial_load_in_hf_quantized = true: not supported" "initial_load_in_hf_quantized = true is refused" -- \
    "$bin/titan-init" -q "$cfg" "$tmp/x" $TINY --checkpoint.initial_load_in_hf_quantized=true
expect 2 "is not one of float32, bfloat16, float16" "export_dtype: another dtype is refused" -- \
    "$bin/titan-init" -q "$cfg" "$tmp/x" $TINY --checkpoint.export_dtype=float8

# --- the reference: 6 steps, full checkpoints at 0, 2, 4, 6 ---------------------------------
expect 0 "" "init reference run" -- "$bin/titan-init" -q "$cfg" "$tmp/r" $TINY
for d in L T TL D O A S M P Q F; do cp -r "$tmp/r" "$tmp/$d"; done
expect 0 "" "train the reference 6 steps" -- "$bin/titan-train" -q "$tmp/r"
for d in L T TL D O A; do rm -rf "$tmp/$d"; cp -r "$tmp/r" "$tmp/$d"; done
col "$tmp/r" loss > "$tmp/r.loss"
[ "$(wc -l < "$tmp/r.loss")" -eq 6 ] && ok "6 reference losses" || fail "6 reference losses"

# --- load_step ------------------------------------------------------------------------------
expect 3 "checkpoint.load_step = 5: .* has no checkpoint of step 5 (steps present: 0, 2, 4, 6)" \
    "load_step of a step not there names it and the steps present" -- \
    "$bin/titan-train" "$tmp/L" --checkpoint.load_step=5
expect 0 "resumed from .*step-00000002 (step 2" "load_step = 2 resumes from step 2, not the latest (6)" -- \
    "$bin/titan-train" "$tmp/L" --checkpoint.load_step=2
col "$tmp/L" loss > "$tmp/L.loss"
same "load_step 2: steps 1..6 have the reference's losses, bit for bit" "$tmp/r.loss" "$tmp/L.loss"
same "load_step 2: step 6's state is the reference's" "$tmp/r/checkpoint/step-00000006/rank-00000.bin" \
    "$tmp/L/checkpoint/step-00000006/rank-00000.bin"

# --- exclude_from_loading, from step 2 (load_step), each part by loss values ------------------
# train_state: the step starts at 0, the LR schedule (6 steps long, as the
# reference's), data and AdamW go on: the new steps 1..4 are the reference's 3..6.
expect 0 "training starts over at step 0" "exclude train_state" -- "$bin/titan-train" "$tmp/T" \
    --checkpoint.load_step=2 --checkpoint.exclude_from_loading=train_state --training.steps=4 \
    --lr_scheduler.total_steps=6
col "$tmp/T" loss > "$tmp/T.loss"; col "$tmp/r" loss 3 6 > "$tmp/r36.loss"
same "train_state left out: steps 1..4 = the reference's 3..6 (loss)" "$tmp/r36.loss" "$tmp/T.loss"
col "$tmp/T" lr > "$tmp/T.lr"; col "$tmp/r" lr 3 6 > "$tmp/r36.lr"
same "train_state left out: the LR goes on from the schedule's step 2" "$tmp/r36.lr" "$tmp/T.lr"
# Its own checkpoints keep where the schedule is: steps 5, 6 are the schedule's
# 6 and 7, past its end (min_lr_factor 0: LR 0), not its 4 and 5.
expect 0 "" "it resumes: 2 more steps from its own step 4" -- "$bin/titan-train" "$tmp/T" --training.steps=6 \
    --lr_scheduler.total_steps=6
[ "$(col "$tmp/T" lr 5 6 | tr '\n' ' ')" = "0.0 0.0 " ] && [ "$(col "$tmp/T" lr 1 4)" = "$(cat "$tmp/r36.lr")" ] \
    && ok "the LR's origin is kept in its checkpoints (steps 5, 6: past the schedule's end)" \
    || fail "the LR's origin is kept in its checkpoints (steps 5, 6: past the schedule's end)"
# An elastic restart after the job saved goes on from its own latest step:
# load_step and the exclusions are not applied again (killed before step 4,
# it resumes from its new step 2, and ends as T did).
cp -r "$tmp/r" "$tmp/E"
expect 0 "load_step and exclude_from_loading applied at its first start only" \
    "a restarted job resumes its own latest step" -- env TITAN_TEST_KILL=0:4 "$bin/titan-train" "$tmp/E" --nproc 1 \
    --max-restarts 1 --checkpoint.load_step=2 --checkpoint.exclude_from_loading=train_state --training.steps=4 \
    --lr_scheduler.total_steps=6
col "$tmp/E" loss > "$tmp/E.loss"
same "... its 4 steps' losses are the reference's 3..6" "$tmp/r36.loss" "$tmp/E.loss"
same "... and its step 4 is the reference's step 6" "$tmp/r/checkpoint/step-00000006/rank-00000.bin" \
    "$tmp/E/checkpoint/step-00000004/rank-00000.bin"
# train_state and lr_scheduler: the schedule starts over too. Step 1's loss is taken
# before any update: the reference's step 3; its LR the reference's step 1.
expect 0 "" "exclude train_state and lr_scheduler" -- "$bin/titan-train" -q "$tmp/TL" \
    --checkpoint.load_step=2 '--checkpoint.exclude_from_loading=["train_state", "lr_scheduler"]' --training.steps=4 \
    --lr_scheduler.total_steps=6
col "$tmp/TL" lr > "$tmp/TL.lr"; col "$tmp/r" lr 1 4 > "$tmp/r14.lr"
same "lr_scheduler left out: the LR of the reference's steps 1..4" "$tmp/r14.lr" "$tmp/TL.lr"
[ "$(col "$tmp/TL" loss 1 1)" = "$(col "$tmp/r" loss 3 3)" ] && [ "$(col "$tmp/TL" loss 2 2)" != "$(col "$tmp/r" loss 4 4)" ] \
    && ok "lr_scheduler left out: step 1 = the reference's step 3, step 2 differs" \
    || fail "lr_scheduler left out: step 1 = the reference's step 3, step 2 differs"
# Everything but the model: a new run seeded with step 2's weights (initial_load_path).
expect 0 "" "init a run seeded with step 2's weights" -- "$bin/titan-init" -q "$cfg" "$tmp/I" $TINY \
    --checkpoint.initial_load_path="$tmp/r/checkpoint/step-00000002" --training.steps=4
expect 0 "" "train it 4 steps" -- "$bin/titan-train" -q "$tmp/I"
expect 0 "" "exclude optimizer, lr_scheduler, dataloader, train_state" -- "$bin/titan-train" -q "$tmp/A" \
    --checkpoint.load_step=2 --checkpoint.exclude_from_loading=optimizer,lr_scheduler,dataloader,train_state \
    --training.steps=4
col "$tmp/I" loss > "$tmp/I.loss"; col "$tmp/A" loss > "$tmp/A.loss"
same "all but the model left out = a new run from those weights (4 losses)" "$tmp/I.loss" "$tmp/A.loss"
same "... and the same state at its step 4" "$tmp/I/checkpoint/step-00000004/rank-00000.bin" \
    "$tmp/A/checkpoint/step-00000004/rank-00000.bin"
# dataloader: data from the start, the rest kept: step 3's loss is step 2's weights on
# the first batch (the seeded run's step 1); the LR is the reference's.
expect 0 "" "exclude dataloader" -- "$bin/titan-train" -q "$tmp/D" --checkpoint.load_step=2 \
    --checkpoint.exclude_from_loading=dataloader
[ "$(col "$tmp/D" loss 3 3)" = "$(col "$tmp/I" loss 1 1)" ] && [ "$(col "$tmp/D" loss 3 3)" != "$(col "$tmp/r" loss 3 3)" ] \
    && ok "dataloader left out: step 3 reads the first batch (the seeded run's step 1's loss)" \
    || fail "dataloader left out: step 3 reads the first batch (the seeded run's step 1's loss)"
col "$tmp/D" lr > "$tmp/D.lr"; col "$tmp/r" lr > "$tmp/r.lr"
same "dataloader left out: the LR is the reference's" "$tmp/r.lr" "$tmp/D.lr"
# optimizer: fresh moments: step 3 (before the update) is the reference's, step 4 is not.
expect 0 "" "exclude optimizer" -- "$bin/titan-train" -q "$tmp/O" --checkpoint.load_step=2 \
    --checkpoint.exclude_from_loading=optimizer
[ "$(col "$tmp/O" loss 3 3)" = "$(col "$tmp/r" loss 3 3)" ] && [ "$(col "$tmp/O" loss 4 4)" != "$(col "$tmp/r" loss 4 4)" ] \
    && ok "optimizer left out: step 3 = the reference's, step 4 differs" \
    || fail "optimizer left out: step 3 = the reference's, step 4 differs"
# Everything, the model too: the weights drawn from training.seed: the reference itself.
rm -rf "$tmp/S"; cp -r "$tmp/r" "$tmp/S"
expect 0 "" "exclude model, optimizer, lr_scheduler, dataloader, train_state from step 4" -- \
    "$bin/titan-train" -q "$tmp/S" --checkpoint.load_step=4 \
    --checkpoint.exclude_from_loading=model,optimizer,lr_scheduler,dataloader,train_state
col "$tmp/S" loss > "$tmp/S.loss"
same "all left out = the reference from its seed (6 losses)" "$tmp/r.loss" "$tmp/S.loss"
same "... and the same final state" "$tmp/r/checkpoint/step-00000006/rank-00000.bin" \
    "$tmp/S/checkpoint/step-00000006/rank-00000.bin"
# The device path (cpu-guard: the CPU's bits under a GPU's memory rules)
# loads box by box through one host buffer, draws left-out weights there
# too, and zeroes left-out moments in backend memory: the CPU's states.
GUARD="--training.device=cpu-guard"
for d in GO GS; do rm -rf "$tmp/$d"; cp -r "$tmp/r" "$tmp/$d"; done
expect 0 "" "cpu-guard: exclude optimizer" -- "$bin/titan-train" -q "$tmp/GO" --checkpoint.load_step=2 \
    --checkpoint.exclude_from_loading=optimizer $GUARD
same "cpu-guard: optimizer left out = the cpu's, step 6's state byte for byte" \
    "$tmp/O/checkpoint/step-00000006/rank-00000.bin" "$tmp/GO/checkpoint/step-00000006/rank-00000.bin"
expect 0 "" "cpu-guard: exclude everything from step 4" -- "$bin/titan-train" -q "$tmp/GS" --checkpoint.load_step=4 \
    --checkpoint.exclude_from_loading=model,optimizer,lr_scheduler,dataloader,train_state $GUARD
same "cpu-guard: all left out = the cpu's, step 6's state byte for byte" \
    "$tmp/S/checkpoint/step-00000006/rank-00000.bin" "$tmp/GS/checkpoint/step-00000006/rank-00000.bin"

# --- last_save_model_only, export_dtype, last_save_in_hf ---------------------------------------
MO="--checkpoint.last_save_model_only=true --checkpoint.export_dtype=bfloat16 --checkpoint.last_save_in_hf=true"
expect 0 "saving the model only, in bfloat16" "train with a model-only bf16 last save and its HF copy" -- \
    "$bin/titan-train" "$tmp/M" $MO
grep -q "also written as a Hugging Face directory" "$tmp/err" && ok "one line names the HF copy" \
    || fail "one line names the HF copy"
same "the steps before the last are full and the reference's" "$tmp/r/checkpoint/step-00000004/rank-00000.bin" \
    "$tmp/M/checkpoint/step-00000004/rank-00000.bin"
expect 0 "" "info --json of the last step" -- "$ck" info --json "$tmp/M/checkpoint/step-00000006"
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); t=d["tensors"]; assert len(t)==21 and all(x["dtype"]=="bf16" for x in t) and not any(":exp_avg" in x["name"] for x in t)' "$tmp/out" \
    && ok "the last step holds 21 bf16 parameters, no AdamW moments" || fail "the last step holds 21 bf16 parameters, no AdamW moments"
grep -q '"checkpoint.model_only": 1' "$tmp/M/checkpoint/step-00000006/metadata.json" && ok "it is marked model-only" \
    || fail "it is marked model-only"
expect 0 "" "titan-ckpt converts the reference's full step 6 to HF bf16" -- \
    "$ck" convert -q --to hf "$tmp/r/checkpoint/step-00000006" "$tmp/rhf" --dtype bf16
same "HF copy: model.safetensors = titan-ckpt's conversion of the reference's step 6, byte for byte" \
    "$tmp/rhf/model.safetensors" "$tmp/M/checkpoint/step-00000006-hf/model.safetensors"
same "HF copy: config.json the same" "$tmp/rhf/config.json" "$tmp/M/checkpoint/step-00000006-hf/config.json"
[ -f "$tmp/M/checkpoint/step-00000006-hf/tokenizer.json" ] && [ ! -e "$tmp/M/checkpoint/step-00000006-hf.tmp" ] \
    && ok "HF copy has the tokenizer's files; no .tmp left" || fail "HF copy has the tokenizer's files; no .tmp left"
expect 0 "" "ls still lists the steps" -- "$ck" ls "$tmp/M"
grep -q "step-00000006" "$tmp/out" && ! grep -q "hf" "$tmp/out" && ok "ls: step 6, and the HF copy is no step" \
    || fail "ls: step 6, and the HF copy is no step"
. "$top/tests/cli/lib/hf.sh"
if need_pyref "the HF copy against transformers"; then
    hf_logits "the HF copy loads with transformers; its logits = titan's of the last step (rel < 1e-4)" \
        "$tmp/M/checkpoint/step-00000006-hf" 1,2,3,40,50,60,70,80,90,100,255,256,257,0,5,9 \
        "$tmp/M/checkpoint/step-00000006"
fi
# Resuming from it: refused where training would go on, the way out named.
expect 2 "holds the model only (checkpoint.last_save_model_only): it has no optimizer, lr_scheduler, dataloader, train_state" \
    "training on from a model-only step is refused, naming what it lacks" -- "$bin/titan-train" "$tmp/M" --training.steps=8
grep -q 'exclude_from_loading = \["optimizer", "lr_scheduler", "dataloader", "train_state"\], or resume a full checkpoint with checkpoint.load_step (steps present: 0, 2, 4, 6)' "$tmp/err" \
    && ok "the hint names both ways out" || fail "the hint names both ways out"
expect 0 "sampling from step 6" "sampling from the model-only last step works" -- \
    "$bin/titan-train" "$tmp/M" --sample 8
expect 0 "" "resume from load_step 4 instead" -- "$bin/titan-train" -q "$tmp/M" --checkpoint.load_step=4
col "$tmp/M" loss > "$tmp/M.loss"
same "... steps 5, 6 again: the reference's losses" "$tmp/r.loss" "$tmp/M.loss"
cp -r "$tmp/M" "$tmp/M8"
expect 0 "" "train on from the model-only weights as a new run" -- "$bin/titan-train" -q "$tmp/M8" \
    --training.steps=2 --checkpoint.exclude_from_loading=optimizer,lr_scheduler,dataloader,train_state \
    --checkpoint.last_save_model_only=false --checkpoint.last_save_in_hf=false
[ "$(col "$tmp/M8" loss 1 1)" != "$(col "$tmp/r" loss 1 1)" ] && [ "$(wc -l < "$tmp/M8/metrics.jsonl")" -eq 2 ] \
    && ok "... from step 0, on the trained weights" || fail "... from step 0, on the trained weights"

# --- a sharded model-only save (FSDP 2): the same bytes as converting its full twin ------------
for d in F2 G2; do "$bin/titan-init" -q "$cfg" "$tmp/$d" $TINY --training.steps=2 || fail "init $d"; done
expect 0 "" "FSDP 2: full last save" -- "$bin/titan-train" -q "$tmp/F2" --nproc 2
expect 0 "" "FSDP 2: model-only float16 last save, in the background" -- "$bin/titan-train" -q "$tmp/G2" --nproc 2 \
    --checkpoint.last_save_model_only=true --checkpoint.export_dtype=float16 --checkpoint.async_mode=async
expect 0 "" "convert the full one to HF f16" -- "$ck" convert -q --to hf "$tmp/F2/checkpoint" "$tmp/f2hf" --dtype f16
expect 0 "" "convert the model-only one to HF f16" -- "$ck" convert -q --to hf "$tmp/G2/checkpoint" "$tmp/g2hf" --dtype f16
same "FSDP 2 model-only f16 = the full save in f16, byte for byte" "$tmp/f2hf/model.safetensors" "$tmp/g2hf/model.safetensors"
grep -q '"rank-00001.bin"' "$tmp/G2/checkpoint/step-00000002/metadata.json" && ok "each rank wrote its part" \
    || fail "each rank wrote its part"

# --- async_with_pinned_mem: the same bytes as async -----------------------------------------
expect 0 "" "train async (a model-only bf16 last step)" -- "$bin/titan-train" -q "$tmp/P" --checkpoint.async_mode=async \
    --checkpoint.last_save_model_only=true --checkpoint.export_dtype=bfloat16
expect 0 "" "train async_with_pinned_mem (the CPU: no pinning)" -- "$bin/titan-train" -q "$tmp/Q" \
    --checkpoint.async_mode=async_with_pinned_mem --checkpoint.last_save_model_only=true --checkpoint.export_dtype=bfloat16
expect 0 "" "convert async's model-only step 6 to HF bf16" -- "$ck" convert -q --to hf "$tmp/P/checkpoint" "$tmp/phf" --dtype bf16
same "async's model-only bf16 step 6 = the reference's step 6 in bf16" "$tmp/rhf/model.safetensors" "$tmp/phf/model.safetensors"
for s in 2 4 6; do
    same "step $s: async_with_pinned_mem wrote async's bytes" "$tmp/P/checkpoint/step-0000000$s/rank-00000.bin" \
        "$tmp/Q/checkpoint/step-0000000$s/rank-00000.bin"
done
EMU=$top/build/emu/libtitan-cuda-emu.so
if [ -f "$EMU" ]; then
    for d in EP EQ; do "$bin/titan-init" -q "$cfg" "$tmp/$d" $TINY --training.steps=2 || fail "init $d"; done
    expect 0 "" "emulated cuda: async" -- env TITAN_CUDA_LIB="$EMU" "$bin/titan-train" -q "$tmp/EP" \
        --training.device=cuda --checkpoint.async_mode=async
    expect 0 "the snapshot is in page-locked host memory" "emulated cuda: async_with_pinned_mem pins the snapshot" -- \
        env TITAN_CUDA_LIB="$EMU" "$bin/titan-train" "$tmp/EQ" --training.device=cuda \
        --checkpoint.async_mode=async_with_pinned_mem
    same "emulated cuda: pinned and pageable snapshots save the same bytes" \
        "$tmp/EP/checkpoint/step-00000002/rank-00000.bin" "$tmp/EQ/checkpoint/step-00000002/rank-00000.bin"
    # A synchronous save of device memory goes through host copies (state_stage.h)
    "$bin/titan-init" -q "$cfg" "$tmp/EM" $TINY --training.steps=2 || fail "init EM"
    expect 0 "" "emulated cuda: a model-only bf16 last save, synchronous" -- env TITAN_CUDA_LIB="$EMU" \
        "$bin/titan-train" -q "$tmp/EM" --training.device=cuda --checkpoint.last_save_model_only=true \
        --checkpoint.export_dtype=bfloat16
    "$ck" convert -q --to hf "$tmp/EP/checkpoint" "$tmp/ephf" --dtype bf16 2>"$tmp/err" || fail "convert EP"
    "$ck" convert -q --to hf "$tmp/EM/checkpoint" "$tmp/emhf" --dtype bf16 2>"$tmp/err" || fail "convert EM"
    same "emulated cuda: its parameters = the full save's in bf16" "$tmp/ephf/model.safetensors" "$tmp/emhf/model.safetensors"
else
    skip "emulated cuda: async_with_pinned_mem" "no CUDA emulator library (built where nvcc is)"
fi

# --- enable_first_step_checkpoint, load_only -------------------------------------------------
expect 0 "" "enable_first_step_checkpoint" -- "$bin/titan-train" -q "$tmp/F" --training.steps=3 \
    --checkpoint.enable_first_step_checkpoint=true --checkpoint.interval=10
[ "$(ls "$tmp/F/checkpoint" | grep -c '^step-')" -eq 3 ] && [ -d "$tmp/F/checkpoint/step-00000001" ] \
    && ok "steps 0, 1 and 3 saved" || fail "steps 0, 1 and 3 saved"
expect 0 "" "load_only: resume and train on" -- "$bin/titan-train" -q "$tmp/F" --training.steps=5 \
    --checkpoint.load_only=true --checkpoint.interval=1
[ "$(ls "$tmp/F/checkpoint" | grep -c '^step-')" -eq 3 ] && [ "$(wc -l < "$tmp/F/metrics.jsonl")" -eq 5 ] \
    && ok "load_only: 2 more steps, no checkpoint saved" || fail "load_only: 2 more steps, no checkpoint saved"

tap_end
