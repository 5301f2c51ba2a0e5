/* threads.h - CPU threads per rank: training.threads, or this rank's share
 * of the cores of its CPU affinity set. */
#ifndef TITAN_TRAIN_THREADS_H
#define TITAN_TRAIN_THREADS_H

#include "comm/bootstrap.h"
#include "core/error.h"

typedef struct {
    int threads; /* per rank */
    int cores;   /* in this rank's affinity set (sched_getaffinity) */
    int sharing; /* ranks on this host whose affinity sets overlap this one's, itself included */
} titan_train_threads;

/* configured > 0: that many threads. 0: cores / sharing, at least 1, so
 * ranks started on the same cores (--nproc, mpirun and srun without
 * binding) split them instead of each taking all of them. With several
 * ranks on a host and configured 0 this is collective (a key/value fence
 * on d): every rank of the job calls it. */
titan_status titan_train_threads_pick(titan_dist *d, int configured, titan_train_threads *out);

#endif
