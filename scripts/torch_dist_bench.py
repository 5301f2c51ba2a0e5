"""torch_dist_bench.py - the PyTorch side of scripts/bench_dist.sh: trains the
reference Llama 3 (scripts/torch_llama.py) data-parallel on the CPU over gloo,
one process per rank, started by torch.multiprocessing.spawn (Debian's
torch.distributed.run fails before starting workers: to_map(None) in
elastic/multiprocessing), rendezvous through a file:

    build/venv/bin/python3 scripts/torch_dist_bench.py --nproc 2 --mode ddp --out run.json ...

--mode ddp:  DistributedDataParallel, full AdamW on every rank.
--mode zero: DDP + ZeroRedundancyOptimizer (ZeRO-1: AdamW moments sharded,
             updated parameters broadcast from their owners). The stand-in for
             FSDP: torch 1.13's FullyShardedDataParallel refused CPU-only
             execution ("FSDP does not support CPU only execution"); kept
             with torch 2.x (build/venv, where this script also runs).

The step is titan-train's: forward, mean cross-entropy, backward (gradients
averaged over ranks), global-norm clipping to 1, AdamW (0.9, 0.95, eps 1e-8,
weight decay 0.1). Each rank reads its own local batch of the token stream.

Communication time, measured in the step: a DDP comm hook records when each
gradient bucket's all-reduce is issued (its last gradient is ready) and when it
completes; the time the buckets are in flight (union of the intervals) is the
communication, the part after the last bucket is issued (backward has no more
compute to hide it behind) is exposed. For zero the parameter broadcasts after
the optimizer step block the step, so they count whole in both.
Rank 0 writes one JSON object to --out, with every rank's peak RSS
(getrusage, all-gathered).
"""
import argparse
import json
import os
import resource
import sys
import time

import numpy as np
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.distributed.optim import ZeroRedundancyOptimizer
from torch.nn.parallel import DistributedDataParallel as DDP

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_llama import Llama, LlamaConfig, init_weights  # noqa: E402

ADAM = dict(betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)


def peak_rss() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def timed_steps(step, n):
    """Runs step(i) n times between barriers; returns the step times (s)."""
    out = []
    for i in range(n):
        dist.barrier()
        t0 = time.perf_counter()
        step(i)
        out.append(time.perf_counter() - t0)
    return out


def union_s(spans) -> float:
    """Seconds covered by a list of (start, end) intervals."""
    total, end = 0.0, float("-inf")
    for a, b in sorted(spans):
        if b > end:
            total += b - max(a, end)
            end = b
    return total


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--mode", choices=("ddp", "zero"), required=True)
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=258)
    ap.add_argument("--multiple-of", type=int, default=256)
    ap.add_argument("--rope-scaling", type=float, default=8.0)
    ap.add_argument("--seq-len", type=int, default=512)
    ap.add_argument("--local-batch", type=int, default=1)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--tokens", default="", help="raw uint32 token file (default: random)")
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    if a.steps <= a.warmup:
        raise SystemExit("torch_dist_bench: --steps must exceed --warmup")
    if a.nproc < 1:
        raise SystemExit("torch_dist_bench: --nproc must be >= 1")
    rdv = a.out + ".rendezvous"
    if os.path.exists(rdv):
        os.unlink(rdv)  # a stale file from a killed run would hang the rendezvous
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    mp.spawn(run_rank, args=(a, rdv), nprocs=a.nproc, join=True)
    if os.path.exists(rdv):
        os.unlink(rdv)
    return 0


