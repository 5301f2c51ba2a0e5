#!/usr/bin/env python3
"""Float8 training reference: torchao 0.17's float8 linear, emulated on the CPU.

titan's float8 training is meant to match torchao's float8 training recipes
(torchao.float8, Float8LinearConfig.from_recipe_name):

  tensorwise          one scale per tensor; input and weight e4m3, grad_output e5m2
  rowwise             one scale per row along each GEMM's inner dimension, all
                      e4m3, scales rounded down to powers of two
  rowwise_with_gw_hp  rowwise for output, grad_input's weight tensorwise,
                      grad_weight = grad_output^T @ input in high precision

This script
  (a) implements those semantics from scratch: numpy for amax, scale, the
      saturating round-to-nearest-even cast to e4m3fn / e5m2 (bit level) and
      dequantization; the three GEMMs of a linear's forward and backward
      (out = x w^T, grad_in = go w, grad_w = go^T x) in fp32 over the
      dequantized operands (torch.mm in the same memory layouts as torchao,
      so results can be compared bit for bit; a float64 product bounds the
      summation error a C GEMM may add);
  (b) compares it with torchao's Float8Linear (Float8LinearConfig(emulate=True))
      for each recipe, in fp32 and in bf16 (the weights and activations of
      mixed_precision_param = "bfloat16"): the fp8 bytes and scales of every
      cast, out / grad_in / grad_w of one linear, and the output and every
      gradient of a Llama SwiGLU FFN; and measures the float8 error against
      the high-precision linear;
  (c) with --write DIR, writes golden files for a C test: DIR/index.json and
      raw little-endian float32 (.f32) / fp8 byte (.u8) files, row-major.

Output: one "RESULT NAME ok|FAIL detail" line per check (fp8-cast, then one
per recipe, then golden with --write); tests/cli/float8_ref.sh turns them into
TAP. Exit 0 when all match, 1 on a mismatch, 77 when torch/torchao are missing
(scripts/pyenv.sh makes build/venv).

Semantics (torchao 0.17.0, torchao/float8/):
  amax    float8_utils.tensor_to_amax: max |x| over the tensor (tensorwise) or
          over one dim, keepdim (axiswise), in the tensor's own dtype (exact).
  scale   float8_utils.amax_to_scale: fp32( float64(fmax) / max(float64(amax),
          EPS=1e-12) ); fmax = torch.finfo: e4m3fn 448, e5m2 57344.
          round_scales_to_power_of_2 (rowwise recipes, every cast of the
          linear incl. the tensorwise weight cast for grad_input):
          float8_utils._round_scale_down_to_power_of_2 = exp2(floor(log2(s)))
          in fp32; log2 is rounded to fp32 first, so s within ~1-8 ulps below
          2^k gives 2^k, not 2^(k-1) (frexp would give 2^(k-1)). glibc's
          log2f gives the same as torch on all such values (checked here).
  cast    float8_training_tensor._ToFloat8ConstrFunc.forward:
          q = to_fp8_saturated(fp32(x) * scale): the product rounded to fp32,
          clamped to +-fmax (float8_utils.to_fp8_saturated), then cast
          round-to-nearest-even to e4m3fn / e5m2 (subnormals kept).
  GEMM    float8_ops.float8_mm with emulate: mm(fp32(qa) / scale_a,
          fp32(qb) / scale_b) in fp32 (division, not multiplication by the
          reciprocal), then cast to the input dtype (fp32 or bf16).
          A DISABLED cast (rowwise_with_gw_hp's grad_weight) is a plain
          torch.mm in the input dtype.
  which   float8_linear.matmul_with_hp_or_float8_args: forward casts input
          (axiswise dim -1) and weight^T (dim 0); backward casts grad_output
          (dim -1) and weight^T (dim -1) for grad_input, grad_output (dim 0)
          and input (dim 0) for grad_weight: every rowwise scale is taken
          along the GEMM's inner (contraction) dimension.
"""
import argparse
import json
import os
import sys
import time

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torchao
    from torchao.float8 import Float8LinearConfig, convert_to_float8_training
    from torchao.float8.config import ScalingGranularity, ScalingType
    from torchao.float8.float8_scaling_utils import hp_tensor_to_float8_dynamic
    from torchao.float8.float8_training_tensor import LinearMMConfig, ScaledMMConfig
