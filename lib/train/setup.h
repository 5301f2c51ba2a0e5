/* setup.h - from a job config to the objects a run needs. */
#ifndef TITAN_TRAIN_SETUP_H
#define TITAN_TRAIN_SETUP_H

#include "job/config.h"
#include "model/llama.h"
#include "model/llama_config.h"
#include "parallel/fsdp.h"
#include "parallel/pipeline_schedule.h"

/* The model of a job: the flavor's published dimensions, the [model]
 * overrides, and the vocabulary of its tokenizer. */
titan_status titan_setup_model_config(const titan_job_config *cfg, int vocab_size,
                                      titan_llama_config *out);
/* The same for a check only: opens cfg's tokenizer for its vocabulary
 * size, resolves the model and refuses what titan_setup_model_config
 * refuses (a launcher's check before it starts ranks). */
titan_status titan_setup_check_model(const titan_job_config *cfg);

/* Makes [checkpoint] compression and compression_level the compression of
 * every checkpoint this process writes (titan_ckpt_set_default_compression). */
titan_status titan_setup_ckpt_compression(const titan_job_config *cfg);

/* Gradient-accumulation steps per optimizer step (global / (local * dp)). */
titan_status titan_setup_accum_steps(const titan_job_config *cfg, int dp_size, int *out);

/* The model's activation checkpointing ([activation_checkpoint] mode and
 * selective_ac_option, which the config has checked). */
titan_ac_mode titan_setup_ac_mode(const titan_job_config *cfg);

/* What a rank's model and parallel plan look like, decided from the job
 * and the layout alone: training sets up from it, and the memory dry run
 * (memory_estimate.h) estimates from it, so the two cannot disagree. */
typedef struct {
    int mb;                 /* sequences a micro-batch (pipeline), else the local batch */
    int micro;              /* micro-batches a step (pipeline), else 1 */
    int sharded;            /* FSDP shards over dp_shard x cp */
    titan_pp_schedule sched;
    titan_dtype compute;    /* mixed_precision_param: the activations' and compute weights' type */
    titan_ac_mode ac;
} titan_setup_shape;
/* Fills *sh and, with pipeline parallelism, the exact stage split into
 * *lay (titan_pipeline_split) for a model of n_layers. */
titan_status titan_setup_shape_of(const titan_job_config *cfg, int n_layers, titan_layout *lay, titan_setup_shape *sh);
/* The model's options for pipeline rank pp_rank of lay (tp and cp groups
 * are the caller's to set). */
titan_llama_options titan_setup_model_options(const titan_job_config *cfg, const titan_setup_shape *sh,
                                              const titan_layout *lay, int pp_rank);
/* FSDP's options: parallelism.comm_bucket_plan for a model of n_blocks
 * blocks (fo->unit_of_block may point into units[n_blocks]), the reshard
 * policy, the gather and reduce types. */
titan_status titan_setup_fsdp_options(const titan_job_config *cfg, const titan_setup_shape *sh, const titan_layout *lay,
                                      int n_blocks, int *units, titan_fsdp_options *fo);

#endif
