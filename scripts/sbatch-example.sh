#!/bin/sh
# An example Slurm batch job for titan-train, started by srun through PMIx.
# Submit with: sbatch scripts/sbatch-example.sh runs/demo [--section.key=value ...]
# The run directory must exist (titan-init) on storage every node sees.
#
# As written: one node, 4 ranks, FSDP over all of them
# (parallelism.data_parallel_shard_degree = -1), shared-memory communicators.
# Several nodes: change --nodes (the ranks are --nodes x --ntasks-per-node).
#   On CPUs comm.backend = auto takes the mpi communicator once the ranks
#   span hosts (libtitan-mpi.so, built where mpicc is): e.g. --nodes=2 and
#   --parallelism.data_parallel_replicate_degree=2 is HSDP with a replica a
#   node, FSDP's reduce-scatters inside each node.
#   On GPUs: a rank a GPU (--ntasks-per-node = --gpus-per-node) and
#   --training.device=cuda; NCCL's unique id travels through the same PMIx
#   exchange, across the nodes.
# DEVICE=cuda in the environment of sbatch adds the flag for you.
#SBATCH --job-name=titan-train
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=4
# (GPUs: #SBATCH --gpus-per-node=4)
#SBATCH --time=02:00:00
#SBATCH --output=titan-train-%j.log
set -eu
run=${1:?usage: sbatch scripts/sbatch-example.sh RUN [--section.key=value ...]}
shift
# One thread team per rank, sized to the cores Slurm gave it.
threads=${SLURM_CPUS_PER_TASK:-1}
device=""
[ "${DEVICE:-}" = cuda ] && device=--training.device=cuda
# A rank that dies ends the whole job at once (its peers on every node stop
# on srun's SIGTERM, each dumping its flight recorder for titan-trace hang).
# A time limit cuts the job: --stop-at with a checkpoint, or resubmit; every
# start resumes from the run's latest checkpoint.
exec srun --mpi=pmix --kill-on-bad-exit=1 titan-train "$run" --training.threads="$threads" $device "$@"
