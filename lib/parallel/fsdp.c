/* fsdp.c - data-parallel training state (see fsdp.h): the staging
 * buffers, the queues of collectives, gathers, reductions, the model's
 * hooks, and the step's operations. The plan (which rank holds what, the
 * units) is fsdp_plan.c's; the struct, fsdp_impl.h's. */
#include "parallel/fsdp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/mem.h"
#include "optim/optim.h"
#include "parallel/fsdp_impl.h"

/* ---- staging buffers ------------------------------------------------------- */

static void keep(titan_fsdp *f, titan_status st) {
    if (st != TITAN_OK && f->err == TITAN_OK) f->err = st;
}

static void q_pop(titan_fsdp *f, int qi);

static void stage_free(titan_fsdp *f, stage *s) {
    if (s->buf) f->be->free(s->buf);
    titan_free_pages(s->host);
    s->buf = s->host = NULL;
    s->cap = 0;
}

/* A staging buffer of `bytes` where the model's memory is (the CPU
 * backend's is page-backed host memory), and its host mirror where
 * collectives need one. */
static titan_status stage_alloc(titan_fsdp *f, stage *s, size_t bytes) {
    stage_free(f, s);
    s->buf = f->be->alloc(bytes);
    if (s->buf && f->mirror) s->host = titan_alloc_pages(bytes, "fsdp staging buffer (host mirror)");
    if (!s->buf || (f->mirror && !s->host)) {
        stage_free(f, s);
        return titan_error(TITAN_ERR_NOMEM, "fsdp staging buffer of %zu bytes (%s): out of memory", bytes,
                           f->be->name);
    }
    s->cap = bytes;
    return TITAN_OK;
}

/* Where a collective reads and writes stage k's bytes [off, ...): the host
 * mirror, or the buffer itself. */
static char *comm_buf(titan_fsdp *f, int k, size_t off) {
    return (char *)(f->mirror ? f->stages[k].host : f->stages[k].buf) + off;
}

/* Mirror: bytes [off, off + n) of stage k to the host before a collective
 * reads them, or back to the device after it wrote them. */
static void mirror_out(titan_fsdp *f, int k, size_t off, size_t n) {
    if (f->mirror) f->be->to_host((char *)f->stages[k].host + off, (char *)f->stages[k].buf + off, n);
}
static void mirror_in(titan_fsdp *f, int k, size_t off, size_t n) {
    if (f->mirror) f->be->to_device((char *)f->stages[k].buf + off, (char *)f->stages[k].host + off, n);
}

/* TITAN_FSDP_POISON: n elements of NaN of type dt at p (backend memory). */
static void fill_nan(titan_fsdp *f, void *p, titan_dtype dt, size_t n) {
    float nan32[4096], chunk[4096];
    for (size_t i = 0; i < 4096; i++) nan32[i] = NAN;
    titan_dtype_convert(chunk, dt, nan32, TITAN_DTYPE_F32, 4096); /* fits: at most 4 bytes each */
    size_t esz = titan_dtype_size(dt);
    for (size_t i = 0; i < n; i += 4096)
        f->be->to_device((char *)p + i * esz, chunk, (n - i < 4096 ? n - i : 4096) * esz);
}

/* The staging buffers of titan_fsdp_staging, allocated once at setup
 * (again when the float8 all-gather changes the layout): what a rank holds
 * for them is the same run to run, and the plan's (memory_estimate.c). */
static titan_status stage_setup(titan_fsdp *f, int fp8_gather) {
    titan_fsdp_memory m = {.nshards = f->nshards};
    for (int u = 0; u < f->nunits; u++) {
        const unit *x = &f->units[u];
        if (x->p1 <= x->p0) continue;
        m.nonempty++;
        if (x->full_len > m.unit_max) m.unit_max = x->full_len;
        if (x->p1 - x->p0 > m.unit_tensors_max) m.unit_tensors_max = x->p1 - x->p0;
    }
    int staged = f->mesh->replicate_comm && (f->rdtype != TITAN_DTYPE_F32 || f->mirror), n;
    size_t bytes;
    titan_fsdp_staging(&m, f->pdtype, f->rdtype, staged, fp8_gather, &n, &bytes);
    for (int k = 0; k < NSTAGE; k++) {
        if (k >= n) stage_free(f, &f->stages[k]);
        else if (f->stages[k].cap != bytes) TITAN_TRY(stage_alloc(f, &f->stages[k], bytes));
    }
    f->nstage = n;
    return TITAN_OK;
}

