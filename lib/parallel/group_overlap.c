/* group_overlap.c - the collective matmuls of model/group.h over a shared
 * window (comm.h): every rank's window is two halves of `size` blocks that
 * the peers address directly, and one flag per rank that only grows.
 *
 * Call k (counted per group; every rank makes the same calls) uses half
 * k % 2 and posts flags k x (size + 2) + step: an all-gather posts step 1
 * when its block is in its window; a reduce-scatter posts step s once its
 * partial of block rank + s is written there (s = 1 .. size, its own
 * last); both post step size + 1 ("done reading the others' windows") on
 * the way out. Before writing its half again at call k, a rank waits for
 * every peer's "done" of call k - 2, the last call that used that half, so
 * a half is never rewritten while a peer may still read it.
 *
 * Nothing moves but what must: the all-gather's block is written once
 * into its owner's window and copied once into each peer's kept full
 * buffer (the peer computes on that copy, hot in its cache, or on the
 * window itself when nothing is kept); the reduce-scatter's partials are
 * written straight into the window by the product that makes them and
 * summed where they lie. Waits are the exposed time (take_exposed_s); the
 * copies and the sum are communication too (take_comm_s), done by the
 * rank's own thread between its products. A publish (the cp ring's
 * backward keys and values) is an all-gather's first half, its blocks
 * read in place later by the reduce_scatter_each that follows it. With
 * the window made, the group's small all-reduces (the sequence-parallel norms' weight
 * gradients) take it too: one wait per peer instead of the shm
 * collective's phases, the same rank-order sum.
 *
 * On a device backend (cuda) the window is device memory the peers map
 * (comm.h): the copies and the sums are the backend's ops (copy,
 * sum_ranks: the host's bits), queued on its stream like the products; a
 * post goes out once the device work queued before it is done (so a flag
 * promises the block is written, and "done" that the reads of the peers'
 * blocks are over), and a wait holds back the queueing of the work that
 * reads a peer's block, never work that does not need it. The comm_s
 * there counts the host's side (queueing, waits), not the device's. */
#include <string.h>

#include "core/clock.h"
#include "parallel/group_impl.h"

static unsigned long long flag(const group *g, unsigned long long call, int step) {
    return call * (unsigned long long)(g->ops.size + 2) + (unsigned long long)step;
}
static int done_step(const group *g) { return g->ops.size + 1; }

/* dst = src (bytes): host memory, or the backend's device buffers. */
static void block_copy(const group *g, void *dst, const void *src, size_t bytes) {
    if (g->be->host) memcpy(dst, src, bytes);
    else g->be->copy(dst, src, bytes);
}

/* out = the sum of src[0 .. n - 1] in rank order (titan_comm_sum_ranks' bits). */
static void block_sum(const group *g, const void *const *src, int n, size_t m, titan_dtype dt, void *out) {
    if (g->be->host) titan_comm_sum_ranks(src, n, m, dt, out);
    else g->be->sum_ranks(dt, out, src, n, m);
}

/* Until rank r's flag reaches value; the time counts as exposed. */
static titan_status wait_peer(group *g, int r, unsigned long long value, const char *what) {
    double t0 = titan_now_s();
    titan_status st = titan_comm_window_wait(g->win, r, value, what);
    double dt = titan_now_s() - t0;
    g->exposed_s += dt;
    g->comm_s += dt;
    return st;
}

/* Starts a call: its half, once every peer is done with that half's last use. */
static titan_status begin(group *g, size_t bytes, const char *what, int *half) {
    if (!g->win || bytes > g->block_bytes)
        return titan_error(TITAN_ERR_FAIL, "parallel: %s of a %zu-byte block over a window of %zu-byte blocks", what,
                           bytes, g->win ? g->block_bytes : 0);
    if (g->rs_call) /* reduce_scatter_finish must come first */
        return titan_error(TITAN_ERR_FAIL, "parallel: %s before the collective reduce-scatter started at call %llu "
                           "finished", what, g->rs_call);
    unsigned long long k = ++g->calls;
    *half = (int)(k % 2);
    if (g->published && k > g->published + 1) g->published = 0; /* its half is ours to rewrite now */
    for (int r = 0; k > 2 && r < g->ops.size; r++)
        if (r != g->ops.rank) TITAN_TRY(wait_peer(g, r, flag(g, k - 2, done_step(g)), what));
    return TITAN_OK;
}

