"""torch_llama.py - an independent Llama 3 in plain PyTorch (1.13 or 2.x), titan's reference.

Written from Meta's published model description, not from titan's C code, so the
two can check each other: RMSNorm with fp32 statistics, rotary embedding on
interleaved pairs viewed as complex numbers (with the Llama 3.1 frequency
scaling), grouped-query attention, SwiGLU feed-forward, mean cross-entropy.
Parameter names and their order are titan's catalog (see titan_llama_params).

The model runs in whatever dtype its parameters have: .double() gives the
float64 goldens the C tests compare against.

    build/venv/bin/python3 scripts/torch_llama.py  # self-checks (RoPE, loss ~ ln V)
"""
import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

import torch
import torch.nn as nn
import torch.nn.functional as F


@dataclass
class LlamaConfig:
    dim: int = 256
    n_layers: int = 6
    n_heads: int = 16
    n_kv_heads: Optional[int] = None  # None = n_heads
    vocab_size: int = 256
    multiple_of: int = 256
    ffn_dim_multiplier: Optional[float] = None
    norm_eps: float = 1e-5
    rope_theta: float = 500000.0
    rope_scaling_factor: float = 0.0  # 0 = no scaling
    rope_low_freq_factor: float = 1.0
    rope_high_freq_factor: float = 4.0
    rope_original_context: int = 8192
    tie_embeddings: bool = False

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads if self.n_kv_heads else self.n_heads

    @property
    def head_dim(self) -> int:
        return self.dim // self.n_heads