/* A free staging buffer (the first), waiting for the oldest queued
 * operation while all are busy; -1 on failure (kept in f->err). */
static int stage_get(titan_fsdp *f, size_t bytes) {
    for (;;) {
        int k = -1;
        for (int j = 0; j < f->nstage && k < 0; j++)
            if (!f->stages[j].busy) k = j;
        if (k >= 0) {
            if (f->stages[k].cap < bytes) { /* titan_fsdp_staging's sizes cover every collective */
                keep(f, titan_error(TITAN_ERR_FAIL, "fsdp: a collective of %zu bytes over its staging buffer's %zu",
                                    bytes, f->stages[k].cap));
                return -1;
            }
            f->stages[k].busy = 1;
            return k;
        }
        /* Every buffer belongs to a queued operation: complete the oldest. */
        int qi = f->q[Q_SHARD].head < f->q[Q_SHARD].tail ? Q_SHARD : Q_REPLICATE;
        if (f->q[qi].head == f->q[qi].tail) { /* cannot happen: busy means queued */
            keep(f, titan_error(TITAN_ERR_FAIL, "fsdp: every staging buffer is busy and no operation is queued"));
            return -1;
        }
        q_pop(f, qi);
    }
}

/* Between the flat model (tensor by tensor, each tensor's shard chunks in
 * rank order) of type fdt and a unit's buffer (rank by rank, each rank's
 * chunks in tensor order) of type dt, converting between the two. */
static void permute(titan_fsdp *f, const unit *u, void *flat, titan_dtype fdt, void *buf,
                    titan_dtype dt, int to_buf) {
    int S = f->nshards;
    size_t esz = titan_dtype_size(dt), fsz = titan_dtype_size(fdt);
    for (int r = 0; r < S; r++) {
        size_t bpos = u->rank_off[r];
        for (int i = u->p0; i < u->p1; i++) {
            const size_t *c = f->counts + (size_t)i * S;
            size_t fpos = f->pieces[i].param_off;
            for (int q = 0; q < r; q++) fpos += c[q];
            char *b = (char *)buf + bpos * esz, *x = (char *)flat + fpos * fsz;
            if (to_buf)
                f->be->convert(b, dt, x, fdt, c[r]);
            else
                f->be->convert(x, fdt, b, dt, c[r]);
            bpos += c[r];
        }
    }
}

/* Parameters of a unit no block needs now: the pages go back (mem.h), or
 * with TITAN_FSDP_POISON=1 they are filled with NaN, which proves that no
 * block reads parameters it did not gather. */
static void reshard(titan_fsdp *f, int ui) {
    unit *u = &f->units[ui];
    if (u->state != READY || u->p1 <= u->p0) return;
    u->state = STALE;
    if (f->poison) { /* what the blocks read: the compute copy when gathers write it */
        if (f->direct) {
            size_t e = titan_dtype_size(f->pdtype);
            fill_nan(f, (char *)titan_llama_compute_copy(f->model) + u->full_off * e, f->pdtype,
                     u->full_len);
        } else {
            fill_nan(f, titan_llama_params_data(f->model) + u->full_off, TITAN_DTYPE_F32,
                     u->full_len);
        }
        return;
    }
    /* with its compute copy: the next gather's block casts it again */
    titan_llama_release_params(f->model, u->full_off, u->full_len);
}

/* ---- operation queues ------------------------------------------------------ */

/* The operation's follow-up, once it completed: unpack a gather into the
 * model, a reduce-scatter's part into the shard gradient, an all-reduce's
 * result back into it. */