except ImportError as e:  # not the pinned environment
    print("float8_reference: %s (scripts/pyenv.sh makes build/venv)" % e, file=sys.stderr)
    sys.exit(77)

RECIPES = ("tensorwise", "rowwise", "rowwise_with_gw_hp")

# The float8 formats (OCP FP8: e4m3fn has no infinity, e5m2 is IEEE-like).
FMT = {
    "e4m3": dict(torch=torch.float8_e4m3fn, mbits=3, bias=7, max=448.0),
    "e5m2": dict(torch=torch.float8_e5m2, mbits=2, bias=15, max=57344.0),
}
EPS = 1e-12

# The six casts of a linear, named by GEMM, in titan's orientation:
# x (M,K), w (N,K), go (M,N). "axis" is the dim reduced for a rowwise amax:
# always the GEMM's inner dimension (K for out, N for grad_in, M for grad_w).
#   out     = x_out  @ w_out^T      (M,N)
#   grad_in = go_gi  @ w_gi         (M,K)
#   grad_w  = go_gw^T @ x_gw        (N,K)
CASTS = {  # name: (operand, axis reduced when rowwise)
    "x_out": ("x", 1), "w_out": ("w", 1),
    "go_gi": ("go", 1), "w_gi": ("w", 0),
    "go_gw": ("go", 0), "x_gw": ("x", 0),
}
# The recipes as written down from torchao's config.py (from_recipe_name),
# independently of it; check_config compares the two.
#   cast -> (format, "tensor" | "row") or None (high precision)
SPEC = {
    "tensorwise": dict(pow2=False, casts=dict(
        x_out=("e4m3", "tensor"), w_out=("e4m3", "tensor"),
        go_gi=("e5m2", "tensor"), w_gi=("e4m3", "tensor"),
        go_gw=("e5m2", "tensor"), x_gw=("e4m3", "tensor"))),
    "rowwise": dict(pow2=True, casts=dict(
        x_out=("e4m3", "row"), w_out=("e4m3", "row"),
        go_gi=("e4m3", "row"), w_gi=("e4m3", "row"),
        go_gw=("e4m3", "row"), x_gw=("e4m3", "row"))),
    "rowwise_with_gw_hp": dict(pow2=True, casts=dict(
        x_out=("e4m3", "row"), w_out=("e4m3", "row"),
        go_gi=("e4m3", "row"), w_gi=("e4m3", "tensor"),
        go_gw=None, x_gw=None)),
}
# torchao's config field for each cast, and the tensor it casts in torchao's
# orientation (weight enters as weight.t(), (K,N)) with its axiswise_dim.
TORCHAO_CAST = {
    "x_out": ("cast_config_input", "x", -1),
    "w_out": ("cast_config_weight", "wt", 0),
    "go_gi": ("cast_config_grad_output", "go", -1),
    "w_gi": ("cast_config_weight_for_grad_input", "wt", -1),
    "go_gw": ("cast_config_grad_output_for_grad_weight", "go", 0),
    "x_gw": ("cast_config_input_for_grad_weight", "x", 0),
}


# ---------------------------------------------------------------- (a) numpy

def fp8_round(v, fmt):
    """fp32 array -> the nearest e4m3fn / e5m2 value (ties to even), as
    float32, after clamping to +-max (to_fp8_saturated). Subnormals kept."""
    f = FMT[fmt]
    a = np.minimum(np.abs(v.astype(np.float64)), f["max"])
    _, ex = np.frexp(a)                        # a = m 2^ex, m in [0.5, 1)
    e = np.maximum(ex - 1, 1 - f["bias"])      # binade, subnormals share the lowest
    q = np.ldexp(1.0, e - f["mbits"])          # spacing of the grid there
    r = np.round(a / q) * q                    # exact quotient; half to even
    return np.copysign(r, v).astype(np.float32)


