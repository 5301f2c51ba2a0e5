#!/bin/sh
# CLI tests of titan-init and titan-train: exit codes, error messages, atomic
# checkpoints, bit-exact resume, thread-count determinism. TAP output.
set -u
. "$(dirname "$0")/lib/tap.sh"

# A small corpus: the man pages' text, sharded with the byte tokenizer.
shard_man_corpus

TINY="--model.dim=32 --model.n_layers=2 --model.n_heads=4 --model.n_kv_heads=2 --model.multiple_of=16
 --training.seq_len=32 --training.local_batch_size=2 --training.steps=6 --checkpoint.interval=3
 --checkpoint.keep_latest_k=0 --lr_scheduler.warmup_steps=2 --training.dataset_path=$tmp/data
 --metrics.peak_flops=1e11 --training.threads=2"
cfg=$top/configs/debugmodel.toml

# --- configs and usage -------------------------------------------------------
expect 0 "" "titan-init --help" -- "$bin/titan-init" --help
expect 2 "unknown option" "unknown option is a usage error" -- "$bin/titan-init" --bogus "$cfg" "$tmp/r0"
expect 3 "nope.toml" "missing config names the file" -- "$bin/titan-init" "$tmp/nope.toml" "$tmp/r0"
printf '[training]\nsteps = 10\nstepz = 3\n' > "$tmp/bad1.toml"
expect 2 "bad1.toml:3" "unknown key names file and line" -- "$bin/titan-init" "$tmp/bad1.toml" "$tmp/r0"
expect 2 "steps" "unknown key suggests the near key" -- "$bin/titan-init" "$tmp/bad1.toml" "$tmp/r0"
printf '[lr_scheduler]\ndecay_type = "cubic"\n' > "$tmp/bad2.toml"
expect 2 "cosine" "bad choice lists the valid ones" -- "$bin/titan-init" "$tmp/bad2.toml" "$tmp/r0"
printf '[training]\nseq_len = "long"\n' > "$tmp/bad3.toml"
expect 2 "seq_len" "bad value type names the key" -- "$bin/titan-init" "$tmp/bad3.toml" "$tmp/r0"
printf '[training\nsteps = 1\n' > "$tmp/bad4.toml"
expect 2 "bad4.toml:1" "TOML syntax error names the line" -- "$bin/titan-init" "$tmp/bad4.toml" "$tmp/r0"
expect 2 "command line" "bad override names the command line" -- "$bin/titan-init" "$cfg" "$tmp/r0" --training.bogus=1
expect 2 "flavor" "unknown flavor lists the flavors" -- "$bin/titan-init" "$cfg" "$tmp/r0" --model.flavor=9B
expect 2 "n_kv_heads" "kv heads must divide heads" -- "$bin/titan-init" "$cfg" "$tmp/r0" --model.n_kv_heads=5
expect 0 "" "print-config" -- "$bin/titan-train" --print-config "$cfg" --training.steps=77
grep -q "steps = 77" "$tmp/out" && ok "print-config shows the override" || fail "print-config shows the override"
cp "$tmp/out" "$tmp/printed.toml"
expect 0 "" "printed config loads back" -- "$bin/titan-train" --print-config "$tmp/printed.toml"
cmp -s "$tmp/out" "$tmp/printed.toml" && ok "printed config round-trips" || fail "printed config round-trips"
expect 0 "" "a config key takes its value after a space" -- "$bin/titan-train" --print-config "$cfg" --training.steps 78 \
    --checkpoint.enable false
grep -q "steps = 78" "$tmp/out" && sed -n '/^\[checkpoint\]/,/^\[/p' "$tmp/out" | grep -q "^enable = false" &&
    ok "--section.key value shows" || fail "--section.key value shows"
expect 2 "unknown key 'training.stepz'" "an unknown key after a space: lib/job's error" -- \
    "$bin/titan-train" --print-config "$cfg" --training.stepz 5
expect 2 "did you mean --print-config" "an unknown option names the closest one" -- \
    "$bin/titan-train" --print-confg "$cfg"
expect 2 "is not a rank count" "an option's value checked with = too" -- "$bin/titan-train" --nproc=0 "$tmp/a"
expect 0 "" "--device sets training.device" -- "$bin/titan-train" --print-config "$cfg" --device cpu-guard
grep -q 'device = "cpu-guard"' "$tmp/out" && ok "--device shows in the config" || fail "--device shows in the config"
expect 0 "" "--training.device wins over --device" -- "$bin/titan-train" --print-config "$cfg" --training.device=cpu --device auto
grep -q 'device = "cpu"' "$tmp/out" && ok "the override's device shows" || fail "the override's device shows"
expect 2 "training.device" "--device with an unknown device is a usage error" -- "$bin/titan-train" --print-config "$cfg" --device tpu

