#!/bin/sh
# deepest-8b.sh - how many of Llama 3.1 8B's layers fit one GPU for
# bench_gpu.sh's job: the most (1 to 32, the 8B's own) whose titan-train
# memory dry run (titan-train(1), Memory dry run) plans at most FRACTION
# of the GPU's memory. The job: the 8B's shape (dim 4096, 32 heads, 8 kv
# heads, FFN 14336, vocab 128256, untied head) cut to L layers, on cuda,
# fp32 master weights and AdamW, DTYPE compute, one micro-batch of BATCH x
# SEQ tokens, no activation checkpointing; with --float8 RECIPE its float8
# linears' scratch too. The rest of the GPU (the CUDA context, cuBLAS's
# workspace, op scratch the plan does not count, the pool's slack) is what
# FRACTION leaves. The dry run needs no GPU: this runs anywhere.
#
#   scripts/deepest-8b.sh --gpu-mib MIB --tokenizer SPEC [--seq N] [--batch N]
#                         [--dtype bfloat16|float32] [--float8 RECIPE] [--fraction F]
#
# SPEC is a tokenizer of 128256 tokens (bench_gpu.sh's tiktoken:FILE);
# defaults: seq 8192, batch 1, bfloat16, fraction 0.85. Prints one line,
# "LAYERS PEAK_MIB" (the planned peak at that depth; "0 -" when not even
# one layer fits). Exit 0; 2 a bad argument; 1 a dry run that fails (its
# message on stderr).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
mib="" tok="" seq=8192 batch=1 dtype=bfloat16 f8="" frac=0.85
usage() { sed -n '13,14p' "$0" | sed 's/^# *//' >&2; exit 2; }
while [ $# -gt 0 ]; do
    [ $# -ge 2 ] || { echo "deepest-8b: error: $1 needs a value" >&2; usage; }
    case $1 in
    --gpu-mib) mib=$2 ;;
    --tokenizer) tok=$2 ;;
    --seq) seq=$2 ;;
    --batch) batch=$2 ;;
    --dtype) dtype=$2 ;;
    --float8) f8=$2 ;;
    --fraction) frac=$2 ;;
    *) echo "deepest-8b: error: unknown argument '$1'" >&2; usage ;;
    esac
    shift 2
done
for v in "--gpu-mib=$mib" "--seq=$seq" "--batch=$batch"; do
    case ${v#*=} in ''|*[!0-9]*|0) echo "deepest-8b: error: $v: expected a positive integer" >&2; exit 2 ;; esac
done
[ -n "$tok" ] || { echo "deepest-8b: error: --tokenizer is required" >&2; usage; }
case $dtype in bfloat16|float32) ;; *) echo "deepest-8b: error: --dtype $dtype: bfloat16 or float32" >&2; exit 2 ;; esac
# the budget in MiB, from a fraction in (0, 1]
limit=$(awk -v m="$mib" -v f="$frac" 'BEGIN { if (f + 0 <= 0 || f + 0 > 1 || f !~ /^[0-9.]+$/) exit 1; printf "%.1f", m * f }') ||
    { echo "deepest-8b: error: --fraction $frac: expected a number in (0, 1]" >&2; exit 2; }

# peak L: the dry run's planned peak in MiB for L layers
peak() {
    set -- "$1"
    [ -z "$f8" ] || set -- "$1" --model.converters=float8 --quantize.linear.float8.recipe_name="$f8" \
        --quantize.linear.float8.filter_fqns=output --quantize.linear.float8.emulate=false
    l=$1
    shift
    TITAN_NO_REEXEC=1 "$top/bin/titan-train" --dry-run --job.config_file "$top/configs/debugmodel.toml" \
        --model.flavor=8B --model.tokenizer="$tok" --model.dim=4096 --model.n_layers="$l" --model.n_heads=32 \
        --model.n_kv_heads=8 --training.seq_len="$seq" --training.local_batch_size="$batch" \
        --training.device=cuda --training.mixed_precision_param="$dtype" "$@" >"$tmpf" 2>&1 ||
        { echo "deepest-8b: error: the dry run of $l layers failed:" >&2; tail -n 3 "$tmpf" >&2; return 1; }
    p=$(sed -n 's/^  peak of the job.s ranks: \([0-9.]*\) MiB.*/\1/p' "$tmpf")
    [ -n "$p" ] || { echo "deepest-8b: error: no peak in the dry run of $l layers" >&2; return 1; }
    echo "$p"
}
fits() { awk -v p="$1" -v m="$limit" 'BEGIN { exit !(p <= m) }'; }

tmpf=$(mktemp) || exit 1
trap 'rm -f "$tmpf"' EXIT
# the planned peak grows with the depth: bisect [lo, hi] with lo fitting
p1=$(peak 1) || exit 1
if ! fits "$p1"; then echo "0 -"; exit 0; fi
lo=1 plo=$p1 hi=32
p32=$(peak 32) || exit 1
if fits "$p32"; then echo "32 $p32"; exit 0; fi
while [ $((hi - lo)) -gt 1 ]; do
    mid=$(((lo + hi) / 2))
    pm=$(peak "$mid") || exit 1
    if fits "$pm"; then lo=$mid plo=$pm; else hi=$mid; fi
done
echo "$lo $plo"
