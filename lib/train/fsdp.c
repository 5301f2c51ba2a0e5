/* fsdp.c - data-parallel training state (see fsdp.h). */
#include "train/fsdp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/clock.h"
#include "core/mem.h"
#include "optim/optim.h"

#define DDP_BUCKET_BYTES ((size_t)25 << 20) /* torch DDP's default bucket_cap_mb */

/* Queued operations of one communicator, oldest first. They complete in
 * call order (comm.h), so completions are found from the head. */
typedef struct {
    titan_comm_req **req;
    double *t_issue;
    unsigned long long head, tail; /* sequence numbers; slot = seq % cap */
    size_t cap;
    double last_done;              /* when the previous operation completed */
} op_queue;

enum { Q_SHARD, Q_REPLICATE, NQ };
enum { STALE, INFLIGHT, READY };

typedef struct {
    int first_block, last_block; /* blocks [first, last] */
    int p0, p1;                  /* parameter tensors [p0, p1), catalog order */
    size_t shard_off, shard_len; /* this rank's packed shard range */
    int state;                   /* STALE, INFLIGHT, READY (gathered parameters) */
    unsigned long long ag_seq;   /* shard queue: the unit's last gather */
    unsigned long long rs_seq;   /* shard queue: the unit's last reduce-scatter */
    int reduced;                 /* 0: not started, 1: reduce-scatter queued, 2: shard gradient final or all-reduce queued */
} unit;

struct titan_fsdp {
    titan_mesh *mesh;
    titan_llama *model;
    const titan_backend *be;
    int np, nshards; /* parameter tensors; ranks of the shard group */
    titan_shard_piece *pieces;
    size_t *counts;  /* np x nshards: elements each shard rank holds of parameter i */
    size_t nshard;
    float *sp, *sg;  /* shard parameters and gradients (the model's own when unsharded) */
    int nblocks, nunits, tied, reshard, poison, sync;
    int *unit_of;    /* per block */
    unit *units;
    int next_ar;     /* HSDP: the next unit (descending) whose shard gradient goes to all-reduce */
    op_queue q[NQ];
    titan_status err; /* first failure seen in a hook */
    double exposed_s, total_s;
};

void titan_shard_plan(const titan_layout *l, const titan_llama_config *mc, int rank,
                      titan_shard_piece *pieces, size_t *nshard) {
    int np = titan_llama_params(mc, NULL);
    titan_param ps[np];
    titan_llama_params(mc, ps);
    size_t off = 0;
    for (int i = 0; i < np; i++) {
        titan_shard_piece *p = &pieces[i];
        memset(p, 0, sizeof *p);
        p->param_off = ps[i].offset;
        p->full_off = ps[i].offset + ps[i].numel;
        p->shard_off = off;
        if (!titan_layout_box(l, mc->n_layers, ps[i].name, ps[i].ndim, ps[i].shape, rank, &p->box, &p->writes))
            continue;
        /* A dim-0 chunk of a row-major tensor is one contiguous run. */
        size_t row = ps[i].numel / (size_t)ps[i].shape[0];
        p->full_off = ps[i].offset + (size_t)p->box.offset[0] * row;
        p->len = (size_t)titan_box_numel(&p->box);
        off += p->len;
    }
    *nshard = off;
}


/* ---- operation queues ------------------------------------------------------ */

static void keep(titan_fsdp *f, titan_status st) {
    if (st != TITAN_OK && f->err == TITAN_OK) f->err = st;
}

/* The operation at the head completed (or is awaited): free its handle and
 * book its running time, and as exposed the time waited here. */
static void q_pop(titan_fsdp *f, int qi) {
    op_queue *q = &f->q[qi];
    size_t s = q->head % q->cap;
    double t0 = titan_now_s();
    int was_done = titan_comm_test(q->req[s]);
    titan_status st = titan_comm_wait(q->req[s]);
    double t1 = titan_now_s();
    if (!was_done) f->exposed_s += t1 - t0;
    double start = q->t_issue[s] > q->last_done ? q->t_issue[s] : q->last_done;
    f->total_s += t1 - start;
    q->last_done = t1;
    q->head++;
    keep(f, st);
}