# --- init and train -----------------------------------------------------------
expect 0 "" "titan-init tiny run" -- "$bin/titan-init" "$cfg" "$tmp/a" $TINY
[ -f "$tmp/a/checkpoint/step-00000000/metadata.json" ] && ok "seed checkpoint exists" || fail "seed checkpoint exists"
expect 2 "not empty" "init refuses a used run dir" -- "$bin/titan-init" "$cfg" "$tmp/a" $TINY
# Sizes from the config never size a stack array: the catalog of 1000 layers
# (9 tensors each) outgrows a 1 MiB stack; a layer count titan cannot count
# is refused by name.
expect 0 "" "init 1000 layers under a 1 MiB stack" -- \
    sh -c 'ulimit -s 1024 && exec "$@"' sh "$bin/titan-init" -q "$cfg" "$tmp/deep" $TINY --model.n_layers=1000
expect 2 "n_layers: must be 1 to 1048576 (got 2000000000)" "2e9 layers: usage error naming n_layers" -- \
    "$bin/titan-init" "$cfg" "$tmp/r0" $TINY --model.n_layers=2000000000
expect 3 "no such run directory" "train a missing run dir" -- "$bin/titan-train" "$tmp/missing"
expect 3 "nowhere" "train with a missing shard dir" -- "$bin/titan-train" "$tmp/a" --training.dataset_path="$tmp/nowhere"
expect 0 "" "train 6 steps" -- "$bin/titan-train" "$tmp/a"
[ "$(wc -l < "$tmp/a/metrics.jsonl")" -eq 6 ] && ok "6 metrics lines" || fail "6 metrics lines"
grep -q '"mfu"' "$tmp/a/metrics.jsonl" && ok "metrics have mfu" || fail "metrics have mfu"
ls "$tmp/a/checkpoint" | grep -q "step-00000006" && ok "final checkpoint written" || fail "final checkpoint written"
ls "$tmp/a/checkpoint" | grep -q "tmp" && fail "no .tmp left behind" || ok "no .tmp left behind"

# --- resume: 3 steps, stop, 3 more == 6 straight, bit for bit ------------------
expect 0 "" "init run b" -- "$bin/titan-init" "$cfg" "$tmp/b" $TINY
expect 0 "" "train b to step 3" -- "$bin/titan-train" "$tmp/b" --stop-at 3
expect 0 "" "resume b to step 6" -- "$bin/titan-train" "$tmp/b"
cmp -s "$tmp/a/checkpoint/step-00000006/rank-00000.bin" "$tmp/b/checkpoint/step-00000006/rank-00000.bin" \
    && ok "resumed state is bitwise identical" || fail "resumed state is bitwise identical"
cut -d, -f1-3 "$tmp/a/metrics.jsonl" > "$tmp/la"; cut -d, -f1-3 "$tmp/b/metrics.jsonl" > "$tmp/lb"
cmp -s "$tmp/la" "$tmp/lb" && ok "resumed loss curve is identical" || fail "resumed loss curve is identical"

# --- the LR schedule across resumes -------------------------------------------
# lr_scheduler.total_steps fixes the schedule's length: 100 steps, then on to
# 200, follow the LR of 200 straight, as does --stop-at 100; without it,
# raising training.steps recomputes the schedule, and one warning says so.
LR200="--training.steps=200 --checkpoint.interval=100 --lr_scheduler.warmup_steps=10"
lr_of() { /usr/bin/python3 -c 'import json, sys; [print(json.loads(l)["lr"]) for l in open(sys.argv[1])]' "$1"; }
for r in l0 l1 l2 l3; do "$bin/titan-init" -q "$cfg" "$tmp/$r" $TINY $LR200 2>"$tmp/err" || fail "init $r"; done
expect 0 "" "train 200 steps straight" -- "$bin/titan-train" -q "$tmp/l0"
expect 0 "" "train 100 steps of a 200-step schedule (total_steps)" -- "$bin/titan-train" "$tmp/l1" \
    --training.steps=100 --lr_scheduler.total_steps=200
