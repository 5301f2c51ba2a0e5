#!/bin/sh
# bench.sh - titan-train beside PyTorch 2.x (scripts/torch_bench.py, the torch
# of build/venv), measured in the same run on the same machine: the
# debugmodel flavor (dim 256, 6 layers, 16 heads, byte vocabulary), fp32,
# AdamW, same seq_len, batch, token stream, threads and steps. PyTorch runs
# twice per shape: eager with F.scaled_dot_product_attention(is_causal=True),
# and torch.compile (inductor's C++ kernels; a compile that fails here is
# reported with its reason, not fatal). For each seq_len: tokens/s from the
# median step after the warmup steps, MFU against one peak FLOP/s for all,
# peak RSS, and titan's tokens/s over each PyTorch row's. The README table's
# rows go to build/bench/bench.md. Run by `make bench`.
#
#   BENCH_SEQ_LEN ("256 2048")  BENCH_TOKENS (2048: tokens per step; batch =
#   BENCH_TOKENS / seq_len, at least 1)  BENCH_BATCH (overrides that)
#   BENCH_STEPS (6)  BENCH_WARMUP (2)  BENCH_THREADS (2)
#   BENCH_TORCH_MODES ("eager compile"; also "naive": torch_llama's own
#   softmax(QK^T + mask) V)  BENCH_DATA (a shard dir; default: shards made here)
#   BENCH_PYTHON (default: scripts/pyenv.sh's build/venv)
#   BENCH_SMOKE=1: 3 steps, 1 warmup (a check that every path runs, not a measurement)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
SEQS=${BENCH_SEQ_LEN:-256 2048}
TOKENS=${BENCH_TOKENS:-2048}
if [ -n "${BENCH_SMOKE:-}" ] && [ "${BENCH_SMOKE}" != 0 ]; then
    STEPS=${BENCH_STEPS:-3}
    WARMUP=${BENCH_WARMUP:-1}
else
    STEPS=${BENCH_STEPS:-6}
    WARMUP=${BENCH_WARMUP:-2}
fi
THREADS=${BENCH_THREADS:-2}
MODES=${BENCH_TORCH_MODES:-eager compile}
out=build/bench
start=$(date +%s)

NAME=bench
. scripts/bench_env.sh
# Both sides get the same thread counts (torch also gets torch.set_num_threads).
export OPENBLAS_NUM_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS"
mkdir -p "$out"
rm -f "$out"/titan-*.jsonl "$out"/torch-*.json

batch_for() {
    if [ -n "${BENCH_BATCH:-}" ]; then echo "$BENCH_BATCH"
    elif [ "$1" -ge "$TOKENS" ]; then echo 1
    else echo $(( TOKENS / $1 )); fi
}

# Data: shards of this repository's own sources (any text will do for speed),
# repeated until there is enough for every step of the largest shape.
need=0
for SEQ in $SEQS; do
    n=$(( (STEPS + 1) * $(batch_for "$SEQ") * (SEQ + 1) ))
    [ "$n" -gt "$need" ] && need=$n
done
data=${BENCH_DATA:-}
if [ -z "$data" ]; then
    data=$out/data
    if [ ! -f "$data/index.json" ] || [ "$(cat "$data/.bytes" 2>/dev/null || echo 0)" -lt "$need" ]; then
        rm -rf "$data" "$out/corpus.txt"
        bytes=0
        while [ "$bytes" -lt "$need" ]; do
            cat lib/*/*.c lib/*/*.h >>"$out/corpus.txt"
            bytes=$(wc -c <"$out/corpus.txt")
        done
        bin/titan-shard -q -o "$data" "$out/corpus.txt"
        echo "$bytes" >"$data/.bytes"
        rm -f "$out/corpus.txt"
    fi
fi

# PyTorch reads the same token stream: the payload of the first shard (after
# its 64-byte header), when it holds enough tokens; random tokens otherwise.
tokens=
for first in "$data"/shard-*.bin; do
    if [ -f "$first" ] && [ $(( ($(wc -c <"$first") - 64) / 4 )) -gt "$need" ]; then
        tail -c +65 "$first" >"$out/tokens.u32"
        tokens=$out/tokens.u32
    fi
    break
