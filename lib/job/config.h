/* config.h - the resolved job configuration (torchtitan-style TOML).
 *
 * A job is read from a TOML file, then `--section.key=value` overrides are
 * applied in order. Every key has a type, a default, a check and a doc line in
 * one table (keys.c), which also drives --print-config and error messages. */
#ifndef TITAN_JOB_CONFIG_H
#define TITAN_JOB_CONFIG_H

#include <stdint.h>
#include <stdio.h>

#include "core/error.h"

#define TITAN_STR 256

/* Keys with a fixed list of choices keep the string as written (config.toml,
 * messages) and its value, resolved when the key is set from the key table's
 * entry (lib/job/keys.c), whose choices list the values in this order. */
typedef enum { TITAN_JOB_FLOAT32, TITAN_JOB_BFLOAT16 } titan_job_dtype;
typedef enum {
    TITAN_JOB_DEVICE_CPU,       /* "cpu" */
    TITAN_JOB_DEVICE_CUDA,      /* "cuda": with several ranks, the GPU of the local rank */
    TITAN_JOB_DEVICE_CUDA_N,    /* "cuda:N": GPU N */
    TITAN_JOB_DEVICE_AUTO,      /* "auto": cuda if a GPU opens, else cpu */
    TITAN_JOB_DEVICE_CPU_GUARD, /* "cpu-guard" */
} titan_job_device;
typedef enum {
    TITAN_JOB_PP_1F1B,
    TITAN_JOB_PP_GPIPE,
    TITAN_JOB_PP_INTERLEAVED_1F1B,
    TITAN_JOB_PP_LOOPED_BFS,
} titan_job_pp_schedule;
typedef enum { TITAN_JOB_RESHARD_DEFAULT, TITAN_JOB_RESHARD_ALWAYS, TITAN_JOB_RESHARD_NEVER } titan_job_reshard;
typedef enum { TITAN_JOB_ASYNC_DISABLED, TITAN_JOB_ASYNC, TITAN_JOB_ASYNC_PINNED_MEM } titan_job_async;
typedef enum { TITAN_JOB_AC_NONE, TITAN_JOB_AC_FULL, TITAN_JOB_AC_SELECTIVE } titan_job_ac;
/* comm.backend, in titan_comm_backend's order (comm/comm.h) */
typedef enum { TITAN_JOB_COMM_AUTO, TITAN_JOB_COMM_SHM, TITAN_JOB_COMM_MPI, TITAN_JOB_COMM_NCCL } titan_job_comm;