expect 0 "" "continue to 200 with total_steps" -- "$bin/titan-train" "$tmp/l1" --lr_scheduler.total_steps=200
grep -q "warning" "$tmp/err" && fail "total_steps: no schedule warning" || ok "total_steps: no schedule warning"
expect 0 "" "train to --stop-at 100" -- "$bin/titan-train" -q "$tmp/l2" --stop-at 100
expect 0 "" "resume to 200" -- "$bin/titan-train" -q "$tmp/l2"
lr_of "$tmp/l0/metrics.jsonl" > "$tmp/lr0"
[ "$(wc -l < "$tmp/lr0")" -eq 200 ] && ok "200 lr values" || fail "200 lr values"
for r in l1 l2; do
    lr_of "$tmp/$r/metrics.jsonl" > "$tmp/lr$r"
    cmp -s "$tmp/lr0" "$tmp/lr$r" && ok "$r: the LR curve of the 200-step run" || fail "$r: the LR curve of the 200-step run"
done
expect 0 "" "train 100 steps of a 100-step schedule" -- "$bin/titan-train" -q "$tmp/l3" --training.steps=100
expect 0 "training.steps 100 -> 200" "raising training.steps warns" -- "$bin/titan-train" "$tmp/l3"
[ "$(grep -c "warning" "$tmp/err")" -eq 1 ] && grep -q "LR schedule changed since step 100 .* at step 101" "$tmp/err" \
    && ok "one warning line names the step the LR jumps at" || fail "one warning line names the step the LR jumps at"
lr_of "$tmp/l3/metrics.jsonl" > "$tmp/lrl3"
cmp -s "$tmp/lr0" "$tmp/lrl3" && fail "a recomputed schedule is another curve" || ok "a recomputed schedule is another curve"
sed -n '101,200p' "$tmp/lr0" > "$tmp/lr0b"; sed -n '101,200p' "$tmp/lrl3" > "$tmp/lrl3b"
cmp -s "$tmp/lr0b" "$tmp/lrl3b" && ok "recomputed: steps 101..200 follow the new schedule" \
    || fail "recomputed: steps 101..200 follow the new schedule"

# --- the same bits with one thread ---------------------------------------------
expect 0 "" "init run c" -- "$bin/titan-init" "$cfg" "$tmp/c" $TINY
expect 0 "" "train c with 1 thread" -- "$bin/titan-train" "$tmp/c" --training.threads=1
cmp -s "$tmp/a/checkpoint/step-00000006/rank-00000.bin" "$tmp/c/checkpoint/step-00000006/rank-00000.bin" \
    && ok "1 thread and 2 threads give the same bits" || fail "1 thread and 2 threads give the same bits"

# --- activation checkpointing: recomputation gives the same bits ---------------
# 4 layers, so that every 2nd layer recomputes two, through one shared slot
expect 0 "" "init run ac-none (4 layers)" -- "$bin/titan-init" "$cfg" "$tmp/ac-none" $TINY --model.n_layers=4
expect 0 "" "train 4 layers without activation checkpointing" -- "$bin/titan-train" "$tmp/ac-none"
for ac in "full 2" "selective 2" "selective op"; do
    set -- $ac
    d=$tmp/ac-$1-$2
    expect 0 "" "init run $1 $2" -- "$bin/titan-init" "$cfg" "$d" $TINY --model.n_layers=4
    expect 0 "" "train with activation_checkpoint $1 $2" -- "$bin/titan-train" "$d" \
        --activation_checkpoint.mode=$1 --activation_checkpoint.selective_ac_option=$2
    cmp -s "$tmp/ac-none/checkpoint/step-00000006/rank-00000.bin" "$d/checkpoint/step-00000006/rank-00000.bin" \
        && ok "activation_checkpoint $1 $2: the same bits as none" || fail "activation_checkpoint $1 $2: the same bits as none"
done
expect 2 "selective_ac_option: '0' is not one of op, N" "selective_ac_option 0 is refused" -- \
    "$bin/titan-train" "$tmp/ac-full-2" --activation_checkpoint.mode=selective --activation_checkpoint.selective_ac_option=0

# --- validation, async checkpoints, shuffle ----------------------------------------
cat "$top/README.md" "$top/LICENSE" > "$tmp/held.txt"
"$bin/titan-shard" -q -o "$tmp/val" "$tmp/held.txt" 2>"$tmp/err" && ok "shard held-out text" || fail "shard held-out text"
expect 0 "" "init run v" -- "$bin/titan-init" "$cfg" "$tmp/v" $TINY
expect 0 "val_loss" "train with validation every 2 steps" -- "$bin/titan-train" "$tmp/v" --validation.enable=true \
    --validation.dataset_path="$tmp/val" --validation.freq=2 --validation.steps=3
