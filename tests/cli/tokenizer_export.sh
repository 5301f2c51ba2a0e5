#!/bin/sh
# CLI tests of the tokenizer that travels with the model, and of the paths
# in a run's config:
# - titan-init writes absolute paths: a run made with relative ones trains
#   from another directory; an old config's relative paths are taken in the
#   run directory first; a missing one is named with its key and the run;
# - every checkpoint step carries the tokenizer's file (titan-checkpoint(5)),
#   through pack/unpack and titan-reshard; a run whose tokenizer file is gone
#   trains on and exports with the copy; a damaged copy is refused;
# - convert --to hf writes tokenizer.json, tokenizer_config.json and the
#   bos/eos ids, which titan itself reads back (hf:) to the same ids: a BPE
#   trained by titan-shard (tiktoken ranks), the byte tokenizer, a
#   tokenizer.json (copied as it is); convert --to gguf needs no --tokenizer
#   (gguf.sh checks those files with transformers' GGUF loader);
# - with the Python references: the exported tokenizer.json loaded by the
#   `tokenizers` library and by transformers' AutoTokenizer tokenizes a
#   varied text exactly as titan does (tests/python/hf_check.py tokenize),
#   and cl100k's 2 MB of English where tests/tokenizer/prepare.sh made them.
# TAP output.
set -u
. "$(dirname "$0")/lib/tap.sh"
ck=$bin/titan-ckpt
cfg=$top/configs/debugmodel.toml
PY=/usr/bin/python3
SMALL="--model.dim=32 --model.n_layers=1 --model.n_heads=2 --model.n_kv_heads=1 --model.multiple_of=16
 --training.seq_len=32 --training.local_batch_size=2 --training.steps=4 --checkpoint.interval=2
 --checkpoint.keep_latest_k=0 --lr_scheduler.warmup_steps=1 --metrics.peak_flops=1e11 --training.threads=1"
# ids SHARD_DIR OUT: the token ids of a one-document shard dir, without bos and eos (u32 LE)
ids() { $PY -c 'import sys; open(sys.argv[2],"wb").write(open(sys.argv[1]+"/shard-00000.bin","rb").read()[68:-4])' "$1" "$2"; }
# shard_ids SPEC TEXT NAME: titan's ids of TEXT (one document) with tokenizer SPEC into $tmp/NAME.ids
shard_ids() {
    rm -rf "$tmp/$3"
    "$bin/titan-shard" -q --tokenizer "$1" -o "$tmp/$3" "$2" 2>"$tmp/err" && ids "$tmp/$3" "$tmp/$3.ids"
}
steps_of() { ls -d "$1"/checkpoint/step-* | sort; }

# --- a BPE, a corpus and a varied text ------------------------------------------------
shard_man_corpus 1
mkdir -p "$tmp/work" "$tmp/elsewhere"
expect 0 "" "train a 600-token BPE (tiktoken file)" -- "$bin/titan-shard" -q --train-tokenizer 600 "$tmp/corpus.txt" \
    -o "$tmp/work/bpe.tiktoken"
(cd "$tmp/work" && "$bin/titan-shard" -q --tokenizer tiktoken:bpe.tiktoken -o data "$tmp/corpus.txt") 2>"$tmp/err" \
    && ok "shard with it (relative paths)" || fail "shard with it (relative paths)"
# Unicode, digits, whitespace runs (tabs, CRLF, trailing spaces), contractions
# in both cases, special-token text (plain text to titan).
{
    printf 'Hello, world! It'"'"'s 2024: 1234567 numbers \342\200\224 \303\274n\303\257c\303\266d\303\251 '
    printf '\346\227\245\346\234\254\350\252\236 \360\237\216\211\360\237\216\211.\n\n   leading spaces\tand\ttabs  \r\n'
    printf 'I'"'"'ve, you'"'"'re, we'"'"'ll, HE'"'"'S DON'"'"'T.  <|begin_of_text|> <|end_of_text|><|eot_id|> x\n\n\n   \n'
} >"$tmp/varied.txt"
check "titan's BPE ids of the varied text" shard_ids "tiktoken:$tmp/work/bpe.tiktoken" "$tmp/varied.txt" vt
check "titan's byte ids of it" shard_ids byte "$tmp/varied.txt" vb

# --- paths: made in one directory, trained from another ----------------------------------
(cd "$tmp/work" && "$bin/titan-init" -q "$cfg" run $SMALL --model.tokenizer=tiktoken:bpe.tiktoken \
    --training.dataset_path=data) 2>"$tmp/err" && ok "titan-init with relative paths" || fail "titan-init with relative paths"
grep -q "^tokenizer = \"tiktoken:$tmp/work/bpe.tiktoken\"" "$tmp/work/run/config.toml" &&
    grep -q "^dataset_path = \"$tmp/work/data\"" "$tmp/work/run/config.toml" &&
    ok "config.toml holds them absolute" || fail "config.toml holds them absolute"
