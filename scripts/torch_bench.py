"""torch_bench.py - the PyTorch side of scripts/bench.sh: trains the reference
Llama 3 (scripts/torch_llama.py's modules and parameters) on the CPU in fp32
and prints one JSON object on stdout: step times, tokens/s (median step after
the warmup steps), peak RSS, first-step (compile) time.

    build/venv/bin/python3 scripts/torch_bench.py --threads 2 --seq-len 2048 --mode eager
    build/venv/bin/python3 scripts/torch_bench.py --threads 2 --seq-len 2048 --mode compile
    build/venv/bin/python3 scripts/torch_bench.py --probe --threads 2   # GEMM peak FLOP/s
    build/venv/bin/python3 scripts/torch_bench.py --check   # bench model = torch_llama, loss and grads

The step is what titan-train's step is: forward, mean cross-entropy, backward,
global-norm clipping to 1, AdamW (0.9, 0.95, eps 1e-8, weight decay 0.1;
fused=True where torch has it on the CPU), all in fp32.

Modes:
  eager    attention through F.scaled_dot_product_attention(is_causal=True)
           (the CPU's fused flash-attention kernel), RoPE tables made once
  compile  the same model, forward + loss through torch.compile (inductor,
           C++/OpenMP kernels built with g++); its backward is compiled with it
           (AOTAutograd); the optimizer step stays eager (fused AdamW)
  naive    torch_llama's own attention: softmax(QK^T/sqrt(hd) + mask) V, the
           T x T scores stored (what torch 1.13 could do)

If a mode cannot run here (no SDPA, no torch.compile, or the compile fails),
the JSON object has "failed": the reason, it is printed on stderr, and the
exit status is 77.
"""
import argparse
import json
import math
import os
import resource
import statistics
import sys
import time
import traceback

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import torch_llama as tl  # noqa: E402


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


# ------------------------------------------------------------------ the model

def rope_real(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """torch_llama.apply_rotary_emb written with real numbers: interleaved pairs
    (x0, x1) rotated by the same fp32 angles (inductor has no complex kernels)."""
    xf = x.float().reshape(*x.shape[:-1], -1, 2)
    x0, x1 = xf[..., 0], xf[..., 1]
    return torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1).flatten(3).type_as(x)


class SdpaAttention(tl.Attention):
    """torch_llama.Attention's parameters, SDPA forward (causal, no mask tensor)."""

    def forward(self, x, rope, mask=None):
        B, T, _ = x.shape
        cos, sin = rope
        q = rope_real(self.wq(x).view(B, T, self.nh, self.hd), cos, sin)
        k = rope_real(self.wk(x).view(B, T, self.nkv, self.hd), cos, sin)
        v = self.wv(x).view(B, T, self.nkv, self.hd)
        rep = self.nh // self.nkv
        if rep > 1:  # query head h reads kv head h // rep
            k = k.repeat_interleave(rep, dim=2)
            v = v.repeat_interleave(rep, dim=2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, H, T, hd]
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.wo(o.transpose(1, 2).reshape(B, T, self.nh * self.hd))


class BenchModel(nn.Module):
    """torch_llama.Llama (same parameters, same init) with the rotary tables and
    the mask made once; forward(tokens, targets) -> mean cross-entropy."""

    def __init__(self, c: tl.LlamaConfig, T: int, sdpa: bool, seed: int):
        super().__init__()
        self.llama = tl.Llama(c)
        tl.init_weights(self.llama, seed)
        self.sdpa = sdpa
        if sdpa:
            for layer in self.llama.layers:
                layer.attention.__class__ = SdpaAttention
            angles = tl.rope_angles(c, T)  # fp32, with the Llama 3.1 scaling
            self.register_buffer("cos", angles.cos()[:, None, :], persistent=False)  # [T, 1, hd/2]
            self.register_buffer("sin", angles.sin()[:, None, :], persistent=False)
        else:
            self.register_buffer("freqs_cis", tl.precompute_freqs_cis(c, T), persistent=False)
            self.register_buffer("mask", torch.full((T, T), float("-inf")).triu(1),
                                 persistent=False)

    def forward(self, tokens, targets):
        m = self.llama
        B, T = tokens.shape
        h = m.tok_embeddings(tokens)
        for layer in m.layers:
            if self.sdpa:
                h = layer(h, (self.cos, self.sin), None)
            else:
                h = layer(h, self.freqs_cis, self.mask)
        logits = m.output(m.norm(h))
        return F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))


