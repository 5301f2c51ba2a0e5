/* setup.c - from a job config to the objects a run needs. */
#include "train/setup.h"

#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "data/tokenizer.h"

titan_status titan_setup_model_config(const titan_job_config *cfg, int vocab_size,
                                      titan_llama_config *out) {
    TITAN_TRY(titan_llama_flavor(cfg->model_flavor, out));
    if (cfg->model_dim > 0) out->dim = cfg->model_dim;
    if (cfg->model_n_layers > 0) out->n_layers = cfg->model_n_layers;
    if (cfg->model_n_heads > 0) out->n_heads = cfg->model_n_heads;
    if (cfg->model_n_kv_heads > 0) out->n_kv_heads = cfg->model_n_kv_heads;
    else if (cfg->model_n_heads > 0) out->n_kv_heads = cfg->model_n_heads;
    if (cfg->model_multiple_of > 0) out->multiple_of = cfg->model_multiple_of;
    if (cfg->model_ffn_dim_multiplier >= 0) out->ffn_dim_multiplier = (float)cfg->model_ffn_dim_multiplier;
    if (cfg->model_norm_eps > 0) out->norm_eps = (float)cfg->model_norm_eps;
    if (cfg->model_rope_theta > 0) out->rope_theta = (float)cfg->model_rope_theta;
    if (cfg->model_rope_scaling_factor >= 0) out->rope_scaling_factor = (float)cfg->model_rope_scaling_factor;
    if (cfg->model_tie_embeddings >= 0) out->tie_embeddings = cfg->model_tie_embeddings;
    out->vocab_size = vocab_size;
    titan_status st = titan_llama_config_check(out);
    if (st != TITAN_OK) {
        titan_error_context("[model] flavor %s with overrides", cfg->model_flavor);
        return st;
    }
    /* The degree is in the config: a split the model cannot take is refused
     * at titan-init, by titan-train --nproc before it starts ranks
     * (titan_setup_check_model), and under mpirun/srun by every rank. */
    int tp = cfg->parallelism_tensor_parallel_degree, pp = cfg->parallelism_pipeline_parallel_degree;
    st = titan_llama_tp_check(out, tp);
    if (st != TITAN_OK) {
        titan_error_context("parallelism.tensor_parallel_degree = %d", tp);
        return st;
    }
    st = titan_llama_pp_check(out, pp);
    if (st != TITAN_OK) titan_error_context("parallelism.pipeline_parallel_degree = %d", pp);
    return st;
}

titan_status titan_setup_check_model(const titan_job_config *cfg) {
    titan_tokenizer *tok = NULL;
    char spec[TITAN_STR + 32];
    titan_config_tokenizer_spec(cfg, spec, sizeof spec);
    TITAN_TRY(titan_tokenizer_open(&tok, spec));
    titan_llama_config mc;
    titan_status st = titan_setup_model_config(cfg, titan_tokenizer_vocab_size(tok), &mc);
    titan_tokenizer_free(tok);
    return st;
}

titan_status titan_setup_ckpt_compression(const titan_job_config *cfg) {
    titan_ckpt_compression c;
    if (titan_ckpt_compression_parse(cfg->checkpoint_compression, &c))
        return titan_error(TITAN_ERR_USAGE, "checkpoint.compression: \"%s\" is not none or zstd",
                           cfg->checkpoint_compression);
    return titan_ckpt_set_default_compression(c, cfg->checkpoint_compression_level);
}

titan_status titan_setup_accum_steps(const titan_job_config *cfg, int dp_size, int *out) {
    int per_step = cfg->training_local_batch_size * dp_size;
    if (cfg->training_global_batch_size < 0) {
        *out = 1;
        return TITAN_OK;
    }
    if (cfg->training_global_batch_size % per_step != 0)
        return titan_error(TITAN_ERR_USAGE,
                           "training.global_batch_size: %d is not a multiple of local_batch_size x "
                           "data-parallel degree (%d x %d)",
                           cfg->training_global_batch_size, cfg->training_local_batch_size, dp_size);
    *out = cfg->training_global_batch_size / per_step;
    return TITAN_OK;
}

titan_ac_mode titan_setup_ac_mode(const titan_job_config *cfg) {
    const char *opt = cfg->activation_checkpoint_selective_ac_option;
    switch (cfg->activation_checkpoint_kind) {
    case TITAN_JOB_AC_NONE: return TITAN_AC_NONE;
    case TITAN_JOB_AC_FULL: return TITAN_AC_FULL;
    case TITAN_JOB_AC_SELECTIVE: break;
    }
    return strcmp(opt, "op") == 0 ? TITAN_AC_OP : atoi(opt); /* "N": 1 .. 999999999 */
}
