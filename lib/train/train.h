/* train.h - run directories and the training loop. */
#ifndef TITAN_TRAIN_TRAIN_H
#define TITAN_TRAIN_TRAIN_H

#include "job/config.h"

/* Creates RUN/ with config.toml (the resolved job) and the seed checkpoint
 * RUN/<checkpoint.folder>/step-00000000 (weights initialised as the reference).
 * Refuses an existing non-empty RUN unless force. */
titan_status titan_run_init(const titan_job_config *cfg, const char *run_dir, int force);

/* Reads RUN/config.toml into cfg (defaults first), with its relative paths
 * resolved (titan_run_resolve_paths). */
titan_status titan_run_load_config(titan_job_config *cfg, const char *run_dir);

/* The file paths of a config (run_paths.c: model.tokenizer's file,
 * training.dataset_path, validation.dataset_path,
 * checkpoint.initial_load_path, model.hf_assets_path). absolute: each
 * relative one made absolute against the current directory (titan-init,
 * before it writes RUN/config.toml), after a training.dataset (validation's)
 * that is a directory fills an empty dataset_path and hf_assets_path's
 * tokenizer.json becomes model.tokenizer where that is "byte".
 * resolve: each relative one taken against run_dir when it exists there,
 * else left to the current directory (warned); a tokenizer file found
 * nowhere becomes the copy in the run's latest checkpoint (warned).
 * check: TITAN_ERR_IO for the first path titan-train needs that does not
 * exist, naming source (the config file: RUN/config.toml, or a job file)
 * and the key, or the --key override when cfg's value differs from saved's
 * (the config as loaded). */
titan_status titan_run_absolute_paths(titan_job_config *cfg);
titan_status titan_run_resolve_paths(titan_job_config *cfg, const char *run_dir);
titan_status titan_run_check_paths(const titan_job_config *cfg, const titan_job_config *saved, const char *source);

typedef struct {
    const char *run_dir;
    int sample_tokens;       /* after training, generate this many tokens to stdout */
    const char *prompt;      /* sample prompt ("" = begin-of-text only) */
    double temperature;      /* 0 = greedy */
    int64_t stop_at;         /* stop (with a checkpoint) after this step; 0 = training.steps.
                              * Unlike lowering training.steps, the LR schedule is unchanged. */
    int restart;             /* > 0: the job's restart number after a failure (TITAN_RESTART) */
    const char *restart_cause; /* what failed (TITAN_RESTART_CAUSE), for metrics.jsonl */
    int restart_saved;       /* a restart after the job saved (TITAN_RESTART_SAVED): resume from the
                              * latest, checkpoint.load_step and exclude_from_loading not applied again */
} titan_train_opts;

/* Trains from the latest checkpoint of the run up to training.steps. */
titan_status titan_train(const titan_job_config *cfg, const titan_train_opts *opts);

#endif
