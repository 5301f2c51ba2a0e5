#!/bin/sh
# CLI tests of `titan-ckpt convert --to gguf`: usage errors and atomic output;
# the file's layout and data read back by a standard-library Python reader
# (tests/gguf/check_gguf.py); then, with the pinned Python references
# (scripts/pyenv.sh; tests/gguf/check_refs.py): the `gguf` package reads the
# header and tensor table, transformers' GGUF loader makes a torch model and
# a tokenizer of the file, its next-token probabilities match `titan-ckpt
# eval` (f32, f16, bf16, Llama 3.1 RoPE scaling, tied embeddings, a BPE
# vocabulary, the tokenizer the checkpoint carries) and it tokenizes text as
# titan does; and where llama-cpp-python
# is built (tests/gguf/prepare.sh), the same through llama.cpp itself. TAP
# output.
set -u
EXPECT_OUTPUT=1
. "$(dirname "$0")/lib/tap.sh"
ck=$bin/titan-ckpt
PY=/usr/bin/python3
note() { sed 's/^/# /' "$tmp/out"; }
# ids SHARD_DIR OUT: the token ids of a one-document shard dir, without bos and eos (u32 LE)
ids() { $PY -c 'import sys; open(sys.argv[2],"wb").write(open(sys.argv[1]+"/shard-00000.bin","rb").read()[68:-4])' "$1" "$2"; }
# first SHARD_DIR N: the first N tokens of a shard dir (bos included), comma-separated
first() { $PY -c 'import struct,sys; b=open(sys.argv[1]+"/shard-00000.bin","rb").read()[64:]; print(",".join(str(x) for x in struct.unpack("<%dI" % int(sys.argv[2]), b[:4*int(sys.argv[2])])))' "$1" "$2"; }

# --- a tiny run, trained a little so its predictions are not uniform -------------
shard_man_corpus 1
SMALL="--model.dim=64 --model.n_layers=2 --model.n_heads=4 --model.n_kv_heads=2 --model.multiple_of=16
 --training.seq_len=64 --training.local_batch_size=4 --checkpoint.keep_latest_k=0 --lr_scheduler.warmup_steps=5
 --optimizer.lr=3e-3 --metrics.peak_flops=1e11 --training.threads=2"
cfg=$top/configs/debugmodel.toml
expect 0 "" "titan-init (byte tokenizer)" -- "$bin/titan-init" -q "$cfg" "$tmp/a" $SMALL \
    --training.dataset_path="$tmp/data" --training.steps=100 --checkpoint.interval=100
expect 0 "" "train 100 steps" -- "$bin/titan-train" -q "$tmp/a"

# --- conversion and its errors -------------------------------------------------------
expect 0 "" "convert --to gguf (f32)" -- "$ck" convert -q --to gguf "$tmp/a" "$tmp/a.gguf"
[ -s "$tmp/a.gguf" ] && [ ! -e "$tmp/a.gguf.tmp" ] && ok "one file, no .tmp left" || fail "one file, no .tmp left"
expect 2 "exists" "refuses to replace a file" -- "$ck" convert --to gguf "$tmp/a" "$tmp/a.gguf"
expect 0 "" "--force replaces it" -- "$ck" convert -q --to gguf "$tmp/a" "$tmp/a.gguf" --force
expect 2 "is a directory" "refuses a directory as output" -- "$ck" convert --to gguf "$tmp/a" "$tmp"
expect 2 "f32, bf16 or f16" "--dtype u32 is a usage error" -- "$ck" convert --to gguf "$tmp/a" "$tmp/x.gguf" --dtype u32
expect 2 "one file" "--shard-size is a usage error" -- "$ck" convert --to gguf "$tmp/a" "$tmp/x.gguf" --shard-size 9
expect 2 "not supported" "--from gguf is not supported" -- "$ck" convert --from gguf "$tmp/a.gguf" "$tmp/x"
expect 3 "nowhere" "missing checkpoint names the path" -- "$ck" convert --to gguf "$tmp/nowhere" "$tmp/x.gguf"
expect 3 "" "unwritable place -> exit 3" -- "$ck" convert --to gguf "$tmp/a" "$tmp/no/such/dir/x.gguf"
[ ! -e "$tmp/x.gguf" ] && [ ! -e "$tmp/x.gguf.tmp" ] && ok "failed conversions leave no file" || fail "failed conversions leave no file"
expect 0 "" "--dtype f16" -- "$ck" convert -q --to gguf "$tmp/a" "$tmp/a.f16.gguf" --dtype f16
expect 0 "" "--dtype bf16" -- "$ck" convert -q --to gguf "$tmp/a" "$tmp/a.bf16.gguf" --dtype bf16
sz() { wc -c < "$1" | tr -d ' '; }
echo "# sizes: f32 $(sz "$tmp/a.gguf"), f16 $(sz "$tmp/a.f16.gguf"), bf16 $(sz "$tmp/a.bf16.gguf") bytes"

