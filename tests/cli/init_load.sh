#!/bin/sh
# CLI tests of titan-init's checkpoint.initial_load_path: a run seeded with
# the weights of a titan checkpoint (a run, a root, a step directory; saved by
# one process or sharded by FSDP) or of a Hugging Face Llama directory
# (initial_load_in_hf; also one made and saved by transformers, whose logits
# titan then matches) holds exactly those weights at step 0 and trains from
# them; a source whose model is not the job's is refused naming the first
# difference, and nothing is written. TAP output.
set -u
TINY_GLOBAL_BATCH=4
. "$(dirname "$0")/lib/tiny.sh"
ck=$bin/titan-ckpt
PY=/usr/bin/python3
shard_man_corpus
# loss_at RUN STEP: the loss metrics.jsonl gives for STEP
loss_at() {
    $PY -c 'import json,sys
for l in open(sys.argv[1]):
    d = json.loads(l)
    if d.get("step") == int(sys.argv[2]) and "loss" in d: print(d["loss"]); break' "$1/metrics.jsonl" "$2"
}
# same_params A B: titan-ckpt diff --params-only says identical (exit 0)
same_params() { "$ck" diff -q --params-only "$1" "$2" >/dev/null 2>&1; }

# ---- the sources: a trained run, its HF export, an FSDP-trained run -------------------------
expect 0 "" "init run a" -- "$bin/titan-init" -q "$cfg" "$tmp/a" $TINY
expect 0 "" "train run a 20 steps" -- "$bin/titan-train" -q "$tmp/a"
a20=$tmp/a/checkpoint/step-00000020
a10=$tmp/a/checkpoint/step-00000010
expect 0 "" "export run a to Hugging Face format (f32)" -- "$ck" convert -q --to hf "$tmp/a" "$tmp/hf"

# ---- seeded from Hugging Face weights ------------------------------------------------------
expect 0 "seed weights from .*/hf (Hugging Face Llama)" "titan-init from the HF directory" -- \
    "$bin/titan-init" "$cfg" "$tmp/b" $TINY --checkpoint.initial_load_path="$tmp/hf" --checkpoint.initial_load_in_hf=true
check "its seed checkpoint holds run a's step-20 weights exactly (f32 round trip)" \
    same_params "$a20" "$tmp/b/checkpoint/step-00000000"
expect 0 "" "info of the seed" -- "$ck" info --json "$tmp/b/checkpoint/step-00000000"
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["step"] == 0, d["step"]' "$tmp/out" &&
    ok "the seed is step 0" || fail "the seed is step 0"
expect 0 "" "train run b 3 steps" -- "$bin/titan-train" -q "$tmp/b" --training.steps=3
# Step 1 sees the same batch in both runs: the seeded model's loss on it is lower.
fresh=$(loss_at "$tmp/a" 1); seeded=$(loss_at "$tmp/b" 1)
$PY -c 'import sys; f, s = map(float, sys.argv[1:]); sys.exit(0 if s < f - 0.05 else 1)' "$fresh" "$seeded" &&
    ok "run b's first loss ($seeded) is below a fresh model's on the same batch ($fresh)" ||
    fail "run b's first loss ($seeded) is below a fresh model's on the same batch ($fresh)"
grep -q "^initial_load_path = \"$tmp/hf\"" "$tmp/b/config.toml" && ok "config.toml keeps initial_load_path" ||
    fail "config.toml keeps initial_load_path"

