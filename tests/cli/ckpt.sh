#!/bin/sh
# CLI tests of titan-ckpt: ls, info, verify, diff, convert to and from Hugging
# Face format (bit-exact f32 round trip; logits against Hugging Face
# transformers, both ways), diff tolerances, pack/unpack (a run's archive
# unpacks as a run directory) and refusing unsafe archives. TAP output.
set -u
. "$(dirname "$0")/lib/tap.sh"
ck=$bin/titan-ckpt
PY=/usr/bin/python3
out_has() { grep -q -- "$1" "$tmp/out" && ok "$2" || fail "$2"; }

# --- a tiny run: seed checkpoint (step 0) and step 3 ---------------------------
shard_man_corpus 1
TINY="--model.dim=32 --model.n_layers=2 --model.n_heads=4 --model.n_kv_heads=2 --model.multiple_of=16
 --training.seq_len=32 --training.local_batch_size=2 --training.steps=3 --checkpoint.interval=3
 --checkpoint.keep_latest_k=0 --lr_scheduler.warmup_steps=2 --training.dataset_path=$tmp/data
 --metrics.peak_flops=1e11 --training.threads=2"
cfg=$top/configs/debugmodel.toml
expect 0 "" "titan-init tiny run" -- "$bin/titan-init" -q "$cfg" "$tmp/a" $TINY
expect 0 "" "train 3 steps" -- "$bin/titan-train" -q "$tmp/a"
s0=$tmp/a/checkpoint/step-00000000
s3=$tmp/a/checkpoint/step-00000003

# --- usage -----------------------------------------------------------------------
expect 0 "" "--help" -- "$ck" --help
expect 2 "unknown command" "unknown command is a usage error" -- "$ck" frobnicate "$tmp/a"
expect 2 "unknown option" "unknown option is a usage error" -- "$ck" info --bogus "$tmp/a"
expect 2 "expected" "missing argument is a usage error" -- "$ck" diff "$tmp/a"
expect 3 "nowhere" "missing checkpoint names the path" -- "$ck" info "$tmp/nowhere"

# --- ls and info -------------------------------------------------------------------
expect 0 "" "ls RUN" -- "$ck" ls "$tmp/a"
out_has "step-00000003.*192.*complete (latest)" "ls shows step 3, tokens seen, latest"
out_has "step-00000000" "ls shows the seed checkpoint"
mkdir "$tmp/a/checkpoint/step-00000009.tmp"
expect 0 "" "ls with a leftover .tmp" -- "$ck" ls "$tmp/a/checkpoint"
out_has "step-00000009.tmp.*incomplete" "ls marks a .tmp step incomplete"
rmdir "$tmp/a/checkpoint/step-00000009.tmp"
expect 0 "" "ls --json" -- "$ck" ls --json "$tmp/a"
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); assert [c["step"] for c in d["checkpoints"]]==[0,3] and d["checkpoints"][1]["latest"]' "$tmp/out" \
    && ok "ls --json parses, steps 0 and 3" || fail "ls --json parses, steps 0 and 3"
expect 0 "" "info RUN (latest step)" -- "$ck" info "$tmp/a"
out_has "layers.1.attention.wq.weight:exp_avg_sq" "info lists optimizer state"
out_has "dim 32, 2 layers, 4 heads, 2 kv heads, ffn 96, vocab 258" "info shows the model"
expect 0 "" "info --json of a step dir" -- "$ck" info --json "$s0"
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["step"]==0 and d["model"]["dim"]==32 and len(d["tensors"])==21 and d["tensors"][0]["shape"]==[258,32]' "$tmp/out" \
    && ok "info --json parses: step, model, 21 tensors" || fail "info --json parses: step, model, 21 tensors"

