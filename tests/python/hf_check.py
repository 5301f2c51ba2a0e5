"""hf_check.py - titan's Hugging Face interchange checked with `transformers` itself.

Run with the pinned references (scripts/pyenv.sh: build/venv's python, $PYREF
in the CLI tests). Two commands:

  make HFDIR [--vocab V --dim C --layers L --heads H --kv-heads K --ffn F
              --theta B --llama3 FACTOR,LOW,HIGH,ORIG --tie --dtype bfloat16 --seed S]
      A small random LlamaForCausalLM made and saved by transformers
      (save_pretrained: config.json as transformers writes it, safetensors in
      DTYPE). Its weights are large (embeddings ~N(0,1), projections
      ~N(0, 2.4^2/fan_in)): attention is sharp, so a wrong RoPE convention or a
      wrong RoPE scaling moves the logits by O(1), not by rounding.

  logits HFDIR TOKENS TITAN_LOGITS [--tol 1e-4] [--titan-ckpt STEPDIR]
         [--far VARIANT]... [--far-min 0.1]
      Loads HFDIR with AutoModelForCausalLM (float64, eager attention; also
      AutoTokenizer when the directory has tokenizer files) and compares its
      logits for TOKENS (comma-separated ids) with TITAN_LOGITS (the output of
      `titan-ckpt eval CKPT --tokens TOKENS`: one row per position).
      Passes when max|titan - hf| / max|hf| < tol.
      --titan-ckpt: the exported q/k must also be the published HF permutation
      of the titan checkpoint's (Meta-order) q/k rows (exact in f32, 2^-8 in bf16).
      --far VARIANT: the same model run deliberately wrong must be off by more
      than --far-min, which shows the comparison can fail:
        no-rope-scaling  rope_parameters back to the default (no llama3 scaling)
        interleaved      q/k rows left in Meta's interleaved order (no permutation)
      Prints one line per comparison ("match: ..." / "far VARIANT: ...", each
      ending in ok or FAIL); exits 0 when all pass, 1 when one fails.

  tokenize HFDIR TEXT IDS
      The tokenizer files titan-ckpt convert --to hf wrote into HFDIR against
      titan's ids of TEXT (IDS: u32 little-endian, no bos/eos, as titan-shard
      wrote them for TEXT as one document). tokenizer.json loaded by the
      `tokenizers` library (encode_special_tokens = True: special-token text
      is text, as in titan) and AutoTokenizer (which tokenizer_config.json's
      split_special_tokens sets the same) must give IDS exactly, bos first
      when special tokens are added; AutoTokenizer decodes IDS back to TEXT;
      its bos/eos ids are config.json's. One line per check, ok or FAIL;
      exits 1 when one fails.
"""
import argparse
import json
import os
import sys

import numpy as np
import torch
import transformers
from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM

transformers.logging.set_verbosity_error()
transformers.utils.logging.disable_progress_bar()
torch.set_num_threads(int(os.environ.get("HF_CHECK_THREADS", "2")))


# ---- make --------------------------------------------------------------------------------
def make(a):
    rope = {"rope_type": "default", "rope_theta": a.theta}
    if a.llama3:
        f, lo, hi, orig = a.llama3.split(",")
        rope = {"rope_type": "llama3", "rope_theta": a.theta, "factor": float(f), "low_freq_factor": float(lo),
                "high_freq_factor": float(hi), "original_max_position_embeddings": int(orig)}
    cfg = LlamaConfig(vocab_size=a.vocab, hidden_size=a.dim, intermediate_size=a.ffn, num_hidden_layers=a.layers,
                      num_attention_heads=a.heads, num_key_value_heads=a.kv_heads, rms_norm_eps=a.eps,
                      max_position_embeddings=a.max_pos, tie_word_embeddings=a.tie, rope_parameters=rope,
                      hidden_act="silu", bos_token_id=None, eos_token_id=None)
    torch.manual_seed(a.seed)
    model = LlamaForCausalLM(cfg).eval()
    g = torch.Generator().manual_seed(a.seed)
    with torch.no_grad():
        for name, p in model.named_parameters():  # tied: lm_head is embed_tokens, listed once
            if p.dim() == 1:
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) * (2.4 / p.shape[1] ** 0.5))
    model.to(getattr(torch, a.dtype)).save_pretrained(a.hfdir)
    saved = sorted(stored_dtypes(a.hfdir))
    print(f"{a.hfdir}: LlamaForCausalLM saved by transformers {transformers.__version__} ({', '.join(saved)}), "
          f"{a.heads} heads / {a.kv_heads} kv heads, tied {a.tie} (lm_head.weight saved: "
          f"{'lm_head.weight' in stored_names(a.hfdir)}), rope_parameters {rope}")
    return 0


# ---- logits ------------------------------------------------------------------------------
def load(hfdir, config=None):
    kw = {"config": config} if config is not None else {}
    return AutoModelForCausalLM.from_pretrained(hfdir, dtype=torch.float64, attn_implementation="eager", **kw).eval()