static void finish(titan_fsdp *f, const pending *p) {
    if (p->fin == FIN_NONE) return;
    unit *u = &f->units[p->unit];
    char *buf = f->stages[p->stage].buf;
    if (p->fin == FIN_GATHER) {
        /* into the compute copy (direct) or the fp32 parameters */
        mirror_in(f, p->stage, 0, f->fp8_gather ? u->fp8_bytes : u->full_len * titan_dtype_size(f->pdtype));
        void *flat = f->direct ? titan_llama_compute_copy(f->model) : titan_llama_params_data(f->model);
        titan_dtype fdt = f->direct ? f->pdtype : TITAN_DTYPE_F32;
        keep(f, f->direct ? titan_llama_commit_copy(f->model, u->full_off, u->full_len)
                          : titan_llama_commit_params(f->model, u->full_off, u->full_len));
        if (f->err == TITAN_OK) {
            if (f->fp8_gather) titan_fsdp_fp8_unpack(f, u, buf, flat, fdt);
            else permute(f, u, flat, fdt, buf, f->pdtype, 0);
            if (f->direct) titan_llama_set_copy_current(f->model, u->full_off, u->full_len, 1);
        }
        u->state = READY;
    } else if (p->fin == FIN_REDUCE_SCATTER) {
        size_t esz = titan_dtype_size(f->rdtype), off = u->rank_off[f->me] * esz;
        mirror_in(f, p->stage, off, u->shard_len * esz);
        float *g = f->unit_grad ? f->unit_grad : f->sg + u->shard_off; /* transient: one unit's at a time */
        f->be->convert(g, TITAN_DTYPE_F32, buf + off, f->rdtype, u->shard_len);
        u->reduced = 2;
        titan_fsdp_unit_grad ug = {u->p0, u->p1, u->shard_off, u->shard_len, g};
        if (f->unit_done) f->unit_done(f->unit_done_ctx, &ug);
    } else {
        mirror_in(f, p->stage, 0, u->shard_len * titan_dtype_size(f->rdtype));
        f->be->convert(f->sg + u->shard_off, TITAN_DTYPE_F32, buf, f->rdtype, u->shard_len);
    }
    f->stages[p->stage].busy = 0;
}

/* The operation at the head completed (or is awaited): book its running
 * time, and as exposed the part of it waited for here; then its follow-up. */
static void q_pop(titan_fsdp *f, int qi) {
    op_queue *q = &f->q[qi];
    pending p = q->ops[q->head % q->cap];
    q->head++;
    double t0 = titan_now_s(), start = 0.0, end = 0.0;
    titan_status st = titan_comm_wait_timed(p.req, &start, &end);
    /* Exposed: the part of its running time we spent blocked here (the
     * thread hand-over latency around it is neither). */
    double a = t0 > start ? t0 : start, b = titan_now_s();
    if (b > end) b = end;
    if (b > a) f->exposed_s += b - a;
    f->total_s += end - start;
    if (st == TITAN_OK)
        finish(f, &p);
    else if (p.fin != FIN_NONE)
        f->stages[p.stage].busy = 0;
    keep(f, st);
}

/* Books whatever completed, without blocking. */
static void q_poll(titan_fsdp *f) {
    for (int qi = 0; qi < NQ; qi++)
        while (f->q[qi].head < f->q[qi].tail && titan_comm_test(f->q[qi].ops[f->q[qi].head % f->q[qi].cap].req))
            q_pop(f, qi);
}

/* Waits until operation seq (and all before it) of queue qi completed. */
static void q_wait(titan_fsdp *f, int qi, unsigned long long seq) {
    while (f->q[qi].head <= seq && f->q[qi].head < f->q[qi].tail) q_pop(f, qi);
}

static void q_drain(titan_fsdp *f) {
    for (int qi = 0; qi < NQ; qi++)
        while (f->q[qi].head < f->q[qi].tail) q_pop(f, qi);
}

/* Makes room for one operation; returns the slot for its handle. */
static pending *q_slot(titan_fsdp *f, int qi) {
    op_queue *q = &f->q[qi];
    if (q->tail - q->head == q->cap) q_pop(f, qi);
    return &q->ops[q->tail % q->cap];
}