# --- verify and diff ------------------------------------------------------------------
expect 0 "" "verify a good checkpoint" -- "$ck" verify "$tmp/a"
out_has "every checksum matches" "verify says ok"
expect 0 "" "diff identical to itself -> 0" -- "$ck" diff "$tmp/a" "$s3"
expect 1 "" "diff step 0 vs step 3 -> 1" -- "$ck" diff "$s0" "$s3"
out_has "only_b .*exp_avg" "diff reports tensors only in B"
out_has "differ .*max_abs" "diff reports max abs difference"
expect 1 "" "diff --params-only --json" -- "$ck" diff --params-only --json "$s0" "$s3"
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); assert not d["identical"] and d["num_only_b"]==0 and d["num_differ"]==21' "$tmp/out" \
    && ok "diff --json: 21 parameters differ, no optimizer state" || fail "diff --json: 21 parameters differ, no optimizer state"
# --atol/--rtol: numpy allclose, |a-b| <= atol + rtol*|b|; exact without them.
expect 1 "" "diff --atol 0: every differing element is outside" -- "$ck" diff --params-only --atol 0 "$s0" "$s3"
out_has "differ .*elements differ, [1-9][0-9]* outside the tolerance" "diff with a tolerance says how many are outside"
out_has "21 differ, .*; \([0-9]*\) of \1 differing elements outside atol 0 rtol 0" "diff --atol 0 counts them all"
expect 0 "" "diff --atol 1: every element within" -- "$ck" diff --params-only --atol 1 "$s0" "$s3"
out_has "0 identical, 21 close, 0 differ, .*; 0 of [1-9][0-9]* differing elements outside atol 1 rtol 0" \
    "diff --atol 1: 21 close, none outside"
expect 1 "" "diff --rtol 1e-4 --json" -- "$ck" diff --params-only --json --rtol 1e-4 "$s0" "$s3"
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); t=[x for x in d["tensors"] if x["status"]!="close"]; assert d["rtol"]==1e-4 and d["num_elements_outside"]==sum(x["noutside"] for x in d["tensors"]) > 0 and all(0 < x["noutside"] <= x["ndiff"] for x in t)' "$tmp/out" \
    && ok "diff --json: elements outside the tolerance, per tensor and in all" \
    || fail "diff --json: elements outside the tolerance, per tensor and in all"
expect 2 "not a finite number >= 0" "diff --atol -1 is a usage error" -- "$ck" diff --atol -1 "$s0" "$s3"
cp -r "$tmp/a" "$tmp/e"
printf 'X' | dd of="$tmp/e/checkpoint/step-00000003/rank-00000.bin" bs=1 seek=100 conv=notrunc 2>/dev/null
expect 7 "checksum mismatch in tensor tok_embeddings.weight (chunk 0)" "verify: corrupt byte -> exit 7, names tensor and chunk" -- "$ck" verify "$tmp/e"
grep -q "rank-00000.bin: byte 0:" "$tmp/err" && ok "verify names the data file and byte" || fail "verify names the data file and byte"
expect 7 "checksum" "diff of a corrupt checkpoint -> exit 7" -- "$ck" diff "$tmp/a" "$tmp/e"
printf '{"format": "titan-checkpoint", "version": 1, "step": 3, "tensors": {' > "$tmp/e/checkpoint/step-00000003/metadata.json"
expect 4 "metadata.json" "verify: broken catalog -> exit 4" -- "$ck" verify "$tmp/e/checkpoint/step-00000003"

