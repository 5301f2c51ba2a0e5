#!/bin/sh
# CLI test of torchtitan's own Llama 3 jobs (tests/fixtures/torchtitan/:
# debug_model, llama3_8b, llama3_70b, llama3_405b of torchtitan's last TOML
# release, their sections, keys and values without the comments), loaded
# unchanged: each key's status (titan-train --print-keys) is the expected
# listing beside the job; the resolved config (--print-config) holds each
# implemented key's value from the file; a job file's defaults that differ
# from torchtitan's are named; keys that would change the computation are
# refused; a dataset that is no shard directory is told how to make one;
# and the debug job, with only its data path, steps and seq_len overridden,
# trains on the CPU with its hf_assets_path holding a tokenizer.json this
# test writes (whose directory, made a Hugging Face export, also seeds a
# run's weights). TAP output.
set -u
EXPECT_TIMEOUT=300
. "$(dirname "$0")/lib/tap.sh"
PY=/usr/bin/python3
jobs=$top/tests/fixtures/torchtitan
export TITAN_NO_REEXEC=1

# ---- every key's status, as expected --------------------------------------------------------
# A job's listing, reasons cut: "section.key = value<TAB>status".
statuses() { "$bin/titan-train" --print-keys "$1" 2>"$tmp/err" | sed 's/\t\([a-z ]*\).*/\t\1/'; }
for j in debug_model 8b 70b 405b; do
    f=$jobs/llama3_$j.toml
    statuses "$f" > "$tmp/$j.keys"
    rc=$?
    if diff "$jobs/llama3_$j.keys" "$tmp/$j.keys" > "$tmp/err"; then ok "$j: every key's status is the expected one"
    else fail "$j: every key's status is the expected one"; fi
done
expect 0 "" "--print-keys lists torchtitan's whole schema" -- "$bin/titan-train" --print-keys
lines=$(grep -vc '^#' "$tmp/out")
schema=$(wc -l < "$top/tests/fixtures/torchtitan_schema.txt")
[ "$lines" -gt "$schema" ] && ! grep -q "	unknown" "$tmp/out" && ok "it has every schema key ($lines lines, $schema in the schema)" ||
    fail "it has every schema key ($lines lines, $schema in the schema)"
grep -q "^training.enable_cpu_offload	refused (false accepted): " "$tmp/out" &&
    grep -q "^compile.enable	meaningless here: titan's kernels" "$tmp/out" &&
    grep -q "^debug.seed	implemented (as training.seed)" "$tmp/out" &&
    grep -q '^checkpoint.enable	implemented; default true (torchtitan: false)' "$tmp/out" &&
    ok "statuses, other spellings and default pairs read as titan-train(1) shows them" ||
    fail "statuses, other spellings and default pairs read as titan-train(1) shows them"
if TITAN_BIN=$bin "$top/scripts/man-keys.sh" --check > "$tmp/err" 2>&1; then ok "titan-train(1)'s key table is the code's"
else fail "titan-train(1)'s key table is the code's"; fi

# ---- the resolved configs -------------------------------------------------------------------
# same_values KEYS CONFIG: every implemented key of KEYS has its value in CONFIG (TOML).
same_values() {
    $PY - "$1" "$2" <<'EOF'
import sys, tomllib
cfg = tomllib.load(open(sys.argv[2], "rb"))
bad = 0
for line in open(sys.argv[1]):
    kv, status = line.rstrip("\n").split("\t")
    if status != "implemented": continue
    name, value = kv.split(" = ", 1)
    section, key = name.rsplit(".", 1)
    want = tomllib.loads("v = " + value)["v"]
    table = cfg
    for part in section.split("."): table = table.get(part, {}) # [quantize.linear.float8] nests
    got = table.get(key)
    if got != want:
        print("%s: resolved %r, the job says %r" % (name, got, want)); bad += 1
sys.exit(1 if bad else 0)
EOF
}
for j in debug_model 8b 70b 405b; do
    expect 0 "leaves at titan's default .* keys whose torchtitan default differs" \
        "$j: loads unchanged, naming the defaults that differ" -- "$bin/titan-train" --print-config "$jobs/llama3_$j.toml"
    cp "$tmp/out" "$tmp/$j.resolved"
    grep -q 'training.mixed_precision_param = "float32" (torchtitan: "bfloat16")' "$tmp/err" &&
        ! grep -q "checkpoint.enable = " "$tmp/err" && ! grep -q "validation.seq_len = " "$tmp/err" &&
        ok "$j: the bf16 default named; checkpoint.enable (set) and validation's (off) not" ||
        fail "$j: the bf16 default named; checkpoint.enable (set) and validation's (off) not"
    if same_values "$jobs/llama3_$j.keys" "$tmp/$j.resolved" > "$tmp/err" 2>&1; then
        ok "$j: the resolved config holds every implemented key's value"
    else fail "$j: the resolved config holds every implemented key's value"; fi
