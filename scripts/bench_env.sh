# bench_env.sh - what every CPU benchmark beside PyTorch checks and sets up
# first; sourced by bench.sh and bench_dist.sh after they set NAME (for
# messages), STEPS and WARMUP. Defines die() and PY: the python of build/venv
# (scripts/pyenv.sh makes it if missing: torch 2.x, pinned in
# tests/python/requirements.txt), or BENCH_PYTHON when set (another torch,
# e.g. /usr/bin/python3 with Debian's python3-torch 1.13).
die() { echo "$NAME: error: $*" >&2; exit 1; }
[ "$STEPS" -gt "$WARMUP" ] || die "steps ($STEPS) must exceed warmup steps ($WARMUP)"
for t in titan-init titan-train titan-shard; do
    [ -x "bin/$t" ] || die "bin/$t not built (run make)"
done
if [ -n "${BENCH_PYTHON:-}" ]; then
    PY=$BENCH_PYTHON
else
    PY=$(scripts/pyenv.sh) || die "no Python environment for the PyTorch side (scripts/pyenv.sh failed)"
fi
TORCH_VERSION=$($PY -c 'import torch; print(torch.__version__)' 2>/dev/null) ||
    die "PyTorch not found for $PY (scripts/pyenv.sh makes build/venv with it)"
# titan's math library: OpenBLAS 0.3.21 misdetects some AVX-512 Xeons and
# picks a 5x slower kernel. (The venv's torch brings its own MKL and oneDNN;
# Debian's torch 1.13 links the same OpenBLAS as titan.)
if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -q avx512f /proc/cpuinfo 2>/dev/null; then
    export OPENBLAS_CORETYPE=SkylakeX
fi
export TITAN_NO_REEXEC=1
