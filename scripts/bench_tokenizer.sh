#!/bin/sh
# bench_tokenizer.sh - BPE encoding speed of titan-shard (cl100k_base's ranks,
# Llama 3's pre-tokenizer) on the man-page corpus (scripts/corpus.sh: ~6 MB
# of English, 1,100 documents), 1 thread and all threads, beside the real
# libraries encoding the same documents in the same run, with the same
# thread counts: OpenAI's tiktoken and Hugging Face's tokenizers (the same
# ranks as a tokenizer.json; both give titan's ids, test_bpe checks), from
# build/venv (scripts/bench_tokenizer.py). Needs the references of
# tests/tokenizer/prepare.sh and build/venv (scripts/pyenv.sh); says so and
# exits 0 without them. Run by `make bench`. BENCH_PASSES=N: best of N
# passes for each (default 2).
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
ref=build/tokenizer
out=build/bench/tokenizer
corpus=.deps/man-pages-6.03
mkdir -p "$out"
py=${TITAN_PY-$(scripts/pyenv.sh --check 2>/dev/null)} || py=""
if [ -z "$py" ]; then
    echo "bench_tokenizer: the Python references are not installed (scripts/pyenv.sh makes build/venv): skipped" >&2
    exit 0
fi
TITAN_PY=$py sh tests/tokenizer/prepare.sh 2>"$out/prepare.log" || true
if [ ! -s "$ref/cl100k_base.tiktoken" ] || [ ! -s "$ref/cl100k_base.json" ] || [ ! -d "$corpus" ]; then
    echo "bench_tokenizer: cl100k references or the corpus missing: skipped. tests/tokenizer/prepare.sh said:" >&2
    sed 's/^/  /' "$out/prepare.log" >&2
    exit 0
fi
passes=${BENCH_PASSES:-2}
bytes=$(find "$corpus" -type f -exec cat {} + | wc -c)
cores=$(nproc)
now() { date +%s.%N; }
run_titan() { # threads -> MB/s, the best of $passes runs
    best=0
    for _ in $(seq "$passes"); do
        rm -rf "$out/shards"
        t0=$(now)
        bin/titan-shard -q -j "$1" --tokenizer "tiktoken:$ref/cl100k_base.tiktoken" -o "$out/shards" "$corpus"
        t1=$(now)
        best=$(echo "$bytes $t0 $t1 $best" | awk '{ r = $1 / 1e6 / ($3 - $2); printf "%.2f", (r > $4 ? r : $4) }')
    done
    echo "$best"
}
echo "bench: load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
one=$(run_titan 1)
all=$(run_titan "$cores")
stats=$(bin/titan-shard --stats "$out/shards")
docs=$(echo "$stats" | awk '/^documents:/ { print $2 }')
tokens=$(echo "$stats" | awk -v d="$docs" '/^tokens:/ { print $2 - 2 * d }')
export BENCH_PASSES=$passes
"$py" scripts/bench_tokenizer.py 1 "$ref/cl100k_base.tiktoken" "$ref/cl100k_base.json" "$corpus" >"$out/ref1.txt"
"$py" scripts/bench_tokenizer.py "$cores" "$ref/cl100k_base.tiktoken" "$ref/cl100k_base.json" "$corpus" >"$out/refn.txt"

echo
echo "BPE tokenizer (cl100k_base's ranks, Llama 3's pattern), $(awk "BEGIN { printf \"%.1f\", $bytes / 1e6 }") MB of English man pages ($docs documents), MB/s, best of $passes"
printf '  %-52s %10s %10s\n' "" "1 thread" "$cores threads"
printf '  %-52s %10s %10s\n' "titan-shard (whole run: read, encode, write, checksums)" "$one" "$all"
verdict=""
while read -r name _ mb1 tok1; do
    mbn=$(awk -v n="$name" '$1 == n { print $3 }' "$out/refn.txt")
    printf '  %-52s %10s %10s\n' "$name (encode only)" "$mb1" "$mbn"
    same=$([ "$tok1" = "$tokens" ] && echo "the same count" || echo "DIFFERENT from titan's $tokens")
    echo "    tokens: $tok1, $same"
    r1=$(awk "BEGIN { printf \"%.2f\", $one / $mb1 }")
    rn=$(awk "BEGIN { printf \"%.2f\", $all / $mbn }")
    echo "    titan / $name: ${r1}x at 1 thread, ${rn}x at $cores threads"
    if awk "BEGIN { exit !($r1 > 1 && $rn > 1) }"; then verdict="$verdict${verdict:+, }$name"
    else echo "    titan-shard does not beat $name at every thread count"; fi
done <"$out/ref1.txt"
echo "  tokens, titan: $tokens (without the 2 framing tokens per document)"
echo "  titan-shard beats: ${verdict:-none of the references}"
