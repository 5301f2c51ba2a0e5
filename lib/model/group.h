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
} titan_group;

#endif