def run(model, tokens):
    with torch.no_grad():
        return model(input_ids=torch.tensor([tokens]), use_cache=False).logits[0]


def rel(got, ref):
    return ((got - ref).abs().max() / ref.abs().max()).item()


def hf_permute(w, n_heads):
    """The published convert_llama_weights_to_hf permutation (Meta's pairs -> HF's halves)."""
    d1, d2 = w.shape
    return w.view(n_heads, d1 // n_heads // 2, 2, d2).transpose(1, 2).reshape(d1, d2)


def meta_order(w, n_heads):
    """hf_permute undone: HF's halves back to Meta's interleaved pairs."""
    d1, d2 = w.shape
    return w.view(n_heads, 2, d1 // n_heads // 2, d2).transpose(1, 2).reshape(d1, d2)


def read_titan_tensor(step_dir, meta, name):
    """One f32 tensor of a titan checkpoint (titan-checkpoint(5)): raw chunks placed by their boxes."""
    e = meta["tensors"][name]
    assert e["dtype"] == "f32", e["dtype"]
    out = np.zeros(e["shape"], dtype=np.float32)
    for c in e["chunks"]:
        assert c.get("compression", "none") in ("none", None), "compressed chunks: not read here"
        with open(os.path.join(step_dir, c["file"]), "rb") as f:
            f.seek(c["offset"])
            a = np.frombuffer(f.read(c["nbytes"]), dtype="<f4").reshape(c["box"]["size"])
        out[tuple(slice(o, o + n) for o, n in zip(c["box"]["offset"], c["box"]["size"]))] = a
    return torch.from_numpy(out.astype(np.float64))


def check_permutation(cfg, sd, step_dir):
    """max rel |exported q/k - published permutation of titan's q/k| over layers."""
    with open(os.path.join(step_dir, "metadata.json")) as f:
        meta = json.load(f)
    worst = 0.0
    for l in range(cfg.num_hidden_layers):
        for t, h, n in (("wq", "q_proj", cfg.num_attention_heads), ("wk", "k_proj", cfg.num_key_value_heads)):
            want = hf_permute(read_titan_tensor(step_dir, meta, f"layers.{l}.attention.{t}.weight"), n)
            worst = max(worst, rel(sd[f"model.layers.{l}.self_attn.{h}.weight"], want))
    return worst


def logits(a):
    ok = True

    def report(label, err, passed, want):
        nonlocal ok
        ok &= passed
        print(f"{label}: max|titan - hf| / max|hf| = {err:.3g} ({want}) {'ok' if passed else 'FAIL'}")

    tokens = [int(t) for t in a.tokens.split(",")]
    model = load(a.hfdir)
    cfg = model.config
    assert type(model).__name__ == "LlamaForCausalLM", type(model).__name__
    print(f"transformers {transformers.__version__}: {type(model).__name__}, {cfg.num_attention_heads} heads / "
          f"{cfg.num_key_value_heads} kv heads, head_dim {cfg.head_dim}, tied {cfg.tie_word_embeddings}, "
          f"rope {cfg.rope_parameters}")
    tk = [f for f in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model") if os.path.exists(os.path.join(a.hfdir, f))]
    if tk:
        from transformers import AutoTokenizer
        tok = AutoTokenizer.from_pretrained(a.hfdir)
        passed = len(tok) <= cfg.vocab_size
        ok &= passed
        print(f"AutoTokenizer: {type(tok).__name__}, {len(tok)} tokens (vocab_size {cfg.vocab_size}) "
              f"{'ok' if passed else 'FAIL'}")
    else:
        print("AutoTokenizer: no tokenizer files in the directory")
    sd = model.state_dict()
    if a.titan_ckpt:
        perr = check_permutation(cfg, sd, a.titan_ckpt)
        exact = stored_dtypes(a.hfdir) == {"F32"}
        ptol = 0.0 if exact else 2.0 ** -8  # f32 exports are exact; bf16/f16 only round each weight
        passed = perr <= ptol
        ok &= passed
        print(f"q/k rows vs the published HF permutation of titan's: max rel error {perr:.3g} "
              f"(tol {ptol:g}) {'ok' if passed else 'FAIL'}")
    got = torch.tensor(np.loadtxt(a.titan_logits, ndmin=2), dtype=torch.float64)
    ref = run(model, tokens)
    if got.shape != ref.shape:
        print(f"FAIL: titan logits {tuple(got.shape)}, transformers {tuple(ref.shape)}")
        return 1
    report(f"match ({len(tokens)} tokens x {ref.shape[1]} logits)", rel(got, ref), rel(got, ref) < a.tol,
           f"tol {a.tol:g}")
    for v in a.far or []:
        if v == "no-rope-scaling":
            c = AutoConfig.from_pretrained(a.hfdir)
            assert c.rope_parameters.get("rope_type") == "llama3", c.rope_parameters
            c.rope_parameters = {"rope_type": "default", "rope_theta": c.rope_parameters["rope_theta"]}
            wrong = run(load(a.hfdir, c), tokens)
        elif v == "interleaved":
            with torch.no_grad():
                for l, layer in enumerate(model.model.layers):
                    at = layer.self_attn
                    at.q_proj.weight.copy_(meta_order(at.q_proj.weight, cfg.num_attention_heads))
                    at.k_proj.weight.copy_(meta_order(at.k_proj.weight, cfg.num_key_value_heads))
            wrong = run(model, tokens)
            model = load(a.hfdir)
        else:
            raise SystemExit(f"--far {v}: unknown variant")
        e = rel(got, wrong)
        report(f"far {v}", e, e > a.far_min, f"want > {a.far_min:g}")
    return 0 if ok else 1


def _stored(hfdir):
    from safetensors import safe_open
    for fn in sorted(os.listdir(hfdir)):
        if fn.endswith(".safetensors"):
            with safe_open(os.path.join(hfdir, fn), framework="pt") as f:
                for k in f.keys():
                    yield k, f.get_slice(k).get_dtype()


def stored_dtypes(hfdir):
    """The dtypes the directory's safetensors files store ("F32", "BF16", ...), read by safetensors."""
    return {d for _, d in _stored(hfdir)}


def stored_names(hfdir):
    return {k for k, _ in _stored(hfdir)}


# ---- tokenize ----------------------------------------------------------------------------
def tokenize(a):
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer
    text = open(a.text, encoding="utf-8", newline="").read()  # "\r\n" stays as it is
    want = np.fromfile(a.ids, dtype="<u4").tolist()
    cfg = json.load(open(os.path.join(a.hfdir, "config.json")))
    ok = True

    def report(label, passed, got=None):
        nonlocal ok
        ok &= passed
        where = ""
        if not passed and got is not None:
            i = next((i for i, (x, y) in enumerate(zip(got, want)) if x != y), min(len(got), len(want)))
            where = f" (first difference at token {i} of {len(want)}: {got[i:i + 5]} vs titan's {want[i:i + 5]})"
        print(f"{label}{where} {'ok' if passed else 'FAIL'}")

    tk = Tokenizer.from_file(os.path.join(a.hfdir, "tokenizer.json"))
    specials = [t.content for t in tk.get_added_tokens_decoder().values() if t.content in text]
    if specials:  # the text holds special-token text: without the switch it would become special ids
        report(f"the text holds {specials[:3]}: without encode_special_tokens they become special ids",
               tk.encode(text, add_special_tokens=False).ids != want)
    tk.encode_special_tokens = True
    got = tk.encode(text, add_special_tokens=False).ids
    report(f"tokenizers {__import__('tokenizers').__version__}: {len(text)} characters -> titan's {len(want)} "
           "tokens", got == want, got)
    at = AutoTokenizer.from_pretrained(a.hfdir)
    got = at(text, add_special_tokens=False)["input_ids"]
    report(f"AutoTokenizer ({type(at).__name__}, {len(at)} tokens): the same tokens", got == want, got)
    got = at(text)["input_ids"]
    report(f"AutoTokenizer with special tokens: bos {cfg['bos_token_id']} first, then the same",
           got == [cfg["bos_token_id"]] + want, got[1:])
    report("AutoTokenizer decodes titan's ids back to the text", at.decode(want) == text)
    report(f"AutoTokenizer bos/eos ids {at.bos_token_id}/{at.eos_token_id} = config.json's",
           (at.bos_token_id, at.eos_token_id) == (cfg["bos_token_id"], cfg["eos_token_id"]))
    return 0 if ok else 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("hfdir")
    m.add_argument("--vocab", type=int, default=96)
    m.add_argument("--dim", type=int, default=64)
    m.add_argument("--layers", type=int, default=2)
    m.add_argument("--heads", type=int, default=4)
    m.add_argument("--kv-heads", type=int, default=2)
    m.add_argument("--ffn", type=int, default=160)
    m.add_argument("--eps", type=float, default=1e-5)
    m.add_argument("--theta", type=float, default=10000.0)
    m.add_argument("--llama3", help="FACTOR,LOW_FREQ_FACTOR,HIGH_FREQ_FACTOR,ORIGINAL_MAX_POSITION")
    m.add_argument("--max-pos", type=int, default=4096)
    m.add_argument("--tie", action="store_true")
    m.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32")
    m.add_argument("--seed", type=int, default=1)
    c = sub.add_parser("logits")
    c.add_argument("hfdir")
    c.add_argument("tokens")
    c.add_argument("titan_logits")
    c.add_argument("--tol", type=float, default=1e-4)
    c.add_argument("--titan-ckpt")
    c.add_argument("--far", action="append", choices=("no-rope-scaling", "interleaved"))
    c.add_argument("--far-min", type=float, default=0.1)
    t = sub.add_parser("tokenize")
    t.add_argument("hfdir")
    t.add_argument("text")
    t.add_argument("ids")
    a = ap.parse_args()
    return {"make": make, "logits": logits, "tokenize": tokenize}[a.cmd](a)


if __name__ == "__main__":
    sys.exit(main())
