#!/bin/sh
# bench_dist.sh - multi-process training: titan-train --nproc N beside PyTorch
# (scripts/torch_dist_bench.py, gloo) in the same run, same debugmodel, same
# global batch (BENCH_DIST_GLOBAL sequences of BENCH_DIST_SEQ_LEN tokens split
# over the ranks), same steps. Layouts: FSDP 2, FSDP 4 (on one host, and on
# two namespaced hosts over mpi: a titan row only), DDP 2, and titan's
# tensor parallel 2, pipeline parallel 2 and context parallel 2 and 4 (no PyTorch
# rows; their references are the other 2-rank rows of the same run). PyTorch
# is build/venv's (scripts/bench_env.sh; BENCH_PYTHON for another). Its FSDP
# stand-in is DDP + ZeroRedundancyOptimizer (ZeRO-1; chosen when torch 1.13's
# FullyShardedDataParallel refused CPU-only execution), which keeps whole
# parameters and gradients on every rank where titan's FSDP (ZeRO-3) keeps
# its shard and the communication units in use. Attention on the PyTorch side
# is torch_llama's own (the T x T probabilities stored), not SDPA.
# Prints tokens/s (warmup left out), the exposed and total communication time
# per step, and each rank's peak RSS beside the analytic expectation
# (parameters + gradients + optimizer state, sharded as each layout shards
# them, + activations). Threads per rank = max(1, cores / ranks) on both sides.
# Run by `make bench`.
#
# Tensor parallel 2 runs twice, blocking and async (collective matmuls:
# parallelism.enable_async_tensor_parallel), one after the other, and
# context parallel 2 and 4 with the all-gather and with the ring
# (context_parallel_rotate_method = "alltoall"); with BENCH_DIST_REPEAT=k
# each pair runs k times, alternating, a row each, so that the noise of
# shared cores shows beside the difference.
# BENCH_DIST_ONLY=overlap runs the tp and cp rows only (no PyTorch).
#
#   BENCH_DIST_SEQ_LEN (512)  BENCH_DIST_GLOBAL (4)  BENCH_DIST_STEPS (4)
#   BENCH_DIST_WARMUP (1)  BENCH_DIST_REPEAT (1)  BENCH_DIST_ONLY (all)
#   BENCH_DIST_PP_SCHEDULES (1; 0 leaves out the rows of
#   pipeline schedules: pp 2 and pp 4 x 1F1B, GPipe, Interleaved1F1B,
#   LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble, DualPipeV, with their
#   measured and theoretical bubbles)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
SEQ=${BENCH_DIST_SEQ_LEN:-512}
GLOBAL=${BENCH_DIST_GLOBAL:-4}
STEPS=${BENCH_DIST_STEPS:-4}
WARMUP=${BENCH_DIST_WARMUP:-1}
out=build/bench_dist

NAME=bench_dist
. scripts/bench_env.sh
[ $((GLOBAL % 4)) -eq 0 ] || die "BENCH_DIST_GLOBAL ($GLOBAL) must be a multiple of 4 (split over 2 and 4 ranks)"
rm -rf "$out"
mkdir -p "$out"

# Data: this repository's sources, repeated until every rank has its steps.
need=$(( (STEPS + 1) * GLOBAL * (SEQ + 1) ))
bytes=0
while [ "$bytes" -lt "$need" ]; do
    cat lib/*/*.c lib/*/*.h >>"$out/corpus.txt"
    bytes=$(wc -c <"$out/corpus.txt")
done
bin/titan-shard -q -o "$out/data" "$out/corpus.txt"
rm -f "$out/corpus.txt"
# PyTorch reads the same token stream: the first shard's payload after its 64-byte header.
tail -c +65 "$out/data/shard-00000.bin" >"$out/tokens.u32"

echo "bench_dist: load average before the run: $(cut -d' ' -f1-3 /proc/loadavg)" >&2

exec $PY - "$out" "$SEQ" "$GLOBAL" "$STEPS" "$WARMUP" "${BENCH_DIST_REPEAT:-1}" "${BENCH_DIST_ONLY:-all}" <<'EOF'
import json, os, subprocess, sys, time
sys.path.insert(0, "scripts")
from torch_llama import LlamaConfig, catalog, hidden_dim