# --- damaged checkpoints: the exit status says which kind (3 file, 4 catalog, 7 data) ---
# bad NAME PYTHON: a copy of step 3 as $tmp/bad/NAME whose metadata.json the
# Python statements change (m is the catalog, c(t, k) chunk k of tensor t).
bad() {
    rm -rf "$tmp/bad/$1"; mkdir -p "$tmp/bad"; cp -r "$s3" "$tmp/bad/$1"
    $PY - "$tmp/bad/$1/metadata.json" "$2" <<'EOF'
import json, sys
p = sys.argv[1]
m = json.load(open(p))
c = lambda t, k: m["tensors"][t]["chunks"][k]
exec(sys.argv[2])
json.dump(m, open(p, "w"), indent=1)
EOF
}
bad trunc ""
data=$tmp/bad/trunc/rank-00000.bin
truncate -s $(( $(wc -c < "$data") - 100 )) "$data"
expect 7 "rank-00000.bin: byte [0-9]*: truncated" "truncated data file -> 7, names the file and byte" -- "$ck" verify "$tmp/bad/trunc"
grep -q "tensor output.weight:exp_avg_sq (chunk 0) needs bytes" "$tmp/err" && ok "truncated: names the tensor and chunk" \
    || fail "truncated: names the tensor and chunk"
bad flip ""
printf '\001' | dd of="$tmp/bad/flip/rank-00000.bin" bs=1 seek=70000 conv=notrunc 2>/dev/null
expect 7 "rank-00000.bin: byte [0-9]*: checksum mismatch in tensor" "flipped byte -> 7" -- "$ck" verify "$tmp/bad/flip"
bad missing 'c("output.weight", 0)["file"] = "rank-00001.bin"'
expect 3 "metadata.json: tensor output.weight: chunk 0: data file .*rank-00001.bin: No such file" \
    "chunk in a missing data file -> 3, names tensor, chunk and file" -- "$ck" verify "$tmp/bad/missing"
bad range 'c("norm.weight", 0)["box"]["offset"] = [1]'
expect 4 "metadata.json: tensor norm.weight: chunk 0: box offset \[1\] size \[32\] outside the shape" \
    "box out of range -> 4" -- "$ck" verify "$tmp/bad/range"
bad overlap 'e = m["tensors"]["norm.weight"]; h = dict(c("norm.weight", 0)); e["chunks"] = [dict(h, box={"offset": [0], "size": [16]}, nbytes=64, stored_nbytes=64), dict(h, box={"offset": [8], "size": [24]}, nbytes=96, stored_nbytes=96)]'
expect 4 "metadata.json: tensor norm.weight: chunks 0 and 1 overlap" "overlapping boxes -> 4" -- "$ck" verify "$tmp/bad/overlap"
bad gap 'e = m["tensors"]["norm.weight"]; h = dict(c("norm.weight", 0)); e["chunks"] = [dict(h, box={"offset": [0], "size": [16]}, nbytes=64, stored_nbytes=64)]'
expect 4 "tensor norm.weight: chunks cover 16 of 32 elements" "chunks not covering a tensor -> 4" -- "$ck" verify "$tmp/bad/gap"
bad dtype 'm["tensors"]["norm.weight"]["dtype"] = "f64"'
expect 4 "metadata.json: tensor norm.weight: unknown dtype" "unknown dtype -> 4" -- "$ck" verify "$tmp/bad/dtype"
bad huge 'c("norm.weight", 0)["nbytes"] = 2**62'
expect 4 "tensor norm.weight: chunk 0: nbytes 4611686018427387904" "absurd length -> 4" -- "$ck" verify "$tmp/bad/huge"
# Metadata that contradicts the catalog: refused when opened, before anything
# is sized by it (an export of the first ran for minutes).
bad nlayers 'm["meta"]["model.n_layers"] = 1000000'
expect 4 "nlayers: tensor layers.2.attention_norm.weight is missing from the catalog, but the model its metadata names has it (model.n_layers 1000000)" \
    "metadata with more layers than the catalog -> 4" -- "$ck" verify "$tmp/bad/nlayers"
expect 4 "missing from the catalog" "convert --to hf of it -> 4 at once" -- timeout 20 "$ck" convert --to hf "$tmp/bad/nlayers" "$tmp/bad/nlayers-hf"
bad fewlayers 'm["meta"]["model.n_layers"] = 1'
expect 4 "tensor layers.1.attention_norm.weight is not part of the model its metadata names (model.n_layers 1" \
    "metadata with fewer layers than the catalog -> 4" -- "$ck" verify "$tmp/bad/fewlayers"
