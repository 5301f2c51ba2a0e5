#!/bin/sh
# bench.sh - titan-train beside the PyTorch reference (scripts/torch_bench.py),
# measured in the same run on the same machine: the debugmodel flavor (dim 256,
# 6 layers, 16 heads, byte vocabulary), same seq_len, batch, threads and steps.
# Prints tokens/s (warmup steps left out), MFU against one peak FLOP/s for both,
# peak RSS, and the ratio titan/torch. Run by `make bench`.
#
#   BENCH_SEQ_LEN (2048)  BENCH_BATCH (1)  BENCH_STEPS (6)  BENCH_WARMUP (2)
#   BENCH_THREADS (2)     BENCH_DATA (a shard dir; default: shards made here)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
SEQ=${BENCH_SEQ_LEN:-2048}
BATCH=${BENCH_BATCH:-1}
STEPS=${BENCH_STEPS:-6}
WARMUP=${BENCH_WARMUP:-2}
THREADS=${BENCH_THREADS:-2}
out=build/bench

NAME=bench
. scripts/bench_env.sh
# Both sides get the same thread counts.
export OPENBLAS_NUM_THREADS="$THREADS" OMP_NUM_THREADS="$THREADS"
mkdir -p "$out"

# Data: shards of this repository's own sources (any text will do for speed),
# repeated until there is enough for every step.
data=${BENCH_DATA:-}
if [ -z "$data" ]; then
    data=$out/data
    need=$(( (STEPS + 1) * BATCH * (SEQ + 1) ))
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

# Other work on the same cores skews both sides: say how busy the machine was.
echo "bench: load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "bench: debugmodel, seq_len $SEQ, batch $BATCH, $STEPS steps ($WARMUP warmup), $THREADS threads," \
     "OPENBLAS_CORETYPE=${OPENBLAS_CORETYPE:-unset}" >&2

# titan
run=$out/run
bin/titan-init -q --force configs/debugmodel.toml "$run" \
    --training.dataset_path="$data" --training.seq_len="$SEQ" \
    --training.local_batch_size="$BATCH" --training.steps="$STEPS" \
    --training.threads="$THREADS" --checkpoint.enable=false --metrics.log_freq=1
echo "bench: titan-train ..." >&2
bin/titan-train "$run" --training.steps="$STEPS" >/dev/null
[ -s "$run/metrics.jsonl" ] || die "$run/metrics.jsonl: no metrics written"

# PyTorch reads the same token stream: the payload of the first shard (after
# its 64-byte header), when it holds enough tokens; random tokens otherwise.
set --
for first in "$data"/shard-*.bin; do
    if [ -f "$first" ] && [ $(( ($(wc -c <"$first") - 64) / 4 )) -gt $(( STEPS * BATCH * SEQ )) ]; then
        tail -c +65 "$first" >"$out/tokens.u32"
        set -- --tokens "$out/tokens.u32"
    fi
    break
done

# PyTorch: same shape; glibc told to keep freed memory (its default returns
# every T x T attention buffer to the kernel and page-faults it back each step)
echo "bench: torch_bench.py ..." >&2
GLIBC_TUNABLES=glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736 \
$PY scripts/torch_bench.py --dim 256 --layers 6 --heads 16 --kv-heads 16 --vocab 258 \
    --multiple-of 256 --rope-scaling 8 --tie 0 --seq-len "$SEQ" --batch "$BATCH" \
    --steps "$STEPS" --warmup "$WARMUP" --threads "$THREADS" "$@" >"$out/torch.json"

$PY - "$run/metrics.jsonl" "$out/torch.json" "$SEQ" "$BATCH" "$WARMUP" "$THREADS" <<'EOF'
import json, subprocess, sys
sys.path.insert(0, "scripts")
from torch_llama import LlamaConfig, flops_per_token

mpath, tpath, T, B, warmup, threads = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:])
steps = [json.loads(l) for l in open(mpath) if l.strip()]
torch_run = json.load(open(tpath))
c = LlamaConfig(dim=256, n_layers=6, n_heads=16, vocab_size=258, multiple_of=256,
                rope_scaling_factor=8.0)
fpt = flops_per_token(c, T)

# One peak for both: the larger of titan's probe (in its metrics) and a torch
# GEMM probe run now, since a probe that shares the cores reads low.
probe = subprocess.run([sys.executable, "scripts/torch_bench.py", "--probe",
                        "--threads", str(threads)], capture_output=True, text=True, check=True)
torch_peak = json.loads(probe.stdout)["peak_flops"]
titan_peak = float(steps[-1].get("peak_flops") or 0.0) if steps else 0.0
peak = max(torch_peak, titan_peak)
source = "max of titan's GEMM probe %.4g and torch's %.4g" % (titan_peak, torch_peak)

def row(name, times, rss, losses):
    timed = times[warmup:]
    tps = B * T * len(timed) / sum(timed)
    return dict(name=name, tps=tps, mfu=tps * fpt / peak, rss=rss / 2**20,
                step=sum(timed) / len(timed), loss=losses[-1])

titan = row("titan (C, OpenBLAS)", [s["step_time_s"] for s in steps],
            max(s["peak_rss_bytes"] for s in steps), [s["loss"] for s in steps])
ref = row(torch_run["impl"], torch_run["step_time_s"], torch_run["peak_rss_bytes"],
          torch_run["loss"])

print("model: debugmodel (dim 256, 6 layers, 16 heads, vocab 258), seq_len %d, batch %d, "
      "%d threads, %d steps, first %d not timed" % (T, B, threads, len(steps), warmup))
print("FLOPs/token: %.4g (6 x non-embedding params + 12 x layers x dim x seq_len)" % fpt)
print("peak: %.4g FLOP/s, from %s, used for both" % (peak, source))
print("load average at the end: %s (2 cores shared with other work skew both sides)"
      % " ".join(open("/proc/loadavg").read().split()[:3]))
print()
print("%-22s %12s %8s %11s %13s %10s" % ("implementation", "tokens/s", "MFU", "step s",
                                         "peak RSS MB", "last loss"))
for r in (titan, ref):
    print("%-22s %12.1f %7.2f%% %11.3f %13.1f %10.4f" % (r["name"], r["tps"], 100 * r["mfu"],
                                                         r["step"], r["rss"], r["loss"]))
print()
print("titan / torch: tokens/s x%.2f, peak RSS x%.2f" % (titan["tps"] / ref["tps"],
                                                       titan["rss"] / ref["rss"]))
EOF