def fp8_bits(r, fmt):
    """fp8 grid values (from fp8_round) -> their byte encodings."""
    f = FMT[fmt]
    a = np.abs(r.astype(np.float64))
    _, ex = np.frexp(a)
    e = ex - 1
    normal = a >= 2.0 ** (1 - f["bias"])
    expf = np.where(normal, e + f["bias"], 0)
    frac = np.where(normal, a / np.ldexp(1.0, e) - 1.0, a / 2.0 ** (1 - f["bias"]))
    mant = np.rint(frac * 2 ** f["mbits"]).astype(np.int64)
    code = (np.signbit(r).astype(np.int64) << 7) | (expf.astype(np.int64) << f["mbits"]) | mant
    return code.astype(np.uint8)


def pow2_floor(s):
    """exp2(floor(fl32(log2(s)))): torchao's _round_scale_down_to_power_of_2,
    log2 rounded to fp32 before the floor (as torch.log2 / glibc log2f)."""
    l = np.log2(s.astype(np.float64)).astype(np.float32)
    return np.ldexp(np.float32(1.0), np.floor(l).astype(np.int64)).astype(np.float32)


def amax_to_scale(amax, fmt, pow2):
    s = (FMT[fmt]["max"] / np.maximum(amax.astype(np.float64), EPS)).astype(np.float32)
    return pow2_floor(s) if pow2 else s


def quantize(t, fmt, axis, pow2):
    """t: fp32 array holding the (fp32 or bf16) values. axis None: one scale.
    Returns (scale fp32, fp8 grid values fp32, bytes uint8, dequantized fp32)."""
    a = np.abs(t)
    amax = a.max() if axis is None else a.max(axis=axis, keepdims=True)
    s = amax_to_scale(np.asarray(amax), fmt, pow2)
    v = (t.astype(np.float32) * s).astype(np.float32)     # fp32 product
    r = fp8_round(v, fmt)
    dq = (r / s).astype(np.float32)                        # fp32 division
    return s, r, fp8_bits(r, fmt), dq


def t2n(t):
    return t.detach().float().contiguous().numpy()


def ref_casts(recipe, x, w, go):
    """Every cast of a recipe. x (M,K), w (N,K), go (M,N) fp32 arrays.
    Returns {cast: None | dict(s, bits, dq, fmt, gran)}."""
    spec = SPEC[recipe]
    ops = dict(x=x, w=w, go=go)
    out = {}
    for name, (op, axis) in CASTS.items():
        c = spec["casts"][name]
        if c is None:
            out[name] = None
            continue
        fmt, gran = c
        s, r, bits, dq = quantize(ops[op], fmt, axis if gran == "row" else None, spec["pow2"])
        out[name] = dict(s=np.asarray(s, np.float32), bits=bits, dq=dq, fmt=fmt, gran=gran,
                         axis=axis if gran == "row" else None)
    return out


def ref_linear(recipe, x, w, go):
    """The three GEMMs of a float8 linear: x (M,K), w (N,K), go (M,N) torch
    tensors (fp32 or bf16). Returns (out, grad_in, grad_w, casts) in x's
    dtype. The fp32 products use torch.mm in torchao's layouts (weight
    operands transposed views), so they can match bit for bit."""
    dt = x.dtype
    c = ref_casts(recipe, t2n(x), t2n(w), t2n(go))
    T = lambda name: torch.from_numpy(c[name]["dq"])
    out = torch.mm(T("x_out"), T("w_out").t()).to(dt)
    grad_in = torch.mm(T("go_gi"), T("w_gi")).to(dt)
    if c["go_gw"] is None:                      # high precision, input dtype
        grad_w = torch.mm(go.t(), x)
    else:
        grad_w = torch.mm(T("go_gw").t(), T("x_gw")).to(dt)
    return out, grad_in, grad_w, c


