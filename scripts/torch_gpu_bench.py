"""torch_gpu_bench.py - the PyTorch side of scripts/bench_gpu.sh, and its report.

Trains the reference Llama 3 (scripts/torch_llama.py's modules) on one GPU the way
torchtitan trains on one GPU without FSDP: parameters, gradients and AdamW
moments in fp32, forward under torch.autocast(bfloat16) (torchtitan's
maybe_enable_amp), attention through F.scaled_dot_product_attention(is_causal=True)
with the kv heads repeated (repeat_interleave, torchtitan's repeat_kv),
gradient clipping to norm 1, torch.optim.AdamW(fused=True), random tokens.
Modes: eager, and compile (torch.compile of each transformer block, as
torchtitan compiles). Prints one JSON object on stdout (also --out FILE):
step times, tokens/s over the steps after --warmup, peak
torch.cuda.max_memory_allocated, and titan's FLOPs/token for the shape.

    python3 scripts/torch_gpu_bench.py --dim 2048 --layers 16 --heads 32 --kv-heads 8 \\
        --multiple-of 256 --ffn-mult 1.5 --tie 1 --seq-len 2048 --mode compile
    python3 scripts/torch_gpu_bench.py --write-tiktoken FILE   # synthetic 128000-token BPE file
    python3 scripts/torch_gpu_bench.py --report DIR            # the table of bench_gpu.sh's runs
    python3 scripts/torch_gpu_bench.py --check    # this model = torch_llama's forward (CPU, fp32)

BENCH_GPU_SMOKE=1 runs on the CPU for a check of this script on a machine
without a GPU (torch 1.13 too: without SDPA, torch.compile or fused AdamW,
the closest stand-in is used and named in the output). Exit status 77: the
mode cannot run here (e.g. no torch.compile), one line saying why.
"""
import argparse
import base64
import contextlib
import glob
import itertools
import json
import math
import os
import resource
import sys
import time

SMOKE = os.environ.get("BENCH_GPU_SMOKE", "") not in ("", "0")


