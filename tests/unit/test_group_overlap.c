/* test_group_overlap.c - the collective matmuls of lib/parallel/group_overlap.c
 * (model/group.h: all_gather_each, reduce_scatter_each) over the shm
 * communicator's shared windows, against the blocking collectives.
 *
 *   test_group_overlap                      jobs of 2, 3 and 4 ranks of itself
 *   test_group_overlap --suite overlap L    one rank of a job (parallel_test.h)
 *
 * Every rank of the tp group: blocks of rank-and-call-dependent values,
 * f32 and bf16, many calls in a row (both halves of the window reused, a
 * rank now and then late by a few ms, so a half that were rewritten too
 * early would show); all_gather_each must visit the blocks in the ring
 * order (own first), hand fn each block's values and leave full as
 * all_gather does, bit for bit; reduce_scatter_each must ask for the
 * peers' blocks first and its own last and give reduce_scatter's bits;
 * the group's all_reduce, through the window once it exists, gives the
 * shm all_reduce's bits; publish, then a reduce_scatter_each whose
 * partials are made from the published blocks read in place (the cp
 * ring's backward, in two parts: reduce_scatter_start, then _finish),
 * gives every rank's block as published, even with a rank late while it
 * reads them, and reduce_scatter's bits (a call between start and finish
 * refused); publish, then all_gather_each of the published blocks (mine
 * NULL: the cp ring's forward), all_gather's; the waits
 * count as exposed time, within the total. Also: a group over
 * a host backend offers them, cpu-guard's (device buffers) does not.
 *
 * Where the cuda backend opens (TITAN_CUDA_LIB: the emulator in the suite,
 * its processes on one emulated GPU, or one each with TITAN_EMU_DEVICES),
 * the same over device memory the peers map (CUDA IPC): the window calls
 * themselves (every rank's blocks read where they lie, both halves), then
 * the group's collective matmuls on device buffers against the host
 * collectives' bits; a rank that closes its window early fails its
 * peers' waits for more, naming it; a window one rank cannot allocate
 * fails on every rank, naming it and the cause; after a stop (a timed
 * out wait) rank 0 keeps its buffer until the peers, which read it
 * after the stop, have closed their mappings. Without cuda that part is skipped, said so. */
#include <unistd.h>

#include "parallel/group.h"
#include "parallel_test.h"
#include "tensor/dtype.h"

enum { CALLS = 40, MAXR = 8 };

typedef struct {
    int order[MAXR], seen;
    size_t n;
    titan_dtype dt;
    int call, bad;
} visit;

static float value(int rank, int call, size_t i, int block) {
    return (float)((rank + 1) * 0.5 + call * 0.25 + (double)i * 1e-3 - block * 0.125);
}

static void fill(void *dst, titan_dtype dt, size_t n, int rank, int call, int block) {
    for (size_t i = 0; i < n; i++) {
        float v = value(rank, call, i, block);
        if (dt == TITAN_DTYPE_F32) ((float *)dst)[i] = v;
        else ((uint16_t *)dst)[i] = titan_f32_to_bf16(v);
    }
}

static void on_block(void *arg, int r, void *data) {
    visit *v = arg;
    v->order[v->seen++] = r;
    char want[4096];
    fill(want, v->dt, v->n, r, v->call, -1);
    if (memcmp(want, data, v->n * titan_dtype_size(v->dt)) != 0) v->bad++;
}

static void partial(void *arg, int d, void *dst) {
    visit *v = arg;
    v->order[v->seen++] = d;
    fill(dst, v->dt, v->n, -1, v->call, d); /* rank-independent values are fine; sums differ by rank below */
}

/* A partial made from the published block d, read in place (the cp
 * ring's dK and dV from rank d's keys): its values must be d's as
 * published, whatever the peers do meanwhile. */
typedef struct {
    titan_group *g;
    visit v;
    int me;
} from_published;

static void partial_of_published(void *arg, int d, void *dst) {
    from_published *p = arg;
    const void *blk = NULL;
    size_t bytes = p->v.n * titan_dtype_size(p->v.dt);
    if ((p->v.call + p->me + d) % 5 == 0) usleep(2000); /* a late reader: a peer must not rewrite its block */
    if (p->g->published(p->g->ctx, d, &blk) != TITAN_OK) {
        p->v.bad++;
        memset(dst, 0, bytes);
        return;
    }
    char want[4096];
    fill(want, p->v.dt, p->v.n, d, p->v.call, -1);
    if (memcmp(want, blk, bytes) != 0) p->v.bad++;
    memcpy(dst, blk, bytes);
    p->v.order[p->v.seen++] = d;
}