R=$tmp/work/run
(cd "$tmp/elsewhere" && "$bin/titan-train" -q "$R" --stop-at 2) 2>"$tmp/err" \
    && ok "titan-train RUN from another directory" || fail "titan-train RUN from another directory"
# An old config: relative paths. In the run directory they are found from anywhere.
cp -r "$R" "$tmp/old"
cp "$tmp/work/bpe.tiktoken" "$tmp/old/"
ln -s "$tmp/work/data" "$tmp/old/data"
sed -i "s|\"tiktoken:$tmp/work/bpe.tiktoken\"|\"tiktoken:bpe.tiktoken\"|; s|\"$tmp/work/data\"|\"data\"|" "$tmp/old/config.toml"
grep -q '^dataset_path = "data"' "$tmp/old/config.toml" && ok "an old config with relative paths" || fail "an old config with relative paths"
(cd "$tmp/elsewhere" && "$bin/titan-train" -q "$tmp/old" --stop-at 3) 2>"$tmp/err" \
    && ok "its relative paths are taken in the run directory" || fail "its relative paths are taken in the run directory"
rm "$tmp/old/data"
(cd "$tmp/work" && "$bin/titan-train" "$tmp/old" --stop-at 3) >"$tmp/out" 2>"$tmp/err" \
    && grep -q "dataset_path = data: relative, found in the current directory" "$tmp/err" \
    && ok "...else in the current directory, with a warning" || fail "...else in the current directory, with a warning"
cd "$tmp/elsewhere"
expect 3 "old/config.toml: training.dataset_path = data: No such file or directory" \
    "a missing path names the run's config and the key" -- "$bin/titan-train" "$tmp/old"
expect 3 "^titan-train: error: --training.dataset_path=nodata: No such file" "...or the override" -- \
    "$bin/titan-train" "$R" --training.dataset_path=nodata
cd "$top"

# --- the checkpoint carries the tokenizer ------------------------------------------------
all_carry() {
    for s in $(steps_of "$1"); do
        cmp -s "$s/tokenizer.tiktoken" "$tmp/work/bpe.tiktoken" &&
            grep -q '"tokenizer.file": "tokenizer.tiktoken"' "$s/metadata.json" || return 1
    done
}
check "every step (seed included) holds tokenizer.tiktoken, named in its metadata" all_carry "$R"
expect 0 "" "titan-reshard to tp=2" -- "$bin/titan-reshard" -q "$R" --to tp=2 "$tmp/rs"
cmp -s "$tmp/rs/step-00000002/tokenizer.tiktoken" "$tmp/work/bpe.tiktoken" && ok "the resharded step carries it" \
    || fail "the resharded step carries it"
expect 0 "" "pack the run" -- "$ck" pack -q "$R" "$tmp/run.tar.zst"
expect 0 "" "unpack it" -- "$ck" unpack -q "$tmp/run.tar.zst" "$tmp/un"
# On another machine the config's tokenizer file is gone: the copy serves.
mv "$tmp/work/bpe.tiktoken" "$tmp/work/bpe.away"
expect 0 "using the copy in the run's checkpoint" "the unpacked run trains on without the original file" -- \
    "$bin/titan-train" "$tmp/un" --stop-at 4
expect 0 "" "convert --to gguf without --tokenizer" -- "$ck" convert -q --to gguf "$tmp/un" "$tmp/b.gguf"
expect 0 "" "convert --to hf" -- "$ck" convert -q --to hf "$tmp/un" "$tmp/hfb"
mv "$tmp/work/bpe.away" "$tmp/work/bpe.tiktoken"
expect 0 "" "--tokenizer with the same file is the same GGUF" -- "$ck" convert -q --to gguf "$tmp/un" "$tmp/b2.gguf" \
    --tokenizer "tiktoken:$tmp/work/bpe.tiktoken"
cmp -s "$tmp/b.gguf" "$tmp/b2.gguf" && ok "...byte for byte" || fail "...byte for byte"
expect 2 "trained with tokenizer tt:" "--tokenizer of another id is refused (hf)" -- \
    "$ck" convert --to hf "$tmp/un" "$tmp/x" --tokenizer byte
# A damaged copy, and a checkpoint from before the copies.
cp -r "$R/checkpoint/step-00000002" "$tmp/dmg"
echo >>"$tmp/dmg/tokenizer.tiktoken" # the same tokens, other bytes: another id
expect 7 "tokenizer copy has id" "a damaged copy is refused (exit 7)" -- "$ck" convert --to gguf "$tmp/dmg" "$tmp/x.gguf"
cp -r "$R/checkpoint/step-00000002" "$tmp/nocopy"
rm "$tmp/nocopy/tokenizer.tiktoken"
sed -i '/"tokenizer.file"/d' "$tmp/nocopy/metadata.json"
expect 2 "carries no copy" "no copy: GGUF export asks for --tokenizer" -- "$ck" convert --to gguf "$tmp/nocopy" "$tmp/x.gguf"
expect 0 "exporting without a tokenizer" "no copy: HF export warns and writes weights only" -- \
    "$ck" convert --to hf "$tmp/nocopy" "$tmp/hfn"
