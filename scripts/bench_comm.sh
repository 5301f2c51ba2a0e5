#!/bin/sh
# bench_comm.sh - all-reduce bandwidth of the shared-memory communicator
# (lib/comm/comm_shm.c) on 2 and 4 ranks of the local launcher, f32, 1 to 64 MB,
# beside its reference measured in the same run: memcpy of the same sizes in
# one process (the shm all-reduce moves each byte about five times: copy in,
# read for the reduction, write the sum, copy out). Also barrier and 1-element
# all-reduce latency, and that latency on a communicator the flight recorder
# records (titan-train's default) beside one it does not. Bus bandwidth as nccl-tests defines it:
# busbw = bytes / time * 2 (n - 1) / n. Then, under mpirun on this host, the
# same suite over shm and over mpi (comm.backend), so the two compare.
#
#   BENCH_COMM_CHUNK   bytes each rank stages per pipeline step (default 1 MiB)
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
prog=$top/build/tests/test_dist
[ -x "$prog" ] || { echo "bench_comm: error: $prog not built (run make)" >&2; exit 1; }
echo "# $(nproc) CPUs: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
"$prog" --bench "${BENCH_COMM_CHUNK:-0}"
# One host, two communicators, the same suite under mpirun: shm against mpi
# (Open MPI's own shared-memory transport inside a host, vader, under
# libtitan-mpi.so's point-to-point collectives). Each row names its backend.
mpi_so=$top/build/lib/titan/libtitan-mpi.so
if ! command -v mpirun >/dev/null 2>&1 || [ ! -f "$mpi_so" ]; then
    echo "# shm vs mpi on one host: skipped (needs mpirun and $mpi_so)"
    exit 0
fi
echo "# one host under mpirun: shm vs mpi communicators"
for np in 2 4; do
    for c in shm mpi; do
        TITAN_COMM=$c mpirun --allow-run-as-root --oversubscribe -x TITAN_COMM -n $np \
            "$prog" --suite bench "${BENCH_COMM_CHUNK:-0}" 2>&1 | grep -v '^$'
    done
done
