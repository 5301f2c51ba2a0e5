#!/bin/sh
# An example Slurm batch job for titan-train: one node, 4 ranks (FSDP over
# all of them: parallelism.data_parallel_shard_degree = -1), started by srun
# through PMIx. Submit with: sbatch scripts/sbatch-example.sh runs/demo
# The run directory must exist (titan-init) on storage every rank sees.
#SBATCH --job-name=titan-train
#SBATCH --nodes=1
#SBATCH --ntasks=4
#SBATCH --cpus-per-task=4
#SBATCH --time=02:00:00
#SBATCH --output=titan-train-%j.log
set -eu
run=${1:?usage: sbatch scripts/sbatch-example.sh RUN [--section.key=value ...]}
shift
# One thread team per rank, sized to the cores Slurm gave it.
threads=${SLURM_CPUS_PER_TASK:-1}
# A time limit cuts the job: --stop-at with a checkpoint, or resubmit; every
# start resumes from the run's latest checkpoint.
exec srun --mpi=pmix titan-train "$run" --training.threads="$threads" "$@"