/* Books the operation just issued (after a successful call). */
static unsigned long long q_push(titan_fsdp *f, int qi, int fin, int ui, int stage) {
    op_queue *q = &f->q[qi];
    pending *p = &q->ops[q->tail % q->cap];
    p->fin = fin;
    p->unit = ui;
    p->stage = stage;
    return q->tail++;
}

/* ---- gathers ------------------------------------------------------------- */

/* One all-gather for the unit: our shard part into its place in a staging
 * buffer, gathered in place. The part is cast to the parameter dtype, or
 * with the float8 all-gather (fsdp_fp8.c) laid out in bytes, the float8
 * weights as codes (their amaxes reduced first when stale). */
static void issue_gather(titan_fsdp *f, int ui) {
    unit *u = &f->units[ui];
    if (u->state != STALE) return;
    if (f->fp8_gather) keep(f, titan_fsdp_fp8_refresh(f));
    if (f->err != TITAN_OK) return;
    size_t esz = titan_dtype_size(f->pdtype);
    size_t off = f->fp8_gather ? u->fp8_rank_off[f->me] : u->rank_off[f->me] * esz;
    size_t mine = f->fp8_gather ? u->fp8_counts[f->me] : u->shard_len * esz;
    int k = stage_get(f, f->fp8_gather ? u->fp8_bytes : u->full_len * esz);
    if (k < 0) return;
    char *dst = (char *)f->stages[k].buf + off;
    if (f->fp8_gather) titan_fsdp_fp8_pack(f, u, dst);
    else f->be->convert(dst, f->pdtype, f->sp + u->shard_off, TITAN_DTYPE_F32, u->shard_len);
    mirror_out(f, k, off, mine);
    pending *p = q_slot(f, Q_SHARD);
    titan_status st = titan_comm_all_gather_v(f->mesh->shard_comm, comm_buf(f, k, off), comm_buf(f, k, 0),
                                              f->fp8_gather ? u->fp8_counts : u->counts,
                                              f->fp8_gather ? TITAN_DTYPE_U8 : f->pdtype, &p->req);
    if (st != TITAN_OK) {
        f->stages[k].busy = 0;
        keep(f, st);
        return;
    }
    u->ag_seq = q_push(f, Q_SHARD, FIN_GATHER, ui, k);
    u->state = INFLIGHT;
}

static void ensure(titan_fsdp *f, int ui) {
    unit *u = &f->units[ui];
    if (u->state == STALE) issue_gather(f, ui);
    if (u->state == INFLIGHT) q_wait(f, Q_SHARD, u->ag_seq);
}

/* The units block b reads: its own, and with tied embeddings the head
 * reads block 0's tok_embeddings. */
static int needs(const titan_fsdp *f, int b, int out[2]) {
    int n = 0;
    out[n++] = f->unit_of[b];
    if (f->tied && b == f->nblocks - 1 && f->unit_of[0] != out[0]) out[n++] = f->unit_of[0];
    return n;
}

static void prefetch_block(titan_fsdp *f, int b) {
    if (b < 0 || b >= f->nblocks) return;
    int us[2], n = needs(f, b, us);
    for (int k = 0; k < n; k++) issue_gather(f, us[k]);
}

static void ensure_block(titan_fsdp *f, int b, int next) {
    int us[2], n = needs(f, b, us);
    for (int k = 0; k < n; k++) issue_gather(f, us[k]);
    prefetch_block(f, next); /* queued behind ours, runs while we compute */
    for (int k = 0; k < n; k++) ensure(f, us[k]);
}

/* ---- gradient reductions ------------------------------------------------ */

/* HSDP/DDP: all-reduce over the replicate group each unit whose shard
 * gradient is final, in descending unit order (the same on every rank). */
