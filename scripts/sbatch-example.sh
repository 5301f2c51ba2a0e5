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
# MAX_RESTARTS=K in the environment of sbatch: after a lost rank (srun's
#   status 8, or 128 + a signal) srun starts again from the latest
#   checkpoint, up to K times, on the nodes the job still holds (--no-kill
#   keeps the allocation when a node fails), the restart recorded in
#   metrics.jsonl (TITAN_RESTART); titan-train(1), Launch, Restarts.
#   RESTART_PAUSE=S: seconds between the starts (default 10).
#SBATCH --job-name=titan-train
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=4
# (GPUs: #SBATCH --gpus-per-node=4)
#SBATCH --time=02:00:00
#SBATCH --output=titan-train-%j.log
#SBATCH --no-kill
set -eu
run=${1:?usage: sbatch scripts/sbatch-example.sh RUN [--section.key=value ...]}
shift
# One thread team per rank, sized to the cores Slurm gave it.
threads=${SLURM_CPUS_PER_TASK:-1}
device=""
[ "${DEVICE:-}" = cuda ] && device=--training.device=cuda
# A rank that dies ends the job step at once (its peers on every node stop
# on srun's SIGTERM, each dumping its flight recorder for titan-trace hang).
# A time limit cuts the job: --stop-at with a checkpoint, or resubmit; every
# start resumes from the run's latest checkpoint.
max=${MAX_RESTARTS:-0}
restart=${TITAN_RESTART:-0} tries=0
per_node=${SLURM_NTASKS_PER_NODE:-1}
per_node=${per_node%%(*} # "4(x2)" when Slurm spells it per node
while :; do
    # the nodes the job still holds: a failed one leaves a --no-kill job
    nodes=$(squeue -h -j "$SLURM_JOB_ID" -o %D 2>/dev/null) || nodes=""
    [ -n "$nodes" ] || nodes=${SLURM_JOB_NUM_NODES:-1}
    rc=0
    TITAN_RESTART=$restart srun --mpi=pmix --kill-on-bad-exit=1 -N "$nodes" --ntasks-per-node="$per_node" \
        titan-train "$run" --training.threads="$threads" $device "$@" || rc=$?
    [ $rc -eq 0 ] && exit 0
    case $rc in
    8 | 129 | 1[3-5][0-9]) ;; # a lost rank: another start may get past it
    *) exit $rc ;;            # anything else would fail again
    esac
    [ $tries -lt "$max" ] || exit $rc
    tries=$((tries + 1)) restart=$((restart + 1))
    export TITAN_RESTART_CAUSE="srun exited with status $rc"
    echo "sbatch-example: restart $restart in ${RESTART_PAUSE:-10} s: $TITAN_RESTART_CAUSE" >&2
    sleep "${RESTART_PAUSE:-10}"
done
