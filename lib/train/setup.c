/* setup.c - from a job config to the objects a run needs. */
#include "train/setup.h"

#include <stdlib.h>
#include <string.h>

#include "ckpt/ckpt.h"
#include "data/tokenizer.h"
#include "parallel/pipeline.h"

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

titan_status titan_setup_shape_of(const titan_job_config *cfg, int n_layers, titan_layout *lay, titan_setup_shape *sh) {
    int B = cfg->training_local_batch_size;
    sh->ac = titan_setup_ac_mode(cfg);
    sh->sharded = lay->dp_shard * lay->cp > 1; /* FSDP's group: dp_shard x cp */
    sh->mb = B;
    sh->micro = 1;
    sh->sched = TITAN_PP_1F1B;
    /* mixed_precision_param is the compute type (torchtitan's meaning): bf16
     * activations and compute weights; parameters, gradients and AdamW stay fp32. */
    sh->compute = cfg->training_param_dtype == TITAN_JOB_BFLOAT16 ? TITAN_DTYPE_BF16 : TITAN_DTYPE_F32;
    if (lay->pp <= 1) return TITAN_OK;
    /* Pipeline parallelism: the model is this rank's stage, run on
     * micro-batches of pipeline_parallel_microbatch_size sequences. */
    switch (cfg->parallelism_pp_schedule) {
    case TITAN_JOB_PP_1F1B: sh->sched = TITAN_PP_1F1B; break;
    case TITAN_JOB_PP_GPIPE: sh->sched = TITAN_PP_GPIPE; break;
    case TITAN_JOB_PP_INTERLEAVED_1F1B: sh->sched = TITAN_PP_INTERLEAVED_1F1B; break;
    case TITAN_JOB_PP_LOOPED_BFS: sh->sched = TITAN_PP_LOOPED_BFS; break;
    case TITAN_JOB_PP_INTERLEAVED_ZB: sh->sched = TITAN_PP_INTERLEAVED_ZB; break;
    case TITAN_JOB_PP_ZBV: sh->sched = TITAN_PP_ZBV; break;
    case TITAN_JOB_PP_DUALPIPEV: sh->sched = TITAN_PP_DUALPIPEV; break;
    /* a CSV's order (the trainer loads it); these set the stages a rank */
    case TITAN_JOB_PP_SINGLE: sh->sched = TITAN_PP_1F1B; break;
    case TITAN_JOB_PP_MULTI:
    case TITAN_JOB_PP_RUNTIME: sh->sched = TITAN_PP_LOOPED_BFS; break;
    }
    sh->mb = cfg->parallelism_pipeline_parallel_microbatch_size;
    sh->micro = B / sh->mb; /* titan_config_validate: mb divides B */
    /* The exact stage split now that the layer count is known; with a CSV,
     * the name sets the stages a rank and the file the order. */
    if (cfg->parallelism_pipeline_parallel_schedule_csv[0])
        sh->sched = titan_pp_schedule_multi(sh->sched) ? TITAN_PP_LOOPED_BFS : TITAN_PP_1F1B;
    return titan_pipeline_split(cfg, sh->sched, n_layers, sh->micro, lay);
}

titan_llama_options titan_setup_model_options(const titan_job_config *cfg, const titan_setup_shape *sh,
                                              const titan_layout *lay, int pp_rank) {
    int v, first_less, last_less; /* stages a rank */
    titan_layout_split(lay, &v, &first_less, &last_less);
    /* FSDP holds a unit's full parameters and gradients only while in use */
    return (titan_llama_options){.flags = sh->sharded ? TITAN_LLAMA_RELEASABLE : 0,
                                 .sequence_parallel = cfg->parallelism_enable_sequence_parallel,
                                 .pp_size = lay->pp, .pp_stage = pp_rank,
                                 .pp_v = lay->pp_v, .pp_first_less = lay->pp_first_less,
                                 .pp_last_less = lay->pp_last_less, .pp_vshape = lay->pp_vshape,
                                 .pp_layers = lay->pp_layers,
                                 .slots = titan_pipeline_slots(sh->sched, lay->pp, pp_rank, v, sh->micro),
                                 .split_backward = lay->pp > 1 && titan_pp_schedule_split(sh->sched),
                                 .async_tensor_parallel = cfg->parallelism_enable_async_tensor_parallel,
                                 .cp_ring = cfg->parallelism_cp_ring};
}

titan_status titan_setup_fsdp_options(const titan_job_config *cfg, const titan_setup_shape *sh, const titan_layout *lay,
                                      int n_blocks, int *units, titan_fsdp_options *fo) {
    memset(fo, 0, sizeof *fo);
    TITAN_TRY(titan_fsdp_parse_plan(cfg->parallelism_comm_bucket_plan, n_blocks, sh->sharded, units, fo));
    /* torchtitan's "default": reshard unless pipeline parallel (whose
     * micro-batches would gather every unit again for each). */
    switch (cfg->parallelism_reshard_policy) {
    case TITAN_JOB_RESHARD_DEFAULT: fo->reshard_after_forward = lay->pp == 1; break;
    case TITAN_JOB_RESHARD_ALWAYS: fo->reshard_after_forward = 1; break;
    case TITAN_JOB_RESHARD_NEVER: fo->reshard_after_forward = 0; break;
    }
    fo->param_dtype = sh->compute; /* FSDP gathers what the model computes with */
    fo->reduce_dtype = cfg->training_reduce_dtype == TITAN_JOB_BFLOAT16 ? TITAN_DTYPE_BF16 : TITAN_DTYPE_F32;
    return TITAN_OK;
}