static void advance_replicate(titan_fsdp *f) {
    while (f->next_ar >= 0) {
        int ui = f->next_ar;
        unit *u = &f->units[ui];
        if (u->reduced < 2) return;
        if (f->mesh->replicate_comm && u->shard_len > 0) {
            float *g = f->sg + u->shard_off;
            int k = -1, fin = FIN_NONE;
            void *buf = g;
            if (f->rdtype != TITAN_DTYPE_F32 || f->mirror) {
                size_t bytes = u->shard_len * titan_dtype_size(f->rdtype);
                k = stage_get(f, bytes);
                if (k < 0) return;
                f->be->convert(f->stages[k].buf, f->rdtype, g, TITAN_DTYPE_F32, u->shard_len);
                mirror_out(f, k, 0, bytes);
                buf = comm_buf(f, k, 0);
                fin = FIN_ALL_REDUCE;
            }
            pending *p = q_slot(f, Q_REPLICATE);
            titan_status st = titan_comm_all_reduce(f->mesh->replicate_comm, buf, buf, u->shard_len, f->rdtype,
                                                    TITAN_COMM_AVG, &p->req);
            if (st == TITAN_OK)
                q_push(f, Q_REPLICATE, fin, ui, k);
            else if (k >= 0)
                f->stages[k].busy = 0;
            keep(f, st);
        }
        u->reduced = 3;
        f->next_ar--;
    }
}

/* Unit ui's gradients are final: one reduce-scatter (average) of the unit,
 * packed rank by rank in the reduce dtype; the full gradient's pages go
 * back at once (they read as zeros for the next step). */
static void start_reduce(titan_fsdp *f, int ui) {
    unit *u = &f->units[ui];
    if (u->reduced) return;
    if (f->nshards == 1 || u->p1 <= u->p0) {
        u->reduced = 2; /* unsharded: the shard is the model's own gradient */
        return;
    }
    size_t esz = titan_dtype_size(f->rdtype);
    int k = stage_get(f, u->full_len * esz);
    if (k < 0) return;
    /* committed already by its backward; reads zeros if it never ran */
    titan_status cst = titan_llama_commit_grads(f->model, u->full_off, u->full_len);
    if (cst != TITAN_OK) {
        f->stages[k].busy = 0;
        keep(f, cst);
        return;
    }
    permute(f, u, titan_llama_grads_data(f->model), TITAN_DTYPE_F32, f->stages[k].buf, f->rdtype, 1);
    titan_llama_release_grads(f->model, u->full_off, u->full_len);
    mirror_out(f, k, 0, u->full_len * esz);
    pending *p = q_slot(f, Q_SHARD);
    titan_status st = titan_comm_reduce_scatter_v(f->mesh->shard_comm, comm_buf(f, k, 0),
                                                  comm_buf(f, k, u->rank_off[f->me] * esz), u->counts, f->rdtype,
                                                  TITAN_COMM_AVG, &p->req);
    if (st != TITAN_OK) {
        f->stages[k].busy = 0;
        keep(f, st);
        return;
    }
    q_push(f, Q_SHARD, FIN_REDUCE_SCATTER, ui, k);
    u->reduced = 1;
}

/* ---- hooks (llama.h) ----------------------------------------------------- */

static titan_status hook_before_forward(void *ctx, int b) {
    titan_fsdp *f = ctx;
    if (f->nshards > 1) ensure_block(f, b, b + 1);
    q_poll(f);
    return f->err;
}

static titan_status hook_after_forward(void *ctx, int b) {
    titan_fsdp *f = ctx;
    /* The last block's backward follows at once: keep it (as torch does). */
    int ui = f->unit_of[b];
    if (f->nshards > 1 && f->reshard && b == f->units[ui].last_block && ui != f->unit_of[f->nblocks - 1])
        reshard(f, ui);
    q_poll(f);
    return f->err;
}

static titan_status hook_before_backward(void *ctx, int b) {
    titan_fsdp *f = ctx;
    if (f->nshards > 1) {
        ensure_block(f, b, b - 1);
        /* the block adds into its units' gradients (released after each step) */
        int us[2], n = needs(f, b, us);
        for (int k = 0; k < n; k++)
            keep(f, titan_llama_commit_grads(f->model, f->units[us[k]].full_off, f->units[us[k]].full_len));
    }
    q_poll(f);
    return f->err;
}

static titan_status hook_after_backward(void *ctx, int b) {
    titan_fsdp *f = ctx;
    int ui = f->unit_of[b];
    if (b == f->units[ui].first_block) {
        /* The unit's backward is done. Its parameters go until the next
         * forward (kept between micro-batches when never resharding). */
        if (f->sync) start_reduce(f, ui);
        if (f->nshards > 1 && (f->sync || f->reshard)) reshard(f, ui);
    }
    q_poll(f);
    if (f->sync) advance_replicate(f);
    return f->err;
}

