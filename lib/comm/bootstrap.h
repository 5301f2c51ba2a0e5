/* bootstrap.h - who am I in a multi-process job, and a key/value exchange
 * between the processes ("ranks") of that job.
 *
 * A job has world_size ranks 0..world_size-1; local_rank/local_size number
 * the ranks on this host (for picking a GPU). titan_dist_init picks the
 * source of that information, in this order:
 *
 *   1. PMIx: a PMIx launcher started us (mpirun of Open MPI, prterun,
 *      srun --mpi=pmix); seen as PMIX_NAMESPACE in the environment. If its
 *      server cannot be reached that is an error, not a silent singleton:
 *      N processes each training alone would be worse than a stop.
 *   2. local: titan_dist_spawn_local (spawn.h) started us; seen as
 *      TITAN_RANK, TITAN_WORLD_SIZE, TITAN_LOCAL_RANK, TITAN_LOCAL_SIZE,
 *      TITAN_RENDEZVOUS (a directory shared by the ranks) and TITAN_JOB_ID.
 *   3. singleton: neither; rank 0 of 1. PMIx_Init is not called at all in
 *      this case (without a server it would answer PMIX_ERR_UNREACH and make
 *      a singleton too, after starting its own thread).
 *
 * Key/value exchange, the PMIx model: each rank puts values under keys,
 * commits them, and after a fence (collective: every rank calls it, and it
 * returns once all have) any rank can get any other rank's committed
 * values. Used for shared-memory segment names (comm.h) and, later, the NCCL
 * unique id. The local kind keeps puts in memory; commit+fence write them
 * as one file per rank and fence epoch in the rendezvous directory
 * (kv-EPOCH-RANK, written to a .tmp name and renamed, so a file that exists
 * is complete), and fence waits until all ranks' files of that epoch exist.
 *
 * Fences wait at most the bootstrap timeout: TITAN_COMM_TIMEOUT seconds
 * from the environment, else 300; a missing rank then gives TITAN_ERR_COMM
 * naming it. */
#ifndef TITAN_COMM_BOOTSTRAP_H
#define TITAN_COMM_BOOTSTRAP_H

#include <stddef.h>

#include "core/error.h"

typedef enum {
    TITAN_DIST_SINGLETON = 0,
    TITAN_DIST_LOCAL = 1,
    TITAN_DIST_PMIX = 2,
} titan_dist_kind;

typedef struct titan_dist titan_dist;

/* Finds this process's place in the job (see the order above). Call once per
 * process; free with titan_dist_free. */
titan_status titan_dist_init(titan_dist **out);
void titan_dist_free(titan_dist *d);

/* This process's rank as its launcher's environment tells it before
 * titan_dist_init (TITAN_RANK, PMIX_RANK, OMPI_COMM_WORLD_RANK or
 * SLURM_PROCID); 0 when none says. For quieting the errors every rank
 * would print alike, never for the job's layout. */
int titan_dist_env_rank(void);

titan_dist_kind titan_dist_kind_of(const titan_dist *d);
const char *titan_dist_kind_name(titan_dist_kind k); /* "singleton", "local", "pmix" */
int titan_dist_rank(const titan_dist *d);
int titan_dist_world_size(const titan_dist *d);
int titan_dist_local_rank(const titan_dist *d);
int titan_dist_local_size(const titan_dist *d);
/* A short name of this job, the same on every rank and different between
 * jobs running at once (PMIx namespace, the spawner's id, or the pid):
 * letters, digits, '-' and '.' only, so it fits in file and shm names. */
const char *titan_dist_job_id(const titan_dist *d);

/* Seconds a fence may wait for the other ranks (default: see above). */
void titan_dist_set_timeout(titan_dist *d, double seconds);
/* The default of both fences and communicators: TITAN_COMM_TIMEOUT when it
 * is a positive number, else 300. */
double titan_dist_env_timeout(void);
double titan_dist_timeout(const titan_dist *d);

/* Stages a value (any bytes, at most 64 KiB) under key (at most 63 chars of
 * [A-Za-z0-9._-]); a later put of the same key replaces it. */
titan_status titan_dist_put(titan_dist *d, const char *key, const void *val, size_t n);
/* Makes the staged values readable by the other ranks after the next fence. */
titan_status titan_dist_commit(titan_dist *d);
/* Collective: returns when every rank has reached it; values committed
 * before it are then visible to all. */
titan_status titan_dist_fence(titan_dist *d);
/* Copies rank's value of key into buf (cap bytes); *n gets its size. A
 * missing key is TITAN_ERR_FAIL ("not found"), a value larger than cap is
 * TITAN_ERR_USAGE. */
titan_status titan_dist_get(titan_dist *d, int rank, const char *key, void *buf, size_t cap,
                            size_t *n);

#endif
