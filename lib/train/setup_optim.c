/* setup_optim.c - the optimizer of a job (see setup_optim.h). */
#include "train/setup_optim.h"

#include <stdlib.h>
#include <string.h>

#include "core/mem.h"

titan_status titan_setup_optim_config(const titan_job_config *cfg, const titan_layout *l, titan_optim_config *oc) {
    memset(oc, 0, sizeof *oc);
    oc->adam = (titan_adamw_config){
        .beta1 = (float)cfg->optimizer_beta1, .beta2 = (float)cfg->optimizer_beta2,
        .eps = (float)cfg->optimizer_eps, .weight_decay = (float)cfg->optimizer_weight_decay,
    };
    TITAN_TRY(titan_optim_kind_parse(cfg->optimizer_name, &oc->kind));
    if (oc->kind != TITAN_OPTIM_GALORE) return TITAN_OK;
    if (l->cp > 1 || l->tp > 1 || l->pp > 1) {
        char lay[256];
        titan_layout_format(l, lay, sizeof lay);
        titan_error(TITAN_ERR_USAGE, "optimizer GaLore: layout %s has cp %d, tp %d, pp %d; GaLore trains under "
                    "data parallelism only (DDP, FSDP, HSDP)", lay, l->cp, l->tp, l->pp);
        titan_error_hint("set context, tensor and pipeline parallel degrees to 1");
        return TITAN_ERR_USAGE;
    }
    TITAN_TRY(titan_galore_proj_parse(cfg->optimizer_proj_type, &oc->galore.proj_type));
    oc->galore.rank = cfg->optimizer_rank;
    oc->galore.update_proj_gap = cfg->optimizer_update_proj_gap;
    oc->galore.scale = (float)cfg->optimizer_scale;
    oc->galore.randomized = !strcmp(cfg->optimizer_galore_svd, "randomized");
    oc->galore.oversampling = cfg->optimizer_oversampling;
    oc->galore.power_iters = cfg->optimizer_power_iters;
    oc->galore.seed = (uint64_t)cfg->training_seed;
    return TITAN_OK;
}

titan_status titan_setup_optim_params(const titan_llama_config *mc, const titan_shard_piece *pc, titan_param **ps_out,
                                      titan_optim_param **op_out, int *np_out) {
    int np = 0;
    titan_param *ps = titan_llama_params_new(mc, &np);
    titan_optim_param *op = ps ? titan_alloc((size_t)(np ? np : 1) * sizeof *op, "optimizer parameters") : NULL;
    *ps_out = NULL;
    *op_out = NULL;
    if (!op) {
        free(ps);
        return TITAN_ERR_NOMEM;
    }
    for (int i = 0; i < np; i++) {
        titan_param_role r = ps[i].role;
        /* this rank's rows (FSDP: a dim-0 chunk; none when len is 0) */
        int64_t cols = ps[i].ndim == 2 ? ps[i].shape[1] : (int64_t)pc[i].len;
        int64_t rows = ps[i].ndim == 2 ? (int64_t)pc[i].len / ps[i].shape[1] : 1;
        op[i] = (titan_optim_param){.name = ps[i].name, .off = pc[i].shard_off, .rows = rows, .cols = cols,
                                    .row0 = pc[i].len ? pc[i].box.offset[0] : 0,
                                    .full_rows = ps[i].ndim == 2 ? ps[i].shape[0] : 0,
                                    .project = ps[i].ndim == 2 && r != TITAN_PARAM_TOK_EMBEDDINGS &&
                                               r != TITAN_PARAM_OUTPUT && r != TITAN_PARAM_ATTENTION_NORM &&
                                               r != TITAN_PARAM_FFN_NORM && r != TITAN_PARAM_NORM};
    }
    *ps_out = ps;
    *op_out = op;
    *np_out = np;
    return TITAN_OK;
}