def hidden_dim(dim: int, multiple_of: int, ffn_mult: float) -> int:
    """titan_llama_hidden_dim: int(8 dim / 3), times the multiplier, rounded up."""
    h = int(2.0 * 4.0 * dim / 3.0)
    if ffn_mult > 0:
        h = int(round(ffn_mult * 1e6) / 1e6 * h)
    return multiple_of * ((h + multiple_of - 1) // multiple_of)


def flops_per_token(dim, layers, heads, kv_heads, ffn, vocab, tie, seq_len) -> float:
    """titan_llama_flops_per_token (lib/model/llama_config.c), term for term:
    6 x matmul parameters + 12 x layers x dim x seq_len. The matmul count
    leaves out tok_embeddings' lookup only: the output head counts, tied
    (1B) or not."""
    hd = dim // heads
    qd, kvd = heads * hd, kv_heads * hd
    layer = 2 * dim + qd * dim + 2 * kvd * dim + dim * qd + 3 * ffn * dim
    nonembed = layers * layer + dim + vocab * dim
    return 6.0 * nonembed + 12.0 * layers * dim * seq_len


def write_tiktoken(path: str, n: int) -> None:
    """A byte-level BPE file in tiktoken's format: the 256 bytes, then every
    2-byte string, then 3-byte strings, n in all. titan adds Llama 3's 256
    special tokens: n = 128000 gives Llama 3's vocabulary size, 128256. The
    merges are meaningless; the benchmark needs only the size."""
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        rank = 0
        for length in itertools.count(1):
            for t in itertools.product(range(256), repeat=length):
                if rank == n:
                    break
                f.write("%s %d\n" % (base64.b64encode(bytes(t)).decode(), rank))
                rank += 1
            if rank == n:
                break
    os.replace(tmp, path)


# ------------------------------------------------------------------ training

def build_model(torch, a, dev, fallback=SMOKE):
    """torch_llama.Llama on dev, its attention swapped for the SDPA forward
    (fallback: a plain causal softmax where torch has no SDPA)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import torch_llama as tl
    import torch.nn.functional as F

    c = tl.LlamaConfig(dim=a.dim, n_layers=a.layers, n_heads=a.heads, n_kv_heads=a.kv_heads,
                       vocab_size=a.vocab, multiple_of=a.multiple_of,
                       ffn_dim_multiplier=a.ffn_mult or None, rope_scaling_factor=a.rope_scaling,
                       tie_embeddings=bool(a.tie))
    sdpa = getattr(F, "scaled_dot_product_attention", None)
    if sdpa is None and not fallback:
        raise SystemExit("torch_gpu_bench: error: torch %s has no F.scaled_dot_product_attention"
                         % torch.__version__)
    use_gqa = a.gqa == "enable" and sdpa is not None

    def rope(x, cos, sin):
        # Interleaved pairs (x0, x1) rotated in fp32: torch_llama's complex
        # product written with real numbers (inductor compiles it in place).
        xf = x.float().reshape(*x.shape[:-1], -1, 2)
        x0, x1 = xf[..., 0], xf[..., 1]
        out = torch.stack((x0 * cos - x1 * sin, x0 * sin + x1 * cos), dim=-1)
        return out.flatten(3).type_as(x)

    class SdpaAttention(tl.Attention):
        def forward(self, x, freqs, mask):
            B, T, _ = x.shape
            cos, sin = freqs
            q = rope(self.wq(x).view(B, T, self.nh, self.hd), cos, sin)
            k = rope(self.wk(x).view(B, T, self.nkv, self.hd), cos, sin)
            v = self.wv(x).view(B, T, self.nkv, self.hd)
            rep = self.nh // self.nkv
            if rep > 1 and not use_gqa:  # query head h reads kv head h // rep
                k = k.repeat_interleave(rep, dim=2)
                v = v.repeat_interleave(rep, dim=2)
            q, k, v = (t.transpose(1, 2) for t in (q, k, v))
            if sdpa is not None:
                if use_gqa:
                    o = sdpa(q, k, v, is_causal=True, enable_gqa=True)
                else:
                    o = sdpa(q, k, v, is_causal=True)
            else:  # smoke test on torch 1.13 only
                s = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.hd)
                s = s.masked_fill(torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1),
                                  float("-inf"))
                o = torch.matmul(torch.softmax(s.float(), dim=-1).type_as(v), v)
            return self.wo(o.transpose(1, 2).reshape(B, T, self.nh * self.hd))

    # Built on the device itself (a CPU init of 2 billion parameters takes
    # minutes), then titan's init scales drawn there (plain normals, no
    # truncation): speed needs only a loss that starts near ln V.
    ctx = torch.device(dev) if hasattr(torch.device, "__enter__") else contextlib.nullcontext()
    with ctx:
        m = tl.Llama(c)
    m = m.to(dev)
    with torch.no_grad():
        for name, p in m.named_parameters():
            if p.dim() == 1:
                p.fill_(1.0)
            elif name == "tok_embeddings.weight":
                p.normal_(0.0, 1.0 / a.dim if a.tie else 1.0)
            elif name == "output.weight":
                p.normal_(0.0, a.dim ** -0.5)
            else:
                p.normal_(0.0, 0.02)
    for layer in m.layers:
        layer.attention.__class__ = SdpaAttention  # same parameters, SDPA forward
    hd = a.dim // a.heads
    angles = tl.rope_angles(c, a.seq_len)  # fp32, with the Llama 3.1 scaling
    freqs = (angles.cos()[:, None, :].to(dev), angles.sin()[:, None, :].to(dev))  # [T, 1, hd/2]
    attn = ("F.scaled_dot_product_attention(is_causal=True)" if sdpa else
            "softmax(QK^T) V with a causal mask (torch %s has no SDPA)" % torch.__version__)
    attn += ", GQA %s" % ("enable_gqa=True" if use_gqa else "by repeat_interleave of k, v")
    return m, c, freqs, attn, tl.hidden_dim(c), hd


def forward(model, tok, freqs):
    """Logits of torch_llama.Llama with the rotary tables made once, no mask."""
    h = model.tok_embeddings(tok)
    for layer in model.layers:
        h = layer(h, freqs, None)
    return model.output(model.norm(h))


def check() -> int:
    """The benchmark's model (SDPA, real-valued RoPE) against torch_llama's
    reference forward, fp32 on the CPU, tied and untied, GQA both ways."""
    import torch
    worst = 0.0
    for tie, gqa in ((1, "repeat"), (0, "enable")):
        a = argparse.Namespace(dim=64, layers=2, heads=8, kv_heads=2, vocab=300, multiple_of=32,
                               ffn_mult=1.5, rope_scaling=32.0, tie=tie, seq_len=48, gqa=gqa)
        torch.manual_seed(0)
        m, _, freqs, attn, _, _ = build_model(torch, a, "cpu", fallback=True)
        tok = torch.randint(0, a.vocab, (2, a.seq_len))
        with torch.no_grad():
            got = forward(m, tok, freqs)
            for layer in m.layers:  # back to torch_llama's own attention
                layer.attention.__class__ = layer.attention.__class__.__bases__[0]
            want = m(tok)
        err = ((got - want).norm() / want.norm()).item()
        worst = max(worst, err)
        print("check: %s, tie %d: relative error %.3g" % (attn, tie, err))
    if not worst < 1e-5:
        print("check: FAILED (tolerance 1e-5)")
        return 1
    print("check: ok (torch %s)" % torch.__version__)
    return 0


def make_adamw(torch, params, lr):
    kw = dict(lr=lr, betas=(0.9, 0.95), eps=1e-8, weight_decay=0.1)
    try:
        return torch.optim.AdamW(params, fused=True, **kw), "torch.optim.AdamW(fused=True)"
    except (TypeError, RuntimeError, ValueError) as e:
        if not SMOKE:
            raise SystemExit("torch_gpu_bench: error: AdamW(fused=True): %s" % e)
        why = str(e).splitlines()[0] if str(e) else type(e).__name__
        return torch.optim.AdamW(params, **kw), "torch.optim.AdamW (fused unavailable: %s)" % why


def bench(a) -> dict:
    import torch
    import torch.nn.functional as F

    dev = "cpu" if SMOKE else "cuda"
    if dev == "cuda" and not torch.cuda.is_available():
        raise SystemExit("torch_gpu_bench: error: torch.cuda.is_available() is False (torch %s)"
                         % torch.__version__)
    if a.mode.startswith("compile") and not hasattr(torch, "compile"):
        print("skipped: torch %s has no torch.compile" % torch.__version__, file=sys.stderr)
        sys.exit(77)
    t_start = time.perf_counter()
    torch.manual_seed(a.seed)
    if dev == "cuda":
        torch.cuda.reset_peak_memory_stats()
    model, c, freqs, attn, ffn, hd = build_model(torch, a, dev)
    fp8 = a.mode.endswith("-fp8")
    if fp8:  # torchtitan's float8 converter: torchao's Float8Linear on every linear but the output
        try:
            from torchao.float8 import Float8LinearConfig, convert_to_float8_training
        except ImportError as e:
            print("skipped: no torchao (%s)" % e, file=sys.stderr)
            sys.exit(77)
        convert_to_float8_training(model, config=Float8LinearConfig.from_recipe_name(a.fp8_recipe),
                                   module_filter_fn=lambda mod, fqn: fqn != "output")
    if a.mode.startswith("compile"):
        dyn = getattr(torch, "_dynamo", None)
        for key in ("recompile_limit", "cache_size_limit"):  # the newer name first
            if dyn is not None and hasattr(dyn.config, key):
                # room for one graph per block, should the blocks not share one
                setattr(dyn.config, key, max(getattr(dyn.config, key), 4 * a.layers))
                break
        for i, layer in enumerate(model.layers):
            model.layers[i] = torch.compile(layer)
    params = list(model.parameters())  # the tied head is listed once
    opt, opt_name = make_adamw(torch, params, a.lr)
    n_params = sum(p.numel() for p in params)
    g = torch.Generator(device="cpu").manual_seed(a.seed)
    data = torch.randint(0, a.vocab, (a.steps, a.batch, a.seq_len + 1), generator=g).to(dev)
    amp = torch.autocast(device_type=dev, dtype=torch.bfloat16)

    def step(i):
        tok, tgt = data[i, :, :-1], data[i, :, 1:]
        with amp:
            logits = forward(model, tok, freqs)
        loss = F.cross_entropy(logits.flatten(0, 1).float(), tgt.reshape(-1))
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.item(), float(gn)  # .item() waits for the step

    times, losses = [], []
    for i in range(a.steps):
        if dev == "cuda":
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        try:
            loss, gn = step(i)
        except Exception as e:  # noqa: BLE001 - a smoke run skips what the CPU cannot compile
            if SMOKE and a.mode == "compile" and i == 0:
                print("skipped: torch.compile failed on the CPU: %s"
                      % (str(e).strip().splitlines() or [type(e).__name__])[0], file=sys.stderr)
                sys.exit(77)
            raise
        if dev == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
        losses.append(loss)
        print("step %d: %.3f s, loss %.4f, grad norm %.3f" % (i + 1, times[-1], loss, gn),
              file=sys.stderr, flush=True)
        if not math.isfinite(loss):
            raise SystemExit("torch_gpu_bench: error: non-finite loss at step %d" % (i + 1))
        # Soft time limit: stop once the next step would pass it (>= 1 timed step).
        used = time.perf_counter() - t_start
        if a.time_limit > 0 and i + 1 > a.warmup and used + times[-1] > a.time_limit:
            break
    timed = times[a.warmup:]
    if not timed:
        raise SystemExit("torch_gpu_bench: error: %d steps, none after the %d warmup steps"
                         % (len(times), a.warmup))
    tps = a.batch * a.seq_len * len(timed) / sum(timed)
    fpt = flops_per_token(a.dim, a.layers, a.heads, a.kv_heads, ffn, a.vocab, a.tie, a.seq_len)
    out = dict(
        impl="torch", mode=a.mode, torch_version=torch.__version__, device=dev,
        device_name=torch.cuda.get_device_name(0) if dev == "cuda" else "cpu (smoke test)",
        precision="fp32 params, grads and AdamW state; bf16 torch.autocast forward",
        attention=attn, optimizer=opt_name,
        compile="torch.compile of each block" if a.mode.startswith("compile") else "none",
        float8=("torchao %s Float8Linear, recipe %s, every linear but the output"
                % (getattr(sys.modules.get("torchao"), "__version__", "?"), a.fp8_recipe)) if fp8 else "none",
        dim=a.dim, layers=a.layers, heads=a.heads, kv_heads=a.kv_heads, head_dim=hd, ffn=ffn,
        vocab=a.vocab, tie=a.tie, seq_len=a.seq_len, batch=a.batch, params=n_params,
        flops_per_token=fpt, warmup=a.warmup, steps_run=len(times), step_time_s=times,
        loss=losses, first_step_s=times[0], tokens_per_s=tps,
        wall_s=time.perf_counter() - t_start)
    if dev == "cuda":
        out["peak_alloc_bytes"] = torch.cuda.max_memory_allocated()
        out["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
    else:
        out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return out


# ------------------------------------------------------------------ report

def _read(path, default=""):
    try:
        with open(path) as f:
            return f.read()
    except OSError:
        return default


def _why(log: str, rc: int, timeout: int) -> str:
    """The line that says why a run gave no (more) numbers."""
    lines = [l.strip() for l in log.splitlines() if l.strip()]
    msg = ""
    for l in reversed(lines):
        if ("error" in l.lower() or l.startswith("skipped")) and not l.startswith("Traceback"):
            msg = l
            break
    if rc in (124, 137):  # timeout(1): the run's own limit
        return ("timed out after %d s" % timeout) + (" (%s)" % msg[:240] if msg else "")
    if not msg:
        msg = lines[-1] if lines else "no output (exit %d)" % rc
    return msg[:300]


def _gpu_peak(path: str, base: float):
    vals = []
    for l in _read(path).splitlines():
        try:
            vals.append(float(l.strip().split(",")[0]))
        except ValueError:
            pass
    return (max(vals) - base) / 1024.0 if vals else None


def report(d: str, peak: float) -> int:
    env = {}
    for l in _read(os.path.join(d, "env.txt")).splitlines():
        if "=" in l:
            k, v = l.split("=", 1)
            env[k.strip()] = v.strip()
    rows = []
    for mp in sorted(glob.glob(os.path.join(d, "*.meta.json"))):
        meta = json.load(open(mp))
        base = mp[: -len(".meta.json")]
        ffn = hidden_dim(meta["dim"], meta["multiple_of"], meta["ffn_mult"])
        fpt = flops_per_token(meta["dim"], meta["layers"], meta["heads"], meta["kv_heads"], ffn,
                              meta["vocab"], meta["tie"], meta["seq"])
        r = dict(meta, ffn=ffn, flops_per_token=fpt, tokens_per_s=None, mfu=None, peak_gib=None,
                 gpu_used_gib=_gpu_peak(base + ".gpu", float(meta.get("gpu_base_mib", 0))),
                 note="")
        rc = int(meta.get("rc", 1))
        log = _read(base + ".log")
        if meta.get("skip"):
            r["note"] = "not run: " + meta["skip"]
        elif meta["impl"] == "torch":
            res = json.loads(_read(base + ".json") or "null") if rc == 0 else None
            if res:
                r["result"] = res
                r["tokens_per_s"] = res["tokens_per_s"]
                pb = res.get("peak_alloc_bytes", res.get("peak_rss_bytes"))
                r["peak_gib"] = pb / 2**30 if pb else None
                r["note"] = "%d timed steps; first step %.1f s" % (
                    res["steps_run"] - res["warmup"], res["first_step_s"])
                if res["flops_per_token"] != fpt:
                    r["note"] += "; FLOPs/token differ: %g" % res["flops_per_token"]
            else:
                why = _why(log, rc, meta["timeout_s"])
                r["note"] = why if why.startswith("skipped") else "failed: " + why
        else:  # titan: metrics.jsonl, complete or cut by the time limit
            steps = []
            for l in _read(base + ".metrics.jsonl").splitlines():
                try:
                    steps.append(json.loads(l))
                except ValueError:
                    pass
            # the step after meta["steps"] is the profiled one (bench_gpu.sh)
            timed = [s["step_time_s"] for s in steps[meta["warmup"]:meta["steps"]]]
            if timed:
                r["tokens_per_s"] = meta["batch"] * meta["seq"] * len(timed) / sum(timed)
                r["note"] = "%d timed steps; first step %.1f s" % (len(timed), steps[0]["step_time_s"])
                # which attention ran: the CUDA backend's note ("attention through cuDNN 9.x.y")
                for l in log.splitlines():
                    if "attention through" in l:
                        r["note"] += "; " + l[l.index("attention through"):].split(":")[0]
                        break
                if rc != 0:
                    r["note"] += "; then %s" % _why(log, rc, meta["timeout_s"])
                # titan's own count ("%.3g FLOPs/token" in its start-up line)
                for l in log.splitlines():
                    w = l.split()
                    if "FLOPs/token;" in w:
                        r["titan_flops_per_token"] = float(w[w.index("FLOPs/token;") - 1])
                        if abs(r["titan_flops_per_token"] - fpt) > 0.01 * fpt:
                            r["note"] += "; titan logged %s FLOPs/token" % w[w.index("FLOPs/token;") - 1]
                        break
            else:
                r["note"] = "failed: " + _why(log, rc, meta["timeout_s"])
            if r["gpu_used_gib"] is not None and timed:
                r["peak_gib"] = r["gpu_used_gib"]  # cudaMalloc'd directly: no caching allocator
        if r["tokens_per_s"]:
            r["mfu"] = r["tokens_per_s"] * fpt / peak
        rows.append(r)

    smoke = env.get("smoke") == "1"
    md = []
    md.append("## GPU benchmark: titan vs PyTorch, %s, %s" % (env.get("date", "?"), env.get("gpu", "?")))
    md.append("")
    md.append("- machine: %s; driver %s; %s; torch %s; titan %s"
              % (env.get("gpu", "?"), env.get("driver", "?"), env.get("nvcc", "?"),
                 env.get("torch", "?"), env.get("titan", "?")))
    md.append("- peak used for MFU: %.4g FLOP/s (%s), the same for every row" % (peak, env.get("peak_source", "")))
    md.append("- FLOPs/token: titan's titan_llama_flops_per_token, 6 x non-embedding parameters + "
              "12 x layers x dim x seq_len (a tied output head, the 1B's, is not counted)")
    md.append("- PyTorch: fp32 parameters, gradients and AdamW state, forward in bf16 autocast "
              "(torchtitan on one GPU), F.scaled_dot_product_attention(is_causal=True), GQA by "
              "repeat_interleave, torch.optim.AdamW(fused=True), clip to norm 1; compile = "
              "torch.compile of each block")
    titan_modes = {r["mode"] for r in rows if r["impl"] == "titan"}
    if titan_modes & {"bf16", "bf16-det"}:
        md.append("- titan bf16: training.mixed_precision_param = bfloat16: a bf16 copy of the "
                  "parameters and bf16 activations for compute (cuBLASLt bf16 GEMMs with fp32 "
                  "accumulation), fp32 master weights, gradients and AdamW state; attention as "
                  "titan-train chooses by default: cuDNN's fused flash attention where "
                  "libcudnn.so.9 opens (kernels/attention_cudnn.cu; its backward is not bitwise "
                  "repeatable), the row's note says which")
    if "bf16-det" in titan_modes:
        md.append("- titan bf16, deterministic: the same with training.deterministic = true: "
                  "titan's own tensor-core flash attention (kernels/attention_tc.cu), every "
                  "step bitwise repeatable")
    if "fp32" in titan_modes:
        md.append("- titan fp32: fp32 throughout, matmuls without TF32: its ceiling is the fp32 "
                  "peak (67 TFLOP/s on H100 SXM, 6.8% of 989)")
    md.append("- random tokens, vocab 128256; tokens/s over the steps after the first %s; peak GiB: "
              "torch.cuda.max_memory_allocated for PyTorch, the GPU's memory.used rise during the "
              "run (nvidia-smi, CUDA context included) for titan; GPU GiB: that rise for every row"
              % env.get("warmup", "?"))
    if smoke:
        md.append("- SMOKE TEST on the CPU with tiny shapes: the numbers mean nothing")
    md.append("")
    md.append("| implementation | mode | shape | seq x batch | tokens/s | MFU | peak GiB | GPU GiB | note |")
    md.append("| --- | --- | --- | --- | ---: | ---: | ---: | ---: | --- |")

    def f(v, fmt):
        return fmt % v if v is not None else "-"

    for r in rows:
        shape = "%s (dim %d, %d layers, %d/%d heads, ffn %d%s)" % (
            r["shape"], r["dim"], r["layers"], r["heads"], r["kv_heads"], r["ffn"],
            ", tied" if r["tie"] else "")
        impl = "PyTorch %s" % env.get("torch", "").split(" ")[0] if r["impl"] == "torch" else "titan"
        mode = {"eager": "eager bf16", "compile": "compile bf16", "compile-fp8": "compile bf16, torchao float8 tensorwise",
                "fp32": "fp32", "bf16": "bf16 (fp32 master)", "bf16-det": "bf16 (fp32 master), deterministic",
                "bf16-serial": "bf16 (fp32 master), AdamW in order",
                "bf16-fp8": "bf16 (fp32 master), float8 tensorwise",
                "bf16-fp8r": "bf16 (fp32 master), float8 rowwise"}.get(r["mode"], r["mode"])
        md.append("| %s | %s | %s | %d x %d | %s | %s | %s | %s | %s |" % (
            impl, mode, shape, r["seq"], r["batch"], f(r["tokens_per_s"], "%.0f"),
            f(r["mfu"] and 100 * r["mfu"], "%.2f%%"), f(r["peak_gib"], "%.1f"),
            f(r["gpu_used_gib"], "%.1f"), r["note"].replace("|", "/")))
    text = "\n".join(md) + "\n"
    with open(os.path.join(d, "bench_gpu.md"), "w") as fo:
        fo.write(text)
    with open(os.path.join(d, "bench_gpu.json"), "w") as fo:
        json.dump(dict(env=env, peak_flops=peak, rows=rows), fo, indent=1)
    sys.stdout.write(text)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dim", type=int, default=2048)
    ap.add_argument("--layers", type=int, default=16)
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--multiple-of", type=int, default=256)
    ap.add_argument("--ffn-mult", type=float, default=1.5, help="0 = none")
    ap.add_argument("--rope-scaling", type=float, default=32.0, help="0 = none")
    ap.add_argument("--tie", type=int, default=1)
    ap.add_argument("--seq-len", type=int, default=2048)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--warmup", type=int, default=3, help="steps left out of tokens/s")
    ap.add_argument("--time-limit", type=float, default=0.0,
                    help="seconds: take no more steps after warmup once this would pass (0: none)")
    ap.add_argument("--mode", choices=("eager", "compile", "compile-fp8"), default="eager")
    ap.add_argument("--fp8-recipe", default="tensorwise", help="torchao's recipe for compile-fp8")
    ap.add_argument("--gqa", choices=("repeat", "enable"), default="repeat",
                    help="repeat: repeat_interleave k, v (torchtitan); enable: SDPA's enable_gqa")
    ap.add_argument("--lr", type=float, default=8e-4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="", help="also write the JSON here")
    ap.add_argument("--write-tiktoken", metavar="FILE", default="")
    ap.add_argument("--tiktoken-tokens", type=int, default=128000)
    ap.add_argument("--report", metavar="DIR", default="")
    ap.add_argument("--check", action="store_true",
                    help="compare the benchmark's model with torch_llama's forward (CPU, fp32)")
    ap.add_argument("--peak-flops", type=float, default=989e12)
    a = ap.parse_args()
    if a.write_tiktoken:
        write_tiktoken(a.write_tiktoken, a.tiktoken_tokens)
        return 0
    if a.report:
        return report(a.report, a.peak_flops)
    if a.check:
        return check()
    if a.steps <= a.warmup:
        ap.error("--steps (%d) must exceed --warmup (%d)" % (a.steps, a.warmup))
    res = bench(a)
    text = json.dumps(res)
    if a.out:
        with open(a.out + ".tmp", "w") as fo:
            fo.write(text + "\n")
        os.replace(a.out + ".tmp", a.out)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
