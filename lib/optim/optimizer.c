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
    int host_math = c->kind == TITAN_OPTIM_GALORE || (c->kind == TITAN_OPTIM_ADAM && c->adam.weight_decay > 0.0f);
    if (host_math && !be->host) {
        titan_error(TITAN_ERR_USAGE, "optimizer %s%s runs on the CPU backend only, not on %s", name,
                    c->kind == TITAN_OPTIM_ADAM ? " with weight_decay > 0" : "", be->name);
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
    titan_free(o->mats);
    titan_free(o->tensors);
    titan_free_pages(o->arena);
    titan_free_pages(o->scratch);
    titan_free_pages(o->gathered);
    titan_free(o);
}

/* The flat ranges the AdamW kernel serves, adjacent parameters merged. */
static titan_status flat_ranges(titan_optim *o, const titan_optim_param *ps) {
    o->flat_off = titan_alloc(2 * (size_t)(o->np ? o->np : 1) * sizeof(size_t), "optimizer ranges");
    if (!o->flat_off) return TITAN_ERR_NOMEM;
    o->flat_len = o->flat_off + o->np;
    int k = -1;
    for (int i = 0; i < o->np; i++) {
        if (!o->flat[i]) continue;
        size_t len = (size_t)(ps[i].rows * ps[i].cols);
        if (k >= 0 && o->flat_off[k] + o->flat_len[k] == ps[i].off) {
            o->flat_len[k] += len;
            continue;
        }
        k++;
        o->flat_off[k] = ps[i].off;
        o->flat_len[k] = len;
    }
    if (k + 1 < o->np) o->flat_len[k + 1] = 0;
    return TITAN_OK;
}

titan_status titan_optim_create(titan_optim **out, const titan_backend *be, size_t n, const titan_optim_param *ps,
                                int np, const titan_optim_config *cfg) {
    *out = NULL;
    TITAN_TRY(check_config(be, cfg));
    titan_optim *o = titan_alloc(sizeof *o, "optimizer");
    if (!o) return TITAN_ERR_NOMEM;
    memset(o, 0, sizeof *o);
    o->cfg = *cfg;
    o->be = be;
    titan_status st = titan_adamw_create(&o->adam, be, n, &cfg->adam);
    if (st == TITAN_OK && cfg->kind == TITAN_OPTIM_GALORE) {
        o->np = np;
        o->flat = titan_alloc((size_t)(np ? np : 1), "optimizer parameter mask");
        if (!o->flat) st = TITAN_ERR_NOMEM;
        else memset(o->flat, 1, (size_t)(np ? np : 1));
        if (st == TITAN_OK) st = titan_galore_plan(o, ps, np);
        if (st == TITAN_OK) st = flat_ranges(o, ps);
    }
    if (st != TITAN_OK) {
        titan_optim_free(o);
        return st;
    }
    *out = o;
    return TITAN_OK;
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
    float *m = titan_adamw_m(o->adam), *v = titan_adamw_v(o->adam);
    for (int k = 0; k < o->np && o->flat_len[k]; k++) {
        size_t off = o->flat_off[k];
        o->be->adamw_step(params + off, NULL, grads + off, gscale, m + off, v + off, o->flat_len[k], lr, c->beta1,
                          c->beta2, c->eps, c->weight_decay, t);
    }
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

/* What is allocated: the flat moments are still made whole under GaLore
 * (the projected matrices' ranges go unused), so GaLore adds its low-rank
 * state to AdamW's rather than replacing it until they are packed. */
double titan_optim_state_bytes(const titan_optim *o, double *projected) {
    size_t n = titan_adamw_numel(o->adam);
    if (projected) *projected = (double)o->arena_numel * sizeof(float);
    return 2.0 * sizeof(float) * (double)n + (double)o->arena_numel * sizeof(float);
}

double titan_optim_state_needed_bytes(const titan_optim *o) {
    size_t flat = titan_adamw_numel(o->adam);
    if (o->flat) {
        flat = 0;
        for (int k = 0; k < o->np && o->flat_len[k]; k++) flat += o->flat_len[k];
    }
    return 2.0 * sizeof(float) * (double)flat + (double)o->arena_numel * sizeof(float);
}