def hidden_dim(c: LlamaConfig) -> int:
    """Meta's FeedForward size: 2/3 of 4*dim, times the multiplier, rounded up."""
    h = int(2 * (4 * c.dim) / 3)
    if c.ffn_dim_multiplier:
        h = int(c.ffn_dim_multiplier * h)
    return c.multiple_of * ((h + c.multiple_of - 1) // c.multiple_of)


def scale_freqs(freqs: torch.Tensor, c: LlamaConfig) -> torch.Tensor:
    """Llama 3.1 frequency scaling, element by element in fp32 like the reference."""
    low_wavelen = c.rope_original_context / c.rope_low_freq_factor
    high_wavelen = c.rope_original_context / c.rope_high_freq_factor
    out = []
    for freq in freqs:
        wavelen = 2 * math.pi / freq
        if wavelen < high_wavelen:
            out.append(freq)
        elif wavelen > low_wavelen:
            out.append(freq / c.rope_scaling_factor)
        else:
            smooth = (c.rope_original_context / wavelen - c.rope_low_freq_factor) / (
                c.rope_high_freq_factor - c.rope_low_freq_factor)
            out.append((1 - smooth) * freq / c.rope_scaling_factor + smooth * freq)
    return torch.tensor(out, dtype=freqs.dtype)


def rope_angles(c: LlamaConfig, T: int) -> torch.Tensor:
    """angles[T, hd/2] in fp32, formed exactly as the reference forms them."""
    hd = c.head_dim
    freqs = 1.0 / (c.rope_theta ** (torch.arange(0, hd, 2)[: hd // 2].float() / hd))
    if c.rope_scaling_factor > 0:
        freqs = scale_freqs(freqs, c)
    t = torch.arange(T, dtype=torch.float32)
    return torch.outer(t, freqs).float()


def precompute_freqs_cis(c: LlamaConfig, T: int, dtype=torch.float32) -> torch.Tensor:
    """Unit complex numbers e^{i angle}; the fp32 angles are widened first for
    float64 models, so cos/sin are evaluated in the model's precision."""
    angles = rope_angles(c, T).to(dtype)
    return torch.polar(torch.ones_like(angles), angles)


def apply_rotary_emb(x: torch.Tensor, freqs_cis: torch.Tensor) -> torch.Tensor:
    """x[B, T, H, hd]: pairs (x[2i], x[2i+1]) rotated as complex numbers."""
    xc = torch.view_as_complex(x.reshape(*x.shape[:-1], -1, 2))
    fc = freqs_cis.view(1, x.shape[1], 1, xc.shape[-1])
    return torch.view_as_real(xc * fc).flatten(3).type_as(x)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # statistics at least in fp32 (float64 models keep float64)
        xf = x.float() if x.dtype != torch.float64 else x
        out = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return out.type_as(x) * self.weight


class Attention(nn.Module):
    def __init__(self, c: LlamaConfig):
        super().__init__()
        self.nh, self.nkv, self.hd = c.n_heads, c.kv_heads, c.head_dim
        self.wq = nn.Linear(c.dim, self.nh * self.hd, bias=False)
        self.wk = nn.Linear(c.dim, self.nkv * self.hd, bias=False)
        self.wv = nn.Linear(c.dim, self.nkv * self.hd, bias=False)
        self.wo = nn.Linear(self.nh * self.hd, c.dim, bias=False)

    def forward(self, x: torch.Tensor, freqs_cis: torch.Tensor, mask: torch.Tensor):
        B, T, _ = x.shape
        q = self.wq(x).view(B, T, self.nh, self.hd)
        k = self.wk(x).view(B, T, self.nkv, self.hd)
        v = self.wv(x).view(B, T, self.nkv, self.hd)
        q = apply_rotary_emb(q, freqs_cis)
        k = apply_rotary_emb(k, freqs_cis)
        rep = self.nh // self.nkv
        if rep > 1:  # query head h reads kv head h // rep
            k = k.repeat_interleave(rep, dim=2)
            v = v.repeat_interleave(rep, dim=2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))  # [B, H, T, hd]
        # QK^T/sqrt(hd) with the scale on q: one T x T pass less, same math
        scores = torch.matmul(q * (1.0 / math.sqrt(self.hd)), k.transpose(2, 3)) + mask
        p = F.softmax(scores, dim=-1)
        out = torch.matmul(p, v).transpose(1, 2).reshape(B, T, self.nh * self.hd)
        return self.wo(out)


class FeedForward(nn.Module):
    def __init__(self, c: LlamaConfig):
        super().__init__()
        h = hidden_dim(c)
        self.w1 = nn.Linear(c.dim, h, bias=False)
        self.w2 = nn.Linear(h, c.dim, bias=False)
        self.w3 = nn.Linear(c.dim, h, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))


class TransformerBlock(nn.Module):
    def __init__(self, c: LlamaConfig):
        super().__init__()
        # registration order = catalog order
        self.attention_norm = RMSNorm(c.dim, c.norm_eps)
        self.attention = Attention(c)
        self.ffn_norm = RMSNorm(c.dim, c.norm_eps)
        self.feed_forward = FeedForward(c)

    def forward(self, x, freqs_cis, mask):
        h = x + self.attention(self.attention_norm(x), freqs_cis, mask)
        return h + self.feed_forward(self.ffn_norm(h))


class Llama(nn.Module):
    def __init__(self, c: LlamaConfig):
        super().__init__()
        self.config = c
        self.tok_embeddings = nn.Embedding(c.vocab_size, c.dim)
        self.layers = nn.ModuleList(TransformerBlock(c) for _ in range(c.n_layers))
        self.norm = RMSNorm(c.dim, c.norm_eps)
        self.output = nn.Linear(c.dim, c.vocab_size, bias=False)
        if c.tie_embeddings:
            self.output.weight = self.tok_embeddings.weight  # named_parameters lists it once

    def forward(self, tokens: torch.Tensor, targets: Optional[torch.Tensor] = None):
        """tokens[B, T] -> logits[B, T, V]; with targets, (logits, mean cross-entropy)."""
        B, T = tokens.shape
        dtype = self.norm.weight.dtype
        freqs_cis = precompute_freqs_cis(self.config, T, dtype)
        mask = torch.full((T, T), float("-inf"), dtype=dtype).triu(1)
        h = self.tok_embeddings(tokens)
        for layer in self.layers:
            h = layer(h, freqs_cis, mask)
        logits = self.output(self.norm(h))
        if targets is None:
            return logits
        loss = F.cross_entropy(logits.reshape(B * T, -1), targets.reshape(B * T))
        return logits, loss


def catalog(c: LlamaConfig) -> List[Tuple[str, Tuple[int, ...]]]:
    """(name, shape) of every parameter tensor in titan's flat-buffer order."""
    h, hd = hidden_dim(c), c.head_dim
    out = [("tok_embeddings.weight", (c.vocab_size, c.dim))]
    for i in range(c.n_layers):
        p = "layers.%d." % i
        out += [
            (p + "attention_norm.weight", (c.dim,)),
            (p + "attention.wq.weight", (c.n_heads * hd, c.dim)),
            (p + "attention.wk.weight", (c.kv_heads * hd, c.dim)),
            (p + "attention.wv.weight", (c.kv_heads * hd, c.dim)),
            (p + "attention.wo.weight", (c.dim, c.n_heads * hd)),
            (p + "ffn_norm.weight", (c.dim,)),
            (p + "feed_forward.w1.weight", (h, c.dim)),
            (p + "feed_forward.w2.weight", (c.dim, h)),
            (p + "feed_forward.w3.weight", (h, c.dim)),
        ]
    out.append(("norm.weight", (c.dim,)))
    if not c.tie_embeddings:
        out.append(("output.weight", (c.vocab_size, c.dim)))
    return out


def ordered_params(model: Llama) -> List[Tuple[str, nn.Parameter]]:
    """named_parameters() checked against the catalog (names, shapes, order)."""
    named = list(model.named_parameters())
    want = catalog(model.config)
    got = [(n, tuple(p.shape)) for n, p in named]
    if got != want:
        raise RuntimeError("parameter order differs from the catalog:\n%s\n%s" % (got, want))
    return named


def flops_per_token(c: LlamaConfig, seq_len: int) -> float:
    """6 * matmul params + 12 * layers * dim * seq_len (the head counts, tied or not)."""
    nonembed = sum(math.prod(s) for n, s in catalog(c) if n != "tok_embeddings.weight")
    if c.tie_embeddings:
        nonembed += c.vocab_size * c.dim
    return 6.0 * nonembed + 12.0 * c.n_layers * c.dim * seq_len


def init_weights(model: Llama, seed: int = 0) -> None:
    """torchtitan-style init: embeddings N(0,1); wq,wk,wv,w1 trunc-normal 0.02;
    wo,w2,w3 0.02/sqrt(2(layer+1)); norms 1; output trunc-normal dim^-0.5 cut at 3 std."""
    g = torch.Generator().manual_seed(seed)
    c = model.config

    def tn(p, std, cut=2.0):
        with torch.no_grad():
            p.copy_(torch.fmod(torch.randn(p.shape, generator=g), cut) * std)

    with torch.no_grad():
        model.tok_embeddings.weight.copy_(torch.randn(model.tok_embeddings.weight.shape, generator=g))
        for i, layer in enumerate(model.layers):
            depth_std = 0.02 / math.sqrt(2 * (i + 1))
            for lin in (layer.attention.wq, layer.attention.wk, layer.attention.wv,
                        layer.feed_forward.w1):
                tn(lin.weight, 0.02)
            for lin in (layer.attention.wo, layer.feed_forward.w2, layer.feed_forward.w3):
                tn(lin.weight, depth_std)
            layer.attention_norm.weight.fill_(1.0)
            layer.ffn_norm.weight.fill_(1.0)
        model.norm.weight.fill_(1.0)
        if not c.tie_embeddings:
            tn(model.output.weight, c.dim ** -0.5, 3.0)


# ---------------------------------------------------------------- self-checks

def _check_rope() -> None:
    """The complex-view RoPE against a direct formula, pair by pair, in float64."""
    c = LlamaConfig(dim=64, n_heads=4, rope_scaling_factor=8.0)
    B, T, H, hd = 2, 40, 3, c.head_dim
    torch.manual_seed(1)
    x = torch.randn(B, T, H, hd, dtype=torch.float64)
    got = apply_rotary_emb(x, precompute_freqs_cis(c, T, torch.float64))
    # direct: freqs in float64 from the formula, scaled by hand
    freqs = [c.rope_theta ** (-(2 * i) / hd) for i in range(hd // 2)]
    lo, hi = c.rope_original_context / c.rope_low_freq_factor, c.rope_original_context / c.rope_high_freq_factor
    sf = []
    for f in freqs:
        w = 2 * math.pi / f
        if w < hi:
            sf.append(f)
        elif w > lo:
            sf.append(f / c.rope_scaling_factor)
        else:
            s = (c.rope_original_context / w - c.rope_low_freq_factor) / (
                c.rope_high_freq_factor - c.rope_low_freq_factor)
            sf.append((1 - s) * f / c.rope_scaling_factor + s * f)
    want = torch.empty_like(x)
    for t in range(T):
        for i in range(hd // 2):
            a = t * sf[i]
            z = complex(math.cos(a), math.sin(a))
            xr, xi = x[:, t, :, 2 * i], x[:, t, :, 2 * i + 1]
            want[:, t, :, 2 * i] = xr * z.real - xi * z.imag
            want[:, t, :, 2 * i + 1] = xr * z.imag + xi * z.real
    err = ((got - want).norm() / want.norm()).item()
    # the reference forms angles in fp32: about 1e-7 relative to the angle
    assert err < 1e-5, "rope: rel err %g" % err
    # rotation keeps every pair's length
    assert torch.allclose(got.norm(dim=-1), x.norm(dim=-1), rtol=1e-12)
    # all three branches of the scaling were used
    bands = [f == s for f, s in zip(freqs, sf)].count(True)
    assert 0 < bands < hd // 2, "rope: test does not reach every scaling band"
    print("rope: complex view vs direct formula: rel err %.3g (ok)" % err)


def _check_init_loss() -> None:
    """At random init the loss is ~ln(V) + var(logits)/2 (Gaussian logits), and
    ~ln(V) itself when the head is shrunk so the logits are nearly uniform."""
    for tied in (False, True):
        c = LlamaConfig(dim=64, n_layers=2, n_heads=8, n_kv_heads=2, vocab_size=300,
                        multiple_of=32, rope_scaling_factor=8.0, tie_embeddings=tied)
        m = Llama(c)
        init_weights(m, seed=0)
        ordered_params(m)
        g = torch.Generator().manual_seed(3)
        tok = torch.randint(0, c.vocab_size, (4, 64), generator=g)
        tgt = torch.randint(0, c.vocab_size, (4, 64), generator=g)
        lnv = math.log(c.vocab_size)
        with torch.no_grad():
            logits, loss = m(tok, tgt)
            want = lnv + logits.var(-1).mean().item() / 2
            if not tied:  # tied logits come from N(0,1) rows: far from the small-logit regime
                assert abs(loss.item() - want) < 0.1, (loss.item(), want)
            m.output.weight.mul_(0.01)  # tied: shrinks the embeddings too
            _, small = m(tok, tgt)
            assert abs(small.item() - lnv) < 0.01, (small.item(), lnv)
        print("init loss (%s): %.4f%s; small head %.4f vs ln(V) %.4f (ok)"
              % ("tied" if tied else "untied", loss.item(),
                 "" if tied else " vs ln(V)+var/2 %.4f" % want, small.item(), lnv))


def _check_causal_gqa() -> None:
    """Future tokens do not change earlier logits; GQA equals explicit kv copies."""
    c = LlamaConfig(dim=32, n_layers=1, n_heads=4, n_kv_heads=2, vocab_size=50, multiple_of=16)
    torch.manual_seed(2)
    m = Llama(c).double()
    tok = torch.randint(0, 50, (1, 12))
    a = m(tok)
    tok2 = tok.clone()
    tok2[0, 8:] = (tok2[0, 8:] + 1) % 50
    b = m(tok2)
    assert torch.allclose(a[:, :8], b[:, :8], rtol=0, atol=1e-12)
    assert not torch.allclose(a[:, 8:], b[:, 8:])
    # same model with kv heads duplicated into a full MHA model
    c2 = LlamaConfig(**{**c.__dict__, "n_kv_heads": 4})
    m2 = Llama(c2).double()
    sd = m.state_dict()
    hd = c.head_dim
    for key in list(sd):
        if key.endswith(("wk.weight", "wv.weight")):
            w = sd[key].view(2, hd, c.dim)
            sd[key] = w.repeat_interleave(2, dim=0).reshape(4 * hd, c.dim)
    m2.load_state_dict(sd)
    assert torch.allclose(m2(tok), a, rtol=0, atol=1e-12)
    print("causal mask and GQA head mapping (ok)")


def _check_hidden_dim() -> None:
    # debugmodel (256, mult 256) -> 768; 8B (4096, 1.3, 1024) -> 14336; 1B (2048, 1.5, 256) -> 8192
    assert hidden_dim(LlamaConfig(dim=256, multiple_of=256)) == 768
    assert hidden_dim(LlamaConfig(dim=4096, multiple_of=1024, ffn_dim_multiplier=1.3)) == 14336
    assert hidden_dim(LlamaConfig(dim=2048, multiple_of=256, ffn_dim_multiplier=1.5)) == 8192
    print("hidden dims (ok)")


if __name__ == "__main__":
    torch.set_num_threads(1)
    _check_hidden_dim()
    _check_rope()
    _check_causal_gqa()
    _check_init_loss()
    print("torch_llama: all self-checks passed")
