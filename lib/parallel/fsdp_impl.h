/* fsdp_impl.h - FSDP's insides, shared by fsdp.c (the runtime: staging,
 * queues, gathers, reductions, hooks) and fsdp_plan.c (the shard plan and
 * the communication units). Private to lib/parallel. */
#ifndef TITAN_PARALLEL_FSDP_IMPL_H
#define TITAN_PARALLEL_FSDP_IMPL_H

#include "parallel/fsdp.h"

#define DDP_BUCKET_BYTES ((size_t)25 << 20) /* torch DDP's default bucket_cap_mb */

/* Staging buffers at most: the prefetched gather and the two latest
 * reductions. A fourth held a gather issued before the oldest reduction
 * completed, which the gather in use waits for anyway (a communicator
 * completes in call order), or an all-reduce over replicas issued before
 * the prefetched gather landed: little overlap, for memory that depended
 * on timing. */
#define NSTAGE 3

/* What completing a queued operation leaves to do here. */
enum { FIN_NONE, FIN_GATHER, FIN_REDUCE_SCATTER, FIN_ALL_REDUCE };

typedef struct {
    titan_comm_req *req;
    int fin, unit, stage;
} pending;

/* Queued operations of one communicator, oldest first. They complete in
 * call order (comm.h), so completions are found from the head. */
typedef struct {
    pending *ops;
    unsigned long long head, tail; /* sequence numbers; slot = seq % cap */
    size_t cap;
} op_queue;

/* A unit's collective runs on one contiguous buffer laid out rank by rank
 * (the order collectives use); the model's flat layout is tensor by tensor.
 * Packing and unpacking between the two is a copy (a cast for bf16). */
typedef struct {
    void *buf;  /* backend memory */
    void *host; /* its host mirror, when the communicator takes host memory only */
    size_t cap; /* bytes */
    int busy;
} stage;

enum { Q_SHARD, Q_REPLICATE, NQ };
enum { STALE, INFLIGHT, READY };

typedef struct {
    int first_block, last_block; /* blocks [first, last] */
    int p0, p1;                  /* parameter tensors [p0, p1), catalog order */
    size_t shard_off, shard_len; /* this rank's packed shard range */
    size_t full_off, full_len;   /* the tensors' range in the flat model */
    size_t *counts;              /* [nshards]: elements each shard rank holds */
    size_t *rank_off;            /* [nshards]: where each rank's part starts in the buffer */
    int state;                   /* STALE, INFLIGHT, READY (gathered parameters) */
    unsigned long long ag_seq;   /* shard queue: the unit's last gather */
    int reduced;                 /* 0: not started, 1: reduce-scatter queued, 2: shard gradient final, 3: all-reduce queued */
    /* The float8 all-gather's buffer (fsdp_fp8.c): bytes each rank holds,
     * where each rank's start, all of them; NULL without. */
    size_t *fp8_counts, *fp8_rank_off, fp8_bytes;
} unit;

struct titan_fsdp {
    titan_mesh *mesh;
    titan_llama *model;
    const titan_backend *be;
    int np, nshards, me;  /* parameter tensors; ranks of the shard group; ours */
    titan_shard_piece *pieces;
    size_t *counts;       /* np x nshards: elements each shard rank holds of parameter i */
    size_t nshard;
    float *sp, *sg;       /* shard parameters and gradients (the model's own when unsharded) */
    int mirror;           /* device buffers, host-only communicators: collectives run on host mirrors */
    titan_dtype pdtype, rdtype;
    /* Gathers unpack straight into the model's compute copy (gathered in its
     * dtype): the unit's fp32 parameters are never committed nor cast. */
    int direct;
    int nblocks, nunits, tied, reshard, poison, sync;
    int *unit_of;         /* per block */
    unit *units;
    int next_ar;          /* HSDP/DDP: the next unit (descending) whose shard gradient goes to all-reduce */
    op_queue q[NQ];
    stage stages[NSTAGE];
    int nstage;           /* of them allocated (titan_fsdp_staging), all of the same size */
    titan_status err;     /* first failure seen in a hook */
    double exposed_s, total_s;
    /* optimizer.early_step_in_backward: called as each unit's shard gradient
     * is final (titan_fsdp_set_unit_done) */
    titan_fsdp_unit_done_fn unit_done;
    void *unit_done_ctx;
    float *unit_grad; /* with unit_done: the transient shard gradient (sg is NULL) */
    /* The float8 all-gather (fsdp_fp8.c; titan_fsdp_set_float8_gather):
     * on when some tensor gathers as float8; per tensor its float8 linear
     * or -1; amaxes stale after the optimizer step; host scratch (np +
     * fp8_nlin floats; the group's np each); backend memory: amax and
     * scale per tensor and one scratch scale, the group's amaxes. */
    int fp8_gather, fp8_stale, fp8_nlin;
    int *fp8_lin;
    float *fp8_host, *fp8_all, *fp8_dev, *fp8_dev_all;
};

/* fsdp_fp8.c: the weights' amax and scales over the shard and tp groups
 * (collective, once after each optimizer step: a no-op while current);
 * rank's part of unit u in its gather layout into dst; the gathered
 * buffer into the flat model of type fdt. */
titan_status titan_fsdp_fp8_refresh(titan_fsdp *f);
/* fsdp.c: the staging buffers again for the float8 all-gather's layout */
titan_status titan_fsdp_fp8_staging(titan_fsdp *f);
void titan_fsdp_fp8_pack(titan_fsdp *f, const unit *u, void *dst);
void titan_fsdp_fp8_unpack(titan_fsdp *f, const unit *u, const void *buf, void *flat, titan_dtype fdt);
void titan_fsdp_fp8_free(titan_fsdp *f);

/* The units of the plan (opt: fsdp.h; NULL: one per block) over the
 * model's catalog and f->pieces, f->counts: blocks, tensor runs, this
 * rank's shard range and every rank's counts. */
titan_status titan_fsdp_make_units(titan_fsdp *f, const titan_fsdp_options *opt);

#endif
