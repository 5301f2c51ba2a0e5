"""check_refs.py - checks a `titan-ckpt convert --to gguf` file with libraries
that are not titan's, from the pinned Python references (scripts/pyenv.sh):

  - the `gguf` package (llama.cpp's gguf-py): GGUFReader parses the header
    and the tensor table, checked against the checkpoint;
  - transformers' GGUF loader (AutoModelForCausalLM / AutoTokenizer with
    gguf_file=): it dequantizes the file into a torch LlamaForCausalLM, whose
    next-token probabilities are checked against titan's, and builds a
    tokenizer from the file's vocabulary and merges;
  - llama.cpp itself through llama-cpp-python (built from source:
    tests/gguf/prepare.sh), where it is installed.

    python check_refs.py COMMAND ARG...   one check: exit 0 pass, 1 fail,
                                          77 when its library cannot be loaded
    python check_refs.py batch CHECKS     many checks in one process (loading
                                          torch and transformers takes seconds)

Commands:
  meta MODEL.gguf INFO.json DTYPE
      GGUFReader: llama.* keys and their value types against the checkpoint
      (`titan-ckpt info --json`), tensor names, ggml dims, types, alignment
  hf-logits MODEL.gguf 1,2,3 TITAN_LOGITS TOL
      transformers' model from the file: the softmax of its logits at every
      position against titan's (`titan-ckpt eval`, one row per position);
      fails when the largest probability difference exceeds TOL. The loader
      drops rope_freqs.weight (Llama 3.1 RoPE scaling; transformers 5.24 maps
      no llama.rope.scaling.* key and no such tensor for llama), so this
      divides the model's rotary inv_freq by the file's rope_freqs as
      llama.cpp does, and says how far the loader alone is
  hf-tokenize MODEL.gguf TEXT IDS
      transformers' tokenizer from the file against IDS (u32 little-endian)
  llama-version | llama-logits MODEL TOKENS TITAN TOL [F32|F16] | llama-tokenize MODEL TEXT IDS
      the same through llama.cpp (llama-cpp-python); F32/F16: the KV cache type

A CHECKS line is "WANT<TAB>DESCRIPTION<TAB>COMMAND<TAB>ARG...", WANT "pass" or
"fail"; batch prints "PASS DESCRIPTION" or "FAIL DESCRIPTION" and the check's
message for each.
"""
import json
import os
import sys


class CheckFailed(Exception):
    pass


class Unavailable(Exception):
    pass


def fail(msg):
    raise CheckFailed(msg)


def numpy():
    import numpy as np
    return np


def read_ids(path):
    np = numpy()
    return np.fromfile(path, dtype="<u4").astype(np.int64).tolist()


# --- the gguf package -----------------------------------------------------------------

