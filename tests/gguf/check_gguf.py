"""check_gguf.py - reads a `titan-ckpt convert --to gguf` file with nothing but
the Python standard library and checks it against the f32 Hugging Face export
of the same checkpoint (`titan-ckpt convert --to hf`, a model.safetensors):

  - the layout: magic, version 3, counts, every key/value and tensor info
    parsed to the end, general.alignment, 32-aligned offsets in order, the
    data section ending where the file ends;
  - the data: every tensor equals the HF tensor of the same parameter, with
    q and k in Meta's interleaved RoPE order (HF's rotate-half rows permuted
    back, as llama.cpp's converter does), 1-D tensors f32, f32/f16/bf16
    matrices within their own rounding.

    /usr/bin/python3 tests/gguf/check_gguf.py MODEL.gguf HFDIR
Exit 0 ok (prints a summary), 1 with the first problem.
"""
import json
import struct
import sys

TYPES = {0: ("f32", 4), 1: ("f16", 2), 30: ("bf16", 2)}
SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}


class Reader:
    def __init__(self, raw):
        self.raw, self.at = raw, 0

    def take(self, fmt):
        (v,) = struct.unpack_from(fmt, self.raw, self.at)
        self.at += struct.calcsize(fmt)
        return v

    def string(self):
        n = self.take("<Q")
        s = self.raw[self.at:self.at + n]
        if len(s) != n:
            raise ValueError("string runs past the end of the file")
        self.at += n
        return s.decode("utf-8")

    def value(self, t):
        if t == 8:
            return self.string()
        if t == 9:
            et, n = self.take("<I"), self.take("<Q")
            return [self.value(et) for _ in range(n)]
        return self.take(SCALAR[t])


def decode(buf, kind):
    if kind == "f32":
        return struct.unpack(f"<{len(buf) // 4}f", buf)
    if kind == "f16":
        return struct.unpack(f"<{len(buf) // 2}e", buf)
    halves = struct.unpack(f"<{len(buf) // 2}H", buf)  # bf16: the high half of an f32
    return struct.unpack(f"<{len(halves)}f", struct.pack(f"<{len(halves)}I", *(h << 16 for h in halves)))


def hf_name(g):
    fixed = {"token_embd.weight": "model.embed_tokens.weight", "output_norm.weight": "model.norm.weight",
             "output.weight": "lm_head.weight"}
    if g in fixed:
        return fixed[g]
    _, layer, part, _ = g.split(".")
    return f"model.layers.{layer}." + {
        "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj", "attn_v": "self_attn.v_proj",
        "attn_output": "self_attn.o_proj", "ffn_gate": "mlp.gate_proj", "ffn_down": "mlp.down_proj",
        "ffn_up": "mlp.up_proj", "attn_norm": "input_layernorm", "ffn_norm": "post_attention_layernorm"}[part] + ".weight"


def main(path, hfdir):
    raw = open(path, "rb").read()
    r = Reader(raw)
    if raw[:4] != b"GGUF":
        return f"magic {raw[:4]!r}"
    r.at = 4
    version, n_tensors, n_kv = r.take("<I"), r.take("<Q"), r.take("<Q")
    if version != 3:
        return f"version {version}"
    kv = {}
    for _ in range(n_kv):
        k = r.string()
        kv[k] = r.value(r.take("<I"))
    infos = []
    for _ in range(n_tensors):
        name, nd = r.string(), r.take("<I")
        dims = [r.take("<Q") for _ in range(nd)]
        infos.append((name, dims, r.take("<I"), r.take("<Q")))
    align = kv.get("general.alignment", 32)
    data = (r.at + align - 1) // align * align
    if any(raw[r.at:data]):
        return "padding before the data section is not zero"
    end = 0
    for name, dims, t, off in infos:
        if t not in TYPES or off % align or off < end:
            return f"{name}: type {t}, offset {off} (previous tensor ends at {end})"
        n = 1
        for d in dims:
            n *= d
        end = off + n * TYPES[t][1]
    if data + (end + align - 1) // align * align != len(raw):
        return f"file is {len(raw)} bytes, the header and tensors need {data + end}"
    hdr_len = struct.unpack_from("<Q", open(f"{hfdir}/model.safetensors", "rb").read(8))[0]
    st = open(f"{hfdir}/model.safetensors", "rb").read()
    hdr = json.loads(st[8:8 + hdr_len])
    cfg = json.load(open(f"{hfdir}/config.json"))
    hd = cfg["hidden_size"] // cfg["num_attention_heads"]
    worst = {}
    for name, dims, t, off in infos:
        kind, size = TYPES[t]
        n = 1
        for d in dims:
            n *= d
        got = decode(raw[data + off:data + off + n * size], kind)
        if name == "rope_freqs.weight":
            if len(got) != hd // 2 or got[0] != 1.0 or max(got) <= 1.0:
                return f"rope_freqs.weight: {got}"
            continue
        if len(dims) == 1 and kind != "f32":
            return f"{name}: 1-D tensor stored as {kind}"
        e = hdr[hf_name(name)]
        if e["dtype"] != "F32" or list(reversed(dims)) != e["shape"]:
            return f"{name}: ggml dims {dims} vs HF {e['shape']} {e['dtype']}"
        b, x = e["data_offsets"]
        want = decode(st[8 + hdr_len + b:8 + hdr_len + x], "f32")
        cols = dims[0]
        if name.endswith(("attn_q.weight", "attn_k.weight")):
            # HF row h*hd + j*hd/2 + i holds Meta row h*hd + 2i + j.
            rows = [None] * dims[1]
            for h in range(dims[1] // hd):
                for i in range(hd // 2):
                    for j in range(2):
                        rows[h * hd + 2 * i + j] = want[(h * hd + j * hd // 2 + i) * cols:][:cols]
            want = [v for row in rows for v in row]
        # relative to |w|, or to f16's smallest normal where f16 goes subnormal
        rel = max(abs(a - w) / max(abs(w), 2 ** -14) for a, w in zip(got, want))
        worst[kind] = max(worst.get(kind, 0.0), rel)
    limit = {"f32": 0.0, "f16": 2 ** -11, "bf16": 2 ** -8}
    for kind, rel in worst.items():
        if rel > limit[kind]:
            return f"{kind} tensors differ from the checkpoint by up to {rel:.3g} (relative)"
    print(f"{path}: GGUF v{version}, {n_kv} keys, {n_tensors} tensors, data at {data}, {len(raw)} bytes; "
          f"max relative difference to the checkpoint: " + ", ".join(f"{k} {v:.3g}" for k, v in sorted(worst.items())))
    return None


if __name__ == "__main__":
    err = main(sys.argv[1], sys.argv[2])
    if err:
        print(f"{sys.argv[1]}: {err}")
        sys.exit(1)