out, T, G, steps, warmup, repeat = sys.argv[1], *map(int, sys.argv[2:7])
only_overlap = sys.argv[7] == "overlap"
cores = os.cpu_count() or 1
c = LlamaConfig(dim=256, n_layers=6, n_heads=16, vocab_size=258, multiple_of=256,
                rope_scaling_factor=8.0)
MB = 2.0 ** 20


def threads(n):
    return max(1, cores // n)


def act_titan(b, tp=1, layers=None, slots=1, with_head=True, cp=1):
    """Bytes of titan's activation arena (lib/model/llama.c, no AC) for b x T tokens;
    under tensor parallelism the heads, hidden units and vocabulary are the rank's, and
    sequence parallelism (the default with tp) splits the residual stream, h, dresid
    and the norms' statistics by rows, adding a whole [N, C] scratch and the lse row.
    A pipeline stage: its layers and head only, what a forward keeps for its backward
    once per micro-batch slot, the backward's scratch once. Context parallelism: the
    rank's b x T/cp tokens, plus the whole sequences' keys, values, their gradients
    and a staging buffer (lib/model/attention_cp.c)."""
    C, QD, KVD, NH = c.dim, c.dim // tp, c.dim // tp, c.n_heads // tp
    H, V = hidden_dim(c) // tp, -(-c.vocab_size // tp)
    L = c.n_layers if layers is None else layers
    r = 1.0 / tp  # the rows of the residual stream a rank holds
    layer = r * C + r + QD + 2 * KVD + QD + NH + r * C + C + r + 3 * H
    head = (C + r + V + 1 + (1 if tp > 1 else 0)) if with_head else 0
    scratch = r * C + C + 2 * QD + 3 * KVD + 3 * H + (C if tp > 1 else 0)
    n = b * T // cp
    kept = (L + 1) * r * C + L * layer + head + 2
    whole_kv = 5 * b * T * KVD if cp > 1 else 0
    return 4 * (n * (slots * kept + scratch) + T // cp * (c.dim // c.n_heads) + whole_kv)


def act_torch(b):
    """Rough bytes autograd keeps for torch_llama.py: titan's per-token tensors plus
    the attention probabilities every layer saves (torch_llama's attention, not SDPA), and
    two more T x T score buffers live at once in backward."""
    tt = 4 * b * c.n_heads * T * T
    return act_titan(b) + c.n_layers * tt + 2 * tt


def children(pid):
    try:
        with open("/proc/%d/task/%d/children" % (pid, pid)) as f:
            return [int(x) for x in f.read().split()]
    except OSError:
        return []


def rank_of(pid):
    try:
        with open("/proc/%d/environ" % pid, "rb") as f:
            for kv in f.read().split(b"\0"):
                if kv.startswith(b"TITAN_RANK="):
                    return int(kv[11:])
    except (OSError, ValueError):
        pass
    return None


def hwm(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def titan(name, n, layout, dp=None):
    """titan-train --nproc n (dp data-parallel ranks, default n); each rank's peak
    RSS read from /proc (VmHWM only grows, so the last read before a rank exits
    is its peak)."""
    run = os.path.join(out, name)
    b = G // (dp or n)
    subprocess.run(["bin/titan-init", "-q", "--force", "configs/debugmodel.toml", run,
                    "--training.dataset_path=" + os.path.join(out, "data"),
                    "--training.seq_len=%d" % T, "--training.local_batch_size=%d" % b,
                    "--training.global_batch_size=%d" % G, "--training.steps=%d" % steps,
                    "--training.threads=%d" % threads(n), "--checkpoint.enable=false",
                    "--metrics.log_freq=1", "--metrics.peak_flops=1e11"], check=True)
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads(n)), OMP_NUM_THREADS=str(threads(n)))
    print("bench_dist: titan %s ..." % name, file=sys.stderr, flush=True)
    p = subprocess.Popen(["bin/titan-train", "-q", run, "--nproc", str(n)] + layout, env=env)
    peak, ranks = [0] * n, {}
    while p.poll() is None:
        for k in children(p.pid):
            if k not in ranks:
                ranks[k] = rank_of(k)
            r = ranks[k]
            if r is not None and 0 <= r < n:
                peak[r] = max(peak[r], hwm(k))
        time.sleep(0.05)
    if p.returncode != 0:
        sys.exit("bench_dist: titan-train %s exited with status %d" % (name, p.returncode))
    m = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl")) if l.strip()]
    timed = m[warmup:]
    comm = None
    if timed and all("comm_exposed_s" in s and "comm_total_s" in s for s in timed):
        comm = (sum(s["comm_exposed_s"] for s in timed) / len(timed),
                sum(s["comm_total_s"] for s in timed) / len(timed))
    return dict(tps=G * T * len(timed) / sum(s["step_time_s"] for s in timed), comm=comm,
                rss=peak, rss0_metrics=max(s["peak_rss_bytes"] for s in m), loss=m[-1]["loss"])


def torch_run(name, n, mode):
    res = os.path.join(out, name + ".json")
    print("bench_dist: torch %s ..." % name, file=sys.stderr, flush=True)
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads(n)), OMP_NUM_THREADS=str(threads(n)),
               # keep freed memory, as scripts/bench.sh does for the single-process run
               GLIBC_TUNABLES="glibc.malloc.mmap_max=0:glibc.malloc.trim_threshold=68719476736")
    subprocess.run([sys.executable, "scripts/torch_dist_bench.py", "--nproc", str(n), "--mode", mode,
                    "--seq-len", str(T), "--local-batch", str(G // n), "--steps", str(steps),
                    "--warmup", str(warmup), "--threads", str(threads(n)),
                    "--tokens", os.path.join(out, "tokens.u32"), "--out", res],
                   env=env, check=True, stdout=subprocess.DEVNULL)
    r = json.load(open(res))
    return dict(tps=r["tokens_per_s"], comm=(r["comm_exposed_s"], r["comm_total_s"]),
                rss=r["peak_rss_bytes"], loss=r["loss"][-1], params=r["params"])


P = None
rows = []
fsdp = lambda n: ["--parallelism.data_parallel_replicate_degree=1",
                  "--parallelism.data_parallel_shard_degree=%d" % n]
ddp = ["--parallelism.data_parallel_replicate_degree=2", "--parallelism.data_parallel_shard_degree=1"]
for n, kind in () if only_overlap else ((2, "fsdp"), (4, "fsdp"), (2, "ddp")):
    t = titan("%s%d" % (kind, n), n, fsdp(n) if kind == "fsdp" else ddp)
    r = torch_run("torch_%s%d" % (kind, n), n, "zero" if kind == "fsdp" else "ddp")
    P = 4 * r["params"]
    b = G // n
    # Analytic bytes per rank. titan FSDP: the rank's shard of params, grads and
    # AdamW m, v, plus the units in use (lib/parallel/fsdp.h): at most about five
    # of the largest unit (gathered current and prefetched parameters, the
    # current unit's full gradient, two staging buffers). ZeRO-1: whole params
    # + grads + m, v of the shard. DDP: everything whole.
    hd = hidden_dim(c)
    unit = 4 * max(4 * c.dim * c.dim + 3 * c.dim * hd + 2 * c.dim, c.vocab_size * c.dim + c.dim)
    if kind == "fsdp":
        rows.append(("titan FSDP %d" % n, n, t, 4 * P / n + 5 * unit, act_titan(b)))
        rows.append(("torch DDP+ZeRO-1 %d" % n, n, r, 2 * P + 2 * P / n, act_torch(b)))
    else:
        rows.append(("titan DDP %d" % n, n, t, 4 * P, act_titan(b)))
        rows.append(("torch DDP %d" % n, n, r, 4 * P, act_torch(b)))

# FSDP 4 again, its 4 ranks on two hosts (2 each) made as namespaces of this
# machine (tests/cli/dist_2node.sh --run: own network, hostname, /tmp and
# /dev/shm, a veth pair between them), mpirun across them: the mpi
# communicator over TCP on veth loopback, beside the one-host shm row above,
# same job, same cores. Needs root; the row says so when it cannot run.
def titan_two_hosts(name, layout):
    run = os.path.abspath(os.path.join(out, name))
    subprocess.run(["bin/titan-init", "-q", "--force", "configs/debugmodel.toml", run,
                    "--training.dataset_path=" + os.path.abspath(os.path.join(out, "data")),
                    "--training.seq_len=%d" % T, "--training.local_batch_size=%d" % (G // 4),
                    "--training.global_batch_size=%d" % G, "--training.steps=%d" % steps,
                    "--training.threads=%d" % threads(4), "--checkpoint.enable=false",
                    "--metrics.log_freq=1", "--metrics.peak_flops=1e11"], check=True)
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads(4)), OMP_NUM_THREADS=str(threads(4)))
    print("bench_dist: titan %s ..." % name, file=sys.stderr, flush=True)
    p = subprocess.run(["sh", "tests/cli/dist_2node.sh", "--run", run, "-q"] + layout, env=env,
                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        print("bench_dist: two hosts: skipped (status %d): %s" % (p.returncode, p.stderr.strip()[-300:]),
              file=sys.stderr)
        return None
    m = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl")) if l.strip()]
    timed = m[warmup:]
    comm = None
    if timed and all("comm_exposed_s" in s and "comm_total_s" in s for s in timed):
        comm = (sum(s["comm_exposed_s"] for s in timed) / len(timed),
                sum(s["comm_total_s"] for s in timed) / len(timed))
    return dict(tps=G * T * len(timed) / sum(s["step_time_s"] for s in timed), comm=comm,
                rss=[max(s["peak_rss_bytes"] for s in m)], loss=m[-1]["loss"])


if only_overlap:  # the parameter count PyTorch's rows would have given
    P, hd = 0, hidden_dim(c)
    for _, shape in catalog(c):
        k = 1
        for d in shape:
            k *= d
        P += 4 * k
    unit = 4 * max(4 * c.dim * c.dim + 3 * c.dim * hd + 2 * c.dim, c.vocab_size * c.dim + c.dim)
t2 = None if only_overlap else titan_two_hosts("fsdp4_2hosts", fsdp(4))
if t2:
    rows.append(("titan FSDP 4, 2 hosts", 4, t2, 4 * P / 4 + 5 * unit, act_titan(G // 4)))

# Tensor parallel 2: each rank holds half of every matrix and the whole
# batch; the same 2 cores as the 2-rank rows above.
# Blocking, then async (the collective matmuls), alternating when repeated.
hd = hidden_dim(c)
replicated = 4 * (2 * c.n_layers + 1) * c.dim  # the norms, whole on every rank
tp2 = ["--parallelism.tensor_parallel_degree=2", "--parallelism.data_parallel_shard_degree=1"]
for k in range(repeat):
    tag = " #%d" % (k + 1) if repeat > 1 else ""
    for mode in ("false", "true"):
        t = titan("tp2" + ("async" if mode == "true" else "") + str(k), 2,
                  tp2 + ["--parallelism.enable_async_tensor_parallel=" + mode], dp=1)
        rows.append(("titan TP 2" + (" async" if mode == "true" else "") + tag, 2, t,
                     4 * (P - replicated) / 2 + 4 * replicated, act_titan(G, 2)))

# Pipeline parallel 2 (1F1B): the global batch as G micro-batches of one
# sequence; stage 0 holds the embedding and layers 0-2 with two micro-batches
# in flight, stage 1 layers 3-5 and the head with one (torchtitan's split of
# 6 layers + 2). The larger of the two, in state and activations.
t = None if only_overlap else titan("pp2", 2, ["--parallelism.pipeline_parallel_degree=2",
                                                 "--parallelism.data_parallel_shard_degree=1"], dp=1)
layer_p = 4 * c.dim * c.dim + 3 * c.dim * hd + 2 * c.dim  # wq, wk, wv, wo (GQA as MHA here), FFN, norms
emb_p = c.vocab_size * c.dim
st0, st1 = emb_p + 3 * layer_p, 3 * layer_p + c.dim + emb_p
a0, a1 = act_titan(1, layers=3, slots=2, with_head=False), act_titan(1, layers=3, slots=1)
if t:
    rows.append(("titan PP 2 (1F1B)", 2, t, 4 * 4 * max(st0, st1), max(a0, a1)))

# Context parallel 2: every sequence split over the two ranks (chunks 0 and 3
# of 4 on rank 0, 1 and 2 on rank 1); FSDP shards over the cp group, as in the
# FSDP 2 row. Each rank holds half the tokens' activations and the whole
# sequences' keys and values for one layer at a time.
# All-gather, then the ring (rotate method "alltoall"), alternating when repeated.
# Context parallel 4 likewise (4 ranks on the same cores: oversubscribed
# where there are fewer than 4), each rank a quarter of every sequence.
for cpn in (2, 4):
    cpl = ["--parallelism.context_parallel_degree=%d" % cpn, "--parallelism.data_parallel_shard_degree=1"]
    for k in range(repeat):
        tag = " #%d" % (k + 1) if repeat > 1 else ""
        for method in ("allgather", "alltoall"):
            ring = method == "alltoall"
            t = titan("cp%d" % cpn + ("ring" if ring else "") + str(k), cpn,
                      cpl + ["--parallelism.context_parallel_rotate_method=" + method], dp=1)
            rows.append(("titan CP %d" % cpn + (" ring" if ring else "") + tag, cpn, t,
                         4 * P / cpn + 5 * unit, act_titan(G, cp=cpn)))

print("model: debugmodel (dim 256, 6 layers, 16 heads, vocab 258, %.2fM params), seq_len %d, "
      "global batch %d sequences split over the ranks, %d steps, first %d not timed"
      % (P / 4 / 1e6, T, G, steps, warmup))
print("%d cores; threads per rank = max(1, cores / ranks): %s (titan --training.threads, torch "
      "set_num_threads + OMP_NUM_THREADS); 4 ranks oversubscribe when ranks > cores"
      % (cores, ", ".join("%d ranks -> %d" % (n, threads(n)) for n in (2, 4))))
# Pipeline schedules at the same global batch (G micro-batches of one
# sequence, dp 1): pp 2 and pp 4, each schedule; tokens/s, the bubble
# (titan-trace summary: measured, the replay of the last local batch's
# actions with their measured times, and the schedule's theory), peak RSS.
def bubbles(run):
    """titan-trace summary's pipeline table: [(measured, replay on wall times, replay on CPU
    times, theory)] per rank, percent."""
    txt = subprocess.run(["bin/titan-trace", "summary", run], capture_output=True, text=True, check=True).stdout
    rows_b = []
    num = lambda x: None if x == "-" else float(x)
    for line in txt.splitlines():
        f = line.replace("%", " ").replace("(", " ").replace(")", " ").split()
        if "%" in line and len(f) == 7 and f[0].isdigit() and f[1].isdigit():
            rows_b.append((float(f[2]), num(f[4]), num(f[5]), float(f[6])))
    return rows_b

sched_rows = []
if os.environ.get("BENCH_DIST_PP_SCHEDULES", "1") != "0":
    for pp in (2, 4):
        for sched in ("1F1B", "GPipe", "Interleaved1F1B", "LoopedBFS", "InterleavedZeroBubble", "ZBVZeroBubble",
                      "DualPipeV"):
            if sched == "DualPipeV" and G < 2 * pp:
                continue  # it needs 2 pp micro-batches
            name = "pp%d-%s" % (pp, sched)
            t = titan(name, pp, ["--parallelism.pipeline_parallel_degree=%d" % pp,
                                 "--parallelism.data_parallel_shard_degree=1",
                                 "--parallelism.pipeline_parallel_schedule=" + sched], dp=1)
            sched_rows.append((pp, sched, t, bubbles(os.path.join(out, name))))

print("load average at the end: %s (the cores are shared with other work)"
      % " ".join(open("/proc/loadavg").read().split()[:3]))
print()
print("%-22s %5s %9s %9s %9s %8s %10s %10s %10s %8s" % (
    "implementation", "ranks", "tokens/s", "exposed s", "comm s", "exposed", "RSS MB max",
    "analytic", "state+act", "loss"))
for name, n, d, state, act in rows:
    if d["comm"]:
        e, tot = d["comm"]
        comm = "%9.3f %9.3f %7.0f%%" % (e, tot, 100 * min(1.0, e / tot) if tot > 0 else 0)
    else:
        comm = "%9s %9s %8s" % ("n/a", "n/a", "n/a")
    print("%-22s %5d %9.1f %s %10.1f %10.1f %10s %8.4f" % (
        name, n, d["tps"], comm, max(d["rss"]) / MB, (state + act) / MB,
        "%.0f+%.0f" % (state / MB, act / MB), d["loss"]))
print()
print("peak RSS per rank (MB):")
for name, n, d, state, act in rows:
    extra = ""
    if "rss0_metrics" in d:
        extra = "   (rank 0 in metrics.jsonl: %.1f)" % (d["rss0_metrics"] / MB)
    print("  %-22s %s%s" % (name, " ".join("%7.1f" % (x / MB) for x in d["rss"]), extra))
print()
print("titan FSDP 4, 2 hosts: the FSDP 4 job with 2 ranks on each of two hosts made as Linux")
print("  namespaces of this machine (own network, hostname, /tmp, /dev/shm; a veth pair), started")
print("  by mpirun across them: mpi communicators, TCP over veth loopback (the same cores as the")
print("  one-host shm row); its RSS is rank 0's from metrics.jsonl.")
print("exposed: communication time per step not hidden behind compute, over its total.")
print("  titan: comm_exposed_s / comm_total_s from metrics.jsonl (rank 0), n/a when absent.")
print("  A blocking collective counts whole as exposed. TP 2 async (collective matmuls): exposed")
print("  = the time blocked waiting on a peer's flag in the shared window; total adds the copies")
print("  and in-place sums the rank's own thread does between its products (not overlapped,")
print("  but no wait), plus the blocking collectives left (loss sums, norm-weight gradients).")
print("  CP ring: the same, for the keys' and values' blocks (the backward's published at the")
print("  start of each layer's backward, read at its attention); every CP row adds FSDP's share.")
print("  torch: DDP comm hook: buckets in flight = total; after the last bucket is issued")
print("  (no backward compute left) = exposed; ZeRO-1's parameter broadcasts count whole.")
print("analytic = params + grads + AdamW m, v as each layout holds them + activations")
print("  (titan: its activation arena; torch: the same plus the T x T attention")
print("  probabilities autograd keeps, approximate). RSS above it is code, libraries,")
print("  communication buffers and allocator slack (torch runs with glibc told to keep")
print("  freed memory, as in scripts/bench.sh, which adds to its RSS). titan FSDP's state is")
print("  4P/N (%.1f MB at 2 ranks, %.1f MB at 4) plus up to 5 of its largest unit (%.1f MB)."
      % (4 * P / 2 / MB, 4 * P / 4 / MB, unit / MB))
if sched_rows:
    print()
    print("pipeline schedules, %d micro-batches of one sequence a step (dp 1):" % G)
    print("%-28s %9s %26s %26s %26s %26s %10s" % ("schedule", "tokens/s", "bubble measured % by rank",
                                                  "replay % by rank", "replay on CPU % by rank",
                                                  "theory % by rank", "RSS MB max"))
    for pp, sched, d, b in sched_rows:
        col = lambda k: " ".join("%5.1f" % x[k] if x[k] is not None else "    -" for x in b)
        print("%-28s %9.1f %26s %26s %26s %26s %10.1f" % ("pp %d %s" % (pp, sched), d["tps"], col(0), col(1),
                                                          col(2), col(3), max(d["rss"]) / MB))
    print("bubble: 1 - a rank's time computing / its time in the pipeline (blocked transfers idle);")
    print("  replay: the last local batch's recorded actions on a logical clock with their measured")
    print("  times (wall less blocked; on CPU: the rank's CPU time in each, which a core shared with")
    print("  other ranks does not stretch); theory: the same lists with F, I, W 1 and B 2 (titan(7),")
    print("  PIPELINE SCHEDULES).")
    print("  BENCH_DIST_PP_SCHEDULES=0 leaves these rows out.")
EOF