/* Books whatever completed, without blocking. */
static void q_poll(titan_fsdp *f) {
    for (int qi = 0; qi < NQ; qi++)
        while (f->q[qi].head < f->q[qi].tail && titan_comm_test(f->q[qi].req[f->q[qi].head % f->q[qi].cap]))
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
static titan_comm_req **q_slot(titan_fsdp *f, int qi) {
    op_queue *q = &f->q[qi];
    if (q->tail - q->head == q->cap) q_pop(f, qi);
    return &q->req[q->tail % q->cap];
}

/* Books the operation just issued into the slot (after a successful call). */
static unsigned long long q_push(titan_fsdp *f, int qi) {
    op_queue *q = &f->q[qi];
    q->t_issue[q->tail % q->cap] = titan_now_s();
    return q->tail++;
}

/* ---- plan -------------------------------------------------------------- */

/* The block that owns parameter `name`. */
static int block_of(const char *name, int n_layers) {
    if (strncmp(name, "tok_embeddings.", 15) == 0) return 0;
    if (strncmp(name, "layers.", 7) == 0) return 1 + atoi(name + 7);
    return n_layers + 1;
}

titan_status titan_fsdp_parse_plan(const char *s, int n_blocks, int sharded, int *units, titan_fsdp_options *opt) {
    opt->unit_of_block = NULL;
    opt->bucket_bytes = 0;
    if (strcmp(s, "auto") == 0) {
        opt->bucket_bytes = sharded ? 0 : DDP_BUCKET_BYTES;
        return TITAN_OK;
    }
    if (strcmp(s, "blocks") == 0) return TITAN_OK;
    if (strcmp(s, "whole") == 0) {
        for (int b = 0; b < n_blocks; b++) units[b] = 0;
        opt->unit_of_block = units;
        return TITAN_OK;
    }
    if (strncmp(s, "size:", 5) == 0) {
        char *end;
        double mb = strtod(s + 5, &end);
        if (end == s + 5 || *end || !(mb > 0) || mb > 1e9)
            goto bad;
        opt->bucket_bytes = (size_t)(mb * 1048576.0);
        return TITAN_OK;
    }
    const char *p = s;
    for (int b = 0; b < n_blocks; b++) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p) goto bad;
        int prev = b ? units[b - 1] : 0;
        if (v != prev && v != prev + 1) goto bad;
        if (b == 0 && v != 0) goto bad;
        units[b] = (int)v;
        p = end;
        if (b + 1 < n_blocks && *p++ != ',') goto bad;
    }
    if (*p) goto bad;
    opt->unit_of_block = units;
    return TITAN_OK;
bad:
    titan_error(TITAN_ERR_USAGE, "parallelism.comm_bucket_plan = \"%s\": expected auto, blocks, whole, size:MB or "
                "%d comma-separated unit ids (0 first, each the same as or one more than the previous)", s, n_blocks);
    titan_error_hint("blocks are 0 = embedding, 1..n_layers = layers, %d = norm and output", n_blocks - 1);
    return TITAN_ERR_USAGE;
}

