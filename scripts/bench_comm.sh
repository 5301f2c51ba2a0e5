#!/bin/sh
# bench_comm.sh - all-reduce bandwidth of the shared-memory communicator
# (lib/comm/comm_shm.c) on 2 and 4 ranks of the local launcher, f32, 1 to 64 MB,
# beside its reference measured in the same run: memcpy of the same sizes in
# one process (the shm all-reduce moves each byte about five times: copy in,
# read for the reduction, write the sum, copy out). Also barrier and 1-element
# all-reduce latency, and that latency on a communicator the flight recorder
# records (titan-train's default) beside one it does not. Bus bandwidth as nccl-tests defines it:
# busbw = bytes / time * 2 (n - 1) / n.
#
#   BENCH_COMM_CHUNK   bytes each rank stages per pipeline step (default 1 MiB)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
prog=$top/build/tests/test_dist
[ -x "$prog" ] || { echo "bench_comm: error: $prog not built (run make)" >&2; exit 1; }
echo "# $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
exec "$prog" --bench "${BENCH_COMM_CHUNK:-0}"
