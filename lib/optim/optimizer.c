/* optimizer.c - the optimizer interface (optim.h): AdamW, Adam and GaLore
 * over one set of flat moments, the choice made once at creation. */
#include <stdlib.h>
#include <string.h>

#include "core/mem.h"
#include "optim/optim_impl.h"

static const char *const kind_names[] = {"AdamW", "Adam", "GaLore"};
static const char *const proj_names[] = {"std", "reverse_std", "left", "right"};

titan_status titan_optim_kind_parse(const char *name, titan_optim_kind *out) {
    for (int k = 0; k < 3; k++)
        if (!strcmp(name, kind_names[k])) {
            *out = (titan_optim_kind)k;
            return TITAN_OK;
        }
    return titan_error(TITAN_ERR_USAGE, "optimizer.name \"%s\" is not one titan implements (AdamW, Adam, GaLore)", name);
}

const char *titan_optim_kind_name(titan_optim_kind k) { return k >= 0 && k <= 2 ? kind_names[k] : "?"; }

titan_status titan_galore_proj_parse(const char *name, titan_galore_proj *out) {
    for (int k = 0; k < 4; k++)
        if (!strcmp(name, proj_names[k])) {
            *out = (titan_galore_proj)k;
            return TITAN_OK;
        }
    return titan_error(TITAN_ERR_USAGE, "optimizer.proj_type \"%s\": expected std, reverse_std, left or right", name);
}

const char *titan_galore_proj_name(titan_galore_proj p) { return p >= 0 && p <= 3 ? proj_names[p] : "?"; }

static titan_status check_config(const titan_backend *be, const titan_optim_config *c) {
    const char *name = titan_optim_kind_name(c->kind);
    /* GaLore runs on the backend's ops (galore.c, svd.c); Adam's L2 penalty on host loops */
    int galore_ops = be->galore_adam && be->galore_update && be->qr_orthonormal && be->svd_thin && be->svd_signs;
    int host_math = (c->kind == TITAN_OPTIM_GALORE && !galore_ops) ||
                    (c->kind == TITAN_OPTIM_ADAM && c->adam.weight_decay > 0.0f && !be->host);
    if (host_math && c->kind == TITAN_OPTIM_GALORE) {
        titan_error(TITAN_ERR_USAGE, "optimizer GaLore needs the backend's GaLore and linear-algebra ops, which %s "
                    "has not", be->name);
        titan_error_hint("set training.device = \"cpu\" or \"cuda\", or optimizer.name = \"AdamW\"");
        return TITAN_ERR_USAGE;
    }
    if (host_math) {
        titan_error(TITAN_ERR_USAGE, "optimizer %s with weight_decay > 0 runs on the CPU backend only, not on %s", name,
                    be->name);
        titan_error_hint("set training.device = \"cpu\", or optimizer.name = \"AdamW\"");
        return TITAN_ERR_USAGE;
    }
    if (c->kind != TITAN_OPTIM_GALORE) return TITAN_OK;
    const titan_galore_config *g = &c->galore;
    if (g->rank < 1 || g->update_proj_gap < 1 || !(g->scale > 0.0f) || g->oversampling < 0 || g->power_iters < 0)
        return titan_error(TITAN_ERR_USAGE, "optimizer GaLore: rank %d and update_proj_gap %lld must be >= 1, scale %g > 0, "
                           "oversampling %d and power_iters %d >= 0", g->rank, (long long)g->update_proj_gap,
                           (double)g->scale, g->oversampling, g->power_iters);
    return TITAN_OK;
}

void titan_optim_free(titan_optim *o) {
    if (!o) return;
    titan_adamw_free(o->adam);
    titan_free(o->flat);
    titan_free(o->flat_off);
    titan_free(o->moment_off);
    titan_free(o->mats);
    titan_free(o->tensors);
    if (o->arena) o->be->free(o->arena);
    if (o->scratch) o->be->free(o->scratch);
    if (o->gathered) o->be->free(o->gathered);
    titan_free(o);
}

