/* fsdp.c - data-parallel training state (see fsdp.h). */
#include "train/fsdp.h"

#include <math.h>
#include <string.h>

#include "core/mem.h"

#define BUCKET_FLOATS ((size_t)25 << 20 >> 2) /* 25 MB all-reduce buckets */

struct titan_fsdp {
    titan_mesh *mesh;
    titan_llama *model;
    const titan_backend *be;
    int np, nshards; /* parameter tensors; ranks of the shard group */
    titan_shard_piece *pieces;
    size_t *counts;  /* np x nshards: elements each shard rank holds of parameter i */
    size_t nshard;
    float *sp, *sg;  /* shard parameters and gradients (the model's own when unsharded) */
    titan_comm_req **reqs;
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

titan_status titan_fsdp_create(titan_fsdp **out, titan_mesh *mesh, titan_llama *model) {
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
    f->pieces = titan_alloc((size_t)f->np * sizeof *f->pieces, "shard plan");
    f->counts = titan_alloc((size_t)f->np * f->nshards * sizeof(size_t), "shard counts");
    f->reqs = titan_alloc((size_t)(f->np + 64) * sizeof *f->reqs, "comm requests");
    if (!f->pieces || !f->counts || !f->reqs) return TITAN_ERR_NOMEM;
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
    if (f->nshards == 1) {
        f->sp = titan_llama_params_data(model);
        f->sg = titan_llama_grads_data(model);
        return TITAN_OK;
    }
    f->sp = titan_alloc((f->nshard + 1) * sizeof(float), "shard parameters");
    f->sg = titan_alloc((f->nshard + 1) * sizeof(float), "shard gradients");
    if (!f->sp || !f->sg) return TITAN_ERR_NOMEM;
    /* The model holds the loaded or initial full parameters: take our chunks. */
    const float *P = titan_llama_params_data(model);
    for (int i = 0; i < f->np; i++)
        memcpy(f->sp + f->pieces[i].shard_off, P + f->pieces[i].full_off, f->pieces[i].len * sizeof(float));
    return TITAN_OK;
}

void titan_fsdp_free(titan_fsdp *f) {
    if (!f) return;
    if (f->nshards > 1) {
        titan_free(f->sp);
        titan_free(f->sg);
    }
    titan_free(f->pieces);
    titan_free(f->counts);
    titan_free(f->reqs);
    titan_free(f);
}

size_t titan_fsdp_numel(const titan_fsdp *f) { return f->nshard; }
float *titan_fsdp_params(titan_fsdp *f) { return f->sp; }
float *titan_fsdp_grads(titan_fsdp *f) { return f->sg; }
const titan_shard_piece *titan_fsdp_pieces(const titan_fsdp *f) { return f->pieces; }

/* Waits for reqs[0..n), all of them (their buffers must be free before any
 * return), and returns the first failure. */
static titan_status wait_all(titan_fsdp *f, int n, titan_status st) {
    for (int i = 0; i < n; i++) {
        titan_status s = titan_comm_wait(f->reqs[i]);
        if (st == TITAN_OK) st = s;
    }
    return st;
}

/* The start of parameter i in the flat model: the shard group's chunks of it
 * lie end to end there in shard-rank order, as the _v collectives want. */
static size_t param_start(const titan_fsdp *f, int i) { return f->pieces[i].param_off; }

titan_status titan_fsdp_gather_params(titan_fsdp *f) {
    if (f->nshards == 1) return TITAN_OK;
    float *P = titan_llama_params_data(f->model);
    titan_status st = TITAN_OK;
    int n = 0;
    for (int i = 0; i < f->np && st == TITAN_OK; i++) {
        const titan_shard_piece *p = &f->pieces[i];
        memcpy(P + p->full_off, f->sp + p->shard_off, p->len * sizeof(float));
        /* In place: our chunk already sits at its spot in the result. */
        float *base = P + param_start(f, i);
        st = titan_comm_all_gather_v(f->mesh->shard_comm, P + p->full_off, base,
                                     f->counts + (size_t)i * f->nshards, TITAN_DTYPE_F32, &f->reqs[n]);
        if (st == TITAN_OK) n++;
    }
    return wait_all(f, n, st);
}

titan_status titan_fsdp_sync_grads(titan_fsdp *f) {
    float *G = titan_llama_grads_data(f->model);
    titan_status st = TITAN_OK;
    int n = 0;
    if (f->nshards > 1) {
        for (int i = 0; i < f->np && st == TITAN_OK; i++) {
            const titan_shard_piece *p = &f->pieces[i];
            st = titan_comm_reduce_scatter_v(f->mesh->shard_comm, G + param_start(f, i), G + p->full_off,
                                             f->counts + (size_t)i * f->nshards, TITAN_DTYPE_F32,
                                             TITAN_COMM_AVG, &f->reqs[n]);
            if (st == TITAN_OK) n++;
        }
        TITAN_TRY(wait_all(f, n, st));
        for (int i = 0; i < f->np; i++)
            memcpy(f->sg + f->pieces[i].shard_off, G + f->pieces[i].full_off, f->pieces[i].len * sizeof(float));
    }
    if (!f->mesh->replicate_comm) return TITAN_OK;
    /* Replicas hold the same shard: average it in buckets, queued together
     * so the progress thread streams them back to back. */
    n = 0;
    for (size_t off = 0; off < f->nshard && st == TITAN_OK; off += BUCKET_FLOATS) {
        size_t len = f->nshard - off < BUCKET_FLOATS ? f->nshard - off : BUCKET_FLOATS;
        if (n == f->np + 64) { /* more buckets than request slots: drain */
            st = wait_all(f, n, st);
            n = 0;
            if (st != TITAN_OK) break;
        }
        st = titan_comm_all_reduce(f->mesh->replicate_comm, f->sg + off, f->sg + off, len, TITAN_DTYPE_F32,
                                   TITAN_COMM_AVG, &f->reqs[n]);
        if (st == TITAN_OK) n++;
    }
    return wait_all(f, n, st);
}

titan_status titan_fsdp_clip(titan_fsdp *f, double max_norm, double *norm) {
    double ss = f->be->sumsq(f->sg, f->nshard);
    TITAN_TRY(titan_mesh_sum_double(f->mesh->shard_comm, ss, &ss));
    *norm = sqrt(ss);
    if (max_norm > 0.0 && isfinite(*norm)) {
        float coef = (float)max_norm / ((float)*norm + 1e-6f);
        if (coef < 1.0f) f->be->scale(f->sg, f->nshard, coef);
    }
    return TITAN_OK;
}
