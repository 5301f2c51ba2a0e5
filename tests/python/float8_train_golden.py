#!/usr/bin/env python3
"""float8_train_golden.py OUTDIR - training goldens of torchao's float8 linear.

The independent PyTorch Llama (scripts/torch_llama.py) with its linears
swapped for torchao's Float8Linear (convert_to_float8_training,
Float8LinearConfig.from_recipe_name(R) with emulate=True; the output
filtered, as torchtitan's jobs do), in float32, for each recipe R
(tensorwise, rowwise, rowwise_with_gw_hp): logits, loss, every gradient and
10 AdamW steps on one batch, in the layout of tests/torch/gen_golden.py
(whose helpers it uses), so tests/unit/test_parity.c runs titan's float8
training against them (config.txt adds "float8_recipe R").

The goldens are torch's float32 float8 run (float8 casts are defined on
float32 values: there is no float64 float8 reference). titan's float8
linears are bitwise torchao's on equal inputs (tests/cli/float8_ref.sh);
between the two whole models the other ops differ at float32 rounding,
which can move a value across a float8 rounding boundary. As the
yardstick, each case prints how far the same run in plain float32 (no
float8) lies from the float8 goldens: the float8 effect titan must
reproduce. Exit 77 without torch/torchao.
"""
import copy
import dataclasses
import math
import os
import sys

try:
    import numpy as np
    import torch
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training
except ImportError as e:
    print("float8_train_golden: %s" % e, file=sys.stderr)
    sys.exit(77)

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(here, "..", "torch"))
sys.path.insert(0, os.path.join(here, "..", "..", "scripts"))
import gen_golden as gg  # noqa: E402
from torch_llama import Llama, LlamaConfig, hidden_dim, ordered_params  # noqa: E402

RECIPES = ("tensorwise", "rowwise", "rowwise_with_gw_hp")
# every linear a multiple of 16 (head_dim 16, hidden 192); vocab 300 is not,
# and "output" is filtered anyway
CONFIG = LlamaConfig(dim=64, n_layers=2, n_heads=4, n_kv_heads=2, vocab_size=300, multiple_of=64,
                     ffn_dim_multiplier=None, rope_scaling_factor=8.0, tie_embeddings=False)
B, T, SEED = 2, 32, 4321
TRAIN = gg.CONSTANT


def model_from(flat32):
    m = Llama(CONFIG)
    with torch.no_grad():
        off = 0
        for _, p in ordered_params(m):
            n = p.numel()
            p.copy_(torch.from_numpy(flat32[off:off + n]).view(p.shape))
            off += n
    return m


def float8(model, recipe):
    cfg = dataclasses.replace(Float8LinearConfig.from_recipe_name(recipe), emulate=True)
    return convert_to_float8_training(model, config=cfg, module_filter_fn=lambda mod, fqn: "output" not in fqn)


