/* mesh.h - a training job's ranks and their communicators.
 *
 * The job's world (bootstrap.h: PMIx, the local spawner, or one process) is
 * laid out as [parallelism] says: world = dp_replicate x dp_shard x tp x cp x
 * pp, dp_shard = -1 taking the ranks the others leave. dp index =
 * dp_replicate coordinate x dp_shard + dp_shard coordinate, the loader's
 * rank (the ranks of one tp or cp group read the same batches; a cp group
 * splits each sequence). Communicators: world, shard (the ranks that
 * differ in their dp_shard and cp coordinates only: FSDP's group, as
 * torchtitan's dp_shard_cp, rank dp_shard x cp + cp; with cp > 1 it shards
 * even when dp_shard = 1, which also averages the gradients over cp),
 * replicate (differing in dp_replicate only: DDP/HSDP's group), tp
 * (differing in tp only: the model's tensor-parallel group), cp
 * (differing in cp only: the model's context-parallel group) and pp
 * (differing in pp only: the pipeline's stages, two communicators over
 * the same ranks, one for each direction); NULL when that group is one
 * rank. Their backend is comm.backend's (TITAN_COMM overrides it); auto:
 * on cuda with NCCL nccl communicators, which move device buffers (FSDP's)
 * and host ones (loss sums, checkpoint messages) alike; else shared memory
 * when every rank runs on one host, else mpi (ranks on several hosts,
 * started by mpirun or srun --mpi=pmix). */
#ifndef TITAN_PARALLEL_MESH_H
#define TITAN_PARALLEL_MESH_H

#include "backend/backend.h"
#include "comm/bootstrap.h"
#include "comm/comm.h"
#include "job/config.h"
#include "model/group.h"
#include "tensor/layout.h"

typedef struct {
    titan_dist *dist;
    titan_layout layout;
    char layout_str[TITAN_LAYOUT_STR_MAX];
    int rank, world;
    double comm_timeout_s;          /* comm.train_timeout_seconds; 0 = the environment's */
    titan_comm_backend comm_backend; /* comm.backend, or TITAN_COMM where set */
    int dp_rank, dp_size;
    int shard_rank;                 /* coordinate along dp_shard */
    int tp_rank;                    /* coordinate along tp */
    int cp_rank;                    /* coordinate along cp */
    int pp_rank;                    /* coordinate along pp: the pipeline stage */
    titan_comm *world_comm;         /* NULL for one rank */
    titan_comm *shard_comm;         /* NULL when dp_shard x cp = 1 */
    titan_comm *replicate_comm;     /* NULL when dp_replicate = 1 */
    titan_comm *tp_comm;            /* NULL when tp = 1 */
    titan_comm *cp_comm;            /* NULL when cp = 1 */
    titan_comm *pp_comm;            /* stage activations, NULL when pp = 1 */
    titan_comm *pp_grad_comm;       /* their gradients, NULL when pp = 1 */
    /* With several stages a rank (layout.pp_v > 1): the transfers from
     * the last pp rank to the first (activations) and back (gradients),
     * between a rank's stage and the next loop's, on communicators of
     * their own: then with pp 2 each communicator carries one direction
     * between one pair, and a queued send never holds up a receive queued
     * behind it (comm.h: a communicator runs its operations in order).
     * In the V placement (layout.pp_vshape) they carry the second stage's
     * stream instead, from rank r + 1 to r (and its gradients back).
     * NULL otherwise. */
    titan_comm *pp_wrap_comm, *pp_grad_wrap_comm;
    /* The model's collectives over tp_comm and cp_comm (titan_mesh_groups),
     * NULL where the communicator is */
    titan_group *tp_group, *cp_group;
} titan_mesh;

/* Checks the degrees against a job of `world` ranks without joining one
 * (a launcher's check before it starts them). */
titan_status titan_mesh_check(const titan_job_config *cfg, int world);
/* The same, keeping the layout the job would have (its pipeline split
 * before the model's layer count is known: titan_pipeline_split). */
titan_status titan_mesh_layout(const titan_job_config *cfg, int world, titan_layout *l);
/* Joins the job and checks the degrees against its size (collective).
 * Ranks other than 0 log only warnings and errors, prefixed
 * "titan-train[rank N]". */
titan_status titan_mesh_init(const titan_job_config *cfg, titan_mesh *m);
/* Builds the communicators (collective; nothing for one rank): nccl != 0
 * when this rank's device can run NCCL (its local rank's GPU), which auto
 * then takes; else auto takes shm or mpi as above. comm.backend = nccl
 * without it is a usage error. */
titan_status titan_mesh_connect(titan_mesh *m, int nccl);
/* The tp and cp groups the model runs its collectives on (parallel/group.h),
 * on be's buffers; after titan_mesh_connect. */
titan_status titan_mesh_groups(titan_mesh *m, const titan_backend *be);
void titan_mesh_free(titan_mesh *m);

#endif
