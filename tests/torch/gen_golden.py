"""gen_golden.py OUTDIR - golden tensors for tests/unit/test_parity.c.

For each case (A: GQA, untied; B: MHA, ffn multiplier, tied embeddings; C: MQA,
clipping never triggers; D: GQA, warmup/stable/cosine-decay LR schedule) it draws
deterministic weights and tokens, then computes in float64 with the independent
PyTorch model (scripts/torch_llama.py): logits, mean cross-entropy, every
parameter gradient, and 10 AdamW steps on the same batch, with the case's
clipping (A, B, D: global norm 1, active at every step; C: max_norm far above
every norm, asserted) and learning rate: torch's LambdaLR driven by torchtitan's
linear_warmup_stable_decay factor (A, B, C: constant, D: all three phases).

OUTDIR/cases.txt lists the case directories. Each OUTDIR/<case>/ holds
    config.txt        "key value" lines: model config, batch, seq_len, optimizer
    params.txt        "name ndim d0 d1 offset numel", catalog order
    weights.f32       flat parameters, catalog order (float32 LE)
    tokens.u32        B*T inputs (uint32 LE)      targets.u32  B*T targets
    logits.f64        B*T*V                        loss.f64     1 value
    grads.f64         flat, catalog order          losses.f64   loss before each step
    grad_norms.f64    global grad norm (before clipping) at each step
    lrs.f64           learning rate of each step         params_steps.f64  steps*P
                      parameters after each step
All goldens are float64 (LE); the C model runs in float32 from the same float32
weights. The same computation in float32 PyTorch is printed as the yardstick
for the C test's tolerance.
"""
import math
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts"))
from torch_llama import Llama, LlamaConfig, hidden_dim, ordered_params  # noqa: E402

ADAMW = dict(lr=1e-3, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
STEPS = 10

# Training of a case: clipping max_norm (torch.nn.utils.clip_grad_norm_), peak
# lr, and torchtitan's [lr_scheduler] keys (training.steps = STEPS). warmup 0
# with decay_ratio 0 is a constant lr (every step stable).
CONSTANT = dict(max_norm=1.0, lr=1e-3, warmup_steps=0, decay_ratio=0.0, decay_type="linear",
                min_lr_factor=0.0)
UNCLIPPED = dict(CONSTANT, max_norm=1e3)
# 3 warmup, 2 stable, round(10 * 0.5) = 5 decay steps to 0.1 of the peak.
SCHEDULE = dict(CONSTANT, lr=3e-3, warmup_steps=3, decay_ratio=0.5, decay_type="cosine",
                min_lr_factor=0.1)

CASES = {
    "A": (LlamaConfig(dim=64, n_layers=2, n_heads=8, n_kv_heads=2, vocab_size=300, multiple_of=32,
                      ffn_dim_multiplier=None, rope_scaling_factor=8.0, tie_embeddings=False),
          2, 16, 1234, CONSTANT),
    "B": (LlamaConfig(dim=48, n_layers=3, n_heads=4, n_kv_heads=4, vocab_size=258, multiple_of=16,
                      ffn_dim_multiplier=1.3, rope_scaling_factor=8.0, tie_embeddings=True),
          3, 24, 5678, CONSTANT),
    "C": (LlamaConfig(dim=32, n_layers=2, n_heads=4, n_kv_heads=1, vocab_size=200, multiple_of=32,
                      ffn_dim_multiplier=None, rope_scaling_factor=8.0, tie_embeddings=False),
          2, 12, 2468, UNCLIPPED),
    "D": (LlamaConfig(dim=48, n_layers=2, n_heads=6, n_kv_heads=3, vocab_size=256, multiple_of=16,
                      ffn_dim_multiplier=None, rope_scaling_factor=8.0, tie_embeddings=False),
          2, 16, 1357, SCHEDULE),
}


def lr_lambda(tr: dict):
    """torchtitan's build_lr_schedulers / linear_warmup_stable_decay
    (torchtitan/components/lr_scheduler.py): the factor LambdaLR multiplies the
    peak lr by for the optimizer step after `current_step` completed steps."""
    warmup = int(tr["warmup_steps"])
    if tr["decay_ratio"] is not None:
        decay = round(STEPS * tr["decay_ratio"])
        if warmup + decay > STEPS:  # cut as torchtitan does (with a warning)
            decay = STEPS - warmup
    else:
        decay = STEPS - warmup
    stable = STEPS - warmup - decay
    lr_min, kind = tr["min_lr_factor"], tr["decay_type"]

    def factor(current_step: int) -> float:
        warmup_stable = warmup + stable
        current_step = min(current_step, warmup_stable + decay)
        if current_step < warmup:
            return float((current_step + 1) / (warmup + 1))
        if current_step < warmup_stable or decay == 0:
            return 1.0
        progress = float((current_step + 1) - warmup_stable) / (decay + 1)
        if kind == "linear":
            adj = 1 - progress
        elif kind == "sqrt":
            adj = 1 - math.sqrt(progress)
        else:
            assert kind == "cosine", kind
            adj = 0.5 * (1.0 + math.cos(math.pi * progress))
        return lr_min + (1 - lr_min) * adj
    return factor


def draw_weights(model: Llama, seed: int) -> None:
    """Weights in a regime that exercises every op: projections std 1/sqrt(fan_in)
    (softmax and SiLU far from linear; std 0.02 would leave attention nearly
    uniform), output projections half that, norms 1 + N(0, 0.1^2) so their
    gradients matter. Embeddings N(0,1); tied, they are the head too, so dim^-0.5."""
    g = torch.Generator().manual_seed(seed)
    c = model.config
    with torch.no_grad():
        for name, p in ordered_params(model):
            if name == "tok_embeddings.weight":
                std = c.dim ** -0.5 if c.tie_embeddings else 1.0
                p.copy_(torch.randn(p.shape, generator=g) * std)
            elif p.ndim == 1:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                std = p.shape[1] ** -0.5
                if name.endswith(("wo.weight", "w2.weight")):
                    std *= 0.5
                p.copy_(torch.randn(p.shape, generator=g) * std)


def run(model: Llama, tok, tgt, tr: dict):
    """logits, loss, flat grads, per-step losses, grad norms, lrs and flat
    parameters after each step (model is trained)."""
    named = ordered_params(model)
    params = [p for _, p in named]
    logits = model(tok).detach()
    model.zero_grad()
    _, loss = model(tok, tgt)
    loss.backward()
    grads = torch.cat([p.grad.reshape(-1) for p in params]).detach().clone()
    opt = torch.optim.AdamW(params, **dict(ADAMW, lr=tr["lr"]))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda(tr))
    losses, norms, lrs, after = [], [], [], []
    for _ in range(STEPS):
        opt.zero_grad()
        _, l = model(tok, tgt)
        l.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(params, max_norm=tr["max_norm"]).item())
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
        losses.append(l.item())
        after.append(torch.cat([p.detach().reshape(-1) for p in params]).clone())
    return logits, loss.detach(), grads, losses, norms, lrs, torch.stack(after)


