/* state_stage.c - checkpoint loads and saves through host copies (see state_stage.h). */
#include "train/state_stage.h"

#include <inttypes.h>

#include "core/clock.h"
#include "core/log.h"
#include "core/mem.h"
#include "train/state_dist.h"

struct titan_state_stage {
    const titan_backend *be;
    size_t n;
    float *params, *exp_avg, *exp_avg_sq; /* host, page-backed; NULL until the first save */
};

titan_status titan_state_load_staged(const titan_backend *be, const char *path, const titan_llama_config *mc,
                                     const titan_shard_piece *pieces, float *shard, titan_adamw *adam,
                                     titan_train_progress *pr, char *ckpt_path_out, size_t cap) {
    if (be == titan_backend_cpu())
        return titan_state_load_shards(path, mc, pieces, shard, adam, pr, ckpt_path_out, cap);
    size_t n = titan_adamw_numel(adam), bytes = n * sizeof(float);
    /* A CPU optimizer of the same shape takes the moments (a seed checkpoint
     * leaves them zero, like the device's). */
    titan_adamw *host_adam = NULL;
    float *host = titan_alloc_pages(bytes ? bytes : 1, "host copy of the parameters (checkpoint load)");
    titan_status st = host ? TITAN_OK : TITAN_ERR_NOMEM;
    if (st == TITAN_OK) st = titan_adamw_create(&host_adam, titan_backend_cpu(), n, titan_adamw_get_config(adam));
    if (st == TITAN_OK) st = titan_state_load_shards(path, mc, pieces, host, host_adam, pr, ckpt_path_out, cap);
    if (st == TITAN_OK) {
        be->to_device(shard, host, bytes);
        be->to_device(titan_adamw_m(adam), titan_adamw_m(host_adam), bytes);
        be->to_device(titan_adamw_v(adam), titan_adamw_v(host_adam), bytes);
        titan_adamw_set_step(adam, titan_adamw_get_step(host_adam));
    }
    titan_adamw_free(host_adam);
    titan_free_pages(host);
    return st;
}

titan_status titan_state_stage_create(titan_state_stage **out, const titan_backend *be, size_t n) {
    *out = titan_alloc(sizeof **out, "checkpoint staging");
    if (!*out) return TITAN_ERR_NOMEM;
    (*out)->be = be;
    (*out)->n = n;
    return TITAN_OK;
}

void titan_state_stage_free(titan_state_stage *s) {
    if (!s) return;
    titan_free_pages(s->params);
    titan_free_pages(s->exp_avg);
    titan_free_pages(s->exp_avg_sq);
    titan_free(s);
}

titan_status titan_state_save_staged(titan_state_stage *s, titan_async_saver *saver, const char *root,
                                     const titan_llama_config *mc, const titan_state_view *v,
                                     const titan_train_progress *pr, const char *tokenizer_id, int keep,
                                     double *stall_s) {
    double t0 = titan_now_s();
    *stall_s = 0.0;
    size_t bytes = s->n * sizeof(float);
    if (!s->params) {
        /* Kept for later saves: the pages stay faulted in. */
        s->params = titan_alloc_pages(bytes ? bytes : 1, "host copy of the parameters (checkpoint)");
        s->exp_avg = titan_alloc_pages(bytes ? bytes : 1, "host copy of exp_avg (checkpoint)");
        s->exp_avg_sq = titan_alloc_pages(bytes ? bytes : 1, "host copy of exp_avg_sq (checkpoint)");
        if (!s->params || !s->exp_avg || !s->exp_avg_sq) {
            titan_free_pages(s->params);
            titan_free_pages(s->exp_avg);
            titan_free_pages(s->exp_avg_sq);
            s->params = s->exp_avg = s->exp_avg_sq = NULL;
            return titan_error(TITAN_ERR_NOMEM, "checkpoint step %" PRId64 ": 3 x %zu bytes of host memory for the "
                               "copy of the %s state: out of memory", pr->step, bytes, s->be->name);
        }
    }
    titan_state_view host = {.params = s->params, .adam_step = v->adam_step};
    s->be->to_host(s->params, v->params, bytes);
    if (v->exp_avg) {
        s->be->to_host(s->exp_avg, v->exp_avg, bytes);
        s->be->to_host(s->exp_avg_sq, v->exp_avg_sq, bytes);
        host.exp_avg = s->exp_avg;
        host.exp_avg_sq = s->exp_avg_sq;
    }
    titan_status st;
    if (saver) {
        /* The saver snapshots the host copy (one more memcpy) before returning. */
        double held = 0.0;
        st = titan_async_save_start(saver, root, mc, &host, pr, tokenizer_id, keep, &held);
        *stall_s = titan_now_s() - t0;
        return st;
    }
    st = titan_state_save_view(root, mc, &host, pr, tokenizer_id, keep);
    *stall_s = titan_now_s() - t0;
    if (st == TITAN_OK) titan_info("checkpoint: step %" PRId64 " saved in %.2f s", pr->step, *stall_s);
    return st;
}