static titan_status overlap_reserve(void *ctx, size_t bytes) {
    group *g = ctx;
    if (g->win && bytes <= g->block_bytes) return TITAN_OK;
    /* Before any call (the model reserves at creation): a larger window
     * replaces the old one on every rank alike, the flags from 0 again. */
    titan_comm_window_free(g->win);
    g->win = NULL;
    g->calls = 0;
    bytes = titan_group_window_block(bytes);
    TITAN_TRY(titan_comm_window_create(g->comm, bytes * (size_t)g->ops.size, g->be->host ? NULL : g->be, &g->win));
    g->block_bytes = bytes;
    return TITAN_OK;
}

/* The all-gather's first part: this rank's block in its window, posted
 * (step 1). No "done" step of its own: an all_gather_each that reads the
 * blocks posts it; a reduce_scatter that reads them posts its steps only
 * after the reads they depend on (model/group.h), and a later flag
 * implies the earlier ones. */
static titan_status publish_as(group *g, const void *mine, size_t bytes, const char *what) {
    int half;
    TITAN_TRY(begin(g, bytes, what, &half));
    double t0 = titan_now_s();
    block_copy(g, titan_comm_window_buf(g->win, g->ops.rank, half), mine, bytes);
    titan_comm_window_post(g->win, flag(g, g->calls, 1));
    g->comm_s += titan_now_s() - t0;
    g->published = g->calls;
    return TITAN_OK;
}

static titan_status publish(void *ctx, const void *mine, size_t n, titan_dtype dt) {
    return publish_as(ctx, mine, n * titan_dtype_size(dt), "published all-gather");
}

static titan_status published(void *ctx, int r, const void **block) {
    group *g = ctx;
    *block = NULL;
    if (!g->published || r < 0 || r >= g->ops.size)
        return titan_error(TITAN_ERR_FAIL, "parallel: rank %d's published block read %s", r,
                           g->published ? "out of the group" : "with none published, or after its window was reused");
    if (r != g->ops.rank) TITAN_TRY(wait_peer(g, r, flag(g, g->published, 1), "published all-gather"));
    *block = titan_comm_window_buf(g->win, r, (int)(g->published % 2));
    return TITAN_OK;
}

static titan_status all_gather_each(void *ctx, const void *mine, void *full, size_t n, titan_dtype dt,
                                    titan_group_block_fn fn, void *arg) {
    group *g = ctx;
    int me = g->ops.rank, size = g->ops.size;
    size_t bytes = n * titan_dtype_size(dt);
    if (mine)
        TITAN_TRY(publish_as(g, mine, bytes, "collective all-gather"));
    else if (!g->published || g->published != g->calls || bytes > g->block_bytes)
        return titan_error(TITAN_ERR_FAIL, "parallel: a collective all-gather of the published blocks without a "
                           "publish of %zu bytes just before", bytes);
    unsigned long long k = g->calls;
    int half = (int)(k % 2);
    if (!mine) mine = titan_comm_window_buf(g->win, me, half);
    double t0 = titan_now_s();
    char *own = full ? (char *)full + (size_t)me * bytes : NULL;
    if (own && own != (const char *)mine) block_copy(g, own, mine, bytes);
    g->comm_s += titan_now_s() - t0;
    /* the rank's own block first: the peers publish theirs meanwhile */
    if (fn) fn(arg, me, (void *)mine);
    for (int s = 1; s < size; s++) {
        int r = (me + s) % size;
        TITAN_TRY(wait_peer(g, r, flag(g, k, 1), "collective all-gather"));
        char *block = titan_comm_window_buf(g->win, r, half);
        if (full) {
            t0 = titan_now_s();
            block_copy(g, (char *)full + (size_t)r * bytes, block, bytes);
            g->comm_s += titan_now_s() - t0;
            block = (char *)full + (size_t)r * bytes;
        }
        if (fn) fn(arg, r, block);
    }
    titan_comm_window_post(g->win, flag(g, k, done_step(g)));
    g->published = 0; /* "done" posted: the peers may rewrite their blocks */
    return TITAN_OK;
}