[ "$(grep -c '"val_loss"' "$tmp/v/metrics.jsonl")" -eq 3 ] && ok "val_loss at steps 2, 4, 6" || fail "val_loss at steps 2, 4, 6"
cmp -s "$tmp/a/checkpoint/step-00000006/rank-00000.bin" "$tmp/v/checkpoint/step-00000006/rank-00000.bin" \
    && ok "validation leaves the training state untouched" || fail "validation leaves the training state untouched"
expect 2 "dataset_path" "validation without a dataset is refused" -- "$bin/titan-train" "$tmp/v" --training.steps=7 --validation.enable=true
expect 2 "seq_len" "validation seq_len must equal training's" -- "$bin/titan-train" "$tmp/v" --training.steps=7 \
    --validation.enable=true --validation.dataset_path="$tmp/val" --validation.seq_len=64
expect 0 "" "init run s" -- "$bin/titan-init" "$cfg" "$tmp/s" $TINY
expect 0 "ckpt stall" "train with async checkpoints" -- "$bin/titan-train" "$tmp/s" --checkpoint.async_mode=async --metrics.log_freq=1
cmp -s "$tmp/a/checkpoint/step-00000006/rank-00000.bin" "$tmp/s/checkpoint/step-00000006/rank-00000.bin" \
    && ok "async checkpoint holds the same state" || fail "async checkpoint holds the same state"
[ "$(grep -c '"ckpt_stall_s"' "$tmp/s/metrics.jsonl")" -eq 2 ] && ok "ckpt stall in the metrics" || fail "ckpt stall in the metrics"
expect 0 "" "init shuffled runs" -- "$bin/titan-init" "$cfg" "$tmp/h1" $TINY --training.shuffle=true
cp -r "$tmp/h1" "$tmp/h2"
expect 0 "" "train shuffled 6 steps" -- "$bin/titan-train" "$tmp/h1"
expect 0 "" "train shuffled to step 3 (async)" -- "$bin/titan-train" "$tmp/h2" --stop-at 3 --checkpoint.async_mode=async
expect 0 "" "resume shuffled to step 6" -- "$bin/titan-train" "$tmp/h2"
cmp -s "$tmp/h1/checkpoint/step-00000006/rank-00000.bin" "$tmp/h2/checkpoint/step-00000006/rank-00000.bin" \
    && ok "shuffled resume is bitwise identical" || fail "shuffled resume is bitwise identical"
cmp -s "$tmp/a/checkpoint/step-00000006/rank-00000.bin" "$tmp/h1/checkpoint/step-00000006/rank-00000.bin" \
    && fail "shuffle changes the order" || ok "shuffle changes the order"

# --- devices --------------------------------------------------------------------
# cpu-guard is the CPU backend under a GPU's memory rules (host code touching
# its buffers faults): the cuda path's host/device crossings, checked here.
expect 0 "" "init guarded runs" -- "$bin/titan-init" "$cfg" "$tmp/gd" $TINY
cp -r "$tmp/gd" "$tmp/gr"
expect 0 "device: cpu-guard" "train on cpu-guard with validation and a sample" -- "$bin/titan-train" "$tmp/gd" \
    --training.device=cpu-guard --validation.enable=true --validation.dataset_path="$tmp/val" --validation.freq=3 --sample 8
cmp -s "$tmp/a/checkpoint/step-00000006/rank-00000.bin" "$tmp/gd/checkpoint/step-00000006/rank-00000.bin" \
    && ok "cpu-guard trains the cpu's bits" || fail "cpu-guard trains the cpu's bits"
expect 0 "" "cpu-guard to step 3, async save" -- "$bin/titan-train" "$tmp/gr" --training.device=cpu-guard --stop-at 3 \
    --checkpoint.async_mode=async
expect 0 "" "resume on cpu-guard to step 6" -- "$bin/titan-train" "$tmp/gr" --training.device=cpu-guard
cmp -s "$tmp/a/checkpoint/step-00000006/rank-00000.bin" "$tmp/gr/checkpoint/step-00000006/rank-00000.bin" \
    && ok "cpu-guard resume is bitwise identical" || fail "cpu-guard resume is bitwise identical"
