"""torch_bench.py - the PyTorch side of scripts/bench.sh: trains the reference
Llama 3 (scripts/torch_llama.py) in plain PyTorch on the CPU and prints one JSON
object on stdout: tokens/s (warmup steps excluded), step times, peak RSS.

    /usr/bin/python3 scripts/torch_bench.py --threads 2 --seq-len 2048 --steps 6
    /usr/bin/python3 scripts/torch_bench.py --probe --threads 2   # GEMM peak FLOP/s

The step is what titan-train's step is: forward, mean cross-entropy, backward,
global-norm clipping to 1, AdamW (0.9, 0.95, eps 1e-8, weight decay 0.1).
Attention is softmax(QK^T/sqrt(hd) + mask) V: torch 1.13 has no fused kernel.
"""
import argparse
import json
import math
import os
import resource
import sys
import time

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_llama import Llama, LlamaConfig, flops_per_token, init_weights  # noqa: E402


def gemm_probe(seconds: float = 2.0, n: int = 1024) -> float:
    """Sustained fp32 FLOP/s of n x n GEMMs (best of a few timed batches)."""
    a, b = torch.randn(n, n), torch.randn(n, n)
    for _ in range(3):
        torch.mm(a, b)
    best, deadline = 0.0, time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        for _ in range(4):
            torch.mm(a, b)
        dt = time.perf_counter() - t0
        best = max(best, 4 * 2.0 * n ** 3 / dt)
    return best


def load_tokens(path: str, need: int, vocab: int, seed: int) -> torch.Tensor:
    """need+1 tokens from a raw little-endian uint32 file, or random ones."""
    if path:
        t = np.fromfile(path, dtype="<u4")
        if t.size < need + 1:
            raise SystemExit("torch_bench: %s: %d tokens, need %d" % (path, t.size, need + 1))
        if int(t[: need + 1].max()) >= vocab:
            raise SystemExit("torch_bench: %s: token id >= vocab %d" % (path, vocab))
        return torch.from_numpy(t[: need + 1].astype(np.int64))
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (need + 1,), generator=g)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dim", type=int, default=256)
    ap.add_argument("--layers", type=int, default=6)
    ap.add_argument("--heads", type=int, default=16)
    ap.add_argument("--kv-heads", type=int, default=0, help="0 = heads")
    ap.add_argument("--vocab", type=int, default=258)
    ap.add_argument("--multiple-of", type=int, default=256)
    ap.add_argument("--ffn-mult", type=float, default=0.0, help="0 = none")
    ap.add_argument("--rope-theta", type=float, default=500000.0)
    ap.add_argument("--rope-scaling", type=float, default=8.0, help="0 = none")
    ap.add_argument("--tie", type=int, default=0)
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--warmup", type=int, default=2, help="steps left out of tokens/s")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--lr", type=float, default=8e-4)
    ap.add_argument("--tokens", default="", help="raw uint32 token file (default: random)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--peak-flops", type=float, default=0.0,
                    help="FLOP/s for MFU (0: no MFU in the output)")
    ap.add_argument("--probe", action="store_true", help="only measure GEMM FLOP/s")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    if a.probe:
        print(json.dumps({"peak_flops": gemm_probe(), "threads": a.threads}))
        return 0
    if a.steps <= a.warmup:
        raise SystemExit("torch_bench: --steps must exceed --warmup")

    c = LlamaConfig(dim=a.dim, n_layers=a.layers, n_heads=a.heads, n_kv_heads=a.kv_heads or None,
                    vocab_size=a.vocab, multiple_of=a.multiple_of,
                    ffn_dim_multiplier=a.ffn_mult or None, rope_theta=a.rope_theta,
                    rope_scaling_factor=a.rope_scaling, tie_embeddings=bool(a.tie))
    torch.manual_seed(a.seed)
    model = Llama(c)
    init_weights(model, a.seed)
    params = [p for p in model.parameters()]
    opt = torch.optim.AdamW(params, lr=a.lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)

    B, T = a.batch, a.seq_len
    stream = load_tokens(a.tokens, a.steps * B * T, a.vocab, a.seed)
    times, losses = [], []
    for s in range(a.steps):
        chunk = stream[s * B * T: (s + 1) * B * T + 1]
        x, y = chunk[:-1].view(B, T), chunk[1:].view(B, T)
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, max_norm=1.0)
        opt.step()
        losses.append(loss.item())
        times.append(time.perf_counter() - t0)
        print("torch_bench: step %d loss %.4f %.3f s" % (s + 1, losses[-1], times[-1]),
              file=sys.stderr)

    timed = times[a.warmup:]
    tps = B * T * len(timed) / sum(timed)
    fpt = flops_per_token(c, T)
    out = {
        "impl": "pytorch %s" % torch.__version__,
        "threads": a.threads, "batch": B, "seq_len": T, "steps": a.steps, "warmup": a.warmup,
        "params": sum(p.numel() for p in params), "flops_per_token": fpt,
        "tokens_per_s": tps,
        "step_time_s": times, "loss": losses,
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    if a.peak_flops > 0:
        out["peak_flops"] = a.peak_flops
        out["mfu"] = tps * fpt / a.peak_flops
    if not all(math.isfinite(l) for l in losses):
        raise SystemExit("torch_bench: non-finite loss")
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