def rel(a, b) -> float:
    a, b = np.asarray(a, np.float64).ravel(), np.asarray(b, np.float64).ravel()
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def write_case(outdir: str, name: str, c: LlamaConfig, B: int, T: int, seed: int,
               tr: dict) -> None:
    d = os.path.join(outdir, name)
    os.makedirs(d, exist_ok=True)
    torch.manual_seed(seed)
    model = Llama(c)
    draw_weights(model, seed)
    named = ordered_params(model)
    flat32 = torch.cat([p.detach().reshape(-1) for _, p in named]).numpy().astype("<f4")
    g = torch.Generator().manual_seed(seed + 1)
    tok = torch.randint(0, c.vocab_size, (B, T), generator=g)
    tgt = torch.randint(0, c.vocab_size, (B, T), generator=g)

    m64 = Llama(c).double()
    m32 = Llama(c)
    for m in (m64, m32):  # same float32 weights in both
        with torch.no_grad():
            off = 0
            for _, p in ordered_params(m):
                n = p.numel()
                p.copy_(torch.from_numpy(flat32[off:off + n].astype(np.float64)).view(p.shape))
                off += n
    ref = run(m64, tok, tgt, tr)
    f32 = run(m32, tok, tgt, tr)
    if tr is UNCLIPPED:  # the case must really train unclipped
        assert max(ref[4]) < tr["max_norm"], (name, ref[4])
    if tr is SCHEDULE:  # warmup, stable and decay all within the steps
        assert ref[5][0] < tr["lr"] and tr["lr"] in ref[5] and ref[5][-1] < tr["lr"], ref[5]

    with open(os.path.join(d, "config.txt"), "w") as f:
        kv = [("dim", c.dim), ("n_layers", c.n_layers), ("n_heads", c.n_heads),
              ("n_kv_heads", c.kv_heads), ("vocab_size", c.vocab_size),
              ("multiple_of", c.multiple_of), ("ffn_dim_multiplier", c.ffn_dim_multiplier or 0),
              ("norm_eps", c.norm_eps), ("rope_theta", c.rope_theta),
              ("rope_scaling_factor", c.rope_scaling_factor),
              ("rope_low_freq_factor", c.rope_low_freq_factor),
              ("rope_high_freq_factor", c.rope_high_freq_factor),
              ("rope_original_context", c.rope_original_context),
              ("tie_embeddings", int(c.tie_embeddings)), ("hidden_dim", hidden_dim(c)),
              ("batch", B), ("seq_len", T), ("num_params", flat32.size),
              ("num_tensors", len(named)), ("steps", STEPS), ("lr", tr["lr"]),
              ("beta1", ADAMW["betas"][0]), ("beta2", ADAMW["betas"][1]), ("eps", ADAMW["eps"]),
              ("weight_decay", ADAMW["weight_decay"]), ("max_norm", tr["max_norm"]),
              ("training_steps", STEPS), ("warmup_steps", tr["warmup_steps"]),
              ("decay_ratio", -1 if tr["decay_ratio"] is None else tr["decay_ratio"]),
              ("decay_type", tr["decay_type"]), ("min_lr_factor", tr["min_lr_factor"])]
        for k, v in kv:
            f.write("%s %s\n" % (k, v if isinstance(v, str) else repr(v)))
    with open(os.path.join(d, "params.txt"), "w") as f:
        off = 0
        for n, p in named:
            shp = list(p.shape) + [1] * (2 - p.ndim)
            f.write("%s %d %d %d %d %d\n" % (n, p.ndim, shp[0], shp[1], off, p.numel()))
            off += p.numel()

    logits, loss, grads, losses, norms, lrs, after = ref
    flat32.tofile(os.path.join(d, "weights.f32"))
    tok.numpy().astype("<u4").tofile(os.path.join(d, "tokens.u32"))
    tgt.numpy().astype("<u4").tofile(os.path.join(d, "targets.u32"))
    logits.numpy().astype("<f8").tofile(os.path.join(d, "logits.f64"))
    np.array([loss.item()], "<f8").tofile(os.path.join(d, "loss.f64"))
    grads.numpy().astype("<f8").tofile(os.path.join(d, "grads.f64"))
    np.array(losses, "<f8").tofile(os.path.join(d, "losses.f64"))
    np.array(norms, "<f8").tofile(os.path.join(d, "grad_norms.f64"))
    np.array(lrs, "<f8").tofile(os.path.join(d, "lrs.f64"))
    after.numpy().astype("<f8").tofile(os.path.join(d, "params_steps.f64"))

    # yardstick: torch float32 against the float64 goldens
    gmax = 0.0
    off = 0
    for _, p in named:
        n = p.numel()
        gmax = max(gmax, rel(f32[2][off:off + n].numpy(), grads[off:off + n].numpy()))
        off += n
    w0 = flat32.astype(np.float64)
    umax = max(rel(f32[6][s].numpy() - w0, after[s].numpy() - w0) for s in range(STEPS))
    print("%s: loss %.6f ln(V) %.4f params %d, grad norms %.3g..%.3g (max_norm %g), lr %.3g..%.3g; "
          "torch fp32 vs fp64: logits %.2e loss %.2e grads(max) %.2e losses(max) %.2e "
          "updates(max) %.2e"
          % (name, loss.item(), math.log(c.vocab_size), flat32.size, min(norms), max(norms),
             tr["max_norm"], min(lrs), max(lrs),
             rel(f32[0].numpy(), logits.numpy()), rel([f32[1].item()], [loss.item()]), gmax,
             max(rel([a], [b]) for a, b in zip(f32[3], losses)), umax))


def main() -> int:
    if len(sys.argv) != 2:
        sys.stderr.write("usage: gen_golden.py OUTDIR\n")
        return 2
    outdir = sys.argv[1]
    torch.set_num_threads(1)  # keep it reproducible and off the shared cores
    os.makedirs(outdir, exist_ok=True)
    for name, (c, B, T, seed, tr) in CASES.items():
        write_case(outdir, name, c, B, T, seed, tr)
    with open(os.path.join(outdir, "cases.txt"), "w") as f:
        f.write("".join(n + "\n" for n in CASES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
