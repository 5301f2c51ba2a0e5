#!/bin/sh
# The metadata.json example of titan-checkpoint(5), made from a real
# checkpoint: a tiny model with a BPE of its own trained 2 steps by 2 ranks
# (FSDP, zstd), its step 2 shown with every meta key (tokenizer.file names
# the tokenizer copy it carries) and the first tensor's chunks.
#
#   scripts/checkpoint-example.sh          rewrite the example in
#                                          man/titan-checkpoint.5
#   scripts/checkpoint-example.sh --check  exit 1 when the page's example has
#                                          other meta keys, top-level keys or
#                                          chunk keys than the real checkpoint
#                                          (values vary with the machine's
#                                          arithmetic and are not compared)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
bin=${TITAN_BIN:-$top/bin} # the tools under test (make check-asan: bin-asan)
page=$top/man/titan-checkpoint.5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export TITAN_NO_REEXEC=1
printf 'checkpoint example text %d\n' $(seq 1 400) > "$tmp/c.txt"
# A BPE of its own, so that the step shows the tokenizer file it carries.
"$bin/titan-shard" -q --train-tokenizer 300 "$tmp/c.txt" -o "$tmp/bpe.tiktoken"
"$bin/titan-shard" -q --tokenizer "tiktoken:$tmp/bpe.tiktoken" -o "$tmp/data" "$tmp/c.txt"
"$bin/titan-init" -q "$top/configs/debugmodel.toml" "$tmp/run" --model.tokenizer="tiktoken:$tmp/bpe.tiktoken" \
    --model.dim=32 --model.n_layers=1 \
    --model.n_heads=2 --training.seq_len=16 --training.local_batch_size=1 --training.steps=2 \
    --training.threads=1 --metrics.peak_flops=1e11 --checkpoint.interval=2 --checkpoint.compression=zstd \
    --training.dataset_path="$tmp/data"
"$bin/titan-train" -q "$tmp/run" --nproc 2
/usr/bin/python3 - "$tmp/run/checkpoint/step-00000002/metadata.json" "$page" "${1:-}" <<'EOF'
import json, re, sys
meta_path, page_path, mode = sys.argv[1:4]
m = json.load(open(meta_path))
name, t = next(iter(m["tensors"].items()))
def esc(s): return s.replace("\\", "\\e").replace("-", "\\-")
lines = ["{"]
for k in ("format", "version", "step"):
    lines.append(' "%s": %s,' % (k, json.dumps(m[k])))
lines.append(' "meta": {')
items = list(m["meta"].items())
for i, (k, v) in enumerate(items):
    lines.append('  "%s": %s%s' % (k, json.dumps(v), "," if i + 1 < len(items) else ""))
lines.append(" },")
lines.append(' "tensors": {')
lines.append('  "%s": {' % name)
lines.append('   "dtype": "%s",' % t["dtype"])
lines.append('   "shape": %s,' % json.dumps(t["shape"]))
lines.append('   "chunks": [')
for i, c in enumerate(t["chunks"]):
    lines.append("    {")
    keys = list(c)
    for j, k in enumerate(keys):
        v = c[k]
        val = '{"offset": %s, "size": %s}' % (json.dumps(v["offset"]), json.dumps(v["size"])) if k == "box" else json.dumps(v)
        lines.append('     "%s": %s%s' % (k, val, "," if j + 1 < len(keys) else ""))
    lines.append("    }%s" % ("," if i + 1 < len(t["chunks"]) else ""))
lines += ["   ]", "  },", "  ...", " }", "}"]
block = "\n".join(esc(l) for l in lines) + "\n"
begin, end = '.\\" BEGIN example: scripts/checkpoint-example.sh writes it\n', '.\\" END example\n'
text = open(page_path).read()
if begin not in text or end not in text:
    sys.exit("%s: no example markers" % page_path)
a = text.index(begin) + len(begin)
b = text.index(end)
if mode != "--check":
    open(page_path, "w").write(text[:a] + ".nf\n" + block + ".fi\n" + text[b:])
    print("%s: example of %d meta keys, %d chunks of %s" % (page_path, len(items), len(t["chunks"]), name))
    sys.exit(0)
shown = text[a:b].replace("\\-", "-").replace("\\e", "\\")
def keys_at(indent): return set(re.findall(r'^%s"([^"]+)":' % (" " * indent), shown, re.M))
want = {"top": set(m) , "meta": set(m["meta"]), "chunk": set().union(*(set(c) for c in t["chunks"]))}
got = {"top": keys_at(1), "meta": keys_at(2) - {name}, "chunk": keys_at(5)}
bad = [k for k in want if want[k] != got[k]]
for k in bad:
    print("titan-checkpoint(5) example, %s keys: page lacks %s, page has extra %s" %
          (k, sorted(want[k] - got[k]), sorted(got[k] - want[k])))
if bad:
    print("remake it: scripts/checkpoint-example.sh")
sys.exit(1 if bad else 0)
EOF