# --- layout and data, read with the Python standard library ---------------------------
expect 0 "" "f32 HF export to compare with" -- "$ck" convert -q --to hf "$tmp/a" "$tmp/hf"
for d in a a.f16 a.bf16; do
    expect 0 "" "$d.gguf: layout, q/k in Meta order, data = checkpoint within dtype rounding" -- \
        $PY "$top/tests/gguf/check_gguf.py" "$tmp/$d.gguf" "$tmp/hf"
    note
done

# Llama 3.1 RoPE scaling that matters at short range: the same weights with an
# original context of 16 (via the HF config), so rope_freqs.weight must be right.
$PY -c 'import json,sys; p=sys.argv[1]; c=json.load(open(p)); c["rope_scaling"]["original_max_position_embeddings"]=16; json.dump(c,open(p,"w"))' "$tmp/hf/config.json"
expect 0 "" "import with original context 16" -- "$ck" convert -q --from hf "$tmp/hf" "$tmp/r" --tokenizer byte
expect 0 "" "convert it --to gguf" -- "$ck" convert -q --to gguf "$tmp/r" "$tmp/r.gguf"

# Tied embeddings: no output.weight, llama.cpp reuses token_embd.
expect 0 "" "titan-init (tied embeddings)" -- "$bin/titan-init" -q "$cfg" "$tmp/t" $SMALL --model.tie_embeddings=true \
    --training.dataset_path="$tmp/data" --training.steps=30 --checkpoint.interval=30
expect 0 "" "train 30 steps" -- "$bin/titan-train" -q "$tmp/t"
expect 0 "" "convert the tied run" -- "$ck" convert -q --to gguf "$tmp/t" "$tmp/t.gguf"

# A BPE vocabulary: a tokenizer trained on the corpus (tiktoken file), a run on it.
expect 0 "" "train a 600-token tokenizer" -- "$bin/titan-shard" -q --train-tokenizer 600 "$tmp/corpus.txt" -o "$tmp/tok.tiktoken"
TT=tiktoken:$tmp/tok.tiktoken
"$bin/titan-shard" -q --tokenizer "$TT" -o "$tmp/data2" "$tmp/corpus.txt" 2>"$tmp/err" && ok "shard with it" || fail "shard with it"
expect 0 "" "titan-init (tiktoken)" -- "$bin/titan-init" -q "$cfg" "$tmp/b" $SMALL --model.tokenizer="$TT" \
    --training.dataset_path="$tmp/data2" --training.steps=20 --checkpoint.interval=20
expect 0 "" "train 20 steps" -- "$bin/titan-train" -q "$tmp/b"
expect 2 "trained with tokenizer" "--tokenizer of another id is refused" -- "$ck" convert --to gguf "$tmp/b" "$tmp/b.gguf" --tokenizer byte
# The checkpoint carries the tokenizer: no --tokenizer needed (the checks
# below load this file); with it, the same file.
expect 0 "" "convert --to gguf without --tokenizer (the checkpoint's copy)" -- "$ck" convert -q --to gguf "$tmp/b" "$tmp/b.gguf"
expect 0 "" "convert --to gguf --tokenizer tiktoken:FILE" -- "$ck" convert -q --to gguf "$tmp/b" "$tmp/b2.gguf" --tokenizer "$TT"
cmp -s "$tmp/b.gguf" "$tmp/b2.gguf" && ok "...the same file" || fail "...the same file"