class RefLinearFn(torch.autograd.Function):
    """y = x w^T with ref_linear's float8 GEMMs, for any leading dims of x."""

    @staticmethod
    def forward(ctx, x, w, recipe):
        ctx.save_for_backward(x, w)
        ctx.recipe = recipe
        x2 = x.reshape(-1, x.shape[-1])
        spec, pow2 = SPEC[recipe]["casts"], SPEC[recipe]["pow2"]
        xq = quantize(t2n(x2), spec["x_out"][0], 1 if spec["x_out"][1] == "row" else None, pow2)[3]
        wq = quantize(t2n(w), spec["w_out"][0], 1 if spec["w_out"][1] == "row" else None, pow2)[3]
        y = torch.mm(torch.from_numpy(xq), torch.from_numpy(wq).t()).to(x.dtype)
        return y.reshape(*x.shape[:-1], w.shape[0])

    @staticmethod
    def backward(ctx, gy):
        x, w = ctx.saved_tensors
        x2 = x.reshape(-1, x.shape[-1])
        g2 = gy.reshape(-1, gy.shape[-1])
        _, gi, gw, _ = ref_linear(ctx.recipe, x2, w, g2)
        return gi.reshape(x.shape), gw, None


# ------------------------------------------------------------ (b) torchao

def torchao_config(recipe, emulate=True):
    import dataclasses
    return dataclasses.replace(Float8LinearConfig.from_recipe_name(recipe), emulate=emulate)


def check_config(recipe):
    """SPEC (written from the docs / source) vs torchao's own config."""
    cfg = torchao_config(recipe)
    bad = []
    for name, (field, _, _) in TORCHAO_CAST.items():
        cc = getattr(cfg, field)
        want = SPEC[recipe]["casts"][name]
        if cc.scaling_type is ScalingType.DISABLED:
            got = None
        else:
            fmt = {torch.float8_e4m3fn: "e4m3", torch.float8_e5m2: "e5m2"}[cc.target_dtype]
            got = (fmt, "row" if cc.scaling_granularity is ScalingGranularity.AXISWISE else "tensor")
        if got != want:
            bad.append("%s: torchao %s, spec %s" % (name, got, want))
    if cfg.round_scales_to_power_of_2 != SPEC[recipe]["pow2"]:
        bad.append("round_scales_to_power_of_2 %s" % cfg.round_scales_to_power_of_2)
    return bad


def torchao_casts(recipe, x, w, go):
    """torchao's own casts (hp_tensor_to_float8_dynamic) of the six operands,
    turned to titan's orientation: {cast: None | (scale, bytes)}."""
    cfg = torchao_config(recipe)
    mm = LinearMMConfig(*(ScaledMMConfig(True, False, False, False),) * 3)
    src = dict(x=x, wt=w.t(), go=go)
    out = {}
    for name, (field, op, dim) in TORCHAO_CAST.items():
        cc = getattr(cfg, field)
        if cc.scaling_type is ScalingType.DISABLED:
            out[name] = None
            continue
        row = cc.scaling_granularity is ScalingGranularity.AXISWISE
        f8 = hp_tensor_to_float8_dynamic(
            src[op], cc.target_dtype, mm, scaling_granularity=cc.scaling_granularity,
            axiswise_dim=dim if row else None,
            round_scales_to_power_of_2=cfg.round_scales_to_power_of_2)
        data, scale = f8._data.view(torch.uint8), f8._scale
        if op == "wt":
            data = data.t()
            scale = scale.t() if scale.dim() == 2 else scale
        out[name] = (scale.float().contiguous().numpy(), data.contiguous().numpy())
    return out


def torchao_linear(recipe, x, w, go, emulate=True):
    """torchao's Float8Linear on x (B,S,K): returns out, grad_in, grad_w (2-D)."""
    lin = nn.Linear(w.shape[1], w.shape[0], bias=False, dtype=w.dtype)
    with torch.no_grad():
        lin.weight.copy_(w)
    lin = convert_to_float8_training(lin, config=torchao_config(recipe, emulate))
    xi = x.clone().requires_grad_(True)
    y = lin(xi)
    y.backward(go.reshape(y.shape))
    return (y.detach().reshape(-1, w.shape[0]), xi.grad.reshape(-1, w.shape[1]),
            lin.weight.grad.detach())


