/* group.c - the model's group collectives (model/group.h) over a
 * communicator. Where the communicator moves host memory only and the
 * backend's buffers live on a device, every collective goes through one
 * host mirror: the rank's part copied over, the collective on the mirror,
 * the result copied back. Otherwise the queued ops are waited for first, so
 * that the time counted is the collective's own (the collective would wait
 * for them too). */
#include "parallel/group.h"

#include <string.h>

#include "core/clock.h"
#include "core/mem.h"
#include "parallel/group_impl.h"

static titan_status reserve(void *ctx, size_t bytes) {
    group *g = ctx;
    if (!g->staged || bytes <= g->mirror_bytes) return TITAN_OK;
    char *m = titan_alloc_pages(bytes, "parallel: host mirror of a group's collectives");
    if (!m) return TITAN_ERR_NOMEM;
    titan_free_pages(g->mirror);
    g->mirror = m, g->mirror_bytes = bytes;
    return TITAN_OK;
}

/* The mirror for n bytes, NULL with the error set when none was reserved. */
static char *mirror_for(group *g, size_t bytes) {
    if (bytes <= g->mirror_bytes) return g->mirror;
    titan_error(TITAN_ERR_FAIL, "parallel: a collective of %zu bytes over a host mirror of %zu", bytes,
                g->mirror_bytes);
    return NULL;
}

/* Counts t0's collective into comm_s and exposed_s (a blocking collective
 * is all exposed); returns st. t0 is read before the collective's call, in
 * a statement of its own: as an argument beside the call, C leaves the
 * order open (gcc read the clock after the collective: nothing counted). */
static titan_status timed(group *g, double t0, titan_status st) {
    double dt = titan_now_s() - t0;
    g->comm_s += dt;
    g->exposed_s += dt;
    return st;
}

static titan_status all_reduce(void *ctx, void *x, size_t n, titan_dtype dt) {
    group *g = ctx;
    size_t bytes = n * titan_dtype_size(dt);
    if (g->win && bytes <= g->block_bytes) return group_overlap_all_reduce(g, x, n, dt);
    void *buf = x;
    if (g->staged) {
        if (!(buf = mirror_for(g, bytes))) return TITAN_ERR_FAIL;
        g->be->to_host(buf, x, bytes);
    } else {
        g->be->sync();
    }
    double t0 = titan_now_s();
    titan_status st = timed(g, t0, titan_comm_all_reduce(g->comm, buf, buf, n, dt, TITAN_COMM_SUM, NULL));
    if (st == TITAN_OK && g->staged) g->be->to_device(x, buf, bytes);
    return st;
}

static titan_status all_gather(void *ctx, const void *mine, void *full, size_t n, titan_dtype dt) {
    group *g = ctx;
    size_t bytes = n * titan_dtype_size(dt), whole = bytes * (size_t)g->ops.size;
    char *buf = full;
    if (g->staged) {
        if (!(buf = mirror_for(g, whole))) return TITAN_ERR_FAIL;
        g->be->to_host(buf + (size_t)g->ops.rank * bytes, mine, bytes);
        mine = buf + (size_t)g->ops.rank * bytes;
    } else {
        g->be->sync();
    }
    double t0 = titan_now_s();
    titan_status st = timed(g, t0, titan_comm_all_gather(g->comm, mine, buf, n, dt, NULL));
    if (st == TITAN_OK && g->staged) g->be->to_device(full, buf, whole);
    return st;
}

static titan_status reduce_scatter(void *ctx, void *full, void *own, size_t n, titan_dtype dt) {
    group *g = ctx;
    size_t bytes = n * titan_dtype_size(dt), whole = bytes * (size_t)g->ops.size;
    char *buf = full;
    if (g->staged) {
        if (!(buf = mirror_for(g, whole))) return TITAN_ERR_FAIL;
        g->be->to_host(buf, full, whole);
    } else {
        g->be->sync();
    }
    char *mine = buf + (size_t)g->ops.rank * bytes;
    double t0 = titan_now_s();
    titan_status st =
        timed(g, t0, titan_comm_reduce_scatter(g->comm, buf, g->staged ? mine : own, n, dt, TITAN_COMM_SUM, NULL));
    if (st == TITAN_OK && g->staged) g->be->to_device(own, mine, bytes);
    return st;
}

static titan_status sum_double(void *ctx, double *x) {
    group *g = ctx;
    double t0 = titan_now_s();
    return timed(g, t0, titan_comm_sum_double(g->comm, *x, x));
}

static titan_status all_gather_host(void *ctx, const float *mine, float *all, size_t n) {
    group *g = ctx;
    double t0 = titan_now_s();
    return timed(g, t0, titan_comm_all_gather(g->comm, mine, all, n, TITAN_DTYPE_F32, NULL));
}

static titan_status all_gather_v_host(void *ctx, const float *mine, float *all, const size_t *counts) {
    group *g = ctx;
    double t0 = titan_now_s();
    return timed(g, t0, titan_comm_all_gather_v(g->comm, mine, all, counts, TITAN_DTYPE_F32, NULL));
}

static double take_comm_s(void *ctx) {
    group *g = ctx;
    double s = g->comm_s;
    g->comm_s = 0.0;
    return s;
}

static double take_exposed_s(void *ctx) {
    group *g = ctx;
    double s = g->exposed_s;
    g->exposed_s = 0.0;
    return s;
}

titan_status titan_parallel_group_create(titan_group **out, titan_comm *comm, const titan_backend *be) {
    *out = NULL;
    if (!comm || titan_comm_size(comm) < 2) return TITAN_OK;
    group *g = titan_alloc(sizeof *g, "parallel: group");
    if (!g) return TITAN_ERR_NOMEM;
    g->comm = comm;
    g->be = be;
    g->staged = !be->host && !titan_comm_device_buffers(comm);
    g->ops = (titan_group){
        .rank = titan_comm_rank(comm),
        .size = titan_comm_size(comm),
        .ctx = g,
        .reserve = reserve,
        .all_reduce = all_reduce,
        .all_gather = all_gather,
        .reduce_scatter = reduce_scatter,
        .sum_double = sum_double,
        .all_gather_host = all_gather_host,
        .all_gather_v_host = all_gather_v_host,
        .take_comm_s = take_comm_s,
        .take_exposed_s = take_exposed_s,
    };
    /* A communicator whose peers' memory is addressable, on host buffers
     * or a backend whose device memory the peers map (cuda): the collective
     * matmuls (group_overlap.c) can run. */
    if ((be->host || be->ipc_export) && titan_comm_has_windows(comm)) group_overlap_enable(g);
    *out = &g->ops;
    return TITAN_OK;
}

void titan_parallel_group_free(titan_group *ops) {
    if (!ops) return;
    group *g = ops->ctx;
    titan_comm_window_free(g->win);
    titan_free_pages(g->mirror);
    titan_free(g);
}
