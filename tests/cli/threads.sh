#!/bin/sh
# CLI test of CPU threads per rank: with training.threads unset, each rank
# takes the cores of its affinity set divided among the ranks of its host
# that share them, at least 1 (rank 0's info line says how many); set, it
# is the number taken. Under --nproc the ranks share the cores; under
# mpirun --bind-to core each rank has a core of its own. TAP output.
set -u
. "$(dirname "$0")/lib/tiny.sh"

shard_man_corpus
"$bin/titan-init" -q "$cfg" "$tmp/r" $TINY --training.steps=2 --checkpoint.interval=100 2>"$tmp/err" || fail "init r"
cores=$(nproc) # the affinity set's size, as sched_getaffinity says
half=$((cores / 2)); [ $half -ge 1 ] || half=1
expect 0 "threads: $cores per rank ($cores cores\{0,1\} in the affinity set, 1 rank on this host)" \
    "one process takes every core of its affinity set" -- "$bin/titan-train" "$tmp/r" --training.threads=0 --stop-at 1
expect 0 "threads: $half per rank ($cores cores\{0,1\} in the affinity set, 2 ranks on this host)" \
    "--nproc 2: the ranks split the cores" -- "$bin/titan-train" "$tmp/r" --nproc 2 --training.threads=0 \
    --training.steps=2 --metrics.peak_flops=0 $DDP
grep -q "; peak .* GFLOP/s (measured fp32 GEMM); $half threads" "$tmp/err" \
    && ok "--nproc 2: the GEMM peak is measured on the rank's threads" \
    || fail "--nproc 2: the GEMM peak is measured on the rank's threads"
expect 0 "threads: 1 per rank (1 core in the affinity set, 2 ranks on this host)" \
    "one core for two ranks: at least 1 thread each" -- taskset -c 0 "$bin/titan-train" "$tmp/r" --nproc 2 \
    --training.threads=0 --training.steps=3 $DDP
expect 0 "threads: 3 per rank (training.threads)" "training.threads is the number taken" -- \
    "$bin/titan-train" "$tmp/r" --training.threads=3 --training.steps=4
if command -v mpirun >/dev/null 2>&1 && [ "$cores" -ge 2 ]; then
    MPIRUN="mpirun --allow-run-as-root --oversubscribe -n 2"
    expect 0 "threads: 1 per rank (1 core in the affinity set, 1 rank on this host)" \
        "mpirun --bind-to core: a rank's own core is not shared" -- $MPIRUN --bind-to core \
        "$bin/titan-train" "$tmp/r" --training.threads=0 --training.steps=5 $DDP
    expect 0 "threads: $half per rank ($cores cores in the affinity set, 2 ranks on this host)" \
        "mpirun --bind-to none: the ranks split the cores" -- $MPIRUN --bind-to none \
        "$bin/titan-train" "$tmp/r" --training.threads=0 --training.steps=6 $DDP
else
    skip "threads under mpirun" "mpirun not found, or one core"
fi
tap_end