/* The device side: fn's blocks are device memory, read and written through the backend. */
typedef struct {
    visit v;
    const titan_backend *be;
} dev_visit;

static void dev_on_block(void *arg, int r, void *data) {
    dev_visit *d = arg;
    char host[4096];
    d->be->to_host(host, data, d->v.n * titan_dtype_size(d->v.dt));
    on_block(&d->v, r, host);
}

static void dev_partial(void *arg, int b, void *dst) {
    dev_visit *d = arg;
    char host[4096];
    partial(&d->v, b, host);
    d->be->to_device(dst, host, d->v.n * titan_dtype_size(d->v.dt));
}

/* comm.h's window calls over device memory: each rank's block written
 * with to_device, posted, read by every peer where it lies. */
static void device_window(titan_comm *c, const titan_backend *be) {
    int me = titan_comm_rank(c), n = titan_comm_size(c);
    enum { WCNT = 1000 };
    titan_comm_window *w = NULL;
    CHECK(titan_comm_window_create(c, WCNT * 4, be, &w) == TITAN_OK, "device window: %s", titan_error_message());
    if (!w) return;
    CHECK(titan_comm_window_device(w), "a window on cuda's buffers is device memory");
    float mine[WCNT], got[WCNT], want[WCNT];
    int bad = 0;
    for (unsigned long long k = 1; k <= 6; k++) {
        int half = (int)(k % 2);
        fill(mine, TITAN_DTYPE_F32, WCNT, me, (int)k, half);
        be->to_device(titan_comm_window_buf(w, me, half), mine, sizeof mine);
        titan_comm_window_post(w, 2 * k); /* written */
        for (int r = 0; r < n; r++) {
            if (r == me) continue;
            CHECK(titan_comm_window_wait(w, r, 2 * k, "test block") == TITAN_OK, "wait: %s", titan_error_message());
            be->to_host(got, titan_comm_window_buf(w, r, half), sizeof got);
            fill(want, TITAN_DTYPE_F32, WCNT, r, (int)k, half);
            bad += memcmp(got, want, sizeof got) != 0;
        }
        titan_comm_window_post(w, 2 * k + 1); /* read: the half may be rewritten two calls on */
        for (int r = 0; r < n; r++)
            if (r != me) CHECK(titan_comm_window_wait(w, r, 2 * k + 1, "test read") == TITAN_OK);
    }
    CHECK(bad == 0, "every peer's device block read where it lies, as written (%d wrong)", bad);
    titan_comm_window_free(w);
    /* A rank that closes its window early (a failed rank's way out): a
     * wait for what it posted before still passes, a wait for more fails
     * at once naming it, not reading a block that never came. */
    int last = n - 1;
    w = NULL;
    CHECK(titan_comm_window_create(c, WCNT * 4, be, &w) == TITAN_OK, "device window: %s", titan_error_message());
    if (me == last) {
        titan_comm_window_post(w, 5);
        titan_comm_window_free(w);
    } else if (w) {
        char closed[64];
        snprintf(closed, sizeof closed, "rank %d closed its window at value 5", last);
        CHECK(titan_comm_window_wait(w, last, 5, "test early") == TITAN_OK, "a value posted before closing: %s",
              titan_error_message());
        titan_status st = titan_comm_window_wait(w, last, 6, "test early");
        CHECK(st == TITAN_ERR_COMM && strstr(titan_error_message(), closed),
              "a wait for more than a closed rank posted fails, naming it: %s", titan_error_message());
        titan_error_clear();
        titan_comm_window_free(w);
    }
    /* The last rank out of device memory (its share of the GPU cut to
     * nothing): the window fails on every rank, naming that rank, and
     * nothing waits for it; the communicator goes on. */
    if (me == last) {
        printf("  rank %d: its GPU share cut to nothing (the refusal below is the test's)\n", me);
        be->set_option(TITAN_OPT_DEVICE_SHARE, 1 << 30);
    }
    titan_comm_window *none = NULL;
    titan_status st = titan_comm_window_create(c, WCNT * 4, be, &none);
    char named[32];
    snprintf(named, sizeof named, "rank %d:", last);
    CHECK(st == TITAN_ERR_FAIL && !none && strstr(titan_error_message(), named) &&
              strstr(titan_error_message(), "no device memory for its buffer"),
          "a window one rank cannot allocate fails on all, naming it and the cause: %s", titan_error_message());
    if (me == last) be->set_option(TITAN_OPT_DEVICE_SHARE, 0);
    titan_error_clear();
    /* On the emulator's GPUs without peer access (TITAN_EMU_NO_PEER, one
     * GPU a rank): no rank maps another's buffer, every rank fails naming
     * the cause, with the hint to turn async tp off. */
    const char *lib = getenv("TITAN_CUDA_LIB"), *devs = getenv("TITAN_EMU_DEVICES");
    if (lib && strstr(lib, "emu") && devs && atoi(devs) >= n) {
        setenv("TITAN_EMU_NO_PEER", "1", 1);
        st = titan_comm_window_create(c, WCNT * 4, be, &none);
        CHECK(st == TITAN_ERR_FAIL && !none && strstr(titan_error_message(), "mapping rank") &&
                  strstr(titan_error_hint_text(), "needs peer access"),
              "GPUs without peer access: the window fails on all, naming the cause, with the hint: %s (hint: %s)",
              titan_error_message(), titan_error_hint_text());
        unsetenv("TITAN_EMU_NO_PEER");
        if (me == 0) printf("  %d ranks on GPUs without peer access: the window refused with the hint: %s\n", n,
                            st == TITAN_ERR_FAIL ? "yes" : "NO");
        titan_error_clear();
    }
}

