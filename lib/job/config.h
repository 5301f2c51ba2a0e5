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
/* Keys of nested lists (parallelism.module_fqns_per_model_part). */
#define TITAN_LONG_STR 2048

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
    TITAN_JOB_PP_INTERLEAVED_ZB,
    /* torch's base classes, which take their order from
     * pipeline_parallel_schedule_csv: one stage a rank, several */
    TITAN_JOB_PP_SINGLE,
    TITAN_JOB_PP_MULTI,
    TITAN_JOB_PP_RUNTIME,
    /* two stages a rank in a V (tensor/layout.h's pp_vshape) */
    TITAN_JOB_PP_ZBV,
    TITAN_JOB_PP_DUALPIPEV,
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
    char model_hf_assets_path[TITAN_STR]; /* HF asset directory: tokenizer.json, config.json, safetensors */
    /* flavor overrides: 0 (or -1 for ffn_dim_multiplier/tie) keeps the flavor's value */
    int model_dim, model_n_layers, model_n_heads, model_n_kv_heads, model_multiple_of;
    double model_ffn_dim_multiplier;   /* -1 = flavor's, 0 = none */
    double model_norm_eps;             /* 0 = flavor's */
    double model_rope_theta;           /* 0 = flavor's */
    double model_rope_scaling_factor;  /* -1 = flavor's, 0 = no scaling */
    int model_tie_embeddings;          /* -1 = flavor's, 0/1 */

    /* [optimizer] */
    char optimizer_name[TITAN_STR];    /* "AdamW", "Adam", "GaLore" */
    double optimizer_lr, optimizer_beta1, optimizer_beta2, optimizer_eps, optimizer_weight_decay;
    /* GaLore (optimizer.name "GaLore") */
    int optimizer_rank, optimizer_update_proj_gap, optimizer_oversampling, optimizer_power_iters;
    double optimizer_scale;
    char optimizer_proj_type[TITAN_STR], optimizer_galore_svd[TITAN_STR];
    int optimizer_overlap_with_forward; /* side-stream AdamW beside the next forward (titan extension) */
    int optimizer_early_step_in_backward; /* FSDP: each unit's AdamW or GaLore update right after its reduce-scatter */

    /* [lr_scheduler] */
    int lr_scheduler_total_steps;      /* the schedule's length; 0 = training.steps */
    int lr_scheduler_warmup_steps;
    double lr_scheduler_decay_ratio;   /* < 0 = unset: decay over all steps after warmup */
    char lr_scheduler_decay_type[TITAN_STR]; /* linear, sqrt, cosine */
    double lr_scheduler_min_lr_factor;

    /* [training] */
    char training_dataset_path[TITAN_STR]; /* shard directory */
    char training_dataset[TITAN_STR];      /* torchtitan's dataset name, or a shard directory */
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
    int parallelism_enable_async_tensor_parallel; /* with tp and sp: collective matmuls */
    char parallelism_context_parallel_rotate_method[TITAN_STR]; /* allgather, alltoall */
    int parallelism_cp_ring; /* context_parallel_rotate_method: 0 allgather, 1 alltoall */
    int parallelism_context_parallel_degree;
    int parallelism_pipeline_parallel_degree;
    char parallelism_pipeline_parallel_schedule[TITAN_STR]; /* 1F1B, GPipe, Interleaved1F1B, LoopedBFS, InterleavedZeroBubble, ZBVZeroBubble, DualPipeV, ... */
    int parallelism_pipeline_parallel_microbatch_size;      /* sequences per pipeline micro-batch */
    int parallelism_pipeline_parallel_layers_per_stage;     /* -1: 1 stage a rank, 2 for multi-stage schedules */
    int parallelism_pipeline_parallel_first_stage_less_layers; /* the embedding's weight in layers */
    int parallelism_pipeline_parallel_last_stage_less_layers;  /* the output's */
    /* module_fqns_per_model_part: the parts' FQNs, a part's joined by ',',
     * the parts by ';' ("": none, the split above) */
    char parallelism_module_fqns_per_model_part[TITAN_LONG_STR];
    char parallelism_fsdp_reshard_after_forward[TITAN_STR]; /* default, always, never */
    titan_job_pp_schedule parallelism_pp_schedule;      /* pipeline_parallel_schedule */
    char parallelism_pipeline_parallel_schedule_csv[TITAN_STR]; /* "": the schedule's own order */
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
    int checkpoint_last_save_model_only; /* the final step's checkpoint: parameters only */
    char checkpoint_export_dtype[TITAN_STR]; /* float32, bfloat16, float16: that checkpoint's dtype */
    int checkpoint_export_dtype_kind;        /* export_dtype: 0 float32, 1 bfloat16, 2 float16 */
    int checkpoint_last_save_in_hf;      /* the final step also as a Hugging Face directory */
    char checkpoint_exclude_from_loading[TITAN_STR]; /* "a,b": parts a resume does not restore */
    int checkpoint_load_step;            /* resume from this step; -1 = the latest */
    int checkpoint_enable_first_step_checkpoint; /* also save after step 1 */
    int checkpoint_load_only;            /* resume, but save nothing */
    int checkpoint_create_seed_checkpoint; /* true is refused (titan-init writes the seed) */

    /* [validation] */
    int validation_enable;
    char validation_dataset_path[TITAN_STR]; /* held-out shard directory */
    char validation_dataset[TITAN_STR];      /* torchtitan's held-out dataset name, or a shard directory */
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

    /* [memory_estimation] */
    int memory_estimation_enable; /* print the memory estimate at start, the measured peak at the end */
    /* [model] converters (comma-joined list) and [quantize.linear.float8]
     * (or the older [float8]): torchao's float8 training, torchtitan's keys */
    char model_converters[TITAN_STR];           /* "quantize.linear.float8" or its alias "float8" */
    char float8_recipe_name[TITAN_STR];         /* "" (absent: tensorwise), rowwise, rowwise_with_gw_hp */
    char float8_filter_fqns[TITAN_STR];         /* comma-joined; may hold "auto_filter_small_kn" */
    int float8_enable_fsdp_float8_all_gather;
    int float8_precompute_float8_dynamic_scale_for_fsdp;
    int float8_emulate;
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
/* 1 when model.converters names float8 training ("quantize.linear.float8"
 * or "float8"). */