# Text to tokenize and evaluate: the README as one document, through each tokenizer.
cp "$top/README.md" "$tmp/sample.txt"
"$bin/titan-shard" -q -o "$tmp/s1" "$tmp/sample.txt" 2>"$tmp/err" && ids "$tmp/s1" "$tmp/s1.ids" && ok "byte ids of the sample" || fail "byte ids of the sample"
"$bin/titan-shard" -q --tokenizer "$TT" -o "$tmp/s2" "$tmp/sample.txt" 2>"$tmp/err" && ids "$tmp/s2" "$tmp/s2.ids" && ok "BPE ids of the sample" || fail "BPE ids of the sample"
# A varied text: unicode, digits, whitespace runs (CRLF), contractions, special-token text.
printf 'It'"'"'s 2024: 1234567 \303\274n\303\257c\303\266d\303\251 \346\227\245\346\234\254 \360\237\216\211.\n\n   a\tb  \r\nI'"'"'VE we'"'"'ll <|begin_of_text|> <|end_of_text|> x\n\n\n  \n' >"$tmp/varied.txt"
"$bin/titan-shard" -q --tokenizer "$TT" -o "$tmp/s3" "$tmp/varied.txt" 2>"$tmp/err" && ids "$tmp/s3" "$tmp/s3.ids" && ok "BPE ids of a varied text" || fail "BPE ids of a varied text"
TOK1=$(first "$tmp/s1" 48)
TOK2=$(first "$tmp/s2" 48)
"$ck" eval "$tmp/a" --tokens "$TOK1" --threads 2 >"$tmp/a.logits" 2>"$tmp/err" || fail "eval a"
"$ck" eval "$tmp/r" --tokens "$TOK1" --threads 2 >"$tmp/r.logits" 2>"$tmp/err" || fail "eval r"
"$ck" eval "$tmp/b" --tokens "$TOK2" --threads 2 >"$tmp/b.logits" 2>"$tmp/err" || fail "eval b"
"$ck" eval "$tmp/t" --tokens "$TOK1" --threads 2 >"$tmp/t.logits" 2>"$tmp/err" || fail "eval t"
"$ck" info --json "$tmp/a" >"$tmp/a.json" 2>"$tmp/err" || fail "info a"
"$ck" info --json "$tmp/t" >"$tmp/t.json" 2>"$tmp/err" || fail "info t"

# cl100k_base (tests/tokenizer/prepare.sh): seed models with its vocabulary,
# through both of titan's loaders of it, for the tokenization checks below.
ref=$top/build/tokenizer
cl100k=
if [ -s "$ref/english.cl100k.ids" ] && [ -s "$ref/cl100k_base.tiktoken" ] && [ -s "$ref/cl100k_base.json" ]; then
    cl100k=1
    for spec in "tiktoken:$ref/cl100k_base.tiktoken" "hf:$ref/cl100k_base.json"; do
        k=${spec%%:*}
        expect 0 "" "cl100k ($k): a seed model" -- "$bin/titan-init" -q "$cfg" "$tmp/c$k" --model.tokenizer="$spec" \
            --model.dim=16 --model.n_layers=1 --model.n_heads=2 --model.n_kv_heads=1 --training.dataset_path="$tmp/data"
        expect 0 "" "cl100k ($k): convert --dtype bf16" -- "$ck" convert -q --to gguf "$tmp/c$k" "$tmp/c$k.gguf" --dtype bf16 --tokenizer "$spec"
    done
else
    skip "cl100k seed models" "build/tokenizer/english.* missing (tests/tokenizer/prepare.sh)"
fi

# --- the references: tests/gguf/check_refs.py ------------------------------------------------
# add LIST pass|fail DESCRIPTION COMMAND ARGS... adds a check to LIST; one
# Python process runs a list (loading torch and transformers takes seconds):
# runchecks LIST NAME [VAR=VALUE...] turns its PASS/FAIL lines into TAP.
R=$top/tests/gguf/check_refs.py
add() {
    list=$1; line="$2	$3"; shift 3
    for a in "$@"; do line="$line	$a"; done
    printf '%s\n' "$line" >>"$list"
}
runchecks() {
    list=$1; name=$2; shift 2
    env TQDM_DISABLE=1 "$@" "$PYREF" "$R" batch "$list" >"$tmp/out" 2>"$tmp/err"
    rc=$?
    [ $rc -eq 0 ] || fail "$name checks ran to the end (exit $rc)"
    while IFS= read -r line; do
        case $line in
            "PASS "*) ok "${line#PASS }" ;;
            "FAIL "*) n=$((n + 1)); bad=$((bad + 1)); echo "not ok $n - ${line#FAIL }" ;;
            *) echo "# $line" ;;
        esac
    done <"$tmp/out"
    [ "$(grep -c '^PASS \|^FAIL ' "$tmp/out")" -eq "$(wc -l < "$list")" ] && ok "every $name check reported" || fail "every $name check reported"
}