def write(d, name, recipe, flat32, tok, tgt, res, plain):
    logits, loss, grads, losses, norms, lrs, after = res
    c = CONFIG
    kv = [("dim", c.dim), ("n_layers", c.n_layers), ("n_heads", c.n_heads), ("n_kv_heads", c.kv_heads),
          ("vocab_size", c.vocab_size), ("multiple_of", c.multiple_of), ("ffn_dim_multiplier", 0),
          ("norm_eps", c.norm_eps), ("rope_theta", c.rope_theta), ("rope_scaling_factor", c.rope_scaling_factor),
          ("rope_low_freq_factor", c.rope_low_freq_factor), ("rope_high_freq_factor", c.rope_high_freq_factor),
          ("rope_original_context", c.rope_original_context), ("tie_embeddings", 0),
          ("hidden_dim", hidden_dim(c)), ("batch", B), ("seq_len", T), ("num_params", flat32.size),
          ("num_tensors", len(ordered_params(Llama(c)))), ("steps", gg.STEPS), ("lr", TRAIN["lr"]),
          ("beta1", gg.ADAMW["betas"][0]), ("beta2", gg.ADAMW["betas"][1]), ("eps", gg.ADAMW["eps"]),
          ("weight_decay", gg.ADAMW["weight_decay"]), ("max_norm", TRAIN["max_norm"]),
          ("training_steps", gg.STEPS), ("warmup_steps", TRAIN["warmup_steps"]),
          ("decay_ratio", TRAIN["decay_ratio"]), ("decay_type", TRAIN["decay_type"]),
          ("min_lr_factor", TRAIN["min_lr_factor"]), ("float8_recipe", recipe)]
    # the yardstick: how far the same run in plain float32 lies from these
    # goldens (test_parity holds titan to a fraction of it)
    w0 = flat32.astype(np.float64)
    kv += [("float8_plain_logits", gg.rel(plain[0], logits)), ("float8_plain_loss", gg.rel([plain[1].item()], [loss.item()])),
           ("float8_plain_grads", gg.rel(plain[2], grads)),
           ("float8_plain_losses", max(gg.rel([a], [b]) for a, b in zip(plain[3], losses))),
           ("float8_plain_norms", max(gg.rel([a], [b]) for a, b in zip(plain[4], norms))),
           ("float8_plain_updates", max(gg.rel(plain[6][s].numpy() - w0, after[s].numpy() - w0) for s in range(gg.STEPS)))]
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "config.txt"), "w") as f:
        for k, v in kv:
            f.write("%s %s\n" % (k, v if isinstance(v, str) else repr(v)))
    with open(os.path.join(d, "params.txt"), "w") as f:
        off = 0
        for n, p in ordered_params(Llama(c)):
            shp = list(p.shape) + [1] * (2 - p.ndim)
            f.write("%s %d %d %d %d %d\n" % (n, p.ndim, shp[0], shp[1], off, p.numel()))
            off += p.numel()
    flat32.tofile(os.path.join(d, "weights.f32"))
    tok.numpy().astype("<u4").tofile(os.path.join(d, "tokens.u32"))
    tgt.numpy().astype("<u4").tofile(os.path.join(d, "targets.u32"))
    logits.double().numpy().astype("<f8").tofile(os.path.join(d, "logits.f64"))
    np.array([loss.item()], "<f8").tofile(os.path.join(d, "loss.f64"))
    grads.double().numpy().astype("<f8").tofile(os.path.join(d, "grads.f64"))
    np.array(losses, "<f8").tofile(os.path.join(d, "losses.f64"))
    np.array(norms, "<f8").tofile(os.path.join(d, "grad_norms.f64"))
    np.array(lrs, "<f8").tofile(os.path.join(d, "lrs.f64"))
    after.double().numpy().astype("<f8").tofile(os.path.join(d, "params_steps.f64"))


def main():
    if len(sys.argv) != 2:
        sys.stderr.write("usage: float8_train_golden.py OUTDIR\n")
        return 2
    out = sys.argv[1]
    torch.set_num_threads(1)
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(SEED)
    m0 = Llama(CONFIG)
    gg.draw_weights(m0, SEED)
    flat32 = torch.cat([p.detach().reshape(-1) for _, p in ordered_params(m0)]).numpy().astype("<f4")
    g = torch.Generator().manual_seed(SEED + 1)
    tok = torch.randint(0, CONFIG.vocab_size, (B, T), generator=g)
    tgt = torch.randint(0, CONFIG.vocab_size, (B, T), generator=g)
    plain = gg.run(model_from(flat32), tok, tgt, TRAIN)
    names = []
    for recipe in RECIPES:
        m = float8(model_from(flat32), recipe)
        n_f8 = sum(type(x).__name__ == "Float8Linear" for x in m.modules())
        res = gg.run(m, tok, tgt, TRAIN)
        name = "F8_" + recipe
        write(os.path.join(out, name), name, recipe, flat32, tok, tgt, res, plain)
        names.append(name)
        w0 = flat32.astype(np.float64)
        upd = max(gg.rel(plain[6][s].numpy() - w0, res[6][s].numpy() - w0) for s in range(gg.STEPS))
        print("%s: %d Float8Linear; loss %.6f (ln V %.4f); plain fp32 vs float8: logits %.2e loss %.2e "
              "grads %.2e losses(max) %.2e grad norms(max) %.2e updates(max) %.2e"
              % (name, n_f8, res[1].item(), math.log(CONFIG.vocab_size), gg.rel(plain[0], res[0]),
                 gg.rel([plain[1].item()], [res[1].item()]), gg.rel(plain[2], res[2]),
                 max(gg.rel([a], [b]) for a, b in zip(plain[3], res[3])),
                 max(gg.rel([a], [b]) for a, b in zip(plain[4], res[4])), upd))
    with open(os.path.join(out, "cases.txt"), "w") as f:
        f.write("".join(n + "\n" for n in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
