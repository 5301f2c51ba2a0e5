/* state_stage.c - checkpoint loads and saves through host copies (see state_stage.h). */
#include "train/state_stage.h"

#include "core/mem.h"
#include "train/state_dist.h"

struct titan_state_stage {
    const titan_backend *be;
    size_t n;
    float *params, *exp_avg, *exp_avg_sq; /* host, page-backed */
    float *aux;                           /* GaLore's state, host (made at the first save) */
    size_t aux_cap;
};

titan_status titan_state_load_staged(const titan_backend *be, const char *path, const titan_llama_config *mc,
                                     const titan_shard_piece *pieces, float *shard, titan_adamw *adam,
                                     titan_train_progress *pr, char *ckpt_path_out, size_t cap,
                                     const titan_load_opts *o) {
    titan_load_opts lo = {0};
    if (o) lo = *o;
    lo.dev = be->host ? NULL : be; /* box by box through one host buffer */
    return titan_state_load_shards(path, mc, pieces, shard, adam, pr, ckpt_path_out, cap, &lo);
}

titan_status titan_state_load_staged_optim(const titan_backend *be, const char *path, const titan_llama_config *mc,
                                           const titan_shard_piece *pieces, float *shard, size_t n, titan_optim *opt,
                                           titan_train_progress *pr, char *ckpt_path_out, size_t cap,
                                           const titan_load_opts *o) {
    if (be->host)
        return titan_state_load_shards_optim(path, mc, pieces, shard, opt, pr, ckpt_path_out, cap, o);
    /* a host optimizer of the same layout takes the moments and GaLore's
     * state (a seed checkpoint leaves them zero, like the device's) */
    titan_optim *twin = NULL;
    size_t bytes = n * sizeof(float);
    float *host = titan_alloc_pages(bytes ? bytes : 1, "host copy of the parameters (checkpoint load)");
    titan_status st = host ? TITAN_OK : TITAN_ERR_NOMEM;
    if (st == TITAN_OK) st = titan_optim_host_twin(opt, &twin);
    if (st == TITAN_OK) st = titan_state_load_shards_optim(path, mc, pieces, host, twin, pr, ckpt_path_out, cap, o);
    if (st == TITAN_OK) {
        be->to_device(shard, host, bytes);
        st = titan_optim_copy_state(opt, twin);
    }
    titan_optim_free(twin);
    titan_free_pages(host);
    return st;
}

titan_status titan_state_stage_create(titan_state_stage **out, const titan_backend *be, size_t n) {
    titan_state_stage *s = *out = titan_alloc(sizeof **out, "checkpoint staging");
    if (!s) return TITAN_ERR_NOMEM;
    s->be = be;
    s->n = n;
    /* Address space now (pages fault in at the first save, then stay), so
     * that a save, collective with several ranks, cannot fail half way. */
    size_t bytes = n ? n * sizeof(float) : 1;
    s->params = titan_alloc_pages(bytes, "host copy of the parameters (checkpoint)");
    s->exp_avg = titan_alloc_pages(bytes, "host copy of exp_avg (checkpoint)");
    s->exp_avg_sq = titan_alloc_pages(bytes, "host copy of exp_avg_sq (checkpoint)");
    return s->params && s->exp_avg && s->exp_avg_sq ? TITAN_OK : TITAN_ERR_NOMEM;
}

void titan_state_stage_free(titan_state_stage *s) {
    if (!s) return;
    titan_free_pages(s->params);
    titan_free_pages(s->exp_avg);
    titan_free_pages(s->exp_avg_sq);
    titan_free(s->aux);
    titan_free(s);
}

titan_status titan_state_stage_copy(titan_state_stage *s, const titan_state_view *v, titan_state_view *host) {
    size_t bytes = s->n * sizeof(float);
    titan_state_view dev = *v; /* host may be v */
    *host = (titan_state_view){.params = s->params, .adam_step = dev.adam_step, .model_only = dev.model_only,
                               .dtype = dev.dtype,
                               /* the optimizer's layout (host tables; GaLore's state
                                * is copied below) */
                               .flat_mask = dev.flat_mask, .moment_off = dev.moment_off,
                               .moment_numel = dev.moment_numel, .aux = dev.aux, .n_aux = dev.n_aux};
    s->be->to_host(s->params, dev.params, bytes);
    if (dev.exp_avg) { /* packed moments are shorter than the parameters */
        size_t mbytes = dev.moment_numel && dev.moment_numel < s->n ? dev.moment_numel * sizeof(float) : bytes;
        s->be->to_host(s->exp_avg, dev.exp_avg, mbytes);
        s->be->to_host(s->exp_avg_sq, dev.exp_avg_sq, mbytes);
        host->exp_avg = s->exp_avg;
        host->exp_avg_sq = s->exp_avg_sq;
    }
    return titan_state_aux_to_host(s->be, &dev, &s->aux, &s->aux_cap, "host copy of GaLore's state (checkpoint)",
                                   &host->aux_data);
}