done

# Other work on the same cores skews every row: say how busy the machine was.
echo "bench: load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "bench: torch $TORCH_VERSION ($PY); debugmodel, seq_len $SEQS, $STEPS steps ($WARMUP warmup)," \
     "$THREADS threads, OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}" >&2

# The SDPA model is torch_llama's: loss and every gradient agree (a few seconds).
$PY scripts/torch_bench.py --check >&2 || die "torch_bench.py --check failed: the PyTorch rows would not be titan's model"

for SEQ in $SEQS; do
    BATCH=$(batch_for "$SEQ")
    # titan
    run=$out/run-$SEQ
    bin/titan-init -q --force configs/debugmodel.toml "$run" \
        --training.dataset_path="$data" --training.seq_len="$SEQ" \
        --training.local_batch_size="$BATCH" --training.steps="$STEPS" \
        --training.threads="$THREADS" --checkpoint.enable=false --metrics.log_freq=1
    echo "bench: seq_len $SEQ, batch $BATCH: titan-train ..." >&2
    bin/titan-train "$run" --training.steps="$STEPS" >/dev/null
    [ -s "$run/metrics.jsonl" ] || die "$run/metrics.jsonl: no metrics written"
    cp "$run/metrics.jsonl" "$out/titan-$SEQ.jsonl"

    # PyTorch: same shape; glibc told to keep freed memory (its default returns
    # large freed buffers to the kernel and page-faults them back each step)
    for mode in $MODES; do
        echo "bench: seq_len $SEQ, batch $BATCH: torch_bench.py --mode $mode ..." >&2
        rc=0
        GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736 \
        $PY scripts/torch_bench.py --mode "$mode" --dim 256 --layers 6 --heads 16 --kv-heads 16 \
            --vocab 258 --multiple-of 256 --rope-scaling 8 --tie 0 --seq-len "$SEQ" \
            --batch "$BATCH" --steps "$STEPS" --warmup "$WARMUP" --threads "$THREADS" \
            ${tokens:+--tokens "$tokens"} >"$out/torch-$SEQ-$mode.json" || rc=$?
        if [ "$rc" -ne 0 ] && [ "$rc" -ne 77 ]; then
            # a crash (no JSON): a row saying so, the run goes on
            printf '{"impl": "pytorch %s %s", "mode": "%s", "failed": "exit status %d (its messages above)"}\n' \
                "$TORCH_VERSION" "$mode" "$mode" "$rc" >"$out/torch-$SEQ-$mode.json"
        fi
    done
done

$PY - "$out" "$WARMUP" "$THREADS" "$TORCH_VERSION" "$MODES" "$start" "$SEQS" <<'EOF'
import json, os, statistics, subprocess, sys, time
sys.path.insert(0, "scripts")
from torch_llama import LlamaConfig, flops_per_token

out, warmup, threads, tv, modes, start = (sys.argv[1], int(sys.argv[2]), int(sys.argv[3]),
                                          sys.argv[4], sys.argv[5].split(), int(sys.argv[6]))
seqs = [int(s) for s in sys.argv[7].split()]
c = LlamaConfig(dim=256, n_layers=6, n_heads=16, vocab_size=258, multiple_of=256,
                rope_scaling_factor=8.0)
MB = 2.0 ** 20

# One peak for every row: the larger of titan's probe (in its metrics) and a
# torch GEMM probe run now, since a probe that shares the cores reads low.
probe = subprocess.run([sys.executable, "scripts/torch_bench.py", "--probe",
                        "--threads", str(threads)], capture_output=True, text=True, check=True)
torch_peak = json.loads(probe.stdout)["peak_flops"]
titan_peak = 0.0
for T in seqs:
    m = [json.loads(l) for l in open(os.path.join(out, "titan-%d.jsonl" % T)) if l.strip()]
    titan_peak = max([titan_peak] + [float(s.get("peak_flops") or 0.0) for s in m])
peak = max(torch_peak, titan_peak)
label = {"eager": "PyTorch %s eager (SDPA)", "compile": "PyTorch %s compile",
         "naive": "PyTorch %s eager (naive attention)"}
short = tv.split("+")[0]