def run_rank(rank: int, a: argparse.Namespace, rdv: str) -> None:
    torch.set_num_threads(a.threads)
    dist.init_process_group("gloo", init_method="file://" + os.path.abspath(rdv),
                            rank=rank, world_size=a.nproc)
    world = a.nproc

    c = LlamaConfig(dim=a.dim, n_layers=a.layers, n_heads=a.heads, vocab_size=a.vocab,
                    multiple_of=a.multiple_of, rope_scaling_factor=a.rope_scaling)
    torch.manual_seed(0)
    model = Llama(c)
    init_weights(model, 0)
    numel = sum(p.numel() for p in model.parameters())
    # Gradients in the buckets themselves: no second copy of them.
    ddp = DDP(model, gradient_as_bucket_view=True)
    spans, blocking = [], [0.0]  # this step's bucket (issued, done); zero's broadcasts

    def allreduce_hook(state, bucket):
        issued = time.perf_counter()
        buf = bucket.buffer().div_(world)

        def done(fut):
            spans.append((issued, time.perf_counter()))
            return fut.value()[0]
        return dist.all_reduce(buf, async_op=True).get_future().then(done)
    ddp.register_comm_hook(None, allreduce_hook)
    if a.mode == "zero":
        opt = ZeroRedundancyOptimizer(ddp.parameters(), optimizer_class=torch.optim.AdamW,
                                      lr=8e-4, **ADAM)
        sync = opt._sync_params  # the broadcasts of the updated shards (torch 1.13 to 2.11)

        def timed_sync():
            t0 = time.perf_counter()
            sync()
            blocking[0] += time.perf_counter() - t0
        opt._sync_params = timed_sync
    else:
        opt = torch.optim.AdamW(ddp.parameters(), lr=8e-4, **ADAM)

    B, T = a.local_batch, a.seq_len
    need = a.steps * world * B * T + 1
    if a.tokens:
        stream = np.fromfile(a.tokens, dtype="<u4")
        if stream.size < need:
            raise SystemExit("torch_dist_bench: %s: %d tokens, need %d" % (a.tokens, stream.size, need))
        stream = torch.from_numpy(stream[:need].astype(np.int64)) % a.vocab
    else:
        stream = torch.randint(0, a.vocab, (need,), generator=torch.Generator().manual_seed(0))

    def batch(i):
        o = (i * world + rank) * B * T
        chunk = stream[o: o + B * T + 1]
        return chunk[:-1].view(B, T), chunk[1:].view(B, T)

    losses, exposed, total = [], [], []

    def dist_step(i):
        x, y = batch(i)
        spans.clear()
        blocking[0] = 0.0
        opt.zero_grad(set_to_none=False)  # set_to_none would drop the bucket views
        _, loss = ddp(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(ddp.parameters(), max_norm=1.0)
        opt.step()
        lt = loss.detach().clone()
        dist.all_reduce(lt)  # the loss printed is the mean over ranks, as in titan
        losses.append(lt.item() / world)
        tail = max(b for _, b in spans) - max(a for a, _ in spans) if spans else 0.0
        exposed.append(tail + blocking[0])
        total.append(union_s(spans) + blocking[0])

    times = timed_steps(dist_step, a.steps)
    rss = peak_rss()

    gathered = [None] * world
    dist.all_gather_object(gathered, {"rss": rss, "exposed": sum(exposed[a.warmup:]),
                                      "total": sum(total[a.warmup:])})
    if rank == 0:
        timed = times[a.warmup:]
        step = sum(timed) / len(timed)
        out = {
            "impl": "pytorch %s %s" % (torch.__version__, a.mode), "mode": a.mode,
            "world": world, "threads": a.threads, "local_batch": B, "seq_len": T,
            "steps": a.steps, "warmup": a.warmup, "params": numel,
            "tokens_per_s": world * B * T / step, "step_time_s": times, "loss": losses,
            "peak_rss_bytes": [g["rss"] for g in gathered],
            # per timed step, mean over ranks
            "comm_exposed_s": sum(g["exposed"] for g in gathered) / world / len(timed),
            "comm_total_s": sum(g["total"] for g in gathered) / world / len(timed),
        }
        tmp = a.out + ".tmp"
        with open(tmp, "w") as f:
            json.dump(out, f)
        os.replace(tmp, a.out)
    dist.barrier()
    # torch 1.13 + gloo: with DDP's comm hook, a rank sometimes hangs for good in
    # process-group teardown after the other has left; the results are written,
    # so leave without it.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main())
