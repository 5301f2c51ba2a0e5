#!/bin/sh
# llama.cpp for the GGUF test (tests/cli/gguf.sh): llama-cpp-python, llama.cpp
# and its ctypes bindings, pinned, installed from a wheel in the wheelhouse
# (~/.cache/titan/wheels, or TITAN_WHEELHOUSE; never in the tree) into
# build/gguf/site, which the test puts on PYTHONPATH for build/venv's python
# (scripts/pyenv.sh). PyPI has only its source for Linux, so the wheel is
# built here, CPU only:
#
#   sh tests/gguf/prepare.sh          install it if its wheel is in the
#                                     wheelhouse; print the site directory,
#                                     or why not (exit 77)
#   sh tests/gguf/prepare.sh --build  first build the wheel from the sdist
#                                     (hash-checked) when it is missing: 19 minutes
#                                     on 2 cores shared with other jobs
#
# The build is llama.cpp's CMake build with -march=native (GGML_NATIVE's
# default): the wheel is for this machine's CPU, not for another's.
# diskcache, which llama_cpp imports and build/venv lacks, is installed beside
# it. Safe to run again.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
site=$top/build/gguf/site
wheels=${TITAN_WHEELHOUSE:-${XDG_CACHE_HOME:-${HOME:-/root}/.cache}/titan/wheels}
version=0.3.36
sdist_sha256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
diskcache=diskcache-5.6.3-py3-none-any.whl
diskcache_sha256=5e31b2d5fbad117cc363ebaf6b689474db18a1f6438bc82358b024abd4c2ca19
say() { echo "gguf/prepare: $*"; }

# build/venv's python: $TITAN_PY where run-tests.sh or gguf.sh found it already
py=${TITAN_PY-$("$top/scripts/pyenv.sh" --check 2>/dev/null)} || py=""
[ -n "$py" ] || { say "build/venv is not made (scripts/pyenv.sh)"; exit 77; }
mkdir -p "$wheels"
whl() { ls "$wheels"/llama_cpp_python-$version-*.whl 2>/dev/null | head -n 1; }
if [ -z "$(whl)" ] && [ "${1:-}" = --build ]; then
    req=$(mktemp); trap 'rm -f "$req"' EXIT
    echo "llama-cpp-python==$version --hash=sha256:$sdist_sha256" >"$req"
    say "building llama-cpp-python $version from its sdist (CPU only, 2 jobs; 19 minutes measured on 2 busy cores)" >&2
    start=$(date +%s)
    CMAKE_ARGS="-DGGML_CUDA=OFF -DGGML_BLAS=OFF -DLLAMA_CURL=OFF" CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2} \
        "$py" -m pip wheel -q --disable-pip-version-check --no-deps --require-hashes -r "$req" -w "$wheels" >&2 ||
        { say "pip wheel llama-cpp-python==$version failed"; exit 77; }
    say "built $(basename "$(whl)") in $(( $(date +%s) - start )) s" >&2
fi
if [ -z "$(whl)" ]; then
    say "no llama-cpp-python $version wheel in $wheels (sh tests/gguf/prepare.sh --build makes it)"; exit 77
fi
# installed already from this very wheel?
stamp="$(sha256sum "$(whl)" | cut -d' ' -f1) $(basename "$(whl)") diskcache==5.6.3"
if [ "$(cat "$site/.stamp" 2>/dev/null)" = "$stamp" ]; then echo "$site"; exit 0; fi
if [ ! -f "$wheels/$diskcache" ]; then
    "$py" -m pip download -q --disable-pip-version-check --no-deps -d "$wheels" "diskcache==5.6.3" >&2 ||
        { say "pip download diskcache==5.6.3 failed"; exit 77; }
fi
echo "$diskcache_sha256  $wheels/$diskcache" | sha256sum -c --status ||
    { say "$wheels/$diskcache: sha256 mismatch"; exit 77; }
rm -rf "$site"
"$py" -m pip install -q --disable-pip-version-check --no-deps --no-index --target "$site" \
    "$(whl)" "$wheels/$diskcache" >&2 || { say "pip install of $(basename "$(whl)") failed"; rm -rf "$site"; exit 77; }
echo "$stamp" >"$site/.stamp"
echo "$site"
