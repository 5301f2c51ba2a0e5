/* early_step.c - the optimizer step inside the backward (see early_step.h). */
#include "train/early_step.h"

#include <string.h>

#include "core/clock.h"
#include "core/mem.h"

struct titan_early_step {
    titan_fsdp *fsdp;
    titan_optim *opt;
    const titan_backend *be;
    float lr;
    /* each unit's sum of squares, in the order they finish (backend
     * memory: taken without a wait in the backward, read once after) */
    double *parts, seconds;
    int nparts, done;
    titan_status err; /* the step's first failed update */
};

/* Refused with the job's key named, and what to change. */
static titan_status refuse(const char *why, const char *hint) {
    titan_error(TITAN_ERR_USAGE, "optimizer.early_step_in_backward: %s", why);
    titan_error_hint("%s", hint);
    return TITAN_ERR_USAGE;
}

titan_status titan_early_step_check(const titan_job_config *cfg, const titan_layout *l, int accum) {
    if (!cfg->optimizer_early_step_in_backward) return TITAN_OK;
    if (strcmp(cfg->optimizer_name, "AdamW") && strcmp(cfg->optimizer_name, "GaLore"))
        return refuse("AdamW and GaLore only (optimizer.name is neither)",
                      "set optimizer.name = \"AdamW\" or \"GaLore\"");
    if (l->pp > 1) return refuse("not with pipeline parallelism", "set parallelism.pipeline_parallel_degree = 1");
    if (l->tp > 1) return refuse("not with tensor parallelism (not yet)", "set parallelism.tensor_parallel_degree = 1");
    if (l->dp_replicate > 1)
        return refuse("not with replicas (HSDP, DDP: the gradients are final after an all-reduce; not yet)",
                      "set parallelism.data_parallel_replicate_degree = 1");
    if (l->dp_shard * l->cp < 2)
        return refuse("needs FSDP (a shard group of 2 or more ranks): each unit's update follows its reduce-scatter",
                      "run with --nproc N and parallelism.data_parallel_shard_degree = N (or -1)");
    if (cfg->training_max_norm > 0)
        return refuse("global-norm clipping needs every gradient before any update (training.max_norm > 0)",
                      "set training.max_norm = 0");
    if (accum > 1)
        return refuse("gradient accumulation: the gradients are final after the last micro-batch only",
                      "make training.global_batch_size = local_batch_size x the data-parallel degree");
    return TITAN_OK;
}

/* A unit's shard gradient is final: its sum of squares and its update
 * (FSDP then reuses its memory for the next unit's). After a failure the
 * step's later units are left alone; the error surfaces after the backward. */
static void unit_done(void *ctx, const titan_fsdp_unit_grad *g) {
    titan_early_step *e = ctx;
    if (e->err != TITAN_OK) return;
    double t0 = titan_now_s();
    if (g->len && e->done < e->nparts) e->be->sumsq_into(&e->parts[e->done++], g->grad, g->len);
    e->err = titan_optim_step_params(e->opt, g->p0, g->p1, g->off, g->len, titan_fsdp_params(e->fsdp), g->grad, e->lr);
    e->seconds += titan_now_s() - t0;
}

titan_status titan_early_step_create(titan_early_step **out, titan_fsdp *f, titan_optim *opt,
                                     const titan_backend *be) {
    titan_early_step *e = *out = titan_alloc(sizeof *e, "early step");
    if (!e) return TITAN_ERR_NOMEM;
    *e = (titan_early_step){.fsdp = f, .opt = opt, .be = be, .nparts = titan_fsdp_units(f)};
    if (!(e->parts = be->alloc((size_t)(e->nparts ? e->nparts : 1) * sizeof(double))))
        return titan_error(TITAN_ERR_NOMEM, "early step: %d units' sums of squares (%s): out of memory", e->nparts,
                           be->name);
    return titan_fsdp_set_unit_done(f, unit_done, e);
}

void titan_early_step_free(titan_early_step *e) {
    if (!e) return;
    (void)titan_fsdp_set_unit_done(e->fsdp, NULL, NULL); /* cannot fail: no calls after this */
    if (e->parts) e->be->free(e->parts);
    titan_free(e);
}

void titan_early_step_begin(titan_early_step *e, float lr) {
    titan_optim_begin_step(e->opt);
    e->lr = lr;
    e->err = TITAN_OK;
    e->done = 0;
    e->seconds = 0.0;
}

double titan_early_step_sumsq(const titan_early_step *e) {
    enum { MAX_PARTS = 1024 };
    double host[MAX_PARTS], ss = 0.0;
    for (int at = 0; at < e->done; at += MAX_PARTS) { /* added in the units' order, as they finished */
        int n = e->done - at < MAX_PARTS ? e->done - at : MAX_PARTS;
        e->be->to_host(host, e->parts + at, (size_t)n * sizeof(double));
        for (int k = 0; k < n; k++) ss += host[k];
    }
    return ss;
}
titan_status titan_early_step_error(const titan_early_step *e) { return e->err; }
double titan_early_step_seconds(const titan_early_step *e) { return e->seconds; }
