#!/bin/sh
# Installs the GGUF test's outside references into build/gguf/npm (never
# committed), pinned, from the npm registry:
#   node-llama-cpp + @node-llama-cpp/linux-x64   llama.cpp, prebuilt for CPU
#   @huggingface/gguf                            Hugging Face's GGUF parser
# Optional dependencies (CUDA, Vulkan and other platforms' binaries, ~600 MB)
# are left out, and so are install scripts: nothing is downloaded or built
# beyond the packages. Without node or npm it says so and exits 0, and
# tests/cli/gguf.sh skips the llama.cpp checks. Safe to run again.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
out=$top/build/gguf/npm
llama_version=3.22.1
gguf_version=0.4.6
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
    echo "gguf/prepare: node or npm missing: llama.cpp checks not possible" >&2
    exit 0
fi
have() { # package dir, version
    grep -q "\"version\": \"$2\"" "$out/node_modules/$1/package.json" 2>/dev/null
}
if have node-llama-cpp $llama_version && have @node-llama-cpp/linux-x64 $llama_version &&
   have @huggingface/gguf $gguf_version; then
    exit 0
fi
mkdir -p "$out"
npm install --silent --no-audit --no-fund --omit=optional --ignore-scripts --prefix "$out" \
    "node-llama-cpp@$llama_version" "@node-llama-cpp/linux-x64@$llama_version" \
    "@huggingface/gguf@$gguf_version" >&2 ||
    echo "gguf/prepare: npm install of node-llama-cpp@$llama_version failed: llama.cpp checks not possible" >&2
exit 0
