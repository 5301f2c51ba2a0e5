/* setup.h - from a job config to the objects a run needs. */
#ifndef TITAN_TRAIN_SETUP_H
#define TITAN_TRAIN_SETUP_H

#include "job/config.h"
#include "model/llama.h"
#include "model/llama_config.h"

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

#endif