# ---- seeded from random Llamas made and saved by transformers (tests/python/hf_check.py) ----
# Large weights, so a wrong RoPE convention or scaling is off by O(1); the job's
# scaling is Llama 3.1's (original context 8192), so the check runs 512 positions
# over frequencies whose wavelengths pass 2048. The seed's logits (titan-ckpt eval)
# must be transformers' (float64) to 1e-4 of max|logit|.
# hf_logits, far, toks: tests/cli/lib/hf.sh.
. "$top/tests/cli/lib/hf.sh"
T512=$(toks 512 258)
HFSEED="--checkpoint.initial_load_in_hf=true --model.dim=64"
if need_pyref "titan-init seeded from models saved by transformers"; then
    expect 0 "" "transformers saves a random Llama: bf16, tied, GQA 2/1 (head_dim 32), llama3 scaling" -- \
        "$PYREF" "$top/tests/python/hf_check.py" make "$tmp/hft" --vocab 258 --dim 64 --heads 2 --kv-heads 1 \
        --ffn 176 --theta 500000 --llama3 8,1,4,8192 --tie --dtype bfloat16
    expect 0 "seed weights from .*/hft (Hugging Face Llama)" "titan-init from it (a tied job)" -- \
        "$bin/titan-init" "$cfg" "$tmp/ht" $TINY $HFSEED --model.n_heads=2 --model.n_kv_heads=1 \
        --model.tie_embeddings=true --checkpoint.initial_load_path="$tmp/hft"
    hf_logits "the seed's logits match transformers' (rel < 1e-4)" "$tmp/hft" "$T512" "$tmp/ht" \
        --far no-rope-scaling --far interleaved
    far no-rope-scaling "the model without rope_scaling"
    far interleaved "the model with q/k rows unpermuted"
    expect 2 "rope_scaling.factor (0: none) is 8, but the job's model has rope_scaling_factor 0" \
        "a job without RoPE scaling refuses it (scaling read from rope_parameters)" -- \
        "$bin/titan-init" "$cfg" "$tmp/x" $TINY $HFSEED --model.n_heads=2 --model.n_kv_heads=1 \
        --model.tie_embeddings=true --model.rope_scaling_factor=0 --checkpoint.initial_load_path="$tmp/hft"
    expect 0 "" "transformers saves a random Llama: f32, untied, GQA 4/2, 3 layers, llama3 scaling" -- \
        "$PYREF" "$top/tests/python/hf_check.py" make "$tmp/hfu" --vocab 258 --dim 64 --heads 4 --kv-heads 2 \
        --layers 3 --ffn 176 --theta 500000 --llama3 8,1,4,8192 --seed 3
    expect 0 "seed weights from .*/hfu (Hugging Face Llama)" "titan-init from it (an untied job)" -- \
        "$bin/titan-init" "$cfg" "$tmp/hu" $TINY $HFSEED --model.n_layers=3 --checkpoint.initial_load_path="$tmp/hfu"
    hf_logits "the seed's logits match transformers' (rel < 1e-4)" "$tmp/hfu" "$T512" "$tmp/hu" --far no-rope-scaling
    far no-rope-scaling "the model without rope_scaling"
    expect 0 "" "train it 2 steps" -- "$bin/titan-train" -q "$tmp/hu" --training.steps=2
fi

# ---- seeded from titan checkpoints -----------------------------------------------------------
expect 0 "seed weights from .*step-00000020 (its step 20" "titan-init from a run directory (its latest step)" -- \
    "$bin/titan-init" "$cfg" "$tmp/c" $TINY --checkpoint.initial_load_path="$tmp/a"
check "run c's seed holds step 20's weights" same_params "$a20" "$tmp/c/checkpoint/step-00000000"
expect 0 "" "train run c 3 steps" -- "$bin/titan-train" -q "$tmp/c" --training.steps=3
curve() { $PY -c 'import json,sys; print([json.loads(l).get("loss") for l in open(sys.argv[1])])' "$1/metrics.jsonl"; }
[ "$(curve "$tmp/b")" = "$(curve "$tmp/c")" ] &&
    ok "runs b (from the HF export) and c (from the checkpoint) train to the same bits" ||
    fail "runs b and c train to the same bits: $(curve "$tmp/b") against $(curve "$tmp/c")"
mv "$tmp/hf" "$tmp/hf.away"
expect 0 "resumed from .*b/checkpoint/step-00000003 (step 3" \
    "titan-train ignores initial_load_path (gone now): run b resumes from its own step 3" -- \
    "$bin/titan-train" "$tmp/b" --training.steps=4
mv "$tmp/hf.away" "$tmp/hf"
expect 0 "" "import the HF export as a titan checkpoint (its tokenizer: hf-import)" -- \
    "$ck" convert -q --from hf "$tmp/hf" "$tmp/imp"
expect 0 "trained with tokenizer hf-import; this job's is byte" "a source of another tokenizer gets a warning" -- \
    "$bin/titan-init" "$cfg" "$tmp/t" $TINY --checkpoint.initial_load_path="$tmp/imp"
expect 0 "" "titan-init from a step directory" -- \
    "$bin/titan-init" -q "$cfg" "$tmp/c10" $TINY --checkpoint.initial_load_path="$a10"