int titan_config_float8(const titan_job_config *cfg);
/* Cross-key checks (e.g. batch sizes divide, degrees multiply to world size 1). */
titan_status titan_config_validate(const titan_job_config *cfg);
/* Writes the resolved config as TOML that titan_config_load_file reads back. */
int titan_config_write(const titan_job_config *cfg, FILE *f);
/* The keys whose values differ, "section.key OLD -> NEW, ..." from a to b,
 * into out (cut with "..." when longer than cap); returns their count. */
int titan_config_diff(const titan_job_config *a, const titan_job_config *b, char *out, size_t cap);

/* ---- torchtitan's job schema (key_status.c) ---- */

/* What titan does with a key of torchtitan's schema. */
typedef enum { TITAN_KEY_UNKNOWN, TITAN_KEY_IMPLEMENTED, TITAN_KEY_MEANINGLESS, TITAN_KEY_REFUSED } titan_key_status;
/* A key's status whatever its value; detail gets "as training.seed" (another
 * spelling) or "false accepted" (a refused key's harmless values). */
titan_key_status titan_config_key_status(const char *section, const char *key, char *detail, size_t cap);
const char *titan_config_key_status_name(titan_key_status s); /* "implemented", "meaningless here", ... */
/* Every key of torchtitan's last TOML schema, then the older ones titan
 * reads: "section.key<TAB>status: why" lines (scripts/man-keys.sh makes
 * titan-train(1)'s table of them). */
void titan_config_print_schema(FILE *f);
/* Every key the job file at path sets, in file order: "section.key = value
 * <TAB>status: why", the status for that value. Returns how many are refused
 * or unknown; -1 when the file cannot be read or parsed (error set). */
int titan_config_print_keys(const char *path, FILE *out);
/* The keys the job file at path leaves out and cfg holds at titan's default
 * where torchtitan's differs (validation's only with validation.enable):
 * "section.key = TITAN (torchtitan: X); ..." into out; returns their count. */
int titan_config_default_differences(const char *path, const titan_job_config *cfg, char *out, size_t cap);
/* Says them (titan_info), in one line naming path. */
void titan_config_note_defaults(const char *path, const titan_job_config *cfg);

/* ---- model.hf_assets_path (hf_assets.c) ---- */

/* The tokenizer spec a job uses: model.tokenizer, or with hf_assets_path set
 * and model.tokenizer left at "byte", "hf:ASSETS/tokenizer.json". */
void titan_config_tokenizer_spec(const titan_job_config *cfg, char *out, size_t cap);
/* Where titan-init's seed weights come from: checkpoint.initial_load_path,
 * or hf_assets_path when that is empty and initial_load_in_hf is set; "" = none. */
const char *titan_config_initial_load_path(const titan_job_config *cfg);

#endif
