/* adamw.c - AdamW optimizer state and step on a backend. */
#include <stdlib.h>

#include "core/mem.h"
#include "optim/optim.h"

struct titan_adamw {
    const titan_backend *be;
    size_t n;
    float *m, *v; /* backend memory */
    int64_t step;
    titan_adamw_config cfg;
};

titan_status titan_adamw_create(titan_adamw **out, const titan_backend *be, size_t n,
                                const titan_adamw_config *cfg) {
    *out = NULL;
    titan_adamw_config c = {0.9f, 0.95f, 1e-8f, 0.1f}; /* torchtitan's defaults */
    if (cfg) c = *cfg;
    if (!(c.beta1 >= 0.0f && c.beta1 < 1.0f) || !(c.beta2 >= 0.0f && c.beta2 < 1.0f))
        return titan_error(TITAN_ERR_USAGE, "optimizer: betas (%g, %g) must lie in [0, 1)",
                           (double)c.beta1, (double)c.beta2);
    if (!(c.eps >= 0.0f) || !(c.weight_decay >= 0.0f))
        return titan_error(TITAN_ERR_USAGE, "optimizer: eps %g and weight_decay %g must be >= 0",
                           (double)c.eps, (double)c.weight_decay);
    titan_adamw *o = titan_alloc(sizeof *o, "optimizer state");
    if (!o) return TITAN_ERR_NOMEM;
    o->be = be;
    o->n = n;
    o->cfg = c;
    size_t bytes = (n ? n : 1) * sizeof(float);
    o->m = be->alloc(bytes);
    o->v = be->alloc(bytes);
    if (!o->m || !o->v) {
        titan_adamw_free(o);
        return titan_error(TITAN_ERR_NOMEM, "optimizer: cannot allocate 2 x %zu bytes of %s memory",
                           bytes, be->name);
    }
    *out = o;
    return TITAN_OK;
}

void titan_adamw_free(titan_adamw *o) {
    if (!o) return;
    if (o->m) o->be->free(o->m);
    if (o->v) o->be->free(o->v);
    titan_free(o);
}

void titan_adamw_step_cast(titan_adamw *o, float *params, void *params_bf16, const float *grads,
                           float gscale, float lr) {
    o->step++;
    o->be->adamw_step(params, params_bf16, grads, gscale, o->m, o->v, o->n, lr, o->cfg.beta1,
                      o->cfg.beta2, o->cfg.eps, o->cfg.weight_decay, o->step);
}

void titan_adamw_begin_step(titan_adamw *o) { o->step++; }

void titan_adamw_step_span(titan_adamw *o, size_t off, size_t n, float *params, void *params_bf16,
                           const float *span, float gscale, float lr) {
    if (n == 0) return;
    void *copy = params_bf16 ? (void *)((uint16_t *)params_bf16 + off) : NULL;
    o->be->adamw_step(params + off, copy, span, gscale, o->m + off, o->v + off, n, lr, o->cfg.beta1,
                      o->cfg.beta2, o->cfg.eps, o->cfg.weight_decay, o->step);
}

void titan_adamw_step_range(titan_adamw *o, size_t off, size_t n, float *params, void *params_bf16,
                            const float *grads, float gscale, float lr) {
    titan_adamw_step_span(o, off, n, params, params_bf16, grads + off, gscale, lr);
}

void titan_adamw_step(titan_adamw *o, float *params, const float *grads, float lr) {
    titan_adamw_step_cast(o, params, NULL, grads, 1.0f, lr);
}

float *titan_adamw_m(titan_adamw *o) { return o->m; }
float *titan_adamw_v(titan_adamw *o) { return o->v; }
size_t titan_adamw_numel(const titan_adamw *o) { return o->n; }
int64_t titan_adamw_get_step(const titan_adamw *o) { return o->step; }
void titan_adamw_set_step(titan_adamw *o, int64_t step) { o->step = step; }
const titan_adamw_config *titan_adamw_get_config(const titan_adamw *o) { return &o->cfg; }
