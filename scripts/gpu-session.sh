#!/bin/sh
# gpu-session.sh - everything one lent GPU call should run, in order of
# worth, inside SESSION_S seconds (540: a device run with timeout_s 600 keeps
# a minute for copying results back):
#   1. scripts/gpu-check.sh: build, every op against the CPU backend, loss
#      curves on cpu and cuda, resume bit for bit, bf16, cuDNN attention;
#      compute-sanitizer memcheck for MEMCHECK_S seconds (60 here), each
#      test or training run at most STEP_TIMEOUT_S (120 here), the whole
#      check at most CHECK_S (300: gpu-check's CHECK_BUDGET_S, so no command
#      of it runs past that);
#   2. scripts/bench_gpu.sh with the time left (BENCH_BUDGET; its runs get
#      at most BENCH_RUN_TIMEOUT, 100 here), titan beside PyTorch eager and
#      torch.compile, the 1B shape only unless BENCH_SHAPES says otherwise
#      (its 8 rows fill the few minutes left; the 8B rows want a call of
#      their own: BENCH_SHAPES=8B scripts/bench_gpu.sh); skipped when less
#      than BENCH_MIN_S (90) is left.
# Results in $OUT (the device runner fetches at most 8 files): gpu-check's
# summary.txt, loss_cpu_cuda.txt, loss_cpu_bf16.txt, gpu-check.tar.gz and
# bench_gpu's bench_gpu.md, bench_gpu.json, bench_gpu-logs.tar.gz; the last
# lines printed are both summaries.
#
# From a machine where apt works, once: scripts/gpu-deps.sh fetch (the C
# libraries the device image lacks, into .gpu-deps/), then the device run
#     command: scripts/gpu-session.sh    carry: [".gpu-deps"]    timeout_s: 600
# Exit status: gpu-check's (0 when every check passed).
set -u
top=$(cd "$(dirname "$0")/.." && pwd)
cd "$top" || exit 1
t0=$(date +%s)
SESSION_S=${SESSION_S:-540}
CHECK_S=${CHECK_S:-300}
BENCH_MIN_S=${BENCH_MIN_S:-90}
for v in "SESSION_S=$SESSION_S" "CHECK_S=$CHECK_S" "BENCH_MIN_S=$BENCH_MIN_S"; do
    case ${v#*=} in ''|*[!0-9]*) echo "gpu-session: error: $v: expected seconds" >&2; exit 2 ;; esac
done
[ "$CHECK_S" -le "$SESSION_S" ] || CHECK_S=$SESSION_S

# The carried C libraries (when here) for both children: bench_gpu once
# failed to find them after gpu-check (2026-11-26: "bin/titan-shard does not
# run"), which unpacks them in its own environment only.
if [ -d .gpu-deps ]; then
    set -- use # dash's "." passes no arguments: the sourced script sees ours
    # shellcheck disable=SC1091
    . scripts/gpu-deps.sh use || echo "gpu-session: .gpu-deps would not unpack; gpu-check and bench_gpu try again"
fi

# gpu-check keeps to CHECK_S itself; the outer timeout is for a hang it
# cannot see (the build). It traps TERM and still writes what it has, once
# its child is gone (titan-train --nproc gives its ranks 30 s): hence -k 60.
MEMCHECK_S=${MEMCHECK_S:-60} STEP_TIMEOUT_S=${STEP_TIMEOUT_S:-120} CHECK_BUDGET_S=$CHECK_S \
    timeout -k 60 $((CHECK_S + 60)) scripts/gpu-check.sh
check_rc=$?
[ $check_rc -ne 124 ] || echo "gpu-session: gpu-check stopped from outside after $((CHECK_S + 60)) s"

left=$((SESSION_S - ($(date +%s) - t0)))
if [ "$left" -ge "$BENCH_MIN_S" ]; then
    # bench_gpu's budget counts from its own start; 15 s for its table and archive
    BENCH_BUDGET=$((left - 15)) BENCH_RUN_TIMEOUT=${BENCH_RUN_TIMEOUT:-100} BENCH_SHAPES=${BENCH_SHAPES:-1B} \
        timeout -k 10 "$left" scripts/bench_gpu.sh
    echo "gpu-session: bench_gpu exit $?"
else
    echo "gpu-session: bench_gpu skipped: $left s left, BENCH_MIN_S=$BENCH_MIN_S"
fi
echo
echo "gpu-session: $(( $(date +%s) - t0 )) s of SESSION_S=$SESSION_S"
[ ! -f build/gpu-check/summary.txt ] || { echo "--- gpu-check"; cat build/gpu-check/summary.txt; }
[ ! -f build/bench_gpu/bench_gpu.md ] || { echo "--- bench_gpu"; cat build/bench_gpu/bench_gpu.md; }
exit $check_rc