/* The failure path: rank 0's wait times out, which stops the
 * communicator (and its world: the job's last test), and every rank frees
 * its window. Rank 0 must not free its buffer while a peer still maps it:
 * the peers read rank 0's block after the stop, before freeing their own
 * windows, and must find it as written (the emulator makes a read of a
 * freed export fault, SIGBUS). */
static void device_window_stopped(titan_comm *c, const titan_backend *be) {
    int me = titan_comm_rank(c);
    enum { WCNT = 1000 };
    float mine[WCNT], got[WCNT];
    titan_comm_set_timeout(c, 1.0); /* the window's split inherits it */
    titan_comm_window *w = NULL;
    CHECK(titan_comm_window_create(c, WCNT * 4, be, &w) == TITAN_OK, "device window: %s", titan_error_message());
    if (!w) return;
    if (me == 0) {
        fill(mine, TITAN_DTYPE_F32, WCNT, 0, 99, 0);
        be->to_device(titan_comm_window_buf(w, 0, 0), mine, sizeof mine);
        titan_comm_window_post(w, 1);
        CHECK(titan_comm_window_wait(w, 1, 99, "test stop") == TITAN_ERR_COMM, "a wait for a value never posted "
              "times out");
    } else {
        CHECK(titan_comm_window_wait(w, 0, 1, "test stop") == TITAN_OK, "rank 0's block: %s", titan_error_message());
        CHECK(titan_comm_window_wait(w, 0, 99, "test stop") == TITAN_ERR_COMM, "the stop fails the wait");
        usleep(200000); /* rank 0 is freeing its window meanwhile */
        be->to_host(got, titan_comm_window_buf(w, 0, 0), sizeof got);
        fill(mine, TITAN_DTYPE_F32, WCNT, 0, 99, 0);
        CHECK(memcmp(got, mine, sizeof got) == 0, "rank 0's block read after the stop, as written");
    }
    titan_error_clear();
    titan_comm_window_free(w);
}