def make_adamw(params, lr):
    kw = dict(lr=lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    try:
        return torch.optim.AdamW(params, fused=True, **kw), "torch.optim.AdamW(fused=True)"
    except (TypeError, RuntimeError, ValueError) as e:
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        return torch.optim.AdamW(params, **kw), "torch.optim.AdamW (fused: %s)" % why


def check() -> int:
    """The benchmark's SDPA model against torch_llama's reference forward:
    loss and every gradient, fp32, MHA and GQA, untied and tied."""
    worst = 0.0
    for kv, tie in ((0, 0), (2, 1)):
        c = tl.LlamaConfig(dim=64, n_layers=2, n_heads=8, n_kv_heads=kv or None, vocab_size=300,
                           multiple_of=32, rope_scaling_factor=8.0, tie_embeddings=bool(tie))
        T = 48
        m = BenchModel(c, T, sdpa=True, seed=0)
        g = torch.Generator().manual_seed(1)
        tok = torch.randint(0, c.vocab_size, (2, T + 1), generator=g)
        x, y = tok[:, :-1], tok[:, 1:]
        loss = m(x, y)
        loss.backward()
        got = {n: p.grad.clone() for n, p in m.llama.named_parameters()}
        m.zero_grad(set_to_none=True)
        for layer in m.llama.layers:  # back to torch_llama's own attention
            layer.attention.__class__ = tl.Attention
        _, ref = m.llama(x, y)
        ref.backward()
        err = abs(loss.item() - ref.item()) / abs(ref.item())
        for n, p in m.llama.named_parameters():
            err = max(err, ((got[n] - p.grad).norm() / p.grad.norm().clamp_min(1e-30)).item())
        worst = max(worst, err)
        print("check: SDPA model vs torch_llama, kv heads %d, tie %d: max relative error %.3g"
              % (c.kv_heads, tie, err))
    if not worst < 1e-4:
        print("check: FAILED (tolerance 1e-4)")
        return 1
    print("check: ok (torch %s)" % torch.__version__)
    return 0


# ------------------------------------------------------------------ the run

def first_line(e: BaseException) -> str:
    lines = [l for l in str(e).strip().splitlines() if l.strip()]
    return "%s: %s" % (type(e).__name__, lines[0] if lines else "")


def bench(a) -> dict:
    c = tl.LlamaConfig(dim=a.dim, n_layers=a.layers, n_heads=a.heads, n_kv_heads=a.kv_heads or None,
                       vocab_size=a.vocab, multiple_of=a.multiple_of,
                       ffn_dim_multiplier=a.ffn_mult or None, rope_theta=a.rope_theta,
                       rope_scaling_factor=a.rope_scaling, tie_embeddings=bool(a.tie))
    B, T = a.batch, a.seq_len
    rss_import = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # torch's libraries
    out = {"impl": "pytorch %s %s" % (torch.__version__, a.mode), "mode": a.mode,
           "torch_version": torch.__version__, "threads": torch.get_num_threads(),
           "batch": B, "seq_len": T, "steps": a.steps, "warmup": a.warmup,
           "flops_per_token": tl.flops_per_token(c, T), "rss_after_import_bytes": rss_import}

    def fail(why):
        out["failed"] = why
        print("torch_bench: %s: cannot run here: %s" % (a.mode, why), file=sys.stderr)
        return out

    sdpa = a.mode in ("eager", "compile")
    if sdpa and not hasattr(F, "scaled_dot_product_attention"):
        return fail("torch %s has no F.scaled_dot_product_attention" % torch.__version__)
    if a.mode == "compile" and not hasattr(torch, "compile"):
        return fail("torch %s has no torch.compile" % torch.__version__)

    torch.manual_seed(a.seed)
    model = BenchModel(c, T, sdpa, a.seed)
    params = list(model.parameters())  # the tied head is listed once
    opt, opt_name = make_adamw(params, a.lr)
    out["attention"] = ("F.scaled_dot_product_attention(is_causal=True)" if sdpa else
                        "softmax(QK^T/sqrt(hd) + mask) V (torch_llama.Attention)")
    out["optimizer"] = opt_name
    out["compile"] = "none"
    fwd = model
    if a.mode == "compile":
        fwd = torch.compile(model)
        out["compile"] = "torch.compile(model) (inductor, forward + loss + its backward)"
    out["params"] = sum(p.numel() for p in params)

    stream = load_tokens(a.tokens, a.steps * B * T, a.vocab, a.seed)
    times, losses = [], []
    for s in range(a.steps):
        chunk = stream[s * B * T: (s + 1) * B * T + 1]
        x, y = chunk[:-1].view(B, T), chunk[1:].view(B, T)
        t0 = time.perf_counter()
        try:
            opt.zero_grad(set_to_none=True)
            loss = fwd(x, y)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, max_norm=1.0)
            opt.step()
            lv = loss.item()
        except Exception as e:  # noqa: BLE001 - a mode that cannot run says why
            if a.mode == "compile" and s == 0:
                if a.verbose:
                    traceback.print_exc()
                return fail("torch.compile on the CPU failed: %s" % first_line(e))
            raise
        times.append(time.perf_counter() - t0)
        losses.append(lv)
        print("torch_bench: %s step %d loss %.4f %.3f s" % (a.mode, s + 1, lv, times[-1]),
              file=sys.stderr, flush=True)
        if not math.isfinite(lv):
            raise SystemExit("torch_bench: non-finite loss at step %d" % (s + 1))

    timed = times[a.warmup:]
    med = statistics.median(timed)
    out.update(step_time_s=times, loss=losses, median_step_s=med, first_step_s=times[0],
               tokens_per_s=B * T / med, tokens_per_s_mean=B * T * len(timed) / sum(timed),
               peak_rss_bytes=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024)
    if a.peak_flops > 0:
        out["peak_flops"] = a.peak_flops
        out["mfu"] = out["tokens_per_s"] * out["flops_per_token"] / a.peak_flops
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=("eager", "compile", "naive"), default="eager")
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
    ap.add_argument("--check", action="store_true",
                    help="the SDPA model against torch_llama's forward (loss, gradients)")
    ap.add_argument("--verbose", action="store_true", help="a failed compile's whole traceback")
    a = ap.parse_args()

    torch.set_num_threads(a.threads)
    if a.probe:
        print(json.dumps({"peak_flops": gemm_probe(), "threads": a.threads,
                          "torch_version": torch.__version__}))
        return 0
    if a.check:
        return check()
    if a.steps <= a.warmup:
        raise SystemExit("torch_bench: --steps must exceed --warmup")
    out = bench(a)
    print(json.dumps(out))
    return 77 if "failed" in out else 0


if __name__ == "__main__":
    sys.exit(main())