done
expect 0 "" "8b with bf16 and validation on the command line" -- "$bin/titan-train" --print-config \
    "$jobs/llama3_8b.toml" --training.mixed_precision_param=bfloat16 --validation.enable=true \
    --validation.dataset_path=/nonexistent
! grep -q "mixed_precision_param" "$tmp/err" && grep -q "validation.local_batch_size = -1 (torchtitan: 8)" "$tmp/err" &&
    ok "... names validation's defaults, not the key the command line set" ||
    fail "... names validation's defaults, not the key the command line set"
# a few values pinned, beyond "the same as the file"
grep -q '^flavor = "70B"$' "$tmp/70b.resolved" && grep -q '^tensor_parallel_degree = 8$' "$tmp/70b.resolved" &&
    grep -q '^mode = "full"$' "$tmp/70b.resolved" && grep -q '^selective_ac_option = "op"$' "$tmp/8b.resolved" &&
    grep -q '^pipeline_parallel_schedule = "Interleaved1F1B"$' "$tmp/debug_model.resolved" &&
    grep -q '^enable = false$' "$tmp/8b.resolved" && grep -q '^mixed_precision_param = "float32"$' "$tmp/8b.resolved" &&
    ok "70B: tp 8, full AC; 8B: op-level AC; debug: Interleaved1F1B; float32 where the job says nothing" ||
    fail "70B: tp 8, full AC; 8B: op-level AC; debug: Interleaved1F1B; float32 where the job says nothing"
# 405B trains its linears in float8 (torchtitan's alias "float8" for quantize.linear.float8)
grep -q '^converters = \["float8"\]$' "$tmp/405b.resolved" && grep -q '^filter_fqns = \["output"\]$' "$tmp/405b.resolved" &&
    grep -q '^enable_fsdp_float8_all_gather = true$' "$tmp/405b.resolved" &&
    ok "405B: converters = [\"float8\"] read, its [quantize.linear.float8] honoured" ||
    fail "405B: converters = [\"float8\"] read, its [quantize.linear.float8] honoured"

# ---- keys that change what titan computes, holds or writes are refused ---------------------
# refuse DESCRIPTION PATTERN SED_SCRIPT: the debug job edited by SED_SCRIPT is refused
refuse() {
    sed "$3" "$jobs/llama3_debug_model.toml" > "$tmp/job.toml"
    expect 2 "$2" "$1" -- "$bin/titan-train" --print-config "$tmp/job.toml"
}
refuse "training.enable_cpu_offload = true" "enable_cpu_offload = true: not supported: FSDP's offload" \
    '/^\[training\]/a enable_cpu_offload = true'
refuse "training.dtype = bfloat16" 'training.dtype = "bfloat16": not supported' '/^\[training\]/a dtype = "bfloat16"'
refuse "fault_tolerance.enable = true" "torchft's replica groups" '$a [fault_tolerance]\nenable = true'
grep -q "set it to false" "$tmp/err" && ok "... with the value that is accepted" || fail "... with the value that is accepted"
refuse "a misspelt key of a known table" "unknown key 'fault_tolerance.enabel'" '$a [fault_tolerance]\nenabel = true'
refuse "profiling.enable_memory_snapshot = true" "enable_memory_snapshot = true: not supported" \
    's/^enable_memory_snapshot = false/enable_memory_snapshot = true/'
refuse "[training.dataloader] with a key it lacks" "training.dataloader.workers" '$a [training.dataloader]\nworkers = 2'
refuse "debug.seed beside training.seed" "debug.seed: same key as training.seed" \
    '/^\[training\]/a seed = 4
$a [debug]\nseed = 3'

# ---- the debug job trains on the CPU ---------------------------------------------------------
mkdir -p "$tmp/job/tests/assets/tokenizer"
cp "$jobs/llama3_debug_model.toml" "$tmp/job/"
# a byte-level BPE tokenizer.json: the 256 bytes, a few merges, Llama 3's two specials
$PY - "$tmp/job/tests/assets/tokenizer/tokenizer.json" <<'EOF'
import json, sys
bs = list(range(33, 127)) + list(range(161, 173)) + list(range(174, 256))
cs, k = bs[:], 0
for b in range(256):
    if b not in bs: bs.append(b); cs.append(256 + k); k += 1