bad wide 'm["meta"]["model.dim"] = 64'
expect 4 "tensor tok_embeddings.weight: f32 \[258 x 32\] in the catalog, but the model its metadata names (model.dim 64, ...) has f32 \[258 x 64\]" \
    "metadata with another dim than the catalog's shapes -> 4" -- "$ck" verify "$tmp/bad/wide"
bad comp 'c("norm.weight", 0)["compression"] = "lz4"'
expect 4 "compression \"lz4\" is not supported" "unknown compression -> 4" -- "$ck" info "$tmp/bad/comp"

# --- zstd chunks: [checkpoint] compression ---------------------------------------------
expect 0 "" "init run z (zstd chunks)" -- "$bin/titan-init" -q "$cfg" "$tmp/z" $TINY --checkpoint.compression=zstd --checkpoint.compression_level=5
expect 0 "" "train run z 3 steps" -- "$bin/titan-train" -q "$tmp/z"
expect 0 "" "zstd run == raw run, bit for bit (diff reads both)" -- "$ck" diff "$tmp/a" "$tmp/z"
expect 0 "" "verify a zstd checkpoint" -- "$ck" verify "$tmp/z"
expect 0 "" "info --json of a zstd checkpoint" -- "$ck" info --json "$tmp/z"
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["compression"] in ("zstd","mixed") and d["stored_bytes"] < d["total_bytes"]' "$tmp/out" \
    && ok "info --json: compression and stored_bytes < total_bytes" || fail "info --json: compression and stored_bytes < total_bytes"
grep -q '"compression": "zstd"' "$tmp/z/checkpoint/step-00000003/metadata.json" && ok "catalog records zstd chunks" \
    || fail "catalog records zstd chunks"
expect 2 "compression_level" "compression_level 20 is refused" -- "$bin/titan-init" -q "$cfg" "$tmp/z2" $TINY --checkpoint.compression_level=20
cp -r "$tmp/z/checkpoint/step-00000003" "$tmp/bad/zflip"
off=$($PY -c 'import json,sys; m=json.load(open(sys.argv[1])); c=[c for t in m["tensors"].values() for c in t["chunks"] if c["compression"]=="zstd"][0]; print(c["offset"] + c["stored_nbytes"] // 2)' "$tmp/bad/zflip/metadata.json")
printf '\377' | dd of="$tmp/bad/zflip/rank-00000.bin" bs=1 seek="$off" conv=notrunc 2>/dev/null
expect 7 "rank-00000.bin: byte [0-9]*: " "damaged zstd frame -> 7" -- "$ck" verify "$tmp/bad/zflip"

# --- Hugging Face export / import ----------------------------------------------------
expect 0 "" "convert --to hf (f32)" -- "$ck" convert -q --to hf "$tmp/a" "$tmp/hf"
[ -f "$tmp/hf/model.safetensors" ] && [ -f "$tmp/hf/config.json" ] && [ ! -f "$tmp/hf/model.safetensors.index.json" ] \
    && ok "single model.safetensors + config.json, no index" || fail "single model.safetensors + config.json, no index"
$PY -c 'import json,sys; c=json.load(open(sys.argv[1])); assert c["architectures"]==["LlamaForCausalLM"] and c["num_key_value_heads"]==2 and c["intermediate_size"]==96 and c["rope_scaling"]["rope_type"]=="llama3" and c["rms_norm_eps"]==1e-5 and c["torch_dtype"]=="float32"' "$tmp/hf/config.json" \
    && ok "config.json fields" || fail "config.json fields"