typedef struct {
    /* [job] */
    char job_description[TITAN_STR];
    char job_dump_folder[TITAN_STR];   /* run directory (titan-init writes it) */

    /* [model] */
    char model_name[TITAN_STR];        /* "llama3" */
    char model_flavor[TITAN_STR];      /* debugmodel, 1B, 3B, 8B, 70B, 405B */
    char model_tokenizer[TITAN_STR];   /* "byte" (this version), later a path */
    /* flavor overrides: 0 (or -1 for ffn_dim_multiplier/tie) keeps the flavor's value */
    int model_dim, model_n_layers, model_n_heads, model_n_kv_heads, model_multiple_of;
    double model_ffn_dim_multiplier;   /* -1 = flavor's, 0 = none */
    double model_norm_eps;             /* 0 = flavor's */
    double model_rope_theta;           /* 0 = flavor's */
    double model_rope_scaling_factor;  /* -1 = flavor's, 0 = no scaling */
    int model_tie_embeddings;          /* -1 = flavor's, 0/1 */

    /* [optimizer] */
    char optimizer_name[TITAN_STR];    /* "AdamW" */
    double optimizer_lr, optimizer_beta1, optimizer_beta2, optimizer_eps, optimizer_weight_decay;
    int optimizer_overlap_with_forward; /* side-stream AdamW beside the next forward (titan extension) */

    /* [lr_scheduler] */
    int lr_scheduler_total_steps;      /* the schedule's length; 0 = training.steps */
    int lr_scheduler_warmup_steps;
    double lr_scheduler_decay_ratio;   /* < 0 = unset: decay over all steps after warmup */
    char lr_scheduler_decay_type[TITAN_STR]; /* linear, sqrt, cosine */
    double lr_scheduler_min_lr_factor;

    /* [training] */
    char training_dataset_path[TITAN_STR]; /* shard directory */
    int training_local_batch_size;
    int training_global_batch_size;    /* -1 = local * dp degree, or a resume's saved one */
    int training_seq_len;
    double training_max_norm;          /* <= 0 disables clipping */
    int training_steps;
    int64_t training_seed;
    int training_deterministic;
    char training_mixed_precision_param[TITAN_STR];  /* float32, bfloat16 */
    char training_mixed_precision_reduce[TITAN_STR]; /* float32 */
    char training_device[TITAN_STR];   /* cpu, cuda, cuda:N, auto, cpu-guard */
    titan_job_dtype training_param_dtype;  /* mixed_precision_param */
    titan_job_dtype training_reduce_dtype; /* mixed_precision_reduce */
    titan_job_device training_device_kind; /* device (cuda:N's N: the string's) */
    int training_threads;              /* per rank; 0 = its share of its affinity set (train/threads.h) */
    int training_shuffle;              /* visit each epoch's samples in a seeded random order */

    /* [parallelism] */
    int parallelism_data_parallel_replicate_degree;
    int parallelism_data_parallel_shard_degree; /* -1 = the rest */
    int parallelism_tensor_parallel_degree;
    int parallelism_enable_sequence_parallel; /* with tp: split the residual stream by rows (titan extension) */
    int parallelism_context_parallel_degree;
    int parallelism_pipeline_parallel_degree;
    char parallelism_pipeline_parallel_schedule[TITAN_STR]; /* 1F1B, GPipe, Interleaved1F1B, LoopedBFS */
    int parallelism_pipeline_parallel_microbatch_size;      /* sequences per pipeline micro-batch */
    int parallelism_pipeline_parallel_layers_per_stage;     /* -1: 1 stage a rank, 2 for multi-stage schedules */
    int parallelism_pipeline_parallel_first_stage_less_layers; /* the embedding's weight in layers */
    int parallelism_pipeline_parallel_last_stage_less_layers;  /* the output's */
    char parallelism_fsdp_reshard_after_forward[TITAN_STR]; /* default, always, never */
    titan_job_pp_schedule parallelism_pp_schedule;      /* pipeline_parallel_schedule */
    titan_job_reshard parallelism_reshard_policy;       /* fsdp_reshard_after_forward */
    char parallelism_comm_bucket_plan[TITAN_STR];           /* auto, blocks, whole, size:MB, or unit ids */

    /* [checkpoint] */
    int checkpoint_enable;
    char checkpoint_folder[TITAN_STR]; /* relative to the run directory */
    int checkpoint_interval;
    int checkpoint_keep_latest_k;      /* 0 = keep all */
    char checkpoint_async_mode[TITAN_STR]; /* disabled, async, async_with_pinned_mem */
    titan_job_async checkpoint_async;      /* async_mode */
    char checkpoint_compression[TITAN_STR]; /* none, zstd */
    int checkpoint_compression_level;  /* zstd level 1..19 */
    char checkpoint_initial_load_path[TITAN_STR]; /* titan-init's seed weights; "" = a fresh init */
    int checkpoint_initial_load_in_hf;   /* initial_load_path is a Hugging Face Llama directory */
    int checkpoint_initial_load_model_only; /* 1: weights only (0 is refused) */

    /* [validation] */
    int validation_enable;
    char validation_dataset_path[TITAN_STR]; /* held-out shard directory */
    int validation_local_batch_size;   /* -1 = training's */
    int validation_seq_len;            /* -1 = training's */
    int validation_freq;               /* every this many steps */
    int validation_steps;              /* batches per rank (torchtitan's); -1 = the whole set once */
    int validation_sequences;          /* held-out sequences per validation, any layout; -1 = by steps */

    /* [metrics] */
    int metrics_log_freq;
    double metrics_peak_flops;         /* FLOP/s for MFU; 0 = measure with a GEMM probe */
    int metrics_enable_tensorboard;    /* also write TensorBoard event files */
    char metrics_save_tb_folder[TITAN_STR]; /* under the run directory */

    /* [profiling] */
    int profiling_enable_profiling;          /* time every op of one step in profile_freq */
    char profiling_save_traces_folder[TITAN_STR]; /* relative to the run directory */
    int profiling_profile_freq;

    /* [comm] */
    double comm_train_timeout_seconds;       /* 0 = TITAN_COMM_TIMEOUT or 300 */
    int comm_trace_buf_size;                 /* flight recorder entries; 0 = off */
    char comm_save_traces_folder[TITAN_STR]; /* relative to the run directory */
    char comm_backend[TITAN_STR];            /* auto, shm, mpi, nccl */
    titan_job_comm comm_backend_kind;        /* backend */

    /* [activation_checkpoint] */
    char activation_checkpoint_mode[TITAN_STR]; /* none, full, selective */
    titan_job_ac activation_checkpoint_kind;    /* mode */
    char activation_checkpoint_selective_ac_option[TITAN_STR]; /* op, or N: every Nth layer */
} titan_job_config;

/* Defaults of every key. */
void titan_config_defaults(titan_job_config *cfg);
/* Reads a TOML file over cfg. Unknown sections/keys and bad values are
 * TITAN_ERR_USAGE naming the key, file:line and the valid choices. */
titan_status titan_config_load_file(titan_job_config *cfg, const char *path);
/* Same, from a string (name is used in messages). */
titan_status titan_config_load_string(titan_job_config *cfg, const char *text, const char *name);
/* Applies one "--section.key=value" (leading dashes optional). */
titan_status titan_config_override(titan_job_config *cfg, const char *arg);
/* Whether the key of a "--section.key[=value]" exists (else the error the
 * override would give); *is_bool: a boolean, which a bare --section.key sets. */
titan_status titan_config_key_check(const char *arg, int *is_bool);
/* Cross-key checks (e.g. batch sizes divide, degrees multiply to world size 1). */
titan_status titan_config_validate(const titan_job_config *cfg);
/* Writes the resolved config as TOML that titan_config_load_file reads back. */
int titan_config_write(const titan_job_config *cfg, FILE *f);
/* The keys whose values differ, "section.key OLD -> NEW, ..." from a to b,
 * into out (cut with "..." when longer than cap); returns their count. */
int titan_config_diff(const titan_job_config *a, const titan_job_config *b, char *out, size_t cap);

#endif