/* GaLore's flat moments, packed: the parameters left on AdamW in catalog
 * order, end to end (moment_off), and the ranges the AdamW kernel serves,
 * merged where parameters and moments both run on. */
static titan_status flat_ranges(titan_optim *o, const titan_optim_param *ps) {
    size_t np = (size_t)(o->np ? o->np : 1);
    o->flat_off = titan_alloc(3 * np * sizeof(size_t), "optimizer ranges");
    o->moment_off = titan_alloc(np * sizeof(size_t), "optimizer moment offsets");
    if (!o->flat_off || !o->moment_off) return TITAN_ERR_NOMEM;
    o->flat_len = o->flat_off + np;
    o->flat_moff = o->flat_len + np;
    int k = -1;
    size_t at = 0;
    for (int i = 0; i < o->np; i++) {
        size_t len = (size_t)(ps[i].rows * ps[i].cols);
        o->moment_off[i] = at; /* a projected matrix's: where it would be (it has none) */
        if (!o->flat[i]) continue;
        if (k >= 0 && o->flat_off[k] + o->flat_len[k] == ps[i].off && o->flat_moff[k] + o->flat_len[k] == at) {
            o->flat_len[k] += len;
        } else if (len) {
            k++;
            o->flat_off[k] = ps[i].off;
            o->flat_moff[k] = at;
            o->flat_len[k] = len;
        }
        at += len;
    }
    if ((size_t)(k + 1) < np) o->flat_len[k + 1] = 0;
    o->flat_numel = at;
    return TITAN_OK;
}

/* A new optimizer's layout, without its state: GaLore's matrices and the
 * packed flat moments. */
static titan_status layout(titan_optim **out, const titan_backend *be, size_t n, const titan_optim_param *ps, int np,
                           const titan_optim_config *cfg) {
    titan_optim *o = *out = titan_alloc(sizeof *o, "optimizer");
    if (!o) return TITAN_ERR_NOMEM;
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    o->be = be;
    o->flat_numel = n;
    if (cfg->kind != TITAN_OPTIM_GALORE) return TITAN_OK;
    o->np = np;
    o->flat = titan_alloc((size_t)(np ? np : 1), "optimizer parameter mask");
    if (!o->flat) return TITAN_ERR_NOMEM;
    memset(o->flat, 1, (size_t)(np ? np : 1));
    TITAN_TRY(titan_galore_layout(o, ps, np));
    return flat_ranges(o, ps);
}

titan_status titan_optim_create(titan_optim **out, const titan_backend *be, size_t n, const titan_optim_param *ps,
                                int np, const titan_optim_config *cfg) {
    *out = NULL;
    TITAN_TRY(check_config(be, cfg));
    titan_optim *o = NULL;
    titan_status st = layout(&o, be, n, ps, np, cfg);
    /* the moments of the parameters on AdamW only (all of them but GaLore's) */
    if (st == TITAN_OK) st = titan_adamw_create(&o->adam, be, o->flat_numel, &cfg->adam);
    if (st == TITAN_OK && cfg->kind == TITAN_OPTIM_GALORE) st = titan_galore_alloc(o);
    if (st != TITAN_OK) {
        titan_optim_free(o);
        return st;
    }
    *out = o;
    return TITAN_OK;
}

static void fill_bytes(const titan_optim *o, titan_optim_bytes *b) {
    double f = sizeof(float);
    b->flat = 2.0 * f * (double)o->flat_numel;
    b->projected = f * (double)o->arena_numel;
    b->state = b->flat + b->projected;
    b->work = o->cfg.kind == TITAN_OPTIM_GALORE ? f * (double)titan_galore_work_numel(o) : 0.0;
}

titan_status titan_optim_plan_bytes(size_t n, const titan_optim_param *ps, int np, const titan_optim_config *cfg,
                                    titan_optim_bytes *out) {
    titan_optim *o = NULL;
    titan_status st = layout(&o, titan_backend_cpu(), n, ps, np, cfg);
    if (st == TITAN_OK) fill_bytes(o, out);
    titan_optim_free(o);
    return st;
}

