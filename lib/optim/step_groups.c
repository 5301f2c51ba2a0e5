/* step_groups.c - the optimizer step a group of parameters at a time, as
 * each group's gradient becomes final (optim.h: titan_optim_begin_step,
 * titan_optim_step_params; optimizer.early_step_in_backward steps each
 * FSDP unit so). Every update is per element (AdamW's) or per matrix
 * (GaLore's), so groups covering each parameter once give the whole step's
 * bits, in any order. */
#include "optim/optim_impl.h"

#include <stdint.h>

void titan_optim_begin_step(titan_optim *o) { titan_adamw_begin_step(o->adam); }

void titan_optim_flat_step(titan_optim *o, size_t off, size_t len, float *params, const float *span, float gscale,
                           float lr, int64_t t) {
    const titan_adamw_config *c = &o->cfg.adam;
    float *m = titan_adamw_m(o->adam), *v = titan_adamw_v(o->adam);
    size_t end = len > SIZE_MAX - off ? SIZE_MAX : off + len;
    for (int k = 0; k < o->np && o->flat_len[k]; k++) {
        size_t lo = o->flat_off[k] > off ? o->flat_off[k] : off;
        size_t hi = o->flat_off[k] + o->flat_len[k] < end ? o->flat_off[k] + o->flat_len[k] : end;
        if (lo >= hi) continue;
        size_t mo = o->flat_moff[k] + (lo - o->flat_off[k]);
        o->be->adamw_step(params + lo, NULL, span + (lo - off), gscale, m + mo, v + mo, hi - lo, lr, c->beta1,
                          c->beta2, c->eps, c->weight_decay, t);
    }
}

titan_status titan_optim_step_params(titan_optim *o, int p0, int p1, size_t off, size_t len, float *params,
                                     const float *span, float lr) {
    switch (o->cfg.kind) {
    case TITAN_OPTIM_ADAMW:
        titan_adamw_step_span(o->adam, off, len, params, NULL, span, 1.0f, lr);
        return TITAN_OK;
    case TITAN_OPTIM_ADAM:
        if (o->cfg.adam.weight_decay == 0.0f) { /* AdamW's arithmetic without decay */
            titan_adamw_step_span(o->adam, off, len, params, NULL, span, 1.0f, lr);
            return TITAN_OK;
        }
        return titan_error(TITAN_ERR_USAGE, "optimizer Adam with weight_decay > 0: no step by parameter groups");
    case TITAN_OPTIM_GALORE: break;
    }
    if (o->sharded && !o->comm)
        return titan_error(TITAN_ERR_USAGE, "GaLore: row-sharded matrices need the shard group (titan_optim_set_comm)");
    int64_t t = titan_adamw_get_step(o->adam);
    titan_optim_flat_step(o, off, len, params, span, 1.0f, lr, t);
    return titan_galore_step_params(o, p0, p1, off, len, params, span, lr, t);
}
