"""hf_reference.py - checks a `titan-ckpt convert --to hf` export against titan.

Loads the exported directory the way a Hugging Face user would see it
(config.json + safetensors, single file or sharded with an index; parsed here
by hand: 8-byte length, JSON header, raw little-endian data), runs a Llama
written in the Hugging Face convention (rotate-half RoPE on duplicated cos/sin
halves, llama3 frequency scaling, grouped-query attention, SwiGLU, RMSNorm) in
float64, and compares its logits with titan's logits for the same tokens
(`titan-ckpt eval CKPT --tokens ...`, one row per position).

    /usr/bin/python3 tests/torch/hf_reference.py HFDIR 1,2,3 titan_logits.txt [--tol 1e-4]
        [--titan-ckpt STEPDIR]   also check q/k against the published HF permutation
    /usr/bin/python3 tests/torch/hf_reference.py --make-random HFDIR
        writes a small random HF Llama, to check `convert --from hf` the same way

Prints the error and exits 0 when max|hf - titan| / max|hf| < tol, 1 when not,
77 when PyTorch is missing (the test is skipped).
"""
import argparse
import json
import math
import os
import struct
import sys

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    print(f"skip: {e}")
    sys.exit(77)


def read_safetensors(path):
    """{name: float64 tensor} from one safetensors file."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        buf = data[b:end]
        if e["dtype"] == "F32":
            a = np.frombuffer(buf, dtype="<f4")
        elif e["dtype"] == "F16":
            a = np.frombuffer(buf, dtype="<f2").astype(np.float32)
        elif e["dtype"] == "BF16":  # the high half of an IEEE float32
            a = (np.frombuffer(buf, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"{path}: {name}: dtype {e['dtype']}")
        out[name] = torch.from_numpy(a.astype(np.float64).reshape(e["shape"]))
    return out


def load_weights(d):
    idx = os.path.join(d, "model.safetensors.index.json")
    if not os.path.exists(idx):
        return read_safetensors(os.path.join(d, "model.safetensors"))
    with open(idx) as f:
        files = sorted(set(json.load(f)["weight_map"].values()))
    w = {}
    for fn in files:
        w.update(read_safetensors(os.path.join(d, fn)))
    return w


def inv_freqs(cfg, hd):
    base = cfg.get("rope_theta", 10000.0)
    inv = 1.0 / (base ** (torch.arange(0, hd, 2).float() / hd))  # fp32 as HF forms it
    rs = cfg.get("rope_scaling")
    if not rs:
        return inv
    factor, lo, hi = rs["factor"], rs["low_freq_factor"], rs["high_freq_factor"]
    old = rs["original_max_position_embeddings"]
    out = []
    for f in inv.tolist():  # element by element: long wavelengths are slowed by `factor`,
        wavelen = 2 * math.pi / f  # short ones kept, the band between blended smoothly
        if wavelen < old / hi:
            out.append(f)
        elif wavelen > old / lo:
            out.append(f / factor)
        else:
            s = (old / wavelen - lo) / (hi - lo)
            out.append((1 - s) * f / factor + s * f)
    return torch.tensor(out, dtype=torch.float32)


def rotate_half(x):
    h = x.shape[-1] // 2
    return torch.cat((-x[..., h:], x[..., :h]), dim=-1)


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def hf_llama_logits(cfg, w, tokens):
    C, nh = cfg["hidden_size"], cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads", nh)
    hd = cfg.get("head_dim", C // nh)
    eps = cfg["rms_norm_eps"]
    T = len(tokens)
    freqs = torch.outer(torch.arange(T, dtype=torch.float32), inv_freqs(cfg, hd)).double()
    emb = torch.cat((freqs, freqs), dim=-1)  # [T, hd]: the same angle for i and i + hd/2
    cos, sin = emb.cos()[:, None, :], emb.sin()[:, None, :]
    x = w["model.embed_tokens.weight"][torch.tensor(tokens)]
    mask = torch.full((T, T), float("-inf"), dtype=torch.float64).triu(1)
    for l in range(cfg["num_hidden_layers"]):
        p = f"model.layers.{l}."
        n = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q = (n @ w[p + "self_attn.q_proj.weight"].T).view(T, nh, hd)
        k = (n @ w[p + "self_attn.k_proj.weight"].T).view(T, nkv, hd)
        v = (n @ w[p + "self_attn.v_proj.weight"].T).view(T, nkv, hd)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = k.repeat_interleave(nh // nkv, dim=1)  # query head h reads kv head h // (nh / nkv)
        v = v.repeat_interleave(nh // nkv, dim=1)
        s = torch.einsum("thd,shd->hts", q, k) / math.sqrt(hd) + mask
        a = torch.einsum("hts,shd->thd", F.softmax(s, dim=-1), v).reshape(T, nh * hd)
        x = x + a @ w[p + "self_attn.o_proj.weight"].T
        n = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        g = n @ w[p + "mlp.gate_proj.weight"].T
        u = n @ w[p + "mlp.up_proj.weight"].T
        x = x + (F.silu(g) * u) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w.get("lm_head.weight")
    if head is None or cfg.get("tie_word_embeddings"):
        head = w["model.embed_tokens.weight"]
    return x @ head.T


def read_titan_tensor(step_dir, meta, name):
    """One f32 tensor of a titan checkpoint (titan-checkpoint(5)): chunks placed by their boxes."""
    e = meta["tensors"][name]
    assert e["dtype"] == "f32"
    out = np.zeros(e["shape"], dtype=np.float32)
    for c in e["chunks"]:
        with open(os.path.join(step_dir, c["file"]), "rb") as f:
            f.seek(c["offset"])
            a = np.frombuffer(f.read(c["nbytes"]), dtype="<f4").reshape(c["box"]["size"])
        out[tuple(slice(o, o + n) for o, n in zip(c["box"]["offset"], c["box"]["size"]))] = a
    return torch.from_numpy(out.astype(np.float64))


def hf_permute(w, n_heads):
    """The published convert_llama_weights_to_hf permutation (Meta pairs -> HF halves)."""
    dim1, dim2 = w.shape
    return w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)


def check_permutation(cfg, w, step_dir):
    """Exported q/k == the published permutation of titan's (Meta-layout) weights."""
    with open(os.path.join(step_dir, "metadata.json")) as f:
        meta = json.load(f)
    nh = cfg["num_attention_heads"]
    nkv = cfg.get("num_key_value_heads", nh)
    worst = 0.0
    for l in range(cfg["num_hidden_layers"]):
        for t, h, n in (("wq", "q_proj", nh), ("wk", "k_proj", nkv)):
            want = hf_permute(read_titan_tensor(step_dir, meta, f"layers.{l}.attention.{t}.weight"), n)
            got = w[f"model.layers.{l}.self_attn.{h}.weight"]
            worst = max(worst, ((got - want).abs().max() / want.abs().max()).item())
    return worst