/* The group's collective matmuls on device buffers: the host collectives' bits. */
static void device_group(titan_comm *c, const titan_backend *be) {
    titan_group *g = NULL;
    CHECK(titan_parallel_group_create(&g, c, be) == TITAN_OK && g, "a group on %s: %s", be->name,
          titan_error_message());
    if (!g) return;
    CHECK(g->all_gather_each && g->reduce_scatter_each, "a group on %s's buffers offers collective matmuls", be->name);
    int me = g->rank, n = g->size;
    size_t cnt = 300;
    CHECK(g->reserve(g->ctx, cnt * 4 * (size_t)n) == TITAN_OK && g->overlap_reserve(g->ctx, cnt * 4) == TITAN_OK,
          "reserve on %s: %s", be->name, titan_error_message());
    char mine[1200], full[MAXR * 1200], ref[MAXR * 1200], own[1200], own_ref[1200];
    void *d_mine = be->alloc(sizeof mine), *d_full = be->alloc(sizeof full), *d_own = be->alloc(sizeof own);
    for (int call = 0; call < 12 && d_mine && d_full && d_own; call++) {
        titan_dtype dt = call % 3 ? TITAN_DTYPE_F32 : TITAN_DTYPE_BF16;
        size_t bytes = cnt * titan_dtype_size(dt);
        if ((call + me) % 5 == 0) usleep(2000); /* a late rank */
        dev_visit v = {.v = {.n = cnt, .dt = dt, .call = call}, .be = be};
        fill(mine, dt, cnt, me, call, -1);
        be->to_device(d_mine, mine, bytes);
        CHECK(g->all_gather_each(g->ctx, d_mine, d_full, cnt, dt, dev_on_block, &v) == TITAN_OK,
              "device all_gather_each: %s", titan_error_message());
        be->to_host(full, d_full, (size_t)n * bytes);
        CHECK(titan_comm_all_gather(c, mine, ref, cnt, dt, NULL) == TITAN_OK);
        CHECK(memcmp(full, ref, (size_t)n * bytes) == 0 && v.v.bad == 0 && v.v.seen == n,
              "call %d: device all_gather_each = all_gather, every block seen as published", call);
        dev_visit w = {.v = {.n = cnt, .dt = dt, .call = call + me}, .be = be};
        CHECK(g->reduce_scatter_each(g->ctx, d_own, cnt, dt, dev_partial, &w) == TITAN_OK,
              "device reduce_scatter_each: %s", titan_error_message());
        be->to_host(own, d_own, bytes);
        for (int d = 0; d < n; d++) fill(ref + (size_t)d * bytes, dt, cnt, -1, call + me, d);
        CHECK(titan_comm_reduce_scatter(c, ref, own_ref, cnt, dt, TITAN_COMM_SUM, NULL) == TITAN_OK);
        CHECK(memcmp(own, own_ref, bytes) == 0, "call %d: device reduce_scatter_each = reduce_scatter, bit for bit",
              call);
        fill(own, dt, cnt, me, call, 7);
        be->to_device(d_own, own, bytes);
        CHECK(titan_comm_all_reduce(c, own, own_ref, cnt, dt, TITAN_COMM_SUM, NULL) == TITAN_OK);
        CHECK(g->all_reduce(g->ctx, d_own, cnt, dt) == TITAN_OK, "device all_reduce: %s", titan_error_message());
        be->to_host(own, d_own, bytes);
        CHECK(memcmp(own, own_ref, bytes) == 0, "call %d: device all_reduce over the window, bit for bit", call);
    }
    CHECK(d_mine && d_full && d_own, "device buffers");
    be->free(d_mine), be->free(d_full), be->free(d_own);
    titan_parallel_group_free(g);
}

/* cuda:N where the backend opens (N: the rank over the GPUs), else NULL. */
static const titan_backend *open_cuda(int rank) {
    int count = 0;
    const titan_backend *be = NULL;
    char dev[32], desc[256];
    if (titan_backend_cuda_device_count(&count) == TITAN_OK && count > 0) {
        snprintf(dev, sizeof dev, "cuda:%d", rank % count);
        if (titan_backend_open_desc(dev, &be, desc, sizeof desc) != TITAN_OK) be = NULL;
    }
    titan_error_clear();
    return be;
}