# [profiling]: every op of steps 3 and 6 timed; a Chrome trace and a table
# per profiled step; the numbers do not change.
expect 0 "" "init profiled runs" -- "$bin/titan-init" "$cfg" "$tmp/pc" $TINY
cp -r "$tmp/pc" "$tmp/pg"
PROF="--profiling.enable_profiling=true --profiling.profile_freq=3"
expect 0 "profile: step 3: ops" "train profiled on the cpu" -- "$bin/titan-train" "$tmp/pc" $PROF
expect 0 "costliest" "train profiled on cpu-guard" -- "$bin/titan-train" "$tmp/pg" $PROF --training.device=cpu-guard
for r in pc pg; do
    cmp -s "$tmp/a/checkpoint/step-00000006/rank-00000.bin" "$tmp/$r/checkpoint/step-00000006/rank-00000.bin" \
        && ok "profiled run ($r) trains the same bits" || fail "profiled run ($r) trains the same bits"
done
if /usr/bin/python3 - "$tmp/pg/profile_traces" <<'PY'
import json, sys
root = sys.argv[1]
for step in (3, 6):
    t = json.load(open("%s/iteration_%d/rank0_trace.json" % (root, step)))
    ev = [e for e in t["traceEvents"] if e.get("ph") == "X"]
    names = {e["name"] for e in ev}
    need = {"matmul_forward", "matmul_add_forward", "matmul_backward", "attention_forward", "attention_backward", "cross_entropy",
            "adamw_step", "embedding_backward", "rmsnorm_backward"}
    assert need <= names, need - names
    assert all(e["dur"] >= 0 and e["ts"] >= 0 for e in ev)
    assert all(e["args"]["flops"] > 0 for e in ev if e["name"].startswith(("matmul", "attention")))
    assert t["otherData"]["step"] == step
    ops = open("%s/iteration_%d/rank0_ops.txt" % (root, step)).read()
    assert "matmul_backward" in ops and "all ops" in ops and "of the step" in ops, ops