# shared LIST IMPL WHO [ARG]: the checks of transformers (IMPL hf) and
# llama.cpp (IMPL llama; ARG F32: an f32 KV cache) alike: probabilities of
# every token at 48 positions for f16/bf16 weights, RoPE scaling, tied
# embeddings and a BPE run; tokenization of the sample and of cl100k's English.
shared() {
    sl=$1 impl=$2 who=$3; shift 3
    add "$sl" pass "$who f16 weights (abs < 2e-3)" $impl-logits "$tmp/a.f16.gguf" "$TOK1" "$tmp/a.logits" 2e-3 "$@"
    add "$sl" pass "$who bf16 weights (abs < 1e-2)" $impl-logits "$tmp/a.bf16.gguf" "$TOK1" "$tmp/a.logits" 1e-2 "$@"
    add "$sl" pass "RoPE scaled at context 16: $who = titan (abs < 1e-5)" $impl-logits "$tmp/r.gguf" "$TOK1" "$tmp/r.logits" 1e-5 "$@"
    add "$sl" fail "...and the unscaled model is far from it (abs > 1e-3): the scaling is tested" $impl-logits "$tmp/a.gguf" "$TOK1" "$tmp/r.logits" 1e-3 "$@"
    add "$sl" pass "tied embeddings: $who = titan (abs < 1e-5)" $impl-logits "$tmp/t.gguf" "$TOK1" "$tmp/t.logits" 1e-5 "$@"
    add "$sl" pass "BPE run: $who = titan (abs < 1e-5)" $impl-logits "$tmp/b.gguf" "$TOK2" "$tmp/b.logits" 1e-5 "$@"
    add "$sl" pass "$who tokenizes like titan: byte vocabulary" $impl-tokenize "$tmp/a.gguf" "$tmp/sample.txt" "$tmp/s1.ids"
    add "$sl" pass "$who tokenizes like titan: merges from tiktoken ranks" $impl-tokenize "$tmp/b.gguf" "$tmp/sample.txt" "$tmp/s2.ids"
    add "$sl" pass "$who tokenizes like titan: a varied text, the GGUF made without --tokenizer" $impl-tokenize "$tmp/b.gguf" "$tmp/varied.txt" "$tmp/s3.ids"
    if [ -n "$cl100k" ]; then
        for k in tiktoken hf; do
            add "$sl" pass "cl100k ($k): $who tokenizes 2 MB of English as tiktoken" $impl-tokenize "$tmp/c$k.gguf" "$ref/english.txt" "$ref/english.cl100k.ids"
        done
    else
        skip "cl100k tokenization by $who" "build/tokenizer/english.* missing (tests/tokenizer/prepare.sh)"
    fi
}

# The gguf package (llama.cpp's gguf-py) reads the files; transformers' GGUF
# loader makes a torch LlamaForCausalLM of each (bf16 and tied embeddings
# included) and a tokenizer. The loader drops rope_freqs.weight (Llama 3.1
# RoPE scaling), so check_refs.py applies it to the loaded model as llama.cpp
# does and prints how far the loader alone is. Weights are widened to f32:
# the tolerances are the rounding of the file's weights (f32: the order of
# arithmetic only).
if need_pyref "GGUF read by the gguf package and loaded by transformers"; then
    L=$tmp/hf.checks; : >"$L"
    for d in f32 f16 bf16; do
        f=$tmp/a.gguf; [ $d = f32 ] || f=$tmp/a.$d.gguf
        add "$L" pass "gguf GGUFReader reads the $d file: llama.* keys, tensors" meta "$f" "$tmp/a.json" $d
    done
    add "$L" pass "gguf GGUFReader reads the tied file: no output.weight" meta "$tmp/t.gguf" "$tmp/t.json" f32
    # Probabilities of every token at 48 positions.
    add "$L" pass "transformers f32: probabilities = titan's (abs < 1e-5)" hf-logits "$tmp/a.gguf" "$TOK1" "$tmp/a.logits" 1e-5
    shared "$L" hf transformers
    runchecks "$L" "gguf/transformers"
fi

# --- llama.cpp, through llama-cpp-python (tests/gguf/prepare.sh) --------------------------------
if [ -z "$PYREF" ]; then
    skip "llama.cpp checks" "the Python references are not installed (scripts/pyenv.sh)"
    tap_end; exit
fi
if ! site=$(TITAN_PY=$PYREF sh "$top/tests/gguf/prepare.sh" 2>"$tmp/prep"); then
    skip "llama.cpp checks" "$site"
    tap_end; exit
fi
if ! PYTHONPATH=$site "$PYREF" "$R" llama-version >"$tmp/out" 2>"$tmp/err"; then
    skip "llama.cpp checks" "$(head -n 1 "$tmp/out")"
    tap_end; exit
fi
note
L=$tmp/llama.checks; : >"$L"
# llama.cpp's f16 KV cache rounds K and V; with an f32 cache only the order
# of arithmetic differs.
add "$L" pass "llama.cpp f32, f32 KV cache: probabilities = titan's (abs < 1e-5)" llama-logits "$tmp/a.gguf" "$TOK1" "$tmp/a.logits" 1e-5 F32
add "$L" pass "llama.cpp f32, its default f16 KV cache (abs < 1e-4)" llama-logits "$tmp/a.gguf" "$TOK1" "$tmp/a.logits" 1e-4 F16
shared "$L" llama llama.cpp F32
runchecks "$L" "llama.cpp" PYTHONPATH="$site"

tap_end