/* torch.optim.Adam: the L2 penalty joins the gradient (g + wd p), then the
 * AdamW kernel without decoupled decay, in slices of a host buffer. */
static void adam_l2_step(titan_optim *o, float *params, const float *grads, float gscale, float lr, int64_t t) {
    enum { SLICE = 1 << 14 };
    float g[SLICE];
    const titan_adamw_config *c = &o->cfg.adam;
    float *m = titan_adamw_m(o->adam), *v = titan_adamw_v(o->adam);
    size_t n = titan_adamw_numel(o->adam);
    for (size_t at = 0; at < n; at += SLICE) {
        size_t len = n - at < SLICE ? n - at : SLICE;
        for (size_t i = 0; i < len; i++) g[i] = grads[at + i] * gscale + c->weight_decay * params[at + i];
        o->be->adamw_step(params + at, NULL, g, 1.0f, m + at, v + at, len, lr, c->beta1, c->beta2, c->eps, 0.0f, t);
    }
}

titan_status titan_optim_step(titan_optim *o, float *params, void *params_bf16, const float *grads, float gscale,
                              float lr) {
    const titan_adamw_config *c = &o->cfg.adam;
    switch (o->cfg.kind) {
    case TITAN_OPTIM_ADAMW:
        titan_adamw_step_cast(o->adam, params, params_bf16, grads, gscale, lr);
        return TITAN_OK;
    case TITAN_OPTIM_ADAM:
        if (c->weight_decay == 0.0f) { /* AdamW's arithmetic without decay */
            titan_adamw_step_cast(o->adam, params, params_bf16, grads, gscale, lr);
            return TITAN_OK;
        }
        break;
    case TITAN_OPTIM_GALORE: break;
    }
    int64_t t = titan_adamw_get_step(o->adam) + 1;
    titan_adamw_set_step(o->adam, t);
    if (o->cfg.kind == TITAN_OPTIM_ADAM) {
        adam_l2_step(o, params, grads, gscale, lr, t);
        return TITAN_OK;
    }
    titan_optim_flat_step(o, 0, SIZE_MAX, params, grads, gscale, lr, t);
    if (o->sharded && !o->comm)
        return titan_error(TITAN_ERR_USAGE, "GaLore: row-sharded matrices need the shard group (titan_optim_set_comm)");
    return titan_galore_step(o, params, grads, gscale, lr, t);
}

int titan_optim_writes_copy(const titan_optim *o) {
    return o->cfg.kind == TITAN_OPTIM_ADAMW || (o->cfg.kind == TITAN_OPTIM_ADAM && o->cfg.adam.weight_decay == 0.0f);
}

void titan_optim_set_comm(titan_optim *o, titan_optim_comm *c) { o->comm = c; }

titan_optim_kind titan_optim_get_kind(const titan_optim *o) { return o->cfg.kind; }
titan_adamw *titan_optim_adamw(titan_optim *o) { return o->adam; }
const unsigned char *titan_optim_flat_mask(const titan_optim *o) { return o->flat; }

const titan_optim_tensor *titan_optim_aux_tensors(const titan_optim *o, int *count) {
    *count = 3 * o->nmat;
    return o->tensors;
}

float *titan_optim_aux(titan_optim *o) { return o->arena; }
size_t titan_optim_aux_numel(const titan_optim *o) { return o->arena_numel; }

double titan_optim_state_bytes(const titan_optim *o, double *projected) {
    titan_optim_bytes b;
    fill_bytes(o, &b);
    if (projected) *projected = b.projected;
    return b.state;
}

void titan_optim_get_bytes(const titan_optim *o, titan_optim_bytes *out) { fill_bytes(o, out); }

const size_t *titan_optim_moment_offsets(const titan_optim *o) { return o->flat ? o->moment_off : NULL; }
size_t titan_optim_moment_numel(const titan_optim *o) { return o->flat_numel; }

