/* galore.c - GaLore-AdamW's projected matrices (see galore.h, optim.h).
 *
 * The rule is galore-torch 1.0's (the reference implementation, whose
 * AdamW is transformers' old one), so a step can be checked against it:
 *   at a refresh (0-based step % update_proj_gap == 0) the projector is
 *   the r leading singular vectors of this step's gradient; the moments
 *   are kept as they are (neither reset nor rotated into the new basis);
 *   R = project(G); m = b1 m + (1-b1) R; v = b2 v + (1-b2) R^2;
 *   N = m / (sqrt(v) + eps);
 *   p -= lr sqrt(1-b2^t)/(1-b1^t) x scale x project_back(N);
 *   p -= lr wd p   (decoupled weight decay, after the update)
 * GaLore 2 keeps that step and changes how the projector is found
 * (randomized SVD) and where the work runs (FSDP); its randomized refresh
 * is optimizer.galore_svd = "randomized" here. */
#include "optim/galore.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "core/rng.h"
#include "tensor/dtype.h"
#include "optim/optim_impl.h"
#include "optim/svd.h"

int titan_galore_is_right(titan_galore_proj t, int64_t m, int64_t n) {
    switch (t) {
    case TITAN_GALORE_STD: return m >= n;
    case TITAN_GALORE_REVERSE_STD: return m < n;
    case TITAN_GALORE_LEFT: return 0;
    case TITAN_GALORE_RIGHT: return 1;
    }
    return 1;
}

/* The products as the backend's fp32 GEMMs (backend.h's row-major forms:
 * forward A B^T, backward's dinp A B and dw A^T B). */
static void project_on(const titan_backend *be, const float *g, int64_t m, int64_t n, const float *proj, int r,
                       int right, float *low) {
    if (right) /* G (m x n) Q^T, Q r x n */
        be->matmul_forward(TITAN_DTYPE_F32, low, g, proj, (int)m, (int)n, r);
    else /* P^T G, P m x r */
        be->matmul_backward(TITAN_DTYPE_F32, 0, NULL, low, proj, g, NULL, (int)m, (int)n, r);
}

static void project_back_on(const titan_backend *be, const float *low, int64_t m, int64_t n, const float *proj, int r,
                            int right, float *full) {
    if (right) /* low (m x r) Q (r x n) */
        be->matmul_backward(TITAN_DTYPE_F32, 0, full, NULL, low, NULL, proj, (int)m, (int)n, r);
    else /* P (m x r) low (r x n) */
        be->matmul_backward(TITAN_DTYPE_F32, 0, full, NULL, proj, NULL, low, (int)m, (int)n, r);
}

void titan_galore_project(const float *g, int64_t m, int64_t n, const float *proj, int r, int right, float *low) {
    project_on(titan_backend_cpu(), g, m, n, proj, r, right, low);
}

void titan_galore_project_back(const float *low, int64_t m, int64_t n, const float *proj, int r, int right,
                               float scale, float *full) {
    project_back_on(titan_backend_cpu(), low, m, n, proj, r, right, full);
    /* galore-torch multiplies the product (not an alpha inside it) */
    if (scale != 1.0f) titan_backend_cpu()->scale(full, (size_t)(m * n), scale);
}

/* Tensor i: NAME:galore_WHAT of shape d0 x d1 at arena offset *at; sharded
 * ones hold this rank's rows of the matrix (mt's) only. Advances *at. */
static void add_tensor(titan_optim *o, int i, int param, const char *name, const char *what, int64_t d0, int64_t d1,
                       int sharded, const titan_galore_mat *mt, size_t *at) {
    titan_optim_tensor *t = &o->tensors[i];
    snprintf(t->name, sizeof t->name, "%s:galore_%s", name, what);
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->off = *at;
    t->param = param;
    t->sharded = sharded && mt->m < mt->m_full;
    t->row0 = t->sharded ? mt->row0 : 0;
    t->rows = t->sharded ? mt->m : d0;
    *at += (size_t)(t->rows * d1);
}