print("model: debugmodel (dim 256, 6 layers, 16 heads, vocab 258), fp32, AdamW, clip 1; "
      "%d threads for all" % threads)
print("PyTorch: torch %s (%s); eager: F.scaled_dot_product_attention(is_causal=True); "
      "compile: torch.compile(model), inductor on the CPU" % (tv, sys.executable))
print("peak: %.4g FLOP/s, the larger of titan's GEMM probe %.4g and torch's %.4g, used for every row"
      % (peak, titan_peak, torch_peak))
print("tokens/s: batch x seq_len / the median step time after the first %d steps "
      "(\"first s\": step 1, which holds torch.compile's compile)" % warmup)
print("load average at the end: %s (cores shared with other work skew every row)"
      % " ".join(open("/proc/loadavg").read().split()[:3]))

md = ["| seq_len | batch | implementation | tokens/s | MFU | step s | peak RSS | titan / this |",
      "|---:|---:|---|---:|---:|---:|---:|---:|"]
for T in seqs:
    fpt = flops_per_token(c, T)
    steps = [json.loads(l) for l in open(os.path.join(out, "titan-%d.jsonl" % T)) if l.strip()]
    times = [s["step_time_s"] for s in steps]
    B = round(steps[0]["tokens_seen"] / T) if "tokens_seen" in steps[0] else None
    med = statistics.median(times[warmup:])
    rows = [dict(name="titan (C, OpenBLAS)", tps=(B or 1) * T / med, step=med, first=times[0],
                 rss=max(s["peak_rss_bytes"] for s in steps) / MB, loss=steps[-1]["loss"])]
    for mode in modes:
        path = os.path.join(out, "torch-%d-%s.json" % (T, mode))
        name = label.get(mode, "PyTorch %s " + mode) % short
        try:
            r = json.load(open(path))
        except (OSError, ValueError) as e:
            r = {"failed": "no result (%s)" % e}
        if "failed" in r:
            rows.append(dict(name=name, failed=r["failed"]))
            continue
        B = r["batch"]
        rows.append(dict(name=name, tps=r["tokens_per_s"], step=r["median_step_s"],
                         first=r["first_step_s"], rss=r["peak_rss_bytes"] / MB, loss=r["loss"][-1],
                         rss0=r.get("rss_after_import_bytes", 0) / MB))
    titan = rows[0]
    print()
    print("seq_len %d, batch %s (%s tokens/step), FLOPs/token %.4g (6 x non-embedding params "
          "+ 12 x layers x dim x seq_len)" % (T, B, B * T if B else "?", fpt))
    print("%-34s %10s %7s %8s %9s %9s %9s %8s" % ("implementation", "tokens/s", "MFU", "step s",
                                                   "first s", "RSS MB", "last loss", "titan /"))
    for r in rows:
        if "failed" in r:
            print("%-34s failed: %s" % (r["name"], r["failed"]))
            md.append("| %d | %s | %s | failed | | | | |" % (T, B, r["name"]))
            continue
        ratio = "" if r is titan else "x%.2f" % (titan["tps"] / r["tps"])
        mfu = r["tps"] * fpt / peak
        print("%-34s %10.1f %6.1f%% %8.3f %9.2f %9.1f %9.4f %8s" % (
            r["name"], r["tps"], 100 * mfu, r["step"], r["first"], r["rss"], r["loss"], ratio))
        md.append("| %d | %s | %s | %.0f | %.0f%% | %.3f | %.0f MB | %s |" % (
            T, B, r["name"], r["tps"], 100 * mfu, r["step"], r["rss"], ratio or "-"))
    for r in rows[1:]:
        if "failed" not in r:
            print("titan / %s: tokens/s x%.2f, peak RSS x%.2f (%.0f MB of its RSS is import torch)" % (
                r["name"], titan["tps"] / r["tps"], titan["rss"] / r["rss"], r["rss0"]))

with open(os.path.join(out, "bench.md"), "w") as f:
    f.write("\n".join(md) + "\n")
print()
print("README rows (%s):" % os.path.join(out, "bench.md"))
print("\n".join(md))
print()
print("bench: %d s in all" % (time.time() - start))
EOF