static titan_status make_units(titan_fsdp *f, const titan_llama_config *mc, const titan_fsdp_options *opt) {
    int nb = f->nblocks;
    titan_param ps[f->np];
    titan_llama_params(mc, ps);
    size_t bytes[nb];
    memset(bytes, 0, sizeof bytes);
    int pblock[f->np];
    for (int i = 0; i < f->np; i++) {
        pblock[i] = block_of(ps[i].name, mc->n_layers);
        bytes[pblock[i]] += ps[i].numel * sizeof(float);
    }
    if (opt && opt->unit_of_block) {
        for (int b = 0; b < nb; b++) f->unit_of[b] = opt->unit_of_block[b];
    } else {
        size_t cap = opt ? opt->bucket_bytes : 0, have = 0;
        int u = 0;
        for (int b = 0; b < nb; b++) {
            if (b > 0 && (cap == 0 || have + bytes[b] > cap)) {
                u++;
                have = 0;
            }
            have += bytes[b];
            f->unit_of[b] = u;
        }
    }
    f->nunits = f->unit_of[nb - 1] + 1;
    f->units = titan_alloc((size_t)f->nunits * sizeof *f->units, "communication units");
    if (!f->units) return TITAN_ERR_NOMEM;
    memset(f->units, 0, (size_t)f->nunits * sizeof *f->units);
    for (int u = 0; u < f->nunits; u++) {
        f->units[u].first_block = nb;
        f->units[u].p0 = f->np;
    }
    for (int b = 0; b < nb; b++) {
        unit *u = &f->units[f->unit_of[b]];
        if (b < u->first_block) u->first_block = b;
        u->last_block = b;
    }
    /* Catalog order is block order, so each unit's tensors are one run. */
    for (int i = 0; i < f->np; i++) {
        unit *u = &f->units[f->unit_of[pblock[i]]];
        if (i < u->p0) u->p0 = i;
        u->p1 = i + 1;
    }
    for (int u = 0; u < f->nunits; u++) {
        unit *x = &f->units[u];
        if (x->p1 <= x->p0) { /* a block without parameters: an empty run */
            x->p0 = x->p1 = 0;
            continue;
        }
        x->shard_off = f->pieces[x->p0].shard_off;
        x->shard_len = f->pieces[x->p1 - 1].shard_off + f->pieces[x->p1 - 1].len - x->shard_off;
        x->state = f->nshards > 1 ? STALE : READY;
    }
    return TITAN_OK;
}

/* ---- gathers ------------------------------------------------------------- */

static void issue_gather(titan_fsdp *f, int ui) {
    unit *u = &f->units[ui];
    if (u->state != STALE) return;
    float *P = titan_llama_params_data(f->model);
    for (int i = u->p0; i < u->p1; i++) {
        const titan_shard_piece *p = &f->pieces[i];
        memcpy(P + p->full_off, f->sp + p->shard_off, p->len * sizeof(float));
        /* In place: our chunk already sits at its spot in the result; the
         * shard group's chunks lie end to end from the parameter's start. */
        titan_comm_req **r = q_slot(f, Q_SHARD);
        titan_status st = titan_comm_all_gather_v(f->mesh->shard_comm, P + p->full_off, P + p->param_off,
                                                  f->counts + (size_t)i * f->nshards, TITAN_DTYPE_F32, r);
        if (st != TITAN_OK) {
            keep(f, st);
            continue;
        }
        u->ag_seq = q_push(f, Q_SHARD);
    }
    u->state = INFLIGHT;
}