def write_random_hf(d, seed=1):
    """A small random HF Llama (f32, GQA, llama3 RoPE scaling) with weights large
    enough that attention, and so the RoPE convention, changes the logits a lot."""
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 64,
           "intermediate_size": 160, "num_attention_heads": 4, "num_key_value_heads": 2,
           "num_hidden_layers": 2, "vocab_size": 96, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                            "high_freq_factor": 4.0, "original_max_position_embeddings": 16},
           "max_position_embeddings": 128, "tie_word_embeddings": False, "hidden_act": "silu",
           "torch_dtype": "float32"}
    g = torch.Generator().manual_seed(seed)
    C, H, V = 64, 160, 96
    shapes = {"model.embed_tokens.weight": (V, C), "model.norm.weight": (C,), "lm_head.weight": (V, C)}
    for l in range(2):
        p = f"model.layers.{l}."
        shapes.update({p + "self_attn.q_proj.weight": (C, C), p + "self_attn.k_proj.weight": (32, C),
                       p + "self_attn.v_proj.weight": (32, C), p + "self_attn.o_proj.weight": (C, C),
                       p + "mlp.gate_proj.weight": (H, C), p + "mlp.up_proj.weight": (H, C),
                       p + "mlp.down_proj.weight": (C, H), p + "input_layernorm.weight": (C,),
                       p + "post_attention_layernorm.weight": (C,)})
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, shp in shapes.items():
        if len(shp) == 1:
            t = 1.0 + 0.1 * torch.randn(shp, generator=g)
        else:
            t = torch.randn(shp, generator=g) * (1.0 if "embed" in name else 0.6 / math.sqrt(shp[1]) * 4)
        b = t.float().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(shp), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
    with open(os.path.join(d, "config.json"), "w") as f:
        json.dump(cfg, f, indent=2)


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--make-random":
        write_random_hf(sys.argv[2])
        return 0
    ap = argparse.ArgumentParser()
    ap.add_argument("hfdir")
    ap.add_argument("tokens")
    ap.add_argument("titan_logits")
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--titan-ckpt", help="the exported step dir: also check the q/k permutation")
    a = ap.parse_args()
    with open(os.path.join(a.hfdir, "config.json")) as f:
        cfg = json.load(f)
    assert cfg["model_type"] == "llama" and cfg["architectures"] == ["LlamaForCausalLM"]
    tokens = [int(t) for t in a.tokens.split(",")]
    w = load_weights(a.hfdir)
    if a.titan_ckpt:
        perr = check_permutation(cfg, w, a.titan_ckpt)
        # f32 exports are exact; bf16/f16 only round each weight
        ptol = 0.0 if cfg.get("torch_dtype") == "float32" else 1e-2
        print(f"q/k rows vs the published HF permutation of titan's weights: max rel error {perr:.3g}")
        if perr > ptol:
            print("FAIL: q/k permutation")
            return 1
    ref = hf_llama_logits(cfg, w, tokens)
    got = torch.tensor(np.loadtxt(a.titan_logits, ndmin=2), dtype=torch.float64)
    if got.shape != ref.shape:
        print(f"FAIL: titan logits {tuple(got.shape)}, HF reference {tuple(ref.shape)}")
        return 1
    err = ((got - ref).abs().max() / ref.abs().max()).item()
    # A wrong q/k permutation or RoPE convention gives errors of order 1, not 1e-6.
    print(f"{len(tokens)} tokens x {ref.shape[1]} logits: max |titan - hf| / max |hf| = {err:.3g} (tol {a.tol:g})")
    return 0 if err < a.tol else 1


if __name__ == "__main__":
    sys.exit(main())