def meta(model, info_path, dtype):
    try:
        from gguf import GGMLQuantizationType as Q, GGUFReader, GGUFValueType as T
    except ImportError as e:
        raise Unavailable(f"gguf: {e}")
    info = json.load(open(info_path))
    r = GGUFReader(model)
    bad = []

    def want(key, v, vtype=None):
        f = r.fields.get(key)
        if f is None:
            bad.append(f"{key}: missing")
            return
        got = f.contents()
        if isinstance(v, float) and not float(v).is_integer():
            if abs(got - v) > 1e-6 * abs(v):
                bad.append(f"{key}: {got}, want {v}")
        elif got != v:
            bad.append(f"{key}: {got!r}, want {v!r}")
        if vtype is not None and f.types != [vtype]:
            bad.append(f"{key}: value type {f.types}, want {vtype.name}")

    m, mt = info["model"], info["meta"]
    scaled = mt.get("model.rope_scaling_factor", 0) > 0
    want("GGUF.version", 3)
    want("general.architecture", "llama", T.STRING)
    want("llama.embedding_length", m["dim"], T.UINT32)
    want("llama.block_count", m["n_layers"], T.UINT32)
    want("llama.feed_forward_length", m["ffn_dim"], T.UINT32)
    want("llama.attention.head_count", m["n_heads"], T.UINT32)
    want("llama.attention.head_count_kv", m["n_kv_heads"], T.UINT32)
    want("llama.rope.dimension_count", m["dim"] // m["n_heads"], T.UINT32)
    want("llama.rope.freq_base", mt["model.rope_theta"], T.FLOAT32)
    want("llama.attention.layer_norm_rms_epsilon", mt["model.norm_eps"], T.FLOAT32)
    want("llama.vocab_size", m["vocab_size"], T.UINT32)
    want("llama.context_length",
         int(mt["model.rope_original_context"] * (mt["model.rope_scaling_factor"] if scaled else 1)), T.UINT32)
    want("tokenizer.ggml.model", "gpt2", T.STRING)
    tokens = r.fields.get("tokenizer.ggml.tokens")
    if tokens is None or len(tokens.data) != m["vocab_size"]:
        bad.append("tokenizer.ggml.tokens: wrong count")
    # Tensors: every parameter under its llama.cpp name, ggml dims reversed.
    qtype = {"f32": Q.F32, "f16": Q.F16, "bf16": Q.BF16}[dtype]
    part = {"attention.wq": "attn_q", "attention.wk": "attn_k", "attention.wv": "attn_v",
            "attention.wo": "attn_output", "feed_forward.w1": "ffn_gate", "feed_forward.w2": "ffn_down",
            "feed_forward.w3": "ffn_up", "attention_norm": "attn_norm", "ffn_norm": "ffn_norm"}
    fixed = {"tok_embeddings.weight": "token_embd.weight", "norm.weight": "output_norm.weight",
             "output.weight": "output.weight"}
    by_name = {t.name: t for t in r.tensors}
    params = [t for t in info["tensors"] if ":" not in t["name"]]
    for t in params:
        g = fixed.get(t["name"])
        if g is None:
            _, layer, rest = t["name"].split(".", 2)
            g = f"blk.{layer}.{part[rest[:-len('.weight')]]}.weight"
        e = by_name.get(g)
        if e is None:
            bad.append(f"{g}: missing (from {t['name']})")
            continue
        dims = [int(d) for d in e.shape]
        if dims != list(reversed(t["shape"])):
            bad.append(f"{g}: ggml dims {dims}, shape {t['shape']}")
        wt = Q.F32 if len(t["shape"]) == 1 else qtype
        if e.tensor_type != wt:
            bad.append(f"{g}: ggml type {e.tensor_type.name}, want {wt.name}")
        if (e.data_offset - r.data_offset) % 32:
            bad.append(f"{g}: offset {e.data_offset - r.data_offset} not 32-aligned")
    if scaled and "rope_freqs.weight" not in by_name:
        bad.append("rope_freqs.weight: missing for a scaled RoPE")
    if len(r.tensors) != len(params) + (1 if scaled else 0):
        bad.append(f"{len(r.tensors)} tensors")
    if r.data_offset % 32:
        bad.append(f"data section at {r.data_offset}: not 32-aligned")
    if bad:
        fail("GGUF metadata: " + "; ".join(bad))
    return (f"gguf {_version('gguf')} GGUFReader: {len(r.fields) - 3} keys, {len(r.tensors)} tensors "
            f"({sorted({t.tensor_type.name for t in r.tensors})}), data at {r.data_offset}")


def _version(pkg):
    from importlib.metadata import version
    try:
        return version(pkg)
    except Exception:
        return "?"


# --- comparing next-token distributions ------------------------------------------------

def softmax(x):
    np = numpy()
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def compare(got, titan, tol, who):
    """got, titan: [positions, vocab] logits. The message, or a failure past tol."""
    np = numpy()
    got, titan = np.asarray(got, np.float64), np.asarray(titan, np.float64)
    if got.shape != titan.shape:
        fail(f"{who} gave logits {got.shape}, titan {titan.shape}")

    p, q = softmax(got), softmax(titan)
    d = np.abs(p - q)
    big = q >= 1e-3
    max_rel = float((d[big] / q[big]).max()) if big.any() else 0.0
    same = int((p.argmax(axis=1) == q.argmax(axis=1)).sum())
    max_abs = float(d.max())
    msg = (f"{got.shape[0]} positions x {got.shape[1]} tokens: max |p_{who} - p_titan| = {max_abs:.2e}, "
           f"max rel (p >= 1e-3) = {max_rel:.2e}, max |logit diff| = {float(np.abs(got - titan).max()):.2e}, "
           f"same argmax at {same}/{got.shape[0]}")
    if not max_abs <= tol:
        fail(f"{msg}; tolerance {tol} exceeded")
    return msg


def titan_logits(path, ntok):
    np = numpy()
    rows = np.loadtxt(path, dtype=np.float64, ndmin=2)
    if rows.shape[0] != ntok:
        fail(f"{path}: {rows.shape[0]} rows for {ntok} tokens")
    return rows


# --- transformers ------------------------------------------------------------------------

_torch = None


def torch_mod():
    global _torch
    if _torch is None:
        try:
            import torch
            import transformers  # noqa: F401
        except ImportError as e:
            raise Unavailable(f"torch/transformers: {e}")
        torch.set_num_threads(int(os.environ.get("TITAN_TEST_THREADS", "2")))
        from transformers.utils import logging
        logging.set_verbosity_error()
        logging.disable_progress_bar()
        _torch = torch
    return _torch


def hf_logits(model, tok_list, titan_path, tol):
    torch = torch_mod()
    from gguf import GGUFReader
    from transformers import AutoModelForCausalLM
    tokens = [int(t) for t in tok_list.split(",")]
    titan = titan_logits(titan_path, len(tokens))
    m = AutoModelForCausalLM.from_pretrained(os.path.dirname(os.path.abspath(model)),
                                             gguf_file=os.path.basename(model), dtype=torch.float32)
    m.eval()
    ids = torch.tensor([tokens])

    def run():
        with torch.no_grad():
            return m(ids).logits[0].double().numpy()

    rope = m.model.rotary_emb
    factors = [t for t in GGUFReader(model).tensors if t.name == "rope_freqs.weight"]
    note = ""
    if factors:
        f = torch.tensor(numpy().array(factors[0].data, dtype="float32"))
        if rope.inv_freq.shape != f.shape or getattr(m.config, "rope_parameters", {}).get("rope_type", "default") != "default":
            fail(f"rope_freqs.weight {tuple(f.shape)} vs the loader's RoPE {tuple(rope.inv_freq.shape)}, "
                 f"{m.config.rope_parameters}")
        unscaled = run()
        rope.inv_freq.copy_(rope.original_inv_freq / f)  # llama.cpp: theta / freq_factor
        note = "; without rope_freqs.weight (the loader alone): max |dp| = %.2e" % \
            float(numpy().abs(softmax(unscaled) - softmax(titan)).max())
    kind = type(m).__name__ + (", tied embeddings" if m.config.tie_word_embeddings else "")
    kind += ", rope_freqs.weight applied" if factors else ""
    return f"transformers {_version('transformers')} ({kind}): " + compare(run(), titan, float(tol), "hf") + note


def first_difference(got, want, who):
    i = 0
    n = min(len(got), len(want))
    while i < n and got[i] == want[i]:
        i += 1
    if i < len(got) or i < len(want):
        fail(f"tokenize: first difference at token {i} of {len(want)}: {who} {got[i:i + 5]}, titan {want[i:i + 5]}")


def hf_tokenize(model, text_path, ids_path):
    torch_mod()
    from gguf import GGUFReader
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(os.path.dirname(os.path.abspath(model)), gguf_file=os.path.basename(model))
    text = open(text_path, encoding="utf-8", newline="").read()  # "\r\n" stays as it is
    want = read_ids(ids_path)
    # Text is text: "<|endoftext|>" in it is not the special token (as in
    # titan, and llama.cpp's tokenize without special=True).
    got = tok(text, add_special_tokens=False, split_special_tokens=True)["input_ids"]
    first_difference(got, want, "transformers")
    n = len(GGUFReader(model).fields["tokenizer.ggml.tokens"].data)
    extra = [t for t, i in tok.get_vocab().items() if i >= n]
    return (f"tokenize ({type(tok).__name__} of the file's {n} tokens" +
            (f", the loader adds {extra}" if extra else "") +
            f"): {len(text)} characters -> the same {len(got)} tokens")


# --- llama.cpp (llama-cpp-python) --------------------------------------------------------

_llama = None


def _llama_import():
    global _llama
    if _llama is None:
        try:
            import llama_cpp
        except Exception as e:  # ImportError, or OSError from its shared library
            raise Unavailable(f"llama_cpp: {str(e).splitlines()[0]}")
        _llama = llama_cpp
    return _llama


def llama_version():
    ll = _llama_import()
    return (f"llama-cpp-python {ll.__version__} (llama.cpp built from its sdist): "
            f"{ll.llama_print_system_info().decode().strip()}")


def llama_logits(model, tok_list, titan_path, tol, kv="F16"):
    ll = _llama_import()
    np = numpy()
    tokens = [int(t) for t in tok_list.split(",")]
    titan = titan_logits(titan_path, len(tokens))
    # llama.cpp keeps K and V in f16 unless told: F32 isolates the weights' rounding.
    t = {"F32": ll.GGML_TYPE_F32, "F16": ll.GGML_TYPE_F16}[kv]
    m = ll.Llama(model_path=model, n_ctx=256, n_batch=256, n_ubatch=256, n_threads=2, n_threads_batch=2,
                 logits_all=True, type_k=t, type_v=t, flash_attn=False, verbose=False)
    m.eval(tokens)
    got = np.array(m.scores[:len(tokens)], dtype=np.float64)
    m.close()
    return compare(got, titan, float(tol), "llama")


def llama_tokenize(model, text_path, ids_path):
    ll = _llama_import()
    m = ll.Llama(model_path=model, vocab_only=True, verbose=False)
    raw = open(text_path, "rb").read()
    want = read_ids(ids_path)
    got = m.tokenize(raw, add_bos=False, special=False)
    m.close()
    first_difference(got, want, "llama.cpp")
    return f"tokenize: {len(raw.decode('utf-8'))} characters -> the same {len(got)} tokens"


COMMANDS = {"meta": meta, "hf-logits": hf_logits, "hf-tokenize": hf_tokenize,
            "llama-version": llama_version, "llama-logits": llama_logits, "llama-tokenize": llama_tokenize}


def run(name, argv):
    """(passed, message); a crash of a library is a failure with its message."""
    if name not in COMMANDS:
        return False, f"unknown check {name}"
    try:
        return True, COMMANDS[name](*argv)
    except CheckFailed as e:
        return False, str(e)
    except Unavailable:
        raise
    except Exception as e:
        return False, f"error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"


def main(argv):
    if not argv:
        print(__doc__.split("\n\n")[2])
        return 2
    try:
        if argv[0] == "batch":
            for line in open(argv[1], encoding="utf-8"):
                if not line.strip():
                    continue
                want, desc, name, *args = line.rstrip("\n").split("\t")
                passed, msg = run(name, args)
                print(f"{'PASS' if passed == (want == 'pass') else 'FAIL'} {desc}", flush=True)
                if msg:
                    print(f"  {msg}", flush=True)
            return 0
        passed, msg = run(argv[0], argv[1:])
        print(msg)
        return 0 if passed else 1
    except Unavailable as e:
        print(f"skip: cannot load {e}")
        return 77


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