check "run c10's seed holds step 10's weights" same_params "$a10" "$tmp/c10/checkpoint/step-00000000"
expect 0 "" "init run f" -- "$bin/titan-init" -q "$cfg" "$tmp/f" $TINY --training.steps=10
expect 0 "" "train run f 10 steps, FSDP on 2 ranks" -- "$bin/titan-train" -q "$tmp/f" --nproc 2 \
    --parallelism.data_parallel_shard_degree=2
expect 0 "" "titan-init from the FSDP checkpoint's root" -- \
    "$bin/titan-init" -q "$cfg" "$tmp/g" $TINY --checkpoint.initial_load_path="$tmp/f/checkpoint"
check "run g's seed holds the sharded checkpoint's weights" \
    same_params "$tmp/f/checkpoint/step-00000010" "$tmp/g/checkpoint/step-00000000"

# ---- refusals: exit status, the first difference named, nothing written --------------------
expect 2 "hf/config.json: hidden_size is 32, but the job's model has dim 64" "an HF model of another width" -- \
    "$bin/titan-init" "$cfg" "$tmp/x" $TINY --model.dim=64 \
    --checkpoint.initial_load_path="$tmp/hf" --checkpoint.initial_load_in_hf=true
check "nothing written" test ! -e "$tmp/x"
expect 2 "rope_theta is 500000, but the job's model has rope_theta 10000" "an HF model with another RoPE base" -- \
    "$bin/titan-init" "$cfg" "$tmp/x" $TINY --model.rope_theta=10000 \
    --checkpoint.initial_load_path="$tmp/hf" --checkpoint.initial_load_in_hf=true
expect 2 "tie_word_embeddings (or no lm_head.weight) is 0, but the job's model has tie_embeddings 1" \
    "an untied HF model for a tied job" -- "$bin/titan-init" "$cfg" "$tmp/x" $TINY --model.tie_embeddings=true \
    --checkpoint.initial_load_path="$tmp/hf" --checkpoint.initial_load_in_hf=true
expect 2 "model.n_layers is 2 in the checkpoint but 3 in the config" "a titan checkpoint of another depth" -- \
    "$bin/titan-init" "$cfg" "$tmp/x" $TINY --model.n_layers=3 --checkpoint.initial_load_path="$tmp/a"
check "nothing written" test ! -e "$tmp/x"
expect 3 "checkpoint.initial_load_path: .*nowhere" "a source that does not exist" -- \
    "$bin/titan-init" "$cfg" "$tmp/x" $TINY --checkpoint.initial_load_path="$tmp/nowhere"
expect 3 "checkpoint.initial_load_path: .*config.json" "a titan checkpoint read as an HF directory" -- \
    "$bin/titan-init" "$cfg" "$tmp/x" $TINY --checkpoint.initial_load_path="$tmp/a" --checkpoint.initial_load_in_hf=true
cp -r "$a10" "$tmp/damaged"
printf 'xxxx' | dd of="$tmp/damaged/rank-00000.bin" bs=1 seek=100 conv=notrunc 2>/dev/null
expect 7 "checkpoint.initial_load_path: .*damaged.*checksum" "a damaged checkpoint" -- \
    "$bin/titan-init" "$cfg" "$tmp/x" $TINY --checkpoint.initial_load_path="$tmp/damaged"
expect 2 "initial_load_model_only = false" "initial_load_model_only = false" -- \
    "$bin/titan-init" "$cfg" "$tmp/x" $TINY --checkpoint.initial_load_path="$tmp/a" \
    --checkpoint.initial_load_model_only=false
expect 2 "initial_load_in_hf = true: checkpoint.initial_load_path and model.hf_assets_path are empty" "initial_load_in_hf without a path" -- \
    "$bin/titan-init" "$cfg" "$tmp/x" $TINY --checkpoint.initial_load_in_hf=true
check "nothing written by any refusal" test ! -e "$tmp/x"
expect 2 "hidden_size" "--force over run c with a source that does not fit" -- \
    "$bin/titan-init" -f "$cfg" "$tmp/c" $TINY --model.dim=64 \
    --checkpoint.initial_load_path="$tmp/hf" --checkpoint.initial_load_in_hf=true
check "run c is as it was" same_params "$a20" "$tmp/c/checkpoint/step-00000000"

tap_end
