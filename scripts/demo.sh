#!/bin/sh
# The demo: learn a 4096-token BPE vocabulary from the demo corpus (Debian's
# man-pages as text, made by scripts/corpus.sh), shard the corpus with it (2%
# of the pages held out for validation), create a run from configs/demo.toml,
# train it, and print a sample. Run by `make demo`.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
corpus=.deps/man-pages-6.03
vocab=data/man-pages-bpe4k.tiktoken
shards=data/man-pages-bpe4k
# titan needs no Python: the demo leaves out the tests' references
[ -f "$corpus.done" ] || TITAN_NO_PYREF=1 scripts/install-deps.sh
mkdir -p data
if [ ! -s "$vocab" ]; then
    rm -rf "$shards" "$shards-val"  # shards of an older vocabulary
    bin/titan-shard --train-tokenizer 4096 -o "$vocab" "$corpus"
fi
if [ ! -f "$shards/index.json" ] || [ ! -f "$shards-val/index.json" ]; then
    bin/titan-shard --force --tokenizer "tiktoken:$vocab" --split 0.02 -o "$shards" "$corpus"
fi
bin/titan-shard --stats "$shards"
bin/titan-init --force configs/demo.toml runs/demo
bin/titan-train runs/demo --sample 120 --prompt "The " --temperature 0.7 "$@"
bin/titan-trace summary runs/demo
bin/titan-trace plot runs/demo --height 12
echo "demo: loss curve in runs/demo/metrics.jsonl (titan-trace plot --svg loss.svg runs/demo), checkpoints in runs/demo/checkpoint/" >&2