expect 2 "not empty" "export refuses a non-empty OUTDIR" -- "$ck" convert --to hf "$tmp/a" "$tmp/hf"
expect 0 "" "convert --from hf" -- "$ck" convert -q --from hf "$tmp/hf" "$tmp/imp"
expect 0 "" "f32 round trip: parameters bit-identical" -- "$ck" diff --params-only "$s3" "$tmp/imp"
expect 0 "" "export --dtype bf16, sharded with an index" -- "$ck" convert -q --to hf "$tmp/a" "$tmp/hfb" --dtype bf16 --shard-size 40000
[ -f "$tmp/hfb/model-00001-of-00003.safetensors" ] && [ -f "$tmp/hfb/model.safetensors.index.json" ] \
    && ok "bf16 export: 3 shards + index" || fail "bf16 export: 3 shards + index"
expect 0 "" "import the sharded bf16 export" -- "$ck" convert -q --from hf "$tmp/hfb" "$tmp/impb"
expect 1 "" "bf16 round trip differs from f32" -- "$ck" diff --params-only --json "$s3" "$tmp/impb"
$PY -c 'import json,sys; d=json.load(open(sys.argv[1])); assert max(t["max_rel"] for t in d["tensors"]) <= 2**-8' "$tmp/out" \
    && ok "bf16 round trip within bf16 rounding (rel <= 2^-8)" || fail "bf16 round trip within bf16 rounding (rel <= 2^-8)"