class FFN(nn.Module):
    """Llama's SwiGLU feed-forward: w2(silu(w1 x) * w3 x)."""

    def __init__(self, dim, hidden, dtype):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden, bias=False, dtype=dtype)
        self.w2 = nn.Linear(hidden, dim, bias=False, dtype=dtype)
        self.w3 = nn.Linear(dim, hidden, bias=False, dtype=dtype)

    def forward(self, x, recipe=None):
        if recipe is None:
            return self.w2(F.silu(self.w1(x)) * self.w3(x))
        L = lambda m, t: RefLinearFn.apply(t, m.weight, recipe)
        return L(self.w2, F.silu(L(self.w1, x)) * L(self.w3, x))


def ffn_compare(recipe, dtype, seed):
    """torchao-converted FFN vs the reference FFN: output and every gradient.
    Returns the names of those that differ (bitwise)."""
    import copy
    torch.manual_seed(seed)
    m = FFN(64, 176, dtype)
    x = torch.randn(2, 16, 64, dtype=dtype)
    gy = (torch.randn(2, 16, 64) * 1e-2).to(dtype)
    m8 = convert_to_float8_training(copy.deepcopy(m), config=torchao_config(recipe))
    res = {}
    for tag, fn, mod in (("torchao", lambda t: m8(t), m8), ("ref", lambda t: m(t, recipe), m)):
        xi = x.clone().requires_grad_(True)
        y = fn(xi)
        y.backward(gy)
        res[tag] = dict(y=y.detach(), x=xi.grad, w1=mod.w1.weight.grad, w2=mod.w2.weight.grad,
                        w3=mod.w3.weight.grad)
    return [k for k in res["ref"] if not torch.equal(res["ref"][k], res["torchao"][k])]


# ------------------------------------------------------------- the checks

def rel(a, b):
    a, b = a.double(), b.double()
    return float((a - b).norm() / b.norm())


