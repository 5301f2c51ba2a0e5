/* elastic.h - titan-train's local launcher (--nproc N): it starts the
 * job's ranks, and with --max-restarts K starts them again from the run's
 * latest checkpoint when the job lost one, on the same or (--min-nproc M)
 * fewer ranks. titan-train(1), Launch, says what restarts and why.
 *
 * A restarted job's ranks get, in their environment:
 *   TITAN_RESTART         the restart's number, 1..K
 *   TITAN_RESTART_CAUSE   what ended the previous start ("rank 2 of 4 was
 *                         killed by signal 9 (Killed)")
 * which rank 0 writes into the first metrics.jsonl line of its segment.
 * A Slurm loop that restarts srun sets the same (scripts/sbatch-example.sh). */
#ifndef TITAN_CMD_TRAIN_ELASTIC_H
#define TITAN_CMD_TRAIN_ELASTIC_H

#include "job/config.h"

typedef struct {
    int nproc;                  /* ranks of the first start */
    int max_restarts;           /* restarts allowed after failures; 0: none */
    int min_nproc;              /* fewest ranks a restart may take; nproc: never fewer */
    const char *run;            /* the run directory (its checkpoints tell the progress) */
    const titan_job_config *cfg; /* the job, as the ranks will resolve it */
} titan_train_launch;

/* Runs argv's titan-train (without the launcher's options) as l->nproc
 * local ranks, restarting as above; returns the exit status: 0, or that of
 * the last start's first failed rank (8 when it was killed by a signal). */
int titan_train_launch_local(int argc, char **argv, const titan_train_launch *l);

#endif