titan_status titan_fsdp_create(titan_fsdp **out, titan_mesh *mesh, titan_llama *model,
                               const titan_fsdp_options *opt) {
    *out = NULL;
    titan_fsdp *f = titan_alloc(sizeof *f, "fsdp state");
    if (!f) return TITAN_ERR_NOMEM;
    memset(f, 0, sizeof *f);
    *out = f;
    const titan_llama_config *mc = titan_llama_get_config(model);
    f->mesh = mesh;
    f->model = model;
    f->be = titan_llama_backend(model); /* packing, clipping: where the model's memory is */
    titan_comm *any = mesh->shard_comm ? mesh->shard_comm : mesh->replicate_comm;
    f->mirror = !f->be->host && any && !titan_comm_device_buffers(any);
    f->np = titan_llama_params(mc, NULL);
    f->nshards = mesh->layout.dp_shard * mesh->layout.cp; /* the shard group: dp_shard x cp (mesh.h) */
    f->nblocks = titan_llama_blocks(model);
    f->tied = mc->tie_embeddings;
    f->reshard = opt ? opt->reshard_after_forward : 1;
    f->pdtype = opt ? opt->param_dtype : TITAN_DTYPE_F32;
    f->rdtype = opt ? opt->reduce_dtype : TITAN_DTYPE_F32;
    f->direct = f->nshards > 1 && f->pdtype != TITAN_DTYPE_F32 &&
                f->pdtype == titan_llama_compute_dtype(model);
    const char *poison = getenv("TITAN_FSDP_POISON");
    f->poison = poison && strcmp(poison, "1") == 0;
    f->sync = 1;
    f->pieces = titan_alloc((size_t)f->np * sizeof *f->pieces, "shard plan");
    f->counts = titan_alloc((size_t)f->np * f->nshards * sizeof(size_t), "shard counts");
    f->unit_of = titan_alloc((size_t)f->nblocks * sizeof(int), "unit plan");
    if (!f->pieces || !f->counts || !f->unit_of) return TITAN_ERR_NOMEM;
    TITAN_TRY(titan_shard_plan(&mesh->layout, mc, mesh->rank, f->pieces, &f->nshard));
    /* Every rank of this rank's shard group: same replicate coordinate. */
    titan_layout_coord c;
    titan_layout_coord_of(&mesh->layout, mesh->rank, &c);
    int cp = mesh->layout.cp;
    f->me = c.dp_shard * cp + c.cp;
    titan_shard_piece *tmp = titan_alloc((size_t)f->np * sizeof *tmp, "shard plan");
    if (!tmp) return TITAN_ERR_NOMEM;
    titan_status st = TITAN_OK;
    for (int s = 0; s < f->nshards && st == TITAN_OK; s++) {
        c.dp_shard = s / cp;
        c.cp = s % cp;
        size_t n;
        st = titan_shard_plan(&mesh->layout, mc, titan_layout_rank_of(&mesh->layout, &c), tmp, &n);
        for (int i = 0; st == TITAN_OK && i < f->np; i++) f->counts[(size_t)i * f->nshards + s] = tmp[i].len;
    }
    titan_free(tmp);
    TITAN_TRY(st);
    TITAN_TRY(titan_fsdp_make_units(f, opt));
    f->next_ar = f->nunits - 1;
    for (int qi = 0; qi < NQ; qi++) {
        op_queue *q = &f->q[qi];
        q->cap = (size_t)3 * f->nunits + 8;
        q->ops = titan_alloc(q->cap * sizeof *q->ops, "comm requests");
        if (!q->ops) return TITAN_ERR_NOMEM;
    }
    if (f->nshards == 1) {
        f->sp = titan_llama_params_data(model);
        f->sg = titan_llama_grads_data(model);
    } else {
        /* Filled by the checkpoint load; the model's full buffers stay
         * untouched (no memory) until a gather fills a unit. */
        size_t bytes = (f->nshard + 1) * sizeof(float);
        f->sp = f->be->alloc(bytes);
        f->sg = f->be->alloc(bytes);
        if (!f->sp || !f->sg)
            return titan_error(TITAN_ERR_NOMEM, "fsdp: shard parameters and gradients, 2 x %zu bytes (%s): out of memory",
                               bytes, f->be->name);
    }
    TITAN_TRY(stage_setup(f, 0));
    if (mesh->shard_comm || mesh->replicate_comm) {
        titan_llama_hooks h = {f, hook_before_forward, hook_after_forward, hook_before_backward,
                               hook_after_backward, .regathers = f->nshards > 1};
        titan_llama_set_hooks(model, &h);
    }
    return TITAN_OK;
}