def make_case(dtype, seed, M=32, K=64, N=48):
    """x (2,16,K), w (N,K), go (M,N), with a few edges: an outlier in x,
    row 0 of x whose amax nextafter(3.5, inf) gives the fp32 scale
    nextbelow(128), rounded to 128 by the power-of-two rounding (torch's
    fp32 log2 gives 7.0) where frexp would give 64; a zero row of go
    (amax 0: scale fmax/EPS)."""
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(M, K, generator=g)
    x[5, 7] = 20.0
    x[0] *= 3.0 / x[0].abs().max()
    x[0, 0] = float(np.nextafter(np.float32(3.5), np.float32(np.inf)))
    w = torch.randn(N, K, generator=g) * K ** -0.5
    go = torch.randn(M, N, generator=g) * 1e-2
    go[3] = 0.0
    return x.to(dtype).reshape(2, M // 2, K), w.to(dtype), go.to(dtype)


def check_fp8_casts():
    """The numpy cast against torch's .to(float8) on every fp8 value, the
    midpoints between neighbours (ties), one fp32 ulp either side of them, the
    saturation range and random values; pow2_floor against torch on the
    values just below powers of two; amax_to_scale against torchao's."""
    from torchao.float8.float8_utils import amax_to_scale as ao_scale
    bad = []
    rng = np.random.default_rng(1)
    for fmt, f in FMT.items():
        grid = torch.arange(256, dtype=torch.uint8).view(f["torch"]).float().numpy()
        grid = np.unique(grid[np.isfinite(grid)]).astype(np.float64)
        mids = (grid[1:] + grid[:-1]) / 2
        m32 = mids.astype(np.float32)
        vals = np.concatenate([
            grid, mids, np.nextafter(m32, np.float32(np.inf)), np.nextafter(m32, np.float32(-np.inf)),
            np.linspace(f["max"], 2 * f["max"], 101), -np.linspace(f["max"], 2 * f["max"], 101),
            rng.standard_normal(100000) * f["max"] / 8,
            rng.standard_normal(100000) * 2.0 ** (-f["bias"]),
            [0.0, -0.0, 1e-30, 3.4e38, -3.4e38]]).astype(np.float32)
        t = torch.from_numpy(vals).clamp(-f["max"], f["max"]).to(f["torch"])
        mine = fp8_round(vals, fmt)
        if not np.array_equal(t.float().numpy(), mine):
            bad.append("%s values: %d differ" % (fmt, int((t.float().numpy() != mine).sum())))
        if not np.array_equal(t.view(torch.uint8).numpy(), fp8_bits(mine, fmt)):
            bad.append("%s bytes differ" % fmt)
        amax = np.concatenate([[0.0, 1e-13, 1e-12, 448.0, 3.5000002], rng.uniform(1e-6, 1e6, 1000)]).astype(np.float32)
        for p2 in (False, True):
            ao = ao_scale(torch.from_numpy(amax), f["torch"], p2).numpy()
            if not np.array_equal(ao, amax_to_scale(amax, fmt, p2)):
                bad.append("%s amax_to_scale pow2=%s differs" % (fmt, p2))
    edge = []
    for k in range(-60, 61):
        v = np.float32(2.0 ** k)
        for _ in range(8):
            v = np.nextafter(v, np.float32(0))
            edge.append(v)
    edge = np.array(edge, np.float32)
    ao = torch.exp2(torch.floor(torch.log2(torch.from_numpy(edge)))).numpy()
    if not np.array_equal(ao, pow2_floor(edge)):
        bad.append("pow2 rounding differs on %d values below powers of two" % int((ao != pow2_floor(edge)).sum()))
    up = int((ao > np.exp2(np.floor(np.log2(edge.astype(np.float64))))).sum())
    return bad, "e4m3fn and e5m2 casts of %d values each bitwise, amax_to_scale bitwise, pow2 rounding on %d values " \
        "1-8 ulps below 2^k bitwise (%d of them round up to 2^k)" % (len(vals), len(edge), up)


def check_recipe(recipe, seed, golden):
    """Config, casts, linear fwd/bwd, FFN, in fp32 and bf16. Returns
    (problems, detail, per-dtype stats for the golden index)."""
    bad = ["config " + b for b in check_config(recipe)]
    stats = {}
    for dname, dtype in (("f32", torch.float32), ("bf16", torch.bfloat16)):
        x3, w, go = make_case(dtype, seed)
        x = x3.reshape(-1, x3.shape[-1])
        out, gi, gw, casts = ref_linear(recipe, x, w, go)
        # the casts: scales and fp8 bytes, bit for bit
        ao = torchao_casts(recipe, x, w, go)
        for name in CASTS:
            if (ao[name] is None) != (casts[name] is None):
                bad.append("%s %s: high precision in one only" % (dname, name))
            elif ao[name] is not None:
                s, b = ao[name]
                if not np.array_equal(s.reshape(-1), casts[name]["s"].reshape(-1)):
                    bad.append("%s %s: scales differ" % (dname, name))
                if not np.array_equal(b, casts[name]["bits"]):
                    bad.append("%s %s: %d fp8 bytes differ" % (dname, name, int((b != casts[name]["bits"]).sum())))
        # the linear, forward and backward
        t_out, t_gi, t_gw = torchao_linear(recipe, x3, w, go)
        for k, a, b in (("out", out, t_out), ("grad_in", gi, t_gi), ("grad_w", gw, t_gw)):
            if not torch.equal(a, b):
                bad.append("%s linear %s: max |diff| %.3g" % (dname, k, float((a.float() - b.float()).abs().max())))
        # summation error: the fp32 GEMMs vs float64 products of the same operands
        d = lambda n: torch.from_numpy(casts[n]["dq"]).double() if casts[n] else None
        e64 = dict(out=d("x_out") @ d("w_out").t(), grad_in=d("go_gi") @ d("w_gi"),
                   grad_w=(d("go_gw").t() @ d("x_gw")) if casts["go_gw"] else go.double().t() @ x.double())
        gemm = {k: float((v.double() - e64[k]).abs().max() / e64[k].abs().max())
                for k, v in (("out", out), ("grad_in", gi), ("grad_w", gw))}
        # float8 error: vs the exact linear of the same (fp32 or bf16) inputs
        xd, wd, god = x.double(), w.double(), go.double()
        exact = dict(out=xd @ wd.t(), grad_in=god @ wd, grad_w=god.t() @ xd)
        err = {k: rel(v, exact[k]) for k, v in (("out", out), ("grad_in", gi), ("grad_w", gw))}
        for k, v in err.items():
            if not v < 0.15:
                bad.append("%s %s: float8 error %.3g implausible" % (dname, k, v))
        # the SwiGLU FFN, torchao's module swap vs the reference autograd function
        for k in ffn_compare(recipe, dtype, seed + 1):
            bad.append("%s FFN %s differs" % (dname, k))
        stats[dname] = dict(gemm_vs_float64=gemm, float8_rel_error=err)
        if golden is not None:
            golden[(dname, recipe)] = dict(x=x, w=w, go=go, out=out, grad_in=gi, grad_w=gw, casts=casts)
    detail = "; ".join("%s: linear+FFN bitwise, fp8 error vs exact out %.2g grad_in %.2g grad_w %.2g" % (
        k, v["float8_rel_error"]["out"], v["float8_rel_error"]["grad_in"], v["float8_rel_error"]["grad_w"])
        for k, v in stats.items())
    return bad, detail, stats


def scaled_mm_info(seed):
    """Informational: torchao without emulation (torch._scaled_mm) on the CPU."""
    x3, w, go = make_case(torch.float32, seed)
    out = []
    for recipe in RECIPES:
        try:
            a = torchao_linear(recipe, x3, w, go, emulate=False)
            b = torchao_linear(recipe, x3, w, go, emulate=True)
            out.append("%s runs (max rel diff vs emulation %s)" % (recipe, ", ".join(
                "%s %.2g" % (k, float((p - q).abs().max() / q.abs().max()))
                for k, p, q in zip(("out", "grad_in", "grad_w"), a, b))))
        except Exception as e:  # noqa: BLE001 - reported, not a failure
            out.append("%s fails: %s" % (recipe, str(e).splitlines()[0]))
    return out


# ------------------------------------------------------------ (c) golden

def write_golden(d, golden, stats, seed):
    os.makedirs(d, exist_ok=True)
    files = {}

    def put(rel_path, arr, kind="f32"):
        arr = np.ascontiguousarray(arr)
        p = os.path.join(d, rel_path)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        (arr.astype("<f4") if kind == "f32" else arr.astype(np.uint8)).tofile(p)
        files[rel_path] = arr.size * (4 if kind == "f32" else 1)
        return dict(file=rel_path, shape=list(arr.shape), type="float32" if kind == "f32" else "fp8 bytes")

    cases = []
    for dname in ("f32", "bf16"):
        g0 = golden[(dname, RECIPES[0])]
        M, K = g0["x"].shape
        N = g0["w"].shape[0]
        case = dict(name=dname, dtype="float32" if dname == "f32" else "bfloat16 (values stored as float32)",
                    M=M, K=K, N=N,
                    inputs=dict(x=put("%s/x.f32" % dname, t2n(g0["x"])), w=put("%s/w.f32" % dname, t2n(g0["w"])),
                                grad_out=put("%s/grad_out.f32" % dname, t2n(g0["go"]))),
                    recipes={})
        for recipe in RECIPES:
            g = golden[(dname, recipe)]
            base = "%s/%s/" % (dname, recipe)
            r = dict(out=put(base + "out.f32", t2n(g["out"])), grad_in=put(base + "grad_in.f32", t2n(g["grad_in"])),
                     grad_w=put(base + "grad_w.f32", t2n(g["grad_w"])), casts={},
                     measured=stats[recipe][dname])
            for name, c in g["casts"].items():
                if c is None:
                    r["casts"][name] = dict(operand=CASTS[name][0], precision="high (no cast)")
                    continue
                r["casts"][name] = dict(
                    operand=CASTS[name][0], format="e4m3fn" if c["fmt"] == "e4m3" else "e5m2",
                    granularity="tensorwise" if c["gran"] == "tensor" else "rowwise",
                    reduced_axis=c["axis"],
                    scale=put(base + name + ".scale.f32", c["s"].reshape(
                        (1, 1) if c["gran"] == "tensor" else c["s"].shape)),
                    fp8=put(base + name + ".fp8.u8", c["bits"], "u8"))
            case["recipes"][recipe] = r
        cases.append(case)
    index = dict(
        what="torchao %s float8 training (Float8LinearConfig.from_recipe_name(R), emulate=True), torch %s, "
             "one linear y = x w^T: out = x w^T (M,N), grad_in = grad_out w (M,K), grad_w = grad_out^T x (N,K)"
             % (torchao.__version__, torch.__version__),
        made_by="tests/python/float8_reference.py --write (seed %d)" % seed,
        layout="raw little-endian, row-major; *.f32 float32, *.fp8.u8 the fp8 bytes (e4m3fn or e5m2 encoding) "
               "of the operand in the orientation of 'operand' (x (M,K), w (N,K), grad_out (M,N)); "
               "a rowwise scale has the operand's shape with reduced_axis of size 1, a tensorwise scale is (1,1)",
        casts="x_out, w_out: out's operands; go_gi, w_gi: grad_in's; go_gw, x_gw: grad_w's",
        semantics="amax = max|t| (over reduced_axis when rowwise); scale = fp32(fmax / max(amax, 1e-12)) in float64, "
                  "fmax 448 (e4m3fn) or 57344 (e5m2); rowwise recipes: scale = 2^floor(fp32(log2 scale)) (log2f); "
                  "fp8 = round-to-nearest-even(clamp(fp32(t * scale), -fmax, fmax)); dequantized = fp32(fp8 / scale); "
                  "product in fp32, rounded once to the case's dtype. rowwise_with_gw_hp: grad_w = grad_out^T x "
                  "in the case's dtype (no cast).",
        edges="x row 0: amax nextafter(3.5, inf) -> scale nextbelow(128) -> 128 by the pow2 rounding (frexp gives 64); "
              "grad_out row 3 zero (rowwise scale fmax/1e-12 -> 2^48 with pow2); x[5,7] = 20 (an outlier)",
        tolerance="fp8 bytes and scales: bitwise. out/grad_in/grad_w: f32 case, only the GEMM's summation order may "
                  "differ: |c - golden| <= 1e-5 * max|golden| (measured gemm_vs_float64 below); bf16 case: within "
                  "1 bf16 ulp of |golden| (a summation-order difference may flip the final rounding).",
        cases=cases)
    with open(os.path.join(d, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
    return len(files) + 1, sum(files.values())


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--write", metavar="DIR", help="also write golden files (index.json + raw data) into DIR")
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    t0 = time.time()
    failed = 0

    def result(name, bad, detail):
        nonlocal failed
        if bad:
            failed += 1
            print("RESULT %s FAIL %s" % (name, "; ".join(bad[:8])))
        else:
            print("RESULT %s ok %s" % (name, detail))
        sys.stdout.flush()

    print("float8_reference: torch %s, torchao %s, cpu %s" % (
        torch.__version__, torchao.__version__, torch.backends.cpu.get_cpu_capability()))
    bad, detail = check_fp8_casts()
    result("fp8-cast", bad, detail)
    golden = {} if args.write else None
    stats = {}
    for recipe in RECIPES:
        try:
            bad, detail, stats[recipe] = check_recipe(recipe, args.seed, golden)
        except Exception as e:  # a recipe that does not run on this CPU
            bad, detail = ["%s: %s" % (type(e).__name__, str(e).splitlines()[0])], ""
        result(recipe, bad, detail)
    for line in scaled_mm_info(args.seed):
        print("info: without emulate (torch._scaled_mm on the CPU): " + line)
    if args.write:
        if golden is not None and len(golden) == 2 * len(RECIPES):
            nfiles, nbytes = write_golden(args.write, golden, stats, args.seed)
            result("golden", [], "%d files, %d bytes in %s" % (nfiles, nbytes, args.write))
        else:
            result("golden", ["not written: a recipe failed"], "")
    print("float8_reference: %.1f s, %s" % (time.time() - t0, "all match" if not failed else "%d FAILED" % failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