cp -r "$tmp/hf" "$tmp/hfx"
printf '\377\377\377\377' | dd of="$tmp/hfx/model.safetensors" bs=1 seek=0 conv=notrunc 2>/dev/null
expect 4 "model.safetensors: byte 0: header length" "import of a safetensors file with an absurd header length -> 4" -- "$ck" convert --from hf "$tmp/hfx" "$tmp/impx"
[ ! -e "$tmp/impx/step-00000000" ] && ok "failed import leaves no checkpoint" || fail "failed import leaves no checkpoint"
# st_edit DIR PYTHON: a copy of the f32 export as DIR whose model.safetensors
# header (h, a dict) the Python statements change; the data stays.
st_edit() {
    rm -rf "$1"; cp -r "$tmp/hf" "$1"
    $PY - "$1/model.safetensors" "$2" <<'EOF'
import json, struct, sys
p = sys.argv[1]
b = open(p, "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
exec(sys.argv[2])
t = json.dumps(h).encode()
t += b" " * (-len(t) % 8)
open(p, "wb").write(struct.pack("<Q", len(t)) + t + b[8 + n:])
EOF
}
st_edit "$tmp/hfd" 'h["model.norm.weight"]["dtype"] = "I64"'
expect 4 "model.safetensors: header: tensor model.norm.weight: dtype \"I64\" is not supported" "safetensors with a wrong dtype -> 4" -- "$ck" convert --from hf "$tmp/hfd" "$tmp/impd"
st_edit "$tmp/hft" 'pass'
f=$tmp/hft/model.safetensors; truncate -s $(( $(wc -c < "$f") - 64 )) "$f"
expect 7 "model.safetensors: byte [0-9]*: truncated: tensor" "truncated safetensors file -> 7" -- "$ck" convert --from hf "$tmp/hft" "$tmp/impt"

# A layer count from config.json never sizes a stack array: beyond titan's
# limit, or beyond the tensors the files hold, it is refused by name at once.
cfg_edit() { # DIR PYTHON: a copy of the f32 export whose config.json (c) the statements change
    rm -rf "$1"; cp -r "$tmp/hf" "$1"
    $PY -c 'import json, sys; p = sys.argv[1]; c = json.load(open(p)); exec(sys.argv[2]); json.dump(c, open(p, "w"))' \
        "$1/config.json" "$2"
}
cfg_edit "$tmp/hfl" 'c["num_hidden_layers"] = 2000000000'
expect 4 'config.json: "num_hidden_layers": 2000000000 layers, more than the 1048576' \
    "config.json with 2e9 layers -> 4, names the key" -- "$ck" convert --from hf "$tmp/hfl" "$tmp/impl"
cfg_edit "$tmp/hfl" 'c["num_hidden_layers"] = 1000000'
expect 4 'config.json: "num_hidden_layers": 1000000 layers need 9000003 tensors, but the safetensors files hold 21' \
    "config.json with 1e6 layers for 2 layers of tensors -> 4" -- "$ck" convert --from hf "$tmp/hfl" "$tmp/impl"

# transformers 5 writes RoPE as rope_parameters (no rope_theta, no rope_scaling).
rm -rf "$tmp/hf5"; cp -r "$tmp/hf" "$tmp/hf5"
$PY - "$tmp/hf5/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["rope_parameters"] = dict(c.pop("rope_scaling"), rope_theta=c.pop("rope_theta"))
json.dump(c, open(sys.argv[1], "w"))
EOF
expect 0 "" "import a config.json with transformers 5's rope_parameters" -- "$ck" convert -q --from hf "$tmp/hf5" "$tmp/imp5"
expect 0 "" "info of it" -- "$ck" info "$tmp/imp5"
out_has "rope theta 500000, scaling 8," "rope_theta and the llama3 scaling come from rope_parameters"

# An HF import is a seed checkpoint titan-train resumes from: same 3 steps, same bits.
expect 0 "" "convert step 0 --to hf" -- "$ck" convert -q --to hf "$s0" "$tmp/hf0"
expect 0 "" "init run c" -- "$bin/titan-init" -q "$cfg" "$tmp/c" $TINY
rm -rf "$tmp/c/checkpoint"
expect 0 "" "import step 0 as run c's checkpoint" -- "$ck" convert -q --from hf "$tmp/hf0" "$tmp/c/checkpoint" --tokenizer byte
expect 0 "" "train run c from the imported checkpoint" -- "$bin/titan-train" -q "$tmp/c"
expect 0 "" "trained from the import == trained from the original (with optimizer state)" -- "$ck" diff "$s3" "$tmp/c"

# Logits in Hugging Face transformers (tests/python/hf_check.py: AutoModelForCausalLM
# in float64) vs titan's own (titan-ckpt eval), both ways.
. "$top/tests/cli/lib/hf.sh"
TOK=1,2,3,40,50,60,70,80,90,100,255,256,257,0,5,9,33,34,35,36,37,38,39,41
if need_pyref "HF export and import against transformers"; then
    hf_logits "f32 export loads with transformers: q/k = published permutation, logits match (rel < 1e-4)" \
        "$tmp/hf" $TOK "$tmp/a" --titan-ckpt "$s3"
    hf_logits "bf16 sharded export loads with transformers, logits = titan's of its import (rel < 1e-4)" \
        "$tmp/hfb" $TOK "$tmp/impb" --titan-ckpt "$s3"
    # Random LlamaForCausalLM made and saved by transformers, large weights: a wrong
    # RoPE convention or scaling is off by O(1). 256 positions against original
    # contexts of 32 and 64: llama3 scaling changes the angles by radians.
    T256=$(toks 256 96)
    expect 0 "" "transformers saves a random Llama: f32, untied, GQA 4/2, llama3 scaling (factor 8)" -- \
        "$PYREF" "$top/tests/python/hf_check.py" make "$tmp/rnd" --heads 4 --kv-heads 2 --llama3 8,1,4,32
    expect 0 "" "import it (convert --from hf)" -- "$ck" convert -q --from hf "$tmp/rnd" "$tmp/rndimp"
    hf_logits "titan's logits of the import match transformers' (rel < 1e-4)" "$tmp/rnd" "$T256" "$tmp/rndimp" \
        --far no-rope-scaling --far interleaved
    far no-rope-scaling "the model without rope_scaling"
    far interleaved "the model with q/k rows unpermuted"
    expect 0 "" "transformers saves a random Llama: bf16, tied, GQA 4/1, 3 layers, llama3 scaling (factor 32)" -- \
        "$PYREF" "$top/tests/python/hf_check.py" make "$tmp/rnd2" --heads 4 --kv-heads 1 --layers 3 --tie \
        --dtype bfloat16 --theta 500000 --llama3 32,1,4,64 --seed 2
    expect 0 "" "import it (bf16 to f32, tied: no lm_head.weight)" -- "$ck" convert -q --from hf "$tmp/rnd2" "$tmp/rnd2imp"
    expect 0 "" "info of the import" -- "$ck" info "$tmp/rnd2imp"
    out_has "4 heads, 1 kv heads, ffn 160, vocab 96, tied embeddings" "the import is tied, with 1 kv head"
    out_has "rope theta 500000, scaling 32," "rope_theta and llama3 scaling read from transformers 5's rope_parameters"
    hf_logits "titan's logits of the import match transformers' (rel < 1e-4)" "$tmp/rnd2" "$T256" "$tmp/rnd2imp" \
        --far no-rope-scaling
    far no-rope-scaling "the model without rope_scaling"
fi

# --- pack / unpack ---------------------------------------------------------------------
expect 0 "" "pack" -- "$ck" pack -q "$tmp/a" "$tmp/a.tar.zst"
expect 0 "" "unpack" -- "$ck" unpack -q "$tmp/a.tar.zst" "$tmp/un"
expect 0 "" "unpacked == original" -- "$ck" diff "$tmp/a" "$tmp/un"
[ "$(cat "$tmp/un/checkpoint/latest")" = "step-00000003" ] && ok "unpack writes latest" || fail "unpack writes latest"
expect 2 "already exists" "unpack refuses to overwrite a step" -- "$ck" unpack "$tmp/a.tar.zst" "$tmp/un"
# A run's archive carries its config.toml: unpacked elsewhere it is a run
# directory again, which titan-ckpt and titan-train take as such.
cmp -s "$tmp/a/config.toml" "$tmp/un/config.toml" && ok "unpack writes the run's config.toml" \
    || fail "unpack writes the run's config.toml"
expect 0 "" "verify the unpacked run" -- "$ck" verify "$tmp/un"
out_has "un/checkpoint/step-00000003: ok: .*every checksum matches" "verify reads the unpacked run's checkpoint"
expect 0 "resumed from .*un/checkpoint/step-00000003" "titan-train resumes the unpacked run" -- \
    "$bin/titan-train" "$tmp/un" --training.steps=5 --stop-at 4
[ "$(cat "$tmp/un/checkpoint/latest")" = "step-00000004" ] && ok "the unpacked run trains on" \
    || fail "the unpacked run trains on"
expect 0 "" "pack a step dir of the run" -- "$ck" pack -q "$s0" "$tmp/s0.tar.zst"
tar --zstd -tf "$tmp/s0.tar.zst" 2>/dev/null | head -n 1 | grep -qx "config.toml" \
    && ok "a step dir's archive holds its run's config.toml first" \
    || fail "a step dir's archive holds its run's config.toml first"
if [ -d "$tmp/imp" ]; then # a bare checkpoint root (convert --from hf): no config, unpacks as a root
    expect 0 "no run config.toml" "pack a bare checkpoint root" -- "$ck" pack "$tmp/imp" "$tmp/imp.tar.zst"
    expect 0 "" "unpack a bare root's archive" -- "$ck" unpack -q "$tmp/imp.tar.zst" "$tmp/unimp"
    [ -f "$tmp/unimp/latest" ] && [ ! -e "$tmp/unimp/config.toml" ] && ok "a bare root unpacks as a root" \
        || fail "a bare root unpacks as a root"
else
    skip "pack a bare checkpoint root" "no import (Python references)"
fi
cp -r "$tmp/a" "$tmp/f"
printf 'X' | dd of="$tmp/f/checkpoint/step-00000003/rank-00000.bin" bs=1 seek=200 conv=notrunc 2>/dev/null
expect 7 "checksum" "pack refuses a corrupt checkpoint" -- "$ck" pack "$tmp/f" "$tmp/f.tar.zst"
[ ! -e "$tmp/f.tar.zst" ] && [ ! -e "$tmp/f.tar.zst.tmp" ] && ok "failed pack leaves no file" || fail "failed pack leaves no file"
# Crafted archives: path traversal, absolute paths, links.
mk_tar() { # name, then entries as kind:name (f: file, l: symlink to /etc/passwd)
    out=$1; shift
    $PY - "$out" "$@" <<'EOF'
import io, sys, tarfile
with tarfile.open(sys.argv[1], "w", format=tarfile.PAX_FORMAT) as t:
    for spec in sys.argv[2:]:
        kind, name = spec.split(":", 1)
        ti = tarfile.TarInfo(name)
        if kind == "l":
            ti.type, ti.linkname = tarfile.SYMTYPE, "/etc/passwd"
            t.addfile(ti)
        else:
            data = b"evil\n"
            ti.size = len(data)
            t.addfile(ti, io.BytesIO(data))
EOF
    zstd -q -f "$out" -o "$out.zst" && rm -f "$out"
}
if command -v zstd >/dev/null 2>&1; then
    mk_tar "$tmp/dotdot.tar" "f:step-00000001/../../evil"
    expect 4 "\"..\" component refused" "unpack refuses ../ paths" -- "$ck" unpack "$tmp/dotdot.tar.zst" "$tmp/u1"
    [ ! -e "$tmp/evil" ] && ok "nothing written outside OUTDIR" || fail "nothing written outside OUTDIR"
    mk_tar "$tmp/abs.tar" "f:$tmp/abs-evil"
    expect 4 "absolute path refused" "unpack refuses absolute paths" -- "$ck" unpack "$tmp/abs.tar.zst" "$tmp/u2"
    [ ! -e "$tmp/abs-evil" ] && ok "absolute entry not written" || fail "absolute entry not written"
    mk_tar "$tmp/link.tar" "l:step-00000001/rank-00000.bin"
    expect 4 "links" "unpack refuses symlinks" -- "$ck" unpack "$tmp/link.tar.zst" "$tmp/u3"
    mk_tar "$tmp/other.tar" "f:README"
    expect 4 "not part of a titan checkpoint" "unpack refuses foreign names" -- "$ck" unpack "$tmp/other.tar.zst" "$tmp/u4"
    # a run's archive whose config.toml puts the steps outside OUTDIR
    mkdir -p "$tmp/esc" && tar --zstd -xf "$tmp/a.tar.zst" -C "$tmp/esc" \
        && printf '[checkpoint]\nfolder = "../escaped"\n' > "$tmp/esc/config.toml" \
        && (cd "$tmp/esc" && tar --zstd -cf "$tmp/esc.tar.zst" config.toml step-00000003 latest)
    expect 4 "leaves the run directory" "unpack refuses a checkpoint.folder outside OUTDIR" -- \
        "$ck" unpack "$tmp/esc.tar.zst" "$tmp/u5"
    [ ! -e "$tmp/escaped" ] && ok "nothing unpacked outside OUTDIR" || fail "nothing unpacked outside OUTDIR"
    # The entry's name, copied before libarchive frees it (printed freed memory before).
    zstd -q -d -f "$tmp/a.tar.zst" -o "$tmp/cut.tar"
    truncate -s $(( $(wc -c < "$tmp/cut.tar") / 2 )) "$tmp/cut.tar"
    expect 4 "cut.tar: entry step-00000003/rank-00000.bin: Truncated" \
        "unpack of an archive cut short -> 4, names the entry" -- "$ck" unpack "$tmp/cut.tar" "$tmp/u6"
    [ ! -e "$tmp/u6/step-00000003" ] && ok "a cut archive unpacks nothing" || fail "a cut archive unpacks nothing"
else
    skip "crafted archives" "zstd CLI not installed"
fi

tap_end