[ ! -e "$tmp/hfn/tokenizer.json" ] && grep -q '"bos_token_id": null' "$tmp/hfn/config.json" \
    && ok "...without tokenizer files, bos null" || fail "...without tokenizer files, bos null"
expect 0 "" "...and with --tokenizer it has them" -- "$ck" convert -q --to hf "$tmp/nocopy" "$tmp/hfn2" \
    --tokenizer "tiktoken:$tmp/work/bpe.tiktoken"
[ -s "$tmp/hfn2/tokenizer.json" ] && ok "...tokenizer.json written" || fail "...tokenizer.json written"

# --- HF tokenizer files, read back by titan ----------------------------------------------
has_files() { for f in tokenizer.json tokenizer_config.json special_tokens_map.json generation_config.json; do
    [ -s "$1/$f" ] || return 1; done; }
check "HF export: tokenizer.json, tokenizer_config.json, special_tokens_map.json" has_files "$tmp/hfb"
grep -q '"bos_token_id": 600' "$tmp/hfb/config.json" && grep -q '"eos_token_id": 601' "$tmp/hfb/config.json" \
    && ok "config.json: bos 600, eos 601 (the 600-token BPE's specials)" || fail "config.json: bos 600, eos 601"
check "titan reads the exported tokenizer.json (hf:)" shard_ids "hf:$tmp/hfb/tokenizer.json" "$tmp/varied.txt" vh
cmp -s "$tmp/vh.ids" "$tmp/vt.ids" && ok "...and tokenizes the varied text as with the tiktoken file" \
    || fail "...and tokenizes the varied text as with the tiktoken file"
expect 0 "" "a byte-tokenizer run" -- "$bin/titan-init" -q "$cfg" "$tmp/br" $SMALL --training.dataset_path="$tmp/data"
ls "$tmp/br/checkpoint/step-00000000" | grep -q tokenizer && fail "the byte tokenizer has no file to carry" \
    || ok "the byte tokenizer has no file to carry"
expect 0 "" "convert the byte run --to hf" -- "$ck" convert -q --to hf "$tmp/br" "$tmp/hfbyte"
check "titan reads its tokenizer.json" shard_ids "hf:$tmp/hfbyte/tokenizer.json" "$tmp/varied.txt" vhb
cmp -s "$tmp/vhb.ids" "$tmp/vb.ids" && ok "...one token per byte, as the byte tokenizer" \
    || fail "...one token per byte, as the byte tokenizer"
expect 0 "" "a run on the exported tokenizer.json (hf:)" -- "$bin/titan-init" -q "$cfg" "$tmp/hr" $SMALL \
    --model.tokenizer="hf:$tmp/hfb/tokenizer.json" --training.dataset_path="$tmp/data"
cmp -s "$tmp/hr/checkpoint/step-00000000/tokenizer.json" "$tmp/hfb/tokenizer.json" && ok "its checkpoint carries it" \
    || fail "its checkpoint carries it"
expect 0 "" "convert it --to hf" -- "$ck" convert -q --to hf "$tmp/hr" "$tmp/hfhf"
cmp -s "$tmp/hfhf/tokenizer.json" "$tmp/hfb/tokenizer.json" && ok "a tokenizer.json is exported as it is" \
    || fail "a tokenizer.json is exported as it is"

# --- the references: tokenizers and AutoTokenizer -------------------------------------------
hf_tokenize() {
    expect 0 "" "$1" -- "$PYREF" "$top/tests/python/hf_check.py" tokenize "$2" "$3" "$4"
    sed 's/^/# /' "$tmp/out"
}
if need_pyref "exported tokenizers against tokenizers and transformers"; then
    hf_tokenize "BPE (tiktoken ranks): tokenizers and AutoTokenizer = titan on the varied text" \
        "$tmp/hfb" "$tmp/varied.txt" "$tmp/vt.ids"
    hf_tokenize "byte: tokenizers and AutoTokenizer = titan on the varied text" "$tmp/hfbyte" "$tmp/varied.txt" "$tmp/vb.ids"
    ref=$top/build/tokenizer
    if [ -s "$ref/english.cl100k.ids" ] && [ -s "$ref/cl100k_base.tiktoken" ]; then
        expect 0 "" "cl100k: a seed model" -- "$bin/titan-init" -q "$cfg" "$tmp/c" --model.tokenizer="tiktoken:$ref/cl100k_base.tiktoken" \
            --model.dim=16 --model.n_layers=1 --model.n_heads=2 --model.n_kv_heads=1 --training.dataset_path="$tmp/data"
        expect 0 "" "cl100k: convert --to hf" -- "$ck" convert -q --to hf "$tmp/c" "$tmp/hfc"
        hf_tokenize "cl100k: tokenizers and AutoTokenizer = tiktoken on 2 MB of English" "$tmp/hfc" "$ref/english.txt" \
            "$ref/english.cl100k.ids"
    else
        skip "cl100k through the HF export" "build/tokenizer/english.* missing (tests/tokenizer/prepare.sh)"
    fi
fi
tap_end