static titan_status reduce_scatter_start(void *ctx, size_t n, titan_dtype dt, titan_group_block_fn fn, void *arg) {
    group *g = ctx;
    int me = g->ops.rank, size = g->ops.size, half;
    size_t bytes = n * titan_dtype_size(dt);
    TITAN_TRY(begin(g, bytes, "collective reduce-scatter", &half));
    unsigned long long k = g->calls;
    char *mine = titan_comm_window_buf(g->win, me, half);
    for (int s = 1; s <= size; s++) { /* the peers' blocks first, in the order they sum them */
        int d = (me + s) % size;
        fn(arg, d, mine + (size_t)d * bytes);
        titan_comm_window_post(g->win, flag(g, k, s));
    }
    g->rs_call = k, g->rs_half = half, g->rs_n = n, g->rs_dt = dt;
    return TITAN_OK;
}

/* Waits for the peers' partials of this rank's block, sums them where they lie. */
static titan_status reduce_scatter_finish(void *ctx, void *own) {
    group *g = ctx;
    int me = g->ops.rank, size = g->ops.size, half = g->rs_half;
    unsigned long long k = g->rs_call;
    titan_dtype dt = g->rs_dt;
    size_t n = g->rs_n, bytes = n * titan_dtype_size(dt);
    if (!k) return titan_error(TITAN_ERR_FAIL, "parallel: a collective reduce-scatter finished without its start");
    g->rs_call = 0;
    const void *src[TITAN_SUM_RANKS_MAX];
    for (int r = 0; r < size; r++) {
        int s = ((me - r) % size + size) % size; /* the step at which rank r wrote block me */
        if (r != me) TITAN_TRY(wait_peer(g, r, flag(g, k, s ? s : size), "collective reduce-scatter"));
        src[r] = (const char *)titan_comm_window_buf(g->win, r, half) + (size_t)me * bytes;
    }
    double t0 = titan_now_s();
    block_sum(g, src, size, n, dt, own); /* read where they lie, in rank order */
    g->comm_s += titan_now_s() - t0;
    titan_comm_window_post(g->win, flag(g, k, done_step(g)));
    return TITAN_OK;
}

static titan_status reduce_scatter_each(void *ctx, void *own, size_t n, titan_dtype dt, titan_group_block_fn fn,
                                        void *arg) {
    TITAN_TRY(reduce_scatter_start(ctx, n, dt, fn, arg));
    return reduce_scatter_finish(ctx, own);
}

titan_status group_overlap_all_reduce(group *g, void *x, size_t n, titan_dtype dt) {
    int me = g->ops.rank, size = g->ops.size, half;
    size_t bytes = n * titan_dtype_size(dt);
    TITAN_TRY(begin(g, bytes, "all-reduce", &half));
    unsigned long long k = g->calls;
    double t0 = titan_now_s();
    block_copy(g, titan_comm_window_buf(g->win, me, half), x, bytes);
    titan_comm_window_post(g->win, flag(g, k, 1));
    g->comm_s += titan_now_s() - t0;
    const void *src[TITAN_SUM_RANKS_MAX];
    for (int r = 0; r < size; r++) {
        if (r != me) TITAN_TRY(wait_peer(g, r, flag(g, k, 1), "all-reduce"));
        src[r] = titan_comm_window_buf(g->win, r, half);
    }
    t0 = titan_now_s();
    block_sum(g, src, size, n, dt, x);
    g->comm_s += titan_now_s() - t0;
    titan_comm_window_post(g->win, flag(g, k, done_step(g)));
    return TITAN_OK;
}

void group_overlap_enable(group *g) {
    if (g->ops.size > TITAN_SUM_RANKS_MAX) return;
    g->ops.overlap_reserve = overlap_reserve;
    g->ops.all_gather_each = all_gather_each;
    g->ops.reduce_scatter_each = reduce_scatter_each;
    g->ops.publish = publish;
    g->ops.reduce_scatter_start = reduce_scatter_start;
    g->ops.reduce_scatter_finish = reduce_scatter_finish;
    g->ops.published = published;
}