PY
then ok "profile traces are Chrome trace JSON with every op, and op tables"
else fail "profile traces are Chrome trace JSON with every op, and op tables"; fi
[ "$(ls "$tmp/pg/profile_traces")" = "iteration_3
iteration_6" ] && ok "profiled steps 3 and 6 only" || fail "profiled steps 3 and 6 only"
# Mixed precision (bf16 compute, fp32 master weights): the guarded device
# computes the cpu's bf16 bits too.
BF16="--training.mixed_precision_param=bfloat16"
expect 0 "" "init bf16 runs" -- "$bin/titan-init" "$cfg" "$tmp/hb" $TINY
cp -r "$tmp/hb" "$tmp/hg"
expect 0 "" "train bf16 on the cpu" -- "$bin/titan-train" "$tmp/hb" $BF16
expect 0 "bf16 compute copy" "train bf16 on cpu-guard (device memory reported)" -- "$bin/titan-train" "$tmp/hg" \
    --training.device=cpu-guard $BF16
grep -q "dev mem [0-9]* MiB" "$tmp/err" && ok "step lines show device memory" || fail "step lines show device memory"
cmp -s "$tmp/hb/checkpoint/step-00000006/rank-00000.bin" "$tmp/hg/checkpoint/step-00000006/rank-00000.bin" \
    && ok "cpu-guard trains the cpu's bf16 bits" || fail "cpu-guard trains the cpu's bf16 bits"
cmp -s "$tmp/a/checkpoint/step-00000006/rank-00000.bin" "$tmp/hb/checkpoint/step-00000006/rank-00000.bin" \
    && fail "bf16 changes the numbers" || ok "bf16 changes the numbers"
# 50 steps: the bf16 loss curve stays within BF16_TOL (relative, every step) of fp32's.
BF16_TOL=5e-3
LONG="--training.steps=50 --checkpoint.interval=50 --lr_scheduler.warmup_steps=5"
expect 0 "" "init 50-step runs" -- "$bin/titan-init" "$cfg" "$tmp/f50" $TINY $LONG
cp -r "$tmp/f50" "$tmp/h50"
expect 0 "" "train 50 steps fp32" -- "$bin/titan-train" -q "$tmp/f50"
expect 0 "" "train 50 steps bf16" -- "$bin/titan-train" -q "$tmp/h50" $BF16
if worst=$(/usr/bin/python3 - "$tmp/f50/metrics.jsonl" "$tmp/h50/metrics.jsonl" "$BF16_TOL" <<'PY'
import json, sys
def load(p): return {d["step"]: d["loss"] for d in map(json.loads, open(p))}
a, b, tol = load(sys.argv[1]), load(sys.argv[2]), float(sys.argv[3])
if sorted(a) != list(range(1, 51)) or sorted(b) != sorted(a): sys.exit("steps differ")
worst = max(abs(a[s] - b[s]) / a[s] for s in a)
print("max relative difference %.2e, loss %.3f -> %.3f (fp32) vs %.3f (bf16)" % (worst, a[1], a[50], b[50]))
sys.exit(0 if worst <= tol and a[50] < 0.95 * a[1] else 1)
PY
); then ok "bf16 loss curve within $BF16_TOL of fp32 over 50 steps ($worst)"
else fail "bf16 loss curve within $BF16_TOL of fp32 over 50 steps ($worst)"; fi
expect 2 "not one of" "unknown device is refused" -- "$bin/titan-train" "$tmp/gr" --training.device=gpu
expect 2 "not one of" "cuda:N takes a number" -- "$bin/titan-train" "$tmp/gr" --training.device=cuda:x
expect 2 "every rank would use that GPU" "cuda:0 with 2 ranks is refused" -- "$bin/titan-train" --nproc 2 "$tmp/gr" \
    --training.steps=7 --training.device=cuda:0
expect 0 "" "init run au" -- "$bin/titan-init" "$cfg" "$tmp/au" $TINY
expect 0 "device: " "train with device auto" -- "$bin/titan-train" "$tmp/au" --training.device=auto
if grep -q "device: cpu (auto: " "$tmp/err"; then
    cmp -s "$tmp/a/checkpoint/step-00000006/rank-00000.bin" "$tmp/au/checkpoint/step-00000006/rank-00000.bin" \
        && ok "auto without a GPU trains on the cpu" || fail "auto without a GPU trains on the cpu"
else
    skip "auto without a GPU trains on the cpu" "a GPU is present"
fi
# Without a GPU (this suite's usual machine): one error line naming the cause.
"$bin/titan-train" "$tmp/gr" --training.steps=7 --training.device=cuda >"$tmp/out" 2>"$tmp/err"; rc=$?
if [ $rc -eq 0 ]; then
    skip "cuda without a GPU fails with one line" "a GPU is present (it trained)"
elif [ $rc -eq 2 ] && grep -q "error: training.device: cuda: " "$tmp/err" && [ "$(grep -c 'error:' "$tmp/err")" -eq 1 ]; then
    ok "cuda without a GPU fails with one line: $(sed -n 's/.*error: //p' "$tmp/err" | cut -c1-80)"
else
    fail "cuda without a GPU fails with one line (exit $rc)"
fi

# --- gradient accumulation runs -------------------------------------------------
expect 0 "" "init run g" -- "$bin/titan-init" "$cfg" "$tmp/g" $TINY --training.global_batch_size=4 --training.steps=2
expect 0 "" "train with 2 accumulation steps" -- "$bin/titan-train" "$tmp/g"
expect 2 "global_batch_size" "global batch not a multiple" -- "$bin/titan-train" "$tmp/g" --training.global_batch_size=3

# --- divergence is refused ------------------------------------------------------
expect 0 "" "init run d" -- "$bin/titan-init" "$cfg" "$tmp/d" $TINY
expect 5 "not finite" "a non-finite step is refused with exit 5" -- "$bin/titan-train" "$tmp/d" --optimizer.lr=1e30 --training.max_norm=0 --lr_scheduler.warmup_steps=0

# --- corrupt inputs -------------------------------------------------------------
cp -r "$tmp/data" "$tmp/data2"
f=$(ls "$tmp/data2"/*.bin | head -n 1)
printf 'X' | dd of="$f" bs=1 seek=100 conv=notrunc 2>/dev/null
expect 7 "checksum" "corrupt shard is refused with exit 7" -- "$bin/titan-train" "$tmp/a" --training.steps=7 --training.dataset_path="$tmp/data2"
cp -r "$tmp/a" "$tmp/e"
printf 'XXXX' | dd of="$tmp/e/checkpoint/step-00000006/rank-00000.bin" bs=1 seek=64 conv=notrunc 2>/dev/null
expect 7 "checksum" "corrupt checkpoint is refused with exit 7" -- "$bin/titan-train" "$tmp/e" --training.steps=7
expect 2 "model" "checkpoint of another model shape is refused" -- "$bin/titan-train" "$tmp/a" --training.steps=7 --model.dim=64

tap_end