/* A copy of n elements of size sz of a table (NULL stays NULL); *st
 * TITAN_ERR_NOMEM when out of memory. */
static void *dup_table(const void *src, size_t n, size_t sz, const char *what, titan_status *st) {
    if (!src || *st != TITAN_OK) return NULL;
    void *d = titan_alloc((n ? n : 1) * sz, what);
    if (d) memcpy(d, src, n * sz);
    else *st = TITAN_ERR_NOMEM;
    return d;
}

titan_status titan_optim_host_twin(const titan_optim *o, titan_optim **out) {
    titan_optim *t = *out = titan_alloc(sizeof *t, "optimizer (host twin)");
    if (!t) return TITAN_ERR_NOMEM;
    memset(t, 0, sizeof *t);
    t->cfg = o->cfg;
    t->be = titan_backend_cpu();
    t->np = o->np;
    t->flat_numel = o->flat_numel;
    t->nmat = o->nmat;
    t->arena_numel = o->arena_numel;
    size_t np = (size_t)(o->np ? o->np : 1);
    titan_status st = TITAN_OK;
    t->flat = dup_table(o->flat, np, 1, "optimizer parameter mask (host twin)", &st);
    t->flat_off = dup_table(o->flat_off, 3 * np, sizeof(size_t), "optimizer ranges (host twin)", &st);
    if (t->flat_off) t->flat_len = t->flat_off + np, t->flat_moff = t->flat_len + np;
    t->moment_off = dup_table(o->moment_off, np, sizeof(size_t), "optimizer moment offsets (host twin)", &st);
    t->mats = dup_table(o->mats, (size_t)o->nmat, sizeof *o->mats, "GaLore matrices (host twin)", &st);
    t->tensors = dup_table(o->tensors, 3 * (size_t)o->nmat, sizeof *o->tensors, "GaLore state tensors (host twin)", &st);
    if (st == TITAN_OK) st = titan_adamw_create(&t->adam, t->be, t->flat_numel, &t->cfg.adam);
    if (st == TITAN_OK && o->arena && !(t->arena = t->be->alloc((o->arena_numel ? o->arena_numel : 1) * sizeof(float))))
        st = titan_error(TITAN_ERR_NOMEM, "GaLore: host copy of the low-rank state: cannot allocate %zu bytes",
                         o->arena_numel * sizeof(float));
    if (st != TITAN_OK) {
        titan_optim_free(t);
        *out = NULL;
    }
    return st;
}

/* nbytes from src (backend sb's memory) to dst (db's): one of them the host */
static titan_status move_bytes(const titan_backend *db, void *dst, const titan_backend *sb, const void *src,
                               size_t nbytes) {
    if (!nbytes) return TITAN_OK;
    if (db->host && sb->host) memcpy(dst, src, nbytes);
    else if (sb->host) db->to_device(dst, src, nbytes);
    else if (db->host) sb->to_host(dst, src, nbytes);
    else return titan_error(TITAN_ERR_USAGE, "optimizer state: no copy from %s to %s memory", sb->name, db->name);
    return TITAN_OK;
}

titan_status titan_optim_copy_state(titan_optim *dst, const titan_optim *src) {
    if (dst->flat_numel != src->flat_numel || dst->arena_numel != src->arena_numel || dst->cfg.kind != src->cfg.kind)
        return titan_error(TITAN_ERR_USAGE, "optimizer state: copy between different layouts");
    size_t mb = src->flat_numel * sizeof(float);
    TITAN_TRY(move_bytes(dst->be, titan_adamw_m(dst->adam), src->be, titan_adamw_m(src->adam), mb));
    TITAN_TRY(move_bytes(dst->be, titan_adamw_v(dst->adam), src->be, titan_adamw_v(src->adam), mb));
    titan_adamw_set_step(dst->adam, titan_adamw_get_step(src->adam));
    if (src->arena && dst->arena)
        TITAN_TRY(move_bytes(dst->be, dst->arena, src->be, src->arena, src->arena_numel * sizeof(float)));
    return TITAN_OK;
}
