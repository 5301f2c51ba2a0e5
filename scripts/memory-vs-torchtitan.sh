#!/bin/sh
# memory-vs-torchtitan.sh - titan's memory dry run beside the memory
# torchtitan published for the same layouts
# (benchmarks/llama3_h100_202412_torchtitan.md in torchtitan's repository,
# Llama 3.1 8B on H100s, end of 2024).
#
# Only the rows whose layout titan can run are compared: FSDP 8 and FSDP
# 128, local batch 2, seq_len 8192 (llama3_8b.toml), bf16 compute with fp32
# reductions, selective op activation checkpointing, without torch.compile
# and Float8 (titan has no Float8 yet; compile changes torch's memory, not
# titan's). The other tables use Float8 and async TP, which titan lacks.
#
# The two figures are not the same measure: torchtitan logs the caching
# allocator's peak reserved bytes (torch.cuda.memory_stats
# reserved_bytes.all.peak: memory torch holds, including blocks cached
# for reuse and fragmentation), titan estimates the peak its own
# allocator holds (no cache: every buffer is planned once). Neither
# counts the CUDA context and library workspaces (about 0.5-1 GiB).
#
# The Llama 3 vocabulary (128000 BPE tokens and 256 specials) is stood in
# for by a tiktoken file of the same size that this script writes: the
# dry run needs the vocabulary's size only.
#
# Usage: scripts/memory-vs-torchtitan.sh   (needs bin/titan-train and python3)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bin=${TITAN_BIN:-$top/bin}
py=${TITAN_PY:-python3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM

"$py" - "$tmp/llama3-sized.tiktoken" <<'PY'
import base64, sys
toks = [bytes([i]) for i in range(256)] + [bytes([a, b]) for a in range(256) for b in range(256)]
toks += [bytes([a, b, 97]) for a in range(256) for b in range(256)][: 128000 - len(toks)]
with open(sys.argv[1], "w") as f:
    for rank, t in enumerate(toks):
        f.write("%s %d\n" % (base64.b64encode(t).decode(), rank))
PY

cat > "$tmp/llama3_8b.toml" <<EOF
[job]
dump_folder = "$tmp/run"
[model]
flavor = "8B"
tokenizer = "tiktoken:$tmp/llama3-sized.tiktoken"
[training]
local_batch_size = 2
seq_len = 8192
device = "cuda"
mixed_precision_param = "bfloat16"
mixed_precision_reduce = "float32"
[parallelism]
data_parallel_shard_degree = -1
[activation_checkpoint]
mode = "selective"
selective_ac_option = "op"
EOF

# row WORLD TORCHTITAN_GIB LABEL
row() {
    peak=$("$bin/titan-train" --dry-run --job.config_file "$tmp/llama3_8b.toml" --world-size "$1" |
        sed -n 's/.*peak of the job.s ranks: \([0-9.]*\) MiB.*/\1/p')
    awk -v w="$1" -v t="$2" -v p="$peak" -v l="$3" \
        'BEGIN { printf "%-34s %6d %12.1f %15.1f\n", l, w, p / 1024, t }'
}
printf "%-34s %6s %12s %15s\n" "Llama 3.1 8B, FSDP, batch 2 x 8192" "GPUs" "titan GiB" "torchtitan GiB"
printf "%-34s %6s %12s %15s\n" "" "" "(estimate)" "(peak reserved)"
row 8 82.4 "Table 1, FSDP"
row 128 67.0 "Table 3, FSDP"
echo
echo "titan: the dry run's largest rank peak (backend memory: parameters, gradients,"
echo "AdamW, activations, FSDP's gathered units and staging); torchtitan: the"
echo "published Memory(GiB) column, peak reserved by torch's caching allocator."
echo "The full per-rank tables:"
for w in 8 128; do "$bin/titan-train" --dry-run --job.config_file "$tmp/llama3_8b.toml" --world-size "$w"; done