vocab = {chr(c): b for b, c in zip(bs, cs)}
merges = [["t", "h"], ["th", "e"], ["Ġ", "t"], ["i", "n"]]
for a, b in merges: vocab[a + b] = len(vocab)
n = len(vocab)
json.dump({"added_tokens": [{"id": n, "content": "<|begin_of_text|>", "special": True},
                            {"id": n + 1, "content": "<|end_of_text|>", "special": True}],
           "model": {"type": "BPE", "vocab": vocab, "merges": [" ".join(m) for m in merges]}},
          open(sys.argv[1], "w"))
EOF
cat "$top"/man/*.1 > "$tmp/corpus.txt"
tok="hf:$tmp/job/tests/assets/tokenizer/tokenizer.json"
expect 0 "" "shard a corpus with that tokenizer" -- "$bin/titan-shard" -q --tokenizer "$tok" -o "$tmp/data" "$tmp/corpus.txt"
cd "$tmp/job" || exit 1
# torchtitan's dataset name (c4_test), and a corpus file, are no shard directories
expect 2 'training.dataset = "c4_test": not a shard directory' "the job as it is: training.dataset names no shards" -- \
    "$bin/titan-train" -q --job.config_file llama3_debug_model.toml --training.steps=2 --training.seq_len=64
grep -q "titan-shard -o DIR" "$tmp/err" && ok "... and the hint says how to make them" ||
    fail "... and the hint says how to make them"
rm -rf outputs
expect 3 "training.dataset_path = $tmp/corpus.txt: not a directory of token shards (a file)" \
    "a corpus file as dataset_path: how to shard it" -- "$bin/titan-train" -q --job.config_file llama3_debug_model.toml \
    --training.dataset_path="$tmp/corpus.txt" --training.steps=2 --training.seq_len=64
grep -q "titan-shard -o DIR $tmp/corpus.txt" "$tmp/err" && ok "... naming the file in the titan-shard command" ||
    fail "... naming the file in the titan-shard command"
rm -rf outputs
expect 0 "" "the debug job trains 2 steps (data path, steps and seq_len overridden)" -- \
    "$bin/titan-train" --job.config_file llama3_debug_model.toml --training.dataset_path="$tmp/data" \
    --training.steps=2 --training.seq_len=64
grep -q "^tokenizer = \"$tok\"$" outputs/config.toml && ok "its run's tokenizer is hf_assets_path's tokenizer.json" ||
    fail "its run's tokenizer is hf_assets_path's tokenizer.json"
$PY - outputs/metrics.jsonl <<'EOF' && ok "metrics: 2 steps, finite losses near ln(vocab)" || fail "metrics: 2 steps, finite losses near ln(vocab)"
import json, math, sys
losses = [d["loss"] for d in map(json.loads, open(sys.argv[1])) if "loss" in d and "step" in d]
assert len(losses) == 2 and all(math.isfinite(x) and 3 < x < 8 for x in losses), losses
EOF
expect 0 "" "the same job again goes on in its run" -- "$bin/titan-train" --job.config_file llama3_debug_model.toml \
    --training.dataset_path="$tmp/data" --training.steps=2 --training.seq_len=64
grep -q "whose keys differ" "$tmp/err" && fail "... with no key differing from the run's (hf_assets_path's tokenizer too)" ||
    ok "... with no key differing from the run's (hf_assets_path's tokenizer too)"
 grep -q '^mode = "selective"$' outputs/config.toml &&
    grep -q '^local_batch_size = 8$' outputs/config.toml && ok "the run keeps the job's selective AC and batch 8" ||
    fail "the run keeps the job's selective AC and batch 8"

# ---- hf_assets_path seeds the weights (initial_load_in_hf without a path) --------------------
ck=$bin/titan-ckpt
expect 0 "" "export the debug run's seed as a Hugging Face directory" -- \
    "$ck" convert -q --to hf outputs/checkpoint/step-00000000 "$tmp/hf"
expect 0 "seed weights from $tmp/hf (Hugging Face Llama)" "titan-init the job with hf_assets_path there and initial_load_in_hf" -- \
    "$bin/titan-init" llama3_debug_model.toml "$tmp/seeded" --model.hf_assets_path="$tmp/hf" \
    --checkpoint.initial_load_in_hf=true --training.seed=5
"$ck" diff -q --params-only outputs/checkpoint/step-00000000 "$tmp/seeded/checkpoint/step-00000000" >/dev/null 2>&1 &&
    ok "the seeded run holds the exported weights (not a seed-5 init)" ||
    fail "the seeded run holds the exported weights (not a seed-5 init)"
grep -q "^tokenizer = \"hf:$tmp/hf/tokenizer.json\"$" "$tmp/seeded/config.toml" &&
    ok "... and its tokenizer is the directory's tokenizer.json" || fail "... and its tokenizer is the directory's tokenizer.json"
tap_end
