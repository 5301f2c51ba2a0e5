#!/bin/sh
# Prepares test_bpe's large references in build/tokenizer/ (never committed):
#   cl100k_base.tiktoken   js-tiktoken's cl100k_base ranks as a tiktoken file
#   cl100k_base.json       the same as a Llama-3-style tokenizer.json
#   english.txt, english.cl100k.ids   ~2 MB of nlp-corpus English and its ids
# It needs node and npm (js-tiktoken, pinned, from the registry); without them
# it says so and exits 0, and test_bpe skips its cl100k part. Safe to run again.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/build/tokenizer
gen=$top/tests/tokenizer/gen_reference.mjs
version=1.0.21
mkdir -p "$out"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "tokenizer/prepare: node or npm missing: cl100k references not made" >&2
    exit 0
fi
if [ ! -f "$out/npm/node_modules/js-tiktoken/package.json" ] ||
   ! grep -q "\"version\": \"$version\"" "$out/npm/node_modules/js-tiktoken/package.json"; then
    npm install --silent --no-audit --no-fund --prefix "$out/npm" "js-tiktoken@$version" >&2 || {
        echo "tokenizer/prepare: npm install js-tiktoken@$version failed: cl100k references not made" >&2
        exit 0
    }
fi
make_one() { # target, command args... : (re)makes target when missing or older than the generator
    target=$1; shift
    [ -s "$target" ] && [ "$target" -nt "$gen" ] && return 0
    node "$gen" "$out/npm" "$@" || { echo "tokenizer/prepare: making $target failed" >&2; rm -f "$target"; return 1; }
}
make_one "$out/cl100k_base.tiktoken" tiktoken "$out/cl100k_base.tiktoken"
make_one "$out/cl100k_base.json" hf "$out/cl100k_base.json"
corpus=$top/.deps/nlp-corpus-4.4.0.tgz
if [ -s "$corpus" ] && { [ ! -s "$out/english.cl100k.ids" ] || [ "$gen" -nt "$out/english.cl100k.ids" ]; }; then
    rm -rf "$out/nlp-corpus" && mkdir -p "$out/nlp-corpus" &&
        tar xzf "$corpus" -C "$out/nlp-corpus" &&
        node "$gen" "$out/npm" corpus "$out/nlp-corpus/package" "$out/english.txt" "$out/english.cl100k.ids" 2 ||
        { echo "tokenizer/prepare: English reference failed" >&2; rm -f "$out/english.cl100k.ids"; }
    rm -rf "$out/nlp-corpus"
fi
exit 0