titan_status titan_galore_layout(titan_optim *o, const titan_optim_param *ps, int np) {
    const titan_galore_config *c = &o->cfg.galore;
    int nmat = 0;
    for (int i = 0; i < np; i++) nmat += ps[i].project && ps[i].rows > 1 && ps[i].cols > 1;
    o->mats = titan_alloc((size_t)(nmat ? nmat : 1) * sizeof *o->mats, "GaLore matrices");
    o->tensors = titan_alloc((size_t)(nmat ? nmat : 1) * 3 * sizeof *o->tensors, "GaLore state tensors");
    if (!o->mats || !o->tensors) return TITAN_ERR_NOMEM;
    size_t at = 0;
    for (int i = 0; i < np; i++) {
        if (!(ps[i].project && ps[i].rows > 1 && ps[i].cols > 1)) continue;
        titan_galore_mat *mt = &o->mats[o->nmat];
        int64_t m = ps[i].rows, n = ps[i].cols;
        int64_t mf = ps[i].full_rows > 0 ? ps[i].full_rows : m, p = mf < n ? mf : n;
        mt->off = ps[i].off;
        mt->m = m;
        mt->n = n;
        mt->m_full = mf;
        mt->row0 = ps[i].full_rows > 0 ? ps[i].row0 : 0;
        mt->r = (int)(c->rank < p ? c->rank : p);
        /* the side follows the whole matrix, as one process would choose */
        mt->right = titan_galore_is_right(c->proj_type, mf, n);
        mt->stream = titan_rng_hash_name(ps[i].name);
        /* right: the projector (r x n) is whole on every rank, the moments
         * follow the rows; left: the projector's rows follow the matrix's,
         * the moments (r x n) are whole */
        int64_t lo0 = mt->right ? mf : mt->r, lo1 = mt->right ? mt->r : n;
        mt->low_numel = (size_t)((mt->right ? m : mt->r) * lo1);
        mt->proj = at;
        add_tensor(o, 3 * o->nmat, i, ps[i].name, "proj", mt->right ? mt->r : mf, mt->right ? n : mt->r, !mt->right,
                   mt, &at);
        mt->exp_avg = at;
        add_tensor(o, 3 * o->nmat + 1, i, ps[i].name, "exp_avg", lo0, lo1, mt->right, mt, &at);
        mt->exp_avg_sq = at;
        add_tensor(o, 3 * o->nmat + 2, i, ps[i].name, "exp_avg_sq", lo0, lo1, mt->right, mt, &at);
        if ((size_t)(m * n) > o->scratch_full) o->scratch_full = (size_t)(m * n);
        if (mt->low_numel > o->scratch_low) o->scratch_low = mt->low_numel;
        size_t svd = titan_svd_work_numel(mf, n, mt->r, c->oversampling, c->randomized);
        if (svd > o->scratch_svd) o->scratch_svd = svd;
        if (mf > m) {
            o->sharded = 1;
            size_t need = (size_t)(mf * n + mf * mt->r);
            if (need > o->gathered_numel) o->gathered_numel = need;
        }
        o->flat[i] = 0;
        o->nmat++;
    }
    o->arena_numel = at;
    return TITAN_OK;
}

/* the scaled gradient and the full update; the low-rank update; the SVD's
 * workspace at the next 256-byte boundary */
static size_t svd_at(const titan_optim *o) { return (2 * o->scratch_full + o->scratch_low + 1 + 63) & ~(size_t)63; }
static size_t scratch_numel(const titan_optim *o) { return svd_at(o) + o->scratch_svd; }

size_t titan_galore_work_numel(const titan_optim *o) { return scratch_numel(o) + o->gathered_numel; }

titan_status titan_galore_alloc(titan_optim *o) {
    const titan_backend *be = o->be;
    size_t arena = (o->arena_numel ? o->arena_numel : 1) * sizeof(float);
    if (o->gathered_numel && !(o->gathered = be->alloc(o->gathered_numel * sizeof(float))))
        return titan_error(TITAN_ERR_NOMEM, "GaLore: a refresh's gathered gradient: cannot allocate %zu bytes",
                           o->gathered_numel * sizeof(float));
    if (!(o->arena = be->alloc(arena)))
        return titan_error(TITAN_ERR_NOMEM, "GaLore: low-rank state: cannot allocate %zu bytes", arena);
    if (!(o->scratch = be->alloc(scratch_numel(o) * sizeof(float))))
        return titan_error(TITAN_ERR_NOMEM, "GaLore: step buffers: cannot allocate %zu bytes",
                           scratch_numel(o) * sizeof(float));
    return TITAN_OK;
}

/* A sharded matrix's whole gradient into o->gathered: each rank's rows,
 * torch.chunk's split (ceil(m/size) rows, trailing ranks fewer or none). */
static titan_status gather_rows(titan_optim *o, const titan_galore_mat *mt, const float *g) {
    titan_optim_comm *c = o->comm;
    if (!c) return titan_error(TITAN_ERR_USAGE, "GaLore: row-sharded matrices need the shard group (titan_optim_set_comm)");
    size_t *counts = titan_alloc((size_t)c->size * sizeof *counts, "GaLore gather counts");
    if (!counts) return TITAN_ERR_NOMEM;
    int64_t chunk = (mt->m_full + c->size - 1) / c->size;
    for (int j = 0; j < c->size; j++) {
        int64_t lo = (int64_t)j * chunk, rows = mt->m_full - lo < chunk ? mt->m_full - lo : chunk;
        counts[j] = (size_t)(rows > 0 ? rows : 0) * (size_t)mt->n;
    }
    titan_status st = TITAN_OK;
    if (counts[c->rank] != (size_t)(mt->m * mt->n) || (mt->m > 0 && mt->row0 != (int64_t)c->rank * chunk))
        st = titan_error(TITAN_ERR_USAGE, "GaLore: rank %d of %d holds rows %lld..%lld of a %lld-row matrix, not "
                         "torch.chunk's", c->rank, c->size, (long long)mt->row0, (long long)(mt->row0 + mt->m),
                         (long long)mt->m_full);
    if (st == TITAN_OK) st = c->all_gather_v(c->ctx, g, o->gathered, counts);
    titan_free(counts);
    return st;
}

