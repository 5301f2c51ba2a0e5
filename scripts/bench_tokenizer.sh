#!/bin/sh
# bench_tokenizer.sh - BPE encoding speed of titan-shard (cl100k_base ranks,
# Llama 3's pre-tokenizer) on about 8 MB of English from nlp-corpus, 1 thread
# and all threads, beside js-tiktoken encoding the same text in the same run.
# Needs the references of tests/tokenizer/prepare.sh (node + npm); says so and
# exits 0 without them. Run by `make bench`.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
ref=build/tokenizer
out=build/bench/tokenizer
sh tests/tokenizer/prepare.sh 2>/dev/null || true
if [ ! -s "$ref/cl100k_base.tiktoken" ] || [ ! -s "$ref/english.txt" ]; then
    echo "bench_tokenizer: cl100k references missing (node/npm?): skipped" >&2
    exit 0
fi
mkdir -p "$out"
rm -f "$out/english4.txt"
for i in 1 2 3 4; do cat "$ref/english.txt" >>"$out/english4.txt"; done
bytes=$(wc -c <"$out/english4.txt")
cores=$(nproc)
now() { date +%s.%N; }
run_titan() { # threads -> MB/s
    rm -rf "$out/shards"
    t0=$(now)
    bin/titan-shard -q -j "$1" --tokenizer "tiktoken:$ref/cl100k_base.tiktoken" -o "$out/shards" "$out/english4.txt"
    t1=$(now)
    echo "$bytes $t0 $t1" | awk '{ printf "%.2f", $1 / 1e6 / ($3 - $2) }'
}
echo "bench: load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
one=$(run_titan 1)
all=$(run_titan "$cores")
tokens=$(bin/titan-shard --stats "$out/shards" | awk '/^tokens:/ { print $2 }')
js=$(node scripts/bench_tokenizer.mjs "$ref/npm" "$out/english4.txt")
echo
echo "BPE tokenizer (cl100k_base ranks, Llama 3 pattern), $(awk "BEGIN { printf \"%.1f\", $bytes / 1e6 }") MB of English, whole titan-shard run (read, encode, write, checksums)"
printf '  %-34s %10s\n' "" "MB/s"
printf '  %-34s %10s\n' "titan-shard, 1 thread" "$one"
printf '  %-34s %10s\n' "titan-shard, $cores threads" "$all"
printf '  %-34s %10s\n' "js-tiktoken 1.0.21 (encode only)" "${js% *}"
echo "  tokens: titan $tokens (incl. 2 framing tokens per document), js-tiktoken ${js#* }"
echo "  ratio titan 1 thread / js-tiktoken: $(awk "BEGIN { printf \"%.2f\", $one / ${js% *} }")x"
