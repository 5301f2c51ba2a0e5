/* group.h - the collectives the model runs over a parallel group (the tp
 * group's sums and sequence-parallel rows, the cp group's keys and values),
 * as the model needs them: on the backend's buffers, with what to sum or
 * gather and never how. lib/parallel/group.c provides them over a
 * communicator (staging through host memory where it moves host memory
 * only, timing the collectives); the model, below lib/parallel, sees this
 * table only, so a collective matmul or a ring can replace a collective
 * there without the model changing.
 *
 * Every rank of the group makes the same calls in the same order. A failure
 * returns its status with the error set (titan_error); the group is then
 * unusable. Sums add in rank order: every rank gets the same bits. */
#ifndef TITAN_MODEL_GROUP_H
#define TITAN_MODEL_GROUP_H

#include <stddef.h>

#include "core/error.h"
#include "tensor/dtype.h"

/* A collective matmul's per-block work: block r's data (n values of the
 * call's type) for all_gather_each, the rank's partial for block r to
 * write for reduce_scatter_each. */
typedef void (*titan_group_block_fn)(void *arg, int r, void *data);

typedef struct titan_group {
    int rank, size;
    void *ctx;
    /* Backend memory of up to `bytes` bytes will be passed (the staging a
     * host-only communicator needs, allocated once); callers reserve before
     * their first collective. */
    titan_status (*reserve)(void *ctx, size_t bytes);
    /* x[n] = its sum over the group. */
    titan_status (*all_reduce)(void *ctx, void *x, size_t n, titan_dtype dt);
    /* full[size x n] = every rank's n values, rank r's in block r; this
     * rank's from mine (which may be full's block `rank`). */
    titan_status (*all_gather)(void *ctx, const void *mine, void *full, size_t n, titan_dtype dt);
    /* own[n] = the sum over the group of the ranks' blocks `rank` of full
     * [size x n] (own may be full's block `rank`; full's other blocks are
     * scratch afterwards). */
    titan_status (*reduce_scatter)(void *ctx, void *full, void *own, size_t n, titan_dtype dt);
    /* Host memory: *x = its sum over the group (double). */
    titan_status (*sum_double)(void *ctx, double *x);
    /* Host memory: all = every rank's n floats in rank order, this rank's
     * from mine (which may be all's block `rank`); _v: counts[r] of rank r. */
    titan_status (*all_gather_host)(void *ctx, const float *mine, float *all, size_t n);
    titan_status (*all_gather_v_host)(void *ctx, const float *mine, float *all, const size_t *counts);
    /* Seconds in the group's collectives since the last call (then 0). */
    double (*take_comm_s)(void *ctx);
    /* Of those, the seconds blocked waiting on peers (then 0): all of a
     * blocking collective's; only the waits of the collective matmuls. */
    double (*take_exposed_s)(void *ctx);

    /* Collective matmuls (async tensor parallelism): NULL where the group
     * cannot run them (its communicator has no shared windows, or the
     * backend's buffers are neither host memory nor device memory that the
     * peers map: cpu-guard). Block pointers handed to fn (and published's)
     * are the backend's memory. overlap_reserve, collective:
     * blocks of up to `bytes` will be passed (makes the shared window). */
    titan_status (*overlap_reserve)(void *ctx, size_t bytes);
    /* all_gather as a ring of blocks: fn(arg, r, block r) runs for every
     * rank r, this rank's first, then rank + 1, rank + 2, ...; a peer's
     * block is read where it lies (its window) while the blocks after it
     * are still being published, so compute runs on the block in hand
     * instead of waiting for all. full (NULL: not kept) then holds every
     * block, as all_gather leaves it. fn may be NULL. mine NULL: the
     * blocks of the publish (below) made just before, no call between. */
    titan_status (*all_gather_each)(void *ctx, const void *mine, void *full, size_t n, titan_dtype dt,
                                    titan_group_block_fn fn, void *arg);
    /* reduce_scatter of partials made block by block: fn(arg, r, dst)
     * writes this rank's partial of block r (n values) into dst, for r =
     * rank + 1, rank + 2, ..., rank (its own last, so that the peers'
     * partials of it are made meanwhile); own[n] = the sum over the group
     * of block `rank`, added in rank order (reduce_scatter's bits). */
    titan_status (*reduce_scatter_each)(void *ctx, void *own, size_t n, titan_dtype dt, titan_group_block_fn fn,
                                        void *arg);
    /* An all-gather in two parts, for blocks needed later than they are
     * ready (the cp ring's keys and values in backward, published at the
     * start of the layer's backward and read at its attention): publish
     * puts this rank's n values (up to overlap_reserve's bytes) where the
     * peers read them; published gives rank r's block of the last publish
     * (this rank's too), read where it lies, waiting until r has published
     * it. The blocks stay readable until the call after the next: through
     * a reduce_scatter_each that follows, provided its fn reads block r
     * only while it makes block r's partial (rank r cannot rewrite its
     * window before it has this rank's partial of its block). */
    titan_status (*publish)(void *ctx, const void *mine, size_t n, titan_dtype dt);
    /* reduce_scatter_each in two parts, so that the caller computes while
     * the peers finish their partials of this rank's block (the cp ring's
     * query-gradient product before its key and value gradients are
     * summed): _start makes and posts the partials as reduce_scatter_each
     * does; _finish, the group's next call, waits for the peers' and sums
     * them into own (reduce_scatter_each's bits). */
    titan_status (*reduce_scatter_start)(void *ctx, size_t n, titan_dtype dt, titan_group_block_fn fn, void *arg);
    titan_status (*reduce_scatter_finish)(void *ctx, void *own);
    titan_status (*published)(void *ctx, int r, const void **block);
} titan_group;

/* overlap_reserve's blocks are rounded up to 64 bytes; its shared window,
 * on a device backend the rank's own memory, holds two halves of the
 * group's size blocks (lib/parallel/group_overlap.c): the bytes a memory
 * plan counts for it. */
static inline size_t titan_group_window_block(size_t bytes) { return (bytes + 63) / 64 * 64; }
static inline size_t titan_group_window_bytes(int size, size_t bytes) {
    return 2 * (size_t)size * titan_group_window_block(bytes);
}

#endif