static titan_status refresh(titan_optim *o, const titan_galore_mat *mt, const float *g, int64_t step0) {
    const titan_galore_config *c = &o->cfg.galore;
    float *proj = o->arena + mt->proj;
    const float *whole = g;
    float *u = mt->right ? NULL : proj, *vt = mt->right ? proj : NULL;
    if (mt->m < mt->m_full) { /* every rank finds the same vectors from the whole gradient */
        TITAN_TRY(gather_rows(o, mt, g));
        whole = o->gathered;
        if (u) u = o->gathered + mt->m_full * mt->n;
    }
    titan_status st;
    if (!c->randomized) {
        st = titan_svd_topk_on(o->be, whole, mt->m_full, mt->n, mt->r, u, vt, o->scratch + svd_at(o));
    } else { /* a fresh test matrix each refresh, the same on every rank and resume */
        uint64_t seed = c->seed ^ ((uint64_t)step0 * 0x9E3779B97F4A7C15ull);
        st = titan_rsvd_topk_on(o->be, whole, mt->m_full, mt->n, mt->r, c->oversampling, c->power_iters, seed,
                                mt->stream, u, vt, o->scratch + svd_at(o));
    }
    if (st == TITAN_OK && u && u != proj && mt->m > 0) /* this rank's rows of the left vectors */
        o->be->convert(proj, TITAN_DTYPE_F32, u + mt->row0 * mt->r, TITAN_DTYPE_F32, (size_t)(mt->m * mt->r));
    return st;
}

/* One matrix's step, all of it backend ops on backend memory. */
static titan_status mat_step(titan_optim *o, const titan_galore_mat *mt, float *p, const float *grad, float gscale,
                             float lr, int64_t t) {
    const titan_backend *be = o->be;
    const titan_galore_config *c = &o->cfg.galore;
    const titan_adamw_config *a = &o->cfg.adam;
    size_t full = (size_t)(mt->m * mt->n);
    float *gs = o->scratch, *upd = gs + o->scratch_full, *low = upd + o->scratch_full;
    const float *g = grad;
    if (gscale != 1.0f && full) { /* the clipped gradient, rounded once */
        be->convert(gs, TITAN_DTYPE_F32, grad, TITAN_DTYPE_F32, full);
        be->scale(gs, full, gscale);
        g = gs;
    }
    int64_t step0 = t - 1;
    if (step0 % c->update_proj_gap == 0) TITAN_TRY(refresh(o, mt, g, step0));
    const float *proj = o->arena + mt->proj;
    if (mt->m > 0) project_on(be, g, mt->m, mt->n, proj, mt->r, mt->right, low);
    else be->zero(low, mt->low_numel * sizeof *low);
    /* left of a sharded matrix: P^T G adds every rank's rows' part */
    if (!mt->right && mt->m < mt->m_full) TITAN_TRY(o->comm->all_reduce_sum(o->comm->ctx, low, mt->low_numel));
    double b1 = titan_f32_user_decimal(a->beta1), b2 = titan_f32_user_decimal(a->beta2);
    be->galore_adam(o->arena + mt->exp_avg, o->arena + mt->exp_avg_sq, low, mt->low_numel, (float)b1,
                    (float)(1.0 - b1), (float)b2, (float)(1.0 - b2), a->eps);
    if (mt->m == 0) return TITAN_OK;
    project_back_on(be, low, mt->m, mt->n, proj, mt->r, mt->right, upd);
    double lrd = titan_f32_user_decimal(lr);
    float step_size = (float)(lrd * sqrt(1.0 - pow(b2, (double)t)) / (1.0 - pow(b1, (double)t)));
    float decay = (float)(lrd * titan_f32_user_decimal(a->weight_decay));
    be->galore_update(p, upd, full, c->scale, step_size, decay);
    return TITAN_OK;
}

titan_status titan_galore_step(titan_optim *o, float *params, const float *grads, float gscale, float lr, int64_t t) {
    for (int k = 0; k < o->nmat; k++) {
        const titan_galore_mat *mt = &o->mats[k];
        TITAN_TRY(mat_step(o, mt, params + mt->off, grads + mt->off, gscale, lr, t));
    }
    return TITAN_OK;
}

titan_status titan_galore_step_params(titan_optim *o, int p0, int p1, size_t off, size_t len, float *params,
                                      const float *span, float lr, int64_t t) {
    for (int k = 0; k < o->nmat; k++) {
        const titan_galore_mat *mt = &o->mats[k];
        int p = o->tensors[3 * k].param;
        if (p < p0 || p >= p1) continue;
        size_t numel = (size_t)(mt->m * mt->n);
        if (numel && (mt->off < off || mt->off + numel > off + len))
            return titan_error(TITAN_ERR_FAIL, "GaLore: %s: elements %zu..%zu outside its group's %zu..%zu",
                               o->tensors[3 * k].name, mt->off, mt->off + numel, off, off + len);
        /* a rank without rows still takes part in the matrix's collectives */
        TITAN_TRY(mat_step(o, mt, params + mt->off, numel ? span + (mt->off - off) : span, 1.0f, lr, t));
    }
    return TITAN_OK;
}
