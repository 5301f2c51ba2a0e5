#!/bin/sh
# The demo: shard the nlp-corpus package (read straight from its .tgz), create a
# run from configs/demo.toml, train it, and print a sample. Run by `make demo`.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top"
corpus=.deps/nlp-corpus-4.4.0.tgz
[ -s "$corpus" ] || scripts/install-deps.sh
if [ ! -f data/nlp-corpus/index.json ]; then
    bin/titan-shard -o data/nlp-corpus "$corpus"
fi
bin/titan-shard --stats data/nlp-corpus
bin/titan-init --force configs/demo.toml runs/demo
bin/titan-train runs/demo --sample 300 --prompt "The " --temperature 0.7 "$@"
echo "demo: loss curve in runs/demo/metrics.jsonl, checkpoints in runs/demo/checkpoint/" >&2