static int run(const titan_layout *l) {
    titan_mesh m;
    if (!mesh_join(l, &m)) return 1;
    CHECK(titan_mesh_groups(&m, titan_backend_cpu()) == TITAN_OK, "tp group: %s", titan_error_message());
    titan_group *g = m.tp_group;
    int me = g->rank, n = g->size;
    CHECK(g->all_gather_each && g->reduce_scatter_each && g->overlap_reserve && g->publish && g->published,
          "a cpu tp group offers collective matmuls");
    size_t cnt = 300; /* not a multiple of 64 bytes in bf16 */
    CHECK(g->overlap_reserve(g->ctx, cnt * 4) == TITAN_OK, "overlap_reserve: %s", titan_error_message());
    char mine[4096], full[MAXR * 1200], ref[MAXR * 1200], own[1200], own_ref[1200];
    int f0 = failures;
    for (int call = 0; call < CALLS; call++) {
        titan_dtype dt = call % 3 ? TITAN_DTYPE_F32 : TITAN_DTYPE_BF16;
        size_t e = titan_dtype_size(dt), bytes = cnt * e;
        if ((call + me) % 7 == 0) usleep(3000); /* a late rank */
        visit v = {.n = cnt, .dt = dt, .call = call};
        fill(mine, dt, cnt, me, call, -1);
        memset(full, 0xff, (size_t)n * bytes);
        CHECK(g->all_gather_each(g->ctx, mine, full, cnt, dt, on_block, &v) == TITAN_OK, "all_gather_each: %s",
              titan_error_message());
        CHECK(titan_comm_all_gather(m.tp_comm, mine, ref, cnt, dt, NULL) == TITAN_OK);
        CHECK(memcmp(full, ref, (size_t)n * bytes) == 0, "call %d: all_gather_each's full = all_gather's", call);
        CHECK(v.bad == 0 && v.seen == n, "call %d: fn saw every block's values (%d bad of %d)", call, v.bad, v.seen);
        for (int s = 0; s < n; s++) CHECK(v.order[s] == (me + s) % n, "call %d: ring order, step %d", call, s);

        visit w = {.n = cnt, .dt = dt, .call = call + me}; /* each rank's partials differ */
        CHECK(g->reduce_scatter_each(g->ctx, own, cnt, dt, partial, &w) == TITAN_OK, "reduce_scatter_each: %s",
              titan_error_message());
        for (int d = 0; d < n; d++) fill(ref + (size_t)d * bytes, dt, cnt, -1, call + me, d);
        CHECK(titan_comm_reduce_scatter(m.tp_comm, ref, own_ref, cnt, dt, TITAN_COMM_SUM, NULL) == TITAN_OK);
        CHECK(memcmp(own, own_ref, bytes) == 0, "call %d: reduce_scatter_each = reduce_scatter, bit for bit", call);
        for (int s = 1; s <= n; s++) CHECK(w.order[s - 1] == (me + s) % n, "call %d: peers' blocks first", call);
        /* publish, then the partials from the published blocks (both halves in turn) */
        from_published p = {.g = g, .me = me, .v = {.n = cnt, .dt = dt, .call = call + 1000}};
        fill(mine, dt, cnt, me, call + 1000, -1);
        CHECK(g->publish(g->ctx, mine, cnt, dt) == TITAN_OK, "publish: %s", titan_error_message());
        CHECK(g->reduce_scatter_start(g->ctx, cnt, dt, partial_of_published, &p) == TITAN_OK,
              "reduce_scatter_start of published blocks: %s", titan_error_message());
        if (call == 0) /* the finish must come next: another call meanwhile is refused, nothing posted */
            CHECK(g->all_reduce(g->ctx, own, cnt, dt) == TITAN_ERR_FAIL, "a call between start and finish is refused");
        if ((call + me) % 3 == 0) usleep(1000); /* the caller's compute between the two */
        CHECK(g->reduce_scatter_finish(g->ctx, own) == TITAN_OK, "reduce_scatter_finish: %s", titan_error_message());
        CHECK(p.v.bad == 0 && p.v.seen == n, "call %d: every published block read as published (%d bad)", call,
              p.v.bad);
        for (int d = 0; d < n; d++) fill(ref + (size_t)d * bytes, dt, cnt, d, call + 1000, -1);
        CHECK(titan_comm_reduce_scatter(m.tp_comm, ref, own_ref, cnt, dt, TITAN_COMM_SUM, NULL) == TITAN_OK);
        CHECK(memcmp(own, own_ref, bytes) == 0, "call %d: the published blocks' reduce-scatter, bit for bit", call);
        /* publish, then all_gather_each of the published blocks (mine NULL: the cp ring's forward) */
        visit pv = {.n = cnt, .dt = dt, .call = call + 2000};
        fill(mine, dt, cnt, me, call + 2000, -1);
        CHECK(g->publish(g->ctx, mine, cnt, dt) == TITAN_OK, "publish: %s", titan_error_message());
        if ((call + me) % 4 == 0) usleep(1000); /* the caller's compute between the two */
        memset(full, 0xff, (size_t)n * bytes);
        CHECK(g->all_gather_each(g->ctx, NULL, full, cnt, dt, on_block, &pv) == TITAN_OK,
              "all_gather_each of the published blocks: %s", titan_error_message());
        CHECK(titan_comm_all_gather(m.tp_comm, mine, ref, cnt, dt, NULL) == TITAN_OK);
        CHECK(memcmp(full, ref, (size_t)n * bytes) == 0 && pv.bad == 0 && pv.seen == n,
              "call %d: all_gather_each of the published blocks = all_gather", call);
        /* the group's all-reduce now takes the window: the shm all_reduce's bits */
        fill(own, dt, cnt, me, call, 7);
        CHECK(titan_comm_all_reduce(m.tp_comm, own, own_ref, cnt, dt, TITAN_COMM_SUM, NULL) == TITAN_OK);
        CHECK(g->all_reduce(g->ctx, own, cnt, dt) == TITAN_OK, "all_reduce: %s", titan_error_message());
        CHECK(memcmp(own, own_ref, bytes) == 0, "call %d: all_reduce over the window = all_reduce, bit for bit", call);
    }
    double exposed = g->take_exposed_s(g->ctx), total = g->take_comm_s(g->ctx);
    CHECK(exposed >= 0 && exposed <= total, "exposed %.6f s within total %.6f s", exposed, total);
    /* a block larger than reserved is refused, not overrun */
    CHECK(g->all_gather_each(g->ctx, mine, full, cnt * 4, TITAN_DTYPE_F32, NULL, NULL) == TITAN_ERR_FAIL,
          "an oversized block is refused");
    titan_group *guard = NULL;
    CHECK(titan_parallel_group_create(&guard, m.tp_comm, titan_backend_cpu_guard()) == TITAN_OK);
    const void *none = NULL;
    CHECK(g->published(g->ctx, 0, &none) == TITAN_ERR_FAIL && !none, "no published block once its window is reused");
    CHECK(g->all_gather_each(g->ctx, NULL, full, cnt, TITAN_DTYPE_F32, NULL, NULL) == TITAN_ERR_FAIL,
          "all_gather_each of published blocks without a publish just before is refused");
    CHECK(guard && !guard->all_gather_each && !guard->publish, "a group over device buffers (cpu-guard) offers no collective matmuls");
    titan_parallel_group_free(guard);
    if (me == 0)
        printf("  %d ranks: %d calls of all_gather_each and reduce_scatter_each (f32, bf16) = the blocking "
               "collectives: %s\n", n, CALLS, failures == f0 ? "yes" : "NO");
    const titan_backend *cuda = open_cuda(me);
    /* every rank must agree on taking the device part (it is collective) */
    float has = cuda ? 1.f : 0.f, all = 0;
    CHECK(titan_comm_all_reduce(m.tp_comm, &has, &all, 1, TITAN_DTYPE_F32, TITAN_COMM_SUM, NULL) == TITAN_OK);
    if (all == (float)n) {
        int f1 = failures;
        device_window(m.tp_comm, cuda);
        device_group(m.tp_comm, cuda);
        if (me == 0) printf("  %d ranks on cuda: device windows and collective matmuls: %s\n", n,
                            failures == f1 ? "yes" : "NO");
        f1 = failures;
        device_window_stopped(m.tp_comm, cuda); /* the last: it stops the communicators */
        if (me == 0) printf("  %d ranks on cuda: a stopped window's buffer outlives its peers' reads: %s\n", n,
                            failures == f1 ? "yes" : "NO");
    } else if (me == 0) {
        printf("  %d ranks on cuda: skipped (no cuda backend opens here)\n", n);
    }
    titan_mesh_free(&m);
    return failures == f0 ? 0 : 1;
}

int main(int argc, char **argv) {
    static const parallel_job jobs[] = {{2, "tp=2"}, {3, "tp=3"}, {4, "tp=4"}};
    return parallel_main(argc, argv, "test_group_overlap", "overlap", run, jobs, (int)(sizeof jobs / sizeof *jobs));
}