void titan_fsdp_free(titan_fsdp *f) {
    if (!f) return;
    q_drain(f); /* no operation may outlive its buffers */
    if (f->model) titan_llama_set_hooks(f->model, NULL);
    titan_fsdp_fp8_free(f);
    if (f->nshards > 1) {
        if (f->sp) f->be->free(f->sp);
        if (f->sg) f->be->free(f->sg);
        if (f->unit_grad) f->be->free(f->unit_grad);
    }
    for (int qi = 0; qi < NQ; qi++) titan_free(f->q[qi].ops);
    for (int k = 0; k < NSTAGE; k++) stage_free(f, &f->stages[k]);
    for (int u = 0; f->units && u < f->nunits; u++) titan_free(f->units[u].counts);
    titan_free(f->units);
    titan_free(f->unit_of);
    titan_free(f->pieces);
    titan_free(f->counts);
    titan_free(f);
}

size_t titan_fsdp_numel(const titan_fsdp *f) { return f->nshard; }
int titan_fsdp_units(const titan_fsdp *f) { return f->nunits; }
float *titan_fsdp_params(titan_fsdp *f) { return f->sp; }
float *titan_fsdp_grads(titan_fsdp *f) { return f->sg; }
const titan_shard_piece *titan_fsdp_pieces(const titan_fsdp *f) { return f->pieces; }
void titan_fsdp_set_sync(titan_fsdp *f, int sync) { f->sync = sync; }

void titan_fsdp_comm_times(titan_fsdp *f, double *exposed_s, double *total_s) {
    *exposed_s = f->exposed_s;
    *total_s = f->total_s;
    f->exposed_s = f->total_s = 0.0;
}

titan_status titan_fsdp_zero_grads(titan_fsdp *f) {
    if (f->nshards == 1) {
        titan_llama_zero_grads(f->model);
        return TITAN_OK;
    }
    /* Usually nothing is held: each reduce-scatter gave its memory back.
     * Released gradients read as zeros when the next backward commits
     * them, so its ops add into zeros (the model's overwrite of fresh
     * gradients serves the unsharded model only). */
    for (int u = 0; u < f->nunits; u++) titan_llama_release_grads(f->model, f->units[u].full_off, f->units[u].full_len);
    return TITAN_OK;
}

titan_status titan_fsdp_fp8_staging(titan_fsdp *f) { return stage_setup(f, 1); }

titan_status titan_fsdp_gather_params(titan_fsdp *f) {
    if (f->direct) { /* the caller wants the fp32 parameters: gather afresh into them */
        q_drain(f);
        for (int u = 0; u < f->nunits; u++) reshard(f, u);
        f->direct = 0;
    }
    for (int u = 0; u < f->nunits; u++) issue_gather(f, u);
    for (int u = 0; u < f->nunits; u++) ensure(f, u);
    titan_status st = f->err;
    f->err = TITAN_OK;
    return st;
}

titan_status titan_fsdp_params_updated(titan_fsdp *f) {
    if (f->nshards == 1) return TITAN_OK;
    q_drain(f);
    for (int u = 0; u < f->nunits; u++) {
        reshard(f, u); /* gathered parameters are now out of date */
        f->units[u].state = f->units[u].p1 > f->units[u].p0 ? STALE : READY;
    }
    f->fp8_stale = 1; /* and so are the weights' amaxes */
    /* The next step's first gather runs while the loop logs and loads. */
    prefetch_block(f, 0);
    titan_status st = f->err;
    f->err = TITAN_OK;
    return st;
}

