"""bench_tokenizer.py - the reference side of scripts/bench_tokenizer.sh:
encoding speed of OpenAI's tiktoken (cl100k_base's ranks, Llama 3's pattern,
as test_bpe checks them) and Hugging Face's tokenizers (the same ranks as a
Llama-3-style tokenizer.json) on the documents titan-shard reads, in the
same run, with build/venv's python.

    bench_tokenizer.py THREADS CL100K.tiktoken CL100K.json PATH...

PATH: a file (one document) or a directory (each file under it one
document, as titan-shard reads it).

Prints, for each library, "NAME THREADS MB_PER_S TOKENS": the time of
encoding alone (the files are read and decoded first; tiktoken's
encode_ordinary_batch and tokenizers' encode_batch_fast over the documents,
no special tokens), the best of a few passes. THREADS sets both libraries'
threads (tokenizers' Rayon pool is sized when first used, so one THREADS per
process).
"""
import os
import sys
import time

threads = int(sys.argv[1])
os.environ["RAYON_NUM_THREADS"] = str(threads)  # before tokenizers starts its pool
os.environ["TOKENIZERS_PARALLELISM"] = "true" if threads > 1 else "false"
os.environ["TIKTOKEN_CACHE_DIR"] = ""
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "tokenizer"))
import gen_reference  # noqa: E402  (tiktoken's cl100k_base() on the local ranks, and Llama 3's pattern)

tiktoken_path, json_path = sys.argv[2], sys.argv[3]
files = []
for p in sys.argv[4:]:
    files += gen_reference.pages(p) if os.path.isdir(p) else [p]
docs = []
for f in files:
    with open(f, "rb") as fh:
        docs.append(fh.read().decode("utf-8"))
nbytes = sum(len(d.encode("utf-8")) for d in docs)
PASSES = int(os.environ.get("BENCH_PASSES", "2"))


def best(encode):
    encode(docs[:20])  # warm up
    secs, tokens = float("inf"), 0
    for _ in range(PASSES):
        t0 = time.perf_counter()
        out = encode(docs)
        secs = min(secs, time.perf_counter() - t0)
        tokens = sum(len(x) for x in out)
    return nbytes / 1e6 / secs, tokens


import tiktoken  # noqa: E402
llama3, _ = gen_reference.encodings(tiktoken_path)
mbps, tokens = best(lambda ds: llama3.encode_ordinary_batch(ds, num_threads=threads))
print("tiktoken-%s %d %.2f %d" % (tiktoken.__version__, threads, mbps, tokens), flush=True)

import tokenizers  # noqa: E402
hf = gen_reference.hf_tokenizer(json_path)
mbps, tokens = best(lambda ds: [e.ids for e in hf.encode_batch_fast(ds, add_special_tokens=False)])
print("tokenizers-%s %d %.2f %d" % (tokenizers.__version__, threads, mbps, tokens), flush=True)