static void ensure(titan_fsdp *f, int ui) {
    unit *u = &f->units[ui];
    if (u->state == STALE) issue_gather(f, ui);
    if (u->state == INFLIGHT) {
        if (u->p1 > u->p0) q_wait(f, Q_SHARD, u->ag_seq);
        u->state = READY;
    }
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

static void reshard(titan_fsdp *f, int ui) {
    unit *u = &f->units[ui];
    if (u->state != READY || u->p1 <= u->p0) return;
    u->state = STALE;
    if (!f->poison) return;
    float *P = titan_llama_params_data(f->model);
    size_t a = f->pieces[u->p0].param_off;
    /* Up to the next unit's first tensor, or the end of the model. */
    size_t e = ui + 1 < f->nunits && f->units[ui + 1].p1 > f->units[ui + 1].p0 ? f->pieces[f->units[ui + 1].p0].param_off
                                                                        : titan_llama_params_count(f->model);
    for (size_t i = a; i < e; i++) P[i] = NAN;
}

/* ---- gradient reductions ------------------------------------------------ */

/* HSDP/DDP: all-reduce over the replicate group each unit whose shard
 * gradient is final, in descending unit order (the same on every rank). */
static void advance_replicate(titan_fsdp *f) {
    float *G = titan_llama_grads_data(f->model);
    while (f->next_ar >= 0) {
        unit *u = &f->units[f->next_ar];
        if (u->reduced == 0) return;
        if (u->reduced == 1) { /* reduce-scatter queued: done yet? */
            if (u->p1 > u->p0 && f->q[Q_SHARD].head <= u->rs_seq) return;
            for (int i = u->p0; i < u->p1; i++)
                memcpy(f->sg + f->pieces[i].shard_off, G + f->pieces[i].full_off, f->pieces[i].len * sizeof(float));
            u->reduced = 2;
        }
        if (f->mesh->replicate_comm && u->shard_len > 0) {
            titan_comm_req **r = q_slot(f, Q_REPLICATE);
            titan_status st = titan_comm_all_reduce(f->mesh->replicate_comm, f->sg + u->shard_off, f->sg + u->shard_off,
                                                    u->shard_len, TITAN_DTYPE_F32, TITAN_COMM_AVG, r);
            if (st == TITAN_OK) q_push(f, Q_REPLICATE);
            keep(f, st);
        }
        f->next_ar--;
    }
}

/* Unit ui's gradients are final: start reducing them. */
static void start_reduce(titan_fsdp *f, int ui) {
    unit *u = &f->units[ui];
    if (u->reduced) return;
    if (f->nshards == 1) {
        u->reduced = 2; /* the shard is the model's own gradient */
        return;
    }
    float *G = titan_llama_grads_data(f->model);
    for (int i = u->p0; i < u->p1; i++) {
        const titan_shard_piece *p = &f->pieces[i];
        titan_comm_req **r = q_slot(f, Q_SHARD);
        titan_status st = titan_comm_reduce_scatter_v(f->mesh->shard_comm, G + p->param_off, G + p->full_off,
                                                      f->counts + (size_t)i * f->nshards, TITAN_DTYPE_F32,
                                                      TITAN_COMM_AVG, r);
        if (st != TITAN_OK) {
            keep(f, st);
            continue;
        }
        u->rs_seq = q_push(f, Q_SHARD);
    }
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
    if (f->nshards > 1) ensure_block(f, b, b - 1);
    q_poll(f);
    return f->err;
}

static titan_status hook_after_backward(void *ctx, int b) {
    titan_fsdp *f = ctx;
    int ui = f->unit_of[b];
    if (f->sync && b == f->units[ui].first_block) start_reduce(f, ui);
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
    f->be = titan_backend_cpu();
    f->np = titan_llama_params(mc, NULL);
    f->nshards = mesh->layout.dp_shard;
    f->nblocks = titan_llama_blocks(model);
    f->tied = mc->tie_embeddings;
    f->reshard = opt ? opt->reshard_after_forward : 1;
    const char *poison = getenv("TITAN_FSDP_POISON");
    f->poison = poison && strcmp(poison, "1") == 0;
    f->sync = 1;
    f->pieces = titan_alloc((size_t)f->np * sizeof *f->pieces, "shard plan");
    f->counts = titan_alloc((size_t)f->np * f->nshards * sizeof(size_t), "shard counts");
    f->unit_of = titan_alloc((size_t)f->nblocks * sizeof(int), "unit plan");
    if (!f->pieces || !f->counts || !f->unit_of) return TITAN_ERR_NOMEM;
    titan_shard_plan(&mesh->layout, mc, mesh->rank, f->pieces, &f->nshard);
    /* Every rank of this rank's shard group: same replicate coordinate. */
    titan_layout_coord c;
    titan_layout_coord_of(&mesh->layout, mesh->rank, &c);
    titan_shard_piece tmp[f->np];
    for (int s = 0; s < f->nshards; s++) {
        c.dp_shard = s;
        size_t n;
        titan_shard_plan(&mesh->layout, mc, titan_layout_rank_of(&mesh->layout, &c), tmp, &n);
        for (int i = 0; i < f->np; i++) f->counts[(size_t)i * f->nshards + s] = tmp[i].len;
    }
    TITAN_TRY(make_units(f, mc, opt));
    f->next_ar = f->nunits - 1;
    for (int qi = 0; qi < NQ; qi++) {
        op_queue *q = &f->q[qi];
        q->cap = (size_t)2 * f->np + (size_t)f->nunits + 8;
        q->req = titan_alloc(q->cap * sizeof *q->req, "comm requests");
        q->t_issue = titan_alloc(q->cap * sizeof(double), "comm request times");
        if (!q->req || !q->t_issue) return TITAN_ERR_NOMEM;
    }
    if (f->nshards == 1) {
        f->sp = titan_llama_params_data(model);
        f->sg = titan_llama_grads_data(model);
    } else {
        f->sp = titan_alloc((f->nshard + 1) * sizeof(float), "shard parameters");
        f->sg = titan_alloc((f->nshard + 1) * sizeof(float), "shard gradients");
        if (!f->sp || !f->sg) return TITAN_ERR_NOMEM;
        /* The model holds the loaded or initial full parameters: take our chunks. */
        const float *P = titan_llama_params_data(model);
        for (int i = 0; i < f->np; i++)
            memcpy(f->sp + f->pieces[i].shard_off, P + f->pieces[i].full_off, f->pieces[i].len * sizeof(float));
    }
    if (mesh->shard_comm || mesh->replicate_comm) {
        titan_llama_hooks h = {f, hook_before_forward, hook_after_forward, hook_before_backward,
                               hook_after_backward};
        titan_llama_set_hooks(model, &h);
    }
    return TITAN_OK;
}

void titan_fsdp_free(titan_fsdp *f) {
    if (!f) return;
    q_drain(f); /* no operation may outlive its buffers */
    if (f->model) titan_llama_set_hooks(f->model, NULL);
    if (f->nshards > 1) {
        titan_free(f->sp);
        titan_free(f->sg);
    }
    for (int qi = 0; qi < NQ; qi++) {
        titan_free(f->q[qi].req);
        titan_free(f->q[qi].t_issue);
    }
    titan_free(f->units);
    titan_free(f->unit_of);
    titan_free(f->pieces);
    titan_free(f->counts);
    titan_free(f);
}

size_t titan_fsdp_numel(const titan_fsdp *f) { return f->nshard; }
float *titan_fsdp_params(titan_fsdp *f) { return f->sp; }
float *titan_fsdp_grads(titan_fsdp *f) { return f->sg; }
const titan_shard_piece *titan_fsdp_pieces(const titan_fsdp *f) { return f->pieces; }
void titan_fsdp_set_sync(titan_fsdp *f, int sync) { f->sync = sync; }

void titan_fsdp_comm_times(titan_fsdp *f, double *exposed_s, double *total_s) {
    *exposed_s = f->exposed_s;
    *total_s = f->total_s;
    f->exposed_s = f->total_s = 0.0;
}

titan_status titan_fsdp_gather_params(titan_fsdp *f) {
    for (int u = 0; u < f->nunits; u++) issue_gather(f, u);
    for (int u = 0; u < f->nunits; u++) ensure(f, u);
    titan_status st = f->err;
    f->err = TITAN_OK;
    return st;
}

titan_status titan_fsdp_params_updated(titan_fsdp *f) {
    if (f->nshards == 1) return TITAN_OK;
    for (int u = 0; u < f->nunits; u++) f->units[u].state = STALE;
    /* The next step's first gather runs while the loop logs and loads. */
    prefetch_block(f, 0);
    return TITAN_OK;
}

titan_status titan_fsdp_sync_grads(titan_fsdp *f) {
    /* Units the backward did not start (no hooks, or no sync): start them. */
    for (int u = f->nunits - 1; u >= 0; u--) start_reduce(f, u);
    if (f->nshards > 1) {
        q_wait(f, Q_SHARD, f->q[Q_SHARD].tail - 1);
        advance_replicate(f);
    }
    q_drain(f);
    for (int u = 0; u < f->nunits; u++) f->units[u].reduced = 0;
    f->next_ar = f->nunits - 1;
    titan_status st = f->err;
    f->err = TITAN_OK;
    return st;
}

titan_status titan_fsdp_clip(titan_fsdp *f, double max_norm, double *norm) {
    double ss = f->be->sumsq(f->sg, f->nshard);
    double t0 = titan_now_s();
    TITAN_TRY(titan_mesh_sum_double(f->mesh->shard_comm, ss, &ss));
    if (f->mesh->shard_comm) { /* blocking: all of it exposed */
        double dt = titan_now_s() - t0;
        f->exposed_s += dt;
        f->total_s += dt;
    }
    *norm = sqrt(ss);
    titan_clip_scale(f->be, f->sg, f->nshard, *norm, max_norm);
    return TITAN_OK;
}