/* A callback's shard gradients: one buffer of the largest unit's shard,
 * reused unit after unit, in place of the whole shard's. */
static titan_status transient_grads(titan_fsdp *f) {
    if (f->nshards == 1 || f->unit_grad) return TITAN_OK;
    size_t n = 1;
    for (int u = 0; u < f->nunits; u++)
        if (f->units[u].shard_len + 1 > n) n = f->units[u].shard_len + 1;
    if (!(f->unit_grad = f->be->alloc(n * sizeof(float))))
        return titan_error(TITAN_ERR_NOMEM, "fsdp: a unit's shard gradient, %zu bytes (%s): out of memory",
                           n * sizeof(float), f->be->name);
    f->be->free(f->sg);
    f->sg = NULL;
    return TITAN_OK;
}

titan_status titan_fsdp_set_unit_done(titan_fsdp *f, titan_fsdp_unit_done_fn fn, void *ctx) {
    if (fn && f->mesh->replicate_comm)
        return titan_error(TITAN_ERR_USAGE, "fsdp: a unit-done callback with replicas (HSDP, DDP): their shard "
                           "gradients are final after an all-reduce");
    if (fn) TITAN_TRY(transient_grads(f));
    f->unit_done = fn;
    f->unit_done_ctx = ctx;
    return TITAN_OK;
}

titan_status titan_fsdp_sync_grads(titan_fsdp *f) {
    /* Units the backward did not start (no hooks, or no sync): start them. */
    for (int u = f->nunits - 1; u >= 0; u--) start_reduce(f, u);
    q_wait(f, Q_SHARD, f->q[Q_SHARD].tail - 1);
    advance_replicate(f);
    q_drain(f);
    for (int u = 0; u < f->nunits; u++) f->units[u].reduced = 0;
    f->next_ar = f->nunits - 1;
    titan_status st = f->err;
    f->err = TITAN_OK;
    return st;
}

/* Sum of squares of the rank's shard gradients that count towards the
 * global norm: all of them, but with tensor parallelism the tensors tp
 * replicates (the norms, the same on every rank of tp) only on tp rank 0.
 * One sumsq per run of neighbouring counted tensors (a device syncs on
 * each): two a layer. */
static double shard_sumsq(titan_fsdp *f) {
    if (!f->mesh->tp_comm || f->mesh->tp_rank == 0) return f->be->sumsq(f->sg, f->nshard);
    int np;
    const titan_param *ps = titan_llama_catalog(f->model, &np);
    double ss = 0.0;
    for (int i = 0; i < np;) {
        if (ps[i].place.tp_dim < 0) {
            i++;
            continue;
        }
        size_t off = f->pieces[i].shard_off, len = 0;
        for (; i < np && ps[i].place.tp_dim >= 0; i++) len += f->pieces[i].len;
        if (len) ss += f->be->sumsq(f->sg + off, len);
    }
    return ss;
}

titan_status titan_fsdp_clip(titan_fsdp *f, double max_norm, double *norm, float *coef) {
    if (f->unit_grad) /* each unit's gradient went to the callback, then its memory to the next */
        return titan_error(TITAN_ERR_USAGE, "fsdp: the global norm of transient shard gradients (a unit-done "
                           "callback is set)");
    double ss = shard_sumsq(f);
    double t0 = titan_now_s();
    TITAN_TRY(titan_comm_sum_double(f->mesh->shard_comm, ss, &ss));
    TITAN_TRY(titan_comm_sum_double(f->mesh->tp_comm, ss, &ss));
    TITAN_TRY(titan_comm_sum_double(f->mesh->pp_comm, ss, &ss)); /* each stage its own tensors */
    if (f->mesh->shard_comm || f->mesh->tp_comm || f->mesh->pp_comm) { /* blocking: all of it exposed */
        double dt = titan_now_s() - t0;
        f->exposed_s += dt;
        f->total_s += dt;
    }
    *norm = sqrt(ss);
    *coef = titan_clip_coef(*norm, max_norm);
    return TITAN_OK;
}
