# bench_env.sh - what every CPU benchmark beside PyTorch checks and sets up
# first; sourced by bench.sh and bench_dist.sh after they set NAME (for
# messages), STEPS and WARMUP. Defines die().
PY=/usr/bin/python3
die() { echo "$NAME: error: $*" >&2; exit 1; }
[ "$STEPS" -gt "$WARMUP" ] || die "steps ($STEPS) must exceed warmup steps ($WARMUP)"
for t in titan-init titan-train titan-shard; do
    [ -x "bin/$t" ] || die "bin/$t not built (run make)"
done
$PY -c 'import torch' 2>/dev/null || die "PyTorch not found for $PY (apt-get install python3-torch)"
# Both sides get the same math libraries. OpenBLAS 0.3.21 misdetects some
# AVX-512 Xeons and picks a 5x slower kernel; torch links the same OpenBLAS.
if [ -z "${OPENBLAS_CORETYPE:-}" ] && grep -q avx512f /proc/cpuinfo 2>/dev/null; then
    export OPENBLAS_CORETYPE=SkylakeX
fi
export TITAN_NO_REEXEC=1
